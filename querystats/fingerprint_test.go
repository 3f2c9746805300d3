package querystats

import (
	"testing"
)

func TestNormalizeGroups(t *testing.T) {
	groups := [][]string{
		{
			"SELECT c FROM sbtest1 WHERE id=5",
			"select c from sbtest1 where id = 77",
			"SELECT  c\n FROM sbtest1 /* a comment */ WHERE id =  -3 -- trailing\n",
			"SELECT c FROM sbtest1 WHERE id=?",
			"# leading\nSELECT c FROM sbtest1 WHERE id='x'",
		},
		{
			"SELECT * FROM t WHERE a IN (1, 2, 3)",
			"select * from t where a in (1)",
			"SELECT * FROM t WHERE a IN(?,?)",
			"SELECT * FROM t WHERE a IN ('a', 'b''c', \"d\\\"e\", 0x1f, x'ff', 1.5e3)",
		},
		{
			"INSERT INTO t (a, b) VALUES (1, 'x')",
			"insert into t(a,b) values (2,'y'), (3, 'z'),(4,'w')",
			"INSERT INTO t (a, b) VALUES(?, ?)",
		},
		{
			"SELECT a-1 FROM t",
			"SELECT a - 2 FROM t",
		},
	}
	var n Normalizer
	seen := map[Fingerprint]int{}
	for gi, g := range groups {
		_, want := n.Normalize(g[0])
		text0, _ := n.Normalize(g[0])
		t0 := string(text0)
		for _, q := range g[1:] {
			text, got := n.Normalize(q)
			if got != want {
				t.Errorf("group %d: %q -> %q, want %q", gi, q, text, t0)
			}
		}
		if prev, ok := seen[want]; ok {
			t.Errorf("groups %d and %d share a fingerprint", prev, gi)
		}
		seen[want] = gi
	}
}

func TestNormalizeText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"SELECT c FROM sbtest1 WHERE id=5", "select c from sbtest1 where id = ?"},
		{"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c", "select distinct c from sbtest1 where id between ? and ? order by c"},
		{"UPDATE sbtest1 SET k=k+1 WHERE id=3", "update sbtest1 set k = k + ? where id = ?"},
		{"select `Odd Name`.x from db.`T` where y>=-1.5", "select `Odd Name`.x from db.`T` where y >= ?"},
		{"SELECT COUNT(*) FROM t WHERE a IN (1,2) AND b NOT IN ('x')", "select count(*) from t where a in (...) and b not in (...)"},
		{"insert into t values (1,2),(3,4) on duplicate key update a=values(a)", "insert into t values (...) on duplicate key update a = values (a)"},
		{"SELECT 1; SELECT 2", "select ?; select ?"},
		{"SELECT /*+ MAX_EXECUTION_TIME(1) */ a FROM t", "select a from t"},
		{"SELECT * FROM t WHERE a IN (SELECT b FROM u WHERE c = 1)", "select * from t where a in (select b from u where c = ?)"},
	}
	var n Normalizer
	for _, c := range cases {
		got, _ := n.Normalize(c.in)
		if string(got) != c.want {
			t.Errorf("%q -> %q, want %q", c.in, got, c.want)
		}
	}
}

func TestNormalizeSeparates(t *testing.T) {
	pairs := [][2]string{
		{"SELECT a FROM t WHERE id = 1", "SELECT b FROM t WHERE id = 1"},
		{"SELECT a FROM t1", "SELECT a FROM t2"},
		{"SELECT a FROM t WHERE a IN (1,2)", "SELECT a FROM t WHERE a = 1"},
		{"SELECT a FROM `T`", "SELECT a FROM `t`"},
		{"DELETE FROM t WHERE id = 1", "SELECT * FROM t WHERE id = 1"},
	}
	var n Normalizer
	for _, p := range pairs {
		_, a := n.Normalize(p[0])
		_, b := n.Normalize(p[1])
		if a == b {
			t.Errorf("%q and %q share a fingerprint", p[0], p[1])
		}
	}
}

func TestNormalizeMaxLength(t *testing.T) {
	n := Normalizer{MaxLength: 20}
	a, fa := n.Normalize("SELECT aaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbb FROM t WHERE x = 1")
	if len(a) != 20 {
		t.Fatalf("text %q: %d bytes, want 20", a, len(a))
	}
	_, fb := n.Normalize("SELECT aaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbb FROM u WHERE y = 2")
	if fa != fb {
		t.Errorf("statements equal in their first 20 bytes of digest text differ")
	}
}

func TestFingerprintString(t *testing.T) {
	f := Fingerprint(0x0123456789abcdef)
	if f.String() != "0123456789abcdef" {
		t.Fatalf("String: %s", f)
	}
	g, ok := ParseFingerprint(f.String())
	if !ok || g != f {
		t.Fatalf("ParseFingerprint: %v %v", g, ok)
	}
	if _, ok := ParseFingerprint("xyz"); ok {
		t.Fatal("ParseFingerprint accepted xyz")
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"SELECT c FROM sbtest1 WHERE id=5", "insert into t values (1,2),(3,4)",
		"select 'a\\'b', \"x\", `y``z`, 0x1f, -1.5e-3 /* c */ # d\n", "a in ((1,2),(3))", "--", "/*", "'", "((((((((((((((((((()))))))))))))))))))))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n Normalizer
		text, fp := n.Normalize(s)
		if fp != Fingerprint(hash(text)) {
			t.Fatal("fingerprint is not the hash of the text")
		}
		// Normalizing is stable: the digest text of a digest text is
		// itself, up to literals (a ? stays a ?).
		again, _ := n.Normalize(string(text))
		if len(again) > len(text)+len(text)/2+8 {
			t.Fatalf("digest text grew: %q -> %q", text, again)
		}
		m := Normalizer{MaxLength: 16}
		if short, _ := m.Normalize(s); len(short) > 16 {
			t.Fatalf("MaxLength 16 gave %d bytes", len(short))
		}
	})
}
