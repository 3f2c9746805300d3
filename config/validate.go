package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// validators are Validate's checks, one per key group, in the order their
// errors are reported. A new key group adds its check here.
var validators = []func(*Config, *problems){
	checkListen,
	checkConnections,
	checkClusterLimits,
	checkSessionTimeouts,
	checkUserLimits,
	checkAuth,
	checkHealth,
	checkEtcd,
	checkClusters,
	checkUsers,
	checkTwoPC,
	checkQueryInsight,
	func(c *Config, p *problems) { c.MariaDBAccounts.validate(c.Clusters, p.bad) },
}

// checkQueryInsight checks query_stats and query_rules (queryinsight.go).
func checkQueryInsight(c *Config, p *problems) {
	*p = append(*p, c.validateQueryInsight()...)
}

// Validate checks the configuration and names the first bad key. It runs
// every check and returns what they all found, joined.
func (c *Config) Validate() error {
	var p problems
	for _, check := range validators {
		check(c, &p)
	}
	return errors.Join(p...)
}

// problems collects the errors the checks find, in the order found.
type problems []error

// bad records that key is wrong: "config: key: " and the formatted reason.
func (p *problems) bad(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
}

// add records err unless it is nil.
func (p *problems) add(err error) {
	if err != nil {
		*p = append(*p, err)
	}
}

// nonNegative records that key must not be negative when negative is
// true; note, if any, says what its zero means.
func (p *problems) nonNegative(key string, negative bool, note ...string) {
	if negative {
		p.bad(key, "must not be negative%s", strings.Join(note, ""))
	}
}

// addr checks that key's addr is host:port.
func (p *problems) addr(key, addr string) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.bad(key, "%q is not host:port", addr)
	}
}

// qualified checks that key's name is db.table.
func (p *problems) qualified(key, name string) {
	if i := strings.IndexByte(name, '.'); i <= 0 || i == len(name)-1 || strings.Count(name, ".") != 1 {
		p.bad(key, "%q is not db.table", name)
	}
}

// pendingTopology reports whether the file leaves clusters and users to
// etcd: with topology.etcd and nothing applied from etcd yet, the file has
// no clusters or users on purpose (WithTopology checks the merge).
func (c *Config) pendingTopology() bool {
	return c.FromEtcd() && len(c.Clusters) == 0 && len(c.Users) == 0
}

// clusterNames is the set of the clusters' names.
func (c *Config) clusterNames() map[string]bool {
	names := map[string]bool{}
	for _, cl := range c.Clusters {
		names[cl.Name] = true
	}
	return names
}

