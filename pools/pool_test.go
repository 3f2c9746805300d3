package pools

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeConn is a connection that only knows whether it is closed.
type fakeConn struct {
	id     int
	closed atomic.Bool
	// quit is set when the connection was closed with Quit.
	quit atomic.Bool
	// onClose, if set before the pool sees the connection, runs in Close.
	onClose func()
}

func (c *fakeConn) Close() error {
	if c.closed.Swap(true) {
		panic(fmt.Sprintf("conn %d closed twice", c.id))
	}
	if c.onClose != nil {
		c.onClose()
	}
	return nil
}

// Quit implements Quitter: Close, remembered as a polite one.
func (c *fakeConn) Quit() error {
	c.quit.Store(true)
	return c.Close()
}

// dialer is a scripted Config.Dial that counts dials in flight.
type dialer struct {
	delay time.Duration // each dial sleeps this long
	gate  chan struct{} // if not nil, each dial waits for a receive from it
	fail  atomic.Pointer[error]

	inFlight    atomic.Int32
	maxInFlight atomic.Int32
	started     atomic.Int32

	mu    sync.Mutex
	conns []*fakeConn
	ctxs  []context.Context

	// open, when not nil, counts the connections open now of every
	// dialer that shares it (at once: dialed, not yet closed), and
	// maxOpen the most at any moment.
	open, maxOpen *atomic.Int32
}

