package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Election roles: the first key element of an election.
const (
	// RoleOwners elects the owner process of a cluster.
	RoleOwners = "owners"
	// RoleDiscovery elects the gateway that probes a cluster's backends
	// for the fleet (Discovery).
	RoleDiscovery = "discovery"
)

// Election is the leadership of one role in one cluster: one process
// leads, the others stand by, and whoever wants to know who leads
// observes it. It is etcd's election recipe (concurrency.Election):
// every candidate puts a key <prefix>/<role>/<cluster>/election/<lease>
// bound to its lease, the one created first leads and its value (the
// leader's address) says who that is; when its lease ends (the process
// died, or lost etcd for a TTL) or it resigns, the next one leads.
type Election struct {
	c   *Client
	key string
}

// Election returns the election of role (RoleOwners, RoleDiscovery) in
// cluster.
func (c *Client) Election(role, cluster string) *Election {
	return &Election{c: c, key: c.key(role, cluster, "election")}
}

// Key is the prefix the candidates' keys live under.
func (e *Election) Key() string { return e.key }

// Candidate is one process running in an Election. Campaign starts it;
// from then on it is at any moment either the leader, in a term, or a
// standby waiting for the leader to go.
//
// A leader acts only while Valid(term) holds: its lease is known to hold
// for longer than a margin (a quarter of the lease TTL), timed from the
// last renewal's send (see fence). It renews its lease five times per
// TTL; when renewals stop succeeding it stops being Valid before etcd can
// expire the lease and elect another, then steps down (Term 0, Changed)
// and campaigns again with a new lease. So two candidates are never Valid
// at once, as long as no pause between a Valid check and the act it
// allows lasts longer than the margin.
//
// Terms are the etcd creation revisions of the leader's key: they grow
// across the whole fleet, each leadership has its own, and 0 is none.
// The methods are safe for concurrent use.
type Candidate struct {
	e     *Election
	value string
	log   hclog.Logger
	fence *fence
	obs   *Observer

	mu      sync.Mutex
	changed chan struct{}
	done    chan struct{}
	started bool
}

// Candidate prepares a candidacy with value (what observers read: the
// leader's address) that campaigns once Campaign is called. Until then,
// and whenever it does not lead, Term is 0.
func (e *Election) Candidate(value string) *Candidate {
	return &Candidate{
		e: e, value: value, log: e.c.log.Named("election").With("election", e.key),
		fence: newFence(time.Now, fenceMargin(e.c.ttl)), obs: newObserver(),
		changed: make(chan struct{}), done: make(chan struct{}),
	}
}

// Campaign runs for leadership until ctx ends; then the candidate steps
// down, revokes its lease (so a standby takes over at once) and closes
// Done. Campaign returns at once; call it once.
func (c *Candidate) Campaign(ctx context.Context) {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		panic("fleet: Candidate.Campaign called twice")
	}
	c.started = true
	c.mu.Unlock()
	obsDone := make(chan struct{})
	go func() { defer close(obsDone); c.e.observe(ctx, c.obs) }()
	go func() {
		defer close(c.done)
		defer func() { <-obsDone }()
		c.run(ctx)
	}()
}

// Term is the current leadership term, 0 while the candidate does not
// lead (or its lease may have run out).
func (c *Candidate) Term() uint64 { return c.fence.current() }

// Valid reports whether term is still the current term and its lease
// still holds, with the margin to spare. Check it before every act only
// the leader may do; a false answer is final for that term.
func (c *Candidate) Valid(term uint64) bool { return c.fence.valid(term) }

// Changed is closed when the candidate starts or stops leading.
func (c *Candidate) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Leader returns the leader's value as last observed ("" when none is
// known) and a channel closed when that changes.
func (c *Candidate) Leader() (string, <-chan struct{}) { return c.obs.Leader() }

// Done is closed once the candidacy has ended after Campaign's ctx.
func (c *Candidate) Done() <-chan struct{} { return c.done }

func (c *Candidate) notify() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// candidacyRetry is the pause after a candidacy failed before the next.
const candidacyRetry = time.Second

func (c *Candidate) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := c.once(ctx)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("candidacy ended; campaigning again", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(candidacyRetry):
		}
	}
}

// errLeaseGone says etcd no longer has the candidate's lease.
var errLeaseGone = errors.New("the lease expired in etcd")

