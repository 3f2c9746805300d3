package e2e

// Regression tests for defects found by running a database regression
// suite through the gateway: each left a pooled connection unusable or
// wrong for the next client, or answered differently from MariaDB.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
)

// TestXAConnectionIsClosedNotReset: a client prepares an XA transaction
// and disconnects. The gateway used to reset its backend connection with
// COM_RESET_CONNECTION; on MariaDB 10.11 the prepared transaction then kept
// its row locks after XA ROLLBACK from another connection, and every later
// DROP TABLE of its table waited for a lock timeout. A connection that ran
// XA is closed instead, which leaves the prepared transaction recoverable,
// as a client's own disconnect does.
func TestXAConnectionIsClosedNotReset(t *testing.T) {
	srv := startMplxGateway(t, "rg-xa", 2, 1<<20)
	mustExec(t, direct(t), "DROP TABLE IF EXISTS rg_xa", "CREATE TABLE rg_xa (id INT PRIMARY KEY) ENGINE=InnoDB")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := gatewayTarget(srv).open(t, nil)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"XA START 'rg_xa_1'", "INSERT INTO rg_xa VALUES (1)", "XA END 'rg_xa_1'", "XA PREPARE 'rg_xa_1'"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close()
	db.Close()

	root := rootDB(t)
	rc, err := root.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// The XID becomes visible to other connections once the gateway has
	// let go of the client's connection.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := rc.ExecContext(ctx, "XA ROLLBACK 'rg_xa_1'")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("XA ROLLBACK of the prepared transaction: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var left int
	if err := rc.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_rows_locked > 0 AND trx_mysql_thread_id = 0").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("after XA ROLLBACK, %d detached transaction(s) still hold row locks", left)
	}
	// With the locks gone, DROP TABLE does not wait (a wait would end
	// in error 1205 after one second).
	mustExecConn(t, ctx, rc, "SET SESSION lock_wait_timeout = 1", "DROP TABLE "+testDB+".rg_xa")
}

// mustExecConn runs statements on one connection and fails the test on
// error.
func mustExecConn(t *testing.T, ctx context.Context, c *sql.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestCallWithOpenCursor: MariaDB sets the cursor-exists status bit on
// the column definitions of a text-protocol CALL result while the
// procedure has a cursor open; the rows still follow. The relay took the
// bit for a cursor of COM_STMT_EXECUTE and stopped: the client waited
// forever and the rows stayed on the pooled connection for the next
// client.
func TestCallWithOpenCursor(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS rg_cur_t", "DROP PROCEDURE IF EXISTS rg_cur",
		"CREATE TABLE rg_cur_t (id INT PRIMARY KEY)", "INSERT INTO rg_cur_t VALUES (1), (2), (3)",
		`CREATE PROCEDURE rg_cur() BEGIN
			DECLARE v INT;
			DECLARE c CURSOR FOR SELECT id FROM rg_cur_t ORDER BY id;
			OPEN c;
			FETCH c INTO v;
			SELECT id, v FROM rg_cur_t ORDER BY id;
			CLOSE c;
		END`)
	var results []string
	for _, tg := range targets() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		db := tg.open(t, func(c *mysql.Config) { c.MultiStatements = true })
		db.SetMaxOpenConns(1)
		got, err := callRows(ctx, db)
		if err != nil {
			cancel()
			t.Fatalf("%s: CALL rg_cur(): %v", tg.name, err)
		}
		results = append(results, got)
		// The session, and new ones on the same pooled connections, go on.
		for i := range 3 {
			var one int
			if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
				t.Errorf("%s: SELECT 1 after the CALL (%d): %v", tg.name, i, err)
			}
			db.Close()
			db = tg.open(t, nil)
			db.SetMaxOpenConns(1)
		}
		db.Close()
		cancel()
	}
	if len(results) == 2 && results[0] != results[1] {
		t.Errorf("CALL rg_cur(): MariaDB %q, gateway %q", results[0], results[1])
	}
	if results[0] != "1,1;2,1;3,1;" {
		t.Errorf("CALL rg_cur() = %q", results[0])
	}
}

