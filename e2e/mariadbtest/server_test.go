package mariadbtest_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/directgate/directgate/e2e/mariadbtest"
)

// shared is started once by TestMain for the tests that only read from it.
// It is nil in -short mode.
var shared *mariadbtest.Server

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run owns the shared server, so its deferred Stop runs whatever happens
// after Start; TestMain's os.Exit would skip it.
func run(m *testing.M) (code int) {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{
		ServerID: 7,
		Users: []mariadbtest.User{
			{Name: "app", Password: "app pw 'quoted'"},
			{Name: "admin", Password: "secret", Grants: "ALL PRIVILEGES ON *.* WITH GRANT OPTION"},
			{Name: "reader", Password: "r", Grants: "SELECT ON *.*"},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}()
	shared = srv
	return m.Run()
}

func needServer(t *testing.T) *mariadbtest.Server {
	t.Helper()
	if shared == nil {
		t.Skip("starts mariadbd; skipped in -short mode")
	}
	return shared
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestUsersAndGrants(t *testing.T) {
	srv := needServer(t)
	ctx := context.Background()

	var one int
	var who string
	app := open(t, srv.DSN("app", "app pw 'quoted'", "mysql"))
	if err := app.QueryRowContext(ctx, "SELECT 1, CURRENT_USER()").Scan(&one, &who); err != nil {
		t.Fatalf("app over TCP: %v", err)
	}
	if one != 1 || who != "app@127.0.0.1" {
		t.Errorf("got %d, %q; want 1, app@127.0.0.1", one, who)
	}

	var id int
	if err := app.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil || id != 7 {
		t.Errorf("server_id = %d, %v; want 7", id, err)
	}

	admin := open(t, srv.DSN("admin", "secret", ""))
	var grants string
	if err := admin.QueryRowContext(ctx, "SHOW GRANTS").Scan(&grants); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(grants, "WITH GRANT OPTION") {
		t.Errorf("admin grants %q lack WITH GRANT OPTION", grants)
	}

	reader := open(t, srv.DSN("reader", "r", ""))
	_, err := reader.ExecContext(ctx, "CREATE DATABASE reader_must_not")
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1044 {
		t.Errorf("reader CREATE DATABASE: %v; want error 1044 (access denied)", err)
	}

	root, err := srv.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var n int
	if err := root.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM mysql.user WHERE User = '' OR (User = 'root' AND Host <> 'localhost')").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d anonymous or non-socket root accounts left", n)
	}
	var logBin int
	var format string
	if err := root.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format").Scan(&logBin, &format); err != nil {
		t.Fatal(err)
	}
	if logBin != 1 || format != "ROW" {
		t.Errorf("log_bin=%d binlog_format=%s; want 1, ROW", logBin, format)
	}

	// root is reachable over the socket only.
	err = open(t, srv.DSN("root", "", "")).PingContext(ctx)
	if !errors.As(err, &myErr) || myErr.Number != 1045 {
		t.Errorf("root over TCP: %v; want error 1045 (access denied)", err)
	}
}

