package fleet

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"
)

// BackendLoad is one backend's connections at this gateway, as the
// fleet's connection budget needs them.
type BackendLoad struct {
	// Cluster and Backend name the backend.
	Cluster, Backend string
	// Max is the cluster's max_backend_connections: the fleet-wide cap
	// (0: none; such backends are not budgeted).
	Max int
	// Used is the connections the gateway's pools hold or dial now; InUse
	// and Waiting are leased connections and statements waiting for one:
	// the demand.
	Used, InUse, Waiting int
	// Limit is the pools' limit in force (negative: none).
	Limit int
	// Probes is the connections the gateway's discovery keeps to the
	// backend, outside the pools but inside the cap.
	Probes int
	// ProbesHeld says the budget already gave the gateway room for its
	// Probes (see Budgeted.SetBackendLimit); until then it does not open
	// them.
	ProbesHeld bool
}

// Budgeted is a gateway whose pools take their limits from the fleet's
// connection budget.
type Budgeted interface {
	// BackendLoads reports every backend's connections and demand.
	BackendLoads() []BackendLoad
	// SetBackendLimit sets the most connections the pools of a backend
	// may hold together; probes true lets the gateway open its probe
	// connections too (it is never taken back: once counted in the
	// gateway's Held, no one else grows into them).
	SetBackendLimit(cluster, backend string, limit int, probes bool)
}

// BackendShare is what a gateway publishes per budgeted backend.
type BackendShare struct {
	// Demand is the smoothed in-use plus waiting connections.
	Demand float64 `json:"demand"`
	// Held is the most connections the gateway may hold now: its limit or
	// what is still open above it, probes included. Others grow only into
	// the cap minus everyone's Held.
	Held int `json:"held"`
	// Target is the share the gateway computed for itself.
	Target int `json:"target"`
}

// shareKey names a backend in Member.Budget.
func shareKey(cluster, backend string) string { return cluster + "/" + backend }

// Shares divides max connections among the gateways by their demand. Every
// gateway gets a floor (half the cap spread evenly, at least minShare
// while the cap allows), the rest goes in proportion to demand (evenly when
// no one has any), and the rounding remainders go by the largest
// fractions, ties by ID, so every gateway computes the same shares from
// the same records. The shares never add up to more than max.
func Shares(max int, demand map[string]float64) map[string]int {
	ids := make([]string, 0, len(demand))
	total := 0.0
	for id, d := range demand {
		ids = append(ids, id)
		total += math.Max(d, 0)
	}
	sort.Strings(ids)
	out := make(map[string]int, len(ids))
	g := len(ids)
	if g == 0 || max <= 0 {
		return out
	}
	base := floorShare(max, g)
	rest := max - base*g
	type frac struct {
		id string
		f  float64
	}
	fr := make([]frac, 0, g)
	given := 0
	for _, id := range ids {
		w := 1 / float64(g)
		if total > 0 {
			w = math.Max(demand[id], 0) / total
		}
		exact := float64(rest) * w
		whole := int(exact)
		out[id] = base + whole
		given += whole
		fr = append(fr, frac{id, exact - float64(whole)})
	}
	sort.SliceStable(fr, func(i, j int) bool { return fr[i].f > fr[j].f })
	for i := 0; given < rest && i < len(fr); i++ {
		out[fr[i].id]++
		given++
	}
	return out
}

// minShare is the floor share a gateway keeps while the cap allows: one
// connection for discovery's probe and one for statements.
const minShare = 2

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// demandSmoothing is the weight of the newest sample in a gateway's
// smoothed demand (per budget tick).
const demandSmoothing = 0.3

// budgetTick is how often a gateway recomputes its shares.
const budgetTick = 500 * time.Millisecond

// budget is the agent's state for the connection budget.
type budget struct {
	demand map[string]float64 // smoothed, by shareKey
	// floors is the floor of each backend (probes included) etcd holds
	// for this gateway under floors/<id>, what it keeps when cut from
	// etcd: after a write whose outcome is unknown, the lower of the old
	// and the new (absent: none stored, 0).
	floors   map[string]int
	floorsAt time.Time // when they were last stored
	cut      bool      // the pools are at their floors for want of etcd
}

