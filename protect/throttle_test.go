package protect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/wire"
)

func TestThrottleProbability(t *testing.T) {
	lag := func(d time.Duration) *Lag { return &Lag{lag: d, replica: "r"} }
	stopped := &Lag{stopped: "r"}
	tests := []struct {
		v      *Lag
		maxLag time.Duration
		prio   int
		want   float64
	}{
		{lag(10 * time.Second), 0, 50, 0},             // off
		{nil, 5 * time.Second, 50, 0},                 // no discovery
		{&Lag{}, 5 * time.Second, 0, 0},               // no lag known
		{lag(5 * time.Second), 5 * time.Second, 0, 0}, // at max_lag
		{lag(6 * time.Second), 5 * time.Second, 50, .2},
		{lag(6 * time.Second), 5 * time.Second, 0, .4},
		{lag(6 * time.Second), 5 * time.Second, 75, .1},
		{lag(6 * time.Second), 5 * time.Second, 100, 0},
		{lag(10 * time.Second), 5 * time.Second, 50, 1},
		{lag(time.Hour), 5 * time.Second, 50, 1},
		{lag(time.Hour), 5 * time.Second, 75, .5},
		{lag(time.Hour), 5 * time.Second, 100, 0},
		{lag(8 * time.Second), 5 * time.Second, 0, 1}, // priority 0: all from 1.5 × max_lag
		{stopped, 5 * time.Second, 50, 1},
		{stopped, 5 * time.Second, 90, .2},
		{stopped, 5 * time.Second, 100, 0},
	}
	for _, tc := range tests {
		got := throttleProbability(tc.v, tc.maxLag, tc.prio)
		if got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("throttleProbability(%+v, %v, %d) = %v, want %v", tc.v, tc.maxLag, tc.prio, got, tc.want)
		}
	}
	// It rises with the lag and falls with the priority.
	for prio := 0; prio <= 100; prio += 10 {
		prev := 0.0
		for l := time.Duration(0); l <= 12*time.Second; l += 100 * time.Millisecond {
			p := throttleProbability(lag(l), 5*time.Second, prio)
			if p < prev || p > throttleProbability(lag(l), 5*time.Second, max(prio-10, 0)) {
				t.Fatalf("not monotonic at lag %v priority %d: %v", l, prio, p)
			}
			prev = p
		}
	}
}

// The lag is the worst known one among the serving replicas; a stopped
// SQL thread is noted; the primary and lag-unknown replicas do not count.
func TestLagOf(t *testing.T) {
	view := func(r healthcheck.Result) *healthcheck.BackendView {
		return &healthcheck.BackendView{State: healthcheck.StateServing, Role: healthcheck.RoleReplica, Last: r}
	}
	snap := &healthcheck.Snapshot{
		Clusters: map[string]*healthcheck.Cluster{"c": {Name: "c", Primary: "p", Replicas: []string{"a", "b", "u"}}},
		Backends: map[string]*healthcheck.BackendView{
			"p": {State: healthcheck.StateServing, Role: healthcheck.RolePrimary},
			"a": view(healthcheck.Result{Replica: true, LagKnown: true, Lag: 3 * time.Second}),
			"b": view(healthcheck.Result{Replica: true, LagKnown: true, Lag: 7 * time.Second}),
			"u": view(healthcheck.Result{Replica: true}),
		},
	}
	v := lagOf(snap, "c")
	if v.lag != 7*time.Second || v.replica != "b" || v.stopped != "" || v.snap != snap {
		t.Errorf("lag %+v, want 7s on b", v)
	}
	if d := throttleDetail(v, 5*time.Second); d != "lag 7s > 5s on b, throttling 40% at priority 50" {
		t.Errorf("detail %q", d)
	}
	if d := throttleDetail(v, 10*time.Second); d != "lag 7s <= 10s" {
		t.Errorf("detail %q", d)
	}
	snap.Backends["u"] = view(healthcheck.Result{Replica: true, SQLStopped: true})
	v = lagOf(snap, "c")
	if v.stopped != "u" || v.lag != 7*time.Second {
		t.Errorf("lag %+v, want u stopped", v)
	}
	if d := throttleDetail(v, 5*time.Second); d != "SQL thread stopped on u, throttling 100% at priority 50" {
		t.Errorf("detail %q", d)
	}
	if !strings.Contains(v.cause(), "replica u's SQL thread is stopped") {
		t.Errorf("cause %q", v.cause())
	}
	if v := lagOf(snap, "other"); v.replica != "" || v.stopped != "" {
		t.Errorf("unknown cluster: %+v", v)
	}
	if d := throttleDetail(lagOf(snap, "other"), time.Second); d != "no replica lag known" {
		t.Errorf("detail %q", d)
	}
}

