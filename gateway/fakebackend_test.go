package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/wire"
)

// This file is a scripted fake backend: the session, relay and retry
// logic run against MySQL servers that are goroutines on the other end of
// net.Pipe, answering each command as the test says, so they get tests
// that need no database and take milliseconds.

// fakeServer is one fake backend.
type fakeServer struct {
	addr string
	// caps are the capabilities its connections negotiated.
	caps uint32
	// answer returns the payloads that answer cmd on conn (the n-th
	// connection dialed to this server, from 0), or nil to close the
	// connection without answering (a backend that died).
	answer func(conn int, cmd []byte) [][]byte
	// hangUp, when set, says to close the connection after answering cmd
	// (a connection that dies while idle in the pool).
	hangUp func(cmd []byte) bool

	mu    sync.Mutex
	dials int
	got   []string // the commands received, as text
}

// commands returns what the server received.
func (f *fakeServer) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

// dial opens a connection to the fake.
func (f *fakeServer) dial(be *backend) *backendConn {
	a, b := net.Pipe()
	f.mu.Lock()
	n := f.dials
	f.dials++
	f.mu.Unlock()
	go f.serve(n, wire.NewConn(b, 4096, 4096))
	return &backendConn{
		BackendConn: &wire.BackendConn{Conn: wire.NewConn(a, 4096, 4096), Caps: f.caps,
			Greeting: &wire.Greeting{ConnectionID: uint32(n + 1)}},
		addr: f.addr, be: be, vars: map[string]string{}, stmts: map[connStmtKey]*connStmt{},
		tracked: f.caps&wire.CapSessionTrack != 0,
	}
}

func (f *fakeServer) serve(n int, c *wire.Conn) {
	defer c.Close()
	for {
		c.ResetSeq()
		p, err := c.ReadPacket()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.got = append(f.got, commandText(p))
		f.mu.Unlock()
		answer := f.answer(n, p)
		if answer == nil {
			return
		}
		for _, a := range answer {
			if c.WritePacket(a) != nil {
				return
			}
		}
		if c.Flush() != nil || f.hangUp != nil && f.hangUp(p) {
			return
		}
	}
}

func commandText(p []byte) string {
	if len(p) > 0 && p[0] == wire.ComQuery {
		return string(p[1:])
	}
	return fmt.Sprintf("command 0x%02x", p[0])
}

// resultSet is a one-column result set with rows, in the form a server
// with caps sends.
func resultSet(caps uint32, rows ...string) [][]byte {
	def := wire.Column{Name: "v", Type: 253, Charset: 33, Length: 255}
	out := [][]byte{wire.AppendColumnCount(nil, 1), wire.AppendColumnDef(nil, def)}
	if caps&wire.CapDeprecateEOF == 0 {
		out = append(out, wire.AppendEOF(nil, 0, wire.StatusAutocommit))
	}
	for _, r := range rows {
		out = append(out, wire.AppendTextRow(nil, [][]byte{[]byte(r)}))
	}
	return append(out, wire.AppendResultEnd(nil, caps, 0, wire.StatusAutocommit))
}

// okAnswer is an OK packet.
func okAnswer(affected uint64) [][]byte {
	return [][]byte{wire.AppendOK(nil, wire.OK{AffectedRows: affected, Status: wire.StatusAutocommit})}
}

// scriptProber reports the first server as the primary, the others as
// replicas.
type scriptProber struct{ primary string }

func (p scriptProber) Probe(_ context.Context, b healthcheck.Backend) healthcheck.Result {
	if b.Addr == p.primary {
		return healthcheck.Result{Reachable: true, RTT: time.Millisecond}
	}
	return healthcheck.Result{Reachable: true, ReadOnly: true, Replica: true, LagKnown: true, RTT: time.Millisecond}
}

// bufConn is a client socket whose writes land in a buffer.
type bufConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *bufConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}
func (c *bufConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *bufConn) Close() error                     { return nil }
func (c *bufConn) SetDeadline(time.Time) error      { return nil }
func (c *bufConn) SetReadDeadline(time.Time) error  { return nil }
func (c *bufConn) SetWriteDeadline(time.Time) error { return nil }
func (c *bufConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5} }
func (c *bufConn) LocalAddr() net.Addr              { return c.RemoteAddr() }

// take returns what the client got since the last take, as payloads.
func (c *bufConn) take(t *testing.T) [][]byte {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.out.Bytes()
	var out [][]byte
	for len(b) >= 4 {
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		out = append(out, append([]byte(nil), b[4:4+n]...))
		b = b[4+n:]
	}
	c.out.Reset()
	return out
}

