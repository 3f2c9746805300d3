package pools

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Conn is what a pool holds: a live connection it can close.
type Conn interface{ Close() error }

// Quitter is a Conn that can also leave its server politely, as a client
// that is done says goodbye (a MySQL connection's COM_QUIT). A pool calls
// Quit, instead of Close, for a connection it closes at rest: idle, just
// released, or retired with Lease.Retire. It calls Close for one destroyed
// with Lease.Destroy (broken, or in an unknown state) or refused by
// Config.Prepare. Quit must close the connection whatever it returns.
type Quitter interface{ Quit() error }

// Defaults applied by New to zero fields of Config.
const (
	// DefaultSize is the default Config.Size.
	DefaultSize = 64
	// DefaultMinIdle is the default Config.MinIdle (or Size if smaller).
	DefaultMinIdle = 4
	// DefaultMaxDials is the default Config.MaxDials.
	DefaultMaxDials = 4
	// DefaultIdleTimeout is the default Config.IdleTimeout.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultMaxLifetime is the default Config.MaxLifetime.
	DefaultMaxLifetime = 30 * time.Minute
	// DefaultAcquireTimeout is the default Config.AcquireTimeout.
	DefaultAcquireTimeout = 2 * time.Second
	// DefaultDialTimeout is the default Config.DialTimeout.
	DefaultDialTimeout = 5 * time.Second
	// MaxSize is the largest Config.Size New accepts.
	MaxSize = 100000
)

const (
	// minSizeLimit is the least upper bound New fixes for Resize: the idle
	// queue is sized once, to max(Size, minSizeLimit).
	minSizeLimit = 1024
	// The maintenance loop runs every min(IdleTimeout/2, MaxLifetime/4),
	// clamped to [minCheckInterval, maxCheckInterval].
	minCheckInterval = 10 * time.Millisecond
	maxCheckInterval = 30 * time.Second
)

// Config configures a Pool. New applies the defaults; zero means "default"
// for every field, and where a feature can be turned off a negative value
// turns it off.
type Config[T Conn] struct {
	// Name names the pool in errors and logs, e.g.
	// "main/127.0.0.1:13306/gateway". Required.
	Name string
	// Size is the maximum number of open connections, in use, idle or being
	// dialed. Default 64; must be in [0, MaxSize].
	Size int
	// MinIdle is the number of connections the pool dials at start and keeps
	// open (in use or idle); idle eviction never goes below it. Default 4
	// (or Size if smaller); negative means none. Must not exceed Size.
	MinIdle int
	// MaxDials is the most dials in flight at once. Default 4; must not be
	// negative.
	MaxDials int
	// IdleTimeout closes connections idle longer than this, as long as more
	// than MinIdle are open. Default 5m; negative means never.
	IdleTimeout time.Duration
	// MaxLifetime closes connections older than this. Each connection's
	// lifetime is shortened by a random 0-10% so that connections dialed
	// together do not expire together. Expired connections are closed when
	// released or found idle and are never handed out. Default 30m;
	// negative means never.
	MaxLifetime time.Duration
	// AcquireTimeout is how long Acquire waits for a connection before it
	// returns *AcquireTimeoutError. Default 2s; must not be negative.
	AcquireTimeout time.Duration
	// DialTimeout bounds one call of Dial. Default 5s; must not be negative.
	DialTimeout time.Duration
	// Dial opens a connection. It gets a context with the values of the
	// Acquire caller's context (or none for warm-up dials) that is cancelled
	// after DialTimeout or when the pool closes, never when the caller
	// gives up. It must return a live connection or an error. Required.
	Dial func(ctx context.Context) (T, error)
	// Prepare, if not nil, vets a connection before Acquire hands it out,
	// e.g. a cheap liveness check that the server has not closed it. It
	// runs in the Acquire caller's goroutine with the caller's context and
	// no lock held. ok false: the connection is destroyed and Acquire tries
	// another (within its AcquireTimeout). A non-nil err: the connection is
	// destroyed and Acquire returns err, wrapped. It must not panic. Nil
	// means every connection is handed out as is.
	Prepare func(ctx context.Context, c T) (ok bool, err error)
	// Logger receives the pool's logs. Nil means no logs.
	Logger hclog.Logger
	// Budget, if not nil, bounds this pool's connections together with
	// the other pools sharing it (see Budget), on top of Size.
	Budget *Budget
}

