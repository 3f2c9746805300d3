package ioloop

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Loop is one event loop: a goroutine locked to its OS thread that owns
// one io_uring and runs tasks on it, one at a time. Start it with New;
// Close stops it.
type Loop struct {
	r *ring

	// efd is an eventfd the loop always has a read pending on: post writes
	// it to wake the loop for its inbox.
	efd  int
	ebuf [8]byte

	mu       sync.Mutex
	inbox    []func() // run on the loop's thread, in order; under mu
	signaled bool     // efd written since the loop last took the inbox; under mu
	closing  bool     // Close was called: Go fails; under mu
	exited   bool     // the loop has returned: nothing runs posts; under mu

	// Counts for Stats: written by the loop's thread only, read by anyone.
	enters, completions, offloads atomic.Uint64
	running                       atomic.Int64

	// The rest belongs to the loop's thread.
	tasks      []*Task  // by slot; nil: free
	free       []uint32 // free slots
	ready      []*Task  // tasks to resume before the next wait
	spareReady []*Task  // ready's previous backing array, reused
	spare      []func() // the inbox's previous backing array, reused
	stop       bool     // Close was posted: no new tasks, I/O fails
	done       chan struct{}
}

// Config sizes a loop.
type Config struct {
	// Entries is the number of submission slots of the loop's io_uring
	// (a power of two; 0 means 1024). A loop submits at most this many
	// operations per system call; more only cost another call.
	Entries uint32

	// HoldProcessor has the loop keep its Go processor (its P) while it
	// waits in the kernel for completions, instead of handing it to the
	// scheduler. The hand-off, when the wait outlasts a tick of the
	// runtime's monitor, wakes another thread that looks for work, finds
	// none and sleeps again: at a few thousand statements a second that
	// is most of what a wait costs (measured: a tenth of the gateway's
	// CPU per statement at an equal rate). The price: the processor is
	// not free for other goroutines meanwhile, so only hold it while
	// there are more processors (GOMAXPROCS) than holding loops. The
	// runtime's preemption signals (a stop of the world for the garbage
	// collector, a goroutine that ran 10 ms) interrupt the wait, and the
	// loop then yields; with GODEBUG=asyncpreemptoff=1 there are none,
	// and a held wait would hold up the garbage collector. A loop without
	// tasks lets its processor go while it waits.
	HoldProcessor bool
}

// New starts a loop. It fails when the kernel refuses io_uring (too old,
// or disabled by sysctl kernel.io_uring_disabled or a seccomp filter, as
// in some container runtimes): callers then run their work on plain
// goroutines.
func New(cfg Config) (*Loop, error) {
	if cfg.Entries == 0 {
		cfg.Entries = 1024
	}
	efd, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil, fmt.Errorf("ioloop: eventfd: %w", errno)
	}
	l := &Loop{efd: int(efd), done: make(chan struct{})}
	started := make(chan error, 1)
	go l.run(cfg, started)
	if err := <-started; err != nil {
		_ = syscall.Close(l.efd)
		return nil, err
	}
	return l, nil
}

// Stats are a loop's counts since it started.
type Stats struct {
	// Enters counts io_uring_enter calls: each submits what the tasks
	// queued and, unless a task polls, sleeps until something completes.
	Enters uint64
	// Completions counts the operations that completed (timeouts and
	// cancellations included). Completions / Enters is how much one
	// system call did: 1 or less means the loop woke for every event.
	Completions uint64
	// Offloads counts Offload calls: waits that went to a goroutine.
	Offloads uint64
	// Tasks is how many tasks are running now.
	Tasks int64
}

// Stats returns l's counts; any goroutine may call it.
func (l *Loop) Stats() Stats {
	return Stats{Enters: l.enters.Load(), Completions: l.completions.Load(), Offloads: l.offloads.Load(), Tasks: l.running.Load()}
}

