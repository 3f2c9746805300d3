package gateway

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/ops"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/querystats"
	"github.com/directgate/directgate/statuspage"
	"github.com/hashicorp/go-hclog"
)

// The status page (/debug/status) shows, per cluster, each backend's role,
// state, lag, probe time, latency score, statements in flight and pools,
// with a sparkline of its latency over the last minutes; then the owner
// pool, sessions and pins. ?format=json gives the same data.
//
// The sparklines come from a sampler goroutine that records, every
// sampleEvery, each backend's latency score and last probe time into a
// fixed ring of sparkSamples per backend.

const (
	// sampleEvery is the sparkline sampling period.
	sampleEvery = 5 * time.Second
	// sparkSamples is the length of a sparkline.
	sparkSamples = statuspage.SparkSamples
)

// backendKey names a backend across clusters.
type backendKey struct{ cluster, addr string }

// sampleRing holds a backend's last samples, in milliseconds; NaN marks
// an interval without a value (no statement ended, or no probe yet).
type sampleRing struct {
	score, probe []float32
	// next is where the next sample goes; n how many are held.
	next, n int
	// lastScore is the score at the previous sample: an unchanged score
	// means no statement ended in between.
	lastScore time.Duration
}

func (r *sampleRing) push(score, probe float32) {
	r.score[r.next], r.probe[r.next] = score, probe
	r.next = (r.next + 1) % len(r.score)
	r.n = min(r.n+1, len(r.score))
}

// series returns the held samples, oldest first, as JSON-friendly values.
func (r *sampleRing) series() (score, probe []statuspage.Sample) {
	score, probe = make([]statuspage.Sample, r.n), make([]statuspage.Sample, r.n)
	start := (r.next - r.n + len(r.score)) % len(r.score)
	for i := range r.n {
		j := (start + i) % len(r.score)
		score[i], probe[i] = statuspage.Sample(r.score[j]), statuspage.Sample(r.probe[j])
	}
	return score, probe
}

// statusSampler samples every backend's latency for the sparklines. Its
// memory is bounded: one ring of fixed size per configured backend; rings
// of backends that are gone are dropped at the next sample.
type statusSampler struct {
	every time.Duration
	size  int

	mu    sync.Mutex
	rings map[backendKey]*sampleRing

	// rates are the protections' rates, sampled with the rest.
	rates protect.Rates

	startOnce, stopOnce sync.Once
	stop                chan struct{}
	group               *safego.Group
}

func newStatusSampler(every time.Duration, size int) *statusSampler {
	return &statusSampler{every: every, size: size, rings: map[backendKey]*sampleRing{}, stop: make(chan struct{})}
}

// sample records one sample of every backend of s.
func (sp *statusSampler) sample(s *Server) {
	var snap *healthcheck.Snapshot
	if s.health != nil {
		snap = s.health.Snapshot()
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	seen := make(map[backendKey]bool, len(sp.rings))
	for _, name := range s.clusterNames {
		for addr, be := range *s.clusters[name].backends.Load() {
			k := backendKey{name, addr}
			seen[k] = true
			r := sp.rings[k]
			if r == nil {
				r = &sampleRing{score: make([]float32, sp.size), probe: make([]float32, sp.size)}
				sp.rings[k] = r
			}
			score, probe := float32(math.NaN()), float32(math.NaN())
			if sc := be.load.Score(); sc != 0 && sc != r.lastScore {
				score = float32(ms(sc))
				r.lastScore = sc
			}
			if v := snap.Backend(addr); v != nil && !v.LastProbe.IsZero() {
				probe = float32(ms(v.Last.RTT))
			}
			r.push(score, probe)
		}
	}
	for k := range sp.rings {
		if !seen[k] {
			delete(sp.rings, k)
		}
	}
	sp.rates.Record(s.protectionCounters(), time.Now())
}

// series returns the samples of one backend, oldest first.
func (sp *statusSampler) series(k backendKey) (score, probe []statuspage.Sample) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if r := sp.rings[k]; r != nil {
		return r.series()
	}
	return nil, nil
}

// run samples s every sp.every until stop is closed.
func (sp *statusSampler) run(s *Server) {
	t := time.NewTicker(sp.every)
	defer t.Stop()
	for {
		sp.sample(s)
		select {
		case <-sp.stop:
			return
		case <-t.C:
		}
	}
}

// startStatusSampler starts the goroutine that samples backend latency
// for the status page's sparklines. Call it once the clusters and
// discovery exist; stop it with stopStatusSampler. Later calls do nothing.
func (s *Server) startStatusSampler() {
	if s.metrics == nil {
		return
	}
	sp := s.metrics.sampler
	sp.startOnce.Do(func() {
		log := s.log
		if log == nil {
			log = hclog.NewNullLogger()
		}
		sp.group = safego.New(log)
		sp.group.Go("status sampler", func() { sp.run(s) })
	})
}

