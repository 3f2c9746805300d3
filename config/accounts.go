package config

import (
	"time"
)

// MariaDBAccounts lets clients log in as the accounts of MariaDB itself
// (mysql.global_priv), read from a cluster's primary, besides the users
// of users[]: the way MaxScale's "users loaded from the backend" works.
// Off by default; reloadable (SIGHUP).
//
// A client logging in with a name that no users[] entry has is checked
// against the account rows of that name as MariaDB checks them, against
// the client's own address (Host patterns, the most specific row first);
// its sessions then run as that account, on pools of their own. Entries
// of users[] always take precedence over an account of the same name.
type MariaDBAccounts struct {
	// Enabled turns the mode on. Default false: only users[] log in.
	Enabled bool `yaml:"enabled"`
	// Cluster is the cluster whose primary holds the accounts, read with
	// its backend_user (which needs SELECT on mysql.global_priv); the
	// accounts' sessions use this cluster. Default: the first cluster.
	Cluster string `yaml:"cluster"`
	// Refresh is the time between two reads of the accounts. They are
	// also read at once after an account-changing statement through the
	// gateway (CREATE/DROP/RENAME/ALTER USER, GRANT, REVOKE, SET
	// PASSWORD, FLUSH PRIVILEGES, CREATE/DROP ROLE), and on a login whose
	// name is unknown (at most once a second). Default 30s; at least 1s.
	Refresh time.Duration `yaml:"refresh"`
	// MaxAccounts bounds the account rows kept in memory; rows past it
	// are not loaded (and logged). Default 10000.
	MaxAccounts int `yaml:"max_accounts"`
	// MaxPools bounds the accounts (and passwords) that have pools of
	// their own at once: a login that would need another gets error 1040.
	// Default 1000.
	MaxPools int `yaml:"max_pools"`
	// PoolIdle is how long an account's pools stay open after its last
	// session ended. Default 1m.
	PoolIdle time.Duration `yaml:"pool_idle"`
}

// applyDefaults fills in the defaults of mariadb_accounts. Cluster stays
// empty when unset (the first cluster, resolved by the gateway: with
// topology.etcd the clusters come later).
func (m *MariaDBAccounts) applyDefaults() {
	if m.Refresh == 0 {
		m.Refresh = 30 * time.Second
	}
	if m.MaxAccounts == 0 {
		m.MaxAccounts = 10000
	}
	if m.MaxPools == 0 {
		m.MaxPools = 1000
	}
	if m.PoolIdle == 0 {
		m.PoolIdle = time.Minute
	}
}

// validate checks mariadb_accounts against the clusters.
func (m *MariaDBAccounts) validate(clusters []Cluster, bad func(key, format string, args ...any)) {
	const k = "mariadb_accounts"
	if m.Refresh < time.Second {
		bad(k+".refresh", "%v is below 1s", m.Refresh)
	}
	if m.MaxAccounts < 1 {
		bad(k+".max_accounts", "must be at least 1")
	}
	if m.MaxPools < 1 {
		bad(k+".max_pools", "must be at least 1")
	}
	if m.PoolIdle < 0 {
		bad(k+".pool_idle", "must not be negative")
	}
	if !m.Enabled || len(clusters) == 0 || m.Cluster == "" {
		return
	}
	for _, c := range clusters {
		if c.Name == m.Cluster {
			return
		}
	}
	bad(k+".cluster", "no cluster is named %q", m.Cluster)
}