func (d *dialer) Dial(ctx context.Context) (*fakeConn, error) {
	n := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	for {
		m := d.maxInFlight.Load()
		if n <= m || d.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	d.started.Add(1)
	d.mu.Lock()
	d.ctxs = append(d.ctxs, ctx)
	d.mu.Unlock()
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if d.delay > 0 {
		select {
		case <-time.After(d.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if e := d.fail.Load(); e != nil {
		return nil, *e
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c := &fakeConn{id: len(d.conns)}
	if d.open != nil {
		c.onClose = func() { d.open.Add(-1) }
		n := d.open.Add(1)
		for m := d.maxOpen.Load(); n > m && !d.maxOpen.CompareAndSwap(m, n); m = d.maxOpen.Load() {
		}
	}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *dialer) all() []*fakeConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*fakeConn(nil), d.conns...)
}

func (d *dialer) openCount() int {
	n := 0
	for _, c := range d.all() {
		if !c.closed.Load() {
			n++
		}
	}
	return n
}

// newPool returns a pool of d's connections closed with the test. Its
// order is LIFO unless mod says otherwise: the tests that follow one
// connection through release and acquire by its Lease need the seat to
// keep its connection (under RoundRobin a released seat gives it to the
// queue).
func newPool(t testing.TB, d *dialer, mod func(*Config[*fakeConn])) *Pool[*fakeConn] {
	t.Helper()
	cfg := Config[*fakeConn]{
		Name:           "test",
		Size:           4,
		MinIdle:        -1,
		Order:          LIFO,
		AcquireTimeout: time.Second,
		Dial:           d.Dial,
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// eventually polls cond until it holds or five seconds pass (generous:
// CI machines are shared).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settled waits until no seat is being constructed, and returns the
// pool's Stat then: a TryAcquire that finds nothing idle while the pool
// has room makes puddle construct a seat in the background, which the
// pool refuses at once (TryAcquire never dials), but which Stat counts as
// dialing for that moment.
func settled(t testing.TB, p *Pool[*fakeConn]) Stat {
	t.Helper()
	var s Stat
	eventually(t, "no seat under construction", func() bool { s = p.Stat(); return s.Dialing == 0 })
	return s
}

func mustAcquire(t testing.TB, p *Pool[*fakeConn]) *Lease[*fakeConn] {
	t.Helper()
	l, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	d := &dialer{}
	c, err := Config[*fakeConn]{Name: "x", Dial: d.Dial}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Size != 64 || c.MinIdle != 4 || c.MaxDials != 4 || c.IdleTimeout != 5*time.Minute ||
		c.MaxLifetime != 30*time.Minute || c.AcquireTimeout != 2*time.Second ||
		c.DialTimeout != 5*time.Second || c.Logger == nil {
		t.Errorf("defaults: %+v", c)
	}
	c, err = Config[*fakeConn]{Name: "x", Dial: d.Dial, Size: 2, MinIdle: -1, IdleTimeout: -1, MaxLifetime: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.MinIdle != 0 || c.IdleTimeout != 0 || c.MaxLifetime != 0 {
		t.Errorf("negative means off: %+v", c)
	}
	c, _ = Config[*fakeConn]{Name: "x", Dial: d.Dial, Size: 2}.withDefaults()
	if c.MinIdle != 2 {
		t.Errorf("MinIdle default capped at Size: got %d", c.MinIdle)
	}
	for _, tc := range []struct {
		cfg  Config[*fakeConn]
		want string
	}{
		{Config[*fakeConn]{Dial: d.Dial}, "Name"},
		{Config[*fakeConn]{Name: "x"}, "Dial"},
		{Config[*fakeConn]{Name: "x", Dial: d.Dial, Size: -1}, "Size"},
		{Config[*fakeConn]{Name: "x", Dial: d.Dial, Size: MaxSize + 1}, "Size"},
		{Config[*fakeConn]{Name: "x", Dial: d.Dial, Size: 2, MinIdle: 3}, "MinIdle"},
		{Config[*fakeConn]{Name: "x", Dial: d.Dial, MaxDials: -1}, "MaxDials"},
		{Config[*fakeConn]{Name: "x", Dial: d.Dial, AcquireTimeout: -1}, "AcquireTimeout"},
		{Config[*fakeConn]{Name: "x", Dial: d.Dial, DialTimeout: -1}, "DialTimeout"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// The connection released last is reused first, so a pool larger than its
// load keeps using the same few.
func TestLIFOOrder(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 3; c.Order = LIFO })
	a, b, c := mustAcquire(t, p), mustAcquire(t, p), mustAcquire(t, p)
	// Released in the order given, they come back last first.
	reuse := func(order ...*Lease[*fakeConn]) {
		t.Helper()
		for _, l := range order {
			l.Release()
		}
		for i := len(order) - 1; i >= 0; i-- {
			if got := mustAcquire(t, p); got != order[i] {
				t.Fatalf("got conn %d, want %d", got.Conn().id, order[i].Conn().id)
			}
		}
	}
	reuse(a, b, c)
	reuse(c, a, b)
	// One user at a time: always the same connection.
	c.Release()
	a.Release()
	b.Release()
	for range 5 {
		got := mustAcquire(t, p)
		if got != b {
			t.Fatalf("got conn %d, want %d (released last)", got.Conn().id, b.Conn().id)
		}
		got.Release()
	}
	if n := d.started.Load(); n != 3 {
		t.Errorf("dials = %d, want 3", n)
	}
}

// TryAcquire takes an idle connection, last released first, and never
// waits or dials: with none idle it reports false; an expired one is
// closed, not handed out; a closed pool has none.
func TestTryAcquire(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 2; c.Order = LIFO })
	if l, ok := p.TryAcquire(); ok || l != nil {
		t.Fatal("TryAcquire on an empty pool handed out a connection")
	}
	if n := d.started.Load(); n != 0 {
		t.Fatalf("TryAcquire dialed %d times", n)
	}
	a, b := mustAcquire(t, p), mustAcquire(t, p)
	a.Release()
	b.Release()
	l, ok := p.TryAcquire()
	if !ok || l != b {
		t.Fatalf("TryAcquire = %v, %v; want the connection released last", l, ok)
	}
	l.Release()
	b.e.expires = time.Now().Add(-time.Second) // past its lifetime
	l, ok = p.TryAcquire()
	if !ok || l != a {
		t.Fatalf("TryAcquire past an expired connection = %v, %v; want the other one", l, ok)
	}
	eventually(t, "the expired connection to close", b.Conn().closed.Load)
	l.Release()
	p.Close()
	if _, ok := p.TryAcquire(); ok {
		t.Fatal("TryAcquire on a closed pool handed out a connection")
	}
}

// Busy: a caller would wait only with nothing idle, no room to dial and
// nobody waiting yet.
func TestBusy(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1 })
	if p.Busy() {
		t.Fatal("an empty pool with room to dial is busy")
	}
	l := mustAcquire(t, p)
	if !p.Busy() {
		t.Fatal("a full pool with its only connection leased is not busy")
	}
	waited := make(chan *Lease[*fakeConn])
	go func() { waited <- mustAcquire(t, p) }()
	eventually(t, "the caller to wait", func() bool { return p.Stat().Waiting == 1 })
	if !p.Busy() {
		t.Fatal("a full pool is not busy while a caller waits")
	}
	l.Release()
	l = <-waited
	l.Release()
	if p.Busy() {
		t.Fatal("a pool with an idle connection is busy")
	}
}

func TestWarmUpToMinIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &dialer{delay: 5 * time.Millisecond}
		p := newPool(t, d, func(c *Config[*fakeConn]) {
			c.Size = 10
			c.MinIdle = 5
			c.MaxDials = 2
		})
		time.Sleep(time.Second) // fake time: the warm-up is long over, and nothing else dials
		synctest.Wait()
		if s := p.Stat(); s.Open != 5 || s.Idle != 5 || s.Dials != 5 || s.Dialing != 0 {
			t.Errorf("after warm-up: %+v", s)
		}
		if m := d.maxInFlight.Load(); m > 2 {
			t.Errorf("%d dials in flight, MaxDials 2", m)
		}
	})
}

