package pools

import (
	"context"
	"errors"
	"testing"
	"time"
)

// acquireAsync starts an Acquire with ctx and returns where its result
// lands; it waits until the call waits (Stat's Waiting).
func acquireAsync(t *testing.T, p *Pool[*fakeConn], ctx context.Context) <-chan acquired {
	t.Helper()
	waiting := p.Stat().Waiting
	out := make(chan acquired, 1)
	go func() {
		l, err := p.Acquire(ctx)
		out <- acquired{l, err}
	}()
	eventually(t, "the caller waits", func() bool { return p.Stat().Waiting == waiting+1 })
	return out
}

type acquired struct {
	l   *Lease[*fakeConn]
	err error
}

func receive(t *testing.T, c <-chan acquired) acquired {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting Acquire did not return")
		return acquired{}
	}
}

// served returns the lease the Acquire behind c got, failing the test on
// its error.
func served(t *testing.T, c <-chan acquired) *Lease[*fakeConn] {
	t.Helper()
	r := receive(t, c)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.l
}

// notServed fails the test if the Acquire behind c returns within 20 ms:
// who names it and when it must not be served yet.
func notServed(t *testing.T, c <-chan acquired, who string) {
	t.Helper()
	select {
	case r := <-c:
		t.Fatalf("served too early: %s: %+v", who, r)
	case <-time.After(20 * time.Millisecond):
	}
}

// A caller that finds every seat leased waits in the hand-off queue, and
// the next Release gives it that connection directly: counted as an
// acquire that waited, with no seat going idle between.
func TestHandoffGivesReleasedConnection(t *testing.T) {
	for _, order := range []Order{RoundRobin, LIFO} {
		t.Run(order.String(), func(t *testing.T) {
			p := newPool(t, &dialer{}, func(c *Config[*fakeConn]) { c.Size = 1; c.Order = order })
			a := mustAcquire(t, p)
			conn := a.Conn()
			before := settled(t, p)
			got := acquireAsync(t, p, context.Background())
			if n := p.handN.Load(); n != 1 {
				t.Fatalf("hand-off queue holds %d callers, want 1", n)
			}
			a.Release()
			r := served(t, got)
			if r.Conn() != conn {
				t.Error("the waiter got another connection than the one released")
			}
			s := p.Stat()
			if s.InUse != 1 || s.Idle != 0 || s.Waiting != 0 || s.Dials != 1 {
				t.Errorf("stat after the hand-off: %+v", s)
			}
			if s.Acquires != before.Acquires+1 || s.EmptyAcquires != before.EmptyAcquires+1 || s.Waits != before.Waits+1 {
				t.Errorf("the hand-off is not counted as an acquire that waited: before %+v, after %+v", before, s)
			}
			r.Release()
			if s := p.Stat(); s.Idle != 1 || s.InUse != 0 {
				t.Errorf("released with nobody waiting: %+v", s)
			}
		})
	}
}

// A waiter that gives up leaves the queue: the error is its context's, a
// later Release makes the connection idle, and the wait is counted as
// cancelled.
func TestHandoffWaiterGivesUp(t *testing.T) {
	p := newPool(t, &dialer{}, func(c *Config[*fakeConn]) { c.Size = 1 })
	a := mustAcquire(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	got := acquireAsync(t, p, ctx)
	cancel()
	r := receive(t, got)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", r.err)
	}
	if n := p.handN.Load(); n != 0 {
		t.Errorf("hand-off queue holds %d callers after the cancel", n)
	}
	a.Release()
	if s := p.Stat(); s.Idle != 1 || s.CanceledAcquires != 1 {
		t.Errorf("stat: %+v", s)
	}
}

// Waiters are served in the order they came, and one that timed out in
// between is skipped.
func TestHandoffOrderAndTimeout(t *testing.T) {
	p := newPool(t, &dialer{}, func(c *Config[*fakeConn]) { c.Size = 1; c.AcquireTimeout = 5 * time.Second })
	a := mustAcquire(t, p)
	first := acquireAsync(t, p, context.Background())
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	gone := acquireAsync(t, p, short)
	third := acquireAsync(t, p, context.Background())
	if r := receive(t, gone); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("the short waiter: err = %v", r.err)
	}
	a.Release()
	r1 := served(t, first)
	notServed(t, third, "the third waiter, before the first released")
	r1.Release()
	r3 := served(t, third)
	r3.Release()
}

