package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
)

// errHandshakeTimeout ends a session whose login outlasted
// handshake_timeout.
var errHandshakeTimeout = errors.New("login took longer than handshake_timeout")

// Client connection buffer sizes: commands are small; results are flushed
// in 16 KiB writes at least.
const (
	clientReadBuffer  = 16 << 10
	clientWriteBuffer = 16 << 10
	// keepReadBuffer is the largest command buffer a session keeps between
	// commands.
	keepReadBuffer = 1 << 20
)

// Session is one client connection and its state. See the package comment
// for the concurrency contract.
type Session struct {
	srv      *Server
	id       uint32
	log      hclog.Logger
	identity // who the client logged in as (session.go)
	cluster  *cluster
	// guard is the session's part in its clusters' protections
	// (protections.go).
	guard protect.Guard
	// now is when the current command arrived (read once, in dispatch):
	// the start of its metrics span, its SHOW PROCESSLIST time and the
	// idle check of a pooled connection.
	now time.Time
	// ctx ends with the session, or when ForceClose cuts it: every wait
	// of the session (pool acquires, the wait for a primary, a causal
	// wait) ends with it. cancel is ctx's.
	ctx    context.Context
	cancel context.CancelFunc

	// The parts, each with one job (and its own file):
	clientSide      // the client's socket, protocol and status (session.go)
	replayState     // what any backend connection can be brought to (state.go)
	routeState      // where reads go, the sticky replica, causal reads (route.go)
	leaseState      // the backend connection held and why (pins.go)
	preparedStmts   // binary-protocol prepared statements (stmt.go)
	sessionClusters // its part in several clusters (clusters.go)
	sessionView     // what other goroutines read (shutdown, KILL, status)
	loopSide        // its io_uring loop, when it runs on one (loop.go)
	exchanging      // the relay of the statement being exchanged (session.go)

	// insight is the statement's digest and query-rule decision (insight.go).
	insight insightState
	// diag is what the previous statement left for ROW_COUNT(),
	// FOUND_ROWS() and SHOW WARNINGS (diag.go).
	diag diagnostics
}

// identity is who a session's client logged in as.
type identity struct {
	// user is the users[] entry, or for a MariaDB account the entry
	// made for it.
	user config.User
	// account is set while the session runs as a MariaDB account
	// (mariadb_accounts), not a users[] entry.
	account *accountLogin
}

// exchanging is the relay of the statement being exchanged with a
// backend connection, and what must happen before its answer reaches the
// client.
type exchanging struct {
	relay wire.Relay
	// setsGlobal says the statement being exchanged may change global
	// variables (a SET GLOBAL). atEnd acts on it and on the protections
	// before the answer reaches the client (endHook); it is
	// ss.beforeEnd, made once.
	setsGlobal bool
	atEnd      func(*wire.Result)
	// pipeTurn is the session's place in a pipe, pipeBuf the write of
	// its pipelined read (pipeline.go).
	pipeTurn pools.Turn
	pipeBuf  []byte
	// pipeKillState is the pipeKill of the read (published in pipeKill
	// while it is in flight).
	pipeKillState pipeKill
}

// clientSide is the session's client connection: socket, negotiated
// protocol and what the client was last told. Only the session's
// goroutine touches it.
type clientSide struct {
	// nc is the client's socket, for deadlines, its address and closing
	// (which also hold for TLS over it, so other goroutines never need to
	// know whether the client switched to TLS). Reads and writes go
	// through client, which carries TLS after an SSL request.
	nc     net.Conn
	client *wire.Conn
	// salt is the auth data of the handshake, reused by COM_CHANGE_USER.
	salt []byte
	// caps are the capabilities the client negotiated.
	caps uint32
	// collation is the client's handshake collation; namesPending says it
	// still has to be turned into a "names" variable (needs a backend
	// round trip once per cluster).
	collation    byte
	namesPending bool
	// status holds the backend status flags of the last OK or EOF.
	status uint16
	// lastOK tells whether the last statement relayed succeeded.
	lastOK bool
	// failNoted is set once authFailed has counted a failed login of
	// this connection.
	failNoted bool
}

// sessionView is the part of a session other goroutines read or set:
// shutdown, KILL from other sessions, the status page. Every field is
// safe for concurrent use (counted is guarded by Server.mu).
type sessionView struct {
	// wait is the command loop's wait for the next command: shutdown
	// interrupts it, Sweep expires it at the session's idle limit.
	wait mysqlserver.Wait
	// watchFrom is when a client watch may begin for the statement being
	// relayed (Unix nanoseconds; 0: no statement): Sweep checks from
	// then on that its client is still connected (see checkClient).
	watchFrom atomic.Int64
	// pinView publishes the sticky pins and their backend.
	pinView atomic.Pointer[pinView]
	// inTxn mirrors pinTxn for other goroutines (shutdown lets a session
	// in a transaction finish it).
	inTxn atomic.Bool
	// streaming is set while the session relays a STREAM: it is busy
	// forever, and shutdown interrupts it like an idle session.
	streaming atomic.Bool
	// counted is the user this session counts against (max_connections);
	// guarded by Server.mu.
	counted string
	// owner is the logged-in user's name, read by KILL from other sessions.
	owner atomic.Pointer[string]
	// attrs are the connection attributes the client sent at login, in
	// its order: written before owner is first stored, read by others
	// (performance_schema's connect-attrs tables, the status page) only
	// after they load a non-nil owner.
	attrs []wire.Attr
	// inFlight is the backend connection of the statement being relayed,
	// so a forced shutdown can cut a statement that waits on the backend.
	inFlight atomic.Pointer[backendConn]
	// pipeKill is the session's pipelined read in flight, for KILL QUERY
	// (pipeline.go); nil when none is.
	pipeKill atomic.Pointer[pipeKill]
	// cut is set when the gateway itself cuts the session (KILL, forced
	// shutdown): the backend connection it closes is not a backend
	// failure, and nothing is retried.
	cut atomic.Bool
	// killMu orders a kill of the session's statement (killStatement)
	// before the session lets the statement's connection go (kill.go).
	killMu sync.Mutex
	// stmtWaits is what KILL QUERY ends of a statement waiting at the
	// gateway (kill.go).
	stmtWaits stmtWaits
	// proc is what SHOW PROCESSLIST shows of the session.
	proc procInfo
	// privs are the global grants of the user's own backend account, once
	// privsRead (privileges.go); the session's goroutine only.
	privs     accountPrivs
	privsRead bool
	// spanPublished is the session's transaction over clusters, nil
	// none (transactions.go).
	spanPublished atomic.Pointer[spanView]
}

// procInfo is the session's line in SHOW PROCESSLIST: its command, since
// when, its database and the statement it runs. The session writes it at
// the start and end of each command; others read it under mu.
type procInfo struct {
	mu      sync.Mutex
	command string // "Query", "Execute", "Sleep", ...
	since   time.Time
	db      string
	// sql is the statement running, pointing into the session's read
	// buffer: valid only under mu, and "" between commands.
	sql string
	// wait is what the statement waits for at the gateway, if anything
	// (set without mu: one atomic store on each side of a wait).
	wait atomic.Uint32
}

// gatewayWait is what a statement waits for at the gateway, as SHOW
// PROCESSLIST's State tells it.
type gatewayWait uint32

const (
	waitNone gatewayWait = iota
	// waitPool: a connection of the backend's pool.
	waitPool
	// waitPrimary: a primary (failover_buffer).
	waitPrimary
	// waitShare: the user's share of the pool (max_pool_share).
	waitShare
	// waitHotRow: a hot row's turn (hot_row).
	waitHotRow
	// waitThrottle: the replicas to catch up (throttle).
	waitThrottle
	// waitConsolidation: another session's identical read (consolidation).
	waitConsolidation
)

