// Package ops holds the gateway's operator surfaces: its HTTP endpoints
// (/healthz, /readyz, /metrics, /debug/status, /debug/health,
// /debug/pins, /debug/queries) and the tables of SHOW GATEWAY BACKENDS,
// POOLS, SESSIONS and PROTECTIONS. They read the gateway only through
// Gateway, a set of read-only views each of which is a snapshot: nothing
// here reaches into sessions or pools.
package ops

import (
	"time"

	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/queryrules"
	"github.com/directgate/directgate/querystats"
	"github.com/directgate/directgate/statuspage"
	"github.com/prometheus/client_golang/prometheus"
)

// Gateway is what the operator surfaces read of a gateway.
type Gateway interface {
	// Closing says the gateway is shutting down.
	Closing() bool
	// Readiness says whether the gateway is ready to serve, and if not
	// why (one reason per missing thing).
	Readiness() (ready bool, reasons []string)
	// HealthView is discovery's latest snapshot with each backend's load.
	HealthView() HealthView
	// StatusView is the status page's data, its top statements ordered
	// by top (total_time, count, errors or p99); an error for an unknown
	// order.
	StatusView(top string) (statuspage.View, error)
	// PinCounts are the sessions logged in since start, those pinned by
	// their state, and the pins by reason.
	PinCounts() (sessions, pinned int64, byReason map[string]int64)
	// Registry is the Prometheus registry /metrics serves; nil without
	// metrics.
	Registry() *prometheus.Registry
	// QueryDigests are the query digests, largest first by o, at most
	// limit (0: all), and how many were evicted; QueryStatsOn says
	// whether digests are kept (query_stats.enabled).
	QueryDigests(o querystats.Order, limit int) ([]querystats.Digest, uint64)
	QueryStatsOn() bool
	// QueryRules are the query rules in force, with their counters.
	QueryRules() []*queryrules.Rule
	// ClientsOpen is the client connections open now; Refusals the
	// statements refused in split brain and failed for want of a
	// primary since start.
	ClientsOpen() int64
	Refusals() (splitBrain, noPrimary uint64)
	// SessionCounts are the sessions pinned now by reason (every reason
	// beyond one statement, zero included) and those in a transaction.
	SessionCounts() (pinned map[string]int64, inTxn int64)
	// Discovery is discovery's latest snapshot and its counters; ok
	// false without discovery.
	Discovery() (snap *healthcheck.Snapshot, st healthcheck.Stats, ok bool)
	// ClusterNames are the clusters in configuration order, and
	// BackendLoads every configured backend's load.
	ClusterNames() []string
	BackendLoads() []BackendLoad
	// PoolStats, Sessions and Protections are the pools', sessions' and
	// protections' figures now.
	PoolStats() []PoolStat
	Sessions() []SessionInfo
	Protections() []protect.Row
}

// PoolStat is one pool's figures, for SHOW GATEWAY POOLS, metrics and the
// status page.
type PoolStat struct {
	// Cluster and Backend name the pool; FoundRows tells the pool of
	// CLIENT_FOUND_ROWS clients apart; Owner marks the pool to the
	// cluster's owner process. BackendUser is the account the pool's
	// connections log in as; UserPool says it is a user's own
	// (users[].backend_user), not the cluster's account.
	Cluster, Backend, BackendUser string
	FoundRows, Owner, UserPool    bool
	pools.Stat
}

// Kind names the pool's kind in SHOW GATEWAY POOLS: backend, owner,
// user, or one of those two with _found_rows.
func (p PoolStat) Kind() string {
	switch {
	case p.Owner:
		return "owner"
	case p.UserPool && p.FoundRows:
		return "user_found_rows"
	case p.UserPool:
		return "user"
	case p.FoundRows:
		return "backend_found_rows"
	}
	return "backend"
}

// SessionInfo describes one client session, for SHOW GATEWAY SESSIONS and
// the status page.
type SessionInfo struct {
	ID      uint32
	User    string
	Client  string
	Busy    bool
	InTxn   bool
	Pinned  string // pin reasons, "" when not pinned
	Backend string // the backend connection it holds, "" when none
	// Attrs are the connection attributes the client sent, as
	// "name=value" in its order, joined by ", " and cut to
	// maxAttrsShown characters; "" when none.
	Attrs string
}

// HealthView is the JSON shape of /debug/health: discovery's latest
// snapshot with each backend's load.
type HealthView struct {
	Round    uint64          `json:"round"`
	Time     time.Time       `json:"time"`
	Clusters []ClusterHealth `json:"clusters"`
	// Statements refused since start: in split brain, and for want of a
	// primary within failover_buffer.
	SplitBrainRefusals uint64 `json:"split_brain_refusals"`
	NoPrimaryFailures  uint64 `json:"no_primary_failures"`
}

// ClusterHealth is a cluster in HealthView.
type ClusterHealth struct {
	Name            string          `json:"name"`
	Primary         string          `json:"primary"`
	NoPrimaryReason string          `json:"no_primary_reason,omitempty"`
	SplitBrain      bool            `json:"split_brain"`
	Replicas        []string        `json:"replicas"`
	Backends        []BackendHealth `json:"backends"`
}

// BackendHealth is a backend in HealthView.
type BackendHealth struct {
	Addr            string    `json:"addr"`
	State           string    `json:"state"`
	Reason          string    `json:"reason,omitempty"`
	Since           time.Time `json:"since"`
	Role            string    `json:"role"`
	ReadOnly        bool      `json:"read_only"`
	ServerID        uint32    `json:"server_id"`
	Version         string    `json:"version,omitempty"`
	LagSeconds      *float64  `json:"lag_seconds"`
	ReplicationNote string    `json:"replication_note,omitempty"`
	ProbeMillis     float64   `json:"probe_ms"`
	Slow            bool      `json:"slow,omitempty"`
	ScoreMillis     float64   `json:"score_ms"`
	InFlight        int64     `json:"in_flight"`
}

// BackendLoad is a configured backend's load.
type BackendLoad struct {
	Cluster, Addr string
	// InFlight is the statements running on it now; Score its latency
	// score.
	InFlight int64
	Score    time.Duration
}

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
