package gateway

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// Load shedding (config shedding): while a backend is overloaded, that
// is, this gateway has more than max_in_flight statements running on it,
// or statements wait longer than max_queue_wait for one of its pooled
// connections, a new statement is refused at once with a probability
// that is 0 at the limit, grows with the overload, falls with the user's
// priority and never passes shedMaxChance. The client gets error 1203
// saying so; the statement never reached the backend (the decision comes
// before a connection is taken), so it costs the backend nothing, the
// client may simply retry it, and the backend is not marked down.
//
// Only statements that start new work are shed: text statements and
// prepared executes (reads, writes, BEGIN, anything else but SET, USE
// and the gateway's own statements) of a session that holds nothing on a
// backend connection but the previous statement's result. So a statement
// inside a transaction (as the server reports it) or of a session pinned
// by its state is never shed, nor COMMIT, ROLLBACK, KILL, QUIT, PREPARE
// of the binary protocol, or a retry of a statement already admitted.
// A priority of 100 is never shed.

// shedMaxChance caps the probability of shedding: however overloaded a
// backend, some of every priority's statements still run, so clients
// that back off and retry make progress.
const shedMaxChance = 0.9

// shedReason is the limit a backend is past, the reason label of
// directgate_shedding_shed_total.
type shedReason uint8

const (
	// shedInFlight: statements running (shedding.max_in_flight).
	shedInFlight shedReason = iota
	// shedQueueWait: the wait for a pooled connection
	// (shedding.max_queue_wait).
	shedQueueWait
	numShedReasons
)

var shedReasonNames = [numShedReasons]string{"in_flight", "queue_wait"}

func (r shedReason) String() string { return shedReasonNames[r] }

// shedding is one cluster's load shedding: what it shed. The zero value
// is ready to use.
type shedding struct {
	// shed counts the statements shed since start, by reason.
	shed [numShedReasons]atomic.Int64
	// byBackend counts them by backend address (rows of SHOW GATEWAY
	// PROTECTIONS); guarded by mu. Bounded by the backends ever
	// configured.
	mu        sync.Mutex
	byBackend map[string]int64
	// rnd, when not nil (tests), replaces math/rand/v2's Float64 for the
	// draws.
	rnd func() float64
}

// draw returns a uniform number in [0, 1).
func (sh *shedding) draw() float64 {
	if sh.rnd != nil {
		return sh.rnd()
	}
	return rand.Float64()
}

// count records a statement shed from backend addr for reason.
func (sh *shedding) count(addr string, reason shedReason) {
	sh.shed[reason].Add(1)
	sh.mu.Lock()
	if sh.byBackend == nil {
		sh.byBackend = map[string]int64{}
	}
	sh.byBackend[addr]++
	sh.mu.Unlock()
}

// total is the statements shed since start.
func (sh *shedding) total() int64 {
	var n int64
	for i := range sh.shed {
		n += sh.shed[i].Load()
	}
	return n
}

// shedLoad is a backend's load as shedding reads it.
type shedLoad struct {
	// inFlight is the statements this gateway has running on it.
	inFlight int64
	// queueWait is how long an acquire of a pooled connection waits
	// (pools.Pool.QueueWait).
	queueWait time.Duration
}

// shedOverload tells how far l is past the limits of cfg: the excess as
// a fraction of its limit (0 within both limits; 1 is twice the limit),
// for the limit exceeded most.
func shedOverload(cfg config.Shedding, l shedLoad) (over float64, reason shedReason) {
	if limit := int64(cfg.MaxInFlight); limit > 0 && l.inFlight > limit {
		over = float64(l.inFlight-limit) / float64(limit)
	}
	if limit := cfg.MaxQueueWait; limit > 0 && l.queueWait > limit {
		if o := float64(l.queueWait-limit) / float64(limit); o > over {
			over, reason = o, shedQueueWait
		}
	}
	return over, reason
}

// shedChance is the probability of shedding a statement of the given
// priority (0 to 100) at overload over: over × (100 − priority) / 100,
// at most shedMaxChance. At twice the limit a priority-50 statement is
// shed half the time, a priority-0 one 90%, a priority-90 one 10%; a
// priority-100 one never.
func shedChance(over float64, priority int) float64 {
	if over <= 0 || priority >= 100 {
		return 0
	}
	return min(shedMaxChance, over*float64(100-max(priority, 0))/100)
}

// describe tells in a few words what makes backend addr overloaded: for
// the error a shed statement gets and the protections' detail.
func (l shedLoad) describe(addr string, cfg config.Shedding, reason shedReason) string {
	if reason == shedQueueWait {
		return fmt.Sprintf("statements wait %s for a connection to backend %s (shedding.max_queue_wait %s)",
			roundWait(l.queueWait), addr, cfg.MaxQueueWait)
	}
	return fmt.Sprintf("backend %s has %d statements running (shedding.max_in_flight %d)", addr, l.inFlight, cfg.MaxInFlight)
}