// once is one candidacy: a new lease, a campaign and, if won, the
// leadership until it is lost or ctx ends. It always revokes its lease.
func (c *Candidate) once(ctx context.Context) (err error) {
	cli := c.e.c.etcd
	c.fence.reset()
	sent := c.fence.now()
	gctx, cancel := reqCtx(ctx)
	grant, err := cli.Grant(gctx, int64(c.e.c.ttl/time.Second))
	cancel()
	if err != nil {
		return fmt.Errorf("etcd: grant a lease: %w", err)
	}
	c.fence.renewed(sent, time.Duration(grant.TTL)*time.Second)
	defer revokeLease(cli, grant.ID)

	lctx, lost := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer lost(nil)
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithContext(lctx))
	if err != nil {
		return fmt.Errorf("etcd: session: %w", err)
	}
	wg.Add(2)
	go func() { defer wg.Done(); c.renew(lctx, grant.ID, lost) }()
	go func() {
		defer wg.Done()
		select {
		case <-sess.Done():
			lost(errors.New("the lease's keepalive ended"))
		case <-lctx.Done():
		}
	}()

	el := concurrency.NewElection(sess, c.e.key)
	if err := el.Campaign(lctx, c.value); err != nil {
		if cause := context.Cause(lctx); cause != nil {
			return cause
		}
		return fmt.Errorf("etcd: campaign: %w", err)
	}
	// Campaign also returns when the candidate's own key went away while
	// it waited (its lease expired): lead only with the key in place.
	gctx, cancel = reqCtx(lctx)
	resp, err := cli.Get(gctx, el.Key())
	cancel()
	switch {
	case err != nil:
		return fmt.Errorf("etcd: read the leader key: %w", err)
	case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != el.Rev() || clientv3.LeaseID(resp.Kvs[0].Lease) != grant.ID:
		return errors.New("the candidacy key went away during the campaign")
	}
	term := uint64(el.Rev())
	if !c.fence.lead(term) {
		return errors.New("elected with a lease that may have run out")
	}
	c.notify()
	c.log.Info("leading", "term", term, "value", c.value, "lease_valid_for", time.Until(c.fence.expiry()).Round(time.Millisecond))
	reason := c.hold(lctx, el)
	// Close the fence before the lease goes (the deferred revoke), so no
	// act of this term can follow the next leader's first.
	c.fence.stepDown()
	c.notify()
	if ctx.Err() != nil {
		c.log.Info("resigning: stopping", "term", term)
		return nil
	}
	c.log.Warn("no longer leading", "term", term, "reason", reason)
	return reason
}

// hold waits, while leading, until the leadership ends: the fence runs
// out (no renewal for TTL less margin), the lease is gone, the leader key
// was deleted, or ctx ends. It returns why.
func (c *Candidate) hold(ctx context.Context, el *concurrency.Election) error {
	cli := c.e.c.etcd
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	watch := func() clientv3.WatchChan { return cli.Watch(wctx, el.Key(), clientv3.WithRev(el.Rev()+1)) }
	wch := watch()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		left := c.fence.expiry().Sub(c.fence.now())
		if left <= 0 {
			return errors.New("the lease was not renewed in time (etcd out of reach or slow)")
		}
		timer.Reset(min(left, time.Second))
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				wch = nil // set up again at the next tick; the fence covers the gap
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return errors.New("the leader key was deleted")
				}
			}
		case <-timer.C:
			if wch == nil {
				wch = watch()
			}
		}
	}
}

// renew renews the lease every fifth of its TTL, timing each renewal from
// its send, until ctx ends. A lease etcd no longer has ends the candidacy
// through lost; other failures (etcd out of reach) only let the fence run
// out.
func (c *Candidate) renew(ctx context.Context, id clientv3.LeaseID, lost context.CancelCauseFunc) {
	every := c.e.c.ttl / 5
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := c.fence.now()
		rctx, cancel := context.WithTimeout(ctx, every)
		resp, err := c.e.c.etcd.KeepAliveOnce(rctx, id)
		cancel()
		switch {
		case err == nil:
			c.fence.renewed(sent, time.Duration(resp.TTL)*time.Second)
		case isLeaseGone(err):
			lost(errLeaseGone)
			return
		case ctx.Err() == nil:
			c.log.Debug("lease renewal failed", "error", err)
		}
	}
}

// revokeLease ends a lease now, so its keys go at once (best effort: when
// etcd is out of reach the lease expires by itself).
func revokeLease(cli *clientv3.Client, id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = cli.Revoke(ctx, id)
}

// Observer follows who leads an Election. While etcd is out of reach it
// keeps the last leader it saw. Its methods are safe for concurrent use.
type Observer struct {
	mu      sync.Mutex
	value   string
	changed chan struct{}
}

func newObserver() *Observer { return &Observer{changed: make(chan struct{})} }

// Observe follows the election until ctx ends.
func (e *Election) Observe(ctx context.Context) *Observer {
	o := newObserver()
	go e.observe(ctx, o)
	return o
}

// Leader returns the leader's value ("" while there is none, or none is
// known yet) and a channel closed when it changes.
func (o *Observer) Leader() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.value, o.changed
}

func (o *Observer) set(value string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if value == o.value {
		return
	}
	o.value = value
	close(o.changed)
	o.changed = make(chan struct{})
}

// observe reads the leader (the candidate key created first), then reads
// it again after every change under the election's prefix, until ctx
// ends; a broken watch is set up again after a second.
func (e *Election) observe(ctx context.Context, o *Observer) {
	prefix := e.key + "/"
	for ctx.Err() == nil {
		rev, err := e.readLeader(ctx, prefix, o)
		if err == nil {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			for wr := range e.c.etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
				if wr.Err() != nil {
					break
				}
				if len(wr.Events) > 0 {
					if rev, err = e.readLeader(ctx, prefix, o); err != nil {
						break
					}
				}
			}
			cancel()
		}
		if ctx.Err() == nil {
			e.c.log.Debug("election watch broken; watching again", "election", e.key, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// readLeader reads the current leader into o and returns the revision
// read at.
func (e *Election) readLeader(ctx context.Context, prefix string, o *Observer) (int64, error) {
	rctx, cancel := reqCtx(ctx)
	defer cancel()
	resp, err := e.c.etcd.Get(rctx, prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return 0, err
	}
	value := ""
	if len(resp.Kvs) > 0 {
		value = string(resp.Kvs[0].Value)
	}
	o.set(value)
	return resp.Header.Revision, nil
}
