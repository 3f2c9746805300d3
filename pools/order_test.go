package pools

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/puddle/v2"
)

// puddle hands out the resource released last (its idle resources are a
// stack): round robin cannot be had from it, which is why the pool keeps
// the round-robin queue beside it (see the package documentation). Were
// this to fail, puddle would hand out in turn and the queue could go.
func TestPuddleHandsOutLastReleased(t *testing.T) {
	n := 0
	pud, err := puddle.NewPool(&puddle.Config[int]{
		Constructor: func(context.Context) (int, error) { n++; return n, nil },
		Destructor:  func(int) {},
		MaxSize:     3,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pud.Close()
	ctx := context.Background()
	var held []*puddle.Resource[int]
	for range 3 {
		r, err := pud.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	for _, r := range held { // 1, 2, 3
		r.Release()
	}
	var got []int
	for range 3 {
		r, err := pud.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Value())
		defer r.Release()
	}
	if got[0] != 3 || got[1] != 2 || got[2] != 1 {
		t.Fatalf("puddle handed out %v after releasing 1, 2, 3; want 3, 2, 1 (last in, first out)", got)
	}
}

// Round robin hands out the connection idle longest: released in a
// given order, they come back in that order.
func TestRoundRobinOrder(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 3; c.Order = RoundRobin })
	var ls []*Lease[*fakeConn]
	for range 3 {
		ls = append(ls, mustAcquire(t, p))
	}
	reuse := func(order ...*Lease[*fakeConn]) []*Lease[*fakeConn] {
		t.Helper()
		var conns []*fakeConn
		for _, l := range order {
			conns = append(conns, l.Conn())
			l.Release()
		}
		var again []*Lease[*fakeConn]
		for _, want := range conns {
			got := mustAcquire(t, p)
			if got.Conn() != want {
				t.Fatalf("got conn %d, want %d (idle longest)", got.Conn().id, want.id)
			}
			again = append(again, got)
		}
		return again
	}
	ls = reuse(ls[0], ls[1], ls[2])
	ls = reuse(ls[2], ls[0], ls[1])
	for _, l := range ls {
		l.Release()
	}
	// One user at a time: every connection in turn.
	var seen []int
	for range 6 {
		l := mustAcquire(t, p)
		seen = append(seen, l.Conn().id)
		l.Release()
	}
	for i := 3; i < 6; i++ {
		if seen[i] != seen[i-3] {
			t.Fatalf("one user saw conns %v: want the three in turn", seen)
		}
	}
	if seen[0] == seen[1] || seen[1] == seen[2] || seen[0] == seen[2] {
		t.Fatalf("one user saw conns %v: want the three in turn", seen)
	}
	if n := d.started.Load(); n != 3 {
		t.Errorf("dials = %d, want 3", n)
	}
}

// The order changes at run time; the connections idle at the change are
// handed out, and follow the new order from their next release.
func TestSetOrder(t *testing.T) {
	d := &dialer{}
	p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 3; c.Order = LIFO })
	var conns []*fakeConn
	var ls []*Lease[*fakeConn]
	for range 3 {
		l := mustAcquire(t, p)
		ls = append(ls, l)
		conns = append(conns, l.Conn())
	}
	for _, l := range ls {
		l.Release()
	}
	p.SetOrder(RoundRobin)
	if o := p.Stat().Order; o != RoundRobin {
		t.Fatalf("order %v after SetOrder(RoundRobin)", o)
	}
	// Each idle seat still holds its connection: last released first,
	// and, released, they queue in turn.
	ls = ls[:0]
	for i := 2; i >= 0; i-- {
		l := mustAcquire(t, p)
		if l.Conn() != conns[i] {
			t.Fatalf("got conn %d, want %d", l.Conn().id, conns[i].id)
		}
		ls = append(ls, l)
	}
	for _, l := range ls { // 2, 1, 0
		l.Release()
	}
	for i := 2; i >= 0; i-- {
		l := mustAcquire(t, p)
		if l.Conn() != conns[i] {
			t.Fatalf("round robin: got conn %d, want %d", l.Conn().id, conns[i].id)
		}
		defer l.Release()
	}
	p.SetOrder(LIFO)
}

