package gateway

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/wire"
)

// KILL QUERY reaches only the statement it is meant for. A session's
// statement runs on a pooled backend connection; the kill names that
// connection's thread. Two things could make it hit another statement:
//
//   - the victim's statement ends and its connection serves another
//     session before the kill arrives. The victim cannot let the
//     connection go while a kill of its statement is being sent: both
//     take the session's killMu (endInFlight, killStatement);
//   - the kill waits for a pooled connection of its own, behind the very
//     statements it should stop. It goes on a connection set aside for
//     kills instead, one per backend and account, dialed on first use.

// killTimeout bounds sending one KILL QUERY, dial included, and any other
// exchange on a side connection (sideConn).
const killTimeout = 2 * time.Second

// killer is the connection a backend keeps for one account beside its
// pools: for KILL QUERY, and for the gateway's own reads that must not
// wait behind the pool (the backend threads' states in the process list,
// the account's grants).
type killer struct {
	mu   sync.Mutex
	conn *backendConn
}

// sideConn runs fn on the backend's side connection for account k (the
// pool key without CLIENT_FOUND_ROWS), dialed on first use. fn runs under
// the connection's lock with killTimeout as its deadline; when the
// connection broke (an idle timeout, a restart) before it answered, fn
// runs once more on a new one. fn must return the exchange's error as it
// got it: a *wire.SQLError is the server's answer, not a broken
// connection.
func (be *backend) sideConn(k poolKey, fn func(*backendConn) error) error {
	k.foundRows = false
	be.mu.Lock()
	if be.closed {
		be.mu.Unlock()
		return errors.New("backend removed")
	}
	if be.killers == nil {
		be.killers = map[poolKey]*killer{}
	}
	kl := be.killers[k]
	if kl == nil {
		kl = &killer{}
		be.killers[k] = kl
	}
	be.mu.Unlock()

	kl.mu.Lock()
	defer kl.mu.Unlock()
	var err error
	for try := 0; try < 2; try++ {
		if kl.conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
			dial := be.cluster.dial
			if be.cluster.dialKill != nil {
				dial = be.cluster.dialKill
			}
			kl.conn, err = dial(ctx, be, k)
			cancel()
			if err != nil {
				kl.conn = nil
				return err
			}
		}
		_ = kl.conn.NetConn().SetDeadline(time.Now().Add(killTimeout))
		err = fn(kl.conn)
		_ = kl.conn.NetConn().SetDeadline(time.Time{})
		var sqlErr *wire.SQLError
		if err == nil || errors.As(err, &sqlErr) {
			return err
		}
		_ = kl.conn.Close()
		kl.conn = nil
	}
	return err
}

// killQuery stops the statement running on bc with KILL QUERY on the
// backend's side connection for bc's account. A statement that has just
// finished (1094) is not an error.
func (be *backend) killQuery(bc *backendConn) error {
	kill := "KILL QUERY " + strconv.FormatUint(uint64(bc.Greeting.ConnectionID), 10)
	err := be.sideConn(bc.key, func(conn *backendConn) error {
		_, err := conn.Exec(kill)
		return err
	})
	var sqlErr *wire.SQLError
	if errors.As(err, &sqlErr) && sqlErr.Code == 1094 { // the statement just finished
		return nil
	}
	return err
}

// closeKillers closes the backend's kill connections; the caller holds
// be.mu.
func (be *backend) closeKillers() {
	for _, kl := range be.killers {
		kl.mu.Lock()
		if kl.conn != nil {
			_ = kl.conn.Quit() // between KILLs: at rest
			kl.conn = nil
		}
		kl.mu.Unlock()
	}
	be.killers = nil
}

// beginInFlight publishes conn as the connection running the session's
// statement, for KILL QUERY and a forced close.
func (sv *sessionView) beginInFlight(conn *backendConn) { sv.inFlight.Store(conn) }

// endInFlight ends the statement's publication. It waits for a kill of
// the statement being sent (killStatement), so that the connection, which
// may go back to the pool next, is not killed under another statement.
func (sv *sessionView) endInFlight() {
	sv.killMu.Lock()
	sv.inFlight.Store(nil)
	sv.killMu.Unlock()
}

// killStatement stops the statement the session runs on a backend, if any
// (KILL QUERY, another session's or the client watch's); with closeFirst
// it cuts the session too (KILL CONNECTION, a client that went away),
// after taking note of the statement's connection, which the cut makes
// the session let go. Safe for use by other goroutines.
func (ss *Session) killStatement(closeFirst bool) error {
	ss.killMu.Lock()
	defer ss.killMu.Unlock()
	ss.stmtWaits.killed.Store(true)
	if ss.stmtWaits.cancel != nil {
		ss.stmtWaits.cancel(errQueryKilled)
	}
	bc := ss.inFlight.Load()
	if closeFirst {
		ss.ForceClose()
	}
	if pk := ss.pipeKill.Load(); pk != nil {
		return pk.kill()
	}
	if bc == nil || bc.be == nil {
		return nil
	}
	return bc.be.killQuery(bc)
}

// A statement may wait at the gateway before it reaches a backend: for a
// pooled connection, a primary, its user's pool share, a hot row. KILL
// QUERY ends those waits as MariaDB ends a statement waiting for a lock:
// the statement fails with error 1317 and runs nowhere. The waits take
// the statement context (Session.statementContext), a child of the
// session's context that a KILL QUERY cancels with errQueryKilled. A
// context that was cancelled is replaced when the next command starts,
// so a kill never reaches a later statement than the one running (or the
// one that starts right after it, as on MariaDB).

// errQueryKilled is the cause of a statement context cancelled by KILL
// QUERY.
var errQueryKilled = errors.New("query execution was interrupted (KILL QUERY)")

// stmtWaits is the statement context and what cancels it.
type stmtWaits struct {
	// killed is set by a KILL QUERY; the next command starts with a new
	// context.
	killed atomic.Bool
	// ctx is the statement context; the session's goroutine reads it
	// without a lock. cancel is its cancel function, guarded by killMu.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// statementContext is the context the running statement's waits take: it
// ends with the session (KILL CONNECTION, shutdown) and with a KILL QUERY.
func (ss *Session) statementContext() context.Context {
	if ss.stmtWaits.ctx == nil {
		ss.renewStatementContext()
	}
	return ss.stmtWaits.ctx
}

// renewStatementContext gives the session a new statement context, the
// old one being cancelled (or not made yet).
func (ss *Session) renewStatementContext() {
	ctx, cancel := context.WithCancelCause(ss.context())
	ss.killMu.Lock()
	if ss.stmtWaits.cancel != nil {
		ss.stmtWaits.cancel(nil)
	}
	ss.stmtWaits.ctx, ss.stmtWaits.cancel = ctx, cancel
	ss.stmtWaits.killed.Store(false)
	ss.killMu.Unlock()
}