// withDefaults validates c and fills in the defaults. It is the one place
// defaults are applied. In the result, zero IdleTimeout, MaxLifetime and
// MinIdle mean off.
func (c Config[T]) withDefaults() (Config[T], error) {
	if c.Name == "" {
		return c, errors.New("pools: Config.Name is empty")
	}
	bad := func(field string, v any) (Config[T], error) {
		return c, fmt.Errorf("pools: pool %s: Config.%s is %v, must not be negative", c.Name, field, v)
	}
	if c.Dial == nil {
		return c, fmt.Errorf("pools: pool %s: Config.Dial is nil", c.Name)
	}
	switch {
	case c.Size < 0:
		return bad("Size", c.Size)
	case c.Size > MaxSize:
		return c, fmt.Errorf("pools: pool %s: Config.Size %d exceeds %d", c.Name, c.Size, MaxSize)
	case c.Size == 0:
		c.Size = DefaultSize
	}
	switch {
	case c.MinIdle < 0:
		c.MinIdle = 0
	case c.MinIdle == 0:
		c.MinIdle = min(DefaultMinIdle, c.Size)
	case c.MinIdle > c.Size:
		return c, fmt.Errorf("pools: pool %s: Config.MinIdle %d exceeds Config.Size %d", c.Name, c.MinIdle, c.Size)
	}
	switch {
	case c.MaxDials < 0:
		return bad("MaxDials", c.MaxDials)
	case c.MaxDials == 0:
		c.MaxDials = DefaultMaxDials
	}
	switch {
	case c.IdleTimeout < 0:
		c.IdleTimeout = 0
	case c.IdleTimeout == 0:
		c.IdleTimeout = DefaultIdleTimeout
	}
	switch {
	case c.MaxLifetime < 0:
		c.MaxLifetime = 0
	case c.MaxLifetime == 0:
		c.MaxLifetime = DefaultMaxLifetime
	}
	switch {
	case c.AcquireTimeout < 0:
		return bad("AcquireTimeout", c.AcquireTimeout)
	case c.AcquireTimeout == 0:
		c.AcquireTimeout = DefaultAcquireTimeout
	}
	switch {
	case c.DialTimeout < 0:
		return bad("DialTimeout", c.DialTimeout)
	case c.DialTimeout == 0:
		c.DialTimeout = DefaultDialTimeout
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c, nil
}

// Pool is a pool of connections of type T to one backend: it reuses the
// idle connection released last, and serves waiting callers in arrival
// order. It is safe for concurrent use. Build it with New and end it
// with Close.
type Pool[T Conn] struct {
	name     string
	dial     func(ctx context.Context) (T, error)
	prepare  func(ctx context.Context, c T) (bool, error)
	log      hclog.Logger
	maxDials int
	// budget bounds the pool with its siblings; nil: Size only.
	budget *Budget
	// budgetWaiters counts Acquire calls waiting because the budget was
	// spent.
	budgetWaiters atomic.Int32
	// waiting counts Acquire calls waiting for a connection.
	waiting atomic.Int32
	// outside counts the waits outside Acquire (WaitOutside).
	outside atomic.Int32
	// queue tells how long they wait (QueueWait); epoch, the pool's
	// start, is the origin of its times.
	queue queueWaits
	epoch time.Time
	// The timeouts may change at run time (SetTimeouts); nanoseconds.
	idleTimeoutNs    atomic.Int64 // 0: never
	maxLifetimeNs    atomic.Int64 // 0: never
	acquireTimeoutNs atomic.Int64
	dialTimeoutNs    atomic.Int64
	limit            int // upper bound of size; cap(idle)

	// The idle connections are in stack, unless callers were waiting when
	// they were released: then they go to idle.
	//
	// stack is last in, first out: Acquire takes the connection released
	// last. A pool larger than its load keeps using the same few
	// connections, whose server threads and caches stay warm, and the rest
	// age out with IdleTimeout. Taking them in turn instead (first in,
	// first out) makes the server run every connection's thread in turn:
	// MariaDB spent 25 % more CPU per query with 8 clients rotating over
	// 64 connections than over the few they need (see the README's
	// Benchmarks).
	//
	// idle hands connections to the Acquire calls waiting for one, in
	// arrival order (its capacity is limit, which is never below open, so
	// a send never blocks). waiters counts those calls. stack and waiters
	// are guarded by idleMu, which is taken alone (never with mu).
	idleMu  sync.Mutex
	stack   []*Lease[T]
	waiters int
	idle    chan *Lease[T]
	// room gets a token (non-blocking send) when a dial may start: a
	// connection was destroyed, a dial ended, or the pool grew.
	room chan struct{}
	// kick wakes the maintenance loop early (non-blocking send).
	kick chan struct{}
	// closec is closed by Close; done is closed when Close has finished.
	closec chan struct{}
	done   chan struct{}
	// closed is set by Close, under mu; read anywhere.
	closed atomic.Bool
	// excess is true while open > size (after Resize shrank the pool);
	// written under mu, read anywhere.
	excess atomic.Bool
	// baseCtx ends every dial's context when the pool closes.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	// timers recycles the AcquireTimeout timers of waiting Acquire calls,
	// so that waiting on a saturated pool does not allocate.
	timers sync.Pool
	// wg counts the maintenance goroutine and the dial goroutines. Add is
	// called under mu while closed is false.
	wg sync.WaitGroup
	// closing counts the goroutines closing destroyed connections.
	closing sync.WaitGroup

	mu          sync.Mutex
	size        int  // max open + dialing
	minIdle     int  // keep at least this many open + dialing
	open        int  // established connections: idle, in use, or in hand
	dialing     int  // dials in flight
	dialFailing bool // the last dial failed (to log state changes only)

	waits           atomic.Int64
	waitNanos       atomic.Int64
	dials           atomic.Int64
	dialErrors      atomic.Int64
	destroyed       atomic.Int64
	acquireTimeouts atomic.Int64
}

// Lease is a connection leased from a Pool by Acquire. The holder owns it
// until it calls Release or Destroy, exactly once; after that the Lease
// must not be used, not even for another Release: the pool reuses the
// Lease value for the next holder of the same connection, so a stale Lease
// would act on someone else's lease.
type Lease[T Conn] struct {
	p       *Pool[T]
	conn    T
	created time.Time
	expires time.Time // zero: never
	// idleSince is when the connection last entered the idle queue.
	idleSince time.Time
	// leased is true while a caller holds the lease. Only the holder (or
	// whoever took the lease from the idle queue) touches the fields above
	// idleSince; the queue hands them over.
	leased bool
	// unsound is set when the connection is destroyed as broken or in an
	// unknown state: it is closed, never quit (see Quitter).
	unsound bool
}

// New validates cfg, applies its defaults and starts the pool's
// maintenance goroutine, which dials up to MinIdle connections in the
// background. New does not wait for those dials, and does not fail when
// the backend is down: Acquire reports dial errors.
func New[T Conn](cfg Config[T]) (*Pool[T], error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	limit := max(cfg.Size, minSizeLimit)
	p := &Pool[T]{
		name:     cfg.Name,
		dial:     cfg.Dial,
		prepare:  cfg.Prepare,
		log:      cfg.Logger.With("pool", cfg.Name),
		maxDials: cfg.MaxDials,
		budget:   cfg.Budget,
		limit:    limit,
		idle:     make(chan *Lease[T], limit),
		room:     make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		closec:   make(chan struct{}),
		done:     make(chan struct{}),
		size:     cfg.Size,
		minIdle:  cfg.MinIdle,
		epoch:    time.Now(),
	}
	p.storeTimeouts(cfg)
	if p.budget != nil {
		p.budget.attach(p)
	}
	p.baseCtx, p.cancelBase = context.WithCancel(context.Background())
	p.wg.Add(1)
	p.spawn("maintenance", p.maintain)
	return p, nil
}

// Acquire leases an idle connection, or waits for one to be released or
// dialed. It returns:
//   - a *DialError when the dial this call started failed;
//   - Config.Prepare's error, wrapped, when it rejected a connection so;
//   - an *AcquireTimeoutError when nothing came within AcquireTimeout;
//   - context.Cause(ctx) (ctx.Err() unless ctx was cancelled with a
//     cause), wrapped, when ctx ended first;
//   - ErrClosed, wrapped, when the pool is or becomes closed.
//
// A dial started by Acquire is not cancelled when ctx ends: the connection
// joins the idle queue. Acquire never hands out a connection past its
// lifetime.
func (p *Pool[T]) Acquire(ctx context.Context) (*Lease[T], error) {
	if ctx.Err() != nil {
		return nil, p.ctxError(context.Cause(ctx))
	}
	if p.closed.Load() {
		return nil, p.closedError()
	}
	for {
		l := p.takeIdle(false)
		if l == nil {
			return p.acquireSlow(ctx)
		}
		if ok, err := p.ready(ctx, l); !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		return l, nil
	}
}

// TryAcquire leases an idle connection if there is one, without waiting
// and without dialing; ok is false when there is none (Acquire waits
// then). As with Acquire, a connection past its lifetime is never handed
// out, and Config.Prepare vets it (with a background context): one it
// rejects or fails on is destroyed and the next idle one tried.
func (p *Pool[T]) TryAcquire() (l *Lease[T], ok bool) {
	if p.closed.Load() {
		return nil, false
	}
	for {
		if l = p.takeIdle(false); l == nil {
			return nil, false
		}
		if ok, _ := p.ready(context.Background(), l); ok {
			return l, true
		}
	}
}

// Closed reports whether Close was called: Acquire fails with ErrClosed.
func (p *Pool[T]) Closed() bool { return p.closed.Load() }

// Busy reports whether a caller of Acquire would have to wait for a
// connection to come back: none is idle and none may be dialed (open and
// dialing ones fill the pool's size).
func (p *Pool[T]) Busy() bool {
	if p.idleCount() > 0 {
		return false
	}
	p.mu.Lock()
	full := p.open+p.dialing >= p.size
	p.mu.Unlock()
	return full
}

// takeIdle takes an idle connection, or returns nil: the one released
// last, or with oldest the one idle longest (of the stack; the handed-over
// ones after it).
func (p *Pool[T]) takeIdle(oldest bool) *Lease[T] {
	p.idleMu.Lock()
	if n := len(p.stack); n > 0 {
		var l *Lease[T]
		if oldest {
			l = p.stack[0]
			copy(p.stack, p.stack[1:])
		} else {
			l = p.stack[n-1]
		}
		p.stack[n-1] = nil
		p.stack = p.stack[:n-1]
		p.idleMu.Unlock()
		return l
	}
	p.idleMu.Unlock()
	select {
	case l := <-p.idle:
		return l
	default:
		return nil
	}
}

// idleCount is the number of idle connections.
func (p *Pool[T]) idleCount() int {
	p.idleMu.Lock()
	n := len(p.stack)
	p.idleMu.Unlock()
	return n + len(p.idle)
}

// acquireSlow waits for a connection: from the idle queue, from a dial
// this call starts when there is room, until ctx ends, the pool's
// AcquireTimeout passes, or the pool closes. It starts no goroutine but
// the dial's, and holds no lock while it waits.
func (p *Pool[T]) acquireSlow(ctx context.Context) (*Lease[T], error) {
	start := time.Now()
	p.waits.Add(1)
	p.waiting.Add(1)
	since := int64(start.Sub(p.epoch))
	p.queue.begin(since)
	// Counted before the idle stack is looked at, so that a connection
	// released from now on is handed over through idle, where this call
	// waits, and not stacked behind its back.
	p.idleMu.Lock()
	p.waiters++
	p.idleMu.Unlock()
	budgetWait := false
	defer func() {
		p.idleMu.Lock()
		p.waiters--
		p.idleMu.Unlock()
		end := time.Now()
		p.queue.end(since, int64(end.Sub(p.epoch)))
		p.waitNanos.Add(int64(end.Sub(start)))
		p.waiting.Add(-1)
		if budgetWait {
			p.budgetWaiters.Add(-1)
		}
	}()
	timer := p.getTimer()
	defer p.putTimer(timer)

	// dialc delivers the result of the dial this call started; nil when
	// none is in flight. While one is, the call does not start another.
	var dialc chan error
	for {
		if l := p.takeIdle(false); l != nil {
			if ok, err := p.ready(ctx, l); !ok {
				if err != nil {
					return nil, err
				}
				continue
			}
			return l, nil
		}
		room := p.room
		if dialc == nil {
			var spent bool
			dialc, spent = p.startDial(ctx)
			if spent {
				if !budgetWait {
					budgetWait = true
					p.budgetWaiters.Add(1)
				}
				// Free a unit held idle by a sibling pool; its close
				// signals room.
				p.budget.reclaim(p)
			}
		}
		if dialc != nil {
			room = nil
		}
		select {
		case l := <-p.idle:
			if ok, err := p.ready(ctx, l); !ok {
				if err != nil {
					return nil, err
				}
				continue
			}
			return l, nil
		case err := <-dialc:
			dialc = nil
			if err != nil {
				return nil, &DialError{Pool: p.name, Err: err}
			}
			// The connection is in the idle queue, unless a caller that
			// waited longer took it first.
		case <-room:
		case <-ctx.Done():
			return nil, p.ctxError(context.Cause(ctx))
		case <-timer.C:
			p.acquireTimeouts.Add(1)
			return nil, p.timeoutError()
		case <-p.closec:
			return nil, p.closedError()
		}
	}
}

// getTimer returns a timer running for AcquireTimeout.
func (p *Pool[T]) getTimer() *time.Timer {
	if t, ok := p.timers.Get().(*time.Timer); ok {
		t.Reset(p.acquireTimeout())
		return t
	}
	return time.NewTimer(p.acquireTimeout())
}

// putTimer stops t and keeps it for reuse. Since Go 1.23 a stopped timer's
// channel holds no stale tick, so Reset starts it afresh.
func (p *Pool[T]) putTimer(t *time.Timer) {
	if !t.Stop() {
		// Only with GODEBUG=asynctimerchan=1 can a tick be pending here.
		select {
		case <-t.C:
		default:
		}
	}
	p.timers.Put(t)
}

// ready decides whether l, just taken from the idle queue, may be handed
// out, and marks it leased if so. Otherwise it destroys l; err is
// Prepare's error, if any, wrapped.
func (p *Pool[T]) ready(ctx context.Context, l *Lease[T]) (bool, error) {
	if l.expired() {
		p.destroy(l)
		return false, nil
	}
	if p.prepare != nil {
		ok, err := p.prepare(ctx, l.conn)
		if err != nil {
			l.unsound = true
			p.destroy(l)
			return false, fmt.Errorf("pool %s: prepare: %w", p.name, err)
		}
		if !ok {
			l.unsound = true
			p.destroy(l)
			return false, nil
		}
	}
	l.leased = true
	return true, nil
}

// startDial starts a dial if the pool has room for one and returns the
// channel that will receive its result (nil error: the connection is in
// the idle queue). It returns nil when no dial may start now; spent says
// the pool had room but its budget had none.
func (p *Pool[T]) startDial(ctx context.Context) (_ chan error, spent bool) {
	p.mu.Lock()
	if p.closed.Load() || p.open+p.dialing >= p.size || p.dialing >= p.maxDials {
		p.mu.Unlock()
		return nil, false
	}
	if p.budget != nil && p.budget.take(1) == 0 {
		p.mu.Unlock()
		return nil, true
	}
	p.dialing++
	more := p.open+p.dialing < p.size && p.dialing < p.maxDials
	p.wg.Add(1)
	p.mu.Unlock()
	if more {
		// Pass the chance on to another waiter.
		p.signalRoom()
	}
	result := make(chan error, 1)
	vctx := context.WithoutCancel(ctx)
	p.spawn("dial", func() { p.dialOne(vctx, result) })
	return result, false
}

// dialOne runs one dial reserved by the caller (dialing already counts
// it, wg.Add already done) and puts the connection in the idle queue.
// result, when not nil, gets the outcome.
func (p *Pool[T]) dialOne(ctx context.Context, result chan<- error) {
	p.dials.Add(1)
	l, err := p.construct(ctx)
	if err != nil {
		p.dialErrors.Add(1)
		p.mu.Lock()
		p.dialing--
		first := !p.dialFailing
		p.dialFailing = true
		p.mu.Unlock()
		if first && !p.closed.Load() {
			p.log.Warn("dial failed", "error", err)
		} else {
			p.log.Debug("dial failed", "error", err)
		}
		if p.budget != nil {
			p.budget.give()
		}
		p.signalRoom()
		if result != nil {
			result <- err
		}
		return
	}
	p.mu.Lock()
	p.dialing--
	p.open++
	p.setExcessLocked()
	recovered := p.dialFailing
	p.dialFailing = false
	p.mu.Unlock()
	if recovered {
		p.log.Info("dial succeeded again")
	}
	p.putIdle(l)
	p.signalRoom()
	if result != nil {
		result <- nil
	} else {
		// A warm-up dial: let the maintenance loop dial the next ones.
		p.signalKick()
	}
}

// construct dials one connection. vctx carries the values of the Acquire
// caller's context and no cancellation; the dial's context ends after
// DialTimeout or when the pool closes.
func (p *Pool[T]) construct(vctx context.Context) (l *Lease[T], err error) {
	ctx, cancel := context.WithTimeout(vctx, p.dialTimeout())
	defer cancel()
	stop := context.AfterFunc(p.baseCtx, cancel)
	defer stop()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("dial panicked", "panic", r)
			l, err = nil, fmt.Errorf("dial panicked: %v", r)
		}
	}()
	c, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	l = &Lease[T]{p: p, conn: c, created: now, idleSince: now}
	if life := p.maxLifetime(); life > 0 {
		jitter := time.Duration(rand.Int64N(int64(life/10) + 1))
		l.expires = now.Add(life - jitter)
	}
	return l, nil
}

