package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	dto "github.com/prometheus/client_model/go"
)

// shedFixture is a session of a gateway over one fake primary whose
// shedding settings are cfg, with the backend's statements in flight set
// to inFlight and every draw returning draw.
type shedFixture struct {
	t       *testing.T
	ss      *Session
	nc      *bufConn
	primary *fakeServer
	c       *cluster
	be      *backend
	draw    float64
}

func newShedFixture(t *testing.T, cfg config.Shedding, inFlight int) *shedFixture {
	f := &shedFixture{t: t}
	status := uint16(wire.StatusAutocommit) // of the one connection in use: transactions begin and end on it
	f.primary = &fakeServer{addr: "fake:1", caps: wire.CapProtocol41, answer: func(_ int, cmd []byte) [][]byte {
		switch commandText(cmd) {
		case "BEGIN":
			status |= wire.StatusInTrans
		case "COMMIT":
			status &^= wire.StatusInTrans
		case "SELECT v FROM t":
			return [][]byte{wire.AppendColumnCount(nil, 1), wire.AppendColumnDef(nil, wire.Column{Name: "v", Type: 253, Charset: 33, Length: 255}),
				wire.AppendEOF(nil, 0, status), wire.AppendTextRow(nil, [][]byte{[]byte("x")}), wire.AppendEOF(nil, 0, status)}
		}
		return [][]byte{wire.AppendOK(nil, wire.OK{Status: status})}
	}}
	f.ss, f.nc = fakeSession(t, wire.CapProtocol41, f.primary)
	f.ss.user = config.User{User: "u"}
	f.c = f.ss.cluster
	f.c.guards.Policies()[3].(*protect.Shedding).SetDraw(func() float64 { return f.draw })
	f.be = (*f.c.backends.Load())["fake:1"]
	for range inFlight {
		f.be.load.Begin()
	}
	f.setUsers(50)
	f.configure(cfg)
	return f
}

// configure sets the cluster's shedding settings, as a reload does.
func (f *shedFixture) configure(cfg config.Shedding) {
	conf := *f.c.conf.Load()
	conf.Shedding = cfg
	f.c.conf.Store(&conf)
}

// setUsers configures user u with priority, as a reload does.
func (f *shedFixture) setUsers(priority int) {
	f.ss.srv.setUsers([]config.User{{User: "u", Priority: &priority}})
}

// run runs sql and reports whether it was shed (error 1203), failing the
// test on any other error.
func (f *shedFixture) run(sql string) (shed bool) {
	f.t.Helper()
	got := query(f.t, f.ss, f.nc, sql)
	if len(got) == 0 {
		f.t.Fatalf("%s: no answer", sql)
	}
	if got[0][0] != 0xff {
		return false
	}
	e := wire.ParseERR(got[0])
	if e.Code != 1203 || e.State != "42000" {
		f.t.Fatalf("%s: error %d (%s) %s, want 1203 (42000) or success", sql, e.Code, e.State, e.Message)
	}
	return true
}

// ran counts the times sql reached the primary.
func (f *shedFixture) ran(sql string) int {
	n := 0
	for _, c := range f.primary.commands() {
		if c == sql {
			n++
		}
	}
	return n
}

