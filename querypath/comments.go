package querypath

import "strings"

// serverVersionID is the MariaDB version executable comments are evaluated
// against: any 10.11.x release.
const serverVersionID = 101199

// hasExecComment reports whether s may contain an executable comment
// (/*! or /*M!). It may report true for text inside a string literal.
func hasExecComment(s string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], "/*")
		if j < 0 {
			return false
		}
		i += j + 2
		if i < len(s) && (s[i] == '!' || s[i] == 'M' && i+1 < len(s) && s[i+1] == '!') {
			return true
		}
	}
}

// expandComments returns s with executable comments expanded the way MariaDB
// expands them: the markers of a comment that runs are replaced by spaces and
// its content is kept; a comment that does not run, and every ordinary
// comment, becomes one space. Strings and quoted identifiers are copied
// unchanged.
func expandComments(s string, noBackslash bool) string {
	var b strings.Builder
	b.Grow(len(s))
	inExec := false // inside the content of an executable comment
	l := lexer{s: s, noBackslash: noBackslash}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			l.i = i
			l.skipQuoted()
			b.WriteString(s[i:l.i])
			i = l.i
		case c == '#' || c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' '):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
		case inExec && c == '*' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte(' ')
			inExec = false
			i += 2
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = expandOne(&b, s, i, &inExec)
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// expandOne handles the comment that starts at s[i] ("/*") and returns the
// offset after what it consumed.
func expandOne(b *strings.Builder, s string, i int, inExec *bool) int {
	j := i + 2
	maria := j+1 < len(s) && s[j] == 'M' && s[j+1] == '!'
	exec := !*inExec && (j < len(s) && s[j] == '!' || maria)
	if !exec {
		// An ordinary comment (or an executable one nested in another, which
		// MariaDB discards).
		end := indexFrom(s, j, "*/")
		b.WriteByte(' ')
		if end < 0 {
			return len(s)
		}
		return end + 2
	}
	if maria {
		j += 2
	} else {
		j++
	}
	runs := true
	if j+5 <= len(s) && allDigits(s[j:j+5]) {
		n := 5
		if j+5 < len(s) && isDigit(s[j+5]) {
			n = 6
		}
		version := 0
		for _, d := range s[j : j+n] {
			version = version*10 + int(d-'0')
		}
		j += n
		runs = version <= serverVersionID && (version < 50700 || version > 99999 || maria)
	}
	b.WriteByte(' ')
	if runs {
		*inExec = true
		return j
	}
	// Skip the comment, allowing one nested /* ... */ inside.
	for j < len(s) {
		switch {
		case s[j] == '/' && j+1 < len(s) && s[j+1] == '*':
			end := indexFrom(s, j+2, "*/")
			if end < 0 {
				return len(s)
			}
			j = end + 2
		case s[j] == '*' && j+1 < len(s) && s[j+1] == '/':
			return j + 2
		default:
			j++
		}
	}
	return len(s)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
