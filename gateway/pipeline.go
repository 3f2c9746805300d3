package gateway

import (
	"errors"
	"sync"
	"time"
	"unsafe"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Pipelined reads (config pipelining): a read consolidation would accept
// (consolidable: deterministic, not locking, outside a transaction, from
// a session that holds no connection) is written to one of a few pooled
// connections of its backend, account and session state, behind the
// reads in flight there (pools.Pipe), and its session relays its own
// answer when the answers before it are read. MariaDB's thread then finds
// the next read waiting when it ends one, instead of sleeping until it
// arrives: on two cores that halves MariaDB's CPU per point select
// (docs/benchmarks.md, "Pipelining").
//
// A read never fails because of the pipe: one whose pipe broke before
// it was sent, or before its turn came, has sent its client nothing and
// runs the usual way. A read whose answer shows the connection changed
// (trackers, a transaction, more results) retires the pipe: its
// connection goes back to the pool, to be reset. Sessions on io_uring
// loops keep the usual path.

// pipeKey says which pipes a read may join: the backend account of its
// session and the session state the connection was brought in line
// with (stateKey).
type pipeKey struct {
	account poolKey
	state   string
}

// pipeGroups are a backend's pipes.
type pipeGroups struct {
	mu sync.Mutex
	m  map[pipeKey]*pipeGroup
	// closed: no new group (the backend is closed).
	closed bool
}

// pipeGroup is the pipes of one key.
type pipeGroup struct {
	mu    sync.Mutex
	pipes []*pools.Pipe[*backendConn]
	next  int
	// opening: a session is opening a pipe for the group.
	opening bool
}

// group returns the group of k, nil once the backend is closed.
func (g *pipeGroups) group(k pipeKey) *pipeGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	if pg := g.m[k]; pg != nil {
		return pg
	}
	if g.m == nil {
		g.m = make(map[pipeKey]*pipeGroup)
	}
	pg := &pipeGroup{}
	g.m[k] = pg
	return pg
}

// retireAll retires every pipe (a reload, SET GLOBAL) and, with close,
// takes no new group (the backend closes).
func (g *pipeGroups) retireAll(close bool) {
	g.mu.Lock()
	groups := g.m
	g.m = nil
	g.closed = g.closed || close
	g.mu.Unlock()
	for _, pg := range groups {
		pg.mu.Lock()
		pipes := pg.pipes
		pg.pipes = nil
		pg.mu.Unlock()
		for _, p := range pipes {
			endPipe(p, p.Retire())
		}
	}
}

// pick returns the pipe of g with the fewest reads in flight, or open
// true when g has fewer than n pipes and none is being opened: the caller
// opens one (openPipe). Pipes broken or retired meanwhile are dropped.
func (pg *pipeGroup) pick(n int) (p *pools.Pipe[*backendConn], open bool) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if len(pg.pipes) < n && !pg.opening {
		pg.opening = true
		return nil, true
	}
	best, bestDepth := -1, 0
	for i := range pg.pipes {
		j := (pg.next + i) % len(pg.pipes)
		d := pg.pipes[j].Depth()
		if best < 0 || d < bestDepth {
			best, bestDepth = j, d
		}
	}
	if best < 0 {
		return nil, false
	}
	pg.next = best + 1
	return pg.pipes[best], false
}

// opened adds p (nil: the open failed) and ends the group's opening.
func (pg *pipeGroup) opened(p *pools.Pipe[*backendConn]) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.opening = false
	if p != nil {
		pg.pipes = append(pg.pipes, p)
	}
}

// drop removes p from the group, if it is still there.
func (pg *pipeGroup) drop(p *pools.Pipe[*backendConn]) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	for i, q := range pg.pipes {
		if q == p {
			pg.pipes = append(pg.pipes[:i], pg.pipes[i+1:]...)
			return
		}
	}
}

// endPipe gives back the lease of pipe p once a call reported it dead:
// destroyed when it is broken (an answer was left on it), back to the
// pool to be reset when it was retired.
func endPipe(p *pools.Pipe[*backendConn], dead bool) {
	if !dead {
		return
	}
	l := p.Lease()
	if p.Broken() {
		l.Destroy()
		return
	}
	l.Conn().dirty = true
	l.Release()
}

// openPipe leases a connection of be for the session's account, brings
// it in line with the session and makes it a pipe of pg.
func (ss *Session) openPipe(be *backend, pg *pipeGroup) (p *pools.Pipe[*backendConn]) {
	defer func() { pg.opened(p) }()
	pool, err := be.poolFor(ss.poolKey())
	if err != nil {
		return nil
	}
	l, ok := pool.TryAcquire()
	if !ok {
		return nil // none idle: the read takes the usual path
	}
	conn := l.Conn()
	if conn.PeerClosed() {
		l.Destroy()
		return nil
	}
	if err := ss.alignLeased(conn); err != nil {
		l.Destroy()
		return nil
	}
	return pools.NewPipe(l)
}

