package gateway

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/queryrules"
	"github.com/directgate/directgate/querystats"
	"github.com/directgate/directgate/wire"
)

// Query insight: statement digests (querystats) and query rules
// (queryrules). The session calls it at three points, each a hook of one
// or two lines, so that it can move to the protections' policies:
//
//   - admitted: comQuery and comStmtExecute call admit once the statement
//     is known to go to a backend: it is fingerprinted (a prepared
//     statement once, at its first execute) and the rules decide; a deny
//     answers the client there;
//   - sent: exchange arms the rule's timeout and max_rows around the relay
//     and notes the answer (answered);
//   - ended: run and executeBackend end with endStatement, which records
//     the digest and logs a slow statement.
//
// Besides, backend adds the time spent waiting for a pooled connection,
// replicaEligible follows a rule's route and priority a rule's priority.

// exampleLength is how much of a statement's text a digest keeps as its
// example.
const exampleLength = 256

// serverInsight is the server's digests and rules; a reload swaps them.
type serverInsight struct {
	// store is nil while query_stats.enabled is off.
	store atomic.Pointer[querystats.Store]
	rules atomic.Pointer[queryrules.Set]
	conf  atomic.Pointer[config.QueryStats]
}

// configure applies query_stats and query_rules (New, Reload). The
// digests stay unless max_digests or max_digest_length changed; the
// rules' hit counters stay for rules of the same name.
func (si *serverInsight) configure(cfg *config.Config) error {
	rules, err := queryrules.Compile(cfg.QueryRules)
	if err != nil {
		return err
	}
	rules.Inherit(si.rules.Load())
	q := cfg.QueryStats
	old := si.conf.Load()
	switch {
	case !q.On():
		si.store.Store(nil)
	case si.store.Load() == nil || old == nil || old.MaxDigests != q.MaxDigests || old.MaxDigestLength != q.MaxDigestLength:
		si.store.Store(querystats.New(querystats.Config{MaxDigests: q.MaxDigests, ExampleLength: exampleLength}))
	}
	si.conf.Store(&q)
	si.rules.Store(rules)
	return nil
}

// insightState is a session's part in query insight: the statement being
// run's fingerprint and what the rules decided for it, and what it
// measured. Only the session's goroutine touches it, but for timer, whose
// callback runs on its own.
type insightState struct {
	norm querystats.Normalizer
	// text and fp are the statement's digest text (in norm's buffer, or a
	// prepared statement's cached copy) and fingerprint; active says a
	// statement was admitted and is not recorded yet.
	text   []byte
	fp     querystats.Fingerprint
	sql    string
	active bool
	dec    queryrules.Decision
	// poolWait, res, failed and backend are what the statement measured.
	poolWait time.Duration
	rows     uint64
	affected uint64
	bytes    uint64
	warnings uint16
	errCode  uint16
	backend  string
	// client is the client's address for rules, once clientRead.
	client     netip.Addr
	clientRead bool
	// timer stops a statement past its rule's timeout; cut is the relay's
	// OnMaxRows; both made on first use.
	timer *time.Timer
	cut   func() *wire.SQLError
}

// stmtDigest is a prepared statement's digest text and fingerprint,
// made at its first execute.
type stmtDigest struct {
	text []byte
	fp   querystats.Fingerprint
}

// digestAndMatch fingerprints the statement sql (a prepared statement's cached
// digest in d, when not nil) and applies the query rules. handled is true
// when a rule denied it: the client got the rule's error.
func (ss *Session) digestAndMatch(sql string, d *stmtDigest) (handled bool, err error) {
	si := &ss.srv.insight
	rules := si.rules.Load()
	in := &ss.insight
	in.active = false
	if si.store.Load() == nil && rules.Len() == 0 {
		return false, nil
	}
	switch {
	case d == nil:
		in.norm.MaxLength = si.conf.Load().MaxDigestLength
		in.text, in.fp = in.norm.Normalize(sql)
	case d.fp == 0:
		in.norm.MaxLength = si.conf.Load().MaxDigestLength
		text, fp := in.norm.Normalize(sql)
		d.text, d.fp = append([]byte(nil), text...), fp
		fallthrough
	default:
		in.text, in.fp = d.text, d.fp
	}
	in.sql, in.active = sql, true
	in.poolWait, in.rows, in.affected, in.bytes, in.warnings, in.errCode, in.backend = 0, 0, 0, 0, 0, 0, ""
	in.dec = queryrules.Decision{}
	if rules.Len() == 0 {
		return false, nil
	}
	if !in.clientRead {
		in.clientRead = true
		in.client, _ = netip.ParseAddr(ss.clientHost())
	}
	in.dec = rules.Match(&queryrules.Statement{Fingerprint: in.fp, Text: in.text, User: ss.user.User, Database: ss.db, Client: in.client})
	if r := in.dec.Log; r != nil {
		ss.log.Info("query rule matched", "rule", r.Name, "dry_run", in.dec.DryRun, "action", r.Action(),
			"fingerprint", in.fp.String(), "digest", string(in.text), "user", ss.user.User, "database", ss.db)
	}
	if r := in.dec.Deny; r != nil {
		in.active = false
		ss.srv.metrics.statement(routeLocal, outcomeError, time.Since(ss.now))
		return true, ss.writeErr(wire.NewError(erNotAllowedCommand, "42000",
			"Statement denied by the gateway's query rule '%s': %s", r.Name, r.Deny))
	}
	return false, nil
}

