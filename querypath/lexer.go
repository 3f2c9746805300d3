package querypath

// tokKind is the kind of a lexer token.
type tokKind uint8

const (
	tkEOF     tokKind = iota
	tkIdent           // unquoted word: a keyword or an identifier
	tkQuoted          // `quoted identifier`
	tkString          // 'string', "string", x'..', b'..', N'..'
	tkNumber          // 12, 1.5, 1e3, 0x1F, 0b01, .5
	tkUserVar         // @name, @'name', @"name", @`name`, or a bare @
	tkSysVar          // @@name, @@scope.name
	tkParam           // ?
	tkAssign          // :=
	tkPunct           // any other byte, in token.aux
)

// Scopes of a tkSysVar.
const (
	scopeNone uint8 = iota
	scopeSession
	scopeGlobal
	scopeOther
)

// token is one lexical token of a statement. Offsets index the lexed string,
// whose length Classify keeps below 2 GiB. It has at most four fields so that
// the compiler keeps it in registers.
type token struct {
	kind  tokKind
	start int32 // first byte
	end   int32 // one past the last byte
	aux   int32 // tkPunct: the byte; tkSysVar: offset of the name, after @@ and the scope
}

// ch returns the byte of a tkPunct token.
func (t token) ch() byte { return byte(t.aux) }

// sysVarScope returns the scope of a tkSysVar token.
func sysVarScope(s string, t token) uint8 {
	if int(t.aux) <= int(t.start)+3 {
		return scopeNone
	}
	switch w := s[t.start+2 : t.aux-1]; {
	case kwEq(w, "SESSION"), kwEq(w, "LOCAL"):
		return scopeSession
	case kwEq(w, "GLOBAL"):
		return scopeGlobal
	}
	return scopeOther
}

// lexer reads tokens from a statement without allocating. Comments are
// skipped; executable comments must have been expanded before (see
// expandComments): the lexer skips them like ordinary comments.
type lexer struct {
	s            string
	i            int
	noBackslash  bool  // NO_BACKSLASH_ESCAPES: '\' does not escape in strings
	hostCtx      bool  // user@host may appear unquoted (GRANT, CREATE USER, DEFINER=...)
	unterminated bool  // a string, quoted identifier or comment ran to the end
	prev         token // the previous token returned
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// identBytes marks the bytes that can be part of an unquoted identifier.
var identBytes = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '$' || c >= 0x80
	}
	return t
}()

// isIdentByte reports whether c can be part of an unquoted identifier.
func isIdentByte(c byte) bool { return identBytes[c] }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipSpace skips whitespace and comments and reports whether it skipped
// anything.
func (l *lexer) skipSpace() bool {
	skipped := false
	s := l.s
	for l.i < len(s) {
		c := s[l.i]
		switch {
		case c == ' ':
			l.i++
		case identBytes[c]:
			return skipped
		case isSpace(c):
			l.i++
		case c == '#':
			l.skipLine()
		case c == '-' && l.i+1 < len(s) && s[l.i+1] == '-' &&
			(l.i+2 == len(s) || s[l.i+2] <= ' '):
			l.skipLine()
		case c == '/' && l.i+1 < len(s) && s[l.i+1] == '*':
			end := indexFrom(s, l.i+2, "*/")
			if end < 0 {
				l.unterminated = true
				l.i = len(s)
			} else {
				l.i = end + 2
			}
		default:
			return skipped
		}
		skipped = true
	}
	return skipped
}

func (l *lexer) skipLine() {
	for l.i < len(l.s) && l.s[l.i] != '\n' {
		l.i++
	}
}

