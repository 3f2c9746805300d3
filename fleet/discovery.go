package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/directgate/directgate/healthcheck"
)

// Discovery shares a fleet's backend probing: per cluster, one gateway,
// elected through an etcd lease, probes the backends in its regular rounds
// and publishes the results; the others take them instead of probing
// (healthcheck.Share), so the probe load on a backend does not grow with
// the number of gateways. Every gateway still probes on its own when its
// query path sees a failure (targeted probes), and when the published
// results go stale (no leader, etcd out of reach) it probes in its rounds
// again until fresh ones arrive. When the leader dies, another gateway
// takes over within one lease TTL.
type Discovery struct {
	c        *Client
	id       string
	interval time.Duration

	// cands are this gateway's candidacies in the clusters' discovery
	// elections; fixed after StartDiscovery.
	cands map[string]*Candidate

	mu     sync.Mutex
	mine   map[string]map[string]wireProbe // this gateway's probes, by cluster and address
	theirs map[string]received             // published results, by address
}

// wireProbe is a probe result as published.
type wireProbe struct {
	Reachable       bool          `json:"reachable"`
	ReadOnly        bool          `json:"read_only"`
	ServerID        uint32        `json:"server_id"`
	Version         string        `json:"version"`
	Replica         bool          `json:"replica"`
	Lag             time.Duration `json:"lag"`
	LagKnown        bool          `json:"lag_known"`
	SQLStopped      bool          `json:"sql_stopped,omitempty"`
	ReplicationNote string        `json:"replication_note,omitempty"`
	RTT             time.Duration `json:"rtt"`
	Err             string        `json:"error,omitempty"`
}

// published is one cluster's results as the leader publishes them.
type published struct {
	Leader  string               `json:"leader"`
	Time    time.Time            `json:"time"`
	Results map[string]wireProbe `json:"results"`
}

// received is a published result and when this gateway received it.
type received struct {
	r  healthcheck.Result
	at time.Time
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// staleAfter is how many discovery intervals a published result serves;
// older, the gateway probes itself.
const staleAfter = 3

// StartDiscovery shares the probing of clusters with the fleet until ctx
// ends; interval is discovery's. Give the result to the gateway's
// observer (gateway.Server.SetDiscoveryShare).
func (c *Client) StartDiscovery(ctx context.Context, id string, clusters []string, interval time.Duration) *Discovery {
	d := &Discovery{
		c: c, id: id, interval: interval,
		cands: map[string]*Candidate{}, mine: map[string]map[string]wireProbe{}, theirs: map[string]received{},
	}
	for _, cl := range clusters {
		cand := c.Election(RoleDiscovery, cl).Candidate(id)
		d.cands[cl] = cand
		cand.Campaign(ctx)
	}
	go d.publish(ctx)
	go d.follow(ctx, d.load(ctx))
	return d
}

func (d *Discovery) key(cluster string, elem string) string {
	return d.c.key(RoleDiscovery, cluster, elem)
}

// Leads reports whether this gateway probes cluster for the fleet: it
// leads the cluster's discovery election and its lease is known to hold.
func (d *Discovery) Leads(cluster string) bool {
	c := d.cands[cluster]
	if c == nil {
		return false
	}
	t := c.Term()
	return t != 0 && c.Valid(t)
}

// Result implements healthcheck.Share: a leader probes; a follower takes
// a fresh published result.
func (d *Discovery) Result(b healthcheck.Backend) (healthcheck.Result, bool) {
	if d.Leads(b.Cluster) {
		return healthcheck.Result{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	got, ok := d.theirs[b.Addr]
	if !ok || time.Since(got.at) > staleAfter*d.interval {
		return healthcheck.Result{}, false
	}
	return got.r, true
}

// Probed implements healthcheck.Share: a leader's results are published.
func (d *Discovery) Probed(b healthcheck.Backend, r healthcheck.Result) {
	w := wireProbe{
		Reachable: r.Reachable, ReadOnly: r.ReadOnly, ServerID: r.ServerID, Version: r.Version,
		Replica: r.Replica, Lag: r.Lag, LagKnown: r.LagKnown, SQLStopped: r.SQLStopped, ReplicationNote: r.ReplicationNote, RTT: r.RTT,
	}
	if r.Err != nil {
		w.Err = r.Err.Error()
	}
	if !d.Leads(b.Cluster) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.mine[b.Cluster]
	if m == nil {
		m = map[string]wireProbe{}
		d.mine[b.Cluster] = m
	}
	m[b.Addr] = w
}

// publish writes the led clusters' latest results every interval.
func (d *Discovery) publish(ctx context.Context) {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		var out []struct {
			cluster string
			p       published
		}
		for cl, m := range d.mine {
			if !d.Leads(cl) || len(m) == 0 {
				continue
			}
			out = append(out, struct {
				cluster string
				p       published
			}{cl, published{Leader: d.id, Time: time.Now().UTC(), Results: m}})
			d.mine[cl] = map[string]wireProbe{}
		}
		d.mu.Unlock()
		for _, o := range out {
			data, err := json.Marshal(o.p)
			if err != nil {
				continue
			}
			rctx, cancel := reqCtx(ctx)
			_, err = d.c.etcd.Put(rctx, d.key(o.cluster, "results"), string(data))
			cancel()
			if err != nil {
				d.c.log.Debug("publish discovery results", "cluster", o.cluster, "error", err)
			}
		}
	}
}

// follow receives every cluster's published results until ctx ends: the
// ones already published first (a gateway that joins a fleet starts with
// the leader's latest round instead of probing), then each new one.
func (d *Discovery) follow(ctx context.Context, rev int64) {
	prefix := d.c.key(RoleDiscovery) + "/"
	for ctx.Err() == nil {
		if rev == 0 {
			rev = d.load(ctx)
			if rev == 0 {
				sleepCtx(ctx, time.Second)
				continue
			}
		}
		wctx, cancel := context.WithCancel(ctx)
		for resp := range d.c.etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut && strings.HasSuffix(string(ev.Kv.Key), "/results") {
					d.take(ev.Kv.Value, false)
				}
			}
		}
		cancel()
		rev = 0 // read them all again: the watch may have missed some
		sleepCtx(ctx, time.Second)
	}
}

