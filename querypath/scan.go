package querypath

// headSize is how many leading tokens of a statement are kept for the
// statement-level decisions.
const headSize = 12

// features are the facts the lexer finds anywhere in a statement.
type features struct {
	pin          Pin
	unpin        Pin
	readsLast    bool // LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS(), LASTVAL(), PREVIOUS VALUE FOR, @@identity
	showWarnings bool // @@warning_count, @@error_count
	sideEffect   bool // := assignment, GET_LOCK(), NEXTVAL(), LAST_INSERT_ID(expr), ...
	lockClause   bool // FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE
	into         bool // an INTO keyword
	intoFile     bool // INTO OUTFILE / INTO DUMPFILE
	nextSyntax   bool // NEXT VALUE / NEXT n VALUES
	gatewayIDs   bool // CONNECTION_ID(), .PROCESSLIST (information_schema's), .SESSION_[ACCOUNT_]CONNECT_ATTRS
}

func (f *features) or(g features) {
	f.pin |= g.pin
	f.unpin |= g.unpin
	f.readsLast = f.readsLast || g.readsLast
	f.showWarnings = f.showWarnings || g.showWarnings
	f.sideEffect = f.sideEffect || g.sideEffect
	f.lockClause = f.lockClause || g.lockClause
	f.into = f.into || g.into
	f.intoFile = f.intoFile || g.intoFile
	f.nextSyntax = f.nextSyntax || g.nextSyntax
	f.gatewayIDs = f.gatewayIDs || g.gatewayIDs
}

// stmt is one statement of a text, as seen by the lexer.
type stmt struct {
	s            string // the whole text
	start        int    // offset of the statement's first byte
	end          int    // offset of the ';' or of the end of the text
	lastEnd      int    // end offset of the last token
	head         [headSize]token
	n            int // tokens in head
	count        int // tokens in the statement
	f            features
	more         bool // another statement follows
	next         int  // offset of the next statement's first token
	compound     bool // a compound statement or stored program definition: ';' does not end it
	unterminated bool // a string or comment runs to the end of the text
	noBackslash  bool // lexed with NO_BACKSLASH_ESCAPES
}

// word returns the text of head token i, or "" when the statement has fewer
// tokens or the token is not an unquoted word.
func (st *stmt) word(i int) string {
	if i >= st.n || st.head[i].kind != tkIdent {
		return ""
	}
	t := st.head[i]
	return st.s[t.start:t.end]
}

// kw reports whether head token i is the unquoted keyword kw.
func (st *stmt) kw(i int, kw string) bool {
	return i < st.n && st.head[i].kind == tkIdent && kwEq(st.s[st.head[i].start:st.head[i].end], kw)
}

// punct reports whether head token i is the punctuation byte c.
func (st *stmt) punct(i int, c byte) bool {
	return i < st.n && isPunct(st.head[i], c)
}

// scanStmt lexes the statement that starts at offset from of s.
func scanStmt(st *stmt, s string, from int, noBackslash bool) {
	*st = stmt{s: s, start: from, noBackslash: noBackslash}
	l := lexer{s: s, i: from, noBackslash: noBackslash}
	var p1, p2 token // the two previous tokens
	lii := false     // previous tokens were LAST_INSERT_ID (
	decided := false // compound decided
	depth := 0       // BEGIN/CASE ... END nesting, used in compound statements
	for {
		t := l.next()
		if t.kind == tkEOF {
			st.end = int(t.start)
			break
		}
		if isPunct(t, ';') {
			if st.count == 0 {
				// An empty statement: skip it.
				continue
			}
			if !decided {
				st.compound = isCompound(st)
				decided = true
			}
			if !st.compound || depth <= 0 {
				st.end = int(t.start)
				for {
					u := l.next()
					if u.kind == tkEOF {
						break
					}
					if isPunct(u, ';') {
						continue
					}
					st.more = true
					st.next = int(u.start)
					break
				}
				break
			}
		}
		if st.n < headSize {
			st.head[st.n] = t
			st.n++
			if st.n <= 2 {
				l.hostCtx = hostContext(st)
			}
		}
		if st.count == 0 {
			st.start = int(t.start)
		}
		st.count++
		st.lastEnd = int(t.end)
		if lii {
			lii = false
			if isPunct(t, ')') {
				st.f.readsLast = true
			} else {
				st.f.pin |= PinLastResult
				st.f.sideEffect = true
			}
		}
		switch t.kind {
		case tkUserVar:
			st.f.pin |= PinUserVar
		case tkAssign:
			st.f.sideEffect = true
		case tkSysVar:
			sysVarFeature(&st.f, s[t.aux:t.end])
		case tkPunct:
			switch {
			case t.ch() != '(' || isPunct(p2, '.'):
			case p1.kind == tkIdent:
				lii = funcFeature(&st.f, s[p1.start:p1.end])
			case p1.kind == tkQuoted && p1.end-p1.start > 2:
				// `GET_LOCK`(...) is still the built-in.
				lii = funcFeature(&st.f, s[p1.start+1:p1.end-1])
			}
		case tkIdent:
			depth += identFeature(&st.f, &l, p2, p1, t)
		case tkQuoted:
			if q := s[t.start:t.end]; isPunct(p1, '.') && (isProcessList(q) || len(q) > 2 && isConnectAttrs(q[1:len(q)-1])) {
				st.f.gatewayIDs = true
			}
		}
		p2, p1 = p1, t
	}
	if lii {
		st.f.pin |= PinLastResult
		st.f.sideEffect = true
	}
	if st.count == 0 {
		st.start = st.end
	}
	st.unterminated = l.unterminated
	if !decided {
		st.compound = isCompound(st)
	}
}

