package e2e

// Server-side prepared statements (binary protocol) through the gateway:
// go-sql-driver with interpolateParams=false, and a raw client that
// compares COM_STMT_* responses with MariaDB's byte for byte.

import (
	"bytes"
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
)

// binaryProtocol makes go-sql-driver use COM_STMT_PREPARE/EXECUTE/CLOSE
// for every statement with arguments.
func binaryProtocol(c *mysql.Config) { c.InterpolateParams = false }

// churnPrepared keeps n other sessions busy on the gateway with prepared
// statements of their own (a new text each time, prepared, executed and
// closed) and plain queries, filling the per-connection statement caches.
func churnPrepared(t *testing.T, tg target, n int) {
	churnWith(t, tg, n, binaryProtocol, func(db *sql.DB, i, j int) error {
		var got int
		err := db.QueryRow(fmt.Sprintf("SELECT ? + %d", i*100000+j), 1).Scan(&got)
		if err == nil && got != i*100000+j+1 {
			err = fmt.Errorf("churn statement %d/%d got %d", i, j, got)
		}
		if err == nil {
			err = db.QueryRow("SELECT 1").Scan(&got)
		}
		return err
	})
}

// TestPreparedAcrossPool: a statement prepared once keeps working for 200
// executions with different arguments while other sessions churn the pool
// with their own statements; it does not pin the session (executions are
// served by several backend connections).
func TestPreparedAcrossPool(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churnPrepared(t, tg, 8)
		conn := tg.session(t, binaryProtocol)
		watches := []pinWatch{tg.watch("prepare"), tg.watch("unreplayable"), tg.watch("user_var")}
		ctx := context.Background()
		st, err := conn.PrepareContext(ctx, "SELECT ? + 1, CONCAT('v', ?), @@pseudo_thread_id")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		seen := map[int64]bool{}
		for i := 0; i < 200; i++ {
			var n, backend int64
			var s string
			if err := st.QueryRowContext(ctx, i, fmt.Sprintf("x%d", i)).Scan(&n, &s, &backend); err != nil {
				t.Fatalf("execution %d: %v", i, err)
			}
			if n != int64(i)+1 || s != fmt.Sprintf("vx%d", i) {
				t.Fatalf("execution %d: got %d, %q", i, n, s)
			}
			seen[backend] = true
		}
		if tg.gateway && len(seen) < 2 {
			t.Errorf("200 executions were all served by one backend connection: the prepared statement pinned the session")
		}
		for _, w := range watches {
			w.same(t)
		}
	})
}

// prepTypesDDL is a table with a column of most MariaDB types.
const prepTypesDDL = `CREATE TABLE prep_types (
	id INT PRIMARY KEY, ti TINYINT, uti TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, i INT, ui INT UNSIGNED,
	bi BIGINT, ubi BIGINT UNSIGNED, dec1 DECIMAL(30,10), f FLOAT, d DOUBLE, bt BIT(10), bo BOOL,
	c CHAR(5), vc VARCHAR(100), bin BINARY(4), vb VARBINARY(10), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
	tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB, e ENUM('a','b'), st SET('x','y','z'),
	dt DATE, tm TIME(6), dtm DATETIME(6), ts TIMESTAMP(3) NULL, yr YEAR, js JSON, pt POINT, i6 INET6, u UUID) DEFAULT CHARSET=utf8mb4`

// prepTypesInsert inserts one prep_types row from 37 arguments.
const prepTypesInsert = `INSERT INTO prep_types VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
	?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ST_GeomFromText(?), ?, ?)`

// prepTypesArgs are a row's values as Go arguments; all is false for the
// row of NULLs.
func prepTypesArgs(id int, all bool) []any {
	args := []any{id, int64(-128), uint64(255), int64(-32768), int64(8388607), int64(math.MinInt32), uint64(math.MaxUint32),
		int64(math.MinInt64), uint64(math.MaxUint64), "12345678901234567890.0123456789", 1.5, 2.718281828459045,
		[]byte{0x02, 0xff}, true, "abc", "héllo wörld ✓", []byte{0, 1, 2, 3}, []byte{0xff, 0},
		"tiny", strings.Repeat("text ", 100), strings.Repeat("medium ", 1000), strings.Repeat("long ", 2000),
		[]byte{1}, bytes.Repeat([]byte{2, 0}, 300), bytes.Repeat([]byte{3}, 70000), bytes.Repeat([]byte{4}, 5),
		"b", "x,z", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "-838:59:59.000000",
		time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC), time.Date(2030, 6, 7, 8, 9, 10, 987000000, time.UTC),
		2024, `{"a": [1, 2], "b": null}`, "POINT(1 2)", "2001:db8::1", "123e4567-e89b-12d3-a456-426655440000"}
	if !all {
		for i := 1; i < len(args); i++ {
			args[i] = nil
		}
	}
	return args
}