// state is the wait's SHOW PROCESSLIST State.
func (w gatewayWait) state() string {
	switch w {
	case waitPool:
		return "Waiting for a pooled backend connection at the gateway"
	case waitPrimary:
		return "Waiting for a primary at the gateway"
	case waitShare:
		return "Waiting for the user's pool share at the gateway"
	case waitHotRow:
		return "Waiting for a hot row at the gateway"
	case waitThrottle:
		return "Throttled at the gateway: replicas lag"
	case waitConsolidation:
		return "Waiting for an identical read at the gateway"
	}
	return ""
}

// waiting records that the statement waits for w at the gateway (waitNone:
// it waits no more).
func (pi *procInfo) waiting(w gatewayWait) { pi.wait.Store(uint32(w)) }

// begin records that the session started the command p.
func (pi *procInfo) begin(p []byte, db string, now time.Time) {
	cmd, sql := "Query", ""
	switch p[0] {
	case wire.ComQuery:
		if len(p) > 1 {
			sql = unsafe.String(&p[1], len(p)-1)
		}
	case wire.ComStmtExecute, wire.ComStmtFetch:
		cmd = "Execute"
	case wire.ComStmtPrepare:
		cmd = "Prepare"
	case wire.ComPing:
		cmd = "Ping"
	case wire.ComInitDB:
		cmd = "Init DB"
	case wire.ComQuit:
		cmd = "Quit"
	}
	pi.mu.Lock()
	pi.command, pi.since, pi.db, pi.sql = cmd, now, db, sql
	pi.mu.Unlock()
}

// end records that the command ended: the session sleeps.
func (pi *procInfo) end(db string) {
	pi.mu.Lock()
	pi.command, pi.sql, pi.db = "Sleep", "", db
	pi.mu.Unlock()
	pi.wait.Store(0)
}

// handshakeMaxPacket bounds a packet before login: a handshake response
// with connection attributes (at most 64 KiB of them) and auth data.
const handshakeMaxPacket = 128 << 10

// NewConn implements mysqlserver.Handler: the session of an accepted
// client connection.
func (s *Server) NewConn(nc net.Conn, id uint32) mysqlserver.Conn {
	ctx, cancel := context.WithCancel(context.Background())
	client := wire.NewConn(nc, clientReadBuffer, clientWriteBuffer)
	ss := &Session{
		srv:         s,
		id:          id,
		replayState: replayState{versions: &s.stateIDs},
		clientSide: clientSide{
			// The socket's wrapper: its deadlines and close reach a loop
			// task's reads too.
			nc:     client.NetConn(),
			client: client,
			status: wire.StatusAutocommit,
		},
		log:    s.log.With("conn_id", id, "client_addr", nc.RemoteAddr().String()),
		ctx:    ctx,
		cancel: cancel,
	}
	ss.guard.Bind((*guardSession)(ss))
	// Before login a client gets no more than a handshake needs; the
	// command loop sets max_allowed_packet once it is logged in.
	ss.client.MaxPacket = handshakeMaxPacket
	// Writes to the client carry a deadline, so a client that stops
	// reading its results is cut instead of holding a backend connection.
	ss.client.SetWriteTimeout(*s.cfg.WriteTimeout)
	return ss
}

// Serve implements mysqlserver.Conn: it runs the session from the
// greeting to the client's last command.
func (ss *Session) Serve() {
	s := ss.srv
	s.metrics.clientAccepted()
	defer s.metrics.clientClosed()
	defer ss.cancel()
	defer s.unregister(ss)
	if s.closing() {
		s.metrics.clientRejected(rejectShutdown)
		ss.writeErr(wire.NewError(mysqlserver.ErServerShutdown, "08S01", "Server shutdown in progress: the gateway is stopping, connect to another one"))
		return
	}
	if s.front.Len() > s.cfg.MaxClientConnections {
		s.metrics.clientRejected(rejectTooMany)
		// Like MariaDB: the error instead of the greeting.
		ss.writeErr(wire.NewError(mysqlserver.ErConCount, "08004", "Too many connections: the gateway serves at most %d clients (max_client_connections)", s.cfg.MaxClientConnections))
		return
	}
	nc := ss.nc
	addr := addrOf(nc.RemoteAddr())
	if !s.guard.admit(addr, s.cfg.MaxConnectionsPerAddress) {
		s.metrics.clientRejected(rejectTooMany)
		ss.writeErr(wire.NewError(mysqlserver.ErConCount, "08004", "Too many connections from %s: the gateway serves at most %d connections per client address (max_connections_per_address)", addr, s.cfg.MaxConnectionsPerAddress))
		return
	}
	defer s.guard.release(addr)
	// handshake_timeout bounds the whole login, however the client
	// trickles its bytes: the socket is closed when it runs out.
	timer := time.AfterFunc(s.cfg.HandshakeTimeout, func() { _ = nc.Close() })
	err := ss.handshake()
	if !timer.Stop() && err == nil {
		err = errHandshakeTimeout
	}
	if errors.Is(err, errAuthFailed) && !ss.failNoted {
		ss.authFailed("")
	}
	if err != nil {
		s.metrics.clientRejected(rejectReasonOf(err))
		if !errors.Is(err, io.EOF) && !errors.Is(err, errAuthFailed) && !errors.Is(err, errUserLimit) && !errors.Is(err, errInsecureTransport) {
			ss.log.Debug("handshake failed", "error", err)
		}
		return
	}
	ss.log.Debug("client connected", "user", ss.user.User, "db", ss.db)
	s.pinStats.sessions.Add(1)
	err = ss.loop()
	ss.end()
	switch {
	case errors.Is(err, wire.ErrPacketTooLarge):
		// The client got MariaDB's words; what to do is said here.
		ss.log.Warn("client connection ended", "user", ss.user.User, "error", err)
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded):
		ss.log.Debug("client connection ended", "error", err)
	}
}

// clientHost is the client's address without the port.
func (cs *clientSide) clientHost() string {
	host, _, _ := net.SplitHostPort(cs.nc.RemoteAddr().String())
	return host
}

// context is the session's context (a session built without one, in
// unit tests, gets the background context).
func (ss *Session) context() context.Context {
	if ss.ctx == nil {
		return context.Background()
	}
	return ss.ctx
}

// InterruptIfIdle implements mysqlserver.Conn: it wakes a session waiting
// for its next command so it sees the shutdown; a busy session sees it
// after its statement, and a session in a transaction when the
// transaction ends.
func (ss *Session) InterruptIfIdle() {
	switch {
	case ss.streaming.Load():
		mysqlserver.InterruptIdle(ss.nc)
	case !ss.inTxn.Load():
		ss.wait.Interrupt(ss.nc)
	}
}

// Sweep implements mysqlserver.Sweeper: it closes the session once it has
// been idle past its limit (wait_timeout, interactive_timeout,
// idle_transaction_timeout), and checks that the client of a statement
// that runs long is still connected.
func (ss *Session) Sweep(now time.Time) {
	ss.wait.Expire(now, ss.nc)
	if from := ss.watchFrom.Load(); from != 0 && now.UnixNano() >= from {
		ss.checkClient(from)
	}
}

// ForceClose implements mysqlserver.Conn: it cuts the client connection
// and the statement in flight, and ends the session's waits (for a pooled
// connection, a primary, a replica's catch-up).
func (ss *Session) ForceClose() {
	ss.cut.Store(true)
	if ss.cancel != nil {
		ss.cancel()
	}
	_ = ss.nc.Close()
	if bc := ss.inFlight.Load(); bc != nil {
		_ = bc.CloseSocket() // the socket only: the session owns bc's books
	}
}

// loop reads and answers commands until the client quits or fails.
func (ss *Session) loop() error {
	l := mysqlserver.Loop{
		Conn:       ss.client,
		Wait:       &ss.wait,
		KeepBuffer: keepReadBuffer,
		Stop:       func() bool { return ss.srv.closing() && ss.pins&pinTxn == 0 && !ss.txn.active },
		Idle: func() (time.Duration, error) {
			ss.client.MaxPacket = ss.maxPacket()
			if err := ss.holdLastResult(); err != nil {
				return 0, err
			}
			return ss.idleTimeout(), nil
		},
		Dispatch: ss.dispatch,
		WriteErr: ss.writeErr,
	}
	return l.Run()
}

