package gateway

import (
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Prepared statements for the owner. The owner speaks only the text
// protocol for statements (it describes them to COM_STMT_PREPARE and keeps
// nothing), so the gateway runs a prepared owner statement as the text
// statement the client would have sent: at each execute the parameters
// are written into the text as literals (bindStmt), the text goes the
// text path (the same grant checks, owner forwarding, auto_increment
// fill and errors), and the rows of the answer reach the client in the
// binary format (wire.Relay.BinaryRows). Binding at the gateway keeps the
// owner stateless and needs no per-connection statement bookkeeping
// between gateway and owner, and the auto_increment fill, which runs on
// the primary, needs the values in the text anyway.

// prepareOwner answers COM_STMT_PREPARE p of a statement MariaDB cannot
// prepare (SELECT NEXT ... VALUES FROM, STREAM) with the owner's
// description of it (parameters, result columns) under an id of the
// gateway's, after the grant checks of its execution.
func (ss *Session) prepareOwner(sql string, route querypath.Route, p []byte) error {
	if ss.cluster.fwd == nil {
		return ss.writeErr(ss.noOwner())
	}
	var err error
	ss.blocking(offloadOwner, func() { err = ss.prepareOwnerNow(sql, route, p) })
	return err
}

// prepareOwnerNow is prepareOwner's work, which runs through blocking
// (see runOwner).
func (ss *Session) prepareOwnerNow(sql string, route querypath.Route, p []byte) error {
	if handled, err := ss.checkOwnerGrants(ss.db, route, sql); handled {
		return err
	}
	id := ss.nextStmtID + 1
	ss.relay.StmtID = id
	res, err := ss.forwardOwner(ss.db, p, wire.ResponsePrepare)
	ss.relay.StmtID = 0
	if err != nil || res.Err != nil || res.Packets == 0 {
		return err // the client has the owner's error, or the gateway's
	}
	ss.nextStmtID = id
	ss.stmts[id] = &stmt{sql: sql, db: ss.db, route: route, params: res.Params, columns: res.Columns}
	ss.stmtBytes += len(sql)
	return nil
}

// executeOwner runs the prepared statement st, whose route needs the
// owner, as its text with the parameters of execute packet p written in.
// Cursor flags are not followed: the rows come with the answer, as
// MariaDB sends them for a statement that opens no cursor. A statement
// that, written out, is not one for the owner after all (SELECT NEXT
// NULL VALUES), or an auto_increment INSERT with nothing to fill, runs
// as prepared on a backend connection.
func (ss *Session) executeOwner(st *stmt, p []byte, flags byte) error {
	sql, sqlErr := ss.bindStmt(st, p)
	if sqlErr != nil {
		st.resetLongData(ss)
		return ss.writeErr(sqlErr)
	}
	asPrepared := func() error {
		ss.relay.BinaryRows = false
		return ss.executeBackend(st, p, flags)
	}
	route := ss.srv.classifier.Classify(sql)
	or, ai := ss.routeOwner(st.db, route)
	if or == ownerNone {
		return asPrepared()
	}
	ss.relay.BinaryRows = true
	err := ss.runOwner(st.db, sql, append([]byte{wire.ComQuery}, sql...), route, or, ai, asPrepared)
	ss.relay.BinaryRows = false
	st.resetLongData(ss)
	return err
}