// roundWait rounds d for a message: to the millisecond, or the
// microsecond below one.
func roundWait(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// shedOff says the cluster's shedding is off: no limit set.
func shedOff(cfg config.Shedding) bool {
	return cfg.MaxInFlight <= 0 && cfg.MaxQueueWait <= 0
}

// shedStatement decides whether the statement being routed, about to
// take a connection of backend be, is shed. A non-nil error is the
// client's answer instead: the statement did not run. The caller checks
// that the statement may be shed at all (Session.mayShed).
func (ss *Session) shedStatement(be *backend) *wire.SQLError {
	cfg := ss.cluster.conf.Load().Shedding
	if shedOff(cfg) {
		return nil
	}
	l := shedLoad{inFlight: be.load.InFlight()}
	if cfg.MaxQueueWait > 0 {
		if pool, err := be.poolFor(ss.poolKey()); err == nil {
			l.queueWait = pool.QueueWait(ss.now)
		}
	}
	over, reason := shedOverload(cfg, l)
	if over == 0 {
		return nil
	}
	prio := ss.priority()
	chance := shedChance(over, prio)
	sh := &ss.cluster.shed
	if chance == 0 || sh.draw() >= chance {
		return nil
	}
	sh.count(be.addr, reason)
	ss.log.Debug("statement shed", "backend", be.addr, "reason", reason.String(), "chance", chance, "priority", prio)
	return wire.NewError(erTooManyUserConnections, "42000",
		"Gateway overloaded: %s, so %.0f%% of statements at priority %d are refused; this one was not run: retry it",
		l.describe(be.addr, cfg, reason), 100*chance, prio)
}

// mayShed says whether the statement of command cmd (the first byte of
// its packet) with route may be shed: a text statement or prepared
// execute that starts work, in a session that holds nothing on a backend
// connection but the previous statement's result (no transaction, as
// the server reports it, no state that pins the session).
func (ss *Session) mayShed(cmd byte, route querypath.Route) bool {
	if cmd != wire.ComQuery && cmd != wire.ComStmtExecute || ss.pins&^transientPins != 0 {
		return false
	}
	switch route.Kind {
	case querypath.KindRead, querypath.KindOther, querypath.KindBegin:
		return true
	}
	return false
}

// sheddingProtection is a cluster's load shedding as a protection.
type sheddingProtection struct{ c *cluster }

// protectionRows lists the shedding counters: one row for the cluster,
// then one per backend that is overloaded now or has shed statements.
// Total and Refused both count the statements shed; Active is the
// backends overloaded now; Detail tells how much, and the chance of
// shedding at the default priority.
func (p sheddingProtection) protectionRows(cluster string, conf *config.Cluster) []ProtectionRow {
	c := p.c
	cfg := conf.Shedding
	mode := "on"
	if shedOff(cfg) {
		mode = "off"
	}
	sh := &c.shed
	sh.mu.Lock()
	byBackend := make(map[string]int64, len(sh.byBackend))
	for a, n := range sh.byBackend {
		byBackend[a] = n
	}
	sh.mu.Unlock()
	n := sh.total()
	all := ProtectionRow{Protection: "shedding", Cluster: cluster, Scope: "*", Mode: mode, Total: n, Refused: n}
	var rows []ProtectionRow
	worst := 0.0
	now := time.Now()
	for addr, be := range *c.backends.Load() {
		r := ProtectionRow{Protection: "shedding", Cluster: cluster, Scope: addr, Mode: mode, Total: byBackend[addr], Refused: byBackend[addr]}
		if mode == "on" {
			l := be.shedLoad(now)
			if over, reason := shedOverload(cfg, l); over > 0 {
				r.Active = 1
				r.Detail = fmt.Sprintf("%s, shedding %.0f%% at priority %d", l.describe(addr, cfg, reason),
					100*shedChance(over, config.DefaultPriority), config.DefaultPriority)
				all.Active++
				if over > worst {
					worst, all.Detail = over, r.Detail
				}
			}
		}
		if r.Active > 0 || r.Total > 0 {
			rows = append(rows, r)
		}
	}
	sortProtectionRows(rows)
	return append([]ProtectionRow{all}, rows...)
}

// shedLoad reads the backend's load at now: statements in flight, and
// the longest queue wait of its pools.
func (be *backend) shedLoad(now time.Time) shedLoad {
	l := shedLoad{inFlight: be.load.InFlight()}
	if m := be.pools.Load(); m != nil {
		for _, p := range *m {
			l.queueWait = max(l.queueWait, p.QueueWait(now))
		}
	}
	return l
}

// Shedding metrics, per cluster (backends in the chance gauge).
var (
	descShedTotal = prometheus.NewDesc("directgate_shedding_shed_total",
		"Statements refused by load shedding with error 1203, by the limit the backend was past: in_flight (shedding.max_in_flight) or queue_wait (shedding.max_queue_wait).", []string{"cluster", "reason"}, nil)
	descShedChance = prometheus.NewDesc("directgate_shedding_chance",
		"The probability, now, that load shedding refuses a new statement of priority 50 (the default) bound for the backend: 0 when it is within its limits, at most 0.9.", backendLabels, nil)
	descShedMode = prometheus.NewDesc("directgate_shedding_mode",
		"Load shedding's mode: 1 for the current one of off and on.", []string{"cluster", "mode"}, nil)
)

// sheddingCollector reads the shedding metrics at scrape time.
type sheddingCollector struct{ s *Server }

// Describe implements prometheus.Collector.
func (sc sheddingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descShedTotal
	ch <- descShedChance
	ch <- descShedMode
}

// Collect implements prometheus.Collector.
func (sc sheddingCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, name := range sc.s.clusterNames {
		c := sc.s.clusters[name]
		cfg := c.conf.Load().Shedding
		for r := range numShedReasons {
			ch <- prometheus.MustNewConstMetric(descShedTotal, prometheus.CounterValue, float64(c.shed.shed[r].Load()), name, r.String())
		}
		off := shedOff(cfg)
		for _, m := range []string{"off", "on"} {
			v := 0.0
			if off == (m == "off") {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descShedMode, prometheus.GaugeValue, v, name, m)
		}
		for addr, be := range *c.backends.Load() {
			chance := 0.0
			if !off {
				over, _ := shedOverload(cfg, be.shedLoad(now))
				chance = shedChance(over, config.DefaultPriority)
			}
			ch <- prometheus.MustNewConstMetric(descShedChance, prometheus.GaugeValue, chance, name, addr)
		}
	}
}
