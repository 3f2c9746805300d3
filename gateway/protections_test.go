package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/wire"
)

// The protections' counters reach the status page, its JSON and the
// metrics (with a cluster label only).
func TestProtectionsViews(t *testing.T) {
	f := newStatusFixture(t, "fake:1")
	c := f.srv.clusters["main"]
	conf := *c.conf.Load()
	queue := 0
	conf.HotRow = config.HotRow{MaxConcurrency: 1, MaxQueue: &queue, MaxWait: time.Minute}
	c.conf.Store(&conf)
	// Two sessions update one row of db.t: the second is refused.
	c.keys = map[string]map[string]bool{"db.t": {"id": true}}
	for i, want := range []bool{true, false} {
		ss, _ := sessionOf(f.srv, wire.CapProtocol41)
		ss.db = "db"
		ss.ctx = context.Background()
		sql := "UPDATE t SET n = 1 WHERE id = 1"
		if e := ss.admit(sql, f.srv.classifier.Classify(sql), nil, nil); (e == nil) != want {
			t.Fatalf("session %d: %v", i, e)
		}
	}
	_, page := f.get(t, "/debug/status")
	for _, want := range []string{"<h2>protections</h2>", `<td class="addr">db.t</td>`, `<span class="pill ok">on</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %s", want)
		}
	}
	_, js := f.get(t, "/debug/status?format=json")
	var view struct{ Protections []protect.Row }
	if err := json.Unmarshal([]byte(js), &view); err != nil {
		t.Fatal(err)
	}
	// Every protection has its cluster row, off or not.
	var names []string
	for _, r := range view.Protections {
		if r.Scope == "*" {
			names = append(names, r.Protection+" "+r.Mode)
		}
	}
	if got := strings.Join(names, ", "); got != "throttle off, hot_row on, consolidation off, shedding off" {
		t.Errorf("cluster rows: %s", got)
	}
	var p []protect.Row // the other protections have their own tests
	for _, r := range view.Protections {
		if r.Protection == "hot_row" {
			p = append(p, r)
		}
	}
	if len(p) != 2 || p[0].Protection != "hot_row" || p[0].Scope != "*" || p[0].Refused != 1 || p[1].Scope != "db.t" {
		t.Errorf("status JSON protections: %+v", p)
	}
	fams := f.scrape(t)
	if v, ok := series(fams, "directgate_hot_row_refused_total", map[string]string{"cluster": "main", "reason": "queue_full"}); !ok || v != 1 {
		t.Errorf("refused metric %v %v", v, ok)
	}
	if v, ok := series(fams, "directgate_hot_row_mode", map[string]string{"cluster": "main", "mode": "on"}); !ok || v != 1 {
		t.Errorf("mode metric %v %v", v, ok)
	}
	for name, fam := range fams {
		if strings.HasPrefix(name, "directgate_hot_row") && labelNames(fam)["table"] {
			t.Errorf("%s has a table label", name)
		}
	}
}