// destruct closes l's connection; finishDestroy runs it in a goroutine of
// its own, counted by closing.
//
// The connection's budget unit comes back only once Close has returned,
// so that a connection being closed and its successor are never both
// counted open.
func (p *Pool[T]) destruct(l *Lease[T]) {
	defer p.closing.Done()
	if p.budget != nil {
		defer p.budget.give()
	}
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("close panicked", "panic", r)
		}
	}()
	var err error
	if q, ok := any(l.conn).(Quitter); ok && !l.unsound {
		err = q.Quit()
	} else {
		err = l.conn.Close()
	}
	if err != nil {
		p.log.Debug("close failed", "error", err)
	}
}

// Conn returns the leased connection.
func (l *Lease[T]) Conn() T { return l.conn }

// CreatedAt returns when the connection was established.
func (l *Lease[T]) CreatedAt() time.Time { return l.created }

// IdleSince returns when the connection last went back to the idle queue
// (zero for a connection never released).
func (l *Lease[T]) IdleSince() time.Time { return l.idleSince }

// Release returns the connection to the tail of the idle queue. It closes
// the connection instead when it is past its lifetime, when the pool has
// more connections than its size, or when the pool is closed. Release
// panics if the lease is not held.
func (l *Lease[T]) Release() {
	if !l.leased {
		panic("pools: Release of a lease not held (released or destroyed already)")
	}
	l.leased = false
	p := l.p
	now := time.Now()
	if p.closed.Load() || (!l.expires.IsZero() && !now.Before(l.expires)) {
		p.destroy(l)
		return
	}
	if p.excess.Load() && p.shed(l, false) {
		return
	}
	if p.budget != nil && p.budget.handOver(p) {
		p.destroy(l)
		return
	}
	l.idleSince = now
	p.putIdle(l)
}