// sysVarFeature records what reading the system variable name implies.
func sysVarFeature(f *features, name string) {
	if len(name) > 1 && name[0] == '`' {
		name = name[1 : len(name)-1]
	}
	switch {
	case kwEq(name, "WARNING_COUNT"), kwEq(name, "ERROR_COUNT"):
		f.showWarnings = true
	case kwEq(name, "IDENTITY"), kwEq(name, "LAST_INSERT_ID"), kwEq(name, "LAST_GTID"):
		f.readsLast = true
	}
}

// funcFeature records what calling the built-in function name implies. It
// returns true for LAST_INSERT_ID, whose meaning depends on its arguments.
func funcFeature(f *features, name string) bool {
	switch len(name) {
	case 6:
		if kwEq(name, "SETVAL") {
			f.sideEffect = true
			f.pin |= PinLastResult
		}
	case 7:
		switch {
		case kwEq(name, "LASTVAL"):
			f.readsLast = true
		case kwEq(name, "NEXTVAL"):
			f.sideEffect = true
			f.pin |= PinLastResult
		}
	case 8:
		if kwEq(name, "GET_LOCK") {
			f.pin |= PinLock
			f.sideEffect = true
		}
	case 9:
		if kwEq(name, "ROW_COUNT") {
			f.readsLast = true
		}
	case 10:
		if kwEq(name, "FOUND_ROWS") {
			f.readsLast = true
			f.unpin |= PinFoundRows
		}
	case 12:
		if kwEq(name, "RELEASE_LOCK") {
			// Not an unpin: the session may hold other locks, whose
			// names the classifier does not follow.
			f.sideEffect = true
		}
	case 13:
		if kwEq(name, "CONNECTION_ID") {
			f.gatewayIDs = true
		}
	case 14:
		return kwEq(name, "LAST_INSERT_ID")
	case 17:
		if kwEq(name, "RELEASE_ALL_LOCKS") {
			f.unpin |= PinLock
			f.sideEffect = true
		}
	}
	return false
}

// identFeature records what the word t implies given the two tokens before
// it, and returns how it changes the BEGIN/CASE ... END nesting that matters
// in compound statements.
func identFeature(f *features, l *lexer, p2, p1, t token) (depth int) {
	w := l.s[t.start:t.end]
	switch len(w) {
	case 2:
		if kwEq(w, "IF") && statementStart(l, p1) {
			return 1
		}
	case 3:
		switch {
		case kwEq(w, "END"):
			return -1
		case kwEq(w, "FOR"):
			if statementStart(l, p1) {
				return 1
			}
			if l.is(p1, "VALUE") {
				switch {
				case l.is(p2, "NEXT"):
					f.nextSyntax = true
					f.sideEffect = true
					f.pin |= PinLastResult
				case l.is(p2, "PREVIOUS"):
					f.readsLast = true
				}
			}
		}
	case 4:
		switch {
		case kwEq(w, "INTO"):
			f.into = true
		case kwEq(w, "CASE"):
			if !l.is(p1, "END") {
				return 1
			}
		case kwEq(w, "LOOP"):
			if statementStart(l, p1) {
				return 1
			}
		}
	case 5:
		switch {
		case kwEq(w, "SHARE"):
			if l.is(p1, "FOR") || l.is(p1, "IN") && l.is(p2, "LOCK") {
				f.lockClause = true
			}
		case kwEq(w, "VALUE"):
			if l.is(p1, "NEXT") {
				f.nextSyntax = true
			}
		case kwEq(w, "BEGIN"):
			return 1
		case kwEq(w, "WHILE"):
			if statementStart(l, p1) {
				return 1
			}
		}
	case 6:
		switch {
		case kwEq(w, "UPDATE"):
			if l.is(p1, "FOR") {
				f.lockClause = true
			}
		case kwEq(w, "VALUES"):
			if l.is(p2, "NEXT") || l.is(p1, "NEXT") {
				f.nextSyntax = true
			}
		case kwEq(w, "REPEAT"):
			if statementStart(l, p1) {
				return 1
			}
		}
	case 7:
		switch {
		case kwEq(w, "OUTFILE"):
			if l.is(p1, "INTO") {
				f.intoFile = true
			}
		case kwEq(w, "DEFINER"):
			l.hostCtx = true
		}
	case 8:
		if kwEq(w, "DUMPFILE") && l.is(p1, "INTO") {
			f.intoFile = true
		}
	case 11:
		if isPunct(p1, '.') && kwEq(w, "PROCESSLIST") {
			f.gatewayIDs = true
		}
	case 19:
		if kwEq(w, "SQL_CALC_FOUND_ROWS") {
			f.pin |= PinFoundRows
		}
	case 21, 29:
		if isPunct(p1, '.') && isConnectAttrs(w) {
			f.gatewayIDs = true
		}
	}
	return 0
}

