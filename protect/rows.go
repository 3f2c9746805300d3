package protect

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// The protections report through one shape, Row, listed by SHOW GATEWAY
// PROTECTIONS, the status page's protections panel and its JSON.

// Row is one line of a protection's counters. Counters a
// protection does not have stay zero.
type Row struct {
	// Protection names the protection: "hot_row", "throttle",
	// "consolidation" or "shedding".
	Protection string `json:"protection"`
	// Cluster is the cluster it guards.
	Cluster string `json:"cluster"`
	// Scope is what the row counts: "*" for the whole cluster, else a
	// part of it (for hot_row, a table "db.table").
	Scope string `json:"scope"`
	// Mode is off, on or dry_run.
	Mode string `json:"mode"`
	// Active is the statements held back now (hot_row: waiting in a
	// queue; throttle: delayed; consolidation: followers waiting for a
	// leader's result).
	Active int64 `json:"active"`
	// Total is the statements held back since the gateway started
	// (consolidation: statements answered from another's result;
	// shedding: statements shed).
	Total int64 `json:"total"`
	// Refused is the statements refused (hot_row: queue full, or waited
	// max_wait); RefusedWait the part of them that waited first.
	Refused     int64 `json:"refused"`
	RefusedWait int64 `json:"refused_wait"`
	// RefusedDeadlock is the part of Refused refused at once because
	// waiting would have closed a cycle of waits (hot_row).
	RefusedDeadlock int64 `json:"refused_deadlock,omitempty"`
	// DryRun is, in dry-run mode, the statements that would have been
	// held back; DryRunRefused those that would have been refused.
	DryRun        int64 `json:"dry_run"`
	DryRunRefused int64 `json:"dry_run_refused"`
	// Rate and RefusedRate are Total and Refused per second over the last
	// 5 to 15 seconds; set on the cluster row ("*") only.
	Rate        float64 `json:"rate"`
	RefusedRate float64 `json:"refused_rate"`
	// Detail is the protection's state in a few words ("lag 7.2s,
	// delaying 35%"), or empty.
	Detail string `json:"detail,omitempty"`
}

// Add adds r's counters to p's.
func (p *Row) Add(r Row) {
	p.Active += r.Active
	p.Total += r.Total
	p.Refused += r.Refused
	p.RefusedWait += r.RefusedWait
	p.RefusedDeadlock += r.RefusedDeadlock
	p.DryRun += r.DryRun
	p.DryRunRefused += r.DryRunRefused
}

// SortRows orders rows by scope.
func SortRows(rows []Row) {
	slices.SortFunc(rows, func(a, b Row) int { return strings.Compare(a.Scope, b.Scope) })
}

// Rates keeps the last few samples of each cluster row's
// counters (taken by the status sampler every few seconds), so that a
// row's rate can be told at any moment. Memory is bounded: rateSamples
// samples per protection and cluster.
type Rates struct {
	mu      sync.Mutex
	samples map[[2]string][]rateSample
}

// rateSample is a cluster row's counters at one moment.
type rateSample struct {
	at             time.Time
	total, refused int64
}

// rateSamples is how many samples are kept per row: with the sampler's 5
// seconds, rates span 5 to 15 seconds.
const rateSamples = 3

// Record adds a sample of rows' cluster rows taken at now, and forgets
// the rows that are gone.
func (pr *Rates) Record(rows []Row, now time.Time) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	seen := make(map[[2]string]bool, len(rows))
	if pr.samples == nil {
		pr.samples = map[[2]string][]rateSample{}
	}
	for _, r := range rows {
		if r.Scope != "*" {
			continue
		}
		k := [2]string{r.Protection, r.Cluster}
		seen[k] = true
		ss := append(pr.samples[k], rateSample{at: now, total: r.Total, refused: r.Refused})
		if len(ss) > rateSamples {
			ss = append(ss[:0], ss[len(ss)-rateSamples:]...)
		}
		pr.samples[k] = ss
	}
	for k := range pr.samples {
		if !seen[k] {
			delete(pr.samples, k)
		}
	}
}

// Fill sets the rates of rows' cluster rows from the oldest sample kept.
func (pr *Rates) Fill(rows []Row, now time.Time) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for i := range rows {
		r := &rows[i]
		if r.Scope != "*" {
			continue
		}
		ss := pr.samples[[2]string{r.Protection, r.Cluster}]
		if len(ss) == 0 {
			continue
		}
		old := ss[0]
		if secs := now.Sub(old.at).Seconds(); secs >= 1 {
			r.Rate = float64(max(r.Total-old.total, 0)) / secs
			r.RefusedRate = float64(max(r.Refused-old.refused, 0)) / secs
		}
	}
}

// WaitGoneCheck is how often a statement waiting at the gateway (for a
// hot row, the replicas, an identical read) checks that its client is
// still connected.
const WaitGoneCheck = 250 * time.Millisecond

// WaitClocks are the clocks of a protection's wait at the gateway: a
// timeout after d and, when watch, a tick every WaitGoneCheck to check
// that the client is still there (nil channel otherwise). stop stops
// both.
func WaitClocks(d time.Duration, watch bool) (timeout, check <-chan time.Time, stop func()) {
	timer := time.NewTimer(d)
	if !watch {
		return timer.C, nil, func() { timer.Stop() }
	}
	tk := time.NewTicker(WaitGoneCheck)
	return timer.C, tk.C, func() { timer.Stop(); tk.Stop() }
}
