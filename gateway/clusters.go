package gateway

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/twopc"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Several clusters, one session (clusters[].databases).
//
// A session is on one cluster at a time (Session.cluster, with its lease,
// pins and sticky replica); each statement first moves it to the cluster
// of its tables (routeClusters). What the session holds on the cluster it
// leaves (a transaction, a pinned connection) stays there, parked in a
// clusterSlot, and comes back when a statement returns to that cluster. A
// statement runs on one cluster; a transaction may span several, as
// transaction_mode says (spanTxn).

// dbMap says which cluster holds which database: built at start from
// clusters[].databases, nil when there is one cluster or none lists its
// databases (every statement then stays on the session's cluster, at no
// cost).
type dbMap struct {
	// listed maps each listed database to its cluster.
	listed map[string]*cluster
	// rest is the first cluster that lists no databases: it holds every
	// database no cluster lists; nil when every cluster lists its own.
	rest *cluster
	// listing are the clusters that list their databases.
	listing map[*cluster]bool
	// order is every cluster in the configuration's order.
	order []*cluster
}

// newDBMap builds the map of the configured clusters, or nil.
func newDBMap(cfg *config.Config, clusters map[string]*cluster) *dbMap {
	if len(cfg.Clusters) < 2 {
		return nil
	}
	m := &dbMap{listed: map[string]*cluster{}, listing: map[*cluster]bool{}}
	for _, cc := range cfg.Clusters {
		c := clusters[cc.Name]
		m.order = append(m.order, c)
		if len(cc.Databases) == 0 && m.rest == nil {
			m.rest = c
		}
		for _, db := range cc.Databases {
			m.listed[db] = c
			m.listing[c] = true
		}
	}
	if len(m.listing) == 0 {
		return nil
	}
	return m
}

// clusterOf returns the cluster that holds database db for a session whose
// home (users[].cluster) is home: nil for the system databases, which
// every cluster has.
func (m *dbMap) clusterOf(db string, home *cluster) *cluster {
	if db == "" {
		return home
	}
	if c := m.listed[db]; c != nil {
		return c
	}
	if systemDB(db) {
		return nil
	}
	if !m.listing[home] || m.rest == nil {
		return home
	}
	return m.rest
}

// systemDB reports whether db is one of the databases every server has.
func systemDB(db string) bool {
	return strings.EqualFold(db, "information_schema") || strings.EqualFold(db, "performance_schema") ||
		db == "mysql" || db == "sys"
}

// clusterSlot is what a session keeps on a cluster while its statements
// run on another: the connection it holds there and why, and its replica.
type clusterSlot struct {
	cluster *cluster
	leaseState
	routeState
	globals uint64
}

// sessionClusters is the session's part in several clusters.
type sessionClusters struct {
	// home is users[].cluster's: the cluster of a session without a
	// database.
	home *cluster
	// parked are the clusters the session has been on, but is not now.
	parked []clusterSlot
	// dbBuf is scratch for the databases a statement names.
	dbBuf []string
	// txnMode is the session's transaction_mode (config.TxnSingle, ...).
	txnMode string
	// txn is the transaction the gateway keeps over clusters.
	txn spanTxn
}

// spanTxn is a transaction begun while several clusters may serve the
// session (dbMap set): its BEGIN is held by the gateway and sent to each
// cluster before the transaction's first statement there.
type spanTxn struct {
	// active says the client is in such a transaction.
	active bool
	// mode is the session's transaction_mode when it began.
	mode string
	// begin is the client's BEGIN statement, sent to each participant.
	begin string
	// parts are the clusters the transaction has run statements on, in
	// order.
	parts []*cluster
	// xa says the transaction runs as MariaDB XA on each participant
	// (transaction_mode twopc, twopc.go), gtrid is its id, and start is
	// when it began.
	xa    bool
	gtrid string
	start time.Time
}

// has reports whether c is a participant.
func (t *spanTxn) has(c *cluster) bool { return slices.Contains(t.parts, c) }

// errTxnSingle is the error of a statement that would take a single-mode
// transaction to a second cluster.
func errTxnSingle(open, next *cluster, why string) *wire.SQLError {
	return wire.NewError(1235, "42000",
		"This version of the gateway doesn't yet support %s: the transaction is open on cluster %s and this statement's tables are on cluster %s; COMMIT or ROLLBACK first, or SET transaction_mode = 'multi' or 'twopc' before BEGIN",
		why, open.name, next.name)
}

