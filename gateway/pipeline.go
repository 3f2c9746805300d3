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
// A read written behind another carries a prelude (pipePrelude, see
// pools.Pipe): SHOW WARNINGS, run just before it, lists what the read
// before left on the connection, which the read itself then clears. The
// read before takes that list when it raised conditions, so that SHOW
// WARNINGS in its session shows what MariaDB's would; otherwise the read
// behind drops it.
//
// A read never fails because of the pipe: one whose pipe broke before
// it was sent, or before its turn came, has sent its client nothing and
// runs the usual way. A read whose answer shows the connection changed
// (trackers, a transaction, more results) retires the pipe: its
// connection goes back to the pool, to be reset, and the session, whose
// state it was, ends. Sessions on io_uring loops keep the usual path.

// pipePrelude is the prelude of a read written behind another: the
// command byte, then a statement that comes before the read's own text.
const pipePrelude = "\x03SHOW WARNINGS;"

// pipeMaxRead bounds the packet of a read that may be pipelined, its
// prelude included. A longer read gains little (its own parsing is most
// of its cost) and would come nearer the backend's max_allowed_packet,
// which its prelude could then push it past (MariaDB would close the
// shared connection); it goes the usual way.
const pipeMaxRead = 16 << 10

// pipeKey says which pipes a read may join: the backend account of its
// session and the session state the connection was brought in line
// with (stateKey).
type pipeKey struct {
	account poolKey
	state   string
}

// pipeGroups are a backend's pipes. The pipes of one backend account
// number at most pipelining.connections over all session states (count),
// so that they never hold more of its pool; a state that has none takes
// an idle pipe of another state's when the account has its count.
type pipeGroups struct {
	mu sync.Mutex
	m  map[pipeKey]*pipeGroup
	// count is the pipes open or opening, by account.
	count map[poolKey]int
	// closed: no new group (the backend is closed).
	closed bool
}

// pipeGroup is the pipes of one key.
type pipeGroup struct {
	owner *pipeGroups
	key   pipeKey

	mu    sync.Mutex
	pipes []*pools.Pipe[*backendConn]
	next  int
	// opening: a session is opening a pipe for the group.
	opening bool
}

// take returns the pipe of key k with the fewest reads in flight, of
// those not late (Pipe.Busy for late after now), or the group to open one
// for (open true: the caller runs openPipe, which ends the opening) when
// the group has fewer than n pipes and the account fewer than n, taking
// an idle pipe of another state of the account when the group has none.
// A nil pipe and false: the read goes the usual way (late: every pipe of
// the group was).
func (g *pipeGroups) take(k pipeKey, n int, now time.Time, late time.Duration) (p *pools.Pipe[*backendConn], pg *pipeGroup, open, wasLate bool) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil, false, false
	}
	pg = g.m[k]
	if pg == nil {
		if g.m == nil {
			g.m, g.count = make(map[pipeKey]*pipeGroup), make(map[poolKey]int)
		}
		pg = &pipeGroup{owner: g, key: k}
		g.m[k] = pg
	}
	pg.mu.Lock()
	if len(pg.pipes) < n && !pg.opening {
		var idle *pools.Pipe[*backendConn]
		if g.count[k.account] >= n && len(pg.pipes) == 0 {
			idle = g.takeIdle(k)
		}
		if g.count[k.account] < n {
			g.count[k.account]++
			pg.opening = true
			pg.mu.Unlock()
			g.mu.Unlock()
			if idle != nil {
				endPipe(idle, idle.Retire())
			}
			return nil, pg, true, false
		}
	}
	g.mu.Unlock()
	defer pg.mu.Unlock()
	best, bestDepth := -1, 0
	for i := range pg.pipes {
		j := (pg.next + i) % len(pg.pipes)
		busy, d := pg.pipes[j].Busy(now, late)
		if busy {
			wasLate = true
			continue
		}
		if best < 0 || d < bestDepth {
			best, bestDepth = j, d
		}
	}
	if best < 0 {
		return nil, pg, false, wasLate
	}
	pg.next = best + 1
	return pg.pipes[best], pg, false, false
}

