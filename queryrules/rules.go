package queryrules

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/querystats"
)

// Spec is one rule as the configuration writes it (query_rules[]).
type Spec struct {
	// Name names the rule in errors, logs, SHOW GATEWAY RULES and the
	// client's error of a deny. Required, unique.
	Name string `yaml:"name"`
	// Match says which statements the rule takes: every field set must
	// match; none set matches every statement.
	Match MatchSpec `yaml:"match"`
	// Deny, when set, refuses the statement with this message: it runs
	// nowhere.
	Deny string `yaml:"deny"`
	// Route sends the statement to the primary or, for a read outside a
	// transaction, to a replica: "primary" or "replica".
	Route string `yaml:"route"`
	// Timeout, when set, stops the statement on the backend (KILL QUERY)
	// once it has run that long.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRows, when set, cuts a result set past that many rows with an
	// error and stops the statement on the backend.
	MaxRows int64 `yaml:"max_rows"`
	// Priority, when set (0 to 100), is the statement's priority for the
	// protections, in place of its user's (users[].priority).
	Priority *int `yaml:"priority"`
	// Log logs each statement the rule takes.
	Log bool `yaml:"log"`
	// DryRun counts and logs what the rule would do, and does nothing.
	DryRun bool `yaml:"dry_run"`
	// Continue tries the next rules after this one matched; what a later
	// rule decides is added where this one left it unset.
	Continue bool `yaml:"continue"`
}

// MatchSpec is a rule's match (query_rules[].match).
type MatchSpec struct {
	// Fingerprint is a digest's fingerprint, 16 hex digits as SHOW
	// GATEWAY QUERIES shows it.
	Fingerprint string `yaml:"fingerprint"`
	// Pattern is a regular expression (Go syntax) on the digest text.
	Pattern string `yaml:"pattern"`
	// Kind is the statement's kind: select, insert, update, delete,
	// replace, call, ddl, set, show, transaction or other.
	Kind string `yaml:"kind"`
	// Tables match when the statement names one of them (db.table, or
	// table in any database).
	Tables []string `yaml:"tables"`
	// Users and Databases match the session's user and current database.
	Users     []string `yaml:"users"`
	Databases []string `yaml:"databases"`
	// Clients match the client's address: an IP or a CIDR prefix.
	Clients []string `yaml:"clients"`
}

// Route is where a rule sends a statement.
type Route uint8

// The routes of a rule.
const (
	RouteNone Route = iota
	RoutePrimary
	RouteReplica
)

// String is the route's configuration name.
func (r Route) String() string {
	return [...]string{"", "primary", "replica"}[r]
}

// Rule is one compiled rule with its hit counters.
type Rule struct {
	Spec
	// Position is the rule's index in query_rules.
	Position    int
	fingerprint querystats.Fingerprint
	pattern     *regexp.Regexp
	route       Route
	clients     []netip.Prefix
	hits        atomic.Uint64
	dryHits     atomic.Uint64
}

// Hits counts the statements the rule took (acted on), DryRunHits those
// a dry-run rule would have.
func (r *Rule) Hits() uint64 { return r.hits.Load() }

// DryRunHits counts the statements a dry-run rule would have taken.
func (r *Rule) DryRunHits() uint64 { return r.dryHits.Load() }

// Action describes what the rule does, for SHOW GATEWAY RULES.
func (r *Rule) Action() string {
	var parts []string
	if r.Deny != "" {
		parts = append(parts, "deny")
	}
	if r.route != RouteNone {
		parts = append(parts, "route="+r.route.String())
	}
	if r.Timeout > 0 {
		parts = append(parts, "timeout="+r.Timeout.String())
	}
	if r.MaxRows > 0 {
		parts = append(parts, fmt.Sprintf("max_rows=%d", r.MaxRows))
	}
	if r.Priority != nil {
		parts = append(parts, fmt.Sprintf("priority=%d", *r.Priority))
	}
	if r.Log {
		parts = append(parts, "log")
	}
	if r.Continue {
		parts = append(parts, "continue")
	}
	return strings.Join(parts, ",")
}

// Set is the compiled rules, in order. A nil *Set has no rules.
type Set struct {
	rules []*Rule
	// needTables says some rule matches on tables.
	needTables bool
}

