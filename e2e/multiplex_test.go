package e2e

// Regression tests for multiplexing defects: session state that must
// follow a client across pooled connections (or pin it) and must never
// reach another client, and connection losses the client caused (a KILL,
// a packet above the server's limit, a wait_timeout it set, a pooled
// connection that died while idle) that must not look like backend
// failures nor run a statement twice.
//
// Each test runs gateways of its own with a pool of two connections in
// front of the shared MariaDB, so that consecutive statements of a session
// land on different backend connections (or on the one another session
// just used) unless the gateway keeps them together: nothing passes by
// luck. Where MariaDB's own behaviour is the expectation, the same script
// also runs straight against MariaDB. The gateways log in to MariaDB as a
// backend account of their own (mplxUser), so their pooled connections can
// be told apart in MariaDB's process list.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
)

// The backend account of this file's gateways.
const mplxUser, mplxPass = "mplx", "mplx-secret"

// ensureMplxAccount creates mplxUser on MariaDB (as root) with the same
// rights as the shared stack's backend account.
func ensureMplxAccount(t *testing.T) { ensureAccount(t, mplxUser, mplxPass) }

// ensureAccount creates the MariaDB account user (every host) with all
// privileges, if missing.
func ensureAccount(t *testing.T, user, pass string) {
	t.Helper()
	root := rootDB(t)
	for _, host := range []string{"%", "127.0.0.1", "localhost"} {
		mustExec(t, root,
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY '%s'", user, host, pass),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'%s'", user, host))
	}
}

// rootDB opens a root pool straight to MariaDB for the test.
func rootDB(t *testing.T) *sql.DB {
	t.Helper()
	return serverRoot(t, shared.db)
}

// startMplxGateway starts a gateway in front of the shared MariaDB with a
// pool of poolSize connections (all kept open: min_idle is poolSize) that
// log in as mplxUser, and with the given max_allowed_packet.
func startMplxGateway(t *testing.T, name string, poolSize, maxPacket int) *gateway.Server {
	t.Helper()
	ensureMplxAccount(t)
	return startGatewayAs(t, name, mplxUser, mplxPass, poolSize, maxPacket)
}

