package querypath

import "strings"

// BindParams returns sql with its ? placeholders replaced, in order, by
// literals: the text of a prepared statement with its parameters bound,
// for a server that only takes text queries. Placeholders are found as
// MariaDB finds them: outside strings, quoted identifiers and comments;
// inside executable comments that run (the text is returned with those
// expanded). A literal gets a space on either side where it would
// otherwise touch a token it could merge with. ok is false when sql
// does not hold exactly len(literals) placeholders.
func BindParams(sql string, noBackslash bool, literals []string) (bound string, ok bool) {
	if hasExecComment(sql) {
		sql = expandComments(sql, noBackslash)
	}
	l := lexer{s: sql, noBackslash: noBackslash}
	var b strings.Builder
	size := len(sql)
	for _, lit := range literals {
		size += len(lit) + 1
	}
	b.Grow(size)
	last, n := 0, 0
	for t := l.next(); t.kind != tkEOF; t = l.next() {
		if t.kind != tkParam {
			continue
		}
		if n == len(literals) {
			return "", false
		}
		b.WriteString(sql[last:t.start])
		if t.start > 0 && !separates(sql[t.start-1]) {
			b.WriteByte(' ')
		}
		b.WriteString(literals[n])
		if int(t.end) < len(sql) && !separates(sql[t.end]) {
			b.WriteByte(' ')
		}
		last = int(t.end)
		n++
	}
	if n != len(literals) {
		return "", false
	}
	b.WriteString(sql[last:])
	return b.String(), true
}

// separates reports whether c, next to a literal, keeps it a token of
// its own whatever the literal is.
func separates(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '(', ')', ',', '=', ';':
		return true
	}
	return false
}
