package querypath

import (
	"fmt"
	"strconv"
	"strings"

	"vitess.io/vitess/go/vt/sqlparser"
)

// parserVersion is the server version given to the Vitess parser. It accepts
// MariaDB's version string; the version only matters for executable comments,
// which the classifier expands itself before the parser sees the text.
const parserVersion = "10.11.0-MariaDB"

// maxDepth bounds the nesting of statements classified inside statements
// (PREPARE ... FROM 'sql', EXECUTE IMMEDIATE 'sql', SET STATEMENT ... FOR sql).
const maxDepth = 3

// maxLen is the longest text classified; token offsets are int32.
const maxLen = 1<<31 - 1<<20

// Classifier classifies SQL statements. It is safe for concurrent use; build
// one with New and share it.
type Classifier struct {
	parser *sqlparser.Parser
}

// New returns a Classifier whose parser reads MariaDB 10.11 syntax as far as
// the Vitess parser does.
func New() (*Classifier, error) {
	p, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: parserVersion})
	if err != nil {
		return nil, fmt.Errorf("querypath: building the SQL parser: %w", err)
	}
	return &Classifier{parser: p}, nil
}

// Classify tells what the statement (or multi-statement batch) sql is. It
// never fails: text it cannot understand is KindOther, pinned when it looks
// stateful. The common statements are classified without allocating.
func (c *Classifier) Classify(sql string) Route {
	r := c.classify(sql, 0)
	r.Unpin &^= r.Pin // a reason the statement adds is not ended by it
	return r
}

// classify classifies raw, which may hold executable comments; depth counts
// the statements it is nested in.
func (c *Classifier) classify(raw string, depth int) Route {
	if len(raw) > maxLen {
		return Route{Pin: PinUnreplayable} // cannot arrive in one MySQL packet
	}
	sql := raw
	if hasExecComment(raw) {
		sql = expandComments(raw, false)
	}
	var st stmt
	scanStmt(&st, sql, 0, false)
	if st.unterminated && !st.more {
		// Maybe the session runs with NO_BACKSLASH_ESCAPES: read it that way
		// too and keep the findings of both readings.
		return c.classifyNoBackslash(raw, &st, depth)
	}
	if st.more {
		return c.classifyBatch(sql, depth, false)
	}
	return c.route(&st, depth)
}

// classifyNoBackslash classifies a text whose string literal (read with
// backslash escapes) runs to its end. st is that first reading.
func (c *Classifier) classifyNoBackslash(raw string, st *stmt, depth int) Route {
	sql := raw
	if hasExecComment(raw) {
		sql = expandComments(raw, true)
	}
	var alt stmt
	scanStmt(&alt, sql, 0, true)
	var r Route
	if alt.more {
		r = c.classifyBatch(sql, depth, true)
	} else {
		r = c.route(&alt, depth)
	}
	r.Pin |= st.f.pin
	r.Unpin &^= r.Pin
	r.ReadsLastResult = r.ReadsLastResult || st.f.readsLast
	r.GatewayIDs = r.GatewayIDs || st.f.gatewayIDs
	if r.Kind == KindRead && (st.f.sideEffect || st.f.lockClause || st.f.into) {
		r.Kind = KindOther
	}
	return r
}

