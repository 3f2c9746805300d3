package e2e

// Session semantics through the gateway: the pinning rules (each test
// fails when its rule is removed, because other sessions churn the pool so
// that consecutive statements of an unpinned session land on different
// backend connections), the reset of pinned connections before reuse,
// character sets, COM_CHANGE_USER, COM_RESET_CONNECTION and KILL.
//
// Behavioural tests run twice: straight against MariaDB (which proves the
// expectation is MariaDB's own behaviour) and through the gateway, where
// they also check the pin counter of the rule. They use the shared stack
// and must not run in parallel: the pin counters are global.

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
)

// target is where a behavioural test runs.
type target struct {
	name             string
	gateway          bool
	addr, user, pass string
}

// targets are MariaDB itself and the shared gateway in front of it.
func targets() []target {
	return []target{
		{name: "direct", addr: shared.db.Addr(), user: backendUser, pass: backendPass},
		{name: "gateway", gateway: true, addr: shared.gwAddr(), user: appUser, pass: appPass},
	}
}

// eachTarget runs fn as a subtest per target.
func eachTarget(t *testing.T, fn func(t *testing.T, tg target)) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) { fn(t, tg) })
	}
}

// config is a go-sql-driver config for the target and the test database,
// with read and write timeouts so a protocol bug fails instead of hanging.
func (tg target) config() *mysql.Config {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = tg.user, tg.pass, "tcp", tg.addr, testDB
	c.Timeout = 10 * time.Second
	c.ReadTimeout, c.WriteTimeout = 30*time.Second, 30*time.Second
	c.InterpolateParams = true
	return c
}

// open opens a database/sql pool to the target; mod adjusts the config.
func (tg target) open(t testing.TB, mod func(*mysql.Config)) *sql.DB {
	t.Helper()
	c := tg.config()
	if mod != nil {
		mod(c)
	}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// session opens one client connection (one session) to the target.
func (tg target) session(t testing.TB, mod func(*mysql.Config)) *sql.Conn {
	t.Helper()
	db := tg.open(t, mod)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatalf("%s: connect: %v", tg.name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// raw logs in to the target with the wire package's client; caps are added
// to the client's default capabilities.
func (tg target) raw(t testing.TB, caps uint32) *wire.BackendConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, tg.addr, wire.DialOptions{User: tg.user, Password: tg.pass, Caps: caps})
	if err != nil {
		t.Fatalf("%s: dial: %v", tg.name, err)
	}
	t.Cleanup(func() { bc.Close() })
	_ = bc.NetConn().SetDeadline(time.Now().Add(60 * time.Second))
	return bc
}

// pinWatch remembers a pin reason's cumulative counter so a test can check
// that its statements did (or did not) pin a session for that reason.
type pinWatch struct {
	reason string
	before int64
	active bool
}

// watch starts watching reason; on the direct target it checks nothing.
func (tg target) watch(reason string) pinWatch {
	if !tg.gateway {
		return pinWatch{}
	}
	return pinWatch{reason: reason, before: shared.gw.PinStats()[reason], active: true}
}

// rose asserts the counter increased since watch.
func (w pinWatch) rose(t testing.TB) {
	t.Helper()
	if !w.active {
		return
	}
	if now := shared.gw.PinStats()[w.reason]; now <= w.before {
		t.Errorf("pin counter %q did not increase (%d before, %d after): the rule did not fire", w.reason, w.before, now)
	}
}

// same asserts the counter did not change since watch.
func (w pinWatch) same(t testing.TB) {
	t.Helper()
	if !w.active {
		return
	}
	if now := shared.gw.PinStats()[w.reason]; now != w.before {
		t.Errorf("pin counter %q went from %d to %d: the session got pinned", w.reason, w.before, now)
	}
}

// churn keeps n other sessions busy on the gateway's pool with statements
// that pin nothing (each also overwrites its connection's FOUND_ROWS(),
// ROW_COUNT() and warnings), so that consecutive statements of the session
// under test are served by different backend connections unless it is
// pinned. It does nothing on the direct target and stops when the test
// ends; churn errors fail the test.
func churn(t *testing.T, tg target, n int) {
	churnWith(t, tg, n, nil, func(db *sql.DB, _, _ int) error {
		var one int
		return db.QueryRow("SELECT 1").Scan(&one)
	})
}

// churnWith runs step(db, i, j) in a loop on n sessions opened with opt,
// until the test ends (at most 2 minutes); the first error fails the test.
func churnWith(t *testing.T, tg target, n int, opt func(*mysql.Config), step func(db *sql.DB, i, j int) error) {
	if !tg.gateway {
		return
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := 0; i < n; i++ {
		db := tg.open(t, opt)
		db.SetMaxOpenConns(1)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			deadline := time.Now().Add(2 * time.Minute)
			for j := 0; time.Now().Before(deadline); j++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := step(db, i, j); err != nil {
					select {
					case <-stop:
					default:
						failed.CompareAndSwap(nil, err)
					}
					return
				}
			}
		}(i)
	}
	// Registered after the pools: runs before they are closed.
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			t.Errorf("a churning session failed: %v", err)
		}
	})
	time.Sleep(50 * time.Millisecond)
}

// run runs q on the session and fails the test on error.
func run(t testing.TB, conn *sql.Conn, q string) sql.Result {
	t.Helper()
	res, err := conn.ExecContext(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", short(q), err)
	}
	return res
}

// short shortens a statement for messages.
func short(q string) string {
	if len(q) > 200 {
		return fmt.Sprintf("%s ... (%d bytes)", q[:150], len(q))
	}
	return q
}

