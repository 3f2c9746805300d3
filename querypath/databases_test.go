package querypath

import (
	"slices"
	"testing"
)

func TestDatabases(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sql         string
		dbs         []string
		unqualified bool
	}{
		{"SELECT c FROM sbtest1 WHERE id=5", nil, true},
		{"SELECT 1", nil, true}, // no '.': nothing is looked at
		{"SELECT * FROM billing.accounts", []string{"billing"}, false},
		{"SELECT a.x FROM billing.accounts a JOIN t ON t.id = a.id", []string{"billing"}, true},
		{"SELECT billing.accounts.x FROM billing.accounts", []string{"billing", "billing"}, false},
		{"INSERT INTO demo.t SELECT * FROM billing.accounts", []string{"demo", "billing"}, false},
		{"UPDATE `billing`.accounts SET b = b - 1 WHERE id = 1", []string{"billing"}, false},
		{"SHOW TABLES FROM billing", []string{"billing"}, false},
		{"SHOW DATABASES", nil, false},
		{"WITH x AS (SELECT * FROM billing.a) SELECT * FROM x", []string{"billing"}, false},
		{"SELECT 1.5 FROM dual", nil, false},
		{"SELECT * FROM information_schema.TABLES", []string{"information_schema"}, false},
		// unparseable: read from the text
		{"INSERT INTO billing.a VALUES (1) RETURNING id", []string{"billing"}, true},
		{"SELECT 1 FROM a.b.c; SELECT 2", []string{"a"}, true},
	}
	for _, tc := range cases {
		got, refs := c.Databases(tc.sql, nil)
		if !slices.Equal(got, tc.dbs) || refs.Unqualified != tc.unqualified {
			t.Errorf("%q: %v unqualified %v, want %v %v", tc.sql, got, refs.Unqualified, tc.dbs, tc.unqualified)
		}
	}
	if n := testing.AllocsPerRun(100, func() { c.Databases("SELECT c FROM sbtest1 WHERE id=5", nil) }); n != 0 {
		t.Errorf("%v allocations for a statement without '.'", n)
	}
}
