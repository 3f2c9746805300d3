package e2e

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/go-sql-driver/mysql"
)

// startAccountsGateway starts a gateway with mariadb_accounts on (or off)
// whose cluster account (a test account with ALL PRIVILEGES and GRANT
// OPTION, so SELECT on mysql.global_priv) reads the accounts. Its users[] are app and gwadmin.
func startAccountsGateway(t *testing.T, name string, on bool) string {
	t.Helper()
	backendAccount(t, "dgaccts", "dgaccts-pw")
	mustExec(t, rootDB(t), "GRANT ALL PRIVILEGES ON *.* TO 'dgaccts'@'%' WITH GRANT OPTION")
	yaml := clusterYAML(0, "dgaccts", "dgaccts-pw", "{size: 4, min_idle: 1}")
	if on {
		yaml += "mariadb_accounts: {enabled: true, refresh: 1s, pool_idle: 1s}\n"
	}
	return startTestGateway(t, name, yaml).Addr().String()
}

// accountLogin logs in to addr as user and returns CURRENT_USER() or the
// login's error.
func accountLogin(t *testing.T, addr, user, pass string) (string, error) {
	t.Helper()
	db, err := sql.Open("mysql", dsnFor(addr, user, pass))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var cu string
	err = db.QueryRow("SELECT CURRENT_USER()").Scan(&cu)
	return cu, err
}

// wantDenied asserts MariaDB's 1045 with its exact text. The gateway names
// a loopback client 'localhost', as MariaDB does when it resolves names
// (make compat's server; this test's server runs with skip-name-resolve
// and would print '127.0.0.1').
func wantDenied(t *testing.T, err error, user, using string) {
	t.Helper()
	me := sqlErr(t, err, 1045, "28000")
	if want := fmt.Sprintf("Access denied for user '%s'@'localhost' (using password: %s)", user, using); me.Message != want {
		t.Fatalf("message %q, want %q", me.Message, want)
	}
}

// TestMariaDBAccounts: accounts created with CREATE USER through the
// gateway log in through it (mariadb_accounts), with MariaDB's checks for
// the client's address and password, and its answers.
func TestMariaDBAccounts(t *testing.T) {
	addr := startAccountsGateway(t, "accounts", true)
	app := open(t, dsnFor(addr, appUser, appPass))
	for _, u := range []string{"ma_nopw", "ma_pw", "ma_far", "ma_hx"} {
		mustExec(t, app, "DROP USER IF EXISTS "+u+"@'127.0.0.1', "+u+"@'10.9.9.9', "+u+"@'localhost', "+u+"@'127.0.0.%'")
	}
	t.Cleanup(func() {
		for _, u := range []string{"ma_nopw@'127.0.0.1'", "ma_pw@'127.0.0.1'", "ma_far@'10.9.9.9'", "ma_hx@'localhost'", "ma_hx@'127.0.0.%'"} {
			_, _ = direct(t).Exec("DROP USER IF EXISTS " + u)
		}
	})
	// Created through the gateway: the next login reads the accounts again.
	mustExec(t, app,
		"CREATE USER ma_nopw@'127.0.0.1'", "GRANT SELECT ON e2e.* TO ma_nopw@'127.0.0.1'",
		"CREATE USER ma_pw@'127.0.0.1' IDENTIFIED BY 'pw1'", "GRANT SELECT ON e2e.* TO ma_pw@'127.0.0.1'",
		"CREATE USER ma_far@'10.9.9.9'", "GRANT SELECT ON e2e.* TO ma_far@'10.9.9.9'")
	if cu, err := accountLogin(t, addr, "ma_nopw", ""); err != nil || cu != "ma_nopw@127.0.0.1" {
		t.Fatalf("no password: %q %v", cu, err)
	}
	if cu, err := accountLogin(t, addr, "ma_pw", "pw1"); err != nil || cu != "ma_pw@127.0.0.1" {
		t.Fatalf("password: %q %v", cu, err)
	}
	_, err := accountLogin(t, addr, "ma_pw", "wrong")
	wantDenied(t, err, "ma_pw", "YES")
	_, err = accountLogin(t, addr, "ma_nopw", "x")
	wantDenied(t, err, "ma_nopw", "YES")
	_, err = accountLogin(t, addr, "ma_pw", "")
	wantDenied(t, err, "ma_pw", "NO")
	// An account for another host does not admit this client.
	_, err = accountLogin(t, addr, "ma_far", "")
	wantDenied(t, err, "ma_far", "NO")

	// A new password: the old one no longer logs in, the new one does.
	mustExec(t, app, "ALTER USER ma_pw@'127.0.0.1' IDENTIFIED BY 'pw2'")
	_, err = accountLogin(t, addr, "ma_pw", "pw1")
	wantDenied(t, err, "ma_pw", "YES")
	if cu, err := accountLogin(t, addr, "ma_pw", "pw2"); err != nil || cu != "ma_pw@127.0.0.1" {
		t.Fatalf("new password: %q %v", cu, err)
	}
	// A dropped account can no longer log in.
	mustExec(t, app, "DROP USER ma_pw@'127.0.0.1'")
	_, err = accountLogin(t, addr, "ma_pw", "pw2")
	wantDenied(t, err, "ma_pw", "YES")

	// The host gap: the gateway matches 'ma_hx'@'localhost' for its
	// loopback client, MariaDB (skip-name-resolve) the gateway's login to
	// 'ma_hx'@'127.0.0.%': refused, not run as another row.
	mustExec(t, app,
		"CREATE USER ma_hx@'localhost' IDENTIFIED BY 'p'", "CREATE USER ma_hx@'127.0.0.%' IDENTIFIED BY 'p'",
		"GRANT SELECT ON e2e.* TO ma_hx@'127.0.0.%'", "GRANT SELECT ON e2e.* TO ma_hx@'localhost'")
	_, err = accountLogin(t, addr, "ma_hx", "p")
	wantDenied(t, err, "ma_hx", "YES")

	// Mode off: only users[] log in, as before.
	off := startAccountsGateway(t, "accounts-off", false)
	_, err = accountLogin(t, off, "ma_nopw", "")
	sqlErr(t, err, 1045, "28000")
}

