package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querystats"
)

// statementOn folds one statement of latency d into a backend's score.
func statementOn(f *statusFixture, addr string, d time.Duration) {
	be := f.srv.clusters["main"].backend(addr)
	be.load.Begin()
	now := time.Now()
	be.load.End(now.Add(-d), now)
}

func TestStatusPage(t *testing.T) {
	f := newStatusFixture(t, "fake:1", "fake:2")
	sp := f.srv.metrics.sampler
	statementOn(f, "fake:1", 3*time.Millisecond)
	sp.sample(f.srv)
	sp.sample(f.srv) // no statement in between: a gap in the score line
	statementOn(f, "fake:1", 5*time.Millisecond)
	sp.sample(f.srv)
	f.srv.metrics.statement(routePrimary, outcomeOK, 2*time.Millisecond)
	addSession(t, f.srv, 41, "app", false, 0, "")
	addSession(t, f.srv, 42, "app", true, pinTxn, "fake:1")

	code, page := f.get(t, "/debug/status")
	if code != http.StatusOK {
		t.Fatalf("/debug/status: %d", code)
	}
	for _, want := range []string{
		`<tr class="backend" data-addr="fake:1">`,
		`<tr class="backend" data-addr="fake:2">`,
		`<span class="pill primary">primary</span>`,
		`<span class="pill replica">replica</span>`,
		`<span class="pill serving">serving</span>`,
		`cluster main`,
		`<svg class="spark"`,
		`<polyline`,
		`owner <span class="addr">127.0.0.1:1</span>`,
		`<span class="pill ok">ready</span>`,
		`<td class="num">42</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %s", want)
		}
	}
	// The primary comes first.
	if strings.Index(page, `data-addr="fake:1"`) > strings.Index(page, `data-addr="fake:2"`) {
		t.Error("the primary is not listed first")
	}
	for _, banned := range []string{"<script", "src=\"http", "href=\"http", "@import"} {
		if strings.Contains(page, banned) {
			t.Errorf("status page uses an external asset or script: %s", banned)
		}
	}

	code, body := f.get(t, "/debug/status?format=json")
	if code != http.StatusOK {
		t.Fatalf("/debug/status?format=json: %d", code)
	}
	var v struct {
		Ready    bool `json:"ready"`
		Clusters []struct {
			Name     string `json:"name"`
			Primary  string `json:"primary"`
			Backends []struct {
				Addr         string     `json:"addr"`
				Role         string     `json:"role"`
				State        string     `json:"state"`
				LagSeconds   *float64   `json:"lag_seconds"`
				ProbeMillis  *float64   `json:"probe_ms"`
				ScoreMillis  float64    `json:"score_ms"`
				ScoreSamples []*float64 `json:"score_samples_ms"`
				ProbeSamples []*float64 `json:"probe_samples_ms"`
				Pools        []struct {
					Name string `json:"name"`
					Size int    `json:"size"`
				} `json:"pools"`
			} `json:"backends"`
			Owner *struct {
				Addr string `json:"addr"`
				Pool struct {
					Size int `json:"size"`
				} `json:"pool"`
			} `json:"owner"`
		} `json:"clusters"`
		Statements []struct {
			Route string `json:"route"`
			OK    uint64 `json:"ok"`
		} `json:"statements"`
		Sessions struct {
			Open  int   `json:"open"`
			InTxn int64 `json:"in_transaction"`
			Pins  []struct {
				Reason string `json:"reason"`
				Now    int64  `json:"now"`
			} `json:"pins"`
			List []struct {
				ID      uint32 `json:"id"`
				InTxn   bool   `json:"in_transaction"`
				Pinned  string `json:"pinned"`
				Backend string `json:"backend"`
			} `json:"list"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, body)
	}
	if !v.Ready || len(v.Clusters) != 1 || v.Clusters[0].Primary != "fake:1" || len(v.Clusters[0].Backends) != 2 {
		t.Fatalf("status JSON: %s", body)
	}
	pri, rep := v.Clusters[0].Backends[0], v.Clusters[0].Backends[1]
	if pri.Addr != "fake:1" || pri.Role != "primary" || pri.State != "serving" || pri.LagSeconds != nil {
		t.Errorf("primary: %+v", pri)
	}
	if rep.Addr != "fake:2" || rep.Role != "replica" || rep.LagSeconds == nil || *rep.LagSeconds != 2 {
		t.Errorf("replica: %+v", rep)
	}
	if pri.ProbeMillis == nil || *pri.ProbeMillis != 0.7 || len(pri.Pools) != 1 || pri.Pools[0].Size != 8 {
		t.Errorf("primary probe and pools: %+v", pri)
	}
	if len(pri.ScoreSamples) != 3 || pri.ScoreSamples[0] == nil || pri.ScoreSamples[1] != nil || pri.ScoreSamples[2] == nil {
		t.Errorf("score samples %v, want a value, a gap, a value", pri.ScoreSamples)
	}
	if len(pri.ProbeSamples) != 3 || pri.ProbeSamples[2] == nil || *pri.ProbeSamples[2] != 0.7 {
		t.Errorf("probe samples %v", pri.ProbeSamples)
	}
	if o := v.Clusters[0].Owner; o == nil || o.Addr != "127.0.0.1:1" || o.Pool.Size != 2 {
		t.Errorf("owner: %+v", o)
	}
	if len(v.Statements) != 4 || v.Statements[0].Route != "primary" || v.Statements[0].OK != 1 {
		t.Errorf("statements: %+v", v.Statements)
	}
	if len(v.Sessions.Pins) != len(pinReasons) || v.Sessions.Pins[8].Reason != "transaction" || v.Sessions.Pins[8].Now != 1 {
		t.Errorf("pins: %+v", v.Sessions.Pins)
	}
	// The session in a transaction is listed first.
	if ss := v.Sessions; ss.Open != 2 || ss.InTxn != 1 || len(ss.List) != 2 || ss.List[0].ID != 42 || ss.List[0].Pinned != "transaction" || ss.List[0].Backend != "fake:1" {
		t.Errorf("sessions: %+v", v.Sessions)
	}
}