// takeIdle removes an idle pipe of k's account in another state from
// its group, and its count, and returns it (nil: none). g.mu is held.
func (g *pipeGroups) takeIdle(k pipeKey) *pools.Pipe[*backendConn] {
	for ok, other := range g.m {
		if ok == k || ok.account != k.account {
			continue
		}
		other.mu.Lock()
		for i, p := range other.pipes {
			if p.Depth() == 0 {
				other.pipes = append(other.pipes[:i], other.pipes[i+1:]...)
				other.mu.Unlock()
				g.count[k.account]--
				return p
			}
		}
		other.mu.Unlock()
	}
	return nil
}

// retireAll retires every pipe (a reload) and, with close, takes no new
// group (the backend closes).
func (g *pipeGroups) retireAll(close bool) {
	g.mu.Lock()
	groups := g.m
	g.m, g.count = nil, nil
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

// uncount gives back one of the pipe count of pg's account, unless pg
// is no longer one of g's groups (retireAll emptied them since).
func (g *pipeGroups) uncount(pg *pipeGroup) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m[pg.key] == pg && g.count[pg.key.account] > 0 {
		g.count[pg.key.account]--
	}
}

// opened adds p (nil: the open failed) and ends the group's opening.
func (pg *pipeGroup) opened(p *pools.Pipe[*backendConn]) {
	pg.mu.Lock()
	pg.opening = false
	if p != nil {
		pg.pipes = append(pg.pipes, p)
	}
	pg.mu.Unlock()
	if p == nil {
		pg.owner.uncount(pg)
	}
}

