package gateway

import (
	"errors"
	"strings"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/twopc"
	"github.com/directgate/directgate/wire"
)

// Atomic commit across clusters (transaction_mode twopc). A transaction
// begun with a plain BEGIN or START TRANSACTION runs as a MariaDB XA
// transaction on each cluster it touches (XA START before its first
// statement there; the branch is named after the cluster). At COMMIT:
//
//  1. every participant: XA END, XA PREPARE (a failure rolls every one
//     back, and the client gets the participant's error);
//  2. the decision to commit is written to the coordinator log, through
//     the owner of twopc.log_cluster (a refusal rolls every one back; an
//     unknown outcome leaves the prepared branches to the resolver);
//  3. every participant: XA COMMIT (a failure leaves the branch to the
//     resolver, which commits it by the log: the client is told the
//     transaction committed);
//  4. the log record is dropped.
//
// A transaction that ran on one cluster ends with XA COMMIT ... ONE
// PHASE, without the log.

// Crash points of the test hook (WithCrashHook), in the order a commit
// reaches them.
const (
	crashBeforePrepare  = "before_prepare"
	crashAfterPrepare   = "after_prepare"
	crashAfterLog       = "after_log"
	crashBetweenCommits = "between_commits"
)

// WithCrashHook makes the gateway call hook at each named point of a
// twopc commit (before_prepare, after_prepare, after_log,
// between_commits), for tests that end the process there. Without it
// (every normal run) nothing is called.
func WithCrashHook(hook func(point string)) Option {
	return func(o *options) { o.crashHook = hook }
}

// crashPoint calls the test hook, if any, at point.
func (s *Server) crashPoint(point string) {
	if s.crashHook != nil {
		s.crashHook(point)
	}
}

// isPlainBegin reports whether sql is BEGIN [WORK] or START TRANSACTION
// without characteristics: what an XA transaction can stand for.
func isPlainBegin(sql string) bool {
	f := strings.Fields(strings.ToLower(strings.TrimRight(strings.TrimSpace(sql), "; \t\n")))
	switch len(f) {
	case 1:
		return f[0] == "begin"
	case 2:
		return f[0] == "begin" && f[1] == "work" || f[0] == "start" && f[1] == "transaction"
	}
	return false
}

// xid is the XA id of the span transaction's branch on cluster c.
func (t *spanTxn) xid(c *cluster) string { return twopc.XID(t.gtrid, c.name) }

// logOwner is the owner that keeps the coordinator log, or an error
// saying there is none.
func (s *Server) logOwner() (*cluster, *wire.SQLError) {
	name := s.cfg.TwoPC.LogCluster
	c := s.clusters[name]
	if c == nil || c.fwd == nil {
		return nil, wire.NewError(1235, "42000", "This version of the gateway doesn't yet support transaction_mode twopc without an owner of cluster %s (twopc.log_cluster), which keeps the coordinator log: set its owner and run `gateway owner`", name)
	}
	return c, nil
}

// xaRun runs the XA statements on the session's connection of its current
// cluster. A backend error comes back as is; a broken connection is
// dropped and reported as lost.
func (ss *Session) xaRun(stmts ...string) error {
	if ss.lease == nil {
		return backendLost(ss.cluster.name, errors.New("the transaction's connection was lost"))
	}
	conn := ss.lease.Conn()
	for _, q := range stmts {
		if _, err := conn.Exec(q); err != nil {
			var sqlErr *wire.SQLError
			if !errors.As(err, &sqlErr) {
				ss.dropLease()
				ss.lostBackendState()
				return backendLost(conn.addr, err)
			}
			return err
		}
	}
	return nil
}

// letGo gives back the session's connection on its current cluster once
// its transaction has ended there (retired when a branch was prepared on
// it: see querypath.PinXA).
func (ss *Session) letGo(prepared bool) {
	ss.join = ""
	if ss.lease != nil && prepared {
		ss.lease.Conn().discard = true
	}
	ss.setPins(ss.pins &^ (pinTxn | transientPins))
	if ss.pins == 0 && ss.lease != nil {
		ss.releaseLease()
	}
}

// endXA ends an XA span transaction: COMMIT (commit) or ROLLBACK.
func (ss *Session) endXA(commit bool) error {
	t := ss.txn
	defer func() { ss.txn = spanTxn{parts: ss.txn.parts[:0]} }()
	switch {
	case !commit:
		ss.onParticipant(func(c *cluster) { ss.rollbackBranch(t, c, false) })
		if len(t.parts) > 1 {
			ss.srv.metrics.spanEnded(t.mode, "rollback")
		}
		return nil
	case len(t.parts) == 1:
		var err error
		ss.onParticipant(func(c *cluster) {
			err = ss.xaRun("XA END "+t.xid(c), "XA COMMIT "+t.xid(c)+" ONE PHASE")
			if err != nil {
				ss.rollbackBranch(t, c, true)
				return
			}
			ss.letGo(false)
		})
		return err
	}
	return ss.commitTwoPC(t)
}

