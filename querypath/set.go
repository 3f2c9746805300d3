package querypath

import "strings"

// setParser walks the tokens of one SET statement.
type setParser struct {
	l   lexer
	end int   // offset where the statement ends
	tok token // current token
}

func (p *setParser) advance() {
	t := p.l.next()
	if t.kind != tkEOF && int(t.start) >= p.end {
		t = token{kind: tkEOF, start: int32(p.end), end: int32(p.end)}
	}
	p.tok = t
}

func (p *setParser) is(kw string) bool { return p.l.is(p.tok, kw) }

// value reads a value expression up to a ',' outside parentheses or the end.
// It returns the expression's text and whether it is a literal.
func (p *setParser) value() (text string, literal, ok bool) {
	first, last := p.tok, p.tok
	n, depth := 0, 0
	allStrings := true // every token is a string literal
	for p.tok.kind != tkEOF {
		t := p.tok
		if depth == 0 && isPunct(t, ',') {
			break
		}
		switch {
		case isPunct(t, '('):
			depth++
		case isPunct(t, ')'):
			depth--
		}
		if t.kind != tkString {
			allStrings = false
		}
		last = t
		n++
		p.advance()
	}
	if n == 0 {
		return "", false, false
	}
	text = p.l.s[first.start:last.end]
	switch {
	case n == 1:
		switch first.kind {
		case tkNumber, tkString, tkQuoted:
			literal = true
		case tkIdent:
			literal = !nonLiteralKeyword(text)
		}
	case allStrings:
		literal = true // 'a' 'b' is one string
	case n == 2:
		literal = (isPunct(first, '-') || isPunct(first, '+')) && last.kind == tkNumber
	}
	return text, literal, true
}

// nonLiteralKeyword reports whether the bare word w is a function that needs
// no parentheses, whose value differs between connections or over time.
func nonLiteralKeyword(w string) bool {
	for _, kw := range [...]string{
		"CURRENT_TIMESTAMP", "CURRENT_DATE", "CURRENT_TIME", "CURRENT_USER", "CURRENT_ROLE",
		"LOCALTIME", "LOCALTIMESTAMP", "UTC_DATE", "UTC_TIME", "UTC_TIMESTAMP",
	} {
		if kwEq(w, kw) {
			return true
		}
	}
	return false
}

// nextTxnVar reports whether a SET of name without GLOBAL or SESSION changes
// only the next transaction.
func nextTxnVar(name string) bool {
	switch name {
	case "tx_isolation", "tx_read_only", "transaction_isolation", "transaction_read_only":
		return true
	}
	return false
}

// unreplayableVar reports whether a session variable cannot be replayed on
// another connection: it feeds the binary log, replication or the next
// statement's results, or exists for debugging.
func unreplayableVar(name string) bool {
	switch name {
	case "sql_log_bin", "last_insert_id", "insert_id", "identity", "rand_seed1", "rand_seed2",
		"server_id", "wsrep_on", "sql_slave_skip_counter":
		return true
	}
	return strings.HasPrefix(name, "gtid_") || strings.HasPrefix(name, "pseudo_") ||
		strings.HasPrefix(name, "debug")
}

// truthy reports whether a literal SET value turns a boolean variable on.
func truthy(v string) bool {
	return v == "1" || kwEq(v, "ON") || kwEq(v, "TRUE") || v == "'1'" || kwEq(v, "'ON'")
}

// setRoute classifies a SET statement.
func (c *Classifier) setRoute(st *stmt, depth int) Route {
	r := st.base()
	bad := func() Route {
		b := st.base()
		b.Pin |= PinUnreplayable
		b.SetsGlobal = headSetsGlobal(st)
		return b
	}
	p := setParser{l: lexer{s: st.s, i: st.start, noBackslash: st.noBackslash}, end: st.end}
	p.advance() // SET
	p.advance()
	switch {
	case p.is("STATEMENT"):
		return c.setStatement(st, &p, depth)
	case p.is("PASSWORD"):
		r.ImplicitCommit = true
		return r
	case p.is("ROLE"):
		r.Pin |= PinUnreplayable
		return r
	case p.is("DEFAULT") && st.kw(2, "ROLE"):
		return r
	}
	scope := scopeNone // sticky: applies to the following assignments too
	changes := false   // the statement changes session state
	for {
		switch {
		case p.is("GLOBAL"), p.is("PERSIST"), p.is("PERSIST_ONLY"):
			scope = scopeGlobal
			p.advance()
		case p.is("SESSION"), p.is("LOCAL"):
			scope = scopeSession
			p.advance()
		}
		if p.is("TRANSACTION") {
			if !p.transaction(&r, scope) {
				return bad()
			}
			changes = changes || scope != scopeGlobal
			r.SetsGlobal = r.SetsGlobal || scope == scopeGlobal
		} else {
			var name string
			vscope := scope
			user, special := false, false
			t := p.tok
			switch t.kind {
			case tkUserVar:
				user = true
			case tkSysVar:
				name = st.s[t.aux:t.end]
				vscope = sysVarScope(st.s, t)
			case tkIdent, tkQuoted:
				name = st.s[t.start:t.end]
				switch {
				case p.is("NAMES"):
					name, special = "names", true
				case p.is("CHARSET"):
					name, special = "character set", true
				case p.is("CHARACTER"):
					p.advance()
					if !p.is("SET") {
						return bad()
					}
					name, special = "character set", true
				}
			default:
				return bad()
			}
			p.advance()
			if !special {
				if isPunct(p.tok, '.') && !user {
					// A structured variable (keycache.key_buffer_size): global.
					p.advance()
					vscope = scopeGlobal
					p.advance()
				}
				if !isPunct(p.tok, '=') && p.tok.kind != tkAssign {
					return bad()
				}
				p.advance()
			}
			val, literal, ok := p.value()
			if !ok {
				return bad()
			}
			switch {
			case user:
				changes = true
			case special:
				literal = namesLiteral(&p, val)
				r.Vars = append(r.Vars, SetVar{Name: name, Value: val, Literal: literal})
				changes = changes || vscope != scopeGlobal
			default:
				name = strings.ToLower(unquoteIdent(name))
				if name == "" {
					return bad()
				}
				switch {
				case vscope == scopeGlobal || vscope == scopeOther:
					r.SetsGlobal = true
				case vscope == scopeNone && nextTxnVar(name):
					r.NextTxn = true
					changes = true
				case unreplayableVar(name):
					r.Pin |= PinUnreplayable
					changes = true
				default:
					r.Vars = append(r.Vars, SetVar{Name: name, Value: val, Literal: literal})
					changes = true
					if name == "autocommit" && literal && truthy(val) {
						r.ImplicitCommit = true
					}
				}
			}
		}
		if p.tok.kind == tkEOF {
			break
		}
		if !isPunct(p.tok, ',') {
			return bad()
		}
		p.advance()
	}
	if changes {
		r.Kind = KindSet
	} else {
		r.Vars = nil
	}
	return r
}

