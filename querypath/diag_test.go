package querypath

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseDiagRead(t *testing.T) {
	cols := func(c ...DiagColumn) DiagRead { return DiagRead{Columns: c} }
	for _, tc := range []struct {
		sql  string
		want DiagRead
		ok   bool
	}{
		{"SELECT ROW_COUNT()", cols(DiagColumn{DiagRowCount, "ROW_COUNT()"}), true},
		{"select row_count( ) ;", cols(DiagColumn{DiagRowCount, "row_count( )"}), true},
		{"SELECT FOUND_ROWS() AS n, ROW_COUNT() rc", cols(DiagColumn{DiagFoundRows, "n"}, DiagColumn{DiagRowCount, "rc"}), true},
		{"SELECT @@warning_count, @@session.error_count AS `e c`",
			cols(DiagColumn{DiagWarningCount, "@@warning_count"}, DiagColumn{DiagErrorCount, "e c"}), true},
		{"SHOW WARNINGS", DiagRead{Show: DiagShowWarnings, Limit: -1}, true},
		{"show errors limit 2", DiagRead{Show: DiagShowErrors, Limit: 2}, true},
		{"SHOW WARNINGS LIMIT 1, 3", DiagRead{Show: DiagShowWarnings, Offset: 1, Limit: 3}, true},
		{"SHOW WARNINGS LIMIT 3 OFFSET 1", DiagRead{Show: DiagShowWarnings, Offset: 1, Limit: 3}, true},
		{"SHOW COUNT(*) WARNINGS", DiagRead{Show: DiagShowCountWarnings, Limit: -1}, true},
		{"SHOW COUNT ( * ) ERRORS", DiagRead{Show: DiagShowCountErrors, Limit: -1}, true},
		// Not answered by the gateway: other expressions and clauses.
		{"SELECT ROW_COUNT() + 1", DiagRead{}, false},
		{"SELECT ROW_COUNT() FROM t", DiagRead{}, false},
		{"SELECT ROW_COUNT() INTO @x", DiagRead{}, false},
		{"SELECT ROW_COUNT(), 1", DiagRead{}, false},
		{"SELECT @@global.warning_count", DiagRead{}, false},
		{"SELECT ROW_COUNT() 'alias'", DiagRead{}, false},
		{"SELECT /*! 1, */ ROW_COUNT()", DiagRead{}, false},
		{"SELECT ROW_COUNT(); SELECT 1", DiagRead{}, false},
		{"SHOW WARNINGS LIMIT ?", DiagRead{}, false},
		{"SHOW COUNT(*) WARNINGS LIMIT 1", DiagRead{}, false},
		{"SELECT", DiagRead{}, false},
		{"SELECT ROW_COUNT() AS", DiagRead{}, false},
	} {
		got, ok := ParseDiagRead(tc.sql)
		if ok != tc.ok || ok && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseDiagRead(%q) = %+v, %v; want %+v, %v", tc.sql, got, ok, tc.want, tc.ok)
		}
	}
}

func TestStatementDiag(t *testing.T) {
	rows := DiagEffect{FoundRowsAreRows: true}
	rowsTables := DiagEffect{FoundRowsAreRows: true, UsesTables: true}
	keeps := DiagEffect{KeepsFoundRows: true}
	keepsTables := DiagEffect{KeepsFoundRows: true, UsesTables: true}
	tables := DiagEffect{UsesTables: true}
	for _, tc := range []struct {
		sql  string
		want DiagEffect
	}{
		{"SELECT 1", rows},
		{"SELECT 1 FROM DUAL", rows},
		{"SELECT * FROM t", rowsTables},
		{"SELECT (SELECT 1 FROM t)", rowsTables},
		{"(SELECT 1)", rows},
		{"SHOW TABLES", rowsTables},
		{"SHOW CREATE TABLE t", DiagEffect{KeepsFoundRows: true, UsesTables: true}},
		{"CREATE TABLE t (a INT)", keepsTables},
		{"CREATE TABLE t AS SELECT 1", tables},
		{"DROP TABLE t", keepsTables},
		{"SHOW WARNINGS", DiagEffect{ShowDiagnostics: true}},
		{"SHOW COUNT(*) ERRORS", DiagEffect{ShowDiagnostics: true}},
		{"DESCRIBE t", rowsTables},
		{"SET @a = 1", keeps},
		{"SET @a = (SELECT COUNT(*) FROM t)", tables},
		{"DO 0", keeps},
		{"USE db", keeps},
		{"COMMIT", keeps},
		{"INSERT INTO t VALUES (1, 'select')", keepsTables},
		{"INSERT INTO t SELECT * FROM u", tables},
		{"UPDATE t SET a = 1, b = 2 WHERE id = 3", keepsTables},
		{"UPDATE t, u SET t.a = u.a", tables},
		{"UPDATE t JOIN u ON t.id = u.id SET t.a = 1", tables},
		{"UPDATE t SET a = (SELECT MAX(b) FROM u)", tables},
		{"DELETE FROM t WHERE id IN (1, 2)", keepsTables},
		{"DELETE LOW_PRIORITY QUICK FROM t", keepsTables},
		{"DELETE t FROM t JOIN u ON t.id = u.id", tables},
		{"DELETE FROM t USING t, u WHERE t.id = u.id", tables},
		{"EXPLAIN SELECT 1", tables},
		{"CREATE TABLE c AS SELECT 1", tables},
		{"PREPARE s FROM 'SELECT ? AS p, @v1 AS v1'", keeps},
		{"PREPARE s FROM 'SELECT * FROM t'", keepsTables},
		{"PREPARE s FROM @q", keepsTables},
		{"DEALLOCATE PREPARE s", keeps},
		{"DROP PREPARE s", keeps},
		{"", DiagEffect{}},
	} {
		if got := StatementDiag(tc.sql); got != tc.want {
			t.Errorf("StatementDiag(%q) = %+v, want %+v", tc.sql, got, tc.want)
		}
		want := DiagEffect{FoundRowsAreRows: tc.want.FoundRowsAreRows, ShowDiagnostics: tc.want.ShowDiagnostics,
			KeepsFoundRows: tc.want.KeepsFoundRows && strings.HasPrefix(tc.sql, "SHOW CREATE")}
		if got := ResultDiag(tc.sql); got != want {
			t.Errorf("ResultDiag(%q) = %+v, want %+v", tc.sql, got, want)
		}
	}
}

