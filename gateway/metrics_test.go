package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/metricstest"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// fakeProber answers probes from a table the test changes: by default
// fake:1 is a writable primary and every other backend a replica 2s
// behind.
type fakeProber struct {
	mu       sync.Mutex
	readOnly map[string]bool // overrides: true read-only, false writable
	down     map[string]bool
}

func (p *fakeProber) set(addr string, readOnly, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readOnly[addr], p.down[addr] = readOnly, down
}

func (p *fakeProber) Probe(_ context.Context, b healthcheck.Backend) healthcheck.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down[b.Addr] {
		return healthcheck.Result{Err: errors.New("connection refused")}
	}
	ro, ok := p.readOnly[b.Addr]
	if !ok {
		ro = b.Addr != "fake:1"
	}
	if !ro {
		return healthcheck.Result{Reachable: true, RTT: 700 * time.Microsecond, ServerID: 1, Version: "10.11.0-MariaDB"}
	}
	return healthcheck.Result{Reachable: true, ReadOnly: true, Replica: true, LagKnown: true, Lag: 2 * time.Second, RTT: 1200 * time.Microsecond, ServerID: 2}
}

// statusFixture is a Server with metrics, one cluster "main" whose
// backends have pools of connections that do no I/O, discovery driven by
// a fakeProber, and an owner forwarder (never reached).
type statusFixture struct {
	srv    *Server
	prober *fakeProber
}