// Destroy closes the connection and frees its slot, for a connection that
// is broken or in an unknown state. Destroy panics if the lease is not
// held.
func (l *Lease[T]) Destroy() {
	if !l.leased {
		panic("pools: Destroy of a lease not held (released or destroyed already)")
	}
	l.leased = false
	l.unsound = true
	l.p.destroy(l)
}

// Retire closes the connection and frees its slot, for a connection at
// rest that must not serve again (its server holds state the pool cannot
// clear): it quits, where Destroy closes (see Quitter). Retire panics if
// the lease is not held.
func (l *Lease[T]) Retire() {
	if !l.leased {
		panic("pools: Retire of a lease not held (released or destroyed already)")
	}
	l.leased = false
	l.p.destroy(l)
}

// Pass reports whether l, which its holder is done with, may go from the
// holder straight to another caller that waits for a connection of the
// pool outside Acquire (see WaitOutside), as Release would hand it to an
// Acquire call that waits: false when Release would close it instead
// (the pool closed or above its size, the connection past its lifetime,
// its budget unit wanted by another pool), and false while Acquire calls
// wait (they come first: Release then). When it may, l counts as
// released and taken again now (IdleSince), and stays leased: the new
// holder releases it. Pass panics if the lease is not held.
func (l *Lease[T]) Pass() bool {
	if !l.leased {
		panic("pools: Pass of a lease not held (released or destroyed already)")
	}
	p := l.p
	if p.waiting.Load() > 0 || p.closed.Load() || p.excess.Load() || (p.budget != nil && p.budget.handOver(p)) {
		return false
	}
	now := time.Now()
	if !l.expires.IsZero() && !now.Before(l.expires) {
		return false
	}
	l.idleSince = now
	return true
}

