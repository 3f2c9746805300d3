package pools

import (
	"context"
	"time"

	"github.com/jackc/puddle/v2"
)

// Hand-off: the wait of an Acquire call while every seat is leased.
//
// A caller that finds no idle connection and no room for a dial (every
// seat of the current generation leased: a multiplexed pool under load)
// would wait in puddle's Acquire: a context with the deadline (a timer and
// an entry in the parent's children), one more to end it when the
// generation retires, and puddle's semaphore (a channel made per waiter,
// a select, a close to wake it). On a gateway with many more clients than
// connections that wait happens for most statements, and it cost a tenth
// of the gateway's CPU. So such a caller waits in the pool's hand-off
// queue instead, and Release gives the connection straight to the first
// caller in it (first come, first served), through a channel and a timer
// the waiter keeps from one wait to the next: no context and no channel
// made per wait, one wake-up.
//
// Waiting there is safe because whatever could serve a waiter otherwise
// also looks at the queue:
//   - Release hands the connection over when anyone is queued (after the
//     budget's claim: a sibling pool waiting for a unit comes first, as
//     before). A Release that found the queue empty looks at it again
//     once its connection is idle and wakes the first waiter, and a caller
//     looks for an idle connection (TryAcquire) once more after it is
//     counted in the queue: whichever comes second sees the other.
//   - A seat that frees (discard: a connection closed for any reason)
//     wakes the first waiter to look again: it may dial now.
//   - Resize wakes every waiter to look at the new generation, Close to
//     find the pool closed.
//
// A waiter woken to look again goes through Acquire's steps once more and
// queues first if it must wait again: it keeps its turn.

// handWaiter is one Acquire call waiting in the hand-off queue.
type handWaiter[T Conn] struct {
	// ch gets what the waiter is handed: a lease, or nil to look again.
	// Capacity 1: the sender never blocks, and a value sent is there for
	// the waiter once it is out of the queue.
	ch chan *Lease[T]
	// timer takes the waiter out of the queue at the wait's deadline
	// (expire); kept stopped between waits.
	timer *time.Timer
	// queued is true while the waiter is in the queue; whoever takes it
	// out sends on ch. expired says the timer did. deadline is the
	// wait's: a timer of an earlier wait that fires late finds the
	// deadline of this one ahead and leaves it queued. Guarded by handMu.
	queued, expired bool
	deadline        time.Time
}

// getWaiter returns a waiter from the pool's free list, or a new one.
func (p *Pool[T]) getWaiter() *handWaiter[T] {
	p.handMu.Lock()
	if n := len(p.handFree); n > 0 {
		w := p.handFree[n-1]
		p.handFree = p.handFree[:n-1]
		p.handMu.Unlock()
		return w
	}
	p.handMu.Unlock()
	w := &handWaiter[T]{ch: make(chan *Lease[T], 1)}
	w.timer = time.AfterFunc(time.Hour, func() { p.expire(w) })
	w.timer.Stop()
	return w
}

// expire is w's timer: at the deadline it takes w out of the queue, as
// a Release would, with nothing.
func (p *Pool[T]) expire(w *handWaiter[T]) {
	p.handMu.Lock()
	if w.queued && !time.Now().Before(w.deadline) {
		p.handQ.removeFirst(1, func(x *handWaiter[T]) bool { return x == w })
		w.queued, w.expired = false, true
		p.handN.Add(-1)
		w.ch <- nil
	}
	p.handMu.Unlock()
}

// putWaiter keeps w, out of the queue with ch empty, for the next wait.
func (p *Pool[T]) putWaiter(w *handWaiter[T]) {
	p.handMu.Lock()
	w.expired = false
	p.handFree = append(p.handFree, w)
	p.handMu.Unlock()
}

// atSize reports whether g has all its seats: leased or idle, none left
// to dial. Dials in flight do not count: a caller that finds them waits
// in puddle's Acquire, which hands it the first to finish.
func (g *generation[T]) atSize() bool {
	st := g.pud.Stat()
	return int(st.AcquiredResources()+st.IdleResources()) >= g.size
}

