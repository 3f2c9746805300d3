package gateway

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Query consolidation (config consolidation): identical reads in flight
// on the same backend at the same moment run once. The first session with
// a read (the leader) runs it as always, streaming the answer to its own
// client and keeping a copy of the packets it sent, at most
// max_result_bytes (wire.Conn.StartTee). A session that arrives with the
// same read meanwhile (a follower) takes no backend connection: it waits
// for the leader and writes the same packets to its client. Followers run
// their own statement when the leader's answer cannot be theirs: larger
// than the bound, an error, warnings, session state the server reported,
// or the leader's statement failed.
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
// connection. A follower never gets a result older than a write that
// finished through this gateway before it arrived: every statement that
// may change data (mayWrite) moves the cluster's write count before its
// answer reaches its client, and a follower joins only a leader that
// started at the current count.

// consolidator is one cluster's consolidation: the reads in flight and
// the counters. The zero value is ready to use.
type consolidator struct {
	mu      sync.Mutex
	flights map[consolKey]*flight
	// writes counts the statements that may change data (mayWrite)
	// that ended while consolidation was on (see Session.consolWrite).
	writes atomic.Uint64
	// waiting is the followers waiting now; followed the statements
	// answered with a leader's result; leaders the leaders that had
	// followers.
	waiting, followed, leaders atomic.Int64
	// tooLarge and failed count the followers that ran their own
	// statement: the leader's answer was above max_result_bytes, or was
	// not one to share (an error, warnings, a failure).
	tooLarge, failed atomic.Int64
	// bufs are the leaders' copy buffers (*[]byte), reused while nobody
	// follows: their memory follows the reads in flight, not the
	// sessions.
	bufs sync.Pool
}

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

// flight is a leader's read in flight. followers is guarded by
// consolidator.mu; the rest is set by the leader before done closes.
type flight struct {
	writes    uint64
	followers int
	done      chan struct{}
	// ok says packets is the answer for every follower; tooLarge that it
	// was not kept, being larger than max_result_bytes.
	ok, tooLarge bool
	// packets are the answer's packets as the leader's client got them,
	// seq the sequence id after them, res what the relay read of them.
	packets []byte
	seq     byte
	res     wire.Result
}

// consolKeepBuffer is the largest copy buffer kept for the next leader.
const consolKeepBuffer = 64 << 10

// lastingStatus are the status bits that describe the session rather
// than the statement.
const lastingStatus = wire.StatusInTrans | wire.StatusAutocommit | wire.StatusInTransReadonly | wire.StatusNoBackslashEscapes | 0x8000 // ANSI_QUOTES

// consolSession is a session's part in consolidation.
type consolSession struct {
	// leading says the session runs a read as leader: run keeps the
	// relay's result in leadRes and leadErr.
	leading  bool
	leadRes  wire.Result
	leadErr  error
	leadSeen bool
	// consolWrite says the statement being run may change data and
	// consolidation is on: its end moves the cluster's write count
	// (endHook).
	consolWrite bool
	// trackFor and trackSig cache trackSignature for the session's
	// trackers.
	trackFor *wire.TrackFilter
	trackSig string
}

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

// mayWrite reports whether a statement other than a read may change
// data, so that a read that starts after its answer must not share the
// result of a read that started before: anything but USE, BEGIN,
// ROLLBACK, the gateway's own statements and SETs of literal values.
func mayWrite(route querypath.Route) bool {
	switch route.Kind {
	case querypath.KindRead, querypath.KindUse, querypath.KindBegin, querypath.KindRollback,
		querypath.KindShowWarnings, querypath.KindGatewayShow, querypath.KindKill:
		return route.MultiStatement
	case querypath.KindSet:
		if route.Pin != 0 || route.MultiStatement {
			return true
		}
		for _, v := range route.Vars {
			if !v.Literal {
				return true // a function may write
			}
		}
		return false
	}
	return true
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
	co := &ss.cluster.consol
	co.mu.Lock()
	if f := co.flights[k]; f != nil && f.writes == co.writes.Load() {
		f.followers++
		co.mu.Unlock()
		return ss.follow(f, sql, route, r)
	}
	if co.flights == nil {
		co.flights = map[consolKey]*flight{}
	}
	k.sql = strings.Clone(sql)
	f := &flight{writes: co.writes.Load(), done: make(chan struct{})}
	co.flights[k] = f
	co.mu.Unlock()
	return true, ss.lead(co, k, f, p, route, int(conf.Consolidation.MaxResultBytes))
}

