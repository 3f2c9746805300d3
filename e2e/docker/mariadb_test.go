package docker

// Runs the compose stack's init files against real mariadbd processes with
// the compose services' flags, the way the mariadb image runs them: the
// primary's SQL as root, then the replica's script sourced with the image's
// docker_process_sql. Then checks what the gateway relies on.

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/go-sql-driver/mysql"
)

// mariadbArgs are a compose service's mariadbd flags for a mariadbtest
// server: the harness owns the port, paths and server id.
func mariadbArgs(svc *composeService) (id int, args []string) {
	for _, a := range svc.Command {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch strings.ReplaceAll(k, "_", "-") {
		case "server-id":
			id, _ = strconv.Atoi(v)
			continue
		case "port", "socket", "datadir", "bind-address", "pid-file", "log-error", "tmpdir", "user":
			continue
		}
		args = append(args, a)
	}
	return id, args
}

func TestInitFilesOnMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two mariadbd; skipped with -short")
	}
	for _, tool := range []string{"mariadb", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	s := loadStack(t, composePath)
	var replicaName string
	for name := range s.mariadb {
		if name != s.primaryName {
			replicaName = name
		}
	}
	if replicaName == "" {
		t.Fatal("compose.yaml: no replica")
	}
	replicaSvc := s.mariadb[replicaName]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	start := func(name string) *mariadbtest.Server {
		id, args := mariadbArgs(s.mariadb[name])
		srv, err := mariadbtest.Start(ctx, mariadbtest.Options{ServerID: id, ExtraArgs: args})
		if errors.Is(err, mariadbtest.ErrNotInstalled) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Stop() })
		return srv
	}
	primary := start(s.primaryName)
	replica := start(replicaName)

	// The primary's init, as root over the socket (the image's
	// docker_process_sql).
	initSQL, err := os.Open(initMounts(s.mariadb[s.primaryName], ".sql")[0])
	if err != nil {
		t.Fatal(err)
	}
	defer initSQL.Close()
	cmd := exec.CommandContext(ctx, "mariadb", "--no-defaults", "--protocol=socket", "-uroot", "--socket="+primary.Socket)
	cmd.Stdin = initSQL
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("primary init: %v\n%s", err, out)
	}

	// The replica's init, sourced like the image's entrypoint does, with
	// the replica service's environment and the primary's local address.
	script := initMounts(replicaSvc, ".sh")[0]
	cmd = exec.CommandContext(ctx, "bash", "-c", `set -eo pipefail
		docker_process_sql() { mariadb --no-defaults --protocol=socket -uroot -hlocalhost --socket="$SOCKET" "$@"; }
		. "$1"`, "bash", script)
	cmd.Env = append(os.Environ(), "SOCKET="+replica.Socket, "DIRECTGATE_REPL_WAIT=30")
	for k, v := range replicaSvc.Environment {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "DIRECTGATE_PRIMARY_HOST="+primary.Host, "DIRECTGATE_PRIMARY_PORT="+strconv.Itoa(primary.Port))
	out, err := cmd.CombinedOutput()
	t.Logf("replica init:\n%s", out)
	if err != nil {
		t.Fatalf("replica init: %v", err)
	}

	open := func(srv *mariadbtest.Server, db string) *sql.DB {
		d, err := sql.Open("mysql", srv.DSN(s.cluster.BackendUser, s.cluster.BackendPassword, db))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	onPrimary, onReplica := open(primary, "demo"), open(replica, "demo")

	// The init's script waited: the accounts and the demo schema are on the
	// replica when it returns, so the backend account logs in there.
	var n int
	if err := onReplica.QueryRowContext(ctx, "SELECT COUNT(*) FROM items").Scan(&n); err != nil || n != 3 {
		t.Fatalf("replica after its init: items: %d rows, %v", n, err)
	}
	for _, ai := range s.cluster.AutoIncrement {
		if err := onReplica.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+ai.Table).Scan(&n); err != nil {
			t.Errorf("replica: %s: %v", ai.Table, err)
		}
		if err := onReplica.QueryRowContext(ctx, "SELECT next_id FROM "+ai.Sequence+" WHERE id = 0").Scan(&n); err != nil {
			t.Errorf("replica: %s: %v", ai.Sequence, err)
		}
	}
	// The health probes' statement, with the backend account.
	if rows, err := onReplica.QueryContext(ctx, "SHOW ALL SLAVES STATUS"); err != nil {
		t.Errorf("backend account on the replica: SHOW ALL SLAVES STATUS: %v", err)
	} else {
		rows.Close()
	}
	// read_only holds for the backend account on the replica.
	_, err = onReplica.ExecContext(ctx, "INSERT INTO items (name) VALUES ('replica')")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1290 {
		t.Errorf("write on the replica with the backend account: %v, want error 1290 (read_only)", err)
	}
	// The replica's binary log holds only the primary's transactions, so
	// it can be promoted and serve the other replicas.
	var pPos, rPos string
	if err := onPrimary.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pPos); err != nil {
		t.Fatal(err)
	}
	if err := onReplica.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&rPos); err != nil {
		t.Fatal(err)
	}
	if pPos == "" || rPos != pPos {
		t.Errorf("gtid_binlog_pos: primary %q, replica %q: want equal", pPos, rPos)
	}

	// The image restarts the server after the init: replication resumes by
	// itself and carries new writes.
	onReplica.SetMaxIdleConns(0) // its connections end with the restart
	if err := replica.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var st mariadbtest.ReplicaStatus
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, err = replica.ReplicaStatus(ctx); err != nil {
			t.Fatal(err)
		}
		if st.Get("Slave_IO_Running") == "Yes" && st.Get("Slave_SQL_Running") == "Yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replication did not resume by itself after the restart: IO %q, SQL %q, last IO error %q, last SQL error %q",
				st.Get("Slave_IO_Running"), st.Get("Slave_SQL_Running"), st.Get("Last_IO_Error"), st.Get("Last_SQL_Error"))
		}
	}
	if st.Get("Using_Gtid") != "Slave_Pos" {
		t.Errorf("replica: Using_Gtid %q, want Slave_Pos", st.Get("Using_Gtid"))
	}
	if _, err := onPrimary.ExecContext(ctx, "INSERT INTO items (name) VALUES ('after restart')"); err != nil {
		t.Fatalf("write on the primary with the backend account: %v", err)
	}
	if err := replica.WaitCaughtUp(ctx, primary); err != nil {
		t.Fatalf("replication after the replica's restart: %v", err)
	}
	if err := onReplica.QueryRowContext(ctx, "SELECT COUNT(*) FROM items").Scan(&n); err != nil || n != 4 {
		t.Errorf("replica: items: %d rows, %v; want 4", n, err)
	}
}
