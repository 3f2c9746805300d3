package gateway

import (
	"context"
	"fmt"
	"time"
)

// A login that names a default database checks it on a backend
// connection, and that connection may have to be waited for: a full pool,
// the user's pool share, the fleet's budget, a primary. Those waits take
// the statement context, and during the login that context ends a little
// before handshake_timeout does (issue 35: with pool.size 2 and
// acquire_timeout 30s, logins waited for a pooled connection until
// handshake_timeout closed the socket, with no error packet; drivers said
// "unexpected EOF"). The login then fails with error 1040 naming the
// pool, as a statement does after acquire_timeout.

// loginWaitError is the cause of a login's statement context that ran out:
// what was left of handshake_timeout passed while the login waited for a
// backend connection.
type loginWaitError struct {
	// waited is how long the database check had to get a connection.
	waited time.Duration
	// timeout is handshake_timeout.
	timeout time.Duration
}

// Error says what ran out and what to change.
func (e *loginWaitError) Error() string {
	return fmt.Sprintf("no backend connection free for the login's database check within %v "+
		"(what was left of handshake_timeout %v); raise pool.size or lower client concurrency",
		e.waited.Round(time.Millisecond), e.timeout)
}

// loginMargin is the part of handshake_timeout kept back from a login's
// waits, for the error packet to reach the client before the socket is
// closed: a twentieth, between 50 ms and 500 ms.
func loginMargin(timeout time.Duration) time.Duration {
	return min(max(timeout/20, 50*time.Millisecond), 500*time.Millisecond)
}

// boundLoginWaits gives the session a statement context that ends at what
// is left of handshake_timeout (the login started at start) less
// loginMargin, with a *loginWaitError as its cause. The returned function
// puts back an unbounded statement context for the session's statements.
func (ss *Session) boundLoginWaits(start time.Time) (restore func()) {
	timeout := ss.srv.cfg.HandshakeTimeout
	deadline := start.Add(timeout - loginMargin(timeout))
	cause := &loginWaitError{waited: time.Until(deadline), timeout: timeout}
	ctx, cancelDeadline := context.WithDeadlineCause(ss.context(), deadline, cause)
	ctx, cancel := context.WithCancelCause(ctx)
	ss.killMu.Lock()
	if ss.stmtWaits.cancel != nil {
		ss.stmtWaits.cancel(nil)
	}
	ss.stmtWaits.ctx, ss.stmtWaits.cancel = ctx, cancel
	ss.killMu.Unlock()
	return func() {
		ss.renewStatementContext()
		cancelDeadline()
	}
}

// Where the check can be answered without a pooled connection, it is: a
// database that a login of the same backend account found within
// grantTTL (10 s) is taken without asking again while every pool of the
// cluster for that account is busy (the login would wait). With a free
// connection the check runs as before, so a database dropped a moment
// ago is refused at login as MariaDB refuses it; under pressure, one
// dropped within the last grantTTL is refused at the session's first
// statement instead (1049 from the backend).

// loginDB sets the database the client named at login: checked on a
// backend connection (connectDB), or, when a recent check answers it and
// every pool would make the login wait, without one.
func (ss *Session) loginDB(db string) error {
	name, _, _ := splitTarget(db)
	pk := ss.poolKey()
	k := grantKey{account: pk.user, probe: "login database " + name}
	if name != "" && ss.cluster.dbChecks.passed(k, time.Now()) && ss.poolsBusy(pk) {
		ss.db, ss.target, _ = splitTarget(db)
		ss.nextState()
		return nil
	}
	if err := ss.connectDB(db); err != nil {
		return err
	}
	if name != "" {
		ss.cluster.dbChecks.remember(k, time.Now())
	}
	return nil
}

// poolsBusy reports whether every backend of the session's cluster has
// its pool for k busy: a connection would have to be waited for.
func (ss *Session) poolsBusy(k poolKey) bool {
	for _, be := range *ss.cluster.backends.Load() {
		p, err := be.poolFor(k)
		if err != nil || !p.Busy() {
			return false
		}
	}
	return true
}
