package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/balance"
	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/queryrules"
	"github.com/directgate/directgate/wire"
)

// target is where a session sends its reads: chosen per session with
// vtgate's USE db@replica / USE db@primary, else the cluster's
// replica_reads setting.
type target uint8

const (
	targetDefault target = iota
	targetPrimary
	targetReplica
)

// splitTarget splits a vtgate-style "db@replica" into the database and the
// target. Names without a known suffix are returned unchanged.
func splitTarget(db string) (string, target, bool) {
	i := strings.LastIndexByte(db, '@')
	if i < 0 {
		return db, targetDefault, false
	}
	switch strings.ToLower(db[i+1:]) {
	case "primary", "master":
		return db[:i], targetPrimary, true
	case "replica", "rdonly":
		return db[:i], targetReplica, true
	}
	return db, targetDefault, false
}

// startupWait is the least time a statement waits for the first
// discovery round when the gateway has just started.
const startupWait = 3 * time.Second

// role says what a backend connection was taken for.
type role uint8

const (
	rolePrimary role = iota
	roleReplica
)

// replicaEligible reports whether the statement may be served by a
// replica: a plain read, outside a transaction, not reading the previous
// statement's result and not creating session state, in a session whose
// target allows it.
func (ss *Session) replicaEligible(route querypath.Route, conf *config.Cluster) bool {
	if route.Kind != querypath.KindRead || route.Pin != 0 || route.ReadsLastResult {
		return false
	}
	if ss.status&wire.StatusInTrans != 0 || ss.status&wire.StatusAutocommit == 0 {
		return false
	}
	if r := ss.insight.route(); r != queryrules.RouteNone { // a query rule's route (insight.go)
		return r == queryrules.RouteReplica
	}
	switch ss.target {
	case targetReplica:
		return true
	case targetPrimary:
		return false
	}
	return bool(conf.ReplicaReads)
}

// pick chooses the backend for a statement that has no pinned connection:
// a replica for eligible reads when one qualifies, else the primary.
// avoid names a backend that just failed the statement and must not serve
// its retry.
func (ss *Session) pick(route querypath.Route, avoid string, quick bool) (*backend, role, error) {
	conf := ss.cluster.conf.Load()
	snap := ss.srv.health.Snapshot()
	if ss.replicaEligible(route, conf) {
		if be := ss.pickReplica(snap, conf, avoid); be != nil {
			return be, roleReplica, nil
		}
	}
	be, err := ss.primaryBackend(snap, conf, avoid, quick)
	return be, rolePrimary, err
}

// pickNow is pick without waiting: the backend that would serve the
// statement now, or nil when no primary is known (pick would wait for
// one) or the cluster is in split brain.
func (ss *Session) pickNow(route querypath.Route, conf *config.Cluster) (*backend, role) {
	snap := ss.srv.health.Snapshot()
	if ss.replicaEligible(route, conf) {
		if be := ss.pickReplica(snap, conf, ""); be != nil {
			return be, roleReplica
		}
	}
	if c := snap.Cluster(ss.cluster.name); c != nil && c.Primary != "" && !c.SplitBrain {
		if be := ss.cluster.backend(c.Primary); be != nil {
			return be, rolePrimary
		}
	}
	return nil, rolePrimary
}

// pickReplica returns the session's replica: the one it had while that
// one qualifies and its score stays within the stickiness threshold,
// else a new pick. nil when no replica serves with a known lag under
// max_replica_lag and a probe round trip under max_replica_latency
// (discovery's Slow).
func (ss *Session) pickReplica(snap *healthcheck.Snapshot, conf *config.Cluster, avoid string) *backend {
	c := snap.Cluster(ss.cluster.name)
	if c == nil || len(c.Replicas) == 0 {
		return nil
	}
	backends := *ss.cluster.backends.Load()
	cands := ss.cands[:0]
	cur := -1
	for _, addr := range c.Replicas {
		v := snap.Backends[addr]
		be := backends[addr]
		if be == nil || addr == avoid || !v.Last.LagKnown || v.Last.Lag > *conf.MaxReplicaLag || v.Slow {
			continue
		}
		if be == ss.replica {
			cur = len(cands)
		}
		cands = append(cands, balance.Candidate{Addr: addr, RTT: v.Last.RTT, Score: be.load.Score(), InFlight: be.load.InFlight()})
	}
	ss.cands = cands
	if len(cands) == 0 {
		return nil
	}
	policy := balance.Policy{Stickiness: conf.StickinessThreshold, HotLimit: *conf.HotLimit}
	if cur >= 0 && policy.Keep(cands[cur], cands) {
		return ss.replica
	}
	be := backends[cands[policy.Pick(cands, nil)].Addr]
	if ss.replica != nil && ss.replica != be {
		ss.log.Debug("session moves to another replica", "from", ss.replica.addr, "to", be.addr)
	}
	ss.replica = be
	return be
}

// primaryBackend returns the cluster's primary. When none is known it
// waits up to failover_buffer (longer right after start, before the first
// discovery round; at most health.timeout when quick, for a retry that
// only waits for a suspect backend's probe) for one to appear, asking
// discovery for early rounds meanwhile. In split brain it refuses at once.
func (ss *Session) primaryBackend(snap *healthcheck.Snapshot, conf *config.Cluster, avoid string, quick bool) (*backend, error) {
	if c := snap.Cluster(ss.cluster.name); c != nil && c.Primary != "" && c.Primary != avoid {
		if be := ss.cluster.backend(c.Primary); be != nil {
			return be, nil
		}
	}
	return ss.waitPrimary(snap, conf, avoid, quick)
}