// str runs a one-row, one-column query; NULL gives "NULL".
func str(t testing.TB, conn *sql.Conn, q string) string {
	t.Helper()
	var v sql.NullString
	if err := conn.QueryRowContext(context.Background(), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if !v.Valid {
		return "NULL"
	}
	return v.String
}

// strs runs a one-row query and returns its columns; NULL gives "NULL".
func strs(t testing.TB, conn *sql.Conn, q string) []string {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		t.Fatalf("%s: no row (%v)", q, rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out := make([]string, len(cols))
	for i, v := range vals {
		out[i] = "NULL"
		if v.Valid {
			out[i] = v.String
		}
	}
	return out
}

// wantErr asserts that q fails with the MySQL error num (state).
func wantErr(t testing.TB, conn *sql.Conn, q string, num uint16, state string) *mysql.MySQLError {
	t.Helper()
	_, err := conn.ExecContext(context.Background(), q)
	if err == nil {
		t.Fatalf("%s: succeeded, want error %d", q, num)
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("%s: want MySQL error %d, got %v", q, num, err)
	}
	if me.Number != num || string(me.SQLState[:]) != state {
		t.Fatalf("%s: want error %d (%s), got %d (%s): %s", q, num, state, me.Number, me.SQLState, me.Message)
	}
	return me
}

// assertMultiplexed checks, through the gateway, that the session is not
// pinned: while the pool churns, its statements are served by more than one
// backend connection (@@pseudo_thread_id is the serving connection's id, and
// reading it must not pin).
func assertMultiplexed(t *testing.T, tg target, conn *sql.Conn, why string) {
	t.Helper()
	if !tg.gateway {
		return
	}
	seen := map[string]bool{}
	for i := 0; i < 30 && len(seen) < 2; i++ {
		seen[str(t, conn, "SELECT @@pseudo_thread_id")] = true
	}
	if len(seen) < 2 {
		t.Errorf("%s: the session stayed on one backend connection for 30 statements: still pinned", why)
	}
}

// TestPinUserVariables: setting a user variable (SET @x, SELECT ... INTO
// @x, @x := ..., also next to a system variable) pins the session, so the
// variable is there for every later statement.
func TestPinUserVariables(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS pin_uv", "CREATE TABLE pin_uv (id INT PRIMARY KEY)", "INSERT INTO pin_uv VALUES (40), (41)")
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		forms := []struct{ set, want string }{
			{"SET @pv = 5", "5"},
			{"SELECT 7 INTO @pv", "7"},
			{"SELECT MAX(id) INTO @pv FROM pin_uv", "41"},
			{"SELECT @pv := 9", "9"},
			{"SET time_zone = '+01:00', @pv = 'mixed'", "mixed"},
			{"SET @pv = (SELECT MIN(id) FROM pin_uv) + 2", "42"},
		}
		for _, f := range forms {
			conn := tg.session(t, nil)
			w := tg.watch("user_var")
			run(t, conn, f.set)
			for i := 0; i < 30; i++ {
				if got := str(t, conn, "SELECT @pv"); got != f.want {
					t.Fatalf("after %q, statement %d: @pv = %s, want %s", f.set, i, got, f.want)
				}
			}
			w.rose(t)
		}
		// A variable updated statement by statement keeps counting.
		conn := tg.session(t, nil)
		run(t, conn, "SET @n = 0")
		for i := 1; i <= 30; i++ {
			if got := str(t, conn, "SELECT @n := @n + 1"); got != fmt.Sprint(i) {
				t.Fatalf("statement %d: @n = %s", i, got)
			}
		}
	})
}

