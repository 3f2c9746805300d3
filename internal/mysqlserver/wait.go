package mysqlserver

import (
	"math"
	"net"
	"sync/atomic"
	"time"
)

// SweepEvery is how often a Server calls the Sweep of its connections
// that have one: the precision of the limits it enforces (an idle
// connection is closed at most this late).
const SweepEvery = 100 * time.Millisecond

// Sweeper is implemented by a Conn that has limits to enforce from outside
// its goroutine: the Server calls Sweep about every SweepEvery, from one
// goroutine for all its connections, with the time of the sweep. Sweep
// must be quick and must not block. Checks made this way cost the
// connection no timer per command (a timer reset and stopped per command
// costs more than a sweep over thousands of connections ten times a
// second).
type Sweeper interface {
	Sweep(now time.Time)
}

// Wait is a connection's wait for its next command, shared by the command
// loop, which begins and ends it, and the goroutines that may end it: a
// Sweep that finds its idle limit passed (Expire) and a shutdown
// (Interrupt). The zero Wait is busy (not waiting).
type Wait struct {
	// state is 0 while busy, the deadline of the wait (Unix nanoseconds;
	// math.MaxInt64 without a limit) while waiting, and ended once Expire
	// or Interrupt ended the wait.
	state atomic.Int64
}

// ended is a Wait's state once Expire or Interrupt ended it.
const ended = -1

// Busy reports whether the connection is not waiting for a command.
func (w *Wait) Busy() bool { return w.state.Load() <= 0 }

// begin starts a wait that may last until deadline (zero: no limit).
func (w *Wait) begin(deadline time.Time) {
	d := int64(math.MaxInt64)
	if !deadline.IsZero() {
		d = max(deadline.UnixNano(), 1)
	}
	w.state.Store(d)
}

// end ends the wait, the command having arrived (or the read failed). It
// reports false when Expire or Interrupt ended the wait first: the socket's
// read deadline is then set to fail, and the connection must end.
func (w *Wait) end() bool {
	for {
		s := w.state.Load()
		if s == ended {
			return false
		}
		if w.state.CompareAndSwap(s, 0) {
			return true
		}
	}
}

// Interrupt ends a wait in progress by making the read of socket fail (its
// read deadline set to now). It reports false, and does nothing, when the
// connection is not waiting.
func (w *Wait) Interrupt(socket net.Conn) bool { return w.endBy(math.MaxInt64, socket) }

// Expire is Interrupt for a wait whose deadline is at or before now.
func (w *Wait) Expire(now time.Time, socket net.Conn) bool {
	return w.endBy(now.UnixNano(), socket)
}

// endBy is Interrupt for a wait whose deadline is at or before by (Unix
// nanoseconds).
func (w *Wait) endBy(by int64, socket net.Conn) bool {
	for {
		s := w.state.Load()
		if s <= 0 || s > by {
			return false
		}
		if w.state.CompareAndSwap(s, ended) {
			InterruptIdle(socket)
			return true
		}
	}
}