// pipelined runs the read p (text sql, routed route) on a pipe when
// pipelining is on and the read may be; handled false means the caller
// runs it the usual way, nothing of it having reached a backend or the
// client.
func (ss *Session) pipelined(p []byte, sql string, route querypath.Route, conf *config.Cluster) (handled bool, err error) {
	n := conf.Pipelining.Connections
	if n <= 0 || ss.task != nil || len(p) >= wire.MaxPacketPayload || !ss.consolidable(route, sql) {
		return false, nil
	}
	if in := &ss.insight; in.active && (in.dec.Timeout > 0 || in.dec.MaxRows > 0) {
		return false, nil // a query rule may stop it part-way: its own connection
	}
	be, r := ss.pickNow(route, conf)
	if be == nil || r == roleReplica && ss.causalReads() {
		return false, nil
	}
	pg := be.pipes.group(pipeKey{account: ss.poolKey(), state: ss.stateKey()})
	if pg == nil {
		return false, nil
	}
	pipe, open := pg.pick(n)
	if open {
		pipe = ss.openPipe(be, pg)
	}
	if pipe == nil {
		return false, nil
	}
	if conn := pipe.Lease().Conn(); conn.globals < ss.cluster.globals.Load() {
		// A SET GLOBAL since it logged in: its defaults are old.
		pg.drop(pipe)
		endPipe(pipe, pipe.Retire())
		return false, nil
	}
	t := &ss.pipeTurn
	dead, err := pipe.Send(t, func(c *backendConn) error {
		var err error
		ss.pipeBuf, err = c.WritePipelined(ss.pipeBuf, p)
		return err
	})
	if err != nil {
		pg.drop(pipe)
		endPipe(pipe, dead)
		return false, nil
	}
	ss.srv.metrics.pipeTurn(1)
	defer ss.srv.metrics.pipeTurn(-1)
	conn, err := pipe.Wait(t)
	if err != nil {
		pg.drop(pipe)
		endPipe(pipe, pipe.Done(t, false))
		ss.srv.metrics.pipeFallback(false)
		return false, nil
	}
	sp := startStatement(ss.now)
	defer ss.endStatement(&sp)
	res, err := ss.relayPipelined(conn)
	readAll := err == nil
	sp.served(r, res, err)
	changed := readAll && (len(res.Track) > 0 ||
		res.Status&(wire.StatusInTrans|wire.StatusMoreResults|wire.StatusAutocommit) != wire.StatusAutocommit)
	if !readAll || changed {
		pg.drop(pipe)
		if changed {
			pipe.Retire()
		}
	}
	endPipe(pipe, pipe.Done(t, readAll))
	if err != nil {
		handled, err := ss.pipelineFailed(conn, res, err)
		if !handled {
			ss.srv.metrics.pipeFallback(true)
		}
		return handled, err
	}
	ss.srv.metrics.pipelinedRead()
	ss.lastOK = res.Err == nil
	ss.status = res.Status
	ss.diag.afterStatement(unsafe.Slice(unsafe.StringData(sql), len(sql)), route, res, ss.status&wire.StatusNoBackslashEscapes != 0)
	return true, nil
}

// relayPipelined relays the answer of a pipelined read from conn.
func (ss *Session) relayPipelined(conn *backendConn) (wire.Result, error) {
	load := &conn.be.load
	start := time.Now()
	load.Begin()
	defer func() { load.End(start, time.Now()) }()
	conn.SetSeq(1)
	ss.relay.ClientCaps = ss.caps
	ss.relay.BackendCaps = conn.Caps
	ss.relay.InfileTimeout = *ss.srv.cfg.LocalInfileTimeout
	ss.relay.Trackers = ss.trackers
	ss.relay.TxnState, ss.relay.TxnChars = ss.txnState, ss.txnChars
	ss.relay.StatusHint = ss.status
	ss.relay.BeforeEnd = ss.endHook(wire.ResponseQuery)
	ss.arm(conn) // the digest's backend; no rule's timeout or max_rows (see pipelined)
	res, err := ss.relay.Run(ss.client, conn.Conn, wire.ResponseQuery)
	ss.disarm(&res)
	return res, err
}

// pipelineFailed handles a pipelined read whose relay failed: a client
// gone (or cut) ends the session; a backend connection lost before
// anything reached the client leaves the read to the usual path (handled
// false), as a read is retried today; past that the client is told.
func (ss *Session) pipelineFailed(conn *backendConn, res wire.Result, err error) (handled bool, _ error) {
	if _, client := errors.AsType[*wire.ClientError](err); client || ss.cut.Load() {
		return true, err
	}
	ss.log.Warn("pipelined backend connection lost", "backend", conn.addr, "error", err)
	conn.be.broke()
	if res.Packets == 0 && !ss.srv.closing() {
		return false, nil
	}
	return true, ss.tellLost(conn, res, err, false)
}