func newStatusFixture(t testing.TB, addrs ...string) *statusFixture {
	t.Helper()
	prober := &fakeProber{readOnly: map[string]bool{}, down: map[string]bool{}}
	srv := testServer(t, addrs, true, nopDial, prober, 10*time.Millisecond)
	c := srv.clusters["main"]
	var err error
	c.fwd, err = forward.New(forward.Config{Cluster: "main", Addr: "127.0.0.1:1", PoolSize: 2, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.fwd.Close)
	return &statusFixture{srv: srv, prober: prober}
}

// addSession registers a session that other goroutines see with the
// given user, transaction and pins (as setPins publishes them).
func addSession(t testing.TB, srv *Server, id uint32, user string, inTxn bool, pins pinSet, backend string) {
	t.Helper()
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	ss := &Session{srv: srv, id: id, clientSide: clientSide{nc: c1}}
	ss.owner.Store(&user)
	ss.inTxn.Store(inTxn)
	if sticky := pins &^ transientPins; sticky != 0 {
		ss.pinView.Store(&pinView{reasons: sticky.String(), backend: backend})
	}
	t.Cleanup(srv.front.Add(id, ss))
}

// waitFor waits until discovery publishes a snapshot satisfying ok.
func (f *statusFixture) waitFor(t testing.TB, what string, ok func(*healthcheck.Snapshot) bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for snap := f.srv.health.Snapshot(); !ok(snap); snap = f.srv.health.Snapshot() {
		select {
		case <-snap.Changed():
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// get serves one request through the server's HTTP handler.
func (f *statusFixture) get(t testing.TB, url string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	f.srv.HTTPHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// scrape reads /metrics and parses it like Prometheus does.
func (f *statusFixture) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := f.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return metricstest.Parse(t, body)
}

// series returns the value of the sample of family name whose labels
// include want, and whether there is one. Histograms give their count.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	return metricstest.Value(fams, name, want)
}

// labelNames lists the label names used by the samples of a family.
func labelNames(fam *dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for _, m := range fam.Metric {
		for _, l := range m.Label {
			names[l.GetName()] = true
		}
	}
	return names
}

func TestMetricsFamilies(t *testing.T) {
	f := newStatusFixture(t, "fake:1", "fake:2")
	fams := f.scrape(t)
	want := []struct {
		name   string
		typ    dto.MetricType
		labels string // sorted, comma separated
	}{
		{"directgate_client_connections", dto.MetricType_GAUGE, ""},
		{"directgate_client_connections_accepted_total", dto.MetricType_COUNTER, ""},
		{"directgate_client_connections_rejected_total", dto.MetricType_COUNTER, "reason"},
		{"directgate_statements_total", dto.MetricType_COUNTER, "outcome,route"},
		{"directgate_statement_duration_seconds", dto.MetricType_HISTOGRAM, "route"},
		{"directgate_owner_forwards_total", dto.MetricType_COUNTER, "outcome"},
		{"directgate_sessions_total", dto.MetricType_COUNTER, ""},
		{"directgate_sessions_pinned_by_state_total", dto.MetricType_COUNTER, ""},
		{"directgate_session_pins_total", dto.MetricType_COUNTER, "reason"},
		{"directgate_sessions_pinned", dto.MetricType_GAUGE, "reason"},
		{"directgate_sessions_in_transaction", dto.MetricType_GAUGE, ""},
		{"directgate_split_brain_refusals_total", dto.MetricType_COUNTER, ""},
		{"directgate_no_primary_failures_total", dto.MetricType_COUNTER, ""},
		{"directgate_discovery_rounds_total", dto.MetricType_COUNTER, ""},
		{"directgate_discovery_snapshot_age_seconds", dto.MetricType_GAUGE, ""},
		{"directgate_cluster_has_primary", dto.MetricType_GAUGE, "cluster"},
		{"directgate_cluster_split_brain", dto.MetricType_GAUGE, "cluster"},
		{"directgate_backend_state", dto.MetricType_GAUGE, "backend,cluster,state"},
		{"directgate_backend_state_since_timestamp_seconds", dto.MetricType_GAUGE, "backend,cluster"},
		{"directgate_backend_role", dto.MetricType_GAUGE, "backend,cluster,role"},
		{"directgate_backend_replication_lag_seconds", dto.MetricType_GAUGE, "backend,cluster"},
		{"directgate_backend_probe_rtt_seconds", dto.MetricType_GAUGE, "backend,cluster"},
		{"directgate_backend_last_probe_timestamp_seconds", dto.MetricType_GAUGE, "backend,cluster"},
		{"directgate_backend_statements_in_flight", dto.MetricType_GAUGE, "backend,cluster"},
		{"directgate_backend_latency_score_seconds", dto.MetricType_GAUGE, "backend,cluster"},
		{"directgate_pool_max_connections", dto.MetricType_GAUGE, "backend,cluster,pool"},
		{"directgate_pool_connections", dto.MetricType_GAUGE, "backend,cluster,pool,state"},
		{"directgate_pool_waits_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_pool_wait_seconds_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_pool_queue_wait_seconds", dto.MetricType_GAUGE, "backend,cluster,pool"},
		{"directgate_pool_acquire_timeouts_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_pool_dials_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_pool_dial_errors_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_pool_destroyed_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_pool_acquires_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_pool_acquire_seconds_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_pool_empty_acquires_total", dto.MetricType_COUNTER, "backend,cluster,pool"},
		{"directgate_shedding_shed_total", dto.MetricType_COUNTER, "cluster,reason"},
		{"directgate_shedding_chance", dto.MetricType_GAUGE, "backend,cluster"},
		{"directgate_shedding_mode", dto.MetricType_GAUGE, "cluster,mode"},
		{"directgate_io_loop_session_offloads_total", dto.MetricType_COUNTER, "reason"},
		{"directgate_io_loop_connection_waits_total", dto.MetricType_COUNTER, "outcome"},
		{"go_goroutines", dto.MetricType_GAUGE, ""},
	}
	for _, w := range want {
		fam := fams[w.name]
		if fam == nil {
			t.Errorf("family %s missing", w.name)
			continue
		}
		if fam.GetType() != w.typ {
			t.Errorf("%s is a %v, want %v", w.name, fam.GetType(), w.typ)
		}
		var names []string
		for n := range labelNames(fam) {
			names = append(names, n)
		}
		slices.Sort(names)
		if got := strings.Join(names, ","); got != w.labels {
			t.Errorf("%s has labels %q, want %q", w.name, got, w.labels)
		}
	}
	// Every combination of the bounded labels exists from the start.
	if n := len(fams["directgate_statements_total"].Metric); n != int(numRouteLabels)*int(numOutcomeLabels) {
		t.Errorf("directgate_statements_total has %d series, want %d", n, int(numRouteLabels)*int(numOutcomeLabels))
	}
	for _, r := range []string{"too_many", "auth", "shutdown", "handshake"} {
		if _, ok := series(fams, "directgate_client_connections_rejected_total", map[string]string{"reason": r}); !ok {
			t.Errorf("no rejected series for reason %s", r)
		}
	}
	// Health as discovery sees it.
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"directgate_backend_role", map[string]string{"backend": "fake:1", "role": "primary"}, 1},
		{"directgate_backend_role", map[string]string{"backend": "fake:1", "role": "replica"}, 0},
		{"directgate_backend_role", map[string]string{"backend": "fake:2", "role": "replica"}, 1},
		{"directgate_backend_state", map[string]string{"backend": "fake:2", "state": "serving"}, 1},
		{"directgate_backend_replication_lag_seconds", map[string]string{"backend": "fake:2"}, 2},
		{"directgate_backend_probe_rtt_seconds", map[string]string{"backend": "fake:1"}, 0.0007},
		{"directgate_cluster_has_primary", map[string]string{"cluster": "main"}, 1},
		{"directgate_cluster_split_brain", map[string]string{"cluster": "main"}, 0},
		{"directgate_pool_max_connections", map[string]string{"backend": "fake:1", "pool": "default"}, 8},
		{"directgate_pool_max_connections", map[string]string{"backend": "127.0.0.1:1", "pool": "owner"}, 2},
	}
	for _, c := range checks {
		if got, ok := series(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if _, ok := series(fams, "directgate_backend_replication_lag_seconds", map[string]string{"backend": "fake:1"}); ok {
		t.Error("the primary has no replication lag to report")
	}
	problems, err := testutil.GatherAndLint(f.srv.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "directgate_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestMetricsMove(t *testing.T) {
	f := newStatusFixture(t, "fake:1", "fake:2")
	m := f.srv.metrics
	m.clientAccepted()
	m.clientAccepted()
	m.clientAccepted()
	m.clientRejected(rejectAuth)
	m.clientRejected(rejectTooMany)
	m.clientClosed()
	m.statement(routeReplica, outcomeOK, 2*time.Millisecond)
	m.statement(routeReplica, outcomeOK, 3*time.Millisecond)
	m.statement(routePrimary, outcomeError, time.Millisecond)
	m.statement(routeOwner, outcomeFailed, 5*time.Millisecond)
	m.ownerForward(nil)
	m.ownerForward(&forward.OwnerError{Cluster: "main", Addr: "127.0.0.1:1", Err: errors.New("refused")})
	m.ownerForward(wire.NewError(1146, "42S02", "no such table"))
	m.ownerForward(&wire.ClientError{Err: io.EOF})
	addSession(t, f.srv, 7, "u", true, pinTxn|pinSet(querypath.PinUserVar), "fake:1")
	addSession(t, f.srv, 8, "u", false, pinSet(querypath.PinUserVar), "fake:1")
	addSession(t, f.srv, 9, "u", false, 0, "")
	f.srv.pinStats.add(pinTxn)
	f.srv.refusals.noPrimary.Add(2)

	// A span measured the way run does it: served on a replica, then a
	// retry that failed on the primary.
	func() {
		sp := startStatement(time.Now())
		defer m.endStatement(&sp)
		sp.served(roleReplica, wire.Result{}, nil)
		sp.failed(wire.NewError(1049, "42000", "Unknown database"))
	}()

	be := f.srv.clusters["main"].backend("fake:1")
	p, _ := be.pool(false)
	lease, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	be.load.Begin()
	be.load.End(time.Now().Add(-4*time.Millisecond), time.Now())

	fams := f.scrape(t)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"directgate_client_connections", nil, 2},
		{"directgate_client_connections_accepted_total", nil, 3},
		{"directgate_client_connections_rejected_total", map[string]string{"reason": "auth"}, 1},
		{"directgate_client_connections_rejected_total", map[string]string{"reason": "too_many"}, 1},
		{"directgate_client_connections_rejected_total", map[string]string{"reason": "shutdown"}, 0},
		{"directgate_statements_total", map[string]string{"route": "replica", "outcome": "ok"}, 2},
		{"directgate_statements_total", map[string]string{"route": "replica", "outcome": "error"}, 1},
		{"directgate_statements_total", map[string]string{"route": "primary", "outcome": "error"}, 1},
		{"directgate_statements_total", map[string]string{"route": "owner", "outcome": "failed"}, 1},
		{"directgate_statements_total", map[string]string{"route": "local", "outcome": "ok"}, 0},
		{"directgate_statement_duration_seconds", map[string]string{"route": "replica"}, 3},
		{"directgate_statement_duration_seconds", map[string]string{"route": "local"}, 0},
		{"directgate_owner_forwards_total", map[string]string{"outcome": "ok"}, 2},
		{"directgate_owner_forwards_total", map[string]string{"outcome": "failed"}, 1},
		{"directgate_owner_forwards_total", map[string]string{"outcome": "error"}, 1},
		{"directgate_sessions_pinned", map[string]string{"reason": "transaction"}, 1},
		{"directgate_sessions_pinned", map[string]string{"reason": "user_var"}, 2},
		{"directgate_sessions_pinned", map[string]string{"reason": "lock"}, 0},
		{"directgate_sessions_in_transaction", nil, 1},
		{"directgate_session_pins_total", map[string]string{"reason": "transaction"}, 1},
		{"directgate_no_primary_failures_total", nil, 2},
		{"directgate_pool_connections", map[string]string{"backend": "fake:1", "pool": "default", "state": "in_use"}, 1},
		{"directgate_pool_connections", map[string]string{"backend": "fake:2", "pool": "default", "state": "in_use"}, 0},
		{"directgate_pool_dials_total", map[string]string{"backend": "fake:1", "pool": "default"}, 1},
		{"directgate_backend_latency_score_seconds", map[string]string{"backend": "fake:1"}, 0.004},
	}
	for _, c := range checks {
		got, ok := series(fams, c.name, c.labels)
		if !ok || got < c.want-1e-4 || got > c.want+1e-4 {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The histogram sorted the replica's 2ms and 3ms (and the span) into
	// its buckets.
	for _, m := range fams["directgate_statement_duration_seconds"].Metric {
		if m.Label[0].GetValue() != "replica" {
			continue
		}
		for _, b := range m.Histogram.Bucket {
			if b.GetUpperBound() == 0.0025 && b.GetCumulativeCount() < 1 {
				t.Errorf("bucket le=0.0025 holds %d samples, want the 2ms one", b.GetCumulativeCount())
			}
		}
	}
}

// A backend removed by a reload has no series at the next scrape: the
// collector reads the live backends (regression guard for label sets that
// grow forever).
func TestMetricsRemovedBackendDisappears(t *testing.T) {
	f := newStatusFixture(t, "fake:1", "fake:2", "fake:3")
	has := func(fams map[string]*dto.MetricFamily, addr string) []string {
		var found []string
		for name, fam := range fams {
			for _, m := range fam.Metric {
				for _, l := range m.Label {
					if l.GetName() == "backend" && l.GetValue() == addr {
						found = append(found, name)
					}
				}
			}
		}
		return found
	}
	if got := has(f.scrape(t), "fake:3"); len(got) == 0 {
		t.Fatal("fake:3 has no series before the reload")
	}
	removed, err := f.srv.clusters["main"].setBackends([]string{"fake:1", "fake:2"})
	if err != nil || len(removed) != 1 {
		t.Fatalf("setBackends: %v, %v", removed, err)
	}
	removed[0].close()
	if got := has(f.scrape(t), "fake:3"); len(got) != 0 {
		t.Errorf("removed backend fake:3 still has series: %v", got)
	}
}

// Two servers in one process each have their own registry.
func TestMetricsPerServer(t *testing.T) {
	a := newStatusFixture(t, "fake:1")
	b := newStatusFixture(t, "fake:1")
	a.srv.metrics.clientAccepted()
	if got, _ := series(b.scrape(t), "directgate_client_connections_accepted_total", nil); got != 0 {
		t.Errorf("server b counted server a's client: %v", got)
	}
	if a.srv.Registry() == b.srv.Registry() {
		t.Error("servers share a registry")
	}
}

// A nil *metrics (a Server built without New) records nothing and does
// not panic.
func TestMetricsNil(t *testing.T) {
	var m *metrics
	m.statement(routePrimary, outcomeOK, time.Millisecond)
	m.clientAccepted()
	m.clientRejected(rejectAuth)
	m.clientClosed()
	m.ownerForward(nil)
	sp := startStatement(time.Now())
	m.endStatement(&sp)
}

func TestOutcomes(t *testing.T) {
	if o := outcomeOf(wire.Result{}, nil); o != outcomeOK {
		t.Errorf("ok result: %v", o)
	}
	if o := outcomeOf(wire.Result{Err: wire.NewError(1064, "42000", "syntax")}, nil); o != outcomeError {
		t.Errorf("backend error: %v", o)
	}
	if o := outcomeOf(wire.Result{}, &wire.BackendError{Err: io.EOF}); o != outcomeFailed {
		t.Errorf("lost connection: %v", o)
	}
	if r := rejectReasonOf(fmt.Errorf("login: %w", errAuthFailed)); r != rejectAuth {
		t.Errorf("auth failure: %v", r)
	}
	if r := rejectReasonOf(io.EOF); r != rejectHandshake {
		t.Errorf("client hung up: %v", r)
	}
	var sp stmtSpan
	sp.failed(&mysqlserver.NoPrimaryError{Cluster: "main"})
	if sp.outcome != outcomeFailed {
		t.Errorf("no primary: %v", sp.outcome)
	}
}

// The per-statement path allocates nothing: the label children are
// resolved once, in newMetrics.
func TestStatementMetricsAllocateNothing(t *testing.T) {
	m := newMetrics(&Server{})
	if n := testing.AllocsPerRun(1000, func() { m.statement(routeReplica, outcomeOK, time.Millisecond) }); n != 0 {
		t.Errorf("statement allocates %v times per call", n)
	}
	if n := testing.AllocsPerRun(1000, func() { measuredStatement(m) }); n != 0 {
		t.Errorf("a deferred span allocates %v times per statement", n)
	}
	if n := testing.AllocsPerRun(1000, func() { m.clientAccepted(); m.clientClosed() }); n != 0 {
		t.Errorf("client counters allocate %v times per call", n)
	}
}

// measuredStatement is what run does around a statement.
//
//go:noinline
func measuredStatement(m *metrics) {
	sp := startStatement(time.Now())
	defer m.endStatement(&sp)
	sp.served(rolePrimary, wire.Result{}, nil)
}

// BenchmarkStatementMetrics is the cost of recording one statement.
func BenchmarkStatementMetrics(b *testing.B) {
	m := newMetrics(&Server{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.statement(routeReplica, outcomeOK, time.Millisecond)
		}
	})
}

// BenchmarkStatementSpan is the cost of measuring one statement the way
// run does: a deferred span.
func BenchmarkStatementSpan(b *testing.B) {
	m := newMetrics(&Server{})
	b.ReportAllocs()
	for b.Loop() {
		measuredStatement(m)
	}
}