// Task is a function running as a coroutine on a loop. Its I/O methods
// queue the operation on the loop's ring and suspend the task until it
// completes; the loop runs other tasks meanwhile. A task must call its
// methods from its own function only (not from goroutines it starts), and
// must not block on anything but them for long: a task that waits on a
// channel, a lock held long or a sleep stops its whole loop meanwhile.
// Such waits go through Offload.
type Task struct {
	l    *Loop
	slot uint32
	gen  uint32 // bumped per operation; stale completions are ignored
	fn   func(*Task)

	next  func() (struct{}, bool)
	yield func(struct{}) bool

	// The operation in flight: how many completions it still waits for,
	// the user data to cancel (0: none), the results of its main and its
	// first (a send before a receive) request, and the timeout's time,
	// kept until submitted.
	waiting    int
	cancelData uint64
	res, res0  int32
	ts         timespec

	offload  func()        // set while the task asks for Offload
	parked   bool          // set while the task is in Park, until a Wake
	panicked *OffloadPanic // what Offload's function panicked with
}

// OffloadPanic is what Offload panics with in its task when its function
// panicked on the other goroutine: the value and that goroutine's stack.
type OffloadPanic struct {
	Value any
	Stack []byte
}

func (p *OffloadPanic) Error() string {
	return fmt.Sprintf("ioloop: panic in Offload: %v\n%s", p.Value, p.Stack)
}

// Errors of a task's I/O besides the system's own (a syscall.Errno).
var (
	// ErrTimeout is an operation's deadline passing first.
	ErrTimeout = errors.New("ioloop: i/o timeout")
	// ErrCanceled is an operation ended by Interrupt.
	ErrCanceled = errors.New("ioloop: i/o canceled")
	// ErrClosed is an operation of a loop that is closing.
	ErrClosed = errors.New("ioloop: loop closed")
)

// User data: the task's slot + 1 in the low 32 bits (0: the loop's own),
// the operation's generation in the next 24, its kind in the top 8.
const (
	kindMain    = 1 // the request the operation waits for
	kindFirst   = 2 // a send linked before the main request
	kindTimeout = 3 // a linked timeout: its completion says nothing new
	kindCancel  = 4 // an ASYNC_CANCEL: the same
	kindEvent   = 5 // the eventfd read
)

func userData(kind uint8, slot, gen uint32) uint64 {
	return uint64(kind)<<56 | uint64(gen&0xffffff)<<32 | uint64(slot+1)
}

// Go starts fn as a task on l. It may be called from any goroutine; fn
// starts on the loop's thread soon after. It returns ErrClosed when the
// loop is closing (fn does not run).
func (l *Loop) Go(fn func(*Task)) error {
	if !l.post(func() { l.start(fn) }, true) {
		return ErrClosed
	}
	return nil
}

// Close stops the loop: tasks' pending operations are cancelled and
// their later ones fail with ErrClosed; it waits until every task has
// returned (tasks in Offload wait for their function).
func (l *Loop) Close() {
	l.mu.Lock()
	first := !l.closing
	l.closing = true
	l.mu.Unlock()
	if first {
		l.post(func() {
			l.stop = true
			for _, t := range l.tasks {
				if t != nil {
					t.Wake() // first: a parked task's timeout is cancelled once
					t.cancel()
				}
			}
		}, false)
	}
	<-l.done
}

// post queues fn to run on the loop's thread and wakes the loop. It
// reports false when the loop has returned, or, for a new task's start,
// when it is closing.
func (l *Loop) post(fn func(), newTask bool) bool {
	l.mu.Lock()
	if l.exited || newTask && l.closing {
		l.mu.Unlock()
		return false
	}
	l.inbox = append(l.inbox, fn)
	if !l.signaled {
		// Under mu: the loop closes efd only after it set exited under
		// mu, so this never writes to a closed descriptor's number
		// (which a new socket may have taken).
		l.signaled = true
		one := [8]byte{1}
		for {
			_, err := syscall.Write(l.efd, one[:])
			if err != syscall.EINTR {
				break
			}
		}
	}
	l.mu.Unlock()
	return true
}

// Interrupt ends the task's operation in flight, if any, with ErrCanceled.
// It may be called from any goroutine; it does not wait. An operation
// that starts after the interrupt reached the loop is not affected: a
// caller that wants those to fail too makes them fail itself (a deadline
// in the past, for example) before calling Interrupt.
func (t *Task) Interrupt() { t.l.post(t.cancel, false) }