func TestKillRestartStop(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{
		Users: []mariadbtest.User{{Name: "u", Password: "p"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})

	selectOne := func() error {
		db, err := sql.Open("mysql", srv.DSN("u", "p", ""))
		if err != nil {
			return err
		}
		defer db.Close()
		var one int
		if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			return err
		}
		if one != 1 {
			return fmt.Errorf("SELECT 1 returned %d", one)
		}
		return nil
	}

	if err := selectOne(); err != nil {
		t.Fatalf("before kill: %v", err)
	}
	pid, port := srv.PID(), srv.Port
	if pid == 0 {
		t.Fatal("PID is 0 for a running server")
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if srv.PID() != 0 {
		t.Error("PID is not 0 after Kill")
	}
	if err := selectOne(); err == nil {
		t.Fatal("SELECT 1 succeeded on a killed server")
	}
	if err := srv.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.Port != port {
		t.Errorf("port changed from %d to %d", port, srv.Port)
	}
	if srv.PID() == 0 || srv.PID() == pid {
		t.Errorf("PID after restart = %d (before: %d)", srv.PID(), pid)
	}
	if err := selectOne(); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := srv.Restart(ctx); err == nil {
		t.Error("Restart of a running server succeeded")
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop left %s: %v", srv.Dir, err)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := srv.Restart(ctx); err == nil {
		t.Error("Restart after Stop succeeded")
	}
}

func TestShutdownRestart(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{NoBinlog: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	root, err := srv.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.ExecContext(ctx, "CREATE DATABASE kept"); err != nil {
		t.Fatal(err)
	}
	root.Close()

	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	root, err = srv.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var name string
	if err := root.QueryRowContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'kept'").Scan(&name); err != nil {
		t.Errorf("database made before Shutdown: %v", err)
	}
	var logBin int
	if err := root.QueryRowContext(ctx, "SELECT @@log_bin").Scan(&logBin); err != nil || logBin != 0 {
		t.Errorf("log_bin = %d, %v; want 0 with NoBinlog", logBin, err)
	}
}

func TestStartFailureReportsErrorLog(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := mariadbtest.Start(ctx, mariadbtest.Options{ExtraArgs: []string{"--no-such-flag-for-mariadbtest"}})
	if err == nil {
		t.Fatal("Start with an unknown flag succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-flag-for-mariadbtest") {
		t.Errorf("error does not quote the error log: %v", err)
	}
}

// TestReplication runs a primary and two replicas through the life of a
// failover: replicas start at the primary's current position, apply its
// writes, survive a SIGKILL, and after the primary dies one replica is
// promoted, the other follows it, and the old primary rejoins as a replica.
func TestReplication(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	users := []mariadbtest.User{{Name: "app", Password: "app"}}
	start := func() *mariadbtest.Server {
		t.Helper()
		srv, err := mariadbtest.Start(ctx, mariadbtest.Options{Users: users})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := srv.Stop(); err != nil {
				t.Error(err)
			}
		})
		return srv
	}
	primary, r1, r2 := start(), start(), start()
	if primary.ServerID == r1.ServerID || r1.ServerID == r2.ServerID || primary.ServerID == r2.ServerID {
		t.Fatalf("server IDs %d, %d, %d are not distinct", primary.ServerID, r1.ServerID, r2.ServerID)
	}

	// exec runs statements as root on srv.
	exec := func(srv *mariadbtest.Server, stmts ...string) {
		t.Helper()
		db, err := srv.RootDB()
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s on %s: %v", q, srv.Addr(), err)
			}
		}
	}
	// rows returns the values of repl.t on srv, read as app over TCP.
	rows := func(srv *mariadbtest.Server) string {
		t.Helper()
		db := open(t, srv.DSN("app", "app", ""))
		defer db.Close()
		var got string
		if err := db.QueryRowContext(ctx, "SELECT GROUP_CONCAT(v ORDER BY id) FROM repl.t").Scan(&got); err != nil {
			t.Fatalf("read repl.t on %s: %v", srv.Addr(), err)
		}
		return got
	}
	readOnly := func(srv *mariadbtest.Server) int {
		t.Helper()
		db := open(t, srv.DSN("app", "app", ""))
		defer db.Close()
		var ro int
		if err := db.QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil {
			t.Fatal(err)
		}
		return ro
	}
	caughtUp := func(replica, source *mariadbtest.Server) {
		t.Helper()
		if err := replica.WaitCaughtUp(ctx, source); err != nil {
			t.Fatal(err)
		}
	}
	status := func(srv *mariadbtest.Server) mariadbtest.ReplicaStatus {
		t.Helper()
		st, err := srv.ReplicaStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st == nil {
			t.Fatalf("%s is not a replica", srv.Addr())
		}
		return st
	}

	// Written before replication starts: the replicas start after it.
	exec(primary, "CREATE DATABASE before_replication")
	if err := r1.StartReplication(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if err := r2.StartReplication(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if ro := readOnly(r1); ro != 1 {
		t.Errorf("replica read_only = %d, want 1", ro)
	}
	// r2 lags from the start: it has applied nothing past its starting
	// position when it is later pointed at r1, whose binary log begins
	// after that position.
	exec(r2, "STOP SLAVE SQL_THREAD")
	// MariaDB 10.11: with the SQL thread stopped, Seconds_Behind_Master is
	// NULL (the IO thread still runs). It is NULL too when only the IO
	// thread is stopped, even with nothing left to apply.
	if st := status(r2); st.Get("Slave_SQL_Running") != "No" || st.Get("Slave_IO_Running") != "Yes" || st["Seconds_Behind_Master"].Valid {
		t.Errorf("SQL thread stopped: Slave_SQL_Running=%s Slave_IO_Running=%s Seconds_Behind_Master=%v; want No, Yes, NULL",
			st.Get("Slave_SQL_Running"), st.Get("Slave_IO_Running"), st["Seconds_Behind_Master"])
	}

	exec(primary,
		"CREATE DATABASE repl",
		"CREATE TABLE repl.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(16))",
		"INSERT INTO repl.t (v) VALUES ('a'), ('b')")
	caughtUp(r1, primary)
	if got := rows(r1); got != "a,b" {
		t.Errorf("replica has %q, want a,b", got)
	}
	if st := status(r1); st.Get("Seconds_Behind_Master") != "0" {
		t.Errorf("caught-up replica: Seconds_Behind_Master = %v, want 0", st["Seconds_Behind_Master"])
	}
	db := open(t, r1.DSN("app", "app", ""))
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'before_replication'").Scan(&n); err != nil || n != 0 {
		t.Errorf("database made before StartReplication: count %d, %v; want 0 (not replayed)", n, err)
	}
	db.Close()

	// A replica killed and restarted resumes by itself and stays read-only.
	if err := r1.Kill(); err != nil {
		t.Fatal(err)
	}
	exec(primary, "INSERT INTO repl.t (v) VALUES ('c')")
	if err := r1.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	caughtUp(r1, primary)
	if got := rows(r1); got != "a,b,c" {
		t.Errorf("replica after Kill and Restart has %q, want a,b,c", got)
	}
	if ro := readOnly(r1); ro != 1 {
		t.Errorf("replica read_only after Restart = %d, want 1", ro)
	}

	// Failover: the primary dies, r1 is promoted, r2 follows r1.
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r1.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if ro := readOnly(r1); ro != 0 {
		t.Errorf("promoted read_only = %d, want 0", ro)
	}
	if st, err := r1.ReplicaStatus(ctx); err != nil || st != nil {
		t.Errorf("promoted ReplicaStatus = %v, %v; want nil (not a replica)", st, err)
	}
	exec(r1, "INSERT INTO repl.t (v) VALUES ('d')")
	if err := r2.ChangePrimary(ctx, r1); err != nil {
		t.Fatal(err)
	}
	caughtUp(r2, r1)
	if got := rows(r2); got != "a,b,c,d" {
		t.Errorf("r2 after ChangePrimary has %q, want a,b,c,d", got)
	}

	// The old primary comes back and rejoins as a replica of r1.
	if err := primary.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := primary.ChangePrimary(ctx, r1); err != nil {
		t.Fatal(err)
	}
	caughtUp(primary, r1)
	if got := rows(primary); got != "a,b,c,d" {
		t.Errorf("old primary after rejoining has %q, want a,b,c,d", got)
	}
	if ro := readOnly(primary); ro != 1 {
		t.Errorf("rejoined old primary read_only = %d, want 1", ro)
	}
}
