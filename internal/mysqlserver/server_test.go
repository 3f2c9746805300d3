package mysqlserver

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directgate/directgate/internal/ioloop"
	"github.com/directgate/directgate/wire"
)

// echoConn is a Conn whose Serve answers each command with an OK packet
// through a Loop; a command "busy" closes held and blocks until the
// connection is cut.
type echoConn struct {
	srv    *Server
	nc     net.Conn
	c      *wire.Conn
	wait   Wait
	idle   time.Duration
	forced atomic.Bool
	hold   chan struct{}
	held   chan struct{}
}

func (e *echoConn) Serve() {
	l := Loop{
		Conn: e.c, Wait: &e.wait, KeepBuffer: 1 << 10,
		Stop: e.srv.Closing,
		Idle: func() (time.Duration, error) { return e.idle, nil },
		Dispatch: func(p []byte) error {
			if string(p) == "busy" {
				close(e.held)
				<-e.hold
			}
			if err := e.c.WritePacket(wire.AppendOK(nil, wire.OK{})); err != nil {
				return err
			}
			return e.c.Flush()
		},
		WriteErr: func(err *wire.SQLError) error {
			if err := e.c.WritePacket(wire.AppendERR(nil, err)); err != nil {
				return err
			}
			return e.c.Flush()
		},
	}
	_ = l.Run()
}

func (e *echoConn) InterruptIfIdle() { e.wait.Interrupt(e.nc) }

func (e *echoConn) Sweep(now time.Time) { e.wait.Expire(now, e.nc) }

func (e *echoConn) ForceClose() {
	e.forced.Store(true)
	_ = e.nc.Close()
	close(e.hold)
}

type echoHandler struct {
	srv   *Server
	conns chan *echoConn
	idle  time.Duration // each connection's idle limit
}

func (h *echoHandler) NewConn(nc net.Conn, id uint32) Conn {
	e := &echoConn{srv: h.srv, nc: nc, c: wire.NewConn(nc, 1<<10, 1<<10), idle: h.idle, hold: make(chan struct{}), held: make(chan struct{})}
	h.conns <- e
	return e
}

func startEcho(t *testing.T) (*Server, *echoHandler) {
	return startEchoIdle(t, 0)
}

// startEchoIdle is startEcho with an idle limit for every connection.
func startEchoIdle(t *testing.T, idle time.Duration) (*Server, *echoHandler) {
	t.Helper()
	h := &echoHandler{conns: make(chan *echoConn, 8), idle: idle}
	h.srv = New(h, nil)
	if err := h.srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve() }()
	t.Cleanup(func() {
		if _, err := h.srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve = %v after Shutdown, want nil", err)
		}
	})
	return h.srv, h
}

// command sends one command on a fresh sequence and reads the answer.
func command(t *testing.T, c *wire.Conn, cmd string) ([]byte, error) {
	t.Helper()
	c.ResetSeq()
	if err := c.WritePacket([]byte(cmd)); err != nil {
		return nil, err
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	return c.ReadPacket()
}

// A Serve that starts while (or after) Shutdown runs returns nil and
// leaves no sweep running; under -race this also checks that starting
// the sweep cannot race with Shutdown's wait for it.
func TestServeRacingShutdown(t *testing.T) {
	for range 50 {
		h := &echoHandler{conns: make(chan *echoConn, 8)}
		srv := New(h, nil)
		h.srv = srv
		if err := srv.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve() }()
		if _, err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-served; err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	}
	h := &echoHandler{conns: make(chan *echoConn, 8)}
	srv := New(h, nil)
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
}

