package gateway

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/internal/ioloop"
	"github.com/directgate/directgate/pools"
)

// Waiting for a pooled connection on a loop. With many clients on few
// connections (multiplexing) most statements find every connection busy.
// A session on a goroutine then waits in the pool's Acquire. One on a
// loop waiting there would cost a goroutine, a timer and two wake-ups per
// statement (through Session.blocking), while the connection it waits
// for is most often given back by another session of the same loop. So
// it waits on its loop instead, in a queue of that loop's waiters for
// the pool (connQueue), parked (ioloop.Task.Park):
//
//   - A session of the loop done with a connection passes it straight to
//     the first waiter (Session.passLease) when the pool would keep it and
//     nobody waits in Acquire (pools.Lease.Pass); the waiter resumes
//     in the same round of the loop. No lock, no system call.
//   - One waiter, the poller, parks with a timer of connPoll. When it
//     fires it looks after what the loop alone does not see: a connection
//     given back to the pool by a session elsewhere (on a goroutine, on
//     another loop, or released because Acquire calls waited) goes to
//     the first waiter; with room for a dial, the first waiter leaves to
//     dial in Acquire; a first waiter past the pool's acquire_timeout
//     leaves with the pool's timeout error. The poller is the newest
//     waiter when it starts polling: it stays longest.
//   - A KILL QUERY, or the session's end, wakes the session through its
//     statement context; it leaves the queue and lets Acquire report the
//     cancellation.
//
// The wait counts in the pool's waits and queue wait as one in Acquire
// does (pools.OutsideWait), and its outcome in
// directgate_io_loop_connection_waits_total.

// connPoll is how often the poller of a connection queue looks at the
// pool.
const connPoll = time.Millisecond

// connWaitOutcome is how a wait of a session on a loop for a pooled
// connection ended (the outcome label of
// directgate_io_loop_connection_waits_total).
type connWaitOutcome uint8

const (
	connPassed    connWaitOutcome = iota // a session of the loop passed its connection on
	connFound                            // the poller found it idle in the pool
	connAcquire                          // left to wait in the pool's Acquire
	connTimeout                          // pool.acquire_timeout passed
	connCancelled                        // KILL QUERY, the session's end
	numConnWaitOutcomes
)

var connWaitNames = [numConnWaitOutcomes]string{"passed", "found", "acquire", "timeout", "cancelled"}

func (o connWaitOutcome) String() string { return connWaitNames[o] }

// loopWaits are the connection queues of one loop, by pool. Only the
// loop's thread touches them.
type loopWaits map[*pools.Pool[*backendConn]]*connQueue

// connQueue is the sessions of one loop waiting for a connection of one
// pool, first come first served.
type connQueue struct {
	waiters []*Session
	// poller is the waiter that parks with a timer and polls the pool;
	// nil while nobody waits.
	poller *Session
}

// connWaiter is a session's part in a connection queue.
type connWaiter struct {
	q *connQueue // the queue it waits in; nil when out of it
	// deadline is when its wait times out (pool.acquire_timeout).
	deadline time.Time
	// lease, once the session is out of the queue, is what it was given
	// (nil: none), and outcome how its wait ended.
	lease   *pools.Lease[*backendConn]
	outcome connWaitOutcome
	// parked is the session's task while it waits, for its statement
	// context's end to wake it (from any goroutine).
	parked atomic.Pointer[ioloop.Task]
	// wakeOn is the statement context whose end wakes the session (one
	// context.AfterFunc per context, not per wait).
	wakeOn context.Context
}

