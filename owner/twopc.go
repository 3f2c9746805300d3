package owner

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/internal/sqlconnect"
	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/twopc"
	"github.com/directgate/directgate/wire"
)

// The coordinator log of atomic commit across clusters (transaction_mode
// twopc), kept by the owner of twopc.log_cluster in table twopc.log of
// that cluster's primary, and its resolver.
//
// A gateway prepares every participant (XA PREPARE), then writes its
// decision to commit here (DIRECTGATE TWOPC COMMIT), then commits each
// (XA COMMIT) and drops the record (DIRECTGATE TWOPC FORGET). The
// resolver, in the leading owner, finds branches left prepared (XA
// RECOVER on every cluster's primary) and, once it has seen one prepared
// for twopc.resolve_after, ends it as the log says: committed when
// a commit record exists; else it records the decision to roll back
// (which a late gateway's commit record then cannot replace) and rolls
// the branch back. One row per transaction, keyed by its gtrid: the first
// decision written wins.

// logTable is the coordinator log, and logDDL creates it.
const logTable = "twopc.log"

var logDDL = []string{
	"CREATE DATABASE IF NOT EXISTS twopc",
	"CREATE TABLE IF NOT EXISTS twopc.log (" +
		"gtrid VARBINARY(64) NOT NULL PRIMARY KEY, " +
		"state ENUM('commit', 'rollback') NOT NULL, " +
		"participants VARCHAR(2048) NOT NULL, " +
		"created TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB",
}

// rollbackKeep is how long the resolver keeps a decision to roll back: it
// fences a gateway that comes back that late to write its commit.
const rollbackKeep = time.Hour

// parseLogStatement reads the gateway's log statements.
func parseLogStatement(q string) (statement, bool) {
	verb, gtrid, parts, ok := twopc.ParseStatement(q)
	if !ok {
		return statement{}, false
	}
	if verb == twopc.VerbForget {
		return statement{kind: stmtLogForget, gtrid: gtrid}, true
	}
	return statement{kind: stmtLogCommit, gtrid: gtrid, parts: parts}, true
}

// twopcState is the owner's part in atomic commit: the log table's
// readiness, the resolver's connections to every cluster's primary and
// what it last found.
type twopcState struct {
	// logReady is the generation of the primary the log table is known
	// to exist on.
	logReady atomic.Uint64
	mu       sync.Mutex
	// pools are the resolver's connections, by backend address.
	pools map[string]*sql.DB
	// inDoubt and oldest are the prepared branches the last round found
	// and the start of the oldest one's transaction.
	inDoubt atomic.Int64
	oldest  atomic.Int64 // Unix nanoseconds; 0 none
	// committed and rolledBack count branches the resolver ended.
	committed, rolledBack atomic.Uint64
	// firstSeen is when the resolver first found each branch prepared
	// (by gtrid and cluster): it acts on one only resolve_after later,
	// so a gateway between its PREPAREs and its log write is left
	// alone. Only the resolver's goroutine uses it.
	firstSeen map[branch]time.Time
}

// ensureLog creates the log table on p once.
func (o *Owner) ensureLog(ctx context.Context, p *primary) error {
	if o.tpc.logReady.Load() == p.gen {
		return nil
	}
	for _, q := range logDDL {
		if _, err := p.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	o.tpc.logReady.Store(p.gen)
	return nil
}

// logStatement answers a gateway's log statement.
func (ss *session) logStatement(ctx context.Context, st statement) error {
	o := ss.o
	if lc := o.conf.Load().twopc.LogCluster; lc != o.cluster {
		return ss.writeErr(wire.NewError(1235, "42000", "This owner keeps no coordinator log: twopc.log_cluster is %s, not %s", lc, o.cluster))
	}
	p, err := o.currentPrimary(ctx)
	if err == nil {
		err = o.ensureLog(ctx, p)
	}
	if err != nil {
		return ss.writeErr(o.toSQLError(err, nil, ""))
	}
	switch st.kind {
	case stmtLogCommit:
		_, err = p.db.ExecContext(ctx, "INSERT INTO "+logTable+" (gtrid, state, participants) VALUES (?, 'commit', ?)", st.gtrid, st.parts)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			var state string
			if err = p.db.QueryRowContext(ctx, "SELECT state FROM "+logTable+" WHERE gtrid = ?", st.gtrid).Scan(&state); err == nil && state != "commit" {
				return ss.writeErr(wire.NewError(1613, "XA106", "XA_RBTIMEOUT: Transaction branch was rolled back: took too long"))
			}
		}
	case stmtLogForget:
		_, err = p.db.ExecContext(ctx, "DELETE FROM "+logTable+" WHERE gtrid = ? AND state = 'commit'", st.gtrid)
	}
	if err != nil {
		o.reportFailure(p.addr, err)
		return ss.writeErr(o.toSQLError(err, nil, p.addr))
	}
	return ss.writeOK(wire.OK{Status: wire.StatusAutocommit, AffectedRows: 1})
}