// callRows runs CALL rg_cur() and returns its rows as "id,v;" items.
func callRows(ctx context.Context, db *sql.DB) (string, error) {
	rows, err := db.QueryContext(ctx, "CALL rg_cur()")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out string
	for rows.Next() {
		var id, v int
		if err := rows.Scan(&id, &v); err != nil {
			return "", err
		}
		out += strconv.Itoa(id) + "," + strconv.Itoa(v) + ";"
	}
	for rows.NextResultSet() {
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	return out, nil
}

// TestSessionTimeoutDoesNotOutliveSession: SET SESSION wait_timeout = 2
// was replayed on the pooled connection like any variable and stayed
// there after the session: MariaDB closed the connection after two idle
// seconds in the pool. A short wait_timeout is taken back when the
// connection returns to the pool.
func TestSessionTimeoutDoesNotOutliveSession(t *testing.T) {
	srv := startMplxGateway(t, "rg-timeout", 2, 1<<20)
	root := rootDB(t)
	ids := func() map[int64]bool {
		t.Helper()
		rows, err := root.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", mplxUser)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			m[id] = true
		}
		return m
	}
	db := gatewayTarget(srv).open(t, nil)
	db.SetMaxOpenConns(1)
	mustExec(t, db, "SET SESSION wait_timeout = 2", "SELECT 1", "SET SESSION net_read_timeout = 5")
	var wt int
	if err := db.QueryRow("SELECT @@session.wait_timeout").Scan(&wt); err != nil || wt != 2 {
		t.Fatalf("the session's wait_timeout: %d, %v; want 2", wt, err)
	}
	db.Close()
	before := ids()
	time.Sleep(3500 * time.Millisecond)
	after := ids()
	for id := range before {
		if !after[id] {
			t.Errorf("the server closed pooled connection %d (of %v) while it was idle in the pool", id, before)
		}
	}
	// New sessions get the server's default.
	db = gatewayTarget(srv).open(t, nil)
	if err := db.QueryRow("SELECT @@session.wait_timeout").Scan(&wt); err != nil || wt == 2 {
		t.Errorf("a new session's wait_timeout: %d, %v", wt, err)
	}
}

// TestGatewayErrorsInServerRange: the gateway's own errors carried client
// numbers (2003, 2013), which libmariadb turns into 2027 "Received
// malformed packet" when a server sends them. The mariadb command-line
// client must print the gateway's error as it was sent.
func TestGatewayErrorsInServerRange(t *testing.T) {
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		t.Skip("mariadb client not installed")
	}
	// A backend address where nothing listens.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	srv := startTestGateway(t, "rg-errors", fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
