package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/mariadbtest"
)

// A second cluster for the tests of sessions over several clusters: its
// own MariaDB, started by the first test that needs it and stopped by
// TestMain.
var billing struct {
	once sync.Once
	srv  *mariadbtest.Server
	err  error
}

// billingServer returns the second cluster's MariaDB.
func billingServer(t *testing.T) *mariadbtest.Server {
	t.Helper()
	billing.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		billing.srv, billing.err = mariadbtest.Start(ctx, mariadbtest.Options{
			NoBinlog: true,
			Users:    []mariadbtest.User{{Name: backendUser, Password: backendPass}},
		})
	})
	if billing.err != nil {
		t.Fatal(billing.err)
	}
	return billing.srv
}

// stopBilling stops the second cluster's MariaDB, if a test started it.
func stopBilling() {
	if billing.srv != nil {
		_ = billing.srv.Stop()
	}
}

// twoClusters is a gateway over the shared MariaDB (cluster main, every
// database but those billing lists) and the second one (cluster billing,
// databases dbs), with fresh databases mainDB and billDB holding a table
// acct (id, bal) with rows 1 and 2 at 100.
type twoClusters struct {
	gw              string
	main, bill      *sql.DB // straight to each server, as the backend user
	mainDB, billDB  string
	mainSrv, billSr *mariadbtest.Server
	// yaml is the gateway's configuration.
	yaml string
}

// startTwoClusters builds a twoClusters; mode is the app user's
// transaction_mode; extra is added to the config's top level.
func startTwoClusters(t *testing.T, name, mode, extra string) *twoClusters {
	t.Helper()
	tc := newTwoClusters(t, name, mode, extra, "")
	tc.gw = startTestGateway(t, "gateway-"+name, tc.yaml).Addr().String()
	return tc
}

// newTwoClusters is startTwoClusters without the gateway; mainExtra is
// added to cluster main's keys (indented by four spaces).
func newTwoClusters(t *testing.T, name, mode, extra, mainExtra string) *twoClusters {
	t.Helper()
	bs := billingServer(t)
	tc := &twoClusters{mainDB: "xm_" + name, billDB: "xb_" + name, mainSrv: shared.db, billSr: bs}
	for _, s := range []struct {
		srv *mariadbtest.Server
		db  string
		out **sql.DB
	}{{shared.db, tc.mainDB, &tc.main}, {bs, tc.billDB, &tc.bill}} {
		root, err := s.srv.RootDB()
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, root, "DROP DATABASE IF EXISTS "+s.db, "CREATE DATABASE "+s.db,
			"CREATE TABLE "+s.db+".acct (id INT PRIMARY KEY, bal INT NOT NULL)",
			"INSERT INTO "+s.db+".acct VALUES (1, 100), (2, 100)")
		root.Close()
		*s.out = open(t, s.srv.DSN(backendUser, backendPass, s.db))
	}
	t.Cleanup(func() {
		for _, s := range []*sql.DB{tc.main, tc.bill} {
			_, _ = s.Exec("DROP DATABASE IF EXISTS " + tc.mainDB)
			_, _ = s.Exec("DROP DATABASE IF EXISTS " + tc.billDB)
		}
	})
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
%s
users:
  - {user: %s, password: %s, transaction_mode: %s}
  - {user: gwadmin, password: admin-secret, admin: true}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {size: 8, min_idle: 0, acquire_timeout: 20s}