// The pool's own AcquireTimeout ends a wait in the queue with
// *AcquireTimeoutError.
func TestHandoffAcquireTimeout(t *testing.T) {
	p := newPool(t, &dialer{}, func(c *Config[*fakeConn]) { c.Size = 1; c.AcquireTimeout = 30 * time.Millisecond })
	a := mustAcquire(t, p)
	defer a.Release()
	_, err := p.Acquire(context.Background())
	var te *AcquireTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want *AcquireTimeoutError", err)
	}
	if s := p.Stat(); s.AcquireTimeouts != 1 || s.Waiting != 0 || p.handN.Load() != 0 {
		t.Errorf("stat: %+v, queue %d", s, p.handN.Load())
	}
}

// A seat that frees (a destroyed connection) and a larger size both wake
// the queue: the first waiter dials instead of waiting for a release.
func TestHandoffWokenToDial(t *testing.T) {
	t.Run("destroy", func(t *testing.T) {
		d := &dialer{}
		p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1 })
		a := mustAcquire(t, p)
		got := acquireAsync(t, p, context.Background())
		a.Destroy()
		r := served(t, got)
		if r.Conn() == a.Conn() || d.started.Load() != 2 {
			t.Errorf("the waiter did not dial a new connection (dials %d)", d.started.Load())
		}
		r.Release()
	})
	t.Run("resize", func(t *testing.T) {
		d := &dialer{}
		p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1; c.AcquireTimeout = 5 * time.Second })
		a := mustAcquire(t, p)
		got := acquireAsync(t, p, context.Background())
		p.Resize(2, 0)
		r := served(t, got)
		if r.Conn() == a.Conn() {
			t.Error("the waiter got the held connection")
		}
		r.Release()
		a.Release()
	})
	t.Run("close", func(t *testing.T) {
		p := newPool(t, &dialer{}, func(c *Config[*fakeConn]) { c.Size = 1 })
		a := mustAcquire(t, p)
		got := acquireAsync(t, p, context.Background())
		go p.Close()
		if r := receive(t, got); !errors.Is(r.err, ErrClosed) {
			t.Errorf("err = %v, want ErrClosed", r.err)
		}
		a.Release()
	})
}

// A caller that waits in puddle's Acquire (it came while a dial was in
// flight, before the pool was at its size) is served before the callers
// queued for a hand-off after it: before, releases went to the queue
// while it was not empty, and under steady load that caller waited until
// its timeout (e2e/fleet TestConnectionBudget).
func TestHandoffDoesNotStarvePuddleWaiter(t *testing.T) {
	d := &dialer{gate: make(chan struct{})}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 2; c.AcquireTimeout = 5 * time.Second })
	first := make(chan acquired, 1)
	go func() {
		l, err := p.Acquire(context.Background())
		first <- acquired{l, err}
	}()
	d.gate <- struct{}{}
	a := served(t, first)
	// X dials the second seat; P comes while that dial is in flight and
	// waits in puddle's Acquire.
	x := acquireAsync(t, p, context.Background())
	eventually(t, "the second dial", func() bool { return d.started.Load() == 2 })
	inPuddle := acquireAsync(t, p, context.Background())
	d.gate <- struct{}{}
	rx := served(t, x)
	// At its size now: H queues for a hand-off.
	h := acquireAsync(t, p, context.Background())
	if n := p.handN.Load(); n != 1 {
		t.Fatalf("hand-off queue holds %d callers, want 1", n)
	}
	a.Release()
	rp := served(t, inPuddle)
	notServed(t, h, "the queued caller, before the one waiting in puddle")
	rx.Release()
	rh := served(t, h)
	rh.Release()
	rp.Release()
}
