package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/fleet"
	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/ioloop"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
	"vitess.io/vitess/go/vt/sqlparser"
)

// Server accepts MySQL client connections and serves them through the
// clusters' pools. Build it with New, run Serve, stop it with Shutdown.
type Server struct {
	cfg        *config.Config
	log        hclog.Logger
	classifier *querypath.Classifier
	// parser rewrites INSERTs into auto_increment tables.
	parser *sqlparser.Parser
	// users may log in; a reload swaps the map.
	users atomic.Pointer[map[string]config.User]
	// clusters never change after New; clusterNames keeps their order.
	clusters     map[string]*cluster
	clusterNames []string
	// dbs maps databases to clusters (clusters[].databases); nil when
	// every statement stays on its session's cluster.
	dbs *dbMap
	// crashHook is the tests' hook at a twopc commit's points
	// (WithCrashHook); nil in every normal run.
	crashHook func(point string)
	health    *healthcheck.Observer
	reloadMu  sync.Mutex
	// tls is what the gateway offers clients; a reload swaps it.
	tls atomic.Pointer[clientTLS]
	// auth checks client passwords and holds caching_sha2_password's
	// cache and RSA key.
	auth *wire.Authenticator

	// front is the MySQL server skeleton: listener, connection ids, the
	// registry of sessions, drain-then-cut shutdown.
	front *mysqlserver.Server
	// group holds the goroutines sessions start besides their own.
	group *safego.Group
	// cutter cuts the connections of backends discovery finds
	// unreachable (silentcut.go).
	cutter atomic.Pointer[silentCutter]
	// loops run the sessions with io_loops (loop.go); nil: goroutines.
	// Set by Serve, read by scrapes.
	loops atomic.Pointer[[]*ioloop.Loop]
	// loopWaits are each loop's queues of sessions waiting for a pooled
	// connection (connwait.go); set before the first session starts.
	loopWaits atomic.Pointer[map[*ioloop.Loop]loopWaits]
	// stateIDs numbers session states so a backend connection knows
	// cheaply whether it already carries a session's state.
	stateIDs atomic.Uint64
	pinStats pinStats
	// refusals count statements refused for want of a primary.
	refusals struct{ splitBrain, noPrimary atomic.Uint64 }
	// metrics is the Prometheus registry, the hot-path counters and the
	// status page's sampler; nil records nothing.
	metrics *metrics

	// mu guards userConns.
	mu sync.Mutex
	// userConns counts sessions per logged-in user, for max_connections.
	userConns map[string]int
	// guard limits connections per client address; logins paces failed
	// logins per address and per user name.
	guard  *addrGuard
	logins *mysqlserver.LoginThrottle
	// shares are the users' max_pool_share semaphores.
	shares poolShares
	// grants remembers the privilege checks of owner statements.
	grants grantCache
	// privs remembers the global grants of users' own backend accounts
	// (privileges.go).
	privs privCache
	// accts lets MariaDB's own accounts log in (mariadbaccounts.go).
	accts *mdbAccounts
	// fleet reports the gateway's place in a fleet (topology.etcd); nil
	// without one.
	fleet atomic.Pointer[func() fleet.Status]
	// insight is the statement digests and query rules (insight.go).
	insight   serverInsight
	closeOnce sync.Once
}

// SetFleetStatus makes the status page show the fleet the gateway belongs
// to, as status reports it.
func (s *Server) SetFleetStatus(status func() fleet.Status) { s.fleet.Store(&status) }

// Option changes how New builds the server.
type Option func(*options)

type options struct {
	ownerLeader func(cluster string) forward.Leader
	crashHook   func(point string)
}

// WithOwnerLeaders makes the clusters without an owner address forward
// their owner statements to the leader of their owners' election, as
// leader(cluster) follows it (topology.etcd: fleet.Election.Observe).
func WithOwnerLeaders(leader func(cluster string) forward.Leader) Option {
	return func(o *options) { o.ownerLeader = leader }
}