// puddle's books are the connections: under churn, Resize and budget
// moves, in both orders, the pool's Open and the connections its dialer
// opened and nobody closed agree whenever the pool is at rest, and never
// more than the size and the budget allow are open.
func TestBooksMatchConnections(t *testing.T) {
	for _, order := range []Order{RoundRobin, LIFO} {
		t.Run(order.String(), func(t *testing.T) {
			budget := NewBudget(10)
			// One count of both pools' connections, taken at once (the
			// sum of two counts read one after the other may see a close
			// in one pool after the next dial in the other).
			var open, maxOpen atomic.Int32
			da, db := &dialer{open: &open, maxOpen: &maxOpen}, &dialer{open: &open, maxOpen: &maxOpen}
			mod := func(c *Config[*fakeConn]) {
				c.Order = order
				c.Size = 8
				c.MinIdle = 2
				c.MaxDials = 3
				c.IdleTimeout = 20 * time.Millisecond
				c.MaxLifetime = 60 * time.Millisecond
				c.AcquireTimeout = 100 * time.Millisecond
				c.Budget = budget
			}
			pa, pb := newPool(t, da, mod), newPool(t, db, mod)
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Go(func() { // the operator and the fleet
				r := rand.New(rand.NewPCG(7, 7))
				for i := 0; !stop.Load() && i < 400; i++ {
					switch r.IntN(3) {
					case 0:
						pa.Resize(1+r.IntN(8), r.IntN(3))
					case 1:
						pb.Resize(1+r.IntN(8), r.IntN(3))
					default:
						budget.SetLimit(4 + r.IntN(10))
					}
					time.Sleep(time.Millisecond)
				}
			})
			for g := range 16 {
				p := pa
				if g%2 == 1 {
					p = pb
				}
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 3))
					for range 150 {
						l, err := p.Acquire(context.Background())
						if err != nil {
							continue // timeouts while the budget is small
						}
						if r.IntN(3) == 0 {
							time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
						}
						if r.IntN(15) == 0 {
							l.Destroy()
						} else {
							l.Release()
						}
					}
				})
			}
			wg.Wait()
			stop.Store(true)
			budget.SetLimit(6)
			pa.Resize(4, 1)
			pb.Resize(4, 1)
			defer func() {
				if t.Failed() {
					for _, p := range []*Pool[*fakeConn]{pa, pb} {
						p.idleMu.Lock()
						q := p.idle.n
						p.idleMu.Unlock()
						t.Logf("%+v queue %d", p.Stat(), q)
					}
					t.Logf("open a %d b %d, budget used %d", da.openCount(), db.openCount(), budget.Used())
				}
			}()
			eventually(t, "books and connections to agree at rest", func() bool {
				sa, sb := pa.Stat(), pb.Stat()
				return sa.InUse == 0 && sb.InUse == 0 && sa.Dialing == 0 && sb.Dialing == 0 &&
					sa.Open == da.openCount() && sb.Open == db.openCount() &&
					sa.Open+sb.Open <= 6 && budget.Used() == sa.Open+sb.Open
			})
			// A budget unit comes back only after its connection's close
			// returned, so never more open at once than 13, the largest
			// limit.
			if m := maxOpen.Load(); m > 13 {
				t.Errorf("%d connections open at once, budget at most 13", m)
			}
			t.Logf("pa %+v", pa.Stat())
		})
	}
}

// The ring keeps first-in, first-out order through growth, pushFront and
// removeFirst.
func TestRing(t *testing.T) {
	var q ring[int]
	for i := range 10 {
		q.push(i)
	}
	q.pushFront(-1)
	for range 3 {
		q.pop()
	}
	q.pushFront(-2)
	q.push(10)
	if got := q.removeFirst(1, func(x int) bool { return x == 5 }); len(got) != 1 || got[0] != 5 {
		t.Fatalf("removeFirst took %v", got)
	}
	var got []int
	for q.n > 0 {
		got = append(got, q.pop())
	}
	want := []int{-2, 2, 3, 4, 6, 7, 8, 9, 10}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if q.pop() != 0 {
		t.Error("pop of an empty ring is not the zero value")
	}
}
