package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Member kinds.
const (
	KindGateway = "gateway"
	KindOwner   = "owner"
)

// Member is a live process of the fleet as it registered itself. It is
// stored as JSON under members/<kind>/<id>, bound to the process's lease.
type Member struct {
	// ID names the process in the fleet: host:pid by default.
	ID string `json:"id"`
	// Kind is KindGateway or KindOwner.
	Kind string `json:"kind"`
	// Addr is where the process serves MySQL clients.
	Addr string `json:"addr"`
	// HTTP is its HTTP address (metrics, status), if any.
	HTTP string `json:"http,omitempty"`
	// Version is the binary's version.
	Version string `json:"version"`
	// Cluster is the cluster an owner serves.
	Cluster string `json:"cluster,omitempty"`
	// Role is what the member does beyond its kind: "leader" or
	// "standby" for owners, "" otherwise.
	Role string `json:"role,omitempty"`
	// Started is when the process started.
	Started time.Time `json:"started"`
	// Revision is the topology revision the process has applied (0: none).
	Revision int64 `json:"revision"`
	// Budget is a gateway's share of each backend with a fleet-wide
	// connection cap, by "cluster/backend".
	Budget map[string]BackendShare `json:"budget,omitempty"`
	// Updated is when the process last wrote this record.
	Updated time.Time `json:"updated"`
}

// Registration keeps a Member's key alive under a lease while its process
// runs: it renews the lease every third of its TTL, writes the record again
// when Update changes it, and, when the lease is lost (etcd unreachable
// for longer than the TTL), grants a new one and registers again as soon
// as etcd answers. Its methods are safe for concurrent use.
type Registration struct {
	c   *Client
	key string

	// wmu orders the record's writes (the loop's and Publish's), so an
	// older record never lands after a newer one; it also keeps one
	// lease grant at a time.
	wmu sync.Mutex

	mu      sync.Mutex
	m       Member
	dirty   bool
	lease   clientv3.LeaseID
	lastOK  time.Time // last request etcd answered (a grant, renewal or write)
	lastErr error
	// renewed is when the request of the last grant or renewal etcd
	// confirmed was sent: etcd expires the lease no sooner than a TTL
	// after it.
	renewed time.Time
	done    chan struct{}

	// beforeRevoke, when set, runs on a clean stop before the lease is
	// revoked.
	beforeRevoke func()
}

// Register starts keeping m registered until ctx ends; then it revokes the
// lease, so the key goes at once. Done is closed after that.
func (c *Client) Register(ctx context.Context, m Member) *Registration {
	return c.register(ctx, m, nil)
}

// register is Register with a function run on a clean stop before the
// lease is revoked (nil: none).
func (c *Client) register(ctx context.Context, m Member, beforeRevoke func()) *Registration {
	r := &Registration{c: c, key: c.key("members", m.Kind, m.ID), m: m, dirty: true, done: make(chan struct{}), beforeRevoke: beforeRevoke}
	go r.run(ctx)
	return r
}

// Update changes the record; the change reaches etcd within a tick.
func (r *Registration) Update(f func(*Member)) {
	r.mu.Lock()
	f(&r.m)
	r.dirty = true
	r.mu.Unlock()
}

// Publish changes the record with f and writes it to etcd now, granting a
// lease first if none is held. It returns once etcd has the record, or
// with why not: the change then reaches etcd with a later tick.
func (r *Registration) Publish(ctx context.Context, f func(*Member)) error {
	r.Update(f)
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.Lease() == 0 {
		if err := r.grant(ctx); err != nil {
			return err
		}
	}
	return r.write(ctx)
}

// Lease is the current lease, 0 while none is held.
func (r *Registration) Lease() clientv3.LeaseID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease
}

// Done is closed when the registration has stopped after its ctx ended.
func (r *Registration) Done() <-chan struct{} { return r.done }

// Health is what the registration knows of its link to etcd.
type Health struct {
	// Connected: etcd confirmed the lease (or a write) less than a TTL ago.
	Connected bool
	// LastContact is when etcd last confirmed it.
	LastContact time.Time
	// Error is the last failure, "" after a success.
	Error string
}

// Health reports the link to etcd as the registration last saw it.
func (r *Registration) Health() Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := Health{LastContact: r.lastOK, Connected: !r.lastOK.IsZero() && time.Since(r.lastOK) < r.c.ttl}
	if r.lastErr != nil {
		h.Error = r.lastErr.Error()
	}
	return h
}

