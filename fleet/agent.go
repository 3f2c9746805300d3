package fleet

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
)

// Reloader applies a whole configuration to a running process, as SIGHUP
// does; the gateway's Server is one.
type Reloader interface {
	Reload(*config.Config) error
}

// Agent keeps one gateway in the fleet: it registers the gateway, watches
// the topology and applies every change to it through the Reloader, on top
// of the gateway's own file (base). When etcd is out of reach the gateway
// keeps serving its last applied topology; Status says so.
type Agent struct {
	c   *Client
	log hclog.Logger
	reg *Registration
	id  string

	mu        sync.Mutex
	target    Reloader
	base      *config.Config
	doc       []byte // last topology document seen
	docRev    int64
	applied   int64 // revision applied (0: none)
	applyErr  error // why the last document was refused
	appliedAt time.Time
	shares    map[string]BackendShare // this gateway's budget shares
	cut       bool                    // the shares are the floors, for want of etcd
	disc      *Discovery              // nil when the target does not share discovery
	clusters  []string                // the clusters of the topology it started with
}

// DiscoveryShared is a gateway whose discovery can share its probing with
// the fleet (see Discovery).
type DiscoveryShared interface {
	SetDiscoveryShare(healthcheck.Share)
}

// LoadTopology reads the stored topology and merges it with base: what a
// gateway starts with. It retries until etcd answers or ctx ends, so a
// gateway started together with etcd waits for it.
func (c *Client) LoadTopology(ctx context.Context, base *config.Config) (*config.Config, int64, []byte, error) {
	for {
		doc, rev, err := c.GetTopology(ctx)
		if err == nil {
			cfg, err := base.WithTopology(doc)
			return cfg, rev, doc, err
		}
		if errors.Is(err, ErrNoTopology) {
			return nil, 0, nil, err
		}
		c.log.Warn("waiting for etcd", "error", err)
		select {
		case <-ctx.Done():
			return nil, 0, nil, err
		case <-time.After(time.Second):
		}
	}
}

// StartAgent registers m (a gateway unless m.Kind says otherwise) and
// watches the topology from revision rev (the one the process started
// with, doc its document) until ctx ends. When target is also Budgeted,
// the agent keeps its pools within their share of every fleet-wide
// connection cap (max_backend_connections).
func (c *Client) StartAgent(ctx context.Context, m Member, base *config.Config, doc []byte, rev int64, target Reloader) *Agent {
	if m.Kind == "" {
		m.Kind = KindGateway
	}
	m.Revision = rev
	a := &Agent{c: c, log: c.log, id: m.ID, target: target, base: base, doc: doc, docRev: rev, applied: rev, appliedAt: time.Now()}
	if cfg, err := base.WithTopology(doc); err == nil {
		for _, cl := range cfg.Clusters {
			a.clusters = append(a.clusters, cl.Name)
		}
	}
	if ds, ok := target.(DiscoveryShared); ok {
		a.disc = c.StartDiscovery(ctx, m.ID, a.clusters, base.Health.Interval)
		ds.SetDiscoveryShare(a.disc)
	}
	bt, budgeted := target.(Budgeted)
	var beforeRevoke func()
	budgetDone := make(chan struct{})
	if budgeted && c.hold > 0 {
		// A clean stop frees the floor at once: no one holds it back
		// for budget_hold. After the budget's last write, before the
		// registration goes (until then no one counts the floor).
		beforeRevoke = func() {
			<-budgetDone
			c.deleteFloors(m.ID)
		}
	}
	a.reg = c.register(ctx, m, beforeRevoke)
	go c.WatchTopology(ctx, rev, a.apply, func(err error) { a.log.Warn("topology watch", "error", err) })
	if budgeted {
		go func() {
			defer close(budgetDone)
			a.runBudget(ctx, bt)
		}()
	}
	return a
}

// apply merges a new topology document with the base file and reloads.
func (a *Agent) apply(doc []byte, rev int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.doc, a.docRev = doc, rev
	a.reloadLocked()
}

// SetBase replaces the gateway's own file (after SIGHUP) and reloads it
// with the current topology.
func (a *Agent) SetBase(base *config.Config) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.base = base
	return a.reloadLocked()
}