// Pool returns the pool l is a lease of.
func (l *Lease[T]) Pool() *Pool[T] { return l.p }

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
	return w.p.timeoutError()
}

// End stops counting the wait.
func (w OutsideWait[T]) End() {
	p := w.p
	end := time.Now()
	p.queue.end(int64(w.start.Sub(p.epoch)), int64(end.Sub(p.epoch)))
	p.waitNanos.Add(int64(end.Sub(w.start)))
	p.outside.Add(-1)
}

// expired reports whether l is past its lifetime.
func (l *Lease[T]) expired() bool {
	return !l.expires.IsZero() && !time.Now().Before(l.expires)
}

// putIdle makes l idle: on top of the stack, or, while Acquire calls
// wait, handed to the first of them. It destroys l instead if the pool is
// closed.
func (p *Pool[T]) putIdle(l *Lease[T]) { p.stackIdle(l, -1) }

// stackIdle is putIdle with l put at index at of the stack (-1: on top).
// It reports whether l went to the stack.
func (p *Pool[T]) stackIdle(l *Lease[T], at int) (stacked bool) {
	p.idleMu.Lock()
	if p.waiters == 0 {
		if at < 0 || at > len(p.stack) {
			at = len(p.stack)
		}
		p.stack = slices.Insert(p.stack, at, l)
		p.idleMu.Unlock()
		stacked = true
	} else {
		p.idleMu.Unlock()
		select {
		case p.idle <- l:
		default:
			// Unreachable: cap(idle) is never below open.
			p.log.Error("idle queue full; closing connection", "open", p.Stat().Open)
			p.destroy(l)
			return
		}
	}
	// Close sets closed and then drains the queue; we queue and then check
	// closed. One of the two drains sees l.
	if p.closed.Load() {
		p.drainIdle()
	}
	return stacked
}