func TestCloseIdle(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 10
		c.MinIdle = 3
	})
	eventually(t, "3 idle", func() bool { return p.Stat().Idle == 3 })
	leased := mustAcquire(t, p)
	eventually(t, "refilled to 3 open", func() bool { s := p.Stat(); return s.Open == 3 && s.Idle == 2 && s.Dialing == 0 })
	before := p.Stat()
	p.CloseIdle()
	// Counted from just before. A refill dial that the first destroy
	// starts may finish before CloseIdle returns: it must not be closed
	// (make test once saw Destroyed 3, Dials 4).
	if s := p.Stat(); s.Destroyed-before.Destroyed != 2 {
		t.Errorf("after CloseIdle: %+v (before %+v), want the 2 idle destroyed", s, before)
	}
	if leased.Conn().closed.Load() {
		t.Error("CloseIdle closed a leased connection")
	}
	eventually(t, "refilled after CloseIdle", func() bool { return p.Stat().Open == 3 })
	leased.Release()
}

func TestMaxDials(t *testing.T) {
	d := &dialer{delay: 10 * time.Millisecond}
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 20
		c.MaxDials = 3
	})
	var wg sync.WaitGroup
	leases := make(chan *Lease[*fakeConn], 20)
	for range 20 {
		wg.Go(func() {
			l, err := p.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			leases <- l
		})
	}
	wg.Wait()
	close(leases)
	for l := range leases {
		l.Release()
	}
	if m := d.maxInFlight.Load(); m > 3 || m < 2 {
		t.Errorf("max dials in flight = %d, want 3 (MaxDials)", m)
	}
	if s := p.Stat(); s.Open != 20 || s.Idle != 20 || s.Dials != 20 {
		t.Errorf("stat %+v", s)
	}
}

func TestAcquireTimeout(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 2
		c.AcquireTimeout = 30 * time.Millisecond
	})
	a, b := mustAcquire(t, p), mustAcquire(t, p)
	start := time.Now()
	_, err := p.Acquire(context.Background())
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Errorf("returned after %v", el)
	}
	var te *AcquireTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want *AcquireTimeoutError", err)
	}
	want := "pool test: no connection free within 30ms (all 2 in use); raise pool.size or pool.acquire_timeout, or lower client concurrency"
	if err.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", err, want)
	}
	if te.Pool != "test" || te.Size != 2 || te.Waited != 30*time.Millisecond {
		t.Errorf("%+v", te)
	}
	if s := p.Stat(); s.AcquireTimeouts != 1 || s.Waits != 3 || s.WaitTime < 30*time.Millisecond {
		t.Errorf("stat %+v", s)
	}
	a.Release()
	b.Release()
}

// The caller's deadline ends the wait with the context's error, not an
// AcquireTimeoutError.
func TestCallerDeadlineBeforeAcquireTimeout(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1 })
	a := mustAcquire(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := p.Acquire(ctx)
	var te *AcquireTimeoutError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := p.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: err = %v", err)
	}
	a.Release()
}

