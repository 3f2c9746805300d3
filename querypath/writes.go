package querypath

// StartsWrite reports whether the statement sql, classified as r, may
// write rows or take row locks, so that run outside a transaction, or
// as the first such statement of one, it starts a write transaction:
// INSERT, REPLACE, UPDATE, DELETE, LOAD DATA, CALL, an SQL-level
// EXECUTE, a SELECT (or WITH, or parenthesized SELECT) that is not a
// plain read (FOR UPDATE, LOCK IN SHARE MODE, INTO, functions with side
// effects), and batches that are not all reads and SETs. Reads,
// transaction control (BEGIN, COMMIT, ROLLBACK [TO SAVEPOINT],
// SAVEPOINT, RELEASE SAVEPOINT, XA), SET, USE, KILL, LOCK and UNLOCK
// TABLES, DDL and administrative statements are not: they start no
// write transaction (DDL commits on its own and is the operator's, not
// the application's). Transaction throttling delays the statements it
// reports. It reads at most the first keyword and does not allocate.
func StartsWrite(r Route, sql string) bool {
	if r.Kind != KindOther {
		return false
	}
	if r.DML != DMLNone || r.MultiStatement {
		return true
	}
	l := lexer{s: sql}
	t := l.next()
	if isPunct(t, '(') {
		return true
	}
	if t.kind != tkIdent {
		return false
	}
	switch w := l.text(t); len(w) {
	case 4:
		return kwEq(w, "CALL") || kwEq(w, "LOAD") || kwEq(w, "WITH")
	case 6:
		return kwEq(w, "SELECT")
	case 7:
		return kwEq(w, "EXECUTE")
	}
	return false
}
