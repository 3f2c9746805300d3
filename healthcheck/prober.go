package healthcheck

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/internal/sqlconnect"
	"github.com/go-sql-driver/mysql"
)

// Backend is one database server known to discovery.
type Backend struct {
	// Addr is the server's host:port. It identifies the backend: two
	// Backends with the same Addr are the same backend.
	Addr string
	// Cluster names the replication group the backend belongs to. Roles
	// (primary, replicas) are decided per cluster.
	Cluster string
}

// Result is what one probe learned about a backend.
type Result struct {
	// Reachable reports whether a connection was made and the server
	// answered.
	Reachable bool
	// ReadOnly is @@read_only. A serving backend with ReadOnly false is a
	// primary candidate.
	ReadOnly bool
	// ServerID is @@server_id.
	ServerID uint32
	// Version is @@version.
	Version string
	// Replica reports whether the server has replication configured (the
	// replication status query returned at least one row).
	Replica bool
	// Lag is the replication lag (Seconds_Behind_Master/Source; with
	// several sources, the largest). Meaningful only when LagKnown.
	Lag time.Duration
	// LagKnown is false when the server is not a replica or when the lag
	// is NULL (the SQL thread is stopped or not connected), or when the
	// replication status could not be read (see ReplicationNote). The
	// gateway reads from no replica whose lag is unknown.
	LagKnown bool
	// SQLStopped reports that a replication row says the SQL thread does
	// not run (Slave_SQL_Running/Replica_SQL_Running other than Yes:
	// stopped, or stopped by an error). The replica then applies nothing:
	// it falls further behind with every write on the primary, while its
	// lag reads NULL (LagKnown false).
	SQLStopped bool
	// ReplicationNote says why the replication status could not be read
	// (typically a missing privilege); empty when it was read.
	ReplicationNote string
	// RTT is the round-trip time of a trivial query on the probe's
	// connection (connection setup excluded).
	RTT time.Duration
	// Err is the error that made the probe fail, if any. A probe with a
	// non-nil Err counts as a failed probe.
	Err error
}

// ErrNotProbed is the error of a Result whose prober declined to probe
// (it may wrap it with the reason): nothing was learned, so the observer
// leaves the backend's state as it was, does not count a probe and does
// not share the result. A gateway under a fleet-wide connection cap, for
// one, probes only once the cap has room for the probe's connection.
var ErrNotProbed = errors.New("not probed")

// Prober checks one backend. Probe must honour ctx (the observer gives it
// a deadline) and must be safe for concurrent use: the observer runs many
// probes at once. It reports failures in Result.Err rather than panicking.
type Prober interface {
	Probe(ctx context.Context, b Backend) Result
}

// MySQLProber probes MySQL and MariaDB servers over a short-lived
// connection of its own, opened and closed by every probe; it never
// touches a serving pool. The zero value is not useful: User must be set.
type MySQLProber struct {
	// User and Password authenticate the probe. The account needs no
	// privilege beyond connecting, reading system variables and reading
	// replication status (REPLICATION CLIENT on MySQL, SLAVE MONITOR or
	// REPLICATION CLIENT on MariaDB).
	User     string
	Password string
	// Timeout bounds the dial and each read and write of the probe, on
	// top of the deadline of the context passed to Probe. Zero means 1s.
	Timeout time.Duration
	// TLS, when not nil, encrypts the probe's connection (go-sql-driver's
	// Config.TLS; an empty ServerName becomes the backend's host unless
	// InsecureSkipVerify is set). Nil: plain connection.
	TLS *tls.Config
	// TLSPreferred lets a backend that does not offer TLS be probed over a
	// plain connection; false fails such a probe.
	TLSPreferred bool
}