// Regression for pgx issue 1259: a caller giving up must not abort the dial
// it started; the connection lands in the idle queue.
func TestCancelledCallerDoesNotAbortDial(t *testing.T) {
	d := &dialer{gate: make(chan struct{})}
	p := newPool(t, d, nil)
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	errc := make(chan error, 1)
	go func() {
		_, err := p.Acquire(ctx)
		errc <- err
	}()
	eventually(t, "dial started", func() bool { return d.started.Load() == 1 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return after cancel")
	}
	d.mu.Lock()
	dctx := d.ctxs[0]
	d.mu.Unlock()
	if dctx.Err() != nil {
		t.Fatalf("dial context ended with the caller: %v", dctx.Err())
	}
	if dctx.Value(key{}) != "v" {
		t.Error("dial context lost the caller's values")
	}
	if _, ok := dctx.Deadline(); !ok {
		t.Error("dial context has no DialTimeout deadline")
	}
	d.gate <- struct{}{}
	eventually(t, "conn idle", func() bool { s := p.Stat(); return s.Idle == 1 && s.Dialing == 0 })
	l := mustAcquire(t, p)
	if l.Conn().id != 0 || d.started.Load() != 1 {
		t.Errorf("got conn %d after %d dials, want the dialed conn 0", l.Conn().id, d.started.Load())
	}
	l.Release()
}

type refusedError struct{ addr string }

func (e *refusedError) Error() string { return "connection refused: " + e.addr }

func TestDialErrorReturned(t *testing.T) {
	d := &dialer{}
	var err error = &refusedError{addr: "127.0.0.1:1"}
	d.fail.Store(&err)
	p := newPool(t, d, nil)
	_, got := p.Acquire(context.Background())
	var re *refusedError
	var de *DialError
	if !errors.As(got, &re) || !errors.As(got, &de) || de.Pool != "test" {
		t.Fatalf("err = %v, want a *DialError wrapping *refusedError", got)
	}
	if s := settled(t, p); s.DialErrors != 1 || s.Open != 0 {
		t.Errorf("stat %+v", s)
	}
	d.fail.Store(nil)
	mustAcquire(t, p).Release()
}

func TestDialTimeout(t *testing.T) {
	d := &dialer{gate: make(chan struct{})}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.DialTimeout = 20 * time.Millisecond })
	_, err := p.Acquire(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the dial's deadline", err)
	}
}

func TestDestroyFreesSlotForWaiter(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1 })
	a := mustAcquire(t, p)
	// The first Acquire waited for its dial too: count the waiter from
	// here, before it can start.
	waits := p.Stat().Waits
	got := make(chan *Lease[*fakeConn], 1)
	go func() {
		l, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, "waiter", func() bool { return p.Stat().Waits == waits+1 })
	time.Sleep(5 * time.Millisecond)
	aConn := a.Conn()
	a.Destroy()
	select {
	case l := <-got:
		if l == nil {
			return
		}
		if l.Conn() == aConn {
			t.Error("waiter got the destroyed conn")
		}
		l.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not served after Destroy")
	}
	eventually(t, "destroyed conn closed", aConn.closed.Load)
	if s := p.Stat(); s.Destroyed != 1 || s.Open != 1 || s.Dials != 2 {
		t.Errorf("stat %+v", s)
	}
}

// In a synctest bubble: synctest.Wait, not a sleep, makes sure each
// waiter is parked before the next one comes.
func TestReleaseWakesWaiterInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &dialer{}
		p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1 })
		a := mustAcquire(t, p)
		order := make(chan int, 3)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				l, err := p.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				order <- i
				time.Sleep(time.Millisecond)
				l.Release()
			})
			synctest.Wait()
		}
		a.Release()
		wg.Wait()
		close(order)
		i := 0
		for got := range order {
			if got != i {
				t.Errorf("waiter %d served in place %d", got, i)
			}
			i++
		}
	})
}

func TestLifetimeJitterNeverHandsOutExpired(t *testing.T) {
	const life = 40 * time.Millisecond
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 4
		c.MaxLifetime = life
	})
	seen := map[*fakeConn]bool{}
	expiries := map[time.Duration]bool{}
	// At least ~4 lifetimes, longer if a loaded machine starves the loop.
	start := time.Now()
	for time.Since(start) < 150*time.Millisecond || (len(seen) < 3 || len(expiries) < 2) && time.Since(start) < 5*time.Second {
		l := mustAcquire(t, p)
		now := time.Now()
		if l.Conn().closed.Load() {
			t.Fatal("handed out a closed conn")
		}
		if !now.Before(l.e.expires) {
			t.Fatalf("handed out a conn %v past its lifetime", now.Sub(l.e.expires))
		}
		if lt := l.e.expires.Sub(l.CreatedAt()); lt > life || lt < life-life/10 {
			t.Fatalf("lifetime %v outside [%v, %v]", lt, life-life/10, life)
		}
		if !seen[l.Conn()] {
			seen[l.Conn()] = true
			expiries[l.e.expires.Sub(l.CreatedAt())] = true
		}
		l.Release()
		time.Sleep(time.Millisecond)
	}
	if len(seen) < 3 {
		t.Errorf("only %d conns over ~4 lifetimes", len(seen))
	}
	if len(expiries) < 2 {
		t.Errorf("lifetimes not jittered: %v", expiries)
	}
	// Released past its lifetime: closed, not queued.
	l := mustAcquire(t, p)
	time.Sleep(life)
	l.Release()
	if !l.Conn().closed.Load() && p.Stat().Idle != 0 {
		// closing is asynchronous; the queue must not hold it
		t.Error("expired conn went back to the idle queue")
	}
	eventually(t, "expired conn closed", l.Conn().closed.Load)
}

