package protect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Transaction throttling (config throttle): while the cluster's replicas
// lag more than max_lag, a statement that would start a write
// transaction (querypath.StartsWrite: an autocommit write, or the first
// write or locking read of a transaction) is delayed with a probability
// that rises with the lag, from 0 at max_lag to 1 at twice max_lag, and
// falls with the user's priority (throttleProbability). A delayed
// statement waits for the lag to fall, re-checked at every discovery
// snapshot, for at most max_delay; then it is refused with error 1205.
// Reads, transaction control and the later statements of a transaction
// that has written are never delayed: it holds locks, and delaying it
// would only hold them longer.
//
// The decision is drawn once per transaction: a number u uniform in
// [0, 1), and the statement goes while u >= p, p the probability at the
// current lag. So at any moment a fraction p of new write transactions
// is held back, and as the lag falls the held ones go in the order of
// their draws; re-drawing at every snapshot instead would make the
// throttle weaker the more often discovery probes.
//
// The lag is the worst among the cluster's serving replicas whose lag is
// known (a replica kept from reads for lagging is exactly the one that
// matters); a replica whose SQL thread is stopped applies nothing and
// counts as lagging twice max_lag or more.

// Throttle is one cluster's transaction throttling: its counters and
// the lag last read from a discovery snapshot. Made by NewThrottle.
type Throttle struct {
	Hooks
	// cluster is the cluster's name; snapshot returns discovery's latest
	// snapshot (nil without discovery) and conf the cluster's settings
	// now.
	cluster  string
	snapshot func() *healthcheck.Snapshot
	conf     func() *config.Cluster

	// draw returns a number uniform in [0, 1); nil: math/rand/v2's.
	// Tests set it.
	draw func() float64
	// watch, when not nil, replaces discovery as the source of the lag
	// (tests): the lag now and a channel closed when it may change.
	watch func() (*Lag, <-chan struct{})
	// view is the lag of the latest snapshot read, computed once per
	// snapshot.
	view atomic.Pointer[Lag]

	// delayed is the statements waiting now; delayedTotal those that
	// waited; refused those refused after max_delay; interrupted those
	// whose wait ended by KILL or the client leaving.
	delayed, delayedTotal, refused, interrupted atomic.Int64
	// wouldDelay and wouldRefuse count, in dry-run mode, the statements
	// that would have waited and those that would have been refused.
	wouldDelay, wouldRefuse atomic.Int64
}

// Lag is the replication lag of a cluster as one snapshot tells it.
type Lag struct {
	// snap is the snapshot it was read from.
	snap *healthcheck.Snapshot
	// lag is the worst known lag among the serving replicas, and
	// replica the one that lags it ("" when no lag is known).
	lag     time.Duration
	replica string
	// stopped names a serving replica whose SQL thread is stopped, ""
	// when none.
	stopped string
}

// lagOf reads the lag of cluster from snap.
func lagOf(snap *healthcheck.Snapshot, cluster string) *Lag {
	v := &Lag{snap: snap}
	c := snap.Cluster(cluster)
	if c == nil {
		return v
	}
	for _, addr := range c.Replicas {
		b := snap.Backends[addr]
		switch {
		case b == nil:
		case b.Last.SQLStopped:
			if v.stopped == "" {
				v.stopped = addr
			}
		case b.Last.LagKnown && (v.replica == "" || b.Last.Lag > v.lag):
			v.lag, v.replica = b.Last.Lag, addr
		}
	}
	return v
}

// throttleProbability is the chance that a new write transaction of a
// user of priority prio (0 to 100) is held back at lag v under max_lag
// maxLag: 0 up to max_lag, rising linearly to 1 at twice max_lag (or
// with a stopped SQL thread) for priority 50; scaled by (100-prio)/50, so
// priority 0 is held back twice as often (always from 1.5 times
// max_lag), priority 75 half as often and priority 100 never.
func throttleProbability(v *Lag, maxLag time.Duration, prio int) float64 {
	if maxLag <= 0 || prio >= 100 || v == nil {
		return 0
	}
	var ramp float64
	switch {
	case v.stopped != "":
		ramp = 1
	case v.replica == "" || v.lag <= maxLag:
		return 0
	default:
		ramp = min(float64(v.lag-maxLag)/float64(maxLag), 1)
	}
	return min(ramp*float64(100-max(prio, 0))/50, 1)
}

