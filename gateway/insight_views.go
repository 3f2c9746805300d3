package gateway

import (
	"github.com/directgate/directgate/ops"
	"github.com/directgate/directgate/queryrules"
	"github.com/directgate/directgate/querystats"
	"github.com/directgate/directgate/wire"
)

// The gateway's side of query insight's views (ops/insight.go): the
// digests and rules they read, and SHOW GATEWAY QUERIES and RULES.

// QueryDigests returns the digests, largest first by o, at most limit
// (0: all), and how many were evicted; nil while query_stats is off.
func (s *Server) QueryDigests(o querystats.Order, limit int) ([]querystats.Digest, uint64) {
	st := s.insight.store.Load()
	if st == nil {
		return nil, 0
	}
	return st.Top(o, limit), st.Evicted()
}

// QueryRules returns the query rules in force, with their counters.
func (s *Server) QueryRules() []*queryrules.Rule { return s.insight.rules.Load().Rules() }

// showInsight answers SHOW GATEWAY QUERIES [...] and SHOW GATEWAY RULES.
func (ss *Session) showInsight(what string) error {
	if what == "rules" {
		return ss.writeTable(ops.RulesTable(ss.srv.QueryRules()))
	}
	ss.proc.mu.Lock()
	sql := ss.proc.sql // the text protocol's statement; a prepared one takes the defaults
	ss.proc.mu.Unlock()
	var q querystats.ShowQueries
	if sql != "" {
		var err error
		if q, err = querystats.ParseShowQueries(sql); err != nil {
			return ss.writeErr(wire.NewError(1064, "42000", "You have an error in your SQL syntax: %v", err))
		}
	}
	st := ss.srv.insight.store.Load()
	if q.Reset {
		if st != nil {
			st.Reset()
		}
		return ss.writeOK(wire.OK{Status: ss.status})
	}
	digests, _ := ss.srv.QueryDigests(q.Order, q.Limit)
	return ss.writeTable(ops.QueriesTable(digests))
}

// writeRows sends a result set of columns cols and rows rows, and
// flushes (SHOW GATEWAY).
func (ss *Session) writeRows(cols []wire.Column, rows [][][]byte) error {
	w := wire.ResultWriter{Conn: ss.client, Caps: ss.caps, Status: ss.status}
	if err := w.Columns(cols); err != nil {
		return err
	}
	for _, r := range rows {
		if err := w.Row(r); err != nil {
			return err
		}
	}
	if err := w.End(0); err != nil {
		return err
	}
	return ss.client.Flush()
}

// writeTable sends t, a table of the operator surfaces, as a result set.
func (ss *Session) writeTable(t ops.Table) error {
	cols := make([]wire.Column, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = wire.Column{Name: c.Name, Charset: 33, Length: 256, Type: wire.TypeVarString}
		if c.Numeric {
			cols[i] = wire.Column{Name: c.Name, Charset: wire.BinaryCollation, Length: 20, Type: wire.TypeLongLong, Flags: wire.FlagNum | wire.FlagNotNull}
		}
	}
	return ss.writeRows(cols, t.Rows)
}
