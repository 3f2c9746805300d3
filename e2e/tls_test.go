package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"
)

// testPKI is a certificate authority and the files of the certificates it
// issued, made with crypto/x509 (no openssl needed).
type testPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
	pool   *x509.CertPool
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1000), Subject: pkix.Name{CommonName: "directgate e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &testPKI{dir: t.TempDir(), ca: ca, caKey: key, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = filepath.Join(p.dir, "ca.pem")
	writePEM(t, p.caFile, "CERTIFICATE", der)
	return p
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue writes a certificate signed by the CA (or self-signed when
// selfSigned) and its key, named name.pem and name-key.pem. Server
// certificates name 127.0.0.1 and localhost.
func (p *testPKI) issue(t testing.TB, name string, serial int64, server, selfSigned bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	parent, signer := p.ca, any(p.caKey)
	if selfSigned {
		parent, signer = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

// tlsGateway starts a gateway in front of backend with extra top-level and
// cluster YAML, and stops it when the test ends.
func tlsGateway(t *testing.T, backend, top, cluster string) (*gateway.Server, *config.Config) {
	t.Helper()
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
%s
users:
  - {user: %s, password: %s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    failover_buffer: 0s
    pool: {size: 4, min_idle: 1, acquire_timeout: 5s, dial_timeout: 2s}
%s
`, logLevel(), top, appUser, appPass, backendUser, backendPass, backend, cluster)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, hclog.New(&hclog.LoggerOptions{Name: "gateway", Level: hclog.LevelFromString(logLevel()), Output: os.Stderr}))
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- gw.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = gw.Shutdown(ctx)
		<-done
	})
	return gw, cfg
}

// tlsDB opens go-sql-driver on addr with tlsConf (nil: plain).
func tlsDB(t *testing.T, addr string, tlsConf *tls.Config) *sql.DB {
	t.Helper()
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = appUser, appPass, "tcp", addr
	c.Timeout = 10 * time.Second
	c.TLS = tlsConf
	conn, err := mysql.NewConnector(c)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// sslCipher is the cipher of the backend connection that served the
// statement ("" for a plain connection). information_schema.SESSION_STATUS
// describes it; SHOW STATUS answers for the client's own connection.
func sslCipher(t *testing.T, db *sql.DB) string {
	t.Helper()
	var cipher string
	if err := db.QueryRow("SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher'").Scan(&cipher); err != nil {
		t.Fatal(err)
	}
	return cipher
}

// leafSerial dials addr over TLS with the wire client and returns the
// serial of the certificate the gateway presented.
func leafSerial(t *testing.T, addr string, conf *tls.Config) (int64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass, TLS: conf})
	if err != nil {
		return 0, err
	}
	defer bc.Close()
	if _, err := bc.Exec("SELECT 1"); err != nil {
		return 0, err
	}
	return bc.TLS().ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// relay forwards connections from a listener on 127.0.0.2 to addr: the
// same server under an address its certificate does not name.
func relay(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, c); b.Close() }()
				_, _ = io.Copy(c, b)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestTLS(t *testing.T) {
	pki := newPKI(t)
	dbCert, dbKey := pki.issue(t, "mariadb", 10, true, false)
	gwCert, gwKey := pki.issue(t, "gateway", 20, true, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{
		NoBinlog:  true,
		ExtraArgs: []string{"--ssl-ca=" + pki.caFile, "--ssl-cert=" + dbCert, "--ssl-key=" + dbKey},
		Users:     []mariadbtest.User{{Name: backendUser, Password: backendPass}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	clientTLS := func(seen *atomic.Int64) *tls.Config {
		return &tls.Config{RootCAs: pki.pool, VerifyConnection: func(cs tls.ConnectionState) error {
			if seen != nil {
				seen.Store(cs.PeerCertificates[0].SerialNumber.Int64())
			}
			return nil
		}}
	}
	topTLS := fmt.Sprintf("tls: {cert: %s, key: %s}", gwCert, gwKey)

	t.Run("BackendModes", func(t *testing.T) {
		for _, mode := range []string{"disabled", "preferred", "required", "verify_ca", "verify_identity"} {
			t.Run(mode, func(t *testing.T) {
				cluster := "    backend_tls: {mode: " + mode + "}"
				if strings.HasPrefix(mode, "verify") {
					cluster = fmt.Sprintf("    backend_tls: {mode: %s, ca: %s}", mode, pki.caFile)
				}
				gw, _ := tlsGateway(t, srv.Addr(), "", cluster)
				cipher := sslCipher(t, tlsDB(t, gw.Addr().String(), nil))
				if (cipher != "") != (mode != "disabled") {
					t.Fatalf("mode %s: backend connection Ssl_cipher %q", mode, cipher)
				}
			})
		}
	})

	t.Run("ClientCertToBackend", func(t *testing.T) {
		cert, key := pki.issue(t, "gateway-client", 30, false, false)
		cluster := fmt.Sprintf("    backend_tls: {mode: verify_identity, ca: %s, cert: %s, key: %s}", pki.caFile, cert, key)
		gw, _ := tlsGateway(t, srv.Addr(), "", cluster)
		if c := sslCipher(t, tlsDB(t, gw.Addr().String(), nil)); c == "" {
			t.Fatalf("the backend connection's Ssl_cipher is empty")
		}
	})

	t.Run("VerifyIdentityWrongHost", func(t *testing.T) {
		addr := relay(t, srv.Addr())
		gw, _ := tlsGateway(t, addr, "", fmt.Sprintf("    backend_tls: {mode: verify_identity, ca: %s}", pki.caFile))
		_, err := tlsDB(t, gw.Addr().String(), nil).Exec("SELECT 1")
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1429 {
			t.Fatalf("error %v, want 1429", err)
		}
		if !strings.Contains(me.Message, "certificate is valid for 127.0.0.1, not 127.0.0.2") {
			t.Fatalf("error does not say why: %s", me.Message)
		}
		t.Logf("client sees: %s", me.Message)
	})

	t.Run("ClientOverTLS", func(t *testing.T) {
		gw, _ := tlsGateway(t, srv.Addr(), topTLS, "")
		var seen atomic.Int64
		db := tlsDB(t, gw.Addr().String(), clientTLS(&seen))
		var one int
		if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		if seen.Load() != 20 {
			t.Fatalf("go-sql-driver saw certificate serial %d, want the gateway's 20", seen.Load())
		}
		// Sessions over TLS keep working across commands, idle gaps
		// (the 50 ms last-result hold peeks through TLS) and writes.
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, q := range []string{"CREATE DATABASE IF NOT EXISTS tlsdb", "CREATE TABLE IF NOT EXISTS tlsdb.t (id INT AUTO_INCREMENT PRIMARY KEY)", "INSERT INTO tlsdb.t VALUES ()"} {
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		var n int
		if err := conn.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM tlsdb.t").Scan(&n); err != nil || n < 1 {
			t.Fatalf("count %d, %v", n, err)
		}
		// Plain clients are still served.
		if err := tlsDB(t, gw.Addr().String(), nil).QueryRow("SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		// Session status that describes the connection describes the
		// client's (drivers' TLS tests read it), not the gateway's to
		// the backend.
		status := func(db *sql.DB, q string) string {
			t.Helper()
			var name, v string
			if err := db.QueryRow(q).Scan(&name, &v); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return v
		}
		if v := status(db, "SHOW STATUS LIKE 'Ssl_cipher'"); v == "" {
			t.Errorf("Ssl_cipher of a TLS client is empty")
		}
		if v := status(db, "SHOW SESSION STATUS LIKE 'Ssl_version'"); !strings.HasPrefix(v, "TLSv1.") {
			t.Errorf("Ssl_version of a TLS client: %q", v)
		}
		if v := status(tlsDB(t, gw.Addr().String(), nil), "SHOW STATUS LIKE 'Ssl_cipher'"); v != "" {
			t.Errorf("Ssl_cipher of a plain client: %q", v)
		}
	})

	t.Run("RequireSecureTransport", func(t *testing.T) {
		gw, _ := tlsGateway(t, srv.Addr(), fmt.Sprintf("tls: {cert: %s, key: %s, require_secure_transport: true}", gwCert, gwKey), "")
		err := tlsDB(t, gw.Addr().String(), nil).Ping()
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 3159 || string(me.SQLState[:]) != "HY000" ||
			me.Message != "Connections using insecure transport are prohibited while --require_secure_transport=ON." {
			t.Fatalf("plain client: %v, want error 3159", err)
		}
		if err := tlsDB(t, gw.Addr().String(), clientTLS(nil)).Ping(); err != nil {
			t.Fatalf("TLS client: %v", err)
		}
	})

	t.Run("ClientCertificates", func(t *testing.T) {
		gw, _ := tlsGateway(t, srv.Addr(), fmt.Sprintf("tls: {cert: %s, key: %s, ca: %s}", gwCert, gwKey, pki.caFile), "")
		good, goodKey := pki.issue(t, "app-client", 40, false, false)
		bad, badKey := pki.issue(t, "stranger", 41, false, true)
		withCert := func(cert, key string) *tls.Config {
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			c := clientTLS(nil)
			// Sent whatever CAs the server names (Certificates would
			// leave out one the server's CA did not sign).
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
			return c
		}
		if _, err := leafSerial(t, gw.Addr().String(), withCert(good, goodKey)); err != nil {
			t.Fatalf("certificate signed by the CA: %v", err)
		}
		if _, err := leafSerial(t, gw.Addr().String(), clientTLS(nil)); err != nil {
			t.Fatalf("no client certificate: %v", err)
		}
		if _, err := leafSerial(t, gw.Addr().String(), withCert(bad, badKey)); err == nil {
			t.Fatal("a self-signed client certificate was accepted")
		}
	})

	t.Run("ReloadCertificate", func(t *testing.T) {
		gw, cfg := tlsGateway(t, srv.Addr(), topTLS, "")
		addr := gw.Addr().String()
		if s, err := leafSerial(t, addr, clientTLS(nil)); err != nil || s != 20 {
			t.Fatalf("before reload: serial %d, %v", s, err)
		}
		held := tlsDB(t, addr, clientTLS(nil))
		held.SetMaxIdleConns(1)
		if err := held.Ping(); err != nil {
			t.Fatal(err)
		}

		newCert, newKey := pki.issue(t, "gateway-renewed", 21, true, false)
		next := *cfg
		next.TLS.Cert, next.TLS.Key = newCert, newKey
		if err := gw.Reload(&next); err != nil {
			t.Fatal(err)
		}
		if s, err := leafSerial(t, addr, clientTLS(nil)); err != nil || s != 21 {
			t.Fatalf("after reload: serial %d, %v", s, err)
		}
		if err := held.Ping(); err != nil {
			t.Fatalf("connection opened before the reload: %v", err)
		}

		// An unreadable certificate refuses the reload as a whole: the
		// running certificate stays, and so do the other settings.
		broken := next
		broken.TLS.Cert = filepath.Join(pki.dir, "missing.pem")
		broken.Users = nil
		err := gw.Reload(&broken)
		if err == nil || !strings.Contains(err.Error(), "tls.cert") {
			t.Fatalf("reload with a missing cert: %v", err)
		}
		if s, err := leafSerial(t, addr, clientTLS(nil)); err != nil || s != 21 {
			t.Fatalf("after the refused reload: serial %d, %v", s, err)
		}
	})
}