users:
  - {user: %s, password: %s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    failover_buffer: 0s
`, logLevel(), appUser, appPass, backendUser, backendPass, dead))
	host, port, _ := net.SplitHostPort(srv.Addr().String())
	out, _ := exec.Command(bin, "--no-defaults", "-h"+host, "-P"+port, "-u"+appUser, "-p"+appPass, "-e", "SELECT 1").CombinedOutput()
	if !strings.Contains(string(out), "ERROR 1429 (HY000)") {
		t.Errorf("mariadb client against a gateway whose backend is down printed:\n%s\nwant ERROR 1429 (HY000)", out)
	}
	if strings.Contains(string(out), "2027") {
		t.Errorf("the client read the gateway's error as a malformed packet:\n%s", out)
	}
}

// TestDropOtherDatabaseKeepsCurrent: MariaDB sets the "database dropped"
// status flag on every DROP DATABASE, also of a database that is not the
// session's. The gateway cleared the session's database whenever it saw
// the flag, and later statements failed with 1046 "No database selected".
func TestDropOtherDatabaseKeepsCurrent(t *testing.T) {
	mustExec(t, direct(t), "CREATE TABLE IF NOT EXISTS rg_keep (id INT)")
	var got []string
	for _, tg := range targets() {
		db := tg.open(t, nil)
		db.SetMaxOpenConns(1)
		mustExec(t, db, "DROP DATABASE IF EXISTS rg_other_"+tg.name, "CREATE DATABASE rg_other_"+tg.name,
			"DROP DATABASE rg_other_"+tg.name)
		var cur sql.NullString
		if err := db.QueryRow("SELECT DATABASE()").Scan(&cur); err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM rg_keep").Scan(&n); err != nil {
			t.Errorf("%s: a table of the current database after DROP DATABASE of another: %v", tg.name, err)
		}
		got = append(got, cur.String)
		// Dropping the current database does clear it.
		mustExec(t, db, "CREATE DATABASE IF NOT EXISTS rg_cur_"+tg.name, "USE rg_cur_"+tg.name, "DROP DATABASE rg_cur_"+tg.name)
		if err := db.QueryRow("SELECT DATABASE()").Scan(&cur); err != nil || cur.Valid {
			t.Errorf("%s: DATABASE() after dropping the current database: %v, %v", tg.name, cur, err)
		}
		db.Close()
	}
	if got[0] != testDB || got[1] != testDB {
		t.Errorf("DATABASE() after DROP DATABASE of another: MariaDB %q, gateway %q; want %q", got[0], got[1], testDB)
	}
}

// TestKillEveryPath: a KILL prepared with COM_STMT_PREPARE reached
// MariaDB untranslated, where its number named a backend thread (another
// client's pooled connection); so did a KILL inside a batch, an SQL
// PREPARE and forms other than KILL <number>. Every KILL goes through the
// gateway's id translation and ownership check, or is refused.
func TestKillEveryPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := shared.gwAddr()
	victim, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass})
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	vid := victim.Greeting.ConnectionID
	db := targets()[1].open(t, func(c *mysql.Config) { c.InterpolateParams = false; c.MultiStatements = true })
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// A prepared KILL QUERY of the victim's gateway id interrupts it.
	victim.ResetSeq()
	if err := victim.WriteCommand(append([]byte{wire.ComQuery}, "SELECT SLEEP(20)"...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	st, err := conn.PrepareContext(ctx, fmt.Sprintf("KILL QUERY %d", vid))
	if err != nil {
		t.Fatalf("prepare KILL QUERY: %v", err)
	}
	if _, err := st.ExecContext(ctx); err != nil {
		t.Fatalf("execute KILL QUERY %d: %v", vid, err)
	}
	st.Close()
	// An interrupted SLEEP answers 1 (or 1317); not killed, it would
	// answer after 20 s.
	_ = victim.NetConn().SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := victim.ReadPacket(); err != nil {
		t.Fatalf("the victim's SLEEP(20) was not interrupted by the prepared KILL QUERY: %v", err)
	}

	// Every other path is refused as a thread the user does not own
	// (1095), before MariaDB sees it: all users may share one backend
	// account, which may kill any of its threads.
	for _, q := range []string{
		"SELECT 1; KILL 5",
		"PREPARE rg_k FROM 'KILL 5'",
		"KILL 5+0",
		"KILL (5)",
		"KILL USER " + appUser,
	} {
		_, err := conn.ExecContext(ctx, q)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1095 {
			t.Errorf("%s: %v, want error 1095", q, err)
		}
	}
	mustExecConn(t, ctx, conn, "SET @rg_k = 'KILL 5'")
	if _, err := conn.ExecContext(ctx, "PREPARE rg_k FROM @rg_k"); err == nil || !strings.Contains(err.Error(), "1095") {
		t.Errorf("PREPARE FROM a variable holding a KILL: %v, want error 1095", err)
	}
	if _, err := conn.PrepareContext(ctx, "KILL 5+0"); err == nil || !strings.Contains(err.Error(), "1095") {
		t.Errorf("COM_STMT_PREPARE of KILL 5+0: %v, want error 1095", err)
	}
	// EXECUTE IMMEDIATE 'KILL n' is translated like KILL n.
	_, err = conn.ExecContext(ctx, "EXECUTE IMMEDIATE 'KILL 4000000000'")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1094 {
		t.Errorf("EXECUTE IMMEDIATE 'KILL 4000000000': %v, want 1094 (unknown gateway id)", err)
	}
}

// TestClientGoneStopsStatement: a client that closed its connection
// during a long statement left the statement running on the backend (for
// an hour, with GET_LOCK(.., 3600)), holding the pooled connection and
// whatever it locked. MariaDB ends the statement of a client that went
// away; so does the gateway.
func TestClientGoneStopsStatement(t *testing.T) {
	srv := startMplxGateway(t, "rg-gone", 2, 1<<20)
	root := rootDB(t)
	const marker = "rg_client_gone_marker"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bc, err := wire.Dial(ctx, srv.Addr().String(), wire.DialOptions{User: appUser, Password: appPass})
	if err != nil {
		t.Fatal(err)
	}
	bc.ResetSeq()
	if err := bc.WriteCommand(append([]byte{wire.ComQuery}, "SELECT SLEEP(60) AS "+marker...)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(processIDs(t, root, marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the statement never showed up running")
		}
		time.Sleep(50 * time.Millisecond)
	}
	bc.Close() // the client goes away mid-statement
	deadline = time.Now().Add(15 * time.Second)
	for len(processIDs(t, root, marker)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the statement of a client that went away still runs on the backend 15 s later")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The gateway serves on.
	db := gatewayTarget(srv).open(t, nil)
	mustExec(t, db, "SELECT 1")
}

// TestSetGlobalReachesNewSessions: after SET GLOBAL of a variable whose
// session value starts from the global one, a new client got a pooled
// connection logged in before the change, with the old value; directly,
// a new connection has the new one. Connections whose session is older
// than the change are reset before they serve a newer session.
func TestSetGlobalReachesNewSessions(t *testing.T) {
	srv := startMplxGateway(t, "rg-global", 2, 1<<20)
	root := rootDB(t)
	var def int
	if err := root.QueryRow("SELECT @@GLOBAL.div_precision_increment").Scan(&def); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Exec(fmt.Sprintf("SET GLOBAL div_precision_increment = %d", def)) })
	want := def + 3
	// Both pooled connections log in before the change.
	warm := gatewayTarget(srv).open(t, nil)
	if err := onEveryConn([]*sql.Conn{connOf(t, warm), connOf(t, warm)}, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	warm.Close()
	a := gatewayTarget(srv).open(t, nil)
	mustExec(t, a, fmt.Sprintf("SET GLOBAL div_precision_increment = %d", want))
	for i := range 4 {
		b := gatewayTarget(srv).open(t, nil)
		b.SetMaxOpenConns(1)
		var got int
		if err := b.QueryRow("SELECT @@session.div_precision_increment").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("new session %d after SET GLOBAL div_precision_increment = %d: its session value is %d", i, want, got)
		}
		b.Close()
	}
	var direct int
	d := directTarget().open(t, nil)
	if err := d.QueryRow("SELECT @@session.div_precision_increment").Scan(&direct); err != nil || direct != want {
		t.Errorf("MariaDB's new session: %d, %v", direct, err)
	}
}

// connOf returns one connection of db.
func connOf(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
