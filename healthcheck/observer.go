package healthcheck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/internal/safego"
)

// Config configures an Observer. Zero values of the numeric fields mean
// their defaults; Prober and Backends are required.
type Config struct {
	// Interval is the time between the starts of two regular rounds.
	// Default 2s.
	Interval time.Duration
	// BatchSize is the most probes in flight at once. Default 100.
	BatchSize int
	// Timeout bounds each probe (through the context passed to
	// Prober.Probe). Default 1s.
	Timeout time.Duration
	// Rise is how many good probes in a row make a not-serving backend
	// serving again (a new backend serves after its first good probe).
	// Default 2.
	Rise int
	// Fall is how many failed probes in a row make a backend not serving.
	// Default 2.
	Fall int
	// Prober checks one backend. Required.
	Prober Prober
	// MaxLatency returns the cap on the probe round trip (Result.RTT) of
	// the backends of cluster: a backend whose round trip exceeds it on
	// Fall probes in a row is marked Slow, and one under it on Rise
	// probes in a row is no longer slow (the first probe that times the
	// round trip decides alone). Slow does not change State: readers
	// leave slow replicas out. Zero, or a nil func, means no cap. It is
	// called without the observer's lock, before each result is applied,
	// so a new cap counts from the next probe; it must be quick.
	MaxLatency func(cluster string) time.Duration
	// Logger receives state changes. Default: discard.
	Logger hclog.Logger
	// Backends lists the backends to probe. It is called once at the
	// start of every round, from the observer's goroutine, so the list may
	// change between rounds; a backend that leaves the list is forgotten
	// and one that joins starts unknown. Addresses must be unique; later
	// duplicates are ignored. Required.
	Backends func() []Backend
}

// withDefaults returns c with every zero or negative numeric field and a
// nil Logger replaced by its default.
func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.Rise <= 0 {
		c.Rise = 2
	}
	if c.Fall <= 0 {
		c.Fall = 2
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c
}

// Observer runs discovery: one background loop that probes every backend
// each Interval and publishes a Snapshot. All methods are safe for
// concurrent use.
type Observer struct {
	cfg     Config
	log     hclog.Logger
	snap    atomic.Pointer[Snapshot]
	refresh chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	group   *safego.Group
	closed  sync.Once

	// mu guards the fields below. It is never held across a probe or a
	// log call.
	mu       sync.Mutex
	backends map[string]*tracked
	clusters map[string]clusterSummary
	round    uint64
	stopping bool // Close has begun: no new targeted probes
	// lastStart and lastDuration describe the last completed round.
	lastStart    time.Time
	lastDuration time.Duration

	inFlight      atomic.Int64
	probes        atomic.Uint64
	probeFailures atomic.Uint64
	// share, when set, shares the rounds' probing with other processes.
	share atomic.Pointer[shareBox]
	// shared counts round results taken from the share instead of probed.
	shared atomic.Uint64
}

// Share lets the observers of several processes (a fleet of gateways)
// share the probing of their regular rounds: one of them probes and
// publishes what it learned, the others take its results instead of
// probing the backends themselves. Targeted probes (ReportFailure, Check)
// always probe. Implementations must be safe for concurrent use.
type Share interface {
	// Result returns a fresh result of b that another process probed; ok
	// false means there is none and the observer probes b itself.
	Result(b Backend) (r Result, ok bool)
	// Probed receives every result the observer's rounds probed itself.
	Probed(b Backend, r Result)
}

type shareBox struct{ s Share }

// SetShare makes the observer's rounds use s from the next probe on; nil
// stops sharing.
func (o *Observer) SetShare(s Share) {
	if s == nil {
		o.share.Store(nil)
		return
	}
	o.share.Store(&shareBox{s})
}

// Stats are the observer's own figures, for metrics.
type Stats struct {
	// LastRoundStart and LastRoundDuration describe the last completed
	// round (zero before the first).
	LastRoundStart    time.Time
	LastRoundDuration time.Duration
	// ProbesInFlight counts probes running now, regular and targeted.
	ProbesInFlight int64
	// Probes and ProbeFailures count probes since start.
	Probes, ProbeFailures uint64
	// Shared counts round results taken from a Share (another process's
	// probes) instead of probing.
	Shared uint64
}

// Stats returns the observer's figures.
func (o *Observer) Stats() Stats {
	o.mu.Lock()
	st := Stats{LastRoundStart: o.lastStart, LastRoundDuration: o.lastDuration}
	o.mu.Unlock()
	st.ProbesInFlight = o.inFlight.Load()
	st.Probes = o.probes.Load()
	st.ProbeFailures = o.probeFailures.Load()
	st.Shared = o.shared.Load()
	return st
}

