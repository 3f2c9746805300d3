package wire

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"
)

// testAuthenticator has a 1024-bit key: enough for OAEP and quick to make
// under -race.
func testAuthenticator(t *testing.T) *Authenticator {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(key, 2)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// sha2Outcome is one login seen by sha2Server.
type sha2Outcome struct {
	user string
	ok   bool
	err  error
}

// sha2Server plays a MySQL 8 server for logins logins in a row: it greets
// with caching_sha2_password, lets a check the answer against password
// and answers OK or error 1045.
func sha2Server(t *testing.T, a *Authenticator, conf *tls.Config, password string, logins int) (addr string, done <-chan sha2Outcome) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan sha2Outcome, logins)
	go func() {
		for range logins {
			nc, err := ln.Accept()
			if err != nil {
				ch <- sha2Outcome{err: err}
				return
			}
			_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
			c := NewConn(nc, 4096, 4096)
			salt, _ := NewSalt()
			g := &Greeting{ServerVersion: "8.0.36-test", ConnectionID: 1, Salt: salt, Caps: ServerCaps, Collation: DefaultCollation, AuthPlugin: CachingSha2Password}
			resp, plugin, answer, err := ServerHandshakeTLS(c, g, conf)
			out := sha2Outcome{err: err}
			if err == nil {
				out.user = resp.User
				out.ok, out.err = a.Check(c, plugin, resp.User, salt, answer, password, resp.User == "u")
			}
			if out.err == nil {
				reply := AppendOK(nil, OK{})
				if !out.ok {
					reply = AppendERR(nil, NewError(1045, "28000", "Access denied for user '%s'", out.user))
				}
				out.err = c.WritePacket(reply)
				if out.err == nil {
					out.err = c.Flush()
				}
			}
			nc.Close()
			ch <- out
		}
	}()
	return ln.Addr().String(), ch
}

func dialAs(t *testing.T, addr string, o DialOptions) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bc, err := Dial(ctx, addr, o)
	if err == nil {
		bc.Close()
	}
	return err
}

