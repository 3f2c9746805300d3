package owner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"vitess.io/vitess/go/vt/sqlparser"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/wire"
)

// parserVersion is the server version the statement parser assumes.
const parserVersion = "10.11.0-MariaDB"

// settings is the part of the configuration the owner uses, replaced as a
// whole by Reload.
type settings struct {
	cluster config.Cluster
	health  config.Health
	// twopc and clusters are the coordinator log's settings and every
	// cluster, for the log cluster's owner (twopc.go).
	twopc    config.TwoPC
	clusters []config.Cluster
	// tls and tlsPreferred are the cluster's backend_tls, loaded once per
	// configuration, for probes and the primary's pools alike.
	tls          *tls.Config
	tlsPreferred bool
}

// Owner is the owner process of one cluster: a MySQL-protocol server for
// gateways that answers sequence and message statements, backed by the
// cluster's primary. Build it with New, then Listen and Serve; stop it
// with Shutdown. All methods are safe for concurrent use.
type Owner struct {
	cluster string
	log     hclog.Logger
	parser  *sqlparser.Parser
	conf    atomic.Pointer[settings]
	health  *healthcheck.Observer
	// listen is where the owner listens: WithListen's address, else the
	// cluster's owner address, which is then required (needAddr), in
	// reloads too.
	listen   string
	needAddr bool
	// lead is the owner's standing in its cluster's election; nil: the
	// only owner, always serving.
	lead Leadership
	// now and rnd are the clock and the backoff jitter source of the
	// message queues.
	now func() time.Time
	rnd func() float64

	// front is the MySQL server skeleton: listener, connection ids, the
	// registry of sessions, drain-then-cut shutdown.
	front *mysqlserver.Server
	// logins paces failed logins.
	logins *mysqlserver.LoginThrottle
	// metrics is the registry /metrics serves and its counters.
	metrics *metrics
	// shutting is set by the first Shutdown; done closes when it returns.
	shutting atomic.Bool
	done     chan struct{}
	// ctx ends when Shutdown begins: streams, loops and new statements
	// stop. hard ends when Shutdown stops waiting: statements in flight
	// are cut.
	ctx, hard          context.Context
	cancel, hardCancel context.CancelFunc
	bgGroup            *safego.Group // discovery, primary watch, closers, stream watches

	// primMu guards the primary fields.
	primMu      sync.Mutex
	prim        *primary // nil while there is none
	primGen     uint64
	primChanged chan struct{} // closed and replaced on every change
	noPrimary   string        // why prim is nil

	// tpc is the coordinator log and its resolver (twopc.go).
	tpc twopcState

	// tablesMu serializes applying discoveries; tables is read lock-free.
	tablesMu       sync.Mutex
	tables         atomic.Pointer[tableSet]
	discovered     chan struct{} // closed after the first discovery
	discoveredOnce sync.Once
	discoverReq    chan struct{}
	discoverFail   bool // the last discovery failed (logged once)
}

// Leadership is an owner's standing in its cluster's election, when
// owners run as a standby group (fleet.Candidate is one). The owner
// serves sequences and messages only in a term that is Valid, checks it
// again before it hands out any sequence value, refuses every statement
// (and every login) as a standby, and ends its streams when a term ends.
type Leadership interface {
	// Term is the current leadership term, 0 while not leading. Terms
	// differ from one leadership to the next.
	Term() uint64
	// Valid reports whether term is still current and its lease holds.
	Valid(term uint64) bool
	// Changed is closed when Term changes from or to 0.
	Changed() <-chan struct{}
	// Leader returns the leader's address as last observed ("" when none
	// is known) and a channel closed when it changes.
	Leader() (string, <-chan struct{})
}

// Option changes how New builds the owner.
type Option func(*Owner)

// WithListen makes the owner listen on addr (gateway owner --listen)
// instead of the cluster's owner address, which may then be empty.
func WithListen(addr string) Option { return func(o *Owner) { o.listen = addr } }

// WithLeadership makes the owner one of a standby group: it serves only
// while l says it leads.
func WithLeadership(l Leadership) Option { return func(o *Owner) { o.lead = l } }

