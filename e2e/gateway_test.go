package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
)

func TestCRUD(t *testing.T) {
	db := gw(t)
	mustExec(t, db, "DROP TABLE IF EXISTS crud",
		"CREATE TABLE crud (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(32), n DECIMAL(10,2), at DATETIME(3) NULL)")
	res, err := db.Exec("INSERT INTO crud (name, n) VALUES ('a', 1.5), ('b', 2.25), ('c', NULL)")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 3 {
		t.Fatalf("affected %d", n)
	}
	if id, _ := res.LastInsertId(); id != 1 {
		t.Fatalf("insert id %d", id)
	}
	res, err = db.Exec("UPDATE crud SET n = n + 1 WHERE n IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Fatalf("update affected %d", n)
	}
	var sum string
	if err := db.QueryRow("SELECT SUM(n) FROM crud").Scan(&sum); err != nil || sum != "5.75" {
		t.Fatalf("sum %q %v", sum, err)
	}
	res, err = db.Exec("DELETE FROM crud WHERE name = 'c'")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("delete affected %d", n)
	}
	var cnt int
	if err := db.QueryRow("SELECT COUNT(*) FROM crud").Scan(&cnt); err != nil || cnt != 2 {
		t.Fatalf("count %d %v", cnt, err)
	}
}

func TestErrorsPassThrough(t *testing.T) {
	db := gw(t)
	mustExec(t, db, "DROP TABLE IF EXISTS dup", "CREATE TABLE dup (id INT PRIMARY KEY)", "INSERT INTO dup VALUES (1)")
	_, err := db.Exec("INSERT INTO dup VALUES (1)")
	me := sqlErr(t, err, 1062, "23000")
	if !strings.Contains(me.Message, "Duplicate entry '1'") {
		t.Fatalf("message %q", me.Message)
	}
	_, err = db.Exec("SELEC 1")
	sqlErr(t, err, 1064, "42000")
	_, err = db.Exec("SELECT * FROM no_such_table")
	sqlErr(t, err, 1146, "42S02")
	// The same errors straight from MariaDB, byte for byte.
	for _, q := range []string{"INSERT INTO dup VALUES (1)", "SELEC 1", "SELECT * FROM no_such_table"} {
		compareRaw(t, q, 0)
	}
}

func TestTransactions(t *testing.T) {
	db := gw(t)
	mustExec(t, db, "DROP TABLE IF EXISTS tx", "CREATE TABLE tx (id INT PRIMARY KEY) ENGINE=InnoDB")
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "INSERT INTO tx VALUES (1)")
	// Another session does not see the uncommitted row.
	other := gw(t)
	var n int
	if err := other.QueryRow("SELECT COUNT(*) FROM tx").Scan(&n); err != nil || n != 0 {
		t.Fatalf("other session sees %d rows (%v)", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := other.QueryRow("SELECT COUNT(*) FROM tx").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after commit %d (%v)", n, err)
	}
	tx, err = db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "INSERT INTO tx VALUES (2)")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := other.QueryRow("SELECT COUNT(*) FROM tx").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after rollback %d (%v)", n, err)
	}
	// autocommit=0 pins like BEGIN.
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	for _, q := range []string{"SET autocommit=0", "INSERT INTO tx VALUES (3)", "ROLLBACK", "INSERT INTO tx VALUES (4)", "COMMIT", "SET autocommit=1"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var ids string
	if err := other.QueryRow("SELECT GROUP_CONCAT(id ORDER BY id) FROM tx").Scan(&ids); err != nil || ids != "1,4" {
		t.Fatalf("ids %q (%v)", ids, err)
	}
}

