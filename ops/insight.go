package ops

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/queryrules"
	"github.com/directgate/directgate/querystats"
)

// The operator's views of query insight: SHOW GATEWAY QUERIES and RULES
// and /debug/queries. They read copies (querystats.Store.Top) and the
// rules' counters, never a session.

// QueriesTable is SHOW GATEWAY QUERIES' result for digests.
func QueriesTable(digests []querystats.Digest) Table { return queriesTable(digests) }

// RulesTable is SHOW GATEWAY RULES' result for rules.
func RulesTable(rules []*queryrules.Rule) Table { return rulesTable(rules) }

// seconds renders a duration as seconds with microseconds.
func seconds(d time.Duration) []byte { return strconv.AppendFloat(nil, d.Seconds(), 'f', 6, 64) }

// errorCodes renders errors by number as "1146:3,1062:1", largest count
// first.
func errorCodes(m map[uint16]uint64) string {
	codes := make([]uint16, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	slices.SortFunc(codes, func(a, b uint16) int {
		if m[a] != m[b] {
			return int(m[b]) - int(m[a])
		}
		return int(a) - int(b)
	})
	var b strings.Builder
	for i, c := range codes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(c)) + ":" + strconv.FormatUint(m[c], 10))
	}
	return b.String()
}

// queriesTable is SHOW GATEWAY QUERIES' result.
func queriesTable(digests []querystats.Digest) Table {
	cols := []Column{text("fingerprint"), text("digest_text"), text("user"), text("database"),
		text("cluster"), number("count"), number("errors"), text("error_codes"), number("warnings"),
		text("total_time"), text("max_time"), text("p50"), text("p99"), text("pool_wait"),
		number("rows_sent"), number("rows_affected"), number("bytes"), text("first_seen"),
		text("last_seen"), text("role"), text("example")}
	unum := func(n uint64) []byte { return strconv.AppendUint(nil, n, 10) }
	stamp := func(t time.Time) []byte { return []byte(t.UTC().Format("2006-01-02 15:04:05.000")) }
	rows := make([][][]byte, 0, len(digests))
	for i := range digests {
		d := &digests[i]
		rows = append(rows, [][]byte{[]byte(d.Fingerprint.String()), []byte(d.Text), []byte(d.User), []byte(d.Database),
			[]byte(d.Cluster), unum(d.Count), unum(d.Errors), []byte(errorCodes(d.ErrorCodes)), unum(d.Warnings),
			seconds(d.TotalTime), seconds(d.MaxTime), seconds(d.P50()), seconds(d.P99()), seconds(d.PoolWait),
			unum(d.RowsSent), unum(d.RowsAffected), unum(d.Bytes), stamp(d.FirstSeen), stamp(d.LastSeen), []byte(d.Role), []byte(d.Example)})
	}
	return Table{Columns: cols, Rows: rows}
}

// rulesTable is SHOW GATEWAY RULES' result.
func rulesTable(rules []*queryrules.Rule) Table {
	cols := []Column{number("position"), text("name"), text("match"), text("action"),
		text("dry_run"), number("hits"), number("dry_run_hits")}
	rows := make([][][]byte, 0, len(rules))
	for _, r := range rules {
		m, _ := json.Marshal(r.Match)
		dry := "no"
		if r.DryRun {
			dry = "yes"
		}
		rows = append(rows, [][]byte{strconv.AppendInt(nil, int64(r.Position), 10), []byte(r.Name), m, []byte(r.Action()),
			[]byte(dry), strconv.AppendUint(nil, r.Hits(), 10), strconv.AppendUint(nil, r.DryRunHits(), 10)})
	}
	return Table{Columns: cols, Rows: rows}
}

// queryView is one digest in /debug/queries.
type queryView struct {
	Fingerprint  string            `json:"fingerprint"`
	DigestText   string            `json:"digest_text"`
	User         string            `json:"user"`
	Database     string            `json:"database"`
	Cluster      string            `json:"cluster"`
	Count        uint64            `json:"count"`
	Errors       uint64            `json:"errors"`
	ErrorCodes   map[uint16]uint64 `json:"error_codes,omitempty"`
	Warnings     uint64            `json:"warnings"`
	TotalTime    float64           `json:"total_time"`
	MaxTime      float64           `json:"max_time"`
	P50          float64           `json:"p50"`
	P99          float64           `json:"p99"`
	PoolWait     float64           `json:"pool_wait"`
	RowsSent     uint64            `json:"rows_sent"`
	RowsAffected uint64            `json:"rows_affected"`
	Bytes        uint64            `json:"bytes"`
	FirstSeen    time.Time         `json:"first_seen"`
	LastSeen     time.Time         `json:"last_seen"`
	Role         string            `json:"role"`
	Example      string            `json:"example,omitempty"`
}

func viewOf(d *querystats.Digest, example bool) queryView {
	v := queryView{Fingerprint: d.Fingerprint.String(), DigestText: d.Text, User: d.User, Database: d.Database, Cluster: d.Cluster,
		Count: d.Count, Errors: d.Errors, ErrorCodes: d.ErrorCodes, Warnings: d.Warnings, TotalTime: d.TotalTime.Seconds(),
		MaxTime: d.MaxTime.Seconds(), P50: d.P50().Seconds(), P99: d.P99().Seconds(), PoolWait: d.PoolWait.Seconds(),
		RowsSent: d.RowsSent, RowsAffected: d.RowsAffected, Bytes: d.Bytes, FirstSeen: d.FirstSeen, LastSeen: d.LastSeen, Role: d.Role}
	if example {
		v.Example = d.Example
	}
	return v
}

// serveQueries is /debug/queries: the digests as JSON, ?order=
// total_time|count|errors|p99 and ?limit=n (default 100). The examples
// (statements with their literals) are in it: the endpoint is behind
// http.token like every /debug page.
func serveQueries(g Gateway, w http.ResponseWriter, r *http.Request) {
	o, ok := querystats.ParseOrder(r.URL.Query().Get("order"))
	if !ok && r.URL.Query().Get("order") != "" {
		http.Error(w, "order is total_time, count, errors or p99", http.StatusBadRequest)
		return
	}
	limit := 100
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			http.Error(w, "limit is a number of digests (0: all)", http.StatusBadRequest)
			return
		}
		limit = n
	}
	digests, evicted := g.QueryDigests(o, limit)
	out := struct {
		Enabled bool        `json:"enabled"`
		Evicted uint64      `json:"evicted"`
		Queries []queryView `json:"queries"`
	}{Enabled: g.QueryStatsOn(), Evicted: evicted, Queries: []queryView{}}
	for i := range digests {
		out.Queries = append(out.Queries, viewOf(&digests[i], true))
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}
