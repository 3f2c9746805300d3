package gateway

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/directgate/directgate/fleet"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/httpserve"
	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/protect"
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
	// sparkSamples is the length of a sparkline: six minutes.
	sparkSamples = 72
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
func (r *sampleRing) series() (score, probe []sample) {
	score, probe = make([]sample, r.n), make([]sample, r.n)
	start := (r.next - r.n + len(r.score)) % len(r.score)
	for i := range r.n {
		j := (start + i) % len(r.score)
		score[i], probe[i] = sample(r.score[j]), sample(r.probe[j])
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
func (sp *statusSampler) series(k backendKey) (score, probe []sample) {
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

// serveReadyz answers /readyz: 200 "ready", else 503 with one reason a
// line.
func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	_, reasons := s.readiness()
	httpserve.WriteReadiness(w, reasons)
}

// sample is one sparkline value in milliseconds; NaN (no value) encodes
// as JSON null.
type sample float32

// MarshalJSON implements json.Marshaler.
func (v sample) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(v)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(v), 'f', 3, 32), nil
}

// statusView is the data of /debug/status, and its JSON shape.
type statusView struct {
	Time         time.Time `json:"time"`
	Ready        bool      `json:"ready"`
	NotReady     []string  `json:"not_ready,omitempty"`
	ShuttingDown bool      `json:"shutting_down"`
	// Discovery: rounds done, and the age of the last snapshot.
	Round          uint64  `json:"discovery_round"`
	SnapshotAgeSec float64 `json:"snapshot_age_seconds"`
	// SampleSeconds is the time between two sparkline samples.
	SampleSeconds float64 `json:"sample_seconds"`

	// Fleet is the gateway's place in a fleet (topology.etcd), nil
	// without one.
	Fleet *fleet.Status `json:"fleet,omitempty"`

	Clusters   []clusterStatus `json:"clusters"`
	Clients    clientStatus    `json:"clients"`
	Sessions   sessionStatus   `json:"sessions"`
	Statements []routeStatus   `json:"statements"`
	// Statements refused in split brain, and failed for want of a primary.
	SplitBrainRefusals uint64 `json:"split_brain_refusals"`
	NoPrimaryFailures  uint64 `json:"no_primary_failures"`
	// Protections are the protections' counters (SHOW GATEWAY
	// PROTECTIONS).
	Protections []protect.Row `json:"protections"`
	// Transactions are the transactions over clusters under way in the
	// gateway's sessions (SHOW GATEWAY TRANSACTIONS adds the branches
	// prepared on the clusters).
	Transactions []TransactionRow `json:"transactions"`
}

type clusterStatus struct {
	Name            string          `json:"name"`
	Primary         string          `json:"primary"`
	NoPrimaryReason string          `json:"no_primary_reason,omitempty"`
	SplitBrain      bool            `json:"split_brain"`
	Backends        []backendStatus `json:"backends"`
	Owner           *ownerStatus    `json:"owner,omitempty"`
}

type backendStatus struct {
	Addr            string       `json:"addr"`
	Role            string       `json:"role"`
	State           string       `json:"state"`
	Reason          string       `json:"reason,omitempty"`
	Since           time.Time    `json:"since"`
	LagSeconds      *float64     `json:"lag_seconds"`
	ReplicationNote string       `json:"replication_note,omitempty"`
	ProbeMillis     *float64     `json:"probe_ms"`
	ScoreMillis     float64      `json:"score_ms"`
	InFlight        int64        `json:"in_flight"`
	Pools           []poolStatus `json:"pools"`
	// Sparkline samples, oldest first, one per SampleSeconds: the latency
	// score (null: no statement ended in the interval) and the probe RTT.
	ScoreSamples []sample `json:"score_samples_ms"`
	ProbeSamples []sample `json:"probe_samples_ms"`
}

type poolStatus struct {
	Name            string  `json:"name"`
	Size            int     `json:"size"`
	Open            int     `json:"open"`
	InUse           int     `json:"in_use"`
	Idle            int     `json:"idle"`
	Dialing         int     `json:"dialing"`
	Waits           int64   `json:"waits"`
	WaitMillis      float64 `json:"wait_ms"`
	AcquireTimeouts int64   `json:"acquire_timeouts"`
	Dials           int64   `json:"dials"`
	DialErrors      int64   `json:"dial_errors"`
	Destroyed       int64   `json:"destroyed"`
	Order           string  `json:"order"`
	Acquires        int64   `json:"acquires"`
}

type ownerStatus struct {
	Addr string     `json:"addr"`
	Pool poolStatus `json:"pool"`
}

type clientStatus struct {
	Open     int64            `json:"open"`
	Accepted uint64           `json:"accepted"`
	Rejected map[string]int64 `json:"rejected"`
	// OwnerForwards counts requests to the owners by outcome.
	OwnerForwards map[string]int64 `json:"owner_forwards"`
}

