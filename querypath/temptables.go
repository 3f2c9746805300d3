package querypath

import (
	"strings"

	"vitess.io/vitess/go/vt/sqlparser"
)

// This file reads the names behind Route.CreatedTemp, Route.Dropped and
// Route.Renames: from the Vitess AST when the parser reads the statement, from
// the lexer's tokens otherwise. These statements are rare, so the code here
// may allocate.

// canonicalIdent returns one part of a canonical table name: the identifier
// unquoted, or backquoted (with '`' doubled) when it is empty or holds a '.'
// or a '`', so that "a.b" always means database a, table b.
func canonicalIdent(id string) string {
	if id != "" && strings.IndexByte(id, '.') < 0 && strings.IndexByte(id, '`') < 0 {
		return id
	}
	return "`" + strings.ReplaceAll(id, "`", "``") + "`"
}

// canonicalName returns the canonical form of table in database db:
// "db.table", or "table" when db is empty. An empty quoted qualifier is read
// as no qualifier, as Vitess reads it (the server rejects it anyway).
func canonicalName(db, table string) string {
	if db == "" {
		return canonicalIdent(table)
	}
	return canonicalIdent(db) + "." + canonicalIdent(table)
}

// astName returns the canonical form of a parsed table name.
func astName(t sqlparser.TableName) string {
	return canonicalName(t.Qualifier.String(), t.Name.String())
}

// astTempTables records in r the tables a parsed statement creates as
// temporary tables, drops or renames.
func astTempTables(node sqlparser.Statement, r *Route) {
	switch n := node.(type) {
	case *sqlparser.CreateTable:
		if n.Temp {
			r.CreatedTemp = []string{astName(n.Table)}
		}
	case *sqlparser.DropTable:
		if len(n.FromTables) == 0 {
			return
		}
		r.Dropped = make([]string, len(n.FromTables))
		for i, t := range n.FromTables {
			r.Dropped[i] = astName(t)
		}
	case *sqlparser.RenameTable:
		if len(n.TablePairs) == 0 {
			return
		}
		r.Renames = make([][2]string, len(n.TablePairs))
		for i, p := range n.TablePairs {
			r.Renames[i] = [2]string{astName(p.FromTable), astName(p.ToTable)}
		}
	case *sqlparser.AlterTable:
		to := ""
		for _, o := range n.AlterOptions {
			if rn, ok := o.(*sqlparser.RenameTableName); ok {
				to = astName(rn.Table) // the last RENAME wins
			}
		}
		if to != "" {
			r.Renames = [][2]string{{astName(n.Table), to}}
		}
	}
}

// lexTempTables records in r, from the lexer's tokens alone, the tables st
// creates as temporary tables, drops or renames. It reports false when st
// may create a temporary object or rename a table but the names cannot be
// read: the caller then pins the session for good, since a temporary table
// the gateway does not know of could outlive the ones it counts. A DROP whose
// names cannot be read is left without names: that only keeps a pin longer.
func lexTempTables(st *stmt, r *Route) bool {
	w := st.word(0)
	switch {
	case kwEq(w, "CREATE"):
		i := 1
		if st.kw(1, "OR") && st.kw(2, "REPLACE") {
			i = 3
		}
		if !st.kw(i, "TEMPORARY") {
			return true
		}
		tr := st.tokens()
		name, ok := tr.createTemp()
		if !ok {
			return false
		}
		r.CreatedTemp = []string{name}
	case kwEq(w, "DROP"):
		if !st.kw(1, "TABLE") && !st.kw(1, "TABLES") && !st.kw(1, "TEMPORARY") {
			return true
		}
		tr := st.tokens()
		if names, ok := tr.drop(); ok {
			r.Dropped = names
		}
	case kwEq(w, "RENAME"):
		if !st.kw(1, "TABLE") && !st.kw(1, "TABLES") {
			return true
		}
		tr := st.tokens()
		pairs, ok := tr.rename()
		if !ok {
			return false
		}
		r.Renames = pairs
	case kwEq(w, "ALTER"):
		tr := st.tokens()
		pair, found, ok := tr.alter()
		if !ok {
			return false
		}
		if found {
			r.Renames = [][2]string{pair}
		}
	}
	return true
}

// tokReader walks all the tokens of one statement.
type tokReader struct {
	s    string
	toks []token
	i    int
}

// tokens lexes the whole statement again (st.head holds only its first
// tokens).
func (st *stmt) tokens() tokReader {
	l := lexer{s: st.s, i: st.start, noBackslash: st.noBackslash, hostCtx: hostContext(st)}
	var toks []token
	for {
		t := l.next()
		if t.kind == tkEOF || int(t.start) >= st.end {
			break
		}
		toks = append(toks, t)
	}
	return tokReader{s: st.s, toks: toks}
}

// done reports whether every token has been read.
func (r *tokReader) done() bool { return r.i >= len(r.toks) }

// kw reports whether the current token is the unquoted keyword kw.
func (r *tokReader) kw(kw string) bool {
	if r.i >= len(r.toks) {
		return false
	}
	t := r.toks[r.i]
	return t.kind == tkIdent && kwEq(r.s[t.start:t.end], kw)
}

// accept skips the current token when it is the keyword kw.
func (r *tokReader) accept(kw string) bool {
	if r.kw(kw) {
		r.i++
		return true
	}
	return false
}

// punct reports whether the current token is the punctuation byte c.
func (r *tokReader) punct(c byte) bool {
	return r.i < len(r.toks) && isPunct(r.toks[r.i], c)
}