// fakeSession is a logged-in session of a gateway whose cluster is the
// servers (the first the primary, replica reads on when there are more),
// with clientCaps negotiated.
func fakeSession(t *testing.T, clientCaps uint32, servers ...*fakeServer) (*Session, *bufConn) {
	t.Helper()
	var addrs []string
	byAddr := map[string]*fakeServer{}
	for _, f := range servers {
		addrs = append(addrs, f.addr)
		byAddr[f.addr] = f
	}
	dial := func(be *backend) *backendConn { return byAddr[be.addr].dial(be) }
	srv := testServer(t, addrs, len(servers) > 1, dial, scriptProber{primary: addrs[0]}, time.Hour)
	srv.clusters["main"].dialKill = func(_ context.Context, be *backend, _ poolKey) (*backendConn, error) {
		return dial(be), nil
	}
	return sessionOf(srv, clientCaps)
}

// sessionOf is a new logged-in session of srv's cluster "main", with
// clientCaps negotiated.
func sessionOf(srv *Server, clientCaps uint32) (*Session, *bufConn) {
	nc := &bufConn{}
	ss := &Session{srv: srv, log: srv.log, cluster: srv.clusters["main"], replayState: replayState{versions: &srv.stateIDs}, clientSide: clientSide{
		nc: nc, client: wire.NewConn(nc, 4096, 4096), caps: clientCaps, collation: wire.DefaultCollation,
	}}
	ss.guard.Bind((*guardSession)(ss))
	user := "u"
	ss.owner.Store(&user)
	ss.resetState()
	return ss, nc
}

// query runs one COM_QUERY through the session and returns what the
// client got.
func query(t *testing.T, ss *Session, nc *bufConn, sql string) [][]byte {
	t.Helper()
	ss.client.ResetSeq()
	ss.client.SetSeq(1)
	if err := ss.dispatch(append([]byte{wire.ComQuery}, sql...)); err != nil {
		t.Fatalf("%s: the session ended: %v", sql, err)
	}
	if err := ss.client.Flush(); err != nil {
		t.Fatal(err)
	}
	return nc.take(t)
}

// A read that loses its backend connection before the client got a byte
// runs once more, on another replica; the client sees only the answer.
func TestFakeReadRetriesOnAnotherReplicaOnce(t *testing.T) {
	var first atomic.Bool
	answer := func(_ int, cmd []byte) [][]byte {
		if commandText(cmd) == "SELECT v FROM t" && first.CompareAndSwap(false, true) {
			return nil // the first connection to get the read dies
		}
		return resultSet(wire.CapProtocol41, "x")
	}
	primary := &fakeServer{addr: "fake:1", caps: wire.CapProtocol41, answer: answer}
	r1 := &fakeServer{addr: "fake:2", caps: wire.CapProtocol41, answer: answer}
	r2 := &fakeServer{addr: "fake:3", caps: wire.CapProtocol41, answer: answer}
	ss, nc := fakeSession(t, wire.CapProtocol41, primary, r1, r2)
	got := query(t, ss, nc, "SELECT v FROM t")
	if len(got) != 5 || string(got[3]) != "\x01x" {
		t.Fatalf("client got %q, want the one-row result", got)
	}
	var ran []string
	for _, f := range []*fakeServer{primary, r1, r2} {
		for _, c := range f.commands() {
			if c == "SELECT v FROM t" {
				ran = append(ran, f.addr)
			}
		}
	}
	if len(ran) != 2 || ran[0] == ran[1] {
		t.Fatalf("the read reached %v, want two different backends (the first died)", ran)
	}
}

// A write whose connection breaks after it was sent may have run: it is
// never sent again, and the client gets 1158 saying so.
func TestFakeWriteIsNeverResent(t *testing.T) {
	primary := &fakeServer{addr: "fake:1", caps: wire.CapProtocol41, answer: func(_ int, cmd []byte) [][]byte {
		if strings.HasPrefix(commandText(cmd), "UPDATE") {
			return nil
		}
		return okAnswer(0)
	}}
	ss, nc := fakeSession(t, wire.CapProtocol41, primary)
	got := query(t, ss, nc, "UPDATE t SET v = v + 1")
	if len(got) != 1 || got[0][0] != 0xff || wire.ParseERR(got[0]).Code != 1158 {
		t.Fatalf("client got %q, want error 1158", got)
	}
	n := 0
	for _, c := range primary.commands() {
		if strings.HasPrefix(c, "UPDATE") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the write reached the primary %d times, want 1", n)
	}
}