// stopStatusSampler stops the sampler and waits for it. It is idempotent
// and safe when the sampler never started.
func (s *Server) stopStatusSampler() {
	if s.metrics == nil {
		return
	}
	sp := s.metrics.sampler
	sp.startOnce.Do(func() {}) // a later start does nothing
	sp.stopOnce.Do(func() {
		close(sp.stop)
		if sp.group != nil {
			sp.group.Wait()
		}
	})
}

// readiness reports whether the gateway should be sent new clients: it is
// not shutting down, discovery has finished a round, and every cluster
// has a primary. reasons says what is missing.
func (s *Server) readiness() (ready bool, reasons []string) {
	if s.closing() {
		reasons = append(reasons, "shutting down")
	}
	snap := s.health.Snapshot()
	if snap.Round == 0 {
		reasons = append(reasons, "discovery has not finished its first round")
	} else {
		for _, name := range s.clusterNames {
			c := snap.Cluster(name)
			switch {
			case c == nil:
				reasons = append(reasons, "cluster "+name+": no backend known to discovery")
			case c.Primary == "":
				reasons = append(reasons, "cluster "+name+": no primary: "+c.NoPrimaryReason)
			}
		}
	}
	return len(reasons) == 0, reasons
}

func newPoolStatus(name string, st pools.Stat) statuspage.Pool {
	return statuspage.Pool{
		Name: name, Size: st.Size, Open: st.Open, InUse: st.InUse, Idle: st.Idle, Dialing: st.Dialing,
		Waits: st.Waits, WaitMillis: ms(st.WaitTime), AcquireTimeouts: st.AcquireTimeouts,
		Dials: st.Dials, DialErrors: st.DialErrors, Destroyed: st.Destroyed,
		Order: st.Order.String(), Acquires: st.Acquires,
	}
}

// statusView gathers the status page's data.
func (s *Server) statusView() statuspage.View {
	now := time.Now()
	snap := s.health.Snapshot()
	v := statuspage.View{
		Time: now, ShuttingDown: s.closing(), Round: snap.Round,
		SnapshotAgeSec:     now.Sub(snap.Time).Seconds(),
		SampleSeconds:      sampleEvery.Seconds(),
		SplitBrainRefusals: s.refusals.splitBrain.Load(), NoPrimaryFailures: s.refusals.noPrimary.Load(),
		Protections: s.Protections(),
	}
	for _, t := range s.Transactions() {
		v.Transactions = append(v.Transactions, statuspage.Transaction(t))
	}
	v.Ready, v.NotReady = s.readiness()
	if f := s.fleet.Load(); f != nil {
		st := (*f)()
		v.Fleet = &st
	}
	v.Clusters = s.statusClusters(snap)
	v.Clients, v.Statements = s.statusClients()
	v.Sessions = s.statusSessions()
	return v
}

// statusClusters gathers the clusters of the status page from discovery's
// snapshot snap: backends, their pools and samples, the owner.
func (s *Server) statusClusters(snap *healthcheck.Snapshot) []statuspage.Cluster {
	var list []statuspage.Cluster
	m := s.metrics
	poolsOf, ownerPools := map[backendKey][]ops.PoolStat{}, map[string]ops.PoolStat{}
	for _, p := range s.PoolStats() {
		if p.Owner {
			ownerPools[p.Cluster] = p
		} else {
			k := backendKey{p.Cluster, p.Backend}
			poolsOf[k] = append(poolsOf[k], p)
		}
	}
	for _, name := range s.clusterNames {
		cl := s.clusters[name]
		cs := statuspage.Cluster{Name: name, Backends: []statuspage.Backend{}}
		if c := snap.Cluster(name); c != nil {
			cs.Primary, cs.NoPrimaryReason, cs.SplitBrain = c.Primary, c.NoPrimaryReason, c.SplitBrain
		} else {
			cs.NoPrimaryReason = "discovery has not probed the cluster yet"
		}
		for addr, be := range *cl.backends.Load() {
			bs := statuspage.Backend{Addr: addr, Role: healthcheck.RoleNone.String(), State: healthcheck.StateUnknown.String(),
				Reason: "not probed yet", ScoreMillis: ms(be.load.Score()), InFlight: be.load.InFlight(), Pools: []statuspage.Pool{}}
			if b := snap.Backend(addr); b != nil {
				bs.Role, bs.State, bs.Reason, bs.Since = b.Role.String(), b.State.String(), b.Reason, b.Since
				bs.ReplicationNote = b.Last.ReplicationNote
				if b.Last.LagKnown {
					lag := b.Last.Lag.Seconds()
					bs.LagSeconds = &lag
				}
				if !b.LastProbe.IsZero() {
					p := ms(b.Last.RTT)
					bs.ProbeMillis = &p
				}
			}
			for _, p := range poolsOf[backendKey{name, addr}] {
				bs.Pools = append(bs.Pools, newPoolStatus(ops.PoolLabel(p), p.Stat))
			}
			if m != nil {
				bs.ScoreSamples, bs.ProbeSamples = m.sampler.series(backendKey{name, addr})
			}
			cs.Backends = append(cs.Backends, bs)
		}
		slices.SortFunc(cs.Backends, func(a, b statuspage.Backend) int {
			return cmp.Or(cmp.Compare(roleOrder(a.Role), roleOrder(b.Role)), strings.Compare(a.Addr, b.Addr))
		})
		if p, ok := ownerPools[name]; ok {
			cs.Owner = &statuspage.Owner{Addr: p.Backend, Pool: newPoolStatus("owner", p.Stat)}
		}
		list = append(list, cs)
	}

	return list
}