// checkListen checks listen, http_listen (with the http section) and log.
func checkListen(c *Config, p *problems) {
	p.addr("listen", c.Listen)
	p.add(c.CheckHTTPListen("http_listen", c.HTTPListen))
	switch strings.ToLower(c.Log.Level) {
	case "trace", "debug", "info", "warn", "error":
	default:
		p.bad("log.level", "%q is not one of trace, debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		p.bad("log.format", "%q is not text or json", c.Log.Format)
	}
}

// checkConnections checks the client connections' limits and timeouts and
// the threads that serve them: max_allowed_packet, drain_timeout,
// max_client_connections, max_connections_per_address, handshake_timeout,
// write_timeout, io_loops and gomaxprocs.
func checkConnections(c *Config, p *problems) {
	if c.MaxAllowedPacket < 1024 || c.MaxAllowedPacket > 1<<30 {
		p.bad("max_allowed_packet", "%d is outside 1024..1073741824", c.MaxAllowedPacket)
	}
	p.nonNegative("drain_timeout", c.DrainTimeout < 0)
	if c.MaxClientConnections < 1 {
		p.bad("max_client_connections", "must be at least 1")
	}
	p.nonNegative("max_connections_per_address", c.MaxConnectionsPerAddress < 0)
	p.nonNegative("handshake_timeout", c.HandshakeTimeout < 0)
	p.nonNegative("write_timeout", *c.WriteTimeout < 0)
	if c.IOLoops < 0 || c.IOLoops > maxIOLoops {
		p.bad("io_loops", "must be 0 (a goroutine per session) to %d", maxIOLoops)
	}
	if c.GoMaxProcs < 0 {
		p.bad("gomaxprocs", "must be 0 (Go's default: every CPU) or a positive number of threads")
	}
}

// checkClusterLimits checks each cluster's caps on backend statements and
// connections.
func checkClusterLimits(c *Config, p *problems) {
	for i, cl := range c.Clusters {
		if cl.MaxBackendStatements < 0 {
			p.bad(fmt.Sprintf("clusters[%d].max_backend_statements", i), "must not be negative")
		}
		if cl.MaxBackendConnections < 0 || cl.MaxBackendConnections == 1 {
			p.bad(fmt.Sprintf("clusters[%d].max_backend_connections", i), "must be 0 (no cap) or at least 2 (discovery's probe and one pooled connection)")
		}
	}
}

// checkSessionTimeouts checks idle_transaction_timeout and
// local_infile_timeout.
func checkSessionTimeouts(c *Config, p *problems) {
	p.nonNegative("idle_transaction_timeout", *c.IdleTransactionTimeout < 0)
	if *c.LocalInfileTimeout <= 0 {
		p.bad("local_infile_timeout", "must be positive")
	}
}

// checkUserLimits checks each user's max_pool_share and priority.
func checkUserLimits(c *Config, p *problems) {
	for i, u := range c.Users {
		if u.MaxPoolShare < 0 || u.MaxPoolShare > 1 {
			p.bad(fmt.Sprintf("users[%d].max_pool_share", i), "%v is not a share between 0 and 1", u.MaxPoolShare)
		}
		if u.Priority != nil && (*u.Priority < 0 || *u.Priority > 100) {
			p.bad(fmt.Sprintf("users[%d].priority", i), "%d is not between 0 and 100", *u.Priority)
		}
	}
}

// checkAuth checks auth_failure_limit, auth_failure_delay and the tls and
// auth sections.
func checkAuth(c *Config, p *problems) {
	p.nonNegative("auth_failure_limit", c.AuthFailureLimit < 0)
	if *c.AuthFailureDelay < 0 || *c.AuthFailureDelay > time.Minute {
		p.bad("auth_failure_delay", "must be between 0 and 1m")
	}
	c.TLS.validate("tls", p.bad)
	c.Auth.validate("auth", p.bad)
}

// checkHealth checks the health section.
func checkHealth(c *Config, p *problems) {
	if c.Health.Interval < 10*time.Millisecond {
		p.bad("health.interval", "must be at least 10ms")
	}
	if c.Health.BatchSize < 1 {
		p.bad("health.batch_size", "must be at least 1")
	}
	if c.Health.Timeout <= 0 {
		p.bad("health.timeout", "must be positive")
	}
	if c.Health.Rise < 1 {
		p.bad("health.rise", "must be at least 1")
	}
	if c.Health.Fall < 1 {
		p.bad("health.fall", "must be at least 1")
	}
}

// checkEtcd checks topology.etcd when it is set.
func checkEtcd(c *Config, p *problems) {
	if c.Topology.Etcd != nil {
		c.Topology.Etcd.validate("topology.etcd", p.bad)
	}
}

// clustersSeen is what the clusters checked so far claim: their names,
// and which key lists each backend and database.
type clustersSeen struct {
	names     map[string]bool
	backends  map[string]string
	databases map[string]string
}

// checkClusters checks that there is a cluster (unless etcd brings them)
// and each cluster's keys, one group at a time.
func checkClusters(c *Config, p *problems) {
	if len(c.Clusters) == 0 && !c.pendingTopology() {
		p.bad("clusters", "at least one cluster is required")
	}
	seen := clustersSeen{names: map[string]bool{}, backends: map[string]string{}, databases: map[string]string{}}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		k := fmt.Sprintf("clusters[%d]", i)
		cl.checkIdentity(k, &seen, p)
		cl.checkRouting(k, p)
		cl.checkOwner(k, p)
		cl.checkProtections(k, p)
		cl.checkOwnerTables(k, p)
		cl.BackendTLS.validate(k+".backend_tls", p.bad)
		if len(cl.AutoIncrement) > 0 && cl.Owner == "" && !c.FromEtcd() {
			p.bad(k+".auto_increment", "needs an owner: set %s.owner (or elect owners with topology.etcd)", k)
		}
		cl.Pool.validate(k+".pool", p)
	}
}

// checkIdentity checks the cluster k's name, backend account, backends
// and databases, none of which another cluster may have claimed.
func (cl *Cluster) checkIdentity(k string, seen *clustersSeen, p *problems) {
	if cl.Name == "" {
		p.bad(k+".name", "required")
	} else if seen.names[cl.Name] {
		p.bad(k+".name", "%q is used twice", cl.Name)
	}
	seen.names[cl.Name] = true
	if cl.BackendUser == "" {
		p.bad(k+".backend_user", "required")
	}
	if _, hash := nativeHash(cl.BackendPassword); hash {
		p.bad(k+".backend_password", "is a password hash: the gateway must send the clear text to the backend")
	}
	if len(cl.Backends) == 0 {
		p.bad(k+".backends", "at least one backend is required")
	}
	for j, b := range cl.Backends {
		bk := fmt.Sprintf("%s.backends[%d]", k, j)
		p.addr(bk, b)
		if prev, dup := seen.backends[b]; dup {
			p.bad(bk, "%q is already listed as %s: a backend belongs to one cluster, once", b, prev)
		}
		seen.backends[b] = bk
	}
	for j, db := range cl.Databases {
		dk := fmt.Sprintf("%s.databases[%d]", k, j)
		if db == "" || strings.ContainsAny(db, "`./@") {
			p.bad(dk, "%q is not a database name", db)
		} else if prev, dup := seen.databases[db]; dup {
			p.bad(dk, "%q is already listed as %s: a database belongs to one cluster, once", db, prev)
		}
		seen.databases[db] = dk
	}
}

