package gateway

import (
	"errors"
	"unsafe"

	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Limits on prepared statements.
const (
	// maxSessionStmts bounds the statements one session keeps prepared.
	maxSessionStmts = 4096
	// maxSessionStmtBytes bounds the SQL text and long data one session
	// keeps for its prepared statements.
	maxSessionStmtBytes = 64 << 20
	// maxConnStmts bounds the statements prepared on one backend
	// connection; the least recently used is closed beyond it. A backend's
	// connections together hold at most its cluster's
	// max_backend_statements (makeStmtRoom).
	maxConnStmts = 128
)

// stmt is a statement a client prepared with COM_STMT_PREPARE. The gateway
// keeps its text and prepares it on whichever backend connection serves an
// execute, so a session with prepared statements stays multiplexed.
type stmt struct {
	sql string
	// digest is its fingerprint, made at its first execute (insight.go).
	digest stmtDigest
	// db is the session's database when the client prepared it: MariaDB
	// runs a prepared statement in that database, whatever USE came
	// after.
	db      string
	route   querypath.Route
	params  uint16
	columns uint16
	// types are the parameter types of the last execute that sent them;
	// they are resent on every execute, since the backend connection may
	// not have seen them.
	types []byte
	// longData holds COM_STMT_SEND_LONG_DATA chunks until the execute.
	longData []longData
	longSize int
	// tooLong records long data beyond the limit, reported at execute.
	tooLong bool
	// cursor is set while a cursor is open on the pinned connection.
	cursor bool
	// local is set for a statement the gateway runs itself (KILL): it is
	// prepared on no backend connection.
	local bool
	// gatewayTable is set for a statement that reads a table the gateway
	// answers (information_schema.PROCESSLIST, the connect attributes):
	// its text is rewritten with the sessions of the moment and prepared
	// again on every execute (freshGatewayStmt).
	gatewayTable bool
	// guard is what the protections keep of the statement, and exec
	// the parameters of the execute being admitted.
	guard protect.Prepared
	exec  execParams
}

type longData struct {
	param uint16
	data  []byte
}

// connStmtKey names a statement prepared on a backend connection: the same
// text means the same statement only under the same database and session
// variables.
type connStmtKey struct {
	state string
	sql   string
}

// preparedStmts are the session's binary-protocol prepared statements,
// by the ids the gateway gave them. A statement is prepared on a backend
// connection only when it runs there (see stmtKey).
type preparedStmts struct {
	stmts      map[uint32]*stmt
	nextStmtID uint32
	// stmtBytes is their text and long data in bytes; cursors counts
	// open cursors.
	stmtBytes int
	cursors   int
	execBuf   []byte
	// execCall is set while a prepared CALL executes.
	execCall bool
}

// connStmt is a statement prepared on a backend connection.
type connStmt struct {
	id      uint32
	lastUse uint64
}

// stmtKey names st on a backend connection: its text under the session
// variables and the database it was prepared in.
func (rs *replayState) stmtKey(st *stmt) connStmtKey {
	state := rs.stateKey()
	if st.db != rs.db {
		state = st.db + state[len(rs.db):]
	}
	return connStmtKey{state: state, sql: st.sql}
}

// backendStmt returns the id of st on conn, preparing it there first if
// needed and closing the least recently used statement beyond the limit.
// A statement prepared in another database than the session's current one
// is prepared there (COM_INIT_DB before and after), as MariaDB would have.
func (ss *Session) backendStmt(conn *backendConn, st *stmt) (uint32, error) {
	key := ss.stmtKey(st)
	conn.useClock++
	if cs, ok := conn.stmts[key]; ok {
		cs.lastUse = conn.useClock
		return cs.id, nil
	}
	return ss.prepareOn(conn, st, key, st.sql)
}

// freshGatewayStmt prepares st, a statement reading a table the gateway
// answers, on conn with the sessions of the moment in its text
// (querypath.RewriteGatewayIDs), replacing the copy an earlier execute
// left there: MariaDB reads the table when the statement executes. The
// copy stays remembered under st's key for COM_STMT_FETCH of a cursor.
func (ss *Session) freshGatewayStmt(conn *backendConn, st *stmt) (uint32, error) {
	key := ss.stmtKey(st)
	if cs, ok := conn.stmts[key]; ok {
		conn.forgetStmt(key)
		if err := conn.SendNoReply(wire.AppendStmtCommand(nil, wire.ComStmtClose, cs.id)); err != nil {
			return 0, err
		}
	}
	text, ok := querypath.RewriteGatewayIDs(st.sql, ss.status&wire.StatusNoBackslashEscapes != 0, ss.id, ss.gatewayTable)
	if !ok {
		text = st.sql
	}
	return ss.prepareOn(conn, st, key, text)
}

// prepareOn prepares text as st on conn and remembers it under key.
func (ss *Session) prepareOn(conn *backendConn, st *stmt, key connStmtKey, text string) (uint32, error) {
	if err := conn.makeStmtRoom(); err != nil {
		return 0, err
	}
	switchDB := st.db != conn.db && st.db != ""
	if switchDB {
		if _, err := conn.SimpleCommand(append([]byte{wire.ComInitDB}, st.db...)); err != nil {
			return 0, err
		}
	}
	id, _, _, err := conn.Prepare(text)
	if switchDB {
		if back := conn.db; back != "" && back != unknownDB {
			if _, berr := conn.SimpleCommand(append([]byte{wire.ComInitDB}, back...)); berr != nil && err == nil {
				err = berr
			}
		} else {
			// No database to go back to with COM_INIT_DB: the next
			// statement's sync sets the session's.
			conn.db, conn.syncedState = st.db, 0
		}
	}
	if err != nil {
		return 0, err
	}
	conn.rememberStmt(key, id)
	return id, nil
}

// makeStmtRoom closes the least recently used statement prepared on conn
// when conn holds maxConnStmts, or when its backend holds its cluster's
// max_backend_statements (the gateway's part of the server-wide
// max_prepared_stmt_count), before another is prepared there. A
// connection holding none prepares anyway: the budget is exceeded by at
// most one statement per connection.
func (conn *backendConn) makeStmtRoom() error {
	full := len(conn.stmts) >= maxConnStmts
	if conn.be != nil {
		if limit := conn.be.cluster.conf.Load().MaxBackendStatements; limit > 0 && conn.be.stmts.Load() >= int64(limit) {
			full = true
		}
	}
	if !full || len(conn.stmts) == 0 {
		return nil
	}
	var oldKey connStmtKey
	var oldest *connStmt
	for k, cs := range conn.stmts {
		if oldest == nil || cs.lastUse < oldest.lastUse {
			oldKey, oldest = k, cs
		}
	}
	conn.forgetStmt(oldKey)
	return conn.SendNoReply(wire.AppendStmtCommand(nil, wire.ComStmtClose, oldest.id))
}

// rememberStmt records that id is a statement prepared on conn under key.
func (conn *backendConn) rememberStmt(key connStmtKey, id uint32) {
	if conn.stmts == nil {
		conn.stmts = map[connStmtKey]*connStmt{}
	}
	conn.useClock++
	if prev, ok := conn.stmts[key]; ok && prev.id != id {
		// The same text prepared again on conn (a client's
		// COM_STMT_PREPARE always runs on the backend): the older copy
		// is closed, or every prepare would leave one on the server until
		// max_prepared_stmt_count refuses everyone (found by make soak).
		// A failed send leaves conn broken for its next command.
		_ = conn.SendNoReply(wire.AppendStmtCommand(nil, wire.ComStmtClose, prev.id))
	} else if !ok && conn.be != nil {
		conn.be.stmts.Add(1)
	}
	conn.stmts[key] = &connStmt{id: id, lastUse: conn.useClock}
}

// forgetStmt drops a statement from conn's books (it was closed).
func (conn *backendConn) forgetStmt(key connStmtKey) {
	if _, ok := conn.stmts[key]; ok {
		delete(conn.stmts, key)
		if conn.be != nil {
			conn.be.stmts.Add(-1)
		}
	}
}

// forgetStmts drops every statement from conn's books (the connection
// was reset or closed: the server closed them).
func (conn *backendConn) forgetStmts() {
	if conn.be != nil && len(conn.stmts) > 0 {
		conn.be.stmts.Add(-int64(len(conn.stmts)))
	}
	conn.stmts = nil
}

// comStmtPrepare prepares a statement on a backend connection, relays the
// answer with the gateway's statement id and remembers the statement.
func (ss *Session) comStmtPrepare(p []byte) error {
	if len(ss.stmts) >= maxSessionStmts {
		return ss.writeErr(wire.NewError(1461, "42000", "Can't create more than max_prepared_stmt_count statements (current value: %d): the gateway keeps at most %d per session; close statements you no longer use", maxSessionStmts, maxSessionStmts))
	}
	sql := string(p[1:])
	if ss.stmtBytes+len(sql) > maxSessionStmtBytes {
		return ss.writeErr(wire.NewError(1461, "42000", "Can't create more than max_prepared_stmt_count statements: this session's prepared statements already hold %d bytes; close statements you no longer use", ss.stmtBytes))
	}
	route := ss.srv.classifier.Classify(sql)
	switch {
	case route.Kind == querypath.KindKill:
		return ss.prepareLocal(sql, route)
	case route.OtherKill:
		_, err := ss.refuseKill(route)
		return err
	}
	gatewayTable := false
	if route.GatewayIDs {
		// CONNECTION_ID() is the session's for the statement's life. A
		// read of a table the gateway answers is prepared with the
		// sessions of now (the metadata) and again on every execute
		// (freshGatewayStmt).
		out, ok := querypath.RewriteGatewayIDs(sql, ss.status&wire.StatusNoBackslashEscapes != 0, ss.id,
			func(t querypath.GatewayTable) string { gatewayTable = true; return ss.gatewayTable(t) })
		if ok {
			p = append([]byte{wire.ComStmtPrepare}, out...)
			if !gatewayTable {
				sql = out
			}
		} else {
			gatewayTable = false
		}
	}
	if ss.srv.dbs != nil && !ss.txn.active {
		// Prepared on the cluster of its tables (in a transaction, on the
		// one it runs on: the transaction's clusters stay as they are).
		if c, e := ss.statementCluster(ss.srv.dbs, sql, ss.db); e != nil {
			return ss.writeErr(e)
		} else if c != ss.cluster {
			if e := ss.moveTo(c, false); e != nil {
				return ss.writeErr(e)
			}
		}
	}
	if or, _ := ss.routeOwner(ss.db, route); or == ownerStream || or == ownerForward && route.Kind == querypath.KindSequence {
		return ss.prepareOwner(sql, route, p)
	}
	// Prepared where the statement will run: a read may be prepared on a
	// replica (the metadata is the same).
	held := ss.heldState()
	conn, err := ss.backend(route, "", false)
	if err != nil {
		if lost, err := ss.stateLostBefore(held, nil, err); lost {
			return err
		}
		return ss.writeErr(toClientError(err))
	}
	id := ss.nextStmtID + 1
	ss.relay.StmtID = id
	res, err := ss.exchange(conn, p, wire.ResponsePrepare)
	ss.relay.StmtID = 0
	if err != nil {
		return ss.statementFailed(conn, res, err)
	}
	if res.Err == nil {
		ss.nextStmtID = id
		if len(route.Vars) > 0 {
			// Values may be parameters: read them back after each execute.
			vars := make([]querypath.SetVar, len(route.Vars))
			for i, v := range route.Vars {
				v.Literal = false
				vars[i] = v
			}
			route.Vars = vars
		}
		ss.stmts[id] = &stmt{sql: sql, db: ss.db, route: route, params: res.Params, columns: res.Columns, gatewayTable: gatewayTable}
		ss.stmtBytes += len(sql)
		if err := conn.makeStmtRoom(); err != nil {
			return ss.statementFailed(conn, wire.Result{}, err)
		}
		conn.rememberStmt(connStmtKey{state: ss.stateKey(), sql: sql}, res.StmtID)
	}
	ss.diag.afterPrepare(sql, res)
	ss.finishCommand()
	return nil
}

// finishCommand releases the connection after a command that changes no
// session state, unless the session is pinned.
func (ss *Session) finishCommand() {
	if ss.pins&^transientPins == 0 {
		ss.setPins(0)
		ss.releaseLease()
	}
}

// statementFailed handles a broken client or backend connection during a
// command that is never retried; res is what the relay got through.
func (ss *Session) statementFailed(conn *backendConn, res wire.Result, err error) error {
	var ce *wire.ClientError
	if errors.As(err, &ce) || ss.cut.Load() {
		// The client is gone, or the gateway cut the session (KILL,
		// forced shutdown) and closed the backend connection itself.
		ss.dropLease()
		ss.lostBackendState()
		return err
	}
	lostState := ss.pins&^transientPins != 0
	ss.backendBroke(conn, err)
	return ss.tellLost(conn, res, err, lostState)
}

// lookupStmt finds the client's statement id in p[1:5].
func (ps *preparedStmts) lookupStmt(p []byte, cmdName string) (*stmt, uint32, *wire.SQLError) {
	id, ok := wire.StmtCommandID(p)
	if !ok {
		return nil, 0, wire.NewError(mysqlserver.ErMalformedPacket, "08S01", "Malformed communication packet")
	}
	st := ps.stmts[id]
	if st == nil {
		return nil, id, wire.NewError(1243, "HY000", "Unknown prepared statement handler (%d) given to %s", id, cmdName)
	}
	return st, id, nil
}

// comStmtExecute runs a prepared statement on any backend connection,
// preparing it there when needed.
func (ss *Session) comStmtExecute(p []byte) error {
	st, _, sqlErr := ss.lookupStmt(p, "mysqld_stmt_execute")
	if sqlErr != nil {
		return ss.writeErr(sqlErr)
	}
	if st.local {
		_, err := ss.runLocal(st.route)
		return err
	}
	// Query insight (insight.go): the cached fingerprint, then the query rules.
	if handled, err := ss.digestAndMatch(st.sql, &st.digest); handled {
		st.resetLongData(ss)
		return err
	}
	if len(p) < 10 {
		return ss.writeErr(wire.NewError(mysqlserver.ErMalformedPacket, "08S01", "Malformed communication packet"))
	}
	if st.tooLong {
		st.resetLongData(ss)
		return ss.writeErr(wire.NewError(mysqlserver.ErNetPacketTooLarge, "08S01", "Parameter data sent with COM_STMT_SEND_LONG_DATA is larger than max_allowed_packet (%d)", ss.srv.cfg.MaxAllowedPacket))
	}
	flags := wire.ExecuteFlags(p)
	p, ok := ss.withParamTypes(st, p)
	if !ok {
		return ss.writeErr(wire.NewError(mysqlserver.ErMalformedPacket, "08S01", "Malformed communication packet"))
	}
	if ss.srv.dbs != nil && !st.route.ReadsLastResult {
		if e := ss.placeStatement(st.sql, st.db, st.route); e != nil {
			st.resetLongData(ss)
			return ss.writeErr(e)
		}
	}
	if or, _ := ss.routeOwner(st.db, st.route); or != ownerNone {
		return ss.executeOwner(st, p, flags)
	}
	// Prepared reads are not consolidated; their writes count
	// (protect.Consolidation).
	if e := ss.admit(st.sql, st.route, st, p); e != nil {
		st.resetLongData(ss)
		return ss.writeErr(e)
	}
	if st.route.ImplicitCommit {
		defer ss.accountChange(st.sql)()
		if changesGrants(st.sql) { // as comQuery
			ss.srv.privs.forget()
			defer ss.grantsChanged()
		}
	}
	return ss.executeBackend(st, p, flags)
}

// withParamTypes remembers the parameter types of execute packet p when
// the client sends them, and puts the remembered ones into p when it
// does not: they are sent on every execute, since the backend connection
// may not have seen them. ok is false for a packet too short.
func (ss *Session) withParamTypes(st *stmt, p []byte) (_ []byte, ok bool) {
	n := int(st.params)
	if n == 0 {
		return p, true
	}
	nb := (n + 7) / 8
	if len(p) < 10+nb+1 {
		return p, false
	}
	if p[10+nb] == 1 {
		if len(p) < 11+nb+2*n {
			return p, false
		}
		st.types = append(st.types[:0], p[11+nb:11+nb+2*n]...)
	} else if st.types != nil {
		q := append(ss.execBuf[:0], p[:10+nb]...)
		q = append(q, 1)
		q = append(q, st.types...)
		q = append(q, p[11+nb:]...)
		ss.execBuf = q
		p = q
	}
	return p, true
}

// executeBackend runs the prepared statement st (execute packet p, with
// its cursor flags) on a backend connection, preparing it there when
// needed.
func (ss *Session) executeBackend(st *stmt, p []byte, flags byte) error {
	route := st.route
	if flags&0x0f != 0 {
		route.Kind = querypath.KindOther // a cursor pins: not on a replica
	}
	sp := startStatement(ss.now)
	defer ss.endStatement(&sp) // metrics, and the digest (insight.go)
	sql := unsafe.Slice(unsafe.StringData(st.sql), len(st.sql))
	var rt retry
	defer func() { ss.execCall = false }()
	for {
		pinned, held := ss.lease != nil, ss.heldState()
		retryable := ss.retryable(&rt)
		// Set before prepareStatement: a prepared CALL gets the diag
		// marker even when the session's warning list is empty.
		ss.execCall = isCall(sql)
		ss.choosing(p[0], route, rt.attempt == 0)
		conn, err := ss.backend(route, rt.avoid, false)
		ss.guard.Chose()
		if err == nil {
			err = ss.prepareStatement(conn, route, sql, pinned)
		}
		if err != nil {
			// The statement did not run: its long data goes with it, as
			// with any execute the client is told failed.
			st.resetLongData(ss)
			if lost, err := ss.stateLostBefore(held, &sp, err); lost {
				return err
			}
			return ss.noConnection(&rt, &sp, err)
		}
		var bid uint32
		if st.gatewayTable {
			bid, err = ss.freshGatewayStmt(conn, st)
		} else {
			bid, err = ss.backendStmt(conn, st)
		}
		if err == nil {
			err = st.sendLongData(conn, bid)
		}
		if err != nil {
			var e *wire.SQLError
			if errors.As(err, &e) {
				sp.failed(e)
				ss.finishCommand()
				st.resetLongData(ss)
				return ss.writeErr(e)
			}
			if !pinned && rt.attempt == 0 && !ss.srv.closing() {
				// The statement could not be prepared there: nothing
				// ran, another connection serves.
				ss.dropLease()
				rt.again(retryNotSent)
				continue
			}
			return ss.statementFailed(conn, wire.Result{}, &wire.BackendError{Err: err})
		}
		wire.SetStmtCommandID(p, bid)
		ss.relay.HoldReadOnly = retryable && ss.leaseRole == rolePrimary
		// MariaDB opens no cursor for a CALL: the cursor-exists bit on its
		// results is the procedure's own cursor's.
		ss.relay.Cursor = flags&0x0f != 0 && !ss.execCall
		ss.setsGlobal = route.SetsGlobal
		res, err := ss.exchange(conn, p, wire.ResponseQuery)
		ss.relay.HoldReadOnly, ss.relay.Cursor, ss.execCall, ss.setsGlobal = false, false, false, false
		sp.served(ss.leaseRole, res, err)
		out, err := ss.afterTry(&rt, conn, pinned, retryable, route, res, err, false)
		if out == tryAgain {
			continue // the long data is sent again
		}
		st.resetLongData(ss)
		if out == tryOver {
			return err
		}
		if res.CursorOpened {
			st.cursor = true
			ss.cursors++
			ss.setPins(ss.pins | pinCursor)
		}
		return ss.afterStatement(conn, route, res, sql)
	}
}

// prepareLocal answers COM_STMT_PREPARE of a statement the gateway runs
// itself (a KILL): no parameters, no columns, no backend connection. Its
// execute goes through the same id translation and ownership check as the
// text statement.
func (ss *Session) prepareLocal(sql string, route querypath.Route) error {
	id := ss.nextStmtID + 1
	ss.nextStmtID = id
	ss.stmts[id] = &stmt{sql: sql, db: ss.db, route: route, local: true}
	ss.stmtBytes += len(sql)
	var b [12]byte
	if err := ss.client.WritePacket(wire.AppendPrepareOK(b[:0], id, 0, 0, 0)); err != nil {
		return err
	}
	return ss.client.Flush()
}

// sendLongData replays the statement's pending long data on conn.
func (st *stmt) sendLongData(conn *backendConn, bid uint32) error {
	for _, ld := range st.longData {
		if err := conn.SendNoReply(wire.AppendSendLongData(nil, bid, ld.param, ld.data)); err != nil {
			return err
		}
	}
	return nil
}

// resetLongData forgets the statement's pending long data.
func (st *stmt) resetLongData(ss *Session) {
	ss.stmtBytes -= st.longSize
	st.longData, st.longSize, st.tooLong = nil, 0, false
}

// comStmtSendLongData keeps a chunk of parameter data for the next execute.
// The command has no answer.
func (ss *Session) comStmtSendLongData(p []byte) error {
	st, _, sqlErr := ss.lookupStmt(p, "mysqld_stmt_send_long_data")
	_, param, data, ok := wire.ParseSendLongData(p)
	if sqlErr != nil || !ok {
		return nil // MariaDB reports nothing either; the execute will fail
	}
	if st.longSize+len(data) > ss.srv.cfg.MaxAllowedPacket || ss.stmtBytes+len(data) > maxSessionStmtBytes {
		st.tooLong = true
		return nil
	}
	st.longData = append(st.longData, longData{param: param, data: append([]byte(nil), data...)})
	st.longSize += len(data)
	ss.stmtBytes += len(data)
	return nil
}

// comStmtClose forgets a statement. The backend connections keep their
// prepared copies for other sessions (bounded per connection). No answer.
func (ss *Session) comStmtClose(p []byte) error {
	st, id, sqlErr := ss.lookupStmt(p, "mysqld_stmt_close")
	if sqlErr != nil {
		return nil
	}
	var err error
	if st.cursor {
		err = ss.closeCursor(st)
	}
	st.resetLongData(ss)
	ss.stmtBytes -= len(st.sql)
	delete(ss.stmts, id)
	return err // no answer to carry it: the session ends
}

// comStmtReset drops a statement's long data and closes its cursor.
func (ss *Session) comStmtReset(p []byte) error {
	st, _, sqlErr := ss.lookupStmt(p, "mysqld_stmt_reset")
	if sqlErr != nil {
		return ss.writeErr(sqlErr)
	}
	st.resetLongData(ss)
	if st.cursor {
		if err := ss.closeCursor(st); err != nil {
			if werr := ss.writeErr(toClientError(err)); werr != nil {
				return werr
			}
			return err
		}
	}
	return ss.writeOK(wire.OK{Status: ss.status})
}

// closeCursor closes a statement's open cursor on the pinned connection
// (COM_STMT_RESET there) and unpins when it was the last. When that
// connection breaks it is dropped; if it held more of the session's state
// than this cursor (a transaction, variables, other cursors), that state
// is gone and closeCursor returns the failure: the session must end, as
// MariaDB ends a session whose connection it lost.
func (ss *Session) closeCursor(st *stmt) error {
	st.cursor = false
	ss.cursors--
	if ss.lease != nil {
		conn := ss.lease.Conn()
		if cs, ok := conn.stmts[ss.stmtKey(st)]; ok {
			if _, err := conn.SimpleCommand(wire.AppendStmtCommand(nil, wire.ComStmtReset, cs.id)); err != nil {
				var e *wire.SQLError
				if !errors.As(err, &e) {
					held := ss.cursors > 0 || ss.pins&^(pinCursor|transientPins) != 0
					ss.dropLease()
					ss.lostBackendState()
					if held {
						return backendLost(conn.addr, err)
					}
					return nil
				}
			}
		}
	}
	if ss.cursors == 0 {
		ss.setPins(ss.pins &^ pinCursor)
		if ss.pins == 0 {
			ss.releaseLease()
		}
	}
	return nil
}

// closeCursors forgets every open cursor (their connection is gone).
func (ps *preparedStmts) closeCursors() {
	for _, st := range ps.stmts {
		st.cursor = false
	}
	ps.cursors = 0
}

// errNoOpenCursor is MariaDB's answer to COM_STMT_FETCH of a statement
// without an open cursor (ER_STMT_HAS_NO_OPEN_CURSOR, its text exactly).
func errNoOpenCursor(id uint32) *wire.SQLError {
	return wire.NewError(1421, "HY000", "The statement (%d) has no open cursor", id)
}

// comStmtFetch reads rows of an open cursor on the pinned connection.
func (ss *Session) comStmtFetch(p []byte) error {
	st, id, sqlErr := ss.lookupStmt(p, "mysqld_stmt_fetch")
	if sqlErr != nil {
		return ss.writeErr(sqlErr)
	}
	if !st.cursor || ss.lease == nil {
		return ss.writeErr(errNoOpenCursor(id))
	}
	conn := ss.lease.Conn()
	cs, ok := conn.stmts[ss.stmtKey(st)]
	if !ok {
		return ss.writeErr(errNoOpenCursor(id))
	}
	wire.SetStmtCommandID(p, cs.id)
	res, err := ss.exchange(conn, p, wire.ResponseFetch)
	if err != nil {
		return ss.statementFailed(conn, res, err)
	}
	if res.Err != nil || res.Status&wire.StatusLastRowSent != 0 {
		st.cursor = false
		ss.cursors--
		if ss.cursors == 0 {
			ss.setPins(ss.pins &^ pinCursor)
		}
	}
	if ss.pins == 0 {
		ss.releaseLease()
	}
	return nil
}
