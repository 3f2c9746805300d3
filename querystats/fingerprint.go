package querystats

import (
	"strconv"
	"strings"
)

// Fingerprint is a statement's digest: the hash of its normalized text.
// Its zero value is no fingerprint.
type Fingerprint uint64

// String is the fingerprint as SHOW GATEWAY QUERIES and query rules spell
// it: 16 lower-case hex digits.
func (f Fingerprint) String() string {
	var b [16]byte
	return string(f.AppendHex(b[:0]))
}

// AppendHex appends the fingerprint's 16 hex digits to b.
func (f Fingerprint) AppendHex(b []byte) []byte {
	const hex = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		b = append(b, hex[(f>>uint(i))&0xf])
	}
	return b
}

// ParseFingerprint reads a fingerprint as String writes it.
func ParseFingerprint(s string) (Fingerprint, bool) {
	if len(s) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, 64)
	return Fingerprint(v), err == nil
}

// Normalizer turns statements into digest text and fingerprints. It keeps
// its output buffer between calls: one per session, not safe for
// concurrent use. The zero value works, with no length limit.
type Normalizer struct {
	// MaxLength caps the digest text in bytes: a statement whose text is
	// longer is hashed on its first MaxLength bytes of digest text. Zero
	// means no cap.
	MaxLength int
	buf       []byte
	// valuesEnd is the output offset just after a folded "values (...)"
	// row list (0 when none).
	valuesEnd int
}

// Normalize returns the digest text of sql and its fingerprint. The text
// is valid until the next call. The rules:
//
//   - string, number, hex and bit literals become ?, a sign in front of a
//     number included where it cannot be a subtraction;
//   - comments go, runs of white space become one space, and spacing
//     around punctuation and operators is made uniform;
//   - unquoted words are lower-cased (keywords, and also names: tables
//     differing only by case share a digest); `quoted` names are kept;
//   - a parenthesized list of literals only after IN or VALUES becomes
//     (...), and a VALUES list of such rows one row.
func (n *Normalizer) Normalize(sql string) ([]byte, Fingerprint) {
	n.buf = n.buf[:0]
	n.valuesEnd = 0
	n.scan(sql)
	if n.MaxLength > 0 && len(n.buf) > n.MaxLength {
		n.buf = n.buf[:n.MaxLength]
	}
	return n.buf, Fingerprint(hash(n.buf))
}

// hash is 64-bit FNV-1a.
func hash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// tok is the kind of the last token written, for spacing decisions.
type tok uint8

const (
	tNone    tok = iota
	tWord        // a word or quoted name
	tKeyword     // a word after which '(' is not a call (in, values, ...)
	tLiteral     // ?
	tOpen        // (
	tClose       // )
	tComma       // ,
	tDot         // .
	tOp          // an operator
)

// scan writes the digest text of sql to n.buf.
func (n *Normalizer) scan(s string) {
	last := tNone
	var opens [16]int // output offsets of open '(' (innermost last), up to 16 deep
	depth := 0
	for i := 0; i < len(s); {
		if n.MaxLength > 0 && len(n.buf) > n.MaxLength {
			return
		}
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#' || c == '-' && i+2 < len(s) && s[i+1] == '-' && isSpace(s[i+2]) || c == '-' && i+2 == len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return
			}
			i += end + 4
		case c == '\'' || c == '"':
			i = skipString(s, i)
			last = n.literal(last)
		case c == '`':
			j := i + 1
			for j < len(s) {
				if s[j] == '`' {
					if j+1 < len(s) && s[j+1] == '`' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(s))
			n.space(last, tWord)
			n.buf = append(n.buf, s[i:j]...)
			i, last = j, tWord
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]) && last != tWord && last != tClose:
			i = skipNumber(s, i)
			last = n.literal(last)
		case (c == 'x' || c == 'X' || c == 'b' || c == 'B' || c == 'n' || c == 'N') && i+1 < len(s) && s[i+1] == '\'':
			i = skipString(s, i+1)
			last = n.literal(last)
		case isWordByte(c):
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			last = n.word(s[i:j], last)
			i = j
		case c == '?':
			i++
			last = n.literal(last)
		case c == '(':
			n.space(last, tOpen)
			if depth < len(opens) {
				opens[depth] = len(n.buf)
			}
			depth++
			n.buf = append(n.buf, '(')
			i, last = i+1, tOpen
		case c == ')':
			n.buf = append(n.buf, ')')
			depth--
			if depth >= 0 && depth < len(opens) {
				n.foldList(opens[depth])
			}
			depth = max(depth, 0)
			i, last = i+1, tClose
		case c == ',':
			n.buf = append(n.buf, ',')
			i, last = i+1, tComma
		case c == '.':
			n.buf = append(n.buf, '.')
			i, last = i+1, tDot
		case (c == '-' || c == '+') && i+1 < len(s) && (isDigit(s[i+1]) || s[i+1] == '.') &&
			(last == tNone || last == tOp || last == tOpen || last == tComma || last == tKeyword):
			// A sign, not a subtraction: part of the literal.
			i = skipNumber(s, i+1)
			last = n.literal(last)
		case c == ';':
			n.buf = append(n.buf, ';')
			i, last = i+1, tComma
		default:
			j := i + 1
			for j < len(s) && isOpByte(s[j]) && isOpByte(c) && !(s[j] == '-' && j+1 < len(s) && (isDigit(s[j+1]) || s[j+1] == '.')) {
				j++ // (>=-1 is >= and -1)
			}
			n.space(last, tOp)
			n.buf = append(n.buf, s[i:j]...)
			i, last = j, tOp
		}
	}
}