func TestIdleExpiredClosedInBackground(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 3
		c.MinIdle = 3
		c.MaxLifetime = 40 * time.Millisecond
	})
	eventually(t, "first conns replaced", func() bool { return len(d.all()) >= 6 })
	for _, c := range d.all()[:3] {
		eventually(t, "old conn closed", c.closed.Load)
	}
	if s := p.Stat(); s.Open > 3 {
		t.Errorf("stat %+v", s)
	}
}

func TestIdleEvictionKeepsMinIdle(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 6
		c.MinIdle = 2
		c.IdleTimeout = 30 * time.Millisecond
	})
	var ls []*Lease[*fakeConn]
	for range 6 {
		ls = append(ls, mustAcquire(t, p))
	}
	for _, l := range ls {
		l.Release()
	}
	eventually(t, "evicted to MinIdle", func() bool { return p.Stat().Open == 2 })
	for range 10 {
		time.Sleep(5 * time.Millisecond)
		if s := p.Stat(); s.Open < 2 {
			t.Fatalf("below MinIdle: %+v", s)
		}
	}
	eventually(t, "4 conns closed", func() bool { return d.openCount() == 2 })
	if s := p.Stat(); s.Destroyed != 4 || s.Dials != 6 {
		t.Errorf("stat %+v", s)
	}
}

// With more connections open than its load needs, a LIFO pool keeps
// using the same one and the others age out (IdleTimeout); a round-robin
// pool takes them in turn and keeps them all.
func TestIdleConnectionsByOrder(t *testing.T) {
	for _, tc := range []struct {
		order           Order
		open, destroyed int
	}{{LIFO, 1, 3}, {RoundRobin, 4, 0}} {
		t.Run(tc.order.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := &dialer{}
				p := newPool(t, d, func(c *Config[*fakeConn]) {
					c.Size = 4
					c.IdleTimeout = time.Second
					c.Order = tc.order
				})
				var ls []*Lease[*fakeConn]
				for range 4 {
					ls = append(ls, mustAcquire(t, p))
				}
				last := ls[3].Conn()
				for _, l := range ls {
					l.Release()
				}
				// One user, a statement every 100 ms, for 3 idle timeouts.
				seen := map[*fakeConn]bool{}
				for range 30 {
					l := mustAcquire(t, p)
					seen[l.Conn()] = true
					if tc.order == LIFO && l.Conn() != last {
						t.Fatalf("got conn %d, want %d (released last)", l.Conn().id, last.id)
					}
					l.Release()
					time.Sleep(100 * time.Millisecond)
				}
				synctest.Wait()
				if s := p.Stat(); s.Open != tc.open || s.Destroyed != int64(tc.destroyed) || len(seen) != tc.open {
					t.Errorf("after 3 s of one user: %+v, %d connections used; want %d open, %d closed",
						s, len(seen), tc.open, tc.destroyed)
				}
			})
		})
	}
}

func TestCloseIdempotent(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.MinIdle = 2 })
	eventually(t, "warm", func() bool { return p.Stat().Idle == 2 })
	l := mustAcquire(t, p)
	p.Close()
	p.Close()
	if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
	eventually(t, "idle conn closed", func() bool { return d.openCount() == 1 })
	if l.Conn().closed.Load() {
		t.Error("leased conn closed by Close")
	}
	l.Release()
	eventually(t, "released conn closed", l.Conn().closed.Load)
	if s := p.Stat(); s.Open != 0 || s.Destroyed != 2 {
		t.Errorf("stat %+v", s)
	}
}