// TestPinnedConnectionResetBeforeReuse: a backend connection that served a
// session with user variables, temporary tables, named locks, SQL prepared
// statements and sql_log_bin=0 is reset before another session gets it.
func TestPinnedConnectionResetBeforeReuse(t *testing.T) {
	tg := targets()[1]
	mustExec(t, direct(t), "DROP TABLE IF EXISTS leak_tmp")
	// Sessions with a default database, so that nothing but the reset
	// (not a COM_CHANGE_USER to clear the database) can clean the
	// connection.
	session := func() (*sql.DB, *sql.Conn) {
		db := tg.open(t, nil)
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return db, conn
	}
	for i := 0; i < 40; i++ {
		db, conn := session()
		for _, q := range []string{"SET @leak = 1", "CREATE TEMPORARY TABLE IF NOT EXISTS leak_tmp (a INT)",
			"SELECT GET_LOCK('e2e_leak', 0)", "PREPARE leak_ps FROM 'SELECT 1'", "SET sql_log_bin = 0"} {
			run(t, conn, q)
		}
		conn.Close()
		db.Close()
	}
	// One session whose statements (which pin nothing) go round the
	// pool's connections: none carries another session's state.
	db, conn := session()
	for i := 0; i < 50; i++ {
		if got := str(t, conn, "SELECT @@sql_log_bin"); got != "1" {
			t.Fatalf("statement %d: sql_log_bin = %s: a pooled connection kept another session's setting", i, got)
		}
		wantErr(t, conn, "SELECT * FROM leak_tmp", 1146, "42S02")
		wantErr(t, conn, "EXECUTE leak_ps", 1243, "HY000")
	}
	conn.Close()
	db.Close()
	// New sessions: no user variable either.
	for i := 0; i < 20; i++ {
		db, conn := session()
		if got := str(t, conn, "SELECT @leak IS NULL"); got != "1" {
			t.Fatalf("session %d: a pooled connection kept another session's user variable", i)
		}
		conn.Close()
		db.Close()
	}
	// Closing sessions reset their connection asynchronously: allow a
	// moment for the lock to be freed.
	lockDB := gw(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var free int
		if err := lockDB.QueryRow("SELECT IS_FREE_LOCK('e2e_leak')").Scan(&free); err != nil {
			t.Fatal(err)
		}
		if free == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a named lock of a closed session is still held by a pooled connection")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// isSQLErr reports whether err is a wire-client SQL error with code num.
func isSQLErr(err error, num uint16) bool {
	var se *wire.SQLError
	return errors.As(err, &se) && se.Code == num
}

// TestPinTemporaryTable: CREATE TEMPORARY TABLE pins the session until its
// last temporary table is dropped (DROP TEMPORARY TABLE or plain DROP
// TABLE); a temporary table shadows a real one of the same name.
func TestPinTemporaryTable(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS pin_shadow", "CREATE TABLE pin_shadow (x INT)", "INSERT INTO pin_shadow VALUES (1)")
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		w := tg.watch("temp_table")
		run(t, conn, "CREATE TEMPORARY TABLE pin_tmp (id INT PRIMARY KEY, v VARCHAR(10))")
		for i := 1; i <= 10; i++ {
			run(t, conn, fmt.Sprintf("INSERT INTO pin_tmp VALUES (%d, 'v%d')", i, i))
		}
		for i := 0; i < 30; i++ {
			if got := strs(t, conn, "SELECT COUNT(*), SUM(id) FROM pin_tmp"); got[0] != "10" || got[1] != "55" {
				t.Fatalf("statement %d: temporary table has %v", i, got)
			}
		}
		w.rose(t)
		// A second temporary table, shadowing a real table.
		run(t, conn, "CREATE TEMPORARY TABLE pin_shadow (x INT)")
		run(t, conn, "DROP TEMPORARY TABLE pin_tmp")
		for i := 0; i < 20; i++ {
			if got := str(t, conn, "SELECT COUNT(*) FROM pin_shadow"); got != "0" {
				t.Fatalf("statement %d: the real table shows through the temporary one (%s rows): the session moved while a temporary table exists", i, got)
			}
		}
		wantErr(t, conn, "SELECT * FROM pin_tmp", 1146, "42S02")
		// A plain DROP TABLE drops the temporary table first.
		run(t, conn, "DROP TABLE pin_shadow")
		if got := str(t, conn, "SELECT COUNT(*) FROM pin_shadow"); got != "1" {
			t.Fatalf("after dropping the temporary table the real one has %s rows", got)
		}
		assertMultiplexed(t, tg, conn, "after the last temporary table was dropped")
	})
}

// TestPinNamedLock: GET_LOCK pins the session until RELEASE_ALL_LOCKS
// (RELEASE_LOCK of one name may leave others held, which the gateway does
// not follow); meanwhile the lock is held by the connection serving the
// session, and other sessions see it taken.
func TestPinNamedLock(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		other := tg.open(t, nil)
		conn := tg.session(t, nil)
		w := tg.watch("lock")
		if got := str(t, conn, "SELECT GET_LOCK('e2e_pin_lock', 0)"); got != "1" {
			t.Fatalf("GET_LOCK = %s", got)
		}
		for i := 0; i < 20; i++ {
			if got := str(t, conn, "SELECT IS_USED_LOCK('e2e_pin_lock') = CONNECTION_ID()"); got != "1" {
				t.Fatalf("statement %d: the lock is not held by the connection serving the session", i)
			}
			var free int
			if err := other.QueryRow("SELECT IS_FREE_LOCK('e2e_pin_lock')").Scan(&free); err != nil || free != 0 {
				t.Fatalf("statement %d: another session sees the lock free (%d, %v)", i, free, err)
			}
		}
		w.rose(t)
		if got := str(t, conn, "SELECT RELEASE_LOCK('e2e_pin_lock')"); got != "1" {
			t.Fatalf("RELEASE_LOCK = %s: ran on a connection that does not hold the lock", got)
		}
		var free int
		if err := other.QueryRow("SELECT IS_FREE_LOCK('e2e_pin_lock')").Scan(&free); err != nil || free != 1 {
			t.Fatalf("after RELEASE_LOCK another session sees the lock taken (%d, %v)", free, err)
		}
		run(t, conn, "DO RELEASE_ALL_LOCKS()")
		assertMultiplexed(t, tg, conn, "after RELEASE_ALL_LOCKS")
		// Two locks, released together.
		run(t, conn, "DO GET_LOCK('e2e_pin_a', 0), GET_LOCK('e2e_pin_b', 0)")
		for i := 0; i < 10; i++ {
			if got := str(t, conn, "SELECT IS_USED_LOCK('e2e_pin_b') = CONNECTION_ID()"); got != "1" {
				t.Fatalf("statement %d: lock b is not held by the connection serving the session", i)
			}
		}
		if got := str(t, conn, "SELECT RELEASE_ALL_LOCKS()"); got != "2" {
			t.Fatalf("RELEASE_ALL_LOCKS = %s, want 2", got)
		}
		if err := other.QueryRow("SELECT IS_FREE_LOCK('e2e_pin_a') AND IS_FREE_LOCK('e2e_pin_b')").Scan(&free); err != nil || free != 1 {
			t.Fatalf("after RELEASE_ALL_LOCKS the locks are taken (%d, %v)", free, err)
		}
		assertMultiplexed(t, tg, conn, "after RELEASE_ALL_LOCKS")
	})
}