// classifyBatch classifies a text holding several statements.
func (c *Classifier) classifyBatch(sql string, depth int, noBackslash bool) Route {
	var r Route
	r.MultiStatement = true
	allRead, allSet := true, true
	pos := 0
	for {
		var st stmt
		scanStmt(&st, sql, pos, noBackslash)
		if st.count > 0 {
			r.Statements++
			p := c.route(&st, depth)
			r.Pin |= p.Pin
			r.Unpin |= p.Unpin
			r.ReadsLastResult = r.ReadsLastResult || p.ReadsLastResult
			r.OtherKill = r.OtherKill || p.OtherKill || p.Kind == KindKill
			r.GatewayIDs = r.GatewayIDs || p.GatewayIDs
			r.SetsGlobal = r.SetsGlobal || p.SetsGlobal
			if r.DynamicVar == "" {
				r.DynamicVar = p.DynamicVar
			}
			r.ImplicitCommit = r.ImplicitCommit || p.ImplicitCommit
			r.NextTxn = r.NextTxn || p.NextTxn
			r.SetStatement = r.SetStatement || p.SetStatement
			r.Vars = append(r.Vars, p.Vars...)
			r.CreatedTemp = append(r.CreatedTemp, p.CreatedTemp...)
			r.Dropped = append(r.Dropped, p.Dropped...)
			r.Renames = append(r.Renames, p.Renames...)
			if p.Kind == KindUse {
				r.Database = p.Database
			}
			allRead = allRead && p.Kind == KindRead
			allSet = allSet && p.Kind == KindSet
		}
		if !st.more {
			break
		}
		pos = st.next
	}
	switch {
	case allRead:
		r.Kind = KindRead
	case allSet:
		r.Kind = KindSet
	}
	r.Unpin &^= r.Pin
	return r
}

// route classifies one statement: the fast path when it is sure, else the
// parser, else the lexer's findings alone.
func (c *Classifier) route(st *stmt, depth int) Route {
	r, ok := c.fast(st, depth)
	if !ok {
		r, ok = c.parsed(st, depth)
	}
	if !ok {
		r = c.unparsed(st, depth)
	}
	// KILL ... CONNECTION_ID() is the gateway's own (KillSelf).
	r.GatewayIDs = st.f.gatewayIDs && r.Kind != KindKill
	return r
}

// text returns the statement's text without a trailing ';'.
func (st *stmt) text() string { return st.s[st.start:st.end] }

// base returns a route carrying the lexer's findings.
func (st *stmt) base() Route {
	return Route{
		Pin:             st.f.pin,
		Unpin:           st.f.unpin &^ st.f.pin,
		ReadsLastResult: st.f.readsLast,
		ImplicitCommit:  implicitCommit(st),
	}
}

// fast classifies the statements the lexer alone decides. ok is false when
// the parser must decide.
func (c *Classifier) fast(st *stmt, depth int) (r Route, ok bool) {
	if st.n == 0 {
		return Route{}, true
	}
	if st.compound {
		return compoundRoute(st), true
	}
	w := st.word(0)
	switch len(w) {
	case 2:
		if kwEq(w, "DO") {
			return st.base(), true
		}
		if kwEq(w, "XA") {
			r = st.base()
			r.Pin |= PinUnreplayable | PinXA
			return r, true
		}
	case 3:
		switch {
		case kwEq(w, "SET"):
			return c.setRoute(st, depth), true
		case kwEq(w, "USE"):
			return useRoute(st), true
		case kwEq(w, "GET"):
			if st.kw(1, "DIAGNOSTICS") || (st.kw(1, "CURRENT") || st.kw(1, "STACKED")) && st.kw(2, "DIAGNOSTICS") {
				r = st.base()
				r.Kind = KindShowWarnings
				return r, true
			}
		}
	case 4:
		switch {
		case kwEq(w, "SHOW"):
			return showRoute(st), true
		case kwEq(w, "KILL"):
			return killRoute(st), true
		case kwEq(w, "CALL"), kwEq(w, "LOAD"):
			r = st.base()
			r.Pin |= PinLastResult
			return r, true
		case kwEq(w, "DESC"):
			return explainRoute(st), true
		}
	case 5:
		switch {
		case kwEq(w, "BEGIN"):
			return txnRoute(st, KindBegin), true
		case kwEq(w, "START"):
			r = st.base()
			if st.kw(1, "TRANSACTION") {
				r.Kind = KindBegin
			}
			return r, true
		}
	case 6:
		switch {
		case kwEq(w, "SELECT"):
			return selectRoute(st)
		case kwEq(w, "INSERT"):
			r = st.base()
			r.Pin |= PinLastResult
			r.Table = insertTable(st)
			r.DML = DMLInsert
			return r, true
		case kwEq(w, "UPDATE"):
			r = st.base()
			r.Pin |= PinLastResult
			r.Table = updateTable(st)
			r.DML = DMLUpdate
			return r, true
		case kwEq(w, "DELETE"):
			r = st.base()
			r.Pin |= PinLastResult
			r.DML = DMLDelete
			return r, true
		case kwEq(w, "COMMIT"):
			return txnRoute(st, KindCommit), true
		}
	case 7:
		switch {
		case kwEq(w, "REPLACE"):
			r = st.base()
			r.Pin |= PinLastResult
			r.Table = insertTable(st)
			r.DML = DMLReplace
			return r, true
		case kwEq(w, "EXPLAIN"):
			return explainRoute(st), true
		case kwEq(w, "HANDLER"), kwEq(w, "RELEASE"):
			r = st.base()
			if kwEq(w, "HANDLER") {
				r.Pin |= PinUnreplayable
			}
			return r, true
		}
	case 8:
		switch {
		case kwEq(w, "ROLLBACK"):
			return txnRoute(st, KindRollback), true
		case kwEq(w, "DESCRIBE"):
			return explainRoute(st), true
		}
	case 9:
		if kwEq(w, "SAVEPOINT") {
			return st.base(), true
		}
	}
	return Route{}, false
}