// lastResultHold is how long a session keeps the connection of a write
// outside a transaction, so that a LAST_INSERT_ID(), ROW_COUNT() or
// FOUND_ROWS() in its next statement sees that write's result. A client
// that is slower than this gets LAST_INSERT_ID() replayed from the OK
// packet instead.
const lastResultHold = 50 * time.Millisecond

// holdLastResult waits briefly for the next command while the session holds
// a connection only for the previous statement's result, and releases the
// connection when the client stays quiet: an idle client must not sit on
// a pooled connection.
func (ss *Session) holdLastResult() error {
	if ss.lease == nil || ss.pins == 0 || ss.pins&^transientPins != 0 {
		return nil
	}
	ready, err := ss.client.WaitReadable(lastResultHold)
	if err != nil {
		return err
	}
	if !ready {
		ss.setPins(0)
		ss.releaseLease()
	}
	return nil
}

// dispatch answers one command. A returned error ends the session.
func (ss *Session) dispatch(p []byte) error {
	// One clock read per command: its metrics, the idle check of a pooled
	// connection and SHOW PROCESSLIST all take it.
	ss.now = time.Now()
	if ss.stmtWaits.killed.Load() {
		ss.renewStatementContext()
	}
	ss.proc.begin(p, ss.db, ss.now)
	err := ss.dispatchCommand(p)
	ss.insight.active = false // a statement admitted but answered locally is not recorded
	if ss.guard.InTxn() && ss.pins&pinTxn == 0 && !ss.txn.active && ss.cluster != nil {
		ss.guard.TxnEnded(ss.cluster.guards) // the transaction is over, as the server reported
	}
	if ss.spanPublished.Load() != nil && (!ss.txn.active || len(ss.txn.parts) == 0) {
		ss.spanPublished.Store(nil) // the transaction ended
	}
	ss.proc.end(ss.db)
	return err
}

// dispatchCommand answers one command.
func (ss *Session) dispatchCommand(p []byte) error {
	switch p[0] {
	case wire.ComQuery:
		return ss.comQuery(p)
	case wire.ComQuit:
		return io.EOF
	case wire.ComPing:
		return ss.writeOK(wire.OK{Status: ss.status})
	case wire.ComInitDB:
		return ss.comInitDB(p)
	case wire.ComFieldList:
		return ss.forwardSimple(p, wire.ResponseFieldList)
	case wire.ComStatistics:
		return ss.forwardSimple(p, wire.ResponseRaw)
	case wire.ComSetOption:
		return ss.comSetOption(p)
	case wire.ComResetConnection:
		return ss.comResetConnection()
	case wire.ComChangeUser:
		return ss.comChangeUser(p)
	case wire.ComProcessKill:
		return ss.comProcessKill(p)
	case wire.ComStmtPrepare:
		return ss.comStmtPrepare(p)
	case wire.ComStmtExecute:
		return ss.comStmtExecute(p)
	case wire.ComStmtSendLongData:
		return ss.comStmtSendLongData(p)
	case wire.ComStmtClose:
		return ss.comStmtClose(p)
	case wire.ComStmtReset:
		return ss.comStmtReset(p)
	case wire.ComStmtFetch:
		return ss.comStmtFetch(p)
	}
	return ss.writeErr(wire.NewError(mysqlserver.ErUnknownCom, "08S01", "Unknown command 0x%02x: the gateway does not support this command", p[0]))
}

// writeErr sends an ERR packet and flushes. The error it returns is the
// client's write failure, if any.
func (ss *Session) writeErr(e *wire.SQLError) error {
	ss.diag.localError(e)
	if err := ss.client.WritePacket(wire.AppendERR(nil, e)); err != nil {
		return err
	}
	return ss.client.Flush()
}

// writeOK sends an OK packet and flushes.
func (cs *clientSide) writeOK(ok wire.OK) error {
	var b [32]byte
	if err := cs.client.WritePacket(wire.AppendOK(b[:0], ok)); err != nil {
		return err
	}
	return cs.client.Flush()
}

// comQuery runs a text-protocol statement.
func (ss *Session) comQuery(p []byte) error {
	var sql string
	if len(p) > 1 {
		// The route may point into p; everything kept beyond this command
		// is cloned.
		sql = unsafe.String(&p[1], len(p)-1)
	}
	route := ss.srv.classifier.Classify(sql)
	if handled, err := ss.runLocal(route); handled {
		return err
	}
	if handled, err := ss.answerDiag(sql, route); handled {
		return err
	}
	if route.OtherKill || route.DynamicVar != "" {
		if handled, err := ss.refuseKill(route); handled {
			return err
		}
	}
	// Query insight (insight.go): fingerprint, then the query rules.
	if handled, err := ss.digestAndMatch(sql, nil); handled {
		return err
	}
	if route.Kind == querypath.KindSet && ss.setsTxnMode(route) || route.Kind == querypath.KindRead && readsTxnMode(sql) {
		return ss.txnModeStatement(sql, route)
	}
	if ss.srv.dbs != nil {
		if handled, err := ss.routeClusters(sql, route); handled {
			return err
		}
	}
	if or, ai := ss.routeOwner(ss.db, route); or != ownerNone {
		return ss.comQueryOwner(sql, p, route, or, ai)
	}
	if route.Kind == querypath.KindUse && !route.MultiStatement {
		if db, t, ok := splitTarget(route.Database); ok {
			return ss.useTarget(db, t)
		}
	}
	if route.SessionStatus && !route.MultiStatement {
		return ss.showSessionStatus(p, route)
	}
	if route.GatewayIDs {
		p = ss.withGatewayIDs(p, sql)
	}
	if e := ss.admit(sql, route, nil, nil); e != nil {
		return ss.writeErr(e)
	}
	if route.ImplicitCommit && ss.cluster != nil && protect.ChangesSchema(sql) {
		// Hot-row protection learns keys once per table: a change of
		// schema makes it ask again (after the statement ran).
		defer ss.cluster.forgetKeys()
	}
	if route.ImplicitCommit && changesGrants(sql) {
		// Before too: a login that reads grants once the answer went
		// out, before the deferred forget, must not keep the old ones.
		ss.srv.privs.forget()
		defer ss.grantsChanged()
	}
	if route.ImplicitCommit {
		defer ss.accountChange(sql)()
	}
	if c := ss.cluster; c != nil && !ss.guard.Wrote() {
		conf := c.conf.Load()
		if conf.Consolidation.Enabled {
			if handled, err := ss.consolidate(p, sql, route, conf); handled {
				return err
			}
		}
		if handled, err := ss.pipelined(p, sql, route, conf, nil); handled {
			return err
		}
	}
	return ss.run(p, route, wire.ResponseQuery)
}

// comQueryOwner runs a text-protocol statement that concerns the owner
// (runOwner): a function of its own, so that what the fallback's closure
// captures (the statement and its route) is not allocated for every
// statement comQuery runs.
func (ss *Session) comQueryOwner(sql string, p []byte, route querypath.Route, or ownerRoute, ai *config.AutoIncrement) error {
	return ss.runOwner(ss.db, sql, p, route, or, ai, func() error { return ss.run(p, route, wire.ResponseQuery) })
}

// useTarget answers USE db@replica, USE db@primary and USE @replica: the
// database is checked and set like COM_INIT_DB, then the session's reads
// follow the target.
func (ss *Session) useTarget(db string, t target) error {
	if db == "" {
		ss.target = t
		ss.srv.metrics.statement(routeLocal, outcomeOK, 0)
		return ss.writeOK(wire.OK{Status: ss.status})
	}
	ss.lastOK = false
	p := append([]byte{wire.ComInitDB}, db...)
	if ss.srv.dbs != nil {
		if handled, err := ss.routeClusters("", querypath.Route{Kind: querypath.KindUse, Database: db}); handled {
			return err
		}
	}
	if err := ss.run(p, querypath.Route{Kind: querypath.KindUse, Database: db}, wire.ResponseOK); err != nil {
		return err
	}
	if ss.lastOK { // the backend accepted the database
		ss.target = t
	}
	return nil
}

