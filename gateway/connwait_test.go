package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/internal/ioloop"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

// connWaitRig is a loop, a pool of two connections to nowhere (pipes)
// and sessions that run as tasks of the loop, for the connection queue's
// tests.
type connWaitRig struct {
	t     *testing.T
	loop  *ioloop.Loop
	pool  *pools.Pool[*backendConn]
	srv   *Server
	waits loopWaits
}

func newConnWaitRig(t *testing.T, acquireTimeout time.Duration) *connWaitRig {
	t.Helper()
	loop, err := ioloop.New(ioloop.Config{})
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	pipe := func() *wire.Conn {
		a, b := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, b) }() // a Quit's COM_QUIT
		t.Cleanup(func() { a.Close(); b.Close() })
		return wire.NewConn(a, 64, 64)
	}
	pool, err := pools.New(pools.Config[*backendConn]{
		Name: "test", Size: 2, MinIdle: -1, AcquireTimeout: acquireTimeout,
		Dial: func(context.Context) (*backendConn, error) {
			return &backendConn{BackendConn: &wire.BackendConn{Conn: pipe()}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loop.Close(); pool.Close() })
	return &connWaitRig{t: t, loop: loop, pool: pool, srv: &Server{}, waits: loopWaits{}}
}

// session starts a session on the loop that runs fn as its task.
func (r *connWaitRig) session(fn func(ss *Session)) (*Session, <-chan struct{}) {
	a, b := net.Pipe()
	r.t.Cleanup(func() { a.Close(); b.Close() })
	ss := &Session{srv: r.srv, loopSide: loopSide{loopWaits: r.waits}}
	ss.client = wire.NewConn(a, 64, 64)
	done := make(chan struct{})
	if err := r.loop.Go(func(t *ioloop.Task) {
		defer close(done)
		ss.task = t
		fn(ss)
	}); err != nil {
		r.t.Fatal(err)
	}
	return ss, done
}

// onLoop runs fn on the loop's thread and waits for it.
func (r *connWaitRig) onLoop(fn func()) {
	_, done := r.session(func(*Session) { fn() })
	<-done
}

// queued is how many sessions wait in the pool's queue on the loop.
func (r *connWaitRig) queued() int {
	n := 0
	r.onLoop(func() {
		if q := r.waits[r.pool]; q != nil {
			n = len(q.waiters)
		}
	})
	return n
}

// waitQueued waits until n sessions wait in the pool's queue on the loop.
func (r *connWaitRig) waitQueued(n int) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); r.queued() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("queued %d, want %d", r.queued(), n)
		}
	}
}

// Sessions of a loop that find both connections busy wait on the loop,
// and get them, first come first served, from the sessions done with
// them.
func TestConnQueuePassesInOrder(t *testing.T) {
	r := newConnWaitRig(t, 10*time.Second)
	var got []string // sessions of one loop run one at a time
	var wg sync.WaitGroup
	// done passes l on when sessions wait, else releases it.
	done := func(ss *Session, l *pools.Lease[*backendConn]) {
		if q := r.waits[r.pool]; q == nil || len(q.waiters) == 0 {
			l.Release()
		} else if !ss.passLease(l) {
			t.Error("a lease was not passed on with sessions waiting")
			l.Release()
		}
	}
	// The holders: the first lets go once three wait, and each served
	// session passes it on; the second keeps its connection till the end.
	// with runs fn in a session on the loop with a connection it leases.
	with := func(fn func(ss *Session, l *pools.Lease[*backendConn])) {
		wg.Add(1)
		r.session(func(ss *Session) {
			defer wg.Done()
			l, err := ss.acquire(r.pool)
			if err != nil {
				t.Error(err)
				return
			}
			fn(ss, l)
		})
	}
	for h := range 2 {
		with(func(ss *Session, l *pools.Lease[*backendConn]) {
			for q := r.waits[r.pool]; h == 0 && (q == nil || len(q.waiters) < 3) || h == 1 && len(got) < 3; q = r.waits[r.pool] {
				_ = ss.task.Park(time.Now().Add(time.Millisecond))
			}
			done(ss, l)
		})
	}
	for i := range 3 {
		for r.pool.Stat().InUse < 2 || r.queued() < i {
			time.Sleep(time.Millisecond)
		}
		with(func(ss *Session, l *pools.Lease[*backendConn]) {
			got = append(got, fmt.Sprint(i))
			done(ss, l)
		})
	}
	wg.Wait()
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("served in order %v, want [0 1 2]", got)
	}
	// Waits: the holders' two dials in Acquire, the three on the loop.
	if s := r.pool.Stat(); s.Waits != 5 || s.Waiting != 0 || s.Idle != 2 {
		t.Errorf("pool after: %+v", s)
	}
}

// A connection given back to the pool elsewhere reaches a waiter through
// the poller; a wait past acquire_timeout fails as Acquire's would; a
// KILL ends a wait; a pool that closes sends its waiters to Acquire,
// which says so.
func TestConnQueueOutcomes(t *testing.T) {
	// acquire_timeout is long but for the timeout's own step: a loaded
	// machine must not turn a kill or a close into a timeout.
	r := newConnWaitRig(t, 10*time.Second)
	setAcquireTimeout := func(d time.Duration) {
		t.Helper()
		if err := r.pool.SetTimeouts(pools.Timeouts{AcquireTimeout: d}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := r.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan error, 3)
	wait := func() (*Session, <-chan struct{}) {
		return r.session(func(ss *Session) {
			l, err := ss.acquire(r.pool)
			if err == nil {
				l.Release()
			}
			result <- err
		})
	}

	_, done := wait()
	r.waitQueued(1)
	a.Release() // on a goroutine: to the pool, where the poller finds it
	<-done
	if err := <-result; err != nil {
		t.Fatalf("a connection released elsewhere: %v", err)
	}

	a, err = r.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	setAcquireTimeout(300 * time.Millisecond)
	_, done = wait()
	<-done
	var te *pools.AcquireTimeoutError
	if err := <-result; !errors.As(err, &te) {
		t.Fatalf("no connection within acquire_timeout: %v, want an *AcquireTimeoutError", err)
	}
	setAcquireTimeout(10 * time.Second)

	killed, done := wait()
	r.waitQueued(1)
	if err := killed.killStatement(false); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := <-result; !errors.Is(err, errQueryKilled) {
		t.Fatalf("a KILL during the wait: %v, want errQueryKilled", err)
	}

	_, done = wait()
	r.waitQueued(1)
	go r.pool.Close() // waits for a and b
	<-done
	if err := <-result; !errors.Is(err, pools.ErrClosed) {
		t.Fatalf("the pool closed during the wait: %v, want ErrClosed", err)
	}
	r.onLoop(func() {
		if _, ok := r.waits[r.pool]; ok {
			t.Error("the queue of a closed pool stays")
		}
	})
	a.Release()
	b.Release()
}
