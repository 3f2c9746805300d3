package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Issue 37: the process list, the privileges and the connection
// attributes are MariaDB's through the gateway. Each scenario runs
// straight against MariaDB and through a gateway whose users run as
// MariaDB accounts of the same names (users[].backend_user, a pool of 3),
// and what a client sees must be the same.

// i37Accounts are the MariaDB accounts of the tests and their global
// grants: i37adm may kill any thread, i37proc sees every thread, and so
// does i37rol through its default role (i37role, granted i37role2, which
// has PROCESS).
var i37Accounts = map[string]string{
	"i37rol":  "",
	"i37a":    "",
	"i37b":    "",
	"i37adm":  "CONNECTION ADMIN",
	"i37proc": "PROCESS",
}

// i37Targets creates the accounts and returns a DSN maker for MariaDB
// itself and one for a gateway whose users are those accounts.
func i37Targets(t *testing.T) map[string]func(user string) string {
	t.Helper()
	root, err := shared.db.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	mustExec(t, root, "DROP ROLE IF EXISTS i37role", "DROP ROLE IF EXISTS i37role2", "CREATE ROLE i37role", "CREATE ROLE i37role2",
		"GRANT PROCESS ON *.* TO i37role2", "GRANT i37role2 TO i37role")
	var users strings.Builder
	for u, grant := range i37Accounts {
		for _, host := range []string{"%", "127.0.0.1", "localhost"} {
			mustExec(t, root, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", u, host),
				fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s-pw'", u, host, u),
				fmt.Sprintf("GRANT SELECT ON %s.* TO '%s'@'%s'", testDB, u, host))
			if grant != "" {
				mustExec(t, root, fmt.Sprintf("GRANT %s ON *.* TO '%s'@'%s'", grant, u, host))
			}
			if u == "i37rol" {
				mustExec(t, root, fmt.Sprintf("GRANT i37role TO '%s'@'%s'", u, host), fmt.Sprintf("SET DEFAULT ROLE i37role FOR '%s'@'%s'", u, host))
			}
		}
		fmt.Fprintf(&users, "  - {user: %s, password: %s-pw, backend_user: %s, backend_password: %s-pw}\n", u, u, u, u)
	}
	srv := startTestGateway(t, "i37", fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
users:
%sclusters:
  - {name: main, backend_user: %s, backend_password: %s, backends: [%q], pool: {size: 3, min_idle: 0, acquire_timeout: 20s}}
`, logLevel(), users.String(), backendUser, backendPass, shared.db.Addr()))
	dsn := func(addr string) func(string) string {
		return func(user string) string {
			c := mysql.NewConfig()
			c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, user+"-pw", "tcp", addr, testDB
			c.Timeout = 10 * time.Second
			// Statements with arguments as text; binaryDSN for prepared
			// ones.
			c.InterpolateParams = true
			return c.FormatDSN()
		}
	}
	return map[string]func(string) string{"direct": dsn(shared.db.Addr()), "gateway": dsn(srv.Addr().String())}
}

// binaryDSN is dsn with statements that have arguments prepared
// (COM_STMT_PREPARE, EXECUTE), not sent as text.
func binaryDSN(t *testing.T, dsn string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c.InterpolateParams = false
	return c.FormatDSN()
}

// i37Conn is one connection of user and its CONNECTION_ID().
func i37Conn(t *testing.T, dsn string) (*sql.Conn, int64) {
	t.Helper()
	c := oneConn(t, dsn)
	var id int64
	if err := c.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return c, id
}

// errText is what a client sees of err: number, SQLSTATE and message, with
// the connection id id written as <id> (the ids differ between targets).
func errText(err error, id int64) string {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return fmt.Sprint(err)
	}
	msg := strings.ReplaceAll(me.Message, strconv.FormatInt(id, 10), "<id>")
	return fmt.Sprintf("%d (%s) %s", me.Number, string(me.SQLState[:]), msg)
}

// sameSeen fails the test when what the clients saw directly and through
// the gateway differ.
func sameSeen(t *testing.T, what string, seen map[string][]string) {
	t.Helper()
	if d, g := strings.Join(seen["direct"], "\n"), strings.Join(seen["gateway"], "\n"); d != g {
		t.Errorf("%s differs\ndirect:\n%s\ngateway:\n%s", what, d, g)
	} else {
		t.Logf("%s, both:\n%s", what, d)
	}
}

// TestProcessListUserLock: a session waiting in GET_LOCK() shows State
// `User lock` in SHOW PROCESSLIST and in information_schema.PROCESSLIST
// (the gateway showed `executing`), a sleeping one an empty State; the
// count a test waits for is the same as MariaDB's.
func TestProcessListUserLock(t *testing.T) {
	ctx := context.Background()
	targets := i37Targets(t)
	const wait = "SELECT GET_LOCK('i37lock', 20)"
	seen := map[string][]string{}
	for _, name := range []string{"direct", "gateway"} {
		dsn := targets[name]("i37a")
		holder, holderID := i37Conn(t, dsn)
		waiter, waiterID := i37Conn(t, dsn)
		observer, _ := i37Conn(t, dsn)
		prepObserver, _ := i37Conn(t, binaryDSN(t, dsn))
		var got int
		if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK('i37lock', 30)").Scan(&got); err != nil || got != 1 {
			t.Fatalf("%s: GET_LOCK: %d, %v", name, got, err)
		}
		done := make(chan error, 1)
		go func() {
			var r int
			done <- waiter.QueryRowContext(ctx, wait).Scan(&r)
		}()
		n := 0
		for start := time.Now(); n != 1 && time.Since(start) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
			if err := observer.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO = ?", wait).Scan(&n); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		var lines []string
		lines = append(lines, fmt.Sprintf("waiters in information_schema.PROCESSLIST: %d", n))
		rows, err := observer.QueryContext(ctx, "SHOW PROCESSLIST")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, secs int64
			var user, host, command string
			var db, state, info sql.NullString
			var progress float64
			if err := rows.Scan(&id, &user, &host, &db, &command, &secs, &state, &info, &progress); err != nil {
				t.Fatal(err)
			}
			who := map[int64]string{holderID: "holder", waiterID: "waiter"}[id]
			if who != "" {
				lines = append(lines, fmt.Sprintf("%s: %s %s state %q (null %v) info %q", who, user, command, state.String, !state.Valid, info.String))
			}
		}
		rows.Close()
		var s string
		if err := observer.QueryRowContext(ctx, "SELECT CONCAT(COMMAND, '/', STATE) FROM information_schema.PROCESSLIST WHERE ID = ?", waiterID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, "waiter in information_schema.PROCESSLIST: "+s)
		// The same reads prepared: answered from the sessions of the
		// execute, as text.
		if err := prepObserver.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO = ?", wait).Scan(&n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := prepObserver.QueryRowContext(ctx, "SELECT CONCAT(COMMAND, '/', STATE) FROM information_schema.PROCESSLIST WHERE ID = ?", waiterID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("prepared: waiters %d, waiter %s", n, s))
		if _, err := holder.ExecContext(ctx, "DO RELEASE_LOCK('i37lock')"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			lines = append(lines, fmt.Sprintf("waiter's GET_LOCK: %v", err))
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: the waiter did not get the lock", name)
		}
		if _, err := waiter.ExecContext(ctx, "DO RELEASE_LOCK('i37lock')"); err != nil {
			t.Fatal(err)
		}
		seen[name] = lines
	}
	sameSeen(t, "the process list", seen)
}

// TestPrivilegesOfBackendAccount: a user whose own MariaDB account has
// CONNECTION ADMIN kills another user's statement (the gateway answered
// 1095); one without gets MariaDB's 1095; one with PROCESS sees the other
// users' sessions (also through its default role), one without does not.
func TestPrivilegesOfBackendAccount(t *testing.T) {
	ctx := context.Background()
	targets := i37Targets(t)
	seen := map[string][]string{}
	for _, name := range []string{"direct", "gateway"} {
		dsn := targets[name]
		victim, victimID := i37Conn(t, dsn("i37b"))
		adm, _ := i37Conn(t, dsn("i37adm"))
		plain, _ := i37Conn(t, dsn("i37a"))
		proc, _ := i37Conn(t, dsn("i37proc"))
		rol, _ := i37Conn(t, dsn("i37rol"))
		var lines []string
		for _, c := range []struct {
			who string
			c   *sql.Conn
		}{{"i37a", plain}, {"i37proc", proc}, {"i37rol", rol}} {
			var n int
			if err := c.c.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'i37b'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%s sees %d of i37b's sessions", c.who, n))
		}
		done := make(chan error, 1)
		go func() {
			var r int
			done <- victim.QueryRowContext(ctx, "SELECT SLEEP(20)").Scan(&r)
		}()
		time.Sleep(300 * time.Millisecond) // the statement has started
		_, err := plain.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", victimID))
		lines = append(lines, "i37a's KILL QUERY: "+errText(err, victimID))
		_, err = adm.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", victimID))
		lines = append(lines, "i37adm's KILL QUERY: "+errText(err, victimID))
		select {
		case err := <-done:
			lines = append(lines, "the victim's statement: "+errText(err, victimID))
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: the KILL QUERY did not stop the statement", name)
		}
		seen[name] = lines
	}
	sameSeen(t, "what the users may do", seen)
}

// TestConnectAttrsOwnConnection: performance_schema.session_connect_attrs
// shows, for the client's own connection, the attributes the client sent
// (the backend's performance_schema would show the gateway's, or none), in
// its order; a user sees no other user's, one whose account has PROCESS
// does.
func TestConnectAttrsOwnConnection(t *testing.T) {
	ctx := context.Background()
	targets := i37Targets(t)
	dsn := func(user string) string {
		return targets["gateway"](user) + "&connectionAttributes=program_name:i37test,i37key:" + user
	}
	plain, plainID := i37Conn(t, dsn("i37a"))
	proc, _ := i37Conn(t, dsn("i37proc"))
	rows, err := plain.QueryContext(ctx, "SELECT ATTR_NAME, ATTR_VALUE, ORDINAL_POSITION FROM performance_schema.session_connect_attrs WHERE PROCESSLIST_ID = CONNECTION_ID() ORDER BY ORDINAL_POSITION")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	pos := 0
	for rows.Next() {
		var k, v string
		var p int
		if err := rows.Scan(&k, &v, &p); err != nil {
			t.Fatal(err)
		}
		if p != pos {
			t.Errorf("ORDINAL_POSITION %d of %s, want %d", p, k, pos)
		}
		pos++
		got[k] = v
	}
	rows.Close()
	if got["program_name"] != "i37test" || got["i37key"] != "i37a" || got["_client_name"] != "Go-MySQL-Driver" {
		t.Errorf("own connection attributes: %v", got)
	}
	count := func(c *sql.Conn, q string) int {
		t.Helper()
		var n int
		if err := c.QueryRowContext(ctx, q, plainID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const others = "SELECT COUNT(*) FROM performance_schema.session_connect_attrs WHERE PROCESSLIST_ID = ? AND ATTR_NAME = 'i37key'"
	if n := count(proc, others); n != 1 {
		t.Errorf("i37proc (PROCESS) sees %d of i37a's attributes named i37key, want 1", n)
	}
	if n := count(proc, "SELECT COUNT(*) FROM performance_schema.session_account_connect_attrs WHERE PROCESSLIST_ID = ?"); n != 0 {
		t.Errorf("i37proc sees %d of i37a's attributes in session_account_connect_attrs, want 0 (another account)", n)
	}
	var n int
	if err := plain.QueryRowContext(ctx, "SELECT COUNT(DISTINCT PROCESSLIST_ID) FROM performance_schema.session_connect_attrs").Scan(&n); err != nil || n != 1 {
		t.Errorf("i37a sees the attributes of %d sessions (%v), want 1: its own", n, err)
	}
	// Threads_connected counts the gateway's clients (two), not the
	// backend's connections: mysql-test's wait_until_count_sessions.inc
	// waits on it.
	var name string
	if err := plain.QueryRowContext(ctx, "SHOW STATUS LIKE 'Threads_connected'").Scan(&name, &n); err != nil || n != 2 {
		t.Errorf("Threads_connected through the gateway: %d (%v), want 2", n, err)
	}
}