func (a *Agent) reloadLocked() error {
	cfg, err := a.base.WithTopology(a.doc)
	if err == nil {
		err = a.target.Reload(cfg)
	}
	if err != nil {
		a.applyErr = err
		a.log.Error("topology from etcd refused; the running one stays", "revision", a.docRev, "error", err)
		return err
	}
	a.applyErr, a.applied, a.appliedAt = nil, a.docRev, time.Now()
	rev := a.docRev
	a.reg.Update(func(m *Member) { m.Revision = rev })
	a.log.Info("topology applied", "revision", rev)
	return nil
}

// Status is what a gateway shows of the fleet on its status page and in
// its metrics.
type Status struct {
	// Endpoints and Prefix say which etcd and which fleet.
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix"`
	// Member is this gateway's record.
	ID string `json:"id"`
	// Health is the link to etcd.
	Connected   bool      `json:"etcd_connected"`
	LastContact time.Time `json:"etcd_last_contact"`
	EtcdError   string    `json:"etcd_error,omitempty"`
	// Revision is the topology revision applied, AppliedAt when; Latest is
	// the newest seen (above Revision when it was refused: ApplyError says
	// why).
	Revision   int64     `json:"topology_revision"`
	AppliedAt  time.Time `json:"topology_applied_at"`
	Latest     int64     `json:"topology_latest_revision"`
	ApplyError string    `json:"topology_error,omitempty"`
	// Shares is this gateway's share of each backend with a fleet-wide
	// connection cap, by "cluster/backend".
	Shares map[string]BackendShare `json:"budget,omitempty"`
	// BudgetCut says the gateway has kept its pools at their floor shares
	// since etcd stopped confirming its lease (half a lease TTL without a
	// renewal); they grow back through the budget once it answers.
	BudgetCut bool `json:"budget_cut_to_floor,omitempty"`
	// ProbesFor lists the clusters whose backends this gateway probes for
	// the fleet (it leads their discovery); the others' results come from
	// their leaders.
	ProbesFor []string `json:"discovery_leader_of"`
}

// Status reports the agent's state.
func (a *Agent) Status() Status {
	h := a.reg.Health()
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Status{
		Endpoints: a.c.etcd.Endpoints(), Prefix: a.c.prefix, ID: a.id,
		Connected: h.Connected, LastContact: h.LastContact, EtcdError: h.Error,
		Revision: a.applied, AppliedAt: a.appliedAt, Latest: a.docRev, Shares: a.shares,
		BudgetCut: a.cut,
		ProbesFor: []string{},
	}
	if a.disc != nil {
		for _, cl := range a.clusters {
			if a.disc.Leads(cl) {
				s.ProbesFor = append(s.ProbesFor, cl)
			}
		}
	}
	if a.applyErr != nil {
		s.ApplyError = a.applyErr.Error()
	}
	return s
}

// UpdateMember changes the process's record (an owner's Role); etcd has
// it within a tick.
func (a *Agent) UpdateMember(f func(*Member)) { a.reg.Update(f) }

// Done is closed when the agent's registration has ended after ctx.
func (a *Agent) Done() <-chan struct{} { return a.reg.Done() }

// Collectors are the agent's metrics, read at scrape time:
// directgate_fleet_etcd_connected, directgate_fleet_topology_revision,
// directgate_fleet_topology_refused and directgate_fleet_budget_cut_to_floor.
func (a *Agent) Collectors() []prometheus.Collector {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "directgate_fleet_etcd_connected",
			Help: "1 while etcd confirmed this gateway's lease less than a lease TTL ago; 0 while the gateway serves from its last topology without etcd.",
		}, func() float64 { return b(a.Status().Connected) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "directgate_fleet_topology_revision",
			Help: "The etcd revision of the topology this gateway has applied.",
		}, func() float64 { return float64(a.Status().Revision) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "directgate_fleet_topology_refused",
			Help: "1 when the newest topology in etcd was refused by this gateway (it runs an older one: see the status page or the log for why).",
		}, func() float64 { return b(a.Status().ApplyError != "") }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "directgate_fleet_budget_cut_to_floor",
			Help: "1 while this gateway, cut from etcd, keeps its pools of capped backends at their floor shares of max_backend_connections; 0 otherwise.",
		}, func() float64 { return b(a.Status().BudgetCut) }),
	}
}
