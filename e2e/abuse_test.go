package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
)

// TestAbusiveClientsNextToNormalLoad opens 1,000 connections that send
// garbage or stall mid-handshake while 8 sessions run statements: the
// statements must all succeed, the stalled connections must be cut after
// handshake_timeout, and the gateway's memory is logged before and during.
// The gateway runs as its own process.
func TestAbusiveClientsNextToNormalLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	abusers := raiseFileLimit(1000)
	const handshakeTimeout = 2 * time.Second
	pid, addr := startGatewayProcess(t, fmt.Sprintf("handshake_timeout: %s\nmax_connections_per_address: %d\nwrite_timeout: 5s", handshakeTimeout, abusers+100))
	db := open(t, dsnFor(addr, appUser, appPass))
	db.SetMaxOpenConns(8)
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if err := db.Ping(); err == nil {
			break
		} else if time.Since(start) > 30*time.Second {
			t.Fatalf("gateway did not start: %v", err)
		}
	}
	mustExec(t, db, "DROP TABLE IF EXISTS abuse_load", "CREATE TABLE abuse_load (id INT AUTO_INCREMENT PRIMARY KEY, s INT, v VARCHAR(20))")
	before := rssKiB(t, pid)

	// The normal load: 8 sessions, each a statement after the other.
	var sessions []*sql.DB
	for range 8 {
		sdb := open(t, dsnFor(addr, appUser, appPass))
		sdb.SetMaxOpenConns(1)
		sessions = append(sessions, sdb)
	}
	var n atomic.Int64
	l := startLoad(sessions, func(sdb *sql.DB) error {
		i := n.Add(1)
		if i%2 == 0 {
			_, err := sdb.Exec("INSERT INTO abuse_load (s, v) VALUES (?, 'x')", i%8)
			return err
		}
		var c int
		return sdb.QueryRow("SELECT COUNT(*) FROM abuse_load WHERE s = ?", i%8).Scan(&c)
	})

	// The abusers: a third send garbage, a third connect and say nothing,
	// a third send half a handshake response; all then keep the socket.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	garbage := make([]byte, 200)
	for i := range garbage {
		garbage[i] = byte(rand.IntN(256))
	}
	half := wire.AppendHandshakeResponse(nil, &wire.HandshakeResponse{Caps: wire.BackendCaps, MaxPacket: 1 << 24, Collation: 45, User: appUser, AuthPlugin: wire.NativePassword})
	half = append([]byte{byte(len(half)), byte(len(half) >> 8), 0, 1}, half...)[:len(half)/2]
	opened := time.Now()
	for i := range abusers {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("abuser %d: %v", i, err)
		}
		conns = append(conns, c)
		switch i % 3 {
		case 0:
			_, _ = c.Write(garbage[:1+i%len(garbage)])
		case 2:
			_, _ = c.Write(half)
		}
	}
	during := rssKiB(t, pid)
	t.Logf("gateway RSS: %d MiB before, %d MiB with %d abusive connections open (%.1f KiB each), opened in %s",
		before>>10, during>>10, len(conns), float64(during-before)/float64(len(conns)), time.Since(opened).Round(time.Millisecond))

	// Every abusive connection ends by handshake_timeout (plus slack).
	var cut atomic.Int64
	var cwg sync.WaitGroup
	for _, c := range conns {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			_ = c.SetReadDeadline(opened.Add(handshakeTimeout + 5*time.Second))
			_, err := io.Copy(io.Discard, c)
			var ne net.Error
			if err == nil || !(errors.As(err, &ne) && ne.Timeout()) {
				cut.Add(1)
			}
		}()
	}
	cwg.Wait()
	cutAfter := time.Since(opened)
	time.Sleep(time.Second) // the normal load keeps going a little
	l.stop()
	after := rssKiB(t, pid)
	t.Logf("gateway RSS: %d MiB after the abusers were cut; normal load: %d statements, %d failed", after>>10, l.ok.Load(), l.failed.Load())
	if n := cut.Load(); n != int64(len(conns)) {
		t.Errorf("%d of %d abusive connections still open %s after they started", int64(len(conns))-n, len(conns), cutAfter.Round(time.Millisecond))
	}
	if l.failed.Load() != 0 {
		t.Errorf("%d statements of the normal load failed; first: %v", l.failed.Load(), l.firstErr.Load())
	}
	if l.ok.Load() == 0 {
		t.Error("the normal load ran no statement")
	}
}

// TestMaxConnectionsPerAddress: past max_connections_per_address, a
// client gets error 1040 instead of the greeting; a closed connection
// frees its place.
func TestMaxConnectionsPerAddress(t *testing.T) {
	srv := startTestGateway(t, "peraddr", opsYAML("max_connections_per_address: 2", "", "size: 2, min_idle: 0"))
	addr := srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var conns []*wire.BackendConn
	for range 2 {
		bc, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass})
		if err != nil {
			t.Fatal(err)
		}
		defer bc.Close()
		conns = append(conns, bc)
	}
	_, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass})
	var se *wire.SQLError
	if !errors.As(err, &se) || se.Code != 1040 || !strings.Contains(se.Message, "max_connections_per_address") {
		t.Fatalf("third connection: %v", err)
	}
	conns[0].Close()
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		bc, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass})
		if err == nil {
			bc.Close()
			break
		}
		if time.Since(start) > 3*time.Second {
			t.Fatalf("after a close: %v", err)
		}
	}
}