// compoundRoute classifies a compound statement or a stored program
// definition.
func compoundRoute(st *stmt) Route {
	r := st.base()
	r.Unpin = 0 // the body runs later, or in ways the lexer cannot follow
	if !st.kw(0, "CREATE") {
		// BEGIN NOT ATOMIC ... END and friends run arbitrary statements.
		r.Pin |= PinUnreplayable
	}
	return r
}

// selectRoute classifies a SELECT with the lexer, unless it has INTO or
// sequence syntax other than the plain Vitess/MariaDB forms.
func selectRoute(st *stmt) (Route, bool) {
	if st.f.nextSyntax || st.kw(1, "NEXT") {
		if r, ok := sequenceRoute(st); ok {
			return r, true
		}
		return Route{}, false
	}
	if st.f.into {
		return Route{}, false
	}
	if r, ok := connectionIDRoute(st); ok {
		return r, true
	}
	r := st.base()
	r.Kind = readKind(&st.f)
	return r, true
}

// connectionIDRoute recognizes SELECT CONNECTION_ID() [[AS] alias], which
// the gateway answers with its own id: Kind KindGatewayShow, Table
// "connection_id", Column the result's column name.
func connectionIDRoute(st *stmt) (Route, bool) {
	if !st.kw(1, "CONNECTION_ID") || !st.punct(2, '(') || !st.punct(3, ')') || st.count > 6 || st.n < st.count {
		return Route{}, false
	}
	r := st.base()
	r.Kind = KindGatewayShow
	r.Table = "connection_id"
	r.Column = st.s[st.head[1].start:st.head[3].end]
	i := 4
	if st.kw(i, "AS") {
		i++
	}
	switch {
	case i == st.count && i == 4:
	case i+1 == st.count && (st.head[i].kind == tkIdent || st.head[i].kind == tkQuoted || st.head[i].kind == tkString) && !st.kw(i, "FROM"):
		t := st.head[i]
		r.Column = unquoteAlias(st.s[t.start:t.end])
	default:
		return Route{}, false
	}
	return r, true
}

// unquoteAlias is an alias without its quotes; a doubled quote inside
// stands for one.
func unquoteAlias(s string) string {
	if len(s) >= 2 && (s[0] == '`' || s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		q := s[:1]
		return strings.ReplaceAll(s[1:len(s)-1], q+q, q)
	}
	return s
}

