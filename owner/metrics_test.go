package owner

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/metricstest"
	"github.com/directgate/directgate/wire"
)

// get serves one request through the owner's HTTP handler.
func get(t testing.TB, h http.Handler, url, auth string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// scrape reads /metrics and parses it as Prometheus does.
func scrape(t testing.TB, o *Owner) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, o.HTTPHandler(config.HTTP{}), "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return metricstest.Parse(t, body)
}

// value is the sample of family name with labels (name, value, ...), and
// whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	return metricstest.Value(fams, name, want)
}

// metricCheck is one expected sample.
type metricCheck struct {
	name   string
	labels []string
	want   float64
}

func checkMetrics(t *testing.T, fams map[string]*dto.MetricFamily, checks []metricCheck) {
	t.Helper()
	for _, c := range checks {
		if got, ok := value(fams, c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}

// unreachableOwner runs an owner whose only backend refuses connections:
// it never has a primary, and needs no mariadbd.
func unreachableOwner(t *testing.T, opts ...Option) *Owner {
	t.Helper()
	return startOwnerWith(t, ownerYAMLFor(backendUser, "127.0.0.1:1"), opts...)
}

// The collector reads the per-table counters and the queues' sizes at
// scrape time; the statement and login counters are resolved once.
func TestMetricsCollect(t *testing.T) {
	o := unreachableOwner(t)
	seq := &sequence{}
	seq.values.Add(15)
	seq.blocks.Add(2)
	q := newQueue("db.msgs", testOptions(), newFakeMessages(), []wire.Column{{Name: "id"}}, testLogger(), time.Now, func() float64 { return 0.5 })
	q.stats.inserted.Add(7)
	q.stats.delivered.Add(6)
	q.stats.acked.Add(5)
	q.stats.purged.Add(4)
	q.subs = []*subscription{{done: make(chan struct{})}, {done: make(chan struct{})}}
	q.inQueue = map[string]*message{"1": {id: "1"}, "2": {id: "2"}, "3": {id: "3"}}
	q.inFlight = map[string]struct{}{"4": {}}
	o.tables.Store(&tableSet{list: []*table{
		{Schema: "db", Name: "msgs", kind: kindMessage, queue: q},
		{Schema: "db", Name: "seq", kind: kindSequence, seq: seq},
	}})
	o.metrics.statement(stmtNext, false)
	o.metrics.statement(stmtNext, false)
	o.metrics.statement(stmtNext, true)
	o.metrics.statement(stmtAck, false)
	o.metrics.statement(stmtStream, true)
	o.metrics.statement(stmtShowTables, false)
	o.metrics.statement(stmtUnsupported, true)
	o.metrics.login(loginOK)
	o.metrics.login(loginDenied)

	fams := scrape(t, o)
	checkMetrics(t, fams, []metricCheck{
		{"directgate_owner_leading", nil, 1},
		{"directgate_owner_term", nil, 1},
		{"directgate_owner_primary_up", nil, 0},
		{"directgate_owner_sessions", nil, 0},
		{"directgate_owner_tables", []string{"kind", "sequence"}, 1},
		{"directgate_owner_tables", []string{"kind", "message"}, 1},
		{"directgate_owner_sequence_values_total", []string{"table", "db.seq"}, 15},
		{"directgate_owner_sequence_blocks_total", []string{"table", "db.seq"}, 2},
		{"directgate_owner_messages_inserted_total", []string{"table", "db.msgs"}, 7},
		{"directgate_owner_messages_delivered_total", []string{"table", "db.msgs"}, 6},
		{"directgate_owner_messages_acked_total", []string{"table", "db.msgs"}, 5},
		{"directgate_owner_messages_purged_total", []string{"table", "db.msgs"}, 4},
		{"directgate_owner_queue_pending", []string{"table", "db.msgs"}, 3},
		{"directgate_owner_queue_in_flight", []string{"table", "db.msgs"}, 1},
		{"directgate_owner_stream_subscribers", []string{"table", "db.msgs"}, 2},
		{"directgate_owner_queue_failing", []string{"table", "db.msgs"}, 0},
		{"directgate_owner_statements_total", []string{"kind", "sequence", "outcome", "ok"}, 2},
		{"directgate_owner_statements_total", []string{"kind", "sequence", "outcome", "error"}, 1},
		{"directgate_owner_statements_total", []string{"kind", "message", "outcome", "ok"}, 1},
		{"directgate_owner_statements_total", []string{"kind", "stream", "outcome", "error"}, 1},
		{"directgate_owner_statements_total", []string{"kind", "other", "outcome", "ok"}, 1},
		{"directgate_owner_statements_total", []string{"kind", "other", "outcome", "error"}, 1},
		{"directgate_owner_logins_total", []string{"outcome", "ok"}, 1},
		{"directgate_owner_logins_total", []string{"outcome", "denied"}, 1},
		{"directgate_owner_logins_total", []string{"outcome", "standby"}, 0},
	})
	if _, ok := value(fams, "directgate_owner_sequence_values_total", "table", "db.msgs"); ok {
		t.Error("a message table has sequence series")
	}
	problems, err := testutil.GatherAndLint(o.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "directgate_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	// A table that leaves has no series at the next scrape.
	o.tables.Store(&tableSet{list: []*table{{Schema: "db", Name: "seq", kind: kindSequence, seq: seq}}})
	if _, ok := value(scrape(t, o), "directgate_owner_stream_subscribers", "table", "db.msgs"); ok {
		t.Error("a table that left still has series")
	}
}

// Counting a statement or a login is an atomic add: no allocation on the
// statement path.
func TestMetricsDoNotAllocate(t *testing.T) {
	o := unreachableOwner(t)
	seq := &sequence{}
	if n := testing.AllocsPerRun(1000, func() {
		o.metrics.statement(stmtNext, false)
		o.metrics.statement(stmtInsert, true)
		o.metrics.login(loginOK)
		seq.values.Add(1)
	}); n != 0 {
		t.Errorf("%v allocations per statement, want 0", n)
	}
}

// /readyz names every reason not to serve, one a line: a standby names
// the leader.
func TestReadyzReasons(t *testing.T) {
	lead := newFakeLead()
	o := unreachableOwner(t, WithLeadership(lead))
	lead.set(0, "10.0.0.2:15307", nil)
	h := o.HTTPHandler(config.HTTP{})
	code, body := get(t, h, "/readyz", "")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz of a standby without a primary: %d %s", code, body)
	}
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if lines[0] != "not ready:" || !strings.Contains(body, "\nstandby: 10.0.0.2:15307 leads\n") ||
		!strings.Contains(body, "\nno primary: ") || !strings.Contains(body, "\nowner tables not read from the primary yet") {
		t.Errorf("/readyz body:\n%s", body)
	}
	lead.set(0, "", nil)
	if _, body := get(t, h, "/readyz", ""); !strings.Contains(body, "\nstandby: no leader elected yet\n") {
		t.Errorf("/readyz with no leader:\n%s", body)
	}
	lead.set(7, o.listen, nil)
	_, body = get(t, h, "/readyz", "")
	if strings.Contains(body, "standby") {
		t.Errorf("/readyz of the leader:\n%s", body)
	}
	if v, _ := value(scrape(t, o), "directgate_owner_term"); v != 7 {
		t.Errorf("term %v, want 7", v)
	}
	if code, body := get(t, h, "/healthz", ""); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
}

// With http.token, /metrics needs the token unless public_metrics;
// /healthz and /readyz never do.
func TestOwnerHTTPToken(t *testing.T) {
	o := unreachableOwner(t)
	h := o.HTTPHandler(config.HTTP{Token: "s3cret"})
	for auth, want := range map[string]int{"": 401, "Bearer wrong": 401, "Bearer s3cret": 200} {
		if code, _ := get(t, h, "/metrics", auth); code != want {
			t.Errorf("/metrics with %q: %d, want %d", auth, code, want)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(t, h, path, ""); code == http.StatusUnauthorized {
			t.Errorf("%s asks for a token", path)
		}
	}
	if code, _ := get(t, o.HTTPHandler(config.HTTP{Token: "s3cret", PublicMetrics: true}), "/metrics", ""); code != http.StatusOK {
		t.Errorf("/metrics with public_metrics: %d", code)
	}
}

// Against mariadbd: statements, sequence values and blocks, inserts,
// acks and streams move the counters by what they did; /readyz is 200
// once the owner serves.
func TestOwnerMetricsCount(t *testing.T) {
	o := startOwner(t)
	select {
	case <-o.discovered:
	case <-time.After(30 * time.Second):
		t.Fatal("no table discovery within 30 s")
	}
	h := o.HTTPHandler(config.HTTP{})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, body := get(t, h, "/readyz", "")
		if code == http.StatusOK && body == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %s", code, body)
		}
	}
	db := clientDB(t, o, testDB)
	db.SetMaxOpenConns(1)
	// small_seq's cache is 3: 4 values take 2 blocks; NEXT 5 of seq
	// (cache 1000) one.
	for range 4 {
		nextValue(t, db, "SELECT NEXT VALUE FROM small_seq")
	}
	nextValue(t, db, "SELECT NEXT 5 VALUES FROM seq")
	_, err := db.Exec("SELECT NEXT 0 VALUES FROM seq")
	wantSQLError(t, err, 1210, "HY000")
	_, err = db.Exec("SELECT 1")
	wantSQLError(t, err, 1235, "42000")
	root := rootDB(t)
	mustExecRoot(t, root, "DELETE FROM "+testDB+".msgs WHERE id BETWEEN 900001 AND 900003")
	t.Cleanup(func() { _, _ = root.Exec("DELETE FROM " + testDB + ".msgs WHERE id BETWEEN 900001 AND 900003") })
	s := subscribe(t, o)
	subscribers(t, o, 1)
	insertMessages(t, db, 900001, 900002, 900003)
	for mine := 0; mine < 3; {
		select {
		case id := <-s.ids:
			if id >= 900001 && id <= 900003 {
				mine++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of 3 messages", mine)
		}
	}
	ackMessages(t, db, 900001, 900002)
	fams := scrape(t, o)
	checkMetrics(t, fams, []metricCheck{
		{"directgate_owner_leading", nil, 1},
		{"directgate_owner_primary_up", nil, 1},
		{"directgate_owner_sequence_values_total", []string{"table", testDB + ".small_seq"}, 4},
		{"directgate_owner_sequence_blocks_total", []string{"table", testDB + ".small_seq"}, 2},
		{"directgate_owner_sequence_values_total", []string{"table", testDB + ".seq"}, 5},
		{"directgate_owner_sequence_blocks_total", []string{"table", testDB + ".seq"}, 1},
		{"directgate_owner_statements_total", []string{"kind", "sequence", "outcome", "ok"}, 5},
		{"directgate_owner_statements_total", []string{"kind", "sequence", "outcome", "error"}, 1},
		{"directgate_owner_statements_total", []string{"kind", "other", "outcome", "error"}, 1},
		{"directgate_owner_statements_total", []string{"kind", "message", "outcome", "ok"}, 2},
		{"directgate_owner_statements_total", []string{"kind", "stream", "outcome", "ok"}, 0},
		{"directgate_owner_messages_inserted_total", []string{"table", testDB + ".msgs"}, 3},
		{"directgate_owner_messages_acked_total", []string{"table", testDB + ".msgs"}, 2},
		{"directgate_owner_stream_subscribers", []string{"table", testDB + ".msgs"}, 1},
		{"directgate_owner_logins_total", []string{"outcome", "ok"}, 2},
	})
	if v, _ := value(fams, "directgate_owner_messages_delivered_total", "table", testDB+".msgs"); v < 3 {
		t.Errorf("messages delivered %v, want at least 3", v)
	}
	if v, _ := value(fams, "directgate_owner_sessions"); v != 2 {
		t.Errorf("sessions %v, want 2 (the statements' and the stream's)", v)
	}
	// The stream counts when it ends: the client leaving is ok.
	s.cancel()
	<-s.done
	subscribers(t, o, 0)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if v, _ := value(scrape(t, o), "directgate_owner_statements_total", "kind", "stream", "outcome", "ok"); v == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ended stream was not counted")
		}
	}
}