// TestFailedLoginsAreSlowedDown: past auth_failure_limit failures from an
// address (or for a user name) within a minute, the answers to further
// failures come auth_failure_delay apart, across connections.
func TestFailedLoginsAreSlowedDown(t *testing.T) {
	srv := startTestGateway(t, "authdelay", opsYAML("auth_failure_limit: 3\nauth_failure_delay: 1s", "", "size: 2, min_idle: 0"))
	addr := srv.Addr().String()
	attempt := func() time.Duration {
		start := time.Now()
		c := rawConn(t, addr)
		if _, err := readPacketErr(c); err != nil {
			t.Fatal(err)
		}
		resp := wire.AppendHandshakeResponse(nil, &wire.HandshakeResponse{Caps: wire.BackendCaps, MaxPacket: 1 << 24,
			Collation: 45, User: appUser, AuthData: make([]byte, 20), AuthPlugin: wire.NativePassword})
		if _, err := c.Write(append([]byte{byte(len(resp)), byte(len(resp) >> 8), 0, 1}, resp...)); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, c) // the error, then the close
		c.Close()
		return time.Since(start)
	}
	for i := range 3 {
		if d := attempt(); d > 500*time.Millisecond {
			t.Fatalf("failure %d took %s", i+1, d)
		}
	}
	if d := attempt(); d < 900*time.Millisecond {
		t.Fatalf("the fourth failure took only %s", d)
	}
	// Parallel connections do not multiply the guesses: their answers
	// come a second apart between them (the slowest of three waits its
	// turn behind the other two).
	times := make(chan time.Duration, 3)
	for range 3 {
		go func() { times <- attempt() }()
	}
	var slowest time.Duration
	for range 3 {
		slowest = max(slowest, <-times)
	}
	if slowest < 2500*time.Millisecond {
		t.Fatalf("three parallel failures past the limit: the slowest took only %s, want about 3s", slowest)
	}
	// The right password still gets in at once.
	db := open(t, dsnFor(addr, appUser, appPass))
	start := time.Now()
	// (Well below the one second a slowed-down login waits, with room
	// for a loaded machine.)
	if err := db.Ping(); err != nil || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("good login: %v after %s", err, time.Since(start))
	}
}

// TestWriteTimeoutCutsStalledReader: a client that asks for a large
// result and stops reading is cut after write_timeout, and its backend
// connection goes back to the pool.
func TestWriteTimeoutCutsStalledReader(t *testing.T) {
	forIOLoops(t, "", testWriteTimeoutCutsStalledReader)
}

func testWriteTimeoutCutsStalledReader(t *testing.T, loops int) {
	srv := startTestGateway(t, "wtimeout", opsYAML(fmt.Sprintf("write_timeout: 1s\nio_loops: %d", loops), "", "size: 2, min_idle: 0"))
	addr := srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass, ReadBuffer: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	// NetConn is the wire socket; its NetConn, the TCP connection.
	if tc, ok := bc.NetConn().(interface{ NetConn() net.Conn }).NetConn().(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	// About 200 MB of result: far more than socket buffers hold. The
	// clock starts before the statement is sent, so surely before the
	// relay's first stalled write.
	start := time.Now()
	if err := bc.WriteCommand(append([]byte{wire.ComQuery}, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 200) SELECT REPEAT('x', 1000000) FROM r"...)); err != nil {
		t.Fatal(err)
	}
	inUse := func() int {
		n := 0
		for _, p := range srv.PoolStats() {
			n += p.InUse
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && inUse() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	for time.Now().Before(deadline) && inUse() > 0 {
		time.Sleep(50 * time.Millisecond)
	}
	if n := inUse(); n > 0 {
		t.Fatalf("%d backend connections still leased 10s after the client stopped reading", n)
	}
	t.Logf("backend connection released %s after the statement was sent", time.Since(start).Round(time.Millisecond))
	if time.Since(start) < 900*time.Millisecond {
		t.Errorf("released after %s: before write_timeout, so the result was not stalled", time.Since(start))
	}
	// The client was cut: its session is gone.
	for end := time.Now().Add(3 * time.Second); len(srv.Sessions()) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the stalled client's session is still there: %+v", srv.Sessions())
		}
	}
}

// readPacketErr reads one packet's payload from a raw connection.
func readPacketErr(c net.Conn) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, err
	}
	p := make([]byte, int(h[0])|int(h[1])<<8|int(h[2])<<16)
	_, err := io.ReadFull(c, p)
	return p, err
}
