package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The account replicas use to connect to their primary. It is made on the
// primary by StartReplication and ChangePrimary, with sql_log_bin=0.
const (
	replUser     = "mariadbtest_repl"
	replPassword = "mariadbtest_repl"
)

// replPoll is how often replication state is polled while waiting.
const replPoll = 20 * time.Millisecond

// StartReplication makes s a GTID replica of primary (MASTER_USE_GTID=slave_pos),
// starting at the primary's current @@gtid_binlog_pos so statements the
// harness ran at setup (CREATE USER etc.) are not replayed: only what the
// primary binlogs from now on reaches s. It creates a replication account
// on the primary if needed (REPLICATION SLAVE; created with sql_log_bin=0),
// sets read_only=1 on s (kept across Restart) and returns once the
// replica's IO and SQL threads run. The replica reconnects every second
// when it loses the primary, and its threads start again by themselves
// after Kill and Restart.
//
// Anything the primary wrote before (a schema, rows) is therefore not on s:
// create it after StartReplication, or on every server.
//
// s is treated like a replica restored from a backup of primary taken at
// that position: when s binlogs, its binary log is reset and
// @@gtid_binlog_state set to the position (RESET MASTER), as is
// @@gtid_slave_pos. Without that, once s is promoted, a replica of the same
// primary that has applied nothing since could not follow s: GTID strict
// mode refuses to start in a "hole" of the binary log.
//
// A server that already replicates is stopped and re-pointed, and its
// position reset to the primary's current one. Both servers must run with
// binary logging (not Options.NoBinlog) for s to be promotable later, and
// have distinct server IDs. When ctx has no deadline a minute is allowed.
func (s *Server) StartReplication(ctx context.Context, primary *Server) error {
	if err := s.checkPrimary(primary); err != nil {
		return err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if err := primary.ensureReplAccount(ctx); err != nil {
		return err
	}
	var pos string
	if err := primary.queryRow(ctx, "SELECT @@GLOBAL.gtid_binlog_pos", &pos); err != nil {
		return fmt.Errorf("mariadbtest: StartReplication: primary %s: %w", primary.Addr(), err)
	}
	return s.pointAt(ctx, "StartReplication", primary, &pos, true)
}

// ChangePrimary points s, a replica, at newPrimary (typically a replica just
// promoted with Promote): STOP SLAVE; CHANGE MASTER TO ...
// MASTER_USE_GTID=slave_pos; START SLAVE. s keeps its @@gtid_slave_pos, so
// it goes on from the last transaction it applied; newPrimary's binary log
// must hold everything after it, which log_slave_updates ensures for a
// replica of the same old primary. The replication account is created on
// newPrimary if needed. It returns once s's IO and SQL threads run.
//
// If s is not a replica (an old primary rejoining as a replica), its
// @@gtid_slave_pos is first set to its own @@gtid_binlog_pos, which is
// what MASTER_USE_GTID=current_pos would use, and read_only is set to 1.
// When ctx has no deadline a minute is allowed.
func (s *Server) ChangePrimary(ctx context.Context, newPrimary *Server) error {
	if err := s.checkPrimary(newPrimary); err != nil {
		return err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if err := newPrimary.ensureReplAccount(ctx); err != nil {
		return err
	}
	st, err := s.ReplicaStatus(ctx)
	if err != nil {
		return fmt.Errorf("mariadbtest: ChangePrimary: %w", err)
	}
	if st != nil {
		return s.pointAt(ctx, "ChangePrimary", newPrimary, nil, false)
	}
	var own string
	if err := s.queryRow(ctx, "SELECT @@GLOBAL.gtid_binlog_pos", &own); err != nil {
		return fmt.Errorf("mariadbtest: ChangePrimary: %s: %w", s.Addr(), err)
	}
	return s.pointAt(ctx, "ChangePrimary", newPrimary, &own, false)
}

// Promote turns s from a replica into a primary: it stops the IO thread,
// waits until the SQL thread has applied what was already received (unless
// the SQL thread is not running), removes the replication configuration
// (STOP SLAVE; RESET SLAVE ALL, so SHOW ALL SLAVES STATUS is empty) and
// sets read_only=0 (kept across Restart). @@gtid_slave_pos is kept. Calling
// it on a server that is not a replica only sets read_only=0. When ctx has
// no deadline a minute is allowed.
func (s *Server) Promote(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	conn, closeConn, err := s.rootConn(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	st, err := replicaStatus(ctx, conn)
	if err != nil {
		return fmt.Errorf("mariadbtest: Promote %s: %w", s.Addr(), err)
	}
	if st != nil {
		if _, err := conn.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
			return fmt.Errorf("mariadbtest: Promote %s: STOP SLAVE IO_THREAD: %w", s.Addr(), err)
		}
		if st, err = replicaStatus(ctx, conn); err != nil {
			return fmt.Errorf("mariadbtest: Promote %s: %w", s.Addr(), err)
		}
		if st != nil && st.Get("Slave_SQL_Running") == "Yes" {
			// Gtid_IO_Pos is the last GTID the IO thread received.
			if err := waitGTID(ctx, conn, st.Get("Gtid_IO_Pos")); err != nil {
				return fmt.Errorf("mariadbtest: Promote %s: apply the relay log: %w", s.Addr(), err)
			}
		}
		for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL"} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("mariadbtest: Promote %s: %s: %w", s.Addr(), q, err)
			}
		}
	}
	return s.setReadOnly(ctx, conn, false)
}