// commitTwoPC commits t over its participants atomically (see the file
// comment).
func (ss *Session) commitTwoPC(t spanTxn) error {
	srv := ss.srv
	names := make([]string, len(t.parts))
	for i, c := range t.parts {
		names[i] = c.name
	}
	srv.crashPoint(crashBeforePrepare)
	prepared := map[*cluster]bool{}
	var failed error
	var failedOn string
	ss.onParticipant(func(c *cluster) {
		if failed != nil {
			return
		}
		failedOn = c.name
		if err := ss.xaRun("XA END " + t.xid(c)); err != nil {
			failed = err
			return
		}
		if err := ss.xaRun("XA PREPARE " + t.xid(c)); err != nil {
			failed = err
			return
		}
		prepared[c] = true
	})
	srv.metrics.twopcPrepare(failed == nil)
	if failed != nil {
		ss.rollbackPrepared(t, prepared)
		srv.metrics.spanEnded(t.mode, "rollback")
		var lost *wire.BackendError
		if errors.As(failed, &lost) {
			return wire.NewError(1180, "HY000", "Got error during COMMIT: the connection to cluster %s was lost before its XA PREPARE (%v); the transaction was rolled back on every cluster", failedOn, lost.Err)
		}
		return failed // the participant's own error
	}
	preparedAt := time.Now()
	srv.crashPoint(crashAfterPrepare)
	logc, e := srv.logOwner()
	if e == nil && time.Since(preparedAt) > srv.cfg.TwoPC.ResolveAfter/2 {
		e = wire.NewError(1613, "XA106", "XA_RBTIMEOUT: Transaction branch was rolled back: took too long")
	}
	if e != nil {
		ss.rollbackPrepared(t, prepared)
		srv.metrics.spanEnded(t.mode, "rollback")
		return e
	}
	sent, err := logc.fwd.Exec(twopc.CommitStatement(t.gtrid, names))
	if err != nil {
		var sqlErr *wire.SQLError
		if !sent || errors.As(err, &sqlErr) {
			// Certainly not written: nothing commits.
			ss.rollbackPrepared(t, prepared)
			srv.metrics.spanEnded(t.mode, "rollback")
			if sqlErr != nil {
				return sqlErr
			}
			return wire.NewError(1180, "HY000", "Got error during COMMIT: the decision could not be written to the coordinator log (the owner of cluster %s): %v; the transaction was rolled back on cluster %s", logc.name, err, strings.Join(names, ", "))
		}
		// The decision may or may not be in the log: the branches stay
		// prepared and the resolver ends them by it.
		ss.onParticipant(func(*cluster) { ss.letGo(true) })
		srv.metrics.spanEnded(t.mode, "unknown")
		ss.log.Warn("twopc decision write's outcome unknown; left to the resolver", "gtrid", t.gtrid, "error", err)
		return wire.NewError(1180, "HY000", "Got error during COMMIT: the write of the commit decision to the coordinator log (the owner of cluster %s) failed: %v; the transaction is prepared on cluster %s, and the owner's resolver commits or rolls it back by the log within twopc.resolve_after (%s)",
			logc.name, err, strings.Join(names, ", "), srv.cfg.TwoPC.ResolveAfter)
	}
	srv.crashPoint(crashAfterLog)
	pending := false
	first := true
	ss.onParticipant(func(c *cluster) {
		if err := ss.xaRun("XA COMMIT " + t.xid(c)); err != nil {
			// Decided: the resolver commits it.
			pending = true
			ss.log.Warn("twopc XA COMMIT failed; the resolver commits the branch", "cluster", c.name, "gtrid", t.gtrid, "error", err)
		}
		ss.letGo(true)
		if first {
			first = false
			srv.crashPoint(crashBetweenCommits)
		}
	})
	if !pending {
		if _, err := logc.fwd.Exec(twopc.ForgetStatement(t.gtrid)); err != nil {
			ss.log.Debug("twopc log record not dropped; the resolver drops it", "gtrid", t.gtrid, "error", err)
		}
	}
	srv.metrics.spanEnded(t.mode, "commit")
	return nil
}

// rollbackPrepared rolls back every participant of t: prepared ones and
// ones still active.
func (ss *Session) rollbackPrepared(t spanTxn, prepared map[*cluster]bool) {
	ss.onParticipant(func(c *cluster) { ss.rollbackBranch(t, c, prepared[c]) })
}

// rollbackBranch rolls back t's branch on c, the session's current
// cluster (ended says XA END already ran, or it was prepared), and lets
// the connection go. A connection where that failed is closed, not
// pooled: the server rolls back what it still holds, and keeps a
// prepared branch for the resolver.
func (ss *Session) rollbackBranch(t spanTxn, c *cluster, ended bool) {
	var err error
	if !ended {
		err = ss.xaRun("XA END " + t.xid(c))
	}
	if err2 := ss.xaRun("XA ROLLBACK " + t.xid(c)); err2 != nil || err != nil {
		ss.log.Debug("rollback of an XA branch failed; closing its connection", "cluster", c.name, "gtrid", t.gtrid, "end", err, "rollback", err2)
		ss.letGo(true)
		return
	}
	ss.letGo(ended)
}

// twopcJoinable says whether a twopc span transaction may take in another
// cluster.
func (ss *Session) twopcJoinable() *wire.SQLError {
	if !ss.txn.xa {
		return errTxnSingle(ss.txn.parts[0], ss.cluster, "a transaction over two clusters in transaction_mode twopc that began with characteristics (START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT, ...)")
	}
	if _, e := ss.srv.logOwner(); e != nil {
		return e
	}
	return nil
}

// txnModeOf is the mode a transaction begun by sql in the session runs
// in, and whether it runs as XA.
func (ss *Session) txnModeOf(sql string) (mode string, xa bool) {
	return ss.txnMode, ss.txnMode == config.TxnTwoPC && isPlainBegin(sql)
}