// cancel queues the cancellation of t's operation in flight; on the
// loop's thread.
func (t *Task) cancel() {
	if t.cancelData == 0 || t.l.tasks[t.slot] != t {
		return
	}
	t.l.r.reserve(1)
	t.l.r.prepCancel(t.cancelData, userData(kindCancel, t.slot, t.gen))
	t.cancelData = 0
}

// run is the loop's goroutine.
func (l *Loop) run(cfg Config, started chan<- error) {
	// The ring (single issuer) belongs to this thread. Unlocked once
	// the ring is closed: a goroutine that ends locked ends its thread
	// too, and a thread's end sends its children their parent-death
	// signal (a child started by another goroutine that ran on this
	// thread before, with SysProcAttr.Pdeathsig, would be killed).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := newRing(cfg.Entries)
	if err != nil {
		started <- fmt.Errorf("ioloop: %w", err)
		return
	}
	l.r = r
	l.armEvent()
	started <- nil
	defer close(l.done)
	for {
		// A task resumed here may Wake another: resumed in this round
		// too.
		for len(l.ready) > 0 {
			batch := l.ready
			l.ready = l.spareReady[:0]
			for i, t := range batch {
				l.resume(t)
				batch[i] = nil
			}
			l.spareReady = batch[:0]
		}
		if l.stop && l.live() == 0 {
			l.mu.Lock()
			l.exited = true
			l.mu.Unlock()
			r.close()
			_ = syscall.Close(l.efd)
			return
		}
		// An idle loop lets its processor go: held, it would only be
		// taken back by the runtime's preemption every 10 ms.
		r.enter(1, cfg.HoldProcessor && l.live() > 0)
		l.enters.Add(1)
		l.completions.Add(uint64(r.reap(l.complete)))
	}
}

// live counts the tasks not yet returned.
func (l *Loop) live() int { return len(l.tasks) - len(l.free) }

// armEvent queues the read of the eventfd.
func (l *Loop) armEvent() {
	l.r.reserve(1)
	l.r.prepIO(opRead, l.efd, l.ebuf[:], 0, userData(kindEvent, ^uint32(0), 0))
}

// takeInbox runs what other goroutines posted.
func (l *Loop) takeInbox() {
	l.mu.Lock()
	fns := l.inbox
	l.inbox, l.spare = l.spare[:0], nil
	l.signaled = false
	l.mu.Unlock()
	for i, fn := range fns {
		fn()
		fns[i] = nil
	}
	l.spare = fns[:0]
}

// start makes fn a task and runs it to its first wait.
// A task that starts after Close reached the loop runs too (its I/O fails
// with ErrClosed): Go reported success, and its caller counts on fn
// running.
func (l *Loop) start(fn func(*Task)) {
	t := &Task{l: l, fn: fn}
	if n := len(l.free); n > 0 {
		t.slot = l.free[n-1]
		l.free = l.free[:n-1]
		l.tasks[t.slot] = t
	} else {
		t.slot = uint32(len(l.tasks))
		l.tasks = append(l.tasks, t)
	}
	l.running.Add(1)
	t.next, _ = iter.Pull(func(yield func(struct{}) bool) {
		t.yield = yield
		t.fn(t)
	})
	l.resume(t)
}

// resume runs t until it waits again or returns.
func (l *Loop) resume(t *Task) {
	if _, ok := t.next(); !ok {
		l.tasks[t.slot] = nil
		l.free = append(l.free, t.slot)
		l.running.Add(-1)
		return
	}
	if fn := t.offload; fn != nil {
		t.offload = nil
		l.offloads.Add(1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					t.panicked = &OffloadPanic{Value: r, Stack: debug.Stack()}
				}
				// The loop waits for this task before it returns,
				// so the post cannot fail.
				l.post(func() { l.ready = append(l.ready, t) }, false)
			}()
			fn()
		}()
	}
}