// NewThrottle returns the transaction throttling of cluster: snapshot
// returns discovery's latest snapshot (nil without discovery), conf the
// cluster's settings now.
func NewThrottle(cluster string, snapshot func() *healthcheck.Snapshot, conf func() *config.Cluster) *Throttle {
	return &Throttle{cluster: cluster, snapshot: snapshot, conf: conf}
}

// Name implements Policy.
func (t *Throttle) Name() string { return "throttle" }

// Lag returns the cluster's replication lag now and a channel closed
// when it may have changed (a new snapshot); nil, nil without discovery.
func (t *Throttle) Lag() (*Lag, <-chan struct{}) {
	if t.watch != nil {
		return t.watch()
	}
	var snap *healthcheck.Snapshot
	if t.snapshot != nil {
		snap = t.snapshot()
	}
	if snap == nil {
		return nil, nil
	}
	if v := t.view.Load(); v != nil && v.snap == snap {
		return v, snap.Changed()
	}
	v := lagOf(snap, t.cluster)
	t.view.Store(v)
	return v, snap.Changed()
}

// rand draws the number a transaction's decision compares with.
func (t *Throttle) rand() float64 {
	if t.draw != nil {
		return t.draw()
	}
	return rand.Float64()
}

// admit lets a new write transaction of a user of priority prio start,
// delaying it while the cluster's lag holds it back, for at most
// max_delay (the cluster's throttle settings are read again as the lag
// changes: a reload that turns throttling off lets waiting statements
// go). A non-nil error is the
// client's answer instead of the statement's: 1205 after max_delay, 1317
// when ctx ends (the statement context: KILL QUERY, KILL, the session's
// end) or gone (checked every waitGoneCheck; may be nil) reports the
// client gone.
func (t *Throttle) admit(ctx context.Context, prio int, gone func() bool) *wire.SQLError {
	cfg := t.conf().Throttle
	v, changed := t.Lag()
	p := throttleProbability(v, cfg.MaxLag, prio)
	if p == 0 {
		return nil
	}
	u := t.rand()
	if u >= p {
		return nil
	}
	if cfg.DryRun {
		// Nobody waits; whether it would have been refused is told by
		// the lag once max_delay has passed.
		t.wouldDelay.Add(1)
		time.AfterFunc(cfg.MaxDelay, func() {
			v, _ := t.Lag()
			if throttleProbability(v, t.conf().Throttle.MaxLag, prio) > u {
				t.wouldRefuse.Add(1)
			}
		})
		return nil
	}
	t.delayed.Add(1)
	t.delayedTotal.Add(1)
	defer t.delayed.Add(-1)
	timeout, check, stopClocks := WaitClocks(cfg.MaxDelay, gone != nil)
	defer stopClocks()
	for {
		select {
		case <-changed:
			cur := t.conf().Throttle
			if cur.MaxLag == 0 || cur.DryRun {
				return nil // turned off meanwhile
			}
			v, changed = t.Lag()
			if throttleProbability(v, cur.MaxLag, prio) <= u {
				return nil
			}
		case <-timeout:
			t.refused.Add(1)
			return wire.NewError(1205, "HY000",
				"Lock wait timeout exceeded; try restarting transaction: write transaction throttled at the gateway for %s (throttle.max_delay) because %s (throttle.max_lag %s): retry later",
				cfg.MaxDelay, v.cause(), cfg.MaxLag)
		case <-ctx.Done():
			return t.interruptedError()
		case <-check:
			if gone() {
				return t.interruptedError()
			}
		}
	}
}

// interruptedError counts a wait ended by KILL or the client leaving and
// returns MariaDB's error for an interrupted statement.
func (t *Throttle) interruptedError() *wire.SQLError {
	t.interrupted.Add(1)
	return wire.NewError(1317, "70100", "Query execution was interrupted while throttled at the gateway for replica lag")
}

// cause says why v throttles: "replica A lags 7s", "replica A's SQL
// thread is stopped".
func (v *Lag) cause() string {
	if v == nil {
		return "the replicas lag"
	}
	if v.stopped != "" {
		return "replica " + v.stopped + "'s SQL thread is stopped"
	}
	return "replica " + v.replica + " lags " + v.lag.String()
}

