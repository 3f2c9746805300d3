package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/protect"
)

// Transaction throttling tests: a primary and one replica, whose lag is
// induced by stopping its SQL thread (STOP SLAVE SQL_THREAD), which
// discovery reports and throttling counts as lagging past max_lag.

// The gateway users of the throttling tests: app has the default
// priority 50, vip priority 100.
const vipUser, vipPass = "vip", "vip-secret"

// throttlePair is a primary and its replica.
type throttlePair struct {
	primary, replica *mariadbtest.Server
}

// startThrottlePair starts a primary and a replica of it.
func startThrottlePair(t *testing.T) *throttlePair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	users := []mariadbtest.User{{Name: backendUser, Password: backendPass, Grants: replBackendGrants}}
	var tp throttlePair
	for i, p := range []**mariadbtest.Server{&tp.primary, &tp.replica} {
		s, err := mariadbtest.Start(ctx, mariadbtest.Options{ServerID: 141 + i, Users: users})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop() })
		*p = s
	}
	if err := tp.replica.StartReplication(ctx, tp.primary); err != nil {
		t.Fatal(err)
	}
	mustExec(t, serverRoot(t, tp.primary), "CREATE DATABASE "+testDB)
	return &tp
}

// table (re)creates e2e.throttle on the primary and waits until the
// replica has it.
func (tp *throttlePair) table(t *testing.T) {
	t.Helper()
	mustExec(t, serverRoot(t, tp.primary),
		"DROP TABLE IF EXISTS "+testDB+".throttle",
		"CREATE TABLE "+testDB+".throttle (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0) ENGINE=InnoDB")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tp.replica.WaitCaughtUp(ctx, tp.primary); err != nil {
		t.Fatal(err)
	}
}

// throttleYAML is the configuration of a gateway over tp with the
// throttle settings given (a YAML flow map).
func throttleYAML(tp *throttlePair, throttle string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
health: {interval: 100ms, timeout: 1s}
users:
  - {user: %s, password: %s}
  - {user: %s, password: %s, priority: 100}
  - {user: %s, password: %s, admin: true}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q, %q]
    pool: {size: 16, min_idle: 0, acquire_timeout: 10s}
    throttle: %s
