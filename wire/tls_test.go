package wire

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSigned returns a certificate for 127.0.0.1 and localhost.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "wire test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// scriptedServer accepts one connection, runs ServerHandshakeTLS with conf
// and answers OK. It returns the handshake's outcome and whether the
// connection ended up on TLS.
type serverOutcome struct {
	resp  *HandshakeResponse
	tls   bool
	err   error
	after []byte // the first command after the login
}

func scriptedServer(t *testing.T, conf *tls.Config, caps uint32) (addr string, done <-chan serverOutcome) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan serverOutcome, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			ch <- serverOutcome{err: err}
			return
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		c := NewConn(nc, 4096, 4096)
		salt, _ := NewSalt()
		g := &Greeting{ServerVersion: "10.11.0-test", ConnectionID: 7, Salt: salt, Caps: caps, Collation: DefaultCollation, AuthPlugin: NativePassword}
		resp, _, _, err := ServerHandshakeTLS(c, g, conf)
		out := serverOutcome{resp: resp, tls: c.TLS() != nil, err: err}
		if err == nil {
			err = c.WritePacket(AppendOK(nil, OK{}))
			if err == nil {
				err = c.Flush()
			}
			c.ResetSeq()
			p, rerr := c.ReadPacket()
			out.after = append([]byte(nil), p...)
			out.err = errors.Join(err, rerr)
		}
		ch <- out
	}()
	return ln.Addr().String(), ch
}

func dialTLS(t *testing.T, addr string, o DialOptions) (*BackendConn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o.User = "u"
	return Dial(ctx, addr, o)
}