// routeClusters moves the session to the cluster of the statement's
// tables (dbMap set), after the gateway's own statements: a statement
// whose tables are on two clusters, or one that takes a single-mode
// transaction to a second cluster, is refused (handled, with the error
// written). It also answers what only the gateway can: transaction
// control of a transaction over clusters and SHOW DATABASES.
func (ss *Session) routeClusters(sql string, route querypath.Route) (handled bool, err error) {
	m := ss.srv.dbs
	switch route.Kind {
	case querypath.KindBegin:
		if !route.MultiStatement {
			return true, ss.beginSpan(sql)
		}
	case querypath.KindCommit, querypath.KindRollback:
		if ss.txn.active && !route.MultiStatement {
			return ss.endSpan(route)
		}
		return false, nil
	case querypath.KindShowWarnings:
		return false, nil // the connection of the previous statement
	case querypath.KindUse:
		db, _, _ := splitTarget(route.Database)
		if c := m.clusterOf(db, ss.home); c != nil && c != ss.cluster {
			if e := ss.moveTo(c, false); e != nil {
				return true, ss.writeErr(e)
			}
		}
		return false, nil
	case querypath.KindRead:
		if isShowDatabases(sql) {
			return true, ss.showDatabases(sql)
		}
	}
	if route.ReadsLastResult {
		return false, nil
	}
	if e := ss.placeStatement(sql, ss.db, route); e != nil {
		ss.srv.metrics.statement(routeLocal, outcomeError, 0)
		return true, ss.writeErr(e)
	}
	return false, nil
}

// placeStatement moves the session to the cluster of statement sql (whose
// unqualified tables are in db) and has it join the session's
// transaction there, or says why it cannot run.
func (ss *Session) placeStatement(sql, db string, route querypath.Route) *wire.SQLError {
	target, e := ss.statementCluster(ss.srv.dbs, sql, db)
	if e == nil && route.ImplicitCommit && ss.txn.active && (len(ss.txn.parts) > 1 || len(ss.txn.parts) == 1 && ss.txn.parts[0] != target) {
		e = wire.NewError(1235, "42000", "This version of the gateway doesn't yet support a statement that commits implicitly in a transaction over several clusters: COMMIT or ROLLBACK first")
	}
	if e == nil && target != ss.cluster {
		e = ss.moveTo(target, true)
	}
	if e == nil && ss.txn.active && !ss.txn.has(ss.cluster) {
		e = ss.joinable()
		if e == nil {
			ss.join = ss.txn.begin
			if ss.txn.xa {
				ss.join = "XA START " + ss.txn.xid(ss.cluster)
			}
		}
	}
	return e
}

// statementCluster returns the cluster the statement sql runs on: the one
// of its tables' databases (the current database's for unqualified ones
// and for statements without tables), or an error naming two clusters.
func (ss *Session) statementCluster(m *dbMap, sql, curDB string) (*cluster, *wire.SQLError) {
	dbs, refs := ss.srv.classifier.Databases(sql, ss.dbBuf[:0])
	ss.dbBuf = dbs[:0]
	var target *cluster
	var targetDB string
	for _, db := range dbs {
		if refs.Lexical && m.listed[db] == nil {
			continue // maybe an alias
		}
		c := m.clusterOf(db, ss.home)
		if c == nil {
			continue
		}
		if target == nil {
			target, targetDB = c, db
		} else if c != target {
			return nil, errTwoClusters(targetDB, target, db, c)
		}
	}
	cur := m.clusterOf(curDB, ss.home)
	if cur == nil {
		cur = ss.cluster // a system database: wherever the session is
	}
	switch {
	case target == nil:
		return cur, nil
	case refs.Unqualified && !refs.Lexical && target != cur:
		return nil, errTwoClusters(targetDB, target, curDB, cur)
	}
	return target, nil
}