// space writes the separator between the last token and the next one of
// kind next.
func (n *Normalizer) space(last, next tok) {
	switch {
	case last == tNone, last == tOpen, last == tDot, next == tDot:
	case next == tOpen && (last == tWord || last == tOpen):
		// A call: f(...)
	default:
		n.buf = append(n.buf, ' ')
	}
}

// literal writes a ?.
func (n *Normalizer) literal(last tok) tok {
	n.space(last, tLiteral)
	n.buf = append(n.buf, '?')
	return tLiteral
}

// word writes an unquoted word, lower-cased.
func (n *Normalizer) word(w string, last tok) tok {
	if last == tDot {
		n.buf = appendLower(n.buf, w)
		return tWord
	}
	n.space(last, tWord)
	start := len(n.buf)
	n.buf = appendLower(n.buf, w)
	switch string(n.buf[start:]) {
	case "in", "values", "value", "and", "or", "not", "exists", "as", "from", "join", "on", "where",
		"select", "using", "set", "any", "all", "into", "by", "when", "then", "else", "union", "is",
		"like", "between", "case", "having", "returning", "with":
		return tKeyword
	}
	return tWord
}

// foldList runs after a ')' closes the parenthesis opened at output
// offset open: a list of literals only, after IN or VALUES, becomes
// (...); a second row after a folded VALUES row goes.
func (n *Normalizer) foldList(open int) {
	inner := n.buf[open+1 : len(n.buf)-1]
	if len(inner) == 0 || !onlyLiterals(inner) {
		return
	}
	before := n.buf[:open]
	if len(before) > 0 && before[len(before)-1] == ' ' {
		before = before[:len(before)-1]
	}
	switch {
	case n.valuesEnd > 0 && len(before) == n.valuesEnd+1 && before[len(before)-1] == ',':
		// Another row of a folded VALUES list.
		n.buf = n.buf[:n.valuesEnd]
	case hasWordSuffix(before, "in"):
		n.buf = append(n.buf[:open], "(...)"...)
	case hasWordSuffix(before, "values"), hasWordSuffix(before, "value"):
		n.buf = append(n.buf[:open], "(...)"...)
		n.valuesEnd = len(n.buf)
	}
}

// onlyLiterals reports whether b is "?, ?, ..." (or "...", an inner
// folded list).
func onlyLiterals(b []byte) bool {
	for _, c := range b {
		if c != '?' && c != ',' && c != ' ' {
			return false
		}
	}
	return true
}

// hasWordSuffix reports whether b ends with the word w (lower case).
func hasWordSuffix(b []byte, w string) bool {
	if len(b) < len(w) || string(b[len(b)-len(w):]) != w {
		return false
	}
	return len(b) == len(w) || !isWordByte(b[len(b)-len(w)-1])
}

func appendLower(b []byte, w string) []byte {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isWordByte reports whether c may be part of an unquoted word (bytes of
// multi-byte UTF-8 characters included).
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_' || c == '$' || c == '@' || c >= 0x80
}

// isOpByte reports whether c is a byte of a multi-byte operator.
func isOpByte(c byte) bool {
	switch c {
	case '<', '>', '=', '!', ':', '|', '&', '-', '~', '^':
		return true
	}
	return false
}

// skipString returns the offset after the quoted string starting at i,
// with backslash escapes and doubled quotes.
func skipString(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

// skipNumber returns the offset after the number starting at i: digits,
// a fraction, an exponent, or a 0x / 0b literal.
func skipNumber(s string, i int) int {
	if i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X' || s[i+1] == 'b' || s[i+1] == 'B') {
		j := i + 2
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		return j
	}
	j := i
	for j < len(s) && (isDigit(s[j]) || s[j] == '.') {
		j++
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			j = k
			for j < len(s) && isDigit(s[j]) {
				j++
			}
		}
	}
	// 1abc is a name in MySQL; keep it a literal followed by a word only
	// when a digit run ends it.
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	return j
}