// TestMariaDBAccountsKill: a GRANT of CONNECTION ADMIN through the gateway
// lets an account kill another user's query through it, as directly.
func TestMariaDBAccountsKill(t *testing.T) {
	addr := startAccountsGateway(t, "accounts-kill", true)
	app := open(t, dsnFor(addr, appUser, appPass))
	mustExec(t, app, "DROP USER IF EXISTS ma_k1@'127.0.0.1', ma_k2@'127.0.0.1'",
		"CREATE USER ma_k1@'127.0.0.1'", "GRANT SELECT ON e2e.* TO ma_k1@'127.0.0.1'",
		"CREATE USER ma_k2@'127.0.0.1' IDENTIFIED BY 'k2'", "GRANT SELECT ON e2e.* TO ma_k2@'127.0.0.1'")
	t.Cleanup(func() { _, _ = direct(t).Exec("DROP USER IF EXISTS ma_k1@'127.0.0.1', ma_k2@'127.0.0.1'") })

	k1 := open(t, dsnFor(addr, "ma_k1", ""))
	k1.SetMaxOpenConns(1)
	var id int64
	if err := k1.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var v int
		done <- k1.QueryRow("SELECT SLEEP(30)").Scan(&v)
	}()
	time.Sleep(300 * time.Millisecond)
	k2 := open(t, dsnFor(addr, "ma_k2", "k2"))
	_, err := k2.Exec(fmt.Sprintf("KILL QUERY %d", id))
	sqlErr(t, err, 1095, "HY000")
	k2.Close()

	mustExec(t, app, "GRANT CONNECTION ADMIN ON *.* TO ma_k2@'127.0.0.1'")
	k2 = open(t, dsnFor(addr, "ma_k2", "k2"))
	if _, err := k2.Exec(fmt.Sprintf("KILL QUERY %d", id)); err != nil {
		t.Fatalf("KILL QUERY with CONNECTION ADMIN: %v", err)
	}
	select {
	case err := <-done:
		var me *mysql.MySQLError
		if err != nil && !(errors.As(err, &me) && me.Number == 1317) {
			t.Fatalf("killed query: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the query was not killed")
	}
}

// TestMariaDBAccountsReload: mariadb_accounts turns on and off with a
// reload (SIGHUP).
func TestMariaDBAccountsReload(t *testing.T) {
	backendAccount(t, "dgaccts", "dgaccts-pw")
	base := clusterYAML(0, "dgaccts", "dgaccts-pw", "{size: 4, min_idle: 1}")
	srv := startTestGateway(t, "accounts-reload", base)
	addr := srv.Addr().String()
	mustExec(t, rootDB(t), "DROP USER IF EXISTS ma_rl@'127.0.0.1'", "CREATE USER ma_rl@'127.0.0.1'", "GRANT SELECT ON e2e.* TO ma_rl@'127.0.0.1'")
	t.Cleanup(func() { _, _ = direct(t).Exec("DROP USER IF EXISTS ma_rl@'127.0.0.1'") })
	_, err := accountLogin(t, addr, "ma_rl", "")
	sqlErr(t, err, 1045, "28000")
	reload := func(yaml string) {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		// The listener's port stays; the file's 0 is not applied.
		if err := srv.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	reload(base + "mariadb_accounts: {enabled: true}\n")
	if cu, err := accountLogin(t, addr, "ma_rl", ""); err != nil || cu != "ma_rl@127.0.0.1" {
		t.Fatalf("after turning it on: %q %v", cu, err)
	}
	reload(base)
	_, err = accountLogin(t, addr, "ma_rl", "")
	sqlErr(t, err, 1045, "28000")
}