// A client that disconnects inside a transaction must not leave the
// transaction (or its locks) on the pooled connection for the next session.
func TestAbandonedTransactionDoesNotLeak(t *testing.T) {
	setup := gw(t)
	mustExec(t, setup, "DROP TABLE IF EXISTS leak", "CREATE TABLE leak (id INT PRIMARY KEY) ENGINE=InnoDB")
	for i := 0; i < 20; i++ {
		bc := login(t)
		for _, q := range []string{"BEGIN", fmt.Sprintf("INSERT INTO e2e.leak VALUES (%d)", i)} {
			if _, err := bc.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		bc.Close() // disconnect without COMMIT or ROLLBACK
	}
	// Every pooled connection is clean: no session sees the rows, and
	// every row can be inserted again without a lock wait.
	db := gw(t)
	for i := 0; i < 20; i++ {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM leak").Scan(&n); err != nil || n != 0 {
			t.Fatalf("abandoned rows visible: %d (%v)", n, err)
		}
		var trx int
		if err := db.QueryRow("SELECT @@in_transaction").Scan(&trx); err != nil || trx != 0 {
			t.Fatalf("pooled connection still in a transaction (%v)", err)
		}
	}
	mustExec(t, db, "SET SESSION innodb_lock_wait_timeout=2")
	for i := 0; i < 20; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO leak VALUES (%d)", i))
	}
}

// USE and session variables follow the session to whatever pooled
// connection serves it while other sessions churn the pool.
func TestSessionStateSurvivesChurn(t *testing.T) {
	setup := gw(t)
	mustExec(t, setup, "CREATE DATABASE IF NOT EXISTS e2e_other", "DROP TABLE IF EXISTS e2e_other.marker",
		"CREATE TABLE e2e_other.marker (v VARCHAR(10))", "INSERT INTO e2e_other.marker VALUES ('other')")
	db := open(t, shared.gwDSN(appUser, appPass, testDB, nil))
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"USE e2e_other", "SET time_zone = '+05:30'", "SET SESSION sql_mode = 'ANSI_QUOTES'", "SET NAMES latin1", "SET @@session.group_concat_max_len = 777"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	churnErr := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			other := open(t, shared.gwDSN(appUser, appPass, testDB, nil))
			other.SetMaxOpenConns(1)
			deadline := time.Now().Add(20 * time.Second)
			for j := 0; j < 40 && time.Now().Before(deadline); j++ {
				select {
				case <-stop:
					return
				default:
				}
				var tz string
				if err := other.QueryRow("SELECT @@time_zone").Scan(&tz); err != nil {
					churnErr <- err
					return
				}
				if tz != "SYSTEM" {
					churnErr <- fmt.Errorf("session %d sees time_zone %q", i, tz)
					return
				}
			}
		}(i)
	}
	for k := 0; k < 30; k++ {
		var dbName, tz, mode, cs string
		var gcml int
		if err := conn.QueryRowContext(ctx, "SELECT DATABASE(), @@time_zone, @@sql_mode, @@character_set_client, @@group_concat_max_len").Scan(&dbName, &tz, &mode, &cs, &gcml); err != nil {
			t.Fatal(err)
		}
		if dbName != "e2e_other" || tz != "+05:30" || mode != "ANSI_QUOTES" || cs != "latin1" || gcml != 777 {
			t.Fatalf("state lost: db=%s tz=%s mode=%s cs=%s gcml=%d", dbName, tz, mode, cs, gcml)
		}
		var v string
		if err := conn.QueryRowContext(ctx, "SELECT v FROM marker").Scan(&v); err != nil || v != "other" {
			t.Fatalf("unqualified table from USE db: %q %v", v, err)
		}
	}
	close(stop)
	wg.Wait()
	close(churnErr)
	for err := range churnErr {
		t.Fatal(err)
	}
}

// 500 clients share a pool of 16 backend connections.
func TestManyClientsSmallPool(t *testing.T) {
	const clients = 500
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := make(chan struct{})
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := mysql.NewConnector(mustParse(shared.gwDSN(appUser, appPass, testDB, nil)))
			if err != nil {
				errs <- err
				return
			}
			db := sql.OpenDB(c)
			defer db.Close()
			db.SetMaxOpenConns(1)
			if err := db.Ping(); err != nil {
				errs <- err
				return
			}
			<-start
			for j := 0; j < 3; j++ {
				var got int
				if err := db.QueryRow(fmt.Sprintf("SELECT %d", i*10+j)).Scan(&got); err != nil {
					errs <- err
					return
				}
				if got != i*10+j {
					errs <- fmt.Errorf("client %d got %d", i, got)
					return
				}
			}
		}(i)
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var backendConns int
	if err := direct(t).QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", backendUser).Scan(&backendConns); err != nil {
		t.Fatal(err)
	}
	if backendConns > 16+2 { // the pool, plus this query's own direct connection and slack
		t.Fatalf("%d backend connections for a pool of 16", backendConns)
	}
}