func TestShutdownClosesIdleAndCutsBusyAfterTheDrain(t *testing.T) {
	srv, h := startEcho(t)
	dial := func() *wire.Conn {
		nc, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return wire.NewConn(nc, 1<<10, 1<<10)
	}
	idle, busy := dial(), dial()
	if p, err := command(t, idle, "ping"); err != nil || p[0] != 0x00 {
		t.Fatalf("first command: %x %v", p, err)
	}
	<-h.conns // idle's: it answered, so it was accepted first
	busyConn := <-h.conns
	busy.ResetSeq()
	if err := busy.WritePacket([]byte("busy")); err != nil {
		t.Fatal(err)
	}
	if err := busy.Flush(); err != nil {
		t.Fatal(err)
	}
	// Busy is true from NewConn on, before the loop reads anything: wait
	// for the command itself.
	<-busyConn.held
	// The drain ends once the idle connection is gone (not after a fixed
	// time a loaded machine could outlast): only the busy one is cut.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type shutdown struct {
		cut int
		err error
	}
	done := make(chan shutdown, 1)
	go func() { cut, err := srv.Shutdown(ctx); done <- shutdown{cut, err} }()
	for deadline := time.Now().Add(5 * time.Second); srv.Len() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections 5 s into the drain, want the busy one only", srv.Len())
		}
	}
	cancel()
	sd := <-done
	cut, err := sd.cut, sd.err
	if err != nil || cut != 1 {
		t.Fatalf("Shutdown = %d, %v; want 1 connection cut", cut, err)
	}
	if !busyConn.forced.Load() {
		t.Error("the busy connection was not force-closed")
	}
	if _, err := idle.ReadPacket(); !errors.Is(err, io.EOF) {
		t.Errorf("idle connection after Shutdown: %v, want EOF", err)
	}
	if srv.Len() != 0 {
		t.Errorf("%d connections left after Shutdown", srv.Len())
	}
	if _, err := net.Dial("tcp", srv.Addr().String()); err == nil {
		t.Error("the listener still accepts after Shutdown")
	}
}

func TestLoopRefusesUnreadableCommands(t *testing.T) {
	for _, tc := range []struct {
		name  string
		send  func(*wire.Conn) error
		code  uint16
		ended error
	}{
		{"too large", func(c *wire.Conn) error { return c.WritePacket(make([]byte, 200)) }, ErNetPacketTooLarge, wire.ErrPacketTooLarge},
		{"empty", func(c *wire.Conn) error { return c.WritePacket(nil) }, ErMalformedPacket, wire.ErrMalformed},
		{"out of sequence", func(c *wire.Conn) error { c.SetSeq(5); return c.WritePacket([]byte{wire.ComPing}) }, ErMalformedPacket, wire.ErrSequence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			server, client := wire.NewConn(a, 1<<10, 1<<10), wire.NewConn(b, 1<<10, 1<<10)
			server.MaxPacket = 100
			var wait Wait
			l := Loop{
				Conn: server, Wait: &wait, KeepBuffer: 1 << 10,
				Stop:     func() bool { return false },
				Dispatch: func([]byte) error { t.Error("dispatched an unreadable command"); return nil },
				WriteErr: func(e *wire.SQLError) error {
					if err := server.WritePacket(wire.AppendERR(nil, e)); err != nil {
						return err
					}
					return server.Flush()
				},
			}
			done := make(chan error, 1)
			go func() { done <- l.Run() }()
			if err := tc.send(client); err != nil {
				t.Fatal(err)
			}
			if err := client.Flush(); err != nil {
				t.Fatal(err)
			}
			p, err := client.ReadPacketAnySeq()
			if err != nil {
				t.Fatal(err)
			}
			if p[0] != 0xff || wire.ParseERR(p).Code != tc.code {
				t.Errorf("answer %x, want error %d", p, tc.code)
			}
			if err := <-done; !errors.Is(err, tc.ended) {
				t.Errorf("Run = %v, want %v", err, tc.ended)
			}
		})
	}
}

func TestLoopStopsBeforeWaiting(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var wait Wait
	var busy []bool
	l := Loop{
		Conn: wire.NewConn(a, 1<<10, 1<<10), Wait: &wait, KeepBuffer: 1 << 10,
		Stop:     func() bool { busy = append(busy, wait.Busy()); return len(busy) > 1 },
		Dispatch: func([]byte) error { return nil },
		WriteErr: func(*wire.SQLError) error { return nil },
	}
	if err := l.Run(); err != nil || len(busy) != 2 || !busy[0] || busy[1] || !wait.Busy() {
		t.Fatalf("Run = %v, busy at each Stop %v, busy after %v; want nil, [true false] (Stop checked again once waiting), true", err, busy, wait.Busy())
	}
}