// checkRouting checks the cluster k's replica reads and failover keys:
// max_replica_lag, max_replica_latency, causal_timeout, failover_buffer,
// stickiness_threshold and hot_limit.
func (cl *Cluster) checkRouting(k string, p *problems) {
	p.nonNegative(k+".max_replica_lag", *cl.MaxReplicaLag < 0)
	p.nonNegative(k+".max_replica_latency", cl.MaxReplicaLatency < 0)
	p.nonNegative(k+".causal_timeout", *cl.CausalTimeout < 0)
	p.nonNegative(k+".failover_buffer", *cl.FailoverBuffer < 0)
	if cl.StickinessThreshold < 1 {
		p.bad(k+".stickiness_threshold", "must be at least 1 (a ratio to the best replica's latency score)")
	}
	p.nonNegative(k+".hot_limit", *cl.HotLimit < 0)
}

// checkOwner checks the cluster k's owner, owner_pool_size and
// owner_timeout.
func (cl *Cluster) checkOwner(k string, p *problems) {
	if cl.Owner != "" {
		p.addr(k+".owner", cl.Owner)
	}
	if cl.OwnerPoolSize < 1 {
		p.bad(k+".owner_pool_size", "must be at least 1")
	}
	p.nonNegative(k+".owner_timeout", cl.OwnerTimeout < 0)
}

// checkProtections checks the cluster k's hot_row, throttle,
// consolidation and shedding.
func (cl *Cluster) checkProtections(k string, p *problems) {
	p.nonNegative(k+".hot_row.max_concurrency", cl.HotRow.MaxConcurrency < 0, " (0 turns hot-row protection off)")
	p.nonNegative(k+".hot_row.max_queue", *cl.HotRow.MaxQueue < 0)
	p.nonNegative(k+".hot_row.max_wait", cl.HotRow.MaxWait < 0)
	p.nonNegative(k+".throttle.max_lag", cl.Throttle.MaxLag < 0, " (0 turns throttling off)")
	p.nonNegative(k+".throttle.max_delay", cl.Throttle.MaxDelay < 0)
	p.nonNegative(k+".consolidation.max_result_bytes", cl.Consolidation.MaxResultBytes < 0)
	p.nonNegative(k+".shedding.max_in_flight", cl.Shedding.MaxInFlight < 0, " (0: no limit)")
	p.nonNegative(k+".shedding.max_queue_wait", cl.Shedding.MaxQueueWait < 0, " (0: no limit)")
	p.nonNegative(k+".pipelining.connections", cl.Pipelining.Connections < 0, " (0 turns pipelining off)")
	p.nonNegative(k+".pipelining.late_after", cl.Pipelining.LateAfter < 0)
	if w := cl.Pipelining.Warnings; w != PipeWarningsListed && w != PipeWarningsCounted {
		p.bad(k+".pipelining.warnings", "is %q; use %q (SHOW WARNINGS lists every pipelined read's warnings) or %q (faster; a read's warnings list may be lost, the counts stay right)", w, PipeWarningsListed, PipeWarningsCounted)
	}
	if cl.Pipelining.Connections >= cl.Pool.Size && cl.Pool.Size > 0 {
		p.bad(k+".pipelining.connections", "must be below pool.size (%d): the pipelines take their connections from the pool", cl.Pool.Size)
	}
}

// checkOwnerTables checks the cluster k's owner_tables and auto_increment
// entries (checkClusters checks that auto_increment has an owner).
func (cl *Cluster) checkOwnerTables(k string, p *problems) {
	for j, t := range cl.OwnerTables.Sequences {
		p.qualified(fmt.Sprintf("%s.owner_tables.sequences[%d]", k, j), t)
	}
	for j, t := range cl.OwnerTables.Messages {
		p.qualified(fmt.Sprintf("%s.owner_tables.messages[%d]", k, j), t)
	}
	for j, a := range cl.AutoIncrement {
		ak := fmt.Sprintf("%s.auto_increment[%d]", k, j)
		p.qualified(ak+".table", a.Table)
		p.qualified(ak+".sequence", a.Sequence)
		if a.Column == "" {
			p.bad(ak+".column", "required")
		}
	}
}