// Admit implements Policy: a statement that would start a write
// transaction (querypath.StartsWrite) is delayed while the lag holds it
// back. It costs an atomic load when throttling is off.
func (t *Throttle) Admit(g *Guard, st *Statement) *wire.SQLError {
	if st.Conf.Throttle.MaxLag == 0 || g.throttled {
		return nil
	}
	writes := false
	if pr := st.Prepared; pr != nil {
		if !pr.writesChecked {
			pr.writesChecked = true
			pr.writes = querypath.StartsWrite(st.Route, st.SQL)
		}
		writes = pr.writes
	} else {
		writes = querypath.StartsWrite(st.Route, st.SQL)
	}
	if !writes {
		return nil
	}
	s := g.s
	if s.Status()&wire.StatusInTrans != 0 && txnWrote(s.TxnState()) {
		// The server says the transaction has written (before
		// throttling was on, or in a way the classifier missed).
		g.throttled = true
		return nil
	}
	// Priority 0 is the most throttled: below its threshold nobody is.
	if v, _ := t.Lag(); throttleProbability(v, st.Conf.Throttle.MaxLag, 0) > 0 {
		var e *wire.SQLError
		s.Block(WaitThrottle, func() { e = t.admit(s.StatementContext(), s.Priority(), s.Gone) })
		if e != nil {
			return e
		}
	}
	// Its transaction (if one is open, or opens) goes on unthrottled,
	// until TxnEnded.
	g.throttled = true
	return nil
}

// TxnEnded implements Policy: the next transaction is throttled anew.
func (t *Throttle) TxnEnded(g *Guard) {
	if g.s.Status()&wire.StatusInTrans == 0 {
		g.throttled = false
	}
}

// txnWrote reports whether the server's transaction state (session
// tracker, eight characters) says the open transaction has written:
// 'w' (non-transactional write) or 'W' (transactional write).
func txnWrote(state string) bool {
	return len(state) >= 5 && (state[3] == 'w' || state[4] == 'W')
}

// Rows implements Policy: one row for the cluster.
func (t *Throttle) Rows(conf *config.Cluster) []Row {
	cfg := conf.Throttle
	mode := throttleMode(cfg)
	r := Row{Scope: "*", Mode: mode,
		Active: t.delayed.Load(), Total: t.delayedTotal.Load(), Refused: t.refused.Load(), RefusedWait: t.refused.Load(),
		DryRun: t.wouldDelay.Load(), DryRunRefused: t.wouldRefuse.Load()}
	if mode != "off" {
		v, _ := t.Lag()
		r.Detail = throttleDetail(v, cfg.MaxLag)
	}
	return []Row{r}
}

// throttleMode is the mode of throttle settings cfg: off, on or dry_run.
func throttleMode(cfg config.Throttle) string {
	switch {
	case cfg.MaxLag == 0:
		return "off"
	case bool(cfg.DryRun):
		return "dry_run"
	}
	return "on"
}

// throttleDetail says in a few words what the lag does at the default
// priority: "lag 7s > 5s on A, throttling 40% at priority 50".
func throttleDetail(v *Lag, maxLag time.Duration) string {
	switch {
	case v == nil || v.replica == "" && v.stopped == "":
		return "no replica lag known"
	case v.stopped == "" && v.lag <= maxLag:
		return fmt.Sprintf("lag %s <= %s", v.lag, maxLag)
	}
	p := throttleProbability(v, maxLag, 50)
	what := fmt.Sprintf("lag %s > %s on %s", v.lag, maxLag, v.replica)
	if v.stopped != "" {
		what = "SQL thread stopped on " + v.stopped
	}
	return what + ", throttling " + strconv.Itoa(int(p*100+0.5)) + "% at priority 50"
}

// SetDraw replaces the uniform draws of a transaction's decision
// (tests and simulations).
func (t *Throttle) SetDraw(draw func() float64) { t.draw = draw }

// SetLagSource replaces discovery as the source of the lag (tests and
// simulations): watch returns the lag now and a channel closed when it
// may change.
func (t *Throttle) SetLagSource(watch func() (*Lag, <-chan struct{})) { t.watch = watch }

// NewLag is a lag of d on replica, or, when stopped is not "", a
// replica whose SQL thread is stopped (tests and simulations).
func NewLag(d time.Duration, replica, stopped string) *Lag {
	return &Lag{lag: d, replica: replica, stopped: stopped}
}
