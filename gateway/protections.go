package gateway

import (
	"context"
	"strings"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
)

// The protections (package protect) are a cluster's policies, kept in
// cluster.guards; a session calls them through its Guard at the points
// of a statement's life: admitted (admit), backend chosen
// (Session.backend), answer ended (endHook) and transaction ended
// (dispatch, end).

// newProtections builds the protections of cluster c, in the order a
// statement meets them: throttled before hot rows, so that a delayed
// write holds no row. classify finds the row a statement writes.
func (c *cluster) newProtections(classify func(string) (querypath.RowWrite, bool)) {
	conf := func() *config.Cluster { return c.conf.Load() }
	c.thr = protect.NewThrottle(c.name, c.snapshot, conf)
	c.consol = &protect.Consolidation[consolKey]{}
	c.guards = protect.NewSet(c.name,
		c.thr,
		protect.NewHotRows(classify, conf),
		c.consol,
		protect.NewShedding(c.backendList),
	)
}

// snapshot is discovery's latest snapshot, nil without discovery.
func (c *cluster) snapshot() *healthcheck.Snapshot {
	if h := c.health.Load(); h != nil {
		return h.Snapshot()
	}
	return nil
}

// backendList lists the cluster's backends now, for the protections.
func (c *cluster) backendList() []protect.Backend {
	m := *c.backends.Load()
	list := make([]protect.Backend, 0, len(m))
	for _, be := range m {
		list = append(list, be)
	}
	return list
}

// Protections returns the counters of every protection of every cluster,
// clusters in configuration order, with the rates of each cluster row.
func (s *Server) Protections() []protect.Row {
	rows := s.protectionCounters()
	if s.metrics != nil {
		s.metrics.sampler.rates.Fill(rows, time.Now())
	}
	return rows
}

// protectionCounters returns the counters of every protection of every
// cluster, without rates.
func (s *Server) protectionCounters() []protect.Row {
	var rows []protect.Row
	for _, name := range s.clusterNames {
		cl := s.clusters[name]
		rows = append(rows, cl.guards.Rows(cl.conf.Load())...)
	}
	return rows
}

// admit is the statement-admitted point of text statement sql (routed
// route) or, when st is not nil, of an execute (packet p) of prepared
// statement st. A non-nil error is the client's answer instead of the
// statement's.
func (ss *Session) admit(sql string, route querypath.Route, st *stmt, p []byte) *wire.SQLError {
	c := ss.cluster
	if c == nil {
		return nil
	}
	s := ss.guard.Statement()
	s.Conf, s.Route, s.SQL, s.DB, s.Cmd = c.conf.Load(), route, sql, ss.db, wire.ComQuery
	if st != nil {
		st.exec = execParams{ss: ss, st: st, p: p}
		s.Cmd, s.DB, s.Prepared, s.Params = wire.ComStmtExecute, st.db, &st.guard, &st.exec
		defer func() { st.exec = execParams{} }() // p is the session's read buffer
	}
	return ss.guard.Admit(c.guards, s)
}

// execParams are the parameters of an execute (packet p) of st, parsed
// on first use (protect.Params).
type execParams struct {
	ss     *Session
	st     *stmt
	p      []byte
	parsed []wire.Param
	failed bool
}

// Param implements protect.Params.
func (e *execParams) Param(i int) (string, bool) {
	if e.parsed == nil && !e.failed {
		var err error
		e.parsed, err = wire.ParseExecuteParams(e.p, int(e.st.params), e.st.types, e.st.longDataOf)
		e.failed = err != nil
	}
	if i >= len(e.parsed) || e.parsed[i].Null {
		return "", false
	}
	ss := e.ss
	lf := literalFormat{noBackslash: ss.status&wire.StatusNoBackslashEscapes != 0, charset: ss.backslashCharset()}
	lit, sqlErr := lf.literal(e.parsed[i])
	if sqlErr != nil {
		return "", false
	}
	if len(lit) >= 2 && lit[0] == '\'' && lit[len(lit)-1] == '\'' {
		lit = lit[1 : len(lit)-1] // a string: its contents, as the text path keys it
	}
	return lit, true
}

// choosing says that a backend is about to be chosen for a statement of
// command cmd and route; first says it is not a retry (only then may the
// protections refuse it when its backend is chosen).
func (ss *Session) choosing(cmd byte, route querypath.Route, first bool) {
	ss.guard.Choosing(protect.Choice{Cmd: cmd, Kind: route.Kind, Pinned: ss.pins&^transientPins != 0}, first)
}

