package querypath

import "strconv"

// This file reads statements for what they do to the previous statement's
// diagnostics: ROW_COUNT(), FOUND_ROWS() and the list that SHOW WARNINGS
// shows. The gateway keeps those values per session so that they do not
// depend on which backend connection served the previous statement. None
// of this runs for every statement: only when the gateway needs the answer.

// DiagValue names one value of the previous statement's diagnostics.
type DiagValue uint8

// The diagnostic values a statement can read.
const (
	// DiagRowCount is ROW_COUNT().
	DiagRowCount DiagValue = iota + 1
	// DiagFoundRows is FOUND_ROWS().
	DiagFoundRows
	// DiagWarningCount is @@warning_count (SHOW COUNT(*) WARNINGS).
	DiagWarningCount
	// DiagErrorCount is @@error_count (SHOW COUNT(*) ERRORS).
	DiagErrorCount
)

// DiagShow says which SHOW statement a DiagRead is.
type DiagShow uint8

// The SHOW statements of the diagnostics area.
const (
	// DiagSelect is not a SHOW: a SELECT of DiagRead.Columns.
	DiagSelect DiagShow = iota
	// DiagShowWarnings is SHOW WARNINGS [LIMIT ...].
	DiagShowWarnings
	// DiagShowErrors is SHOW ERRORS [LIMIT ...].
	DiagShowErrors
	// DiagShowCountWarnings is SHOW COUNT(*) WARNINGS.
	DiagShowCountWarnings
	// DiagShowCountErrors is SHOW COUNT(*) ERRORS.
	DiagShowCountErrors
)

// DiagColumn is one column of a SELECT that reads only diagnostics.
type DiagColumn struct {
	// Value is what the column reads.
	Value DiagValue
	// Name is the column name MariaDB gives it: the alias, or the
	// expression as written (such as "row_count()" or "@@warning_count").
	Name string
}

// DiagRead is a statement that reads nothing but the previous statement's
// diagnostics, in a form whose whole answer the gateway can give: SHOW
// WARNINGS|ERRORS [LIMIT [offset,] n], SHOW COUNT(*) WARNINGS|ERRORS, or a
// SELECT whose columns are only ROW_COUNT(), FOUND_ROWS(), @@warning_count
// and @@error_count (with or without aliases), and no other clause.
type DiagRead struct {
	// Show is the SHOW statement, or DiagSelect.
	Show DiagShow
	// Offset and Limit are the LIMIT of SHOW WARNINGS|ERRORS; Limit is -1
	// without one.
	Offset, Limit int64
	// Columns are the SELECT's, in order.
	Columns []DiagColumn
}

// Reads reports whether the statement reads v.
func (d DiagRead) Reads(v DiagValue) bool {
	switch d.Show {
	case DiagShowWarnings, DiagShowErrors, DiagShowCountWarnings, DiagShowCountErrors:
		return v == DiagWarningCount || v == DiagErrorCount
	}
	for _, c := range d.Columns {
		if c.Value == v {
			return true
		}
	}
	return false
}

// ParseDiagRead recognizes a DiagRead. Anything else (other clauses, other
// expressions, comments MariaDB would execute, more than one statement)
// returns false: the gateway then sends the statement to the server.
func ParseDiagRead(sql string) (DiagRead, bool) {
	if len(sql) > 1024 || hasExecComment(sql) {
		return DiagRead{}, false
	}
	r := allTokens(sql)
	for len(r.toks) > 0 && isPunct(r.toks[len(r.toks)-1], ';') {
		r.toks = r.toks[:len(r.toks)-1]
	}
	switch {
	case r.accept("SHOW"):
		return diagShow(&r)
	case r.accept("SELECT"):
		return diagSelect(&r)
	}
	return DiagRead{}, false
}