// readKind is the kind of a SELECT with the given features.
func readKind(f *features) Kind {
	switch {
	case f.showWarnings:
		return KindShowWarnings
	case f.lockClause, f.sideEffect, f.into, f.intoFile:
		return KindOther
	}
	return KindRead
}

// sequenceRoute recognizes SELECT NEXT n VALUES FROM t, SELECT NEXT VALUE
// FROM t and SELECT NEXT VALUE FOR s exactly.
func sequenceRoute(st *stmt) (Route, bool) {
	if !st.kw(1, "NEXT") {
		return Route{}, false
	}
	var r Route
	r.Kind = KindSequence
	i := 2
	switch {
	case st.kw(i, "VALUE"):
		r.Count = 1
		i++
		switch {
		case st.kw(i, "FROM"):
		case st.kw(i, "FOR"):
			r.NativeSyntax = true
		default:
			return Route{}, false
		}
		i++
	default:
		neg := false
		if st.punct(i, '-') || st.punct(i, '+') {
			neg = st.punct(i, '-')
			i++
		}
		switch {
		case i < st.n && st.head[i].kind == tkNumber:
			t := st.head[i]
			n, err := strconv.ParseInt(st.s[t.start:t.end], 10, 64)
			if err != nil {
				return Route{}, false
			}
			if neg {
				n = -n
			}
			r.Count = n
		case i < st.n && st.head[i].kind == tkParam && !neg:
		default:
			return Route{}, false
		}
		i++
		if !st.kw(i, "VALUES") || !st.kw(i+1, "FROM") {
			return Route{}, false
		}
		i += 2
	}
	name, next, ok := st.tableName(i)
	if !ok || next != st.count || st.count > st.n {
		return Route{}, false
	}
	r.Table = name
	if r.NativeSyntax {
		r.Pin = PinLastResult // LASTVAL() and PREVIOUS VALUE FOR read it
	}
	return r, true
}

// tableName reads a possibly qualified name from head token i on. It returns
// the unquoted name, the index of the token after it, and whether there was a
// name.
func (st *stmt) tableName(i int) (string, int, bool) {
	if i >= st.n {
		return "", i, false
	}
	a := st.head[i]
	if a.kind != tkIdent && a.kind != tkQuoted {
		return "", i, false
	}
	if !st.punct(i+1, '.') || i+2 >= st.n || st.head[i+2].kind != tkIdent && st.head[i+2].kind != tkQuoted {
		return unquoteIdent(st.s[a.start:a.end]), i + 1, true
	}
	b := st.head[i+2]
	if a.kind == tkIdent && b.kind == tkIdent && st.head[i+1].start == a.end && b.start == a.end+1 {
		return st.s[a.start:b.end], i + 3, true
	}
	return unquoteIdent(st.s[a.start:a.end]) + "." + unquoteIdent(st.s[b.start:b.end]), i + 3, true
}

// unquoteIdent removes the backquotes of a `quoted` identifier.
func unquoteIdent(s string) string {
	if len(s) < 2 || s[0] != '`' || s[len(s)-1] != '`' {
		return s
	}
	s = s[1 : len(s)-1]
	if strings.Contains(s, "``") {
		s = strings.ReplaceAll(s, "``", "`")
	}
	return s
}

// insertTable returns the target table of an INSERT or REPLACE, or "".
func insertTable(st *stmt) string {
	i := 1
	for ; i < st.n; i++ {
		w := st.word(i)
		if !kwEq(w, "LOW_PRIORITY") && !kwEq(w, "DELAYED") && !kwEq(w, "HIGH_PRIORITY") && !kwEq(w, "IGNORE") {
			break
		}
	}
	if st.kw(i, "INTO") {
		i++
	}
	name, _, ok := st.tableName(i)
	if !ok {
		return ""
	}
	return name
}

