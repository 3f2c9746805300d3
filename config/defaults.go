package config

import "time"

// defaulters are ApplyDefaults' steps, one per key group. A new key group
// with defaults adds its function here.
var defaulters = []func(*Config){
	defaultEtcd,
	defaultListen,
	defaultConnections,
	defaultAuthFailures,
	defaultUsers,
	defaultTwoPC,
	defaultHealth,
	defaultClusters,
	func(c *Config) { c.QueryStats.applyDefaults() },
	func(c *Config) { c.MariaDBAccounts.applyDefaults() },
}

// ApplyDefaults fills every unset key with its default.
func (c *Config) ApplyDefaults() {
	for _, d := range defaulters {
		d(c)
	}
}

// defaultEtcd fills topology.etcd's defaults when it is set.
func defaultEtcd(c *Config) {
	if c.Topology.Etcd != nil {
		c.Topology.Etcd.applyDefaults()
	}
}

// defaultListen fills listen, http_listen and log.
func defaultListen(c *Config) {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:15306"
	}
	if c.HTTPListen == "" {
		c.HTTPListen = "127.0.0.1:15000"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
}

// defaultConnections fills the client connections' limits and timeouts:
// max_allowed_packet, drain_timeout, max_client_connections,
// handshake_timeout, write_timeout, idle_transaction_timeout and
// local_infile_timeout.
func defaultConnections(c *Config) {
	if c.MaxAllowedPacket == 0 {
		c.MaxAllowedPacket = 64 << 20
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.MaxClientConnections == 0 {
		c.MaxClientConnections = 10000
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.WriteTimeout == nil {
		c.WriteTimeout = ptr(60 * time.Second)
	}
	if c.IdleTransactionTimeout == nil {
		c.IdleTransactionTimeout = ptr(time.Hour)
	}
	if c.LocalInfileTimeout == nil {
		c.LocalInfileTimeout = ptr(time.Minute)
	}
}

// defaultAuthFailures fills auth_failure_limit and auth_failure_delay.
func defaultAuthFailures(c *Config) {
	if c.AuthFailureLimit == 0 {
		c.AuthFailureLimit = 5
	}
	if c.AuthFailureDelay == nil {
		c.AuthFailureDelay = ptr(time.Second)
	}
}

// defaultUsers fills each user's priority, cluster (the first cluster) and
// transaction_mode.
func defaultUsers(c *Config) {
	for i := range c.Users {
		if c.Users[i].Priority == nil {
			c.Users[i].Priority = ptr(DefaultPriority)
		}
		if c.Users[i].Cluster == "" && len(c.Clusters) > 0 {
			c.Users[i].Cluster = c.Clusters[0].Name
		}
		if c.Users[i].TransactionMode == "" {
			c.Users[i].TransactionMode = TxnSingle
		}
	}
}

// defaultTwoPC fills twopc: the log on the first cluster.
func defaultTwoPC(c *Config) {
	if c.TwoPC.LogCluster == "" && len(c.Clusters) > 0 {
		c.TwoPC.LogCluster = c.Clusters[0].Name
	}
	if c.TwoPC.ResolveAfter == 0 {
		c.TwoPC.ResolveAfter = 10 * time.Second
	}
}

// defaultHealth fills the health section.
func defaultHealth(c *Config) {
	h := &c.Health
	if h.Interval == 0 {
		h.Interval = 2 * time.Second
	}
	if h.BatchSize == 0 {
		h.BatchSize = 100
	}
	if h.Timeout == 0 {
		h.Timeout = time.Second
	}
	if h.Rise == 0 {
		h.Rise = 2
	}
	if h.Fall == 0 {
		h.Fall = 2
	}
}

// defaultClusters fills each cluster's keys (Cluster.applyDefaults).
func defaultClusters(c *Config) {
	for i := range c.Clusters {
		c.Clusters[i].applyDefaults()
	}
}

// applyDefaults fills in one cluster's defaults: routing, owner, backend
// TLS, protections, pool and statement cap.
func (cl *Cluster) applyDefaults() {
	if cl.MaxReplicaLag == nil {
		cl.MaxReplicaLag = ptr(10 * time.Second)
	}
	if cl.CausalTimeout == nil {
		cl.CausalTimeout = ptr(time.Second)
	}
	if cl.FailoverBuffer == nil {
		cl.FailoverBuffer = ptr(5 * time.Second)
	}
	if cl.StickinessThreshold == 0 {
		cl.StickinessThreshold = 1.5
	}
	if cl.HotLimit == nil {
		cl.HotLimit = ptr(64)
	}
	if cl.OwnerPoolSize == 0 {
		cl.OwnerPoolSize = 16
	}
	if cl.OwnerTimeout == 0 {
		cl.OwnerTimeout = time.Second
	}
	if cl.BackendTLS.Mode == "" {
		cl.BackendTLS.Mode = TLSDisabled
	}
	cl.applyProtectionDefaults()
	cl.Pool.applyDefaults()
	if cl.MaxBackendStatements == 0 {
		cl.MaxBackendStatements = 4000
	}
}

// applyProtectionDefaults fills a cluster's hot_row, throttle and
// consolidation.
func (cl *Cluster) applyProtectionDefaults() {
	if cl.HotRow.MaxQueue == nil {
		cl.HotRow.MaxQueue = ptr(20)
	}
	if cl.HotRow.MaxWait == 0 {
		cl.HotRow.MaxWait = 10 * time.Second
	}
	if cl.Throttle.MaxDelay == 0 {
		cl.Throttle.MaxDelay = 2 * time.Second
	}
	if cl.Consolidation.MaxResultBytes == 0 {
		cl.Consolidation.MaxResultBytes = 1 << 20
	}
	if cl.Pipelining.LateAfter == 0 {
		cl.Pipelining.LateAfter = 20 * time.Millisecond
	}
	if cl.Pipelining.Warnings == "" {
		cl.Pipelining.Warnings = PipeWarningsListed
	}
}

// applyDefaults fills in a cluster's pool defaults (Cluster.applyDefaults).
func (p *Pool) applyDefaults() {
	if p.Size == 0 {
		p.Size = 64
	}
	if p.MinIdle == nil {
		p.MinIdle = ptr(min(4, p.Size))
	}
	if p.MaxDials == 0 {
		p.MaxDials = 4
	}
	if p.Order == "" {
		p.Order = PoolOrderRoundRobin
	}
	if p.IdleTimeout == nil {
		p.IdleTimeout = ptr(5 * time.Minute)
	}
	if p.MaxLifetime == nil {
		p.MaxLifetime = ptr(30 * time.Minute)
	}
	if p.AcquireTimeout == 0 {
		p.AcquireTimeout = 2 * time.Second
	}
	if p.DialTimeout == 0 {
		p.DialTimeout = 5 * time.Second
	}
}
