package e2e

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
)

// nativeHash is what PASSWORD(pw) returns: "*" + HEX(SHA1(SHA1(pw))).
func nativeHash(pw string) string {
	s1 := sha1.Sum([]byte(pw))
	s2 := sha1.Sum(s1[:])
	return "*" + strings.ToUpper(hex.EncodeToString(s2[:]))
}

// TestBackendIdentityPerUser: two gateway users mapped to two MariaDB
// accounts (users[].backend_user) run as those accounts: CURRENT_USER()
// and SHOW GRANTS are theirs, and the one without SELECT on a table gets
// 1142 from MariaDB. A gateway password comes from an environment
// variable, the backend passwords from a file and inline.
func TestBackendIdentityPerUser(t *testing.T) {
	root, err := shared.db.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, host := range []string{"%", "127.0.0.1", "localhost"} {
		for _, u := range []string{"idalice", "idbob"} {
			mustExec(t, root, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", u, host),
				fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s-backend'", u, host, u))
		}
		mustExec(t, root,
			fmt.Sprintf("GRANT SELECT, INSERT, CREATE, DROP ON %s.* TO 'idalice'@'%s'", testDB, host))
	}
	mustExec(t, root,
		"DROP TABLE IF EXISTS "+testDB+".ident_open", "DROP TABLE IF EXISTS "+testDB+".ident_secret",
		"CREATE TABLE "+testDB+".ident_open (id INT PRIMARY KEY)", "INSERT INTO "+testDB+".ident_open VALUES (1)",
		"CREATE TABLE "+testDB+".ident_secret (id INT PRIMARY KEY)", "INSERT INTO "+testDB+".ident_secret VALUES (2)")
	for _, host := range []string{"%", "127.0.0.1", "localhost"} {
		mustExec(t, root, fmt.Sprintf("GRANT SELECT ON %s.ident_open TO 'idbob'@'%s'", testDB, host))
	}
	pwFile := filepath.Join(t.TempDir(), "alice-backend")
	if err := os.WriteFile(pwFile, []byte("idalice-backend\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DG_E2E_BOB_PW", "bob-gw")
	srv := startTestGateway(t, "identity", fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
users:
  - {user: alice, password: alice-gw, backend_user: idalice, backend_password_file: %s}
  - {user: bob, password_env: DG_E2E_BOB_PW, backend_user: idbob, backend_password: idbob-backend}
  - {user: svc, password: svc}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {size: 4, min_idle: 1}
`, logLevel(), pwFile, backendUser, backendPass, shared.db.Addr()))
	addr := srv.Addr().String()
	gwDSN := func(user, pass string) string {
		return fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=10s", user, pass, addr, testDB)
	}
	alice, bob, svc := open(t, gwDSN("alice", "alice-gw")), open(t, gwDSN("bob", "bob-gw")), open(t, gwDSN("svc", "svc"))
	scan := func(name string, q string) string {
		t.Helper()
		db := map[string]*sql.DB{"alice": alice, "bob": bob, "svc": svc}[name]
		var s string
		if err := db.QueryRow(q).Scan(&s); err != nil {
			t.Fatalf("%s: %s: %v", name, q, err)
		}
		return s
	}
	for name, want := range map[string]string{"alice": "idalice@", "bob": "idbob@", "svc": backendUser + "@"} {
		if got := scan(name, "SELECT CURRENT_USER()"); !strings.HasPrefix(got, want) {
			t.Errorf("%s: CURRENT_USER() = %q, want %s...", name, got, want)
		}
		if got := scan(name, "SHOW GRANTS"); !strings.Contains(got, "`"+strings.TrimSuffix(want, "@")+"`") {
			t.Errorf("%s: SHOW GRANTS = %q", name, got)
		}
	}
	if got := scan("alice", "SELECT id FROM ident_secret"); got != "2" {
		t.Errorf("alice reads ident_secret: %q", got)
	}
	if got := scan("bob", "SELECT id FROM ident_open"); got != "1" {
		t.Errorf("bob reads ident_open: %q", got)
	}
	var id int
	err = bob.QueryRow("SELECT id FROM ident_secret").Scan(&id)
	me := sqlErr(t, err, 1142, "42000")
	if !strings.Contains(me.Message, "idbob") {
		t.Errorf("1142 does not name the backend account: %s", me.Message)
	}

	// COM_CHANGE_USER moves the session to the other user's pools.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, addr, wire.DialOptions{User: "bob", Password: "bob-gw"})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	_ = bc.NetConn().SetDeadline(time.Now().Add(30 * time.Second))
	cur := func() string {
		var s string
		if err := bc.QueryRows("SELECT CURRENT_USER()", func(r [][]byte) { s = string(r[0]) }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := cur(); !strings.HasPrefix(got, "idbob@") {
		t.Errorf("before change user: %q", got)
	}
	if err := bc.ChangeUser("alice", "alice-gw", testDB); err != nil {
		t.Fatalf("change user to alice: %v", err)
	}
	if got := cur(); !strings.HasPrefix(got, "idalice@") {
		t.Errorf("after change user: %q", got)
	}

	// Each pool shows its backend account.
	users := map[string]bool{}
	for _, p := range srv.PoolStats() {
		if !p.Owner {
			users[p.BackendUser] = true
		}
	}
	for _, u := range []string{"idalice", "idbob", backendUser} {
		if !users[u] {
			t.Errorf("no pool logs in as %s: %v", u, users)
		}
	}
}

// TestNativeHashPassword: users[].password given as PASSWORD()'s hash lets
// mysql_native_password clients in with the right password only.
func TestNativeHashPassword(t *testing.T) {
	srv := startTestGateway(t, "hash", fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
users: [{user: hashed, password: %q}]
clusters:
  - {name: main, backend_user: %s, backend_password: %s, backends: [%q], pool: {size: 2, min_idle: 0}}
`, logLevel(), nativeHash("hashed-pw"), backendUser, backendPass, shared.db.Addr()))
	dsn := func(pw string) string {
		return fmt.Sprintf("hashed:%s@tcp(%s)/?timeout=10s", pw, srv.Addr().String())
	}
	if err := open(t, dsn("hashed-pw")).Ping(); err != nil {
		t.Errorf("right password: %v", err)
	}
	if err := open(t, dsn("wrong")).Ping(); err == nil {
		t.Error("wrong password accepted")
	}
}

// TestKillQueryWithBackendIdentity: KILL QUERY of a session whose user
// has its own backend account reaches the statement (the gateway must
// send the KILL as that account: the cluster's account does not own the
// thread and has no CONNECTION ADMIN).
func TestKillQueryWithBackendIdentity(t *testing.T) {
	root, err := shared.db.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, host := range []string{"%", "127.0.0.1", "localhost"} {
		mustExec(t, root, fmt.Sprintf("DROP USER IF EXISTS 'idkill'@'%s'", host),
			fmt.Sprintf("CREATE USER 'idkill'@'%s' IDENTIFIED BY 'idkill-backend'", host),
			// The cluster account with the README's grants: no SUPER, no
			// CONNECTION ADMIN, so it cannot kill other accounts' threads.
			fmt.Sprintf("DROP USER IF EXISTS 'idsvc'@'%s'", host),
			fmt.Sprintf("CREATE USER 'idsvc'@'%s' IDENTIFIED BY 'idsvc-pw'", host),
			fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, SLAVE MONITOR ON *.* TO 'idsvc'@'%s'", host))
	}
	srv := startTestGateway(t, "idkill", fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
users: [{user: killer, password: k, backend_user: idkill, backend_password: idkill-backend}]
clusters:
  - {name: main, backend_user: idsvc, backend_password: idsvc-pw, backends: [%q], pool: {size: 4, min_idle: 0}}
`, logLevel(), shared.db.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func() *wire.BackendConn {
		bc, err := wire.Dial(ctx, srv.Addr().String(), wire.DialOptions{User: "killer", Password: "k"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bc.Close() })
		_ = bc.NetConn().SetDeadline(time.Now().Add(30 * time.Second))
		return bc
	}
	victim, killer := dial(), dial()
	done := make(chan error, 1)
	go func() { done <- victim.QueryRows("SELECT SLEEP(20)", func([][]byte) {}) }()
	time.Sleep(500 * time.Millisecond)
	if _, err := killer.Exec(fmt.Sprintf("KILL QUERY %d", victim.Greeting.ConnectionID)); err != nil {
		t.Fatalf("KILL QUERY: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("KILL QUERY did not interrupt the statement within 10 s")
	}
}
