package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

// fakeOwner is an owner process on a loopback port that answers what a
// Forwarder sends: logins, COM_INIT_DB and friends, SHOW OWNER TABLES,
// NEXT VALUES (from its own counter) and STREAM (a result that never
// ends). As a standby it refuses logins and statements with 1290.
type fakeOwner struct {
	ln   net.Listener
	addr string
	base int64 // values are base+1, base+2, ...

	standby atomic.Bool
	// received, when set, is called with each statement received (not
	// SHOW OWNER TABLES) before it is answered: a test moves the
	// leadership from there, not after a time that a slow start could
	// outlast.
	received atomic.Pointer[func()]
	// hangUp closes the connection after reading a statement, without
	// answering: the statement may have run. hang never answers (a
	// paused owner).
	hangUp, hang atomic.Bool

	mu    sync.Mutex
	next  int64
	got   []string // statements received
	open  int      // logged-in connections still open
	conns []net.Conn
	wg    sync.WaitGroup
}

const ownerCaps = wire.ServerCaps &^ (wire.CapDeprecateEOF | wire.CapMultiStatements | wire.CapLocalFiles | wire.CapSessionTrack)

func startFakeOwner(t *testing.T, base int64) *fakeOwner {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &fakeOwner{ln: ln, addr: ln.Addr().String(), base: base}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			o.mu.Lock()
			o.conns = append(o.conns, nc)
			o.mu.Unlock()
			o.wg.Add(1)
			go func() { defer o.wg.Done(); o.serve(nc) }()
		}
	}()
	t.Cleanup(o.stop)
	return o
}

// stop kills the owner: listener and connections closed.
func (o *fakeOwner) stop() {
	_ = o.ln.Close()
	o.mu.Lock()
	for _, c := range o.conns {
		_ = c.Close()
	}
	o.mu.Unlock()
	o.wg.Wait()
}

func (o *fakeOwner) statements() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.got...)
}

func (o *fakeOwner) openConns() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.open
}

func standbyErr() *wire.SQLError {
	return wire.NewError(wire.ErOptionPreventsStatement, "HY000", "The owner of cluster main is running as a standby so it cannot execute this statement")
}

func (o *fakeOwner) serve(nc net.Conn) {
	defer nc.Close()
	c := wire.NewConn(nc, 4096, 4096)
	salt, _ := wire.NewSalt()
	g := &wire.Greeting{ServerVersion: "10.11.0-fake-owner", ConnectionID: 1, Salt: salt, Caps: ownerCaps,
		Collation: wire.DefaultCollation, Status: wire.StatusAutocommit, AuthPlugin: wire.NativePassword}
	resp, _, _, err := wire.ServerHandshake(c, g)
	if err != nil {
		return
	}
	caps := resp.Caps & ownerCaps
	writeErr := func(e *wire.SQLError) { _ = c.WritePacket(wire.AppendERR(nil, e)); _ = c.Flush() }
	if o.standby.Load() {
		writeErr(standbyErr())
		return
	}
	_ = c.WritePacket(wire.AppendOK(nil, wire.OK{Status: wire.StatusAutocommit}))
	_ = c.Flush()
	o.mu.Lock()
	o.open++
	o.mu.Unlock()
	defer func() { o.mu.Lock(); o.open--; o.mu.Unlock() }()
	rw := wire.ResultWriter{Conn: c, Caps: caps, Status: wire.StatusAutocommit}
	col := wire.Column{Name: "nextval", Charset: wire.BinaryCollation, Length: 20, Type: wire.TypeLongLong, Flags: wire.FlagNotNull | wire.FlagBinary}
	for {
		c.ResetSeq()
		p, err := c.ReadPacket()
		if err != nil || len(p) == 0 || p[0] == wire.ComQuit {
			return
		}
		if p[0] != wire.ComQuery {
			_ = c.WritePacket(wire.AppendOK(nil, wire.OK{Status: wire.StatusAutocommit}))
			_ = c.Flush()
			continue
		}
		q := string(p[1:])
		if q != "SHOW OWNER TABLES" {
			o.mu.Lock()
			o.got = append(o.got, q)
			o.mu.Unlock()
			if f := o.received.Load(); f != nil {
				(*f)()
			}
		}
		switch {
		case o.hangUp.Load():
			return
		case o.hang.Load():
			_, _ = io.Copy(io.Discard, nc)
			return
		case o.standby.Load():
			writeErr(standbyErr())
			continue
		case q == "SHOW OWNER TABLES":
			_ = rw.Columns([]wire.Column{{Name: "db"}, {Name: "table"}, {Name: "kind"}})
			_ = rw.End(0)
		case strings.HasPrefix(q, "STREAM"):
			_ = rw.Columns([]wire.Column{col})
			_ = c.Flush()
			_, _ = io.Copy(io.Discard, nc) // never ends, until the client leaves
			return
		default:
			o.mu.Lock()
			o.next++
			v := o.base + o.next
			o.mu.Unlock()
			_ = rw.Columns([]wire.Column{col})
			_ = rw.Row([][]byte{fmt.Append(nil, v)})
			_ = rw.End(0)
		}
		_ = c.Flush()
	}
}

