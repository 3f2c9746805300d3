package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/e2e/gatewaytest"
	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/gateway"
	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"
)

// Accounts used by every test.
const (
	appUser, appPass         = "app", "app-secret"
	adminUser, adminPass     = "gwadmin", "admin-secret" // admin: true in the gateway's users
	backendUser, backendPass = "gateway", "backend-secret"
	testDB                   = "e2e"
)

// stack is one MariaDB and one gateway in front of it.
type stack struct {
	db  *mariadbtest.Server
	gw  *gateway.Server
	cfg *config.Config
	// done is closed when the gateway's Serve returns.
	done chan error
}

// shared is the stack most tests use; TestMain builds it.
var shared *stack

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// runTests starts the shared stack, runs the tests and tears everything
// down, also when setup fails half way.
func runTests(m *testing.M) int {
	st, err := startStack(16)
	if st != nil {
		defer st.stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		return 1
	}
	shared = st
	defer removeGatewayBin()
	defer stopBilling()
	return m.Run()
}

// startStack starts MariaDB and a gateway with a pool of poolSize.
func startStack(poolSize int) (*stack, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{
		Users: []mariadbtest.User{{Name: backendUser, Password: backendPass}},
	})
	if err != nil {
		return nil, err
	}
	st := &stack{db: srv}
	root, err := srv.RootDB()
	if err != nil {
		return st, err
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE IF NOT EXISTS " + testDB); err != nil {
		return st, err
	}
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
max_allowed_packet: 1048576
users:
  - {user: %s, password: %s}
  - {user: nopass}
  - {user: gwadmin, password: admin-secret, admin: true}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {size: %d, min_idle: 2, max_dials: 4, acquire_timeout: 20s}
`, logLevel(), appUser, appPass, backendUser, backendPass, srv.Addr(), poolSize)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		return st, err
	}
	st.cfg = cfg
	gw, err := gateway.New(cfg, hclog.New(&hclog.LoggerOptions{Name: "gateway", Level: hclog.LevelFromString(logLevel()), Output: os.Stderr}))
	if err != nil {
		return st, err
	}
	if err := gw.Listen(); err != nil {
		return st, err
	}
	st.gw = gw
	st.done = make(chan error, 1)
	go func() { st.done <- gw.Serve() }()
	return st, nil
}

func logLevel() string { return gatewaytest.LogLevel() }

func (st *stack) stop() {
	if st.gw != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = st.gw.Shutdown(ctx)
		cancel()
		<-st.done
	}
	if st.db != nil {
		_ = st.db.Stop()
	}
}

// gwAddr is the gateway's MySQL address.
func (st *stack) gwAddr() string { return st.gw.Addr().String() }

// gwDSN is a go-sql-driver DSN for the gateway.
func (st *stack) gwDSN(user, pass, db string, params map[string]string) string {
	return gatewayDSN(st.gwAddr(), user, pass, db, params)
}

// gatewayDSN is a go-sql-driver DSN for the gateway at addr.
func gatewayDSN(addr, user, pass, db string, params map[string]string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, pass, "tcp", addr, db
	c.Timeout = 10 * time.Second
	c.Params = params
	c.InterpolateParams = true
	return c.FormatDSN()
}

// directDSN is a go-sql-driver DSN straight to MariaDB as the backend user.
func (st *stack) directDSN(db string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = backendUser, backendPass, "tcp", st.db.Addr(), db
	c.Timeout = 10 * time.Second
	c.InterpolateParams = true
	return c.FormatDSN()
}

// open opens a database/sql pool and closes it when the test ends.
func open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// gw opens a pool through the shared gateway to the test database.
func gw(t testing.TB) *sql.DB {
	return open(t, shared.gwDSN(appUser, appPass, testDB, nil))
}

// direct opens a pool straight to MariaDB.
func direct(t testing.TB) *sql.DB { return open(t, shared.directDSN(testDB)) }

// mustExec runs statements and fails the test on error.
func mustExec(t testing.TB, db interface {
	Exec(string, ...any) (sql.Result, error)
}, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// sqlErr asserts err is a MySQL error with the number and SQLSTATE.
func sqlErr(t testing.TB, err error, num uint16, state string) *mysql.MySQLError {
	t.Helper()
	me, ok := err.(*mysql.MySQLError)
	if !ok {
		t.Fatalf("want MySQL error %d, got %T %v", num, err, err)
	}
	if me.Number != num || string(me.SQLState[:]) != state {
		t.Fatalf("want error %d (%s), got %d (%s): %s", num, state, me.Number, me.SQLState, me.Message)
	}
	return me
}

// rawConn is a bare TCP connection for tests that send broken packets.
func rawConn(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// readAllQuiet drains r until EOF or error.
func readAllQuiet(r io.Reader) []byte { b, _ := io.ReadAll(r); return b }

// startTestGateway starts an in-process gateway from a YAML config for
// one test, logging as name, and shuts it down when the test ends.
func startTestGateway(t *testing.T, name, yaml string) *gateway.Server {
	t.Helper()
	return gatewaytest.Start(t, name, yaml)
}