// erNotAllowedCommand is ER_NOT_ALLOWED_COMMAND, the error ProxySQL's
// query rules answer with too: not retried by drivers, SQLSTATE 42000.
const erNotAllowedCommand = 1148

// waitedForPool adds the time since from to the statement's pool wait.
func (in *insightState) waitedForPool(from time.Time) {
	if in.active {
		in.poolWait += time.Since(from)
	}
}

// route is where a rule sends the statement being routed.
func (in *insightState) route() queryrules.Route {
	if !in.active {
		return queryrules.RouteNone
	}
	return in.dec.Route
}

// priority is a rule's priority for the statement being run, if any.
func (in *insightState) priority() (int, bool) {
	return in.dec.Priority, in.active && in.dec.HasPriority
}

// arm sets up the rule's timeout and max_rows for the relay of the
// statement on conn; disarm ends them once the relay is over.
func (ss *Session) arm(conn *backendConn) {
	in := &ss.insight
	in.backend = conn.addr
	if !in.active {
		return
	}
	if d := in.dec.Timeout; d > 0 {
		if in.timer == nil {
			in.timer = time.AfterFunc(d, ss.statementTimedOut)
		} else {
			in.timer.Reset(d)
		}
	}
	if in.dec.MaxRows > 0 {
		if in.cut == nil {
			in.cut = ss.rowsCut
		}
		ss.relay.MaxRows, ss.relay.OnMaxRows = in.dec.MaxRows, in.cut
	}
}

// disarm stops what arm started and notes the answer res.
func (ss *Session) disarm(res *wire.Result) {
	in := &ss.insight
	if in.timer != nil {
		in.timer.Stop()
	}
	ss.relay.MaxRows, ss.relay.OnMaxRows = 0, nil
	in.rows, in.affected, in.warnings, in.bytes = res.Rows, res.OK.AffectedRows, res.Warnings, res.Bytes
	in.errCode = 0
	if res.Err != nil {
		in.errCode = res.Err.Code
	}
}

// statementTimedOut runs on the timer's goroutine when a statement
// outlives its rule's timeout: KILL QUERY on the backend, whose error
// (1317, query execution was interrupted) the client gets.
func (ss *Session) statementTimedOut() {
	ss.log.Info("statement past its query rule's timeout; killing it on the backend")
	if err := ss.killStatement(false); err != nil {
		ss.log.Warn("could not stop a statement past its query rule's timeout", "error", err)
	}
}

// rowsCut is the relay's OnMaxRows: the result passed the rule's
// max_rows. The statement is killed on the backend (the relay drops the
// rest of its answer) and the client gets the error returned.
func (ss *Session) rowsCut() *wire.SQLError {
	in := &ss.insight
	r := in.dec.MaxRowsRule
	ss.log.Info("result past its query rule's max_rows; killing the statement", "rule", r.Name, "fingerprint", in.fp.String())
	if bc := ss.inFlight.Load(); bc != nil && bc.be != nil {
		if err := bc.be.killQuery(bc); err != nil {
			ss.log.Warn("could not stop a statement past max_rows", "error", err)
		}
	}
	return wire.NewError(erQueryInterrupted, "70100",
		"Query execution was interrupted: the result has more than %d rows (the gateway's query rule '%s', max_rows)", in.dec.MaxRows, r.Name)
}

// erQueryInterrupted is ER_QUERY_INTERRUPTED.
const erQueryInterrupted = 1317

// endStatement ends the statement measured by sp: its metrics, and its
// digest (when it was admitted) and slow-statement log line.
func (ss *Session) endStatement(sp *stmtSpan) {
	ss.srv.metrics.endStatement(sp)
	in := &ss.insight
	if !in.active {
		return
	}
	in.active = false
	now := time.Now()
	d := now.Sub(sp.start)
	var cluster string
	if ss.cluster != nil {
		cluster = ss.cluster.name
	}
	if st := ss.srv.insight.store.Load(); st != nil {
		st.Record(querystats.Key{Fingerprint: in.fp, User: ss.user.User, Database: ss.db, Cluster: cluster}, in.text, in.sql,
			querystats.Sample{Duration: d, PoolWait: in.poolWait, RowsSent: in.rows, RowsAffected: in.affected, Bytes: in.bytes,
				Warnings: in.warnings, Failed: sp.outcome != outcomeOK, ErrCode: in.errCode, Role: sp.route.String()}, now)
	}
	if t := ss.srv.insight.conf.Load().SlowThreshold; t != nil && *t > 0 && d > *t {
		ss.log.Warn("slow statement", "fingerprint", in.fp.String(), "digest", string(in.text), "user", ss.user.User,
			"database", ss.db, "backend", in.backend, "role", sp.route.String(), "wait", in.poolWait, "duration", d, "rows", in.rows)
	}
}
