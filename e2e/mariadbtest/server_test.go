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