// headSetsGlobal reports whether the first tokens of a SET the parser
// could not read name a global scope (GLOBAL, PERSIST, @@global.x).
func headSetsGlobal(st *stmt) bool {
	for i := 1; i < st.n; i++ {
		t := st.head[i]
		if st.kw(i, "GLOBAL") || st.kw(i, "PERSIST") || st.kw(i, "PERSIST_ONLY") ||
			t.kind == tkSysVar && sysVarScope(st.s, t) == scopeGlobal {
			return true
		}
	}
	return false
}

// namesLiteral reports whether the value of SET NAMES or SET CHARACTER SET is
// literal: DEFAULT, or a charset name with an optional COLLATE name.
func namesLiteral(p *setParser, val string) bool {
	l := lexer{s: val, noBackslash: p.l.noBackslash}
	t := l.next()
	if t.kind != tkIdent && t.kind != tkString && t.kind != tkQuoted {
		return false
	}
	t = l.next()
	if t.kind == tkEOF {
		return true
	}
	if !l.is(t, "COLLATE") {
		return false
	}
	t = l.next()
	if t.kind != tkIdent && t.kind != tkString && t.kind != tkQuoted {
		return false
	}
	return l.next().kind == tkEOF
}

// transaction reads [GLOBAL|SESSION] TRANSACTION characteristic, ... with the
// parser on TRANSACTION. It reports false on a syntax error.
func (p *setParser) transaction(r *Route, scope uint8) bool {
	p.advance()
	for {
		var name, val string
		switch {
		case p.is("ISOLATION"):
			p.advance()
			if !p.is("LEVEL") {
				return false
			}
			p.advance()
			switch {
			case p.is("READ"):
				p.advance()
				switch {
				case p.is("UNCOMMITTED"):
					val = "'READ-UNCOMMITTED'"
				case p.is("COMMITTED"):
					val = "'READ-COMMITTED'"
				default:
					return false
				}
			case p.is("REPEATABLE"):
				p.advance()
				if !p.is("READ") {
					return false
				}
				val = "'REPEATABLE-READ'"
			case p.is("SERIALIZABLE"):
				val = "'SERIALIZABLE'"
			default:
				return false
			}
			name = "tx_isolation"
		case p.is("READ"):
			p.advance()
			switch {
			case p.is("ONLY"):
				val = "ON"
			case p.is("WRITE"):
				val = "OFF"
			default:
				return false
			}
			name = "tx_read_only"
		default:
			return false
		}
		p.advance()
		switch scope {
		case scopeGlobal:
		case scopeSession:
			r.Vars = append(r.Vars, SetVar{Name: name, Value: val, Literal: true})
		default:
			r.NextTxn = true
		}
		if !isPunct(p.tok, ',') {
			return true
		}
		// Another characteristic, unless the comma starts another assignment.
		save := *p
		p.advance()
		if !p.is("ISOLATION") && !p.is("READ") {
			*p = save
			return true
		}
	}
}

// setStatement classifies SET STATEMENT var=value, ... FOR statement: the
// variables change for that one statement only, so it is classified as the
// statement, plus what the values imply.
func (c *Classifier) setStatement(st *stmt, p *setParser, depth int) Route {
	parens := 0
	var prev token
	for ; p.tok.kind != tkEOF && depth < maxDepth; p.advance() {
		switch {
		case isPunct(p.tok, '('):
			parens++
		case isPunct(p.tok, ')'):
			parens--
		case parens == 0 && p.is("FOR") && !p.l.is(prev, "VALUE"):
			in := c.classify(st.s[p.tok.end:st.end], depth+1)
			in.Pin |= st.f.pin
			in.ReadsLastResult = in.ReadsLastResult || st.f.readsLast
			in.Unpin &^= in.Pin
			in.SetStatement = true
			return in
		}
		prev = p.tok
	}
	r := st.base()
	r.Pin |= PinUnreplayable
	return r
}