type sessionStatus struct {
	// Open is the client connections registered now; InTxn those in a
	// transaction.
	Open          int          `json:"open"`
	InTxn         int64        `json:"in_transaction"`
	LoggedIn      int64        `json:"logged_in_total"`
	PinnedByState int64        `json:"pinned_by_state_total"`
	Pins          []pinsStatus `json:"pins"`
	// List shows at most maxStatusSessions sessions, those in a
	// transaction, pinned or busy first; Hidden counts the rest.
	List   []sessionRow `json:"list"`
	Hidden int          `json:"hidden"`
}

type pinsStatus struct {
	Reason string `json:"reason"`
	// Now is the sessions pinned for this reason now (not counted for the
	// one-statement holds last_result and warnings: -1).
	Now   int64 `json:"now"`
	Total int64 `json:"total"`
}

type sessionRow struct {
	ID      uint32 `json:"id"`
	User    string `json:"user"`
	Client  string `json:"client"`
	Busy    bool   `json:"busy"`
	InTxn   bool   `json:"in_transaction"`
	Pinned  string `json:"pinned,omitempty"`
	Backend string `json:"backend,omitempty"`
	Attrs   string `json:"attrs,omitempty"`
}

// maxStatusSessions bounds the sessions listed on the status page.
const maxStatusSessions = 50

type routeStatus struct {
	Route      string  `json:"route"`
	OK         uint64  `json:"ok"`
	Error      uint64  `json:"error"`
	Failed     uint64  `json:"failed"`
	MeanMillis float64 `json:"mean_ms"`
}

func newPoolStatus(name string, st pools.Stat) poolStatus {
	return poolStatus{
		Name: name, Size: st.Size, Open: st.Open, InUse: st.InUse, Idle: st.Idle, Dialing: st.Dialing,
		Waits: st.Waits, WaitMillis: ms(st.WaitTime), AcquireTimeouts: st.AcquireTimeouts,
		Dials: st.Dials, DialErrors: st.DialErrors, Destroyed: st.Destroyed,
		Order: st.Order.String(), Acquires: st.Acquires,
	}
}

// statusView gathers the status page's data.
func (s *Server) statusView() statusView {
	now := time.Now()
	snap := s.health.Snapshot()
	v := statusView{
		Time: now, ShuttingDown: s.closing(), Round: snap.Round,
		SnapshotAgeSec:     now.Sub(snap.Time).Seconds(),
		SampleSeconds:      sampleEvery.Seconds(),
		SplitBrainRefusals: s.refusals.splitBrain.Load(), NoPrimaryFailures: s.refusals.noPrimary.Load(),
		Protections: s.Protections(), Transactions: s.Transactions(),
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
func (s *Server) statusClusters(snap *healthcheck.Snapshot) []clusterStatus {
	var list []clusterStatus
	m := s.metrics
	poolsOf, ownerPools := map[backendKey][]PoolStat{}, map[string]PoolStat{}
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
		cs := clusterStatus{Name: name, Backends: []backendStatus{}}
		if c := snap.Cluster(name); c != nil {
			cs.Primary, cs.NoPrimaryReason, cs.SplitBrain = c.Primary, c.NoPrimaryReason, c.SplitBrain
		} else {
			cs.NoPrimaryReason = "discovery has not probed the cluster yet"
		}
		for addr, be := range *cl.backends.Load() {
			bs := backendStatus{Addr: addr, Role: healthcheck.RoleNone.String(), State: healthcheck.StateUnknown.String(),
				Reason: "not probed yet", ScoreMillis: ms(be.load.Score()), InFlight: be.load.InFlight(), Pools: []poolStatus{}}
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
				bs.Pools = append(bs.Pools, newPoolStatus(poolKind(p), p.Stat))
			}
			if m != nil {
				bs.ScoreSamples, bs.ProbeSamples = m.sampler.series(backendKey{name, addr})
			}
			cs.Backends = append(cs.Backends, bs)
		}
		slices.SortFunc(cs.Backends, func(a, b backendStatus) int {
			return cmp.Or(cmp.Compare(roleOrder(a.Role), roleOrder(b.Role)), strings.Compare(a.Addr, b.Addr))
		})
		if p, ok := ownerPools[name]; ok {
			cs.Owner = &ownerStatus{Addr: p.Backend, Pool: newPoolStatus("owner", p.Stat)}
		}
		list = append(list, cs)
	}

	return list
}