// Compile checks and compiles the rules. Its error names each bad rule
// by its position and name and says what is wrong.
func Compile(specs []Spec) (*Set, error) {
	s := &Set{}
	var errs []error
	names := map[string]int{}
	for i, sp := range specs {
		r, err := compile(i, sp)
		if err == nil && sp.Name != "" {
			if j, dup := names[sp.Name]; dup {
				err = fmt.Errorf("name %q is taken by query_rules[%d]", sp.Name, j)
			}
			names[sp.Name] = i
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("query_rules[%d] (%s): %w", i, sp.Name, err))
			continue
		}
		s.rules = append(s.rules, r)
		s.needTables = s.needTables || len(sp.Match.Tables) > 0
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// compile checks one rule.
func compile(i int, sp Spec) (*Rule, error) {
	r := &Rule{Spec: sp, Position: i}
	if sp.Name == "" {
		return nil, errors.New("name: required")
	}
	if err := r.compileMatch(); err != nil {
		return nil, err
	}
	switch sp.Route {
	case "":
	case "primary":
		r.route = RoutePrimary
	case "replica":
		r.route = RouteReplica
	default:
		return nil, fmt.Errorf("route: %q is not primary or replica", sp.Route)
	}
	switch {
	case sp.Timeout < 0:
		return nil, errors.New("timeout: must not be negative")
	case sp.MaxRows < 0:
		return nil, errors.New("max_rows: must not be negative")
	case sp.Priority != nil && (*sp.Priority < 0 || *sp.Priority > 100):
		return nil, fmt.Errorf("priority: %d is not between 0 and 100", *sp.Priority)
	case sp.Deny != "" && (r.route != RouteNone || sp.Timeout > 0 || sp.MaxRows > 0 || sp.Priority != nil || sp.Continue):
		return nil, errors.New("deny: a denied statement runs nowhere; route, timeout, max_rows, priority and continue make no sense with it")
	case sp.Deny == "" && r.route == RouteNone && sp.Timeout == 0 && sp.MaxRows == 0 && sp.Priority == nil && !sp.Log:
		return nil, errors.New("no action: set one of deny, route, timeout, max_rows, priority, log")
	}
	return r, nil
}

// compileMatch checks and compiles the rule's match.
func (r *Rule) compileMatch() error {
	m := r.Match
	if m.Fingerprint != "" {
		fp, ok := querystats.ParseFingerprint(strings.ToLower(m.Fingerprint))
		if !ok {
			return fmt.Errorf("match.fingerprint: %q is not 16 hex digits (the fingerprint column of SHOW GATEWAY QUERIES)", m.Fingerprint)
		}
		r.fingerprint = fp
	}
	if m.Pattern != "" {
		re, err := regexp.Compile(m.Pattern)
		if err != nil {
			return fmt.Errorf("match.pattern: %w", err)
		}
		r.pattern = re
	}
	if m.Kind != "" && !slices.Contains(kinds, m.Kind) {
		return fmt.Errorf("match.kind: %q is not one of %s", m.Kind, strings.Join(kinds, ", "))
	}
	for j, t := range m.Tables {
		if t == "" || strings.Count(t, ".") > 1 {
			return fmt.Errorf("match.tables[%d]: %q is not table or database.table", j, t)
		}
	}
	for j, c := range m.Clients {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				return fmt.Errorf("match.clients[%d]: %q is not an IP address or CIDR prefix", j, c)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		r.clients = append(r.clients, p.Masked())
	}
	return nil
}

// Rules returns the rules in order (nil for a nil set).
func (s *Set) Rules() []*Rule {
	if s == nil {
		return nil
	}
	return s.rules
}

// Len returns how many rules the set has.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Inherit carries the hit counters of old's rules over to the rules of
// the same name in s: a reload does not reset them.
func (s *Set) Inherit(old *Set) {
	if s == nil || old == nil {
		return
	}
	for _, r := range s.rules {
		for _, o := range old.rules {
			if o.Name == r.Name {
				r.hits.Store(o.hits.Load())
				r.dryHits.Store(o.dryHits.Load())
			}
		}
	}
}
