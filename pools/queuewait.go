package pools

import (
	"math"
	"sync"
	"time"
)

// queueWaitDecay is the time constant of the recent-wait average: a wait
// that ended dt ago weighs exp(-dt/queueWaitDecay) of what it weighed
// when it ended, so the average follows about the last second whatever
// the rate of waits.
const queueWaitDecay = time.Second

// queueWaits keeps what QueueWait tells: the Acquire calls waiting now
// (their number and the sum of their start times) and an exponentially
// decaying average of the waits that ended. Only Acquire calls that wait
// touch it (acquireSlow), waits outside Acquire (WaitOutside), and
// QueueWait only while some wait: an Acquire that finds an idle
// connection never does. Times are nanoseconds since the pool's epoch
// (monotonic).
type queueWaits struct {
	mu sync.Mutex
	// n is the number of calls waiting; sum the sum of their start
	// times. sum wraps on overflow, harmlessly: n*now-sum, the sum of
	// the waiters' ages, is small, and two's complement arithmetic gets
	// it exact.
	n, sum int64
	// avg is the average of the ended waits (ns) as of last, the end of
	// the latest; seen says a wait has ended.
	avg  float64
	last int64
	seen bool
}

// begin counts a call that starts waiting at start.
func (q *queueWaits) begin(start int64) {
	q.mu.Lock()
	q.n++
	q.sum += start
	q.mu.Unlock()
}

// end counts the call that began waiting at start as done at now, and
// folds its wait into the average.
func (q *queueWaits) end(start, now int64) {
	q.mu.Lock()
	q.n--
	q.sum -= start
	w := 1.0 // the first wait is the average
	if q.seen {
		w = 1 - math.Exp(-float64(now-q.last)/float64(queueWaitDecay))
	}
	q.avg += w * (float64(now-start) - q.avg)
	q.last, q.seen = now, true
	q.mu.Unlock()
}

// wait returns, at now, the larger of the waiting calls' mean age and
// the recent-wait average decayed to now; 0 when nobody waits.
func (q *queueWaits) wait(now int64) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n <= 0 {
		return 0
	}
	age := (q.n*now - q.sum) / q.n
	recent := q.avg * math.Exp(-float64(now-q.last)/float64(queueWaitDecay))
	return time.Duration(max(float64(age), recent, 0))
}

// QueueWait tells how long a caller of Acquire waits for a connection
// now: 0 while no call waits, else the larger of how long the waiting
// calls have waited so far (their mean) and how long the recent waits
// lasted (an average over about the last second). The first follows a
// stall at once; the second is what a steady queue makes each call wait.
// When no call waits it costs one atomic load; it never allocates.
func (p *Pool[T]) QueueWait(now time.Time) time.Duration {
	if p.waiting.Load() == 0 && p.outside.Load() == 0 {
		return 0
	}
	return p.queue.wait(int64(now.Sub(p.epoch)))
}
