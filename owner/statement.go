package owner

import (
	"strconv"
	"strings"

	"vitess.io/vitess/go/vt/sqlparser"

	"github.com/directgate/directgate/wire"
)

// stmtKind is what the owner makes of a COM_QUERY.
type stmtKind uint8

const (
	// stmtUnsupported is anything the owner does not answer.
	stmtUnsupported stmtKind = iota
	// stmtNext is SELECT NEXT n VALUES FROM seq (or NEXT VALUE FROM|FOR).
	stmtNext
	// stmtInsert is an INSERT into a message table.
	stmtInsert
	// stmtStream is STREAM * FROM msgs.
	stmtStream
	// stmtAck is UPDATE msgs SET time_acked = ... WHERE id IN (...).
	stmtAck
	// stmtShowTables is SHOW OWNER TABLES.
	stmtShowTables
	// stmtLogCommit is DIRECTGATE TWOPC COMMIT 'gtrid' 'participants':
	// a gateway's commit decision for the coordinator log (twopc.go).
	stmtLogCommit
	// stmtLogForget is DIRECTGATE TWOPC FORGET 'gtrid': the decision is
	// carried out, its record goes.
	stmtLogForget
)

// tableName is a table as a statement names it: Schema is empty when the
// name is unqualified.
type tableName struct {
	Schema, Name string
}

// statement is a parsed COM_QUERY.
type statement struct {
	kind  stmtKind
	table tableName
	// count is n of NEXT n VALUES.
	count int64
	// ids are the message ids an ack names, as the text protocol shows
	// them (integers in canonical decimal form).
	ids []string
	// err is set for a recognized statement that cannot run (NEXT 0
	// VALUES): it is the answer.
	err *wire.SQLError
	// gtrid and parts are the transaction and participants of a log
	// statement.
	gtrid, parts string
	// countParam is set when n of NEXT n VALUES is a placeholder (?):
	// a prepared statement's parameter, which a query must not have
	// (err says so).
	countParam bool
}

// errBadCount is the answer to NEXT n VALUES with n < 1.
func errBadCount() *wire.SQLError {
	return wire.NewError(1210, "HY000", "Incorrect arguments to NEXT VALUES: n must be at least 1")
}

// parseStatement classifies query. The forms the gateway sends most (NEXT
// VALUES, SHOW OWNER TABLES) are read by a small exact scanner; the rest
// by the Vitess parser.
func parseStatement(p *sqlparser.Parser, query string) statement {
	q := strings.TrimSpace(query)
	q = strings.TrimSpace(strings.TrimSuffix(q, ";"))
	if st, ok := scanNext(q); ok {
		return st
	}
	if isShowOwnerTables(q) {
		return statement{kind: stmtShowTables}
	}
	if st, ok := parseLogStatement(q); ok {
		return st
	}
	ast, err := p.Parse(q)
	if err != nil {
		return statement{}
	}
	switch n := ast.(type) {
	case *sqlparser.Select:
		return parsedNext(n)
	case *sqlparser.Stream:
		if _, star := n.SelectExpr.(*sqlparser.StarExpr); star {
			return statement{kind: stmtStream, table: fromAST(n.Table)}
		}
	case *sqlparser.Insert:
		if t, ok := n.Table.Expr.(sqlparser.TableName); ok && n.Action == sqlparser.InsertAct {
			return statement{kind: stmtInsert, table: fromAST(t)}
		}
	case *sqlparser.Update:
		return parsedAck(n)
	}
	return statement{}
}

func fromAST(t sqlparser.TableName) tableName {
	return tableName{Schema: t.Qualifier.String(), Name: t.Name.String()}
}

func isShowOwnerTables(q string) bool {
	f := strings.Fields(q)
	return len(f) == 3 && strings.EqualFold(f[0], "show") && strings.EqualFold(f[1], "owner") && strings.EqualFold(f[2], "tables")
}