// statusClients gathers the client counters of the status page and the
// statements by route.
func (s *Server) statusClients() (c clientStatus, stmts []routeStatus) {
	m := s.metrics
	c = clientStatus{Rejected: map[string]int64{}, OwnerForwards: map[string]int64{}}
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
		rs := routeStatus{Route: r.String(),
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
func (s *Server) statusSessions() (ss sessionStatus) {
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
		ss.Pins = append(ss.Pins, pinsStatus{Reason: name, Now: now, Total: totals[name]})
	}
	// The sessions worth a look first: in a transaction, pinned, busy;
	// then by id.
	weight := func(si SessionInfo) int {
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
	slices.SortStableFunc(sessions, func(a, b SessionInfo) int { return cmp.Compare(weight(a), weight(b)) })
	ss.List = []sessionRow{}
	for _, si := range sessions[:min(len(sessions), maxStatusSessions)] {
		ss.List = append(ss.List, sessionRow{ID: si.ID, User: si.User, Client: si.Client, Busy: si.Busy, InTxn: si.InTxn, Pinned: si.Pinned, Backend: si.Backend, Attrs: si.Attrs})
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

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"ms":        fmtMillis,
	"msp":       fmtOptMillis,
	"lag":       fmtLag,
	"ago":       fmtAgo,
	"sparkline": sparkline,
	"pct":       pct,
	"clock":     func(t time.Time) string { return t.Format("15:04:05") },
	"window":    func() string { return strconv.Itoa(int((sparkSamples * sampleEvery).Minutes())) + " min" },
}).Parse(statusHTML))

// serveStatus answers /debug/status: the HTML page, or JSON with
// ?format=json.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	v := s.statusView()
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusTemplate.Execute(w, v); err != nil && s.log != nil {
		s.log.Warn("status page failed", "error", err)
	}
}

// fmtMillis renders a duration in milliseconds for people.
func fmtMillis(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return strconv.FormatFloat(v*1000, 'f', 0, 64) + "µs"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + "ms"
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(v/1000, 'f', 2, 64) + "s"
}

func fmtOptMillis(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmtMillis(*p)
}

func fmtLag(p *float64) string {
	if p == nil {
		return "—"
	}
	return strconv.FormatFloat(*p, 'f', 0, 64) + "s"
}

// fmtAgo renders the time since t, coarsely.
func fmtAgo(t time.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h ago"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d ago"
}

// pct is n as a percentage of total, for bar widths.
func pct(n, total int) string {
	if total <= 0 {
		return "0"
	}
	return strconv.FormatFloat(100*float64(min(n, total))/float64(total), 'f', 1, 64)
}

// Sparkline geometry, in pixels.
const (
	sparkW = 180
	sparkH = 34
)

// sparkline draws the score (solid) and probe RTT (dashed) samples as an
// inline SVG on a shared scale from 0 to the largest sample. Missing
// samples break the line. The SVG holds only numbers formatted here.
func sparkline(score, probe []sample) template.HTML {
	top := 0.0
	for _, list := range [][]sample{score, probe} {
		for _, v := range list {
			if f := float64(v); !math.IsNaN(f) && f > top {
				top = f
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, sparkW, sparkH, sparkW, sparkH)
	fmt.Fprintf(&b, `<title>latency score (solid) and probe round trip (dashed), one sample every %s, newest on the right; top of the scale %s</title>`,
		sampleEvery, template.HTMLEscapeString(fmtMillis(top)))
	fmt.Fprintf(&b, `<line x1="0" y1="%d" x2="%d" y2="%d" class="axis"/>`, sparkH-1, sparkW, sparkH-1)
	if top == 0 {
		b.WriteString(`<text x="4" y="20" class="none">no samples yet</text></svg>`)
		return template.HTML(b.String())
	}
	step := float64(sparkW-44) / float64(sparkSamples-1)
	line := func(list []sample, class string) {
		// Right-align: the newest sample is at the right edge.
		off := sparkSamples - len(list)
		var pts []string
		flush := func() {
			switch len(pts) {
			case 0:
			case 1:
				xy := strings.Split(pts[0], ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="1.5" class="%s"/>`, xy[0], xy[1], class)
			default:
				fmt.Fprintf(&b, `<polyline points="%s" class="%s"/>`, strings.Join(pts, " "), class)
			}
			pts = pts[:0]
		}
		for i, v := range list {
			f := float64(v)
			if math.IsNaN(f) {
				flush()
				continue
			}
			x := float64(off+i) * step
			y := float64(sparkH-3) - f/top*float64(sparkH-8)
			pts = append(pts, strconv.FormatFloat(x, 'f', 1, 64)+","+strconv.FormatFloat(y, 'f', 1, 64))
		}
		flush()
	}
	line(probe, "probe")
	line(score, "score")
	fmt.Fprintf(&b, `<text x="%d" y="11" class="top">%s</text>`, sparkW-40, template.HTMLEscapeString(fmtMillis(top)))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