// statusClients gathers the client counters of the status page and the
// statements by route.
func (s *Server) statusClients() (c statuspage.Clients, stmts []statuspage.Route) {
	m := s.metrics
	c = statuspage.Clients{Rejected: map[string]int64{}, OwnerForwards: map[string]int64{}}
	if m == nil {
		return c, nil
	}
	c.Open = m.clientsOpen.Load()
	c.Accepted = uint64(counterValue(m.clientsAccepted))
	for r := range numRejectReasons {
		c.Rejected[r.String()] = int64(counterValue(m.clientsRejected[r]))
	}
	for o := range numOutcomeLabels {
		c.OwnerForwards[o.String()] = int64(counterValue(m.ownerForwards[o]))
	}
	for r := range numRouteLabels {
		rs := statuspage.Route{Route: r.String(),
			OK:     uint64(counterValue(m.statements[r][outcomeOK])),
			Error:  uint64(counterValue(m.statements[r][outcomeError])),
			Failed: uint64(counterValue(m.statements[r][outcomeFailed])),
		}
		if h, ok := m.latency[r].(prometheus.Metric); ok {
			var d dto.Metric
			if h.Write(&d) == nil && d.Histogram.GetSampleCount() > 0 {
				rs.MeanMillis = 1000 * d.Histogram.GetSampleSum() / float64(d.Histogram.GetSampleCount())
			}
		}
		stmts = append(stmts, rs)
	}
	return c, stmts
}

// statusSessions gathers the sessions of the status page: counts, pins
// and the list, those worth a look first.
func (s *Server) statusSessions() (ss statuspage.Sessions) {
	sessions := s.Sessions()
	sc := countSessions(sessions)
	ss.Open, ss.InTxn = len(sessions), sc.inTxn
	ss.LoggedIn, ss.PinnedByState = s.SessionStats()
	totals := s.PinStats()
	for _, b := range pinReasons {
		name := pinName(b)
		now, ok := sc.pinned[name]
		if !ok {
			now = -1
		}
		ss.Pins = append(ss.Pins, statuspage.Pins{Reason: name, Now: now, Total: totals[name]})
	}
	// The sessions worth a look first: in a transaction, pinned, busy;
	// then by id.
	weight := func(si ops.SessionInfo) int {
		w := 0
		if si.InTxn {
			w += 4
		}
		if si.Pinned != "" {
			w += 2
		}
		if si.Busy {
			w++
		}
		return -w
	}
	slices.SortStableFunc(sessions, func(a, b ops.SessionInfo) int { return cmp.Compare(weight(a), weight(b)) })
	ss.List = []statuspage.SessionRow{}
	for _, si := range sessions[:min(len(sessions), statuspage.MaxSessions)] {
		ss.List = append(ss.List, statuspage.SessionRow{ID: si.ID, User: si.User, Client: si.Client, Busy: si.Busy, InTxn: si.InTxn, Pinned: si.Pinned, Backend: si.Backend, Attrs: si.Attrs})
	}
	ss.Hidden = len(sessions) - len(ss.List)
	return ss
}

// roleOrder sorts backends primary first, then replicas, then the rest.
func roleOrder(role string) int {
	switch role {
	case "primary":
		return 0
	case "split_brain":
		return 1
	case "replica":
		return 2
	}
	return 3
}

// counterValue reads a counter's current value.
func counterValue(c prometheus.Counter) float64 {
	var d dto.Metric
	if c.Write(&d) != nil {
		return 0
	}
	return d.GetCounter().GetValue()
}

// errBadTop is the answer to an unknown order of the top statements.
var errBadTop = errors.New("top is total_time, count, errors or p99")

// topStatements are the status page's top statements by order (no
// examples: the page shows no literals), and whether digests are kept.
func (s *Server) topStatements(order querystats.Order) ([]statuspage.Statement, bool) {
	digests, _ := s.QueryDigests(order, statuspage.MaxTop)
	top := []statuspage.Statement{}
	for i := range digests {
		d := &digests[i]
		top = append(top, statuspage.Statement{Fingerprint: d.Fingerprint.String(), Text: d.Text, User: d.User, Database: d.Database,
			Cluster: d.Cluster, Count: d.Count, Errors: d.Errors, TotalMillis: ms(d.TotalTime), P99Millis: ms(d.P99()),
			MaxMillis: ms(d.MaxTime), RowsSent: d.RowsSent, Role: d.Role})
	}
	return top, s.insight.store.Load() != nil
}
