package querypath

import "strings"

// The gateway's session ids in SQL. At the server, CONNECTION_ID() is the
// backend connection's thread id and information_schema.PROCESSLIST lists
// the backend's threads: both change from statement to statement behind a
// multiplexing gateway, and both show every user of a shared backend
// account to every other. RewriteGatewayIDs replaces them in a statement's
// text with the gateway's own: the session's id, and a derived table of
// the sessions the user may see. Where it cannot do so without changing
// what else the statement means, it leaves the text alone.

// ProcessListColumns are the columns of MariaDB's
// information_schema.PROCESSLIST (10.11), in order: the derived table that
// replaces it must name them all.
var ProcessListColumns = [...]string{
	"ID", "USER", "HOST", "DB", "COMMAND", "TIME", "STATE", "INFO", "TIME_MS", "STAGE",
	"MAX_STAGE", "PROGRESS", "MEMORY_USED", "MAX_MEMORY_USED", "EXAMINED_ROWS", "QUERY_ID",
	"INFO_BINARY", "TID",
}

// GatewayTable is a server table that RewriteGatewayIDs replaces with a
// derived table of the gateway's sessions.
type GatewayTable uint8

const (
	// TableProcessList is information_schema.PROCESSLIST: a SELECT naming
	// ProcessListColumns.
	TableProcessList GatewayTable = iota
	// TableConnectAttrs is performance_schema.session_connect_attrs: a
	// SELECT naming ConnectAttrsColumns.
	TableConnectAttrs
	// TableAccountConnectAttrs is
	// performance_schema.session_account_connect_attrs: the same columns,
	// of the sessions of the current account only.
	TableAccountConnectAttrs
	numGatewayTables
)

// ConnectAttrsColumns are the columns of performance_schema's
// session_connect_attrs and session_account_connect_attrs, in order.
var ConnectAttrsColumns = [...]string{"PROCESSLIST_ID", "ATTR_NAME", "ATTR_VALUE", "ORDINAL_POSITION"}

// tableNames are the GatewayTables' names, after the schema's.
var tableNames = [numGatewayTables]string{"PROCESSLIST", "SESSION_CONNECT_ATTRS", "SESSION_ACCOUNT_CONNECT_ATTRS"}

// RewriteGatewayIDs returns sql with every CONNECTION_ID() replaced by id
// and every reference to information_schema.PROCESSLIST and to
// performance_schema.session_connect_attrs and
// session_account_connect_attrs as a table replaced by the parenthesized
// derived table that tables returns for it (called at most once per
// table, only when needed). ok is false, and the text must go as written,
// when:
//   - a statement is not SELECT, WITH, INSERT, REPLACE, UPDATE, DELETE, DO
//     or SET (a stored program or view body keeps CONNECTION_ID() for when
//     it runs; SHOW COLUMNS FROM information_schema.PROCESSLIST describes
//     the real table);
//   - the text also reads another source of backend thread ids
//     (IS_USED_LOCK(), IS_FREE_LOCK(), THREAD_ID columns, the other tables
//     of performance_schema, METADATA_LOCK_INFO, the INNODB_ tables):
//     mixing the two kinds of ids would give wrong answers;
//   - CONNECTION_ID() is part of a select-list item whose end cannot be
//     told from an alias of its own (see below), or PROCESSLIST is used
//     other than as a table;
//   - the text has executable comments, cannot be lexed to its end or
//     leaves a parenthesis open.
//
// A select-list item that is exactly CONNECTION_ID() without an alias gets
// its text as an alias, so the column keeps its name; so does a larger
// item holding CONNECTION_ID() (SELECT @a - CONNECTION_ID()) that has no
// alias and ends in a closing parenthesis, a number or an operand after
// an operator.
func RewriteGatewayIDs(sql string, noBackslash bool, id uint32, tables func(GatewayTable) string) (out string, ok bool) {
	if hasExecComment(sql) {
		return "", false
	}
	l := lexer{s: sql, noBackslash: noBackslash}
	var toks []token
	for t := l.next(); t.kind != tkEOF; t = l.next() {
		toks = append(toks, t)
	}
	if l.unterminated {
		return "", false
	}
	r := idRewriter{s: sql, toks: toks}
	if !r.check() {
		return "", false
	}
	var b strings.Builder
	last := 0
	var made [numGatewayTables]string
	for _, e := range r.edits {
		b.WriteString(sql[last:e.start])
		switch {
		case e.alias:
			b.WriteString(" AS `")
			b.WriteString(strings.ReplaceAll(sql[e.from:e.end], "`", "``"))
			b.WriteByte('`')
		case e.table:
			if made[e.which] == "" {
				made[e.which] = tables(e.which)
			}
			b.WriteByte('(')
			b.WriteString(made[e.which])
			b.WriteByte(')')
			if !e.aliased {
				b.WriteString(" AS ")
				b.WriteString(tableNames[e.which])
			}
		default:
			b.WriteString(uitoa(id))
			if !e.aliased {
				b.WriteString(" AS `")
				b.WriteString(strings.ReplaceAll(sql[e.start:e.end], "`", "``"))
				b.WriteByte('`')
			}
		}
		last = e.end
	}
	b.WriteString(sql[last:])
	return b.String(), true
}