`, logLevel(), appUser, appPass, vipUser, vipPass, adminUser, adminPass, backendUser, backendPass,
		tp.primary.Addr(), tp.replica.Addr(), throttle)
}

// startThrottleGateway starts a gateway over tp and waits until
// discovery knows the primary and the replica's lag.
func startThrottleGateway(t *testing.T, tp *throttlePair, throttle string) *gateway.Server {
	t.Helper()
	srv := startTestGateway(t, "gateway-throttle", throttleYAML(tp, throttle))
	waitSnapshot(t, srv, "the primary and the replica serving with a known lag", func(c *healthcheck.Cluster, s *healthcheck.Snapshot) bool {
		return c.Primary != "" && len(c.Replicas) == 1 && s.Backend(c.Replicas[0]).Last.LagKnown
	})
	return srv
}

// waitSnapshot waits (30s at most) until cond holds of srv's discovery
// snapshot of cluster main.
func waitSnapshot(t *testing.T, srv *gateway.Server, what string, cond func(*healthcheck.Cluster, *healthcheck.Snapshot) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s := srv.Health()
		if c := s.Cluster("main"); c != nil && cond(c, s) {
			return
		}
		select {
		case <-s.Changed():
		case <-deadline:
			t.Fatalf("still waiting for %s; cluster: %+v", what, s.Cluster("main"))
		}
	}
}

// stopSQLThread stops the replica's SQL thread, which makes it lag, and
// waits until srv's discovery sees it; the thread is started again when
// the test ends (startSQLThread does it sooner).
func (tp *throttlePair) stopSQLThread(t *testing.T, srv *gateway.Server) {
	t.Helper()
	root := serverRoot(t, tp.replica)
	mustExec(t, root, "STOP SLAVE SQL_THREAD")
	t.Cleanup(func() { _, _ = root.Exec("START SLAVE SQL_THREAD") })
	waitSnapshot(t, srv, "the replica's SQL thread seen stopped", func(c *healthcheck.Cluster, s *healthcheck.Snapshot) bool {
		return len(c.Replicas) == 1 && s.Backend(c.Replicas[0]).Last.SQLStopped
	})
}

// startSQLThread starts the replica's SQL thread again and waits until
// it caught up and srv's discovery no longer sees it stopped.
func (tp *throttlePair) startSQLThread(t *testing.T, srv *gateway.Server) {
	t.Helper()
	mustExec(t, serverRoot(t, tp.replica), "START SLAVE SQL_THREAD")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tp.replica.WaitCaughtUp(ctx, tp.primary); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, srv, "the replica's SQL thread seen running", func(c *healthcheck.Cluster, s *healthcheck.Snapshot) bool {
		return len(c.Replicas) == 1 && !s.Backend(c.Replicas[0]).Last.SQLStopped && s.Backend(c.Replicas[0]).Last.LagKnown
	})
}

// throttleTotals returns the cluster's throttle row.
func throttleTotals(srv *gateway.Server) protect.Row {
	for _, r := range srv.Protections() {
		if r.Protection == "throttle" && r.Scope == "*" {
			return r
		}
	}
	return protect.Row{}
}

// While the replica lags, new write transactions (an autocommit write,
// prepared or not, and the first write of an explicit transaction) are
// delayed max_delay and refused with 1205 naming the lag and the
// settings; reads, the later statements and COMMIT of a transaction that
// wrote before, and a priority 100 user are never held back. With
// throttling off (the check that the test can fail) nothing is held
// back and nothing counted.
func TestThrottleByReplicaLag(t *testing.T) {
	tp := startThrottlePair(t)
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("on=", on), func(t *testing.T) {
			tp.table(t)
			conf := "{max_lag: 0s}"
			if on {
				conf = "{max_lag: 1s, max_delay: 300ms}"
			}
			srv := startThrottleGateway(t, tp, conf)
			app := open(t, userDSN(srv, appUser, appPass, false))
			prep := open(t, userDSN(srv, appUser, appPass, true))
			vip := open(t, userDSN(srv, vipUser, vipPass, true))

			// A transaction that wrote before the lag.
			early, err := app.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer early.Rollback()
			mustExec(t, early, "INSERT INTO throttle (id) VALUES (1)")

			tp.stopSQLThread(t, srv)
			// Its later statements and its COMMIT are never held back.
			mustExec(t, early, "UPDATE throttle SET n = 1 WHERE id = 1", "INSERT INTO throttle (id) VALUES (2)",
				"SELECT * FROM throttle WHERE id = 2 FOR UPDATE")
			if err := early.Commit(); err != nil {
				t.Fatalf("COMMIT of a transaction that wrote: %v", err)
			}
			// Reads never.
			for i := range 5 {
				var n int
				if err := app.QueryRow("SELECT COUNT(*) FROM throttle").Scan(&n); err != nil || n != 2 {
					t.Fatalf("read %d: %d rows, %v", i, n, err)
				}
			}
			// New write transactions are.
			var errs []error
			_, err = app.Exec("INSERT INTO throttle (id) VALUES (10)")
			errs = append(errs, err)
			_, err = prep.Exec("INSERT INTO throttle (id) VALUES (?)", 11)
			errs = append(errs, err)
			tx, err := app.Begin()
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, tx, "SELECT COUNT(*) FROM throttle")
			_, err = tx.Exec("INSERT INTO throttle (id) VALUES (12)")
			errs = append(errs, err)
			if err := tx.Rollback(); err != nil {
				t.Fatalf("ROLLBACK: %v", err)
			}
			// Priority 100 never.
			if _, err := vip.Exec("INSERT INTO throttle (id) VALUES (?)", 13); err != nil {
				t.Fatalf("priority 100: %v", err)
			}

			tot := throttleTotals(srv)
			h := srv.HTTPHandler()
			refusedMetric := scrapeCounter(t, h, "directgate_throttle_refused_total", map[string]string{"cluster": "main"})
			t.Logf("throttle row %+v", tot)
			if on {
				for i, err := range errs {
					me := sqlErr(t, err, 1205, "HY000")
					if !strings.Contains(me.Message, "'s SQL thread is stopped (throttle.max_lag 1s)") ||
						!strings.Contains(me.Message, "for 300ms (throttle.max_delay)") {
						t.Errorf("write %d: message %q does not name the lag and the settings", i, me.Message)
					}
				}
				if tot.Mode != "on" || tot.Total != 3 || tot.Refused != 3 || tot.Active != 0 ||
					!strings.Contains(tot.Detail, "SQL thread stopped on "+tp.replica.Addr()+", throttling 100% at priority 50") {
					t.Errorf("throttle row %+v, want 3 delayed and refused", tot)
				}
				if refusedMetric != 3 {
					t.Errorf("directgate_throttle_refused_total = %v, want 3", refusedMetric)
				}
				if p := scrapeCounter(t, h, "directgate_throttle_probability", map[string]string{"cluster": "main"}); p != 1 {
					t.Errorf("directgate_throttle_probability = %v, want 1", p)
				}
			} else {
				for i, err := range errs {
					if err != nil {
						t.Errorf("write %d with throttling off: %v", i, err)
					}
				}
				if tot.Mode != "off" || tot.Total != 0 || tot.Refused != 0 || refusedMetric != 0 {
					t.Errorf("throttle row %+v, metric %v: want nothing counted", tot, refusedMetric)
				}
			}
			if s := scrapeCounter(t, h, "directgate_throttle_sql_stopped", map[string]string{"cluster": "main"}); s != 1 {
				t.Errorf("directgate_throttle_sql_stopped = %v, want 1", s)
			}
			tp.startSQLThread(t, srv)
			// Caught up: writes go again.
			if _, err := app.Exec("INSERT INTO throttle (id) VALUES (20)"); err != nil {
				t.Fatalf("after the replica caught up: %v", err)
			}
		})
	}
}

// A delayed write waits while the lag lasts and goes once it falls;
// KILL QUERY ends its wait with 1317; dry run delays nothing but counts;
// a reload (SIGHUP) turns throttling on, to dry run and off for the next
// statements; the status page and SHOW GATEWAY PROTECTIONS show it.
func TestThrottleWaitKillReload(t *testing.T) {
	tp := startThrottlePair(t)
	tp.table(t)
	srv := startThrottleGateway(t, tp, "{max_lag: 0s}")
	reload := func(throttle string) {
		t.Helper()
		cfg, err := config.Parse([]byte(throttleYAML(tp, throttle)))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	app := open(t, userDSN(srv, appUser, appPass, false))
	adm := open(t, userDSN(srv, adminUser, adminPass, false))
	tp.stopSQLThread(t, srv)
	if _, err := app.Exec("INSERT INTO throttle (id) VALUES (1)"); err != nil {
		t.Fatalf("throttling off: %v", err)
	}

	reload("{max_lag: 1s, max_delay: 1m}")
	ctx := context.Background()
	// waitActive waits until n writes are delayed.
	waitActive := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); throttleTotals(srv).Active != n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("throttle row %+v, want %d delayed", throttleTotals(srv), n)
			}
		}
	}
	// write runs an INSERT on its own session and returns its session
	// id and the channel of its result.
	write := func(id int) (uint64, chan error) {
		t.Helper()
		conn, err := app.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var connID uint64
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&connID); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			defer conn.Close()
			_, err := conn.ExecContext(ctx, "INSERT INTO throttle (id) VALUES (?)", id)
			done <- err
		}()
		return connID, done
	}

	// KILL QUERY ends the wait.
	connID, done := write(2)
	waitActive(1)
	mustExec(t, adm, fmt.Sprintf("KILL QUERY %d", connID))
	if err := <-done; err != nil {
		sqlErr(t, err, 1317, "70100")
	} else {
		t.Fatal("the killed write ran")
	}
	waitActive(0)
	if n := scrapeCounter(t, srv.HTTPHandler(), "directgate_throttle_interrupted_total", map[string]string{"cluster": "main"}); n != 1 {
		t.Errorf("directgate_throttle_interrupted_total = %v, want 1", n)
	}

	// The status page and SHOW GATEWAY PROTECTIONS while one waits.
	_, done = write(3)
	waitActive(1)
	rec := httptest.NewRecorder()
	srv.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/status", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), "SQL thread stopped on "+tp.replica.Addr()) {
		t.Errorf("the status page does not show the throttle's detail")
	}
	var prot, cluster, scope, mode, rate, refusedRate, detail string
	var active, total, refused, refusedWait, dry, dryRefused int64
	rows, err := adm.Query("SHOW GATEWAY PROTECTIONS")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for rows.Next() {
		if err := rows.Scan(&prot, &cluster, &scope, &mode, &active, &total, &refused, &refusedWait, &dry, &dryRefused, &rate, &refusedRate, &detail); err != nil {
			t.Fatal(err)
		}
		if prot == "throttle" {
			found = true
			if cluster != "main" || scope != "*" || mode != "on" || active != 1 || total != 2 || !strings.Contains(detail, "throttling 100% at priority 50") {
				t.Errorf("SHOW GATEWAY PROTECTIONS: %s %s %s %s active %d total %d detail %q", prot, cluster, scope, mode, active, total, detail)
			}
		}
	}
	rows.Close()
	if !found {
		t.Error("SHOW GATEWAY PROTECTIONS has no throttle row")
	}
	// The lag falls: the delayed write goes, once.
	tp.startSQLThread(t, srv)
	if err := <-done; err != nil {
		t.Fatalf("the delayed write after the lag fell: %v", err)
	}
	var n int
	if err := app.QueryRow("SELECT COUNT(*) FROM throttle WHERE id = 3").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the delayed write: %d rows, %v", n, err)
	}
	if tot := throttleTotals(srv); tot.Total != 2 || tot.Refused != 0 || tot.Active != 0 {
		t.Errorf("throttle row %+v, want 2 delayed, none refused", tot)
	}

	// Dry run: nothing waits, both outcomes are counted.
	reload("{max_lag: 1s, max_delay: 100ms, dry_run: on}")
	tp.stopSQLThread(t, srv)
	if _, err := app.Exec("INSERT INTO throttle (id) VALUES (4)"); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	for deadline := time.Now().Add(20 * time.Second); throttleTotals(srv).DryRunRefused != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("dry run: throttle row %+v, want 1 would-refuse", throttleTotals(srv))
		}
	}
	if tot := throttleTotals(srv); tot.Mode != "dry_run" || tot.DryRun != 1 || tot.Total != 2 {
		t.Errorf("dry run: throttle row %+v", tot)
	}

	// Off again.
	reload("{max_lag: 0s}")
	if _, err := app.Exec("INSERT INTO throttle (id) VALUES (5)"); err != nil {
		t.Fatalf("off after a reload: %v", err)
	}
	if tot := throttleTotals(srv); tot.Mode != "off" || tot.DryRun != 1 || tot.Total != 2 {
		t.Errorf("off: throttle row %+v", tot)
	}
}

// A replica that really lags (MASTER_DELAY: it applies each transaction
// 60 seconds late, and Seconds_Behind_Master grows meanwhile) throttles
// by its lag: once discovery sees it at twice max_lag, priority 50 is
// always held back and refused, priority 100 never.
func TestThrottleMasterDelay(t *testing.T) {
	tp := startThrottlePair(t)
	tp.table(t)
	srv := startThrottleGateway(t, tp, "{max_lag: 1s, max_delay: 300ms}")
	app := open(t, userDSN(srv, appUser, appPass, false))
	vip := open(t, userDSN(srv, vipUser, vipPass, false))
	root := serverRoot(t, tp.replica)
	mustExec(t, root, "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 60", "START SLAVE")
	t.Cleanup(func() {
		for _, q := range []string{"STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 0", "START SLAVE"} {
			_, _ = root.Exec(q)
		}
	})
	// The priority 100 user's write is what the replica lags behind.
	if _, err := vip.Exec("INSERT INTO throttle (id) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, srv, "the replica lagging 2s or more", func(c *healthcheck.Cluster, s *healthcheck.Snapshot) bool {
		if len(c.Replicas) != 1 {
			return false
		}
		last := s.Backend(c.Replicas[0]).Last
		return last.LagKnown && last.Lag >= 2*time.Second && !last.SQLStopped
	})
	_, err := app.Exec("INSERT INTO throttle (id) VALUES (2)")
	if me := sqlErr(t, err, 1205, "HY000"); !strings.Contains(me.Message, "replica "+tp.replica.Addr()+" lags ") {
		t.Errorf("message %q does not name the lagging replica", me.Message)
	}
	if _, err := vip.Exec("INSERT INTO throttle (id) VALUES (3)"); err != nil {
		t.Fatalf("priority 100: %v", err)
	}
	tot := throttleTotals(srv)
	t.Logf("throttle row %+v", tot)
	if tot.Refused != 1 || !strings.Contains(tot.Detail, "> 1s on "+tp.replica.Addr()+", throttling 100% at priority 50") {
		t.Errorf("throttle row %+v, want 1 refused and the lag in the detail", tot)
	}
	if lag := scrapeCounter(t, srv.HTTPHandler(), "directgate_throttle_lag_seconds", map[string]string{"cluster": "main"}); lag < 2 {
		t.Errorf("directgate_throttle_lag_seconds = %v, want 2 or more", lag)
	}
}
