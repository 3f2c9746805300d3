package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/config"
)

// A floor whose gateway has no record counts as a member holding it, until
// lease TTL + hold after its refresh; a present gateway's floor and the
// reader's own are not counted twice.
func TestWithMissing(t *testing.T) {
	now := time.Now()
	ttl, hold := 2*time.Second, time.Minute
	members := []Member{{ID: "a", Budget: map[string]BackendShare{"c/b": {Held: 12}}}}
	floors := []floorRecord{
		{id: "a", Floors: map[string]int{"c/b": 5}, Refreshed: now},
		{id: "self", Floors: map[string]int{"c/b": 5}, Refreshed: now},
		{id: "cut", Floors: map[string]int{"c/b": 5}, Refreshed: now.Add(-ttl - hold + time.Second)},
		{id: "crashed", Floors: map[string]int{"c/b": 5}, Refreshed: now.Add(-ttl - hold - time.Second)},
	}
	view, stale := withMissing("self", members, floors, now, ttl, hold)
	if got := fmt.Sprint(view); got != fmt.Sprint([]Member{members[0], {ID: "cut", Kind: KindGateway, Budget: map[string]BackendShare{"c/b": {Held: 5, Target: 5}}}}) {
		t.Errorf("view: %s", got)
	}
	if len(stale) != 1 || stale[0].id != "crashed" {
		t.Errorf("stale: %v", stale)
	}
	if len(members) != 1 {
		t.Errorf("withMissing changed its argument: %v", members)
	}
	// A missing gateway's floor keeps another from growing into it.
	l := BackendLoad{Cluster: "c", Backend: "b", Max: 30, Limit: 10, InUse: 10, Waiting: 20, Used: 10, Probes: 1, ProbesHeld: true}
	limit, _, _ := budgetStep("self", l, 30, view)
	if want := 30 - 12 - 5 - 1; limit != want {
		t.Errorf("limit %d with a missing gateway's floor of 5 counted, want %d", limit, want)
	}
	if limit, _, _ := budgetStep("self", l, 30, members); limit != 30-12-1 {
		t.Errorf("limit %d without it, want %d", limit, 30-12-1)
	}
}

// floorShare is what Shares gives a gateway without demand at least, and
// g floors fit in the cap.
func TestFloorShare(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		max, g := 1+r.IntN(200), 1+r.IntN(12)
		d := map[string]float64{"idle": 0}
		for i := 1; i < g; i++ {
			d[fmt.Sprint("gw", i)] = r.Float64() * 50
		}
		f := floorShare(max, g)
		if got := Shares(max, d)["idle"]; got < f || f*g > max {
			t.Fatalf("floorShare(%d, %d) = %d; Shares gives an idle gateway %d", max, g, f, got)
		}
	}
	for _, tc := range []struct {
		l           BackendLoad
		floor, want int
	}{
		{BackendLoad{Limit: 14, Probes: 1}, 7, 6},
		{BackendLoad{Limit: 3, Probes: 1}, 7, 3}, // never raised
		{BackendLoad{Limit: -1, Probes: 1}, 7, 6},
		{BackendLoad{Limit: 14, Probes: 1}, 0, 0}, // no floor stored
	} {
		if got := cutLimit(tc.l, tc.floor); got != tc.want {
			t.Errorf("cutLimit(%+v, %d) = %d, want %d", tc.l, tc.floor, got, tc.want)
		}
	}
}

// fakePools is a gateway's pools for the budget: one capped backend whose
// clients want `want` connections.
type fakePools struct {
	mu   sync.Mutex
	load BackendLoad
	want int
}

func newFakePools(max, want int) *fakePools {
	return &fakePools{load: BackendLoad{Cluster: "main", Backend: "db:3306", Max: max, Probes: 1}, want: want}
}

func (p *fakePools) Reload(*config.Config) error { return nil }

func (p *fakePools) BackendLoads() []BackendLoad {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := &p.load
	l.Used = min(p.want, maxInt(l.Limit, 0))
	l.InUse, l.Waiting = l.Used, p.want-l.Used
	return []BackendLoad{*l}
}

func (p *fakePools) SetBackendLimit(_, _ string, limit int, probes bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.load.Limit = limit
	p.load.ProbesHeld = p.load.ProbesHeld || probes
}