// Past max_in_flight a drawn statement is refused with 1203 naming the
// backend and the setting, never reaching the backend; the session goes
// on; priority 100, a transaction, SET and USE, and shedding off are
// never shed; a change of settings or priority applies at once.
func TestShedding(t *testing.T) {
	const sel = "SELECT v FROM t"
	// 3 in flight, limit 1: overload 2, chance at priority 50 is 0.9.
	f := newShedFixture(t, config.Shedding{MaxInFlight: 1}, 3)
	f.draw = 0.89
	got := query(t, f.ss, f.nc, sel)
	if len(got) != 1 || got[0][0] != 0xff {
		t.Fatalf("client got %q, want an error", got)
	}
	e := wire.ParseERR(got[0])
	if e.Code != 1203 || e.State != "42000" || !strings.Contains(e.Message, "backend fake:1 has 3 statements running (shedding.max_in_flight 1), so 90% of statements at priority 50 are refused; this one was not run: retry it") {
		t.Errorf("error %d (%s) %q", e.Code, e.State, e.Message)
	}
	if n := f.ran(sel); n != 0 {
		t.Errorf("the shed statement reached the backend %d times", n)
	}
	f.draw = 0.9 // the draw misses: it runs, on the same session
	if f.run(sel) || f.ran(sel) != 1 {
		t.Errorf("a statement past the draw was shed or did not run (ran %d)", f.ran(sel))
	}
	f.draw = 0
	for _, q := range []string{"SET @@session.sql_mode = ''", "USE db"} {
		if f.run(q) {
			t.Errorf("%s was shed", q)
		}
	}
	// A transaction is never shed once begun, COMMIT included.
	if !f.run("BEGIN") {
		t.Error("BEGIN, which starts new work, was not shed")
	}
	f.draw = 0.95
	if f.run("BEGIN") {
		t.Fatal("BEGIN shed past the draw")
	}
	f.draw = 0
	if f.run(sel) || f.run("UPDATE t SET v = 1") || f.run("COMMIT") {
		t.Error("a statement inside a transaction was shed")
	}
	if !f.run(sel) {
		t.Error("not shed after the transaction")
	}
	// Priority 100 never; priority 95 only when the draw is under 10%.
	f.setUsers(100)
	if f.run(sel) {
		t.Error("priority 100 shed")
	}
	f.setUsers(95)
	if f.draw = 0.1; f.run(sel) {
		t.Error("priority 95 shed with a draw of 0.1 (chance 0.1)")
	}
	if f.draw = 0.09; !f.run(sel) {
		t.Error("priority 95 not shed with a draw of 0.09")
	}
	// Off: never; on again by a settings change.
	f.setUsers(50)
	f.draw = 0
	f.configure(config.Shedding{})
	if f.run(sel) {
		t.Error("shed with shedding off")
	}
	f.configure(config.Shedding{MaxInFlight: 3})
	if f.run(sel) {
		t.Error("shed at the limit")
	}
	f.configure(config.Shedding{MaxInFlight: 2})
	if !f.run(sel) {
		t.Error("not shed past the limit after a settings change")
	}

	rows := f.c.guards.Policies()[3].Rows(f.c.conf.Load())
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	all, be := rows[0], rows[1]
	if all.Scope != "*" || all.Mode != "on" || all.Total != 5 || all.Refused != 5 || all.Active != 1 ||
		all.Detail != "backend fake:1 has 3 statements running (shedding.max_in_flight 2), shedding 25% at priority 50" {
		t.Errorf("cluster row %+v", all)
	}
	if be.Scope != "fake:1" || be.Total != 5 || be.Active != 1 || be.Detail != all.Detail {
		t.Errorf("backend row %+v", be)
	}
	list, err := f.ss.srv.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, fam := range list {
		fams[fam.GetName()] = fam
	}
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"directgate_shedding_shed_total", map[string]string{"cluster": "main", "reason": "in_flight"}, 5},
		{"directgate_shedding_shed_total", map[string]string{"cluster": "main", "reason": "queue_wait"}, 0},
		{"directgate_shedding_chance", map[string]string{"cluster": "main", "backend": "fake:1"}, 0.25},
		{"directgate_shedding_mode", map[string]string{"cluster": "main", "mode": "on"}, 1},
		{"directgate_shedding_mode", map[string]string{"cluster": "main", "mode": "off"}, 0},
	} {
		if v, ok := series(fams, m.name, m.labels); !ok || v != m.want {
			t.Errorf("%s%v = %v (%v), want %v", m.name, m.labels, v, ok, m.want)
		}
	}
}

// Shedding off costs no allocation, nor does a backend within its limits.
func TestSheddingAllocations(t *testing.T) {
	f := newShedFixture(t, config.Shedding{}, 0)
	f.ss.now = time.Now()
	route := querypath.Route{Kind: querypath.KindRead}
	shed := func() {
		f.ss.choosing(wire.ComQuery, route, true)
		_ = f.ss.guard.Chosen(f.c.guards, f.c.conf.Load(), f.be)
	}
	if n := testing.AllocsPerRun(100, shed); n != 0 {
		t.Errorf("off: %v allocations", n)
	}
	f.configure(config.Shedding{MaxInFlight: 10, MaxQueueWait: time.Second})
	if n := testing.AllocsPerRun(100, shed); n != 0 {
		t.Errorf("within the limits: %v allocations", n)
	}
}

// BenchmarkShedStatement is the decision's cost for a statement bound
// for a backend within its limits, with shedding off and on.
func BenchmarkShedStatement(b *testing.B) {
	for _, cfg := range []config.Shedding{{}, {MaxInFlight: 100, MaxQueueWait: time.Second}} {
		b.Run(fmt.Sprintf("on=%v", cfg.MaxInFlight > 0), func(b *testing.B) {
			ss := benchSession(b, 0)
			conf := *ss.cluster.conf.Load()
			conf.Shedding = cfg
			ss.cluster.conf.Store(&conf)
			be := (*ss.cluster.backends.Load())["fake:1"]
			ss.now = time.Now()
			b.ReportAllocs()
			route := querypath.Route{Kind: querypath.KindRead}
			for b.Loop() {
				ss.choosing(wire.ComQuery, route, true)
				if ss.guard.Chosen(ss.cluster.guards, ss.cluster.conf.Load(), be) != nil {
					b.Fatal("shed")
				}
			}
		})
	}
}
