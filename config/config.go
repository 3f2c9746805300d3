// Package config loads and validates gateway.yaml: one struct, defaults
// applied in one place, unknown keys rejected, every error naming its key.
package config

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/directgate/directgate/queryrules"
	"gopkg.in/yaml.v3"
)

// Config is the whole deployment as the gateway sees it.
type Config struct {
	// Listen is the MySQL protocol address for clients. Default
	// 127.0.0.1:15306.
	Listen string `yaml:"listen"`
	// HTTPListen serves /healthz, /readyz, /metrics and the /debug pages.
	// Default 127.0.0.1:15000; "off" disables it. A non-loopback address
	// needs http.token (or http.insecure: true).
	HTTPListen string `yaml:"http_listen"`
	// HTTP secures the HTTP endpoints.
	HTTP HTTP `yaml:"http"`
	// Log configures logging.
	Log Log `yaml:"log"`
	// GoMaxProcs is how many threads run the gateway's Go code at once
	// (runtime.GOMAXPROCS), read at start. 0 (the default): Go's choice,
	// every CPU the process may use (its cgroup's quota included), or the
	// GOMAXPROCS environment variable. n > 0: n. Fewer threads cost less
	// CPU per query at low concurrency and limit throughput at high
	// concurrency: on a 2-core machine shared with sysbench and MariaDB,
	// one thread instead of two cut the CPU per point select by 15-25 %
	// and raised QPS by up to 10 % at 8 clients, and lowered QPS by
	// 15-20 % at 64 and 512 clients.
	GoMaxProcs int `yaml:"gomaxprocs"`
	// Users may connect to the gateway. At least one.
	Users []User `yaml:"users"`
	// Clusters are the backends. At least one.
	Clusters []Cluster `yaml:"clusters"`
	// Health configures backend discovery.
	Health Health `yaml:"health"`
	// TwoPC configures atomic commit across clusters (transaction_mode
	// twopc): where the coordinator log lives and when the resolver acts.
	TwoPC TwoPC `yaml:"twopc"`
	// MaxAllowedPacket bounds a client packet in bytes. Default 64 MiB
	// (the largest packet a client may send; larger ones close the client
	// with error 1153).
	MaxAllowedPacket int `yaml:"max_allowed_packet"`
	// DrainTimeout bounds how long SIGTERM waits for statements in flight
	// and open transactions to end. Default 10s.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// MaxClientConnections bounds the client connections the gateway
	// serves at once; more get error 1040. Default 10000.
	MaxClientConnections int `yaml:"max_client_connections"`
	// MaxConnectionsPerAddress bounds the client connections from one
	// source IP address at once; more get error 1040. Default 0: no limit
	// beyond max_client_connections (applications usually connect from a
	// few addresses with many connections each).
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// HandshakeTimeout bounds the time a client gets from connecting to
	// being logged in (TLS included). Default 10s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// IOLoops is the number of io_uring event loops that run the client
	// sessions, each on a thread of its own; 0 (the default) runs each
	// session on a goroutine. Read at start. Where the kernel refuses
	// io_uring the gateway warns and uses goroutines.
	IOLoops int `yaml:"io_loops"`
	// WriteTimeout bounds every write to a client: a client that stops
	// reading its results is cut after it instead of holding a backend
	// connection. Default 60s (MariaDB's net_write_timeout); 0 never.
	WriteTimeout *time.Duration `yaml:"write_timeout"`
	// IdleTransactionTimeout closes a client idle inside a transaction
	// for longer: its transaction is rolled back and its backend
	// connection goes back to the pool, as MariaDB's own
	// idle_transaction_timeout does (a session's own, smaller
	// idle_transaction_timeout also applies). Default 1h; 0 never.
	IdleTransactionTimeout *time.Duration `yaml:"idle_transaction_timeout"`
	// LocalInfileTimeout bounds the wait for each packet of a LOAD DATA
	// LOCAL INFILE file from the client: a client that starts one and
	// stops sending is cut, its backend connection freed. Default 60s.
	LocalInfileTimeout *time.Duration `yaml:"local_infile_timeout"`
	// AuthFailureLimit failed logins from one address (or for one user
	// name) within a minute make the answers to further failures come
	// AuthFailureDelay apart, across connections. Default 5.
	AuthFailureLimit int `yaml:"auth_failure_limit"`
	// AuthFailureDelay is that wait. Default 1s; 0 off.
	AuthFailureDelay *time.Duration `yaml:"auth_failure_delay"`
	// ServerVersion is announced to clients. Default: the version of the
	// first backend reached at start, else "10.11.0-MariaDB-directgate".
	ServerVersion string `yaml:"server_version"`
	// TLS lets clients encrypt their connections to the gateway. Unset
	// (no cert): the gateway offers no TLS and refuses clients asking for
	// it with error 1043.
	TLS TLS `yaml:"tls"`
	// Auth configures client logins: the greeting's auth plugin and the
	// RSA key of caching_sha2_password.
	Auth Auth `yaml:"auth"`
	// MariaDBAccounts lets MariaDB's own accounts log in (off by
	// default; see MariaDBAccounts).
	MariaDBAccounts MariaDBAccounts `yaml:"mariadb_accounts"`
	// Topology says where clusters and users come from: this file (the
	// default) or etcd (topology.etcd), for a fleet of gateways.
	Topology TopologySource `yaml:"topology"`
	// QueryStats configures statement digests (docs/query-insight.md).
	QueryStats QueryStats `yaml:"query_stats"`
	// QueryRules are the operator's query rules, tried in order
	// (docs/query-insight.md). Reloadable; with topology.etcd the
	// topology document's query_rules, when it has the key, replace
	// these.
	QueryRules []queryrules.Spec `yaml:"query_rules"`
	// FileTopologyIgnored is set by Parse when topology.etcd is set and
	// the file lists clusters or users anyway: they are dropped, and the
	// gateway warns about them.
	FileTopologyIgnored bool `yaml:"-"`
}