func TestTLSUpgradeBothSides(t *testing.T) {
	cert := selfSigned(t)
	addr, done := scriptedServer(t, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, ServerCaps)
	roots := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	roots.AddCert(leaf)
	// verify_identity-style: the ServerName comes from addr (127.0.0.1).
	bc, err := dialTLS(t, addr, DialOptions{TLS: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if bc.TLS() == nil || bc.Caps&CapSSL == 0 {
		t.Fatalf("dial did not switch to TLS (caps %#x)", bc.Caps)
	}
	if err := bc.WriteCommand([]byte{ComPing}); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	if !out.tls || out.resp.User != "u" || out.resp.Caps&CapSSL == 0 {
		t.Fatalf("server side: tls %v, resp %+v", out.tls, out.resp)
	}
	if len(out.after) != 1 || out.after[0] != ComPing {
		t.Fatalf("command after login over TLS: %x", out.after)
	}
}

// coalescing holds the first write and sends it together with the second,
// as a client does that writes its ClientHello right behind the SSL
// request: the server finds TLS bytes in its read buffer.
type coalescing struct {
	net.Conn
	writes int
	held   []byte
}

func (c *coalescing) Write(b []byte) (int, error) {
	c.writes++
	switch c.writes {
	case 1: // the SSL request
		c.held = append([]byte(nil), b...)
		return len(b), nil
	case 2:
		_, err := c.Conn.Write(append(c.held, b...))
		return len(b), err
	}
	return c.Conn.Write(b)
}

// TestTLSClientHelloBehindSSLRequest pins down that bytes buffered after
// the SSL request are handed to TLS, not dropped.
func TestTLSClientHelloBehindSSLRequest(t *testing.T) {
	cert := selfSigned(t)
	addr, done := scriptedServer(t, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, ServerCaps)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	cc := &coalescing{Conn: raw}
	c := NewConn(cc, 4096, 4096)
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGreeting(p)
	if err != nil || g.Caps&CapSSL == 0 {
		t.Fatalf("greeting %+v, %v: no CapSSL", g, err)
	}
	caps := uint32(CapProtocol41 | CapSecureConnection | CapPluginAuth)
	if err := c.WritePacket(AppendSSLRequest(nil, caps, 1<<24, DefaultCollation)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartTLSClient(&tls.Config{InsecureSkipVerify: true}); err != nil {
		t.Fatal(err)
	}
	resp := &HandshakeResponse{Caps: caps | CapSSL, MaxPacket: 1 << 24, Collation: DefaultCollation, User: "pipelined", AuthPlugin: NativePassword}
	if err := c.WritePacket(AppendHandshakeResponse(nil, resp)); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if p, err := c.ReadPacket(); err != nil || !IsOK(p) {
		t.Fatalf("login answer %x, %v", p, err)
	}
	if err := c.WriteCommand([]byte{ComPing}); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out.err != nil || !out.tls || out.resp.User != "pipelined" {
		t.Fatalf("server: %+v", out)
	}
}

func TestTLSNotOffered(t *testing.T) {
	// ServerHandshake without a config refuses an SSL request.
	addr, done := scriptedServer(t, nil, ServerCaps|CapSSL)
	_, err := dialTLS(t, addr, DialOptions{TLS: &tls.Config{InsecureSkipVerify: true}})
	if err == nil {
		t.Fatal("dial succeeded against a server that refuses TLS")
	}
	if out := <-done; !errors.Is(out.err, ErrTLSRequested) {
		t.Fatalf("server error %v, want ErrTLSRequested", out.err)
	}

	// A server that does not advertise CapSSL: required fails...
	addr, _ = scriptedServer(t, nil, ServerCaps)
	if _, err := dialTLS(t, addr, DialOptions{TLS: &tls.Config{InsecureSkipVerify: true}}); !errors.Is(err, ErrNoServerTLS) {
		t.Fatalf("required against a plain server: %v, want ErrNoServerTLS", err)
	}
	// ... and preferred goes on in plain text.
	addr, done = scriptedServer(t, nil, ServerCaps)
	bc, err := dialTLS(t, addr, DialOptions{TLS: &tls.Config{InsecureSkipVerify: true}, TLSPreferred: true})
	if err != nil {
		t.Fatal(err)
	}
	if bc.TLS() != nil {
		t.Fatal("preferred switched to TLS against a server without it")
	}
	_ = bc.WriteCommand([]byte{ComPing})
	bc.Close()
	if out := <-done; out.err != nil || out.tls {
		t.Fatalf("server: %+v", out)
	}
}

func TestTLSWrongServerName(t *testing.T) {
	cert := selfSigned(t)
	addr, done := scriptedServer(t, &tls.Config{Certificates: []tls.Certificate{cert}}, ServerCaps)
	roots := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	roots.AddCert(leaf)
	_, err := dialTLS(t, addr, DialOptions{TLS: &tls.Config{RootCAs: roots, ServerName: "db.example.com"}})
	var hostErr x509.HostnameError
	if !errors.As(err, &hostErr) {
		t.Fatalf("dial error %v, want a host name error", err)
	}
	if out := <-done; !errors.Is(out.err, ErrTLSHandshake) {
		t.Fatalf("server error %v, want ErrTLSHandshake", out.err)
	}
}

func TestWaitReadableOverTLS(t *testing.T) {
	cert := selfSigned(t)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	srv, cli := NewConn(a, 4096, 4096), NewConn(b, 4096, 4096)
	errc := make(chan error, 1)
	go func() { _, err := cli.StartTLSClient(&tls.Config{InsecureSkipVerify: true}); errc <- err }()
	if _, err := srv.StartTLSServer(&tls.Config{Certificates: []tls.Certificate{cert}}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if ok, err := srv.WaitReadable(20 * time.Millisecond); ok || err != nil {
		t.Fatalf("nothing sent: WaitReadable = %v, %v", ok, err)
	}
	go func() { errc <- cli.WriteCommand([]byte{ComPing}) }()
	if ok, err := srv.WaitReadable(2 * time.Second); !ok || err != nil {
		t.Fatalf("after a command: WaitReadable = %v, %v", ok, err)
	}
	if p, err := srv.ReadPacket(); err != nil || len(p) != 1 || p[0] != ComPing {
		t.Fatalf("read after the timeout: %x, %v", p, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestAppendSSLRequest(t *testing.T) {
	p := AppendSSLRequest(nil, CapProtocol41, 1<<24, 45)
	if !IsSSLRequest(p) || binary.LittleEndian.Uint32(p[4:]) != 1<<24 || p[8] != 45 {
		t.Fatalf("SSL request %x", p)
	}
}
