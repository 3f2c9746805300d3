package querypath

import (
	"strconv"

	"vitess.io/vitess/go/vt/sqlparser"
)

// parse parses one statement with the Vitess parser. Partially parsed DDL
// counts as a failure, and so would a panic of the parser.
func (c *Classifier) parse(sql string) (node sqlparser.Statement, ok bool) {
	defer func() {
		if recover() != nil {
			node, ok = nil, false
		}
	}()
	node, err := c.parser.ParseStrictDDL(sql)
	if err != nil || node == nil {
		return nil, false
	}
	return node, true
}

// parsed classifies st from the Vitess AST. ok is false when the parser
// cannot read the statement.
func (c *Classifier) parsed(st *stmt, depth int) (Route, bool) {
	node, ok := c.parse(st.text())
	if !ok {
		return Route{}, false
	}
	return c.astRoute(node, st, depth), true
}

// astRoute classifies a parsed statement. Facts the AST does not keep (the
// options of COMMIT, the text of SET values) come from the lexer.
func (c *Classifier) astRoute(node sqlparser.Statement, st *stmt, depth int) Route {
	var f features
	opaque := false // the AST hides the statement's content: use the lexer's findings
	var r Route
	switch n := node.(type) {
	case *sqlparser.Select:
		if seq, ok := astSequence(n, st); ok {
			return seq
		}
	case *sqlparser.Union:
	case *sqlparser.Insert:
		r.Pin |= PinLastResult
		if t, ok := n.Table.Expr.(sqlparser.TableName); ok {
			r.Table = qualifiedName(t)
		}
		r.DML = DMLInsert
		if n.Action == sqlparser.ReplaceAct {
			r.DML = DMLReplace
		}
	case *sqlparser.Update:
		r.Pin |= PinLastResult
		r.DML = DMLUpdate
		if len(n.TableExprs) == 1 {
			if at, ok := n.TableExprs[0].(*sqlparser.AliasedTableExpr); ok {
				if t, ok := at.Expr.(sqlparser.TableName); ok {
					r.Table = qualifiedName(t)
				}
			}
		}
	case *sqlparser.Delete:
		r.Pin |= PinLastResult
		r.DML = DMLDelete
	case *sqlparser.CallProc:
		r.Pin |= PinLastResult
	case *sqlparser.Load:
		r.Pin |= PinLastResult
		opaque = true
	case *sqlparser.Set:
		return c.setRoute(st, depth)
	case *sqlparser.Show:
		return showRoute(st)
	case *sqlparser.Begin:
		r.Kind = KindBegin
	case *sqlparser.Commit:
		return txnRoute(st, KindCommit)
	case *sqlparser.Rollback:
		return txnRoute(st, KindRollback)
	case *sqlparser.Use:
		if r.Database = n.DBName.String(); r.Database != "" {
			r.Kind = KindUse
		}
		return r
	case *sqlparser.Stream:
		r.Kind = KindStream
		r.Table = qualifiedName(n.Table)
	case *sqlparser.Kill:
		r.Kind = KindKill
		r.KillID = n.ProcesslistID
		r.KillQuery = n.Type == sqlparser.QueryType
	case *sqlparser.LockTables:
		r.Pin |= PinLockTables
	case *sqlparser.UnlockTables:
		r.Unpin |= PinLockTables
	case *sqlparser.Flush:
		if n.WithLock || n.ForExport {
			r.Pin |= PinLockTables
		}
	case *sqlparser.PrepareStmt:
		return c.dynamicSQL(st, 3, depth, false)
	case *sqlparser.DeallocateStmt:
		r.Unpin |= PinPrepare
		r.PrepareName = st.word(2)
	case *sqlparser.CreateTable:
		if n.Temp {
			r.Pin |= PinTempTable
		}
		astTempTables(n, &r)
	case *sqlparser.DropTable:
		r.Unpin |= PinTempTable
		astTempTables(n, &r)
	case *sqlparser.AlterTable, *sqlparser.RenameTable:
		astTempTables(node, &r)
	case *sqlparser.ExplainStmt:
		walkFeatures(n, &f)
		r.Pin = f.pin
		r.ReadsLastResult = f.readsLast
		if _, ok := n.Statement.(sqlparser.SelectStatement); ok && n.Type != sqlparser.AnalyzeType {
			r.Kind = KindRead
		}
		return r
	case *sqlparser.ExplainTab:
		r.Kind = KindRead
		return r
	case *sqlparser.OtherAdmin, *sqlparser.CommentOnly:
		opaque = true
	}
	if opaque {
		f = st.f
	} else {
		walkFeatures(node, &f)
	}
	switch node.(type) {
	case *sqlparser.Select, *sqlparser.Union:
		r.Kind = readKind(&f)
	}
	r.Pin |= f.pin
	r.Unpin |= f.unpin
	r.Unpin &^= r.Pin
	r.ReadsLastResult = r.ReadsLastResult || f.readsLast
	r.ImplicitCommit = implicitCommit(st)
	return r
}

