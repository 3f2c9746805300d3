package protect

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Query consolidation (config consolidation): identical reads in flight
// on the same backend at the same moment run once. The first session with
// a read (the leader) runs it as always, streaming the answer to its own
// client and keeping a copy of the packets it sent, at most
// max_result_bytes. A session that arrives with the same read meanwhile
// (a follower) takes no backend connection: it waits for the leader and
// writes the same packets to its client. Followers run their own
// statement when the leader's answer cannot be theirs: larger than the
// bound, an error, warnings, session state the server reported, or the
// leader's statement failed.
//
// Consolidation keeps the flights and counts them; what makes two reads
// identical (the key K) and the relay of a leader's answer are the
// session's (gateway's consolidation.go). A follower never gets a result
// older than a write that finished through this gateway before it
// arrived: every statement that may change data (MayWrite) moves the
// write count before its answer reaches its client (AnswerEnded), and a
// follower joins only a flight that started at the current count.

// Consolidation is one cluster's query consolidation: the reads in
// flight, keyed by K, and the counters. The zero value is ready to use.
type Consolidation[K comparable] struct {
	Hooks
	mu      sync.Mutex
	flights map[K]*Flight
	// writes counts the statements that may change data (MayWrite)
	// that ended while consolidation was on.
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

// Flight is a leader's read in flight. followers is guarded by
// Consolidation.mu; the rest is set by the leader before Done.
type Flight struct {
	writes    uint64
	followers int
	done      chan struct{}
	// OK says Packets is the answer for every follower; TooLarge that it
	// was not kept, being larger than max_result_bytes.
	OK, TooLarge bool
	// Packets are the answer's packets as the leader's client got them,
	// Seq the sequence id after them, Res what the relay read of them.
	Packets []byte
	Seq     byte
	Res     wire.Result
}

// keepBuffer is the largest copy buffer kept for the next leader.
const keepBuffer = 64 << 10

// Name implements Policy.
func (co *Consolidation[K]) Name() string { return "consolidation" }

// Admit implements Policy: a statement that may change data, while
// consolidation is on, is not consolidated and moves the write count
// when its answer ends.
func (co *Consolidation[K]) Admit(g *Guard, st *Statement) *wire.SQLError {
	g.wrote = bool(st.Conf.Consolidation.Enabled) && MayWrite(st.Route)
	return nil
}

// AnswerEnded implements Policy: a read that starts after the client has
// this answer must not get the result of a read that started before.
func (co *Consolidation[K]) AnswerEnded(g *Guard, _ *wire.Result) {
	if g.wrote {
		g.wrote = false
		co.writes.Add(1)
	}
}

// Wrote says whether the statement admitted may change data while
// consolidation is on: it is not one to consolidate.
func (g *Guard) Wrote() bool { return g.wrote }

// Join returns the flight of key k a read follows (lead false), or, when
// none started at the current write count, a new flight the read leads
// under key clone(k) (clone copies what k borrows).
func (co *Consolidation[K]) Join(k K, clone func(K) K) (f *Flight, lead bool) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if f := co.flights[k]; f != nil && f.writes == co.writes.Load() {
		f.followers++
		return f, false
	}
	if co.flights == nil {
		co.flights = map[K]*Flight{}
	}
	f = &Flight{writes: co.writes.Load(), done: make(chan struct{})}
	co.flights[clone(k)] = f
	return f, true
}

// Land ends flight f of key k: no follower joins it any more. It
// returns how many did; when some did, f is counted as a leader's.
func (co *Consolidation[K]) Land(k K, f *Flight) (followers int) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.flights[k] == f {
		delete(co.flights, k)
	}
	if f.followers > 0 {
		co.leaders.Add(1)
	}
	return f.followers
}

// Done says f's leader is done: its followers go on.
func (f *Flight) Done() { close(f.done) }

// Buffer returns a copy buffer for a leader; give it back with Reuse.
func (co *Consolidation[K]) Buffer() *[]byte {
	bp, _ := co.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	return bp
}

// Reuse keeps buf, a leader's copy its followers did not take, in bp
// for the next leader, unless it is large.
func (co *Consolidation[K]) Reuse(bp *[]byte, buf []byte) {
	if cap(buf) <= keepBuffer {
		*bp = buf[:0]
	} else {
		*bp = nil
	}
	co.bufs.Put(bp)
}

// Await waits, as g's session, until f's leader is done. A KILL QUERY
// of the session (its statement context), its end or its client leaving
// end the wait with the error for the client. A nil error and f.OK
// false: the follower runs its own read (counted).
func (co *Consolidation[K]) Await(g *Guard, f *Flight) *wire.SQLError {
	co.waiting.Add(1)
	var e *wire.SQLError
	select {
	case <-f.done:
	default:
		g.s.Block(WaitConsolidation, func() { e = waitLeader(g.s, f) })
	}
	co.waiting.Add(-1)
	switch {
	case e != nil:
	case !f.OK && f.TooLarge:
		co.tooLarge.Add(1)
	case !f.OK:
		co.failed.Add(1)
	default:
		// Counted before the answer goes out: whoever reads the answer
		// (a test, a client's next look at the status) sees it counted.
		co.followed.Add(1)
	}
	return e
}

// waitLeader is Await's wait.
func waitLeader(s Session, f *Flight) *wire.SQLError {
	t := time.NewTicker(WaitGoneCheck)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return nil
		case <-s.StatementContext().Done():
		case <-t.C:
			if !s.Gone() {
				continue
			}
		}
		return wire.NewError(1317, "70100", "Query execution was interrupted while waiting at the gateway for an identical read (consolidation)")
	}
}

// Rows implements Policy: one row for the cluster.
func (co *Consolidation[K]) Rows(conf *config.Cluster) []Row {
	mode := "off"
	if conf.Consolidation.Enabled {
		mode = "on"
	}
	return []Row{{
		Scope: "*", Mode: mode,
		Active: co.waiting.Load(), Total: co.followed.Load(),
		Detail: fmt.Sprintf("%d leaders with followers; followers that ran their own: %d too large, %d not shareable",
			co.leaders.Load(), co.tooLarge.Load(), co.failed.Load()),
	}}
}

// MayWrite reports whether a statement other than a read may change
// data, so that a read that starts after its answer must not share the
// result of a read that started before: anything but USE, BEGIN,
// ROLLBACK, the gateway's own statements and SETs of literal values.
func MayWrite(route querypath.Route) bool {
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