// complete handles one completion.
func (l *Loop) complete(data uint64, res int32) {
	kind := uint8(data >> 56)
	if kind == kindEvent {
		l.takeInbox()
		l.armEvent()
		return
	}
	if kind == kindTimeout || kind == kindCancel {
		return
	}
	slot := uint32(data) - 1
	if slot >= uint32(len(l.tasks)) {
		return
	}
	t := l.tasks[slot]
	if t == nil || t.gen&0xffffff != uint32(data>>32)&0xffffff || t.waiting == 0 {
		return
	}
	if kind == kindFirst {
		t.res0 = res
	} else {
		t.res = res
		t.cancelData = 0
	}
	if t.waiting--; t.waiting == 0 {
		l.resume(t)
	}
}

// wait suspends t until its operation's completions are in.
func (t *Task) wait(n int) {
	t.waiting = n
	t.yield(struct{}{})
}

// begin starts an operation: a new generation. It reports ErrClosed when
// the loop is closing and ErrTimeout when the deadline has passed.
func (t *Task) begin(deadline time.Time) (time.Duration, error) {
	if t.l.stop {
		return 0, ErrClosed
	}
	var d time.Duration
	if !deadline.IsZero() {
		if d = time.Until(deadline); d <= 0 {
			return 0, ErrTimeout
		}
	}
	t.gen++
	return d, nil
}

// result turns a completion's result into a count or an error. A request
// cancelled by its linked timeout is ErrTimeout, one cancelled otherwise
// ErrCanceled.
func result(res int32, timed bool, deadline time.Time) (int, error) {
	switch {
	case res >= 0:
		return int(res), nil
	case syscall.Errno(-res) == syscall.ECANCELED:
		if timed && !time.Now().Before(deadline) {
			return 0, ErrTimeout
		}
		return 0, ErrCanceled
	}
	return 0, syscall.Errno(-res)
}

// Recv reads into p from the socket fd: what is there once something is,
// at most len(p) bytes; 0 at the end of the stream. A zero deadline never
// passes. fd must stay open until Recv returns: read it inside a
// syscall.RawConn's Read callback, which holds the descriptor.
func (t *Task) Recv(fd int, p []byte, deadline time.Time) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	d, err := t.begin(deadline)
	if err != nil {
		return 0, err
	}
	r := t.l.r
	r.reserve(2)
	t.cancelData = userData(kindMain, t.slot, t.gen)
	s := r.prepIO(opRecv, fd, p, 0, t.cancelData)
	if d > 0 {
		s.flags |= sqeIOLink
		r.prepLinkTimeout(&t.ts, d, userData(kindTimeout, t.slot, t.gen))
	}
	t.wait(1)
	return result(t.res, d > 0, deadline)
}

// Send writes all of p to the socket fd, or fails; n is how much was
// written. fd must stay open until Send returns (see Recv).
func (t *Task) Send(fd int, p []byte, deadline time.Time) (n int, err error) {
	for n < len(p) {
		d, err := t.begin(deadline)
		if err != nil {
			return n, err
		}
		r := t.l.r
		r.reserve(2)
		t.cancelData = userData(kindMain, t.slot, t.gen)
		s := r.prepIO(opSend, fd, p[n:], syscall.MSG_NOSIGNAL, t.cancelData)
		if d > 0 {
			s.flags |= sqeIOLink
			r.prepLinkTimeout(&t.ts, d, userData(kindTimeout, t.slot, t.gen))
		}
		t.wait(1)
		m, err := result(t.res, d > 0, deadline)
		n += m
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, syscall.EPIPE
		}
	}
	return n, nil
}

// TrySend writes what of p the socket fd takes now, without waiting for
// room: syscall.EAGAIN when it takes nothing. fd must stay open until
// TrySend returns (see Recv).
func (t *Task) TrySend(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if _, err := t.begin(time.Time{}); err != nil {
		return 0, err
	}
	r := t.l.r
	r.reserve(1)
	t.cancelData = userData(kindMain, t.slot, t.gen)
	r.prepIO(opSend, fd, p, syscall.MSG_NOSIGNAL|syscall.MSG_DONTWAIT, t.cancelData)
	t.wait(1)
	return result(t.res, false, time.Time{})
}