// Log configures logging.
type Log struct {
	// Level is trace, debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// User is an account clients log in with.
type User struct {
	// User is the name. Required, unique.
	User string `yaml:"user"`
	// Password in clear text, or its mysql_native_password hash ("*"
	// followed by 40 hex digits, as in mysql.user; then only
	// mysql_native_password logins can be checked). Empty means no
	// password. PasswordFile (a file whose contents, less one trailing
	// newline, are the password) or PasswordEnv (an environment variable)
	// may give it instead: at most one of the three. Use Secret to check
	// it.
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	PasswordEnv  string `yaml:"password_env"`
	// BackendUser and BackendPassword are the account this user's
	// sessions log in to the backends with, so that grants,
	// CURRENT_USER() and audit logs see the real user. Empty BackendUser:
	// the cluster's backend_user and backend_password. BackendPassword is
	// clear text (it is sent to the backend); BackendPasswordFile or
	// BackendPasswordEnv may give it instead, as for Password.
	BackendUser         string `yaml:"backend_user"`
	BackendPassword     string `yaml:"backend_password"`
	BackendPasswordFile string `yaml:"backend_password_file"`
	BackendPasswordEnv  string `yaml:"backend_password_env"`
	// Cluster the user's sessions go to. Default: the first cluster.
	// With clusters[].databases, it is the cluster of a session without
	// a current database; statements go to the cluster of their tables.
	Cluster string `yaml:"cluster"`
	// TransactionMode is what a transaction that touches a second
	// cluster does (clusters[].databases): "single" refuses the
	// statement, "multi" commits each cluster in turn, "twopc" commits
	// atomically (MariaDB XA and a coordinator log). Sessions change it
	// with SET transaction_mode. Default single.
	TransactionMode string `yaml:"transaction_mode"`
	// MaxConnections bounds this user's client connections at once; more
	// get error 1203. 0: no limit beyond max_client_connections.
	MaxConnections int `yaml:"max_connections"`
	// MaxPoolShare is the largest share (0 to 1) of each of a cluster's
	// pools this user's sessions hold at once: past it, a statement waits
	// for one of the user's own connections, up to the pool's
	// acquire_timeout, then gets error 1040. It keeps a few clients (idle
	// transactions, slow readers) of one user from starving every other
	// user. Default 0: no share beyond the pool.
	MaxPoolShare float64 `yaml:"max_pool_share"`
	// Admin users see and kill every user's sessions (SHOW PROCESSLIST,
	// KILL, KILL of any form) and may run SHOW GATEWAY. Others see and
	// kill only their own sessions. Default false.
	Admin bool `yaml:"admin"`
	// Priority (0 to 100) decides whose work the protections hold back
	// first: throttling and load shedding act on lower priorities
	// before higher ones, and a priority of 100 is never throttled or
	// shed. Default 50.
	Priority *int `yaml:"priority"`
}

// DefaultPriority is users[].priority when it is not set.
const DefaultPriority = 50

// maxIOLoops bounds io_loops: a loop is a thread busy with its sessions,
// so more loops than cores only add threads.
const maxIOLoops = 256

// HTTP secures the gateway's HTTP endpoints.
type HTTP struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every endpoint but /healthz, /readyz and, with PublicMetrics,
	// /metrics. TokenFile (a file whose contents, less one trailing
	// newline, are the token) or TokenEnv (an environment variable) may
	// give it instead: at most one of the three.
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	TokenEnv  string `yaml:"token_env"`
	// PublicMetrics serves /metrics without the token (for a scraper
	// that cannot send one). Default false.
	PublicMetrics bool `yaml:"public_metrics"`
	// Cert and Key, PEM files, serve HTTPS instead of HTTP. Both or
	// neither.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// Insecure allows a non-loopback http_listen without a token: every
	// user's names, client addresses and the topology are then open to
	// anyone who reaches the port. Default false: the gateway refuses to
	// start so.
	Insecure bool `yaml:"insecure"`
}