func mustParse(dsn string) *mysql.Config {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		panic(err)
	}
	return c
}

func TestBadPassword(t *testing.T) {
	db := open(t, shared.gwDSN(appUser, "wrong", testDB, nil))
	err := db.Ping()
	me := sqlErr(t, err, 1045, "28000")
	if !strings.Contains(me.Message, "Access denied for user 'app'") {
		t.Fatalf("message %q", me.Message)
	}
	db = open(t, shared.gwDSN("nobody", "x", "", nil))
	sqlErr(t, db.Ping(), 1045, "28000")
	// A user without password logs in with none.
	db = open(t, shared.gwDSN("nopass", "", "", nil))
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	// An unknown database in the handshake gives MariaDB's own error.
	db = open(t, shared.gwDSN(appUser, appPass, "no_such_db", nil))
	sqlErr(t, db.Ping(), 1049, "42000")
}

// The same results, byte for byte, directly and through the gateway, for
// clients with and without CLIENT_DEPRECATE_EOF.
func TestResultsByteForByte(t *testing.T) {
	db := gw(t)
	mustExec(t, db, "DROP TABLE IF EXISTS types",
		`CREATE TABLE types (id INT PRIMARY KEY, ti TINYINT, si SMALLINT UNSIGNED, bi BIGINT, f FLOAT, d DOUBLE, dec1 DECIMAL(20,6),
		  c CHAR(3), vc VARCHAR(100), bin VARBINARY(10), tx TEXT, bl BLOB, dt DATE, tm TIME(2), dtm DATETIME(6), ts TIMESTAMP NULL,
		  yr YEAR, e ENUM('a','b'), st SET('x','y'), bt BIT(5), js JSON)`,
		`INSERT INTO types VALUES (1, -1, 65535, -9223372036854775808, 1.5, 2.25, 12345678901234.123456, 'abc', 'héllo', 0x00ff, 'text', 0x0102,
		  '2024-02-29', '-838:59:59.99', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05', 2024, 'b', 'x,y', b'10101', '{"a": [1, 2]}')`,
		`INSERT INTO types (id) VALUES (2)`)
	setup := direct(t)
	cases := []struct{ before, q string }{
		{"", "SELECT * FROM e2e.types ORDER BY id"},
		{"", "SELECT 1, 'a', NULL, 1.5, NOW() IS NOT NULL"},
		{"DELETE FROM e2e.types WHERE id = 3", "INSERT INTO e2e.types (id) VALUES (3)"},
		{"UPDATE e2e.types SET ti = 1 WHERE id >= 2", "UPDATE e2e.types SET ti = 5 WHERE id >= 2"},
		{"", "UPDATE e2e.types SET ti = 5 WHERE id >= 2"}, // matched but unchanged
		{"INSERT IGNORE INTO e2e.types (id) VALUES (3)", "DELETE FROM e2e.types WHERE id = 3"},
		{"", "SELECT CAST('x' AS SIGNED)"}, // a warning
		{"", "SHOW COLUMNS FROM e2e.types"},
		{"", "DO 1"},
		{"", "SELECT * FROM e2e.types WHERE 1 = 0"},
	}
	for _, c := range cases {
		for _, caps := range []uint32{0, wire.CapDeprecateEOF} {
			if c.before != "" {
				mustExec(t, setup, c.before)
			}
			d := rawQuery(t, shared.db.Addr(), backendUser, backendPass, c.q, caps)
			if c.before != "" {
				mustExec(t, setup, c.before)
			}
			g := rawQuery(t, shared.gwAddr(), appUser, appPass, c.q, caps)
			if !bytes.Equal(maskNoIndex(d), maskNoIndex(g)) {
				t.Fatalf("%q (caps %x): responses differ\ndirect  %q\ngateway %q", c.q, caps, d, g)
			}
		}
	}
}

