package pools

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/puddle/v2"
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
	// Order is the order idle connections are handed out in: RoundRobin
	// (the zero value) or LIFO. SetOrder changes it at run time.
	Order Order
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
	// DialTimeout bounds one call of Dial, from when it waits for its turn
	// among MaxDials. Default 5s; must not be negative.
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
	if c.Order > LIFO {
		return c, fmt.Errorf("pools: pool %s: Config.Order %v is not an order", c.Name, c.Order)
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

// Pool is a pool of connections of type T to one backend, built on a
// puddle.Pool (see the package documentation). It is safe for concurrent
// use. Build it with New and end it with Close.
type Pool[T Conn] struct {
	name    string
	dial    func(ctx context.Context) (T, error)
	prepare func(ctx context.Context, c T) (bool, error)
	log     hclog.Logger
	// budget bounds the pool with its siblings; nil: Size only.
	budget *Budget
	// dialTurns holds a token per dial in flight: at most MaxDials.
	dialTurns chan struct{}
	// order is the reuse Order (SetOrder).
	order atomic.Uint32

	// gen is the puddle pool of the current size; retired are those of
	// earlier sizes that still hold connections (guarded by mu).
	gen atomic.Pointer[generation[T]]

	// idle is the round-robin queue: the connections of the empty idle
	// seats, guarded by idleMu, which is taken alone.
	idleMu sync.Mutex
	idle   ring[*entry[T]]

	// handQ is the hand-off queue: Acquire calls waiting while every
	// seat is leased, served first by Release (handoff.go); handN is its
	// length, read without the lock; handFree keeps the waiters of
	// earlier waits. Guarded by handMu, which is taken alone.
	handMu   sync.Mutex
	handQ    ring[*handWaiter[T]]
	handN    atomic.Int32
	handFree []*handWaiter[T]
	// inPuddle counts the Acquire calls waiting in puddle's Acquire (for
	// a dial, or a release while dials were possible).
	inPuddle atomic.Int32

	// waiting counts Acquire calls waiting for a connection; outside,
	// the waits outside Acquire (WaitOutside); budgetWaiters, the Acquire
	// calls waiting because the budget was spent.
	waiting       atomic.Int32
	outside       atomic.Int32
	budgetWaiters atomic.Int32
	// queue tells how long they wait (QueueWait); epoch, the pool's
	// start, is the origin of its times.
	queue queueWaits
	epoch time.Time
	// room is closed, and replaced, when a budget unit may be free or a
	// connection came back while callers wait for a unit.
	roomMu sync.Mutex
	room   chan struct{}

	// The timeouts may change at run time (SetTimeouts); nanoseconds.
	idleTimeoutNs    atomic.Int64 // 0: never
	maxLifetimeNs    atomic.Int64 // 0: never
	acquireTimeoutNs atomic.Int64
	dialTimeoutNs    atomic.Int64

	// kick wakes the maintenance loop early (non-blocking send).
	kick chan struct{}
	// closec is closed by Close; done is closed when Close has finished.
	closec chan struct{}
	done   chan struct{}
	// closed is set by Close, under mu; read anywhere.
	closed atomic.Bool
	// filling is set while the maintenance loop's warm-up dials run.
	filling atomic.Bool
	// dialFailing is set while dials fail (to log state changes only).
	dialFailing atomic.Bool
	// baseCtx ends every dial's context when the pool closes.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	// noDial is the context TryAcquire gives puddle: a seat it would
	// construct for lack of an idle one is refused at once.
	noDial context.Context
	// warm is the context of warm-up dials.
	warm context.Context
	// wg counts the maintenance goroutine and the warm-up goroutines. Add
	// is called under mu while closed is false.
	wg sync.WaitGroup
	// closers counts the goroutines closing the puddle pools after Close;
	// closing, those closing discarded connections. closingMu orders
	// closing's Add (discard) and Wait (Close): a discard may start while
	// Close waits, and WaitGroup wants every Add from zero before Wait.
	closers   sync.WaitGroup
	closingMu sync.Mutex
	closing   sync.WaitGroup

	mu      sync.Mutex
	minIdle int
	retired []*generation[T]
	// past holds the counters of retired generations that are gone.
	past puddleCounts

	waits           atomic.Int64
	waitNanos       atomic.Int64
	dials           atomic.Int64
	dialErrors      atomic.Int64
	destroyed       atomic.Int64
	acquireTimeouts atomic.Int64
	// handoffs counts the leases Release handed to a waiter, handWait
	// (ns) the waits that ended so, handCancels the waits of the queue
	// that ended without a connection: Stat adds them to puddle's
	// acquire counters.
	handoffs    atomic.Int64
	handWait    atomic.Int64
	handCancels atomic.Int64
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
	p := &Pool[T]{
		name:      cfg.Name,
		dial:      cfg.Dial,
		prepare:   cfg.Prepare,
		log:       cfg.Logger.With("pool", cfg.Name),
		budget:    cfg.Budget,
		dialTurns: make(chan struct{}, cfg.MaxDials),
		room:      make(chan struct{}),
		kick:      make(chan struct{}, 1),
		closec:    make(chan struct{}),
		done:      make(chan struct{}),
		minIdle:   cfg.MinIdle,
		epoch:     time.Now(),
	}
	p.order.Store(uint32(cfg.Order))
	p.storeTimeouts(cfg)
	p.baseCtx, p.cancelBase = context.WithCancel(context.Background())
	p.noDial = context.WithValue(context.Background(), seatKey{}, seatRequest[T]{kind: seatRefused})
	p.warm = context.WithValue(p.baseCtx, seatKey{}, seatRequest[T]{kind: seatWarm})
	p.gen.Store(p.newGeneration(cfg.Size))
	if p.budget != nil {
		p.budget.attach(p)
	}
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
// joins the idle connections. Acquire never hands out a connection past
// its lifetime.
func (p *Pool[T]) Acquire(ctx context.Context) (*Lease[T], error) {
	if ctx.Err() != nil {
		return nil, p.ctxError(context.Cause(ctx))
	}
	for {
		if p.closed.Load() {
			return nil, p.closedError()
		}
		res, err := p.gen.Load().pud.TryAcquire(p.noDial)
		if err != nil {
			if errors.Is(err, puddle.ErrClosedPool) {
				continue // a generation retired by Close
			}
			return p.acquireSlow(ctx)
		}
		if l, err := p.take(ctx, res); l != nil || err != nil {
			return l, err
		}
	}
}

// TryAcquire leases an idle connection if there is one, without waiting
// and without dialing; ok is false when there is none (Acquire waits
// then). As with Acquire, a connection past its lifetime is never handed
// out, and Config.Prepare vets it (with a background context): one it
// rejects or fails on is destroyed and the next idle one tried.
func (p *Pool[T]) TryAcquire() (l *Lease[T], ok bool) {
	for !p.closed.Load() {
		res, err := p.gen.Load().pud.TryAcquire(p.noDial)
		if err != nil {
			return nil, false
		}
		if l, _ = p.take(context.Background(), res); l != nil {
			return l, true
		}
	}
	return nil, false
}

// take makes the seat res, just acquired from puddle, a lease: it gives
// an empty seat the connection idle longest, and vets the connection. l
// is nil when the connection may not be handed out (it is destroyed, and
// err is Prepare's error, if any, wrapped).
func (p *Pool[T]) take(ctx context.Context, res *puddle.Resource[*Lease[T]]) (l *Lease[T], err error) {
	l = res.Value()
	l.res = res
	if l.e == nil {
		if l.e = p.popIdle(); l.e == nil {
			res.Hijack() // a seat without a connection: not one to count
			return nil, nil
		}
	}
	if l.e.expired(time.Now()) {
		p.discard(l)
		return nil, nil
	}
	if p.prepare != nil {
		ok, err := p.prepare(ctx, l.e.conn)
		if err != nil || !ok {
			l.e.unsound = true
			p.discard(l)
			if err != nil {
				return nil, fmt.Errorf("pool %s: prepare: %w", p.name, err)
			}
			return nil, nil
		}
	}
	l.leased = true
	return l, nil
}

// acquireSlow waits in puddle's Acquire (first come, first served) for a
// released connection or a dial of its own, until ctx ends, the pool's
// AcquireTimeout passes, or the pool closes; while the budget is spent
// it waits for a unit instead, taking an idle connection of a sibling
// pool to free one.
func (p *Pool[T]) acquireSlow(ctx context.Context) (*Lease[T], error) {
	start := time.Now()
	p.waits.Add(1)
	p.waiting.Add(1)
	since := int64(start.Sub(p.epoch))
	p.queue.begin(since)
	budgetWait := false
	defer func() {
		end := time.Now()
		p.queue.end(since, int64(end.Sub(p.epoch)))
		p.waitNanos.Add(int64(end.Sub(start)))
		p.waiting.Add(-1)
		if budgetWait {
			p.budgetWaiters.Add(-1)
		}
	}()
	deadline := start.Add(p.acquireTimeout())
	// lookedAgain: the caller left the hand-off queue to look again; it
	// keeps its place there.
	lookedAgain := false
	for {
		if p.closed.Load() {
			return nil, p.closedError()
		}
		g := p.gen.Load()
		if !budgetWait && g.atSize() {
			l, done, err := p.handedOver(ctx, g, deadline, lookedAgain)
			if done {
				return l, err
			}
			lookedAgain = true
			continue
		}
		room := p.roomSignal()
		p.inPuddle.Add(1)
		res, err := g.acquire(ctx, deadline)
		p.inPuddle.Add(-1)
		if err == nil {
			if l, err := p.take(ctx, res); l != nil || err != nil {
				return l, err
			}
			continue
		}
		var dialErr *dialFailure
		switch {
		case errors.Is(err, errBudgetSpent):
			if !budgetWait {
				// Counted before the next try, so that a unit freed
				// from now on signals room.
				budgetWait = true
				p.budgetWaiters.Add(1)
				continue
			}
			p.budget.reclaim(p)
			select {
			case <-room:
				continue
			case <-ctx.Done():
			case <-time.After(time.Until(deadline)):
			case <-p.closec:
				return nil, p.closedError()
			}
		case errors.As(err, &dialErr):
			return nil, &DialError{Pool: p.name, Err: dialErr.err}
		case errors.Is(err, puddle.ErrClosedPool), g.retiredNow():
			continue // the pool closed (checked above) or resized
		}
		if ctx.Err() != nil {
			return nil, p.ctxError(context.Cause(ctx))
		}
		if !time.Now().Before(deadline) {
			p.acquireTimeouts.Add(1)
			return nil, p.timeoutError(errors.Is(err, errBudgetSpent))
		}
		if !errors.Is(err, errBudgetSpent) {
			return nil, fmt.Errorf("pool %s: acquire: %w", p.name, err)
		}
	}
}

// handedOver is acquireSlow's wait in the hand-off queue while g is at
// its size (handoff.go); first queues the caller first, for one that left
// the queue to look again. done is false when the caller should look
// again.
func (p *Pool[T]) handedOver(ctx context.Context, g *generation[T], deadline time.Time, first bool) (l *Lease[T], done bool, err error) {
	start := time.Now()
	l, found, timedOut, err := p.waitHandoff(ctx, g, deadline, first)
	switch {
	case found != nil:
		l, err = p.take(ctx, found)
		return l, l != nil || err != nil, err
	case l != nil:
		p.handWait.Add(int64(time.Since(start)))
		if p.prepare == nil {
			return l, true, nil
		}
		ok, perr := p.prepare(ctx, l.e.conn)
		if perr == nil && ok {
			return l, true, nil
		}
		l.leased = false
		l.e.unsound = true
		p.discard(l)
		if perr != nil {
			return nil, true, fmt.Errorf("pool %s: prepare: %w", p.name, perr)
		}
		return nil, false, nil
	case err != nil:
		p.handCancels.Add(1)
		return nil, true, err
	case timedOut:
		p.handCancels.Add(1)
		p.acquireTimeouts.Add(1)
		return nil, true, p.timeoutError(false)
	}
	return nil, false, nil
}

// Closed reports whether Close was called: Acquire fails with ErrClosed.
func (p *Pool[T]) Closed() bool { return p.closed.Load() }

// Busy reports whether a caller of Acquire would have to wait for a
// connection to come back: none is idle and the pool's size is in use.
// Seats being constructed do not count: they may be ones puddle's
// TryAcquire started and the pool refuses at once (see the package
// documentation), and a caller that finds real dials in flight waits for
// them in Acquire.
func (p *Pool[T]) Busy() bool {
	g := p.gen.Load()
	st := g.pud.Stat()
	return st.IdleResources() == 0 && int(st.AcquiredResources()) >= g.size
}

// Order returns the pool's reuse order.
func (p *Pool[T]) Order() Order { return Order(p.order.Load()) }

// SetOrder changes the reuse order at run time (a configuration reload).
// The connections idle now are handed out as they are kept (each in its
// seat under LIFO, in turn under RoundRobin) and follow the new order
// from their next release.
func (p *Pool[T]) SetOrder(o Order) { p.order.Store(uint32(o)) }

// queueIdle puts e last in the round-robin queue.
func (p *Pool[T]) queueIdle(e *entry[T]) {
	p.idleMu.Lock()
	p.idle.push(e)
	p.idleMu.Unlock()
}

// popIdle takes the first connection of the round-robin queue, or nil.
func (p *Pool[T]) popIdle() *entry[T] {
	p.idleMu.Lock()
	e := p.idle.pop()
	p.idleMu.Unlock()
	return e
}

// roomSignal returns the channel the next signalRoom closes.
func (p *Pool[T]) roomSignal() <-chan struct{} {
	p.roomMu.Lock()
	defer p.roomMu.Unlock()
	return p.room
}

// signalRoom wakes the callers waiting for a budget unit.
func (p *Pool[T]) signalRoom() {
	p.roomMu.Lock()
	close(p.room)
	p.room = make(chan struct{})
	p.roomMu.Unlock()
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

// Resize changes the pool's size and MinIdle at runtime. size is clamped
// to [1, MaxSize] and minIdle to [0, size]; here zero means zero, not a
// default. A new size is a new puddle pool (a generation): the idle
// connections move to it at once, the leased ones as they are released,
// and those it has no room for are closed; callers waiting in the old one
// wait in the new one. Leased connections are not interrupted.
func (p *Pool[T]) Resize(size, minIdle int) {
	if size < 1 || size > MaxSize {
		c := min(max(size, 1), MaxSize)
		p.log.Warn("pool size out of range; clamped", "size", size, "clamped", c)
		size = c
	}
	minIdle = min(max(minIdle, 0), size)
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return
	}
	p.minIdle = minIdle
	old := p.gen.Load()
	if old.size == size {
		p.mu.Unlock()
		p.signalKick()
		return
	}
	p.gen.Store(p.newGeneration(size))
	p.retired = append(p.retired, old)
	p.mu.Unlock()
	old.retire()
	p.moveIdle(old)
	p.wakeWaiters(-1)
	p.signalKick()
}

// Stat returns a snapshot of the pool's state and counters: the
// connections' books are puddle's, summed over the pool's generations.
func (p *Pool[T]) Stat() Stat {
	p.mu.Lock()
	g := p.gen.Load()
	gens := append([]*generation[T]{g}, p.retired...)
	s := Stat{Size: g.size, MinIdle: p.minIdle}
	c := p.past
	p.mu.Unlock()
	for _, g := range gens {
		st := g.pud.Stat()
		s.Idle += int(st.IdleResources())
		s.InUse += int(st.AcquiredResources())
		s.Dialing += int(st.ConstructingResources())
		c.add(st)
	}
	s.Open = s.Idle + s.InUse
	handoffs, handWait := p.handoffs.Load(), time.Duration(p.handWait.Load())
	s.Acquires, s.AcquireTime = c.acquires+handoffs, c.acquireTime+handWait
	s.EmptyAcquires, s.EmptyAcquireTime = c.emptyAcquires+handoffs, c.emptyAcquireTime+handWait
	s.CanceledAcquires = c.canceledAcquires + p.handCancels.Load()
	s.Waiting = int(p.waiting.Load() + p.outside.Load())
	s.Waits = p.waits.Load()
	s.WaitTime = time.Duration(p.waitNanos.Load())
	s.Dials = p.dials.Load()
	s.DialErrors = p.dialErrors.Load()
	s.Destroyed = p.destroyed.Load()
	s.AcquireTimeouts = p.acquireTimeouts.Load()
	s.QueueWait = p.QueueWait(time.Now())
	s.Order = p.Order()
	return s
}

// CloseIdle closes every connection idle now, for when they are likely
// dead (their server went away); leased connections are not touched. The
// pool dials again up to MinIdle in the background.
func (p *Pool[T]) CloseIdle() {
	for _, g := range p.generations() {
		for _, res := range g.pud.AcquireAllIdle() {
			l := res.Value()
			l.res = res
			p.discard(l) // an empty seat closes the connection first in the queue
		}
	}
	p.signalKick()
}

// generations returns the current generation and the retired ones.
func (p *Pool[T]) generations() []*generation[T] {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*generation[T]{p.gen.Load()}, p.retired...)
}

// Close closes the pool: later Acquire calls and the ones waiting fail
// with ErrClosed, dials in flight are cancelled, idle connections are
// closed, and leased connections are closed when released or destroyed.
// Close waits for the maintenance goroutine, the dials and the closes of
// the idle connections, but not for leased connections. Close is
// idempotent; every call returns once the first has finished.
func (p *Pool[T]) Close() {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.closed.Store(true)
	gens := append([]*generation[T]{p.gen.Load()}, p.retired...)
	p.mu.Unlock()
	if p.budget != nil {
		p.budget.detach(p)
	}
	close(p.closec)
	p.wakeWaiters(-1) // the hand-off queue: they see the pool closed
	p.cancelBase()
	for _, g := range gens {
		g.retire()
	}
	p.wg.Wait()
	defer func() {
		p.closingMu.Lock()
		p.closing.Wait()
		p.closingMu.Unlock()
	}()
	for _, g := range gens {
		// puddle's Close destroys the idle seats and waits until the
		// leased ones come back and are destroyed: only a pool with
		// none leased is waited for.
		if g.pud.Stat().AcquiredResources() == 0 {
			g.pud.Close()
			continue
		}
		p.closers.Add(1)
		go func() {
			defer p.closers.Done()
			g.pud.Close()
		}()
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

// timeoutError is the error of an acquire that waited AcquireTimeout;
// budgetSpent says it waited for a unit of the budget.
func (p *Pool[T]) timeoutError(budgetSpent bool) error {
	s := p.Stat()
	e := &AcquireTimeoutError{
		Pool:    p.name,
		Size:    s.Size,
		InUse:   s.InUse,
		Dialing: s.Dialing,
		Waited:  p.acquireTimeout(),
	}
	if budgetSpent && p.budget != nil {
		e.Budget = max(p.budget.Limit(), 0)
	}
	return e
}

// discard takes l's seat out of puddle's books at once (Hijack) and
// closes its connection in the background (an empty seat's: the first of
// the round-robin queue), as closeEntry says. puddle's own Destroy would
// count the seat as acquired until the close returns; the budget unit is
// what stays held until then.
func (p *Pool[T]) discard(l *Lease[T]) {
	e := l.e // kept in l: the seat is gone, never handed out again
	l.res.Hijack()
	p.wakeWaiters(1) // a seat is free: the first waiter may dial
	if e == nil {
		if e = p.popIdle(); e == nil {
			return
		}
	}
	p.destroyed.Add(1)
	p.closingMu.Lock()
	p.closing.Add(1)
	p.closingMu.Unlock()
	go func() {
		defer p.closing.Done()
		p.closeEntry(e)
	}()
}

// budgetWaiting implements budgetPool.
func (p *Pool[T]) budgetWaiting() bool { return p.budgetWaiters.Load() > 0 }

// reclaimIdle implements budgetPool: it closes the connection idle
// longest, if any.
func (p *Pool[T]) reclaimIdle() bool {
	seats := p.gen.Load().pud.AcquireAllIdle()
	if len(seats) == 0 {
		return false
	}
	// AcquireAllIdle took the seats top of the stack first: the last one
	// is idle longest, and an empty one closes the first of the queue.
	victim := len(seats) - 1
	for i, res := range seats {
		if res.Value().e == nil {
			victim = i
			break
		}
	}
	for i := len(seats) - 1; i >= 0; i-- {
		res := seats[i]
		res.Value().res = res
		if i == victim {
			p.discard(res.Value())
		} else {
			res.ReleaseUnused()
		}
	}
	return true
}

// budgetRoom implements budgetPool.
func (p *Pool[T]) budgetRoom() {
	if p.budgetWaiters.Load() > 0 {
		p.signalRoom()
	}
	p.signalKick()
}