// errTwoClusters is the error of a statement over tables of two clusters.
func errTwoClusters(db1 string, c1 *cluster, db2 string, c2 *cluster) *wire.SQLError {
	return wire.NewError(1235, "42000",
		"This version of the gateway doesn't yet support a statement over two clusters: database %s is on cluster %s and database %s on cluster %s; a statement runs on one cluster, so split it into one statement per cluster (in one transaction: see transaction_mode)",
		db1, c1.name, db2, c2.name)
}

// joinable says whether the span transaction may take in the session's
// current cluster.
func (ss *Session) joinable() *wire.SQLError {
	if len(ss.txn.parts) > 0 && ss.txn.mode == config.TxnSingle {
		return errTxnSingle(ss.txn.parts[0], ss.cluster, "a transaction over two clusters in transaction_mode single")
	}
	if len(ss.txn.parts) > 0 && ss.txn.mode == config.TxnTwoPC {
		return ss.twopcJoinable()
	}
	return nil
}

// moveTo makes c the session's cluster. What the session holds on the
// cluster it leaves stays there (parked); a connection held only for the
// previous statement's result is given back. joins says the statement
// takes part in the session's transaction: a transaction the server
// opened on the cluster it leaves that the gateway does not keep
// (autocommit off, a batch) refuses it.
func (ss *Session) moveTo(c *cluster, joins bool) *wire.SQLError {
	if ss.lease != nil && ss.pins&^transientPins == 0 {
		ss.setPins(0)
		ss.releaseLease()
	}
	if joins && !ss.txn.active && ss.status&wire.StatusInTrans != 0 {
		return errTxnSingle(ss.cluster, c, "a transaction over two clusters that began without BEGIN or START TRANSACTION, or in a batch")
	}
	if ss.lease != nil {
		ss.settleLease()
	}
	cur := clusterSlot{cluster: ss.cluster, leaseState: ss.leaseState, routeState: ss.routeState, globals: ss.globals}
	target := ss.target
	i := slices.IndexFunc(ss.parked, func(s clusterSlot) bool { return s.cluster == c })
	var next clusterSlot
	if i >= 0 {
		next = ss.parked[i]
		ss.parked[i] = cur
	} else {
		next = clusterSlot{cluster: c, globals: c.globals.Load(),
			leaseState: leaseState{tempTables: map[string]struct{}{}, sqlStmts: map[string]struct{}{}}}
		ss.parked = append(ss.parked, cur)
	}
	ss.cluster, ss.leaseState, ss.routeState, ss.globals = next.cluster, next.leaseState, next.routeState, next.globals
	ss.target = target
	ss.insertIDSynced = false
	ss.nextState() // the current database may be another on this cluster's connections
	return nil
}

// settleLease reads back what the session keeps of its connection's
// state (diagnostics, LAST_INSERT_ID(), the GTID of a write) before the
// session leaves the connection's cluster with the connection held.
func (ss *Session) settleLease() {
	conn := ss.lease.Conn()
	if conn.closed {
		return
	}
	if err := ss.captureDiag(conn); err != nil {
		return
	}
	if ss.insertIDPending {
		ss.insertIDPending = false
		_ = ss.readInsertID(conn)
	}
	if ss.gtidPending {
		ss.gtidPending = false
		if ss.leaseRole == rolePrimary {
			ss.noteWrite(conn)
		}
	}
}

// connDB is the default database the session's connections on its
// current cluster take: the session's, unless another cluster holds it
// (then none).
func (ss *Session) connDB() string {
	if m := ss.srv.dbs; m != nil && ss.db != "" {
		if c := m.clusterOf(ss.db, ss.home); c != nil && c != ss.cluster {
			return ""
		}
	}
	return ss.db
}

// eachParked runs f with each parked cluster made the session's current
// one, then puts the session back where it was.
func (ss *Session) eachParked(f func()) {
	if len(ss.parked) == 0 {
		return
	}
	home := ss.cluster
	for _, s := range slices.Clone(ss.parked) {
		if s.lease == nil && s.join == "" {
			continue
		}
		_ = ss.moveTo(s.cluster, false)
		f()
	}
	if ss.cluster != home {
		_ = ss.moveTo(home, false)
	}
}