// TestPinLockTables: LOCK TABLES pins the session until UNLOCK TABLES:
// meanwhile the session may use only the locked tables and other sessions'
// writes wait.
func TestPinLockTables(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		mustExec(t, direct(t), "DROP TABLE IF EXISTS pin_lt_a, pin_lt_b",
			"CREATE TABLE pin_lt_a (id INT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB", "CREATE TABLE pin_lt_b (id INT) ENGINE=InnoDB")
		churn(t, tg, 8)
		other := tg.open(t, func(c *mysql.Config) {
			c.Params = map[string]string{"lock_wait_timeout": "1", "innodb_lock_wait_timeout": "1"}
		})
		other.SetMaxOpenConns(1)
		// A statement that lands on another connection fails fast
		// instead of waiting for the lock.
		conn := tg.session(t, func(c *mysql.Config) { c.Params = map[string]string{"lock_wait_timeout": "2"} })
		w := tg.watch("lock_tables")
		run(t, conn, "LOCK TABLES pin_lt_a WRITE")
		for i := 1; i <= 10; i++ {
			run(t, conn, "INSERT INTO pin_lt_a VALUES ()")
			if got := str(t, conn, "SELECT COUNT(*) FROM pin_lt_a"); got != fmt.Sprint(i) {
				t.Fatalf("statement %d: %s rows", i, got)
			}
			// Under LOCK TABLES an unlocked table is refused; on
			// another connection it would be readable.
			wantErr(t, conn, "SELECT COUNT(*) FROM pin_lt_b", 1100, "HY000")
			if got := str(t, conn, "SELECT 'read'"); got != "read" {
				t.Fatal(got)
			}
			if i%2 == 0 {
				time.Sleep(120 * time.Millisecond) // a slow client: no hold helps
			}
		}
		w.rose(t)
		start := time.Now()
		_, err := other.Exec("INSERT INTO pin_lt_a VALUES ()")
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1205 {
			t.Fatalf("another session's write to the locked table: want error 1205, got %v", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("lock wait took %v", d)
		}
		run(t, conn, "UNLOCK TABLES")
		if _, err := other.Exec("INSERT INTO pin_lt_a VALUES ()"); err != nil {
			t.Fatalf("after UNLOCK TABLES: %v", err)
		}
		if got := str(t, conn, "SELECT COUNT(*) FROM pin_lt_b"); got != "0" {
			t.Fatalf("after UNLOCK TABLES: %s", got)
		}
		assertMultiplexed(t, tg, conn, "after UNLOCK TABLES")
	})
}

// TestPinTransaction: BEGIN and autocommit=0 pin the session until COMMIT
// or ROLLBACK: it sees its own uncommitted rows, others do not.
func TestPinTransaction(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS pin_tx", "CREATE TABLE pin_tx (id INT PRIMARY KEY) ENGINE=InnoDB")
	eachTarget(t, func(t *testing.T, tg target) {
		mustExec(t, direct(t), "DELETE FROM pin_tx")
		churn(t, tg, 8)
		other := tg.open(t, nil)
		conn := tg.session(t, nil)
		count := func(n int, want string) {
			t.Helper()
			for i := 0; i < n; i++ {
				if got := strs(t, conn, "SELECT COUNT(*), @@in_transaction FROM pin_tx"); got[0] != want || got[1] != "1" {
					t.Fatalf("statement %d in the transaction: count, in_transaction = %v, want %s, 1", i, got, want)
				}
			}
		}
		w := tg.watch("transaction")
		run(t, conn, "BEGIN")
		run(t, conn, "INSERT INTO pin_tx VALUES (1)")
		count(20, "1")
		var n int
		if err := other.QueryRow("SELECT COUNT(*) FROM pin_tx").Scan(&n); err != nil || n != 0 {
			t.Fatalf("another session sees %d uncommitted rows (%v)", n, err)
		}
		run(t, conn, "INSERT INTO pin_tx VALUES (2)")
		count(10, "2")
		run(t, conn, "ROLLBACK")
		w.rose(t)
		assertMultiplexed(t, tg, conn, "after ROLLBACK")

		w = tg.watch("transaction")
		run(t, conn, "SET autocommit = 0")
		run(t, conn, "INSERT INTO pin_tx VALUES (3)")
		count(20, "1")
		run(t, conn, "COMMIT")
		run(t, conn, "SET autocommit = 1")
		w.rose(t)
		if err := other.QueryRow("SELECT COUNT(*) FROM pin_tx").Scan(&n); err != nil || n != 1 {
			t.Fatalf("after COMMIT another session sees %d rows (%v)", n, err)
		}
		assertMultiplexed(t, tg, conn, "after COMMIT and autocommit=1")
	})
}

// TestPinSQLPrepare: PREPARE pins the session until DEALLOCATE PREPARE.
func TestPinSQLPrepare(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		w := tg.watch("prepare")
		run(t, conn, "PREPARE pin_ps FROM 'SELECT ? * 2'")
		for i := 0; i < 30; i++ {
			if got := str(t, conn, fmt.Sprintf("EXECUTE pin_ps USING %d", i)); got != fmt.Sprint(2*i) {
				t.Fatalf("execute %d: %s", i, got)
			}
		}
		w.rose(t)
		run(t, conn, "DEALLOCATE PREPARE pin_ps")
		wantErr(t, conn, "EXECUTE pin_ps USING 1", 1243, "HY000")
		assertMultiplexed(t, tg, conn, "after DEALLOCATE PREPARE")
		// DROP PREPARE is the same.
		run(t, conn, "PREPARE pin_ps2 FROM 'SELECT 1'")
		for i := 0; i < 10; i++ {
			run(t, conn, "EXECUTE pin_ps2")
		}
		run(t, conn, "DROP PREPARE pin_ps2")
		assertMultiplexed(t, tg, conn, "after DROP PREPARE")
	})
}