// updateTable returns the table of a single-table UPDATE, or "" (several
// tables, a join, or a name the lexer cannot read).
func updateTable(st *stmt) string {
	i := 1
	for ; i < st.n; i++ {
		w := st.word(i)
		if !kwEq(w, "LOW_PRIORITY") && !kwEq(w, "IGNORE") {
			break
		}
	}
	name, next, ok := st.tableName(i)
	if !ok || !st.kw(next, "SET") {
		return ""
	}
	return name
}

// txnRoute classifies BEGIN, COMMIT and ROLLBACK with their options.
func txnRoute(st *stmt, kind Kind) Route {
	r := st.base()
	i := 1
	if st.kw(i, "WORK") {
		i++
	}
	if kind == KindBegin {
		if i == st.count {
			r.Kind = KindBegin
		}
		return r
	}
	if kind == KindRollback && st.kw(i, "TO") {
		return r // ROLLBACK TO SAVEPOINT
	}
	if st.kw(i, "AND") {
		i++
		no := st.kw(i, "NO")
		if no {
			i++
		}
		if !st.kw(i, "CHAIN") {
			return r
		}
		i++
		r.Chain = !no
	}
	no := st.kw(i, "NO")
	if no {
		i++
	}
	if st.kw(i, "RELEASE") {
		i++
		r.Release = !no
	} else if no {
		return st.base()
	}
	if i != st.count {
		return st.base()
	}
	r.Kind = kind
	return r
}

// useRoute classifies USE db.
func useRoute(st *stmt) Route {
	if st.n < 2 {
		return Route{}
	}
	var r Route
	r.Kind = KindUse
	db := st.s[st.head[1].start:st.lastEnd]
	if st.count == 2 && st.head[1].kind == tkQuoted {
		db = unquoteIdent(db)
	}
	if db == "" {
		return Route{}
	}
	r.Database = db
	return r
}

// killRoute classifies KILL [HARD|SOFT] [CONNECTION|QUERY] id.
func killRoute(st *stmt) Route {
	r := st.base()
	i := 1
	if st.kw(i, "HARD") || st.kw(i, "SOFT") {
		i++
	}
	query := false
	switch {
	case st.kw(i, "CONNECTION"):
		i++
	case st.kw(i, "QUERY"):
		query = true
		i++
	}
	if i+3 == st.count && st.kw(i, "CONNECTION_ID") && st.punct(i+1, '(') && st.punct(i+2, ')') {
		r.Kind = KindKill
		r.KillSelf = true
		r.KillQuery = query
		return r
	}
	if i+1 != st.count || st.head[i].kind != tkNumber {
		r.OtherKill = true // KILL QUERY ID n, KILL USER u, KILL <expression>
		return r
	}
	t := st.head[i]
	id, err := strconv.ParseUint(st.s[t.start:t.end], 10, 64)
	if err != nil {
		return r
	}
	r.Kind = KindKill
	r.KillID = id
	r.KillQuery = query
	return r
}