// Health configures discovery: the background loop that probes every
// backend and decides which serve and which is each cluster's primary.
type Health struct {
	// Interval is the time between probe rounds. Default 2s.
	Interval time.Duration `yaml:"interval"`
	// BatchSize is the most probes in flight at once. Default 100.
	BatchSize int `yaml:"batch_size"`
	// Timeout bounds one probe. Default 1s.
	Timeout time.Duration `yaml:"timeout"`
	// Rise good probes in a row make a backend serving. Default 2.
	Rise int `yaml:"rise"`
	// Fall failed probes in a row make it not serving. Default 2.
	Fall int `yaml:"fall"`
}

// Switch is an on/off setting. YAML 1.2 (and so yaml.v3) reads on and off
// as strings; Switch accepts on, off, true, false, yes and no.
type Switch bool

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *Switch) UnmarshalYAML(n *yaml.Node) error {
	switch strings.ToLower(n.Value) {
	case "on", "true", "yes":
		*s = true
	case "off", "false", "no":
		*s = false
	default:
		return fmt.Errorf("line %d: %q is not on or off", n.Line, n.Value)
	}
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (s Switch) MarshalYAML() (any, error) {
	if s {
		return "on", nil
	}
	return "off", nil
}

// Cluster is one primary and its replicas, with the account the gateway
// uses to reach them.
type Cluster struct {
	// Name identifies the cluster in logs and errors. Required, unique.
	Name string `yaml:"name"`
	// BackendUser and BackendPassword are the account the gateway's pools
	// log in with (and users without their own backend_user). BackendUser
	// is required. BackendPasswordFile (a file whose contents, less one
	// trailing newline, are the password) or BackendPasswordEnv (an
	// environment variable) may give the password instead: at most one of
	// the three.
	BackendUser         string `yaml:"backend_user"`
	BackendPassword     string `yaml:"backend_password"`
	BackendPasswordFile string `yaml:"backend_password_file"`
	BackendPasswordEnv  string `yaml:"backend_password_env"`
	// Backends are host:port addresses, in any order: discovery finds the
	// primary (the one serving backend with read_only off). At least one.
	Backends []string `yaml:"backends"`
	// Databases lists the databases the cluster holds: statements on
	// their tables go to this cluster, whatever cluster the session
	// started on. A database belongs to one cluster. Unset: the cluster
	// holds every database no other cluster lists. Read at start.
	Databases []string `yaml:"databases"`
	// Pool sizes the connection pool of each backend.
	Pool Pool `yaml:"pool"`
	// MaxBackendStatements bounds the binary-protocol statements this
	// gateway keeps prepared on one backend, across its pooled
	// connections; past it the least recently used of the connection at
	// hand is closed first. MariaDB's max_prepared_stmt_count (16382 by
	// default) is for the whole server: keep this times the number of
	// gateways (and other applications' statements) under it. Default
	// 4000.
	MaxBackendStatements int `yaml:"max_backend_statements"`
	// MaxBackendConnections caps the connections to each backend of the
	// cluster: the pools' connections (every account's) and discovery's
	// probe connection. Without topology.etcd it is this gateway's cap;
	// with it, the fleet's: the live gateways divide it among themselves
	// by their recent demand (statements in flight and waiting), and
	// together never exceed it. The connections set aside for KILL QUERY
	// are outside it. Default 0: no cap beyond pool.size.
	MaxBackendConnections int `yaml:"max_backend_connections"`
	// ReplicaReads sends reads outside transactions to replicas. Default
	// off: everything goes to the primary. Sessions override it with
	// USE db@replica and USE db@primary.
	ReplicaReads Switch `yaml:"replica_reads"`
	// MaxReplicaLag keeps replicas lagging more (or whose lag is unknown)
	// out of the read set. Default 10s.
	// 0 admits only replicas reporting no lag.
	MaxReplicaLag *time.Duration `yaml:"max_replica_lag"`
	// MaxReplicaLatency keeps replicas whose discovery probe round trip
	// (a SELECT 1 on the probe's connection) is above it out of the read
	// set: health.fall probes in a row above it take a replica out,
	// health.rise in a row within it bring it back. Default 0: off.
	MaxReplicaLatency time.Duration `yaml:"max_replica_latency"`
	// CausalReads makes a session's replica reads after its own write wait
	// until the replica has applied that write (MASTER_GTID_WAIT), for at
	// most CausalTimeout; then the read goes to the primary. Default off.
	CausalReads Switch `yaml:"causal_reads"`
	// CausalTimeout bounds the wait of a causal read. Default 1s; 0 sends
	// reads after a write to the primary without waiting.
	CausalTimeout *time.Duration `yaml:"causal_timeout"`
	// FailoverBuffer is how long a write waits for a primary to appear when
	// none is known, and (owners elected in etcd) how long an owner
	// statement waits for a leading owner to take it. Default 5s.
	FailoverBuffer *time.Duration `yaml:"failover_buffer"`
	// StickinessThreshold: a session keeps its replica while that
	// replica's latency score is at most this many times the best score.
	// Default 1.5.
	StickinessThreshold float64 `yaml:"stickiness_threshold"`
	// HotLimit is the number of statements in flight on one backend above
	// which new sessions start avoiding it. Default 64; 0 off.
	HotLimit *int `yaml:"hot_limit"`
	// Owner is the address of the cluster's owner process (gateway owner):
	// where it listens and where gateways forward sequence and message
	// statements. Empty: no owner; those statements fail with an error.
	// With topology.etcd, empty means owners in a standby group: they
	// elect a leader in etcd (gateway owner --listen ADDR), and gateways
	// forward to whichever leads, waiting up to failover_buffer for one.
	Owner string `yaml:"owner"`
	// OwnerTables lists sequence and message tables besides the ones the
	// owner finds by table comment.
	OwnerTables OwnerTables `yaml:"owner_tables"`
	// OwnerPoolSize bounds the gateway's connections to the owner. Default
	// 16.
	OwnerPoolSize int `yaml:"owner_pool_size"`
	// OwnerTimeout bounds connecting to the owner, so statements for a
	// down owner fail fast. Default 1s.
	OwnerTimeout time.Duration `yaml:"owner_timeout"`
	// AutoIncrement fills a column of INSERTs from a sequence.
	AutoIncrement []AutoIncrement `yaml:"auto_increment"`
	// BackendTLS says whether and how the pools and probes encrypt their
	// connections to the backends. Default mode disabled.
	BackendTLS BackendTLS `yaml:"backend_tls"`
	// HotRow is hot-row protection: a bound on the transactions that
	// write or lock one row (by primary or unique key) at once. Default
	// off. Reloadable.
	HotRow HotRow `yaml:"hot_row"`
	// Throttle delays and refuses new write transactions while the
	// cluster's replicas lag. Default off. Reloadable.
	Throttle Throttle `yaml:"throttle"`
	// Consolidation runs identical reads that are in flight at the same
	// moment once. Default off. Reloadable.
	Consolidation Consolidation `yaml:"consolidation"`
	// Shedding refuses a growing fraction of new low-priority statements
	// while a backend is overloaded. Default off. Reloadable.
	Shedding Shedding `yaml:"shedding"`
	// Pipelining sends reads on a few shared connections without waiting
	// for the answers of the reads before them. Default off. Reloadable.
	Pipelining Pipelining `yaml:"pipelining"`
}

// Pipelining configures the pipelining of reads: a read consolidation
// would accept (deterministic, not locking, outside a transaction, from a
// session that holds no connection) is written to one of a few pooled
// connections shared by every session of the same backend account and
// session state, behind the reads already in flight there, and its
// session reads its answer when the answers before it are read. MariaDB
// then finds the next read waiting when it ends one. Its cost: a read
// that is slow (a lock wait, a big scan) delays the reads queued behind
// it (and a KILL QUERY of a read so queued takes effect only when its
// turn comes), until LateAfter stops new ones from joining; and Warnings.
type Pipelining struct {
	// Connections is the number of connections per backend and backend
	// account that carry pipelined reads, taken from the pool (over every
	// session state: a state without one takes an idle one of another).
	// Below the pool's size. Default 0: pipelining off.
	Connections int `yaml:"connections"`
	// LateAfter: a pipe whose oldest read in flight was written longer
	// ago takes no new read (it joins another pipe or goes the usual
	// way) until that read is answered. Default 20ms.
	LateAfter time.Duration `yaml:"late_after"`
	// Warnings says how a pipelined read's conditions (warnings, an
	// error) are kept, which the read queued behind it clears on the
	// connection: PipeWarningsListed (the default) or
	// PipeWarningsCounted.
	Warnings string `yaml:"warnings"`
}

// The values of Pipelining.Warnings.
const (
	// PipeWarningsListed sends a read written behind another as "SHOW
	// WARNINGS;" followed by the read, in one packet: the first result
	// lists what the read before left, so that SHOW WARNINGS after any
	// pipelined read lists what MariaDB's would. It costs MariaDB a
	// statement per read (docs/sessions.md: on 2 cores, 0.80 × the QPS
	// of PipeWarningsCounted at 64 clients).
	PipeWarningsListed = "listed"
	// PipeWarningsCounted sends the read alone: a read whose answer has
	// warnings while a read is already queued behind it leaves SHOW
	// WARNINGS nothing to list (@@warning_count, @@error_count and an
	// error stay right). Counted in
	// directgate_pipelined_read_conditions_lost_total.
	PipeWarningsCounted = "counted"
)

// Throttle configures transaction throttling by replica lag. While the
// worst lag among the cluster's serving replicas exceeds MaxLag, a new
// write transaction (a write outside an open transaction, or the first
// write of one) is delayed, with a probability that rises smoothly with
// the lag and falls with the user's priority; one delayed past MaxDelay
// is refused. Reads, and statements of a transaction that has already
// written, are never throttled. A replica whose SQL thread is stopped
// counts as lagging twice MaxLag.
type Throttle struct {
	// MaxLag is the replica lag past which writes are throttled. Default
	// 0: throttling off.
	MaxLag time.Duration `yaml:"max_lag"`
	// MaxDelay bounds how long one write waits for the lag to fall;
	// past it the write is refused. Default 2s.
	MaxDelay time.Duration `yaml:"max_delay"`
	// DryRun counts the writes that would have been delayed or refused,
	// without delaying any. Default off.
	DryRun Switch `yaml:"dry_run"`
}

// Consolidation configures query consolidation: identical reads
// (same bytes, database, session variables and user, outside a
// transaction, not locking, deterministic) in flight on the same backend
// at the same moment run once, and every waiting client gets the same
// result.
type Consolidation struct {
	// Enabled turns consolidation on. Default off.
	Enabled Switch `yaml:"enabled"`
	// MaxResultBytes bounds the result a leader keeps for its followers;
	// past it the followers run their own statement. Default 1MiB.
	MaxResultBytes ByteSize `yaml:"max_result_bytes"`
}

// Shedding configures load shedding: while a backend has more than
// MaxInFlight statements running, or statements waited longer than
// MaxQueueWait for one of its connections, the gateway refuses a small,
// growing fraction of new statements of low-priority users at once
// (error 1203, "gateway overloaded, retry"), never inside a transaction.
type Shedding struct {
	// MaxInFlight is the statements this gateway has running on one
	// backend past which it sheds (each gateway of a fleet counts its
	// own). Default 0: no limit.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxQueueWait is the wait for one of a backend's pooled connections
	// past which the gateway sheds (pools.Pool.QueueWait). Default 0: no
	// limit.
	MaxQueueWait time.Duration `yaml:"max_queue_wait"`
}

// ByteSize is a size in bytes, written as a number with an optional
// unit: B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000).
type ByteSize int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// ParseByteSize reads a ByteSize: "1048576", "1MiB", "512 KiB".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size (a number with an optional unit: B, KiB, MiB, GiB, KB, MB, GB)", s)
	}
	var n int64
	for _, c := range t[:i] {
		if n > (1<<62)/10 {
			return 0, fmt.Errorf("%q is too large", s)
		}
		n = n*10 + int64(c-'0')
	}
	units := map[string]int64{"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1e3, "mb": 1e6, "gb": 1e9}
	m, ok := units[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("%q is not a size (a number with an optional unit: B, KiB, MiB, GiB, KB, MB, GB)", s)
	}
	if n > (1<<62)/m {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return ByteSize(n * m), nil
}

// HotRow configures hot-row protection. Statements that change or lock
// one row by an equality on a single-column primary or unique key
// (UPDATE/DELETE ... WHERE key = value, SELECT ... WHERE key = value FOR
// UPDATE, INSERT ... ON DUPLICATE KEY UPDATE with the key given) take a
// slot of that row for the rest of their transaction; past
// MaxConcurrency transactions per row, the others wait at the gateway in
// a FIFO queue.
type HotRow struct {
	// MaxConcurrency is how many transactions per row proceed to the
	// database at once. Default 0: protection off.
	MaxConcurrency int `yaml:"max_concurrency"`
	// MaxQueue is how many transactions may wait for one row; one more
	// is refused at once with error 1205. Default 20; 0 refuses every
	// transaction that would wait.
	MaxQueue *int `yaml:"max_queue"`
	// MaxWait bounds one wait in the queue; past it the statement is
	// refused with error 1205. Default 10s (below InnoDB's own
	// innodb_lock_wait_timeout of 50s); 0 means the default.
	MaxWait time.Duration `yaml:"max_wait"`
	// DryRun counts the transactions that would have waited or been
	// refused, without making any wait. Default off.
	DryRun Switch `yaml:"dry_run"`
}

// The values of User.TransactionMode.
const (
	// TxnSingle refuses a statement that would take a transaction to a
	// second cluster.
	TxnSingle = "single"
	// TxnMulti commits the clusters of a transaction one after the other.
	TxnMulti = "multi"
	// TxnTwoPC commits them atomically: MariaDB XA on each, the decision
	// made durable in the coordinator log first.
	TxnTwoPC = "twopc"
)

// TwoPC configures atomic commit across clusters.
type TwoPC struct {
	// LogCluster is the cluster whose database keeps the coordinator
	// log (table twopc.log, written by that cluster's owner process).
	// Default: the first cluster.
	LogCluster string `yaml:"log_cluster"`
	// ResolveAfter is how long a prepared transaction may wait for its
	// gateway before the leading owner's resolver commits or rolls it
	// back by the log. Default 10s.
	ResolveAfter time.Duration `yaml:"resolve_after"`
}

// OwnerTables are tables the owner serves, named "db.table".
type OwnerTables struct {
	// Sequences are Vitess-style sequence tables (one row id=0 with
	// next_id and cache).
	Sequences []string `yaml:"sequences"`
	// Messages are Vitess-style message tables.
	Messages []string `yaml:"messages"`
}

// AutoIncrement makes the gateway fill Column of INSERTs into Table from
// Sequence when the column is missing or NULL.
type AutoIncrement struct {
	// Table is "db.table".
	Table string `yaml:"table"`
	// Column is the column to fill.
	Column string `yaml:"column"`
	// Sequence is the sequence table, "db.table".
	Sequence string `yaml:"sequence"`
}

// The values of Pool.Order.
const (
	// PoolOrderRoundRobin reuses idle connections each in turn.
	PoolOrderRoundRobin = "round_robin"
	// PoolOrderLIFO reuses the connection released last.
	PoolOrderLIFO = "lifo"
)

// Pool sizes one backend's connection pool.
type Pool struct {
	// Size is the maximum number of open connections. Default 64.
	Size int `yaml:"size"`
	// MinIdle connections are opened at start and kept open. Default 4.
	MinIdle *int `yaml:"min_idle"`
	// MaxDials limits connections being opened at once. Default 4.
	MaxDials int `yaml:"max_dials"`
	// Order is the order idle connections are reused in: "round_robin"
	// (each in turn, the connection idle longest first: all stay warm and
	// open) or "lifo" (the one released last first: a pool larger than
	// its load keeps using a few, the rest close after IdleTimeout).
	// Default round_robin. Reloadable.
	Order string `yaml:"order"`
	// IdleTimeout closes connections idle this long (above MinIdle).
	// Default 5m; 0 never.
	IdleTimeout *time.Duration `yaml:"idle_timeout"`
	// MaxLifetime closes connections this old, jittered by up to 10%.
	// Default 30m; 0 never.
	MaxLifetime *time.Duration `yaml:"max_lifetime"`
	// AcquireTimeout is how long a statement waits for a free connection
	// before it fails with error 1040. Default 2s.
	AcquireTimeout time.Duration `yaml:"acquire_timeout"`
	// DialTimeout bounds opening one connection. Default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
}

// Load reads, defaults and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse decodes YAML, rejecting unknown keys, then applies defaults and
// validates.
func Parse(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if c.FromEtcd() && (len(c.Clusters) > 0 || len(c.Users) > 0) {
		c.Clusters, c.Users, c.FileTopologyIgnored = nil, nil, true
	}
	if err := c.resolveSecrets(); err != nil {
		return nil, err
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func ptr[T any](v T) *T { return &v }
