package pools

import (
	"errors"
	"sync"
	"time"
)

// A Pipe shares one leased connection among callers that each write a
// request to it before the answers of the requests before theirs are
// back (pipelining), and then read their own answer in turn, in the order
// of the writes. The server answers requests in the order it reads them,
// so turn k reads exactly the k-th answer, provided every turn before it
// read all of its own.
//
// The pipe knows nothing of the protocol. Send writes under the pipe's
// lock and queues the caller's Turn; Wait returns when the turns before
// it are done; Done hands the connection to the next turn. A turn that
// did not read its answer to the end (the client went away, the
// connection failed) must say so to Done: what is left of its answer is
// on the connection, and the next turn would read it as its own. The pipe
// is then broken: every turn queued behind fails in Wait with
// ErrPipeBroken, Send refuses new ones, and the call that ends the last
// outstanding turn reports the pipe dead: its connection must be
// destroyed. A write that fails breaks the pipe too.
//
// A request written behind another may carry a prelude: a request of
// its own, written before it, whose answer belongs to the turn before
// (say, "SHOW WARNINGS" for what that turn's request left on the
// connection, which the request behind would clear). The turn before
// reads it with TakePrelude when it wants it; otherwise the turn that
// carries it reads it (PreludeLeft) and drops it before its own answer.
//
// A Pipe never closes or releases its lease: its owner does, once, when
// a call reports the pipe dead (Send, Done or Retire): Destroy when it is
// Broken, Release when it was only retired.
type Pipe[C Conn] struct {
	lease *Lease[C]

	mu sync.Mutex
	// last is the newest outstanding turn (nil when none is).
	last *Turn
	// depth counts the outstanding turns: written and not done.
	depth int
	// broken: a turn did not read its answer to the end.
	broken bool
	// retired: Send refuses new turns; the owner takes the lease back
	// once depth is 0.
	retired bool
	// gone: dead was reported (deadNow), so it is reported once.
	gone bool
	// headSent is when the oldest outstanding turn's request was written,
	// lastSent when the newest request was.
	headSent, lastSent time.Time
}

// Turn is one request's place in a Pipe. A caller with one request in
// flight at a time can reuse its Turn from one request to the next: the
// pipe has let go of it when Done returns.
type Turn struct {
	// ready carries the hand-over from the turn before.
	ready chan struct{}
	// next is the turn queued right behind, set under the pipe's lock.
	next *Turn
	// brokenBefore: a turn before this one broke the pipe. Written
	// before ready is signalled, read after.
	brokenBefore bool
	// waiting: a turn before this one was outstanding when it was sent.
	waiting bool
	// sent is when the request was written.
	sent time.Time
	// prelude: the request was written with a prelude for the turn
	// before; preludeTaken: that turn read its answer (written by that
	// turn before ready is signalled, read after).
	prelude, preludeTaken bool
}

// Prelude reports that t's request was written with a prelude. Call it
// after Send.
func (t *Turn) Prelude() bool { return t.prelude }

// PreludeLeft reports that t's request carries a prelude whose answer
// the turn before left on the connection: t must read it, before its own
// answer. Call it after Wait.
func (t *Turn) PreludeLeft() bool { return t.prelude && !t.preludeTaken }

// ErrPipeBroken is returned by Send and Wait when the pipe is broken: the
// request was not sent, or its answer can no longer be told apart from
// the rest of another one.
var ErrPipeBroken = errors.New("pools: the pipelined connection was abandoned in the middle of an answer")

// ErrPipeRetired is returned by Send on a pipe its owner retired.
var ErrPipeRetired = errors.New("pools: the pipelined connection is retired")

// NewPipe makes a pipe of lease l, just taken (IdleCheck counts its idle
// time from now). The caller keeps ownership of l.
func NewPipe[C Conn](l *Lease[C], now time.Time) *Pipe[C] { return &Pipe[C]{lease: l, lastSent: now} }

// Lease returns the pipe's lease.
func (p *Pipe[C]) Lease() *Lease[C] { return p.lease }

// Depth returns the number of outstanding turns.
func (p *Pipe[C]) Depth() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.depth
}

// Busy reports whether the oldest outstanding turn's request was written
// more than d before now (its answer is late: a slow statement, a lock
// wait, and a request sent now would wait for it too), and the number of
// outstanding turns (Depth), under one lock.
func (p *Pipe[C]) Busy(now time.Time, d time.Duration) (busy bool, depth int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.depth > 0 && now.Sub(p.headSent) > d, p.depth
}

// IdleCheck runs closed with the connection, under the pipe's lock, when
// no turn is outstanding and no request was written for longer than d
// before now; closed reports whether the server has closed the
// connection (an idle connection is closed past wait_timeout, with an
// ERR the next request would take for its answer). The pipe is then
// broken and retired, and dead reports it: the caller destroys the lease.
func (p *Pipe[C]) IdleCheck(now time.Time, d time.Duration, closed func(C) bool) (dead bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.depth > 0 || p.broken || p.retired || now.Sub(p.lastSent) <= d || !closed(p.lease.Conn()) {
		return false
	}
	p.broken, p.retired = true, true
	return p.deadNow()
}

