package fleet

import (
	"sync"
	"time"
)

// fence decides whether a leader may act now: it leads in a term and its
// lease is known to hold, with a margin to spare.
//
// A lease renewed by a request sent at time s holds at etcd until at
// least s + TTL: etcd counts the TTL from when it processed the request,
// which is after s. Renewals are timed from their send, never from their
// answer (which comes later, so would overstate the lease). The fence
// stays open until the latest such s + TTL, less margin: the margin covers
// what separates the check from the act it allows (a scheduling pause, a
// GC pause, the answer's way out of the process), clock rates that differ
// between this machine and etcd's, and etcd's own expiry timing. All
// times are the monotonic readings of now.
//
// Its methods are safe for concurrent use.
type fence struct {
	now    func() time.Time
	margin time.Duration

	mu sync.Mutex
	// until is the end of the lease as known (last renewal sent + TTL)
	// less margin.
	until time.Time
	// term is the leadership term; 0 while not leading.
	term uint64
}

// fenceMargin is the margin for a lease TTL: a quarter of it (at least
// 500 ms, since lease_ttl is at least 2 s).
func fenceMargin(ttl time.Duration) time.Duration {
	return max(ttl/4, 500*time.Millisecond)
}

func newFence(now func() time.Time, margin time.Duration) *fence {
	return &fence{now: now, margin: margin}
}

// renewed records a renewal (or the grant) of the lease sent at sent,
// which etcd answered with ttl. A renewal never shortens the fence: an
// older request answered late knows less than a newer one.
func (f *fence) renewed(sent time.Time, ttl time.Duration) {
	until := sent.Add(ttl - f.margin)
	f.mu.Lock()
	if until.After(f.until) {
		f.until = until
	}
	f.mu.Unlock()
}

// reset forgets the lease (a new one is about to be granted).
func (f *fence) reset() {
	f.mu.Lock()
	f.until, f.term = time.Time{}, 0
	f.mu.Unlock()
}

// lead opens term, if the lease holds now; it reports whether it did.
func (f *fence) lead(term uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.now().Before(f.until) {
		return false
	}
	f.term = term
	return true
}

// stepDown closes the fence: nothing is allowed until the next lead.
func (f *fence) stepDown() {
	f.mu.Lock()
	f.term = 0
	f.mu.Unlock()
}

// valid reports whether term is the current term and the lease holds
// now, less the margin.
func (f *fence) valid(term uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return term != 0 && term == f.term && f.now().Before(f.until)
}

// current returns the term, 0 while not leading or once the lease may
// have run out.
func (f *fence) current() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.term == 0 || !f.now().Before(f.until) {
		return 0
	}
	return f.term
}

// expiry is when the fence closes unless the lease is renewed first.
func (f *fence) expiry() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until
}