// tracked is the observer's private, mutable record of one backend.
type tracked struct {
	b         Backend
	state     State
	reason    string
	since     time.Time
	good, bad int       // consecutive good and failed probes
	last      Result    // last probe result
	lastProbe time.Time // when last arrived
	suspectAt time.Time // results of probes started before this are ignored
	// suspect is set by ReportFailure on a serving backend: the first
	// probe started after the report decides, without hysteresis, whether
	// it serves again (a false alarm, such as one killed connection) or
	// is down.
	suspect bool
	// probing is set while a targeted probe of this backend runs;
	// lastTargeted is when the last one started.
	probing      bool
	lastTargeted time.Time
	// slow is set once Fall round trips in a row exceeded the cluster's
	// MaxLatency and cleared by Rise in a row within it; slowRun and
	// fastRun count those round trips, timed says one was judged.
	slow             bool
	slowRun, fastRun int
	timed            bool
	// readOnly is @@read_only as of the last good probe: it decides the
	// role. A failed probe may have timed SELECT 1 and then timed out
	// before reading the variables (its ReadOnly is then false); while
	// the backend still serves on the earlier probes, such a replica
	// must not count as writable (a split brain, writes refused).
	readOnly bool
}

// clusterSummary is what was last logged about a cluster's roles.
type clusterSummary struct {
	primary    string
	splitBrain bool
}

// logEvent is a log line decided under mu and emitted after it is released.
type logEvent struct {
	level hclog.Level
	msg   string
	args  []any
}

// New builds an Observer and starts its loop; the first round starts at
// once. Snapshot returns an empty snapshot (Round 0) until the first round
// ends. Call Close to stop it.
func New(cfg Config) (*Observer, error) {
	o, err := newObserver(cfg)
	if err != nil {
		return nil, err
	}
	o.group.Go("healthcheck observer", o.loop)
	return o, nil
}

// newObserver builds an Observer without starting its loop (tests drive
// rounds with runRound).
func newObserver(cfg Config) (*Observer, error) {
	if cfg.Prober == nil {
		return nil, errors.New("healthcheck: Config.Prober is required")
	}
	if cfg.Backends == nil {
		return nil, errors.New("healthcheck: Config.Backends is required")
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	o := &Observer{
		cfg:      cfg,
		log:      cfg.Logger,
		refresh:  make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		group:    safego.New(cfg.Logger),
		backends: map[string]*tracked{},
		clusters: map[string]clusterSummary{},
	}
	o.snap.Store(&Snapshot{Time: time.Now(), Clusters: map[string]*Cluster{}, Backends: map[string]*BackendView{}, changed: make(chan struct{})})
	return o, nil
}

// Snapshot returns the latest published snapshot. It never blocks and
// never returns nil. The result must not be modified.
func (o *Observer) Snapshot() *Snapshot { return o.snap.Load() }

// Refresh asks for an early round without waiting for it. Nudges are
// coalesced, and early rounds start at least Interval/4 after the start of
// the previous round.
func (o *Observer) Refresh() {
	select {
	case o.refresh <- struct{}{}:
	default:
	}
}

// ReportFailure tells the observer that a caller saw a connection error on
// the backend at addr. The backend is marked not serving (suspect) at once,
// a new snapshot saying so is published before ReportFailure returns, and
// the backend is probed at once (see Check). Probes started before the
// report do not count. If the backend was serving, the first probe started
// after the report decides alone: good, it serves again (a false alarm,
// such as one killed connection, costs one probe); failed, it is down and
// needs Rise good probes. Unknown addresses are ignored.
func (o *Observer) ReportFailure(addr string) {
	now := time.Now()
	o.mu.Lock()
	t, ok := o.backends[addr]
	if !ok {
		o.mu.Unlock()
		return
	}
	var events []logEvent
	t.good = 0
	t.suspectAt = now
	if t.state != StateNotServing {
		t.suspect = t.state == StateServing
		events = append(events, t.transition(StateNotServing, "suspect: connection failure reported by the query path", now))
		events = append(events, o.publishLocked(now)...)
	}
	o.mu.Unlock()
	o.emit(events)
	o.Check(addr)
}

// targetedGap is the least time between two targeted probes of one
// backend, as a fraction of Interval.
const targetedGap = 10

// Check probes the backend at addr now, outside the regular rounds, and
// publishes a snapshot with the result. It returns without waiting. Calls
// are throttled per backend: while a targeted probe runs, or within
// Interval/10 of the last one's start, Check does nothing. Unknown
// addresses are ignored.
func (o *Observer) Check(addr string) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.backends[addr]
	if !ok || o.stopping || t.probing || now.Sub(t.lastTargeted) < o.cfg.Interval/targetedGap {
		return
	}
	t.probing = true
	t.lastTargeted = now
	b := t.b
	o.group.Go("healthcheck targeted probe", func() {
		started := time.Now()
		r := o.probe(b)
		if o.ctx.Err() != nil {
			return
		}
		limit := o.maxLatency(b)
		now := time.Now()
		var events []logEvent
		o.mu.Lock()
		if cur := o.backends[b.Addr]; cur == t {
			t.probing = false
			events = append(events, o.apply(t, r, started, now, limit)...)
			events = append(events, o.publishLocked(now)...)
		}
		o.mu.Unlock()
		o.emit(events)
	})
}

