package querypath

import "testing"

func TestStartsWrite(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		sql  string
		want bool
	}{
		{"INSERT INTO t VALUES (1)", true},
		{"  /* c */ insert into t values (1)", true},
		{"REPLACE INTO t VALUES (1)", true},
		{"UPDATE t SET n = 1", true},
		{"DELETE FROM t WHERE id = 1", true},
		{"DELETE t1 FROM t1 JOIN t2 USING (id)", true},
		{"LOAD DATA LOCAL INFILE 'x' INTO TABLE t", true},
		{"CALL p()", true},
		{"EXECUTE s", true},
		{"SELECT * FROM t WHERE id = 1 FOR UPDATE", true},
		{"SELECT * FROM t LOCK IN SHARE MODE", true},
		{"(SELECT * FROM t FOR UPDATE)", true},
		{"WITH x AS (SELECT 1) SELECT * FROM t FOR UPDATE", true},
		{"INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)", true},
		{"SELECT 1; UPDATE t SET n = 1", true},

		{"SELECT * FROM t", false},
		{"SELECT 1; SELECT 2", false},
		{"SHOW TABLES", false},
		{"BEGIN", false},
		{"START TRANSACTION", false},
		{"COMMIT", false},
		{"ROLLBACK", false},
		{"ROLLBACK TO SAVEPOINT a", false},
		{"SAVEPOINT a", false},
		{"RELEASE SAVEPOINT a", false},
		{"XA START 'x'", false},
		{"XA COMMIT 'x'", false},
		{"SET autocommit = 0", false},
		{"SET GLOBAL max_connections = 10", false},
		{"USE db", false},
		{"KILL 5", false},
		{"LOCK TABLES t WRITE", false},
		{"UNLOCK TABLES", false},
		{"CREATE TABLE t (id INT)", false},
		{"ALTER TABLE t ADD COLUMN x INT", false},
		{"DROP TABLE t", false},
		{"TRUNCATE TABLE t", false},
		{"FLUSH TABLES", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := StartsWrite(c.Classify(tc.sql), tc.sql); got != tc.want {
			t.Errorf("StartsWrite(%q) = %v, want %v (route %+v)", tc.sql, got, tc.want, c.Classify(tc.sql))
		}
	}
}

func TestStartsWriteAllocs(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	sql := "SELECT * FROM t WHERE id = 1 FOR UPDATE"
	r := c.Classify(sql)
	if n := testing.AllocsPerRun(100, func() { StartsWrite(r, sql) }); n != 0 {
		t.Errorf("StartsWrite allocates %v times", n)
	}
}