// resolveLoop runs the resolver while the owner leads, until it shuts
// down.
func (o *Owner) resolveLoop() {
	defer o.closeResolverPools()
	for {
		every := min(max(o.conf.Load().twopc.ResolveAfter/2, 100*time.Millisecond), 2*time.Second)
		t := time.NewTimer(every)
		select {
		case <-o.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !o.active() {
			continue
		}
		ctx, cancel := context.WithTimeout(o.ctx, 30*time.Second)
		if err := o.resolveRound(ctx); err != nil {
			o.log.Warn("twopc resolver round failed", "error", err)
		}
		cancel()
	}
}

// resolveRound ends the branches prepared longer than resolve_after ago
// on every cluster, by the log, and drops log records no longer needed.
func (o *Owner) resolveRound(ctx context.Context) error {
	st := o.conf.Load()
	p, err := o.primaryNow()
	if err != nil {
		return err
	}
	if err := o.ensureLog(ctx, p); err != nil {
		return err
	}
	now := time.Now()
	cutoff := now.Add(-st.twopc.ResolveAfter)
	seen := map[string]bool{}
	found := map[branch]time.Time{}
	reachedAll := true
	var inDoubt int64
	var oldest time.Time
	for _, c := range st.clusters {
		db, err := o.clusterPrimary(ctx, c)
		if err != nil {
			reachedAll = false
			o.log.Warn("twopc resolver cannot reach a cluster's primary", "cluster", c.Name, "error", err)
			continue
		}
		branches, err := recoverBranches(ctx, db)
		if err != nil {
			reachedAll = false
			o.log.Warn("twopc resolver: XA RECOVER failed (the backend account needs the privilege to run it)", "cluster", c.Name, "error", err)
			continue
		}
		for _, b := range branches {
			seen[b.gtrid] = true
			started, _ := twopc.Started(b.gtrid)
			inDoubt++
			if oldest.IsZero() || started.Before(oldest) {
				oldest = started
			}
			first, ok := o.tpc.firstSeen[b]
			if !ok {
				first = now
			}
			found[b] = first
			if first.After(cutoff) {
				continue // its gateway may still be at it
			}
			commit, err := o.decide(ctx, p, b.gtrid)
			if err != nil {
				return err
			}
			verb := "XA ROLLBACK "
			if commit {
				verb = "XA COMMIT "
			}
			_, err = db.ExecContext(ctx, verb+twopc.XID(b.gtrid, b.bqual))
			var me *mysql.MySQLError
			switch {
			case errors.As(err, &me) && me.Number == 1397:
				// XAER_NOTA: a connection still holds the branch (its
				// gateway is alive), or it just ended: the next round sees.
			case err != nil:
				o.log.Warn("twopc resolver could not end a branch", "cluster", c.Name, "gtrid", b.gtrid, "commit", commit, "error", err)
			case commit:
				o.tpc.committed.Add(1)
				o.log.Info("twopc resolver committed a branch left in doubt", "cluster", c.Name, "gtrid", b.gtrid)
			default:
				o.tpc.rolledBack.Add(1)
				o.log.Info("twopc resolver rolled back a branch left in doubt", "cluster", c.Name, "gtrid", b.gtrid)
			}
		}
	}
	o.tpc.firstSeen = found
	o.tpc.inDoubt.Store(inDoubt)
	if oldest.IsZero() {
		o.tpc.oldest.Store(0)
	} else {
		o.tpc.oldest.Store(oldest.UnixNano())
	}
	return o.pruneLog(ctx, p, st.twopc.ResolveAfter, seen, reachedAll)
}

// pruneLog drops commit records older than resolve_after whose branches
// no cluster holds prepared any more (known only when every cluster
// answered), and rollback records older than rollbackKeep.
func (o *Owner) pruneLog(ctx context.Context, p *primary, after time.Duration, seen map[string]bool, reachedAll bool) error {
	if reachedAll {
		rows, err := p.db.QueryContext(ctx, "SELECT gtrid FROM "+logTable+" WHERE state = 'commit' AND created < NOW(6) - INTERVAL ? MICROSECOND", after.Microseconds())
		if err != nil {
			return err
		}
		var done []string
		for rows.Next() {
			var g string
			if err := rows.Scan(&g); err == nil && !seen[g] {
				done = append(done, g)
			}
		}
		rows.Close()
		for _, g := range done {
			if _, err := p.db.ExecContext(ctx, "DELETE FROM "+logTable+" WHERE gtrid = ?", g); err != nil {
				return err
			}
		}
	}
	_, err := p.db.ExecContext(ctx, "DELETE FROM "+logTable+" WHERE state = 'rollback' AND created < NOW(6) - INTERVAL ? SECOND", int(rollbackKeep.Seconds()))
	return err
}

// decide returns the log's decision on gtrid, recording the decision to
// roll back when there is none.
func (o *Owner) decide(ctx context.Context, p *primary, gtrid string) (commit bool, err error) {
	if _, err := p.db.ExecContext(ctx, "INSERT IGNORE INTO "+logTable+" (gtrid, state, participants) VALUES (?, 'rollback', '')", gtrid); err != nil {
		return false, err
	}
	var state string
	if err := p.db.QueryRowContext(ctx, "SELECT state FROM "+logTable+" WHERE gtrid = ?", gtrid).Scan(&state); err != nil {
		return false, err
	}
	return state == "commit", nil
}

// branch is one prepared branch of the gateway's, as XA RECOVER lists it.
type branch struct{ gtrid, bqual string }

// recoverBranches lists the prepared branches of the gateway's on db.
func recoverBranches(ctx context.Context, db *sql.DB) ([]branch, error) {
	rows, err := db.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []branch
	for rows.Next() {
		var format, gl, bl int
		var data []byte
		if err := rows.Scan(&format, &gl, &bl, &data); err != nil {
			return nil, err
		}
		if format != twopc.FormatID || gl+bl > len(data) {
			continue
		}
		g := string(data[:gl])
		if _, ok := twopc.Started(g); ok {
			out = append(out, branch{gtrid: g, bqual: string(data[gl : gl+bl])})
		}
	}
	return out, rows.Err()
}

// clusterPrimary returns a pool to cluster c's primary: the backend with
// read_only off, asked directly (the resolver needs no discovery of the
// other clusters).
func (o *Owner) clusterPrimary(ctx context.Context, c config.Cluster) (*sql.DB, error) {
	var errs []error
	for _, addr := range c.Backends {
		db, err := o.resolverPool(c, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var ro bool
		if err := db.QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil {
			errs = append(errs, err)
			continue
		}
		if !ro {
			return db, nil
		}
	}
	if len(errs) == 0 {
		return nil, errors.New("no backend has read_only off")
	}
	return nil, errors.Join(errs...)
}

// resolverPool returns the resolver's pool to addr of cluster c.
func (o *Owner) resolverPool(c config.Cluster, addr string) (*sql.DB, error) {
	o.tpc.mu.Lock()
	defer o.tpc.mu.Unlock()
	if db := o.tpc.pools[addr]; db != nil {
		return db, nil
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = c.BackendUser, c.BackendPassword, "tcp", addr
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	tlsConf, preferred, err := c.BackendTLS.ClientConfig()
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		cfg.TLS, cfg.AllowFallbackToPlaintext = tlsConf, preferred
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(sqlconnect.Retrying(connector))
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	db.SetConnMaxLifetime(10 * time.Minute)
	if o.tpc.pools == nil {
		o.tpc.pools = map[string]*sql.DB{}
	}
	o.tpc.pools[addr] = db
	return db, nil
}

// closeResolverPools closes the resolver's connections.
func (o *Owner) closeResolverPools() {
	o.tpc.mu.Lock()
	defer o.tpc.mu.Unlock()
	for addr, db := range o.tpc.pools {
		_ = db.Close()
		delete(o.tpc.pools, addr)
	}
}
