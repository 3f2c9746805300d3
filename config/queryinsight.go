package config

import (
	"fmt"
	"time"

	"github.com/directgate/directgate/queryrules"
)

// QueryStats configures statement digests (query_stats). Reloadable; a
// change of max_digests or max_digest_length starts the digests afresh.
type QueryStats struct {
	// Enabled turns digests on. Default true.
	Enabled *bool `yaml:"enabled"`
	// MaxDigests bounds the digests kept (per fingerprint, user,
	// database and cluster); the least recently seen are evicted and
	// counted. Default 5000.
	MaxDigests int `yaml:"max_digests"`
	// MaxDigestLength caps a digest text in bytes: longer statements are
	// told apart by their first part only. Default 1024.
	MaxDigestLength int `yaml:"max_digest_length"`
	// SlowThreshold logs each statement that takes longer, as one line.
	// Default 1s; 0 logs none.
	SlowThreshold *time.Duration `yaml:"slow_threshold"`
}

// On reports whether digests are enabled.
func (q QueryStats) On() bool { return q.Enabled == nil || *q.Enabled }

// applyDefaults fills in the query_stats defaults (ApplyDefaults).
func (q *QueryStats) applyDefaults() {
	if q.Enabled == nil {
		q.Enabled = ptr(true)
	}
	if q.MaxDigests == 0 {
		q.MaxDigests = 5000
	}
	if q.MaxDigestLength == 0 {
		q.MaxDigestLength = 1024
	}
	if q.SlowThreshold == nil {
		q.SlowThreshold = ptr(time.Second)
	}
}

// validateQueryInsight checks query_stats and query_rules (Validate).
func (c *Config) validateQueryInsight() []error {
	var errs []error
	q := c.QueryStats
	if q.MaxDigests < 1 || q.MaxDigests > 1_000_000 {
		errs = append(errs, fmt.Errorf("config: query_stats.max_digests: %d is outside 1..1000000", q.MaxDigests))
	}
	if q.MaxDigestLength < 16 || q.MaxDigestLength > 1<<20 {
		errs = append(errs, fmt.Errorf("config: query_stats.max_digest_length: %d is outside 16..1048576", q.MaxDigestLength))
	}
	if q.SlowThreshold != nil && *q.SlowThreshold < 0 {
		errs = append(errs, fmt.Errorf("config: query_stats.slow_threshold: must not be negative"))
	}
	if _, err := queryrules.Compile(c.QueryRules); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	return errs
}
