package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/internal/metricstest"
	dto "github.com/prometheus/client_model/go"
)

// KILL QUERY ends a statement that waits at the gateway (for a hot row's
// turn, for a pooled connection) as MariaDB ends one waiting for a lock:
// error 1317, nothing run, the session usable, and SHOW PROCESSLIST
// told what it waited for meanwhile.
func TestKillQueryEndsGatewayWaits(t *testing.T) {
	cases := []struct {
		name, hotRow string
		pool         int
		hold, stmt   string
		state        string
		offload      string // the wait's reason in directgate_io_loop_session_offloads_total
	}{
		{"hot row", "{max_concurrency: 1, max_wait: 30s}", 4, "UPDATE hotrow SET n = n + 1 WHERE id = 1",
			"UPDATE hotrow SET n = n + 1 WHERE id = 1", "Waiting for a hot row at the gateway", "hot_row"},
		{"pool", "{max_concurrency: 0}", 1, "UPDATE hotrow SET n = n + 1 WHERE id = 2",
			"SELECT n FROM hotrow WHERE id = 3", "Waiting for a pooled backend connection at the gateway", "pool"},
	}
	for _, c := range cases {
		forIOLoops(t, c.name, func(t *testing.T, loops int) {
			hotRowTable(t)
			srv := startTestGateway(t, "killwait", killWaitYAML(c.hotRow, c.pool, loops))
			db := open(t, hotRowDSN(srv, false))
			ctx := context.Background()
			waiter, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer waiter.Close()
			// Every connection logs in (which checks the database on a
			// pooled connection) before the only one is held.
			adm := open(t, dsnFor(srv.Addr().String(), adminUser, adminPass))
			killer, err := open(t, hotRowDSN(srv, false)).Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer killer.Close()
			if err := adm.Ping(); err != nil {
				t.Fatal(err)
			}
			holdRow(t, db, c.hold)
			var id int64
			// The gateway answers CONNECTION_ID() itself: no pooled
			// connection needed.
			if err := waiter.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := waiter.ExecContext(ctx, c.stmt)
				done <- err
			}()
			waitState(t, adm, id, c.state, done)
			if _, err := killer.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", id)); err != nil {
				t.Fatalf("KILL QUERY: %v", err)
			}
			select {
			case err := <-done:
				sqlErr(t, err, 1317, "70100")
			case <-time.After(20 * time.Second):
				t.Fatal("KILL QUERY did not end the wait")
			}
			// The kill reached only the statement it was meant for: the
			// session goes on (the gateway answers CONNECTION_ID(), so
			// this needs no pooled connection).
			var again int64
			if err := waiter.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&again); err != nil || again != id {
				t.Fatalf("the session after the kill: %d, %v", again, err)
			}
			// The loop's metrics say where the waits went.
			offloads := func(reason string) float64 {
				return metricValue(t, srv, "directgate_io_loop_session_offloads_total", map[string]string{"reason": reason})
			}
			if loops == 0 {
				if n := offloads(c.offload) + offloads("kill"); n != 0 {
					t.Errorf("sessions on goroutines counted %v offloads", n)
				}
				return
			}
			if offloads(c.offload) < 1 || offloads("kill") < 1 {
				t.Errorf("offloads: %s %v, kill %v; want each at least 1", c.offload, offloads(c.offload), offloads("kill"))
			}
			if c.offload == "pool" {
				// It waited on its loop, until the kill.
				if n := metricValue(t, srv, "directgate_io_loop_connection_waits_total", map[string]string{"outcome": "cancelled"}); n < 1 {
					t.Errorf("cancelled waits for a connection on the loop: %v, want at least 1", n)
				}
			}
			loop0 := map[string]string{"loop": "0"}
			if n := metricValue(t, srv, "directgate_io_loop_enters_total", loop0); n < 1 {
				t.Errorf("io_uring_enter calls: %v", n)
			}
			if n := metricValue(t, srv, "directgate_io_loop_sessions", loop0); n < 3 {
				t.Errorf("sessions on the loop: %v, want the waiter's, the killer's and the admin's at least", n)
			}
		})
	}
}

// metricValue is the value of the series of srv's metric name with the
// labels (missing: 0).
func metricValue(t *testing.T, srv *gateway.Server, name string, labels map[string]string) float64 {
	t.Helper()
	list, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := make(map[string]*dto.MetricFamily, len(list))
	for _, fam := range list {
		fams[fam.GetName()] = fam
	}
	v, _ := metricstest.Value(fams, name, labels)
	return v
}

// killWaitYAML is the hot-row tests' gateway with pool size pool.
func killWaitYAML(hotRow string, pool, ioLoops int) string {
	return clusterYAML(ioLoops, backendUser, backendPass,
		fmt.Sprintf("{size: %d, min_idle: 0, acquire_timeout: 30s}", pool), "hot_row: "+hotRow)
}

// clusterYAML is a gateway config of the tests: the app and admin users,
// io_loops loops, and one cluster, main, on the shared MariaDB with the
// backend account given, the pool settings pool and more lines of the
// cluster's.
func clusterYAML(ioLoops int, backendUser, backendPass, pool string, more ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
io_loops: %d
users:
  - {user: %s, password: %s}
  - {user: %s, password: %s, admin: true}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: %s
`, logLevel(), ioLoops, appUser, appPass, adminUser, adminPass, backendUser, backendPass, shared.db.Addr(), pool)
	for _, line := range more {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// waitState waits until SHOW PROCESSLIST shows session id in state (the
// statement started in the background ends early on done: a failure).
func waitState(t *testing.T, adm *sql.DB, id int64, state string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the statement ended before waiting (%v); last state %q", err, last)
		default:
		}
		rows, err := adm.Query("SHOW PROCESSLIST")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			if vals[0].String == fmt.Sprint(id) {
				last = vals[6].String
			}
		}
		rows.Close()
		if last == state {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("session %d never showed state %q (last %q)", id, state, last)
}