func TestCachingSha2FullAuthRSA(t *testing.T) {
	a := testAuthenticator(t)
	addr, done := sha2Server(t, a, nil, "s3cret", 4)
	// First login: not cached, full authentication with the key asked for.
	if err := dialAs(t, addr, DialOptions{User: "u", Password: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	if out := <-done; !out.ok || out.err != nil {
		t.Fatalf("first login: %+v", out)
	}
	if hit, _ := a.cached("u", "s3cret"); !hit {
		t.Fatal("full authentication did not fill the cache")
	}
	// Second login: the fast path.
	if err := dialAs(t, addr, DialOptions{User: "u", Password: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	if out := <-done; !out.ok || out.err != nil {
		t.Fatalf("fast path: %+v", out)
	}
	// A cached user with a wrong password fails at once.
	var se *SQLError
	if err := dialAs(t, addr, DialOptions{User: "u", Password: "wrong"}); !errors.As(err, &se) || se.Code != 1045 {
		t.Fatalf("wrong password: %v", err)
	}
	<-done
	// An unknown user goes through full authentication and fails.
	if err := dialAs(t, addr, DialOptions{User: "nobody", Password: "s3cret"}); !errors.As(err, &se) || se.Code != 1045 {
		t.Fatalf("unknown user: %v", err)
	}
	if out := <-done; out.ok || out.err != nil {
		t.Fatalf("unknown user: %+v", out)
	}
}

func TestCachingSha2FullAuthTLS(t *testing.T) {
	a := testAuthenticator(t)
	cert := selfSigned(t)
	conf := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	addr, done := sha2Server(t, a, conf, "s3cret", 2)
	o := DialOptions{User: "u", Password: "s3cret", TLS: &tls.Config{InsecureSkipVerify: true}}
	if err := dialAs(t, addr, o); err != nil {
		t.Fatal(err)
	}
	if out := <-done; !out.ok || out.err != nil {
		t.Fatalf("TLS full authentication: %+v", out)
	}
	o.Password = "nope"
	a.Forget("u")
	var se *SQLError
	if err := dialAs(t, addr, o); !errors.As(err, &se) || se.Code != 1045 {
		t.Fatalf("wrong password over TLS: %v", err)
	}
}

// TestCachingSha2ServerStateMachine drives the server side by hand: the
// packets MySQL's state machine sends, and answers it must refuse.
func TestCachingSha2ServerStateMachine(t *testing.T) {
	a := testAuthenticator(t)
	salt, _ := NewSalt()
	run := func(answer []byte, client func(c *Conn) error) (bool, error) {
		t.Helper()
		sc, cc := net.Pipe()
		defer sc.Close()
		defer cc.Close()
		errc := make(chan error, 1)
		go func() { errc <- client(NewConn(cc, 4096, 4096)) }()
		ok, err := a.Check(NewConn(sc, 4096, 4096), CachingSha2Password, "u", salt, answer, "pw", true)
		sc.Close()
		if cerr := <-errc; cerr != nil {
			t.Fatal(cerr)
		}
		return ok, err
	}
	expect := func(c *Conn, want []byte) error {
		p, err := c.ReadPacket()
		if err != nil {
			return err
		}
		if !bytes.Equal(p, want) {
			return errors.New("unexpected packet " + string(p))
		}
		return nil
	}
	send := func(c *Conn, p []byte) error {
		if err := c.WritePacket(p); err != nil {
			return err
		}
		return c.Flush()
	}
	scr := ScrambleCachingSha2(salt, "pw")
	// Not cached; clear text over plain TCP is refused.
	ok, err := run(scr, func(c *Conn) error {
		if err := expect(c, []byte{1, 4}); err != nil {
			return err
		}
		return send(c, []byte("pw\x00"))
	})
	if ok || err != nil {
		t.Fatalf("clear text over plain TCP: %v %v", ok, err)
	}
	// The key asked for, then the encrypted password.
	ok, err = run(scr, func(c *Conn) error {
		if err := expect(c, []byte{1, 4}); err != nil {
			return err
		}
		if err := send(c, []byte{2}); err != nil {
			return err
		}
		if err := expect(c, append([]byte{1}, a.PublicKeyPEM()...)); err != nil {
			return err
		}
		enc, err := EncryptPassword("pw", salt, a.PublicKey())
		if err != nil {
			return err
		}
		return send(c, enc)
	})
	if !ok || err != nil {
		t.Fatalf("RSA full authentication: %v %v", ok, err)
	}
	// Now cached: fast_auth_success.
	ok, err = run(scr, func(c *Conn) error { return expect(c, []byte{1, 3}) })
	if !ok || err != nil {
		t.Fatalf("fast path: %v %v", ok, err)
	}
	// Cached, but a wrong scramble: full authentication, as for an
	// unknown or uncached user (a quick refusal would tell the user has
	// logged in since start).
	ok, err = run(ScrambleCachingSha2(salt, "wrong"), func(c *Conn) error {
		if err := expect(c, []byte{1, 4}); err != nil {
			return err
		}
		return send(c, []byte("not a cipher text"))
	})
	if ok {
		t.Fatalf("a wrong scramble of a cached user: %v %v", ok, err)
	}
	// A password change in the config is a cache miss.
	if hit, _ := a.cached("u", "other"); hit {
		t.Fatal("cache hit for another password")
	}
	// The cache is bounded.
	a.remember("x", sha2Digest(nil))
	a.remember("y", sha2Digest(nil))
	if len(a.cache) > 2 {
		t.Fatalf("cache holds %d users, bound 2", len(a.cache))
	}
}

func TestSignEd25519(t *testing.T) {
	msg := make([]byte, 32)
	for _, pw := range []string{"", "pw", "a much longer password than thirty-two bytes, for sure"} {
		_, _ = rand.Read(msg)
		sig := SignEd25519(msg, pw)
		if len(sig) != ed25519.SignatureSize || !ed25519.Verify(Ed25519PublicKey(pw), msg, sig) {
			t.Fatalf("signature for %q does not verify", pw)
		}
		if ed25519.Verify(Ed25519PublicKey(pw+"x"), msg, sig) {
			t.Fatalf("signature for %q verifies with another password's key", pw)
		}
	}
}

// TestDialEd25519 plays MariaDB: greeting with mysql_native_password, then
// an auth switch to client_ed25519 with a scramble ending in 0.
func TestDialEd25519(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			nc, err := ln.Accept()
			if err != nil {
				return err
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
			c := NewConn(nc, 4096, 4096)
			salt, _ := NewSalt()
			g := &Greeting{ServerVersion: "10.11.0-test", ConnectionID: 1, Salt: salt, Caps: ServerCaps, Collation: DefaultCollation, AuthPlugin: NativePassword}
			if _, _, _, err := ServerHandshake(c, g); err != nil {
				return err
			}
			scramble := make([]byte, 32)
			_, _ = rand.Read(scramble)
			scramble[31] = 0
			sw := append([]byte{eofHeader}, ClientEd25519...)
			sw = append(append(sw, 0), scramble...)
			if err := c.WritePacket(sw); err != nil {
				return err
			}
			if err := c.Flush(); err != nil {
				return err
			}
			sig, err := c.ReadPacket()
			if err != nil {
				return err
			}
			reply := AppendOK(nil, OK{})
			if !ed25519.Verify(Ed25519PublicKey("edpw"), scramble, sig) {
				reply = AppendERR(nil, NewError(1045, "28000", "Access denied"))
			}
			if err := c.WritePacket(reply); err != nil {
				return err
			}
			return c.Flush()
		}()
	}()
	if err := dialAs(t, ln.Addr().String(), DialOptions{User: "e", Password: "edpw"}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestEncryptPasswordRoundTrip(t *testing.T) {
	a := testAuthenticator(t)
	salt, _ := NewSalt()
	pub, err := ParsePublicKeyPEM(a.PublicKeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	enc, err := EncryptPassword("a password longer than the twenty bytes of salt", append(salt, 0), pub)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecryptPassword(a.key, salt, enc)
	if err != nil || string(got) != "a password longer than the twenty bytes of salt" {
		t.Fatalf("round trip: %q %v", got, err)
	}
}