func TestCloseWakesWaitersAndCancelsDials(t *testing.T) {
	d := &dialer{gate: make(chan struct{})}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1 })
	errc := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background())
		errc <- err
	}()
	eventually(t, "dial started", func() bool { return d.started.Load() == 1 })
	p.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if s := p.Stat(); s.Dialing != 0 || s.Open != 0 {
		t.Errorf("stat %+v", s)
	}
}

func TestStat(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 3 })
	a, b := mustAcquire(t, p), mustAcquire(t, p)
	b.Release()
	s := settled(t, p)
	// Both dialed: each waited in puddle's Acquire for its dial.
	want := Stat{Size: 3, Open: 2, InUse: 1, Idle: 1, Waits: 2, Dials: 2, Order: LIFO, Acquires: 2, EmptyAcquires: 2}
	s.WaitTime, s.AcquireTime, s.EmptyAcquireTime = 0, 0, 0
	if s != want {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
	a.Destroy()
	c := mustAcquire(t, p) // b, idle: no wait
	s = settled(t, p)
	want = Stat{Size: 3, Open: 1, InUse: 1, Idle: 0, Waits: 2, Dials: 2, Destroyed: 1, Order: LIFO, Acquires: 3, EmptyAcquires: 2}
	s.WaitTime, s.AcquireTime, s.EmptyAcquireTime = 0, 0, 0
	if s != want {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
	c.Release()
}

func TestResize(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 2; c.AcquireTimeout = 5 * time.Second })
	a, b := mustAcquire(t, p), mustAcquire(t, p)
	p.Resize(3, 0)
	c := mustAcquire(t, p)
	if s := p.Stat(); s.Size != 3 || s.Open != 3 {
		t.Errorf("grown: %+v", s)
	}
	p.Resize(1, 0)
	a.Release()
	b.Release()
	c.Release()
	// The maintenance loop may hold the idle seat for a moment.
	eventually(t, "shrunk to one idle", func() bool { s := p.Stat(); return s.Open == 1 && s.Idle == 1 })
	p.Resize(2, 2)
	eventually(t, "MinIdle raised", func() bool { return p.Stat().Open == 2 })
	p.Resize(-5, 9)
	if s := p.Stat(); s.Size != 1 || s.MinIdle != 1 {
		t.Errorf("clamped: %+v", s)
	}
	eventually(t, "idle shed to size", func() bool { return p.Stat().Open == 1 })
}

// Prepare follows pgxpool's PrepareConn contract (STYLE item 9): ok false
// means "try another connection", an error means "give up".
func TestPrepare(t *testing.T) {
	d := &dialer{}
	var reject sync.Map // *fakeConn -> error or nil (ok false)
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 3
		c.Prepare = func(ctx context.Context, c *fakeConn) (bool, error) {
			v, found := reject.Load(c)
			if !found {
				return true, nil
			}
			if err, _ := v.(error); err != nil {
				return false, err
			}
			return false, nil
		}
	})
	a, b, c := mustAcquire(t, p), mustAcquire(t, p), mustAcquire(t, p)
	c.Release()
	b.Release()
	a.Release()
	reject.Store(a.Conn(), nil) // dead: skipped
	if l := mustAcquire(t, p); l != b {
		t.Errorf("got conn %d, want b (a rejected)", l.Conn().id)
	} else {
		l.Release()
	}
	eventually(t, "a closed", a.Conn().closed.Load)
	boom := errors.New("boom")
	reject.Store(b.Conn(), boom) // b, released last, is next
	if _, err := p.Acquire(context.Background()); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	eventually(t, "b closed", b.Conn().closed.Load)
	if s := p.Stat(); s.Open != 1 || s.Idle != 1 || s.Destroyed != 2 {
		t.Errorf("stat %+v", s)
	}
}