// showRoute classifies SHOW statements.
func showRoute(st *stmt) Route {
	r := st.base()
	i := 1
	switch {
	case st.kw(i, "WARNINGS"), st.kw(i, "ERRORS"):
		r.Kind = KindShowWarnings
		return r
	case st.kw(i, "GATEWAY"):
		r.Kind = KindGatewayShow
		r.Table = strings.ToLower(st.word(i + 1))
		return r
	case st.kw(i, "PROCESSLIST") && st.count == 2, st.kw(i, "FULL") && st.kw(i+1, "PROCESSLIST") && st.count == 3:
		// The gateway's sessions, not the backend's connections.
		r.Kind = KindGatewayShow
		r.Table = "processlist"
		if st.count == 3 {
			r.Table = "full processlist"
		}
		return r
	case st.kw(i, "COUNT"):
		if st.punct(i+1, '(') && st.punct(i+2, '*') && st.punct(i+3, ')') &&
			(st.kw(i+4, "WARNINGS") || st.kw(i+4, "ERRORS")) {
			r.Kind = KindShowWarnings
		}
		return r
	}
	global := false
	for st.kw(i, "FULL") || st.kw(i, "GLOBAL") || st.kw(i, "SESSION") || st.kw(i, "LOCAL") ||
		st.kw(i, "EXTENDED") {
		global = global || st.kw(i, "GLOBAL")
		i++
	}
	w := st.word(i)
	if kwEq(w, "STATUS") && !global {
		r.SessionStatus = true
	}
	switch {
	case w == "":
		return r
	case kwEq(w, "PROCESSLIST"), kwEq(w, "STATUS"), kwEq(w, "MASTER"), kwEq(w, "SLAVE"),
		kwEq(w, "SLAVES"), kwEq(w, "REPLICA"), kwEq(w, "REPLICAS"), kwEq(w, "ALL"),
		kwEq(w, "BINLOG"), kwEq(w, "BINARY"), kwEq(w, "RELAYLOG"), kwEq(w, "PROFILE"),
		kwEq(w, "PROFILES"), kwEq(w, "ENGINE"), kwEq(w, "OPEN"), kwEq(w, "EXPLAIN"),
		kwEq(w, "ANALYZE"), kwEq(w, "INNODB"), kwEq(w, "QUERY_RESPONSE_TIME"),
		kwEq(w, "USER_STATISTICS"), kwEq(w, "CLIENT_STATISTICS"), kwEq(w, "INDEX_STATISTICS"),
		kwEq(w, "TABLE_STATISTICS"), kwEq(w, "WSREP_MEMBERSHIP"), kwEq(w, "WSREP_STATUS"):
		// Per-connection or per-server state: ask the primary.
		return r
	}
	r.Kind = KindRead
	return r
}

// explainRoute classifies DESCRIBE, DESC and EXPLAIN. Nothing they name runs,
// so they end no pin.
func explainRoute(st *stmt) Route {
	r := st.base()
	r.Unpin = 0
	i := 1
	for {
		switch {
		case st.kw(i, "EXTENDED"), st.kw(i, "PARTITIONS"):
			i++
			continue
		case st.kw(i, "FORMAT") && st.punct(i+1, '='):
			i += 3
			continue
		}
		break
	}
	if i >= st.n {
		return r
	}
	w := st.word(i)
	switch {
	case kwEq(w, "SELECT"), kwEq(w, "WITH"), kwEq(w, "TABLE"), kwEq(w, "VALUES"), st.punct(i, '('):
		r.Kind = KindRead
	case kwEq(w, "INSERT"), kwEq(w, "UPDATE"), kwEq(w, "DELETE"), kwEq(w, "REPLACE"),
		kwEq(w, "FOR"), kwEq(w, "ANALYZE"):
		// EXPLAIN of a write, EXPLAIN FOR CONNECTION n, EXPLAIN ANALYZE.
	case st.head[i].kind == tkIdent || st.head[i].kind == tkQuoted:
		r.Kind = KindRead // DESCRIBE t [column]
	}
	return r
}