// parsedNext recognizes SELECT NEXT n VALUES FROM t in the AST (for the
// spellings scanNext leaves to the parser, such as comments).
func parsedNext(n *sqlparser.Select) statement {
	if n.SelectExprs == nil || len(n.SelectExprs.Exprs) != 1 || n.Where != nil {
		return statement{}
	}
	nv, ok := n.SelectExprs.Exprs[0].(*sqlparser.Nextval)
	if !ok {
		return statement{}
	}
	t, ok := singleTable(n.From)
	if !ok {
		return statement{}
	}
	st := statement{kind: stmtNext, table: t}
	_, st.countParam = nv.Expr.(*sqlparser.Argument)
	lit, ok := nv.Expr.(*sqlparser.Literal)
	if !ok || lit.Type != sqlparser.IntVal {
		st.err = wire.NewError(1210, "HY000", "Incorrect arguments to NEXT VALUES: n must be an integer literal")
		return st
	}
	st.count, st.err = parseCount64(lit.Val)
	return st
}

// parseCount64 reads n of NEXT n VALUES.
func parseCount64(s string) (int64, *wire.SQLError) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && !strings.HasPrefix(s, "-") {
			return 0, wire.NewError(1210, "HY000", "Incorrect arguments to NEXT VALUES: n is too large")
		}
		return 0, errBadCount()
	}
	if v < 1 {
		return 0, errBadCount()
	}
	return v, nil
}

// parsedAck recognizes an ack: UPDATE of one table whose SET names
// time_acked and whose WHERE has, at its top-level AND, id = v or
// id IN (v, ...).
func parsedAck(n *sqlparser.Update) statement {
	if n.Where == nil || n.With != nil {
		return statement{}
	}
	t, ok := singleTable(n.TableExprs)
	if !ok {
		return statement{}
	}
	acks := false
	for _, e := range n.Exprs {
		if e.Name != nil && e.Name.Name.EqualString("time_acked") {
			acks = true
		}
	}
	if !acks {
		return statement{}
	}
	ids, ok := idCondition(n.Where.Expr)
	if !ok {
		return statement{}
	}
	return statement{kind: stmtAck, table: t, ids: ids}
}

// singleTable returns the table of a FROM (or UPDATE) list that names
// exactly one plain table.
func singleTable(exprs []sqlparser.TableExpr) (tableName, bool) {
	if len(exprs) != 1 {
		return tableName{}, false
	}
	ate, ok := exprs[0].(*sqlparser.AliasedTableExpr)
	if !ok {
		return tableName{}, false
	}
	t, ok := ate.Expr.(sqlparser.TableName)
	if !ok {
		return tableName{}, false
	}
	return fromAST(t), true
}

// idCondition finds id = v or id IN (v, ...) among the AND-ed conditions
// of e and returns the ids. Values it cannot put in canonical text form
// (hex literals, expressions) are left out of ids: they only serve to drop
// acked messages from the cache early, which is an optimisation.
func idCondition(e sqlparser.Expr) ([]string, bool) {
	switch n := e.(type) {
	case *sqlparser.AndExpr:
		if ids, ok := idCondition(n.Left); ok {
			return ids, true
		}
		return idCondition(n.Right)
	case *sqlparser.ComparisonExpr:
		col, ok := n.Left.(*sqlparser.ColName)
		if !ok || !col.Name.EqualString("id") {
			return nil, false
		}
		switch n.Operator {
		case sqlparser.EqualOp:
			return appendID(nil, n.Right), true
		case sqlparser.InOp:
			tuple, ok := n.Right.(sqlparser.ValTuple)
			if !ok {
				return nil, false
			}
			ids := make([]string, 0, len(tuple))
			for _, v := range tuple {
				ids = appendID(ids, v)
			}
			return ids, true
		}
	}
	return nil, false
}