// Probe implements Prober.
func (p MySQLProber) Probe(ctx context.Context, b Backend) Result {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	cfg := mysql.NewConfig()
	cfg.User = p.User
	cfg.Passwd = p.Password
	cfg.Net = "tcp"
	cfg.Addr = b.Addr
	cfg.Timeout = timeout
	cfg.ReadTimeout = timeout
	cfg.WriteTimeout = timeout
	if p.TLS != nil {
		cfg.TLS = p.TLS
		cfg.AllowFallbackToPlaintext = p.TLSPreferred
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return Result{Err: fmt.Errorf("probe %s: %w", b.Addr, err)}
	}
	db := sql.OpenDB(sqlconnect.Retrying(connector))
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)

	conn, err := db.Conn(ctx)
	if err != nil {
		return Result{Err: fmt.Errorf("probe %s: connect: %w", b.Addr, err)}
	}
	defer conn.Close()

	var r Result
	start := time.Now()
	var one int
	if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return Result{Err: fmt.Errorf("probe %s: SELECT 1: %w", b.Addr, err)}
	}
	r.RTT = time.Since(start)
	r.Reachable = true

	var readOnly int
	var serverID uint64
	if err := conn.QueryRowContext(ctx, "SELECT @@read_only, @@server_id, @@version").
		Scan(&readOnly, &serverID, &r.Version); err != nil {
		r.Err = fmt.Errorf("probe %s: read variables: %w", b.Addr, err)
		return r
	}
	r.ReadOnly = readOnly != 0
	r.ServerID = uint32(serverID)

	if err := readReplication(ctx, conn, &r); err != nil {
		r.Err = fmt.Errorf("probe %s: replication status: %w", b.Addr, err)
	}
	return r
}

// readReplication fills the replication fields of r from the first
// replication status query the server accepts.
func readReplication(ctx context.Context, conn *sql.Conn, r *Result) error {
	// Tried in order until one is accepted: MariaDB's multi-source form,
	// the MySQL 8.0.22+/MariaDB 10.5+ spelling, then the old spelling.
	queries := [...]string{"SHOW ALL SLAVES STATUS", "SHOW REPLICA STATUS", "SHOW SLAVE STATUS"}
	var denied error
	for _, q := range queries {
		rows, err := conn.QueryContext(ctx, q)
		if err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) {
				// Syntax or privilege error on this spelling: try the next.
				if me.Number == 1227 || me.Number == 1142 || me.Number == 1044 {
					denied = err
				}
				continue
			}
			return err
		}
		return scanReplication(rows, r)
	}
	if denied != nil {
		// The backend serves; only its lag is unknown.
		r.ReplicationNote = "cannot read replication status (" + denied.Error() + "): grant REPLICA MONITOR (MariaDB) or REPLICATION CLIENT (MySQL) to the backend user"
		return nil
	}
	return errors.New("no replication status query was accepted")
}

// scanReplication reads every row of a replication status result. Any row
// makes the server a replica; the lag is the largest over rows, and unknown
// if any row has a NULL lag.
func scanReplication(rows *sql.Rows, r *Result) error {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	lagCol, sqlCol := -1, -1
	for i, c := range cols {
		switch c {
		case "Seconds_Behind_Master", "Seconds_Behind_Source":
			lagCol = i
		case "Slave_SQL_Running", "Replica_SQL_Running":
			sqlCol = i
		}
	}
	vals := make([]sql.RawBytes, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	known := true
	var lag time.Duration
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		r.Replica = true
		if sqlCol >= 0 && !strings.EqualFold(string(vals[sqlCol]), "Yes") {
			r.SQLStopped = true
		}
		if lagCol < 0 || vals[lagCol] == nil {
			known = false
			continue
		}
		secs, err := strconv.ParseInt(string(vals[lagCol]), 10, 64)
		if err != nil {
			return fmt.Errorf("parse lag %q: %w", vals[lagCol], err)
		}
		lag = max(lag, time.Duration(secs)*time.Second)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if r.Replica && known {
		r.Lag = lag
		r.LagKnown = true
	}
	return nil
}
