package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
)

const (
	sha2User, sha2Pass = "sha2user", "sha2-secret"
	sha2User2          = "sha2other"
)

// sha2Gateway starts a gateway in front of the shared MariaDB whose
// greeting offers caching_sha2_password (unless top has its own auth:),
// with extra top-level YAML.
func sha2Gateway(t *testing.T, top string) *gateway.Server {
	t.Helper()
	if !strings.Contains(top, "auth:") {
		top = "auth: {default_plugin: caching_sha2_password}\n" + top
	}
	return startTestGateway(t, "gateway-sha2", fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
%s
users:
  - {user: %s, password: %s}
  - {user: %s, password: %s}
  - {user: %s, password: %s}
  - {user: nopass}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    failover_buffer: 0s
    pool: {size: 4, min_idle: 1, acquire_timeout: 5s, dial_timeout: 2s}
`, logLevel(), top, appUser, appPass, sha2User, sha2Pass, sha2User2, sha2Pass, backendUser, backendPass, shared.db.Addr()))
}

// driverDB opens go-sql-driver on addr as user with cfg changed by edit.
func driverDB(t *testing.T, addr, user, pass string, edit func(*mysql.Config)) *sql.DB {
	t.Helper()
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = user, pass, "tcp", addr
	c.Timeout = 10 * time.Second
	if edit != nil {
		edit(c)
	}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// pingFresh logs in on a new connection and runs a query through it.
func pingFresh(db *sql.DB) error {
	db.SetMaxIdleConns(0)
	var one int
	return db.QueryRow("SELECT 1").Scan(&one)
}

// sha2Login logs in to addr by hand with a caching_sha2_password answer
// and returns the AuthMoreData status the gateway sent (3 fast, 4 full;
// 0 when it answered OK or ERR straight away). On 4 it lets full answer
// and returns the final packet.
func sha2Login(t *testing.T, addr, user, pass string, full func(c *wire.Conn, salt []byte) error) (status byte, final []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := wire.NewConn(nc, 4096, 4096)
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	g, err := wire.ParseGreeting(p)
	if err != nil {
		t.Fatal(err)
	}
	if g.AuthPlugin != wire.CachingSha2Password {
		t.Fatalf("greeting offers %q", g.AuthPlugin)
	}
	resp := &wire.HandshakeResponse{
		Caps: wire.BackendCaps &^ wire.CapConnectAttrs, MaxPacket: 1 << 24, Collation: wire.DefaultCollation,
		User: user, AuthData: wire.ScrambleCachingSha2(g.Salt, pass), AuthPlugin: wire.CachingSha2Password,
	}
	if err := c.WritePacket(wire.AppendHandshakeResponse(nil, resp)); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	p, err = c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 2 || p[0] != 1 {
		return 0, append([]byte(nil), p...)
	}
	status = p[1]
	if status == 4 {
		if err := full(c, g.Salt); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	p, err = c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	return status, append([]byte(nil), p...)
}

// TestAuthCachingSha2Sequence: a user's first login after the gateway
// started goes through full authentication (RSA, key asked for), later
// ones take the fast path; wrong answers get 1045, after full
// authentication for known and unknown users alike.
func TestAuthCachingSha2Sequence(t *testing.T) {
	gw := sha2Gateway(t, "")
	addr := gw.Addr().String()
	rsaFull := func(c *wire.Conn, salt []byte) error {
		if err := c.WritePacket([]byte{2}); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return err
		}
		p, err := c.ReadPacket()
		if err != nil {
			return err
		}
		pub, err := wire.ParsePublicKeyPEM(p[1:])
		if err != nil {
			return err
		}
		if !pub.Equal(gw.RSAPublicKey()) {
			return errors.New("the key sent is not RSAPublicKey()")
		}
		enc, err := wire.EncryptPassword(sha2Pass, salt, pub)
		if err != nil {
			return err
		}
		return c.WritePacket(enc)
	}
	// No key, no request: garbage (here the clear-text password) on plain
	// TCP is a wrong password.
	st, final := sha2Login(t, addr, sha2User, sha2Pass, func(c *wire.Conn, _ []byte) error {
		return c.WritePacket([]byte(sha2Pass + "\x00"))
	})
	if st != 4 || !wire.IsERR(final) || wire.ParseERR(final).Code != 1045 {
		t.Fatalf("clear text over plain TCP: status %d, final %q", st, final)
	}
	if st, final = sha2Login(t, addr, sha2User, sha2Pass, rsaFull); st != 4 || !wire.IsOK(final) {
		t.Fatalf("first login: status %d, final %q", st, final)
	}
	if st, final = sha2Login(t, addr, sha2User, sha2Pass, nil); st != 3 || !wire.IsOK(final) {
		t.Fatalf("second login: status %d, final %q", st, final)
	}
	// A cached user with a wrong password goes on to full authentication,
	// like an unknown user: the answer tells nothing about who logged in.
	garbage := func(c *wire.Conn, _ []byte) error { return c.WritePacket([]byte("x")) }
	for _, u := range []string{sha2User, "nosuchuser"} {
		if st, final = sha2Login(t, addr, u, "wrong", garbage); st != 4 || !wire.IsERR(final) || wire.ParseERR(final).Code != 1045 {
			t.Fatalf("%s, wrong password: status %d, final %q; want full authentication (4), then 1045", u, st, final)
		}
	}
	// go-sql-driver: the greeting makes it answer caching_sha2_password;
	// with no key configured it asks for it.
	if err := pingFresh(driverDB(t, addr, sha2User2, sha2Pass, nil)); err != nil {
		t.Fatalf("go-sql-driver, key asked for: %v", err)
	}
	err := pingFresh(driverDB(t, addr, sha2User2, "wrong", nil))
	sqlErr(t, err, 1045, "28000")
	// Users without a password log in with an empty scramble.
	if err := pingFresh(driverDB(t, addr, "nopass", "", nil)); err != nil {
		t.Fatalf("no password: %v", err)
	}
}

// TestAuthServerPubKey: go-sql-driver given the gateway's key
// (serverPubKey) encrypts the password without asking for the key.
func TestAuthServerPubKey(t *testing.T) {
	gw := sha2Gateway(t, "")
	mysql.RegisterServerPubKey("directgate-e2e", gw.RSAPublicKey())
	defer mysql.DeregisterServerPubKey("directgate-e2e")
	db := driverDB(t, gw.Addr().String(), sha2User, sha2Pass, func(c *mysql.Config) {
		c.ServerPubKey = "directgate-e2e"
	})
	for range 2 { // full authentication, then the fast path
		if err := pingFresh(db); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuthSha2TLS: over TLS full authentication sends the password in
// clear text.
func TestAuthSha2TLS(t *testing.T) {
	pki := newPKI(t)
	cert, key := pki.issue(t, "gateway-sha2", 50, true, false)
	gw := sha2Gateway(t, fmt.Sprintf("tls: {cert: %s, key: %s}", cert, key))
	db := driverDB(t, gw.Addr().String(), sha2User, sha2Pass, func(c *mysql.Config) {
		c.TLS = &tls.Config{RootCAs: pki.pool, ServerName: "127.0.0.1"}
	})
	for range 2 {
		if err := pingFresh(db); err != nil {
			t.Fatal(err)
		}
	}
	bad := driverDB(t, gw.Addr().String(), sha2User2, "wrong", func(c *mysql.Config) {
		c.TLS = &tls.Config{RootCAs: pki.pool, ServerName: "127.0.0.1"}
	})
	sqlErr(t, pingFresh(bad), 1045, "28000")
}

// TestAuthNativeAndSha2SideBySide: on a gateway greeting with
// mysql_native_password, go-sql-driver answers with it
// (allowNativePasswords), and the wire client too; on one greeting with
// caching_sha2_password, a client answering mysql_native_password is
// still accepted.
func TestAuthNativeAndSha2SideBySide(t *testing.T) {
	native := driverDB(t, shared.gwAddr(), appUser, appPass, func(c *mysql.Config) { c.AllowNativePasswords = true })
	if err := pingFresh(native); err != nil {
		t.Fatal(err)
	}
	gw := sha2Gateway(t, "")
	st, final := nativeLogin(t, gw.Addr().String(), appUser, appPass)
	if st != 0 || !wire.IsOK(final) {
		t.Fatalf("native answer to a caching_sha2 greeting: %d %q", st, final)
	}
}

// nativeLogin answers a greeting with mysql_native_password.
func nativeLogin(t *testing.T, addr, user, pass string) (byte, []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := wire.NewConn(nc, 4096, 4096)
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	g, err := wire.ParseGreeting(p)
	if err != nil {
		t.Fatal(err)
	}
	resp := &wire.HandshakeResponse{
		Caps: wire.BackendCaps &^ wire.CapConnectAttrs, MaxPacket: 1 << 24, Collation: wire.DefaultCollation,
		User: user, AuthData: wire.ScrambleNative(g.Salt, pass), AuthPlugin: wire.NativePassword,
	}
	if err := c.WritePacket(wire.AppendHandshakeResponse(nil, resp)); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	p, err = c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	return 0, append([]byte(nil), p...)
}

// TestAuthChangeUserSha2: the wire client logs in to a caching_sha2
// gateway (full authentication by RSA) and changes user with
// COM_CHANGE_USER, which runs full authentication again for the new user.
func TestAuthChangeUserSha2(t *testing.T) {
	gw := sha2Gateway(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, gw.Addr().String(), wire.DialOptions{User: sha2User, Password: sha2Pass})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if err := bc.ChangeUser(sha2User2, sha2Pass, ""); err != nil {
		t.Fatalf("change user, full authentication: %v", err)
	}
	if err := bc.ChangeUser(sha2User2, sha2Pass, ""); err != nil {
		t.Fatalf("change user, fast path: %v", err)
	}
	var se *wire.SQLError
	if err := bc.ChangeUser(sha2User, "wrong", ""); !errors.As(err, &se) || se.Code != 1045 {
		t.Fatalf("change user, wrong password: %v", err)
	}
	var who string
	if err := bc.QueryRows("SELECT CURRENT_USER()", func(r [][]byte) { who = string(r[0]) }); err != nil {
		t.Fatal(err)
	}
	if who == "" {
		t.Fatal("no current user after a refused change user")
	}
}

// TestAuthRSAKeyFromConfig: auth.rsa_private_key is the key the gateway
// uses.
func TestAuthRSAKeyFromConfig(t *testing.T) {
	st, final := sha2LoginWithConfiguredKey(t)
	if st != 4 || !wire.IsOK(final) {
		t.Fatalf("status %d, final %q", st, final)
	}
}

func sha2LoginWithConfiguredKey(t *testing.T) (byte, []byte) {
	t.Helper()
	key := generateRSAFile(t)
	gw := sha2Gateway(t, fmt.Sprintf("auth: {default_plugin: caching_sha2_password, rsa_private_key: %s}", key.path))
	if !gw.RSAPublicKey().Equal(key.pub) {
		t.Fatal("the gateway does not use the configured key")
	}
	return sha2Login(t, gw.Addr().String(), sha2User, sha2Pass, func(c *wire.Conn, salt []byte) error {
		enc, err := wire.EncryptPassword(sha2Pass, salt, key.pub)
		if err != nil {
			return err
		}
		return c.WritePacket(enc)
	})
}

// TestBackendEd25519 creates a MariaDB user IDENTIFIED VIA ed25519 and
// logs in as it with wire.Dial, then runs a gateway whose backend user it
// is.
func TestBackendEd25519(t *testing.T) {
	root, err := shared.db.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var n int
	if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.plugins WHERE plugin_name = 'ed25519' AND plugin_status = 'ACTIVE'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		if _, err := root.Exec("INSTALL SONAME 'auth_ed25519'"); err != nil {
			t.Skipf("MariaDB has no auth_ed25519: %v", err)
		}
	}
	const user, pass = "eduser", "ed-secret"
	for _, host := range []string{"%", "localhost", "127.0.0.1"} {
		acct := fmt.Sprintf("'%s'@'%s'", user, host)
		mustExec(t, root, "DROP USER IF EXISTS "+acct)
		mustExec(t, root, "CREATE USER "+acct+" IDENTIFIED VIA ed25519 USING PASSWORD('"+pass+"')")
		mustExec(t, root, "GRANT ALL ON *.* TO "+acct)
	}
	var stored string
	if err := root.QueryRow("SELECT JSON_VALUE(Priv, '$.authentication_string') FROM mysql.global_priv WHERE User = ? AND Host = '%'", user).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := base64.RawStdEncoding.EncodeToString(wire.Ed25519PublicKey(pass)); stored != want {
		t.Fatalf("MariaDB stores %q, wire.Ed25519PublicKey gives %q", stored, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, shared.db.Addr(), wire.DialOptions{User: user, Password: pass})
	if err != nil {
		t.Fatalf("ed25519 login: %v", err)
	}
	defer bc.Close()
	if err := bc.ChangeUser(user, pass, ""); err != nil {
		t.Fatalf("ed25519 change user: %v", err)
	}
	var se *wire.SQLError
	if _, err := wire.Dial(ctx, shared.db.Addr(), wire.DialOptions{User: user, Password: "wrong"}); !errors.As(err, &se) || se.Code != 1045 {
		t.Fatalf("ed25519 wrong password: %v", err)
	}
	gw := startTestGateway(t, "gateway-ed25519", fmt.Sprintf(`
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
    pool: {size: 2, min_idle: 1, acquire_timeout: 5s, dial_timeout: 2s}
`, logLevel(), appUser, appPass, user, pass, shared.db.Addr()))
	var who string
	if err := driverDB(t, gw.Addr().String(), appUser, appPass, nil).QueryRow("SELECT CURRENT_USER()").Scan(&who); err != nil {
		t.Fatal(err)
	}
	if who == "" || who[:len(user)] != user {
		t.Fatalf("backend user %q, want %s", who, user)
	}
}

// rsaFile is an RSA key written to a PKCS #1 PEM file.
type rsaFile struct {
	path string
	pub  *rsa.PublicKey
}

func generateRSAFile(t *testing.T) rsaFile {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gateway-rsa.pem")
	writePEM(t, path, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
	return rsaFile{path: path, pub: &key.PublicKey}
}