// waitPrimary is primaryBackend without a primary at hand: a function of
// its own, so that what its wait's closure captures is not allocated on
// primaryBackend's fast path.
func (ss *Session) waitPrimary(snap *healthcheck.Snapshot, conf *config.Cluster, avoid string, quick bool) (*backend, error) {
	var timer *time.Timer
	var waited time.Time
	for {
		c := snap.Cluster(ss.cluster.name)
		if c != nil && c.Primary != "" && c.Primary != avoid {
			if be := ss.cluster.backend(c.Primary); be != nil {
				return be, nil
			}
		}
		if c != nil && c.SplitBrain {
			ss.srv.refusals.splitBrain.Add(1)
			return nil, &splitBrainError{cluster: ss.cluster.name, writable: c.Writable}
		}
		if timer == nil {
			wait := *conf.FailoverBuffer
			if snap.Round == 0 {
				wait = max(wait, startupWait)
			}
			if quick {
				wait = min(wait, ss.srv.cfg.Health.Timeout)
			}
			waited = time.Now()
			timer = time.NewTimer(wait)
			defer timer.Stop()
			ss.proc.waiting(waitPrimary)
			defer ss.proc.waiting(waitNone)
		}
		ss.srv.health.Refresh()
		ended, changed := false, false
		ss.blocking(offloadBuffer, func() {
			select {
			case <-ss.statementContext().Done():
				ended = true
			case <-snap.Changed():
				changed = true
			case <-timer.C:
			}
		})
		switch {
		case ended:
			return nil, context.Cause(ss.statementContext())
		case changed:
			snap = ss.srv.health.Snapshot()
		default:
			reason := "discovery has not finished its first round"
			if c != nil {
				reason = c.NoPrimaryReason
				if c.Primary != "" && c.Primary == avoid {
					reason = c.Primary + " refused the statement as read-only and no other primary appeared"
				}
			}
			ss.srv.refusals.noPrimary.Add(1)
			return nil, &mysqlserver.NoPrimaryError{Cluster: ss.cluster.name, Reason: reason, Waited: time.Since(waited).Round(time.Millisecond)}
		}
	}
}

// causalWait makes a replica read see the session's own last write: it
// waits on conn (a replica) until the write's GTID is applied, for at most
// causal_timeout. ok is false when the replica did not catch up in time
// (the caller reads from the primary instead).
func (ss *Session) causalWait(conn *backendConn, conf *config.Cluster) (ok bool, err error) {
	if !bool(conf.CausalReads) || ss.lastGTID == "" || ss.gtidSeenOn == conn.be {
		return true, nil
	}
	if ss.lastGTID == gtidUnknown || *conf.CausalTimeout == 0 {
		return false, nil
	}
	q := "SELECT MASTER_GTID_WAIT('" + ss.lastGTID + "', " + strconv.FormatFloat(conf.CausalTimeout.Seconds(), 'f', 3, 64) + ")"
	res := ""
	// In flight like a statement: a forced close cuts the wait.
	ss.beginInFlight(conn)
	defer ss.endInFlight()
	if err := conn.QueryRows(q, func(row [][]byte) {
		if len(row) == 1 {
			res = string(row[0])
		}
	}); err != nil {
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			// The server cannot wait (not MariaDB, or the GTID is from
			// another domain setup): read from the primary.
			ss.log.Debug("causal wait failed; reading from the primary", "backend", conn.addr, "error", err)
			return false, nil
		}
		return false, err
	}
	if res != "0" {
		return false, nil
	}
	ss.gtidSeenOn = conn.be
	return true, nil
}

// noteWrite records, for causal reads, the GTID of a write the session
// just made on conn (the primary).
func (ss *Session) noteWrite(conn *backendConn) {
	var gtid []byte
	err := conn.QueryRows("SELECT @@last_gtid", func(row [][]byte) {
		if len(row) == 1 {
			gtid = append(gtid[:0], row[0]...)
		}
	})
	if err != nil {
		// Without the GTID, later reads cannot wait for it: send them to
		// the primary until the next write tells one.
		ss.lastGTID = gtidUnknown
		ss.log.Debug("cannot read @@last_gtid for causal reads", "error", err)
		return
	}
	if g := string(gtid); validGTID(g) {
		ss.lastGTID = g
		ss.gtidSeenOn = nil
	}
}

// validGTID reports whether g looks like MariaDB's domain-server-seq GTID,
// so it can be quoted into MASTER_GTID_WAIT without escaping.
func validGTID(g string) bool {
	if g == "" {
		return false
	}
	for i := 0; i < len(g); i++ {
		if c := g[i]; (c < '0' || c > '9') && c != '-' && c != ',' {
			return false
		}
	}
	return true
}

// splitBrainError refuses a write while several backends are writable.
type splitBrainError struct {
	cluster  string
	writable []string
}

func (e *splitBrainError) Error() string {
	return fmt.Sprintf("cluster %s is in split brain: %s are all writable", e.cluster, strings.Join(e.writable, ", "))
}

// gtidUnknown marks a session whose last write's GTID could not be read:
// its reads go to the primary until its next write.
const gtidUnknown = "\x00unknown"

// routeState is where the session's statements go: its read target, its
// sticky replica and what causal reads need.
type routeState struct {
	// target is where reads go (USE db@replica / db@primary); replica
	// is the session's sticky replica; cands is scratch for picking one.
	target  target
	replica *backend
	cands   []balance.Candidate
	// lastGTID is the GTID of the session's last write, for causal reads;
	// gtidSeenOn is the replica known to have applied it.
	lastGTID   string
	gtidSeenOn *backend
	// gtidPending says the session wrote on its leased connection and
	// the write's GTID is still to be read.
	gtidPending bool
}
