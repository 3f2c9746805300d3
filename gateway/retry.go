package gateway

import (
	"errors"
	"fmt"

	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// This file is the one retry policy of the commands that may run again (a
// query, a prepared execute): when a try ends without an answer for the
// client, retry.afterTry says whether another try runs, and why.

// retryReason says why a command runs again.
type retryReason uint8

const (
	// firstTry: the command has not run again.
	firstTry retryReason = iota
	// retryReadOnly: the primary refused a write as read-only, and the
	// relay held the error back from the client; nothing ran. The new
	// primary gets it.
	retryReadOnly
	// retryNotSent: the command never reached the server (its connection
	// had closed): nothing ran, so any command may go to another
	// connection, unless session state lived on that one.
	retryNotSent
	// retryLostRead: a read outside a session's state lost its connection
	// before the client got a byte: another backend serves it.
	retryLostRead
)

func (r retryReason) String() string {
	return [...]string{"first try", "read-only held", "not sent", "lost before first byte"}[r]
}

// retry is what the tries of one command have learned.
type retry struct {
	// attempt counts the tries before this one; why says why this one
	// runs.
	attempt int
	why     retryReason
	// avoid names a backend the next try must not use.
	avoid string
	// held is the read-only error of a write being retried, lost the
	// failure of a read being retried: what the client gets when the
	// retry finds no backend.
	held, lost *wire.SQLError
}

// again starts the next try, for reason why.
func (rt *retry) again(why retryReason) {
	rt.attempt++
	rt.why = why
}

// retryable reports whether a try that reached the server may still run
// again: the first try, in a session that holds no state on its
// connection but the previous statement's result.
func (ls *leaseState) retryable(rt *retry) bool {
	return rt.attempt == 0 && ls.pins&^transientPins == 0 && ls.join == ""
}

// noConnection answers a command whose try got no connection (no primary,
// a full pool, a backend that refused the session's state): the error of
// the try being retried when there is one, else err.
func (ss *Session) noConnection(rt *retry, sp *stmtSpan, err error) error {
	var np *mysqlserver.NoPrimaryError
	switch {
	case rt.held != nil && errors.As(err, &np):
		// No other primary appeared: the backend's own answer.
		return ss.writeErr(rt.held)
	case rt.lost != nil:
		return ss.writeErr(rt.lost)
	}
	sp.failed(err)
	return ss.writeErr(toClientError(err))
}

// heldState reports whether the session holds state on its connection
// beyond the previous statement's result (a transaction, variables, ...).
func (ls *leaseState) heldState() bool {
	return ls.lease != nil && ls.pins&^transientPins != 0
}

// stateLostBefore answers a command whose try failed before the command
// was sent because the connection holding the session's state (held: what
// heldState said before the try) broke while it was brought in line
// (prepareStatement, a join): the client gets the error and the session
// ends, as in tellLost. sp, when not nil, is the statement's span. False:
// not that case, the caller answers.
func (ss *Session) stateLostBefore(held bool, sp *stmtSpan, err error) (bool, error) {
	if !held || ss.lease != nil {
		return false, nil
	}
	ss.lostBackendState()
	if sp != nil {
		sp.failed(err)
	}
	if werr := ss.writeErr(toClientError(err)); werr != nil {
		return true, werr
	}
	return true, errors.New("backend connection holding session state was lost")
}

// tryOutcome is what follows a try.
type tryOutcome uint8

const (
	// tryAnswered: the answer reached the client; the caller records it.
	tryAnswered tryOutcome = iota
	// tryAgain: the command runs again (rt.why says why).
	tryAgain
	// tryOver: the command failed and the client was told, or the client
	// is gone; a non-nil error ends the session.
	tryOver
)

// afterTry decides what follows a try on conn that the relay ended with
// res and err. pinned tells whether conn was the session's before the
// command, retryable what ss.retryable said when the try began, reread
// whether a read that lost its connection may run again (a text query:
// a prepared execute once sent never runs twice).
func (ss *Session) afterTry(rt *retry, conn *backendConn, pinned, retryable bool, route querypath.Route,
	res wire.Result, err error, reread bool) (tryOutcome, error) {
	if err == nil && res.Held {
		again, herr := ss.heldReadOnly(conn, res)
		if again {
			rt.held, rt.avoid = res.Err, conn.addr
			rt.again(retryReadOnly)
			return tryAgain, nil
		}
		err = herr
	}
	if err == nil {
		return tryAnswered, nil
	}
	var ce *wire.ClientError
	if errors.As(err, &ce) || ss.cut.Load() {
		// The client is gone, or the gateway cut the session (KILL,
		// forced shutdown) and closed the backend connection itself: no
		// backend failure, and the command does not run again.
		ss.dropLease()
		ss.lostBackendState()
		return tryOver, err
	}
	lostState := pinned && ss.pins&^transientPins != 0
	var ns *notSentError
	if errors.As(err, &ns) {
		ss.dropLease()
		if !lostState && rt.attempt < 2 && !ss.srv.closing() {
			ss.log.Debug("backend connection closed before the statement was sent; using another", "backend", conn.addr, "error", err)
			rt.again(retryNotSent)
			return tryAgain, nil
		}
	}
	leaseRole := ss.leaseRole
	ss.backendBroke(conn, err)
	if reread && res.Packets == 0 && retryable && route.Kind == querypath.KindRead && !ss.srv.closing() {
		if leaseRole == roleReplica {
			rt.avoid = conn.addr
		}
		rt.lost = toClientError(backendLost(conn.addr, err))
		rt.again(retryLostRead)
		return tryAgain, nil
	}
	return tryOver, ss.tellLost(conn, res, err, lostState)
}

// backendBroke records a backend connection that broke under a command:
// the backend is reported to discovery, the connection destroyed, the
// session's state on it forgotten.
func (ss *Session) backendBroke(conn *backendConn, err error) {
	ss.log.Warn("backend connection lost", "backend", conn.addr, "error", err)
	conn.be.broke()
	ss.dropLease()
	ss.lostBackendState()
}

// tellLost tells the client its command lost its backend connection. A
// session whose state (a transaction, variables, ...) lived on that
// connection ends: the client must not carry on as if it existed. When
// the answer broke off within its definitions (res.Midway) the session
// ends too, with no error packet: the client would read one as a
// definition and wait for the rest.
func (ss *Session) tellLost(conn *backendConn, res wire.Result, err error, lostState bool) error {
	if res.Midway {
		return lostMidway(err)
	}
	if werr := ss.writeErr(toClientError(backendLost(conn.addr, err))); werr != nil {
		return werr
	}
	if lostState {
		return errors.New("backend connection holding session state was lost")
	}
	return nil
}

// lostMidway is the error that ends a session whose answer broke off
// within its definitions (wire.Result.Midway): closing the client's
// connection is the only clean end the client can read.
func lostMidway(err error) error {
	return fmt.Errorf("backend connection lost within the definitions of an answer; closing the client connection: %w", err)
}