// indexFrom is strings.Index(s[from:], sub)+from, or -1.
func indexFrom(s string, from int, sub string) int {
	for i := from; i+len(sub) <= len(s); i++ {
		if s[i] == sub[0] && s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// skipQuoted skips a quoted string or identifier whose opening quote is at
// l.i. Doubled quotes continue it; so does a backslash escape in strings
// unless noBackslash is set.
func (l *lexer) skipQuoted() {
	s := l.s
	q := s[l.i]
	l.i++
	for l.i < len(s) {
		c := s[l.i]
		switch {
		case c == '\\' && q != '`' && !l.noBackslash:
			l.i += 2
		case c == q:
			if l.i+1 < len(s) && s[l.i+1] == q {
				l.i += 2
				continue
			}
			l.i++
			return
		default:
			l.i++
		}
	}
	l.i = len(s)
	l.unterminated = true
}

func (l *lexer) skipIdent() {
	s, i := l.s, l.i
	for i < len(s) && identBytes[s[i]] {
		i++
	}
	l.i = i
}

// next returns the next token, tkEOF at the end.
func (l *lexer) next() token {
	t := l.scan()
	l.prev = t
	return t
}

func (l *lexer) scan() token {
	// The token is built from locals: filling a token in memory field by field
	// and then copying it whole stalls the CPU (failed store forwarding).
	l.skipSpace()
	s := l.s
	start := int32(l.i)
	if l.i >= len(s) {
		return token{kind: tkEOF, start: start, end: start}
	}
	var kind tokKind
	var ch byte
	c := s[l.i]
	switch {
	case identBytes[c] && !isDigit(c):
		l.skipIdent()
		kind = tkIdent
		// x'..', b'..', N'..': a literal with a prefix.
		if l.i-int(start) == 1 && l.i < len(s) && s[l.i] == '\'' {
			switch c | 0x20 {
			case 'x', 'b', 'n':
				l.skipQuoted()
				kind = tkString
			}
		}
	case c == '\'' || c == '"':
		l.skipQuoted()
		kind = tkString
	case c == '`':
		l.skipQuoted()
		kind = tkQuoted
	case isDigit(c) || c == '.' && l.i+1 < len(s) && isDigit(s[l.i+1]) &&
		!(int(l.prev.end) == l.i && (l.prev.kind == tkIdent || l.prev.kind == tkQuoted)):
		kind = l.scanNumber()
	case c == '@':
		return l.scanAt(start)
	case c == '?':
		l.i++
		kind = tkParam
	case c == ':' && l.i+1 < len(s) && s[l.i+1] == '=':
		l.i += 2
		kind = tkAssign
	default:
		l.i++
		kind = tkPunct
		ch = c
	}
	return token{kind: kind, start: start, end: int32(l.i), aux: int32(ch)}
}

// scanNumber reads a number starting at l.i. A run of digits followed by
// identifier bytes is an identifier (MariaDB allows 1abc as a name).
func (l *lexer) scanNumber() tokKind {
	s := l.s
	if s[l.i] == '0' && l.i+2 < len(s) && (s[l.i+1]|0x20 == 'x' && isHexDigit(s[l.i+2]) ||
		s[l.i+1]|0x20 == 'b' && (s[l.i+2] == '0' || s[l.i+2] == '1')) {
		l.i += 2
		for l.i < len(s) && isHexDigit(s[l.i]) {
			l.i++
		}
	} else {
		for l.i < len(s) && isDigit(s[l.i]) {
			l.i++
		}
		if l.i < len(s) && s[l.i] == '.' {
			l.i++
			for l.i < len(s) && isDigit(s[l.i]) {
				l.i++
			}
		}
		if l.i+1 < len(s) && s[l.i]|0x20 == 'e' {
			j := l.i + 1
			if s[j] == '+' || s[j] == '-' {
				j++
			}
			if j < len(s) && isDigit(s[j]) {
				l.i = j
				for l.i < len(s) && isDigit(s[l.i]) {
					l.i++
				}
			}
		}
	}
	if l.i < len(s) && isIdentByte(s[l.i]) {
		l.skipIdent()
		return tkIdent
	}
	return tkNumber
}

// scanAt reads a token starting with '@' at offset start: a system variable,
// a user variable or the separator of user@host.
func (l *lexer) scanAt(start int32) token {
	s := l.s
	l.i++
	if l.i < len(s) && s[l.i] == '@' {
		l.i++
		nameS := int32(l.i)
		l.scanName()
		if l.i < len(s) && s[l.i] == '.' && l.i > int(nameS) {
			l.i++
			nameS = int32(l.i)
			l.scanName()
		}
		return token{kind: tkSysVar, start: start, end: int32(l.i), aux: nameS}
	}
	p := l.prev
	if p.end == start && p.kind != tkEOF && start > 0 {
		// 'user'@'host', `user`@`host`, and in user-administration
		// statements user@host.
		if p.kind == tkString || p.kind == tkQuoted ||
			p.kind == tkIdent && l.hostCtx && !isVarKeyword(s[p.start:p.end]) {
			return token{kind: tkPunct, start: start, end: int32(l.i), aux: '@'}
		}
	}
	if l.i < len(s) && (s[l.i] == '\'' || s[l.i] == '"' || s[l.i] == '`') {
		l.skipQuoted()
	} else {
		for l.i < len(s) && (identBytes[s[l.i]] || s[l.i] == '.') {
			l.i++
		}
	}
	return token{kind: tkUserVar, start: start, end: int32(l.i)}
}

// scanName reads an unquoted or `quoted` name.
func (l *lexer) scanName() {
	if l.i < len(l.s) && l.s[l.i] == '`' {
		l.skipQuoted()
		return
	}
	l.skipIdent()
}

// isVarKeyword reports whether w is a keyword after which '@' starts a user
// variable even without a space (SELECT@x, SET@x=1).
func isVarKeyword(w string) bool {
	switch len(w) {
	case 2:
		return kwEq(w, "OR") || kwEq(w, "IN") || kwEq(w, "IS") || kwEq(w, "BY") ||
			kwEq(w, "ON") || kwEq(w, "DO") || kwEq(w, "IF")
	case 3:
		return kwEq(w, "SET") || kwEq(w, "AND") || kwEq(w, "NOT") || kwEq(w, "XOR")
	case 4:
		return kwEq(w, "INTO") || kwEq(w, "THEN") || kwEq(w, "ELSE") || kwEq(w, "WHEN") ||
			kwEq(w, "LIKE") || kwEq(w, "CASE") || kwEq(w, "CALL")
	case 5:
		return kwEq(w, "WHERE") || kwEq(w, "VALUE") || kwEq(w, "LIMIT") || kwEq(w, "USING")
	case 6:
		return kwEq(w, "SELECT") || kwEq(w, "VALUES") || kwEq(w, "RETURN") || kwEq(w, "HAVING")
	}
	return false
}

// kwEq reports whether w equals the upper-case keyword kw, ignoring ASCII
// case.
func kwEq(w, kw string) bool {
	if len(w) != len(kw) {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != kw[i] {
			return false
		}
	}
	return true
}

// text returns the source text of t.
func (l *lexer) text(t token) string { return l.s[t.start:t.end] }

// is reports whether t is the unquoted keyword kw (upper case).
func (l *lexer) is(t token, kw string) bool {
	return t.kind == tkIdent && kwEq(l.s[t.start:t.end], kw)
}

// isPunct reports whether t is the punctuation byte c.
func isPunct(t token, c byte) bool { return t.kind == tkPunct && t.ch() == c }