// renewedAt is when the request of the last grant or renewal etcd
// confirmed was sent (zero: none yet). etcd does not expire the lease
// before a TTL after it.
func (r *Registration) renewedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renewed
}

// tick is how often the registration looks for work.
const tick = 500 * time.Millisecond

func (r *Registration) run(ctx context.Context) {
	defer close(r.done)
	// A quarter of the TTL, so that a gateway's budget, which shrinks to
	// its floor once no renewal was confirmed for half the TTL (see
	// budgetRound), does not do so between two renewals.
	renewEvery := r.c.ttl / 4
	var lastRenew time.Time
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		r.wmu.Lock()
		r.mu.Lock()
		lease, dirty := r.lease, r.dirty
		r.mu.Unlock()
		var err error
		asked := true
		switch {
		case lease == 0:
			lastRenew = time.Now()
			err = r.grant(ctx)
		case time.Since(lastRenew)+tick/2 >= renewEvery: // the tick nearest to it
			lastRenew = time.Now()
			err = r.renew(ctx, lease)
		default:
			asked = dirty
		}
		if err == nil && (dirty || lease == 0) {
			err = r.write(ctx)
		}
		r.wmu.Unlock()
		if ctx.Err() != nil {
			r.stop()
			return
		}
		r.mu.Lock()
		switch {
		case err != nil:
			r.lastErr = err
		case asked:
			// Only a request etcd answered is contact: a tick with
			// nothing to do says nothing of the link.
			r.lastErr, r.lastOK = nil, time.Now()
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			r.stop()
			return
		case <-t.C:
		}
	}
}

// stop ends the registration after its ctx: beforeRevoke, then the
// lease's revocation.
func (r *Registration) stop() {
	if r.beforeRevoke != nil {
		r.beforeRevoke()
	}
	r.revoke()
}

func (r *Registration) grant(ctx context.Context) error {
	rctx, cancel := reqCtx(ctx)
	defer cancel()
	sent := time.Now()
	resp, err := r.c.etcd.Grant(rctx, int64(r.c.ttl/time.Second))
	if err != nil {
		return fmt.Errorf("etcd: grant a lease: %w", err)
	}
	r.mu.Lock()
	r.lease, r.dirty, r.renewed = resp.ID, true, sent
	r.mu.Unlock()
	return nil
}

func (r *Registration) renew(ctx context.Context, lease clientv3.LeaseID) error {
	rctx, cancel := reqCtx(ctx)
	defer cancel()
	sent := time.Now()
	if _, err := r.c.etcd.KeepAliveOnce(rctx, lease); err != nil {
		if isLeaseGone(err) {
			r.mu.Lock()
			r.lease = 0
			r.mu.Unlock()
		}
		return fmt.Errorf("etcd: renew the lease: %w", err)
	}
	r.mu.Lock()
	if r.lease == lease {
		r.renewed = sent
	}
	r.mu.Unlock()
	return nil
}

func (r *Registration) write(ctx context.Context) error {
	r.mu.Lock()
	r.m.Updated = time.Now().UTC()
	data, err := json.Marshal(r.m)
	lease := r.lease
	r.dirty = false
	r.mu.Unlock()
	if err != nil {
		return err
	}
	rctx, cancel := reqCtx(ctx)
	defer cancel()
	if _, err := r.c.etcd.Put(rctx, r.key, string(data), clientv3.WithLease(lease)); err != nil {
		r.mu.Lock()
		r.dirty = true
		if isLeaseGone(err) {
			r.lease = 0
		}
		r.mu.Unlock()
		return fmt.Errorf("etcd: register %s: %w", r.key, err)
	}
	return nil
}

// revoke ends the lease so the key disappears now, not a TTL later.
func (r *Registration) revoke() {
	r.mu.Lock()
	lease := r.lease
	r.lease = 0
	r.mu.Unlock()
	if lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = r.c.etcd.Revoke(ctx, lease)
}

// Members lists the registered members of kind ("" for all), by kind and
// ID.
func (c *Client) Members(ctx context.Context, kind string) ([]Member, error) {
	ctx, cancel := reqCtx(ctx)
	defer cancel()
	prefix := c.key("members") + "/"
	if kind != "" {
		prefix = c.key("members", kind) + "/"
	}
	resp, err := c.etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: list members: %w", err)
	}
	out := make([]Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var m Member
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			continue // not ours, or from a newer version: skip, do not fail
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
