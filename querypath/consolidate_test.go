package querypath

import (
	"strings"
	"testing"
)

// deterministicCases seed FuzzDeterministic; want is Deterministic's
// answer.
var deterministicCases = []struct {
	sql  string
	want bool
}{
	{"SELECT c FROM sbtest1 WHERE id = 5", true},
	{"select c from sbtest1 where id=5;", true},
	{"SELECT COUNT(*), MAX(n) FROM t WHERE id IN (1, 2) AND NOT EXISTS (SELECT 1 FROM u)", true},
	{"SELECT CONCAT(a, 'NOW()'), `now` FROM t", true},
	{"SELECT DATE_FORMAT(created, '%Y') FROM t", true},
	{"SELECT * FROM (SELECT id FROM t) AS d JOIN u USING (id)", true},
	{"SELECT 'it''s', \"x\" /* RAND() */ FROM t -- UUID()\n", true},
	{"SELECT DATABASE()", true},
	{"(SELECT 1) UNION (SELECT 2)", true},
	{"WITH a AS (SELECT 1) SELECT * FROM a", true},
	{"SHOW TABLES", false},
	{"EXPLAIN SELECT 1", false},
	{"", false},

	{"SELECT NOW()", false},
	{"SELECT now ( )", false},
	{"SELECT CURRENT_TIMESTAMP", false},
	{"SELECT current_date FROM t", false},
	{"SELECT * FROM t WHERE d > UTC_TIMESTAMP", false},
	{"SELECT SYSDATE()", false},
	{"SELECT RAND()", false},
	{"SELECT UUID()", false},
	{"SELECT UUID_SHORT()", false},
	{"SELECT CONNECTION_ID()", false},
	{"SELECT LAST_INSERT_ID()", false},
	{"SELECT FOUND_ROWS()", false},
	{"SELECT ROW_COUNT()", false},
	{"SELECT SLEEP(1)", false},
	{"SELECT BENCHMARK(10, MD5('a'))", false},
	{"SELECT GET_LOCK('a', 1)", false},
	{"SELECT NEXTVAL(s)", false},
	{"SELECT NEXT VALUE FOR s", false},
	{"SELECT PREVIOUS VALUE FOR s", false},
	{"SELECT USER(), CURRENT_USER", false},
	{"SELECT UNIX_TIMESTAMP()", false},
	{"SELECT @x", false},
	{"SELECT @@sql_mode", false},
	{"SELECT @@session.time_zone", false},
	{"SELECT @a := 1", false},
	{"SELECT myfunc(id) FROM t", false},
	{"SELECT db.f(id) FROM t", false},
	{"SELECT `count`(id) FROM t", false},
	{"SELECT 1; SELECT 2", false},
	{"SELECT 'unterminated", false},
	{"SELECT 1 /*!100000 , NOW() */", false},
}

func TestDeterministic(t *testing.T) {
	for _, tc := range deterministicCases {
		for _, nb := range []bool{false, true} {
			if got := Deterministic(tc.sql, nb); got != tc.want {
				t.Errorf("Deterministic(%q, noBackslash %v) = %v, want %v", tc.sql, nb, got, tc.want)
			}
		}
	}
	// With NO_BACKSLASH_ESCAPES the string ends at the backslash: NOW()
	// is code.
	const sql = "SELECT 'a\\' , NOW(), ' AS x"
	if !Deterministic(sql, false) || Deterministic(sql, true) {
		t.Errorf("Deterministic(%q) = %v (backslash escapes), %v (NO_BACKSLASH_ESCAPES)", sql, Deterministic(sql, false), Deterministic(sql, true))
	}
}

func TestDeterministicAllocs(t *testing.T) {
	sql := "SELECT c, pad FROM sbtest1 WHERE id = 42 AND k IN (1, 2)"
	if n := testing.AllocsPerRun(100, func() { Deterministic(sql, false) }); n != 0 {
		t.Fatalf("Deterministic allocates %v times", n)
	}
}

// FuzzDeterministic: Deterministic never panics, and what it accepts
// is a read that reads no variable, calls nothing the classifier knows to depend on the
// session or the previous statement, and is one statement.
func FuzzDeterministic(f *testing.F) {
	for _, tc := range deterministicCases {
		f.Add(tc.sql)
	}
	for _, tc := range classifyCases {
		f.Add(tc.sql)
	}
	c := classifier(f)
	f.Fuzz(func(t *testing.T, sql string) {
		if !Deterministic(sql, false) {
			return
		}
		r := c.Classify(sql)
		if r.Kind != KindRead {
			return // the caller consolidates reads only
		}
		if r.MultiStatement || r.ReadsLastResult || r.GatewayIDs || r.Pin&(PinUserVar|PinLock|PinLastResult) != 0 {
			t.Fatalf("Deterministic(%q) accepted a statement classified %+v", sql, r)
		}
		if strings.Contains(sql, "@") && !strings.ContainsAny(sql, "'\"`#-/") {
			t.Fatalf("Deterministic(%q) accepted a variable", sql)
		}
	})
}
