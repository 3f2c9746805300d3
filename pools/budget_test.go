package pools

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Two pools share a budget of 3: when it is spent, a waiter of one pool
// gets the connection the other releases (closed and dialed again for
// it), and an idle connection of a sibling is reclaimed at once.
func TestBudgetSharedByPools(t *testing.T) {
	b := NewBudget(3)
	da, db := &dialer{}, &dialer{}
	pa := newPool(t, da, func(c *Config[*fakeConn]) { c.Budget = b })
	pb := newPool(t, db, func(c *Config[*fakeConn]) { c.Budget = b; c.AcquireTimeout = 5 * time.Second })

	held := []*Lease[*fakeConn]{mustAcquire(t, pa), mustAcquire(t, pa), mustAcquire(t, pa)}
	if b.Used() != 3 {
		t.Fatalf("used %d, want 3", b.Used())
	}
	got := make(chan *Lease[*fakeConn])
	go func() {
		l, err := pb.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, "pool b to wait on the budget", func() bool { return pb.budgetWaiting() })
	held[0].Release() // handed over: closed, so b can dial
	lb := <-got
	if n := da.openCount() + db.openCount(); n > 3 {
		t.Fatalf("%d connections open, budget 3", n)
	}
	if da.openCount() != 2 {
		t.Fatalf("pool a has %d open, want 2 (one handed over)", da.openCount())
	}

	// Idle reclaim: a releases everything; b needs two more.
	held[1].Release()
	held[2].Release()
	l2, l3 := mustAcquire(t, pb), mustAcquire(t, pb)
	eventually(t, "pool a's idle connections reclaimed", func() bool { return da.openCount() == 0 })
	if db.openCount() != 3 || b.Used() != 3 {
		t.Fatalf("pool b open %d, used %d; want 3 and 3", db.openCount(), b.Used())
	}
	lb.Release()
	l2.Release()
	l3.Release()
}

// Lowering the limit closes idle connections at once and leased ones when
// released; raising it lets the pool dial again.
func TestBudgetSetLimit(t *testing.T) {
	b := NewBudget(4)
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Budget = b })
	ls := []*Lease[*fakeConn]{mustAcquire(t, p), mustAcquire(t, p), mustAcquire(t, p), mustAcquire(t, p)}
	ls[0].Release()
	ls[1].Release()
	b.SetLimit(1)
	eventually(t, "idle connections above the limit closed", func() bool { return d.openCount() == 2 })
	ls[2].Release()
	eventually(t, "the released connection above the limit closed", func() bool { return d.openCount() == 1 })
	ls[3].Release()
	eventually(t, "down to the limit", func() bool { return d.openCount() == 1 && b.Used() == 1 })

	b.SetLimit(0)
	eventually(t, "no connection at limit 0", func() bool { return d.openCount() == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire at limit 0: %v, want a deadline", err)
	}
	b.SetLimit(2)
	l := mustAcquire(t, p)
	l.Release()
}

// Warm-up stays within the budget.
func TestBudgetBoundsWarmUp(t *testing.T) {
	b := NewBudget(2)
	d := &dialer{}
	newPool(t, d, func(c *Config[*fakeConn]) { c.Budget = b; c.MinIdle = 4 })
	eventually(t, "warm-up", func() bool { return d.openCount() == 2 })
	time.Sleep(20 * time.Millisecond)
	if n := d.openCount(); n != 2 {
		t.Fatalf("%d open after warm-up, budget 2", n)
	}
}

// Under concurrent load on three pools, with the limit moving, the
// connections open never exceed the limit in force (sampled), and every
// acquire eventually succeeds.
func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(5)
	// live counts connections dialed and not yet closed, across pools, in
	// one atomic so that the monitor's samples are exact.
	var live atomic.Int32
	var ps []*Pool[*fakeConn]
	for range 3 {
		d := &dialer{}
		ps = append(ps, newPool(t, d, func(c *Config[*fakeConn]) {
			c.Budget, c.Size, c.AcquireTimeout = b, 8, 10*time.Second
			c.Dial = func(ctx context.Context) (*fakeConn, error) {
				fc, err := d.Dial(ctx)
				if err == nil {
					live.Add(1)
					fc.onClose = func() { live.Add(-1) }
				}
				return fc, err
			}
		}))
	}
	open := func() int { return int(live.Load()) }
	var limit atomic.Int32
	limit.Store(5)
	stop := make(chan struct{})
	var violations atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the monitor
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// The limit may have been raised meanwhile: compare with the
			// larger of before and after.
			before := limit.Load()
			n := open()
			if after := limit.Load(); n > int(max(before, after)) {
				violations.Add(1)
			}
		}
	}()
	var workers sync.WaitGroup
	for w := range 12 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			p := ps[w%3]
			for range 300 {
				l, err := p.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				}
				l.Release()
			}
		}()
	}
	for _, n := range []int{3, 6, 2, 5} {
		time.Sleep(20 * time.Millisecond)
		if int32(n) < limit.Load() {
			b.SetLimit(n) // lower: connections drain to n
			eventually(t, "draining to the lower limit", func() bool { return b.Used() <= n })
			limit.Store(int32(n))
		} else {
			limit.Store(int32(n))
			b.SetLimit(n)
		}
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	if v := violations.Load(); v > 0 {
		t.Fatalf("%d samples saw more connections open than the limit", v)
	}
}

// The budget on the hot path: Acquire and Release of an idle connection
// without one, with an unlimited one (every gateway pool has one) and with
// a cap that is not reached.
func BenchmarkAcquireReleaseBudget(b *testing.B) {
	for _, bc := range []struct {
		name   string
		budget *Budget
	}{{"none", nil}, {"unlimited", NewBudget(-1)}, {"capped", NewBudget(100)}} {
		b.Run(bc.name, func(b *testing.B) {
			roundTrips(b, newPool(b, &dialer{}, func(c *Config[*fakeConn]) { c.Size = 8; c.Budget = bc.budget }))
		})
	}
}

// A wait that ends for want of a budget unit says so: the budget's limit,
// not a slow backend.
func TestBudgetSpentTimeout(t *testing.T) {
	b := NewBudget(2)
	da, db := &dialer{}, &dialer{}
	pa := newPool(t, da, func(c *Config[*fakeConn]) { c.Budget = b })
	pb := newPool(t, db, func(c *Config[*fakeConn]) { c.Budget = b; c.AcquireTimeout = 50 * time.Millisecond })
	held := []*Lease[*fakeConn]{mustAcquire(t, pa), mustAcquire(t, pa)}
	_, err := pb.Acquire(context.Background())
	var te *AcquireTimeoutError
	if !errors.As(err, &te) || te.Budget != 2 || !strings.Contains(err.Error(), "max_backend_connections: 2") {
		t.Fatalf("got %v, want a timeout naming the budget", err)
	}
	for _, l := range held {
		l.Release()
	}
}