// lagScript is a lag source for tests: set changes the lag and wakes
// the waiters.
type lagScript struct {
	mu      sync.Mutex
	v       *Lag
	changed chan struct{}
}

func newLagScript(v *Lag) *lagScript { return &lagScript{v: v, changed: make(chan struct{})} }

func (l *lagScript) watch() (*Lag, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v, l.changed
}

func (l *lagScript) set(v *Lag) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.v = v
	close(l.changed)
	l.changed = make(chan struct{})
}

// throttleCluster is a cluster's throttle with settings cfg, the lag
// from ls and draws from draw.
type throttleCluster struct {
	conf atomic.Pointer[config.Cluster]
	thr  *Throttle
}

func newThrottleCluster(cfg config.Throttle, ls *lagScript, draw float64) *throttleCluster {
	c := &throttleCluster{}
	c.conf.Store(&config.Cluster{Throttle: cfg})
	c.thr = NewThrottle("c", nil, c.conf.Load)
	c.thr.watch = ls.watch
	c.thr.draw = func() float64 { return draw }
	return c
}

func (c *throttleCluster) admit(ctx context.Context, prio int, gone func() bool) *wire.SQLError {
	return c.thr.admit(ctx, prio, gone)
}

func lagging(d time.Duration) *Lag { return &Lag{lag: d, replica: "r"} }

// A transaction whose draw is at or above the probability goes at once;
// one below it waits max_delay and is refused with 1205 naming the lag
// and the settings.
func TestThrottleAdmitDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Throttle{MaxLag: 5 * time.Second, MaxDelay: 2 * time.Second}
		ls := newLagScript(lagging(6 * time.Second)) // p = .2 at priority 50
		if e := newThrottleCluster(cfg, ls, .2).admit(context.Background(), 50, nil); e != nil {
			t.Fatalf("draw .2 at p .2: %v", e)
		}
		if e := newThrottleCluster(cfg, ls, .1).admit(context.Background(), 75, nil); e != nil {
			t.Fatalf("draw .1 at priority 75 (p .1): %v", e)
		}
		if e := newThrottleCluster(cfg, newLagScript(&Lag{stopped: "r"}), 0).admit(context.Background(), 100, nil); e != nil {
			t.Fatalf("priority 100: %v", e)
		}
		c := newThrottleCluster(cfg, ls, .19)
		start := time.Now()
		e := c.admit(context.Background(), 50, nil)
		if e == nil || e.Code != 1205 || e.State != "HY000" ||
			!strings.Contains(e.Message, "throttled at the gateway for 2s (throttle.max_delay) because replica r lags 6s (throttle.max_lag 5s)") {
			t.Fatalf("got %v, want 1205 naming the lag and the settings", e)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("waited %v (virtual time), want max_delay", waited)
		}
		rows := c.thr.Rows(c.conf.Load())
		if r := rows[0]; r.Mode != "on" || r.Active != 0 || r.Total != 1 || r.Refused != 1 || c.thr.Name() != "throttle" || r.Scope != "*" {
			t.Errorf("row %+v", r)
		}
	})
}