// lead runs the read p as the leader of flight f (key k), keeping a copy
// of its answer of at most max bytes, and hands the copy to the
// followers that came meanwhile.
func (ss *Session) lead(co *consolidator, k consolKey, f *flight, p []byte, route querypath.Route, max int) error {
	finished := false
	defer func() {
		if !finished {
			// A panic: the followers run their own read.
			co.land(k, f)
			close(f.done)
		}
	}()
	bp, _ := co.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	teeing := ss.client.StartTee(*bp, max)
	ss.leading, ss.leadSeen = true, false
	err := ss.run(p, route, wire.ResponseQuery)
	ss.leading = false
	var buf []byte
	complete := false
	if teeing {
		buf, complete = ss.client.StopTee()
	}
	res := ss.leadRes
	ok := complete && err == nil && ss.leadSeen && ss.leadErr == nil && ss.lastOK && res.Err == nil && !res.Held &&
		res.HadResultSet && res.Warnings == 0 && len(res.Track) == 0 &&
		res.Status&(wire.StatusInTrans|wire.StatusMoreResults|wire.StatusAutocommit) == wire.StatusAutocommit
	ss.leadRes = wire.Result{}
	if co.land(k, f) > 0 {
		co.leaders.Add(1)
		f.ok = ok
		f.tooLarge = teeing && !complete && err == nil
		if ok {
			res.Track = nil
			f.packets, f.seq, f.res = buf, ss.client.Seq(), res
			buf = nil // the followers' now
		}
	}
	if cap(buf) <= consolKeepBuffer {
		*bp = buf[:0]
	} else {
		*bp = nil
	}
	co.bufs.Put(bp)
	finished = true
	close(f.done)
	return err
}

// land ends flight f of key k: no follower joins it any more. It
// returns how many did.
func (co *consolidator) land(k consolKey, f *flight) (followers int) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.flights[k] == f {
		delete(co.flights, k)
	}
	return f.followers
}

// follow waits for the leader of f and answers the read sql (routed
// route, to a backend of role r) with its result; handled false means the
// leader's result is not one to share: the caller runs the read itself.
func (ss *Session) follow(f *flight, sql string, route querypath.Route, r role) (handled bool, err error) {
	co := &ss.cluster.consol
	co.waiting.Add(1)
	ss.proc.waiting(waitConsolidation)
	e := ss.awaitLeader(f)
	ss.proc.waiting(waitNone)
	co.waiting.Add(-1)
	if e != nil {
		return true, ss.writeErr(e)
	}
	if !f.ok {
		if f.tooLarge {
			co.tooLarge.Add(1)
		} else {
			co.failed.Add(1)
		}
		return false, nil
	}
	// Counted before the answer goes out: whoever reads the answer
	// (a test, a client's next look at the status) sees it counted.
	co.followed.Add(1)
	if err := ss.client.WriteRaw(f.packets, f.seq); err != nil {
		return true, err
	}
	if err := ss.client.Flush(); err != nil {
		return true, err
	}
	// The session is as if the read had run: its status, and what it
	// left for ROW_COUNT(), FOUND_ROWS() and SHOW WARNINGS (nothing on a
	// connection: a plain query without warnings, see consolidable).
	res := f.res
	ss.lastOK = true
	ss.status = res.Status
	ss.diag.afterStatement(unsafe.Slice(unsafe.StringData(sql), len(sql)), route, res, ss.status&wire.StatusNoBackslashEscapes != 0)
	ss.srv.metrics.statement(routeOf(r), outcomeOK, time.Since(ss.now))
	return true, nil
}

// awaitLeader waits until f's leader is done. A KILL QUERY of the session
// (its statement context), its end or its client leaving end the wait
// with the error for the client.
func (ss *Session) awaitLeader(f *flight) *wire.SQLError {
	select {
	case <-f.done:
		return nil
	default:
	}
	var e *wire.SQLError
	ss.blocking(offloadConsolidation, func() { e = ss.waitLeader(f) })
	return e
}

// waitLeader is awaitLeader's wait.
func (ss *Session) waitLeader(f *flight) *wire.SQLError {
	t := time.NewTicker(waitGoneCheck)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return nil
		case <-ss.statementContext().Done():
		case <-t.C:
			if !ss.client.PeerGone() {
				continue
			}
		}
		return wire.NewError(1317, "70100", "Query execution was interrupted while waiting at the gateway for an identical read (consolidation)")
	}
}

// protectionRows implements protection: one row for the cluster.
func (co *consolidator) protectionRows(cluster string, conf *config.Cluster) []ProtectionRow {
	mode := "off"
	if conf.Consolidation.Enabled {
		mode = "on"
	}
	return []ProtectionRow{{
		Protection: "consolidation", Cluster: cluster, Scope: "*", Mode: mode,
		Active: co.waiting.Load(), Total: co.followed.Load(),
		Detail: fmt.Sprintf("%d leaders with followers; followers that ran their own: %d too large, %d not shareable",
			co.leaders.Load(), co.tooLarge.Load(), co.failed.Load()),
	}}
}