// WaitCaughtUp waits until s has applied everything in primary's
// @@gtid_binlog_pos as read now (MASTER_GTID_WAIT), or ctx ends. It fails
// early when s's SQL thread has stopped with an error. When ctx has no
// deadline a minute is allowed.
func (s *Server) WaitCaughtUp(ctx context.Context, primary *Server) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	var pos string
	if err := primary.queryRow(ctx, "SELECT @@GLOBAL.gtid_binlog_pos", &pos); err != nil {
		return fmt.Errorf("mariadbtest: WaitCaughtUp: primary %s: %w", primary.Addr(), err)
	}
	conn, closeConn, err := s.rootConn(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	if err := waitGTID(ctx, conn, pos); err != nil {
		return fmt.Errorf("mariadbtest: WaitCaughtUp: %s waiting for %s: %w", s.Addr(), pos, err)
	}
	return nil
}

// ReplicaStatus returns the row of SHOW ALL SLAVES STATUS for the default
// (unnamed) connection, or nil when s is not a replica. Column values are
// as MariaDB returns them; NULLs have Valid false.
func (s *Server) ReplicaStatus(ctx context.Context) (ReplicaStatus, error) {
	conn, closeConn, err := s.rootConn(ctx)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	st, err := replicaStatus(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("mariadbtest: %s: %w", s.Addr(), err)
	}
	return st, nil
}

// ReplicaStatus is a row of SHOW ALL SLAVES STATUS, by column name.
type ReplicaStatus map[string]sql.NullString

// Get returns the value of column, "" for NULL or a missing column.
func (r ReplicaStatus) Get(column string) string {
	return r[column].String
}

func (s *Server) checkPrimary(p *Server) error {
	switch {
	case p == nil:
		return errors.New("mariadbtest: the primary is nil")
	case p == s:
		return fmt.Errorf("mariadbtest: %s cannot replicate from itself", s.Addr())
	case p.ServerID == s.ServerID:
		return fmt.Errorf("mariadbtest: %s and its primary %s have the same server_id %d (set distinct Options.ServerID)", s.Addr(), p.Addr(), s.ServerID)
	}
	return nil
}

// pointAt configures s as a replica of primary and starts it. pos, when not
// nil, is written to @@gtid_slave_pos first, and with clone also to
// @@gtid_binlog_state.
func (s *Server) pointAt(ctx context.Context, op string, primary *Server, pos *string, clone bool) error {
	conn, closeConn, err := s.rootConn(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	if err := s.setReadOnly(ctx, conn, true); err != nil {
		return err
	}
	stmts := []string{"STOP SLAVE"} // a note, not an error, when not a replica
	if clone {
		var logBin int
		if err := conn.QueryRowContext(ctx, "SELECT @@GLOBAL.log_bin").Scan(&logBin); err != nil {
			return fmt.Errorf("mariadbtest: %s: %s: %w", op, s.Addr(), err)
		}
		clone = logBin == 1
	}
	if pos != nil && clone {
		stmts = append(stmts, "SET GLOBAL gtid_binlog_state = "+quote(*pos))
	}
	if pos != nil {
		stmts = append(stmts, "SET GLOBAL gtid_slave_pos = "+quote(*pos))
	}
	stmts = append(stmts,
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %d, MASTER_USER = %s, MASTER_PASSWORD = %s, "+
			"MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
			quote(primary.Host), primary.Port, quote(replUser), quote(replPassword)),
		"START SLAVE")
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mariadbtest: %s: %s: %s: %w", op, s.Addr(), q, err)
		}
	}
	if err := waitThreads(ctx, conn); err != nil {
		return fmt.Errorf("mariadbtest: %s: %s replicating from %s: %w", op, s.Addr(), primary.Addr(), err)
	}
	return nil
}