// compareRaw runs q directly and through the gateway on raw protocol
// connections with the given extra capabilities and compares every byte of
// the responses.
func compareRaw(t *testing.T, q string, caps uint32) {
	t.Helper()
	d := rawQuery(t, shared.db.Addr(), backendUser, backendPass, q, caps)
	g := rawQuery(t, shared.gwAddr(), appUser, appPass, q, caps)
	if !bytes.Equal(maskNoIndex(d), maskNoIndex(g)) {
		t.Fatalf("%q (caps %x): responses differ\ndirect  %q\ngateway %q", q, caps, d, g)
	}
}

// rawQuery logs in with the wire package's client and returns the raw
// response packets (headers included) to one COM_QUERY.
func rawQuery(t *testing.T, addr, user, pass, q string, caps uint32) []byte {
	t.Helper()
	bc := dialRaw(t, addr, user, pass, caps)
	defer bc.Close()
	if err := bc.WriteCommand(append([]byte{wire.ComQuery}, q...)); err != nil {
		t.Fatal(err)
	}
	return rawResult(t, bc.Conn, bc.Caps&wire.CapDeprecateEOF != 0)
}

// A 200k-row result streams through the gateway unchanged without the
// gateway buffering it.
func TestLargeResultStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	db := gw(t)
	mustExec(t, db, "DROP TABLE IF EXISTS big",
		"CREATE TABLE big (id INT PRIMARY KEY, pad CHAR(100))",
		"INSERT INTO big SELECT seq, REPEAT(CHAR(65 + seq % 26), 100) FROM seq_1_to_200000")
	const q = "SELECT id, pad FROM big ORDER BY id"
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	dr, err := direct(t).Query(q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var peak uint64
	for rows.Next() {
		if !dr.Next() {
			t.Fatal("direct result shorter")
		}
		var id1, id2 int
		var p1, p2 []byte
		if err := rows.Scan(&id1, &p1); err != nil {
			t.Fatal(err)
		}
		if err := dr.Scan(&id2, &p2); err != nil {
			t.Fatal(err)
		}
		if id1 != id2 || !bytes.Equal(p1, p2) {
			t.Fatalf("row %d differs", n)
		}
		n++
		if n%20000 == 0 {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if dr.Next() {
		t.Fatal("direct result longer")
	}
	if n != 200000 {
		t.Fatalf("%d rows", n)
	}
	// The result is ~21 MB on the wire; the whole process (client, gateway
	// and test) must not have grown by anything like that.
	if grown := int64(peak) - int64(before.HeapInuse); grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB while streaming", grown>>20)
	}
}

// A malformed or oversized packet closes only that client's connection.
func TestBadPacketsCloseOnlyThatClient(t *testing.T) {
	healthy := gw(t)
	healthy.SetMaxOpenConns(1)
	if err := healthy.Ping(); err != nil {
		t.Fatal(err)
	}
	// Garbage instead of a handshake response.
	c := rawConn(t, shared.gwAddr())
	readPacket(t, c)
	c.Write([]byte{3, 0, 0, 1, 0xde, 0xad, 0xbe})
	readAllQuiet(c)
	// A packet header announcing more than max_allowed_packet after login.
	bc := login(t)
	hdr := []byte{0xff, 0xff, 0xff, 0, wire.ComQuery}
	bc.NetConn().Write(hdr)
	p := readPacket(t, bc.NetConn())
	if !wire.IsERR(p) {
		t.Fatalf("want an error packet, got %x", p)
	}
	if e := wire.ParseERR(p); e.Code != 1153 {
		t.Fatalf("want 1153, got %v", e)
	}
	if rest := readAllQuiet(bc.NetConn()); len(rest) != 0 {
		t.Fatalf("connection not closed, got %x", rest)
	}
	// Wrong sequence id.
	bc = login(t)
	bc.NetConn().Write([]byte{1, 0, 0, 7, wire.ComPing})
	p = readPacket(t, bc.NetConn())
	if e := wire.ParseERR(p); e.Code != 1835 {
		t.Fatalf("want 1835, got %v", e)
	}
	var one int
	if err := healthy.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("healthy client hurt: %v", err)
	}
}