// A connection idle past its limit is closed by the server's sweep; one
// that keeps sending commands is not.
func TestSweepClosesIdleConnections(t *testing.T) {
	const idle = 10 * SweepEvery
	srv, h := startEchoIdle(t, idle)
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-h.conns
	wc := wire.NewConn(c, 1<<10, 1<<10)
	// Busy for several idle limits, never idle for one.
	for end := time.Now().Add(2 * idle); time.Now().Before(end); time.Sleep(idle / 50) {
		if _, err := command(t, wc, "ping"); err != nil {
			t.Fatalf("a connection that is never idle for its limit was closed: %v", err)
		}
	}
	// Now idle: the sweep closes it (the read fails when it does).
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := wc.ReadPacket(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read = %v, want io.EOF (closed by the server)", err)
	}
}

// Expire ends only a wait past its deadline; Interrupt ends any wait; a
// busy connection is left alone by both, and end reports who won.
func TestWait(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	now := time.Now()
	var w Wait
	if !w.Busy() || w.Expire(now, a) || w.Interrupt(a) {
		t.Fatal("a busy Wait was expired or interrupted")
	}
	w.begin(time.Time{})
	if w.Busy() || w.Expire(now.Add(1000*time.Hour), a) {
		t.Fatal("a wait without a limit expired")
	}
	if !w.end() || !w.Busy() {
		t.Fatal("end of a wait nobody ended did not report true")
	}
	w.begin(now.Add(time.Second))
	if w.Expire(now, a) {
		t.Fatal("a wait expired before its deadline")
	}
	if !w.Expire(now.Add(time.Second), a) || w.Interrupt(a) {
		t.Fatal("a wait at its deadline did not expire, or was ended twice")
	}
	if w.end() {
		t.Fatal("end of an expired wait reported true")
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the wait expired: %v, want a deadline error", err)
	}
	_ = a.SetReadDeadline(time.Time{})
	w.begin(time.Time{})
	if !w.Interrupt(a) || w.end() {
		t.Fatal("Interrupt did not end a wait")
	}
}

// taskEcho is an echoConn that can run as a loop task; its socket is the
// wire.Conn's, whose deadlines and close reach the task.
type taskEcho struct {
	*echoConn
	onTask atomic.Bool
}

func (e *taskEcho) ServeTask(t *ioloop.Task) {
	e.onTask.Store(true)
	e.c.SetTask(t)
	defer e.c.SetTask(nil)
	e.Serve()
}

type taskEchoHandler struct {
	echoHandler
	conns chan *taskEcho
}

func (h *taskEchoHandler) NewConn(nc net.Conn, id uint32) Conn {
	c := wire.NewConn(nc, 1<<10, 1<<10)
	e := &taskEcho{echoConn: &echoConn{srv: h.srv, nc: c.NetConn(), c: c, hold: make(chan struct{}), held: make(chan struct{})}}
	h.conns <- e
	return e
}

// With RunOnLoops a TaskConn is served as a loop task: it answers, and
// Shutdown's interrupt of an idle connection reaches the task's wait. A
// server whose loop is closed serves on goroutines again.
func TestRunOnLoops(t *testing.T) {
	loop, err := ioloop.New(ioloop.Config{})
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	serve := func() (srv *Server, dial func() (*wire.Conn, *taskEcho), shutdown func()) {
		h := &taskEchoHandler{conns: make(chan *taskEcho, 8)}
		h.srv = New(h, nil)
		h.srv.RunOnLoops([]*ioloop.Loop{loop})
		if err := h.srv.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- h.srv.Serve() }()
		dial = func() (*wire.Conn, *taskEcho) {
			nc, err := net.Dial("tcp", h.srv.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { nc.Close() })
			c := wire.NewConn(nc, 1<<10, 1<<10)
			if p, err := command(t, c, "ping"); err != nil || !wire.IsOK(p) {
				t.Fatalf("answer %x, %v", p, err)
			}
			return c, <-h.conns
		}
		shutdown = func() {
			if _, err := h.srv.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := <-served; err != nil {
				t.Fatalf("Serve = %v after Shutdown", err)
			}
		}
		return h.srv, dial, shutdown
	}

	_, dial, shutdown := serve()
	c, e := dial()
	if !e.onTask.Load() {
		t.Error("the connection was not served as a loop task")
	}
	shutdown() // returns once the idle task's connection has ended
	c.ResetSeq()
	if _, err := c.ReadPacket(); err == nil {
		t.Error("the task's idle connection is still open after Shutdown")
	}

	loop.Close()
	_, dial, shutdown = serve()
	if _, e := dial(); e.onTask.Load() {
		t.Error("a connection was served as a task of a closed loop")
	}
	shutdown()
}