// Close stops the loop, cancels probes in flight and waits for them. It
// is idempotent; the last snapshot stays readable.
func (o *Observer) Close() error {
	o.closed.Do(func() {
		o.mu.Lock()
		o.stopping = true
		o.mu.Unlock()
		o.cancel()
		o.group.Wait()
	})
	return nil
}

// loop runs rounds until Close: one at start, then one Interval after the
// start of the previous, or earlier when Refresh asks (but not within
// Interval/4 of the previous start).
func (o *Observer) loop() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastStart time.Time
	next := time.Now()
	for {
		select {
		case <-o.ctx.Done():
			return
		case <-o.refresh:
			early := lastStart.Add(o.cfg.Interval / 4)
			if now := time.Now(); early.Before(now) {
				early = now
			}
			if early.Before(next) {
				next = early
				timer.Reset(time.Until(next))
			}
			continue
		case <-timer.C:
		}
		lastStart = time.Now()
		o.runRound()
		next = lastStart.Add(o.cfg.Interval)
		timer.Reset(time.Until(next))
	}
}

// runRound probes every backend once, in shuffled order, at most BatchSize
// at a time, then applies the results and publishes a snapshot. A round
// cut short by Close publishes nothing.
func (o *Observer) runRound() {
	var list []Backend
	seen := map[string]bool{}
	for _, b := range o.cfg.Backends() {
		if !seen[b.Addr] {
			seen[b.Addr] = true
			list = append(list, b)
		}
	}
	rand.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	roundStart := time.Now()

	results := make([]Result, len(list))
	starts := make([]time.Time, len(list))
	jobs := make(chan int)
	workers := safego.New(o.log)
	for range min(o.cfg.BatchSize, len(list)) {
		workers.Go("healthcheck probe", func() {
			for i := range jobs {
				starts[i] = time.Now()
				results[i] = o.roundProbe(list[i])
			}
		})
	}
feed:
	for i := range list {
		select {
		case jobs <- i:
		case <-o.ctx.Done():
			break feed
		}
	}
	close(jobs)
	workers.Wait()
	if o.ctx.Err() != nil {
		return
	}

	caps := make([]time.Duration, len(list))
	for i, b := range list {
		caps[i] = o.maxLatency(b)
	}
	now := time.Now()
	var events []logEvent
	o.mu.Lock()
	for addr := range o.backends {
		if !seen[addr] {
			delete(o.backends, addr)
		}
	}
	for i, b := range list {
		t, ok := o.backends[b.Addr]
		if !ok {
			t = &tracked{b: b, state: StateUnknown, reason: "not probed yet", since: now}
			o.backends[b.Addr] = t
		}
		t.b = b
		events = append(events, o.apply(t, results[i], starts[i], now, caps[i])...)
	}
	o.round++
	o.lastStart, o.lastDuration = roundStart, now.Sub(roundStart)
	events = append(events, o.publishLocked(now)...)
	o.mu.Unlock()
	o.emit(events)
}

// roundProbe is one backend's result in a regular round: the share's, or
// a probe.
func (o *Observer) roundProbe(b Backend) Result {
	box := o.share.Load()
	if box == nil {
		return o.probe(b)
	}
	if r, ok := box.s.Result(b); ok {
		o.shared.Add(1)
		return r
	}
	r := o.probe(b)
	if !errors.Is(r.Err, ErrNotProbed) {
		box.s.Probed(b, r)
	}
	return r
}

// probe runs one probe with the configured timeout, turning a panic of
// the prober into a failed result.
func (o *Observer) probe(b Backend) (r Result) {
	ctx, cancel := context.WithTimeout(o.ctx, o.cfg.Timeout)
	defer cancel()
	o.inFlight.Add(1)
	defer func() {
		o.inFlight.Add(-1)
		if errors.Is(r.Err, ErrNotProbed) {
			return
		}
		o.probes.Add(1)
		if good, _ := judge(r); !good {
			o.probeFailures.Add(1)
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			r = Result{Err: fmt.Errorf("prober panicked: %v", p)}
		}
	}()
	return o.cfg.Prober.Probe(ctx, b)
}