// TestPinFoundRows: FOUND_ROWS() reads the SQL_CALC_FOUND_ROWS count of
// the session's previous SELECT, also for a slow client.
func TestPinFoundRows(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS pin_fr", "CREATE TABLE pin_fr (id INT PRIMARY KEY)",
		"INSERT INTO pin_fr SELECT seq FROM seq_1_to_25")
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		w := tg.watch("found_rows")
		for i := 0; i < 20; i++ {
			rows, err := conn.QueryContext(context.Background(), fmt.Sprintf("SELECT SQL_CALC_FOUND_ROWS id FROM pin_fr WHERE id > %d ORDER BY id LIMIT 2", i))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
			}
			rows.Close()
			if i%4 == 3 {
				time.Sleep(120 * time.Millisecond) // longer than any hold
			}
			if got := str(t, conn, "SELECT FOUND_ROWS()"); got != fmt.Sprint(25-i) {
				t.Fatalf("round %d: FOUND_ROWS() = %s, want %d", i, got, 25-i)
			}
		}
		w.rose(t)
		assertMultiplexed(t, tg, conn, "after FOUND_ROWS() was read")
	})
}

// TestPinLastResult: LAST_INSERT_ID() and ROW_COUNT() right after a write
// read that write's result (the connection is held briefly), and
// LAST_INSERT_ID() is right after a pause too (replayed).
func TestPinLastResult(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS pin_lr", "CREATE TABLE pin_lr (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		w := tg.watch("last_result")
		for i := 1; i <= 20; i++ {
			res := run(t, conn, "INSERT INTO pin_lr (v) VALUES (1), (2), (3)")
			first, _ := res.LastInsertId()
			if got := strs(t, conn, "SELECT LAST_INSERT_ID(), ROW_COUNT()"); got[0] != fmt.Sprint(first) || got[1] != "3" {
				t.Fatalf("round %d: LAST_INSERT_ID(), ROW_COUNT() = %v, want %d, 3", i, got, first)
			}
			run(t, conn, fmt.Sprintf("UPDATE pin_lr SET v = v + 1 WHERE id BETWEEN %d AND %d", first, first+int64(i%3)))
			if got := str(t, conn, "SELECT ROW_COUNT()"); got != fmt.Sprint(i%3+1) {
				t.Fatalf("round %d: ROW_COUNT() after UPDATE = %s, want %d", i, got, i%3+1)
			}
			if i%4 == 0 {
				time.Sleep(120 * time.Millisecond) // past the hold: replayed
				if got := str(t, conn, "SELECT LAST_INSERT_ID()"); got != fmt.Sprint(first) {
					t.Fatalf("round %d: LAST_INSERT_ID() after a pause = %s, want %d", i, got, first)
				}
			}
		}
		w.rose(t)
	})
}

// TestPinUnreplayable: session state the gateway cannot replay
// (sql_log_bin=0) pins the session.
func TestPinUnreplayable(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		w := tg.watch("unreplayable")
		run(t, conn, "SET SESSION sql_log_bin = 0")
		for i := 0; i < 30; i++ {
			if got := str(t, conn, "SELECT @@SESSION.sql_log_bin"); got != "0" {
				t.Fatalf("statement %d: sql_log_bin = %s", i, got)
			}
		}
		w.rose(t)
	})
}

