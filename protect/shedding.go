package protect

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

// Shedding is one cluster's load shedding: what it shed. Made by
// NewShedding.
type Shedding struct {
	Hooks
	// backends lists the cluster's backends now.
	backends func() []Backend

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
func (sh *Shedding) draw() float64 {
	if sh.rnd != nil {
		return sh.rnd()
	}
	return rand.Float64()
}

// count records a statement shed from backend addr for reason.
func (sh *Shedding) count(addr string, reason shedReason) {
	sh.shed[reason].Add(1)
	sh.mu.Lock()
	if sh.byBackend == nil {
		sh.byBackend = map[string]int64{}
	}
	sh.byBackend[addr]++
	sh.mu.Unlock()
}

// total is the statements shed since start.
func (sh *Shedding) total() int64 {
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

// NewShedding returns a cluster's load shedding; backends lists the
// cluster's backends now.
func NewShedding(backends func() []Backend) *Shedding {
	return &Shedding{backends: backends}
}

// Name implements Policy.
func (sh *Shedding) Name() string { return "shedding" }

// Chosen implements Policy: it decides whether the statement c, about
// to take a connection of backend b, is shed. A non-nil error is the
// client's answer instead: the statement did not run.
func (sh *Shedding) Chosen(g *Guard, c Choice, conf *config.Cluster, b Backend) *wire.SQLError {
	cfg := conf.Shedding
	if shedOff(cfg) || !mayShed(c) {
		return nil
	}
	s := g.s
	l := shedLoad{inFlight: b.InFlight()}
	if cfg.MaxQueueWait > 0 {
		l.queueWait = b.QueueWait(s.Now(), s)
	}
	over, reason := shedOverload(cfg, l)
	if over == 0 {
		return nil
	}
	prio := s.Priority()
	chance := shedChance(over, prio)
	if chance == 0 || sh.draw() >= chance {
		return nil
	}
	sh.count(b.Addr(), reason)
	s.Logger().Debug("statement shed", "backend", b.Addr(), "reason", reason.String(), "chance", chance, "priority", prio)
	return wire.NewError(erTooManyUserConnections, "42000",
		"Gateway overloaded: %s, so %.0f%% of statements at priority %d are refused; this one was not run: retry it",
		l.describe(b.Addr(), cfg, reason), 100*chance, prio)
}

// erTooManyUserConnections is ER_TOO_MANY_USER_CONNECTIONS (42000),
// the error of a statement shed.
const erTooManyUserConnections = 1203

// mayShed says whether statement c may be shed: a text statement or
// prepared execute that starts work, in a session that holds nothing on
// a backend connection but the previous statement's result (no
// transaction, as the server reports it, no state that pins the
// session).
func mayShed(c Choice) bool {
	if c.Cmd != wire.ComQuery && c.Cmd != wire.ComStmtExecute || c.Pinned {
		return false
	}
	switch c.Kind {
	case querypath.KindRead, querypath.KindOther, querypath.KindBegin:
		return true
	}
	return false
}

// Rows implements Policy: the shedding counters: one row for the cluster,
// then one per backend that is overloaded now or has shed statements.
// Total and Refused both count the statements shed; Active is the
// backends overloaded now; Detail tells how much, and the chance of
// shedding at the default priority.
func (sh *Shedding) Rows(conf *config.Cluster) []Row {
	cfg := conf.Shedding
	mode := "on"
	if shedOff(cfg) {
		mode = "off"
	}
	sh.mu.Lock()
	byBackend := make(map[string]int64, len(sh.byBackend))
	for a, n := range sh.byBackend {
		byBackend[a] = n
	}
	sh.mu.Unlock()
	n := sh.total()
	all := Row{Scope: "*", Mode: mode, Total: n, Refused: n}
	var rows []Row
	worst := 0.0
	now := time.Now()
	for _, be := range sh.backends() {
		addr := be.Addr()
		r := Row{Scope: addr, Mode: mode, Total: byBackend[addr], Refused: byBackend[addr]}
		if mode == "on" {
			l := loadOf(be, now)
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
	SortRows(rows)
	return append([]Row{all}, rows...)
}

// loadOf reads backend b's load at now: statements in flight, and the
// longest queue wait of its pools.
func loadOf(b Backend, now time.Time) shedLoad {
	return shedLoad{inFlight: b.InFlight(), queueWait: b.QueueWait(now, nil)}
}

// Shedding metrics, per cluster (backends in the chance gauge).
var (
	descShedTotal = prometheus.NewDesc("directgate_shedding_shed_total",
		"Statements refused by load shedding with error 1203, by the limit the backend was past: in_flight (shedding.max_in_flight) or queue_wait (shedding.max_queue_wait).", []string{"cluster", "reason"}, nil)
	descShedChance = prometheus.NewDesc("directgate_shedding_chance",
		"The probability, now, that load shedding refuses a new statement of priority 50 (the default) bound for the backend: 0 when it is within its limits, at most 0.9.", []string{"cluster", "backend"}, nil)
	descShedMode = prometheus.NewDesc("directgate_shedding_mode",
		"Load shedding's mode: 1 for the current one of off and on.", []string{"cluster", "mode"}, nil)
)

// Describe implements Collector.
func (sh *Shedding) Describe(ch chan<- *prometheus.Desc) {
	ch <- descShedTotal
	ch <- descShedChance
	ch <- descShedMode
}

// Collect implements Collector.
func (sh *Shedding) Collect(ch chan<- prometheus.Metric, name string, conf *config.Cluster) {
	now := time.Now()
	cfg := conf.Shedding
	for r := range numShedReasons {
		ch <- prometheus.MustNewConstMetric(descShedTotal, prometheus.CounterValue, float64(sh.shed[r].Load()), name, r.String())
	}
	off := shedOff(cfg)
	for _, m := range []string{"off", "on"} {
		v := 0.0
		if off == (m == "off") {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descShedMode, prometheus.GaugeValue, v, name, m)
	}
	for _, be := range sh.backends() {
		chance := 0.0
		if !off {
			over, _ := shedOverload(cfg, loadOf(be, now))
			chance = shedChance(over, config.DefaultPriority)
		}
		ch <- prometheus.MustNewConstMetric(descShedChance, prometheus.GaugeValue, chance, name, be.Addr())
	}
}

// SetDraw replaces the uniform draws that decide whether a statement is
// shed (tests and simulations).
func (sh *Shedding) SetDraw(draw func() float64) { sh.rnd = draw }
