package pools

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// QueueWait is 0 while nobody waits, follows a stall at once (the
// waiters' mean age), remembers what the waits lasted while calls still
// wait (the recent average), and forgets them when the queue is gone.
func TestQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &dialer{}
		p := newPool(t, d, func(c *Config[*fakeConn]) { c.Size = 1; c.AcquireTimeout = time.Hour })
		held := mustAcquire(t, p)
		if w := p.QueueWait(time.Now()); w != 0 {
			t.Fatalf("no waiter: QueueWait %v", w)
		}
		// Two waiters, one 300ms and one 100ms old: mean 200ms.
		var wg sync.WaitGroup
		got := make(chan *Lease[*fakeConn], 2)
		wait := func() {
			wg.Go(func() {
				l, err := p.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				got <- l
			})
			synctest.Wait()
		}
		wait()
		time.Sleep(200 * time.Millisecond)
		wait()
		time.Sleep(100 * time.Millisecond)
		if w := p.QueueWait(time.Now()); w != 200*time.Millisecond {
			t.Errorf("stall: QueueWait %v, want the waiters' mean age 200ms", w)
		}
		if s := p.Stat(); s.QueueWait != 200*time.Millisecond || s.Waiting != 2 {
			t.Errorf("Stat %+v", s)
		}
		// The first waiter is served after 300ms. The wait before it (the
		// first Acquire's, which dialed at once) ended 300ms earlier, so
		// the average is (1-1/e^0.3)*300ms, 78ms: the last waiter's age,
		// 100ms, wins.
		held.Release()
		l := <-got
		synctest.Wait()
		if w := p.QueueWait(time.Now()); w != 100*time.Millisecond {
			t.Errorf("after a 300ms wait: QueueWait %v, want the waiter's age 100ms", w)
		}
		if a := p.queue.avg; a < float64(77*time.Millisecond) || a > float64(78*time.Millisecond) {
			t.Errorf("average %v, want 77.75ms", time.Duration(a))
		}
		time.Sleep(time.Second)
		if w := p.QueueWait(time.Now()); w != 1100*time.Millisecond {
			t.Errorf("1s later: QueueWait %v, want the waiter's age 1.1s", w)
		}
		l.Release()
		(<-got).Release()
		wg.Wait()
		if w := p.QueueWait(time.Now()); w != 0 {
			t.Errorf("queue gone: QueueWait %v, want 0", w)
		}
		// A new waiter after a quiet 10s: its own age; the old waits
		// have decayed to almost nothing.
		time.Sleep(10 * time.Second)
		held = mustAcquire(t, p)
		wait()
		time.Sleep(5 * time.Millisecond)
		if w := p.QueueWait(time.Now()); w != 5*time.Millisecond {
			t.Errorf("new stall after 10s: QueueWait %v, want 5ms", w)
		}
		held.Release()
		(<-got).Release()
		wg.Wait()
	})
}

// The recent average decays with time, exactly.
func TestQueueWaitsDecay(t *testing.T) {
	var q queueWaits
	ms := int64(time.Millisecond)
	q.begin(0)
	q.begin(0)
	q.end(0, 400*ms) // first wait: the average is 400ms
	if w := q.wait(400 * ms); w != 400*time.Millisecond {
		t.Errorf("wait %v, want 400ms", w)
	}
	// One decay time later the average is 400ms/e, 147ms; the other
	// waiter has waited 1.4s: the larger wins.
	if w := q.wait(1400 * ms); w != 1400*time.Millisecond {
		t.Errorf("wait %v, want the waiter's age 1.4s", w)
	}
	// The second wait, 1.4s, ends one decay time after the first: it
	// weighs 1-1/e. A new waiter's age (0) is less.
	q.end(0, 1400*ms)
	q.begin(1400 * ms)
	if w, want := q.wait(1400*ms), 400*0.36787944117144233+1400*(1-0.36787944117144233); w != time.Duration(want*float64(ms)) {
		t.Errorf("wait %v, want %.3fms", w, want)
	}
}