// startGatewayAs is startMplxGateway with the backend account user.
func startGatewayAs(t *testing.T, name, user, pass string, poolSize, maxPacket int) *gateway.Server {
	t.Helper()
	srv := startTestGateway(t, name, fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
max_allowed_packet: %d
users:
  - {user: %s, password: %s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {size: %d, min_idle: %d, max_dials: 2, acquire_timeout: 20s}
`, logLevel(), maxPacket, appUser, appPass, user, pass, shared.db.Addr(), poolSize, poolSize))
	return srv
}

// directTarget is MariaDB itself; gatewayTarget is srv.
func directTarget() target {
	return target{name: "direct", addr: shared.db.Addr(), user: backendUser, pass: backendPass}
}

func gatewayTarget(srv *gateway.Server) target {
	return target{name: "gateway", gateway: true, addr: srv.Addr().String(), user: appUser, pass: appPass}
}

// backendGuard watches the shared MariaDB's state in a gateway's health
// snapshots, to prove that nothing marked it down (not even for a moment:
// a reported failure moves it to not_serving and a good probe back, and
// both change Since).
type backendGuard struct {
	srv   *gateway.Server
	since time.Time
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	downs []string
}

// guardBackend waits (at most 10 s) until srv reports the backend serving
// and watches it from then on.
func guardBackend(t *testing.T, srv *gateway.Server) *backendGuard {
	t.Helper()
	addr := shared.db.Addr()
	deadline := time.Now().Add(10 * time.Second)
	var v *healthcheck.BackendView
	for {
		v = srv.Health().Backend(addr)
		if v != nil && v.State == healthcheck.StateServing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %s not serving 10 s after the gateway started: %+v", addr, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	g := &backendGuard{srv: srv, since: v.Since, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		snap := srv.Health()
		for {
			if v := snap.Backend(addr); v != nil && v.State != healthcheck.StateServing {
				g.mu.Lock()
				g.downs = append(g.downs, fmt.Sprintf("%s since %s: %s", v.State, v.Since.Format("15:04:05.000"), v.Reason))
				g.mu.Unlock()
			}
			select {
			case <-g.stop:
				return
			case <-snap.Changed():
				snap = srv.Health()
			}
		}
	}()
	t.Cleanup(g.close)
	return g
}

func (g *backendGuard) close() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

// check fails the test if the backend was marked down since the guard
// started (or since the last check).
func (g *backendGuard) check(t *testing.T, what string) {
	t.Helper()
	v := g.srv.Health().Backend(shared.db.Addr())
	g.mu.Lock()
	downs := g.downs
	g.downs = nil
	g.mu.Unlock()
	switch {
	case v == nil:
		t.Errorf("%s: the backend is gone from the health snapshot", what)
	case v.State != healthcheck.StateServing || !v.Since.Equal(g.since) || len(downs) > 0:
		t.Errorf("%s: the gateway marked the backend down (a client-caused loss or a dead idle connection is not a backend failure): now %s since %s (was serving since %s); seen: %q",
			what, v.State, v.Since.Format("15:04:05.000"), g.since.Format("15:04:05.000"), downs)
		if v.State == healthcheck.StateServing {
			g.since = v.Since
		}
	}
}

// shortSession opens one client connection to tg and returns it with a
// function that disconnects it (a *sql.Conn's Close keeps the connection
// open in its pool).
func shortSession(t *testing.T, tg target) (*sql.Conn, func()) {
	t.Helper()
	db := tg.open(t, nil)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatalf("%s: connect: %v", tg.name, err)
	}
	return conn, func() { conn.Close(); db.Close() }
}

// freshStatements checks that new sessions of tg work at once: n sessions,
// each running a read and a write (with a pool of two, some land on every
// pooled connection).
func freshStatements(t *testing.T, tg target, n int) {
	t.Helper()
	mustExec(t, direct(t), "CREATE TABLE IF NOT EXISTS mplx_fresh (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	for i := 0; i < n; i++ {
		db := tg.open(t, nil)
		db.SetMaxOpenConns(1)
		var one int
		if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Errorf("a new session's SELECT 1 (%d of %d): %d, %v", i+1, n, one, err)
		}
		if _, err := db.Exec("INSERT INTO mplx_fresh (v) VALUES (1)"); err != nil {
			t.Errorf("a new session's INSERT (%d of %d): %v", i+1, n, err)
		}
		db.Close()
	}
}

// otherTxns runs short transactions (START TRANSACTION; SELECT COUNT(*)
// FROM mplx_iso; COMMIT) and SELECT @@tx_isolation on two concurrent
// sessions of tg, 10 each, so that with a pool of two both pooled
// connections serve some (sequential sessions may all get the same one);
// every transaction must run at REPEATABLE READ and see no uncommitted
// row.
func otherTxns(t *testing.T, tg target) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := 0; i < 2; i++ {
		conn := tg.session(t, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for j := 0; j < 10; j++ {
				var lvl string
				var n int
				err := conn.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&lvl)
				if err == nil && lvl != "REPEATABLE-READ" {
					errs <- fmt.Sprintf("another client's @@tx_isolation = %s, want REPEATABLE-READ", lvl)
				}
				if err == nil {
					_, err = conn.ExecContext(ctx, "START TRANSACTION")
				}
				if err == nil {
					err = conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM mplx_iso").Scan(&n)
				}
				if err == nil {
					_, err = conn.ExecContext(ctx, "COMMIT")
				}
				if err != nil {
					errs <- fmt.Sprintf("another client's transaction: %v", err)
					return
				}
				if n != 0 {
					errs <- fmt.Sprintf("another client's transaction sees %d rows, want 0: it ran at a READ UNCOMMITTED level that was not its own", n)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	seen := map[string]bool{}
	for e := range errs {
		if !seen[e] {
			seen[e] = true
			t.Error(e)
		}
	}
}

// TestMultiplexNextTxnIsolation: SET TRANSACTION ISOLATION LEVEL (without
// SESSION: for the next transaction only) was lost through the gateway:
// the START TRANSACTION ran on another pooled connection, at REPEATABLE
// READ, so the transaction did not see another connection's uncommitted
// row (MariaDB: 1 row, the gateway: 0). The same for go-sql-driver's
// BeginTx with sql.LevelReadUncommitted. The setting must not leak either:
// a transaction of another client (or the client's own next one) runs at
// REPEATABLE READ.
func TestMultiplexNextTxnIsolation(t *testing.T) {
	srv := startMplxGateway(t, "mplx-iso", 2, 1<<20)
	ctx := context.Background()
	mustExec(t, direct(t), "DROP TABLE IF EXISTS mplx_iso", "CREATE TABLE mplx_iso (id INT PRIMARY KEY) ENGINE=InnoDB")
	// The uncommitted row, held by a direct connection (not one of the
	// gateway's).
	wdb := direct(t)
	writer, err := wdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Rollback() })
	if _, err := writer.Exec("INSERT INTO mplx_iso VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	const count = "SELECT COUNT(*) FROM mplx_iso"
	// txnCount runs START TRANSACTION, the count and COMMIT.
	txnCount := func(t *testing.T, conn *sql.Conn) string {
		t.Helper()
		run(t, conn, "START TRANSACTION")
		n := str(t, conn, count)
		run(t, conn, "COMMIT")
		return n
	}
	for _, tg := range []target{directTarget(), gatewayTarget(srv)} {
		t.Run(tg.name, func(t *testing.T) {
			t.Run("text", func(t *testing.T) {
				conn := tg.session(t, nil)
				run(t, conn, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
				run(t, conn, "START TRANSACTION")
				if n := str(t, conn, count); n != "1" {
					t.Errorf("SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED; START TRANSACTION; %s = %s, want 1 (the other connection's uncommitted row): the isolation level was lost", count, n)
				}
				run(t, conn, "COMMIT")
				// For the next transaction only.
				if n := txnCount(t, conn); n != "0" {
					t.Errorf("the transaction after the READ UNCOMMITTED one sees %s rows, want 0: the level outlived its transaction", n)
				}
			})
			t.Run("pending across idle", func(t *testing.T) {
				// An autocommit statement does not use up the level; the
				// client may wait before its transaction.
				conn := tg.session(t, nil)
				run(t, conn, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
				if got := str(t, conn, "SELECT 1"); got != "1" {
					t.Fatalf("SELECT 1 = %s", got)
				}
				time.Sleep(120 * time.Millisecond)
				// Meanwhile other clients' transactions run at REPEATABLE
				// READ, whichever pooled connection serves them.
				otherTxns(t, tg)
				if n := txnCount(t, conn); n != "1" {
					t.Errorf("after an autocommit SELECT, a pause and other clients' transactions, START TRANSACTION; %s = %s, want 1: the pending isolation level was lost", count, n)
				}
			})
			t.Run("BeginTx", func(t *testing.T) {
				db := tg.open(t, nil)
				db.SetMaxOpenConns(1)
				tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted})
				if err != nil {
					t.Fatal(err)
				}
				var n int
				if err := tx.QueryRow(count).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 1 {
					t.Errorf("BeginTx(LevelReadUncommitted): %s = %d, want 1: the isolation level was lost", count, n)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				tx, err = db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.QueryRow(count).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("BeginTx(default) after a READ UNCOMMITTED one: %s = %d, want 0", count, n)
				}
				tx.Rollback()
			})
			t.Run("no leak", func(t *testing.T) {
				// A READ UNCOMMITTED transaction, then a pending level the
				// client never uses, then the client leaves.
				a := tg.session(t, nil)
				run(t, a, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
				txnCount(t, a)
				run(t, a, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
				left, leave := shortSession(t, tg)
				run(t, left, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
				leave()
				otherTxns(t, tg)
			})
		})
	}
}

// writeOnEveryConn runs, on the sessions ws (two of them) at the same
// time, a short transaction that inserts a parent row and stays open for
// 30 ms, so that with a pool of two each pooled connection not held by
// another session gets another client's insert (and LAST_INSERT_ID()).
func writeOnEveryConn(ws []*sql.Conn) error {
	return onEveryConn(ws, "INSERT INTO mplx_parent (v) VALUES ('other')")
}

// onEveryConn runs START TRANSACTION, stmt, a 30 ms pause and
// COMMIT on the sessions ws at the same time, so that each session holds a
// pooled connection of its own meanwhile.
func onEveryConn(ws []*sql.Conn, stmt string) error {
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := w.ExecContext(ctx, "START TRANSACTION")
			if err == nil {
				_, err = w.ExecContext(ctx, stmt)
				time.Sleep(30 * time.Millisecond)
				end := "COMMIT"
				if err != nil {
					end = "ROLLBACK"
				}
				if _, e := w.ExecContext(ctx, end); err == nil {
					err = e
				}
			}
			errs <- err
		}()
	}
	var first error
	for range ws {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// TestMultiplexLastInsertIDPrepared: LAST_INSERT_ID() in a server-side
// prepared statement (COM_STMT_PREPARE, COM_STMT_EXECUTE) read the value
// of whichever pooled connection served the execute, not the session's
// last insert: a child row pointed to another client's parent. The
// gateway releases the connection after the prepare, and holds the
// connection of a write only 50 ms; LAST_INSERT_ID() must still be the
// session's, as on MariaDB, however long the client waits.
func TestMultiplexLastInsertIDPrepared(t *testing.T) {
	// Parallel: its own gateway and tables, mostly waiting out holds and
	// pauses (see the package doc).
	t.Parallel()
	srv := startMplxGateway(t, "mplx-lastid", 2, 1<<20)
	mustExec(t, direct(t), "DROP TABLE IF EXISTS mplx_parent, mplx_child",
		"CREATE TABLE mplx_parent (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB",
		"CREATE TABLE mplx_child (id BIGINT AUTO_INCREMENT PRIMARY KEY, parent_id BIGINT, tag VARCHAR(120), n INT) ENGINE=InnoDB")
	ctx := context.Background()
	const child = "INSERT INTO mplx_child (parent_id, tag, n) VALUES (LAST_INSERT_ID(), ?, ?)"
	// With arguments and InterpolateParams off, go-sql-driver sends
	// COM_STMT_PREPARE and COM_STMT_EXECUTE (then COM_STMT_CLOSE).
	noInterpolate := func(c *mysql.Config) { c.InterpolateParams = false }
	modes := []struct {
		name string
		n    int
		// step inserts the child of the parent just inserted; ws are two
		// other clients' sessions for writeOnEveryConn.
		step func(conn *sql.Conn, ws []*sql.Conn, tag string, i int) error
	}{
		{"back to back", 50, func(conn *sql.Conn, _ []*sql.Conn, tag string, i int) error {
			_, err := conn.ExecContext(ctx, child, tag, i)
			return err
		}},
		{"others write between prepare and execute", 10, func(conn *sql.Conn, ws []*sql.Conn, tag string, i int) error {
			st, err := conn.PrepareContext(ctx, child)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := writeOnEveryConn(ws); err != nil {
				return fmt.Errorf("another client: %w", err)
			}
			_, err = st.ExecContext(ctx, tag, i)
			return err
		}},
		{"pause 120ms", 15, func(conn *sql.Conn, ws []*sql.Conn, tag string, i int) error {
			start := time.Now()
			time.Sleep(60 * time.Millisecond)
			if err := writeOnEveryConn(ws); err != nil {
				return fmt.Errorf("another client: %w", err)
			}
			time.Sleep(120*time.Millisecond - time.Since(start))
			_, err := conn.ExecContext(ctx, child, tag, i)
			return err
		}},
	}
	for _, tg := range []target{directTarget(), gatewayTarget(srv)} {
		for _, m := range modes {
			t.Run(tg.name+"/"+m.name, func(t *testing.T) {
				// Other clients insert parents all along, each pausing now
				// and then for longer than the gateway's hold.
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var otherErr atomic.Value
				for i := 0; i < 4; i++ {
					db := tg.open(t, nil)
					db.SetMaxOpenConns(1)
					wg.Add(1)
					go func() {
						defer wg.Done()
						deadline := time.Now().Add(60 * time.Second)
						for j := 0; j < 5000 && time.Now().Before(deadline); j++ {
							select {
							case <-stop:
								return
							default:
							}
							if _, err := db.Exec("INSERT INTO mplx_parent (v) VALUES ('other')"); err != nil {
								otherErr.CompareAndSwap(nil, err)
								return
							}
							time.Sleep(time.Duration((i+j)%4) * 20 * time.Millisecond)
						}
					}()
				}
				defer func() {
					close(stop)
					wg.Wait()
					if err, _ := otherErr.Load().(error); err != nil {
						t.Errorf("another client's insert failed: %v", err)
					}
				}()
				ws := []*sql.Conn{tg.session(t, nil), tg.session(t, nil)}
				conn := tg.session(t, noInterpolate)
				tag := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
				parents := make([]int64, m.n)
				for i := range m.n {
					res, err := conn.ExecContext(ctx, "INSERT INTO mplx_parent (v) VALUES ('x')")
					if err != nil {
						t.Fatalf("insert parent %d: %v", i, err)
					}
					if parents[i], err = res.LastInsertId(); err != nil {
						t.Fatal(err)
					}
					if err := m.step(conn, ws, tag, i); err != nil {
						t.Fatalf("insert child %d: %v", i, err)
					}
				}
				rows, err := direct(t).Query("SELECT n, parent_id FROM mplx_child WHERE tag = ? ORDER BY n", tag)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				got := map[int]int64{}
				for rows.Next() {
					var i int
					var pid sql.NullInt64
					if err := rows.Scan(&i, &pid); err != nil {
						t.Fatal(err)
					}
					got[i] = pid.Int64
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				var wrong []string
				for i, want := range parents {
					if pid, ok := got[i]; !ok || pid != want {
						wrong = append(wrong, fmt.Sprintf("child %d: parent_id %d, want %d", i, pid, want))
					}
				}
				if len(wrong) > 0 {
					t.Errorf("%d of %d children point to the wrong parent (LAST_INSERT_ID() in the prepared statement was not the session's), e.g. %s",
						len(wrong), m.n, strings.Join(wrong[:min(len(wrong), 5)], "; "))
				}
			})
		}
	}
}

// TestMultiplexStateInsideCall: state made inside a stored procedure,
// stored function or trigger (user variables), and a named lock taken by
// a back-quoted built-in (`GET_LOCK`), stayed on the pooled connection
// while the session moved on: other clients read the variable or found
// the lock theirs, and the client itself lost it.
func TestMultiplexStateInsideCall(t *testing.T) {
	srv := startMplxGateway(t, "mplx-call", 2, 1<<20)
	root := rootDB(t)
	var trust string
	if err := root.QueryRow("SELECT @@GLOBAL.log_bin_trust_function_creators").Scan(&trust); err != nil {
		t.Fatal(err)
	}
	mustExec(t, root, "SET GLOBAL log_bin_trust_function_creators = 1")
	t.Cleanup(func() { root.Exec("SET GLOBAL log_bin_trust_function_creators = " + trust) })
	mustExec(t, direct(t),
		"DROP PROCEDURE IF EXISTS mplx_sp_state",
		"CREATE PROCEDURE mplx_sp_state() BEGIN SET @mplx_from_proc = 7; END",
		"DROP FUNCTION IF EXISTS mplx_f_state",
		"CREATE FUNCTION mplx_f_state() RETURNS INT DETERMINISTIC BEGIN SET @mplx_from_func = 8; RETURN 1; END",
		"DROP TABLE IF EXISTS mplx_trig",
		"CREATE TABLE mplx_trig (id INT) ENGINE=InnoDB",
		"CREATE TRIGGER mplx_trig_ai AFTER INSERT ON mplx_trig FOR EACH ROW SET @mplx_from_trig = NEW.id")
	cases := []struct {
		name, do, check, want string
	}{
		{"procedure", "CALL mplx_sp_state()", "SELECT @mplx_from_proc", "7"},
		{"function", "SELECT mplx_f_state()", "SELECT @mplx_from_func", "8"},
		{"trigger", "INSERT INTO mplx_trig VALUES (9)", "SELECT @mplx_from_trig", "9"},
	}
	for _, tg := range []target{directTarget(), gatewayTarget(srv)} {
		for _, c := range cases {
			t.Run(tg.name+"/"+c.name, func(t *testing.T) {
				a := tg.session(t, nil)
				if strings.HasPrefix(c.do, "SELECT") {
					str(t, a, c.do)
				} else {
					run(t, a, c.do)
				}
				time.Sleep(200 * time.Millisecond)
				for i := 0; i < 10; i++ {
					other, leave := shortSession(t, tg)
					if got := str(t, other, c.check); got != "NULL" {
						t.Errorf("another client (%d of 10): %s = %s, want NULL: the variable set inside the %s leaked", i+1, c.check, got, c.name)
					}
					leave()
				}
				for i := 0; i < 3; i++ {
					time.Sleep(120 * time.Millisecond)
					if got := str(t, a, c.check); got != c.want {
						t.Errorf("the client itself, %d ms after its %s: %s = %s, want %s: the variable was lost", 200+120*(i+1), c.do, c.check, got, c.want)
					}
				}
			})
		}
		t.Run(tg.name+"/quoted GET_LOCK", func(t *testing.T) {
			lock := "mplx_m_" + tg.name
			a := tg.session(t, nil)
			if got := str(t, a, "SELECT `GET_LOCK`('"+lock+"', 0)"); got != "1" {
				t.Fatalf("SELECT `GET_LOCK`('%s', 0) = %s, want 1", lock, got)
			}
			time.Sleep(200 * time.Millisecond)
			for i := 0; i < 10; i++ {
				other, leave := shortSession(t, tg)
				if got := str(t, other, "SELECT GET_LOCK('"+lock+"', 0)"); got != "0" {
					t.Errorf("another client (%d of 10): GET_LOCK('%s', 0) = %s, want 0: the first client's lock was not held for it", i+1, lock, got)
				}
				leave()
			}
			for i := 0; i < 2; i++ {
				time.Sleep(120 * time.Millisecond)
				if got := str(t, a, "SELECT IS_USED_LOCK('"+lock+"') <=> CONNECTION_ID()"); got != "1" {
					t.Errorf("after a pause the lock is not held by the connection serving the client")
				}
			}
			time.Sleep(120 * time.Millisecond)
			if got := str(t, a, "SELECT RELEASE_LOCK('"+lock+"')"); got != "1" {
				t.Errorf("RELEASE_LOCK('%s') = %s, want 1: the client no longer held its lock", lock, got)
			}
		})
	}
}

// processIDs returns the ids of MariaDB threads running a statement that
// contains marker (the query itself excluded).
func processIDs(t *testing.T, root *sql.DB, marker string) []int64 {
	t.Helper()
	rows, err := root.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND = 'Query' AND INFO LIKE ?", "%"+marker+"%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestKillDoesNotRerun: KILL <id> of a session running a read closed the
// backend connection under the statement; the gateway took that for a
// backend failure, marked the backend down and retried the read on
// another connection, where it ran again (for 20 s, for nobody). KILL
// QUERY must interrupt the statement with MariaDB's 1317 and leave the
// session working, and must not re-run it either.
func TestKillDoesNotRerun(t *testing.T) {
	srv := startMplxGateway(t, "mplx-kill", 2, 1<<20)
	guard := guardBackend(t, srv)
	root := rootDB(t)
	for _, tg := range []target{directTarget(), gatewayTarget(srv)} {
		for _, how := range []string{"KILL QUERY %d", "KILL %d"} {
			t.Run(tg.name+"/"+strings.TrimSuffix(how, " %d"), func(t *testing.T) {
				killer := tg.session(t, nil)
				a := tg.raw(t, 0)
				id := a.Greeting.ConnectionID
				marker := fmt.Sprintf("mplx_kill_%d", time.Now().UnixNano())
				done := make(chan error, 1)
				var rowsSeen atomic.Int32
				go func() {
					done <- a.QueryRows(fmt.Sprintf("SELECT SLEEP(20), '%s'", marker), func([][]byte) { rowsSeen.Add(1) })
				}()
				// Wait until MariaDB runs it (at most 5 s).
				ran := map[int64]bool{}
				for start := time.Now(); len(ran) == 0 && time.Since(start) < 5*time.Second; time.Sleep(20 * time.Millisecond) {
					for _, pid := range processIDs(t, root, marker) {
						ran[pid] = true
					}
				}
				if len(ran) == 0 {
					t.Fatal("the SLEEP never showed in MariaDB's process list")
				}
				run(t, killer, fmt.Sprintf(how, id))
				killed := time.Now()
				var err error
				select {
				case err = <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: the statement was not interrupted within 10 s", fmt.Sprintf(how, id))
				}
				query := strings.HasPrefix(how, "KILL QUERY")
				if query {
					var se *wire.SQLError
					if !errors.As(err, &se) || se.Code != 1317 || se.State != "70100" {
						t.Errorf("KILL QUERY: the client got %v (%d rows), want error 1317 (70100) Query execution was interrupted", err, rowsSeen.Load())
					}
					if _, err := a.Exec("SELECT 1"); err != nil {
						t.Errorf("the session is unusable after KILL QUERY: %v", err)
					}
				} else {
					if err == nil {
						t.Errorf("KILL: the killed statement returned a result (%d rows), want the connection closed", rowsSeen.Load())
					}
					// The session is gone: at most an error, then EOF.
					_ = a.NetConn().SetReadDeadline(time.Now().Add(5 * time.Second))
					rest, rerr := io.ReadAll(a.NetConn())
					if errors.Is(rerr, os.ErrDeadlineExceeded) {
						t.Errorf("KILL: the session is still open 5 s later")
					} else if !endsWithERR(rest) {
						t.Errorf("KILL: the session got %x before closing, want nothing or packets ending in an error", rest)
					}
				}
				// One second after the KILL, nothing runs the statement, and
				// nothing ran it again meanwhile (sampled every 50 ms).
				var late []int64
				for time.Since(killed) < 1500*time.Millisecond {
					ids := processIDs(t, root, marker)
					for _, pid := range ids {
						ran[pid] = true
					}
					if time.Since(killed) >= time.Second {
						late = append(late, ids...)
					}
					time.Sleep(50 * time.Millisecond)
				}
				if len(late) > 0 {
					t.Errorf("%s: MariaDB still runs the statement 1 s after the KILL (threads %v): it was re-run", fmt.Sprintf(how, id), late)
				}
				if len(ran) > 1 {
					t.Errorf("%s: the statement ran on %d MariaDB threads (%v): the killed statement ran again", fmt.Sprintf(how, id), len(ran), ran)
				}
				if tg.gateway {
					freshStatements(t, tg, 4)
					guard.check(t, fmt.Sprintf(how, id))
				}
			})
		}
	}
}

// sendHuge sends query (split into protocol packets) while reading the
// answer, as a server may answer and close before it has read everything.
// It returns the first answer packet (nil if none) and the read error.
func sendHuge(bc *wire.BackendConn, query string) ([]byte, error) {
	werr := make(chan error, 1)
	go func() { werr <- bc.WriteCommand(append([]byte{wire.ComQuery}, query...)) }()
	p, err := bc.ReadPacket()
	p = append([]byte(nil), p...)
	if err != nil {
		// Nothing came back; close so that a blocked write ends.
		bc.Close()
	}
	<-werr
	return p, err
}

// tooLargeAborts counts the lines MariaDB's error log has, from offset on,
// for connections of account user it dropped for a packet above its
// max_allowed_packet (log_warnings is 2 by default: aborted connections
// are logged with their reason).
func tooLargeAborts(t *testing.T, offset int64, user string) int {
	t.Helper()
	b, err := os.ReadFile(shared.db.ErrorLog)
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	n := 0
	for _, line := range strings.Split(string(b[offset:]), "\n") {
		if strings.Contains(line, "Aborted connection") && strings.Contains(line, "user: '"+user+"'") &&
			strings.Contains(line, "Got a packet bigger than 'max_allowed_packet' bytes") {
			n++
		}
	}
	return n
}

// errorLogSize is the size of MariaDB's error log now.
func errorLogSize(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(shared.db.ErrorLog)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// lostClass names how a statement failed: "error N" for a MySQL error
// packet, "closed" for a connection the server closed without one.
func lostClass(err error) string {
	var se *wire.SQLError
	switch {
	case err == nil:
		return "success"
	case errors.As(err, &se):
		return "error " + strconv.Itoa(int(se.Code))
	}
	return "closed"
}

// TestClientCausedLossIsNotBackendFailure: a backend connection lost
// because of the client's own statement was handled as a backend failure:
// the backend was marked down (and its idle connections closed), a read
// was retried (running it twice), and the client got the gateway's 2013
// instead of MariaDB's own answer. The cases: a statement above MariaDB's
// max_allowed_packet but below the gateway's (MariaDB answers 1153 and
// closes), a session wait_timeout the client set (MariaDB closes the idle
// connection without a word), and KILL CONNECTION_ID() (through the
// gateway a backend thread id; recorded, and the backend must stay up).
func TestClientCausedLossIsNotBackendFailure(t *testing.T) {
	root := rootDB(t)
	var oldPacket string
	if err := root.QueryRow("SELECT @@GLOBAL.max_allowed_packet").Scan(&oldPacket); err != nil {
		t.Fatal(err)
	}
	// MariaDB's default; the gateway's pooled connections open after this.
	mustExec(t, root, "SET GLOBAL max_allowed_packet = 16777216")
	t.Cleanup(func() { root.Exec("SET GLOBAL max_allowed_packet = " + oldPacket) })
	// Each case has a gateway of its own, so that what one leaves behind
	// (a dead pooled connection) does not fail the next.
	start := func(t *testing.T, name string) (target, *backendGuard) {
		srv := startMplxGateway(t, name, 2, 64<<20)
		return gatewayTarget(srv), guardBackend(t, srv)
	}

	t.Run("packet too large", func(t *testing.T) {
		gwt, guard := start(t, "mplx-loss-packet")
		big := "SELECT '" + strings.Repeat("a", 20<<20) + "'"
		for _, tg := range []target{directTarget(), gwt} {
			logAt := errorLogSize(t)
			p, err := sendHuge(tg.raw(t, 0), big)
			// MariaDB logs each connection it drops for a packet too large
			// (wait for the line, at most 2 s).
			account := backendUser
			if tg.gateway {
				account = mplxUser
			}
			sent := 0
			for start := time.Now(); sent == 0 && time.Since(start) < 2*time.Second; time.Sleep(20 * time.Millisecond) {
				sent = tooLargeAborts(t, logAt, account)
			}
			if tg.gateway {
				time.Sleep(200 * time.Millisecond) // a retry would have been logged by now
				sent = tooLargeAborts(t, logAt, account)
			}
			t.Logf("%s: MariaDB dropped %d connections for the 20 MB statement", tg.name, sent)
			if tg.gateway && sent > 1 {
				t.Errorf("MariaDB dropped %d connections for one 20 MB statement: the gateway sent it again (a client-caused loss must never be retried)", sent)
			}
			if err != nil || !wire.IsERR(p) {
				t.Errorf("%s: a 20 MB statement: want an error packet, got %q, %v", tg.name, p[:min(len(p), 64)], err)
			} else {
				e := wire.ParseERR(p)
				t.Logf("%s: %v", tg.name, e)
				// MariaDB's words exactly (issue 37: the gateway's advice, once
				// appended here, goes to its log).
				if e.Code != 1153 || e.State != "08S01" || e.Message != "Got a packet bigger than 'max_allowed_packet' bytes" {
					t.Errorf("%s: a 20 MB statement got %v, want error 1153 (08S01) Got a packet bigger than 'max_allowed_packet' bytes", tg.name, e)
				}
			}
			if tg.gateway {
				freshStatements(t, tg, 4)
				guard.check(t, "packet too large")
			}
		}
	})

	t.Run("wait_timeout", func(t *testing.T) {
		gwt, guard := start(t, "mplx-loss-timeout")
		var want string
		for _, tg := range []target{directTarget(), gwt} {
			a := tg.raw(t, 0)
			if _, err := a.Exec("SET SESSION wait_timeout = 1"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2500 * time.Millisecond)
			_, err := a.Exec("SELECT 1")
			got := lostClass(err)
			t.Logf("%s: SELECT 1 after 2.5 s idle with wait_timeout=1: %s (%v)", tg.name, got, err)
			if !tg.gateway {
				want = got
				continue
			}
			if got != want {
				t.Errorf("after 2.5 s idle with wait_timeout=1 the gateway's client got %s (%v), MariaDB's client gets %s", got, err, want)
			}
			freshStatements(t, tg, 4)
			guard.check(t, "wait_timeout")
		}
	})

	t.Run("KILL CONNECTION_ID()", func(t *testing.T) {
		gwt, guard := start(t, "mplx-loss-kill")
		for _, tg := range []target{directTarget(), gwt} {
			a := tg.raw(t, 0)
			_, err := a.Exec("KILL CONNECTION_ID()")
			_, after := a.Exec("SELECT 1")
			t.Logf("%s: KILL CONNECTION_ID(): %s (%v); then SELECT 1: %s (%v)", tg.name, lostClass(err), err, lostClass(after), after)
			// The id CONNECTION_ID() gives through the gateway is a backend
			// thread's; KILL <that id> is a KILL of a gateway id.
			b := tg.raw(t, 0)
			var tid string
			if err := b.QueryRows("SELECT CONNECTION_ID()", func(r [][]byte) { tid = string(r[0]) }); err != nil {
				t.Fatal(err)
			}
			_, err = b.Exec("KILL " + tid)
			_, after = b.Exec("SELECT 1")
			t.Logf("%s: KILL <CONNECTION_ID() = %s> (gateway id %d): %s (%v); then SELECT 1: %s (%v)", tg.name, tid, b.Greeting.ConnectionID, lostClass(err), err, lostClass(after), after)
			if tg.gateway {
				freshStatements(t, tg, 4)
				guard.check(t, "KILL CONNECTION_ID()")
			}
		}
	})
}

// killIdle kills, from MariaDB's side, every idle connection of the
// account user and returns how many.
func killIdle(t *testing.T, root *sql.DB, user string) int {
	t.Helper()
	rows, err := root.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND COMMAND = 'Sleep'", user)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	n := 0
	for _, id := range ids {
		if _, err := root.Exec(fmt.Sprintf("KILL %d", id)); err == nil {
			n++
		}
	}
	return n
}

// TestDeadPooledConnectionRetried: a pooled connection that died while
// idle (killed from MariaDB's side) failed the next statement sent on it
// with 2013 "Lost connection to backend during query ... connection reset
// by peer" and marked the backend down, although the statement never
// reached the server: a write that failed before any byte reached the
// server may go to a fresh connection, and so may a read.
func TestDeadPooledConnectionRetried(t *testing.T) {
	root := rootDB(t)
	mustExec(t, direct(t), "DROP TABLE IF EXISTS mplx_dead", "CREATE TABLE mplx_dead (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB")
	ctx := context.Background()
	rowCount := func() int {
		var n int
		if err := direct(t).QueryRow("SELECT COUNT(*) FROM mplx_dead").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// sessions are what a step uses: a text-protocol session, one whose
	// statements with arguments are server-side prepared, and a statement
	// prepared on it before the connections died.
	type sessions struct {
		text, prep *sql.Conn
		stmt       *sql.Stmt
		tg         target
	}
	steps := []struct {
		name  string
		write bool
		do    func(s sessions) error
	}{
		{"text read", false, func(s sessions) error {
			var n int
			return s.text.QueryRowContext(ctx, "SELECT COUNT(*) FROM mplx_dead").Scan(&n)
		}},
		{"text write", true, func(s sessions) error {
			_, err := s.text.ExecContext(ctx, "INSERT INTO mplx_dead (v) VALUES ('text')")
			return err
		}},
		{"prepared read", false, func(s sessions) error {
			var n int
			return s.prep.QueryRowContext(ctx, "SELECT COUNT(*) FROM mplx_dead WHERE v <> ?", "none").Scan(&n)
		}},
		{"prepared write", true, func(s sessions) error {
			_, err := s.prep.ExecContext(ctx, "INSERT INTO mplx_dead (v) VALUES (?)", "prep")
			return err
		}},
		{"execute of a statement prepared before", true, func(s sessions) error {
			_, err := s.stmt.ExecContext(ctx, "stmt")
			return err
		}},
		{"read in a new session", false, func(s sessions) error {
			var n int
			return s.tg.session(t, nil).QueryRowContext(ctx, "SELECT COUNT(*) FROM mplx_dead").Scan(&n)
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			// A gateway of its own: what a failed step leaves behind
			// must not fail the next.
			srv := startMplxGateway(t, "mplx-dead", 2, 1<<20)
			tg := gatewayTarget(srv)
			guard := guardBackend(t, srv)
			s := sessions{tg: tg, text: tg.session(t, nil), prep: tg.session(t, func(c *mysql.Config) { c.InterpolateParams = false })}
			var err error
			if s.stmt, err = s.prep.PrepareContext(ctx, "INSERT INTO mplx_dead (v) VALUES (?)"); err != nil {
				t.Fatal(err)
			}
			defer s.stmt.Close()
			// Both pooled connections open (two transactions at once) and
			// idle (at most 5 s).
			if err := onEveryConn([]*sql.Conn{tg.session(t, nil), tg.session(t, nil)}, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
				var idle int
				if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? AND COMMAND = 'Sleep'", mplxUser).Scan(&idle); err != nil {
					t.Fatal(err)
				}
				if idle >= 2 {
					break
				}
				if time.Since(start) > 5*time.Second {
					t.Fatalf("the gateway has %d idle pooled connections, want 2", idle)
				}
			}
			before := rowCount()
			if n := killIdle(t, root, mplxUser); n < 2 {
				t.Fatalf("killed %d idle pooled connections, want 2", n)
			}
			time.Sleep(200 * time.Millisecond)
			if err := st.do(s); err != nil {
				t.Errorf("%s on a dead pooled connection: %v (the statement never reached the server: it must go to a fresh connection)", st.name, err)
			}
			if st.write {
				if d := rowCount() - before; d != 1 {
					t.Errorf("%s inserted %d rows, want 1", st.name, d)
				}
			}
			guard.check(t, st.name)
		})
	}
}

// TestMultiplexDiagnostics: ROW_COUNT(), FOUND_ROWS(), SHOW WARNINGS,
// SHOW ERRORS and @@warning_count read the previous statement of the
// session, as on MariaDB, however long the client waits and whatever other
// sessions run meanwhile on the pooled connection it used. Before, they
// read whichever connection served the read once the 50 ms hold was over.
func TestMultiplexDiagnostics(t *testing.T) {
	srv := startMplxGateway(t, "mplx-diag", 2, 1<<20)
	mustExec(t, direct(t), "DROP TABLE IF EXISTS mplx_diag",
		"CREATE TABLE mplx_diag (id INT AUTO_INCREMENT PRIMARY KEY, n INT)",
		"INSERT INTO mplx_diag (n) VALUES (1), (2), (3), (4), (5)")
	ctx := context.Background()
	// Each case runs its statements, then (after a pause longer than the
	// hold, while two other sessions leave other diagnostics on every
	// pooled connection) its read.
	cases := []struct {
		name  string
		stmts []string
		read  string
		want  string // "" compares with MariaDB only
	}{
		{"row count of an update", []string{"UPDATE mplx_diag SET n = n + 1 WHERE id <= 3"}, "SELECT ROW_COUNT()", "3"},
		{"row count of a select", []string{"SELECT * FROM mplx_diag"}, "SELECT ROW_COUNT() AS rc", "-1"},
		{"found rows of a select", []string{"SELECT * FROM mplx_diag WHERE id > 1"}, "SELECT FOUND_ROWS()", "4"},
		{"found rows after a write", []string{"SELECT * FROM mplx_diag WHERE id > 2", "UPDATE mplx_diag SET n = n WHERE id = 1"}, "SELECT FOUND_ROWS()", "3"},
		{"SQL_CALC_FOUND_ROWS", []string{"SELECT SQL_CALC_FOUND_ROWS * FROM mplx_diag LIMIT 1"}, "SELECT FOUND_ROWS()", "5"},
		// make compat (ctype_binary): FOUND_ROWS() inside an expression.
		{"found rows in an expression", []string{"SELECT * FROM mplx_diag WHERE id > 1"}, "SELECT HEX(CONCAT(FOUND_ROWS())), FOUND_ROWS() + 1", "34|5"},
		{"found rows kept by SHOW CREATE", []string{"SELECT * FROM mplx_diag WHERE id > 2", "SHOW CREATE TABLE mplx_diag"}, "SELECT FOUND_ROWS() + 0", "3"},
		{"found rows of CREATE ... SELECT", []string{"SELECT * FROM mplx_diag WHERE id > 2", "CREATE TABLE mplx_diag_c AS SELECT 7 AS c1",
			"SHOW CREATE TABLE mplx_diag_c", "DROP TABLE mplx_diag_c"}, "SELECT HEX(CONCAT(FOUND_ROWS()))", "30"},
		{"no found rows in an expression", []string{"SELECT * FROM mplx_diag WHERE id > 9"}, "SELECT FOUND_ROWS() + 1", "1"},
		{"warnings", []string{"SELECT 1/0, CAST('x' AS SIGNED)"}, "SHOW WARNINGS", ""},
		{"warning count", []string{"SELECT 1/0"}, "SELECT @@warning_count, @@error_count", "1|0"},
		{"an error", []string{"SELECT nosuch FROM mplx_diag"}, "SHOW ERRORS", ""},
		{"count of errors", []string{"SELECT nosuch FROM mplx_diag"}, "SHOW COUNT(*) ERRORS", "1"},
		{"kept by a statement without tables", []string{"SELECT 1/0", "SET @mplx = 1"}, "SHOW WARNINGS", "Warning|1365|Division by 0"},
		{"emptied by a statement with tables", []string{"SELECT 1/0", "SELECT COUNT(*) FROM mplx_diag"}, "SHOW WARNINGS", ""},
		{"limit", []string{"SELECT 1/0, 2/0, 3/0"}, "SHOW WARNINGS LIMIT 1, 1", "Warning|1365|Division by 0"},
	}
	results := map[string][]string{}
	for _, tg := range []target{directTarget(), gatewayTarget(srv)} {
		db := tg.open(t, nil)
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ws []*sql.Conn
		for range 2 {
			w, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		for _, c := range cases {
			for _, s := range c.stmts {
				rows, err := conn.QueryContext(ctx, s)
				if err == nil {
					for rows.Next() {
					}
					err = rows.Err()
					rows.Close()
				}
				if err != nil && !strings.Contains(s, "nosuch") {
					t.Fatalf("%s: %s: %s: %v", tg.name, c.name, s, err)
				}
			}
			start := time.Now()
			for _, noise := range []string{"SELECT 7/0, CAST('noise' AS SIGNED)", "SELECT * FROM mplx_diag LIMIT 2"} {
				if err := onEveryConn(ws, noise); err != nil {
					t.Fatalf("%s: another session: %v", tg.name, err)
				}
			}
			time.Sleep(120*time.Millisecond - time.Since(start))
			got, err := queryRowsText(ctx, conn, c.read)
			if err != nil {
				t.Fatalf("%s: %s: %s: %v", tg.name, c.name, c.read, err)
			}
			results[c.name] = append(results[c.name], got)
			if c.want != "" && got != c.want {
				t.Errorf("%s: %s: %s = %q, want %q", tg.name, c.name, c.read, got, c.want)
			}
		}
		for _, w := range ws {
			w.Close()
		}
		conn.Close()
	}
	for _, c := range cases {
		if r := results[c.name]; len(r) == 2 && r[0] != r[1] {
			t.Errorf("%s: %s: MariaDB %q, gateway %q", c.name, c.read, r[0], r[1])
		}
	}
}

// queryRowsText runs q and returns its rows as "a|b|c" lines.
func queryRowsText(ctx context.Context, conn *sql.Conn, q string) (string, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var lines []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = string(v)
		}
		lines = append(lines, strings.Join(parts, "|"))
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// A CALL of a procedure that uses no table and raises nothing keeps the
// warnings of the statement before it, on MariaDB; through the gateway
// that statement may have run on another connection, whose list is the
// session's own only in the gateway's copy. (Found by the differential
// fuzzer: seed 1796173236394322031.)
func TestMultiplexWarningsKeptByCall(t *testing.T) {
	srv := startMplxGateway(t, "mplx-callwarn", 1, 1<<20)
	mustExec(t, direct(t),
		"DROP PROCEDURE IF EXISTS mplx_cw_set", "CREATE PROCEDURE mplx_cw_set(x INT) SET @mplx_cw = x",
		"DROP PROCEDURE IF EXISTS mplx_cw_sel", "CREATE PROCEDURE mplx_cw_sel() SELECT 1",
		"DROP PROCEDURE IF EXISTS mplx_cw_warn", "CREATE PROCEDURE mplx_cw_warn() DO CAST('z' AS INT)",
		"DROP TABLE IF EXISTS mplx_cw", "CREATE TABLE mplx_cw (id INT)",
		"DROP PROCEDURE IF EXISTS mplx_cw_tab", "CREATE PROCEDURE mplx_cw_tab() SELECT COUNT(*) FROM mplx_cw")
	cases := []struct{ call, want string }{
		{"CALL mplx_cw_set(3)", "2 w1,w2"},
		{"CALL mplx_cw_sel()", "2 w1,w2"},
		{"CALL mplx_cw_tab()", "0 "},
		{"CALL mplx_cw_warn()", "1 z"},
	}
	for _, tg := range []target{directTarget(), gatewayTarget(srv)} {
		for _, c := range cases {
			t.Run(tg.name+"/"+c.call, func(t *testing.T) {
				a := tg.session(t, nil)
				run(t, a, "DO CAST('w1' AS INT), CAST('w2' AS INT)")
				// Another client empties the list of the (only) pooled
				// connection once a's is back in the pool.
				time.Sleep(120 * time.Millisecond)
				other, leave := shortSession(t, tg)
				str(t, other, "SELECT COUNT(*) FROM mplx_cw")
				leave()
				rows, err := a.QueryContext(context.Background(), c.call)
				if err != nil {
					t.Fatal(err)
				}
				for ok := true; ok; ok = rows.NextResultSet() {
					for rows.Next() {
					}
				}
				rows.Close()
				count := str(t, a, "SELECT @@warning_count")
				var msgs []string
				rows, err = a.QueryContext(context.Background(), "SHOW WARNINGS")
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var level, code, msg string
					if err := rows.Scan(&level, &code, &msg); err != nil {
						t.Fatal(err)
					}
					msgs = append(msgs, strings.TrimSuffix(strings.TrimPrefix(msg, "Truncated incorrect INTEGER value: '"), "'"))
				}
				rows.Close()
				if got := count + " " + strings.Join(msgs, ","); got != c.want {
					t.Errorf("after %s: @@warning_count and SHOW WARNINGS %q, want %q", c.call, got, c.want)
				}
			})
		}
	}
}