// held is the connections the pools may hold, probes included.
func (p *fakePools) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := maxInt(p.load.Limit, 0)
	if p.load.ProbesHeld {
		n += p.load.Probes
	}
	return n
}

// Issue 35: a gateway cut from etcd but not from MariaDB. Two gateways
// under full load share a cap of 30 (15 each); gateway a loses etcd (its
// client is closed). With budget_hold, a shrinks to its floor (7) within
// half a lease TTL, and b, once a's lease has expired, grows only into the
// rest: the two never hold more than 30. Without it (hold 0), b grows
// into a's whole share while a keeps it: 44. A stale floor is released,
// and a clean stop deletes the gateway's own.
func TestBudgetCutFromEtcd(t *testing.T) {
	for _, tc := range []struct {
		hold time.Duration
		over bool
	}{{time.Minute, false}, {0, true}} {
		t.Run(fmt.Sprint("hold=", tc.hold), func(t *testing.T) {
			srv, _ := startEtcd(t)
			dial := func() *Client {
				c, err := Dial(&config.Etcd{Endpoints: []string{srv.Endpoint}, Prefix: "/cut", DialTimeout: 2 * time.Second, LeaseTTL: 2 * time.Second, BudgetHold: &tc.hold}, hclog.NewNullLogger())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			ca, cb := dial(), dial()
			if tc.hold > 0 {
				ghost, _ := json.Marshal(floorRecord{Floors: map[string]int{"main/db:3306": 7}, Refreshed: time.Now().Add(-time.Hour)})
				if _, err := cb.etcd.Put(context.Background(), cb.floorKey("ghost"), string(ghost)); err != nil {
					t.Fatal(err)
				}
			}
			const max = 30
			pa, pb := newFakePools(max, 40), newFakePools(max, 40)
			ctxA, stopA := context.WithCancel(context.Background())
			defer stopA()
			ctxB, stopB := context.WithCancel(context.Background())
			defer stopB()
			ca.StartAgent(ctxA, Member{ID: "a"}, baseConfig(t), []byte(topoDoc), 0, pa)
			b := cb.StartAgent(ctxB, Member{ID: "b"}, baseConfig(t), []byte(topoDoc), 0, pb)
			poll(t, "both gateways at 15", func() bool { return pa.held() == 15 && pb.held() == 15 })
			if tc.hold > 0 {
				if n := keys(t, cb, cb.floorKey("ghost")); n != 0 {
					t.Errorf("the stale floor of a gateway gone an hour is still stored")
				}
			}

			peak := 0
			_ = ca.Close() // a is cut from etcd, not from its backends
			cut := time.Now()
			deadline := cut.Add(6 * time.Second) // a's lease (2 s) expired, b's rounds since
			for time.Now().Before(deadline) {
				peak = maxInt(peak, pa.held()+pb.held())
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("after the cut: a holds %d, b %d; at most %d together (cap %d)", pa.held(), pb.held(), peak, max)
			if tc.over {
				if peak <= max {
					t.Errorf("without the protection the fleet stayed within the cap (%d): the scenario does not test it", peak)
				}
				return
			}
			if peak > max {
				t.Errorf("the gateways held %d connections together, above the cap of %d", peak, max)
			}
			if pa.held() != 7 || pb.held() != max-7 {
				t.Errorf("a holds %d (want its floor 7), b %d (want %d)", pa.held(), pb.held(), max-7)
			}
			if !b.Status().Connected || b.Status().BudgetCut {
				t.Errorf("b's status: %+v", b.Status())
			}
			if n := keys(t, cb, cb.floorKey("b")); n != 1 {
				t.Fatalf("b's floor is not stored")
			}
			stopB()
			<-b.Done()
			if n := keys(t, reader(t, srv.Endpoint), cb.floorKey("b")); n != 0 {
				t.Errorf("b's floor is still stored after a clean stop")
			}
		})
	}
}

// reader is a fresh client of the etcd at endpoint, for reads after the
// test's own are closed.
func reader(t *testing.T, endpoint string) *Client {
	c, err := Dial(&config.Etcd{Endpoints: []string{endpoint}, Prefix: "/cut", DialTimeout: 2 * time.Second, LeaseTTL: 2 * time.Second}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keys counts the keys named k.
func keys(t *testing.T, c *Client, k string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.etcd.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// poll waits for cond, 20 s at most.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("after 20 s, still waiting for %s", what)
		}
	}
}