// letAllGo gives back every connection the session holds, on every
// cluster, for a fresh session (COM_RESET_CONNECTION, COM_CHANGE_USER):
// what they hold (a transaction) is reset away, and nothing of the last
// statement is read back.
func (ss *Session) letAllGo() {
	if ss.lease != nil {
		ss.lease.Conn().dirty = true
		ss.lease.Conn().discard = ss.lease.Conn().discard || ss.txn.xa
		ss.diag.onConn = 0
		ss.releaseLease()
	}
	ss.endParked()
}

// endParked gives back the connections the session holds on other
// clusters than its current one (the session ends, or starts anew): a
// transaction there is rolled back by the reset.
func (ss *Session) endParked() {
	xa := ss.txn.xa
	ss.eachParked(func() {
		ss.join = ""
		if ss.lease != nil {
			ss.lease.Conn().dirty = true
			// A connection with an XA branch is closed, not reset: the
			// server rolls an active branch back, and keeps a prepared
			// one for the resolver.
			ss.lease.Conn().discard = ss.lease.Conn().discard || xa
			ss.diag.onConn = 0
			ss.releaseLease()
		}
		ss.setPins(0)
	})
	ss.parked = ss.parked[:0]
	ss.txn = spanTxn{}
}

// beginSpan holds a BEGIN back: it is sent to each cluster before the
// transaction's first statement there. An open transaction is committed
// first, as MariaDB does.
func (ss *Session) beginSpan(sql string) error {
	if ss.txn.active {
		if err := ss.commitSpan(); err != nil {
			return ss.writeSpanErr(err)
		}
	} else if ss.status&wire.StatusInTrans != 0 {
		return ss.commitThenBegin(sql)
	}
	ss.newSpan(sql)
	ss.status |= wire.StatusInTrans
	ss.srv.metrics.statement(routeLocal, outcomeOK, 0)
	return ss.writeOK(wire.OK{Status: ss.status})
}

// newSpan begins a span transaction as the client's sql BEGIN says.
func (ss *Session) newSpan(sql string) {
	mode, xa := ss.txnModeOf(sql)
	ss.txn = spanTxn{active: true, mode: mode, begin: strings.Clone(sql), parts: ss.txn.parts[:0], xa: xa, start: ss.now}
	if xa {
		ss.txn.gtrid = twopc.NewGTRID(ss.now)
	}
}

// commitThenBegin runs a BEGIN where the server holds an open
// transaction the gateway does not keep (autocommit off): the server
// commits it; the new transaction begins there too.
func (ss *Session) commitThenBegin(sql string) error {
	ss.txn = spanTxn{active: true, mode: ss.txnMode, begin: strings.Clone(sql), parts: append(ss.txn.parts[:0], ss.cluster)}
	p := append([]byte{wire.ComQuery}, sql...)
	return ss.run(p, querypath.Route{Kind: querypath.KindBegin, ImplicitCommit: true}, wire.ResponseQuery)
}

// joinTxn opens the session's transaction on conn, the connection just
// taken (or held) on a cluster that has not served the transaction yet.
// The caller deals with an error as with one of the connection's sync:
// nothing of the client's statement ran.
func (ss *Session) joinTxn(conn *backendConn) error {
	if _, err := conn.Exec(ss.join); err != nil {
		return err
	}
	ss.join = ""
	ss.txn.parts = append(ss.txn.parts, ss.cluster)
	ss.setPins(ss.pins | pinTxn)
	ss.publishSpan() // before the statement's answer: SHOW GATEWAY TRANSACTIONS sees it
	return nil
}

// endSpan answers COMMIT or ROLLBACK of a span transaction. One that ran
// on one cluster ends there as the client wrote it; one that ran nowhere
// ends at the gateway; one over several clusters ends on each, as its
// transaction_mode says.
func (ss *Session) endSpan(route querypath.Route) (bool, error) {
	t := &ss.txn
	if t.xa && len(t.parts) > 0 {
		return true, ss.endXAStatement(route)
	}
	switch len(t.parts) {
	case 0:
		// Nothing ran: the gateway ends it.
		ss.txn.active = false
		return true, ss.spanEnded(route)
	case 1:
		if c := t.parts[0]; c != ss.cluster {
			_ = ss.moveTo(c, false)
		}
		// The client's statement, on the one cluster.
		ss.txn = spanTxn{parts: t.parts[:0]}
		if route.Chain {
			ss.txn.active, ss.txn.mode, ss.txn.begin = true, ss.txnMode, "START TRANSACTION"
			ss.txn.parts = append(ss.txn.parts, ss.cluster)
		}
		return false, nil
	}
	var err error
	if route.Kind == querypath.KindCommit {
		err = ss.commitSpan()
	} else {
		ss.rollbackSpan()
	}
	if err != nil {
		return true, ss.writeSpanErr(err)
	}
	return true, ss.spanEnded(route)
}