// A connection the pool closes at rest quits (its server counts a client
// that said goodbye); one destroyed, or refused by Prepare, is only
// closed: it may be broken or in the middle of a command.
func TestQuitAtRestCloseOtherwise(t *testing.T) {
	d := &dialer{}
	var refuse atomic.Pointer[fakeConn]
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 4
		c.IdleTimeout = time.Hour // not before the refusal is checked
		c.Prepare = func(_ context.Context, c *fakeConn) (bool, error) {
			return refuse.Load() != c, nil
		}
	})
	destroyed, retired, refused, idle := mustAcquire(t, p), mustAcquire(t, p), mustAcquire(t, p), mustAcquire(t, p)
	destroyed.Destroy()
	retired.Retire()
	refuse.Store(refused.Conn())
	refused.Release()
	if l := mustAcquire(t, p); l == refused { // refused, closed; a new one dialed
		t.Fatal("Prepare's refusal was handed out")
	} else {
		l.Release()
	}
	idle.Release() // ages out (IdleTimeout), as does the new one
	if err := p.SetTimeouts(Timeouts{IdleTimeout: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every connection closed", func() bool { return d.openCount() == 0 })
	for _, c := range []struct {
		name string
		l    *Lease[*fakeConn]
		quit bool
	}{{"destroyed", destroyed, false}, {"retired", retired, true}, {"refused by Prepare", refused, false}, {"idle", idle, true}} {
		if got := c.l.Conn().quit.Load(); got != c.quit {
			t.Errorf("%s: quit %v, want %v", c.name, got, c.quit)
		}
	}
}

// A lease may pass straight from holder to holder while nobody waits in
// Acquire and Release would keep it; otherwise it goes back through
// Release.
func TestPass(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 2 })
	a, b := mustAcquire(t, p), mustAcquire(t, p)
	before := a.IdleSince()
	if !a.Pass() {
		t.Error("a lease nobody else wants is not passable")
	}
	if !a.IdleSince().After(before) {
		t.Error("a passed lease's IdleSince did not move")
	}
	got := make(chan *Lease[*fakeConn])
	go func() { got <- mustAcquire(t, p) }()
	eventually(t, "an Acquire waiting", func() bool { return p.Stat().Waiting == 1 })
	if a.Pass() {
		t.Error("passable while an Acquire waits")
	}
	a.Release()
	a = <-got
	p.Resize(1, 0) // two open: one too many
	if a.Pass() {
		t.Error("passable above the pool's size")
	}
	a.Release() // closed
	b.Release()

	old := newPool(t, &dialer{}, func(c *Config[*fakeConn]) { c.MaxLifetime = time.Millisecond })
	l := mustAcquire(t, old)
	time.Sleep(2 * time.Millisecond)
	if l.Pass() {
		t.Error("a connection past its lifetime is passable")
	}
	l.Release()
}

// A wait outside Acquire counts as Acquire's do, and times out with
// Acquire's error.
func TestWaitOutside(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1; c.AcquireTimeout = 50 * time.Millisecond })
	before := time.Now()
	w := p.WaitOutside()
	if dl := w.Deadline(); dl.Before(before.Add(50*time.Millisecond)) || dl.After(time.Now().Add(50*time.Millisecond)) {
		t.Errorf("deadline %v after the call began, want the 50ms acquire timeout from the wait's start", dl.Sub(before))
	}
	time.Sleep(time.Millisecond)
	if s := p.Stat(); s.Waiting != 1 || s.QueueWait <= 0 {
		t.Errorf("while waiting: %+v", s)
	}
	var te *AcquireTimeoutError
	if err := w.TimeoutError(); !errors.As(err, &te) {
		t.Errorf("TimeoutError %v, want an *AcquireTimeoutError", err)
	}
	w.End()
	if s := p.Stat(); s.Waiting != 0 || s.Waits != 1 || s.WaitTime <= 0 || s.AcquireTimeouts != 1 {
		t.Errorf("after the wait: %+v", s)
	}
}

func TestDoubleReleasePanics(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, nil)
	l := mustAcquire(t, p)
	l.Release()
	defer func() {
		if recover() == nil {
			t.Error("second Release did not panic")
		}
	}()
	l.Release()
}

func TestStress(t *testing.T) {
	for _, order := range []Order{RoundRobin, LIFO} {
		t.Run(order.String(), func(t *testing.T) { stress(t, order) })
	}
}