// TestPinWarnings: SHOW WARNINGS, SHOW ERRORS and GET DIAGNOSTICS report
// the conditions of the session's previous statement, for reads, writes and
// errors, also for a slow client.
func TestPinWarnings(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS pin_warn", "CREATE TABLE pin_warn (id INT AUTO_INCREMENT PRIMARY KEY, ti TINYINT)")
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		w := tg.watch("warnings")
		showWarnings := func(q string) [][3]string {
			t.Helper()
			rows, err := conn.QueryContext(context.Background(), q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			defer rows.Close()
			var out [][3]string
			for rows.Next() {
				var r [3]string
				if err := rows.Scan(&r[0], &r[1], &r[2]); err != nil {
					t.Fatal(err)
				}
				out = append(out, r)
			}
			return out
		}
		for i := 0; i < 12; i++ {
			slow := i%2 == 1
			pause := func() {
				if slow {
					time.Sleep(120 * time.Millisecond)
				}
			}
			// A read with a warning.
			str(t, conn, fmt.Sprintf("SELECT CAST('w%d' AS SIGNED)", i))
			pause()
			want := [3]string{"Warning", "1292", fmt.Sprintf("Truncated incorrect INTEGER value: 'w%d'", i)}
			if got := showWarnings("SHOW WARNINGS"); len(got) != 1 || got[0] != want {
				t.Fatalf("round %d: SHOW WARNINGS after a read = %q, want %q", i, got, want)
			}
			// Diagnostic statements do not clear the conditions: they
			// can be read again, and counted.
			pause()
			if got := showWarnings("SHOW WARNINGS"); len(got) != 1 || got[0] != want {
				t.Fatalf("round %d: second SHOW WARNINGS = %q, want %q", i, got, want)
			}
			if got := str(t, conn, "SHOW COUNT(*) WARNINGS"); got != "1" {
				t.Fatalf("round %d: SHOW COUNT(*) WARNINGS after SHOW WARNINGS = %s, want 1", i, got)
			}
			if got := str(t, conn, "SELECT @@warning_count"); got != "1" {
				t.Fatalf("round %d: @@warning_count after SHOW COUNT(*) WARNINGS = %s, want 1", i, got)
			}
			// A write with a warning.
			run(t, conn, fmt.Sprintf("INSERT IGNORE INTO pin_warn (ti) VALUES (%d)", 1000+i))
			pause()
			want = [3]string{"Warning", "1264", "Out of range value for column 'ti' at row 1"}
			if got := showWarnings("SHOW WARNINGS"); len(got) != 1 || got[0] != want {
				t.Fatalf("round %d: SHOW WARNINGS after a write = %q, want %q", i, got, want)
			}
			// An error.
			wantErr(t, conn, fmt.Sprintf("SELECT * FROM no_such_table_%d", i), 1146, "42S02")
			pause()
			want = [3]string{"Error", "1146", fmt.Sprintf("Table 'e2e.no_such_table_%d' doesn't exist", i)}
			if got := showWarnings("SHOW ERRORS"); len(got) != 1 || got[0] != want {
				t.Fatalf("round %d: SHOW ERRORS = %q, want %q", i, got, want)
			}
			// GET DIAGNOSTICS.
			str(t, conn, fmt.Sprintf("SELECT CAST('g%d' AS SIGNED)", i))
			pause()
			run(t, conn, "GET DIAGNOSTICS CONDITION 1 @pin_errno = MYSQL_ERRNO, @pin_msg = MESSAGE_TEXT")
			if got := strs(t, conn, "SELECT @pin_errno, @pin_msg"); got[0] != "1292" || got[1] != fmt.Sprintf("Truncated incorrect INTEGER value: 'g%d'", i) {
				t.Fatalf("round %d: GET DIAGNOSTICS = %q", i, got)
			}
		}
		w.rose(t)
	})
}

// TestNoPinForSystemVariables: reading @@ variables (as drivers do on
// connect) and SET of replayable variables (literals, SET NAMES, values
// computed from other variables) do not pin: the session stays multiplexed
// and the values follow it.
func TestNoPinForSystemVariables(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		conn := tg.session(t, nil)
		watches := []pinWatch{tg.watch("user_var"), tg.watch("unreplayable"), tg.watch("transaction")}
		for _, q := range []string{
			"SELECT @@max_allowed_packet",
			"SELECT @@session.autocommit, @@GLOBAL.version, @@tx_isolation",
			"SELECT @@version_comment LIMIT 1",
			"SHOW VARIABLES LIKE 'sql_mode'",
			"SET SESSION sql_mode = 'STRICT_ALL_TABLES'",
			"SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')",
			"SET time_zone = '+02:00'",
			"SET NAMES utf8mb4",
			"SET @@session.wait_timeout = 3600",
			"SET autocommit = 1",
			"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
		} {
			run(t, conn, q)
		}
		seen := map[string]bool{}
		for i := 0; i < 30; i++ {
			got := strs(t, conn, "SELECT @@pseudo_thread_id, @@time_zone, @@sql_mode, @@wait_timeout, @@tx_isolation")
			seen[got[0]] = true
			if want := "+02:00 ANSI_QUOTES,STRICT_ALL_TABLES 3600 READ-COMMITTED"; strings.Join(got[1:], " ") != want {
				t.Fatalf("statement %d: session variables %q, want %q", i, got[1:], want)
			}
		}
		if tg.gateway && len(seen) < 2 {
			t.Errorf("30 statements were all served by one backend connection: the session got pinned")
		}
		for _, w := range watches {
			w.same(t)
		}
	})
}

// TestCharsetsFollowSession: the handshake collation, SET NAMES ...
// COLLATE and SET CHARACTER SET reach every backend connection serving the
// session.
func TestCharsetsFollowSession(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		churn(t, tg, 8)
		// A latin1 client: its bytes are latin1 on every statement.
		conn := tg.session(t, func(c *mysql.Config) { c.Collation = "latin1_swedish_ci" })
		for i := 0; i < 30; i++ {
			got := strs(t, conn, "SELECT @@character_set_client, @@collation_connection, @@character_set_results, HEX(CONVERT('\xe9' USING utf8mb4))")
			if want := []string{"latin1", "latin1_swedish_ci", "latin1", "C3A9"}; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("latin1 client, statement %d: %q, want %q", i, got, want)
			}
		}
		conn = tg.session(t, nil)
		run(t, conn, "SET NAMES utf8mb4 COLLATE utf8mb4_bin")
		for i := 0; i < 30; i++ {
			got := strs(t, conn, "SELECT @@character_set_client, @@collation_connection, 'a' = 'A'")
			if want := []string{"utf8mb4", "utf8mb4_bin", "0"}; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("after SET NAMES utf8mb4 COLLATE utf8mb4_bin, statement %d: %q, want %q", i, got, want)
			}
		}
		run(t, conn, "SET CHARACTER SET latin1")
		for i := 0; i < 30; i++ {
			got := strs(t, conn, "SELECT @@character_set_client, @@character_set_results, @@collation_connection = @@collation_database")
			if want := []string{"latin1", "latin1", "1"}; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("after SET CHARACTER SET latin1, statement %d: %q, want %q", i, got, want)
			}
		}
	})
}