// A delayed transaction goes as soon as the lag falls under its draw,
// and while it waits it is counted as active; a reload that turns
// throttling off lets it go at the next snapshot.
func TestThrottleAdmitWaitsForLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Throttle{MaxLag: 5 * time.Second, MaxDelay: time.Minute}
		ls := newLagScript(lagging(10 * time.Second))
		c := newThrottleCluster(cfg, ls, .5)
		done := make(chan *wire.SQLError, 1)
		go func() { done <- c.admit(context.Background(), 50, nil) }()
		synctest.Wait()
		if r := c.thr.Rows(c.conf.Load())[0]; r.Active != 1 || r.Total != 1 {
			t.Fatalf("while waiting: %+v", r)
		}
		ls.set(lagging(8 * time.Second)) // p .6 > .5: still waits
		synctest.Wait()
		select {
		case e := <-done:
			t.Fatalf("went at p .6 with draw .5: %v", e)
		default:
		}
		ls.set(lagging(7 * time.Second)) // p .4
		if e := <-done; e != nil {
			t.Fatalf("after the lag fell: %v", e)
		}
		if r := c.thr.Rows(c.conf.Load())[0]; r.Active != 0 || r.Total != 1 || r.Refused != 0 {
			t.Fatalf("after: %+v", r)
		}

		go func() { done <- c.admit(context.Background(), 50, nil) }()
		synctest.Wait()
		off := config.Cluster{Throttle: config.Throttle{MaxDelay: time.Minute}}
		c.conf.Store(&off)
		ls.set(lagging(time.Hour))
		if e := <-done; e != nil {
			t.Fatalf("after throttling was turned off: %v", e)
		}
	})
}

// KILL QUERY (stop), the session's end (ctx) and the client leaving end
// a wait with 1317.
func TestThrottleAdmitInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Throttle{MaxLag: time.Second, MaxDelay: time.Minute}
		c := newThrottleCluster(cfg, newLagScript(&Lag{stopped: "r"}), 0)
		check := func(what string, e *wire.SQLError) {
			t.Helper()
			if e == nil || e.Code != 1317 || e.State != "70100" {
				t.Errorf("%s: got %v, want 1317", what, e)
			}
		}
		done := make(chan *wire.SQLError, 1)
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() { done <- c.admit(ctx, 50, nil) }()
		synctest.Wait()
		cancel(errors.New("killed"))
		check("kill", <-done)

		var mu sync.Mutex
		gone := false
		go func() {
			done <- c.admit(context.Background(), 50, func() bool { mu.Lock(); defer mu.Unlock(); return gone })
		}()
		time.Sleep(time.Second)
		mu.Lock()
		gone = true
		mu.Unlock()
		check("client gone", <-done)
		if n := c.thr.interrupted.Load(); n != 2 || c.thr.refused.Load() != 0 {
			t.Errorf("interrupted %d, refused %d; want 2, 0", n, c.thr.refused.Load())
		}
	})
}

// In dry-run mode nobody waits; what would have waited is counted, and
// what would have been refused once max_delay has passed.
func TestThrottleDryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Throttle{MaxLag: 5 * time.Second, MaxDelay: 2 * time.Second, DryRun: true}
		ls := newLagScript(lagging(10 * time.Second))
		c := newThrottleCluster(cfg, ls, .5)
		for range 2 {
			if e := c.admit(context.Background(), 50, nil); e != nil {
				t.Fatal(e)
			}
		}
		time.Sleep(3 * time.Second)
		if e := c.admit(context.Background(), 50, nil); e != nil {
			t.Fatal(e)
		}
		ls.set(lagging(6 * time.Second)) // the third's max_delay ends under its draw
		time.Sleep(3 * time.Second)
		r := c.thr.Rows(c.conf.Load())[0]
		if r.Mode != "dry_run" || r.DryRun != 3 || r.DryRunRefused != 2 || r.Total != 0 || r.Active != 0 {
			t.Errorf("row %+v, want 3 would-delay, 2 would-refuse, nothing delayed", r)
		}
	})
}
