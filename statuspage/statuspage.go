// Package statuspage renders the gateway's status page (/debug/status):
// the HTML page and its JSON, from a View the gateway fills in (a
// read-only snapshot: the page never reaches into the gateway).
package statuspage

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/fleet"
	"github.com/directgate/directgate/protect"
	"github.com/hashicorp/go-hclog"
)

const (
	// sampleEvery is the sparkline sampling period the gateway's
	// sampler keeps.
	sampleEvery = 5 * time.Second
	// SparkSamples is the length of a sparkline: six minutes.
	SparkSamples = 72
)

// Transaction is a transaction over clusters under way in a session.
type Transaction struct {
	State, Mode, Gtrid, Clusters string
	Session                      uint32
	Age                          time.Duration
}

// Sample is one sparkline value in milliseconds; NaN (no value) encodes
// as JSON null.
type Sample float32

// MarshalJSON implements json.Marshaler.
func (v Sample) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(v)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(v), 'f', 3, 32), nil
}

// View is the data of /debug/status, and its JSON shape: a snapshot
// of the gateway, read once per request.
type View struct {
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

	Clusters   []Cluster `json:"clusters"`
	Clients    Clients   `json:"clients"`
	Sessions   Sessions  `json:"sessions"`
	Statements []Route   `json:"statements"`
	// Statements refused in split brain, and failed for want of a primary.
	SplitBrainRefusals uint64 `json:"split_brain_refusals"`
	NoPrimaryFailures  uint64 `json:"no_primary_failures"`
	// Protections are the protections' counters (SHOW GATEWAY
	// PROTECTIONS).
	Protections []protect.Row `json:"protections"`
	// Transactions are the transactions over clusters under way in the
	// gateway's sessions (SHOW GATEWAY TRANSACTIONS adds the branches
	// prepared on the clusters).
	Transactions []Transaction `json:"transactions"`
	// Top are the statements that cost the most by TopOrder (query
	// insight's digests; at most MaxTop), TopEnabled whether digests are
	// kept at all.
	Top        []Statement `json:"top_statements"`
	TopOrder   string      `json:"top_order"`
	TopEnabled bool        `json:"top_enabled"`
}

// MaxTop bounds the statements of the status page's top statements.
const MaxTop = 20

// TopOrders are the orders of the top statements: total_time (the
// default), count, errors and p99.
var TopOrders = []string{"total_time", "count", "errors", "p99"}

// Statement is one digest of the top statements: a normalized statement
// of one user, database and cluster, and what it cost.
type Statement struct {
	Fingerprint string  `json:"fingerprint"`
	Text        string  `json:"digest_text"`
	User        string  `json:"user"`
	Database    string  `json:"database"`
	Cluster     string  `json:"cluster"`
	Count       uint64  `json:"count"`
	Errors      uint64  `json:"errors"`
	TotalMillis float64 `json:"total_ms"`
	P99Millis   float64 `json:"p99_ms"`
	MaxMillis   float64 `json:"max_ms"`
	RowsSent    uint64  `json:"rows_sent"`
	Role        string  `json:"role"`
}

// Cluster is a cluster: its primary, backends and owner.
type Cluster struct {
	Name            string    `json:"name"`
	Primary         string    `json:"primary"`
	NoPrimaryReason string    `json:"no_primary_reason,omitempty"`
	SplitBrain      bool      `json:"split_brain"`
	Backends        []Backend `json:"backends"`
	Owner           *Owner    `json:"owner,omitempty"`
}

// Backend is a backend as discovery and the pools see it.
type Backend struct {
	Addr            string    `json:"addr"`
	Role            string    `json:"role"`
	State           string    `json:"state"`
	Reason          string    `json:"reason,omitempty"`
	Since           time.Time `json:"since"`
	LagSeconds      *float64  `json:"lag_seconds"`
	ReplicationNote string    `json:"replication_note,omitempty"`
	ProbeMillis     *float64  `json:"probe_ms"`
	ScoreMillis     float64   `json:"score_ms"`
	InFlight        int64     `json:"in_flight"`
	Pools           []Pool    `json:"pools"`
	// Sparkline samples, oldest first, one per SampleSeconds: the latency
	// score (null: no statement ended in the interval) and the probe RTT.
	ScoreSamples []Sample `json:"score_samples_ms"`
	ProbeSamples []Sample `json:"probe_samples_ms"`
}

// Pool is a pool's books.
type Pool struct {
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

// Owner is the cluster's owner and its pool.
type Owner struct {
	Addr string `json:"addr"`
	Pool Pool   `json:"pool"`
}

// Clients is the client connections' counters.
type Clients struct {
	Open     int64            `json:"open"`
	Accepted uint64           `json:"accepted"`
	Rejected map[string]int64 `json:"rejected"`
	// OwnerForwards counts requests to the owners by outcome.
	OwnerForwards map[string]int64 `json:"owner_forwards"`
}

// Sessions is the sessions: counts, pins and a list.
type Sessions struct {
	// Open is the client connections registered now; InTxn those in a
	// transaction.
	Open          int    `json:"open"`
	InTxn         int64  `json:"in_transaction"`
	LoggedIn      int64  `json:"logged_in_total"`
	PinnedByState int64  `json:"pinned_by_state_total"`
	Pins          []Pins `json:"pins"`
	// List shows at most MaxSessions sessions, those in a
	// transaction, pinned or busy first; Hidden counts the rest.
	List   []SessionRow `json:"list"`
	Hidden int          `json:"hidden"`
}

// Pins is the sessions pinned for one reason.
type Pins struct {
	Reason string `json:"reason"`
	// Now is the sessions pinned for this reason now (not counted for the
	// one-statement holds last_result and warnings: -1).
	Now   int64 `json:"now"`
	Total int64 `json:"total"`
}

// SessionRow is one session of the list.
type SessionRow struct {
	ID      uint32 `json:"id"`
	User    string `json:"user"`
	Client  string `json:"client"`
	Busy    bool   `json:"busy"`
	InTxn   bool   `json:"in_transaction"`
	Pinned  string `json:"pinned,omitempty"`
	Backend string `json:"backend,omitempty"`
	Attrs   string `json:"attrs,omitempty"`
}

// MaxSessions bounds the sessions listed on the status page.
const MaxSessions = 50

// Route is the statements served by one route.
type Route struct {
	Route      string  `json:"route"`
	OK         uint64  `json:"ok"`
	Error      uint64  `json:"error"`
	Failed     uint64  `json:"failed"`
	MeanMillis float64 `json:"mean_ms"`
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
	"orders":    func() []string { return TopOrders },
	"clock":     func(t time.Time) string { return t.Format("15:04:05") },
	"window":    func() string { return strconv.Itoa(int((SparkSamples * sampleEvery).Minutes())) + " min" },
}).Parse(statusHTML))

// Serve answers /debug/status with v: the HTML page, or JSON with
// ?format=json.
func Serve(w http.ResponseWriter, r *http.Request, v View, log hclog.Logger) {
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusTemplate.Execute(w, v); err != nil && log != nil {
		log.Warn("status page failed", "error", err)
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
func sparkline(score, probe []Sample) template.HTML {
	top := 0.0
	for _, list := range [][]Sample{score, probe} {
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
	step := float64(sparkW-44) / float64(SparkSamples-1)
	line := func(list []Sample, class string) {
		// Right-align: the newest sample is at the right edge.
		off := SparkSamples - len(list)
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