// login opens a raw protocol connection to the gateway as the app user.
func login(t *testing.T) *wire.BackendConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, shared.gwAddr(), wire.DialOptions{User: appUser, Password: appPass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bc.Close() })
	_ = bc.NetConn().SetDeadline(time.Now().Add(30 * time.Second))
	return bc
}

// readPacket reads one packet's payload from a raw connection.
func readPacket(t *testing.T, c net.Conn) []byte {
	t.Helper()
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(c, hdr); err != nil {
		t.Fatalf("read header: %v", err)
	}
	p := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	if _, err := io.ReadFull(c, p); err != nil {
		t.Fatalf("read payload: %v", err)
	}
	return p
}

// The mariadb command-line client works through the gateway.
func TestMariaDBCLI(t *testing.T) {
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		t.Skip("mariadb client not installed")
	}
	host, port, _ := net.SplitHostPort(shared.gwAddr())
	cli := func(args ...string) (string, error) {
		base := []string{"--no-defaults", "-h" + host, "-P" + port, "-u" + appUser, "-p" + appPass, "--batch"}
		out, err := exec.Command(bin, append(base, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := cli(testDB, "-e", "select 1 as one; select database()")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out != "one\n1\ndatabase()\ne2e\n" {
		t.Fatalf("output %q", out)
	}
	out, err = cli("-e", "use no_such_db")
	if err == nil || !strings.Contains(out, "ERROR 1049 (42000)") {
		t.Fatalf("want error 1049, got %v: %s", err, out)
	}
	out, err = cli("-uapp", "-pwrong", "-e", "select 1")
	if err == nil || !strings.Contains(out, "ERROR 1045 (28000)") {
		t.Fatalf("want error 1045, got %v: %s", err, out)
	}
	out, err = cli(testDB, "-e", "create temporary table tt (a int); insert into tt values (1),(2); select sum(a) from tt; show warnings")
	if err != nil || !strings.Contains(out, "3") {
		t.Fatalf("multi-statement batch: %v: %s", err, out)
	}
}

// A backend killed mid-query gives the client an error, not a hang, and
// the next statement works once the backend is back.
func TestBackendKilledMidQuery(t *testing.T) {
	st, err := startStack(4)
	if st != nil {
		defer st.stop()
	}
	if err != nil {
		t.Fatal(err)
	}
	db := open(t, st.gwDSN(appUser, appPass, "", nil))
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := db.Exec("SELECT SLEEP(30)")
		errc <- err
	}()
	// Killed once the SLEEP runs on MariaDB, not after a fixed time.
	root, err := st.db.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(30)'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the SLEEP did not start within 10 s")
		}
	}
	root.Close()
	if err := st.db.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1158 {
			t.Fatalf("want error 1158, got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("client hangs after the backend died")
	}
	// While the backend is down, statements fail with a clear error.
	_, err = db.Exec("SELECT 1")
	if err == nil {
		t.Fatal("statement succeeded with the backend down")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := st.db.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("after restart: %v", err)
	}
}