// ident reads an unquoted or `quoted` identifier and returns it unquoted.
func (r *tokReader) ident() (string, bool) {
	if r.i >= len(r.toks) {
		return "", false
	}
	t := r.toks[r.i]
	if t.kind != tkIdent && t.kind != tkQuoted {
		return "", false
	}
	r.i++
	return unquoteIdent(r.s[t.start:t.end]), true
}

// name reads a possibly qualified table name and returns its canonical form.
func (r *tokReader) name() (string, bool) {
	a, ok := r.ident()
	if !ok {
		return "", false
	}
	if !r.punct('.') {
		return canonicalName("", a), true
	}
	r.i++
	b, ok := r.ident()
	if !ok || r.punct('.') {
		return "", false
	}
	return canonicalName(a, b), true
}

// wait skips an optional WAIT n or NOWAIT.
func (r *tokReader) wait() bool {
	switch {
	case r.accept("NOWAIT"):
	case r.accept("WAIT"):
		if r.i >= len(r.toks) || r.toks[r.i].kind != tkNumber {
			return false
		}
		r.i++
	}
	return true
}

// createTemp reads CREATE [OR REPLACE] TEMPORARY TABLE [IF NOT EXISTS] name
// and returns the name. What follows the name (columns, LIKE, SELECT,
// options) does not matter.
func (r *tokReader) createTemp() (string, bool) {
	if !r.accept("CREATE") {
		return "", false
	}
	if r.accept("OR") && !r.accept("REPLACE") {
		return "", false
	}
	if !r.accept("TEMPORARY") || !r.accept("TABLE") {
		return "", false
	}
	if r.accept("IF") && (!r.accept("NOT") || !r.accept("EXISTS")) {
		return "", false
	}
	name, ok := r.name()
	// Columns, LIKE, [AS] SELECT or table options follow; anything else is a
	// syntax error or a name this reader does not follow.
	if !ok || !r.done() && !r.punct('(') && r.toks[r.i].kind != tkIdent {
		return "", false
	}
	return name, true
}

// drop reads DROP [TEMPORARY] TABLE|TABLES [IF EXISTS] name [, name]...
// [WAIT n | NOWAIT] [RESTRICT | CASCADE] exactly and returns the names.
func (r *tokReader) drop() ([]string, bool) {
	if !r.accept("DROP") {
		return nil, false
	}
	r.accept("TEMPORARY")
	if !r.accept("TABLE") && !r.accept("TABLES") {
		return nil, false
	}
	if r.accept("IF") && !r.accept("EXISTS") {
		return nil, false
	}
	var names []string
	for {
		n, ok := r.name()
		if !ok {
			return nil, false
		}
		names = append(names, n)
		if !r.punct(',') {
			break
		}
		r.i++
	}
	if !r.wait() {
		return nil, false
	}
	if !r.accept("RESTRICT") {
		r.accept("CASCADE")
	}
	if !r.done() {
		return nil, false
	}
	return names, true
}

// rename reads RENAME TABLE|TABLES [IF EXISTS] a [WAIT n | NOWAIT] TO b
// [, c TO d]... exactly and returns the (old, new) pairs.
func (r *tokReader) rename() ([][2]string, bool) {
	if !r.accept("RENAME") || !r.accept("TABLE") && !r.accept("TABLES") {
		return nil, false
	}
	if r.accept("IF") && !r.accept("EXISTS") {
		return nil, false
	}
	var pairs [][2]string
	for {
		from, ok := r.name()
		if !ok {
			return nil, false
		}
		if len(pairs) == 0 && !r.wait() {
			return nil, false
		}
		if !r.accept("TO") {
			return nil, false
		}
		to, ok := r.name()
		if !ok {
			return nil, false
		}
		pairs = append(pairs, [2]string{from, to})
		if !r.punct(',') {
			break
		}
		r.i++
	}
	if !r.done() {
		return nil, false
	}
	return pairs, true
}

// alter reads ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] name ... and looks
// for RENAME [TO | AS] new among the alter specifications (RENAME COLUMN,
// INDEX, KEY or CONSTRAINT do not rename the table). found reports a
// table rename; ok is false when the statement renames a table in a way this
// reader does not follow.
func (r *tokReader) alter() (pair [2]string, found, ok bool) {
	if !r.accept("ALTER") {
		return pair, false, true
	}
	r.accept("ONLINE")
	r.accept("IGNORE")
	if !r.accept("TABLE") {
		return pair, false, true // ALTER DATABASE, ALTER USER, ...
	}
	if r.accept("IF") && !r.accept("EXISTS") {
		return pair, false, !r.hasRename()
	}
	from, nameOK := r.name()
	if !nameOK {
		return pair, false, !r.hasRename()
	}
	depth := 0
	for !r.done() {
		switch {
		case r.punct('('):
			depth++
		case r.punct(')'):
			depth--
		case depth == 0 && r.kw("RENAME"):
			r.i++
			if r.renamesPart() {
				continue
			}
			if !r.accept("TO") {
				r.accept("AS")
			}
			to, toOK := r.name()
			if !toOK || !r.done() && !r.punct(',') {
				return pair, true, false
			}
			pair, found = [2]string{from, to}, true // the last RENAME wins
			continue
		}
		r.i++
	}
	return pair, found, true
}

// renamesPart reports whether the token after RENAME in an ALTER TABLE
// says that a part of the table is renamed, not the table.
func (r *tokReader) renamesPart() bool {
	return r.kw("COLUMN") || r.kw("INDEX") || r.kw("KEY") || r.kw("CONSTRAINT")
}

// hasRename reports whether a RENAME keyword that may rename the table
// follows.
func (r *tokReader) hasRename() bool {
	for ; !r.done(); r.i++ {
		if r.kw("RENAME") {
			r.i++
			if !r.renamesPart() {
				return true
			}
		}
	}
	return false
}