// New builds a server for cfg. It opens no sockets; pools start warming up.
func New(cfg *config.Config, log hclog.Logger, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cl, err := querypath.New()
	if err != nil {
		return nil, err
	}
	ct, err := loadClientTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	rsaKey, err := cfg.Auth.LoadRSAKey()
	if err != nil {
		return nil, err
	}
	auth, err := wire.NewAuthenticator(rsaKey, 0)
	if err != nil {
		return nil, err
	}
	parser, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: "10.11.0-MariaDB"})
	if err != nil {
		return nil, err
	}
	s := &Server{
		parser:     parser,
		auth:       auth,
		cfg:        cfg,
		log:        log,
		classifier: cl,
		clusters:   map[string]*cluster{},
		userConns:  map[string]int{},
		guard:      newAddrGuard(),
		logins:     mysqlserver.NewLoginThrottle(),
		group:      safego.New(log),
	}
	s.front = mysqlserver.New(s, log)
	s.accts = s.newMDBAccounts(cfg.MariaDBAccounts)
	s.tls.Store(ct)
	s.metrics = newMetrics(s)
	s.setUsers(cfg.Users)
	if err := s.insight.configure(cfg); err != nil { // query_stats, query_rules (insight.go)
		return nil, err
	}
	for _, c := range cfg.Clusters {
		var leader forward.Leader
		if c.Owner == "" && o.ownerLeader != nil {
			leader = o.ownerLeader(c.Name)
		}
		cl, err := newCluster(c, log.Named("cluster").With("cluster", c.Name), cfg.Health.Interval, cfg.FromEtcd(), leader, s.classifier.HotRow)
		if err != nil {
			s.closeClusters()
			return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		s.clusters[c.Name] = cl
		s.clusterNames = append(s.clusterNames, c.Name)
	}
	s.dbs = newDBMap(cfg, s.clusters)
	s.crashHook = o.crashHook
	h := cfg.Health
	s.health, err = healthcheck.New(healthcheck.Config{
		Interval:   h.Interval,
		BatchSize:  h.BatchSize,
		Timeout:    h.Timeout,
		Rise:       h.Rise,
		Fall:       h.Fall,
		Prober:     clusterProber{s: s, timeout: h.Timeout},
		Logger:     log.Named("health"),
		Backends:   s.healthBackends,
		MaxLatency: s.maxReplicaLatency,
	})
	if err != nil {
		s.closeClusters()
		return nil, err
	}
	for _, c := range s.clusters {
		c.health.Store(s.health)
	}
	s.startStatusSampler()
	return s, nil
}

func (s *Server) setUsers(list []config.User) {
	m := make(map[string]config.User, len(list))
	for _, u := range list {
		m[u.User] = u
	}
	s.users.Store(&m)
}

// pruneUserPools closes the pools of backend accounts no user of users
// logs in with any more (users[].backend_user or its password changed).
func (s *Server) pruneUserPools(users []config.User) {
	accounts := map[[2]string]bool{}
	for _, u := range users {
		if u.BackendUser != "" {
			accounts[[2]string{u.BackendUser, u.BackendPassword}] = true
		}
	}
	keep := func(k poolKey) bool { return k.version != 0 || accounts[[2]string{k.user, k.password}] }
	for _, name := range s.clusterNames {
		for _, be := range *s.clusters[name].backends.Load() {
			be.prune(keep)
		}
	}
}

// user returns the configured user named name.
func (s *Server) user(name string) (config.User, bool) {
	u, ok := (*s.users.Load())[name]
	return u, ok
}

// healthBackends lists every backend of every cluster for discovery.
func (s *Server) healthBackends() []healthcheck.Backend {
	var list []healthcheck.Backend
	for _, name := range s.clusterNames {
		for addr := range *s.clusters[name].backends.Load() {
			list = append(list, healthcheck.Backend{Addr: addr, Cluster: name})
		}
	}
	return list
}

// maxReplicaLatency is the named cluster's max_replica_latency, read at
// each probe result so that a reload applies from the next probe on.
func (s *Server) maxReplicaLatency(cluster string) time.Duration {
	if c := s.clusters[cluster]; c != nil {
		return c.conf.Load().MaxReplicaLatency
	}
	return 0
}

// clusterProber probes each backend with its cluster's backend account,
// once the backend's probe room is open (a fleet-wide cap's budget holds
// the probe's connection); until then, within the probe's timeout, it
// declines (healthcheck.ErrNotProbed).
type clusterProber struct {
	s       *Server
	timeout time.Duration
}

// Probe implements healthcheck.Prober.
func (p clusterProber) Probe(ctx context.Context, b healthcheck.Backend) healthcheck.Result {
	c := p.s.clusters[b.Cluster]
	if be := c.backend(b.Addr); be != nil && !be.probeRoom.wait(ctx) {
		return healthcheck.Result{Err: fmt.Errorf("%w: waiting for this gateway's share of max_backend_connections to hold the probe's connection", healthcheck.ErrNotProbed)}
	}
	conf, bt := c.conf.Load(), c.tls.Load()
	return healthcheck.MySQLProber{
		User: conf.BackendUser, Password: conf.BackendPassword, Timeout: p.timeout,
		TLS: bt.conf, TLSPreferred: bt.preferred,
	}.Probe(ctx, b)
}