// CloseIdle closes every connection idle now, for when they are likely
// dead (their server went away); leased connections are not touched. The
// pool dials again up to MinIdle in the background.
func (p *Pool[T]) CloseIdle() {
	p.drainIdle()
	p.signalKick()
}

// drainIdle destroys every connection idle now. It takes them all out
// before it destroys the first: a destroy below MinIdle starts a dial, and
// the new connection must not be closed too. (A closed pool dials no
// more, and a connection stacked after the take drains itself: see
// stackIdle.)
func (p *Pool[T]) drainIdle() {
	var now []*Lease[T]
	for l := p.takeIdle(false); l != nil; l = p.takeIdle(false) {
		now = append(now, l)
	}
	for _, l := range now {
		p.destroy(l)
	}
}

// destroy stops counting l and closes it in the background.
func (p *Pool[T]) destroy(l *Lease[T]) {
	p.mu.Lock()
	p.finishDestroy(l)
}

// shed destroys l if the pool has more open connections than it should:
// more than MinIdle when aboveMinIdle, else more than Size. It reports
// whether it did.
func (p *Pool[T]) shed(l *Lease[T], aboveMinIdle bool) bool {
	p.mu.Lock()
	floor := p.size
	if aboveMinIdle {
		floor = p.minIdle
	}
	if p.open <= floor {
		p.mu.Unlock()
		return false
	}
	p.finishDestroy(l)
	return true
}