func stress(t *testing.T, order Order) {
	d := &dialer{delay: 100 * time.Microsecond}
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Order = order
		c.Size = 8
		c.MinIdle = 2
		c.MaxDials = 3
		c.MaxLifetime = 20 * time.Millisecond
		c.IdleTimeout = 10 * time.Millisecond
		c.AcquireTimeout = 50 * time.Millisecond
	})
	var inUse sync.Map
	var wg sync.WaitGroup
	var timeouts atomic.Int64
	for g := range 50 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				ctx := context.Background()
				var cancel context.CancelFunc = func() {}
				if r.IntN(10) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(200))*time.Microsecond)
				}
				l, err := p.Acquire(ctx)
				cancel()
				if err != nil {
					var te *AcquireTimeoutError
					if errors.As(err, &te) {
						timeouts.Add(1)
					} else if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire: %v", err)
						return
					}
					continue
				}
				if _, dup := inUse.LoadOrStore(l.Conn(), true); dup {
					t.Errorf("conn %d leased twice", l.Conn().id)
				}
				if l.Conn().closed.Load() {
					t.Errorf("conn %d closed", l.Conn().id)
				}
				if r.IntN(4) == 0 {
					time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
				}
				inUse.Delete(l.Conn())
				if r.IntN(20) == 0 {
					l.Destroy()
				} else {
					l.Release()
				}
			}
		})
	}
	wg.Wait()
	// Stat reads the open and the idle counts one after the other: a
	// connection the maintenance loop dials to refill min_idle can be
	// open and not yet idle in between, so wait for a quiet moment.
	var s Stat
	eventually(t, "no connection in use", func() bool { s = p.Stat(); return s.InUse == 0 })
	if s.Open > 8 || s.AcquireTimeouts != timeouts.Load() {
		t.Errorf("stat %+v (timeouts seen %d)", s, timeouts.Load())
	}
	p.Close()
	eventually(t, "all conns closed", func() bool { return d.openCount() == 0 })
	s = p.Stat()
	if s.Open != 0 || s.Dialing != 0 || s.Dials-s.DialErrors != s.Destroyed {
		t.Errorf("after Close: %+v", s)
	}
	t.Logf("%+v", s)
}

// The acquire-release round trip of one statement, in both orders:
// uncontended, and with 8×GOMAXPROCS goroutines on 8 connections.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, order := range []Order{RoundRobin, LIFO} {
		b.Run(order.String(), func(b *testing.B) {
			d := &dialer{}
			roundTrips(b, newPool(b, d, func(c *Config[*fakeConn]) { c.Size = 8; c.Order = order }))
		})
	}
}

// roundTrips acquires and releases a connection of p b.N times.
func roundTrips(b *testing.B, p *Pool[*fakeConn]) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := p.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	for _, order := range []Order{RoundRobin, LIFO} {
		b.Run(order.String(), func(b *testing.B) {
			d := &dialer{}
			p := newPool(b, d, func(c *Config[*fakeConn]) {
				c.Order = order
				c.Size = 8
				c.MinIdle = 8
				c.AcquireTimeout = 10 * time.Second
			})
			eventually(b, "warm", func() bool { return p.Stat().Idle == 8 })
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(8) // 8×GOMAXPROCS goroutines on 8 connections
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := p.Acquire(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					l.Release()
				}
			})
			b.StopTimer()
			s := p.Stat()
			b.ReportMetric(float64(s.Waits)/float64(b.N), "waits/op")
		})
	}
}

func TestSetTimeouts(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) {
		c.Size = 1
		c.AcquireTimeout = time.Hour
		c.IdleTimeout = time.Hour
	})
	held := mustAcquire(t, p)
	if err := p.SetTimeouts(Timeouts{AcquireTimeout: 20 * time.Millisecond, IdleTimeout: -1}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := p.Acquire(context.Background())
	var te *AcquireTimeoutError
	if !errors.As(err, &te) || time.Since(start) > 10*time.Second {
		t.Fatalf("after SetTimeouts: %v after %v, want the new acquire timeout", err, time.Since(start))
	}
	if p.idleTimeout() != 0 {
		t.Errorf("idle timeout %v, want off", p.idleTimeout())
	}
	if err := p.SetTimeouts(Timeouts{AcquireTimeout: -1}); err == nil {
		t.Error("a negative acquire timeout was accepted")
	}
	held.Release()
}

// TestCloseWaitsForCloses checks that connections are closed (in the
// background, as they are destroyed) by the time Close returns when none
// is leased.
func TestCloseWaitsForCloses(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.MinIdle = 3 })
	eventually(t, "warm", func() bool { return p.Stat().Idle == 3 })
	l := mustAcquire(t, p)
	l.Destroy()
	p.Close()
	if n := d.openCount(); n != 0 {
		t.Errorf("%d connections still open after Close", n)
	}
}
