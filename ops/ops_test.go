package ops

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/queryrules"
	"github.com/directgate/directgate/querystats"
	"github.com/directgate/directgate/statuspage"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeGateway is a Gateway of fixed views.
type fakeGateway struct {
	closing bool
	reasons []string
}

func (f *fakeGateway) Closing() bool                  { return f.closing }
func (f *fakeGateway) Readiness() (bool, []string)    { return len(f.reasons) == 0, f.reasons }
func (f *fakeGateway) Registry() *prometheus.Registry { return nil }
func (f *fakeGateway) PinCounts() (int64, int64, map[string]int64) {
	return 3, 1, map[string]int64{"user_var": 1}
}
func (f *fakeGateway) QueryStatsOn() bool             { return true }
func (f *fakeGateway) QueryRules() []*queryrules.Rule { return nil }
func (f *fakeGateway) ClientsOpen() int64             { return 5 }
func (f *fakeGateway) Refusals() (uint64, uint64)     { return 1, 2 }
func (f *fakeGateway) ClusterNames() []string         { return []string{"main"} }
func (f *fakeGateway) SessionCounts() (map[string]int64, int64) {
	return map[string]int64{"user_var": 1, "temp_table": 0}, 1
}
func (f *fakeGateway) Discovery() (*healthcheck.Snapshot, healthcheck.Stats, bool) {
	return &healthcheck.Snapshot{Round: 3}, healthcheck.Stats{Probes: 5, ProbeFailures: 1}, true
}
func (f *fakeGateway) BackendLoads() []BackendLoad {
	return []BackendLoad{{Cluster: "main", Addr: "a:1", InFlight: 4, Score: time.Millisecond}}
}
func (f *fakeGateway) QueryDigests(querystats.Order, int) ([]querystats.Digest, uint64) {
	var n querystats.Normalizer
	text, fp := n.Normalize("SELECT 1")
	return []querystats.Digest{{Key: querystats.Key{Fingerprint: fp, User: "app"}, Text: string(text),
		Stats: querystats.Stats{Count: 2, ErrorCodes: map[uint16]uint64{1146: 1, 1062: 3}}}}, 4
}
func (f *fakeGateway) StatusView(top string) (statuspage.View, error) {
	if top != "" && top != "count" {
		return statuspage.View{}, errors.New("top is total_time, count, errors or p99")
	}
	return statuspage.View{TopOrder: top}, nil
}
func (f *fakeGateway) HealthView() HealthView {
	lag := 2.0
	return HealthView{Clusters: []ClusterHealth{{Name: "main", Backends: []BackendHealth{
		{Addr: "a:1", Role: "replica", State: "serving", Since: time.Unix(0, 0), LagSeconds: &lag, ProbeMillis: 1.5, ScoreMillis: 0.25, InFlight: 4, ServerID: 2, Slow: true},
	}}}}
}
func (f *fakeGateway) PoolStats() []PoolStat {
	return []PoolStat{{Cluster: "main", Backend: "a:1", BackendUser: "u", UserPool: true, Stat: pools.Stat{Size: 8, Open: 2}}}
}
func (f *fakeGateway) Sessions() []SessionInfo {
	return []SessionInfo{{ID: 7, User: "app", Client: "127.0.0.1:5", InTxn: true}}
}
func (f *fakeGateway) Protections() []protect.Row {
	return []protect.Row{{Protection: "hot_row", Cluster: "main", Scope: "*", Mode: "on", Total: 3, Rate: 1.5}}
}

// Every SHOW GATEWAY table has one value per column, in the columns'
// forms; an unknown table is refused.
func TestShowGateway(t *testing.T) {
	g := &fakeGateway{}
	want := map[string]string{
		"backends":    "main a:1 replica serving  1970-01-01T00:00:00Z 2 1.500 0.250 4 2 yes",
		"pools":       "main a:1 user 8 2 0 0 0 0 0 0 0 0 0 u round_robin 0",
		"sessions":    "7 app 127.0.0.1:5 no yes  ",
		"protections": "hot_row main * on 0 3 0 0 0 0 1.50 0.00 ",
	}
	for what, line := range want {
		tab, ok := ShowGateway(g, what)
		if !ok || len(tab.Rows) != 1 {
			t.Fatalf("%s: %v %d rows", what, ok, len(tab.Rows))
		}
		if len(tab.Rows[0]) != len(tab.Columns) {
			t.Errorf("%s: %d values for %d columns", what, len(tab.Rows[0]), len(tab.Columns))
		}
		var vals []string
		for _, v := range tab.Rows[0] {
			vals = append(vals, string(v))
		}
		if got := strings.Join(vals, " "); got != line {
			t.Errorf("%s: %q, want %q", what, got, line)
		}
	}
	if _, ok := ShowGateway(g, "nonsense"); ok {
		t.Error("an unknown table answered")
	}
}

// The endpoints answer from the views: /healthz follows Closing,
// /readyz the readiness, /debug/status refuses a bad order, /debug/pins
// the counters; a token guards all but /healthz and /readyz.
func TestHandler(t *testing.T) {
	g := &fakeGateway{reasons: []string{"no primary"}}
	h := Handler(g, &config.HTTP{Token: "tok"}, nil)
	get := func(path string, auth bool) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer tok")
		}
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/healthz", false); code != http.StatusOK {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get("/readyz", false); code != http.StatusServiceUnavailable || !strings.Contains(body, "no primary") {
		t.Errorf("/readyz %d %q", code, body)
	}
	if code, _ := get("/debug/pins", false); code != http.StatusUnauthorized {
		t.Errorf("/debug/pins without the token: %d", code)
	}
	if code, body := get("/debug/pins", true); code != http.StatusOK || !strings.Contains(body, `"user_var":1`) {
		t.Errorf("/debug/pins %d %q", code, body)
	}
	if code, _ := get("/debug/status?top=bad", true); code != http.StatusBadRequest {
		t.Errorf("/debug/status?top=bad %d", code)
	}
	if code, body := get("/debug/queries?order=count", true); code != http.StatusOK || !strings.Contains(body, `"evicted": 4`) || !strings.Contains(body, `"count": 2`) {
		t.Errorf("/debug/queries %d %q", code, body)
	}
	if code, _ := get("/debug/queries?order=bad", true); code != http.StatusBadRequest {
		t.Errorf("/debug/queries?order=bad %d", code)
	}
	if code, _ := get("/metrics", true); code != http.StatusNotFound {
		t.Errorf("/metrics without a registry %d", code)
	}
	g.closing = true
	if code, _ := get("/healthz", false); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz while closing %d", code)
	}
}

// Errors by number go largest count first.
func TestErrorCodes(t *testing.T) {
	if got := errorCodes(map[uint16]uint64{1146: 1, 1062: 3, 1054: 1}); got != "1062:3,1054:1,1146:1" {
		t.Errorf("errorCodes: %s", got)
	}
}

// The collectors read the views: a few series, with their labels.
func TestCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collectors(&fakeGateway{})...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			key := f.GetName()
			for _, l := range m.Label {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				got[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"directgate_client_connections":                                        5,
		"directgate_sessions_total":                                            3,
		"directgate_sessions_pinned,reason=user_var":                           1,
		"directgate_sessions_in_transaction":                                   1,
		"directgate_no_primary_failures_total":                                 2,
		"directgate_discovery_probes_total,result=failed":                      1,
		"directgate_backend_statements_in_flight,backend=a:1,cluster=main":     4,
		"directgate_pool_max_connections,backend=a:1,cluster=main,pool=user:u": 8,
		"directgate_query_digests_evicted_total":                               4,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", key, v, ok, want)
		}
	}
}