// walkFeatures records what the nodes of the tree imply.
func walkFeatures(node sqlparser.SQLNode, f *features) {
	_ = sqlparser.Walk(func(node sqlparser.SQLNode) (bool, error) {
		switch n := node.(type) {
		case *sqlparser.Variable:
			if n.Scope == sqlparser.VariableScope {
				f.pin |= PinUserVar
			} else {
				sysVarFeature(f, n.Name.String())
			}
		case *sqlparser.LockingFunc:
			switch n.Type {
			case sqlparser.GetLock:
				f.pin |= PinLock
				f.sideEffect = true
			case sqlparser.ReleaseLock:
				f.sideEffect = true // other locks may be held
			case sqlparser.ReleaseAllLocks:
				f.unpin |= PinLock
				f.sideEffect = true
			}
		case *sqlparser.FuncExpr:
			if n.Qualifier.IsEmpty() && funcFeature(f, n.Name.String()) {
				// LAST_INSERT_ID
				if len(n.Exprs) == 0 {
					f.readsLast = true
				} else {
					f.pin |= PinLastResult
					f.sideEffect = true
				}
			}
		case *sqlparser.Select:
			if n.SQLCalcFoundRows {
				f.pin |= PinFoundRows
			}
			if n.Lock != sqlparser.NoLock {
				f.lockClause = true
			}
		case *sqlparser.Union:
			if n.Lock != sqlparser.NoLock {
				f.lockClause = true
			}
		case *sqlparser.SelectInto:
			f.into = true
			if n.Type != sqlparser.IntoVariables {
				f.intoFile = true
			}
		case *sqlparser.Nextval:
			f.nextSyntax = true
			f.sideEffect = true
			f.pin |= PinLastResult
		case *sqlparser.AssignmentExpr:
			f.sideEffect = true
		}
		return true, nil
	}, node)
}

// astSequence recognizes SELECT NEXT ... VALUES FROM t in the AST.
func astSequence(n *sqlparser.Select, st *stmt) (Route, bool) {
	if n.SelectExprs == nil || len(n.SelectExprs.Exprs) != 1 || len(n.From) != 1 ||
		n.Where != nil || n.GroupBy != nil || n.Having != nil || n.OrderBy != nil ||
		n.Limit != nil || n.Lock != sqlparser.NoLock || n.Into != nil || n.With != nil {
		return Route{}, false
	}
	nv, ok := n.SelectExprs.Exprs[0].(*sqlparser.Nextval)
	if !ok {
		return Route{}, false
	}
	ate, ok := n.From[0].(*sqlparser.AliasedTableExpr)
	if !ok || !ate.As.IsEmpty() {
		return Route{}, false
	}
	t, ok := ate.Expr.(sqlparser.TableName)
	if !ok {
		return Route{}, false
	}
	var r Route
	r.Kind = KindSequence
	r.Table = qualifiedName(t)
	switch e := nv.Expr.(type) {
	case *sqlparser.Literal:
		if e.Type != sqlparser.IntVal {
			return Route{}, false
		}
		v, err := strconv.ParseInt(e.Val, 10, 64)
		if err != nil {
			return Route{}, false
		}
		r.Count = v
	case *sqlparser.Argument:
	default:
		return Route{}, false
	}
	if st.kw(1, "NEXT") && st.kw(2, "VALUE") && st.kw(3, "FOR") {
		r.NativeSyntax = true
		r.Pin = PinLastResult
	}
	return r, true
}

// qualifiedName returns "q.name" or "name".
func qualifiedName(t sqlparser.TableName) string {
	if t.Qualifier.IsEmpty() {
		return t.Name.String()
	}
	return t.Qualifier.String() + "." + t.Name.String()
}
