package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// The owner runs sequence and message statements with the cluster's
// account. A user with a backend account of its own (users[].backend_user)
// must not gain that account's privileges through it: before such a
// statement is forwarded, the gateway prepares (COM_STMT_PREPARE, never
// executed) a statement with the same access to the same table on a
// connection logged in as the user's account; MariaDB checks privileges at
// prepare. A refusal reaches the client unchanged (1142). Results are
// remembered for grantTTL per account and table.

// grantTTL is how long a privilege check's result is reused.
const grantTTL = 10 * time.Second

// maxGrantEntries bounds the remembered checks (the map is emptied when
// full).
const maxGrantEntries = 10000

// grantKey is one remembered check.
type grantKey struct{ account, probe string }

// grantCache remembers privilege checks that passed.
type grantCache struct {
	mu sync.Mutex
	ok map[grantKey]time.Time
}

func (c *grantCache) passed(k grantKey, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.ok[k]
	return ok && now.Sub(t) < grantTTL
}

func (c *grantCache) remember(k grantKey, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok == nil || len(c.ok) >= maxGrantEntries {
		c.ok = map[grantKey]time.Time{}
	}
	c.ok[k] = now
}

// quoteTable quotes a table name (db.t, either part possibly quoted) for
// a probe.
func quoteTable(name string) string {
	parts := strings.SplitN(name, ".", 2)
	for i, p := range parts {
		p = strings.Trim(p, "`")
		parts[i] = "`" + strings.ReplaceAll(p, "`", "``") + "`"
	}
	return strings.Join(parts, ".")
}

// ownerProbes are the statements whose preparation proves that the user
// may do what route, forwarded to the owner, does to its table.
func ownerProbes(route querypath.Route, table string) []string {
	t := quoteTable(table)
	sel := "SELECT 1 FROM " + t
	switch {
	case route.Kind == querypath.KindSequence:
		// The owner reads and advances next_id.
		return []string{sel, "UPDATE " + t + " SET next_id = next_id"}
	case route.Kind == querypath.KindStream:
		// Delivery reads messages and updates their schedule.
		return []string{sel, "UPDATE " + t + " SET time_next = time_next"}
	case route.DML == querypath.DMLInsert:
		return []string{"INSERT INTO " + t + " (id) VALUES (1)"}
	case route.DML == querypath.DMLUpdate:
		return []string{"UPDATE " + t + " SET time_acked = time_acked"}
	}
	return nil
}

// checkOwnerGrants answers, when the session's user may not do what the
// owner statement route (of sql, run in database db) does, with the
// backend's refusal, and reports handled. Users on the cluster's account
// are the owner's account already: nothing to check. A message INSERT or
// UPDATE that reads other tables (INSERT ... SELECT, a subquery) is
// refused: the owner would read them with its account.
func (ss *Session) checkOwnerGrants(db string, route querypath.Route, sql string) (handled bool, err error) {
	if route.Kind != querypath.KindSequence && route.Kind != querypath.KindStream &&
		querypath.ReadsOtherTables(sql, ss.status&wire.StatusNoBackslashEscapes != 0) {
		return true, ss.writeErr(wire.NewError(mysqlserver.ErNotSupportedYet, "42000",
			"This version of the gateway doesn't yet support INSERT ... SELECT or subqueries into a message table: the owner runs them; insert the values themselves"))
	}
	if ss.user.BackendUser == "" || route.Table == "" || db == "" && !strings.Contains(route.Table, ".") {
		// The cluster's account, or no database to name the table in
		// (the owner answers 1046 No database selected).
		return false, nil
	}
	table := ownerName(db, route.Table)
	now := time.Now()
	var todo []string
	for _, probe := range ownerProbes(route, table) {
		if !ss.srv.grants.passed(grantKey{ss.user.BackendUser, probe}, now) {
			todo = append(todo, probe)
		}
	}
	if len(todo) == 0 {
		return false, nil
	}
	if ss.lease != nil && ss.leaseRole == rolePrimary {
		// The session holds a connection of its account (its pool may
		// have no other): probe there, after keeping what its last
		// statement left (a prepare would replace the warnings).
		conn := ss.lease.Conn()
		if err := ss.captureDiag(conn); err != nil {
			ss.backendBroke(conn, err)
			return true, ss.writeErr(toClientError(backendLost(conn.addr, err)))
		}
		err := ss.runGrantProbes(conn, todo, now)
		var sqlErr *wire.SQLError
		switch {
		case errors.As(err, &sqlErr):
			ss.log.Info("owner statement refused: the user's account lacks the privilege", "user", ss.user.User, "table", table)
			return true, ss.writeErr(sqlErr)
		case err != nil:
			ss.backendBroke(conn, err)
			return true, ss.writeErr(toClientError(backendLost(conn.addr, err)))
		}
		return false, nil
	}
	be, err := ss.primaryBackend(ss.srv.health.Snapshot(), ss.cluster.conf.Load(), "", false)
	if err != nil {
		return true, ss.writeErr(toClientError(err))
	}
	k := ss.poolKey()
	k.foundRows = false
	pool, err := be.poolFor(k)
	if err != nil {
		return true, ss.writeErr(toClientError(err))
	}
	ctx, cancel := context.WithTimeout(ss.statementContext(), be.cluster.conf.Load().Pool.AcquireTimeout)
	l, err := pool.Acquire(ctx)
	cancel()
	if err != nil {
		return true, ss.writeErr(toClientError(err))
	}
	err = ss.runGrantProbes(l.Conn(), todo, now)
	var sqlErr *wire.SQLError
	if errors.As(err, &sqlErr) {
		l.Release()
		ss.log.Info("owner statement refused: the user's account lacks the privilege", "user", ss.user.User, "table", table)
		return true, ss.writeErr(sqlErr)
	}
	if endLease(l, err) {
		return true, ss.writeErr(toClientError(backendLost(be.addr, err)))
	}
	return false, nil
}

// runGrantProbes prepares and closes each probe on conn, remembering those
// that passed; the first refusal (a *wire.SQLError) or failure ends it.
func (ss *Session) runGrantProbes(conn *backendConn, probes []string, now time.Time) error {
	for _, probe := range probes {
		id, _, _, err := conn.Prepare(probe)
		if err == nil {
			err = conn.SendNoReply(wire.AppendStmtCommand(nil, wire.ComStmtClose, id))
		}
		if err != nil {
			return err
		}
		ss.srv.grants.remember(grantKey{ss.user.BackendUser, probe}, now)
	}
	return nil
}