func TestStatusPageDown(t *testing.T) {
	f := newStatusFixture(t, "fake:1", "fake:2")
	f.prober.set("fake:1", false, true)
	f.waitFor(t, "the primary down", func(s *healthcheck.Snapshot) bool {
		return s.Backend("fake:1").State == healthcheck.StateNotServing
	})
	_, page := f.get(t, "/debug/status")
	for _, want := range []string{`<span class="pill bad">no primary</span>`, `<span class="pill not_serving">not_serving</span>`, "connection refused", `<span class="pill bad">not ready</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %s", want)
		}
	}
}

func TestReadyz(t *testing.T) {
	f := newStatusFixture(t, "fake:1", "fake:2")
	if code, body := f.get(t, "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz with a primary: %d %q", code, body)
	}

	// The primary turns read-only: no primary.
	f.prober.set("fake:1", true, false)
	f.waitFor(t, "no primary", func(s *healthcheck.Snapshot) bool { return s.Cluster("main").Primary == "" })
	code, body := f.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "cluster main: no primary: no serving writable backend") {
		t.Errorf("/readyz without a primary: %d %q", code, body)
	}

	// Two writable backends: split brain.
	f.prober.set("fake:1", false, false)
	f.prober.set("fake:2", false, false)
	f.waitFor(t, "split brain", func(s *healthcheck.Snapshot) bool { return s.Cluster("main").SplitBrain })
	if code, body := f.get(t, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "split brain") {
		t.Errorf("/readyz in split brain: %d %q", code, body)
	}
	fams := f.scrape(t)
	if v, _ := series(fams, "directgate_cluster_split_brain", map[string]string{"cluster": "main"}); v != 1 {
		t.Errorf("directgate_cluster_split_brain = %v in split brain", v)
	}
	if v, _ := series(fams, "directgate_backend_role", map[string]string{"backend": "fake:2", "role": "split_brain"}); v != 1 {
		t.Errorf("fake:2 role split_brain = %v", v)
	}

	// Back to normal, then shutting down.
	f.prober.set("fake:2", true, false)
	f.waitFor(t, "a primary", func(s *healthcheck.Snapshot) bool { return s.Cluster("main").Primary == "fake:1" })
	if code, _ := f.get(t, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with a primary again: %d", code)
	}
	if _, err := f.srv.front.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := f.get(t, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz while shutting down: %d %q", code, body)
	}
	// /healthz is unchanged: it does not look at backends.
	if code, _ := f.get(t, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz while shutting down: %d", code)
	}
}

func TestReadyzBeforeDiscovery(t *testing.T) {
	srv := &Server{clusterNames: []string{"main"}}
	srv.front = mysqlserver.New(srv, nil)
	var err error
	release := make(chan struct{})
	srv.health, err = healthcheck.New(healthcheck.Config{Interval: time.Hour, Prober: &fakeProber{}, Backends: func() []healthcheck.Backend {
		<-release // the first round is still running when /readyz asks
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.health.Close()
	defer close(release)
	ready, reasons := srv.readiness()
	if ready || len(reasons) != 1 || !strings.Contains(reasons[0], "first round") {
		t.Errorf("readiness before the first round: %v %q", ready, reasons)
	}
}

// The sampler keeps at most sparkSamples per backend and forgets
// backends that are gone.
func TestStatusSamplerBounded(t *testing.T) {
	f := newStatusFixture(t, "fake:1", "fake:2")
	sp := f.srv.metrics.sampler
	for i := range sparkSamples + 10 {
		statementOn(f, "fake:2", time.Duration(i+1)*time.Millisecond)
		sp.sample(f.srv)
	}
	score, probe := sp.series(backendKey{"main", "fake:2"})
	if len(score) != sparkSamples || len(probe) != sparkSamples {
		t.Fatalf("%d score and %d probe samples, want %d", len(score), len(probe), sparkSamples)
	}
	removed, err := f.srv.clusters["main"].setBackends([]string{"fake:1"})
	if err != nil {
		t.Fatal(err)
	}
	removed[0].close()
	sp.sample(f.srv)
	if score, _ := sp.series(backendKey{"main", "fake:2"}); score != nil {
		t.Error("the removed backend's samples are kept")
	}
	sp.mu.Lock()
	n := len(sp.rings)
	sp.mu.Unlock()
	if n != 1 {
		t.Errorf("%d rings for 1 backend", n)
	}
}

func TestSampleRing(t *testing.T) {
	r := &sampleRing{score: make([]float32, 4), probe: make([]float32, 4)}
	if score, probe := r.series(); len(score) != 0 || len(probe) != 0 {
		t.Errorf("empty ring: %v %v", score, probe)
	}
	for i := range 6 {
		r.push(float32(i), float32(10*i))
	}
	score, probe := r.series()
	if len(score) != 4 || score[0] != 2 || score[3] != 5 || probe[0] != 20 || probe[3] != 50 {
		t.Errorf("ring holds %v %v, want the last four, oldest first", score, probe)
	}
}

// The sampler goroutine starts once, samples at once, and stops (also
// when stopped twice, or never started).
func TestStatusSamplerStartStop(t *testing.T) {
	f := newStatusFixture(t, "fake:1")
	f.srv.metrics.sampler.every = time.Millisecond
	f.srv.startStatusSampler()
	f.srv.startStatusSampler()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if score, _ := f.srv.metrics.sampler.series(backendKey{"main", "fake:1"}); len(score) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sampler does not sample")
		}
		time.Sleep(time.Millisecond)
	}
	f.srv.stopStatusSampler()
	f.srv.stopStatusSampler()

	g := newStatusFixture(t, "fake:1")
	g.srv.stopStatusSampler()
	g.srv.startStatusSampler() // after a stop: does nothing
	if g.srv.metrics.sampler.group != nil {
		t.Error("a stopped sampler started")
	}
	(&Server{}).startStatusSampler()
	(&Server{}).stopStatusSampler()
}

// With http.token set, only /healthz, /readyz and (when public) /metrics
// answer without the token; a wrong token is refused like none.
func TestHTTPToken(t *testing.T) {
	f := newStatusFixture(t, "fake:1")
	f.srv.cfg.HTTP.Token = "s3cret"
	get := func(path, auth string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		f.srv.HTTPHandler().ServeHTTP(rec, req)
		return rec.Code
	}
	for _, path := range []string{"/debug/status", "/debug/health", "/debug/pins", "/metrics"} {
		if code := get(path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", path, code)
		}
		if code := get(path, "Bearer wrong"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", path, code)
		}
		if code := get(path, "Bearer s3cret"); code != http.StatusOK {
			t.Errorf("%s with the token: %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code := get(path, ""); code == http.StatusUnauthorized {
			t.Errorf("%s asks for a token", path)
		}
	}
	f.srv.cfg.HTTP.PublicMetrics = true
	if code := get("/metrics", ""); code != http.StatusOK {
		t.Errorf("/metrics with public_metrics: %d, want 200", code)
	}
	if code := get("/debug/status", ""); code != http.StatusUnauthorized {
		t.Errorf("/debug/status with public_metrics: %d, want 401", code)
	}
}

// The status page's top statements are query insight's digests, the
// costliest first by the order asked (?top=), with no literals; an
// unknown order is refused.
func TestStatusTopStatements(t *testing.T) {
	f := newStatusFixture(t, "fake:1")
	_, page := f.get(t, "/debug/status")
	if !strings.Contains(page, "query_stats.enabled is off") {
		t.Fatalf("digests off: the page does not say so")
	}
	on := true
	if err := f.srv.insight.configure(&config.Config{QueryStats: config.QueryStats{Enabled: &on, MaxDigests: 10}}); err != nil {
		t.Fatal(err)
	}
	store := f.srv.insight.store.Load()
	var n querystats.Normalizer
	now := time.Now()
	for i, q := range []string{"SELECT c FROM t WHERE id = 1", "SELECT c FROM t WHERE id = 2", "UPDATE t SET c = 'secret' WHERE id = 3"} {
		text, fp := n.Normalize(q)
		store.Record(querystats.Key{Fingerprint: fp, User: "app", Database: "db", Cluster: "main"}, text, q,
			querystats.Sample{Duration: time.Duration(i+1) * time.Millisecond, Role: "primary"}, now)
	}
	_, page = f.get(t, "/debug/status?top=count")
	for _, want := range []string{"<h2>top statements", "select c from t where id = ?", "update t set c = ? where id = ?", "by count"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	if strings.Index(page, "select c from t") > strings.Index(page, "update t set") {
		t.Error("by count, the select (2) does not come before the update (1)")
	}
	if strings.Contains(page, "secret") {
		t.Error("the status page shows a statement's literals")
	}
	if code, _ := f.get(t, "/debug/status?top=nonsense"); code != http.StatusBadRequest {
		t.Errorf("unknown order: %d", code)
	}
	_, js := f.get(t, "/debug/status?format=json")
	if !strings.Contains(js, `"top_statements"`) || !strings.Contains(js, `"top_order": "total_time"`) {
		t.Errorf("status JSON lacks the top statements: %.300s", js)
	}
}
