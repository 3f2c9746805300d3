package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeProber returns scripted results per address, optionally after a
// delay, and counts probes and the peak number in flight.
type fakeProber struct {
	delay time.Duration
	// hold, when set, makes every probe wait until it is closed.
	hold atomic.Pointer[chan struct{}]

	inFlight atomic.Int64
	peak     atomic.Int64
	total    atomic.Int64

	mu     sync.Mutex
	res    map[string]Result
	counts map[string]int
}

func newFakeProber() *fakeProber {
	return &fakeProber{res: map[string]Result{}, counts: map[string]int{}}
}

func (f *fakeProber) set(addr string, r Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res[addr] = r
}

func (f *fakeProber) Probe(ctx context.Context, b Backend) Result {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	f.total.Add(1)
	if h := f.hold.Load(); h != nil {
		select {
		case <-*h:
		case <-ctx.Done():
			return Result{Err: ctx.Err()}
		}
	}
	if f.delay > 0 {
		t := time.NewTimer(f.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return Result{Err: ctx.Err()}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[b.Addr]++
	r, ok := f.res[b.Addr]
	if !ok {
		return Result{Err: errors.New("connection refused")}
	}
	return r
}

// takeCounts returns the per-address probe counts and resets them.
func (f *fakeProber) takeCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.counts
	f.counts = map[string]int{}
	return c
}

var (
	primaryOK = Result{Reachable: true, ReadOnly: false, ServerID: 1, Version: "fake", RTT: time.Millisecond}
	replicaOK = Result{Reachable: true, ReadOnly: true, ServerID: 2, Version: "fake", Replica: true, LagKnown: true, RTT: time.Millisecond}
	down      = Result{Err: errors.New("connection refused")}
)

func staticBackends(bs ...Backend) func() []Backend {
	return func() []Backend { return bs }
}

// manual builds an observer whose loop is not started: the test drives
// rounds with runRound.
func manual(t *testing.T, p Prober, bs ...Backend) *Observer {
	t.Helper()
	o, err := newObserver(Config{Prober: p, Backends: staticBackends(bs...), Rise: 2, Fall: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func state(o *Observer, addr string) State {
	v := o.Snapshot().Backend(addr)
	if v == nil {
		return StateUnknown
	}
	return v.State
}

func TestNewRequiresProberAndBackends(t *testing.T) {
	if _, err := New(Config{Backends: staticBackends()}); err == nil {
		t.Error("New without Prober: no error")
	}
	if _, err := New(Config{Prober: newFakeProber()}); err == nil {
		t.Error("New without Backends: no error")
	}
}

func TestHysteresis(t *testing.T) {
	p := newFakeProber()
	a := Backend{Addr: "a:3306", Cluster: "c"}
	o := manual(t, p, a)

	if s := o.Snapshot(); s == nil || s.Round != 0 || len(s.Backends) != 0 {
		t.Fatalf("initial snapshot = %+v, want empty round 0", s)
	}

	// Unknown start: the first good probe serves (nothing to flap from).
	p.set(a.Addr, replicaOK)
	o.runRound()
	if got := state(o, a.Addr); got != StateServing {
		t.Fatalf("after 1 good probe of a new backend: %v, want serving", got)
	}
	o.runRound()
	servingSince := o.Snapshot().Backend(a.Addr).Since

	// One failure does not mark down; a good probe in between resets.
	p.set(a.Addr, down)
	o.runRound()
	p.set(a.Addr, replicaOK)
	o.runRound()
	p.set(a.Addr, down)
	o.runRound()
	if got := state(o, a.Addr); got != StateServing {
		t.Fatalf("after fail, good, fail: %v, want serving", got)
	}
	if v := o.Snapshot().Backend(a.Addr); !v.Since.Equal(servingSince) {
		t.Errorf("Since moved without a state change: %v -> %v", servingSince, v.Since)
	}

	// Second failure in a row: down, with the reason.
	o.runRound()
	v := o.Snapshot().Backend(a.Addr)
	if v.State != StateNotServing || v.Reason != "connection refused" || v.Role != RoleNone {
		t.Fatalf("after 2 failures: %+v, want not serving, reason connection refused, role none", v)
	}

	// Rise: one good is not enough, two are.
	p.set(a.Addr, replicaOK)
	o.runRound()
	if got := state(o, a.Addr); got != StateNotServing {
		t.Fatalf("after 1 good probe while down: %v, want not serving", got)
	}
	o.runRound()
	if v := o.Snapshot().Backend(a.Addr); v.State != StateServing || v.Role != RoleReplica || v.Reason != "" {
		t.Fatalf("after 2 good probes while down: %+v", v)
	}
}

func TestUnknownFallsToNotServing(t *testing.T) {
	p := newFakeProber()
	a := Backend{Addr: "a:3306", Cluster: "c"}
	o := manual(t, p, a)
	o.runRound()
	if got := state(o, a.Addr); got != StateUnknown {
		t.Fatalf("after 1 failure: %v, want unknown", got)
	}
	o.runRound()
	if got := state(o, a.Addr); got != StateNotServing {
		t.Fatalf("after 2 failures: %v, want not serving", got)
	}
}

func TestReplicaWithUnknownLagServes(t *testing.T) {
	p := newFakeProber()
	a := Backend{Addr: "a:3306", Cluster: "c"}
	o := manual(t, p, a)
	stopped := replicaOK
	stopped.LagKnown = false
	p.set(a.Addr, stopped)
	o.runRound()
	o.runRound()
	v := o.Snapshot().Backend(a.Addr)
	if v.State != StateServing || v.Role != RoleReplica || v.Last.LagKnown {
		t.Fatalf("stopped replica: %+v (it serves; readers skip it by lag)", v)
	}
}

func TestRolesAndReplicaOrder(t *testing.T) {
	p := newFakeProber()
	bs := []Backend{{"p:1", "c"}, {"r1:1", "c"}, {"r2:1", "c"}, {"r3:1", "c"}, {"x:1", "other"}}
	o := manual(t, p, bs...)
	p.set("p:1", primaryOK)
	for addr, rtt := range map[string]time.Duration{"r1:1": 30 * time.Millisecond, "r2:1": 10 * time.Millisecond, "r3:1": 20 * time.Millisecond} {
		r := replicaOK
		r.RTT = rtt
		p.set(addr, r)
	}
	o.runRound()
	o.runRound()
	s := o.Snapshot()
	c := s.Cluster("c")
	if c.Primary != "p:1" || c.SplitBrain || c.NoPrimaryReason != "" {
		t.Fatalf("cluster c: %+v", c)
	}
	if want := []string{"r2:1", "r3:1", "r1:1"}; !slices.Equal(c.Replicas, want) {
		t.Errorf("replicas = %v, want %v (by RTT)", c.Replicas, want)
	}
	if s.Backend("p:1").Role != RolePrimary {
		t.Errorf("p:1 role = %v", s.Backend("p:1").Role)
	}
	other := s.Cluster("other")
	if other.Primary != "" || other.NoPrimaryReason == "" || s.Backend("x:1").State != StateNotServing {
		t.Errorf("cluster other: %+v, x:1 %+v", other, s.Backend("x:1"))
	}
}

func TestSplitBrain(t *testing.T) {
	p := newFakeProber()
	o := manual(t, p, Backend{"a:1", "c"}, Backend{"b:1", "c"})
	p.set("a:1", primaryOK)
	p.set("b:1", replicaOK)
	o.runRound()
	o.runRound()
	if c := o.Snapshot().Cluster("c"); c.Primary != "a:1" {
		t.Fatalf("before: %+v", c)
	}
	p.set("b:1", primaryOK) // b turns writable too
	o.runRound()
	s := o.Snapshot()
	c := s.Cluster("c")
	if !c.SplitBrain || c.Primary != "" || !slices.Equal(c.Writable, []string{"a:1", "b:1"}) || c.NoPrimaryReason == "" {
		t.Fatalf("split brain not flagged: %+v", c)
	}
	if s.Backend("a:1").Role != RoleSplitBrain || s.Backend("b:1").Role != RoleSplitBrain {
		t.Errorf("roles: a %v b %v", s.Backend("a:1").Role, s.Backend("b:1").Role)
	}
	p.set("a:1", replicaOK) // one steps down: resolved
	o.runRound()
	if c := o.Snapshot().Cluster("c"); c.SplitBrain || c.Primary != "b:1" {
		t.Fatalf("after resolution: %+v", c)
	}
}

func TestPrimaryChange(t *testing.T) {
	p := newFakeProber()
	o := manual(t, p, Backend{"a:1", "c"}, Backend{"b:1", "c"})
	p.set("a:1", primaryOK)
	p.set("b:1", replicaOK)
	o.runRound()
	o.runRound()
	if c := o.Snapshot().Cluster("c"); c.Primary != "a:1" {
		t.Fatalf("before: %+v", c)
	}
	// Old primary dies, replica is promoted in the same moment.
	p.set("a:1", down)
	p.set("b:1", primaryOK)
	o.runRound()
	// a still serving (1 failure < Fall) and b writable: split brain for
	// one round is the honest answer, never a guess.
	if c := o.Snapshot().Cluster("c"); !c.SplitBrain {
		t.Fatalf("round 1 after change: %+v, want split brain while a is not yet down", c)
	}
	o.runRound()
	c := o.Snapshot().Cluster("c")
	if c.Primary != "b:1" || c.SplitBrain || len(c.Replicas) != 0 {
		t.Fatalf("round 2 after change: %+v, want primary b:1", c)
	}
}

func TestPrimaryChangeByReadOnlyFlip(t *testing.T) {
	p := newFakeProber()
	o := manual(t, p, Backend{"a:1", "c"}, Backend{"b:1", "c"})
	p.set("a:1", primaryOK)
	p.set("b:1", replicaOK)
	o.runRound()
	o.runRound()
	// Clean switchover: a turns read_only, b writable, both keep serving.
	p.set("a:1", replicaOK)
	p.set("b:1", primaryOK)
	o.runRound()
	c := o.Snapshot().Cluster("c")
	if c.Primary != "b:1" || !slices.Equal(c.Replicas, []string{"a:1"}) {
		t.Fatalf("after flip: %+v, want primary b:1 within one round", c)
	}
}

func TestReportFailure(t *testing.T) {
	p := newFakeProber()
	a := Backend{"a:1", "c"}
	o := manual(t, p, a)
	p.set(a.Addr, primaryOK)
	o.runRound()
	o.runRound()
	before := o.Snapshot()
	if before.Cluster("c").Primary != "a:1" {
		t.Fatalf("before: %+v", before.Cluster("c"))
	}
	p.takeCounts()

	hold := make(chan struct{}) // the targeted probe lands after the checks below
	p.hold.Store(&hold)
	o.ReportFailure(a.Addr)
	after := o.Snapshot()
	if after == before {
		t.Fatal("ReportFailure did not publish a new snapshot")
	}
	select {
	case <-before.Changed():
	default:
		t.Error("the replaced snapshot's Changed channel is open")
	}
	if v := after.Backend(a.Addr); v.State != StateNotServing || v.Reason == "" {
		t.Fatalf("after ReportFailure: %+v", v)
	}
	if c := after.Cluster("c"); c.Primary != "" {
		t.Fatalf("suspect backend still primary: %+v", c)
	}
	if before.Backend(a.Addr).State != StateServing {
		t.Error("old snapshot was modified")
	}
	o.ReportFailure("nobody:1") // unknown: ignored, no panic

	// A false alarm: the targeted probe is good, and that alone restores it.
	p.hold.Store(nil)
	close(hold)
	<-after.Changed()
	if got := state(o, a.Addr); got != StateServing {
		t.Fatalf("after a good targeted probe: %v", got)
	}
	if n := p.takeCounts()[a.Addr]; n != 1 {
		t.Errorf("targeted probes: %d, want 1", n)
	}
}

func TestReportFailureConfirmed(t *testing.T) {
	p := newFakeProber()
	a := Backend{"a:1", "c"}
	o := manual(t, p, a)
	p.set(a.Addr, primaryOK)
	o.runRound()
	o.runRound()
	p.set(a.Addr, down)
	o.ReportFailure(a.Addr)
	// The targeted probe's result arrives in the background.
	for deadline := time.Now().Add(5 * time.Second); o.Snapshot().Backend(a.Addr).Reason != "confirmed: connection refused"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after a failed targeted probe: %+v", o.Snapshot().Backend(a.Addr))
		}
	}
	if v := o.Snapshot().Backend(a.Addr); v.State != StateNotServing {
		t.Fatalf("after a failed targeted probe: %+v", v)
	}
	// Down for real: Rise good probes to come back.
	p.set(a.Addr, primaryOK)
	o.runRound()
	if got := state(o, a.Addr); got != StateNotServing {
		t.Fatalf("1 good probe after a confirmed failure: %v", got)
	}
	o.runRound()
	if got := state(o, a.Addr); got != StateServing {
		t.Fatalf("2 good probes: %v", got)
	}
}

// Checks are throttled to one targeted probe per Interval/10. In a
// synctest bubble: time is fake, so "no second probe" is checked after
// a whole second without waiting one.
func TestCheckThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakeProber()
		a := Backend{"a:1", "c"}
		o := manual(t, p, a)
		p.set(a.Addr, primaryOK)
		o.runRound()
		p.takeCounts()
		before := o.Snapshot().Backend(a.Addr).LastProbe
		time.Sleep(time.Millisecond) // fake time stands still otherwise: the probe would have the round's time
		for range 50 {
			o.Check(a.Addr) // Interval 2s: one targeted probe per 200ms at most
		}
		synctest.Wait()
		if !o.Snapshot().Backend(a.Addr).LastProbe.After(before) {
			t.Fatal("targeted probe result not applied")
		}
		if n := p.takeCounts()[a.Addr]; n != 1 {
			t.Errorf("50 Checks at once made %d probes, want 1", n)
		}
		// The probe has ended: a Check 100ms after it is still throttled,
		// one 250ms after it probes.
		time.Sleep(100 * time.Millisecond)
		o.Check(a.Addr)
		synctest.Wait()
		if n := p.takeCounts()[a.Addr]; n != 0 {
			t.Errorf("a Check 100ms after a targeted probe made %d probes, want 0", n)
		}
		time.Sleep(150 * time.Millisecond)
		o.Check(a.Addr)
		synctest.Wait()
		if n := p.takeCounts()[a.Addr]; n != 1 {
			t.Errorf("a Check 250ms after a targeted probe made %d probes, want 1", n)
		}
		if got := state(o, a.Addr); got != StateServing {
			t.Errorf("good probes (round + checks): %v", got)
		}
	})
}