// run forwards command p to a backend connection, relays the response and
// updates the session. A read outside a transaction whose backend
// connection breaks before anything reached the client is retried once on
// another serving backend; a statement outside a transaction that the
// primary refuses as read-only (1290) waits for the new primary and is
// retried there once.
func (ss *Session) run(p []byte, route querypath.Route, kind wire.ResponseKind) error {
	return ss.runSeen(p, route, kind, nil)
}

// exchanged is what the last exchange of a statement run by runSeen read
// of the backend's answer, for a consolidation leader (consolidation.go).
type exchanged struct {
	res  wire.Result
	err  error
	seen bool
}

// runSeen is run, keeping in seen, when not nil, what the last exchange
// read.
func (ss *Session) runSeen(p []byte, route querypath.Route, kind wire.ResponseKind, seen *exchanged) error {
	sp := startStatement(ss.now)
	defer ss.endStatement(&sp) // metrics, and the digest (insight.go)
	var sql []byte
	if p[0] == wire.ComQuery {
		sql = p[1:]
	}
	var rt retry
	for {
		pinned, held := ss.lease != nil, ss.heldState()
		// A statement of a session holding state on its connection (not
		// just the previous statement's result) is never retried.
		retryable := ss.retryable(&rt)
		ss.choosing(p[0], route, rt.attempt == 0)
		conn, err := ss.backend(route, rt.avoid, rt.lost != nil)
		ss.guard.Chose()
		if err == nil {
			err = ss.prepareStatement(conn, route, sql, pinned)
		}
		if err != nil {
			if lost, err := ss.stateLostBefore(held, &sp, err); lost {
				return err
			}
			return ss.noConnection(&rt, &sp, err)
		}
		ss.relay.HoldReadOnly = retryable && ss.leaseRole == rolePrimary
		ss.relay.Results = route.Statements
		ss.setsGlobal = route.SetsGlobal
		res, err := ss.exchange(conn, p, kind)
		ss.relay.HoldReadOnly, ss.relay.Results, ss.setsGlobal = false, 0, false
		if seen != nil {
			*seen = exchanged{res: res, err: err, seen: true}
		}
		sp.served(ss.leaseRole, res, err)
		switch out, err := ss.afterTry(&rt, conn, pinned, retryable, route, res, err, true); out {
		case tryAgain:
			continue
		case tryOver:
			return err
		}
		return ss.afterStatement(conn, route, res, sql)
	}
}

// heldReadOnly handles a statement the primary refused as read-only, held
// back from the client by the relay (wire.Result.Held): nothing ran. The
// backend is probed at once and the lease given up, and retry is true: the
// caller tries again on the new primary, avoiding this one. While the
// gateway shuts down there is no retry: the client gets the backend's
// error now (err is then the client's write failure, if any).
func (ss *Session) heldReadOnly(conn *backendConn, res wire.Result) (retry bool, err error) {
	if ss.srv.closing() {
		if err := ss.writeErr(res.Err); err != nil {
			return false, &wire.ClientError{Err: err}
		}
		return false, nil
	}
	ss.srv.health.Check(conn.addr)
	ss.releaseLease()
	ss.log.Info("primary refused a write as read-only; waiting for the new primary", "backend", conn.addr)
	return true, nil
}

// exchange sends p on conn and relays the answer.
func (ss *Session) exchange(conn *backendConn, p []byte, kind wire.ResponseKind) (wire.Result, error) {
	load := &conn.be.load
	start := time.Now()
	load.Begin()
	defer func() { load.End(start, time.Now()) }()
	// Sent by the relay's first read of the answer (wire.Conn.SendCommand).
	if err := conn.SendCommand(p); err != nil {
		return ss.sendFailed(conn, err)
	}
	// The answer continues the client's sequence: a command split over
	// several packets (16 MiB and more) is answered after all of them.
	ss.relayFor(conn)
	if kind == wire.ResponseQuery {
		if ss.status&wire.StatusAutocommit == 0 {
			// With autocommit off a statement on tables opens a
			// transaction (one without tables does not: a guess).
			ss.relay.StatusHint |= wire.StatusInTrans
		}
		if ss.relay.Results == 0 && (p[0] == wire.ComQuery && isCall(p[1:]) || p[0] == wire.ComStmtExecute && ss.execCall) {
			// Every result set of a procedure is followed by its final OK.
			ss.relay.StatusHint |= wire.StatusMoreResults
		}
	}
	ss.relay.BeforeEnd = ss.endHook(kind)
	ss.beginInFlight(conn)
	ss.watchFrom.Store(start.Add(clientWatchAfter).UnixNano())
	ss.arm(conn) // a query rule's timeout and max_rows (insight.go)
	res, err := ss.relay.Run(ss.client, conn.Conn, kind)
	ss.disarm(&res)
	ss.watchFrom.Store(0)
	ss.endInFlight()
	if err != nil && res.Packets == 0 {
		if se, ok := errors.AsType[*wire.SendError](err); ok {
			return ss.sendFailed(conn, se.Err)
		}
	}
	if res.Warnings > 0 || res.Err != nil {
		conn.warnListed = true
	}
	return res, err
}

// relayFor sets the relay up for an answer of conn to the session's
// client: both sides' capabilities, the LOCAL INFILE timeout, what the
// client is shown of session state, and the status the answer starts
// from.
func (ss *Session) relayFor(conn *backendConn) {
	ss.relay.ClientCaps = ss.caps
	ss.relay.BackendCaps = conn.Caps
	ss.relay.InfileTimeout = *ss.srv.cfg.LocalInfileTimeout
	ss.relay.Trackers = ss.trackers
	ss.relay.TxnState, ss.relay.TxnChars = ss.txnState, ss.txnChars
	ss.relay.StatusHint = ss.status
}

// clientWatchAfter is how long a statement runs before the gateway starts
// checking, at every sweep (mysqlserver.SweepEvery), that its client is
// still connected.
const clientWatchAfter = time.Second

// checkClient runs on the server's sweep while a statement runs long
// (from is the statement's watchFrom): a client that closed its
// connection meanwhile gets its statement stopped (KILL QUERY on the
// backend, as MariaDB ends the statement of a client that went away)
// instead of leaving it running, holding locks and the pooled connection,
// for nobody. Bytes the client sent (its next command) do not count as
// gone.
func (ss *Session) checkClient(from int64) {
	bc := ss.inFlight.Load()
	if bc == nil || !ss.client.PeerGone() || !ss.watchFrom.CompareAndSwap(from, 0) {
		return
	}
	ss.log.Info("client went away during a statement; stopping the statement", "backend", bc.addr)
	if err := ss.killStatement(true); err != nil {
		ss.log.Warn("could not stop the statement of a client that went away", "backend", bc.addr, "error", err)
	}
}

