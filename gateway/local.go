package gateway

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

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

// kind names the pool's kind in SHOW GATEWAY POOLS: backend, owner,
// user, or one of those two with _found_rows.
func (p PoolStat) kind() string {
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

// PoolStats returns every pool's figures, sorted by cluster and backend.
func (s *Server) PoolStats() []PoolStat {
	var out []PoolStat
	for _, name := range s.clusterNames {
		c := s.clusters[name]
		backends := *c.backends.Load()
		addrs := make([]string, 0, len(backends))
		for a := range backends {
			addrs = append(addrs, a)
		}
		slices.Sort(addrs)
		for _, a := range addrs {
			be := backends[a]
			var list []PoolStat
			be.eachPool(func(k poolKey, p *pools.Pool[*backendConn]) {
				u := k.user
				if u == "" {
					u = c.conf.Load().BackendUser
				}
				list = append(list, PoolStat{Cluster: name, Backend: a, BackendUser: u, FoundRows: k.foundRows,
					UserPool: k.user != "", Stat: p.Stat()})
			})
			slices.SortFunc(list, func(x, y PoolStat) int {
				switch {
				case x.UserPool != y.UserPool:
					if !x.UserPool {
						return -1
					}
					return 1
				case x.BackendUser != y.BackendUser:
					return strings.Compare(x.BackendUser, y.BackendUser)
				case x.FoundRows != y.FoundRows:
					if !x.FoundRows {
						return -1
					}
					return 1
				}
				return 0
			})
			out = append(out, list...)
		}
		if c.fwd != nil {
			out = append(out, PoolStat{Cluster: name, Backend: c.fwd.Addr(), Owner: true, Stat: c.fwd.Stat()})
		}
	}
	return out
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

// maxAttrsShown bounds SessionInfo.Attrs.
const maxAttrsShown = 300

// attrsLine is SessionInfo.Attrs of attrs.
func attrsLine(attrs []wire.Attr) string {
	var b strings.Builder
	for i, a := range attrs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.Name)
		b.WriteByte('=')
		b.WriteString(a.Value)
		if b.Len() > maxAttrsShown {
			break
		}
	}
	return truncateChars(b.String(), maxAttrsShown)
}

// Sessions returns the current sessions by id. The pin and backend fields
// are read without stopping the sessions: a snapshot, not a guarantee.
func (s *Server) Sessions() []SessionInfo {
	var out []SessionInfo
	s.forEachSession(func(ss *Session) {
		info := SessionInfo{ID: ss.id, Client: ss.nc.RemoteAddr().String(), Busy: ss.wait.Busy(), InTxn: ss.inTxn.Load()}
		if u := ss.owner.Load(); u != nil {
			info.User = *u
			info.Attrs = attrsLine(ss.attrs)
		}
		if p := ss.pinView.Load(); p != nil {
			info.Pinned, info.Backend = p.reasons, p.backend
		}
		out = append(out, info)
	})
	slices.SortFunc(out, func(a, b SessionInfo) int { return int(a.ID) - int(b.ID) })
	return out
}