// waitOnLoop waits on the session's loop for a connection of pool,
// which is busy (see the comment at the top). done is false when the
// session should wait in pool.Acquire instead: a dial may start, the
// statement was cancelled (Acquire then says so) or the loop closes.
func (ss *Session) waitOnLoop(pool *pools.Pool[*backendConn]) (l *pools.Lease[*backendConn], done bool, err error) {
	ctx := ss.statementContext()
	w := &ss.connWait
	if w.wakeOn != ctx {
		w.wakeOn = ctx
		context.AfterFunc(ctx, func() {
			if t := w.parked.Load(); t != nil {
				t.WakeAsync()
			}
		})
	}
	q := ss.loopWaits[pool]
	if q == nil {
		q = &connQueue{}
		ss.loopWaits[pool] = q
	}
	pw := pool.WaitOutside()
	defer pw.End()
	w.deadline, w.lease = pw.Deadline(), nil
	q.push(ss)
	w.parked.Store(ss.task)
	defer w.parked.Store(nil)
	for {
		if w.q == nil { // out of the queue: what did it get?
			if len(q.waiters) == 0 && pool.Closed() {
				delete(ss.loopWaits, pool) // a reload removed the backend
			}
			ss.srv.metrics.connWait(w.outcome)
			switch w.outcome {
			case connPassed, connFound:
				l, w.lease = w.lease, nil
				return l, true, nil
			case connTimeout:
				return nil, true, pw.TimeoutError()
			}
			return nil, false, nil // connAcquire
		}
		if ctx.Err() != nil {
			q.leave(ss, connCancelled)
			continue
		}
		var until time.Time // a waiter not polling waits to be woken
		if q.poller == ss {
			q.poll(pool, time.Now())
			if w.q == nil {
				continue
			}
			until = time.Now().Add(connPoll)
		}
		if err := ss.task.Park(until); err != nil { // the loop closes
			q.leave(ss, connAcquire)
		}
	}
}

// push queues ss; a queue without a poller gets ss as its poller.
func (q *connQueue) push(ss *Session) {
	ss.connWait.q = q
	q.waiters = append(q.waiters, ss)
	if q.poller == nil {
		q.poller = ss
	}
}

// poll is the poller's look at the pool at now: the first waiters get
// the connections found idle, or leave timed out, or all leave for
// Acquire when the pool is closed; and when the pool is no longer busy
// (room for a dial) one of them leaves for Acquire (one a poll: it dials
// before the pool is seen again).
func (q *connQueue) poll(pool *pools.Pool[*backendConn], now time.Time) {
	for len(q.waiters) > 0 {
		first := q.waiters[0]
		if l, ok := pool.TryAcquire(); ok {
			first.connWait.lease = l
			q.leave(first, connFound)
			continue
		}
		switch {
		case pool.Closed(): // a reload removed the backend: Acquire says so
			q.leave(first, connAcquire)
		case !now.Before(first.connWait.deadline):
			q.leave(first, connTimeout)
		case !pool.Busy():
			q.leave(first, connAcquire)
			return
		default:
			return
		}
	}
}

// pass gives l to the first waiter, if any; it reports whether it did.
func (q *connQueue) pass(l *pools.Lease[*backendConn]) bool {
	if len(q.waiters) == 0 {
		return false
	}
	first := q.waiters[0]
	first.connWait.lease = l
	q.leave(first, connPassed)
	return true
}

// leave takes ss out of the queue with outcome and wakes it (a session
// leaving by itself is awake: the wake does nothing). A poller that
// leaves hands polling to the newest waiter.
func (q *connQueue) leave(ss *Session, outcome connWaitOutcome) {
	for i, w := range q.waiters {
		if w != ss {
			continue
		}
		if i == 0 { // the usual: the first served
			q.waiters[0] = nil
			q.waiters = q.waiters[1:]
		} else {
			copy(q.waiters[i:], q.waiters[i+1:])
			q.waiters[len(q.waiters)-1] = nil
			q.waiters = q.waiters[:len(q.waiters)-1]
		}
		break
	}
	ss.connWait.q, ss.connWait.outcome = nil, outcome
	ss.task.Wake()
	if q.poller == ss {
		q.poller = nil
		if n := len(q.waiters); n > 0 {
			q.poller = q.waiters[n-1]
			q.poller.task.Wake() // to park again, with the poll's timer
		}
	}
}

// passLease passes l, which the session on a loop is done with (and gave
// back to goroutines: unleased), to a session of the same loop waiting
// for a connection of its pool, if the pool allows (pools.Lease.Pass);
// it reports whether it did.
func (ss *Session) passLease(l *pools.Lease[*backendConn]) bool {
	if ss.task == nil {
		return false
	}
	q := ss.loopWaits[l.Pool()]
	if q == nil || len(q.waiters) == 0 || !l.Pass() {
		return false
	}
	return q.pass(l)
}
