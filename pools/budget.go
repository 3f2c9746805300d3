package pools

import (
	"sync"
	"sync/atomic"
)

// Budget bounds the connections of several pools together: a backend's
// share of a connection limit that spans pools (one per account) and,
// through the fleet, gateways. Every connection a pool opens or dials
// takes one unit; closing it or a failed dial gives the unit back.
//
// When the budget is spent, a pool that needs a connection takes an idle
// one of another pool (closing it frees a unit), and a pool releasing a
// connection closes it instead while another pool waits for a unit, so
// no pool starves while its siblings sit on connections. When SetLimit
// lowers the limit below what is open, idle connections close at once and
// leased ones when they are released.
//
// A Budget is safe for concurrent use. The zero value is not usable: use
// NewBudget.
type Budget struct {
	mu    sync.Mutex
	limit int // < 0: no limit
	used  int
	pools []budgetPool
	// over is used > limit, and capped limit >= 0, kept for lock-free
	// checks on Release (the hot path: an unlimited budget costs two
	// atomic loads there).
	over   atomic.Bool
	capped atomic.Bool
}

// budgetPool is what a Budget needs of the pools it bounds.
type budgetPool interface {
	// budgetWaiting reports whether callers wait for a unit.
	budgetWaiting() bool
	// reclaimIdle closes one idle connection, reporting whether it did.
	reclaimIdle() bool
	// budgetRoom tells the pool a unit may be free: waiters retry, and
	// the maintenance loop sheds idle connections above the limit.
	budgetRoom()
}

// NewBudget returns a budget of limit connections; a negative limit is no
// limit.
func NewBudget(limit int) *Budget {
	b := &Budget{limit: limit}
	b.capped.Store(limit >= 0)
	return b
}

// SetLimit changes the limit (negative: none).
func (b *Budget) SetLimit(limit int) {
	b.mu.Lock()
	b.limit = limit
	b.capped.Store(limit >= 0)
	b.setOverLocked()
	pools := b.pools
	b.mu.Unlock()
	for _, p := range pools {
		p.budgetRoom()
	}
}

// Limit returns the current limit (negative: none).
func (b *Budget) Limit() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit
}

// Used returns the units taken: connections open or being dialed.
func (b *Budget) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *Budget) setOverLocked() { b.over.Store(b.limit >= 0 && b.used > b.limit) }

// attach adds p to the pools the budget bounds.
func (b *Budget) attach(p budgetPool) {
	b.mu.Lock()
	b.pools = append(b.pools[:len(b.pools):len(b.pools)], p)
	b.mu.Unlock()
}

// detach removes p (closed).
func (b *Budget) detach(p budgetPool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := make([]budgetPool, 0, len(b.pools))
	for _, q := range b.pools {
		if q != p {
			next = append(next, q)
		}
	}
	b.pools = next
}

// take reserves n units or as many as are free, returning how many.
func (b *Budget) take(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit >= 0 {
		n = max(min(n, b.limit-b.used), 0)
	}
	b.used += n
	b.setOverLocked()
	return n
}

// give returns one unit and tells every pool there may be room.
func (b *Budget) give() {
	b.mu.Lock()
	b.used--
	b.setOverLocked()
	pools := b.pools
	b.mu.Unlock()
	for _, p := range pools {
		p.budgetRoom()
	}
}

// reclaim closes an idle connection of a pool other than p, so that p can
// dial; it reports whether it found one.
func (b *Budget) reclaim(p budgetPool) bool {
	b.mu.Lock()
	pools := b.pools
	b.mu.Unlock()
	for _, q := range pools {
		if q != p && q.reclaimIdle() {
			return true
		}
	}
	return false
}

// handOver reports whether a connection p releases should be closed
// instead: the budget is over its limit, or spent while another pool
// waits for a unit.
func (b *Budget) handOver(p budgetPool) bool {
	if b.over.Load() {
		return true
	}
	if !b.capped.Load() {
		return false
	}
	b.mu.Lock()
	spent := b.limit >= 0 && b.used >= b.limit
	pools := b.pools
	b.mu.Unlock()
	if !spent {
		return false
	}
	for _, q := range pools {
		if q != p && q.budgetWaiting() {
			return true
		}
	}
	return false
}