// Send writes a request with write, under the pipe's lock, and queues t
// behind the outstanding turns; now is the time of the write (Busy
// measures from it). behind tells write that a turn is outstanding; write
// reports whether it wrote a prelude (see Pipe) before the request, which
// it may only do when behind. A write that fails breaks the pipe (part of
// the request may be on the connection): t is not queued, the error is
// returned as it is, and dead is as for Done. On a broken or retired pipe
// write is not called.
func (p *Pipe[C]) Send(t *Turn, now time.Time, write func(c C, behind bool) (prelude bool, err error)) (dead bool, err error) {
	if t.ready == nil {
		t.ready = make(chan struct{}, 1)
	}
	t.next, t.brokenBefore, t.waiting, t.prelude, t.preludeTaken = nil, false, false, false, false
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.broken:
		return false, ErrPipeBroken
	case p.retired:
		return false, ErrPipeRetired
	}
	prelude, err := write(p.lease.Conn(), p.last != nil)
	if err != nil {
		p.broken = true
		return p.deadNow(), err
	}
	t.prelude = prelude && p.last != nil
	t.sent, p.lastSent = now, now
	if p.depth == 0 {
		p.headSent = now
	}
	if p.last != nil {
		p.last.next = t
		t.waiting = true
	}
	p.last = t
	p.depth++
	return false, nil
}

// Wait returns once every turn sent before t is done, with the
// connection to read t's answer from; ErrPipeBroken means one of them
// broke the pipe: t's answer cannot be read. Every Send that succeeded is
// followed by one Wait and then one Done (false after ErrPipeBroken or an
// answer not read to its end), never Done without Wait. Wait does not give
// up: the request is written, so its turn must come and go for the turns
// behind it.
func (p *Pipe[C]) Wait(t *Turn) (C, error) {
	if t.waiting {
		<-t.ready
	}
	if t.brokenBefore {
		var zero C
		return zero, ErrPipeBroken
	}
	return p.lease.Conn(), nil
}

// Alone runs f with the connection, under the pipe's lock so that no
// request is written meanwhile, when t is the newest turn: nothing is
// queued behind it, so what t's request left on the connection (say, a
// statement's warnings) is still there to be read. ran is false, and f
// not called, when a turn is queued behind t. Call it between Wait and
// Done. f's requests must be answered within f.
func (p *Pipe[C]) Alone(t *Turn, f func(C) error) (ran bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last != t || p.broken {
		return false, nil
	}
	return true, f(p.lease.Conn())
}

// TakePrelude runs f with the connection when the turn queued right
// behind t carries a prelude (see Pipe): its answer comes right after
// t's, and f reads it; the turn behind then skips it. ran is false, and
// f not called, when no turn behind t carries one or the pipe is broken.
// Call it between Wait and Done, once t's answer is read; an error of f
// means the prelude's answer was not read to its end: Done(t, false).
func (p *Pipe[C]) TakePrelude(t *Turn, f func(C) error) (ran bool, err error) {
	p.mu.Lock()
	next := t.next
	ok := next != nil && next.prelude && !p.broken
	p.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := f(p.lease.Conn()); err != nil {
		return true, err
	}
	next.preludeTaken = true // read by next after Done signals it
	return true, nil
}

// Done ends turn t: readAll says t's answer was read to its end (false
// breaks the pipe). The next turn is handed the connection. dead reports
// that the pipe is broken or retired and t was its last outstanding turn:
// the caller must then destroy (broken) or give back (retired) the lease,
// once.
func (p *Pipe[C]) Done(t *Turn, readAll bool) (dead bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !readAll {
		p.broken = true
	}
	p.depth--
	next := t.next
	t.next = nil
	if p.last == t {
		p.last = nil
	}
	if next != nil {
		p.headSent = next.sent
		next.brokenBefore = p.broken
		next.ready <- struct{}{}
	}
	return p.deadNow()
}

// deadNow reports, once, that the pipe is broken or retired and has no
// outstanding turn. The caller holds p.mu.
func (p *Pipe[C]) deadNow() bool {
	if p.depth > 0 || !(p.broken || p.retired) || p.gone {
		return false
	}
	p.gone = true
	return true
}

// Retire makes Send refuse new turns. dead is as for Done: true when no
// turn is outstanding, and the caller gives the lease back now (or
// destroys it, when the pipe is also broken, see Broken); otherwise the
// Done of the last turn reports it.
func (p *Pipe[C]) Retire() (dead bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retired = true
	return p.deadNow()
}

// Broken reports whether the pipe is broken.
func (p *Pipe[C]) Broken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken
}
