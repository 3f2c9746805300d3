package querypath

import (
	"strconv"
	"strings"

	"vitess.io/vitess/go/vt/sqlparser"
)

// RowWrite describes a statement that changes or exclusively locks at
// most the one row that an equality on a key column names, for hot-row
// protection:
//
//   - UPDATE t SET ... WHERE col = value [AND ...]
//   - DELETE FROM t WHERE col = value [AND ...]
//   - SELECT ... FROM t WHERE col = value [AND ...] FOR UPDATE
//   - INSERT INTO t (cols) VALUES (one row) ON DUPLICATE KEY UPDATE ...
//
// The classifier does not know which columns are keys: Eqs lists every
// column the statement pins to one value, and the gateway takes the first
// that is a single-column primary or unique key of the table.
type RowWrite struct {
	// Table is the table as written, unquoted, qualified ("db.t") when the
	// statement qualifies it.
	Table string
	// Eqs are the column = value conditions, in the order written: the
	// conjuncts of the WHERE clause, or an INSERT's columns and values.
	Eqs []KeyEq
	// Insert is set for an INSERT ... ON DUPLICATE KEY UPDATE: the row is
	// whichever existing row one of its keys meets, so each key counts.
	Insert bool
}

// KeyEq is one column = value condition of a RowWrite.
type KeyEq struct {
	// Column is the column's name as written, unquoted, without qualifier.
	Column string
	// Value is the value: an integer or decimal as written, a string's
	// contents. Empty when Param is not -1.
	Value string
	// Param is the index (from 0) of the '?' placeholder that gives the
	// value in a prepared statement; -1 for a literal.
	Param int
}

// HotRow reports whether sql is a one-row write or exclusive locking read
// (see RowWrite), and which equalities could name its row. It parses the
// statement: call it only when hot-row protection is on. Shared locks (LOCK
// IN SHARE MODE, FOR SHARE) and FOR UPDATE SKIP LOCKED or NOWAIT do not
// count (they do not wait for each other, or do not wait at all);
// statements with subqueries, several tables, CTEs, OR between the key
// conditions, ranges, or several statements are not recognised.
func (c *Classifier) HotRow(sql string) (RowWrite, bool) {
	node, ok := c.parse(sql)
	if !ok || hasSubquery(node) {
		return RowWrite{}, false
	}
	var table string
	var where *sqlparser.Where
	switch n := node.(type) {
	case *sqlparser.Update:
		if n.With != nil || len(n.TableExprs) != 1 {
			return RowWrite{}, false
		}
		table, ok = singleTable(n.TableExprs[0])
		where = n.Where
	case *sqlparser.Delete:
		if n.With != nil || len(n.TableExprs) != 1 || len(n.Targets) != 0 {
			return RowWrite{}, false
		}
		table, ok = singleTable(n.TableExprs[0])
		where = n.Where
	case *sqlparser.Select:
		if n.With != nil || len(n.From) != 1 || n.Lock != sqlparser.ForUpdateLock {
			return RowWrite{}, false
		}
		table, ok = singleTable(n.From[0])
		where = n.Where
	case *sqlparser.Insert:
		return insertRow(n)
	default:
		return RowWrite{}, false
	}
	if !ok || where == nil {
		return RowWrite{}, false
	}
	var eqs []KeyEq
	for _, e := range sqlparser.SplitAndExpression(nil, where.Expr) {
		if eq, ok := keyEq(e); ok {
			eqs = append(eqs, eq)
		}
	}
	if len(eqs) == 0 {
		return RowWrite{}, false
	}
	return RowWrite{Table: table, Eqs: eqs}, true
}

// insertRow reads INSERT INTO t (cols) VALUES (one row) ON DUPLICATE KEY
// UPDATE ...: every column given a constant is a candidate.
func insertRow(n *sqlparser.Insert) (RowWrite, bool) {
	if n.Action != sqlparser.InsertAct || len(n.OnDup) == 0 || len(n.Columns) == 0 || n.Table == nil {
		return RowWrite{}, false
	}
	rows, ok := n.Rows.(sqlparser.Values)
	if !ok || len(rows) != 1 || len(rows[0]) != len(n.Columns) {
		return RowWrite{}, false
	}
	table, ok := singleTable(n.Table)
	if !ok {
		return RowWrite{}, false
	}
	var eqs []KeyEq
	for i, col := range n.Columns {
		if eq, ok := constant(rows[0][i]); ok {
			eq.Column = col.String()
			eqs = append(eqs, eq)
		}
	}
	if len(eqs) == 0 {
		return RowWrite{}, false
	}
	return RowWrite{Table: table, Eqs: eqs, Insert: true}, true
}

// singleTable returns the name of a plain table expression (no join,
// derived table or partition list).
func singleTable(te sqlparser.TableExpr) (string, bool) {
	ate, ok := te.(*sqlparser.AliasedTableExpr)
	if !ok || len(ate.Partitions) != 0 {
		return "", false
	}
	tn, ok := ate.Expr.(sqlparser.TableName)
	if !ok || tn.Name.IsEmpty() {
		return "", false
	}
	return qualifiedName(tn), true
}

// keyEq reads a conjunct col = constant (or constant = col).
func keyEq(e sqlparser.Expr) (KeyEq, bool) {
	cmp, ok := e.(*sqlparser.ComparisonExpr)
	if !ok || cmp.Operator != sqlparser.EqualOp {
		return KeyEq{}, false
	}
	col, ok := cmp.Left.(*sqlparser.ColName)
	val := cmp.Right
	if !ok {
		col, ok = cmp.Right.(*sqlparser.ColName)
		val = cmp.Left
	}
	if !ok {
		return KeyEq{}, false
	}
	eq, ok := constant(val)
	if !ok {
		return KeyEq{}, false
	}
	eq.Column = col.Name.String()
	return eq, true
}

// constant reads an integer, decimal or string literal, or a '?'
// placeholder (which the parser names :v1, :v2, ... in order).
func constant(e sqlparser.Expr) (KeyEq, bool) {
	switch v := e.(type) {
	case *sqlparser.Literal:
		switch v.Type {
		case sqlparser.IntVal, sqlparser.DecimalVal, sqlparser.StrVal:
			return KeyEq{Value: v.Val, Param: -1}, true
		}
	case *sqlparser.Argument:
		if n, err := strconv.Atoi(strings.TrimPrefix(v.Name, "v")); err == nil && n >= 1 && strings.HasPrefix(v.Name, "v") {
			return KeyEq{Param: n - 1}, true
		}
	}
	return KeyEq{}, false
}

// hasSubquery reports whether the statement holds a subquery anywhere.
func hasSubquery(node sqlparser.SQLNode) bool {
	found := false
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		switch n.(type) {
		case *sqlparser.Subquery, *sqlparser.DerivedTable:
			found = true
			return false, nil
		}
		return !found, nil
	}, node)
	return found
}