// Every combination of client and backend CLIENT_DEPRECATE_EOF: the
// client gets the result in its own form.
func TestFakeResultFormsForEveryCapabilityPair(t *testing.T) {
	for _, clientDeprecate := range []bool{false, true} {
		for _, backendDeprecate := range []bool{false, true} {
			t.Run(fmt.Sprintf("client_deprecate_eof=%v/backend_deprecate_eof=%v", clientDeprecate, backendDeprecate), func(t *testing.T) {
				bcaps, ccaps := wire.CapProtocol41, wire.CapProtocol41
				if backendDeprecate {
					bcaps |= wire.CapDeprecateEOF
				}
				if clientDeprecate {
					ccaps |= wire.CapDeprecateEOF
				}
				primary := &fakeServer{addr: "fake:1", caps: bcaps, answer: func(_ int, cmd []byte) [][]byte {
					return resultSet(bcaps, "a", "b")
				}}
				ss, nc := fakeSession(t, ccaps, primary)
				got := query(t, ss, nc, "SELECT v FROM t")
				want := resultSet(ccaps, "a", "b")
				if len(got) != len(want) {
					t.Fatalf("client got %d packets %q, want %q", len(got), got, want)
				}
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Errorf("packet %d: %x, want %x", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// A connection that died while idle in the pool never got the statement:
// a write goes to a fresh connection, and runs once.
func TestFakeWriteOnADeadIdleConnectionRunsOnce(t *testing.T) {
	primary := &fakeServer{addr: "fake:1", caps: wire.CapProtocol41,
		answer: func(_ int, cmd []byte) [][]byte {
			if commandText(cmd) == "SELECT v FROM t" {
				return resultSet(wire.CapProtocol41, "x")
			}
			return okAnswer(1)
		},
		hangUp: func(cmd []byte) bool { return commandText(cmd) == "SELECT v FROM t" },
	}
	ss, nc := fakeSession(t, wire.CapProtocol41, primary)
	if got := query(t, ss, nc, "SELECT v FROM t"); len(got) != 5 {
		t.Fatalf("the read got %q", got)
	}
	got := query(t, ss, nc, "UPDATE t SET v = 1")
	if len(got) != 1 || got[0][0] != 0 {
		t.Fatalf("the write got %q, want OK", got)
	}
	n := 0
	for _, c := range primary.commands() {
		if strings.HasPrefix(c, "UPDATE") {
			n++
		}
	}
	primary.mu.Lock()
	dials := primary.dials
	primary.mu.Unlock()
	if n != 1 || dials != 2 {
		t.Fatalf("the write ran %d times over %d connections, want once on a second connection", n, dials)
	}
}

// A read inside a transaction is not retried when its connection breaks:
// the transaction was on it. The client gets 1158, and the session ends.
func TestFakeReadInTransactionIsNotRetried(t *testing.T) {
	var reads atomic.Int32
	primary := &fakeServer{addr: "fake:1", caps: wire.CapProtocol41, answer: func(_ int, cmd []byte) [][]byte {
		switch commandText(cmd) {
		case "SELECT v FROM t":
			reads.Add(1)
			return nil
		case "BEGIN":
			return [][]byte{wire.AppendOK(nil, wire.OK{Status: wire.StatusAutocommit | wire.StatusInTrans})}
		}
		return okAnswer(0)
	}}
	ss, nc := fakeSession(t, wire.CapProtocol41, primary)
	if got := query(t, ss, nc, "BEGIN"); len(got) != 1 || got[0][0] != 0 {
		t.Fatalf("BEGIN got %q", got)
	}
	ss.client.ResetSeq()
	ss.client.SetSeq(1)
	err := ss.dispatch(append([]byte{wire.ComQuery}, "SELECT v FROM t"...))
	_ = ss.client.Flush()
	got := nc.take(t)
	if err == nil || len(got) != 1 || wire.ParseERR(got[0]).Code != 1158 {
		t.Fatalf("the read in a transaction got %q (session error %v), want 1158 and the session ended", got, err)
	}
	if reads.Load() != 1 {
		t.Fatalf("the read ran %d times, want 1", reads.Load())
	}
}

// A backend's connections together keep at most max_backend_statements
// prepared: past it, the connection at hand closes its least recently
// used statement before it prepares another.
func TestBackendStatementBudget(t *testing.T) {
	f := &fakeServer{addr: "fake:1", caps: wire.CapProtocol41, answer: func(_ int, cmd []byte) [][]byte {
		return [][]byte{} // COM_STMT_CLOSE has no answer
	}}
	srv := testServer(t, []string{f.addr}, false, func(be *backend) *backendConn { return f.dial(be) }, scriptProber{primary: f.addr}, time.Hour)
	c := srv.clusters["main"]
	conf := *c.conf.Load()
	conf.MaxBackendStatements = 3
	c.conf.Store(&conf)
	be := c.backend(f.addr)
	a, b := f.dial(be), f.dial(be)
	id := uint32(0)
	prepare := func(conn *backendConn, sql string) {
		t.Helper()
		if err := conn.makeStmtRoom(); err != nil {
			t.Fatal(err)
		}
		id++
		conn.rememberStmt(connStmtKey{sql: sql}, id)
	}
	prepare(a, "s1")
	prepare(a, "s2")
	prepare(b, "s3")
	prepare(b, "s4") // the budget is full: b closes s3 first
	prepare(a, "s5") // a closes s1
	if n := be.stmts.Load(); n != 3 {
		t.Fatalf("the backend holds %d statements, budget 3", n)
	}
	if _, ok := b.stmts[connStmtKey{sql: "s3"}]; ok {
		t.Error("b kept its least recently used statement past the budget")
	}
	if _, ok := a.stmts[connStmtKey{sql: "s1"}]; ok {
		t.Error("a kept its least recently used statement past the budget")
	}
	a.forgetSession("")
	if n := be.stmts.Load(); n != 1 {
		t.Fatalf("after a reset of a: %d statements, want 1 (b's)", n)
	}
	_ = b.Close()
	if n := be.stmts.Load(); n != 0 {
		t.Fatalf("after b closed: %d statements, want 0", n)
	}
	// net.Pipe hands each close over synchronously; the fake records it
	// right after.
	closes := 0
	for deadline := time.Now().Add(5 * time.Second); closes != 2 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		closes = 0
		for _, cmd := range f.commands() {
			if cmd == fmt.Sprintf("command 0x%02x", wire.ComStmtClose) {
				closes++
			}
		}
	}
	if closes != 2 {
		t.Errorf("%d COM_STMT_CLOSE sent, want 2", closes)
	}
}

// KILL QUERY reaches only the statement it is meant for: when the victim's
// statement ends while the kill is on its way, the victim keeps its
// backend connection until the kill is answered, so the next statement on
// that connection (another session's, through a pool of one) cannot be
// the one killed. The fake answers the kill only once that next statement
// has arrived on the victim's connection, or after 300 ms: with the
// ordering broken, the next statement arrives first, and the test fails
// whatever the timing; with it intact the test waits the 300 ms.
func TestFakeKillQueryNeverHitsTheNextStatement(t *testing.T) {
	release := make(chan struct{})
	nextOnVictim := make(chan struct{})
	killStarted := make(chan struct{})
	var mu sync.Mutex
	var events []string
	event := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	answer := func(conn int, cmd []byte) [][]byte {
		switch q := commandText(cmd); {
		case q == "SELECT slow":
			<-release
			return resultSet(wire.CapProtocol41, "done")
		case strings.HasPrefix(q, "KILL QUERY"):
			close(killStarted)
			select {
			case <-nextOnVictim:
			case <-time.After(300 * time.Millisecond):
			}
			event("kill answered")
			return okAnswer(0)
		case q == "SELECT next":
			if conn == 0 {
				event("next statement on the victim's connection")
				close(nextOnVictim)
			}
			return resultSet(wire.CapProtocol41, "next")
		}
		return okAnswer(0)
	}
	primary := &fakeServer{addr: "fake:1", caps: wire.CapProtocol41, answer: answer}
	victim, _ := fakeSession(t, wire.CapProtocol41, primary)
	(*victim.cluster.backend("fake:1").pools.Load())[poolKey{}].Resize(1, 0)
	other, _ := sessionOf(victim.srv, wire.CapProtocol41)
	run := func(ss *Session, sql string) chan error {
		done := make(chan error, 1)
		go func() {
			ss.client.ResetSeq()
			ss.client.SetSeq(1)
			done <- ss.dispatch(append([]byte{wire.ComQuery}, sql...))
		}()
		return done
	}

	victimDone := run(victim, "SELECT slow")
	for deadline := time.Now().Add(5 * time.Second); victim.inFlight.Load() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the victim's statement never started")
		}
	}
	killDone := make(chan error, 1)
	go func() { killDone <- victim.killStatement(false) }()
	<-killStarted
	close(release) // the victim's statement ends while the kill is on its way
	otherDone := run(other, "SELECT next")
	for _, c := range []chan error{killDone, victimDone, otherDone} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0] != "kill answered" {
		t.Fatalf("events %q: the kill must be answered before the victim's connection serves anything else", events)
	}
}