// New builds the owner of the cluster named cluster in cfg (which must be
// validated) and starts discovery of its primary. It opens no listener.
func New(cfg *config.Config, cluster string, log hclog.Logger, opts ...Option) (*Owner, error) {
	o := &Owner{}
	for _, opt := range opts {
		opt(o)
	}
	o.needAddr = o.listen == ""
	st, err := settingsFor(cfg, cluster, o.needAddr)
	if err != nil {
		return nil, err
	}
	if o.listen == "" {
		o.listen = st.cluster.Owner
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	parser, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: parserVersion})
	if err != nil {
		return nil, err
	}
	o.cluster, o.log, o.parser = cluster, log, parser
	o.now, o.rnd = time.Now, rand.Float64
	o.bgGroup, o.done, o.logins = safego.New(log), make(chan struct{}), mysqlserver.NewLoginThrottle()
	o.primChanged, o.noPrimary = make(chan struct{}), "discovery has not finished its first round"
	o.discovered, o.discoverReq = make(chan struct{}), make(chan struct{}, 1)
	o.front = mysqlserver.New(o, log)
	o.metrics = newMetrics(o)
	o.conf.Store(st)
	o.tables.Store(&tableSet{byKey: map[string]*table{}})
	o.ctx, o.cancel = context.WithCancel(context.Background())
	o.hard, o.hardCancel = context.WithCancel(context.Background())
	h := st.health
	o.health, err = healthcheck.New(healthcheck.Config{
		Interval: h.Interval, BatchSize: h.BatchSize, Timeout: h.Timeout, Rise: h.Rise, Fall: h.Fall,
		Prober:   prober{o},
		Logger:   log.Named("health"),
		Backends: o.backends,
	})
	if err != nil {
		return nil, err
	}
	o.bgGroup.Go("owner primary watch", o.watchPrimary)
	o.bgGroup.Go("owner table discovery", o.discoveryLoop)
	if o.lead != nil {
		o.bgGroup.Go("owner leadership watch", o.watchLeadership)
	}
	if st.twopc.LogCluster == cluster {
		o.bgGroup.Go("owner twopc resolver", o.resolveLoop)
	}
	return o, nil
}

// settingsFor picks the cluster's settings out of cfg; needAddr: the
// cluster must have an owner address.
func settingsFor(cfg *config.Config, cluster string, needAddr bool) (*settings, error) {
	var names []string
	for _, c := range cfg.Clusters {
		if c.Name == cluster {
			if needAddr && c.Owner == "" {
				return nil, fmt.Errorf("owner: cluster %q has no owner address: set its owner key (host:port), or give --listen (with topology.etcd, owners elect a leader and need no owner key)", cluster)
			}
			conf, preferred, err := c.BackendTLS.ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("owner: cluster %q: backend_tls: %w", cluster, err)
			}
			return &settings{cluster: c, health: cfg.Health, tls: conf, tlsPreferred: preferred, twopc: cfg.TwoPC, clusters: cfg.Clusters}, nil
		}
		names = append(names, c.Name)
	}
	return nil, fmt.Errorf("owner: no cluster is named %q (the configuration has %s)", cluster, strings.Join(names, ", "))
}

// prober probes the cluster's backends with its backend account as
// currently configured.
type prober struct{ o *Owner }

// Probe implements healthcheck.Prober.
func (p prober) Probe(ctx context.Context, b healthcheck.Backend) healthcheck.Result {
	st := p.o.conf.Load()
	return healthcheck.MySQLProber{User: st.cluster.BackendUser, Password: st.cluster.BackendPassword, Timeout: st.health.Timeout,
		TLS: st.tls, TLSPreferred: st.tlsPreferred}.Probe(ctx, b)
}

// backends lists the cluster's backends for discovery.
func (o *Owner) backends() []healthcheck.Backend {
	st := o.conf.Load()
	list := make([]healthcheck.Backend, len(st.cluster.Backends))
	for i, a := range st.cluster.Backends {
		list[i] = healthcheck.Backend{Addr: a, Cluster: o.cluster}
	}
	return list
}

// Listen opens the listener on the owner's address (WithListen's, else
// the cluster's owner address). It is apart from Serve so callers learn
// the address (port 0 in tests) first.
func (o *Owner) Listen() error {
	if err := o.front.Listen(o.listen); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	return nil
}