// TestHandshakeCollation: the gateway's handshake announces MariaDB's own
// server collation (never one the backend lacks) and version.
func TestHandshakeCollation(t *testing.T) {
	d, g := targets()[0].raw(t, 0).Greeting, targets()[1].raw(t, 0).Greeting
	if d.Collation != g.Collation {
		t.Errorf("handshake collation: MariaDB %d, gateway %d", d.Collation, g.Collation)
	}
	if d.ServerVersion != g.ServerVersion {
		t.Errorf("handshake version: MariaDB %q, gateway %q", d.ServerVersion, g.ServerVersion)
	}
}

// TestChangeUser: COM_CHANGE_USER authenticates against the gateway's
// users and gives the client a fresh session: user variables, temporary
// tables and named locks are gone, the new default database applies. A
// wrong password is refused with 1045.
func TestChangeUser(t *testing.T) {
	bc := login(t)
	for _, q := range []string{"SET @cu = 1", "CREATE TEMPORARY TABLE e2e.cu_tmp (a INT)", "DO GET_LOCK('e2e_cu', 0)", "SET time_zone = '+04:00'"} {
		if _, err := bc.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// COM_CHANGE_USER to "nopass" (no password) with database e2e, built
	// by hand: user NUL, empty auth, db NUL, collation, plugin NUL,
	// empty connection attributes.
	b := []byte{wire.ComChangeUser}
	b = append(b, "nopass"...)
	b = append(b, 0, 0)
	b = append(b, testDB...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, 45)
	b = append(b, wire.NativePassword...)
	b = append(b, 0)
	if bc.Caps&wire.CapConnectAttrs != 0 {
		b = append(b, 0)
	}
	if err := bc.WriteCommand(b); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		p, err := bc.ReadPacket()
		if err != nil {
			t.Fatalf("COM_CHANGE_USER: %v", err)
		}
		if wire.IsOK(p) {
			break
		}
		if wire.IsERR(p) {
			t.Fatalf("COM_CHANGE_USER to nopass: %v", wire.ParseERR(p))
		}
		if p[0] != 0xfe || i > 0 {
			t.Fatalf("COM_CHANGE_USER: unexpected packet %x", p)
		}
		// Auth switch request: the empty password answers empty.
		if err := bc.WritePacket(nil); err != nil {
			t.Fatal(err)
		}
		if err := bc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	row := func(q string) []string {
		t.Helper()
		var out []string
		err := bc.QueryRows(q, func(r [][]byte) {
			for _, v := range r {
				if v == nil {
					out = append(out, "NULL")
				} else {
					out = append(out, string(v))
				}
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
	for i := 0; i < 20; i++ {
		got := row("SELECT @cu, DATABASE(), @@time_zone, IS_FREE_LOCK('e2e_cu')")
		if want := "NULL e2e SYSTEM 1"; strings.Join(got, " ") != want {
			t.Fatalf("statement %d after COM_CHANGE_USER: %q, want %q", i, got, want)
		}
	}
	if _, err := bc.Exec("SELECT * FROM cu_tmp"); !isSQLErr(err, 1146) {
		t.Fatalf("temporary table survived COM_CHANGE_USER: %v", err)
	}
	// Back to app with the right password, then a wrong one.
	if err := bc.ChangeUser(appUser, appPass, ""); err != nil {
		t.Fatalf("COM_CHANGE_USER to app: %v", err)
	}
	if got := row("SELECT DATABASE()"); got[0] != "NULL" {
		t.Fatalf("COM_CHANGE_USER without a database: DATABASE() = %s", got[0])
	}
	err := bc.ChangeUser(appUser, "wrong", "")
	var se *wire.SQLError
	if !errors.As(err, &se) || se.Code != 1045 || se.State != "28000" {
		t.Fatalf("COM_CHANGE_USER with a wrong password: want 1045 (28000), got %v", err)
	}
	bc2 := login(t)
	err = bc2.ChangeUser("nobody", "x", "")
	if !errors.As(err, &se) || se.Code != 1045 {
		t.Fatalf("COM_CHANGE_USER to an unknown user: want 1045, got %v", err)
	}
}

// TestResetConnection: COM_RESET_CONNECTION answers OK and drops user
// variables, temporary tables, named locks, SQL prepared statements, the
// open transaction and session variables; the default database stays.
func TestResetConnection(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		bc := tg.raw(t, 0)
		for _, q := range []string{"USE e2e", "SET @rc = 1", "SET time_zone = '+03:00'", "CREATE TEMPORARY TABLE rc_tmp (a INT)",
			"DO GET_LOCK('e2e_rc', 0)", "PREPARE rc_ps FROM 'SELECT 1'", "BEGIN"} {
			if _, err := bc.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		p, err := rawCommand(bc, []byte{wire.ComResetConnection})
		if err != nil || !wire.IsOK(p) {
			t.Fatalf("COM_RESET_CONNECTION: want OK, got %x %v", p, err)
		}
		for i := 0; i < 20; i++ {
			var got []string
			err := bc.QueryRows("SELECT @rc IS NULL, @@time_zone, IS_FREE_LOCK('e2e_rc'), @@in_transaction, DATABASE()", func(r [][]byte) {
				for _, v := range r {
					got = append(got, string(v))
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := "1 SYSTEM 1 0 e2e"; strings.Join(got, " ") != want {
				t.Fatalf("statement %d after COM_RESET_CONNECTION: %q, want %q", i, got, want)
			}
		}
		if _, err := bc.Exec("SELECT * FROM rc_tmp"); !isSQLErr(err, 1146) {
			t.Fatalf("temporary table survived COM_RESET_CONNECTION: %v", err)
		}
		if _, err := bc.Exec("EXECUTE rc_ps"); !isSQLErr(err, 1243) {
			t.Fatalf("prepared statement survived COM_RESET_CONNECTION: %v", err)
		}
	})
}

// rawCommand sends a one-packet command and returns the first response
// packet.
func rawCommand(bc *wire.BackendConn, cmd []byte) ([]byte, error) {
	if err := bc.WriteCommand(cmd); err != nil {
		return nil, err
	}
	p, err := bc.ReadPacket()
	return append([]byte(nil), p...), err
}

// TestKill: KILL QUERY <id> with a gateway connection id (from the
// handshake) interrupts that session's running statement and leaves the
// session usable; KILL <id>, KILL CONNECTION <id> and COM_PROCESS_KILL close
// the session; an unknown id gives 1094.
func TestKill(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		killer := tg.open(t, nil)
		killer.SetMaxOpenConns(1)

		// KILL QUERY: the SLEEP returns 1 (MariaDB) or fails with 1317.
		victim := tg.raw(t, 0)
		id := victim.Greeting.ConnectionID
		done := make(chan error, 1)
		var slept []byte
		go func() {
			done <- victim.QueryRows("SELECT SLEEP(20)", func(r [][]byte) { slept = append([]byte(nil), r[0]...) })
		}()
		time.Sleep(500 * time.Millisecond)
		if _, err := killer.Exec(fmt.Sprintf("KILL QUERY %d", id)); err != nil {
			t.Fatalf("KILL QUERY %d: %v", id, err)
		}
		select {
		case err := <-done:
			if err == nil && string(slept) != "1" || err != nil && !isSQLErr(err, 1317) {
				t.Fatalf("killed SLEEP: want result 1 or error 1317, got %q, %v", slept, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("KILL QUERY did not interrupt the statement within 10 s")
		}
		if err := victim.QueryRows("SELECT 1", func([][]byte) {}); err != nil {
			t.Fatalf("session unusable after KILL QUERY: %v", err)
		}

		// KILL, KILL CONNECTION and COM_PROCESS_KILL of an idle session,
		// and KILL CONNECTION of a busy one: the session is closed.
		for _, how := range []string{"KILL %d", "KILL CONNECTION %d", "COM_PROCESS_KILL", "busy"} {
			victim := tg.raw(t, 0)
			id := victim.Greeting.ConnectionID
			if how == "busy" {
				if err := victim.WriteCommand(append([]byte{wire.ComQuery}, "SELECT SLEEP(20)"...)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(500 * time.Millisecond)
				how = "KILL CONNECTION %d"
			}
			if how == "COM_PROCESS_KILL" {
				k := tg.raw(t, 0)
				p, err := rawCommand(k, binary.LittleEndian.AppendUint32([]byte{wire.ComProcessKill}, id))
				if err != nil || !wire.IsOK(p) {
					t.Fatalf("COM_PROCESS_KILL: want OK, got %x %v", p, err)
				}
			} else if _, err := killer.Exec(fmt.Sprintf(how, id)); err != nil {
				t.Fatalf("%s: %v", fmt.Sprintf(how, id), err)
			}
			// The session ends: at most an error packet, then EOF.
			_ = victim.NetConn().SetReadDeadline(time.Now().Add(10 * time.Second))
			rest, err := io.ReadAll(victim.NetConn())
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("%s: session still open 10 s later", how)
			}
			if !endsWithERR(rest) {
				t.Fatalf("%s: session got %x before closing, want nothing or packets ending in an error", how, rest)
			}
		}

		wantErr(t, tg.session(t, nil), "KILL 3999999", 1094, "HY000")
		wantErr(t, tg.session(t, nil), "KILL QUERY 3999999", 1094, "HY000")
	})
}

// endsWithERR reports whether b is empty or whole packets of which the
// last is an ERR packet.
func endsWithERR(b []byte) bool {
	last := -1
	for len(b) > 0 {
		if len(b) < 4 {
			return false
		}
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		if len(b) < 4+n || n == 0 {
			return false
		}
		last = int(b[4])
		b = b[4+n:]
	}
	return last == -1 || last == 0xff
}

// TestKillOtherUsersSession: a gateway user without admin rights cannot
// kill another user's session (MariaDB's 1095 "You are not owner of
// thread"), but may kill its own.
func TestKillOtherUsersSession(t *testing.T) {
	victim := login(t)
	db := open(t, shared.gwDSN("nopass", "", "", nil))
	db.SetMaxOpenConns(1)
	_, err := db.Exec(fmt.Sprintf("KILL %d", victim.Greeting.ConnectionID))
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1095 || string(me.SQLState[:]) != "HY000" {
		t.Fatalf("nopass kills app's session: want error 1095 (HY000), got %v", err)
	}
	if _, err := victim.Exec("DO 1"); err != nil {
		t.Fatalf("victim hurt: %v", err)
	}
	own := open(t, shared.gwDSN(appUser, appPass, "", nil))
	if _, err := own.Exec(fmt.Sprintf("KILL QUERY %d", victim.Greeting.ConnectionID)); err != nil {
		t.Fatalf("app kills a query of its own session: %v", err)
	}
	// An admin (admin: true) kills anyone's session.
	adm := open(t, shared.gwDSN(adminUser, adminPass, "", nil))
	if _, err := adm.Exec(fmt.Sprintf("KILL %d", victim.Greeting.ConnectionID)); err != nil {
		t.Fatalf("the admin kills app's session: %v", err)
	}
	if _, err := victim.Exec("DO 1"); err == nil {
		t.Fatal("the session the admin killed still answers")
	}
}