// blockingProber blocks every probe until release is closed.
type blockingProber struct {
	started chan struct{}
	release chan struct{}
	down    atomic.Bool // probes started from now on fail
}

func (b *blockingProber) Probe(ctx context.Context, _ Backend) Result {
	fail := b.down.Load()
	b.started <- struct{}{}
	<-b.release
	if fail {
		return down
	}
	return primaryOK
}

func TestReportFailureIgnoresProbesStartedBefore(t *testing.T) {
	bp := &blockingProber{started: make(chan struct{}, 1), release: make(chan struct{})}
	a := Backend{"a:1", "c"}
	o := manual(t, bp, a)
	go func() { <-bp.started; bp.release <- struct{}{}; <-bp.started; bp.release <- struct{}{} }()
	o.runRound()
	o.runRound()
	if got := state(o, a.Addr); got != StateServing {
		t.Fatalf("setup: %v", got)
	}
	done := make(chan struct{})
	go func() { defer close(done); o.runRound() }()
	<-bp.started // probe in flight
	bp.down.Store(true)
	o.ReportFailure(a.Addr)
	<-bp.started // the targeted probe
	close(bp.release)
	<-done
	if v := o.Snapshot().Backend(a.Addr); v.State != StateNotServing {
		t.Fatalf("a probe begun before the report counted: %+v", v)
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if v := o.Snapshot().Backend(a.Addr); v.Reason == "confirmed: connection refused" {
			return
		}
	}
	t.Fatalf("targeted probe result not applied: %+v", o.Snapshot().Backend(a.Addr))
}