// waitHandoff waits in the hand-off queue (first in it with first set),
// while g is at its size, for a released connection. It returns the
// lease handed over; or found, an idle seat it took (for take); or
// neither and a nil error when the caller should look again (a seat
// freed, the pool resized or closed); or ctx's end as the error; or
// timedOut at the deadline.
//
// A caller comes here when puddle's TryAcquire found nothing, which it
// also reports while callers wait in puddle's Acquire even with a seat
// idle: those take the idle seats, and this caller is served by the
// releases after.
func (p *Pool[T]) waitHandoff(ctx context.Context, g *generation[T], deadline time.Time, first bool) (l *Lease[T], found *puddle.Resource[*Lease[T]], timedOut bool, err error) {
	w := p.getWaiter()
	defer p.putWaiter(w)
	p.handMu.Lock()
	if first {
		p.handQ.pushFront(w)
	} else {
		p.handQ.push(w)
	}
	w.queued, w.deadline = true, deadline
	p.handN.Add(1)
	p.handMu.Unlock()
	// Look once more now that the queue counts this caller: a Release
	// that saw nobody queued may have made a connection idle, a discard
	// freed a seat, a Resize started a new generation, Close woke the
	// queue.
	if g != p.gen.Load() || p.closed.Load() || !g.atSize() {
		l, _ := p.leaveQueue(w)
		return l, nil, false, nil
	}
	if res, err := g.pud.TryAcquire(p.noDial); err == nil {
		if l, ok := p.leaveQueue(w); !ok && l != nil {
			l.Release() // handed one meanwhile: to the next waiter
		}
		return nil, res, false, nil
	}
	w.timer.Reset(time.Until(deadline))
	select {
	case l = <-w.ch:
		w.timer.Stop()
		p.handMu.Lock()
		timedOut = w.expired
		p.handMu.Unlock()
		return l, nil, timedOut, nil
	case <-ctx.Done():
	}
	w.timer.Stop()
	err = p.ctxError(context.Cause(ctx))
	l, ok := p.leaveQueue(w)
	if !ok && l != nil {
		l.Release() // handed over as the caller gave up: to the next waiter
	}
	return nil, nil, false, err
}

// leaveQueue takes w out of the queue; ok is false when someone already
// had (handed it l, nil to look again), and then w.ch is empty again.
func (p *Pool[T]) leaveQueue(w *handWaiter[T]) (l *Lease[T], ok bool) {
	p.handMu.Lock()
	if w.queued {
		p.handQ.removeFirst(1, func(x *handWaiter[T]) bool { return x == w })
		w.queued = false
		p.handN.Add(-1)
		p.handMu.Unlock()
		return nil, true
	}
	p.handMu.Unlock()
	return <-w.ch, false
}

// handOff gives l, which its holder released and the pool would keep, to
// the first waiter, if any; it reports whether it did. l stays leased.
// While other callers wait (in puddle's Acquire for a dial or a release,
// or for a budget unit) the connection goes to puddle instead: they came
// before any waiter of the queue (the pool was below its size then), and
// a queue served first would starve them while callers keep queueing.
// Release then wakes the first waiter to look again, in case nobody in
// puddle took the connection.
func (p *Pool[T]) handOff(l *Lease[T]) bool {
	if p.handN.Load() == 0 || p.inPuddle.Load() > 0 || p.budgetWaiters.Load() > 0 {
		return false
	}
	p.handMu.Lock()
	w := p.handQ.pop()
	if w == nil {
		p.handMu.Unlock()
		return false
	}
	w.queued = false
	p.handN.Add(-1)
	l.leased = true
	p.handoffs.Add(1)
	w.ch <- l
	p.handMu.Unlock()
	return true
}

// wakeWaiters wakes up to n waiters (n < 0: all) to look again.
func (p *Pool[T]) wakeWaiters(n int) {
	if p.handN.Load() == 0 {
		return
	}
	p.handMu.Lock()
	for ; n != 0; n-- {
		w := p.handQ.pop()
		if w == nil {
			break
		}
		w.queued = false
		p.handN.Add(-1)
		w.ch <- nil
	}
	p.handMu.Unlock()
}