// finishDestroy is destroy's second half; the caller holds mu, which
// finishDestroy unlocks.
func (p *Pool[T]) finishDestroy(l *Lease[T]) {
	p.open--
	p.setExcessLocked()
	below := p.open+p.dialing < p.minIdle
	last := p.closed.Load() && p.open == 0 && p.dialing == 0
	p.closing.Add(1)
	p.mu.Unlock()
	p.destroyed.Add(1)
	go p.destruct(l)
	if last {
		// The last connection of a closed pool: wait for every close to
		// finish.
		p.closing.Wait()
		return
	}
	p.signalRoom()
	if below {
		p.signalKick()
	}
}

// setExcessLocked updates excess; the caller holds mu.
func (p *Pool[T]) setExcessLocked() { p.excess.Store(p.open > p.size) }

func (p *Pool[T]) signalRoom() {
	select {
	case p.room <- struct{}{}:
	default:
	}
}

func (p *Pool[T]) signalKick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// spawn runs fn in a goroutine that marks wg done and logs a panic; the
// caller has called wg.Add(1) under mu while the pool was open.
func (p *Pool[T]) spawn(what string, fn func()) {
	go func() {
		defer p.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				p.log.Error("goroutine panicked", "goroutine", what, "panic", r)
			}
		}()
		fn()
	}()
}

// checkInterval is how often the maintenance loop runs.
func (p *Pool[T]) checkInterval() time.Duration {
	iv := maxCheckInterval
	if idle := p.idleTimeout(); idle > 0 {
		iv = min(iv, idle/2)
	}
	if life := p.maxLifetime(); life > 0 {
		iv = min(iv, life/4)
	}
	return max(iv, minCheckInterval)
}

// maintain is the pool's background loop: close expired and long-idle
// connections, dial up to MinIdle; every checkInterval, and when kicked.
func (p *Pool[T]) maintain() {
	t := time.NewTicker(p.checkInterval())
	defer t.Stop()
	iv := p.checkInterval()
	for {
		p.evict()
		p.fill()
		select {
		case <-p.closec:
			return
		case <-t.C:
		case <-p.kick:
		}
		if next := p.checkInterval(); next != iv { // SetTimeouts changed it
			iv = next
			t.Reset(iv)
		}
	}
}

// Timeouts are the durations SetTimeouts changes; the meaning of zero and
// negative values is Config's.
type Timeouts struct {
	IdleTimeout, MaxLifetime, AcquireTimeout, DialTimeout time.Duration
}

// SetTimeouts changes the pool's timeouts at run time (a configuration
// reload). Connections already open keep the lifetime they were given;
// Acquire calls and dials already waiting keep their deadlines.
func (p *Pool[T]) SetTimeouts(t Timeouts) error {
	cfg, err := Config[T]{
		Name: p.name, Dial: p.dial, Size: 1, MinIdle: -1,
		IdleTimeout: t.IdleTimeout, MaxLifetime: t.MaxLifetime,
		AcquireTimeout: t.AcquireTimeout, DialTimeout: t.DialTimeout,
	}.withDefaults()
	if err != nil {
		return err
	}
	p.storeTimeouts(cfg)
	p.signalKick()
	return nil
}

func (p *Pool[T]) storeTimeouts(cfg Config[T]) {
	p.idleTimeoutNs.Store(int64(cfg.IdleTimeout))
	p.maxLifetimeNs.Store(int64(cfg.MaxLifetime))
	p.acquireTimeoutNs.Store(int64(cfg.AcquireTimeout))
	p.dialTimeoutNs.Store(int64(cfg.DialTimeout))
}

func (p *Pool[T]) idleTimeout() time.Duration    { return time.Duration(p.idleTimeoutNs.Load()) }
func (p *Pool[T]) maxLifetime() time.Duration    { return time.Duration(p.maxLifetimeNs.Load()) }
func (p *Pool[T]) acquireTimeout() time.Duration { return time.Duration(p.acquireTimeoutNs.Load()) }
func (p *Pool[T]) dialTimeout() time.Duration    { return time.Duration(p.dialTimeoutNs.Load()) }

// evict passes once over the idle connections, closing those past their
// lifetime, idle longer than IdleTimeout (while more than MinIdle are
// open) or over Size: first the ones handed over that no caller took,
// then the stack from its bottom (idle longest); the others keep their
// places, or go to a caller that waits meanwhile. Only one connection is
// out at a time.
func (p *Pool[T]) evict() {
	idle := p.idleTimeout()
handedOver:
	for n := len(p.idle); n > 0; n-- {
		select {
		case l := <-p.idle:
			if !p.evictOne(l, idle) {
				p.putIdle(l)
			}
		default:
			break handedOver
		}
	}
	for i := 0; ; {
		p.idleMu.Lock()
		if i >= len(p.stack) {
			p.idleMu.Unlock()
			return
		}
		l := p.stack[i]
		p.stack = slices.Delete(p.stack, i, i+1)
		p.idleMu.Unlock()
		if !p.evictOne(l, idle) && p.stackIdle(l, i) {
			i++ // kept in its place; else the next one is at i now
		}
	}
}