// Every metric of the owner is in the list of docs/owner.md.
func TestMetricsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../docs/owner.md")
	if err != nil {
		t.Fatal(err)
	}
	o := unreachableOwner(t)
	q := newQueue("db.msgs", testOptions(), newFakeMessages(), []wire.Column{{Name: "id"}}, testLogger(), time.Now, func() float64 { return 0.5 })
	o.tables.Store(&tableSet{list: []*table{
		{Schema: "db", Name: "msgs", kind: kindMessage, queue: q},
		{Schema: "db", Name: "seq", kind: kindSequence, seq: &sequence{}},
	}})
	fams, err := o.Registry().Gather()
	if len(fams) < len(allStateDescs) {
		t.Fatalf("%d families gathered, fewer than the %d state metrics", len(fams), len(allStateDescs))
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		name := f.GetName()
		if strings.HasPrefix(name, "directgate_owner_") && !regexp.MustCompile("`"+name+"[`{]").Match(readme) {
			t.Errorf("docs/owner.md does not document %s", name)
		}
	}
}

// BenchmarkStatementMetrics is what counting adds to a NEXT VALUE: the
// statement counter and the sequence's value count.
func BenchmarkStatementMetrics(b *testing.B) {
	m := newMetrics(&Owner{})
	seq := &sequence{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.statement(stmtNext, false)
			seq.values.Add(1)
		}
	})
}