// endXAStatement answers COMMIT or ROLLBACK of an XA span transaction.
func (ss *Session) endXAStatement(route querypath.Route) error {
	if err := ss.endXA(route.Kind == querypath.KindCommit); err != nil {
		ss.status &^= wire.StatusInTrans | wire.StatusInTransReadonly
		return ss.writeSpanErr(err)
	}
	return ss.spanEnded(route)
}

// spanEnded answers the COMMIT or ROLLBACK that ended a span transaction
// at the gateway: OK, a new transaction with AND CHAIN, the session's end
// with RELEASE.
func (ss *Session) spanEnded(route querypath.Route) error {
	ss.status &^= wire.StatusInTrans | wire.StatusInTransReadonly
	if route.Chain {
		ss.newSpan("START TRANSACTION")
		ss.status |= wire.StatusInTrans
	}
	ss.srv.metrics.statement(routeLocal, outcomeOK, 0)
	if err := ss.writeOK(wire.OK{Status: ss.status}); err != nil || !route.Release {
		return err
	}
	return errReleased
}

// errReleased ends a session whose COMMIT RELEASE or ROLLBACK RELEASE
// the gateway answered.
var errReleased = errors.New("released by the client's COMMIT or ROLLBACK RELEASE")

// writeSpanErr sends the error of a span transaction's end.
func (ss *Session) writeSpanErr(err error) error {
	ss.srv.metrics.statement(routeLocal, outcomeError, 0)
	return ss.writeErr(toClientError(err))
}

// onParticipant runs f on each participant of the span transaction, in
// order, with the session moved to it, and puts the session back.
func (ss *Session) onParticipant(f func(c *cluster)) {
	home := ss.cluster
	for _, c := range slices.Clone(ss.txn.parts) {
		if c != ss.cluster {
			_ = ss.moveTo(c, false)
		}
		f(c)
	}
	if ss.cluster != home {
		_ = ss.moveTo(home, false)
	}
}

// endOnConn runs sql (COMMIT, ROLLBACK) on the session's connection of
// its current cluster and lets the connection go when nothing else holds
// it. A connection that broke is dropped.
func (ss *Session) endOnConn(sql string) error {
	if ss.lease == nil {
		return nil // the transaction's connection was lost before
	}
	conn := ss.lease.Conn()
	_, err := conn.Exec(sql)
	var sqlErr *wire.SQLError
	if err != nil && !errors.As(err, &sqlErr) {
		ss.dropLease()
		ss.lostBackendState()
		return backendLost(conn.addr, err)
	}
	ss.setPins(ss.pins &^ (pinTxn | transientPins))
	if ss.pins == 0 {
		ss.releaseLease()
	}
	return err
}

// rollbackSpan rolls the span transaction back on every participant.
func (ss *Session) rollbackSpan() {
	ss.onParticipant(func(c *cluster) {
		if err := ss.endOnConn("ROLLBACK"); err != nil {
			ss.log.Warn("rollback on a cluster of a transaction failed", "cluster", c.name, "error", err)
		}
	})
	ss.srv.metrics.spanEnded(ss.txn.mode, "rollback")
	ss.txn = spanTxn{parts: ss.txn.parts[:0]}
}

// commitSpan commits the span transaction over its clusters.
func (ss *Session) commitSpan() error {
	if ss.txn.xa && len(ss.txn.parts) > 0 {
		return ss.endXA(true)
	}
	if len(ss.txn.parts) < 2 {
		var err error
		ss.onParticipant(func(*cluster) { err = ss.endOnConn("COMMIT") })
		ss.txn = spanTxn{parts: ss.txn.parts[:0]}
		return err
	}
	return ss.commitMulti()
}