// Addr is the listener's address, once Listen has returned.
func (o *Owner) Addr() net.Addr { return o.front.Addr() }

// Serve accepts gateway connections until Shutdown, then returns nil.
func (o *Owner) Serve() error {
	if o.Addr() == nil {
		if err := o.Listen(); err != nil {
			return err
		}
	}
	o.log.Info("owner accepting gateways", "cluster", o.cluster, "addr", o.Addr().String())
	return o.front.Serve()
}

// Reload applies a new configuration: the cluster's backends, backend
// account, owner_tables and failover buffer. Tables are discovered again.
// The listen address and health settings keep their values until a
// restart (a warning says so).
func (o *Owner) Reload(cfg *config.Config) error {
	st, err := settingsFor(cfg, o.cluster, o.needAddr)
	if err != nil {
		return err
	}
	prev := o.conf.Load()
	if st.cluster.Owner != prev.cluster.Owner {
		o.log.Warn("the owner address changes only with a restart", "running", prev.cluster.Owner, "file", st.cluster.Owner)
	}
	if st.health != prev.health {
		o.log.Warn("health settings change only with a restart")
	}
	st.cluster.Owner, st.health = prev.cluster.Owner, prev.health
	o.conf.Store(st)
	o.health.Refresh()
	// A changed account needs new connections: treat it as a new primary.
	o.applySnapshot(o.health.Snapshot())
	o.requestDiscovery()
	return nil
}

// failoverBuffer is how long a statement waits for a primary.
func (o *Owner) failoverBuffer() time.Duration {
	if d := o.conf.Load().cluster.FailoverBuffer; d != nil {
		return *d
	}
	return 0
}

// watchPrimary follows discovery's snapshots and switches primaries.
func (o *Owner) watchPrimary() {
	for {
		snap := o.health.Snapshot()
		o.applySnapshot(snap)
		select {
		case <-snap.Changed():
		case <-o.ctx.Done():
			return
		}
	}
}

// applySnapshot makes the snapshot's primary (or its absence) current.
// A different address or account opens a new primary with the next
// generation, which invalidates every sequence block, empties the message
// caches and triggers a discovery of tables.
func (o *Owner) applySnapshot(snap *healthcheck.Snapshot) {
	if snap.Round == 0 {
		return
	}
	addr, reason := "", "the cluster is not in discovery's snapshot"
	if c := snap.Clusters[o.cluster]; c != nil {
		addr, reason = c.Primary, c.NoPrimaryReason
	}
	st := o.conf.Load()
	o.primMu.Lock()
	cur := o.prim
	o.noPrimary = reason
	same := cur == nil && addr == "" ||
		cur != nil && cur.addr == addr && cur.user == st.cluster.BackendUser && cur.pass == st.cluster.BackendPassword && cur.tls == st.tls
	if same || o.ctx.Err() != nil { // Shutdown closes the last primary itself
		o.primMu.Unlock()
		return
	}
	var next *primary
	if addr != "" {
		p, err := newPrimary(addr, o.primGen+1, st.cluster.BackendUser, st.cluster.BackendPassword, st.tls, st.tlsPreferred)
		if err != nil {
			o.primMu.Unlock()
			o.log.Error("cannot open the primary", "addr", addr, "error", err)
			return
		}
		p.fenced = o.lead != nil
		next = p
	}
	o.primGen++
	o.prim = next
	close(o.primChanged)
	o.primChanged = make(chan struct{})
	gen := o.primGen
	from := ""
	if cur != nil {
		// Closing waits for the statements still running on it. Started
		// under primMu, so Shutdown's barrier on primMu orders it before
		// the group's Wait.
		from = cur.addr
		o.bgGroup.Go("owner primary close", func() {
			if err := cur.close(); err != nil {
				o.log.Debug("closing the previous primary's connections", "addr", cur.addr, "error", err)
			}
		})
	}
	o.primMu.Unlock()

	if next == nil {
		o.log.Warn("no primary: sequence and message statements wait for one", "cluster", o.cluster, "previous", from, "reason", reason)
	} else {
		o.log.Info("primary changed: sequence blocks will be reserved again", "cluster", o.cluster, "from", from, "to", addr, "generation", gen)
	}
	for _, t := range o.tables.Load().list {
		if t.queue != nil {
			t.queue.reset()
		}
	}
	if next != nil {
		o.requestDiscovery()
	}
}