// guardSession is a Session as its protections see it
// (protect.Session).
type guardSession Session

var _ protect.Session = (*guardSession)(nil)

// StatementContext implements protect.Session.
func (g *guardSession) StatementContext() context.Context {
	return (*Session)(g).statementContext()
}

// Gone implements protect.Session.
func (g *guardSession) Gone() bool { return g.client.PeerGone() }

// Block implements protect.Session: the wait shows in the process list
// and, on an io loop, runs on a goroutine.
func (g *guardSession) Block(w protect.Wait, fn func()) {
	ss := (*Session)(g)
	wait, why := waitHotRow, offloadHotRow
	switch w {
	case protect.WaitThrottle:
		wait, why = waitThrottle, offloadThrottle
	case protect.WaitConsolidation:
		wait, why = waitConsolidation, offloadConsolidation
	}
	ss.proc.waiting(wait)
	ss.blocking(why, fn)
	ss.proc.waiting(waitNone)
}

// Priority implements protect.Session.
func (g *guardSession) Priority() int { return (*Session)(g).priority() }

// Status implements protect.Session.
func (g *guardSession) Status() uint16 { return g.status }

// TxnState implements protect.Session.
func (g *guardSession) TxnState() string { return g.txnState }

// KeyColumns implements protect.Session.
func (g *guardSession) KeyColumns(table string) (map[string]bool, error) {
	return g.cluster.keyColumns((*Session)(g), table)
}

// Logger implements protect.Session.
func (g *guardSession) Logger() hclog.Logger { return g.log }

// Now implements protect.Session.
func (g *guardSession) Now() time.Time { return g.now }

// Addr implements protect.Backend.
func (be *backend) Addr() string { return be.addr }

// InFlight implements protect.Backend.
func (be *backend) InFlight() int64 { return be.load.InFlight() }

// QueueWait implements protect.Backend.
func (be *backend) QueueWait(now time.Time, s protect.Session) time.Duration {
	if g, ok := s.(*guardSession); ok {
		if pool, err := be.poolFor((*Session)(g).poolKey()); err == nil {
			return pool.QueueWait(now)
		}
		return 0
	}
	var d time.Duration
	if m := be.pools.Load(); m != nil {
		for _, p := range *m {
			d = max(d, p.QueueWait(now))
		}
	}
	return d
}

// priority is the session's user's priority as configured now (a reload
// applies to open sessions), 50 by default.
func (ss *Session) priority() int {
	if p, ok := ss.insight.priority(); ok { // a query rule's priority (insight.go)
		return p
	}
	u := ss.user
	if ss.srv != nil && ss.srv.users.Load() != nil {
		if cur, ok := ss.srv.user(ss.user.User); ok {
			u = cur
		}
	}
	if u.Priority == nil {
		return config.DefaultPriority
	}
	return *u.Priority
}

// keyColumns returns the columns of table "db.table" that are a
// single-column primary or unique key, lower case, asking the primary
// the first time. The cache is bounded (emptied when full) and emptied by
// a reload.
func (c *cluster) keyColumns(ss *Session, table string) (map[string]bool, error) {
	c.keyMu.Lock()
	keys, ok := c.keys[table]
	c.keyMu.Unlock()
	if ok {
		return keys, nil
	}
	keys = map[string]bool{}
	err := c.queryPrimary(ss, "SELECT MIN(COLUMN_NAME) FROM information_schema.STATISTICS WHERE "+tableIs(table)+
		" AND NON_UNIQUE = 0 GROUP BY INDEX_NAME HAVING COUNT(*) = 1", func(row [][]byte) {
		if len(row) == 1 && row[0] != nil {
			keys[strings.ToLower(string(row[0]))] = true
		}
	})
	if err != nil {
		return nil, err
	}
	c.keyMu.Lock()
	if c.keys == nil || len(c.keys) >= maxKeyTables {
		c.keys = map[string]map[string]bool{}
	}
	c.keys[table] = keys
	c.keyMu.Unlock()
	return keys, nil
}

// maxKeyTables bounds the tables whose keys a cluster remembers.
const maxKeyTables = 10000

// forgetKeys empties the key column cache: on a reload, and after a
// statement through the gateway that may have changed a table's keys
// (ALTER, CREATE, DROP, RENAME, TRUNCATE).
func (c *cluster) forgetKeys() {
	c.keyMu.Lock()
	c.keys = nil
	c.keyMu.Unlock()
}