// appendID appends the text form of a literal id.
func appendID(ids []string, e sqlparser.Expr) []string {
	lit, ok := e.(*sqlparser.Literal)
	if !ok {
		return ids
	}
	switch lit.Type {
	case sqlparser.IntVal:
		if v, err := strconv.ParseInt(lit.Val, 10, 64); err == nil {
			return append(ids, strconv.FormatInt(v, 10))
		}
		if v, err := strconv.ParseUint(lit.Val, 10, 64); err == nil {
			return append(ids, strconv.FormatUint(v, 10))
		}
	case sqlparser.StrVal:
		return append(ids, lit.Val)
	}
	return ids
}

// scanNext reads SELECT NEXT n VALUES FROM t and SELECT NEXT VALUE
// FROM|FOR t, where t is an identifier or db.identifier, either part
// bare or backquoted, in any letter case. It reports false for anything
// else (comments, other spacing of the dot), which then goes to the
// parser. A negative or zero n is recognized, so it gets error 1210
// rather than a syntax error.
func scanNext(q string) (statement, bool) {
	s := scanner{s: q}
	if !s.keyword("select") || !s.keyword("next") {
		return statement{}, false
	}
	st := statement{kind: stmtNext, count: 1}
	if s.keyword("value") {
		if !s.keyword("from") && !s.keyword("for") {
			return statement{}, false
		}
	} else {
		num, ok := s.number()
		if !ok || !s.keyword("values") || !s.keyword("from") {
			return statement{}, false
		}
		st.count, st.err = parseCount64(num)
	}
	first, ok := s.ident()
	if !ok {
		return statement{}, false
	}
	st.table.Name = first
	if s.peek() == '.' {
		s.i++
		second, ok := s.ident()
		if !ok {
			return statement{}, false
		}
		st.table = tableName{Schema: first, Name: second}
	}
	s.space()
	if s.i != len(s.s) {
		return statement{}, false
	}
	return st, true
}

// scanner is a minimal lexer for scanNext.
type scanner struct {
	s string
	i int
}

func (s *scanner) space() {
	for s.i < len(s.s) && (s.s[s.i] == ' ' || s.s[s.i] == '\t' || s.s[s.i] == '\n' || s.s[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.s) {
		return s.s[s.i]
	}
	return 0
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// keyword consumes kw (case-insensitively) followed by a non-identifier
// byte, after optional spaces.
func (s *scanner) keyword(kw string) bool {
	s.space()
	end := s.i + len(kw)
	if end > len(s.s) || !strings.EqualFold(s.s[s.i:end], kw) || end < len(s.s) && isIdentByte(s.s[end]) {
		return false
	}
	s.i = end
	return true
}

// number consumes an optionally signed decimal integer.
func (s *scanner) number() (string, bool) {
	s.space()
	start := s.i
	if c := s.peek(); c == '-' || c == '+' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.s) && s.s[s.i] >= '0' && s.s[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || s.i < len(s.s) && isIdentByte(s.s[s.i]) {
		return "", false
	}
	return strings.TrimPrefix(s.s[start:s.i], "+"), true
}

// ident consumes a bare or backquoted identifier (spaces allowed before
// it only when it comes first, not after a dot).
func (s *scanner) ident() (string, bool) {
	if s.i == 0 || s.s[s.i-1] != '.' {
		s.space()
	}
	if s.peek() == '`' {
		var b strings.Builder
		for j := s.i + 1; j < len(s.s); j++ {
			if s.s[j] != '`' {
				b.WriteByte(s.s[j])
				continue
			}
			if j+1 < len(s.s) && s.s[j+1] == '`' {
				b.WriteByte('`')
				j++
				continue
			}
			s.i = j + 1
			return b.String(), b.Len() > 0
		}
		return "", false
	}
	start := s.i
	for s.i < len(s.s) && isIdentByte(s.s[s.i]) {
		s.i++
	}
	if s.i == start {
		return "", false
	}
	name := s.s[start:s.i]
	if name[0] >= '0' && name[0] <= '9' {
		return "", false // a number, or an odd name the parser may know
	}
	return name, true
}