// Health returns discovery's latest snapshot: every backend's state and
// role. It must not be modified.
func (s *Server) Health() *healthcheck.Snapshot { return s.health.Snapshot() }

// SetDiscoveryShare makes discovery's regular rounds share their probes
// with the fleet (healthcheck.Share); targeted probes stay local. A round
// follows soon, so a gateway that joins a fleet takes the results the
// others published instead of waiting an interval.
func (s *Server) SetDiscoveryShare(sh healthcheck.Share) {
	s.health.SetShare(sh)
	s.health.Refresh()
}

// Reload applies a new configuration to the running gateway without
// dropping clients: users, each cluster's backends (new ones are probed
// and get pools; removed ones stop taking statements, their pools close
// once the statements in flight end), pool sizes and timeouts, and the
// cluster settings for routing (replica_reads, lags, buffers,
// auto_increment), and TLS: the client-side certificate, key, CA and
// require_secure_transport, and each cluster's backend_tls (new
// connections use them; open ones keep their TLS session). Listen
// addresses, limits, health settings and the owner address keep their
// values until a restart. Clusters cannot be added or removed, and a TLS
// file that cannot be read or parsed refuses the reload: nothing changes.
// A cluster whose backends cannot be applied keeps its old configuration;
// the others and the users are still applied, and the error names the
// cluster.
func (s *Server) Reload(cfg *config.Config) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if len(cfg.Clusters) != len(s.clusters) {
		return fmt.Errorf("reload: clusters cannot be added or removed while running (have %d, file has %d); restart the gateway", len(s.clusters), len(cfg.Clusters))
	}
	for _, c := range cfg.Clusters {
		if s.clusters[c.Name] == nil {
			return fmt.Errorf("reload: cluster %q is not running; clusters cannot be added or renamed while running, restart the gateway", c.Name)
		}
	}
	// TLS files first: any that fails refuses the whole reload.
	ct, err := loadClientTLS(cfg.TLS)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if err := s.insight.configure(cfg); err != nil { // query_stats, query_rules (insight.go)
		return fmt.Errorf("reload: %w", err)
	}
	bts := make(map[string]*backendTLS, len(cfg.Clusters))
	for _, c := range cfg.Clusters {
		bt, err := loadBackendTLS(c)
		if err != nil {
			return fmt.Errorf("reload: cluster %s: %w", c.Name, err)
		}
		bts[c.Name] = bt
	}
	s.tls.Store(ct)
	var errs []error
	for _, c := range cfg.Clusters {
		cl := s.clusters[c.Name]
		before, beforeTLS := cl.conf.Load(), cl.tls.Load()
		cl.conf.Store(&c)
		cl.tls.Store(bts[c.Name])
		removed, err := cl.setBackends(c.Backends)
		if err != nil {
			cl.conf.Store(before)
			cl.tls.Store(beforeTLS)
			errs = append(errs, fmt.Errorf("reload: cluster %s: %w", c.Name, err))
			continue
		}
		for _, be := range removed {
			s.log.Info("backend removed by reload; its pool drains and closes", "cluster", c.Name, "backend", be.addr)
			be.close()
		}
		if err := cl.applyPoolConfig(); err != nil {
			errs = append(errs, fmt.Errorf("reload: cluster %s: pool settings: %w", c.Name, err))
		}
		cl.applyBudgetConfig()
		cl.setAutoIncrement(c.AutoIncrement)
		cl.forgetKeys()
		if c.Owner != before.Owner {
			s.log.Warn("the owner address changes only with a restart", "cluster", c.Name, "running", before.Owner, "file", c.Owner)
		}
		if !slices.Equal(c.Databases, before.Databases) {
			s.log.Warn("clusters[].databases changes only with a restart", "cluster", c.Name, "running", before.Databases, "file", c.Databases)
		}
	}
	s.setUsers(cfg.Users)
	s.pruneUserPools(cfg.Users)
	s.accts.setConfig(cfg.MariaDBAccounts)
	s.shares.reset()
	s.health.Refresh()
	return errors.Join(errs...)
}

// Listen opens the client listener on cfg.Listen. It is separate from
// Serve so callers learn the address (port 0 in tests) before serving.
func (s *Server) Listen() error { return s.front.Listen(s.cfg.Listen) }

// Addr is the listener's address, once Listen has returned.
func (s *Server) Addr() net.Addr { return s.front.Addr() }

// Serve accepts clients until Shutdown. It returns nil after a shutdown.
func (s *Server) Serve() error {
	if s.Addr() == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	s.learnGreeting()
	s.startLoops()
	s.startSilentCutter()
	s.startMDBAccounts()
	s.log.Info("accepting MySQL clients", "addr", s.Addr().String(), "server_version", s.serverVersion())
	return s.front.Serve()
}