// backend returns the connection that serves the next statement: the
// pinned one, or one from the chosen backend's pool brought in line with
// the session. A connection held only for a replica read's warnings is
// given up for a statement that must go to the primary. avoid names a
// backend that must not serve (a retry after it failed); quick caps the
// wait for a primary (see primaryBackend).
func (ss *Session) backend(route querypath.Route, avoid string, quick bool) (*backendConn, error) {
	if ss.lease != nil {
		if conn, held, err := ss.heldBackend(route); held {
			return conn, err
		}
	}
	wantPrimary := false
	dead := 0
	for attempt := 0; ; attempt++ {
		var be *backend
		r := rolePrimary
		var err error
		if wantPrimary {
			conf := ss.cluster.conf.Load()
			be, err = ss.primaryBackend(ss.srv.health.Snapshot(), conf, avoid, quick)
		} else {
			be, r, err = ss.pick(route, avoid, quick)
		}
		if err != nil {
			return nil, err
		}
		if e := ss.guard.Chosen(ss.cluster.guards, ss.cluster.conf.Load(), be); e != nil {
			return nil, e
		}
		if err := ss.takeShare(be); err != nil {
			return nil, err
		}
		pool, err := be.poolFor(ss.poolKey())
		var l *pools.Lease[*backendConn]
		if err == nil {
			ss.proc.waiting(waitPool)
			waitFrom := time.Now()
			l, err = ss.acquire(pool)
			ss.insight.waitedForPool(waitFrom) // the digest's pool wait (insight.go)
			ss.proc.waiting(waitNone)
		}
		if err != nil {
			ss.giveShare()
			var de *pools.DialError
			var sqlErr *wire.SQLError
			retry := attempt < 2 && !ss.srv.closing() &&
				(errors.Is(err, pools.ErrClosed) || // the backend was removed by a reload
					errors.As(err, &de) && !errors.As(err, &sqlErr)) // unreachable: discovery knows now
			if !retry {
				return nil, err
			}
			if r == roleReplica {
				avoid = be.addr
			}
			continue
		}
		conn := l.Conn()
		if dead < maxDeadSkips && idleLongerThan(l, ss.now, peekAfterIdle) && conn.PeerClosed() {
			// The server closed this idle connection (wait_timeout, a
			// KILL, a restart): it must not take the statement. One
			// non-blocking peek; a restart shows in discovery.
			dead++
			l.Destroy()
			ss.giveShare()
			attempt--
			continue
		}
		ss.lease, ss.leaseRole = l, r
		ss.leased(l)
		if err := ss.alignLeased(conn); err != nil {
			var sqlErr *wire.SQLError
			if !errors.As(err, &sqlErr) && dead < maxDeadSkips {
				// The connection broke while being brought in line with
				// the session: nothing of the client's ran, so another
				// connection serves.
				dead++
				ss.dropLease()
				attempt--
				continue
			}
			return nil, ss.leaseFailed(conn, err)
		}
		ss.insertIDSynced = conn.insertIDKnown && conn.lastInsertID == ss.lastInsertID
		if r == roleReplica {
			ok, err := ss.causalWait(conn, ss.cluster.conf.Load())
			if err != nil {
				return nil, ss.leaseFailed(conn, err)
			}
			if !ok {
				// The replica has not caught up with the session's write
				// in causal_timeout: read from the primary.
				ss.releaseLease()
				wantPrimary = true
				continue
			}
		}
		return conn, nil
	}
}

// alignLeased brings conn, just leased from a pool, in line with the
// session: reset when a SET GLOBAL came since its session started (or it
// came back dirty), the session's state replayed, and joined to the
// session's transaction over clusters.
func (ss *Session) alignLeased(conn *backendConn) error {
	if conn.globals < ss.globals {
		// A SET GLOBAL since the connection's session started: the
		// session's defaults are the new ones (a reset takes them).
		conn.dirty = true
	}
	if conn.dirty {
		// Pooled connections are reset when they come back; this is a
		// safety net.
		if err := conn.reset(); err != nil {
			return err
		}
	}
	if conn.syncedState != ss.stateID {
		if err := ss.sync(conn); err != nil {
			return err
		}
	}
	if ss.join != "" {
		// The session's transaction begins here (clusters.go).
		return ss.joinTxn(conn)
	}
	return nil
}

// heldBackend serves route on the connection the session holds, brought
// in line with the session (and joined to its transaction over clusters);
// held is false when the held connection is a replica's that route may
// not use: it is given back, and backend takes another.
func (ss *Session) heldBackend(route querypath.Route) (conn *backendConn, held bool, err error) {
	if ss.leaseRole == roleReplica && ss.pins&^transientPins == 0 && route.Kind != querypath.KindShowWarnings &&
		!ss.replicaEligible(route, ss.cluster.conf.Load()) {
		ss.setPins(0)
		ss.releaseLease()
		return nil, false, nil
	}
	conn = ss.lease.Conn()
	// Held for the previous statement's result only, when the
	// protections are asked (guard.Choosing).
	if e := ss.guard.Chosen(ss.cluster.guards, ss.cluster.conf.Load(), conn.be); e != nil {
		return nil, true, e
	}
	if conn.syncedState != ss.stateID {
		if err := ss.sync(conn); err != nil {
			var sqlErr *wire.SQLError
			if !errors.As(err, &sqlErr) {
				// Broken: dropped, or every later statement would fail
				// on it. The caller ends a session that held state on
				// it (stateLostBefore).
				ss.dropLease()
				return nil, true, backendLost(conn.addr, err)
			}
			return nil, true, err
		}
	}
	if ss.join != "" {
		if err := ss.joinTxn(conn); err != nil {
			var sqlErr *wire.SQLError
			if !errors.As(err, &sqlErr) {
				ss.dropLease()
				ss.lostBackendState()
				return nil, true, backendLost(conn.addr, err)
			}
			return nil, true, err
		}
	}
	return conn, true, nil
}

// peekAfterIdle is how long a pooled connection must have been idle
// before it is checked for a close by the server (one recv syscall,
// about 0.5 µs): under load connections come back within microseconds
// and the check is skipped; what a server closes (wait_timeout, an
// administrator's KILL, a restart) has mostly been idle far longer. A
// close missed here shows as a failed send (the command goes to a fresh
// connection) or a lost connection (a read is retried, a write gets 1158).
const peekAfterIdle = 20 * time.Millisecond

// idleLongerThan reports whether l's connection had been idle longer than
// d at now, the statement's arrival (a clock read costs as much as the
// rest of routing on some machines: the statement's own is reused). A
// connection fresh from its dial has not been idle.
func idleLongerThan(l *pools.Lease[*backendConn], now time.Time, d time.Duration) bool {
	since := l.IdleSince()
	return !since.IsZero() && now.Sub(since) > d
}

// maxDeadSkips bounds how many closed idle connections one statement
// throws away before it takes whatever the pool gives (a fresh dial).
const maxDeadSkips = 8

// leaseFailed gives up the connection just leased after err (from state
// sync or a causal wait) and returns the error for the client.
func (ss *Session) leaseFailed(conn *backendConn, err error) error {
	var sqlErr *wire.SQLError
	if errors.As(err, &sqlErr) {
		conn.syncedState = 0
		ss.releaseLease()
		return err
	}
	ss.dropLease()
	return backendLost(conn.addr, err)
}

// sync makes conn's session match the client session: database, session
// variables, multi-statement option. Only what differs is sent.
//
// It never resets conn: a connection the session holds carries the
// session's own state (a dirty connection from the pool is reset by the
// caller first).
func (ss *Session) sync(conn *backendConn) error {
	if ss.namesPending {
		ss.namesPending = false
		names, ok, err := ss.cluster.collation(conn, ss.collation)
		if err != nil {
			return err
		}
		if ok {
			ss.vars["names"] = names
			ss.nextState()
		}
	}
	if db := ss.connDB(); conn.db != db {
		if db == "" {
			if err := conn.changeUserNoDB(); err != nil {
				return err
			}
		} else {
			if _, err := conn.SimpleCommand(append([]byte{wire.ComInitDB}, db...)); err != nil {
				return err
			}
			conn.db = db
		}
	}
	if conn.multiStmt != ss.multiStmt {
		opt := byte(1)
		if ss.multiStmt {
			opt = 0
		}
		if _, err := conn.SimpleCommand([]byte{wire.ComSetOption, opt, 0}); err != nil {
			return err
		}
		conn.multiStmt = ss.multiStmt
	}
	if set := varsDiff(conn.vars, ss.vars); set != "" {
		if _, err := conn.Exec(set); err != nil {
			return err
		}
		conn.vars = copyVars(ss.vars)
	}
	conn.syncedState = ss.stateID
	return nil
}

