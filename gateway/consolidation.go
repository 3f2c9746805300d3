package gateway

import (
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Query consolidation's relay (config consolidation; the flights and
// counters are protect.Consolidation's): the first session with a read
// (the leader) runs it as always, streaming the answer to its own client
// and keeping a copy of the packets it sent, at most max_result_bytes
// (wire.Conn.StartTee). A session that arrives with the same read
// meanwhile (a follower) takes no backend connection: it waits for the
// leader and writes the same packets to its client.
//
// "Identical" is a key of everything the answer's bytes depend on: the
// statement's bytes; the session's database and replayed variables
// (stateKey), the multi-statement option and the lasting status bits;
// the gateway user and the backend account; the backend chosen; the
// client's capabilities (the packet layout: CLIENT_DEPRECATE_EOF, ...)
// and what it is shown of session state (trackers). Identical commands
// start their answers with the same sequence id, so the copy is written
// as it is.
//
// Only reads that depend on nothing else are consolidated: a plain
// query (querypath.Deterministic: no clock, chance, session functions,
// variables or unknown functions), not locking, not pinning, outside a
// transaction with autocommit on, from a session that holds no backend
// connection.

// consolKey is what makes two reads identical (see the comment above).
type consolKey struct {
	sql, state, user   string
	account            poolKey
	backend            *backend
	caps               uint32
	status             uint16
	multiStmt          bool
	trackers           string
	txnState, txnChars string
}

// lastingStatus are the status bits that describe the session rather
// than the statement.
const lastingStatus = wire.StatusInTrans | wire.StatusAutocommit | wire.StatusInTransReadonly | wire.StatusNoBackslashEscapes | 0x8000 // ANSI_QUOTES

// trackSignature describes what the session's client is shown of
// session state (its trackers): equal filters, equal signatures.
func (ss *Session) trackSignature() string {
	f := ss.trackers
	if f == ss.trackFor && ss.trackSig != "" {
		return ss.trackSig
	}
	sig := "none"
	if f != nil {
		sig = fmt.Sprintf("%v %v %v %d %s", f.Schema, f.StateChange, f.AllVars, f.TxnInfo, strings.Join(f.Vars, ","))
	}
	ss.trackFor, ss.trackSig = f, sig
	return sig
}

// consolidable reports whether the text statement sql, routed route, may
// be answered with another session's result, the session being as it is.
// The cheap checks come first.
func (ss *Session) consolidable(route querypath.Route, sql string) bool {
	return route.Kind == querypath.KindRead && !route.MultiStatement && route.Pin == 0 && route.Unpin == 0 &&
		!route.ReadsLastResult && !route.GatewayIDs && !route.SessionStatus &&
		ss.lease == nil && ss.pins == 0 && !ss.namesPending &&
		ss.status&(wire.StatusInTrans|wire.StatusAutocommit) == wire.StatusAutocommit &&
		querypath.Deterministic(sql, ss.status&wire.StatusNoBackslashEscapes != 0)
}

// consolidate runs the read p (text sql, routed route) as leader or
// follower when it may be consolidated; handled false means the caller
// runs it as usual. Consolidation is on.
func (ss *Session) consolidate(p []byte, sql string, route querypath.Route, conf *config.Cluster) (handled bool, err error) {
	if !ss.consolidable(route, sql) {
		return false, nil
	}
	be, r := ss.pickNow(route, conf)
	if be == nil || r == roleReplica && ss.causalReads() {
		return false, nil // the usual path waits for a primary, or for the replica to catch up
	}
	k := consolKey{
		sql: sql, state: ss.stateKey(), user: ss.user.User, account: ss.poolKey(), backend: be,
		caps: ss.caps, status: ss.status & lastingStatus, multiStmt: ss.multiStmt,
		trackers: ss.trackSignature(), txnState: ss.txnState, txnChars: ss.txnChars,
	}
	co := ss.cluster.consol
	f, lead := co.Join(k, func(k consolKey) consolKey { k.sql = strings.Clone(k.sql); return k })
	if !lead {
		return ss.follow(f, sql, route, r)
	}
	return true, ss.lead(co, k, f, p, sql, route, conf)
}

// lead runs the read p as the leader of flight f (key k), keeping a copy
// of its answer of at most max bytes, and hands the copy to the
// followers that came meanwhile.
func (ss *Session) lead(co *protect.Consolidation[consolKey], k consolKey, f *protect.Flight, p []byte, sql string, route querypath.Route, conf *config.Cluster) error {
	finished := false
	defer func() {
		if !finished {
			// A panic: the followers run their own read.
			co.Land(k, f)
			f.Done()
		}
	}()
	bp := co.Buffer()
	teeing := ss.client.StartTee(*bp, int(conf.Consolidation.MaxResultBytes))
	var seen exchanged
	handled, err := ss.pipelined(p, sql, route, conf, &seen) // with pipelining on
	if !handled {
		seen = exchanged{}
		err = ss.runSeen(p, route, wire.ResponseQuery, &seen)
	}
	var buf []byte
	complete := false
	if teeing {
		buf, complete = ss.client.StopTee()
	}
	res := seen.res
	ok := complete && err == nil && seen.seen && seen.err == nil && ss.lastOK && res.Err == nil && !res.Held &&
		res.HadResultSet && res.Warnings == 0 && len(res.Track) == 0 &&
		res.Status&(wire.StatusInTrans|wire.StatusMoreResults|wire.StatusAutocommit) == wire.StatusAutocommit
	if co.Land(k, f) > 0 {
		f.OK = ok
		f.TooLarge = teeing && !complete && err == nil
		if ok {
			res.Track = nil
			f.Packets, f.Seq, f.Res = buf, ss.client.Seq(), res
			buf = nil // the followers' now
		}
	}
	co.Reuse(bp, buf)
	finished = true
	f.Done()
	return err
}

// follow waits for the leader of f and answers the read sql (routed
// route, to a backend of role r) with its result; handled false means the
// leader's result is not one to share: the caller runs the read itself.
func (ss *Session) follow(f *protect.Flight, sql string, route querypath.Route, r role) (handled bool, err error) {
	if e := ss.cluster.consol.Await(&ss.guard, f); e != nil {
		return true, ss.writeErr(e)
	}
	if !f.OK {
		return false, nil
	}
	if err := ss.client.WriteRaw(f.Packets, f.Seq); err != nil {
		return true, err
	}
	if err := ss.client.Flush(); err != nil {
		return true, err
	}
	// The session is as if the read had run: its status, and what it
	// left for ROW_COUNT(), FOUND_ROWS() and SHOW WARNINGS (nothing on a
	// connection: a plain query without warnings, see consolidable).
	res := f.Res
	ss.lastOK = true
	ss.status = res.Status
	ss.diag.afterStatement(unsafe.Slice(unsafe.StringData(sql), len(sql)), route, res, ss.status&wire.StatusNoBackslashEscapes != 0)
	ss.srv.metrics.statement(routeOf(r), outcomeOK, time.Since(ss.now))
	return true, nil
}