// implicitCommit reports whether MariaDB commits an open transaction before
// running st.
func implicitCommit(st *stmt) bool {
	w := st.word(0)
	switch len(w) {
	case 4:
		switch {
		case kwEq(w, "DROP"):
			return !st.kw(1, "TEMPORARY") && !st.kw(1, "PREPARE")
		case kwEq(w, "LOCK"), kwEq(w, "STOP"):
			return true
		case kwEq(w, "LOAD"):
			return st.kw(1, "INDEX")
		}
	case 5:
		switch {
		case kwEq(w, "ALTER"), kwEq(w, "GRANT"), kwEq(w, "FLUSH"), kwEq(w, "RESET"),
			kwEq(w, "CACHE"):
			return true
		case kwEq(w, "BEGIN"):
			return st.count == 1 || st.count == 2 && st.kw(1, "WORK")
		case kwEq(w, "START"):
			return st.kw(1, "TRANSACTION") || st.kw(1, "SLAVE") || st.kw(1, "REPLICA") || st.kw(1, "ALL")
		case kwEq(w, "CHECK"):
			return st.kw(1, "TABLE")
		}
	case 6:
		switch {
		case kwEq(w, "CREATE"):
			i := 1
			if st.kw(1, "OR") && st.kw(2, "REPLACE") {
				i = 3
			}
			return !st.kw(i, "TEMPORARY")
		case kwEq(w, "RENAME"), kwEq(w, "REVOKE"), kwEq(w, "REPAIR"), kwEq(w, "UNLOCK"),
			kwEq(w, "CHANGE"):
			return true
		}
	case 7:
		switch {
		case kwEq(w, "INSTALL"):
			return true
		case kwEq(w, "ANALYZE"):
			return st.kw(1, "TABLE")
		}
	case 8:
		switch {
		case kwEq(w, "TRUNCATE"), kwEq(w, "OPTIMIZE"):
			return true
		}
	case 9:
		return kwEq(w, "UNINSTALL")
	}
	return false
}

// unparsed classifies a statement neither the fast path nor the parser could
// read: KindOther with the lexer's findings, and PinUnreplayable when the
// leading keywords suggest session state.
func (c *Classifier) unparsed(st *stmt, depth int) Route {
	r := st.base()
	w := st.word(0)
	switch {
	case kwEq(w, "BACKUP"):
		// BACKUP STAGE and BACKUP LOCK hold locks of the session's
		// connection until BACKUP STAGE END / BACKUP UNLOCK (found by
		// mysql-test's main.backup_log through the gateway: the stage
		// stayed on a pooled connection).
		r.Pin |= PinUnreplayable
	case kwEq(w, "LOCK"):
		if st.kw(1, "TABLE") || st.kw(1, "TABLES") {
			r.Pin |= PinLockTables
		} else {
			r.Pin |= PinUnreplayable
		}
	case kwEq(w, "FLUSH"):
		// The parser reads FLUSH TABLES ... WITH READ LOCK but not
		// MariaDB's FLUSH TABLE (singular) nor ... AND DISABLE
		// CHECKPOINT: a FLUSH it cannot read that may take locks pins
		// as LOCK TABLES does, until UNLOCK TABLES (found by
		// mysql-test's main.flush through the gateway: FLUSH TABLE t1
		// WITH READ LOCK stayed on a pooled connection).
		if u := strings.ToUpper(st.text()); strings.Contains(u, "LOCK") || strings.Contains(u, "EXPORT") {
			r.Pin |= PinLockTables
		}
	case kwEq(w, "UNLOCK"):
		if st.kw(1, "TABLE") || st.kw(1, "TABLES") {
			r.Unpin |= PinLockTables
		} else {
			r.Pin |= PinUnreplayable
		}
	case kwEq(w, "CREATE"):
		i := 1
		if st.kw(1, "OR") && st.kw(2, "REPLACE") {
			i = 3
		}
		if st.kw(i, "TEMPORARY") {
			r.Pin |= PinTempTable // and PinUnreplayable below unless the name is read
		}
	case kwEq(w, "DROP"):
		switch {
		case st.kw(1, "TEMPORARY"), st.kw(1, "TABLE"), st.kw(1, "TABLES"), st.kw(1, "SEQUENCE"):
			r.Unpin |= PinTempTable
		case st.kw(1, "PREPARE"):
			r.Unpin |= PinPrepare
			r.PrepareName = st.word(2)
		}
	case kwEq(w, "EXECUTE"):
		if st.kw(1, "IMMEDIATE") {
			return c.dynamicSQL(st, 2, depth, true)
		}
		// EXECUTE name runs a statement PREPAREd on this connection, which
		// pinned the session already with the prepared statement's own
		// reasons (or PinUnreplayable when its text was not a literal).
	case kwEq(w, "PREPARE"):
		r.Pin |= PinPrepare | PinUnreplayable
	case kwEq(w, "XA"):
		r.Pin |= PinUnreplayable | PinXA
	case kwEq(w, "DEALLOCATE"), kwEq(w, "SET"), kwEq(w, "HANDLER"),
		kwEq(w, "BEGIN"), kwEq(w, "RESET"), kwEq(w, "BINLOG"):
		r.Pin |= PinUnreplayable
	case kwEq(w, "ALTER"):
		if st.kw(1, "TEMPORARY") {
			r.Pin |= PinUnreplayable
		}
	}
	if !lexTempTables(st, &r) {
		r.Pin |= PinUnreplayable
	}
	r.Unpin &^= r.Pin
	return r
}