func TestBackendsListChanges(t *testing.T) {
	p := newFakeProber()
	var mu sync.Mutex
	list := []Backend{{"a:1", "c"}, {"b:1", "c"}}
	o, err := newObserver(Config{Prober: p, Backends: func() []Backend {
		mu.Lock()
		defer mu.Unlock()
		return list
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	p.set("a:1", replicaOK)
	p.set("b:1", replicaOK)
	o.runRound()
	mu.Lock()
	list = []Backend{{"a:1", "c"}}
	mu.Unlock()
	o.runRound()
	s := o.Snapshot()
	if s.Backend("b:1") != nil || len(s.Cluster("c").Backends) != 1 {
		t.Fatalf("removed backend still listed: %+v", s.Cluster("c"))
	}
}

func TestProberPanicIsAFailure(t *testing.T) {
	o := manual(t, panicProber{}, Backend{"a:1", "c"})
	o.runRound()
	o.runRound()
	if v := o.Snapshot().Backend("a:1"); v.State != StateNotServing {
		t.Fatalf("panicking prober: %+v", v)
	}
}

type panicProber struct{}

func (panicProber) Probe(context.Context, Backend) Result { panic("boom") }

// countingProber counts probes; each round probes the single backend once.
type countingProber struct{ n atomic.Int64 }

func (c *countingProber) Probe(context.Context, Backend) Result {
	c.n.Add(1)
	return primaryOK
}

func TestRefreshThrottled(t *testing.T) {
	// In a synctest bubble: fake time, so a loaded machine cannot starve
	// the observer's loop during the 300 ms.
	synctest.Test(t, func(t *testing.T) {
		const interval = 400 * time.Millisecond
		cp := &countingProber{}
		o, err := New(Config{Interval: interval, Prober: cp, Backends: staticBackends(Backend{"a:1", "c"})})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		synctest.Wait()
		if n := cp.n.Load(); n != 1 {
			t.Fatalf("%d rounds at start, want 1", n)
		}

		// Hammer Refresh for 300 ms: early rounds come at most every
		// interval/4 = 100 ms, so at most 3 more than the first, and at
		// least one (before the regular interval).
		start := time.Now()
		for time.Since(start) < 300*time.Millisecond {
			o.Refresh()
			time.Sleep(time.Millisecond)
			synctest.Wait()
		}
		n := cp.n.Load()
		t.Logf("rounds during %v of continuous Refresh (interval %v): %d (including the first)", time.Since(start), interval, n)
		if n < 2 {
			t.Errorf("no early round: %d rounds", n)
		}
		if n > 4 {
			t.Errorf("Refresh not throttled: %d rounds", n)
		}
	})
}

// Rounds come every Interval, and none after Close (checked over ten
// intervals of fake time, in a synctest bubble).
func TestRegularInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &countingProber{}
		o, err := New(Config{Interval: 50 * time.Millisecond, Prober: cp, Backends: staticBackends(Backend{"a:1", "c"})})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(125 * time.Millisecond)
		synctest.Wait()
		if r := o.Snapshot().Round; r != 3 {
			t.Errorf("after 125ms of 50ms rounds: round %d, want 3 (at 0, 50 and 100ms)", r)
		}
		if s := o.Snapshot(); s.Cluster("c").Primary != "a:1" {
			t.Errorf("after 3 rounds: %+v", s.Cluster("c"))
		}
		o.Close()
		o.Close() // idempotent
		n := cp.n.Load()
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if cp.n.Load() != n {
			t.Error("probes after Close")
		}
	})
}