// SendRecv writes all of out to the socket fd and then reads into in, as
// Recv, in one submission: a command and the wait for its answer. sent is
// how much of out was written; err is the send's failure when
// sent < len(out), else the receive's. The deadline bounds the receive.
func (t *Task) SendRecv(fd int, out, in []byte, deadline time.Time) (sent, n int, err error) {
	if len(out) == 0 {
		n, err = t.Recv(fd, in, deadline)
		return 0, n, err
	}
	if len(in) == 0 {
		sent, err = t.Send(fd, out, time.Time{})
		return sent, 0, err
	}
	d, err := t.begin(deadline)
	if err != nil {
		return 0, 0, err
	}
	r := t.l.r
	r.reserve(3)
	s := r.prepIO(opSend, fd, out, syscall.MSG_NOSIGNAL, userData(kindFirst, t.slot, t.gen))
	s.flags |= sqeIOLink
	t.cancelData = userData(kindMain, t.slot, t.gen)
	s = r.prepIO(opRecv, fd, in, 0, t.cancelData)
	if d > 0 {
		s.flags |= sqeIOLink
		r.prepLinkTimeout(&t.ts, d, userData(kindTimeout, t.slot, t.gen))
	}
	t.wait(2)
	if t.res0 < int32(len(out)) {
		// A short or failed send breaks the chain: the receive was
		// cancelled without running. Finish the send, then receive.
		if t.res0 < 0 {
			return 0, 0, syscall.Errno(-t.res0)
		}
		sent, err = t.Send(fd, out[t.res0:], time.Time{})
		sent += int(t.res0)
		if err != nil {
			return sent, 0, err
		}
		n, err = t.Recv(fd, in, deadline)
		return sent, n, err
	}
	n, err = result(t.res, d > 0, deadline)
	return len(out), n, err
}

// Offload runs fn on a goroutine of its own while t waits, so that a wait
// that is not the loop's I/O (a lock, a channel, a sleep, another
// connection's blocking call) holds up t alone, not its loop. A panic in
// fn is recovered there and raised again in t, as an *OffloadPanic.
func (t *Task) Offload(fn func()) {
	t.offload = fn
	t.yield(struct{}{})
	if p := t.panicked; p != nil {
		t.panicked = nil
		panic(p)
	}
}

// Park suspends t until another task of its loop calls Wake (or any
// goroutine WakeAsync), or until deadline passes (zero: never). It is how
// a task waits for something the other tasks of its loop give it (a
// pooled connection a session lets go), without a goroutine and without
// a system call of its own: a deadline is one more operation in the
// loop's next submission. Wakes may come early or twice (a deadline
// cancelled, a WakeAsync for an earlier wait): a caller re-checks what
// it waits for. Park returns ErrClosed at once when the loop is closing;
// a Close ends every Park.
func (t *Task) Park(deadline time.Time) error {
	d, err := t.begin(deadline)
	switch {
	case err == ErrTimeout:
		return nil // the deadline has passed: done waiting
	case err != nil:
		return err
	}
	t.parked = true
	if d == 0 {
		t.yield(struct{}{}) // Wake puts t back on the ready list
	} else {
		r := t.l.r
		r.reserve(1)
		t.cancelData = userData(kindMain, t.slot, t.gen)
		r.prepTimeout(&t.ts, d, t.cancelData)
		t.wait(1) // the timeout's completion: passed, or cancelled by Wake
	}
	t.parked = false
	return nil
}

// Wake ends t's Park, if t is parked; otherwise it does nothing. Only a
// task of t's loop (or a function the loop runs) may call it: other
// goroutines call WakeAsync. t resumes in the loop's current round, after
// the caller waits or returns.
func (t *Task) Wake() {
	if !t.parked || t.l.tasks[t.slot] != t {
		return
	}
	t.parked = false
	if t.cancelData != 0 {
		t.cancel() // the timeout completes cancelled and resumes t
		return
	}
	t.l.ready = append(t.l.ready, t)
}

// WakeAsync is Wake for any goroutine: it posts the Wake to t's loop and
// does not wait. A WakeAsync that reaches the loop after t's Park ended
// may end t's next Park early.
func (t *Task) WakeAsync() { t.l.post(t.Wake, false) }

// Loop returns the loop t runs on.
func (t *Task) Loop() *Loop { return t.l }
