package fleet

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestShares(t *testing.T) {
	for _, tc := range []struct {
		max    int
		demand map[string]float64
		want   map[string]int
	}{
		{30, map[string]float64{"a": 0, "b": 0, "c": 0}, map[string]int{"a": 10, "b": 10, "c": 10}},
		// One gateway with 80 % of the demand: floors of 5, the other 15
		// by demand.
		{30, map[string]float64{"a": 8, "b": 1, "c": 1}, map[string]int{"a": 17, "b": 7, "c": 6}},
		{30, map[string]float64{"a": 5}, map[string]int{"a": 30}},
		// A cap too small for the floor of 2 each: even split.
		{5, map[string]float64{"a": 9, "b": 0, "c": 0}, map[string]int{"a": 3, "b": 1, "c": 1}},
		{0, map[string]float64{"a": 1}, map[string]int{}},
	} {
		got := Shares(tc.max, tc.demand)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Shares(%d, %v) = %v, want %v", tc.max, tc.demand, got, tc.want)
		}
	}
}

// Whatever the demands, shares add up to the cap (never more), and each
// gateway keeps at least the floor the cap allows.
func TestSharesNeverExceedTheCap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		max := r.IntN(200)
		g := 1 + r.IntN(12)
		d := map[string]float64{}
		for i := range g {
			d[fmt.Sprint("gw", i)] = r.Float64() * float64(r.IntN(3)) * 50
		}
		got := Shares(max, d)
		sum := 0
		for _, v := range got {
			sum += v
			if floor := min(max/g, minShare); max > 0 && v < floor {
				t.Fatalf("Shares(%d, %v): %d below the floor %d", max, d, v, floor)
			}
		}
		if max > 0 && sum != max {
			t.Fatalf("Shares(%d, %v) = %v: sum %d", max, d, got, sum)
		}
	}
}

// simGateway is one gateway of TestBudgetSimulation: what it runs with
// (load: limit, probes, connections used), the record it last computed
// and the one etcd holds, and where it is in a budget round.
type simGateway struct {
	id      string
	joined  bool
	load    BackendLoad
	demand  float64 // smoothed, as runBudget keeps it
	wants   int     // connections its clients would use now
	latest  *BackendShare
	record  *BackendShare // in etcd; nil: not registered yet
	written bool          // record is registered (possibly without a share)
	phase   int           // 0: idle; 1: growth computed; 2: reservation written
	grow    struct {
		limit  int
		probes bool
	}
}

func simMembers(gws []*simGateway) []Member {
	var out []Member
	for _, g := range gws {
		if g.written {
			m := Member{ID: g.id}
			if g.record != nil {
				m.Budget = map[string]BackendShare{"c/b": *g.record}
			}
			out = append(out, m)
		}
	}
	return out
}

// Gateways join a fleet at random moments, their load changes, their
// records reach etcd late (a registration writes every tick), the steps
// of their budget rounds interleave, and their pools close connections
// above a lowered limit only as statements end: at every step the
// connections the gateways hold, probes included, stay within the cap.
// The steps are budgetRound's: budgetStep, shrinks applied at once,
// growth reserved, published, checked against a fresh read, applied.
func TestBudgetSimulation(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	grown := 0
	for run := range 3000 {
		max := 3 + r.IntN(40)
		gws := make([]*simGateway, 2+r.IntN(4))
		for i := range gws {
			gws[i] = &simGateway{id: fmt.Sprint("gw", i), load: BackendLoad{Cluster: "c", Backend: "b", Max: max, Probes: 1}}
		}
		gws[0].joined = true
		var log []string
		for step := range 300 {
			g := gws[r.IntN(len(gws))]
			ev := r.IntN(12)
			switch {
			case !g.joined:
				if ev < 2 {
					g.joined = true
					log = append(log, g.id+" joins")
				}
				continue
			case ev == 0: // the registration's tick writes the latest record
				g.written, g.record = true, g.latest
			case ev <= 4 && g.phase == 0: // a round: budgetStep
				g.load.InUse = min(g.wants, g.load.Used)
				g.load.Waiting = g.wants - g.load.InUse
				g.demand += demandSmoothing * (float64(g.load.InUse+g.load.Waiting) - g.demand)
				limit, probes, share := budgetStep(g.id, g.load, g.demand, simMembers(gws))
				if g.load.ProbesHeld && !probes {
					t.Fatalf("run %d step %d: %s's probes taken back", run, step, g.id)
				}
				g.latest = &share
				now, reserve := splitStep(g.load, limit, probes)
				if now {
					g.load.Limit = limit
				}
				if reserve {
					g.phase, g.grow.limit, g.grow.probes = 1, limit, probes
				}
				log = append(log, fmt.Sprintf("%s round: limit %d probes %v held %d (applied: limit %d probes %v)", g.id, limit, probes, share.Held, g.load.Limit, g.load.ProbesHeld))
			case ev <= 4 && g.phase == 1: // Publish
				g.written, g.record, g.phase = true, g.latest, 2
			case ev <= 4 && g.phase == 2: // read again, grow if the cap holds
				g.phase = 0
				if reservationHolds(g.id, g.load, g.latest.Held, simMembers(gws)) {
					g.load.Limit, g.load.ProbesHeld = g.grow.limit, g.grow.probes
					grown++
					log = append(log, fmt.Sprintf("%s grows: limit %d probes %v", g.id, g.load.Limit, g.load.ProbesHeld))
				}
			case ev <= 8: // the pool follows its clients within the limit
				g.wants = r.IntN(max + 5)
				g.load.Used = maxInt(g.load.Used, min(g.wants, g.load.Limit))
			default: // statements end: connections above the limit close
				if g.load.Used > g.load.Limit {
					g.load.Used = maxInt(g.load.Limit, g.load.Used-1-r.IntN(3))
				}
			}
			total := 0
			for _, o := range gws {
				if o.joined {
					total += o.load.Used
					if o.load.ProbesHeld {
						total += o.load.Probes // worst case: every probe open
					}
				}
			}
			if total > max {
				t.Fatalf("run %d step %d: %d connections under a cap of %d; the last events:\n%s", run, step, total, max, lastLines(log, 14))
			}
		}
	}
	if grown < 3000 {
		t.Fatalf("only %d growths in 3000 runs: the simulation does not exercise the budget", grown)
	}
}

func lastLines(log []string, n int) string {
	if len(log) > n {
		log = log[len(log)-n:]
	}
	return strings.Join(log, "\n")
}