// runBudget recomputes this gateway's share of every budgeted backend
// every budgetTick until ctx ends.
func (a *Agent) runBudget(ctx context.Context, target Budgeted) {
	b := &budget{demand: map[string]float64{}, floors: map[string]int{}}
	t := time.NewTicker(budgetTick)
	defer t.Stop()
	for {
		a.budgetRound(ctx, target, b)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// budgetRound is one recomputation. Without the other gateways' records
// (etcd out of reach) no limit grows: no one can grow then, so the cap
// holds. And once etcd has confirmed no renewal of the gateway's lease
// for half its TTL (before etcd may expire it and the others stop
// counting what the gateway holds), every capped backend's limit goes
// down to the gateway's stored floor until it has (see floors.go); the
// round's own requests to etcd end at that moment.
func (a *Agent) budgetRound(ctx context.Context, target Budgeted, b *budget) {
	var capped []BackendLoad
	for _, l := range target.BackendLoads() {
		// A follower of the fleet's discovery keeps its probe
		// connection in its share too: it probes whenever the leader's
		// results go stale (a leader slowed down, or gone until its
		// lease expires) and on its own failures, at moments no one
		// else can see in time to make room.
		if l.Max > 0 {
			capped = append(capped, l)
		}
	}
	if len(capped) == 0 {
		return
	}
	renewed := a.reg.renewedAt()
	if a.c.hold <= 0 || renewed.IsZero() {
		// Without the protection, or before the first lease (nothing
		// is held before a reservation, and that needs a lease).
		a.shareRound(ctx, target, capped, b)
		return
	}
	cutAt := func() time.Time { return a.reg.renewedAt().Add(a.c.ttl / 2) }
	if time.Now().Before(cutAt()) {
		rctx, cancel := context.WithDeadline(ctx, cutAt())
		a.shareRound(rctx, target, capped, b)
		cancel()
		if time.Now().Before(cutAt()) {
			if b.cut {
				b.cut = false
				a.log.Info("etcd confirms the lease again: pools grow back through the budget's reservations")
			}
			return
		}
	}
	if ctx.Err() == nil {
		a.shrinkToFloors(target, b)
	}
}

// shrinkToFloors lowers every capped backend's limit to the gateway's
// stored floor (less its probes) and records what it then holds.
func (a *Agent) shrinkToFloors(target Budgeted, b *budget) {
	if !b.cut {
		b.cut = true
		a.log.Warn("no lease renewal confirmed by etcd for half the lease TTL: pools shrink to their floor share of max_backend_connections until etcd answers",
			"lease_ttl", a.c.ttl, "floors", fmt.Sprint(b.floors))
	}
	shares := map[string]BackendShare{}
	for _, l := range target.BackendLoads() {
		if l.Max <= 0 {
			continue
		}
		k := shareKey(l.Cluster, l.Backend)
		limit := cutLimit(l, b.floors[k])
		if limit != l.Limit {
			target.SetBackendLimit(l.Cluster, l.Backend, limit, l.ProbesHeld)
		}
		held := maxInt(limit, l.Used)
		if l.ProbesHeld {
			held += l.Probes
		}
		shares[k] = BackendShare{Demand: round2(b.demand[k]), Held: held, Target: b.floors[k]}
	}
	a.mu.Lock()
	a.shares, a.cut = shares, true
	a.mu.Unlock()
	a.reg.Update(func(m *Member) { m.Budget = shares })
}

// budgetView is the gateways' records as the budget counts them: with
// the protection on, a missing gateway's floor counted as a member (and
// the floors past their hold released).
func (a *Agent) budgetView(ctx context.Context) ([]Member, error) {
	members, floors, err := a.c.budgetView(ctx)
	if err != nil || a.c.hold <= 0 {
		return members, err
	}
	view, stale := withMissing(a.id, members, floors, time.Now(), a.c.ttl, a.c.hold)
	for _, f := range stale {
		if a.c.releaseFloor(ctx, f) == nil {
			a.log.Info("released the floor share of a gateway gone longer than lease_ttl + budget_hold", "gateway", f.id, "refreshed", f.Refreshed)
		}
	}
	return view, nil
}

// storeFloors stores the gateway's floors when they changed or are a
// lease TTL old, and reports whether etcd holds the current ones.
func (a *Agent) storeFloors(ctx context.Context, b *budget, floors map[string]int) bool {
	same := len(floors) == len(b.floors)
	for k, f := range floors {
		if old, ok := b.floors[k]; !ok || old != f {
			same = false
		}
	}
	if same && time.Since(b.floorsAt) < a.c.ttl {
		return true
	}
	// Until etcd confirms, either may be stored: keep the lower.
	pending := make(map[string]int, len(floors))
	for k, f := range floors {
		if old, ok := b.floors[k]; ok {
			pending[k] = min(old, f)
		}
	}
	b.floors = pending
	if err := a.c.putFloors(ctx, a.id, floors); err != nil {
		return false
	}
	b.floors, b.floorsAt = floors, time.Now()
	return true
}

// shareRound divides the caps from the records in etcd and applies this
// gateway's shares of the capped loads.
//
// A shrink applies at once and is published at once. Growth (a
// higher limit, or room for the probes) is a reservation first: the
// gateway writes its record with the larger Held, reads everyone's again,
// and grows only if the cap still holds everything published. Of two
// gateways that grow at once into the same room, at least one reads the
// other's reservation (etcd's reads are linearizable) and waits for the
// next round; one whose round came before its record was even written
// cannot take a whole cap alongside another that did the same. With the
// protection on, growth also waits until etcd holds the gateway's floors.
func (a *Agent) shareRound(ctx context.Context, target Budgeted, capped []BackendLoad, b *budget) {
	members, err := a.budgetView(ctx)
	if err != nil {
		return
	}
	type growth struct {
		l      BackendLoad
		limit  int
		probes bool
	}
	var grows []growth
	shrunk := false
	shares := make(map[string]BackendShare, len(capped))
	gateways := 1
	for _, m := range members {
		if m.ID != a.id {
			gateways++
		}
	}
	floors := make(map[string]int, len(capped))
	for _, l := range capped {
		k := shareKey(l.Cluster, l.Backend)
		d := float64(l.InUse + l.Waiting)
		if old, ok := b.demand[k]; ok {
			d = old + demandSmoothing*(d-old)
		}
		b.demand[k] = d
		floors[k] = floorShare(l.Max, gateways)
		limit, probes, share := budgetStep(a.id, l, d, members)
		shares[k] = share
		now, reserve := splitStep(l, limit, probes)
		if now {
			target.SetBackendLimit(l.Cluster, l.Backend, limit, l.ProbesHeld) // a shrink: now
			shrunk = true
		}
		if reserve {
			grows = append(grows, growth{l, limit, probes})
		}
	}
	a.mu.Lock()
	a.shares, a.cut = shares, false
	a.mu.Unlock()
	if a.c.hold > 0 && !a.storeFloors(ctx, b, floors) {
		grows = nil // a cut now would keep less than the others count: no growth
	}
	if len(grows) == 0 {
		if shrunk {
			// Now, not within a tick: whoever waits for the room
			// (a gateway that just joined) sees it sooner.
			_ = a.reg.Publish(ctx, func(m *Member) { m.Budget = shares })
		} else {
			a.reg.Update(func(m *Member) { m.Budget = shares })
		}
		return
	}
	if a.reg.Publish(ctx, func(m *Member) { m.Budget = shares }) != nil {
		return // the reservation is not known to be visible: no growth
	}
	if members, err = a.budgetView(ctx); err != nil {
		return
	}
	for _, g := range grows {
		if !reservationHolds(a.id, g.l, shares[shareKey(g.l.Cluster, g.l.Backend)].Held, members) {
			continue // another gateway reserved the same room: next round
		}
		target.SetBackendLimit(g.l.Cluster, g.l.Backend, g.limit, g.probes)
	}
}

// splitStep says how a budgetStep decision (limit, probes) for load l
// applies: a lower limit (or one set where there was none) now; a higher
// limit or new room for the probes only as a reservation that holds.
func splitStep(l BackendLoad, limit int, probes bool) (now, reserve bool) {
	grow := l.Limit >= 0 && limit > l.Limit
	return !grow && limit != l.Limit, grow || probes && !l.ProbesHeld
}

// reservationHolds says whether a reservation of held connections of l's
// backend by self still fits under the cap with what the members (read
// after it was published) hold.
func reservationHolds(self string, l BackendLoad, held int, members []Member) bool {
	return othersHeld(self, shareKey(l.Cluster, l.Backend), members)+held <= l.Max
}

// othersHeld adds up the Held of backend k that the members other than
// self published.
func othersHeld(self, k string, members []Member) int {
	n := 0
	for _, m := range members {
		if m.ID != self {
			n += m.Budget[k].Held
		}
	}
	return n
}

// budgetStep is gateway self's decision for one backend: its pools'
// limit, whether it may open its probe connections, and what it publishes,
// from its load l, its smoothed demand d and the fleet's member records
// (self's own among them or not).
func budgetStep(self string, l BackendLoad, d float64, members []Member) (limit int, probes bool, share BackendShare) {
	k := shareKey(l.Cluster, l.Backend)
	demand := map[string]float64{self: d}
	for _, m := range members {
		if m.ID != self {
			// One that has not published yet holds nothing (it grows
			// only once its record says so) and gets its floor share.
			demand[m.ID] = m.Budget[k].Demand
		}
	}
	othersHeld := othersHeld(self, k, members)
	want := Shares(l.Max, demand)[self] - l.Probes
	limit = maxInt(l.Limit, 0)
	switch {
	case want < limit && (limit-want >= maxInt(1, limit/10) || othersHeld+limit+l.Probes > l.Max):
		limit = want // shrink now: someone needs it, or the cap is crossed
	case want > limit:
		// Grow only into what no one else holds.
		limit = min(want, l.Max-othersHeld-l.Probes)
		limit = maxInt(limit, l.Limit)
	}
	limit = maxInt(limit, 0)
	held := maxInt(limit, l.Used)
	// The probes, like a pool's growth, take only room no one else holds:
	// a gateway joining a fleet whose cap is handed out does not probe
	// until the others have shrunk to their new shares.
	probes = l.ProbesHeld || othersHeld+held+l.Probes <= l.Max
	if probes {
		held += l.Probes
	}
	return limit, probes, BackendShare{Demand: round2(d), Held: held, Target: want + l.Probes}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
