package gateway

import (
	"slices"
	"strings"

	"github.com/directgate/directgate/config"
)

// The gateway's protections (hot-row protection today; transaction
// throttling, query consolidation and load shedding are to come) report
// through one shape, ProtectionRow, listed by SHOW GATEWAY PROTECTIONS, the
// status page's protections panel and its JSON. A protection adds itself
// by implementing protection and being listed in cluster.protections.

// protection is one protection of a cluster, as its operator sees it.
type protection interface {
	// protectionRows returns the protection's counters under the cluster's
	// settings conf: a first row for the whole cluster (Scope "*"), then
	// rows for parts of it (tables, users), bounded in number.
	protectionRows(cluster string, conf *config.Cluster) []ProtectionRow
}

// ProtectionRow is one line of a protection's counters. Counters a
// protection does not have stay zero.
type ProtectionRow struct {
	// Protection names the protection: "hot_row".
	Protection string `json:"protection"`
	// Cluster is the cluster it guards.
	Cluster string `json:"cluster"`
	// Scope is what the row counts: "*" for the whole cluster, else a
	// part of it (for hot_row, a table "db.table").
	Scope string `json:"scope"`
	// Mode is off, on or dry_run.
	Mode string `json:"mode"`
	// Active is the statements held back now (hot_row: waiting in a
	// queue).
	Active int64 `json:"active"`
	// Total is the statements held back since the gateway started.
	Total int64 `json:"total"`
	// Refused is the statements refused (hot_row: queue full, or waited
	// max_wait); RefusedWait the part of them that waited first.
	Refused     int64 `json:"refused"`
	RefusedWait int64 `json:"refused_wait"`
	// DryRun is, in dry-run mode, the statements that would have been
	// held back; DryRunRefused those that would have been refused.
	DryRun        int64 `json:"dry_run"`
	DryRunRefused int64 `json:"dry_run_refused"`
}

// add adds r's counters to p's.
func (p *ProtectionRow) add(r ProtectionRow) {
	p.Active += r.Active
	p.Total += r.Total
	p.Refused += r.Refused
	p.RefusedWait += r.RefusedWait
	p.DryRun += r.DryRun
	p.DryRunRefused += r.DryRunRefused
}

// sortProtectionRows orders rows by scope.
func sortProtectionRows(rows []ProtectionRow) {
	slices.SortFunc(rows, func(a, b ProtectionRow) int { return strings.Compare(a.Scope, b.Scope) })
}

// protections lists the cluster's protections.
func (c *cluster) protections() []protection {
	return []protection{&c.hot}
}

// Protections returns the counters of every protection of every cluster,
// clusters in configuration order.
func (s *Server) Protections() []ProtectionRow {
	var rows []ProtectionRow
	for _, name := range s.clusterNames {
		cl := s.clusters[name]
		conf := cl.conf.Load()
		for _, p := range cl.protections() {
			rows = append(rows, p.protectionRows(name, conf)...)
		}
	}
	return rows
}
