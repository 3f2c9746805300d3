package gateway

import (
	"slices"
	"strings"

	"github.com/directgate/directgate/ops"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

// PoolStats returns every pool's figures, sorted by cluster and backend.
func (s *Server) PoolStats() []ops.PoolStat {
	var out []ops.PoolStat
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
			var list []ops.PoolStat
			be.eachPool(func(k poolKey, p *pools.Pool[*backendConn]) {
				u := k.user
				if u == "" {
					u = c.conf.Load().BackendUser
				}
				list = append(list, ops.PoolStat{Cluster: name, Backend: a, BackendUser: u, FoundRows: k.foundRows,
					UserPool: k.user != "", Stat: p.Stat()})
			})
			slices.SortFunc(list, func(x, y ops.PoolStat) int {
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
			out = append(out, ops.PoolStat{Cluster: name, Backend: c.fwd.Addr(), Owner: true, Stat: c.fwd.Stat()})
		}
	}
	return out
}

// maxAttrsShown bounds ops.ops.SessionInfo.Attrs.
const maxAttrsShown = 300

// attrsLine is ops.ops.SessionInfo.Attrs of attrs.
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
func (s *Server) Sessions() []ops.SessionInfo {
	var out []ops.SessionInfo
	s.forEachSession(func(ss *Session) {
		info := ops.SessionInfo{ID: ss.id, Client: ss.nc.RemoteAddr().String(), Busy: ss.wait.Busy(), InTxn: ss.inTxn.Load()}
		if u := ss.owner.Load(); u != nil {
			info.User = *u
			info.Attrs = attrsLine(ss.attrs)
		}
		if p := ss.pinView.Load(); p != nil {
			info.Pinned, info.Backend = p.reasons, p.backend
		}
		out = append(out, info)
	})
	slices.SortFunc(out, func(a, b ops.SessionInfo) int { return int(a.ID) - int(b.ID) })
	return out
}

// showGateway answers SHOW GATEWAY BACKENDS, POOLS, SESSIONS,
// PROTECTIONS, TRANSACTIONS, QUERIES and RULES from the gateway's own
// state, for people who only have a MySQL client.
func (ss *Session) showGateway(what string) error {
	switch what {
	case "transactions":
		cols, rows := ss.showTransactions()
		return ss.writeRows(cols, rows)
	case "queries", "rules":
		return ss.showInsight(what) // query insight (insight_views.go)
	}
	t, ok := ops.ShowGateway((*opsGateway)(ss.srv), what)
	if !ok {
		return ss.writeErr(wire.NewError(1064, "42000", "You have an error in your SQL syntax: SHOW GATEWAY takes BACKENDS, POOLS, SESSIONS, PROTECTIONS, TRANSACTIONS, QUERIES or RULES"))
	}
	return ss.writeTable(t)
}
