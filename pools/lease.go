package pools

import (
	"time"

	"github.com/jackc/puddle/v2"
)

// Lease is a connection leased from a Pool by Acquire: a seat of the
// pool's puddle pool, holding the connection. The holder owns it until it
// calls Release, Destroy or Retire, exactly once; after that the Lease
// must not be used, not even for another Release: puddle reuses the seat
// for the next holder (under RoundRobin with another connection), so a
// stale Lease would act on someone else's lease.
type Lease[T Conn] struct {
	p   *Pool[T]
	g   *generation[T]
	res *puddle.Resource[*Lease[T]]
	// e is the seat's connection: nil while the seat is idle and its
	// connection waits in the round-robin queue.
	e *entry[T]
	// leased is true while a caller holds the lease.
	leased bool
}

// Conn returns the leased connection.
func (l *Lease[T]) Conn() T { return l.e.conn }

// CreatedAt returns when the connection was established.
func (l *Lease[T]) CreatedAt() time.Time { return l.e.created }

// IdleSince returns when the connection last went idle (for a connection
// never released, when it was dialed).
func (l *Lease[T]) IdleSince() time.Time { return l.e.idleSince }

// Pool returns the pool l is a lease of.
func (l *Lease[T]) Pool() *Pool[T] { return l.p }

// Release returns the connection to the idle connections: under
// RoundRobin last in the queue, under LIFO on top of puddle's stack; a
// caller waiting in Acquire gets it first. It closes the connection
// instead when it is past its lifetime, when its budget unit is wanted by
// another pool, or when the pool is closed; after a Resize it moves to
// the new size, or closes when that is full. Release panics if the lease
// is not held.
func (l *Lease[T]) Release() {
	if !l.leased {
		panic("pools: Release of a lease not held (released or destroyed already)")
	}
	l.leased = false
	p := l.p
	now := time.Now()
	e := l.e
	switch {
	case p.closed.Load() || e.expired(now):
		p.discard(l)
	case p.budget != nil && p.budget.handOver(p):
		p.discard(l)
	case l.g != p.gen.Load():
		l.e = nil
		l.res.Hijack()
		e.idleSince = now
		p.adopt(e)
		p.wakeWaiters(1) // the new generation may have room now
	default:
		e.idleSince = now
		if p.handOff(l) {
			return
		}
		if p.Order() == RoundRobin {
			// Queued before the seat goes idle: an empty idle seat
			// always finds a connection in the queue.
			p.queueIdle(e)
			l.e = nil
		}
		l.res.Release()
		// A caller that queued for a hand-off after handOff looked, but
		// before the connection went idle, missed it: it looks again.
		p.wakeWaiters(1)
		if p.budgetWaiters.Load() > 0 {
			p.signalRoom()
		}
	}
}

// Destroy closes the connection and frees its seat, for a connection that
// is broken or in an unknown state. Destroy panics if the lease is not
// held.
func (l *Lease[T]) Destroy() {
	if !l.leased {
		panic("pools: Destroy of a lease not held (released or destroyed already)")
	}
	l.leased = false
	l.e.unsound = true
	l.p.discard(l)
}

// Retire closes the connection and frees its seat, for a connection at
// rest that must not serve again (its server holds state the pool cannot
// clear): it quits, where Destroy closes (see Quitter). Retire panics if
// the lease is not held.
func (l *Lease[T]) Retire() {
	if !l.leased {
		panic("pools: Retire of a lease not held (released or destroyed already)")
	}
	l.leased = false
	l.p.discard(l)
}

// Pass reports whether l, which its holder is done with, may go from the
// holder straight to another caller that waits for a connection of the
// pool outside Acquire (see WaitOutside), as Release would hand it to an
// Acquire call that waits: false when Release would close or move it
// instead (the pool closed or resized, the connection past its lifetime,
// its budget unit wanted by another pool), and false while Acquire calls
// wait (they come first: Release then). When it may, l counts as
// released and taken again now (IdleSince), and stays leased: the new
// holder releases it. Pass panics if the lease is not held.
func (l *Lease[T]) Pass() bool {
	if !l.leased {
		panic("pools: Pass of a lease not held (released or destroyed already)")
	}
	p := l.p
	if p.waiting.Load() > 0 || p.closed.Load() || l.g != p.gen.Load() || (p.budget != nil && p.budget.handOver(p)) {
		return false
	}
	now := time.Now()
	if l.e.expired(now) {
		return false
	}
	l.e.idleSince = now
	return true
}

// OutsideWait is a wait for a connection outside Acquire, counted as one
// in Acquire is (Stat's Waits and WaitTime, QueueWait): a caller that
// must not block (a task of an event loop) waits for a holder to pass it
// a lease (Lease.Pass) or for TryAcquire to find one idle.
type OutsideWait[T Conn] struct {
	p     *Pool[T]
	start time.Time
}

// WaitOutside starts counting a wait outside Acquire; call End once when
// it ends.
func (p *Pool[T]) WaitOutside() OutsideWait[T] {
	start := time.Now()
	p.waits.Add(1)
	p.outside.Add(1)
	p.queue.begin(int64(start.Sub(p.epoch)))
	return OutsideWait[T]{p: p, start: start}
}

// Deadline is when the wait times out: the pool's AcquireTimeout after it
// started.
func (w OutsideWait[T]) Deadline() time.Time { return w.start.Add(w.p.acquireTimeout()) }

// TimeoutError is the error Acquire returns when its wait times out, for
// the wait's caller to return when Deadline has passed; it counts the
// timeout as Acquire's are.
func (w OutsideWait[T]) TimeoutError() error {
	w.p.acquireTimeouts.Add(1)
	return w.p.timeoutError(false)
}

// End stops counting the wait.
func (w OutsideWait[T]) End() {
	p := w.p
	end := time.Now()
	p.queue.end(int64(w.start.Sub(p.epoch)), int64(end.Sub(p.epoch)))
	p.waitNanos.Add(int64(end.Sub(w.start)))
	p.outside.Add(-1)
}