// closing reports whether Shutdown has begun.
func (s *Server) closing() bool { return s.front.Closing() }

// learnGreeting waits briefly for discovery's first round and a first
// backend connection, so the handshake can announce the backend's version
// and collation.
func (s *Server) learnGreeting() {
	deadline := time.NewTimer(greetingWait)
	defer deadline.Stop()
	snap := s.health.Snapshot()
	for snap.Round == 0 {
		select {
		case <-snap.Changed():
			snap = s.health.Snapshot()
		case <-deadline.C:
			s.log.Warn("discovery has not finished a round; serving anyway")
			return
		}
	}
	for _, name := range s.clusterNames {
		c := s.clusters[name]
		sc := snap.Cluster(name)
		addr := ""
		switch {
		case sc == nil:
		case sc.Primary != "":
			addr = sc.Primary
		case len(sc.Replicas) > 0:
			addr = sc.Replicas[0]
		}
		be := c.backend(addr)
		if be == nil {
			s.log.Warn("no backend serving at start; serving anyway", "cluster", name)
			continue
		}
		p, err := be.pool(false)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), greetingWait)
		l, err := p.Acquire(ctx)
		cancel()
		if err != nil {
			s.log.Warn("backend not reachable at start; serving anyway", "cluster", name, "backend", addr, "error", err)
			continue
		}
		l.Release()
	}
}

// serverVersion is the version string announced in the handshake.
func (s *Server) serverVersion() string {
	if s.cfg.ServerVersion != "" {
		return s.cfg.ServerVersion
	}
	for _, name := range s.clusterNames {
		if g := s.clusters[name].greeting.Load(); g != nil {
			return g.ServerVersion
		}
	}
	return "5.5.5-10.11.0-MariaDB-directgate"
}

// serverCollation is the collation announced in the handshake: the
// backend's own, so clients never pick one the backend lacks.
func (s *Server) serverCollation() byte {
	for _, name := range s.clusterNames {
		if g := s.clusters[name].greeting.Load(); g != nil && g.Collation != 0 {
			return g.Collation
		}
	}
	return wire.DefaultCollation
}

// Shutdown stops accepting, closes idle sessions at once, lets sessions
// with a statement in flight (or a transaction open) finish it, and after
// ctx ends closes the rest. Pools are closed last. It returns an error
// when sessions had to be cut.
func (s *Server) Shutdown(ctx context.Context) error {
	cut, err := s.front.Shutdown(ctx)
	s.group.Wait()
	s.closeOnce.Do(func() {
		s.closeLoops() // no session runs on them any more
		s.closeClusters()
	})
	if cut > 0 {
		err = errors.Join(err, fmt.Errorf("shutdown: %d sessions still busy after the drain timeout were closed", cut))
	}
	return err
}

func (s *Server) closeClusters() {
	s.stopStatusSampler()
	s.stopSilentCutter()
	s.stopMDBAccounts()
	if s.health != nil {
		s.health.Close()
	}
	for _, c := range s.clusters {
		c.close()
	}
}

// forEachSession calls fn for every live session.
func (s *Server) forEachSession(fn func(*Session)) {
	s.front.Each(func(c mysqlserver.Conn) { fn(c.(*Session)) })
}

// session returns the live session with id, or nil.
func (s *Server) session(id uint32) *Session {
	ss, _ := s.front.Lookup(id).(*Session)
	return ss
}

// unregister gives up the session's count against its user's
// max_connections.
func (s *Server) unregister(ss *Session) {
	ss.leaveAccount()
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.counted != "" {
		s.userConns[ss.counted]--
		if s.userConns[ss.counted] <= 0 {
			delete(s.userConns, ss.counted)
		}
	}
}

// admitUser counts the session as one of user's connections, or refuses
// it with error 1203 when the user's max_connections is reached. A session
// switching users (COM_CHANGE_USER) gives up its old count.
func (s *Server) admitUser(ss *Session, u config.User) *wire.SQLError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.MaxConnections > 0 && ss.counted != u.User && s.userConns[u.User] >= u.MaxConnections {
		return wire.NewError(erTooManyUserConnections, "42000", "User %s already has more than 'max_user_connections' active connections (max_connections %d in the gateway config)", u.User, u.MaxConnections)
	}
	if ss.counted != "" {
		s.userConns[ss.counted]--
		if s.userConns[ss.counted] <= 0 {
			delete(s.userConns, ss.counted)
		}
	}
	ss.counted = u.User
	s.userConns[u.User]++
	return nil
}