%s
  - name: billing
    databases: [%s]
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {size: 8, min_idle: 0, acquire_timeout: 20s}
`, logLevel(), extra, appUser, appPass, mode, backendUser, backendPass, shared.db.Addr(), mainExtra,
		tc.billDB, backendUser, backendPass, bs.Addr())
	tc.yaml = yaml
	return tc
}

// session opens one client connection through the gateway, on db.
func (tc *twoClusters) session(t *testing.T, db string) *sql.Conn {
	t.Helper()
	return oneConn(t, gatewayDSN(tc.gw, appUser, appPass, db, nil))
}

// wantBalances checks account 1's balance on each cluster.
func (tc *twoClusters) wantBalances(t *testing.T, when string, mainBal, billBal int) {
	t.Helper()
	if a, b := balances(t, tc.main, tc.mainDB+".acct"), balances(t, tc.bill, tc.billDB+".acct"); a[1] != mainBal || b[1] != billBal {
		t.Errorf("%s: main %v billing %v, want account 1 at %d and %d", when, a, b, mainBal, billBal)
	}
}

// balances reads acct's balances of one server: id -> bal.
func balances(t *testing.T, db *sql.DB, table string) map[int]int {
	t.Helper()
	rows, err := db.Query("SELECT id, bal FROM " + table + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var id, bal int
		if err := rows.Scan(&id, &bal); err != nil {
			t.Fatal(err)
		}
		out[id] = bal
	}
	return out
}

// TestClustersRouting: statements go to the cluster of their tables'
// databases (qualified, or the current database's), USE moves across
// clusters, a statement over two clusters is refused before it runs
// anywhere, and SHOW DATABASES lists both clusters' databases.
func TestClustersRouting(t *testing.T) {
	tc := startTwoClusters(t, "route", "single", "")
	ctx := context.Background()
	c := tc.session(t, tc.mainDB)
	run(t, c, "UPDATE acct SET bal = 101 WHERE id = 1")
	run(t, c, "UPDATE "+tc.billDB+".acct SET bal = 102 WHERE id = 1")
	if b := balances(t, tc.main, tc.mainDB+".acct"); b[1] != 101 {
		t.Errorf("main: %v", b)
	}
	if b := balances(t, tc.bill, tc.billDB+".acct"); b[1] != 102 {
		t.Errorf("billing: %v", b)
	}
	var sid, bid int
	if err := c.QueryRowContext(ctx, "SELECT @@server_id").Scan(&sid); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "SELECT @@server_id FROM "+tc.billDB+".acct LIMIT 1").Scan(&bid); err != nil {
		t.Fatal(err)
	}
	if sid == bid {
		t.Errorf("both statements ran on server %d", sid)
	}
	run(t, c, "USE "+tc.billDB)
	var db string
	var bal int
	if err := c.QueryRowContext(ctx, "SELECT DATABASE(), bal FROM acct WHERE id = 1").Scan(&db, &bal); err != nil || db != tc.billDB || bal != 102 {
		t.Fatalf("after USE: %q %d %v", db, bal, err)
	}
	if err := c.QueryRowContext(ctx, "SELECT bal FROM "+tc.mainDB+".acct WHERE id = 1").Scan(&bal); err != nil || bal != 101 {
		t.Fatalf("main from billing: %d %v", bal, err)
	}
	run(t, c, "USE "+tc.mainDB)
	// Over two clusters: refused, and nothing ran.
	for _, q := range []string{
		"SELECT * FROM acct a JOIN " + tc.billDB + ".acct b USING (id)",
		"INSERT INTO acct SELECT id + 10, bal FROM " + tc.billDB + ".acct",
		"UPDATE " + tc.mainDB + ".acct SET bal = 0 WHERE id IN (SELECT id FROM " + tc.billDB + ".acct)",
	} {
		_, err := c.ExecContext(ctx, q)
		me := sqlErr(t, err, 1235, "42000")
		if !strings.Contains(me.Message, "cluster main") || !strings.Contains(me.Message, "cluster billing") {
			t.Errorf("%s: %s", q, me.Message)
		}
	}
	if b := balances(t, tc.main, tc.mainDB+".acct"); len(b) != 2 || b[1] != 101 {
		t.Errorf("main after refused statements: %v", b)
	}
	// SHOW DATABASES: both clusters'.
	rows, err := c.QueryContext(ctx, "SHOW DATABASES")
	if err != nil {
		t.Fatal(err)
	}
	var dbs []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, n)
	}
	rows.Close()
	for _, want := range []string{tc.mainDB, tc.billDB, "information_schema", testDB} {
		if !slices.Contains(dbs, want) {
			t.Errorf("SHOW DATABASES %v lacks %s", dbs, want)
		}
	}
	if !slices.IsSorted(dbs) || len(slices.Compact(slices.Clone(dbs))) != len(dbs) {
		t.Errorf("SHOW DATABASES: %v", dbs)
	}
	// The session's mode, read and set.
	var mode string
	if err := c.QueryRowContext(ctx, "SELECT @@transaction_mode").Scan(&mode); err != nil || mode != "single" {
		t.Fatalf("@@transaction_mode %q %v", mode, err)
	}
	_, err = c.ExecContext(ctx, "SET transaction_mode = 'sometimes'")
	sqlErr(t, err, 1231, "42000")
	run(t, c, "SET transaction_mode = 'multi'")
	if err := c.QueryRowContext(ctx, "SELECT @@session.transaction_mode").Scan(&mode); err != nil || mode != "multi" {
		t.Fatalf("@@transaction_mode %q %v", mode, err)
	}
}

// TestClustersSingle: in transaction_mode single a transaction stays on
// one cluster: the statement that would take it to a second one is
// refused, and the transaction goes on on the first. A transaction whose
// first statement is on the other cluster runs there.
func TestClustersSingle(t *testing.T) {
	tc := startTwoClusters(t, "single", "single", "")
	ctx := context.Background()
	c := tc.session(t, tc.mainDB)
	run(t, c, "BEGIN")
	run(t, c, "UPDATE acct SET bal = bal - 10 WHERE id = 1")
	_, err := c.ExecContext(ctx, "UPDATE "+tc.billDB+".acct SET bal = bal + 10 WHERE id = 1")
	me := sqlErr(t, err, 1235, "42000")
	if !strings.Contains(me.Message, "transaction_mode") || !strings.Contains(me.Message, "cluster main") {
		t.Errorf("single: %s", me.Message)
	}
	var bal int
	if err := c.QueryRowContext(ctx, "SELECT bal FROM acct WHERE id = 1").Scan(&bal); err != nil || bal != 90 {
		t.Fatalf("transaction after the refusal: %d %v", bal, err)
	}
	run(t, c, "ROLLBACK")
	if b := balances(t, tc.main, tc.mainDB+".acct"); b[1] != 100 {
		t.Errorf("main after ROLLBACK: %v", b)
	}
	// A transaction that begins on billing stays there.
	run(t, c, "START TRANSACTION")
	run(t, c, "UPDATE "+tc.billDB+".acct SET bal = bal + 5 WHERE id = 2")
	_, err = c.ExecContext(ctx, "UPDATE acct SET bal = 0")
	sqlErr(t, err, 1235, "42000")
	run(t, c, "COMMIT")
	if b := balances(t, tc.bill, tc.billDB+".acct"); b[2] != 105 {
		t.Errorf("billing after COMMIT: %v", b)
	}
	if b := balances(t, tc.main, tc.mainDB+".acct"); b[1] != 100 || b[2] != 100 {
		t.Errorf("main: %v", b)
	}
}

// TestClustersMulti: in transaction_mode multi a transaction spans both
// clusters; COMMIT commits each, ROLLBACK rolls back each, and a COMMIT
// that fails on the second cluster after the first committed says which
// committed.
func TestClustersMulti(t *testing.T) {
	tc := startTwoClusters(t, "multi", "multi", "")
	ctx := context.Background()
	c := tc.session(t, tc.mainDB)
	transfer := func(n int) {
		run(t, c, "BEGIN")
		run(t, c, fmt.Sprintf("UPDATE acct SET bal = bal - %d WHERE id = 1", n))
		run(t, c, fmt.Sprintf("UPDATE %s.acct SET bal = bal + %d WHERE id = 1", tc.billDB, n))
	}
	transfer(10)
	// Inside the transaction each cluster shows its own uncommitted write.
	var bal int
	if err := c.QueryRowContext(ctx, "SELECT bal FROM "+tc.billDB+".acct WHERE id = 1").Scan(&bal); err != nil || bal != 110 {
		t.Fatalf("billing inside the transaction: %d %v", bal, err)
	}
	if b := balances(t, tc.bill, tc.billDB+".acct"); b[1] != 100 {
		t.Errorf("billing seen from outside before COMMIT: %v", b)
	}
	run(t, c, "COMMIT")
	tc.wantBalances(t, "after COMMIT", 90, 110)
	transfer(5)
	run(t, c, "ROLLBACK")
	tc.wantBalances(t, "after ROLLBACK", 90, 110)
	// The second cluster's connection dies before COMMIT: main commits,
	// billing does not, and the error says so.
	transfer(1)
	killBackendConns(t, tc.billSr)
	_, err := c.ExecContext(ctx, "COMMIT")
	me := sqlErr(t, err, 1180, "HY000")
	if !strings.Contains(me.Message, "committed on cluster main") || !strings.Contains(me.Message, "cluster billing") {
		t.Errorf("partial commit: %s", me.Message)
	}
	tc.wantBalances(t, "after the partial commit", 89, 110)
	// The session goes on.
	transfer(1)
	run(t, c, "COMMIT")
	tc.wantBalances(t, "after the last COMMIT", 88, 111)
}
