package owner

import (
	"slices"
	"testing"

	"vitess.io/vitess/go/vt/sqlparser"
)

func TestParseStatement(t *testing.T) {
	p, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: parserVersion})
	if err != nil {
		t.Fatal(err)
	}
	seq := func(schema, name string, n int64) statement {
		return statement{kind: stmtNext, table: tableName{schema, name}, count: n}
	}
	for _, tc := range []struct {
		q       string
		want    statement
		errCode uint16
	}{
		{q: "SELECT NEXT VALUE FROM seq", want: seq("", "seq", 1)},
		{q: "select next value from seq;", want: seq("", "seq", 1)},
		{q: "  Select  Next  Value  For  Db1.Seq  ", want: seq("Db1", "Seq", 1)},
		{q: "SELECT NEXT 10 VALUES FROM `my db`.`se``q`", want: seq("my db", "se`q", 10)},
		{q: "SELECT NEXT 5 VALUES FROM db.seq", want: seq("db", "seq", 5)},
		{q: "SELECT NEXT +5 VALUES FROM db.seq", want: seq("db", "seq", 5)},
		{q: "/* c */ SELECT NEXT 3 VALUES FROM db.seq", want: seq("db", "seq", 3)}, // parser path
		{q: "SELECT NEXT 0 VALUES FROM seq", want: seq("", "seq", 0), errCode: 1210},
		{q: "SELECT NEXT -1 VALUES FROM seq", want: seq("", "seq", 0), errCode: 1210},
		{q: "SELECT NEXT 99999999999999999999 VALUES FROM seq", want: seq("", "seq", 0), errCode: 1210},
		{q: "SELECT NEXT VALUE FROM seq WHERE 1", want: statement{}},
		{q: "SELECT * FROM seq", want: statement{}},
		{q: "show owner tables", want: statement{kind: stmtShowTables}},
		{q: "SHOW  OWNER\tTABLES;", want: statement{kind: stmtShowTables}},
		{q: "SHOW TABLES", want: statement{}},
		{q: "STREAM * FROM msgs", want: statement{kind: stmtStream, table: tableName{"", "msgs"}}},
		{q: "stream * from Db.Msgs", want: statement{kind: stmtStream, table: tableName{"Db", "Msgs"}}},
		{q: "STREAM id FROM msgs", want: statement{}},
		{q: "INSERT INTO msgs (id, message) VALUES (1, 'a'), (2, 'b')", want: statement{kind: stmtInsert, table: tableName{"", "msgs"}}},
		{q: "insert into db.msgs (id, time_next) values (1, 5)", want: statement{kind: stmtInsert, table: tableName{"db", "msgs"}}},
		{q: "REPLACE INTO msgs (id) VALUES (1)", want: statement{}},
		{q: "UPDATE msgs SET time_acked = 123, time_next = NULL WHERE id IN (1, 002, 3)",
			want: statement{kind: stmtAck, table: tableName{"", "msgs"}, ids: []string{"1", "2", "3"}}},
		{q: "update db.msgs set time_acked = 1, time_next = null where id in (7) and time_acked is null",
			want: statement{kind: stmtAck, table: tableName{"db", "msgs"}, ids: []string{"7"}}},
		{q: "UPDATE msgs SET time_acked = 1 WHERE time_acked IS NULL AND id = 'abc'",
			want: statement{kind: stmtAck, table: tableName{"", "msgs"}, ids: []string{"abc"}}},
		{q: "UPDATE msgs SET time_next = 1 WHERE id = 1", want: statement{}},
		{q: "UPDATE msgs SET time_acked = 1 WHERE priority = 1", want: statement{}},
		{q: "UPDATE msgs SET time_acked = 1 WHERE id = 1 OR id = 2", want: statement{}},
		{q: "UPDATE msgs SET time_acked = 1", want: statement{}},
		{q: "DELETE FROM msgs WHERE id = 1", want: statement{}},
		{q: "SELECT 1; SELECT 2", want: statement{}},
		{q: "not sql at all", want: statement{}},
	} {
		got := parseStatement(p, tc.q)
		var code uint16
		if got.err != nil {
			code = got.err.Code
		}
		got.err = nil
		if code != tc.errCode || got.kind != tc.want.kind || got.table != tc.want.table ||
			got.count != tc.want.count || !slices.Equal(got.ids, tc.want.ids) {
			t.Errorf("%q:\n got %+v (error %d)\nwant %+v (error %d)", tc.q, got, code, tc.want, tc.errCode)
		}
	}
}

func BenchmarkParseNextValue(b *testing.B) {
	p, _ := sqlparser.New(sqlparser.Options{MySQLServerVersion: parserVersion})
	b.ReportAllocs()
	for b.Loop() {
		_ = parseStatement(p, "SELECT NEXT 1 VALUES FROM `db`.`seq`")
	}
}