// statementStart reports whether a word after p1 starts a statement inside
// a compound statement, where IF, LOOP, WHILE, REPEAT and FOR open blocks that
// END closes (END IF, END LOOP, ...). BEGIN and CASE always open one.
func statementStart(l *lexer, p1 token) bool {
	switch p1.kind {
	case tkEOF:
		return true
	case tkPunct:
		return p1.ch() == ';' || p1.ch() == ':'
	case tkIdent:
		w := l.s[p1.start:p1.end]
		return kwEq(w, "BEGIN") || kwEq(w, "THEN") || kwEq(w, "ELSE") || kwEq(w, "DO") ||
			kwEq(w, "LOOP") || kwEq(w, "REPEAT") || kwEq(w, "ATOMIC") || kwEq(w, "ROW")
	}
	return false
}

// hostContext reports whether unquoted user@host may appear in the statement
// whose first tokens are in st.head.
func hostContext(st *stmt) bool {
	w := st.word(0)
	switch len(w) {
	case 3:
		return kwEq(w, "SET") && (st.kw(1, "PASSWORD") || st.kw(1, "DEFAULT"))
	case 4:
		return kwEq(w, "DROP") || kwEq(w, "SHOW")
	case 5:
		return kwEq(w, "GRANT") || kwEq(w, "ALTER")
	case 6:
		return kwEq(w, "REVOKE") || kwEq(w, "CREATE") || kwEq(w, "RENAME")
	}
	return false
}

// isCompound reports whether st starts a compound statement (BEGIN NOT
// ATOMIC, IF, CASE, LOOP, WHILE, REPEAT, FOR, a label) or a stored program
// definition, inside which ';' does not end the statement.
func isCompound(st *stmt) bool {
	if st.n == 0 {
		return false
	}
	w := st.word(0)
	switch {
	case kwEq(w, "BEGIN"):
		return st.kw(1, "NOT")
	case kwEq(w, "IF"), kwEq(w, "CASE"), kwEq(w, "LOOP"), kwEq(w, "WHILE"), kwEq(w, "REPEAT"), kwEq(w, "FOR"):
		return true
	case kwEq(w, "CREATE"):
		return storedProgram(st)
	}
	// label: BEGIN ...
	return st.n > 2 && (st.head[0].kind == tkIdent || st.head[0].kind == tkQuoted) && st.punct(1, ':')
}

// storedProgram reports whether a CREATE statement defines a procedure,
// function, trigger, event or package.
func storedProgram(st *stmt) bool {
	i := 1
	if st.kw(i, "OR") && st.kw(i+1, "REPLACE") {
		i += 2
	}
	if st.kw(i, "DEFINER") && st.punct(i+1, '=') {
		i += 2
		switch {
		case st.kw(i, "CURRENT_USER"), st.kw(i, "CURRENT_ROLE"):
			i++
			if st.punct(i, '(') && st.punct(i+1, ')') {
				i += 2
			}
		default:
			i++ // user
			if st.punct(i, '@') {
				i += 2 // host
			}
		}
	}
	if st.kw(i, "AGGREGATE") {
		i++
	}
	return st.kw(i, "PROCEDURE") || st.kw(i, "FUNCTION") || st.kw(i, "TRIGGER") ||
		st.kw(i, "EVENT") || st.kw(i, "PACKAGE")
}
