package accounts

import (
	"sync"
	"time"
)

// Tracker counts the sessions of each account's pools (by a key the
// caller chooses), bounds the number of keys, and says which pools may
// close: those without a session for a while. Safe for concurrent use.
type Tracker[K comparable] struct {
	mu sync.Mutex
	m  map[K]*use
}

// use is one key's sessions and when the last one ended.
type use struct {
	sessions int
	last     time.Time
}

// Enter counts a session of k. With max keys tracked already, the one idle
// longest without sessions makes room; ok is false when every key has
// sessions (the caller refuses the login).
func (t *Tracker[K]) Enter(k K, max int) (ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[K]*use{}
	}
	if u := t.m[k]; u != nil {
		u.sessions++
		return true
	}
	if len(t.m) >= max {
		var oldest K
		var at *use
		for ok, u := range t.m {
			if u.sessions == 0 && (at == nil || u.last.Before(at.last)) {
				oldest, at = ok, u
			}
		}
		if at == nil {
			return false
		}
		delete(t.m, oldest)
	}
	t.m[k] = &use{sessions: 1}
	return true
}

// Leave ends a session of k.
func (t *Tracker[K]) Leave(k K, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if u := t.m[k]; u != nil {
		u.sessions--
		u.last = now
	}
}

// Sweep forgets the keys without sessions for idle or longer and returns
// whether a key is still tracked (its pools stay open).
func (t *Tracker[K]) Sweep(idle time.Duration, now time.Time) (keep func(K) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := make(map[K]bool, len(t.m))
	for k, u := range t.m {
		if u.sessions <= 0 && now.Sub(u.last) >= idle {
			delete(t.m, k)
			continue
		}
		live[k] = true
	}
	return func(k K) bool { return live[k] }
}