// setReadOnly sets read_only now and in the flags of later Restarts.
func (s *Server) setReadOnly(ctx context.Context, conn *sql.Conn, on bool) error {
	q := "SET GLOBAL read_only = 0"
	if on {
		q = "SET GLOBAL read_only = 1"
	}
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("mariadbtest: %s: %s: %w", s.Addr(), q, err)
	}
	s.mu.Lock()
	s.readOnly = on
	s.mu.Unlock()
	return nil
}

// ensureReplAccount creates the replication account on s unless it exists.
func (s *Server) ensureReplAccount(ctx context.Context) error {
	conn, closeConn, err := s.rootConn(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	account := quote(replUser) + "@" + quote("127.0.0.1")
	for _, q := range []string{
		"SET SESSION sql_log_bin = 0",
		"CREATE USER IF NOT EXISTS " + account + " IDENTIFIED BY " + quote(replPassword),
		"GRANT REPLICATION SLAVE ON *.* TO " + account,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mariadbtest: replication account on %s: %s: %w", s.Addr(), redact(q), err)
		}
	}
	return nil
}

// waitThreads waits until both replication threads run. It fails early when
// one of them has stopped with an error; an IO thread that keeps trying to
// connect is waited for until ctx ends.
func waitThreads(ctx context.Context, conn *sql.Conn) error {
	for {
		st, err := replicaStatus(ctx, conn)
		if err != nil {
			return err
		}
		if st == nil {
			return errors.New("not configured as a replica")
		}
		io, sqlT := st.Get("Slave_IO_Running"), st.Get("Slave_SQL_Running")
		if io == "Yes" && sqlT == "Yes" {
			return nil
		}
		if sqlT == "No" && st.Get("Last_SQL_Errno") != "0" {
			return fmt.Errorf("SQL thread stopped: %s", st.Get("Last_SQL_Error"))
		}
		if io == "No" && st.Get("Last_IO_Errno") != "0" {
			return fmt.Errorf("IO thread stopped: %s", st.Get("Last_IO_Error"))
		}
		if err := sleepCtx(ctx, replPoll); err != nil {
			return fmt.Errorf("threads not running (IO %s, SQL %s; last IO error: %s; last SQL error: %s): %w",
				io, sqlT, st.Get("Last_IO_Error"), st.Get("Last_SQL_Error"), err)
		}
	}
}

// waitGTID waits until the server of conn has applied pos, a GTID position.
func waitGTID(ctx context.Context, conn *sql.Conn, pos string) error {
	for {
		// Short waits, so a stopped SQL thread is noticed and ctx honoured
		// even if the driver could not interrupt the query.
		var r sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT("+quote(pos)+", 0.2)").Scan(&r); err != nil {
			return err
		}
		if r.Valid && r.Int64 == 0 {
			return nil
		}
		st, err := replicaStatus(ctx, conn)
		if err != nil {
			return err
		}
		if st != nil && st.Get("Slave_SQL_Running") == "No" && st.Get("Last_SQL_Errno") != "0" {
			return fmt.Errorf("SQL thread stopped: %s", st.Get("Last_SQL_Error"))
		}
		if err := ctx.Err(); err != nil {
			var slavePos string
			_ = conn.QueryRowContext(context.Background(), "SELECT @@GLOBAL.gtid_slave_pos").Scan(&slavePos)
			return fmt.Errorf("at %q: %w", slavePos, err)
		}
	}
}

// replicaStatus reads SHOW ALL SLAVES STATUS and returns the row of the
// default connection, or nil.
func replicaStatus(ctx context.Context, conn *sql.Conn) (ReplicaStatus, error) {
	rows, err := conn.QueryContext(ctx, "SHOW ALL SLAVES STATUS")
	if err != nil {
		return nil, fmt.Errorf("SHOW ALL SLAVES STATUS: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var found ReplicaStatus
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make(ReplicaStatus, len(cols))
		for i, c := range cols {
			row[c] = vals[i]
		}
		if row.Get("Connection_name") == "" {
			found = row
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return found, nil
}

// rootConn opens one root connection over the socket; call the returned
// function to close it and its pool.
func (s *Server) rootConn(ctx context.Context) (*sql.Conn, func(), error) {
	db, err := sql.Open("mysql", s.rootDSN())
	if err != nil {
		return nil, nil, fmt.Errorf("mariadbtest: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("mariadbtest: connect as root over %s: %w", s.Socket, err)
	}
	return conn, func() { conn.Close(); db.Close() }, nil
}

func (s *Server) queryRow(ctx context.Context, q string, dest ...any) error {
	conn, closeConn, err := s.rootConn(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	if err := conn.QueryRowContext(ctx, q).Scan(dest...); err != nil {
		return fmt.Errorf("%s: %w", strings.TrimSpace(q), err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