func diagShow(r *tokReader) (DiagRead, bool) {
	d := DiagRead{Limit: -1}
	switch {
	case r.accept("WARNINGS"):
		d.Show = DiagShowWarnings
	case r.accept("ERRORS"):
		d.Show = DiagShowErrors
	case r.accept("COUNT"):
		if !r.punct('(') || !isPunctAt(r, 1, '*') || !isPunctAt(r, 2, ')') {
			return d, false
		}
		r.i += 3
		switch {
		case r.accept("WARNINGS"):
			d.Show = DiagShowCountWarnings
		case r.accept("ERRORS"):
			d.Show = DiagShowCountErrors
		default:
			return d, false
		}
		return d, r.done()
	default:
		return d, false
	}
	if r.accept("LIMIT") {
		a, ok := r.number()
		if !ok {
			return d, false
		}
		d.Limit = a
		switch {
		case r.punct(','):
			r.i++
			b, ok := r.number()
			if !ok {
				return d, false
			}
			d.Offset, d.Limit = a, b
		case r.accept("OFFSET"):
			b, ok := r.number()
			if !ok {
				return d, false
			}
			d.Offset = b
		}
	}
	return d, r.done()
}

func diagSelect(r *tokReader) (DiagRead, bool) {
	var d DiagRead
	for {
		if r.done() {
			return d, false
		}
		first := r.toks[r.i]
		var c DiagColumn
		switch first.kind {
		case tkIdent:
			switch w := r.s[first.start:first.end]; {
			case kwEq(w, "ROW_COUNT"):
				c.Value = DiagRowCount
			case kwEq(w, "FOUND_ROWS"):
				c.Value = DiagFoundRows
			default:
				return d, false
			}
			if !isPunctAt(r, 1, '(') || !isPunctAt(r, 2, ')') {
				return d, false
			}
			r.i += 3
		case tkSysVar:
			if sysVarScope(r.s, first) == scopeGlobal || sysVarScope(r.s, first) == scopeOther {
				return d, false
			}
			switch name := r.s[first.aux:first.end]; {
			case kwEq(name, "WARNING_COUNT"):
				c.Value = DiagWarningCount
			case kwEq(name, "ERROR_COUNT"):
				c.Value = DiagErrorCount
			default:
				return d, false
			}
			r.i++
		default:
			return d, false
		}
		c.Name = r.s[first.start:r.toks[r.i-1].end]
		if r.accept("AS") {
			if r.done() {
				return d, false
			}
		}
		if !r.done() && !r.punct(',') {
			t := r.toks[r.i]
			switch t.kind {
			case tkIdent:
				if reservedAfterColumn(r.s[t.start:t.end]) {
					return d, false
				}
				c.Name = r.s[t.start:t.end]
			case tkQuoted:
				c.Name = unquoteIdent(r.s[t.start:t.end])
			default:
				return d, false
			}
			r.i++
		}
		d.Columns = append(d.Columns, c)
		if r.done() {
			return d, true
		}
		if !r.punct(',') {
			return d, false
		}
		r.i++
	}
}

// reservedAfterColumn reports whether w starts a clause rather than naming
// an alias (SELECT ROW_COUNT() FROM t, ... INTO @x, ... LIMIT 1, ...).
func reservedAfterColumn(w string) bool {
	for _, kw := range [...]string{"FROM", "INTO", "WHERE", "LIMIT", "UNION", "EXCEPT", "INTERSECT",
		"FOR", "LOCK", "GROUP", "HAVING", "ORDER", "WINDOW", "PROCEDURE", "AS"} {
		if kwEq(w, kw) {
			return true
		}
	}
	return false
}

// isPunctAt reports whether the token k places after the current one is the
// punctuation byte c.
func isPunctAt(r *tokReader, k int, c byte) bool {
	return r.i+k < len(r.toks) && isPunct(r.toks[r.i+k], c)
}