func TestCloseCancelsProbesInFlight(t *testing.T) {
	p := newFakeProber()
	p.delay = time.Hour
	o, err := New(Config{Timeout: time.Hour, Prober: p, Backends: staticBackends(Backend{"a:1", "c"}, Backend{"b:1", "c"})})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return p.inFlight.Load() == 2 })
	done := make(chan struct{})
	go func() { o.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with probes in flight")
	}
	if s := o.Snapshot(); s.Round != 0 {
		t.Errorf("a cancelled round was published: round %d", s.Round)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// recordingShare is a Share with no results that records what it is given.
type recordingShare struct {
	mu     sync.Mutex
	probed []Result
}

func (s *recordingShare) Result(Backend) (Result, bool) { return Result{}, false }

func (s *recordingShare) Probed(_ Backend, r Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probed = append(s.probed, r)
}

// A prober that declines (ErrNotProbed) teaches the observer nothing: the
// state stays, no probe or failure is counted, the share is not fed, and
// a reported failure still waits for a real probe to decide.
func TestNotProbedChangesNothing(t *testing.T) {
	p := newFakeProber()
	notProbed := Result{Err: fmt.Errorf("%w: waiting for room under the cap", ErrNotProbed)}
	a, b := Backend{Addr: "a:1", Cluster: "c"}, Backend{Addr: "b:1", Cluster: "c"}
	p.set(a.Addr, notProbed)
	p.set(b.Addr, primaryOK)
	o := manual(t, p, a, b)
	sh := &recordingShare{}
	o.SetShare(sh)
	o.runRound()
	o.runRound()
	o.runRound()
	if v := o.Snapshot().Backend(a.Addr); v == nil || v.State != StateUnknown || !strings.Contains(v.Reason, "waiting for room") {
		t.Fatalf("a after three declined probes: %+v, want unknown with the prober's reason", v)
	}
	if st := o.Stats(); st.Probes != 3 || st.ProbeFailures != 0 {
		t.Fatalf("stats %+v: want b's 3 probes only, no failure", st)
	}
	sh.mu.Lock()
	fed := len(sh.probed)
	sh.mu.Unlock()
	if fed != 3 {
		t.Fatalf("the share got %d results, want b's 3", fed)
	}

	// Serving, then declined rounds: still serving.
	p.set(b.Addr, notProbed)
	o.runRound()
	o.runRound()
	if s := state(o, b.Addr); s != StateServing {
		t.Fatalf("b after declined rounds: %v, want serving", s)
	}
	// A reported failure: the declined targeted probe does not decide;
	// the first real probe after it does, alone.
	o.ReportFailure(b.Addr)
	waitFor(t, func() bool { o.mu.Lock(); defer o.mu.Unlock(); return !o.backends[b.Addr].probing })
	if s := state(o, b.Addr); s != StateNotServing {
		t.Fatalf("b after a report and a declined probe: %v, want not serving (suspect)", s)
	}
	p.set(b.Addr, primaryOK)
	o.runRound()
	if s := state(o, b.Addr); s != StateServing {
		t.Fatalf("b after one good probe following the report: %v, want serving", s)
	}
}

// TestMaxLatency: a replica whose probe round trip is above its cluster's
// MaxLatency is Slow after Fall probes in a row, not slow again after
// Rise in a row within it; single probes change nothing, the first timed
// probe decides alone, a failed probe leaves it as it was, a cap of zero
// clears it, the cap is per cluster and read before each result, and
// Slow never changes State.
func TestMaxLatency(t *testing.T) {
	p := newFakeProber()
	a := Backend{Addr: "a:3306", Cluster: "c"}
	b := Backend{Addr: "b:3306", Cluster: "other"}
	var limit atomic.Int64
	limit.Store(int64(100 * time.Millisecond))
	o, err := newObserver(Config{Prober: p, Backends: staticBackends(a, b), Rise: 2, Fall: 3,
		MaxLatency: func(cluster string) time.Duration {
			if cluster != "c" {
				return 0
			}
			return time.Duration(limit.Load())
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	rtt := func(d time.Duration) Result { r := replicaOK; r.RTT = d; return r }
	fast, slow := rtt(10*time.Millisecond), rtt(300*time.Millisecond)
	steps := []struct {
		what   string
		r      Result
		limit  time.Duration
		want   bool
		others bool // b (no cap in its cluster) is probed with the same result
	}{
		{"first probe, slow: decides alone", slow, 100 * time.Millisecond, true, true},
		{"1 fast", fast, 100 * time.Millisecond, true, false},
		{"2 fast (rise)", fast, 100 * time.Millisecond, false, false},
		{"1 slow", slow, 100 * time.Millisecond, false, false},
		{"2 slow", slow, 100 * time.Millisecond, false, false},
		{"fast in between resets the count", fast, 100 * time.Millisecond, false, false},
		{"1 slow again", slow, 100 * time.Millisecond, false, false},
		{"2 slow again", slow, 100 * time.Millisecond, false, false},
		{"a failed probe changes nothing", down, 100 * time.Millisecond, false, false},
		{"3 slow (fall)", slow, 100 * time.Millisecond, true, false},
		{"exactly the cap is within it", rtt(100 * time.Millisecond), 100 * time.Millisecond, true, false},
		{"cap off: not slow at once", slow, 0, false, false},
		{"cap on again: the first probe decides alone", slow, 100 * time.Millisecond, true, false},
		{"cap raised above the round trip: 1 probe within", slow, time.Second, true, false},
		{"2 within the raised cap", slow, time.Second, false, false},
	}
	for i, s := range steps {
		limit.Store(int64(s.limit))
		p.set(a.Addr, s.r)
		p.set(b.Addr, s.r)
		o.runRound()
		va, vb := o.Snapshot().Backend(a.Addr), o.Snapshot().Backend(b.Addr)
		if va.Slow != s.want {
			t.Fatalf("step %d (%s): Slow = %v, want %v", i, s.what, va.Slow, s.want)
		}
		if vb.Slow {
			t.Fatalf("step %d (%s): a backend of a cluster without a cap is slow", i, s.what)
		}
		if s.r.Err == nil && va.State != StateServing {
			t.Fatalf("step %d (%s): state %v: Slow must not change State", i, s.what, va.State)
		}
	}
}

// TestMaxLatencyTargetedProbe: a targeted probe (Check) counts towards
// Slow like a round's.
func TestMaxLatencyTargetedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakeProber()
		a := Backend{Addr: "a:3306", Cluster: "c"}
		o, err := newObserver(Config{Prober: p, Backends: staticBackends(a), Rise: 2, Fall: 2, Interval: time.Second,
			MaxLatency: func(string) time.Duration { return 50 * time.Millisecond }})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		p.set(a.Addr, replicaOK)
		o.runRound()
		slow := replicaOK
		slow.RTT = 80 * time.Millisecond
		p.set(a.Addr, slow)
		o.runRound()
		if o.Snapshot().Backend(a.Addr).Slow {
			t.Fatal("slow after 1 slow probe of 2")
		}
		time.Sleep(time.Second)
		o.Check(a.Addr)
		synctest.Wait()
		if !o.Snapshot().Backend(a.Addr).Slow {
			t.Fatal("a slow round probe and a slow targeted one: not slow")
		}
	})
}

// TestFailedProbeKeepsRole pins down a false split brain (e2e/faults
// TestSlowReplica, a replica's link slowed past the probe timeout): a
// probe that timed its SELECT 1 and then timed out reading the variables
// has ReadOnly false; while the replica still served on its earlier
// probes it was counted as writable, the cluster was in split brain and
// writes were refused until fall probes took the replica out. The role
// comes from the last good probe.
func TestFailedProbeKeepsRole(t *testing.T) {
	p := newFakeProber()
	pr, rr := Backend{"p:1", "c"}, Backend{"r:1", "c"}
	o := manual(t, p, pr, rr)
	p.set(pr.Addr, primaryOK)
	p.set(rr.Addr, replicaOK)
	o.runRound()
	o.runRound()
	p.set(rr.Addr, Result{Reachable: true, RTT: 900 * time.Millisecond, Err: errors.New("probe r:1: read variables: i/o timeout")})
	o.runRound()
	s := o.Snapshot()
	c := s.Cluster("c")
	if v := s.Backend(rr.Addr); v.State != StateServing || c.SplitBrain || c.Primary != pr.Addr || v.Role != RoleReplica {
		t.Fatalf("after 1 failed probe of the replica: state %v, role %v, split brain %v, primary %q; want serving, replica, no split brain, %s",
			v.State, v.Role, c.SplitBrain, c.Primary, pr.Addr)
	}
	o.runRound()
	if v := o.Snapshot().Backend(rr.Addr); v.State != StateNotServing || o.Snapshot().Cluster("c").Primary != pr.Addr {
		t.Fatalf("after fall failed probes: %+v", v)
	}
}