// scanAll reads every row of rows as driver values (strings for []byte) and
// the column metadata go-sql-driver exposes.
func scanAll(t *testing.T, rows *sql.Rows) (vals [][]any, meta []string) {
	t.Helper()
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range types {
		l, _ := ct.Length()
		p, s, _ := ct.DecimalSize()
		n, _ := ct.Nullable()
		meta = append(meta, fmt.Sprintf("%s %s len=%d dec=%d,%d null=%v scan=%v", ct.Name(), ct.DatabaseTypeName(), l, p, s, n, ct.ScanType()))
	}
	for rows.Next() {
		row := make([]any, len(types))
		ptrs := make([]any, len(types))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range row {
			if b, ok := v.([]byte); ok {
				row[i] = string(b)
			}
		}
		vals = append(vals, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vals, meta
}

// TestPreparedTypesRoundTrip: every column type written with prepared
// statements through the gateway reads back, with the binary and the text
// protocol, exactly as MariaDB returns it directly, with the same column
// metadata; NULL arguments store NULL.
func TestPreparedTypesRoundTrip(t *testing.T) {
	setup := direct(t)
	mustExec(t, setup, "DROP TABLE IF EXISTS prep_types", prepTypesDDL)
	gwp := targets()[1].open(t, binaryProtocol)
	dp := targets()[0].open(t, binaryProtocol)
	for _, side := range []struct {
		db   *sql.DB
		base int
	}{{gwp, 0}, {dp, 100}} {
		st, err := side.db.Prepare(prepTypesInsert)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range [][]any{prepTypesArgs(side.base+1, true), prepTypesArgs(side.base+2, false)} {
			if _, err := st.Exec(row...); err != nil {
				t.Fatalf("insert row %v: %v", row[0], err)
			}
		}
		st.Close()
	}
	read := func(db *sql.DB, q string, args ...any) ([][]any, []string) {
		rows, err := db.Query(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return scanAll(t, rows)
	}
	// Rows 1, 2 (written through the gateway) equal rows 101, 102
	// (written directly).
	gwRows, gwMeta := read(gwp, "SELECT * FROM prep_types WHERE id < ? ORDER BY id", 100)
	dRows, dMeta := read(dp, "SELECT * FROM prep_types WHERE id > ? ORDER BY id", 100)
	if len(gwRows) != 2 || len(dRows) != 2 {
		t.Fatalf("rows: %d through the gateway, %d direct", len(gwRows), len(dRows))
	}
	if !reflect.DeepEqual(gwMeta, dMeta) {
		t.Errorf("column metadata differs:\ngateway %q\ndirect  %q", gwMeta, dMeta)
	}
	for r := range gwRows {
		for c := 1; c < len(gwRows[r]); c++ {
			if !reflect.DeepEqual(gwRows[r][c], dRows[r][c]) {
				t.Errorf("row %d column %s: written through the gateway %#v, directly %#v", r+1, strings.Fields(dMeta[c])[0], gwRows[r][c], dRows[r][c])
			}
		}
	}
	for c := 1; c < len(gwRows[1]); c++ {
		if gwRows[1][c] != nil {
			t.Errorf("NULL argument stored %#v in column %d", gwRows[1][c], c)
		}
	}
	// The same rows read through the gateway and directly, binary and
	// text protocol.
	text := func(tg target) *sql.DB { return tg.open(t, nil) }
	for _, pair := range []struct {
		name   string
		gw, dr *sql.DB
	}{{"binary", gwp, dp}, {"text", text(targets()[1]), text(targets()[0])}} {
		g, gm := read(pair.gw, "SELECT * FROM prep_types ORDER BY id")
		d, dm := read(pair.dr, "SELECT * FROM prep_types ORDER BY id")
		if !reflect.DeepEqual(gm, dm) {
			t.Errorf("%s protocol: column metadata differs:\ngateway %q\ndirect  %q", pair.name, gm, dm)
		}
		if !reflect.DeepEqual(g, d) {
			t.Errorf("%s protocol: values differ:\ngateway %#v\ndirect  %#v", pair.name, g, d)
		}
	}
}

// TestPreparedNullParams: NULL arguments, alone and mixed with values, and
// arguments whose type changes between executions.
func TestPreparedNullParams(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churnPrepared(t, tg, 4)
		conn := tg.session(t, binaryProtocol)
		ctx := context.Background()
		st, err := conn.PrepareContext(ctx, "SELECT ? IS NULL, COALESCE(?, 'dflt'), ? <=> NULL")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		cases := []struct {
			args []any
			want string
		}{
			{[]any{nil, nil, nil}, "1 dflt 1"},
			{[]any{1, "x", 2.5}, "0 x 0"},
			{[]any{sql.NullInt64{}, sql.NullString{Valid: true, String: "y"}, nil}, "1 y 1"},
			{[]any{"s", nil, []byte{0}}, "0 dflt 0"},
			{[]any{nil, 42, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}, "1 42 0"},
		}
		for round := 0; round < 20; round++ {
			for _, c := range cases {
				var a, b, d string
				if err := st.QueryRowContext(ctx, c.args...).Scan(&a, &b, &d); err != nil {
					t.Fatalf("%v: %v", c.args, err)
				}
				if got := a + " " + b + " " + d; got != c.want {
					t.Fatalf("round %d, args %v: got %q, want %q", round, c.args, got, c.want)
				}
			}
		}
	})
}

// TestPreparedLongData: arguments larger than the driver's long-data
// threshold go as COM_STMT_SEND_LONG_DATA chunks before the execute; they
// arrive whole, whichever backend connection serves the execute.
func TestPreparedLongData(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS prep_long", "CREATE TABLE prep_long (id INT PRIMARY KEY, b MEDIUMBLOB, s MEDIUMTEXT) DEFAULT CHARSET=utf8mb4")
	eachTarget(t, func(t *testing.T, tg target) {
		base := 0
		if tg.gateway {
			base = 100
		}
		churnPrepared(t, tg, 8)
		// With max_allowed_packet 256 KiB, go-sql-driver sends arguments
		// of 64 KiB and more (for 3 parameters) as long data, in chunks of
		// up to 256 KiB.
		conn := tg.session(t, func(c *mysql.Config) { binaryProtocol(c); c.MaxAllowedPacket = 256 << 10 })
		ctx := context.Background()
		ins, err := conn.PrepareContext(ctx, "INSERT INTO prep_long VALUES (?, ?, ?)")
		if err != nil {
			t.Fatal(err)
		}
		defer ins.Close()
		want := map[int][2][]byte{}
		for i := 1; i <= 5; i++ {
			b := make([]byte, 600<<10+i)
			for j := range b {
				b[j] = byte(j*7 + i)
			}
			s := []byte(strings.Repeat(fmt.Sprintf("row %d é; ", i), 300<<10/12))
			want[base+i] = [2][]byte{b, s}
			if _, err := ins.ExecContext(ctx, base+i, b, string(s)); err != nil {
				t.Fatalf("insert %d: %v", i, err)
			}
		}
		// Checked directly ...
		for id, w := range want {
			var n1, n2 int
			var h1, h2 string
			if err := direct(t).QueryRow("SELECT LENGTH(b), MD5(b), LENGTH(s), MD5(s) FROM prep_long WHERE id = ?", id).Scan(&n1, &h1, &n2, &h2); err != nil {
				t.Fatal(err)
			}
			if n1 != len(w[0]) || h1 != fmt.Sprintf("%x", md5.Sum(w[0])) || n2 != len(w[1]) || h2 != fmt.Sprintf("%x", md5.Sum(w[1])) {
				t.Fatalf("row %d arrived as %d bytes (md5 %s) and %d bytes (md5 %s), sent %d and %d", id, n1, h1, n2, h2, len(w[0]), len(w[1]))
			}
		}
		// ... and read back through the target with the binary protocol.
		sel, err := conn.PrepareContext(ctx, "SELECT b, s FROM prep_long WHERE id = ?")
		if err != nil {
			t.Fatal(err)
		}
		defer sel.Close()
		for id, w := range want {
			var b, s []byte
			if err := sel.QueryRowContext(ctx, id).Scan(&b, &s); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, w[0]) || !bytes.Equal(s, w[1]) {
				t.Fatalf("row %d read back differs", id)
			}
		}
	})
}

