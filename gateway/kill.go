package gateway

import (
	"context"
	"errors"
	"strconv"
	"sync"
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

// killTimeout bounds sending one KILL QUERY, dial included.
const killTimeout = 2 * time.Second

// killer is the connection a backend keeps for KILL QUERY, for one
// account.
type killer struct {
	mu   sync.Mutex
	conn *backendConn
}

// killQuery stops the statement running on bc with KILL QUERY on the
// backend's kill connection for bc's account. A statement that has just
// finished (1094) is not an error.
func (be *backend) killQuery(bc *backendConn) error {
	k := bc.key
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
	kill := "KILL QUERY " + strconv.FormatUint(uint64(bc.Greeting.ConnectionID), 10)
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
		_, err = kl.conn.Exec(kill)
		_ = kl.conn.NetConn().SetDeadline(time.Time{})
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			if sqlErr.Code == 1094 { // the statement just finished
				return nil
			}
			return err
		}
		if err == nil {
			return nil
		}
		// The kill connection broke (an idle timeout, a restart): once
		// more on a new one.
		_ = kl.conn.Close()
		kl.conn = nil
	}
	return err
}

// closeKillers closes the backend's kill connections; the caller holds
// be.mu.
func (be *backend) closeKillers() {
	for _, kl := range be.killers {
		kl.mu.Lock()
		if kl.conn != nil {
			_ = kl.conn.Close()
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
	ss.stopWait()
	bc := ss.inFlight.Load()
	if closeFirst {
		ss.ForceClose()
	}
	if bc == nil || bc.be == nil {
		return nil
	}
	return bc.be.killQuery(bc)
}
