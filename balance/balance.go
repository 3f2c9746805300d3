// Package balance is the replica selection policy of the gateway's
// routing: a latency score per backend (an exponentially weighted moving
// average of statement latencies), stickiness (a session keeps its replica
// while it stays within the threshold of the best) and the hot-backend skip
// (a backend far above the in-flight limit is passed over with a
// probability that rises with its load). Discovery (healthcheck) says
// which backends serve; this package says which of them a session uses.
package balance

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// scoreDecay is the time constant of Load's latency average: a sample
// weighs 1-exp(-dt/scoreDecay), dt being the time since the previous one,
// so the score follows the last few seconds whatever the query rate.
const scoreDecay = 2 * time.Second

// Load is what callers measure about one backend: statements in flight and
// an exponentially weighted moving average of their latency (the score).
// The zero value is ready; all methods are safe for concurrent use.
type Load struct {
	inFlight atomic.Int64

	mu    sync.Mutex
	score float64 // seconds; 0 before the first sample
	last  time.Time
}

// Begin counts a statement sent to the backend; pair it with End.
func (l *Load) Begin() { l.inFlight.Add(1) }

// End counts the statement begun at start as finished, at now, and folds
// its latency into the score.
func (l *Load) End(start, now time.Time) {
	l.inFlight.Add(-1)
	d := now.Sub(start).Seconds()
	l.mu.Lock()
	if l.score == 0 {
		l.score = d
	} else {
		w := 1 - math.Exp(-float64(now.Sub(l.last))/float64(scoreDecay))
		l.score += w * (d - l.score)
	}
	l.last = now
	l.mu.Unlock()
}

// InFlight is the number of statements begun and not ended.
func (l *Load) InFlight() int64 { return l.inFlight.Load() }

// Score is the latency average, zero before the first statement.
func (l *Load) Score() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.score * float64(time.Second))
}

// Candidate is one replica a session may read from.
type Candidate struct {
	// Addr identifies the backend.
	Addr string
	// RTT is its last probe round-trip time.
	RTT time.Duration
	// Score is its Load score (zero: no statement measured yet).
	Score time.Duration
	// InFlight is its Load in-flight count.
	InFlight int64
}

// stickySlack is the score difference below which a session never moves:
// sub-millisecond differences are noise on any network.
const stickySlack = 500 * time.Microsecond

// pickFloor is added to every candidate's cost when picking, so a backend
// with a tiny or unmeasured latency does not take every new session.
const pickFloor = 200 * time.Microsecond

// Policy chooses replicas for sessions: sticky, weighted by latency, with
// randomness so sessions do not herd, and avoiding backends that are hot.
type Policy struct {
	// Stickiness: a session keeps its replica while the replica's score
	// is at most Stickiness times the best score (or within 500µs of it).
	Stickiness float64
	// HotLimit: a candidate with more statements in flight is skipped
	// for new picks with probability 1 - HotLimit/InFlight. 0 turns it
	// off.
	HotLimit int
}

// Keep reports whether a session should stay on cur, one of cands (the
// serving replicas it may read from): cur's score is within the
// stickiness threshold of the best measured score.
func (p Policy) Keep(cur Candidate, cands []Candidate) bool {
	if cur.Score == 0 {
		return true
	}
	best := time.Duration(math.MaxInt64)
	for _, c := range cands {
		if c.Score > 0 && c.Score < best {
			best = c.Score
		}
	}
	if best == math.MaxInt64 {
		return true
	}
	limit := max(time.Duration(float64(best)*p.Stickiness), best+stickySlack)
	return cur.Score <= limit
}

// Pick chooses a candidate for a new session and returns its index, or -1
// when cands is empty. Each candidate's chance is proportional to
// 1/(score+RTT+floor), so faster backends get more sessions but every
// serving one gets some; a hot candidate is skipped with probability
// 1 - HotLimit/InFlight and the draw repeated among the rest; when every
// candidate is skipped, the least loaded one is taken. rnd returns a
// uniform number in [0, 1); it may be nil (math/rand/v2).
func (p Policy) Pick(cands []Candidate, rnd func() float64) int {
	if len(cands) == 0 {
		return -1
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	if len(cands) == 1 {
		return 0
	}
	var weights [16]float64
	w := weights[:0]
	if len(cands) > len(weights) {
		w = make([]float64, 0, len(cands))
	}
	total := 0.0
	for _, c := range cands {
		x := 1 / float64(c.Score+c.RTT+pickFloor)
		w = append(w, x)
		total += x
	}
	for range cands {
		if total <= 0 {
			break
		}
		i := draw(w, total, rnd())
		c := cands[i]
		if p.HotLimit <= 0 || c.InFlight <= int64(p.HotLimit) || rnd() < float64(p.HotLimit)/float64(c.InFlight) {
			return i
		}
		total -= w[i]
		w[i] = 0
	}
	least := 0
	for i, c := range cands {
		if c.InFlight < cands[least].InFlight {
			least = i
		}
	}
	return least
}

// draw returns the index whose cumulative weight passes u*total.
func draw(w []float64, total, u float64) int {
	x := u * total
	last := -1
	for i, wi := range w {
		if wi <= 0 {
			continue
		}
		last = i
		if x < wi {
			return i
		}
		x -= wi
	}
	return last
}