// LAST_INSERT_ID() and ROW_COUNT() read the session's previous statement
// even though statements outside a transaction move between pooled
// connections: right after the write (the connection is held briefly) and
// after a pause (LAST_INSERT_ID() is replayed).
func TestLastInsertIDAcrossPool(t *testing.T) {
	db := gw(t)
	mustExec(t, db, "DROP TABLE IF EXISTS autoinc", "CREATE TABLE autoinc (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	// Keep other sessions busy so consecutive statements would land on
	// different pooled connections.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			other := gw(t)
			for j := 0; j < 2000; j++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := other.Exec("INSERT INTO autoinc (v) VALUES (0)"); err != nil {
					return
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	one := open(t, shared.gwDSN(appUser, appPass, testDB, nil))
	one.SetMaxOpenConns(1)
	for i := 0; i < 20; i++ {
		res, err := one.Exec("INSERT INTO autoinc (v) VALUES (1)")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := res.LastInsertId()
		if i%2 == 1 {
			time.Sleep(120 * time.Millisecond) // past the hold: replayed
		}
		var got int64
		if err := one.QueryRow("SELECT LAST_INSERT_ID()").Scan(&got); err != nil || got != want {
			t.Fatalf("round %d: LAST_INSERT_ID() = %d, want %d (%v)", i, got, want, err)
		}
		if _, err := one.Exec(fmt.Sprintf("UPDATE autoinc SET v = 2 WHERE id IN (%d, %d)", want, want-1)); err != nil {
			t.Fatal(err)
		}
		var rc int64
		if err := one.QueryRow("SELECT ROW_COUNT()").Scan(&rc); err != nil || rc < 1 {
			t.Fatalf("round %d: ROW_COUNT() = %d (%v)", i, rc, err)
		}
	}
}

// A client that answers the greeting with caching_sha2_password (MySQL 8
// clients do by default) logs in through the fast path: 0x01 0x03, then OK.
// One with an unknown plugin is switched to mysql_native_password.
func TestCachingSha2AndAuthSwitch(t *testing.T) {
	login := func(plugin string, scramble func(salt []byte) []byte, pass string) (got [][]byte) {
		c := rawConn(t, shared.gwAddr())
		g, err := wire.ParseGreeting(readPacket(t, c))
		if err != nil {
			t.Fatal(err)
		}
		conn := wire.NewConn(c, 4096, 4096)
		conn.SetSeq(1)
		resp := &wire.HandshakeResponse{Caps: wire.BackendCaps, MaxPacket: 1 << 24, Collation: 45,
			User: appUser, AuthData: scramble(g.Salt), AuthPlugin: plugin}
		if err := conn.WritePacket(wire.AppendHandshakeResponse(nil, resp)); err != nil {
			t.Fatal(err)
		}
		conn.Flush()
		for i := 0; i < 3; i++ {
			p, err := conn.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, append([]byte(nil), p...))
			if wire.IsOK(p) || wire.IsERR(p) {
				return got
			}
			if bytes.Equal(p, []byte{1, 4}) { // full authentication: RSA, key given ahead
				enc, err := wire.EncryptPassword(pass, g.Salt, shared.gw.RSAPublicKey())
				if err != nil {
					t.Fatal(err)
				}
				conn.WritePacket(enc)
				conn.Flush()
			}
			if p[0] == 0xfe { // auth switch: plugin NUL salt NUL
				rest := p[1:]
				i := bytes.IndexByte(rest, 0)
				if string(rest[:i]) != wire.NativePassword {
					t.Fatalf("switch to %q", rest[:i])
				}
				salt := bytes.TrimRight(rest[i+1:], "\x00")
				conn.WritePacket(wire.ScrambleNative(salt, pass))
				conn.Flush()
			}
		}
		return got
	}
	// The user's first caching_sha2 login since the gateway started is a
	// full authentication (unless an earlier test made one), the next one
	// takes the fast path.
	got := login(wire.CachingSha2Password, func(s []byte) []byte { return wire.ScrambleCachingSha2(s, appPass) }, appPass)
	if len(got) != 2 || !(bytes.Equal(got[0], []byte{1, 4}) || bytes.Equal(got[0], []byte{1, 3})) || !wire.IsOK(got[1]) {
		t.Fatalf("caching_sha2 first login: %x", got)
	}
	got = login(wire.CachingSha2Password, func(s []byte) []byte { return wire.ScrambleCachingSha2(s, appPass) }, appPass)
	if len(got) != 2 || !bytes.Equal(got[0], []byte{1, 3}) || !wire.IsOK(got[1]) {
		t.Fatalf("caching_sha2 fast path: %x", got)
	}
	got = login(wire.CachingSha2Password, func(s []byte) []byte { return wire.ScrambleCachingSha2(s, "wrong") }, "wrong")
	if e := wire.ParseERR(got[len(got)-1]); e.Code != 1045 {
		t.Fatalf("caching_sha2 wrong password: %v", e)
	}
	got = login("client_ed25519", func(s []byte) []byte { return []byte("x") }, appPass)
	if len(got) != 2 || got[0][0] != 0xfe || !wire.IsOK(got[1]) {
		t.Fatalf("auth switch: %x", got)
	}
}