// judge says whether a probe result counts as good and, if not, why.
func judge(r Result) (bool, string) {
	switch {
	case r.Err != nil:
		return false, r.Err.Error()
	case !r.Reachable:
		return false, "unreachable"
	}
	// A replica whose replication is stopped (lag unknown) still serves:
	// readers leave it out by lag, and it may be about to be promoted.
	return true, ""
}

// maxLatency is the cap on b's probe round trip (Config.MaxLatency), 0
// for none. Called without mu.
func (o *Observer) maxLatency(b Backend) time.Duration {
	if o.cfg.MaxLatency == nil {
		return 0
	}
	return max(o.cfg.MaxLatency(b.Cluster), 0)
}

// apply records one probe result on t with hysteresis, its state and,
// against limit (the cluster's MaxLatency), whether it is slow. It returns
// the log events of the changes. Called with mu held.
func (o *Observer) apply(t *tracked, r Result, started, now time.Time, limit time.Duration) []logEvent {
	if started.Before(t.suspectAt) {
		return nil // began before a reported failure: stale
	}
	if errors.Is(r.Err, ErrNotProbed) {
		if t.state == StateUnknown {
			t.reason = r.Err.Error()
		}
		return nil // nothing learned
	}
	t.last = r
	t.lastProbe = now
	var events []logEvent
	if e, ok := o.applyLatency(t, r, limit); ok {
		events = append(events, e)
	}
	if e, ok := o.applyState(t, r, now); ok {
		events = append(events, e)
	}
	return events
}

// applyLatency judges r's round trip against limit with the Rise/Fall
// hysteresis: Fall round trips in a row above limit make t slow, Rise in
// a row within it make it not slow; the first one timed decides alone,
// and without a limit nothing is slow. A probe that timed no round trip
// (the backend was not reached) changes nothing. It returns a log event
// when slow changed. Called with mu held.
func (o *Observer) applyLatency(t *tracked, r Result, limit time.Duration) (logEvent, bool) {
	was := t.slow
	switch {
	case limit <= 0:
		t.slow, t.slowRun, t.fastRun, t.timed = false, 0, 0, false
	case !r.Reachable:
		return logEvent{}, false
	case r.RTT > limit:
		t.slowRun++
		t.fastRun = 0
		if !t.timed || t.slowRun >= o.cfg.Fall {
			t.slow = true
		}
	default:
		t.fastRun++
		t.slowRun = 0
		if !t.timed || t.fastRun >= o.cfg.Rise {
			t.slow = false
		}
	}
	if limit > 0 {
		t.timed = true
	}
	if t.slow == was {
		return logEvent{}, false
	}
	if t.slow {
		return logEvent{hclog.Warn, "backend slow: probe round trip above the cap, no reads", []any{
			"backend", t.b.Addr, "cluster", t.b.Cluster, "round_trip", r.RTT, "max", limit, "probes", t.slowRun}}, true
	}
	return logEvent{hclog.Info, "backend no longer slow", []any{
		"backend", t.b.Addr, "cluster", t.b.Cluster, "round_trip", r.RTT, "max", limit}}, true
}

// applyState records r on t's State with hysteresis. It returns a log
// event when the state changed. Called with mu held.
func (o *Observer) applyState(t *tracked, r Result, now time.Time) (logEvent, bool) {
	good, reason := judge(r)
	if good {
		t.readOnly = r.ReadOnly
	}
	if t.state == StateUnknown {
		t.reason = cmp.Or(reason, "waiting for more good probes")
	}
	if t.suspect {
		// The first probe after a reported failure decides alone.
		t.suspect = false
		if good {
			t.good, t.bad = o.cfg.Rise, 0
			return t.transition(StateServing, "", now), true
		}
		t.good, t.bad = 0, o.cfg.Fall
		t.reason = "confirmed: " + reason
		return logEvent{}, false
	}
	if good {
		t.good++
		t.bad = 0
		// A backend seen for the first time serves after one good probe:
		// there is nothing to flap from yet.
		if t.state == StateUnknown || t.state != StateServing && t.good >= o.cfg.Rise {
			return t.transition(StateServing, "", now), true
		}
		return logEvent{}, false
	}
	t.bad++
	t.good = 0
	switch {
	case t.state == StateNotServing:
		t.reason = reason // still down: keep since, refresh the reason
	case t.bad >= o.cfg.Fall:
		return t.transition(StateNotServing, reason, now), true
	}
	return logEvent{}, false
}