// TestPreparedWritesAndEmptyResults: prepared INSERT, UPDATE, DELETE and
// DDL report affected rows and insert ids; a SELECT matching nothing
// returns no rows; a failing execute returns the backend's error and the
// statement stays usable.
func TestPreparedWritesAndEmptyResults(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS prep_w")
	eachTarget(t, func(t *testing.T, tg target) {
		churnPrepared(t, tg, 4)
		conn := tg.session(t, binaryProtocol)
		ctx := context.Background()
		mustPrep := func(q string) *sql.Stmt {
			st, err := conn.PrepareContext(ctx, q)
			if err != nil {
				t.Fatalf("prepare %s: %v", q, err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		mustPrep("DROP TABLE IF EXISTS prep_w").ExecContext(ctx)
		if _, err := mustPrep("CREATE TABLE prep_w (id INT AUTO_INCREMENT PRIMARY KEY, u INT UNIQUE, v VARCHAR(10))").ExecContext(ctx); err != nil {
			t.Fatal(err)
		}
		ins := mustPrep("INSERT INTO prep_w (u, v) VALUES (?, ?)")
		for i := 1; i <= 10; i++ {
			res, err := ins.ExecContext(ctx, i, fmt.Sprint("v", i))
			if err != nil {
				t.Fatal(err)
			}
			id, _ := res.LastInsertId()
			n, _ := res.RowsAffected()
			if id != int64(i) || n != 1 {
				t.Fatalf("insert %d: id %d, affected %d", i, id, n)
			}
		}
		for i := 0; i < 5; i++ {
			_, err := ins.ExecContext(ctx, 3, "dup")
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != 1062 || string(me.SQLState[:]) != "23000" {
				t.Fatalf("duplicate key: want 1062 (23000), got %v", err)
			}
			if !strings.Contains(me.Message, "Duplicate entry '3' for key 'u'") {
				t.Fatalf("duplicate key message %q", me.Message)
			}
		}
		if res, err := ins.ExecContext(ctx, 11, "after"); err != nil {
			t.Fatalf("statement unusable after an error: %v", err)
		} else if id, _ := res.LastInsertId(); id != 16 {
			// InnoDB used up ids 11..15 for the failed inserts.
			t.Fatalf("insert id %d after five failed inserts, want 16", id)
		}
		res, err := mustPrep("UPDATE prep_w SET v = ? WHERE u <= ?").ExecContext(ctx, "upd", 4)
		if n, _ := res.RowsAffected(); err != nil || n != 4 {
			t.Fatalf("update: %d, %v", n, err)
		}
		res, err = mustPrep("DELETE FROM prep_w WHERE u > ?").ExecContext(ctx, 8)
		if n, _ := res.RowsAffected(); err != nil || n != 3 {
			t.Fatalf("delete: %d, %v", n, err)
		}
		rows, err := mustPrep("SELECT id, v FROM prep_w WHERE u > ?").QueryContext(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if rows.Next() {
			t.Fatal("a SELECT matching nothing returned a row")
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		// Errors at prepare time.
		for _, c := range []struct {
			q   string
			num uint16
		}{{"SELEC ?", 1064}, {"SELECT nope FROM prep_w WHERE id = ?", 1054}, {"SELECT * FROM prep_nope", 1146}} {
			_, err := conn.PrepareContext(ctx, c.q)
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != c.num {
				t.Fatalf("prepare %s: want %d, got %v", c.q, c.num, err)
			}
		}
	})
}

// TestPreparedStatementCap: a session that prepares 2000 statements and
// closes none either gets them all or, past the gateway's per-session cap,
// MariaDB's error 1461 (42000); after closing them it can prepare again.
func TestPreparedStatementCap(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		conn := tg.session(t, binaryProtocol)
		ctx := context.Background()
		var stmts []*sql.Stmt
		capped := 0
		start := time.Now()
		for i := 0; i < 2000; i++ {
			st, err := conn.PrepareContext(ctx, fmt.Sprintf("SELECT ? + %d", i))
			if err != nil {
				var me *mysql.MySQLError
				if !errors.As(err, &me) || me.Number != 1461 || string(me.SQLState[:]) != "42000" {
					t.Fatalf("statement %d: want success or error 1461 (42000), got %v", i, err)
				}
				capped = i
				t.Logf("capped after %d statements: %s", i, me.Message)
				break
			}
			stmts = append(stmts, st)
		}
		// The statements prepared still work.
		for _, i := range []int{0, len(stmts) / 2, len(stmts) - 1} {
			var got int
			if err := stmts[i].QueryRowContext(ctx, 1).Scan(&got); err != nil || got != i+1 {
				t.Fatalf("statement %d: %d, %v", i, got, err)
			}
		}
		for _, st := range stmts {
			st.Close()
		}
		if capped > 0 {
			st, err := conn.PrepareContext(ctx, "SELECT ? + 1")
			if err != nil {
				t.Fatalf("after closing every statement: %v", err)
			}
			st.Close()
		}
		t.Logf("2000 statements prepared, used and closed in %v", time.Since(start))
		start = time.Now()
		// Preparing and closing many statements never hits the cap.
		for i := 0; i < 3000; i++ {
			st, err := conn.PrepareContext(ctx, fmt.Sprintf("SELECT ? * %d", i))
			if err != nil {
				t.Fatalf("prepare/close %d: %v", i, err)
			}
			var got int
			if err := st.QueryRowContext(ctx, 2).Scan(&got); err != nil || got != 2*i {
				t.Fatalf("prepare/close %d: %d, %v", i, got, err)
			}
			st.Close()
		}
		t.Logf("3000 statements prepared, executed and closed in %v", time.Since(start))
	})
}

// TestPreparedMultipleResults: a prepared CALL of a procedure returning two
// result sets returns both (CLIENT_PS_MULTI_RESULTS).
func TestPreparedMultipleResults(t *testing.T) {
	mustExec(t, direct(t), "DROP PROCEDURE IF EXISTS prep_two",
		"CREATE PROCEDURE prep_two(IN n INT) BEGIN SELECT n AS a; SELECT CONCAT('x', n) AS b, n * 2 AS c; END")
	eachTarget(t, func(t *testing.T, tg target) {
		churnPrepared(t, tg, 4)
		conn := tg.session(t, binaryProtocol)
		ctx := context.Background()
		st, err := conn.PrepareContext(ctx, "CALL prep_two(?)")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for i := 0; i < 20; i++ {
			rows, err := st.QueryContext(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			var a, c int
			var b string
			if !rows.Next() || rows.Scan(&a) != nil || a != i {
				t.Fatalf("call %d: first result %d (%v)", i, a, rows.Err())
			}
			if rows.Next() || !rows.NextResultSet() || !rows.Next() || rows.Scan(&b, &c) != nil || b != fmt.Sprint("x", i) || c != 2*i {
				t.Fatalf("call %d: second result %q %d (%v)", i, b, c, rows.Err())
			}
			for rows.NextResultSet() {
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// rawResult reads one result as raw packets (headers included): OK, ERR, or
// result sets (text or binary rows) while more results follow. After the
// column definitions of a statement that opened a cursor it stops: the rows
// come with COM_STMT_FETCH.
func rawResult(t *testing.T, c *wire.Conn, deprecateEOF bool) []byte {
	t.Helper()
	var out []byte
	next := func() []byte {
		seq := c.Seq()
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatalf("reading response: %v (after %x)", err, tail(out))
		}
		for rest := len(p); ; rest -= wire.MaxPacketPayload {
			n := min(rest, wire.MaxPacketPayload)
			out = append(out, byte(n), byte(n>>8), byte(n>>16), seq)
			seq++
			if n < wire.MaxPacketPayload {
				break
			}
		}
		out = append(out, p...)
		return p
	}
	status := func(p []byte) uint16 {
		if !deprecateEOF && p[0] == 0xfe {
			_, st := wire.ParseEOF(p)
			return st
		}
		ok, _ := wire.ParseOK(p)
		return ok.Status
	}
	for {
		p := next()
		if wire.IsERR(p) {
			return out
		}
		if wire.IsOK(p) {
			if status(p)&wire.StatusMoreResults == 0 {
				return out
			}
			continue
		}
		n, _ := lenenc(p)
		for i := uint64(0); i < n; i++ {
			next()
		}
		if !deprecateEOF {
			// A cursor's statement that fails while it runs has its ERR
			// where the EOF would be.
			if p := next(); wire.IsERR(p) || status(p)&wire.StatusCursorExists != 0 {
				return out
			}
		}
		for {
			p = next()
			if wire.IsERR(p) {
				return out
			}
			if p[0] == 0xfe && (len(p) < 9 || deprecateEOF && len(p) < 0xffffff) {
				break
			}
		}
		if st := status(p); st&wire.StatusMoreResults == 0 || st&wire.StatusCursorExists != 0 {
			return out
		}
	}
}

// tail is the end of b, for error messages.
func tail(b []byte) []byte { return b[max(0, len(b)-64):] }

// lenenc decodes a length-encoded integer.
func lenenc(p []byte) (uint64, int) {
	switch {
	case len(p) == 0:
		return 0, 0
	case p[0] < 0xfb:
		return uint64(p[0]), 1
	case p[0] == 0xfc && len(p) >= 3:
		return uint64(binary.LittleEndian.Uint16(p[1:])), 3
	case p[0] == 0xfd && len(p) >= 4:
		return uint64(p[1]) | uint64(p[2])<<8 | uint64(p[3])<<16, 4
	case p[0] == 0xfe && len(p) >= 9:
		return binary.LittleEndian.Uint64(p[1:]), 9
	}
	return 0, 0
}

// appendLenenc appends a length-encoded string.
func appendLenenc(b, s []byte) []byte {
	switch n := len(s); {
	case n < 0xfb:
		b = append(b, byte(n))
	case n < 1<<16:
		b = append(b, 0xfc, byte(n), byte(n>>8))
	case n < 1<<24:
		b = append(b, 0xfd, byte(n), byte(n>>8), byte(n>>16))
	default:
		b = binary.LittleEndian.AppendUint64(append(b, 0xfe), uint64(n))
	}
	return append(b, s...)
}

// longData is an execute argument whose value went before with
// COM_STMT_SEND_LONG_DATA: only its type is sent.
type longData byte

// Binary protocol field types used for arguments.
const (
	typeDouble   = 0x05
	typeNull     = 0x06
	typeLongLong = 0x08
	typeDatetime = 0x0c
	typeBlob     = 0xfc
	typeString   = 0xfe
)

// appendExecute builds a COM_STMT_EXECUTE packet. With bind, the argument
// types are sent (new-params-bound 1); without, the server reuses the
// types of the previous execute.
func appendExecute(id uint32, flags byte, bind bool, args ...any) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{wire.ComStmtExecute}, id)
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint32(b, 1)
	if len(args) == 0 {
		return b
	}
	nulls := make([]byte, (len(args)+7)/8)
	var types, vals []byte
	for i, a := range args {
		switch v := a.(type) {
		case nil:
			nulls[i/8] |= 1 << (i % 8)
			types = append(types, typeNull, 0)
		case int64:
			types = append(types, typeLongLong, 0)
			vals = binary.LittleEndian.AppendUint64(vals, uint64(v))
		case int:
			types = append(types, typeLongLong, 0)
			vals = binary.LittleEndian.AppendUint64(vals, uint64(v))
		case uint64:
			types = append(types, typeLongLong, 0x80)
			vals = binary.LittleEndian.AppendUint64(vals, v)
		case float64:
			types = append(types, typeDouble, 0)
			vals = binary.LittleEndian.AppendUint64(vals, math.Float64bits(v))
		case string:
			types = append(types, typeString, 0)
			vals = appendLenenc(vals, []byte(v))
		case []byte:
			types = append(types, typeBlob, 0)
			vals = appendLenenc(vals, v)
		case time.Time:
			types = append(types, typeDatetime, 0)
			vals = append(vals, 11)
			vals = binary.LittleEndian.AppendUint16(vals, uint16(v.Year()))
			vals = append(vals, byte(v.Month()), byte(v.Day()), byte(v.Hour()), byte(v.Minute()), byte(v.Second()))
			vals = binary.LittleEndian.AppendUint32(vals, uint32(v.Nanosecond()/1000))
		case longData:
			types = append(types, byte(v), 0)
		default:
			panic(fmt.Sprintf("appendExecute: unsupported argument %T", a))
		}
	}
	b = append(b, nulls...)
	if bind {
		b = append(b, 1)
		b = append(b, types...)
	} else {
		b = append(b, 0)
	}
	return append(b, vals...)
}

// rawStmt is a statement prepared on a raw connection.
type rawStmt struct {
	id             uint32
	params, fields int
}

// rawSession drives one raw protocol connection and records the raw
// responses, for byte-for-byte comparison between MariaDB and the gateway.
// Statement ids differ between the two, so the id in a COM_STMT_PREPARE
// answer is zeroed and an id quoted in an error message is replaced.
type rawSession struct {
	t     *testing.T
	bc    *wire.BackendConn
	deof  bool
	stmts map[string]rawStmt
}

func newRawSession(t *testing.T, tg target, caps uint32) *rawSession {
	bc := tg.raw(t, caps)
	return &rawSession{t: t, bc: bc, deof: bc.Caps&wire.CapDeprecateEOF != 0, stmts: map[string]rawStmt{}}
}

func (s *rawSession) send(p []byte) {
	s.t.Helper()
	if err := s.bc.WriteCommand(p); err != nil {
		s.t.Fatal(err)
	}
}

// query runs a COM_QUERY.
func (s *rawSession) query(q string) []byte {
	s.t.Helper()
	s.send(append([]byte{wire.ComQuery}, q...))
	return rawResult(s.t, s.bc.Conn, s.deof)
}

// prepare sends COM_STMT_PREPARE and remembers the statement as name.
func (s *rawSession) prepare(name, q string) []byte {
	s.t.Helper()
	s.send(append([]byte{wire.ComStmtPrepare}, q...))
	var out []byte
	next := func() []byte {
		seq := s.bc.Seq()
		p, err := s.bc.ReadPacket()
		if err != nil {
			s.t.Fatalf("prepare %q: %v", q, err)
		}
		out = append(out, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq)
		out = append(out, p...)
		return p
	}
	p := next()
	if wire.IsERR(p) {
		delete(s.stmts, name)
		return out
	}
	if len(p) < 12 || p[0] != 0 {
		s.t.Fatalf("prepare %q: bad answer %x", q, p)
	}
	st := rawStmt{id: binary.LittleEndian.Uint32(p[1:]), fields: int(binary.LittleEndian.Uint16(p[5:])), params: int(binary.LittleEndian.Uint16(p[7:]))}
	copy(out[5:9], []byte{0, 0, 0, 0})
	for _, n := range []int{st.params, st.fields} {
		for i := 0; i < n; i++ {
			next()
		}
		if n > 0 && !s.deof {
			if p := next(); !wire.IsEOF(p) {
				s.t.Fatalf("prepare %q: want EOF, got %x", q, p)
			}
		}
	}
	s.stmts[name] = st
	return out
}

// stmt returns the id of a prepared statement; an unknown name gives an id
// no statement has.
func (s *rawSession) stmt(name string) uint32 {
	if st, ok := s.stmts[name]; ok {
		return st.id
	}
	return 0x7fffff00
}

// maskID replaces the quoted statement id in an ERR packet's message.
func (s *rawSession) maskID(resp []byte, id uint32) []byte {
	if len(resp) < 5 || resp[4] != 0xff {
		return resp
	}
	p := bytes.ReplaceAll(resp[4:], []byte(fmt.Sprintf("(%d)", id)), []byte("(<stmt id>)"))
	return append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), resp[3]}, p...)
}

// execute sends COM_STMT_EXECUTE; flags 1 opens a read-only cursor.
func (s *rawSession) execute(name string, flags byte, bind bool, args ...any) []byte {
	s.t.Helper()
	id := s.stmt(name)
	s.send(appendExecute(id, flags, bind, args...))
	return s.maskID(rawResult(s.t, s.bc.Conn, s.deof), id)
}

// fetch sends COM_STMT_FETCH for n rows.
func (s *rawSession) fetch(name string, n uint32) []byte {
	s.t.Helper()
	id := s.stmt(name)
	s.send(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32([]byte{wire.ComStmtFetch}, id), n))
	var out []byte
	for {
		seq := s.bc.Seq()
		p, err := s.bc.ReadPacket()
		if err != nil {
			s.t.Fatalf("fetch: %v", err)
		}
		out = append(out, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq)
		out = append(out, p...)
		if wire.IsERR(p) || p[0] == 0xfe && len(p) < 0xffffff {
			return s.maskID(out, id)
		}
	}
}

// longData sends one COM_STMT_SEND_LONG_DATA chunk (no answer).
func (s *rawSession) longData(name string, param uint16, data []byte) {
	s.t.Helper()
	b := binary.LittleEndian.AppendUint32([]byte{wire.ComStmtSendLongData}, s.stmt(name))
	b = binary.LittleEndian.AppendUint16(b, param)
	s.send(append(b, data...))
}

// reset sends COM_STMT_RESET.
func (s *rawSession) reset(name string) []byte {
	s.t.Helper()
	id := s.stmt(name)
	s.send(binary.LittleEndian.AppendUint32([]byte{wire.ComStmtReset}, id))
	return s.maskID(rawResult(s.t, s.bc.Conn, s.deof), id)
}

// close sends COM_STMT_CLOSE (no answer).
func (s *rawSession) close(name string) {
	s.t.Helper()
	s.send(binary.LittleEndian.AppendUint32([]byte{wire.ComStmtClose}, s.stmt(name)))
}

// recorded is one command's response.
type recorded struct {
	what string
	resp []byte
}

// compareRecorded reports every command whose responses differ.
func compareRecorded(t *testing.T, label string, d, g []recorded) {
	t.Helper()
	if len(d) != len(g) {
		t.Fatalf("%s: %d responses direct, %d through the gateway", label, len(d), len(g))
	}
	bad := 0
	for i := range d {
		if !bytes.Equal(maskNoIndex(d[i].resp), maskNoIndex(g[i].resp)) {
			bad++
			if bad <= 15 {
				t.Errorf("%s: %s: responses differ\ndirect  %s\ngateway %s", label, d[i].what, clip(d[i].resp), clip(g[i].resp))
			}
		}
	}
	if bad > 15 {
		t.Errorf("%s: %d more differences", label, bad-15)
	}
}

// maskNoIndex clears MariaDB's no-index status bits (0x10, 0x20) in the
// classic EOF packets of a recorded response: the gateway's backend
// connections use CLIENT_DEPRECATE_EOF (for the session trackers at the
// end of result sets), so the EOF after column definitions that it gives
// a classic client is its own, and whether the statement used an index is
// not known yet when it is sent. The EOF after the rows is MariaDB's.
func maskNoIndex(b []byte) []byte {
	out := append([]byte(nil), b...)
	for i := 0; i+4 <= len(out); {
		n := int(out[i]) | int(out[i+1])<<8 | int(out[i+2])<<16
		if i+4+n > len(out) {
			break
		}
		if p := out[i+4 : i+4+n]; n == 5 && p[0] == 0xfe {
			p[3] &^= 0x30
		}
		i += 4 + n
	}
	return out
}

// clip quotes b, shortened in the middle when long.
func clip(b []byte) string {
	if len(b) > 600 {
		return fmt.Sprintf("%q ... (%d bytes) ... %q", b[:400], len(b), b[len(b)-150:])
	}
	return fmt.Sprintf("%q", b)
}

// TestPreparedRawByteForByte: COM_STMT_PREPARE, EXECUTE (with and without
// new-params-bound, with NULLs, every argument type), SEND_LONG_DATA, RESET,
// FETCH with a cursor, CLOSE and the errors of each answer exactly as
// MariaDB answers them, for clients with and without CLIENT_DEPRECATE_EOF.
func TestPreparedRawByteForByte(t *testing.T) {
	setup := direct(t)
	mustExec(t, setup, "DROP TABLE IF EXISTS prep_raw, prep_raw_types", "DROP PROCEDURE IF EXISTS prep_raw_two",
		"CREATE TABLE prep_raw (id INT PRIMARY KEY, v VARCHAR(20))",
		`CREATE TABLE prep_raw_types (id INT PRIMARY KEY, i INT, ub BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec1 DECIMAL(12,3), c VARCHAR(20),
		  b BLOB, dt DATE, tm TIME(3), dtm DATETIME(6), ts TIMESTAMP NULL, yr YEAR, e ENUM('p','q'), bt BIT(3), js JSON)`,
		`INSERT INTO prep_raw_types VALUES (1, -7, 18446744073709551615, 0.5, -1e300, -123456789.125, 'chars', 0x00ff10, '1999-12-31', '-12:34:56.789',
		  '2000-01-01 00:00:00.000001', '2001-02-03 04:05:06', 1999, 'q', b'101', '[1, "two"]'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
		"CREATE PROCEDURE prep_raw_two(IN n INT) BEGIN SELECT n AS a; SELECT n + 1 AS b, 'z' AS c; END")
	long := bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16)
	script := func(s *rawSession) []recorded {
		var out []recorded
		rec := func(what string, resp []byte) { out = append(out, recorded{what, resp}) }
		now := time.Date(2024, 5, 6, 7, 8, 9, 101000, time.UTC)
		rec("USE", s.query("USE e2e"))
		rec("prepare p1", s.prepare("p1", "SELECT ? AS a, ? AS b, ? AS c, ? AS d, ? AS e, ? AS f, ? AS g"))
		rec("execute p1", s.execute("p1", 0, true, int64(-5), "héllo", nil, 2.5, []byte{0, 1, 0xff}, now, uint64(1<<63)))
		rec("execute p1 without types", s.execute("p1", 0, false, int64(6), "x", nil, -1.25, []byte{}, now.AddDate(1, 0, 0), uint64(7)))
		rec("execute p1 new types", s.execute("p1", 0, true, "1", int64(2), 3.0, nil, "five", []byte("six"), nil))
		rec("prepare p2", s.prepare("p2", "SELECT * FROM prep_raw_types ORDER BY id"))
		rec("execute p2", s.execute("p2", 0, true))
		rec("execute p2 again", s.execute("p2", 0, true))
		rec("prepare p3", s.prepare("p3", "INSERT INTO prep_raw (id, v) VALUES (?, ?)"))
		rec("execute p3", s.execute("p3", 0, true, int64(1), "a"))
		rec("execute p3 without types", s.execute("p3", 0, false, int64(2), "b"))
		rec("execute p3 duplicate", s.execute("p3", 0, true, int64(1), "dup"))
		rec("prepare p4", s.prepare("p4", "SELECT ?, LENGTH(?), MD5(?)"))
		s.longData("p4", 1, long[:60<<10])
		s.longData("p4", 1, long[60<<10:])
		s.longData("p4", 2, []byte("short long data"))
		rec("execute p4 long data", s.execute("p4", 0, true, int64(9), longData(typeBlob), longData(typeString)))
		s.longData("p4", 1, []byte("discarded"))
		rec("reset p4", s.reset("p4"))
		rec("execute p4 after reset", s.execute("p4", 0, true, int64(10), "abc", "def"))
		rec("prepare syntax error", s.prepare("bad", "SELEC ?"))
		rec("execute unknown statement", s.execute("bad", 0, true, int64(1)))
		rec("prepare p5 cursor", s.prepare("p5", "SELECT seq, CONCAT('r', seq) FROM seq_1_to_10 WHERE seq > ?"))
		rec("execute p5 cursor", s.execute("p5", 1, true, int64(2)))
		rec("fetch p5 3", s.fetch("p5", 3))
		rec("query between fetches", s.query("SELECT 'between'"))
		rec("fetch p5 3 more", s.fetch("p5", 3))
		rec("fetch p5 rest", s.fetch("p5", 100))
		rec("execute p5 cursor again", s.execute("p5", 1, true, int64(8)))
		rec("fetch p5 all", s.fetch("p5", 100))
		s.close("p5")
		rec("fetch closed", s.fetch("p5", 1))
		// A cursor's statement that fails while it runs (MariaDB sends
		// the column definitions, then the ERR): the gateway answered
		// 2014 Commands out of sync (make compat, cursor mode).
		rec("prepare p8 cursor", s.prepare("p8", "SELECT PERCENTILE_DISC(1.5) WITHIN GROUP (ORDER BY seq) OVER () FROM seq_1_to_3"))
		rec("execute p8 cursor fails", s.execute("p8", 1, true))
		rec("fetch p8 after failure", s.fetch("p8", 1))
		rec("after p8", s.query("SELECT 'in sync after a failed cursor'"))
		rec("prepare p6", s.prepare("p6", "CALL prep_raw_two(?)"))
		rec("execute p6", s.execute("p6", 0, true, int64(4)))
		rec("prepare p7", s.prepare("p7", "SELECT * FROM prep_raw WHERE id > ?"))
		rec("execute p7 no rows", s.execute("p7", 0, true, int64(100)))
		rec("execute p7 rows", s.execute("p7", 0, true, int64(0)))
		s.close("p1")
		rec("execute closed p1", s.execute("p1", 0, true, int64(1), "", nil, 1.0, []byte{}, now, uint64(1)))
		rec("ping", s.query("SELECT 'still in sync'"))
		return out
	}
	for _, caps := range []uint32{0, wire.CapDeprecateEOF} {
		var runs [2][]recorded
		for i, tg := range targets() {
			mustExec(t, setup, "DELETE FROM prep_raw")
			runs[i] = script(newRawSession(t, tg, caps))
		}
		compareRecorded(t, fmt.Sprintf("caps %#x", caps), runs[0], runs[1])
	}
}

// TestPreparedCursor: a read-only cursor opened by COM_STMT_EXECUTE pins
// the session until the cursor is done: COM_STMT_FETCH returns the rows in
// order while other sessions churn the pool, and the session may run other
// statements between fetches.
func TestPreparedCursor(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churnPrepared(t, tg, 8)
		s := newRawSession(t, tg, 0)
		s.query("USE e2e")
		w := tg.watch("cursor")
		for round := 0; round < 5; round++ {
			if resp := s.prepare("c", "SELECT seq FROM seq_1_to_100 WHERE seq > ?"); resp[4] != 0 {
				t.Fatalf("prepare: %q", resp)
			}
			if resp := s.execute("c", 1, true, int64(round)); resp[4] == 0xff {
				t.Fatalf("execute: %q", resp)
			}
			next := round + 1
			for next <= 100 {
				resp := s.fetch("c", 7)
				vals := binaryIntRows(t, resp)
				if len(vals) == 0 {
					t.Fatalf("round %d: fetch returned no rows at %d: %x", round, next, resp)
				}
				for _, v := range vals {
					if v != int64(next) {
						t.Fatalf("round %d: fetched %d, want %d", round, v, next)
					}
					next++
				}
				if next%3 == 0 {
					s.query("SELECT 1")
				}
			}
			s.close("c")
		}
		w.rose(t)
	})
}

// binaryIntRows decodes fetch packets of binary rows with one BIGINT
// UNSIGNED column (as the sequence engine's seq).
func binaryIntRows(t *testing.T, resp []byte) []int64 {
	t.Helper()
	var out []int64
	for len(resp) >= 4 {
		n := int(resp[0]) | int(resp[1])<<8 | int(resp[2])<<16
		p := resp[4 : 4+n]
		resp = resp[4+n:]
		switch {
		case p[0] == 0xff:
			t.Fatalf("fetch error: %v", wire.ParseERR(p))
		case p[0] == 0 && len(p) == 10:
			out = append(out, int64(binary.LittleEndian.Uint64(p[2:])))
		}
	}
	return out
}

// TestPreparedCallWarningRow: the warnings a prepared CALL raises while
// it converts its arguments quote the row number MariaDB's do ("at row
// 0" after a statement that raised a warning), whichever pooled
// connection executes it and whatever the gateway read from that
// connection before; a CALL that raises nothing leaves an empty list.
// The gateway has one pooled connection, so the execute runs right after
// the gateway's own read of what the prepare left there (which left the
// row number at 1); repeated on the shared gateway, whose pool moves the
// execute from connection to connection.
func TestPreparedCallWarningRow(t *testing.T) {
	setup := direct(t)
	mustExec(t, setup, "DROP DATABASE IF EXISTS e2e_callrow", "CREATE DATABASE e2e_callrow")
	t.Cleanup(func() { setup.Exec("DROP DATABASE IF EXISTS e2e_callrow") })
	one := startTestGateway(t, "callrow", opsYAML("", "", "size: 1, min_idle: 0"))
	tgs := append(targets(), target{name: "gateway, one connection", gateway: true, addr: one.Addr().String(), user: appUser, pass: appPass})
	runs := make([][]recorded, len(tgs))
	for i, tg := range tgs {
		s := newRawSession(t, tg, 0)
		s.query("USE e2e_callrow")
		for n := 0; n < 6; n++ {
			s.query("DROP TABLE IF EXISTS t")
			s.query("DROP PROCEDURE IF EXISTS p")
			s.query("CREATE TABLE t (a TIME(6), b TIME(6))")
			s.query("CREATE PROCEDURE p(x TIME, y TIME(4)) INSERT INTO t VALUES (x, y)")
			s.query("SELECT CAST('x' AS INT)")
			s.prepare("c", "CALL p('2010-02-03 4:5:6.789123', '2010-02-03 4:5:6.789123')")
			runs[i] = append(runs[i], recorded{"execute", s.execute("c", 0, true)}, recorded{"SHOW WARNINGS", s.query("SHOW WARNINGS")})
			s.prepare("q", "CALL p('04:05:06', '04:05:06')")
			runs[i] = append(runs[i], recorded{"execute quiet", s.execute("q", 0, true)}, recorded{"SHOW WARNINGS after quiet", s.query("SHOW WARNINGS")})
			s.close("c")
			s.close("q")
		}
		s.bc.Close()
	}
	compareRecorded(t, "prepared CALL", runs[0], runs[1])
	compareRecorded(t, "prepared CALL, one connection", runs[0], runs[2])
}
