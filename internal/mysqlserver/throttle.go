package mysqlserver

import (
	"sync"
	"time"
)

// failWindow is how far back failed logins count.
const failWindow = time.Minute

// maxFailKeys bounds the addresses and user names whose failed logins are
// remembered: past it, expired entries are dropped, then arbitrary ones.
const maxFailKeys = 20000

// LoginThrottle paces failed logins per source address and per user name,
// across connections. Past Limit failures of a key within a minute, the
// answers to its failures are spaced Delay apart: N connections guessing
// at once get one answer per Delay between them, not N. Memory is bounded
// (at most maxFailKeys keys, each forgotten a minute after its last
// failure). The zero value is not usable: build it with NewLoginThrottle.
type LoginThrottle struct {
	mu    sync.Mutex
	fails map[string]*failures
	// Now is the clock (tests replace it).
	Now func() time.Time
}

// failures are a key's failed logins in the current window, and when the
// next answer to one may leave.
type failures struct {
	since time.Time
	n     int
	next  time.Time
}

// NewLoginThrottle returns an empty throttle.
func NewLoginThrottle() *LoginThrottle {
	return &LoginThrottle{fails: map[string]*failures{}, Now: time.Now}
}

// Failed records a failed login from addr as user and returns how long
// to hold the answer (the access denied error) before sending it: 0 while
// both have at most limit failures within a minute, else until the next
// free slot of the more throttled of the two. Call it for every failed
// login, known user or not, so the answers look the same.
func (t *LoginThrottle) Failed(addr, user string, limit int, delay time.Duration) time.Duration {
	if delay <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.Now()
	var wait time.Duration
	for _, key := range [2]string{"addr " + addr, "user " + user} {
		f := t.fails[key]
		if f == nil || now.Sub(f.since) > failWindow {
			if f == nil && len(t.fails) >= maxFailKeys {
				t.sweep(now)
			}
			f = &failures{since: now}
			t.fails[key] = f
		}
		f.n++
		if f.n <= limit {
			continue
		}
		slot := f.next
		if slot.Before(now) {
			slot = now
		}
		f.next = slot.Add(delay)
		// Bounded: a client does not wait longer than the window.
		wait = max(wait, min(f.next.Sub(now), failWindow))
	}
	return wait
}

// sweep drops expired entries; when none expired, it drops arbitrary ones
// down to three quarters of the bound, so a flood of keys cannot grow the
// map. Called with mu held.
func (t *LoginThrottle) sweep(now time.Time) {
	for k, f := range t.fails {
		if now.Sub(f.since) > failWindow && now.After(f.next) {
			delete(t.fails, k)
		}
	}
	for k := range t.fails {
		if len(t.fails) < maxFailKeys*3/4 {
			break
		}
		delete(t.fails, k)
	}
}

// Len is the number of keys remembered.
func (t *LoginThrottle) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.fails)
}
