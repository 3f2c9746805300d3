package owner

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"github.com/directgate/directgate/wire"
)

// blockStore reserves blocks of a sequence table on the primary.
type blockStore interface {
	// reserveBlock runs one transaction: it reads next_id and cache of the
	// row id 0, locking it (SELECT ... FOR UPDATE), calls plan with them,
	// writes the next_id plan returns and commits. An error of plan
	// rolls back and is returned. After an error the caller cannot know
	// whether the new next_id was committed.
	reserveBlock(ctx context.Context, plan func(nextID, cache int64) (int64, error)) error
}

// sequence hands out the values of one sequence table from an in-memory
// block [next, last) reserved on the primary. Calls are serialized by mu,
// which is held across a reservation: callers of the same sequence queue
// behind one round trip, other sequences are not affected.
type sequence struct {
	mu sync.Mutex
	// gen is what the block was reserved under; zero means there is no
	// block.
	gen        blockGen
	next, last int64
	// values counts the values handed out (the session adds them once
	// they pass the leadership fence) and blocks the reservations
	// committed, for metrics: atomics, so a scrape never waits for mu.
	values, blocks atomic.Uint64
}

// blockGen is what a sequence block was reserved under: the primary's
// generation and the owner's leadership term (always 1 for an owner
// without election). A block is used only under the same pair: after a
// primary change, or once another owner may have led, the next request
// reserves from the table again.
type blockGen struct {
	primary, term uint64
}

// exhaustedError is returned when a sequence has no value below 2^63
// left for a request.
type exhaustedError struct{}

func (exhaustedError) Error() string { return "the sequence has run out of values below 2^63" }

// nextValues returns the first of n consecutive unused values. gen is the
// generation of the primary store talks to and the leadership term: a
// block reserved under another (an earlier primary, an earlier term) is
// never used, so the first call after a primary change or a new term
// reserves from the table again. Values only grow, in the order calls
// return, and are never handed out twice as long as every process hands
// out values only from blocks it committed.
func (s *sequence) nextValues(ctx context.Context, gen blockGen, store blockStore, n int64) (int64, error) {
	if n < 1 {
		return 0, errBadCount()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		s.gen, s.next, s.last = blockGen{}, 0, 0
	}
	if s.gen == (blockGen{}) || s.next > math.MaxInt64-n || s.next+n > s.last {
		next, last := s.next, s.last
		valid := s.gen != blockGen{}
		err := store.reserveBlock(ctx, func(nextID, cache int64) (int64, error) {
			var err error
			next, last, err = planBlock(valid, s.next, s.last, nextID, cache, n)
			return last, err
		})
		if err != nil {
			// Whether the new next_id was committed is unknown: the next
			// call starts over from the table.
			s.gen, s.next, s.last = blockGen{}, 0, 0
			return 0, err
		}
		s.gen, s.next, s.last = gen, next, last
		s.blocks.Add(1)
	}
	v := s.next
	s.next += n
	return v, nil
}

// maxNextBlocks bounds NEXT n VALUES: n is at most the sequence's cache
// times this.
const maxNextBlocks = 1000

// planBlock computes the block after a reservation that read nextID and
// cache from the table, for a request of n values while memory holds
// [next, last) (valid false: nothing trusted in memory). It returns the
// new block [next, newLast); newLast is written to the table as next_id.
//
// As in Vitess, memory continues where it was when the table still says
// what this process last wrote (nextID == last); otherwise (first use,
// after a primary change, or someone moved next_id) the block starts at
// next_id, or at last when next_id went backwards under a valid block.
// The table advances by whole multiples of cache, enough for n values.
func planBlock(valid bool, next, last, nextID, cache, n int64) (int64, int64, error) {
	if cache < 1 {
		return 0, 0, wire.NewError(1105, "HY000", "the cache column of the sequence row is %d; it must be at least 1", cache)
	}
	if cache <= math.MaxInt64/maxNextBlocks && n > cache*maxNextBlocks {
		// One statement must not burn the sequence.
		return 0, 0, wire.NewError(1210, "HY000", "Incorrect arguments to NEXT VALUES: %d values at once is more than %d, the sequence's cache (%d) times %d; ask for fewer", n, cache*maxNextBlocks, cache, maxNextBlocks)
	}
	switch {
	case !valid:
		next, last = nextID, nextID
	case nextID != last:
		start := max(nextID, last)
		next, last = start, start
	}
	if next > math.MaxInt64-n {
		return 0, 0, exhaustedError{}
	}
	need := next + n - last // > 0: the block lacks this many values
	blocks := need / cache
	if need%cache != 0 {
		blocks++
	}
	if blocks > (math.MaxInt64-last)/cache {
		return 0, 0, exhaustedError{}
	}
	return next, last + blocks*cache, nil
}
