// Package faults is issue 35's fault-injection suite: real MariaDB,
// gateways in the test process, and a fault proxy (e2e/faultproxy) on
// the link under test. The quick scenarios run in make test too; the
// long ones only with -faults.long (make faults), TestSoak only with
// -soak.duration (make soak).
package faults

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/e2e/faultproxy"
	"github.com/directgate/directgate/e2e/gatewaytest"
	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/gateway"
)

const (
	backendUser, backendPass = "faults_backend", "backend pw"
	appUser, appPass         = "app", "app pw"
	testDB                   = "faults"
)

// longRuns runs the long scenarios too (make faults).
var longRuns = flag.Bool("faults.long", false, "run the long fault scenarios too (make faults)")

// primary is the MariaDB every scenario uses.
var primary *mariadbtest.Server

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts MariaDB, runs the tests and stops it, also when setup fails
// half way.
func run(m *testing.M) (code int) {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{NoBinlog: true, Users: []mariadbtest.User{{Name: backendUser, Password: backendPass,
		Grants: "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, PROCESS, REPLICA MONITOR ON *.*"}}})
	if srv != nil {
		defer func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				code = 1
			}
		}()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults setup:", err)
		return 1
	}
	root, err := srv.RootDB()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE IF NOT EXISTS " + testDB); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	primary = srv
	return m.Run()
}

// needStack skips in -short mode.
func needStack(t *testing.T) {
	t.Helper()
	if primary == nil {
		t.Skip("starts mariadbd; skipped in -short mode")
	}
}

// long skips a scenario of make faults in make test.
func long(t *testing.T) {
	t.Helper()
	if !*longRuns {
		t.Skip("a long fault scenario: make faults (go test -faults.long)")
	}
	needStack(t)
}

// logLevel is the gateways' log level: E2E_LOG, default warn.
func logLevel() string { return gatewaytest.LogLevel() }

// startGateway starts a gateway in the test process whose cluster main
// has the backends addrs (fault proxies), with pool and health settings.
func startGateway(t *testing.T, name, pool, health string, addrs ...string) *gateway.Server {
	t.Helper()
	return startGatewayWith(t, name, pool, health, "", addrs...)
}

// startGatewayWith is startGateway with more lines for cluster main
// (indented as its keys), such as an owner address.
func startGatewayWith(t *testing.T, name, pool, health, more string, addrs ...string) *gateway.Server {
	t.Helper()
	quoted := ""
	for i, a := range addrs {
		if i > 0 {
			quoted += ", "
		}
		quoted += fmt.Sprintf("%q", a)
	}
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
health: %s
users:
  - {user: %s, password: %s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%s]
    pool: %s
%s`, logLevel(), health, appUser, appPass, backendUser, backendPass, quoted, pool, more)
	return gatewaytest.Start(t, name, yaml)
}

// serveUntilCleanup is gatewaytest.ServeUntilCleanup (owners too).
func serveUntilCleanup(t *testing.T, serve func() error, shutdown func(context.Context) error) {
	t.Helper()
	gatewaytest.ServeUntilCleanup(t, serve, shutdown)
}

// open opens a client pool to the gateway at addr, database testDB.
func open(t testing.TB, addr string) *sql.DB {
	t.Helper()
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = appUser, appPass, "tcp", addr, testDB
	c.Timeout = 5 * time.Second
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rootDB opens a root pool straight to MariaDB, database testDB.
func rootDB(t testing.TB) *sql.DB {
	t.Helper()
	db := serverRoot(t, primary)
	if _, err := db.Exec("USE " + testDB); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// serverRoot opens a root pool on s, closed when the test ends.
func serverRoot(t testing.TB, s *mariadbtest.Server) *sql.DB {
	t.Helper()
	db, err := s.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// link puts a fault proxy in front of the primary.
func link(t *testing.T, name string) *faultproxy.Link {
	t.Helper()
	return faultproxy.New(t, name, primary.Addr())
}