// primaryNow returns the current primary without waiting.
func (o *Owner) primaryNow() (*primary, error) {
	o.primMu.Lock()
	defer o.primMu.Unlock()
	if o.prim == nil {
		return nil, &mysqlserver.NoPrimaryError{Cluster: o.cluster, Reason: o.noPrimary}
	}
	return o.prim, nil
}

// currentPrimary returns the current primary, waiting up to the cluster's
// failover buffer for discovery to find one.
func (o *Owner) currentPrimary(ctx context.Context) (*primary, error) {
	var timeout <-chan time.Time
	for {
		o.primMu.Lock()
		p, changed, reason := o.prim, o.primChanged, o.noPrimary
		o.primMu.Unlock()
		if p != nil {
			return p, nil
		}
		if timeout == nil {
			t := time.NewTimer(o.failoverBuffer())
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, &mysqlserver.NoPrimaryError{Cluster: o.cluster, Reason: reason, Waited: o.failoverBuffer()}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// reportFailure tells discovery that the primary at addr failed a
// statement, so it is probed at once.
func (o *Owner) reportFailure(addr string, err error) {
	o.log.Debug("statement on the primary failed", "addr", addr, "error", err)
	o.health.ReportFailure(addr)
}

// requestDiscovery asks for a discovery of tables; requests coalesce.
func (o *Owner) requestDiscovery() {
	select {
	case o.discoverReq <- struct{}{}:
	default:
	}
}

// discoveryLoop discovers tables when asked, and retries failures every
// health interval while a primary is known.
func (o *Owner) discoveryLoop() {
	var retry <-chan time.Time
	for {
		select {
		case <-o.ctx.Done():
			return
		case <-o.discoverReq:
		case <-retry:
		}
		retry = nil
		err := o.discover()
		var np *mysqlserver.NoPrimaryError
		switch {
		case err == nil || errors.As(err, &np):
			// A new primary will ask again.
		case o.ctx.Err() != nil:
			return
		default:
			if !o.discoverFail {
				o.log.Warn("cannot discover the owner's tables; retrying", "error", err)
			}
			o.discoverFail = true
			retry = time.After(o.conf.Load().health.Interval)
		}
	}
}

// discover reads the owned tables from the primary and applies them.
func (o *Owner) discover() error {
	p, err := o.primaryNow()
	if err != nil {
		return err
	}
	st := o.conf.Load()
	ctx, cancel := context.WithTimeout(o.ctx, statementTimeout)
	defer cancel()
	found, warnings, err := discoverTables(ctx, p.db, st.cluster.OwnerTables.Sequences, st.cluster.OwnerTables.Messages)
	if err != nil {
		if isConnError(err) {
			o.reportFailure(p.addr, err)
		}
		return err
	}
	if o.discoverFail {
		o.log.Info("owner tables discovered again")
		o.discoverFail = false
	}
	for _, w := range warnings {
		o.log.Warn(w)
	}
	o.applyTables(found)
	o.discoveredOnce.Do(func() { close(o.discovered) })
	return nil
}

// applyTables replaces the table set. Sequences and queues of tables that
// stay are kept (with their blocks, caches and subscribers); queues of
// tables that left are closed, ending their streams with an error.
func (o *Owner) applyTables(found []foundTable) {
	o.tablesMu.Lock()
	defer o.tablesMu.Unlock()
	if o.ctx.Err() != nil {
		return
	}
	old := o.tables.Load()
	set := &tableSet{byKey: make(map[string]*table, len(found))}
	var names []string
	for i := range found {
		f := &found[i]
		t := &table{Schema: f.Schema, Name: f.Name, kind: f.kind, fence: newTableFence()}
		prev := old.lookup(f.Schema, f.Name)
		if prev != nil && prev.kind != f.kind {
			o.closeTable(prev)
			prev = nil
		}
		if prev != nil {
			t.fence = prev.fence
		}
		switch f.kind {
		case kindSequence:
			t.seq = &sequence{}
			if prev != nil {
				t.seq = prev.seq
			}
		case kindMessage:
			cols := f.streamColumns()
			defs := make([]wire.Column, len(cols))
			for i, c := range cols {
				defs[i] = c.Def
			}
			store := newSQLQueue(t, cols, o.primaryNow, o.reportFailure)
			if prev != nil {
				t.queue = prev.queue
				t.queue.reconfigure(f.opts, store, defs)
			} else {
				name := f.Schema + "." + f.Name
				t.queue = newQueue(name, f.opts, store, defs, o.log.Named("messages").With("table", name), o.now, o.rnd)
				t.queue.lead = o.leadTerm
				t.queue.start()
			}
		}
		set.byKey[t.key()] = t
		set.list = append(set.list, t)
		names = append(names, t.kind.String()+" "+f.Schema+"."+f.Name)
	}
	for _, t := range old.list {
		if set.byKey[t.key()] == nil {
			o.closeTable(t)
		}
	}
	o.tables.Store(set)
	var oldNames []string
	for _, t := range old.list {
		oldNames = append(oldNames, t.kind.String()+" "+t.Schema+"."+t.Name)
	}
	if !slices.Equal(names, oldNames) {
		o.log.Info("owner tables", "count", len(names), "tables", strings.Join(names, ", "))
	}
}

// closeTable stops a table's queue (a sequence needs nothing).
func (o *Owner) closeTable(t *table) {
	if t.queue == nil {
		return
	}
	q := t.queue
	o.bgGroup.Go("owner queue close", func() {
		q.close(wire.NewError(1146, "42S02", "Table '%s.%s' is no longer a message table the owner knows", t.Schema, t.Name))
	})
}

// lookupTable finds an owned table (nil when there is none), waiting for
// the first discovery when none has finished yet.
func (o *Owner) lookupTable(ctx context.Context, schema, name string) (*table, error) {
	if err := o.waitDiscovered(ctx); err != nil {
		return nil, err
	}
	return o.tables.Load().lookup(schema, name), nil
}

// waitDiscovered waits, up to the failover buffer, until the first
// discovery of tables has finished.
func (o *Owner) waitDiscovered(ctx context.Context) error {
	select {
	case <-o.discovered:
		return nil
	default:
	}
	t := time.NewTimer(o.failoverBuffer())
	defer t.Stop()
	select {
	case <-o.discovered:
		return nil
	case <-t.C:
		o.primMu.Lock()
		reason := o.noPrimary
		if o.prim != nil {
			reason = "the owner could not read its table list from the primary yet"
		}
		o.primMu.Unlock()
		return &mysqlserver.NoPrimaryError{Cluster: o.cluster, Reason: reason, Waited: o.failoverBuffer()}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops accepting, ends every stream (with error 1053), closes
// idle connections at once and lets statements in flight finish until
// ctx ends; then it cuts the rest and returns an error saying so. It
// closes discovery and the primary's connections last. Later calls wait
// for the first and return nil.
func (o *Owner) Shutdown(ctx context.Context) error {
	if !o.shutting.CompareAndSwap(false, true) {
		<-o.done
		return nil
	}
	defer close(o.done)
	o.cancel()
	cut, err := o.front.Shutdown(ctx)
	o.hardCancel()
	errs := []error{err}
	if cut > 0 {
		errs = append(errs, fmt.Errorf("owner shutdown: %d connections still busy after the drain timeout were closed", cut))
	}
	o.tablesMu.Lock()
	set := o.tables.Load()
	o.tables.Store(&tableSet{byKey: map[string]*table{}})
	o.tablesMu.Unlock()
	for _, t := range set.list {
		if t.queue != nil {
			t.queue.close(wire.NewError(1053, "08S01", "Server shutdown in progress"))
		}
	}
	errs = append(errs, o.health.Close())
	// ctx is cancelled: no new primary and no new close starts after this.
	o.primMu.Lock()
	p := o.prim
	o.prim = nil
	o.primMu.Unlock()
	o.bgGroup.Wait()
	if p != nil {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}