// validate checks a cluster's pool, the keys under k.
func (pl Pool) validate(k string, p *problems) {
	if pl.Size < 1 {
		p.bad(k+".size", "must be at least 1")
	}
	if *pl.MinIdle < 0 || *pl.MinIdle > pl.Size {
		p.bad(k+".min_idle", "must be between 0 and pool.size (%d)", pl.Size)
	}
	if pl.MaxDials < 1 {
		p.bad(k+".max_dials", "must be at least 1")
	}
	if pl.Order != PoolOrderRoundRobin && pl.Order != PoolOrderLIFO {
		p.bad(k+".order", "is %q: must be %s or %s", pl.Order, PoolOrderRoundRobin, PoolOrderLIFO)
	}
	p.nonNegative(k+".idle_timeout", *pl.IdleTimeout < 0)
	p.nonNegative(k+".max_lifetime", *pl.MaxLifetime < 0)
	p.nonNegative(k+".acquire_timeout", pl.AcquireTimeout < 0)
	p.nonNegative(k+".dial_timeout", pl.DialTimeout < 0)
}

// checkUsers checks that there is a user (unless etcd brings them) and
// each user's name, connections, backend account, cluster and
// transaction_mode.
func checkUsers(c *Config, p *problems) {
	if len(c.Users) == 0 && !c.pendingTopology() && !c.MariaDBAccounts.Enabled {
		p.bad("users", "at least one user is required (or mariadb_accounts.enabled)")
	}
	names := c.clusterNames()
	users := map[string]bool{}
	for i, u := range c.Users {
		k := fmt.Sprintf("users[%d]", i)
		if u.User == "" {
			p.bad(k+".user", "required")
		} else if users[u.User] {
			p.bad(k+".user", "%q is listed twice", u.User)
		}
		users[u.User] = true
		if u.MaxConnections < 0 {
			p.bad(k+".max_connections", "must not be negative")
		}
		if u.BackendPassword != "" && u.BackendUser == "" {
			p.bad(k+".backend_password", "needs %s.backend_user", k)
		}
		if _, hash := nativeHash(u.BackendPassword); hash {
			p.bad(k+".backend_password", "is a password hash: the gateway must send the clear text to the backend")
		}
		if u.Cluster != "" && !names[u.Cluster] {
			p.bad(k+".cluster", "no cluster is named %q", u.Cluster)
		}
		switch u.TransactionMode {
		case TxnSingle, TxnMulti, TxnTwoPC:
		default:
			p.bad(k+".transaction_mode", "%q is not single, multi or twopc", u.TransactionMode)
		}
	}
}

// checkTwoPC checks the twopc section and that the users in twopc mode
// have an owner to keep the coordinator log (unless etcd elects owners).
func checkTwoPC(c *Config, p *problems) {
	if c.TwoPC.LogCluster != "" && len(c.Clusters) > 0 && !c.clusterNames()[c.TwoPC.LogCluster] {
		p.bad("twopc.log_cluster", "no cluster is named %q", c.TwoPC.LogCluster)
	}
	if c.TwoPC.ResolveAfter < 0 {
		p.bad("twopc.resolve_after", "must be positive")
	}
	for i, u := range c.Users {
		if u.TransactionMode != TxnTwoPC || c.FromEtcd() {
			continue
		}
		for _, cl := range c.Clusters {
			if cl.Name == c.TwoPC.LogCluster && cl.Owner == "" {
				p.bad(fmt.Sprintf("users[%d].transaction_mode", i), "twopc needs an owner of cluster %s (twopc.log_cluster), which keeps the coordinator log: set its owner key", cl.Name)
			}
		}
	}
}

// CheckHTTPListen checks an HTTP listen address against the http section,
// naming it key in errors (http_listen for the gateway's, --http-listen
// for gateway owner's): host:port; http.token when the address is
// reachable from other machines, unless http.insecure; http.cert and
// http.key both or neither. "off" and "" (no HTTP) pass.
func (c *Config) CheckHTTPListen(key, addr string) error {
	if addr == "off" || addr == "" {
		return nil
	}
	var p problems
	host, _, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		p.bad(key, "%q is not host:port", addr)
	case !isLoopback(host) && c.HTTP.Token == "" && !c.HTTP.Insecure:
		p.bad(key, "%q is reachable from other machines and http.token is not set: set http.token (or http.token_file, http.token_env), listen on 127.0.0.1, or set http.insecure: true to serve the endpoints (the gateway's show sessions and topology) to anyone", addr)
	}
	if (c.HTTP.Cert == "") != (c.HTTP.Key == "") {
		p.bad("http", "cert and key go together: set both or neither")
	}
	return errors.Join(p...)
}

// isLoopback reports whether host (of a listen address) is reachable only
// from this machine: a loopback IP or "localhost". An empty host (all
// interfaces) is not.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