// transition moves t to state and returns the log event for it.
func (t *tracked) transition(state State, reason string, now time.Time) logEvent {
	from, fromSince := t.state, t.since
	t.state, t.reason, t.since = state, reason, now
	level := hclog.Info
	if state == StateNotServing {
		level = hclog.Warn
	}
	return logEvent{level, "backend state changed", []any{
		"backend", t.b.Addr, "cluster", t.b.Cluster, "from", from.String(), "to", state.String(),
		"reason", reason, "was_since", fromSince,
	}}
}

// publishLocked builds a snapshot from the tracked backends, stores it and
// returns log events for role changes. Called with mu held.
func (o *Observer) publishLocked(now time.Time) []logEvent {
	s := &Snapshot{
		Round:    o.round,
		Time:     now,
		Clusters: map[string]*Cluster{},
		Backends: make(map[string]*BackendView, len(o.backends)),
		changed:  make(chan struct{}),
	}
	for addr, t := range o.backends {
		s.Backends[addr] = &BackendView{
			Backend: t.b, State: t.state, Reason: t.reason, Since: t.since,
			Last: t.last, LastProbe: t.lastProbe, Slow: t.slow,
		}
		c := s.Clusters[t.b.Cluster]
		if c == nil {
			c = &Cluster{Name: t.b.Cluster}
			s.Clusters[t.b.Cluster] = c
		}
		c.Backends = append(c.Backends, addr)
		if t.state != StateServing {
			continue
		}
		if t.readOnly {
			c.Replicas = append(c.Replicas, addr)
		} else {
			c.Writable = append(c.Writable, addr)
		}
	}
	var events []logEvent
	for name, c := range s.Clusters {
		slices.Sort(c.Backends)
		slices.Sort(c.Writable)
		slices.SortFunc(c.Replicas, func(a, b string) int {
			return cmp.Or(cmp.Compare(s.Backends[a].Last.RTT, s.Backends[b].Last.RTT), strings.Compare(a, b))
		})
		for _, a := range c.Replicas {
			s.Backends[a].Role = RoleReplica
		}
		switch len(c.Writable) {
		case 0:
			c.NoPrimaryReason = "no serving writable backend" + downReasons(s, c.Backends)
		case 1:
			c.Primary = c.Writable[0]
			s.Backends[c.Primary].Role = RolePrimary
		default:
			c.SplitBrain = true
			c.NoPrimaryReason = "split brain: " + strings.Join(c.Writable, ", ") + " are all writable"
			for _, a := range c.Writable {
				s.Backends[a].Role = RoleSplitBrain
			}
		}
		events = append(events, o.clusterChanged(name, c)...)
	}
	for name := range o.clusters {
		if s.Clusters[name] == nil {
			delete(o.clusters, name)
		}
	}
	close(o.snap.Swap(s).changed)
	return events
}

// clusterChanged compares c with what was last logged about it and
// returns log events for a primary change or split brain. Called with mu
// held.
func (o *Observer) clusterChanged(name string, c *Cluster) []logEvent {
	prev, known := o.clusters[name]
	cur := clusterSummary{primary: c.Primary, splitBrain: c.SplitBrain}
	o.clusters[name] = cur
	if known && prev == cur {
		return nil
	}
	switch {
	case cur.splitBrain:
		return []logEvent{{hclog.Error, "SPLIT BRAIN: several writable backends, no primary chosen",
			[]any{"cluster", name, "writable", c.Writable}}}
	case cur.primary != "":
		return []logEvent{{hclog.Info, "cluster primary changed",
			[]any{"cluster", name, "from", prev.primary, "to", cur.primary}}}
	case known:
		return []logEvent{{hclog.Warn, "cluster has no primary",
			[]any{"cluster", name, "previous", prev.primary, "reason", c.NoPrimaryReason}}}
	}
	return nil
}

// emit writes events to the logger. Called without mu.
func (o *Observer) emit(events []logEvent) {
	for _, e := range events {
		o.log.Log(e.level, e.msg, e.args...)
	}
}

// downReasons lists why the backends that do not serve are down, from
// their last probe (for example a TLS verification failure), as
// " (addr: error; ...)"; empty when no probe failed.
func downReasons(s *Snapshot, addrs []string) string {
	var parts []string
	for _, a := range addrs {
		if b := s.Backends[a]; b.State != StateServing && b.Last.Err != nil {
			parts = append(parts, a+": "+b.Last.Err.Error())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