// onFirstStatement makes f run once, when the owner next receives a
// statement.
func (o *fakeOwner) onFirstStatement(f func()) {
	var once sync.Once
	g := func() { once.Do(f) }
	o.received.Store(&g)
}

// fakeLeader is a Leader the test moves by hand.
type fakeLeader struct {
	mu      sync.Mutex
	addr    string
	changed chan struct{}
}

func newFakeLeader(addr string) *fakeLeader {
	return &fakeLeader{addr: addr, changed: make(chan struct{})}
}

func (l *fakeLeader) Leader() (string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr, l.changed
}

func (l *fakeLeader) set(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addr = addr
	close(l.changed)
	l.changed = make(chan struct{})
}

func newForwarder(t *testing.T, cfg Config) *Forwarder {
	t.Helper()
	cfg.Cluster, cfg.PoolSize, cfg.Refresh = "main", 4, time.Hour
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantOwnerError(t *testing.T, err error, addr, text string) {
	t.Helper()
	var oe *OwnerError
	if !errors.As(err, &oe) || oe.Addr != addr || !strings.Contains(err.Error(), text) {
		t.Fatalf("got %v, want an OwnerError at %q saying %q", err, addr, text)
	}
}

// Statements go to the leader; when it moves, to the new one, and the
// connections to the old one are closed.
func TestFollowLeader(t *testing.T) {
	a, b := startFakeOwner(t, 100), startFakeOwner(t, 200)
	lead := newFakeLeader(a.addr)
	f := newForwarder(t, Config{Leader: lead})
	if v, err := f.NextValues("db.seq", 1); err != nil || v != 101 {
		t.Fatalf("from a: %d, %v", v, err)
	}
	if a.openConns() == 0 {
		t.Fatal("a has no connection")
	}
	lead.set(b.addr)
	waitFor(t, "the move to b", func() bool { return f.Addr() == b.addr })
	if v, err := f.NextValues("db.seq", 1); err != nil || v != 201 {
		t.Fatalf("from b: %d, %v", v, err)
	}
	waitFor(t, "a's connections to close", func() bool { return a.openConns() == 0 })
}

// With no leader, a statement waits LeaderWait and fails saying so; one
// that appears meanwhile takes it.
func TestNoLeader(t *testing.T) {
	a := startFakeOwner(t, 100)
	lead := newFakeLeader("")
	f := newForwarder(t, Config{Leader: lead, LeaderWait: 300 * time.Millisecond})
	start := time.Now()
	_, err := f.NextValues("db.seq", 1)
	wantOwnerError(t, err, "", "no owner of cluster main leads")
	if d := time.Since(start); d < 300*time.Millisecond || d > 4*time.Second {
		t.Fatalf("failed after %v, want the 300ms LeaderWait", d)
	}
	// A longer wait for the second half: the timer and the leader's
	// watcher may run late on a loaded machine.
	f = newForwarder(t, Config{Leader: lead, LeaderWait: 10 * time.Second})
	time.AfterFunc(100*time.Millisecond, func() { lead.set(a.addr) })
	if v, err := f.NextValues("db.seq", 1); err != nil || v != 101 {
		t.Fatalf("a leader elected during the wait: %d, %v", v, err)
	}
}

// A standby's refusal (at login or per statement) and a dead leader's
// refused connection ran nothing: the statement goes to the next leader.
func TestRefusedGoesToNextLeader(t *testing.T) {
	a, b := startFakeOwner(t, 100), startFakeOwner(t, 200)
	lead := newFakeLeader(a.addr)
	f := newForwarder(t, Config{Leader: lead})
	if v, err := f.NextValues("db.seq", 1); err != nil || v != 101 {
		t.Fatalf("from a: %d, %v", v, err)
	}
	// a stands by on its open connection: 1290 per statement.
	a.standby.Store(true)
	time.AfterFunc(150*time.Millisecond, func() { lead.set(b.addr) })
	if v, err := f.NextValues("db.seq", 1); err != nil || v != 201 {
		t.Fatalf("after a's refusal: %d, %v; want b's first value", v, err)
	}
	// b refuses logins as a standby, then a leads again.
	b.stop()
	c := startFakeOwner(t, 300)
	c.standby.Store(true)
	lead.set(c.addr)
	a.standby.Store(false)
	time.AfterFunc(150*time.Millisecond, func() { lead.set(a.addr) })
	if v, err := f.NextValues("db.seq", 1); err != nil || v != 102 {
		t.Fatalf("after c refused the login: %d, %v; want a's next value", v, err)
	}
	if got := c.statements(); len(got) != 0 {
		t.Fatalf("the standby ran %v", got)
	}
	// Nobody takes it within LeaderWait: the standby's refusal is the
	// answer.
	f2 := newForwarder(t, Config{Leader: newFakeLeader(c.addr), LeaderWait: 200 * time.Millisecond})
	_, err := f2.NextValues("db.seq", 1)
	var sqlErr *wire.SQLError
	if !errors.As(err, &sqlErr) || sqlErr.Code != wire.ErOptionPreventsStatement {
		t.Fatalf("only a standby: %v, want its 1290", err)
	}
}

// A statement the owner may have run (the connection broke after it was
// sent) is never sent again, to anyone.
func TestMayHaveRunIsNotRetried(t *testing.T) {
	a, b := startFakeOwner(t, 100), startFakeOwner(t, 200)
	lead := newFakeLeader(a.addr)
	f := newForwarder(t, Config{Leader: lead})
	a.hangUp.Store(true)
	a.onFirstStatement(func() { lead.set(b.addr) })
	_, err := f.NextValues("db.seq", 1)
	wantOwnerError(t, err, a.addr, "cannot reach the owner")
	time.Sleep(200 * time.Millisecond)
	if got := b.statements(); len(got) != 0 {
		t.Fatalf("b ran %v after a may have run it", got)
	}
	if got := a.statements(); len(got) != 1 {
		t.Fatalf("a got %v, want the statement once", got)
	}
}

// A stream relayed from the leader is cut when the leadership moves.
func TestStreamCutOnMove(t *testing.T) {
	a, b := startFakeOwner(t, 100), startFakeOwner(t, 200)
	lead := newFakeLeader(a.addr)
	f := newForwarder(t, Config{Leader: lead})
	cl, srv := net.Pipe()
	defer cl.Close()
	columns := make(chan struct{}) // closed when the client got its first bytes
	go func() {
		var first [1]byte
		if _, err := io.ReadFull(cl, first[:]); err == nil {
			close(columns)
		}
		_, _ = io.Copy(io.Discard, cl)
	}()
	client := wire.NewConn(srv, 4096, 4096)
	relay := &wire.Relay{ClientCaps: ownerCaps}
	type result struct {
		res wire.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := f.Stream(relay, client, "db", append([]byte{wire.ComQuery}, "STREAM * FROM msgs"...), make(chan struct{}))
		done <- result{res, err}
	}()
	select {
	case <-columns: // the stream started: its columns reach the client
	case <-time.After(5 * time.Second):
		t.Fatal("the stream's columns never reached the client")
	}
	lead.set(b.addr)
	select {
	case r := <-done:
		wantOwnerError(t, r.err, a.addr, "leadership moved")
		if r.res.Packets == 0 {
			t.Fatal("the stream's columns never reached the client")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream from the old leader was not cut")
	}
	if relay.HoldReadOnly {
		t.Fatal("the relay's HoldReadOnly was left set")
	}
}

// Without a leader (a fixed owner address) nothing waits: a down owner
// fails the statement at once, naming its address.
func TestFixedAddressFailsFast(t *testing.T) {
	a := startFakeOwner(t, 100)
	a.stop()
	f := newForwarder(t, Config{Addr: a.addr})
	start := time.Now()
	_, err := f.NextValues("db.seq", 1)
	wantOwnerError(t, err, a.addr, "cannot reach the owner")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("failed after %v, want at once (not the 5 s default LeaderWait)", d)
	}
}

// Forward holds a standby's 1290 back from the client and relays the next
// leader's answer instead; the client sees one answer, no error.
func TestForwardHoldsStandbyRefusal(t *testing.T) {
	a, b := startFakeOwner(t, 100), startFakeOwner(t, 200)
	lead := newFakeLeader(a.addr)
	f := newForwarder(t, Config{Leader: lead})
	if _, err := f.NextValues("db.seq", 1); err != nil { // a connection to a in the pool
		t.Fatal(err)
	}
	a.standby.Store(true)
	// The leadership moves 100 ms after a first refuses the statement.
	a.onFirstStatement(func() { time.AfterFunc(100*time.Millisecond, func() { lead.set(b.addr) }) })

	cl, srv := net.Pipe()
	packets := make(chan []byte, 16)
	go func() {
		defer close(packets)
		c := wire.NewConn(cl, 4096, 4096)
		for {
			p, err := c.ReadPacketAnySeq()
			if err != nil {
				return
			}
			packets <- append([]byte(nil), p...)
		}
	}()
	relay := &wire.Relay{ClientCaps: ownerCaps}
	res, err := f.Forward(relay, wire.NewConn(srv, 4096, 4096), "db", append([]byte{wire.ComQuery}, "SELECT NEXT VALUE FROM seq"...), wire.ResponseQuery)
	srv.Close()
	if err != nil || res.Err != nil || res.Held {
		t.Fatalf("Forward: %+v, %v", res, err)
	}
	var rows []string
	for p := range packets {
		if wire.IsERR(p) {
			t.Fatalf("the client got an error packet: %v", wire.ParseERR(p))
		}
		if len(p) > 1 && p[0] == 3 && string(p[1:]) == "201" {
			rows = append(rows, string(p[1:]))
		}
	}
	if len(rows) != 1 {
		t.Fatalf("rows %v, want b's 201 once", rows)
	}
	if got := a.statements(); len(got) < 2 {
		t.Fatalf("a got %v: the refused statement at least once after the first", got)
	}
}

// A statement in flight on a leader that stops answering (paused, cut
// off) is cut Config.Timeout after the leadership moves: it fails, and is
// not sent to the new leader (it may have run).
func TestInFlightOnOldLeaderIsBounded(t *testing.T) {
	a, b := startFakeOwner(t, 100), startFakeOwner(t, 200)
	lead := newFakeLeader(a.addr)
	f := newForwarder(t, Config{Leader: lead, Timeout: 300 * time.Millisecond})
	a.hang.Store(true)
	a.onFirstStatement(func() { time.AfterFunc(200*time.Millisecond, func() { lead.set(b.addr) }) })
	start := time.Now()
	_, err := f.NextValues("db.seq", 1)
	wantOwnerError(t, err, a.addr, "no longer leads and did not answer in time")
	if d := time.Since(start); d < 450*time.Millisecond || d > 3*time.Second {
		t.Fatalf("cut after %v, want about the move (200ms) plus the timeout (300ms)", d)
	}
	if got := b.statements(); len(got) != 0 {
		t.Fatalf("b ran %v", got)
	}
	if v, err := f.NextValues("db.seq", 1); err != nil || v != 201 {
		t.Fatalf("the next statement: %d, %v; want b's first value", v, err)
	}
}

// An owner that dies closes every idle connection of the gateway's pool
// at once: a statement that comes after skips them all (not only the
// first few) and waits for the next leader, instead of being sent on a
// dead connection and failing though nothing was in flight.
func TestDeadIdleConnectionsAreSkipped(t *testing.T) {
	a, b := startFakeOwner(t, 100), startFakeOwner(t, 200)
	lead := newFakeLeader(a.addr)
	f := newForwarder(t, Config{Leader: lead, LeaderWait: 5 * time.Second})
	pool := f.cur.Load().pool
	var leases []*pools.Lease[*conn]
	for range pool.Stat().Size {
		l, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	for _, l := range leases {
		l.Release()
	}
	a.stop()
	waitFor(t, "a's connections to close", func() bool { return a.openConns() == 0 })
	time.AfterFunc(100*time.Millisecond, func() { lead.set(b.addr) })
	if v, err := f.NextValues("db.seq", 1); err != nil || v != 201 {
		t.Fatalf("after a died with %d idle connections: %d, %v", len(leases), v, err)
	}
}