// evictOne closes l, just taken from the idle connections, if evict
// should; it reports whether it did.
func (p *Pool[T]) evictOne(l *Lease[T], idle time.Duration) bool {
	now := time.Now()
	switch {
	case !l.expires.IsZero() && !now.Before(l.expires):
		p.destroy(l)
	case idle > 0 && now.Sub(l.idleSince) >= idle && p.shed(l, true):
	case p.excess.Load() && p.shed(l, false):
	case p.budget != nil && p.budget.over.Load():
		p.destroy(l)
	default:
		return false
	}
	return true
}

// fill starts dials until MinIdle connections are open or being dialed,
// within MaxDials and Size. A failed dial is retried at the next tick.
func (p *Pool[T]) fill() {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return
	}
	n := min(p.minIdle-p.open-p.dialing, p.maxDials-p.dialing, p.size-p.open-p.dialing)
	if n > 0 && p.budget != nil {
		n = p.budget.take(n)
	}
	if n <= 0 {
		p.mu.Unlock()
		return
	}
	p.dialing += n
	p.wg.Add(n)
	p.mu.Unlock()
	for range n {
		p.spawn("dial", func() { p.dialOne(context.Background(), nil) })
	}
}

// Resize changes the pool's size and MinIdle at runtime. size is clamped
// to [1, max(Config.Size, 1024)] (the bound fixed by New) and minIdle to
// [0, size]; here zero means zero, not a default. When the pool shrinks,
// the surplus connections are closed as they are released or found idle;
// leased connections are not interrupted.
func (p *Pool[T]) Resize(size, minIdle int) {
	if size < 1 || size > p.limit {
		c := min(max(size, 1), p.limit)
		p.log.Warn("pool size out of range; clamped", "size", size, "clamped", c, "limit", p.limit)
		size = c
	}
	minIdle = min(max(minIdle, 0), size)
	p.mu.Lock()
	p.size, p.minIdle = size, minIdle
	p.setExcessLocked()
	p.mu.Unlock()
	p.signalRoom()
	p.signalKick()
}

// Stat returns a snapshot of the pool's state and counters.
func (p *Pool[T]) Stat() Stat {
	p.mu.Lock()
	s := Stat{Size: p.size, MinIdle: p.minIdle, Open: p.open, Dialing: p.dialing}
	p.mu.Unlock()
	s.Idle = min(p.idleCount(), s.Open)
	s.Waiting = int(p.waiting.Load() + p.outside.Load())
	s.InUse = s.Open - s.Idle
	s.Waits = p.waits.Load()
	s.WaitTime = time.Duration(p.waitNanos.Load())
	s.Dials = p.dials.Load()
	s.DialErrors = p.dialErrors.Load()
	s.Destroyed = p.destroyed.Load()
	s.AcquireTimeouts = p.acquireTimeouts.Load()
	s.QueueWait = p.QueueWait(time.Now())
	return s
}

// Close closes the pool: later Acquire calls and the ones waiting fail
// with ErrClosed, dials in flight are cancelled, idle connections are
// closed, and leased connections are closed when released or destroyed.
// Close waits for the maintenance goroutine and the dials to end (a Dial
// that ignores its context delays it) but not for leased connections.
// Close is idempotent; every call returns once the first has finished.
//
// After Close, the Release or Destroy that closes the last leased
// connection waits for the pool's connections to finish closing.
func (p *Pool[T]) Close() {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.closed.Store(true)
	p.mu.Unlock()
	if p.budget != nil {
		p.budget.detach(p)
	}
	close(p.closec)
	p.cancelBase()
	p.drainIdle()
	p.wg.Wait()
	p.drainIdle()

	p.mu.Lock()
	last := p.open == 0 && p.dialing == 0
	p.mu.Unlock()
	if last {
		p.closing.Wait()
	}
	p.log.Debug("pool closed")
	close(p.done)
}

func (p *Pool[T]) closedError() error {
	return fmt.Errorf("pool %s: %w", p.name, ErrClosed)
}

func (p *Pool[T]) ctxError(err error) error {
	return fmt.Errorf("pool %s: acquire: %w", p.name, err)
}

func (p *Pool[T]) timeoutError() error {
	s := p.Stat()
	return &AcquireTimeoutError{
		Pool:    p.name,
		Size:    s.Size,
		InUse:   s.InUse,
		Dialing: s.Dialing,
		Waited:  p.acquireTimeout(),
	}
}

// budgetWaiting implements budgetPool.
func (p *Pool[T]) budgetWaiting() bool { return p.budgetWaiters.Load() > 0 }

// reclaimIdle implements budgetPool: it closes the longest idle
// connection, if any.
func (p *Pool[T]) reclaimIdle() bool {
	l := p.takeIdle(true)
	if l == nil {
		return false
	}
	p.destroy(l)
	return true
}

// budgetRoom implements budgetPool.
func (p *Pool[T]) budgetRoom() {
	p.signalRoom()
	p.signalKick()
}
