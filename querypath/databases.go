package querypath

import (
	"strings"

	"vitess.io/vitess/go/vt/sqlparser"
)

// TableRefs is what Databases found of a statement's tables.
type TableRefs struct {
	// Unqualified says a table is named without a database: it is in
	// the session's current database.
	Unqualified bool
	// Lexical says the statement could not be parsed: the databases were
	// read from the text's db.name forms, which column references
	// (alias.column) share, and Unqualified is then always set.
	Lexical bool
}

// Databases appends to dbs the database of every table the statement sql
// names with a qualified name (db.t, db.t.column, SHOW ... FROM db),
// repeats included, and tells whether some table is unqualified. A
// statement without a '.' and not a SHOW costs one byte scan and no
// allocation: its tables are all unqualified. The names may point into
// sql.
func (c *Classifier) Databases(sql string, dbs []string) ([]string, TableRefs) {
	if strings.IndexByte(sql, '.') < 0 && !startsWithShow(sql) {
		return dbs, TableRefs{Unqualified: true}
	}
	fn := func(db string) { dbs = append(dbs, db) }
	if hasExecComment(sql) {
		sql = expandComments(sql, false)
	}
	ast, err := c.parser.Parse(sql)
	if err != nil {
		lexicalDatabases(sql, fn)
		return dbs, TableRefs{Unqualified: true, Lexical: true}
	}
	var refs TableRefs
	ctes := map[string]bool{}
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		switch n := n.(type) {
		case *sqlparser.CommonTableExpr:
			ctes[n.ID.String()] = true
		case *sqlparser.ColName:
			// alias.column names no table; db.t.column does.
			if q := n.Qualifier.Qualifier.String(); q != "" {
				fn(q)
			}
			return false, nil
		case sqlparser.TableName:
			switch q := n.Qualifier.String(); {
			case q != "":
				fn(q)
			case n.Name.String() != "" && !ctes[n.Name.String()] && !strings.EqualFold(n.Name.String(), "dual"):
				refs.Unqualified = true
			}
			return false, nil
		case *sqlparser.ShowBasic:
			if db := n.DbName.String(); db != "" {
				fn(db)
			} else if n.Tbl.Name.String() != "" && n.Tbl.Qualifier.String() == "" {
				refs.Unqualified = true
			}
		}
		return true, nil
	}, ast)
	return dbs, refs
}

// startsWithShow reports whether sql's first word is SHOW.
func startsWithShow(sql string) bool {
	l := lexer{s: sql}
	t := l.next()
	return t.kind == tkIdent && l.is(t, "SHOW")
}

// lexicalDatabases calls fn with the first name of every name.name form
// of sql (not preceded by a '.'): the database of db.t, but also the
// table or alias of t.column.
func lexicalDatabases(sql string, fn func(db string)) {
	l := lexer{s: sql}
	var p3, p2, p1 token
	for {
		t := l.next()
		if t.kind == tkEOF {
			return
		}
		name := t.kind == tkIdent || t.kind == tkQuoted
		if name && isPunct(p1, '.') && (p2.kind == tkIdent || p2.kind == tkQuoted) && !isPunct(p3, '.') {
			// p2 . t, p2 not itself qualified (in a.b.c only a is).
			fn(unquoteIdent(l.text(p2)))
		}
		p3, p2, p1 = p2, p1, t
	}
}