// showGateway answers SHOW GATEWAY BACKENDS, POOLS, SESSIONS and
// PROTECTIONS from the
// gateway's own state, for people who only have a MySQL client.
func (ss *Session) showGateway(what string) error {
	str := func(s string) []byte { return []byte(s) }
	num := func(n int64) []byte { return strconv.AppendInt(nil, n, 10) }
	col := func(name string, numeric bool) wire.Column {
		c := wire.Column{Name: name, Charset: 33, Length: 256, Type: wire.TypeVarString}
		if numeric {
			c = wire.Column{Name: name, Charset: wire.BinaryCollation, Length: 20, Type: wire.TypeLongLong, Flags: wire.FlagNum | wire.FlagNotNull}
		}
		return c
	}
	var cols []wire.Column
	var rows [][][]byte
	switch what {
	case "backends":
		cols = []wire.Column{col("Cluster", false), col("Backend", false), col("Role", false), col("State", false),
			col("Reason", false), col("Since", false), col("Lag_seconds", false), col("Probe_ms", false),
			col("Score_ms", false), col("In_flight", true), col("Server_id", true)}
		snap := ss.srv.health.Snapshot()
		for _, name := range ss.srv.clusterNames {
			c := snap.Cluster(name)
			if c == nil {
				continue
			}
			for _, addr := range c.Backends {
				v := snap.Backends[addr]
				lag := []byte(nil)
				if v.Last.LagKnown {
					lag = strconv.AppendFloat(nil, v.Last.Lag.Seconds(), 'f', 0, 64)
				}
				var score, inFlight int64
				if be := ss.srv.clusters[name].backend(addr); be != nil {
					score, inFlight = int64(be.load.Score()), be.load.InFlight()
				}
				rows = append(rows, [][]byte{str(name), str(addr), str(v.Role.String()), str(v.State.String()),
					str(v.Reason), str(v.Since.UTC().Format(time.RFC3339)), lag,
					strconv.AppendFloat(nil, ms(v.Last.RTT), 'f', 3, 64),
					strconv.AppendFloat(nil, ms(time.Duration(score)), 'f', 3, 64),
					num(inFlight), num(int64(v.Last.ServerID))})
			}
		}
	case "pools":
		cols = []wire.Column{col("Cluster", false), col("Backend", false), col("Kind", false), col("Size", true),
			col("Open", true), col("In_use", true), col("Idle", true), col("Dialing", true), col("Waits", true),
			col("Wait_ms", true), col("Dials", true), col("Dial_errors", true), col("Destroyed", true), col("Acquire_timeouts", true),
			col("Backend_user", false), col("Order", false), col("Acquires", true)}
		for _, p := range ss.srv.PoolStats() {
			rows = append(rows, [][]byte{str(p.Cluster), str(p.Backend), str(p.kind()), num(int64(p.Size)), num(int64(p.Open)),
				num(int64(p.InUse)), num(int64(p.Idle)), num(int64(p.Dialing)), num(p.Waits), num(p.WaitTime.Milliseconds()),
				num(p.Dials), num(p.DialErrors), num(p.Destroyed), num(p.AcquireTimeouts), str(p.BackendUser),
				str(p.Order.String()), num(p.Acquires)})
		}
	case "sessions":
		cols = []wire.Column{col("Id", true), col("User", false), col("Client", false), col("Busy", false),
			col("In_transaction", false), col("Pinned", false), col("Backend", false)}
		yes := func(b bool) []byte {
			if b {
				return str("yes")
			}
			return str("no")
		}
		for _, si := range ss.srv.Sessions() {
			rows = append(rows, [][]byte{num(int64(si.ID)), str(si.User), str(si.Client), yes(si.Busy), yes(si.InTxn), str(si.Pinned), str(si.Backend)})
		}
	case "protections":
		cols = []wire.Column{col("Protection", false), col("Cluster", false), col("Scope", false), col("Mode", false),
			col("Active", true), col("Total", true), col("Refused", true), col("Refused_wait", true),
			col("Dry_run", true), col("Dry_run_refused", true), col("Rate", false), col("Refused_rate", false), col("Detail", false)}
		rate := func(r float64) []byte { return strconv.AppendFloat(nil, r, 'f', 2, 64) }
		for _, p := range ss.srv.Protections() {
			rows = append(rows, [][]byte{str(p.Protection), str(p.Cluster), str(p.Scope), str(p.Mode), num(p.Active), num(p.Total),
				num(p.Refused), num(p.RefusedWait), num(p.DryRun), num(p.DryRunRefused), rate(p.Rate), rate(p.RefusedRate), str(p.Detail)})
		}
	case "transactions":
		cols, rows = ss.showTransactions()
	case "queries", "rules":
		return ss.showInsight(what) // query insight (insight_views.go)
	default:
		return ss.writeErr(wire.NewError(1064, "42000", "You have an error in your SQL syntax: SHOW GATEWAY takes BACKENDS, POOLS, SESSIONS, PROTECTIONS, TRANSACTIONS, QUERIES or RULES"))
	}
	return ss.writeRows(cols, rows)
}
