package querypath

import (
	"strings"
	"testing"
)

func TestBindParams(t *testing.T) {
	cases := []struct {
		sql         string
		noBackslash bool
		lits        []string
		want        string
	}{
		{"INSERT INTO t (a, b) VALUES (?, ?)", false, []string{"1", "'x'"}, "INSERT INTO t (a, b) VALUES (1, 'x')"},
		{"SELECT NEXT ? VALUES FROM seq", false, []string{"5"}, "SELECT NEXT 5 VALUES FROM seq"},
		{"UPDATE m SET time_acked=? WHERE id IN (?,?)", false, []string{"9", "1", "2"}, "UPDATE m SET time_acked=9 WHERE id IN (1,2)"},
		// Placeholders in strings, identifiers and comments are not.
		{"SELECT '?', `?`, \"?\" /* ? */ FROM t WHERE a = ? # ?", false, []string{"7"}, "SELECT '?', `?`, \"?\" /* ? */ FROM t WHERE a = 7 # ?"},
		{"SELECT 'it\\'s ?', ? -- ?\n", false, []string{"1"}, "SELECT 'it\\'s ?', 1 -- ?\n"},
		// Without backslash escapes the string ends at the backslash.
		{"SELECT 'a\\', ?", true, []string{"1"}, "SELECT 'a\\', 1"},
		// Tokens a literal could merge with get a space.
		{"SELECT 1-?", false, []string{"-5"}, "SELECT 1- -5"},
		{"SELECT?FROM t", false, []string{"1"}, "SELECT 1 FROM t"},
		// Executable comments run: their placeholders count.
		{"INSERT INTO t VALUES (/*! ? */)", false, []string{"3"}, "INSERT INTO t VALUES (  3  )"},
		{"SELECT 1", false, nil, "SELECT 1"},
	}
	for _, c := range cases {
		got, ok := BindParams(c.sql, c.noBackslash, c.lits)
		if !ok || got != c.want {
			t.Errorf("BindParams(%q, %v) = %q, %v; want %q", c.sql, c.lits, got, ok, c.want)
		}
	}
	for _, c := range []struct {
		sql  string
		lits []string
	}{
		{"SELECT ?", nil},
		{"SELECT ?, ?", []string{"1"}},
		{"SELECT ?", []string{"1", "2"}},
		{"SELECT '?", []string{"1"}},
	} {
		if got, ok := BindParams(c.sql, false, c.lits); ok {
			t.Errorf("BindParams(%q, %v) = %q, want a count mismatch", c.sql, c.lits, got)
		}
	}
}

// countParams counts the placeholders of sql the way BindParams finds
// them.
func countParams(sql string, noBackslash bool) int {
	if hasExecComment(sql) {
		sql = expandComments(sql, noBackslash)
	}
	l := lexer{s: sql, noBackslash: noBackslash}
	n := 0
	for t := l.next(); t.kind != tkEOF; t = l.next() {
		if t.kind == tkParam {
			n++
		}
	}
	return n
}

// FuzzBindParams: any text binds as many literals as it has placeholders,
// and the bound text has none left; the text around them is kept.
func FuzzBindParams(f *testing.F) {
	f.Add("INSERT INTO t VALUES (?, '?', ?)", false)
	f.Add("SELECT ? /*!  ? */ -- ?\n, `a?b`", true)
	f.Add("SELECT 'a\\' ?", true)
	f.Fuzz(func(t *testing.T, sql string, noBackslash bool) {
		n := countParams(sql, noBackslash)
		lits := make([]string, n)
		for i := range lits {
			lits[i] = "7"
		}
		got, ok := BindParams(sql, noBackslash, lits)
		if !ok {
			t.Fatalf("%q: %d placeholders did not bind", sql, n)
		}
		if left := countParams(got, noBackslash); left != 0 {
			t.Fatalf("%q bound to %q: %d placeholders left", sql, got, left)
		}
		if n == 0 && !hasExecComment(sql) && got != sql {
			t.Fatalf("%q without placeholders became %q", sql, got)
		}
		if strings.Count(got, "7") < n {
			t.Fatalf("%q bound to %q: literals missing", sql, got)
		}
		if _, ok := BindParams(sql, noBackslash, append(lits, "8")); ok {
			t.Fatalf("%q: one literal too many bound", sql)
		}
	})
}