// dynamicSQL classifies PREPARE name FROM <i> (run false) and EXECUTE
// IMMEDIATE <i> (run true). When head token i is a string literal standing
// alone, the SQL inside is classified: EXECUTE IMMEDIATE is then classified as
// that statement, and PREPARE gets its pins (its effects come later, when it
// is executed; state the gateway would replay or follow, such as a SET of a
// session variable or a temporary table created or a table renamed, pins it
// with PinUnreplayable, since the EXECUTE will not say). Otherwise the SQL
// could be anything and the statement is pinned with PinUnreplayable.
func (c *Classifier) dynamicSQL(st *stmt, i, depth int, run bool) Route {
	r := st.base()
	if !run {
		r.Pin |= PinPrepare
		r.PrepareName = st.word(1)
	}
	if i >= st.n || st.head[i].kind != tkString || i+1 != st.count || depth >= maxDepth {
		r.Pin |= PinUnreplayable
		if i < st.n && i+1 == st.count && st.head[i].kind == tkUserVar {
			t := st.head[i]
			r.DynamicVar = unquoteUserVar(st.s[t.start+1 : t.end])
		}
		return r
	}
	t := st.head[i]
	sql, ok := unquoteString(st.s[t.start:t.end], st.noBackslash)
	if !ok {
		r.Pin |= PinUnreplayable
		return r
	}
	in := c.classify(sql, depth+1)
	if run {
		in.Pin |= r.Pin
		in.Unpin &^= in.Pin
		return in
	}
	r.Pin |= in.Pin
	r.ReadsLastResult = r.ReadsLastResult || in.ReadsLastResult
	r.OtherKill = in.OtherKill || in.Kind == KindKill
	if in.Kind == KindSet && (len(in.Vars) > 0 || in.NextTxn) || in.MultiStatement ||
		in.Kind == KindBegin || in.Kind == KindUse ||
		len(in.CreatedTemp) > 0 || len(in.Renames) > 0 {
		r.Pin |= PinUnreplayable
	}
	return r
}

// unquoteUserVar returns the name of a user variable written after its @:
// name, `name`, 'name' or "name".
func unquoteUserVar(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') {
		if v, ok := unquoteString(s, false); ok {
			return v
		}
	}
	return unquoteIdent(s)
}

// unquoteString returns the content of a quoted string literal.
func unquoteString(s string, noBackslash bool) (string, bool) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return "", false
	}
	q := s[0]
	s = s[1 : len(s)-1]
	if !strings.ContainsRune(s, rune(q)) && (noBackslash || !strings.Contains(s, `\`)) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == q && i+1 < len(s) && s[i+1] == q:
			i++
		case ch == '\\' && !noBackslash && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				ch = '\n'
			case 't':
				ch = '\t'
			case 'r':
				ch = '\r'
			case '0':
				ch = 0
			case 'Z':
				ch = 26
			case 'b':
				ch = '\b'
			default:
				ch = s[i]
			}
		}
		b.WriteByte(ch)
	}
	return b.String(), true
}