// drop removes p from the group, if it is still there.
func (pg *pipeGroup) drop(p *pools.Pipe[*backendConn]) {
	pg.mu.Lock()
	found := false
	for i, q := range pg.pipes {
		if q == p {
			pg.pipes = append(pg.pipes[:i], pg.pipes[i+1:]...)
			found = true
			break
		}
	}
	pg.mu.Unlock()
	if found {
		pg.owner.uncount(pg)
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
	l, err := ss.acquire(pool) // as the read would wait for one
	if err != nil {
		return nil // the usual path reports what it meets
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
	if !conn.multiStmt { // for the preludes; the reads are single statements
		if _, err := conn.SimpleCommand([]byte{wire.ComSetOption, 0, 0}); err != nil {
			l.Destroy()
			return nil
		}
		conn.multiStmt = true
	}
	return pools.NewPipe(l, time.Now())
}

// pipelined runs the read p (text sql, routed route) on a pipe when
// pipelining is on and the read may be, keeping in seen, when not nil,
// what it read of the answer (a consolidation leader's read, lead);
// handled false means the caller
// runs it the usual way, nothing of it having reached the client (it may
// have reached a backend whose pipe then broke: a read may be retried so).
func (ss *Session) pipelined(p []byte, sql string, route querypath.Route, conf *config.Cluster, seen *exchanged) (handled bool, err error) {
	n := conf.Pipelining.Connections
	if n <= 0 || ss.task != nil || p[0] != wire.ComQuery || len(p)+len(pipePrelude) > pipeMaxRead || !ss.consolidable(route, sql) {
		return false, nil
	}
	if in := &ss.insight; in.active && (in.dec.Timeout > 0 || in.dec.MaxRows > 0) {
		return false, nil // a query rule may stop it part-way: its own connection
	}
	be, r := ss.pickNow(route, conf)
	if be == nil || r == roleReplica && ss.causalReads() {
		return false, nil
	}
	pipe, pg, now := ss.joinPipe(be, n, conf)
	if pipe == nil {
		return false, nil
	}
	// The protections' backend-chosen point (load shedding), once the
	// read is sure to be sent here; a fallback asks again.
	ss.choosing(p[0], route, true)
	e := ss.guard.Chosen(ss.cluster.guards, conf, be)
	ss.guard.Chose()
	if e != nil {
		return true, ss.writeErr(e)
	}
	pk := ss.beginPipeKill()
	defer ss.endPipeKill()
	if ss.stmtWaits.killed.Load() {
		return false, nil // killed before it was sent: the usual path answers 1317
	}
	t := &ss.pipeTurn
	if !ss.sendPipelined(pipe, pg, t, p, conf, now) {
		return false, nil
	}
	ss.srv.metrics.pipeTurn(1)
	defer ss.srv.metrics.pipeTurn(-1)
	conn, err := pipe.Wait(t)
	if err == nil {
		if kerr := pk.head(conn); kerr != nil {
			ss.log.Warn("KILL QUERY of a pipelined read failed", "backend", conn.addr, "error", kerr)
		}
		err = skipPrelude(conn, t)
	}
	if err != nil {
		pk.end()
		pg.drop(pipe)
		endPipe(pipe, pipe.Done(t, false))
		ss.srv.metrics.pipeFallback(false)
		return false, nil
	}
	sp := startStatement(ss.now)
	defer ss.endStatement(&sp)
	res, err := ss.relayPipelined(conn)
	if seen != nil {
		*seen = exchanged{res: res, err: err, seen: true}
	}
	readAll := err == nil
	sp.served(r, res, err)
	if readAll {
		ss.lastOK = res.Err == nil
		if ss.lastOK { // an error's answer carries no status
			ss.status = res.Status
		}
		readAll = ss.pipelinedDiag(pipe, t, route, res, sql)
	}
	if pk.end() {
		readAll = false // a KILL QUERY went to the pipe's thread: see pipeKill
	}
	// (An error's answer has no status: res.Status is the hint.)
	changed := readAll && (len(res.Track) > 0 || res.Err == nil &&
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
	if changed {
		// Session state the server reported (a read consolidation accepts
		// never changes any) lives on a connection the session does not
		// hold and that goes back to be reset: as when a held connection
		// is lost, the session ends rather than go on without it.
		ss.log.Warn("a pipelined read changed session state; ending the session", "backend", conn.addr)
		return true, errPipeStateChanged
	}
	return true, nil
}

// errPipeStateChanged ends a session whose pipelined read came back with
// session state changed on the shared connection.
var errPipeStateChanged = errors.New("a pipelined read changed session state on a shared connection")

// sendPipelined writes the read p to pipe on turn t at now, after its
// prelude when it is written behind another and warnings are listed.
// false: the write failed, the pipe is dropped, and the read goes the
// usual way.
func (ss *Session) sendPipelined(pipe *pools.Pipe[*backendConn], pg *pipeGroup, t *pools.Turn, p []byte, conf *config.Cluster, now time.Time) bool {
	listed := conf.Pipelining.Warnings != config.PipeWarningsCounted
	dead, err := pipe.Send(t, now, func(c *backendConn, behind bool) (bool, error) {
		var err error
		if behind && listed && c.multiStmt {
			ss.pipeBuf, err = c.WritePipelined(ss.pipeBuf, []byte(pipePrelude), p[1:])
			return true, err
		}
		ss.pipeBuf, err = c.WritePipelined(ss.pipeBuf, nil, p)
		return false, err
	})
	if err != nil {
		pg.drop(pipe)
		endPipe(pipe, dead)
		return false
	}
	return true
}

// joinPipe returns the pipe of be the session's read is to join (nil:
// none, the read goes the usual way), with its group and the time to
// send at, opening one when take says so, and retiring one whose
// connection logged in before a SET GLOBAL.
func (ss *Session) joinPipe(be *backend, n int, conf *config.Cluster) (*pools.Pipe[*backendConn], *pipeGroup, time.Time) {
	now := time.Now()
	pipe, pg, open, late := be.pipes.take(pipeKey{account: ss.poolKey(), state: ss.stateKey()}, n, now, conf.Pipelining.LateAfter)
	if open {
		pipe = ss.openPipe(be, pg)
		now = time.Now() // the wait for a connection is not the read's time in the pipe
	}
	if pipe == nil {
		if late {
			ss.srv.metrics.pipesLate()
		}
		return nil, nil, now
	}
	if conn := pipe.Lease().Conn(); conn.globals < ss.cluster.globals.Load() {
		// A SET GLOBAL since it logged in: its defaults are old.
		pg.drop(pipe)
		endPipe(pipe, pipe.Retire())
		return nil, nil, now
	}
	if pipe.IdleCheck(now, peekAfterIdle, (*backendConn).PeerClosed) {
		// Closed by the server while idle (wait_timeout, a KILL, a
		// restart): not a backend failure; the read goes the usual way,
		// and the next one opens a new pipe.
		pg.drop(pipe)
		endPipe(pipe, true)
		return nil, nil, now
	}
	return pipe, pg, now
}

// pipeKill is what KILL QUERY needs of a session's pipelined read: the
// read's pipe connection once its turn has come (the head of the pipe),
// and whether a kill was asked for and sent. A kill is sent only while
// the read's turn holds the connection: before, the statement running
// there is another session's; after Done, the turns behind relay. It is
// KILL QUERY of the pipe's thread, and the pipe is then broken, so that
// if the kill lands on a read behind (the killed read had ended on the
// server, its answer not yet relayed), that read's answer is never
// relayed: it runs again the usual way, as the reads behind a broken pipe
// do.
type pipeKill struct {
	mu     sync.Mutex
	conn   *backendConn
	killed bool
	sent   bool
}

// kill asks for the read's kill (KILL QUERY of its session), sending it
// now when the read's turn has come.
func (pk *pipeKill) kill() error {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	pk.killed = true
	return pk.sendLocked()
}

// head records that the read's turn came, on conn, and sends a kill
// asked for while it waited.
func (pk *pipeKill) head(conn *backendConn) error {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	pk.conn = conn
	return pk.sendLocked()
}

// sendLocked sends the kill, once, when it was asked for and the read's
// turn has come. pk.mu is held, so that end waits for it.
func (pk *pipeKill) sendLocked() error {
	if !pk.killed || pk.sent || pk.conn == nil {
		return nil
	}
	pk.sent = true
	return pk.conn.be.killQuery(pk.conn)
}

// beginPipeKill publishes the session's pipeKill, reset, for a read
// about to be pipelined.
func (ss *Session) beginPipeKill() *pipeKill {
	pk := &ss.pipeKillState
	pk.mu.Lock()
	pk.conn, pk.killed, pk.sent = nil, false, false
	pk.mu.Unlock()
	ss.pipeKill.Store(pk)
	return pk
}

// endPipeKill takes the session's pipeKill back once the read is done:
// under killMu, so that a KILL that found it has finished with it before
// the next read resets it.
func (ss *Session) endPipeKill() {
	ss.killMu.Lock()
	ss.pipeKill.Store(nil)
	ss.killMu.Unlock()
}

// end closes the window for kills (before the turn's Done) and reports
// whether one was sent.
func (pk *pipeKill) end() (sent bool) {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	pk.conn = nil
	return pk.sent
}

// pipelinedDiag records what the pipelined read sql (routed route,
// answered res on turn t of pipe) left for ROW_COUNT(), FOUND_ROWS() and
// SHOW WARNINGS. What only its connection holds (conditions: warnings, an
// error) is read from it at once when no read is queued behind it, and
// otherwise from the answer of the prelude of the read behind, which
// clears it (preludeConditions). Should neither be possible (the pipe
// broke), the counts stay right, an error is listed from its answer, and
// a warnings list is lost (counted). ok false: the connection broke while
// being read.
func (ss *Session) pipelinedDiag(pipe *pools.Pipe[*backendConn], t *pools.Turn, route querypath.Route, res wire.Result, sql string) (ok bool) {
	d := &ss.diag
	d.afterStatement(unsafe.Slice(unsafe.StringData(sql), len(sql)), route, res, ss.status&wire.StatusNoBackslashEscapes != 0)
	if d.onConn == 0 {
		return true
	}
	ran, err := pipe.Alone(t, ss.captureDiag)
	switch {
	case err != nil:
		return false // captureDiag let go of what it could not read
	case ran:
		return true
	}
	ran, err = pipe.TakePrelude(t, func(c *backendConn) error { return ss.preludeConditions(c, res) })
	switch {
	case err != nil:
		d.lost()
		return false
	case ran:
		if d.onConn != 0 {
			d.lost() // FOUND_ROWS() after an error part-way through rows
			ss.srv.metrics.pipeDiagLost()
		}
		return true
	}
	d.lost()
	if res.Err != nil {
		d.localError(res.Err)
	} else {
		d.setWarnings(uint64(res.Warnings), 0)
	}
	ss.srv.metrics.pipeDiagLost()
	return true
}

// skipPrelude reads, when turn t carries a prelude the read before did
// not take, the prelude's answer from conn and drops it, and sets conn's
// sequence id for the read's own answer.
func skipPrelude(conn *backendConn, t *pools.Turn) error {
	if !t.Prelude() {
		conn.SetSeq(1)
		return nil
	}
	if !t.PreludeLeft() {
		return nil // the read before read it: the sequence id follows it
	}
	conn.SetSeq(1)
	return readPrelude(conn, nil)
}

// errNoReadBehindPrelude: the answer of a pipelined read's prelude said
// no result follows it.
var errNoReadBehindPrelude = errors.New("the answer of a pipelined read's prelude claims no read behind it")

// readPrelude reads the answer of a pipelined read's prelude from conn,
// its sequence id set, handing each row to row (nil: it allocates
// nothing). Any error (SHOW WARNINGS fails only when the connection is
// being killed, and then the read behind it is not run) leaves the pipe
// to be broken.
func readPrelude(conn *backendConn, row func([][]byte)) error {
	more, err := conn.ReadResult(row, nil)
	if err == nil && !more {
		err = errNoReadBehindPrelude
	}
	return err
}

// preludeConditions reads, from the answer of the prelude written before
// the read behind it, the conditions a pipelined read answered res left:
// what SHOW WARNINGS and the counts show next in the session.
func (ss *Session) preludeConditions(conn *backendConn, res wire.Result) error {
	d := &ss.diag
	d.setWarnings(0, 0)
	var errs uint64
	conn.SetSeq(1)
	err := readPrelude(conn, func(row [][]byte) {
		if len(row) == 3 {
			d.conds = append(d.conds, [3][]byte{clone(row[0]), clone(row[1]), clone(row[2])})
			if string(row[0]) == "Error" {
				errs++
			}
		}
	})
	if err != nil {
		return err
	}
	warns := uint64(res.Warnings)
	if res.Err != nil { // the error is one of the conditions
		errs = max(errs, 1)
		warns = max(uint64(len(d.conds)), errs)
	}
	d.warnCount, d.errCount = warns, errs
	d.onConn &^= diagWarnings
	if warns > 0 || errs > 0 {
		conn.warnListed = true
	}
	return nil
}

// relayPipelined relays the answer of a pipelined read from conn.
func (ss *Session) relayPipelined(conn *backendConn) (wire.Result, error) {
	load := &conn.be.load
	start := time.Now()
	load.Begin()
	defer func() { load.End(start, time.Now()) }()
	ss.relayFor(conn) // conn's sequence id is set (skipPrelude)
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
