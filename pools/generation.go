package pools

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/puddle/v2"
)

// generation is the puddle pool of one size of a Pool: puddle fixes its
// MaxSize at construction, so Resize starts a new generation and retires
// the old one, whose connections move over (see Pool.Resize).
type generation[T Conn] struct {
	p    *Pool[T]
	size int
	pud  *puddle.Pool[*Lease[T]]
	// ctx ends when the generation retires: its waiting callers move on.
	ctx    context.Context
	retire context.CancelFunc
}

// newGeneration returns a generation of size seats.
func (p *Pool[T]) newGeneration(size int) *generation[T] {
	g := &generation[T]{p: p, size: size}
	g.ctx, g.retire = context.WithCancel(context.Background())
	pud, err := puddle.NewPool(&puddle.Config[*Lease[T]]{
		Constructor: g.construct,
		Destructor:  p.destruct,
		MaxSize:     int32(size),
	})
	if err != nil {
		panic(fmt.Sprintf("pools: puddle refused size %d: %v", size, err)) // size >= 1 always
	}
	g.pud = pud
	return g
}

// retiredNow reports whether the generation has retired.
func (g *generation[T]) retiredNow() bool { return g.ctx.Err() != nil }

// acquire waits in puddle's Acquire, which serves its callers first come,
// first served, until deadline, ctx's end or the generation's retirement.
func (g *generation[T]) acquire(ctx context.Context, deadline time.Time) (*puddle.Resource[*Lease[T]], error) {
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	defer stop()
	return g.pud.Acquire(actx)
}

// seatKey is the context key of a seatRequest: what the constructor of a
// seat is asked to do.
type seatKey struct{}

// seatKind says how a seat gets its connection.
type seatKind uint8

const (
	// seatDial (no request in the context, as for Acquire) dials a
	// connection into the seat.
	seatDial seatKind = iota
	// seatWarm dials a connection for the idle seats (warm-up): under
	// RoundRobin it joins the round-robin queue and the seat is empty.
	seatWarm
	// seatAdopt takes the connection of a seat of a retired generation,
	// or none (an empty seat: its connection waits in the queue).
	seatAdopt
	// seatRefused refuses: puddle's TryAcquire constructs a seat when it
	// finds none idle, and the pool's TryAcquire never dials.
	seatRefused
)

// seatRequest is the value of seatKey.
type seatRequest[T Conn] struct {
	kind seatKind
	e    *entry[T] // seatAdopt's connection, or nil
	// taken, for seatAdopt, is set when the constructor took e (or made
	// the empty seat): from then on puddle owns it.
	taken *bool
}

// errBudgetSpent is the constructor's answer when the pool's budget has
// no unit for a dial: the caller waits for one outside puddle.
var errBudgetSpent = errors.New("connection budget spent")

// errRefused is the constructor's answer to seatRefused.
var errRefused = errors.New("seat refused: no dial")

// dialFailure is the constructor's answer when Config.Dial failed.
type dialFailure struct{ err error }

func (e *dialFailure) Error() string { return "dial: " + e.err.Error() }
func (e *dialFailure) Unwrap() error { return e.err }

// construct is puddle's Constructor: it fills a new seat of g as its
// context asks (seatRequest), dialing unless told otherwise. A dial takes
// a budget unit first (the connection's destruct gives it back) and waits
// for its turn among MaxDials; it runs with the values of ctx but not its
// cancellation (a caller that gives up leaves its dial to finish for the
// next caller: pgx issue 1259), ending after DialTimeout or when the pool
// closes.
func (g *generation[T]) construct(ctx context.Context) (l *Lease[T], err error) {
	p := g.p
	req, _ := ctx.Value(seatKey{}).(seatRequest[T])
	switch req.kind {
	case seatRefused:
		return nil, errRefused
	case seatAdopt:
		*req.taken = true
		if req.e != nil && p.Order() == RoundRobin {
			p.queueIdle(req.e)
			req.e = nil
		}
		return &Lease[T]{p: p, g: g, e: req.e}, nil
	}
	if p.budget != nil && p.budget.take(1) == 0 {
		return nil, errBudgetSpent
	}
	e, err := p.dialEntry(context.WithoutCancel(ctx))
	if err != nil {
		if p.budget != nil {
			p.budget.give()
		}
		return nil, err
	}
	if req.kind == seatWarm && p.Order() == RoundRobin {
		p.queueIdle(e)
		return &Lease[T]{p: p, g: g}, nil
	}
	return &Lease[T]{p: p, g: g, e: e}, nil
}

// dialEntry dials one connection within MaxDials and DialTimeout.
func (p *Pool[T]) dialEntry(vctx context.Context) (e *entry[T], err error) {
	ctx, cancel := context.WithTimeout(vctx, p.dialTimeout())
	defer cancel()
	stop := context.AfterFunc(p.baseCtx, cancel)
	defer stop()
	select {
	case p.dialTurns <- struct{}{}:
	case <-ctx.Done():
		return nil, p.dialFailed(context.Cause(ctx))
	}
	defer func() { <-p.dialTurns }()
	p.dials.Add(1)
	c, err := p.dialSafely(ctx)
	if err != nil {
		return nil, p.dialFailed(err)
	}
	if p.dialFailing.Swap(false) {
		p.log.Info("dial succeeded again")
	}
	now := time.Now()
	e = &entry[T]{conn: c, created: now, idleSince: now}
	if life := p.maxLifetime(); life > 0 {
		jitter := time.Duration(rand.Int64N(int64(life/10) + 1))
		e.expires = now.Add(life - jitter)
	}
	return e, nil
}