// varsDiff returns the SET statement that turns have into want, or "".
func varsDiff(have, want map[string]string) string {
	var b strings.Builder
	add := func(name, value string) {
		if b.Len() == 0 {
			b.WriteString("SET ")
		} else {
			b.WriteString(", ")
		}
		setItem(&b, name, value)
	}
	// "names" first: it sets the character set later values are read in.
	// A SET CHARACTER SET to undo is undone by SET NAMES too: its DEFAULT
	// would be the server's character set, not the connection's.
	_, hadCS := have["character set"]
	_, wantCS := want["character set"]
	undoCS := hadCS && !wantCS
	if v, ok := want["names"]; ok && (have["names"] != v || undoCS) {
		add("names", v)
	} else if _, had := have["names"]; (had || undoCS) && !ok {
		add("names", resetValue("names"))
	}
	for name, v := range want {
		if name != "names" && have[name] != v {
			add(name, v)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok && name != "names" && name != "character set" {
			add(name, resetValue(name))
		}
	}
	return b.String()
}

func copyVars(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// prepareStatement runs before a statement on conn. One that reads
// LAST_INSERT_ID() or may change it gets the session's value replayed on a
// connection that holds another session's (once per lease: then the
// connection holds the session's truth).
func (ss *Session) prepareStatement(conn *backendConn, route querypath.Route, sql []byte, pinned bool) error {
	if conn.warnListed && ss.diag.onConn&diagWarnings == 0 && (route.MultiStatement || isCall(sql)) {
		// The connection holds warnings that are not the session's (its
		// last user's), and the server decides what this statement
		// leaves: one without tables (a CALL of a procedure that only
		// sets variables) would report them as the session's. A
		// statement that uses a table and raises nothing empties the
		// list; EXPLAIN leaves FOUND_ROWS() as it is (checked on 10.11).
		if err := conn.QueryRows("EXPLAIN SELECT 1 FROM information_schema.ENGINES", func([][]byte) {}); err != nil {
			var sqlErr *wire.SQLError
			if !errors.As(err, &sqlErr) {
				ss.dropLease()
				return backendLost(conn.addr, err)
			}
		}
		conn.warnListed = false
	}
	if err := ss.plantDiagMarker(conn, route, sql); err != nil {
		return err
	}
	if err := ss.plantFoundRows(conn, route, pinned); err != nil {
		return err
	}
	var stmt string
	switch {
	case !ss.insertIDSynced && usesInsertID(route, sql):
		if pinned {
			// The SET would replace what the previous statement left.
			if err := ss.captureDiag(conn); err != nil {
				ss.dropLease()
				return backendLost(conn.addr, err)
			}
		}
		stmt = "SET @@SESSION.last_insert_id = " + strconv.FormatUint(ss.lastInsertID, 10)
		conn.lastInsertID, conn.insertIDKnown = ss.lastInsertID, true
		ss.insertIDSynced = true
	default:
		return nil
	}
	if _, err := conn.Exec(stmt); err != nil {
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			conn.insertIDKnown = false
			if !pinned {
				ss.releaseLease()
			}
			return err
		}
		ss.dropLease()
		return backendLost(conn.addr, err)
	}
	return nil
}

// afterStatement records what the statement changed and decides whether
// the session keeps its backend connection. The server's session trackers
// (on a tracked connection) are the authority; the classifier's route adds
// what they do not report. A non-nil error ends the session: the server
// closed its connection after the answer (COMMIT RELEASE, an error such as
// 1927 or 1153), as MariaDB then closes the client's.
//
// sql is the statement's text (nil for a command other than a query or an
// execute), for what it left in ROW_COUNT(), FOUND_ROWS() and SHOW
// WARNINGS.
func (ss *Session) afterStatement(conn *backendConn, route querypath.Route, res wire.Result, sql []byte) error {
	ok := res.Err == nil
	ss.lastOK = ok
	ss.diag.afterStatement(sql, route, res, ss.status&wire.StatusNoBackslashEscapes != 0)
	if ss.diag.planted {
		if err := ss.resolveDiagMarker(conn); err != nil {
			ss.dropLease()
			ss.lostBackendState()
			return err
		}
	}
	// The previous statement's transient state has now been read or is gone.
	pins := ss.pins &^ transientPins
	var add, end pinSet
	if conn.tracked {
		add, end = ss.applyServerState(conn, route, res)
	}
	ss.afterInsertID(conn, route, res, ok)
	var err error
	if ok {
		pins, err = ss.afterSuccess(conn, route, res, pins, add, end)
	} else {
		pins, err = ss.afterError(conn, route, res, pins, add)
	}
	if err != nil {
		return err
	}
	if ss.txn.active && pins&pinTxn == 0 && ss.txn.has(ss.cluster) {
		pins |= pinTxn // the transaction goes on here until the gateway ends it
	}
	ss.setPins(pins)
	if ss.pins&stickyPins != 0 {
		conn.dirty = true
	}
	if route.Pin&querypath.PinXA != 0 {
		conn.discard = true
	}
	if route.SetsGlobal && (ok || route.MultiStatement) {
		// Later sessions start with the new defaults: connections
		// logged in before are reset before they serve one. Counted
		// before the answer reached the client too (endHook); again
		// here for an answer cut short, which that hook never saw.
		ss.cluster.globals.Add(1)
	}
	if conn.closed || !ok && closesConnection(res.Err.Code) || ok && route.Release && !route.MultiStatement {
		// The server closed the connection after this answer, because
		// of the client's own statement: not a backend failure. MariaDB
		// closes the client's connection then; so does the gateway.
		conn.closed = true
		ss.dropLease()
		ss.lostBackendState()
		return io.EOF
	}
	if ok && !conn.tracked && ss.leaseRole == rolePrimary && ss.causalReads() &&
		(route.Kind == querypath.KindCommit || route.Kind == querypath.KindOther && !res.HadResultSet) {
		// A write: its GTID is read when the connection is released, so
		// nothing runs between it and the client's next statement.
		ss.gtidPending = true
	}
	if ss.pins == 0 {
		ss.releaseLease()
	}
	return nil
}

// afterSuccess is afterStatement's part for a statement that succeeded:
// the session state it set and the pins it takes or ends (add and end are
// what the server's trackers said).
func (ss *Session) afterSuccess(conn *backendConn, route querypath.Route, res wire.Result, pins, add, end pinSet) (pinSet, error) {
	ss.status = res.Status
	if !conn.tracked && (route.Kind == querypath.KindUse || route.Database != "") {
		ss.dbChangedOn(conn, strings.Clone(route.Database))
	}
	if len(route.Vars) > 0 {
		pins |= ss.applySet(conn, route.Vars)
	}
	if !conn.tracked && res.Status&wire.StatusDBDropped != 0 {
		// MariaDB flags every DROP DATABASE, also of another
		// database than the current one: ask which one is current
		// (after keeping what the DROP left, which the query would
		// replace).
		err := ss.captureDiag(conn)
		var db string
		if err == nil {
			db, err = currentDatabase(conn)
		}
		if err != nil {
			var sqlErr *wire.SQLError
			if !errors.As(err, &sqlErr) {
				conn.be.broke()
				ss.dropLease()
				ss.lostBackendState()
				return pins, errors.New("backend connection lost after DROP DATABASE")
			}
			db = ss.db
		}
		if db != ss.db {
			ss.dbChangedOn(conn, db)
		}
	}
	if res.Status&wire.StatusInTrans != 0 || res.Status&wire.StatusAutocommit == 0 {
		pins |= pinTxn
	} else {
		pins &^= pinTxn
	}
	pins &^= pinSet(ss.trackObjects(route))
	if res.Warnings > 0 || route.Kind == querypath.KindShowWarnings && ss.pins&pinWarnings != 0 {
		// Warnings stay readable until a statement other than SHOW
		// WARNINGS, SHOW ERRORS or GET DIAGNOSTICS runs.
		pins |= pinWarnings
	}
	pins |= pinSet(route.Pin)
	if !conn.tracked && route.NextTxn {
		pins |= pinNextTxn
	}
	if !conn.tracked && pins&pinTxn == 0 && (route.Kind == querypath.KindCommit || route.Kind == querypath.KindRollback) {
		pins &^= pinNextTxn
	}
	pins = pins&^end | add
	return pins, nil
}

// afterError is afterStatement's part for a statement that failed: what
// of a batch ran is unknown, and the transaction may have ended (an
// implicit commit) or begun (autocommit off) before the error.
func (ss *Session) afterError(conn *backendConn, route querypath.Route, res wire.Result, pins, add pinSet) (pinSet, error) {
	if res.Status != 0 {
		// A batch failed part way: the server's status is that of
		// the last result before the error (sql_mode's status bits
		// may have changed).
		ss.status = res.Status &^ wire.StatusMoreResults
	}
	// SHOW WARNINGS, SHOW ERRORS and GET DIAGNOSTICS right after an
	// error report it.
	pins |= pinWarnings
	if route.MultiStatement || res.HadResultSet {
		// A batch or a result failed part way: which of its session
		// changes ran is unknown, so the connection keeps them.
		pins |= pinSet(route.Pin)
		if len(route.Vars) > 0 || route.Database != "" {
			pins |= pinSet(querypath.PinUnreplayable)
		}
	}
	pins |= add
	// The statement may have committed the transaction before it
	// failed (DROP TABLE of a missing table does), or, with autocommit
	// off, opened one (a statement that opened a table): ask.
	mayEnd := route.ImplicitCommit && ss.status&wire.StatusInTrans != 0
	mayStart := ss.status&wire.StatusAutocommit == 0 && ss.status&wire.StatusInTrans == 0
	if (mayEnd || mayStart) && !conn.closed && !closesConnection(res.Err.Code) {
		in, readOnly, err := ss.inTransaction(conn)
		if err != nil {
			ss.log.Warn("backend connection lost", "backend", conn.addr, "error", err)
			conn.be.broke()
			ss.dropLease()
			ss.lostBackendState()
			return pins, errors.New("backend connection holding session state was lost")
		}
		if in {
			ss.status |= wire.StatusInTrans
			if readOnly {
				ss.status |= wire.StatusInTransReadonly
			}
			pins |= pinTxn
		} else {
			ss.status &^= wire.StatusInTrans | wire.StatusInTransReadonly
			pins &^= pinTxn
		}
	}
	return pins, nil
}

// afterInsertID keeps the session's LAST_INSERT_ID() after a statement on
// conn: from the OK packet where it says, else read back from conn before
// it goes (insertIDPending).
func (rs *replayState) afterInsertID(conn *backendConn, route querypath.Route, res wire.Result, ok bool) {
	switch {
	case !(res.OK.LastInsertID != 0 || route.MultiStatement ||
		route.Pin&querypath.PinLastResult != 0 && route.DML == querypath.DMLNone ||
		!ok && route.Kind == querypath.KindOther):
		// LAST_INSERT_ID() is as it was.
	case rs.insertIDSynced:
		// The statement may have changed LAST_INSERT_ID() (the OK
		// packet's id may also be an explicit value that did not): the
		// connection holds the session's value; read it back before the
		// connection goes.
		if res.OK.LastInsertID != 0 {
			rs.lastInsertID = res.OK.LastInsertID
		}
		rs.insertIDPending = true
		conn.insertIDKnown = false
	case ok && (route.DML == querypath.DMLUpdate || route.DML == querypath.DMLDelete):
		// Only LAST_INSERT_ID(expr) changes it here, and the OK packet
		// carries its value.
		rs.lastInsertID = res.OK.LastInsertID
		conn.lastInsertID, conn.insertIDKnown = rs.lastInsertID, true
		rs.insertIDSynced = true
	default:
		conn.insertIDKnown = false
	}
}

// causalReads reports whether the session's reads may go to replicas and
// must then see its own writes.
func (ss *Session) causalReads() bool {
	conf := ss.cluster.conf.Load()
	return bool(conf.CausalReads) && (ss.target == targetReplica || ss.target == targetDefault && bool(conf.ReplicaReads))
}

// lostBackendState forgets what lived on a backend connection that broke.
func (ss *Session) lostBackendState() {
	ss.setPins(0)
	ss.closeCursors()
	clear(ss.tempTables)
	clear(ss.sqlStmts)
}

// trackObjects follows the temporary tables and SQL-level prepared
// statements a successful statement created, renamed or dropped, and
// returns the pins it ends: a reason ends only with its last object.
func (ss *Session) trackObjects(route querypath.Route) querypath.Pin {
	for _, n := range route.CreatedTemp {
		ss.tempTables[ss.qualify(n)] = struct{}{}
	}
	for _, r := range route.Renames {
		if old := ss.qualify(r[0]); ss.hasTemp(old) {
			delete(ss.tempTables, old)
			ss.tempTables[ss.qualify(r[1])] = struct{}{}
		}
	}
	for _, n := range route.Dropped {
		delete(ss.tempTables, ss.qualify(n))
	}
	name := strings.ToLower(route.PrepareName)
	if route.Pin&querypath.PinPrepare != 0 {
		if name == "" {
			name = "\x00unnamed" // never deallocated by name: the pin stays
		}
		ss.sqlStmts[strings.Clone(name)] = struct{}{}
	} else if route.Unpin&querypath.PinPrepare != 0 && name != "" {
		delete(ss.sqlStmts, name)
	}
	unpin := route.Unpin
	if len(ss.tempTables) > 0 || route.Unpin&querypath.PinTempTable != 0 && len(route.Dropped) == 0 {
		unpin &^= querypath.PinTempTable
	}
	if len(ss.sqlStmts) > 0 || route.Unpin&querypath.PinPrepare != 0 && name == "" {
		unpin &^= querypath.PinPrepare
	}
	return unpin
}

// setPins changes the session's pin reasons, counting and logging the new
// ones.
func (ss *Session) setPins(p pinSet) {
	if added := p &^ ss.pins; added != 0 {
		ss.srv.pinStats.add(added)
		if added&(stickyPins|pinCursor) != 0 && !ss.everPinned {
			ss.everPinned = true
			ss.srv.pinStats.sticky.Add(1)
		}
		if ss.log.IsDebug() && added&^transientPins != 0 {
			ss.log.Debug("session pinned", "reasons", added.String())
		}
	}
	if ss.log.IsDebug() && ss.pins&^transientPins != 0 && p&^transientPins == 0 {
		ss.log.Debug("session unpinned", "was", ss.pins.String())
	}
	old := ss.pins
	ss.pins = p
	if txn := p&pinTxn != 0 || ss.txn.active; txn != ss.inTxn.Load() {
		ss.inTxn.Store(txn)
	}
	if sticky := p &^ transientPins; sticky != old&^transientPins {
		if sticky == 0 {
			ss.pinView.Store(nil)
		} else {
			v := &pinView{reasons: sticky.String()}
			if ss.lease != nil {
				v.backend = ss.lease.Conn().addr
			}
			ss.pinView.Store(v)
		}
	}
}

// pinView is what other goroutines (SHOW GATEWAY SESSIONS, the status
// page) see of a session's pins.
type pinView struct {
	reasons, backend string
}

// applySet records the session variables a successful SET changed. Values
// that are not literals are read back from the backend so they replay the
// same on any connection.
func (ss *Session) applySet(conn *backendConn, vars []querypath.SetVar) pinSet {
	var pins pinSet
	for _, v := range vars {
		if strings.HasPrefix(v.Name, "session_track_") {
			continue // the client's trackers are the gateway's business
		}
		value := strings.Clone(v.Value)
		if !v.Literal {
			// The read would replace what the SET left for FOUND_ROWS().
			_ = ss.captureDiag(conn)
			got, err := readVar(conn, v.Name)
			if err != nil {
				// Cannot replay it: keep the connection instead.
				pins |= pinSet(querypath.PinUnreplayable)
				continue
			}
			value = got
		}
		ss.vars[strings.Clone(v.Name)] = value
	}
	ss.varsChangedOn(conn)
	return pins
}

// readVar reads a session variable's value as an SQL literal.
func readVar(conn *backendConn, name string) (string, error) {
	var val []byte
	null := false
	err := conn.QueryRows("SELECT @@SESSION."+name, func(row [][]byte) {
		if len(row) == 1 {
			val, null = append([]byte(nil), row[0]...), row[0] == nil
		}
	})
	if err != nil {
		return "", err
	}
	if null {
		return "NULL", nil
	}
	return sqlLiteral(string(val))
}

// errNotReplayable is returned for values the gateway cannot quote safely.
var errNotReplayable = errors.New("value cannot be replayed")

// sqlLiteral renders a variable value for SET: numbers bare, everything else
// single-quoted. Values with a backslash are refused, because their quoting
// depends on NO_BACKSLASH_ESCAPES.
func sqlLiteral(v string) (string, error) {
	if v != "" && strings.Trim(v, "0123456789.-") == "" {
		return v, nil
	}
	if strings.ContainsRune(v, '\\') {
		return "", errNotReplayable
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'", nil
}

// releaseLease returns the session's connection to its pool, resetting it
// first when it carries state the gateway cannot see.
func (ss *Session) releaseLease() {
	l := ss.lease
	if l == nil {
		return
	}
	ss.lease = nil
	ss.giveShare()
	ss.insertIDSynced = false
	fate := ss.readBack(l.Conn())
	unleased(l)
	switch fate {
	case connReuse:
		if !ss.passLease(l) {
			l.Release()
		}
	case connRetire:
		l.Retire()
	default:
		l.Destroy()
	}
}

// connFate is what becomes of a connection its session lets go.
type connFate int8

const (
	// connReuse: back to the pool.
	connReuse connFate = iota
	// connRetire: closed at rest (COM_QUIT first): its server keeps state
	// no reset may clear.
	connRetire
	// connDestroy: closed as broken or in an unknown state.
	connDestroy
)

// readBack reads what the session still needs from conn before it gives
// it up, and makes it fit for the pool when it can: connReuse when it
// is.
func (ss *Session) readBack(conn *backendConn) connFate {
	if conn.closed {
		ss.insertIDPending, ss.gtidPending = false, false
		ss.diag.lost()
		return connDestroy
	}
	if err := ss.captureDiag(conn); err != nil {
		ss.insertIDPending, ss.gtidPending = false, false
		return connDestroy
	}
	if ss.insertIDPending {
		ss.insertIDPending = false
		if err := ss.readInsertID(conn); err != nil {
			var sqlErr *wire.SQLError
			if !errors.As(err, &sqlErr) {
				ss.gtidPending = false
				return connDestroy
			}
		}
	}
	if ss.gtidPending {
		ss.gtidPending = false
		if ss.leaseRole == rolePrimary {
			ss.noteWrite(conn)
		}
	}
	var err error
	switch {
	case conn.discard:
		// XA: closed, never reset (see querypath.PinXA).
		return connRetire
	case conn.dirty:
		err = conn.reset()
	default:
		err = conn.relaxTimeouts()
	}
	if err != nil {
		return connDestroy
	}
	return connReuse
}

// dropLease destroys the session's connection.
func (ss *Session) dropLease() {
	ss.insertIDPending, ss.insertIDSynced = false, false
	ss.diag.lost()
	if ss.gtidPending {
		// The write's GTID died with the connection: read from the
		// primary until the next write.
		ss.gtidPending = false
		ss.lastGTID, ss.gtidSeenOn = gtidUnknown, nil
	}
	if ss.lease != nil {
		unleased(ss.lease)
		ss.lease.Destroy()
		ss.lease = nil
		ss.giveShare()
	}
}

// end releases what the session holds when the client leaves. A
// connection with an open transaction or session state is reset (which
// rolls the transaction back) before anyone else gets it.
func (ss *Session) end() {
	if ss.cluster != nil {
		ss.guard.TxnEnded(ss.cluster.guards)
	}
	ss.gtidPending = false
	if ss.txn.xa && ss.lease != nil {
		ss.lease.Conn().discard = true // closed, not reset, with its XA branch
	}
	ss.endParked()
	if ss.lease == nil {
		return
	}
	if ss.pins&^transientPins != 0 {
		ss.lease.Conn().dirty = true
	}
	ss.diag.onConn = 0 // the session's diagnostics die with it: nothing to read back
	ss.releaseLease()
}

// forwardSimple forwards a command other than a query to a backend
// connection and relays its answer.
func (ss *Session) forwardSimple(p []byte, kind wire.ResponseKind) error {
	return ss.run(p, querypath.Route{Kind: querypath.KindOther}, kind)
}

// comInitDB changes the default database (COM_INIT_DB), checked by the
// backend.
func (ss *Session) comInitDB(p []byte) error {
	if db, t, ok := splitTarget(string(p[1:])); ok {
		return ss.useTarget(db, t)
	}
	route := querypath.Route{Kind: querypath.KindUse, Database: string(p[1:])}
	if ss.srv.dbs != nil {
		if handled, err := ss.routeClusters("", route); handled {
			return err
		}
	}
	return ss.run(p, route, wire.ResponseOK)
}

// comSetOption switches multi-statements on (0) or off (1). The backend
// connection follows at the next statement.
func (ss *Session) comSetOption(p []byte) error {
	if len(p) < 3 || p[1] > 1 || p[2] != 0 {
		return ss.writeErr(wire.NewError(mysqlserver.ErUnknownCom, "08S01", "Unknown COM_SET_OPTION value"))
	}
	ss.multiStmt = p[1] == 0
	ss.nextState()
	// MariaDB answers with an EOF packet (an OK packet with the EOF header
	// for CLIENT_DEPRECATE_EOF clients).
	var b [16]byte
	if err := ss.client.WritePacket(wire.AppendResultEnd(b[:0], ss.caps, 0, ss.status)); err != nil {
		return err
	}
	return ss.client.Flush()
}

// comResetConnection gives the client a fresh session on the same gateway
// connection: pins end (the backend connection is reset), variables return
// to their defaults, the default database stays.
func (ss *Session) comResetConnection() error {
	ss.letAllGo()
	ss.closeCursors()
	db, t := ss.db, ss.target
	ss.resetState()
	ss.db, ss.target = db, t
	ss.nextState()
	return ss.writeOK(wire.OK{Status: ss.status})
}

// poolKey is the pool the session's statements use on a backend: its
// user's backend account (the cluster's when the user sets none) and its
// CLIENT_FOUND_ROWS. A user whose account is the cluster's shares the
// cluster account's pools.
func (ss *Session) poolKey() poolKey {
	if k, ok := ss.accountKey(); ok {
		return k
	}
	k := poolKey{foundRows: ss.caps&wire.CapFoundRows != 0}
	if u := ss.user.BackendUser; u != "" {
		if conf := ss.cluster.conf.Load(); u != conf.BackendUser || ss.user.BackendPassword != conf.BackendPassword {
			k.user, k.password = u, ss.user.BackendPassword
		}
	}
	return k
}

// endHook is the relay's BeforeEnd for the statement being exchanged: what
// must be done before its answer reaches the client, since the client may
// start its next statement, or another session, the moment it has it. Nil
// for most statements. A SET GLOBAL is counted then (cluster.globals), so
// a session started after the client saw the OK never takes a pooled
// connection with the old defaults; the protections' answer-ended point
// runs then (hot rows given back when the transaction ends, the
// consolidation write count moved).
func (ss *Session) endHook(kind wire.ResponseKind) func(*wire.Result) {
	if !ss.guard.Ending(kind) && !ss.setsGlobal {
		return nil
	}
	if ss.atEnd == nil {
		ss.atEnd = ss.beforeEnd
	}
	return ss.atEnd
}

// beforeEnd is endHook's hook.
func (ss *Session) beforeEnd(res *wire.Result) {
	if ss.setsGlobal {
		ss.cluster.globals.Add(1)
	}
	if ss.cluster != nil {
		ss.guard.AnswerEnded(ss.cluster.guards, res)
	}
}