// commitMulti commits each participant in turn (transaction_mode multi):
// a failure on the first rolls every one back; a later failure leaves
// the ones before committed, and the error says which.
func (ss *Session) commitMulti() error {
	var committed []string
	var failed string
	var firstErr error
	var rest []string
	ss.onParticipant(func(c *cluster) {
		if firstErr != nil {
			rest = append(rest, c.name)
			_ = ss.endOnConn("ROLLBACK")
			return
		}
		if err := ss.endOnConn("COMMIT"); err != nil {
			firstErr, failed = err, c.name
			return
		}
		committed = append(committed, c.name)
	})
	mode := ss.txn.mode
	ss.txn = spanTxn{parts: ss.txn.parts[:0]}
	ss.status &^= wire.StatusInTrans | wire.StatusInTransReadonly
	switch {
	case firstErr == nil:
		ss.srv.metrics.spanEnded(mode, "commit")
		return nil
	}
	var lost *wire.BackendError
	unknown := errors.As(firstErr, &lost)
	if len(committed) == 0 && !unknown {
		ss.srv.metrics.spanEnded(mode, "rollback")
		return firstErr // the backend's own error: nothing committed
	}
	ss.srv.metrics.spanEnded(mode, "partial")
	outcome := "not committed"
	if unknown {
		outcome = "outcome unknown (the connection was lost during its COMMIT)"
	}
	msg := "transaction_mode multi: "
	if len(committed) > 0 {
		msg += "committed on cluster " + strings.Join(committed, ", ") + "; "
	}
	msg += "on cluster " + failed + " " + outcome + ": " + firstErr.Error()
	if len(rest) > 0 {
		msg += "; rolled back on cluster " + strings.Join(rest, ", ")
	}
	return wire.NewError(1180, "HY000", "Got error during COMMIT: %s", msg)
}

// isShowDatabases reports whether sql is SHOW DATABASES or SHOW SCHEMAS
// (with LIKE or WHERE).
func isShowDatabases(sql string) bool {
	t := strings.TrimLeft(sql, " \t\r\n")
	if len(t) < 4 || !strings.EqualFold(t[:4], "show") {
		return false // most statements: no allocation
	}
	f := strings.Fields(t)
	return len(f) >= 2 && strings.EqualFold(f[0], "show") &&
		(strings.EqualFold(strings.TrimRight(f[1], ";"), "databases") || strings.EqualFold(strings.TrimRight(f[1], ";"), "schemas"))
}

// showDatabases answers SHOW DATABASES with the databases of every
// cluster the session's user may use: each cluster's own (those it
// holds), and the system databases once. A cluster that refuses the
// user's backend account is left out.
func (ss *Session) showDatabases(sql string) error {
	m := ss.srv.dbs
	var names []string
	home := ss.cluster
	for _, c := range m.order {
		ss.cluster = c
		err := c.queryPrimary(ss, sql, func(row [][]byte) {
			if len(row) < 1 {
				return
			}
			db := string(row[0])
			if holder := m.clusterOf(db, ss.home); holder == c || holder == nil && c == home {
				names = append(names, db)
			}
		})
		ss.cluster = home
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) && c != home {
			continue // the user's account is not on that cluster
		}
		if err != nil {
			ss.srv.metrics.statement(routeLocal, outcomeError, 0)
			return ss.writeErr(toClientError(err))
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	name := "Database"
	if i := strings.Index(strings.ToLower(sql), " like "); i >= 0 {
		pat := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(sql[i+6:]), ";"))
		if len(pat) >= 2 && (pat[0] == '\'' || pat[0] == '"') {
			pat = pat[1 : len(pat)-1]
		}
		name = "Database (" + pat + ")"
	}
	ss.srv.metrics.statement(routeLocal, outcomeOK, 0)
	ss.diag.rowCount = -1
	w := wire.ResultWriter{Conn: ss.client, Caps: ss.caps, Status: ss.status}
	if err := w.Columns([]wire.Column{{Name: name, Charset: 33, Length: 256, Type: wire.TypeVarString, Flags: wire.FlagNotNull}}); err != nil {
		return err
	}
	for _, n := range names {
		if err := w.Row([][]byte{[]byte(n)}); err != nil {
			return err
		}
	}
	if err := w.End(0); err != nil {
		return err
	}
	return ss.client.Flush()
}