// number reads a non-negative decimal integer.
func (r *tokReader) number() (int64, bool) {
	if r.i >= len(r.toks) || r.toks[r.i].kind != tkNumber {
		return 0, false
	}
	t := r.toks[r.i]
	n, err := strconv.ParseInt(r.s[t.start:t.end], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	r.i++
	return n, true
}

// allTokens lexes every token of sql, a single statement.
func allTokens(sql string) tokReader {
	st := stmt{s: sql, end: len(sql)}
	return st.tokens()
}

// ResultDiag is StatementDiag for a statement that answered with a result
// set, reading only its first two words: FoundRowsAreRows,
// ShowDiagnostics and (for SHOW CREATE) KeepsFoundRows are set as
// StatementDiag sets them; UsesTables is not.
func ResultDiag(sql string) DiagEffect {
	if hasExecComment(sql) {
		sql = expandComments(sql, false)
	}
	l := lexer{s: sql}
	t0 := l.next()
	t1 := l.next()
	word := func(t token) string {
		if t.kind != tkIdent {
			return ""
		}
		return sql[t.start:t.end]
	}
	return headDiag(word(t0), word(t1), isPunct(t0, '('))
}

// headDiag sets what the first two words of a statement tell of its
// DiagEffect.
func headDiag(first, second string, paren bool) DiagEffect {
	var e DiagEffect
	switch {
	case kwEq(first, "SELECT"), kwEq(first, "WITH"), kwEq(first, "VALUES"), first == "" && paren:
		e.FoundRowsAreRows = true
	case kwEq(first, "SHOW"):
		switch {
		case kwEq(second, "WARNINGS"), kwEq(second, "ERRORS"), kwEq(second, "COUNT"):
			e.ShowDiagnostics = true
		case kwEq(second, "CREATE"):
			// SHOW CREATE TABLE, DATABASE, ... leave FOUND_ROWS() as it
			// was (checked on 10.11; make compat: main.ctype_binary).
			e.KeepsFoundRows = true
		default:
			e.FoundRowsAreRows = true
		}
	case kwEq(first, "DESC"), kwEq(first, "DESCRIBE"):
		e.FoundRowsAreRows = true
	}
	return e
}

// DiagEffect says what a statement that succeeded does to the previous
// statement's diagnostics, as far as MariaDB 10.11 documents and shows it.
type DiagEffect struct {
	// FoundRowsAreRows: FOUND_ROWS() becomes the number of rows of the
	// statement's result set (SELECT without SQL_CALC_FOUND_ROWS, SHOW
	// other than SHOW CREATE, DESCRIBE). EXPLAIN, CHECK TABLE and the like leave it as it was.
	FoundRowsAreRows bool
	// ShowDiagnostics: SHOW WARNINGS, SHOW ERRORS, SHOW COUNT(*) ...:
	// FOUND_ROWS() and the warning list stay as they were.
	ShowDiagnostics bool
	// KeepsFoundRows: FOUND_ROWS() stays as it was: the statement runs no
	// SELECT (no subquery, no INSERT ... SELECT) and joins no tables (no
	// multiple-table UPDATE or DELETE).
	KeepsFoundRows bool
	// UsesTables: the statement opens a table, so a success without
	// warnings empties the warning list ("a statement that uses a table
	// but generates no messages clears the message list"). A SELECT, SET
	// or DO without a FROM, and USE and transaction control, do not; a
	// stored function they call may open tables the gateway does not see.
	UsesTables bool
}

// StatementDiag reads sql, one statement, for its DiagEffect. It does not
// allocate unless sql holds executable comments.
func StatementDiag(sql string) DiagEffect {
	if hasExecComment(sql) {
		sql = expandComments(sql, false)
	}
	l := lexer{s: sql}
	var e DiagEffect
	t0 := l.next()
	if t0.kind == tkEOF {
		return e
	}
	first := ""
	if t0.kind == tkIdent {
		first = sql[t0.start:t0.end]
	}
	hasSelect, hasFrom, hasJoin, using := false, false, false, false
	comma := false    // a ',' outside parentheses before any SET: UPDATE of several tables
	afterSet := false // a SET keyword was seen
	singleDelete := false
	deleteHead := kwEq(first, "DELETE") // still in DELETE's modifiers
	second := ""
	depth := 0
	prevFrom := false
	for i := 1; ; i++ {
		t := l.next()
		if t.kind == tkEOF {
			break
		}
		if prevFrom {
			prevFrom = false
			if !(t.kind == tkIdent && kwEq(sql[t.start:t.end], "DUAL")) {
				hasFrom = true
			}
		}
		if i == 1 && t.kind == tkIdent {
			second = sql[t.start:t.end]
		}
		switch {
		case isPunct(t, '('):
			depth++
		case isPunct(t, ')'):
			depth--
		case isPunct(t, ','):
			if depth == 0 && !afterSet {
				comma = true
			}
		case t.kind == tkIdent:
			w := sql[t.start:t.end]
			switch {
			case kwEq(w, "SELECT"):
				hasSelect = true
			case kwEq(w, "FROM"):
				prevFrom = true
				if deleteHead {
					singleDelete = true
				}
			case kwEq(w, "JOIN"):
				hasJoin = true
			case kwEq(w, "USING"):
				using = true
			case kwEq(w, "SET"):
				afterSet = true
			}
			if deleteHead && !kwEq(w, "LOW_PRIORITY") && !kwEq(w, "QUICK") && !kwEq(w, "IGNORE") {
				deleteHead = false
			}
		default:
			deleteHead = false
		}
	}
	if prevFrom {
		hasFrom = true
	}
	e = headDiag(first, second, isPunct(t0, '('))
	switch {
	case kwEq(first, "SELECT"), kwEq(first, "WITH"), kwEq(first, "VALUES"), first == "" && isPunct(t0, '('):
		e.UsesTables = hasFrom
	case kwEq(first, "SHOW"):
		e.UsesTables = !e.ShowDiagnostics
	case kwEq(first, "DESC"), kwEq(first, "DESCRIBE"):
		e.UsesTables = true
	case kwEq(first, "SET"), kwEq(first, "DO"):
		e.KeepsFoundRows = !hasSelect
		e.UsesTables = hasFrom
	case kwEq(first, "USE"), kwEq(first, "BEGIN"), kwEq(first, "START"), kwEq(first, "COMMIT"),
		kwEq(first, "ROLLBACK"), kwEq(first, "SAVEPOINT"), kwEq(first, "RELEASE"),
		kwEq(first, "DEALLOCATE"), kwEq(first, "DROP") && kwEq(second, "PREPARE"):
		e.KeepsFoundRows = true
	case kwEq(first, "PREPARE"):
		// Nothing runs; the statement's tables are opened to check it.
		e.KeepsFoundRows = true
		e.UsesTables = preparedUsesTables(sql)
	case kwEq(first, "INSERT"), kwEq(first, "REPLACE"),
		kwEq(first, "CREATE"), kwEq(first, "DROP"): // checked on 10.11 (make compat: main.ctype_binary)
		e.KeepsFoundRows = !hasSelect
		e.UsesTables = true
	case kwEq(first, "UPDATE"):
		e.KeepsFoundRows = !hasSelect && !hasJoin && !comma
		e.UsesTables = true
	case kwEq(first, "DELETE"):
		e.KeepsFoundRows = !hasSelect && !hasJoin && !using && singleDelete
		e.UsesTables = true
	default:
		e.UsesTables = true
	}
	return e
}

// preparedUsesTables reports whether PREPARE name FROM 'text' prepares a
// statement that uses tables; true when the text is not a literal.
func preparedUsesTables(sql string) bool {
	l := lexer{s: sql}
	for t := l.next(); t.kind != tkEOF; t = l.next() {
		if t.kind == tkIdent && kwEq(sql[t.start:t.end], "FROM") {
			s := l.next()
			if s.kind != tkString {
				return true
			}
			inner, ok := unquoteString(sql[s.start:s.end], false)
			if !ok {
				return true
			}
			return StatementDiag(inner).UsesTables
		}
	}
	return true
}

// BatchUsesTables reports whether any statement of sql, a batch of
// statements, uses a table (StatementDiag's UsesTables): when none does,
// the warnings of the statement before the batch stay, unless the batch
// raised its own. A statement the lexer cannot split counts as using
// tables.
func BatchUsesTables(sql string, noBackslash bool) bool {
	pos := 0
	for {
		var st stmt
		scanStmt(&st, sql, pos, noBackslash)
		if st.count > 0 && (st.compound || st.unterminated || StatementDiag(sql[st.start:st.end]).UsesTables) {
			return true
		}
		if !st.more {
			return false
		}
		pos = st.next
	}
}

// ReadsOtherTables reports whether sql, an INSERT or UPDATE of one table,
// may read rows of other tables: it holds SELECT, TABLE or WITH anywhere
// (INSERT ... SELECT, a subquery in VALUES or SET, a CTE), or holds more
// than one statement. The gateway forwards only statements that do not
// to the owner, which runs them with the cluster's account.
func ReadsOtherTables(sql string, noBackslash bool) bool {
	l := lexer{s: sql, noBackslash: noBackslash}
	ended := false // a ';' ended a statement
	for {
		t := l.next()
		switch {
		case t.kind == tkEOF:
			return false
		case isPunct(t, ';'):
			ended = true
		case ended:
			return true // another statement
		case t.kind == tkIdent && (l.is(t, "SELECT") || l.is(t, "TABLE") || l.is(t, "WITH")):
			return true
		}
	}
}