func TestStatementDiagAllocs(t *testing.T) {
	sql := "UPDATE sbtest1 SET k=k+1 WHERE id=5042"
	if n := testing.AllocsPerRun(100, func() { StatementDiag(sql); ResultDiag(sql) }); n != 0 {
		t.Errorf("StatementDiag allocates %v times, want 0", n)
	}
}

func FuzzParseDiagRead(f *testing.F) {
	for _, s := range []string{"SELECT ROW_COUNT() AS rc", "SHOW WARNINGS LIMIT 1, 2", "SHOW COUNT(*) ERRORS", "SELECT @@warning_count `x`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		if d, ok := ParseDiagRead(sql); ok {
			if d.Show == DiagSelect && len(d.Columns) == 0 {
				t.Fatalf("%q: a SELECT without columns", sql)
			}
		}
		StatementDiag(sql)
		ResultDiag(sql)
	})
}

func TestClassifyKillPaths(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql        string
		kind       Kind
		other      bool
		dynamicVar string
	}{
		{"KILL 157", KindKill, false, ""},
		{"KILL QUERY 157", KindKill, false, ""},
		{"KILL 157+0", KindOther, true, ""},
		{"KILL (157)", KindOther, true, ""},
		{"KILL USER app", KindOther, true, ""},
		{"KILL QUERY ID 157", KindOther, true, ""},
		{"KILL CONNECTION_ID()", KindKill, false, ""},
		{"KILL QUERY CONNECTION_ID() + 1", KindOther, true, ""},
		{"SELECT 1; KILL 157", KindOther, true, ""},
		{"PREPARE s FROM 'KILL 157'", KindOther, true, ""},
		{"EXECUTE IMMEDIATE 'KILL 157'", KindKill, false, ""},
		{"EXECUTE IMMEDIATE 'KILL 1+1'", KindOther, true, ""},
		{"PREPARE s FROM @q", KindOther, false, "q"},
		{"EXECUTE IMMEDIATE @`q r`", KindOther, false, "q r"},
		{"SELECT 'KILL 157'", KindRead, false, ""},
	} {
		r := c.Classify(tc.sql)
		if r.Kind != tc.kind || r.OtherKill != tc.other || r.DynamicVar != tc.dynamicVar {
			t.Errorf("Classify(%q): kind %s, OtherKill %v, DynamicVar %q; want %s, %v, %q", tc.sql, r.Kind, r.OtherKill, r.DynamicVar, tc.kind, tc.other, tc.dynamicVar)
		}
	}
}

func TestBatchUsesTables(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT 1 AS a; SELECT 2 AS b":         false,
		"SELECT 1; DO 2; SET @x = 1":           false,
		"SELECT 1; SELECT * FROM t":            true,
		"SELECT 1; INSERT INTO t VALUES (1)":   true,
		"SELECT 'a;b'; SELECT 2":               false,
		"SELECT 1; SELECT 'unterminated":       true,
		"BEGIN NOT ATOMIC SELECT 1; END; DO 1": true,
	} {
		if got := BatchUsesTables(sql, false); got != want {
			t.Errorf("BatchUsesTables(%q) = %v, want %v", sql, got, want)
		}
	}
}

func TestReadsOtherTables(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO msgs (id, message) VALUES (1, 'select me')":          false,
		"INSERT INTO msgs (id, message) SELECT id, secret FROM o.secrets": true,
		"INSERT INTO msgs (id, message) VALUES ((SELECT 1), 'x')":         true,
		"UPDATE msgs SET time_acked = 1 WHERE id IN (1, 2)":               false,
		"UPDATE msgs SET time_acked = 1 WHERE id IN (SELECT id FROM o.t)": true,
		"INSERT INTO msgs TABLE o.t":                                      true,
		"WITH x AS (SELECT 1) INSERT INTO msgs SELECT * FROM x":           true,
		"INSERT INTO `select` (id) VALUES (1)":                            false,
	} {
		if got := ReadsOtherTables(sql, false); got != want {
			t.Errorf("ReadsOtherTables(%q) = %v, want %v", sql, got, want)
		}
	}
}
