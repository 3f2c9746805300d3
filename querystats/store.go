package querystats

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Key names a digest: a fingerprint and who ran it where.
type Key struct {
	Fingerprint Fingerprint
	User        string
	Database    string
	Cluster     string
}

// Sample is what one statement measured. The zero value is a statement
// that succeeded at once with nothing to show.
type Sample struct {
	// Duration is from the statement's arrival to the end of its answer;
	// PoolWait the part of it spent waiting for a pooled connection.
	Duration, PoolWait time.Duration
	// RowsSent counts rows relayed to the client, RowsAffected the
	// changed rows of its OK packet, Bytes the packets' bytes relayed.
	RowsSent, RowsAffected, Bytes uint64
	// Warnings is the answer's warning count.
	Warnings uint16
	// Failed says the statement failed; ErrCode is its MySQL error
	// number, 0 when it got no answer at all (a lost connection).
	Failed  bool
	ErrCode uint16
	// Role is the backend role that served it: primary, replica or owner.
	Role string
}

// Stats are a digest's figures.
type Stats struct {
	Count, Errors, Warnings      uint64
	TotalTime, MaxTime, PoolWait time.Duration
	RowsSent, RowsAffected       uint64
	Bytes                        uint64
	FirstSeen, LastSeen          time.Time
	// Role is the backend role of the last execution.
	Role string
	// ErrorCodes counts the errors by number (0: no answer); nil when
	// there were none.
	ErrorCodes map[uint16]uint64
	hist       histogram
}

// P50 and P99 are the median and the 99th percentile of the durations,
// as the upper bound of a histogram bucket (within a factor of two),
// never above MaxTime.
func (s *Stats) P50() time.Duration { return min(s.hist.quantile(0.50), s.MaxTime) }

// P99 is the 99th percentile of the durations (see P50).
func (s *Stats) P99() time.Duration { return min(s.hist.quantile(0.99), s.MaxTime) }

// Digest is one entry of the store, copied out for a view.
type Digest struct {
	Key
	// Text is the digest text (see Normalizer.Normalize).
	Text string
	// Example is the last statement's text with its literals, cut at
	// Config.ExampleLength bytes: show it to admins only.
	Example string
	Stats
}

// Config sizes a Store.
type Config struct {
	// MaxDigests is the most entries kept; past it the least recently
	// seen go. At least 1.
	MaxDigests int
	// ExampleLength caps the example text kept per entry, in bytes; 0
	// keeps none.
	ExampleLength int
}

// Store keeps the digests of statements, at most Config.MaxDigests of
// them. It is safe for concurrent use: entries are spread over shards,
// each with its own lock, and each shard evicts its least recently seen
// entry when full (so eviction is least-recently-seen per shard).
type Store struct {
	cfg     Config
	shards  []shard
	evicted atomic.Uint64
}

type shard struct {
	mu sync.Mutex
	m  map[Key]*entry
	// head is the most recently seen entry, tail the least; max is the
	// shard's share of MaxDigests.
	head, tail *entry
	max        int
}

type entry struct {
	key        Key
	prev, next *entry
	text       string
	example    []byte
	stats      Stats
}

// maxShards is how many shards a large store has; a small one has one
// per 64 entries.
const maxShards = 16

// New returns an empty store.
func New(cfg Config) *Store {
	cfg.MaxDigests = max(cfg.MaxDigests, 1)
	n := min(maxShards, cfg.MaxDigests/64+1)
	s := &Store{cfg: cfg, shards: make([]shard, n)}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.max = cfg.MaxDigests / n
		if i < cfg.MaxDigests%n {
			sh.max++
		}
		sh.m = make(map[Key]*entry, min(sh.max, 256))
	}
	return s
}

// Config returns the store's configuration.
func (s *Store) Config() Config { return s.cfg }

// Evicted counts the entries evicted to keep the bound.
func (s *Store) Evicted() uint64 { return s.evicted.Load() }