// dialSafely calls Config.Dial, turning a panic into an error.
func (p *Pool[T]) dialSafely(ctx context.Context) (c T, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("dial panicked", "panic", r)
			err = fmt.Errorf("dial panicked: %v", r)
		}
	}()
	return p.dial(ctx)
}

// dialFailed counts and logs a failed dial (the first of a run as a
// warning) and returns it as a dialFailure.
func (p *Pool[T]) dialFailed(err error) error {
	p.dialErrors.Add(1)
	if !p.dialFailing.Swap(true) && !p.closed.Load() {
		p.log.Warn("dial failed", "error", err)
	} else {
		p.log.Debug("dial failed", "error", err)
	}
	return &dialFailure{err: err}
}

// destruct is puddle's Destructor: it closes the seat's connection, or,
// for an empty seat, the first of the round-robin queue, and gives back
// its budget unit once the close has returned (so that a connection being
// closed and its successor are never both counted open). A connection at
// rest is quit, one destroyed as unsound closed (see Quitter).
func (p *Pool[T]) destruct(l *Lease[T]) {
	e := l.e
	l.e = nil
	if e == nil {
		if e = p.popIdle(); e == nil {
			return
		}
	}
	p.destroyed.Add(1)
	p.closeEntry(e)
}

// closeEntry closes e's connection (see destruct); the caller has counted
// it destroyed.
func (p *Pool[T]) closeEntry(e *entry[T]) {
	if p.budget != nil {
		defer p.budget.give()
	}
	defer p.refill()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("close panicked", "panic", r)
		}
	}()
	var err error
	if q, ok := any(e.conn).(Quitter); ok && !e.unsound {
		err = q.Quit()
	} else {
		err = e.conn.Close()
	}
	if err != nil {
		p.log.Debug("close failed", "error", err)
	}
}

// refill wakes the maintenance loop to dial up to MinIdle, if the pool
// keeps any: after a close. (Not otherwise: the loop's pass takes every
// idle seat out of puddle for a moment, in use by puddle's books.)
func (p *Pool[T]) refill() {
	p.mu.Lock()
	keep := p.minIdle > 0
	p.mu.Unlock()
	if keep {
		p.signalKick()
	}
}

// moveIdle moves the idle seats of the retired generation old to the
// current one: a seat's connection, or an empty seat for one waiting in
// the round-robin queue. What the current generation has no room for is
// closed.
func (p *Pool[T]) moveIdle(old *generation[T]) {
	for _, res := range old.pud.AcquireAllIdle() {
		l := res.Value()
		e := l.e
		l.e = nil
		res.Hijack()
		p.adopt(e)
	}
}

// adopt gives e (nil: a connection of the round-robin queue) a seat in the
// current generation, or closes it when that is full.
func (p *Pool[T]) adopt(e *entry[T]) {
	taken := false
	ctx := context.WithValue(context.Background(), seatKey{}, seatRequest[T]{kind: seatAdopt, e: e, taken: &taken})
	if err := p.gen.Load().pud.CreateResource(ctx); err == nil || taken {
		// Seated, or seated and destroyed at once (the pool closed):
		// puddle's destructor closed a connection.
		return
	}
	if e == nil {
		e = p.popIdle()
	}
	if e != nil {
		p.destroyed.Add(1)
		p.closeEntry(e)
	}
}

// sweepRetired moves what retired generations hold idle to the current
// one, and closes and forgets those left empty (keeping their counters).
func (p *Pool[T]) sweepRetired() {
	p.mu.Lock()
	retired := append([]*generation[T](nil), p.retired...)
	p.mu.Unlock()
	for _, g := range retired {
		p.moveIdle(g)
		st := g.pud.Stat()
		if st.TotalResources() != 0 {
			continue
		}
		p.mu.Lock()
		for i, r := range p.retired {
			if r == g {
				p.retired = append(p.retired[:i:i], p.retired[i+1:]...)
				p.past.add(st)
				break
			}
		}
		p.mu.Unlock()
		// A seat may still be on its way in (an adopt or a warm-up dial
		// that loaded g before it retired): closed, puddle destroys it.
		p.closers.Add(1)
		go func() {
			defer p.closers.Done()
			g.pud.Close()
		}()
	}
}

// puddleCounts are the counters of puddle's Stat.
type puddleCounts struct {
	acquires, emptyAcquires, canceledAcquires int64
	acquireTime, emptyAcquireTime             time.Duration
}

// add adds st's counters to c.
func (c *puddleCounts) add(st *puddle.Stat) {
	c.acquires += st.AcquireCount()
	c.emptyAcquires += st.EmptyAcquireCount()
	c.canceledAcquires += st.CanceledAcquireCount()
	c.acquireTime += st.AcquireDuration()
	c.emptyAcquireTime += st.EmptyAcquireWaitTime()
}
