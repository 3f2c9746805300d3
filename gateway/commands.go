package gateway

import (
	"errors"
	"math"
	"strings"
	"time"

	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// comChangeUser logs the client in again as another (or the same) user
// and gives it a fresh session. A refused login keeps the old session, as
// MariaDB does.
func (ss *Session) comChangeUser(p []byte) error {
	req, err := wire.ParseChangeUser(p, ss.caps)
	if err != nil {
		ss.writeErr(wire.NewError(mysqlserver.ErMalformedPacket, "08S01", "Malformed communication packet"))
		return err
	}
	plugin, answer := req.Plugin, req.Auth
	if ss.caps&wire.CapPluginAuth == 0 || plugin == "" {
		plugin = wire.NativePassword
	}
	if plugin != wire.NativePassword && plugin != wire.CachingSha2Password {
		plugin = wire.NativePassword
		if err := ss.client.WritePacket(wire.AppendAuthSwitch(nil, plugin, ss.salt)); err != nil {
			return err
		}
		if err := ss.client.Flush(); err != nil {
			return err
		}
		if answer, err = ss.client.ReadPacket(); err != nil {
			return err
		}
	}
	user, acct, refusal, err := ss.checkLogin(plugin, req.User, ss.salt, answer)
	if err != nil {
		return err
	}
	if refusal != nil {
		ss.authFailed(req.User)
		return ss.writeErr(refusal)
	}
	if e := ss.srv.admitUser(ss, user); e != nil {
		ss.log.Warn("change user refused: user connection limit", "user", user.User)
		ss.leaveLogin(acct)
		return ss.writeErr(e)
	}
	// A fresh session: the old one's connection is reset and released
	// (what its last statement left dies with it: nothing to read back).
	ss.letAllGo()
	ss.setPins(0)
	ss.closeCursors()
	ss.leaveAccount()
	ss.user, ss.account = user, acct
	ss.privs, ss.privsRead = accountPrivs{}, false
	ss.owner.Store(&user.User)
	ss.endParked()
	ss.cluster = ss.srv.clusters[user.Cluster]
	ss.home, ss.txnMode = ss.cluster, user.TransactionMode
	ss.replica = nil
	if req.Collation != 0 {
		ss.collation = req.Collation
	}
	ss.resetState()
	if req.DB != "" {
		if err := ss.connectDB(req.DB); err != nil {
			return ss.writeErr(toClientError(err))
		}
	}
	ss.accountPrivs() // read at login (auth.go)
	ss.log.Debug("changed user", "user", user.User, "db", ss.db)
	return ss.writeOK(wire.OK{Status: ss.status})
}

// resetState forgets everything the session set: variables, prepared
// statements, pins, last insert id. The database is left to the caller.
func (ss *Session) resetState() {
	ss.setPins(0)
	ss.lastInsertID, ss.insertIDPending = 0, false
	ss.diag.fresh()
	if ss.cluster != nil {
		ss.globals = ss.cluster.globals.Load()
	}
	ss.trackers = ss.defaultTrackers()
	ss.txnMode = ss.user.TransactionMode
	ss.txnState, ss.txnChars = "", ""
	ss.stmts, ss.stmtBytes, ss.cursors = map[uint32]*stmt{}, 0, 0
	ss.tempTables, ss.sqlStmts = map[string]struct{}{}, map[string]struct{}{}
	ss.vars = map[string]string{}
	ss.namesPending = ss.collation != wire.DefaultCollation
	ss.multiStmt = ss.caps&wire.CapMultiStatements != 0
	ss.status = wire.StatusAutocommit
	ss.db = ""
	ss.target, ss.replica = targetDefault, nil
	ss.lastGTID, ss.gtidSeenOn, ss.gtidPending = "", nil, false
	ss.nextState()
}

// accessDenied is MariaDB's error for a refused login.
func accessDenied(ss *Session, user string, withPassword bool) *wire.SQLError {
	using := "NO"
	if withPassword {
		using = "YES"
	}
	return wire.NewError(mysqlserver.ErAccessDenied, "28000", "Access denied for user '%s'@'%s' (using password: %s)", user, ss.clientHost(), using)
}

// comProcessKill is COM_PROCESS_KILL: KILL CONNECTION with a gateway id.
func (ss *Session) comProcessKill(p []byte) error {
	id, ok := wire.ParseProcessKill(p)
	if !ok {
		return ss.writeErr(wire.NewError(mysqlserver.ErMalformedPacket, "08S01", "Malformed communication packet"))
	}
	return ss.kill(uint64(id), false)
}

// kill ends another session (KILL [CONNECTION] id) or its running
// statement (KILL QUERY id). Ids are the gateway's connection ids, as
// clients got them in the handshake. A user may kill its own sessions;
// any session when it is an admin, or when its own backend account has
// SUPER or CONNECTION ADMIN, as MariaDB decides (privileges.go).
func (ss *Session) kill(id uint64, query bool) error {
	var target *Session
	if id <= math.MaxUint32 {
		target = ss.srv.session(uint32(id))
	}
	if target == nil {
		return ss.writeErr(wire.NewError(1094, "HY000", "Unknown thread id: %d", id))
	}
	if owner := target.owner.Load(); (owner == nil || *owner != ss.user.User) && !ss.killsAny() {
		return ss.writeErr(wire.NewError(erNotOwner, "HY000", "You are not owner of thread %d", id))
	}
	if target == ss {
		if query {
			// The KILL interrupts itself, as on MariaDB.
			return ss.writeErr(wire.NewError(1317, "70100", "Query execution was interrupted"))
		}
		ss.writeErr(wire.NewError(1927, "70100", "Connection was killed"))
		return errors.New("killed itself")
	}
	// KILL CONNECTION closes first, so the target's client gets no error
	// packet from the interrupted statement.
	var err error
	ss.blocking(offloadKill, func() { err = target.killStatement(!query) })
	if err != nil {
		return ss.writeErr(toClientError(err))
	}
	return ss.writeOK(wire.OK{Status: ss.status})
}

// killTarget is the connection id a KindKill route names.
func killTarget(ss *Session, route querypath.Route) uint64 {
	if route.KillSelf {
		return uint64(ss.id)
	}
	return route.KillID
}

// refuseKill answers a statement holding a KILL the gateway cannot run
// itself (querypath.Route.OtherKill): sent to the server, it would name the
// server's threads, which belong to other clients. handled is false for
// every other statement. sql is the statement's text; for an SQL PREPARE
// or EXECUTE IMMEDIATE of a user variable, the variable's text is read
// from the session's connection and classified too.
func (ss *Session) refuseKill(route querypath.Route) (handled bool, err error) {
	other := route.OtherKill
	if !other && route.DynamicVar != "" && ss.lease != nil {
		// The variable exists only on the session's connection (setting
		// it pinned the session); without a lease it is NULL.
		rerr := ss.captureDiag(ss.lease.Conn()) // the read would replace FOUND_ROWS()
		var v string
		if rerr == nil {
			v, rerr = readUserVar(ss.lease.Conn(), route.DynamicVar)
		}
		if rerr != nil {
			var sqlErr *wire.SQLError
			if !errors.As(rerr, &sqlErr) {
				conn := ss.lease.Conn()
				ss.dropLease()
				ss.lostBackendState()
				return true, ss.writeErr(toClientError(backendLost(conn.addr, rerr)))
			}
		}
		in := ss.srv.classifier.Classify(v)
		other = in.OtherKill || in.Kind == querypath.KindKill
	}
	if !other || ss.user.Admin {
		// An admin's KILL of another form reaches MariaDB as written:
		// its ids are backend thread ids there.
		return false, nil
	}
	ss.srv.metrics.statement(routeLocal, outcomeFailed, 0)
	// Every user of the gateway may share one backend account, which may
	// kill any of its threads: only the gateway's own KILL <id> is
	// checked, so every other form is a thread the user does not own.
	return true, ss.writeErr(wire.NewError(erNotOwner, "HY000",
		"You are not owner of thread 0: through the gateway, send KILL [CONNECTION|QUERY] <id> as a statement of its own with the id a number (the gateway's connection id: CONNECTION_ID() in the victim's session, SHOW PROCESSLIST) or CONNECTION_ID(); other KILL forms need admin: true in the gateway's users"))
}

// readUserVar reads user variable name on conn ("" when NULL).
func readUserVar(conn *backendConn, name string) (string, error) {
	var v string
	err := conn.QueryRows("SELECT @`"+strings.ReplaceAll(name, "`", "``")+"`", func(row [][]byte) {
		if len(row) == 1 && row[0] != nil {
			v = string(row[0])
		}
	})
	return v, err
}

// runLocal answers statements the gateway handles itself. handled is false
// for everything that goes to a backend.
func (ss *Session) runLocal(route querypath.Route) (handled bool, err error) {
	if route.Kind != querypath.KindKill && route.Kind != querypath.KindGatewayShow {
		return false, nil
	}
	start := ss.now
	if route.Kind == querypath.KindKill {
		// A KILL that succeeds leaves ROW_COUNT() at 0 (an error, written
		// with writeErr, leaves -1) and, using no table, the warnings.
		ss.diag.rowCount, ss.diag.onConn = 0, ss.diag.onConn&^diagRowCount
		err = ss.kill(killTarget(ss, route), route.KillQuery)
	} else if route.Table == "connection_id" {
		err = ss.answerConnectionID(route.Column)
	} else if route.Table == "processlist" || route.Table == "full processlist" {
		err = ss.showProcessList(route.Table == "full processlist")
	} else if !ss.user.Admin {
		// Every user's names and addresses, the backends and the backend
		// accounts: for the gateway's admins only.
		err = ss.writeErr(wire.NewError(erSpecificAccessDenied, "42000",
			"Access denied; you need (at least one of) the gateway admin privilege(s) for this operation: set admin: true for the user in the gateway's config"))
	} else {
		err = ss.showGateway(route.Table)
	}
	ss.srv.metrics.statement(routeLocal, outcomeOf(wire.Result{}, err), time.Since(start))
	return true, err
}
