package querypath

import (
	"reflect"
	"strings"
	"testing"
)

// hotRowSeeds seed FuzzHotRow.
var hotRowSeeds = []string{
	"UPDATE t SET n = n + 1 WHERE id = 5",
	"DELETE FROM d.t WHERE id = ? AND v = 'x'",
	"SELECT * FROM t WHERE id = 1 FOR UPDATE",
	"INSERT INTO t (id, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1",
	"UPDATE t SET n = 1 WHERE id = 1 OR id = 2",
}

func TestHotRow(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	lit := func(col, v string) KeyEq { return KeyEq{Column: col, Value: v, Param: -1} }
	prm := func(col string, i int) KeyEq { return KeyEq{Column: col, Param: i} }
	tests := []struct {
		sql   string
		table string
		eqs   []KeyEq // nil: not recognised
	}{
		// Recognised.
		{"UPDATE t SET n = n + 1 WHERE id = 5", "t", []KeyEq{lit("id", "5")}},
		{"update `db`.`t` set n=1 where `id`='a''b' and v = 3", "db.t", []KeyEq{lit("id", "a'b"), lit("v", "3")}},
		{"UPDATE t SET n = 1 WHERE 7 = id", "t", []KeyEq{lit("id", "7")}},
		{"UPDATE t SET n = 1 WHERE id = 7 AND (a = 1 OR b = 2)", "t", []KeyEq{lit("id", "7")}},
		{"UPDATE t SET n = 1 WHERE t.id = 2.5", "t", []KeyEq{lit("id", "2.5")}},
		{"UPDATE t SET a = ? WHERE x = ? AND id = ?", "t", []KeyEq{prm("x", 1), prm("id", 2)}},
		{"DELETE FROM t WHERE id = 9", "t", []KeyEq{lit("id", "9")}},
		{"DELETE FROM d.t WHERE id = ?", "d.t", []KeyEq{prm("id", 0)}},
		{"SELECT * FROM t WHERE id = 1 FOR UPDATE", "t", []KeyEq{lit("id", "1")}},
		{"SELECT n FROM t AS x WHERE x.id = ? FOR UPDATE", "t", []KeyEq{prm("id", 0)}},
		{"INSERT INTO t (id, n) VALUES (4, 1) ON DUPLICATE KEY UPDATE n = n + 1", "t", []KeyEq{lit("id", "4"), lit("n", "1")}},
		{"INSERT INTO t (id, n) VALUES (?, NOW()) ON DUPLICATE KEY UPDATE n = 2", "t", []KeyEq{prm("id", 0)}},

		// Not recognised.
		{"UPDATE t SET n = 1 WHERE id > 5", "", nil},
		{"UPDATE t SET n = 1 WHERE id BETWEEN 1 AND 2", "", nil},
		{"UPDATE t SET n = 1 WHERE id IN (1, 2)", "", nil},
		{"UPDATE t SET n = 1 WHERE id = 1 OR id = 2", "", nil},
		{"UPDATE t SET n = 1", "", nil},
		{"UPDATE t SET n = 1 WHERE id = other", "", nil},
		{"UPDATE t SET n = 1 WHERE id = 1 + 1", "", nil},
		{"UPDATE t SET n = 1 WHERE id = @v", "", nil},
		{"UPDATE t, u SET t.n = 1 WHERE t.id = 1 AND u.id = 1", "", nil},
		{"UPDATE t JOIN u ON t.id = u.id SET t.n = 1 WHERE t.id = 1", "", nil},
		{"UPDATE t SET n = (SELECT 1 FROM u) WHERE id = 1", "", nil},
		{"UPDATE t SET n = 1 WHERE id = 1 AND k IN (SELECT k FROM u)", "", nil},
		{"DELETE t, u FROM t JOIN u ON t.id = u.id WHERE t.id = 1", "", nil},
		{"DELETE FROM t WHERE id <> 1", "", nil},
		{"SELECT * FROM t WHERE id = 1", "", nil},
		{"SELECT * FROM t WHERE id = 1 LOCK IN SHARE MODE", "", nil},
		{"SELECT * FROM t WHERE id = 1 FOR SHARE", "", nil},
		{"SELECT * FROM t WHERE id = 1 FOR UPDATE SKIP LOCKED", "", nil},
		{"SELECT * FROM t WHERE id = 1 FOR UPDATE NOWAIT", "", nil},
		{"SELECT * FROM t, u WHERE t.id = 1 FOR UPDATE", "", nil},
		{"SELECT * FROM (SELECT * FROM t) x WHERE id = 1 FOR UPDATE", "", nil},
		{"WITH x AS (SELECT 1) UPDATE t SET n = 1 WHERE id = 1", "", nil},
		{"INSERT INTO t (id, n) VALUES (1, 1)", "", nil},
		{"INSERT INTO t VALUES (1, 1) ON DUPLICATE KEY UPDATE n = 2", "", nil},
		{"INSERT INTO t (id, n) VALUES (1, 1), (2, 2) ON DUPLICATE KEY UPDATE n = 2", "", nil},
		{"INSERT INTO t (id, n) SELECT id, n FROM u ON DUPLICATE KEY UPDATE n = 2", "", nil},
		{"REPLACE INTO t (id, n) VALUES (1, 1)", "", nil},
		{"UPDATE t SET n = 1 WHERE id = 1; UPDATE t SET n = 1 WHERE id = 2", "", nil},
		{"CREATE TABLE t (id INT PRIMARY KEY)", "", nil},
		{"not sql at all", "", nil},
	}
	for _, tt := range tests {
		got, ok := c.HotRow(tt.sql)
		if ok != (tt.eqs != nil) {
			t.Errorf("HotRow(%q) ok = %v, want %v (%+v)", tt.sql, ok, tt.eqs != nil, got)
			continue
		}
		if !ok {
			continue
		}
		if got.Table != tt.table || !reflect.DeepEqual(got.Eqs, tt.eqs) || got.Insert != strings.HasPrefix(tt.sql, "INSERT") {
			t.Errorf("HotRow(%q) = %q %+v, want %q %+v", tt.sql, got.Table, got.Eqs, tt.table, tt.eqs)
		}
	}
}