// Record adds one execution of the statement k to its entry, creating the
// entry (with digest text text) when it is new; example is the statement
// as sent. now is the statement's end. It allocates only for a new entry
// and a first error number.
func (s *Store) Record(k Key, text []byte, example string, smp Sample, now time.Time) {
	sh := &s.shards[uint64(k.Fingerprint)%uint64(len(s.shards))]
	sh.mu.Lock()
	e := sh.m[k]
	if e == nil {
		e = sh.add(k, text, now, &s.evicted)
	} else if sh.head != e {
		sh.unlink(e)
		sh.pushFront(e)
	}
	e.stats.add(smp, now)
	if n := min(len(example), s.cfg.ExampleLength); n > 0 {
		e.example = append(e.example[:0], example[:n]...)
	}
	sh.mu.Unlock()
}

// add makes k's entry, evicting the least recently seen one when the
// shard is full; the caller holds mu.
func (sh *shard) add(k Key, text []byte, now time.Time, evicted *atomic.Uint64) *entry {
	var e *entry
	if len(sh.m) >= sh.max && sh.tail != nil {
		e = sh.tail
		sh.unlink(e)
		delete(sh.m, e.key)
		evicted.Add(1)
		*e = entry{example: e.example[:0]} // reused
	} else {
		e = &entry{}
	}
	e.key, e.text = k, string(text)
	e.stats.FirstSeen = now
	sh.m[k] = e
	sh.pushFront(e)
	return e
}

func (sh *shard) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		sh.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		sh.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (sh *shard) pushFront(e *entry) {
	e.next = sh.head
	if sh.head != nil {
		sh.head.prev = e
	}
	sh.head = e
	if sh.tail == nil {
		sh.tail = e
	}
}

func (st *Stats) add(smp Sample, now time.Time) {
	st.Count++
	if smp.Failed {
		st.Errors++
		if st.ErrorCodes == nil {
			st.ErrorCodes = make(map[uint16]uint64, 1)
		}
		st.ErrorCodes[smp.ErrCode]++
	}
	st.Warnings += uint64(smp.Warnings)
	st.TotalTime += smp.Duration
	st.MaxTime = max(st.MaxTime, smp.Duration)
	st.PoolWait += smp.PoolWait
	st.RowsSent += smp.RowsSent
	st.RowsAffected += smp.RowsAffected
	st.Bytes += smp.Bytes
	st.LastSeen = now
	st.Role = smp.Role
	st.hist.add(smp.Duration)
}

// Len returns how many entries the store holds.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Reset forgets every entry (the eviction count stays).
func (s *Store) Reset() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.head, sh.tail = nil, nil
		sh.mu.Unlock()
	}
}

// Order is how Top sorts digests: by the largest first.
type Order uint8

// The orders of SHOW GATEWAY QUERIES ... ORDER BY.
const (
	ByTotalTime Order = iota
	ByCount
	ByErrors
	ByP99
)

// ParseOrder reads an order by its SHOW GATEWAY QUERIES name:
// total_time, count, errors or p99.
func ParseOrder(s string) (Order, bool) {
	switch s {
	case "total_time":
		return ByTotalTime, true
	case "count":
		return ByCount, true
	case "errors":
		return ByErrors, true
	case "p99":
		return ByP99, true
	}
	return 0, false
}

// Top returns copies of the entries, largest first by o, at most limit of
// them (0: all). Ties go by fingerprint, then user, database, cluster.
func (s *Store) Top(o Order, limit int) []Digest {
	var out []Digest
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for e := sh.head; e != nil; e = e.next {
			d := Digest{Key: e.key, Text: e.text, Example: string(e.example), Stats: e.stats}
			d.ErrorCodes = maps.Clone(e.stats.ErrorCodes)
			out = append(out, d)
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Digest) int {
		if c := cmp.Compare(b.value(o), a.value(o)); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Fingerprint, b.Fingerprint), cmp.Compare(a.User, b.User),
			cmp.Compare(a.Database, b.Database), cmp.Compare(a.Cluster, b.Cluster))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (d *Digest) value(o Order) int64 {
	switch o {
	case ByCount:
		return int64(d.Count)
	case ByErrors:
		return int64(d.Errors)
	case ByP99:
		return int64(d.P99())
	}
	return int64(d.TotalTime)
}
