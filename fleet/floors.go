package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A gateway cut from etcd but not from MariaDB keeps serving, and its
// registration expires a lease TTL after etcd last heard from it; the
// others would then divide the whole cap among themselves. So:
//
//   - every gateway writes, outside its lease, the floor share it would
//     keep when cut (floors/<id>: per backend, Shares' floor), refreshed
//     every lease TTL and deleted on a clean stop;
//   - a gateway with no lease renewal confirmed for half the TTL (before
//     etcd can expire its lease) lowers its pools to that floor, and grows
//     again only through the usual reservation once etcd answers;
//   - a floor whose gateway has no registration is a missing gateway's:
//     the others count it as a member holding its floor (and no demand),
//     until lease_ttl + budget_hold after its last refresh, when whoever
//     sees it first deletes it (a crashed gateway does not keep its floor
//     reserved for ever).
//
// The cap holds while a cut lasts less than budget_hold (statements in
// flight on connections above the floor close them when they end); past
// it the fleet may exceed the cap by the cut gateway's floor.

// floorRecord is what a gateway stores under floors/<id>.
type floorRecord struct {
	// Floors is the floor share per "cluster/backend", probes included.
	Floors map[string]int `json:"floors"`
	// Refreshed is when the gateway wrote the record.
	Refreshed time.Time `json:"refreshed"`

	id  string
	rev int64 // the key's ModRevision
}

// floorShare is Shares' floor: what each of g gateways gets of max
// whatever its demand.
func floorShare(max, g int) int {
	if g <= 0 || max <= 0 {
		return 0
	}
	return min(maxInt(max/(2*g), minShare), max/g)
}

func (c *Client) floorKey(id string) string { return c.key("budget", "floors", id) }

// budgetView reads the gateways' records and the stored floors at one
// revision.
func (c *Client) budgetView(ctx context.Context) ([]Member, []floorRecord, error) {
	ctx, cancel := reqCtx(ctx)
	defer cancel()
	members, floors := c.key("members", KindGateway)+"/", c.key("budget", "floors")+"/"
	resp, err := c.etcd.Txn(ctx).Then(
		clientv3.OpGet(members, clientv3.WithPrefix()),
		clientv3.OpGet(floors, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, nil, fmt.Errorf("etcd: read the budget: %w", err)
	}
	var ms []Member
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) == nil {
			ms = append(ms, m)
		}
	}
	var fs []floorRecord
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var f floorRecord
		if json.Unmarshal(kv.Value, &f) == nil {
			f.id, f.rev = strings.TrimPrefix(string(kv.Key), floors), kv.ModRevision
			fs = append(fs, f)
		}
	}
	return ms, fs, nil
}

// putFloors stores gateway id's floors.
func (c *Client) putFloors(ctx context.Context, id string, floors map[string]int) error {
	data, err := json.Marshal(floorRecord{Floors: floors, Refreshed: time.Now().UTC()})
	if err != nil {
		return err
	}
	ctx, cancel := reqCtx(ctx)
	defer cancel()
	if _, err := c.etcd.Put(ctx, c.floorKey(id), string(data)); err != nil {
		return fmt.Errorf("etcd: store the budget floor: %w", err)
	}
	return nil
}

// releaseFloor deletes a stale floor record unless it was written again
// since it was read.
func (c *Client) releaseFloor(ctx context.Context, f floorRecord) error {
	ctx, cancel := reqCtx(ctx)
	defer cancel()
	k := c.floorKey(f.id)
	_, err := c.etcd.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", f.rev)).Then(clientv3.OpDelete(k)).Commit()
	return err
}

// deleteFloors removes gateway id's floors on a clean stop.
func (c *Client) deleteFloors(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = c.etcd.Delete(ctx, c.floorKey(id))
}

// withMissing adds to members (the gateways' records) a member for each
// floor whose gateway has no record, other than self: demand 0, holding
// its floor of every backend. Floors older than lease TTL + hold at now
// are not added but returned as stale, to release.
func withMissing(self string, members []Member, floors []floorRecord, now time.Time, ttl, hold time.Duration) (view []Member, stale []floorRecord) {
	present := make(map[string]bool, len(members))
	for _, m := range members {
		present[m.ID] = true
	}
	view = members
	for _, f := range floors {
		if f.id == self || present[f.id] {
			continue
		}
		if now.After(f.Refreshed.Add(ttl + hold)) {
			stale = append(stale, f)
			continue
		}
		m := Member{ID: f.id, Kind: KindGateway, Budget: make(map[string]BackendShare, len(f.Floors))}
		for k, n := range f.Floors {
			m.Budget[k] = BackendShare{Held: n, Target: n}
		}
		view = append(view[:len(view):len(view)], m)
	}
	return view, stale
}

// cutLimit is the pool limit of a gateway cut from etcd for load l, whose
// published floor (probes included) is floor: the floor less the probes,
// never above the limit in force.
func cutLimit(l BackendLoad, floor int) int {
	limit := maxInt(floor-l.Probes, 0)
	if l.Limit >= 0 {
		limit = min(limit, l.Limit)
	}
	return limit
}