// uitoa formats n in decimal.
func uitoa(n uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// idEdit is one replacement: CONNECTION_ID() or a PROCESSLIST table, from
// start to end. aliased: the text gives it a name of its own (for
// CONNECTION_ID(): it is not a bare select-list item). alias: nothing is
// replaced, an alias naming the select-list item's text, from from to
// end, is inserted at end (start == end).
type idEdit struct {
	start, end int
	table      bool
	which      GatewayTable // the table, when table
	aliased    bool
	alias      bool
	from       int
}

// listItem is the select-list item being read at one parenthesis depth:
// its first token, and whether it holds a CONNECTION_ID() that changes
// its name (it needs an alias of its text).
type listItem struct {
	start   int
	renamed bool
}

// idRewriter finds the replacements of RewriteGatewayIDs.
type idRewriter struct {
	s     string
	toks  []token
	edits []idEdit
	// attrs is set once a connect-attrs table was replaced; psID once
	// PROCESSLIST_ID was seen (a column of those tables, and of others).
	attrs, psID bool
	// inList[d] is set while the tokens at parenthesis depth d are in a
	// SELECT's select list; items[d] is then the item being read.
	inList []bool
	items  []listItem
}

// is reports whether token i exists and is the unquoted keyword kw.
func (r *idRewriter) is(i int, kw string) bool {
	if i < 0 || i >= len(r.toks) || r.toks[i].kind != tkIdent {
		return false
	}
	t := r.toks[i]
	return kwEq(r.s[t.start:t.end], kw)
}

// named reports whether token i exists and is the name n, quoted or not.
func (r *idRewriter) named(i int, n string) bool {
	if i < 0 || i >= len(r.toks) {
		return false
	}
	t := r.toks[i]
	w := r.s[t.start:t.end]
	switch t.kind {
	case tkIdent:
		return kwEq(w, n)
	case tkQuoted:
		return len(w) > 2 && kwEq(w[1:len(w)-1], n)
	}
	return false
}

// punct reports whether token i exists and is the punctuation byte c.
func (r *idRewriter) punct(i int, c byte) bool {
	return i >= 0 && i < len(r.toks) && isPunct(r.toks[i], c)
}

// rewritable are the statements whose CONNECTION_ID() and PROCESSLIST
// references run now, in the session.
var rewritable = []string{"SELECT", "WITH", "INSERT", "REPLACE", "UPDATE", "DELETE", "DO", "SET"}

// selectListEnd are the words that end a select list at its depth.
var selectListEnd = []string{"FROM", "INTO", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION",
	"EXCEPT", "INTERSECT", "FOR", "LOCK", "WINDOW", "PROCEDURE"}

// notAlias are the words that may follow a table reference and are not an
// alias of it.
var notAlias = []string{"WHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "JOIN", "INNER", "LEFT", "RIGHT",
	"CROSS", "NATURAL", "STRAIGHT_JOIN", "ON", "USING", "UNION", "EXCEPT", "INTERSECT", "FOR", "LOCK",
	"INTO", "WINDOW", "USE", "IGNORE", "FORCE", "PARTITION", "RETURNING", "SET", "OFFSET", "FETCH",
	"PROCEDURE", "FULL"}

// selectModifiers may stand between SELECT and the first select-list item.
var selectModifiers = []string{"ALL", "DISTINCT", "DISTINCTROW", "HIGH_PRIORITY", "STRAIGHT_JOIN",
	"SQL_SMALL_RESULT", "SQL_BIG_RESULT", "SQL_BUFFER_RESULT", "SQL_CACHE", "SQL_NO_CACHE",
	"SQL_CALC_FOUND_ROWS"}

// otherThreadIDs are names that bring backend thread ids into a statement.
var otherThreadIDs = []string{"IS_USED_LOCK", "IS_FREE_LOCK", "THREAD_ID", "PS_THREAD_ID",
	"PS_CURRENT_THREAD_ID", "METADATA_LOCK_INFO"}

// isAny reports whether token i is one of the unquoted keywords kws.
func (r *idRewriter) isAny(i int, kws []string) bool {
	for _, kw := range kws {
		if r.is(i, kw) {
			return true
		}
	}
	return false
}

// namedAny reports whether token i is one of the names ns, quoted or not.
func (r *idRewriter) namedAny(i int, ns []string) bool {
	for _, n := range ns {
		if r.named(i, n) {
			return true
		}
	}
	return false
}

// check walks the tokens, collecting edits; false: leave the text alone.
func (r *idRewriter) check() bool {
	r.inList = append(r.inList[:0], false)
	r.items = append(r.items[:0], listItem{})
	first := true // the next token starts a statement
	for i := 0; i < len(r.toks); i++ {
		t := r.toks[i]
		depth := len(r.inList) - 1
		if first {
			first = false
			if !r.isAny(i, rewritable) && !r.punct(i, '(') {
				return false
			}
		}
		switch t.kind {
		case tkPunct:
			switch t.ch() {
			case ';':
				if depth != 0 || !r.endItem(0, i) {
					return false
				}
				first = true
				r.inList[0] = false
			case '(':
				r.inList = append(r.inList, false)
				r.items = append(r.items, listItem{})
			case ')':
				if depth == 0 || !r.endItem(depth, i) {
					return false
				}
				r.inList, r.items = r.inList[:depth], r.items[:depth]
			case ',':
				if r.inList[depth] {
					if !r.endItem(depth, i) {
						return false
					}
					r.items[depth] = listItem{start: i + 1}
				}
			}
			continue
		case tkIdent, tkQuoted:
		default:
			continue
		}
		w := r.s[t.start:t.end]
		if t.kind == tkQuoted && len(w) > 2 {
			w = w[1 : len(w)-1]
		}
		if len(w) > 7 && kwEq(w[:7], "INNODB_") || r.namedAny(i, otherThreadIDs) {
			return false
		}
		if r.named(i, "PROCESSLIST_ID") {
			r.psID = true
			continue
		}
		if r.named(i, "PERFORMANCE_SCHEMA") {
			// Only its connect-attrs tables have the gateway's view.
			if !r.punct(i+1, '.') || !r.connectAttrs(i+2) {
				return false
			}
			i += 2
			continue
		}
		switch {
		case r.is(i, "SELECT"):
			r.inList[depth] = true
			j := i + 1
			for r.isAny(j, selectModifiers) {
				j++
			}
			r.items[depth] = listItem{start: j}
		case r.inList[depth] && r.isAny(i, selectListEnd):
			if !r.endItem(depth, i) {
				return false
			}
			r.inList[depth] = false
		case r.is(i, "CONNECTION_ID"):
			if !r.connectionID(i) {
				return false
			}
			i += 2
		case r.named(i, "PROCESSLIST") && r.punct(i-1, '.') && r.named(i-2, "INFORMATION_SCHEMA"):
			if !r.tableRef(i, TableProcessList) {
				return false
			}
		}
	}
	if len(r.inList) != 1 {
		return false // a parenthesis left open: the server refuses the text
	}
	if !r.endItem(0, len(r.toks)) {
		return false
	}
	// PROCESSLIST_ID of another table (performance_schema.threads read
	// from within the schema) is a backend thread id.
	return !r.psID || r.attrs
}

// endItem ends the select-list item at depth d, which ends before token
// end: when CONNECTION_ID() changed its name, it gets its text as an
// alias. False: the item's end cannot be told from an alias of its own.
func (r *idRewriter) endItem(d, end int) bool {
	it := r.items[d]
	if !r.inList[d] || !it.renamed {
		return true
	}
	r.items[d].renamed = false
	last, depth := -1, 0
	for j := it.start; j < end; j++ {
		switch {
		case r.punct(j, '('):
			depth++
		case r.punct(j, ')'):
			depth--
		case depth == 0 && r.is(j, "AS"):
			return true // it has its own name
		}
		if depth == 0 {
			last = j
		}
	}
	if last < it.start {
		return false
	}
	t := r.toks[last]
	switch {
	case (t.kind == tkIdent && !r.isAny(last, notAlias) || t.kind == tkQuoted || t.kind == tkString) &&
		last > it.start && r.punct(last-1, ')'):
		return true // f(...) name: it has its own name
	case r.punct(last, ')') || t.kind == tkNumber:
	case (t.kind == tkIdent || t.kind == tkQuoted || t.kind == tkParam) && last > it.start &&
		r.toks[last-1].kind == tkPunct && !r.punct(last-1, ')'):
		// an operand after an operator, not an alias
	default:
		return false
	}
	start, stop := int(r.toks[it.start].start), int(t.end)
	if stop-start > 256 {
		return false // longer than MariaDB's longest alias
	}
	r.edits = append(r.edits, idEdit{start: stop, end: stop, alias: true, from: start})
	return true
}

// connectAttrs records the edit for performance_schema's connect-attrs
// table named at token i, if it is one.
func (r *idRewriter) connectAttrs(i int) bool {
	switch {
	case r.named(i, "SESSION_CONNECT_ATTRS"):
		r.attrs = true
		return r.tableRef(i, TableConnectAttrs)
	case r.named(i, "SESSION_ACCOUNT_CONNECT_ATTRS"):
		r.attrs = true
		return r.tableRef(i, TableAccountConnectAttrs)
	}
	return false
}

// connectionID records the edit for CONNECTION_ID at token i.
func (r *idRewriter) connectionID(i int) bool {
	if r.punct(i-1, '.') || !r.punct(i+1, '(') || !r.punct(i+2, ')') {
		return false // a stored function of that name, or arguments
	}
	e := idEdit{start: int(r.toks[i].start), end: int(r.toks[i+2].end), aliased: true}
	depth := len(r.inList) - 1
	inAnyList := false
	for _, in := range r.inList {
		inAnyList = inAnyList || in
	}
	if inAnyList {
		// A whole select-list item keeps its name with an alias of its
		// own; the items it is part of, at this depth or outer ones
		// (subqueries), get theirs when they end.
		whole := r.inList[depth] && r.items[depth].start == i
		if whole {
			j := i + 3
			switch {
			case j == len(r.toks) || r.punct(j, ',') || r.punct(j, ')') || r.punct(j, ';') ||
				r.isAny(j, selectListEnd):
				e.aliased = false
			case r.is(j, "AS") || r.toks[j].kind == tkQuoted || r.toks[j].kind == tkString ||
				r.toks[j].kind == tkIdent && !r.isAny(j, notAlias):
			default:
				whole = false // an operator follows: part of a larger expression
			}
		}
		for d, in := range r.inList {
			if in && (d < depth || !whole) {
				r.items[d].renamed = true
			}
		}
	}
	r.edits = append(r.edits, e)
	return true
}

// tableRef records the edit for the schema-qualified table which, whose
// last token is i.
func (r *idRewriter) tableRef(i int, which GatewayTable) bool {
	if r.punct(i-3, '.') || r.punct(i+1, '.') {
		return false // a qualified column, or a strange name
	}
	if !(r.is(i-3, "FROM") || r.is(i-3, "JOIN") || r.punct(i-3, ',') || r.punct(i-3, '(')) {
		return false
	}
	if r.inList[len(r.inList)-1] {
		return false // in a select list: not a table
	}
	e := idEdit{start: int(r.toks[i-2].start), end: int(r.toks[i].end), table: true, which: which}
	j := i + 1
	e.aliased = j < len(r.toks) && (r.is(j, "AS") || r.toks[j].kind == tkQuoted ||
		r.toks[j].kind == tkIdent && !r.isAny(j, notAlias))
	r.edits = append(r.edits, e)
	return true
}

// isProcessList reports whether the quoted name q is `PROCESSLIST`.
func isProcessList(q string) bool {
	return len(q) == 13 && kwEq(q[1:12], "PROCESSLIST")
}

// isConnectAttrs reports whether w is SESSION_CONNECT_ATTRS or
// SESSION_ACCOUNT_CONNECT_ATTRS.
func isConnectAttrs(w string) bool {
	return kwEq(w, "SESSION_CONNECT_ATTRS") || kwEq(w, "SESSION_ACCOUNT_CONNECT_ATTRS")
}
