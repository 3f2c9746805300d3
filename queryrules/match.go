package queryrules

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/directgate/directgate/querystats"
)

// Statement is what the rules see of a statement.
type Statement struct {
	Fingerprint querystats.Fingerprint
	// Text is the digest text (querystats.Normalizer).
	Text []byte
	// User, Database and Client are the session's user, current database
	// and client address (no port; invalid when not an IP connection).
	User, Database string
	Client         netip.Addr
}

// Decision is what the matching rules decided for a statement. The zero
// value changes nothing.
type Decision struct {
	// Deny, when set, is the rule that refuses the statement.
	Deny *Rule
	// Route, Timeout and MaxRows are 0 when no rule set them.
	Route   Route
	Timeout time.Duration
	MaxRows uint64
	// Priority is set when HasPriority.
	Priority    int
	HasPriority bool
	// Log is the first matching rule that logs, or a dry-run rule that
	// matched (it always logs); DryRun says Log is a dry run.
	Log    *Rule
	DryRun bool
	// TimeoutRule and MaxRowsRule name the rules of Timeout and MaxRows,
	// for the errors and logs they cause.
	TimeoutRule, MaxRowsRule *Rule
}

// Match tries the rules in order on st and returns what they decide:
// the first match wins, unless it says continue. A dry-run rule that
// matches is counted and logged and decides nothing. It does not
// allocate.
func (s *Set) Match(st *Statement) Decision {
	var d Decision
	if s == nil {
		return d
	}
	var tables tableList
	for _, r := range s.rules {
		if !r.matches(st, &tables, s.needTables) {
			continue
		}
		if r.DryRun {
			r.dryHits.Add(1)
			if d.Log == nil {
				d.Log, d.DryRun = r, true
			}
			continue
		}
		r.hits.Add(1)
		d.apply(r)
		if !r.Continue {
			break
		}
	}
	return d
}

// apply adds what r decides where the decision is still unset.
func (d *Decision) apply(r *Rule) {
	if r.Deny != "" && d.Deny == nil {
		d.Deny = r
	}
	if d.Route == RouteNone {
		d.Route = r.route
	}
	if d.Timeout == 0 && r.Timeout > 0 {
		d.Timeout, d.TimeoutRule = r.Timeout, r
	}
	if d.MaxRows == 0 && r.MaxRows > 0 {
		d.MaxRows, d.MaxRowsRule = uint64(r.MaxRows), r
	}
	if !d.HasPriority && r.Priority != nil {
		d.Priority, d.HasPriority = *r.Priority, true
	}
	if r.Log && (d.Log == nil || d.DryRun) {
		d.Log, d.DryRun = r, false
	}
}

// matches reports whether every match field r sets matches st.
func (r *Rule) matches(st *Statement, tables *tableList, need bool) bool {
	m := &r.Match
	if m.Fingerprint != "" && st.Fingerprint != r.fingerprint {
		return false
	}
	if len(m.Users) > 0 && !slices.Contains(m.Users, st.User) {
		return false
	}
	if len(m.Databases) > 0 && !slices.Contains(m.Databases, st.Database) {
		return false
	}
	if len(r.clients) > 0 && !r.clientMatches(st.Client) {
		return false
	}
	if m.Kind != "" && KindOf(st.Text) != m.Kind {
		return false
	}
	if len(m.Tables) > 0 {
		if need && !tables.done {
			tables.read(st.Text)
		}
		if !tables.any(m.Tables, st.Database) {
			return false
		}
	}
	if r.pattern != nil && !r.pattern.Match(st.Text) {
		return false
	}
	return true
}

func (r *Rule) clientMatches(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range r.clients {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// kinds are the statement kinds a rule matches on.
var kinds = []string{"select", "insert", "update", "delete", "replace", "call", "ddl", "set", "show", "transaction", "other"}

// KindOf returns the kind of a statement from its digest text's first
// word: select (WITH and VALUES and TABLE included), insert, update,
// delete, replace, call, ddl (create, alter, drop, truncate, rename), set,
// show, transaction (begin, start, commit, rollback, savepoint, release,
// xa) or other.
func KindOf(text []byte) string {
	w := text
	for len(w) > 0 && w[0] == '(' {
		w = w[1:]
	}
	if i := strings.IndexAny(string(w), " (;"); i >= 0 {
		w = w[:i]
	}
	switch string(w) {
	case "select", "with", "values", "table":
		return "select"
	case "insert", "update", "delete", "replace", "call", "set", "show":
		return string(w)
	case "create", "alter", "drop", "truncate", "rename":
		return "ddl"
	case "begin", "start", "commit", "rollback", "savepoint", "release", "xa":
		return "transaction"
	}
	return "other"
}

// tableList is the tables a statement names, read from its digest text
// once, on the first rule that asks: at most 8, each "db.table" or
// "table", quotes removed.
type tableList struct {
	done  bool
	n     int
	names [8]string
}

// read finds the names after from, join, into, update and table (and the
// comma-separated ones after from).
func (tl *tableList) read(text []byte) {
	tl.done = true
	s := string(text)
	want := false
	for len(s) > 0 && tl.n < len(tl.names) {
		s = strings.TrimLeft(s, " ")
		end := strings.IndexAny(s, " ,()")
		if end < 0 {
			end = len(s)
		}
		if end == 0 {
			if s[0] != ',' {
				want = false
			}
			s = s[1:]
			continue
		}
		w := s[:end]
		s = s[end:]
		switch w {
		case "from", "join", "into", "update", "table":
			want = true
			continue
		}
		if want && isModifier(w) {
			continue
		}
		if want && w != "?" && !isKeyword(w) {
			tl.names[tl.n] = strings.ReplaceAll(w, "`", "")
			tl.n++
		}
		want = want && strings.HasPrefix(s, ",")
	}
}

// isKeyword reports whether w ends a table list rather than naming a
// table.
func isKeyword(w string) bool {
	switch w {
	case "select", "where", "set", "values", "value", "on", "using", "as", "dual":
		return true
	}
	return false
}

// isModifier reports whether w may stand between from, into, update or
// join and the table.
func isModifier(w string) bool {
	switch w {
	case "ignore", "low_priority", "delayed", "high_priority", "quick", "straight_join", "lateral":
		return true
	}
	return false
}

// any reports whether the statement names one of the tables: "db.t"
// matches t qualified with db, or unqualified while db is the session's
// database; "t" matches t in any database.
func (tl *tableList) any(want []string, db string) bool {
	for _, have := range tl.names[:tl.n] {
		hdb, ht, qualified := strings.Cut(have, ".")
		if !qualified {
			hdb, ht = db, have
		}
		for _, w := range want {
			wdb, wt, wq := strings.Cut(w, ".")
			if !wq {
				if strings.EqualFold(wdb, ht) {
					return true
				}
				continue
			}
			if strings.EqualFold(wt, ht) && strings.EqualFold(wdb, hdb) {
				return true
			}
		}
	}
	return false
}