// load takes every cluster's published results and returns the revision
// they were read at (0: etcd did not answer).
func (d *Discovery) load(ctx context.Context) int64 {
	rctx, cancel := reqCtx(ctx)
	defer cancel()
	resp, err := d.c.etcd.Get(rctx, d.c.key(RoleDiscovery)+"/", clientv3.WithPrefix())
	if err != nil {
		return 0
	}
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/results") {
			d.take(kv.Value, true)
		}
	}
	return resp.Header.Revision
}

// take records a published document's results, unless this gateway
// published it. A document read rather than watched (stored) may be old:
// its results count from when the leader published them, never later
// than now.
func (d *Discovery) take(data []byte, stored bool) {
	var p published
	if json.Unmarshal(data, &p) != nil || p.Leader == d.id {
		return
	}
	now := time.Now()
	if stored && p.Time.Before(now) {
		now = p.Time
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for addr, w := range p.Results {
		r := healthcheck.Result{
			Reachable: w.Reachable, ReadOnly: w.ReadOnly, ServerID: w.ServerID, Version: w.Version,
			Replica: w.Replica, Lag: w.Lag, LagKnown: w.LagKnown, SQLStopped: w.SQLStopped, ReplicationNote: w.ReplicationNote, RTT: w.RTT,
		}
		if w.Err != "" {
			r.Err = publishedError(w.Err)
		}
		d.theirs[addr] = received{r: r, at: now}
	}
}

// publishedError is a probe error as another gateway saw it.
type publishedError string

func (e publishedError) Error() string { return string(e) }

// DiscoveryLeaders returns, by cluster, the gateway that probes it for the
// fleet now (the holder of the oldest key of its election).
func (c *Client) DiscoveryLeaders(ctx context.Context) (map[string]string, error) {
	ctx, cancel := reqCtx(ctx)
	defer cancel()
	prefix := c.key(RoleDiscovery) + "/"
	resp, err := c.etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), prefix) // cluster/election/<lease>
		cluster, tail, ok := strings.Cut(rest, "/")
		if !ok || !strings.HasPrefix(tail, "election/") {
			continue
		}
		if _, seen := out[cluster]; !seen {
			out[cluster] = string(kv.Value)
		}
	}
	return out, nil
}
