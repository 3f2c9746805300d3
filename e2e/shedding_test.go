package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/protect"
	"github.com/go-sql-driver/mysql"
)

// The load-shedding tests overload the backend with statements that wait
// for a row lock held by a transaction straight to MariaDB: they stay in
// flight (and hold their pooled connections) until the test lets the
// lock go, whatever the machine's speed. Nothing is timed: the tests
// count what was shed.

// The users: vipUser (throttle_test.go) has priority 100, never shed;
// appUser has the default, 50.

// shedYAML is the configuration of a shedding test: a pool of poolSize
// connections (acquires wait up to 60s) and the shedding settings given
// (a YAML flow map).
func shedYAML(shedding string, poolSize int) string {
	users := fmt.Sprintf("  - {user: %s, password: %s, priority: 100}\n  - {user: %s, password: %s, admin: true, priority: 100}",
		vipUser, vipPass, adminUser, adminPass)
	return opsYAML("", users, fmt.Sprintf("size: %d, min_idle: 0, acquire_timeout: 60s", poolSize)) + "    shedding: " + shedding + "\n"
}

// shedReload applies shedding settings to srv as SIGHUP does.
func shedReload(t *testing.T, srv *gateway.Server, shedding string, poolSize int) {
	t.Helper()
	cfg, err := config.Parse([]byte(shedYAML(shedding, poolSize)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// shedTotals returns the cluster row of the shedding protection.
func shedTotals(srv *gateway.Server) protect.Row {
	for _, r := range srv.Protections() {
		if r.Protection == "shedding" && r.Scope == "*" {
			return r
		}
	}
	return protect.Row{}
}

// lockWaiters counts the statements of the backend waiting for a row of
// e2e.shed, as MariaDB sees them.
func lockWaiters(t *testing.T, direct *sql.DB) int {
	t.Helper()
	var n int
	if err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT id FROM shed WHERE id = 1 FOR UPDATE%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// overload is a row lock held straight on MariaDB and the gateway
// statements that wait for it.
type overload struct {
	t      *testing.T
	tx     *sql.Tx
	wg     sync.WaitGroup
	errs   chan error
	direct *sql.DB
}

// startOverload creates e2e.shed, locks its row 1 straight on MariaDB
// and sends n statements waiting for that lock through db, each on its
// own connection, returning once MariaDB shows them all waiting. stop
// (also at the end of the test) lets them finish.
func startOverload(t *testing.T, db *sql.DB, n int) *overload {
	t.Helper()
	o := &overload{t: t, errs: make(chan error, n), direct: direct(t)}
	mustExec(t, o.direct, "DROP TABLE IF EXISTS shed", "CREATE TABLE shed (id INT PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO shed VALUES (1)")
	tx, err := o.direct.Begin()
	if err != nil {
		t.Fatal(err)
	}
	o.tx = tx
	// Not the waiters' text: MariaDB may show a statement in its
	// process list a moment after its answer.
	if _, err := tx.Exec("UPDATE shed SET id = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.stop)
	o.add(db, n)
	return o
}

// add sends n more waiting statements through db and waits until MariaDB
// shows them.
func (o *overload) add(db *sql.DB, n int) {
	o.t.Helper()
	want := lockWaiters(o.t, o.direct) + n
	for range n {
		o.wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var id int
			o.errs <- db.QueryRowContext(ctx, "SELECT id FROM shed WHERE id = 1 FOR UPDATE").Scan(&id)
		})
	}
	for deadline := time.Now().Add(30 * time.Second); lockWaiters(o.t, o.direct) < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			o.t.Fatalf("the backend shows %d statements waiting for the lock, want %d", lockWaiters(o.t, o.direct), want)
		}
	}
}

// stop lets the waiting statements go and checks they all succeeded
// (they ran as a user that is never shed).
func (o *overload) stop() {
	if o.tx == nil {
		return
	}
	_ = o.tx.Rollback()
	o.tx = nil
	o.wg.Wait()
	close(o.errs)
	for err := range o.errs {
		if err != nil {
			o.t.Errorf("a statement holding the backend busy failed: %v", err)
		}
	}
}

// shedCount runs n statements (query with arg when arg is not nil) as
// conn and returns how many were shed; any other error fails the test.
// Each refusal must be 1203 naming the setting want.
func shedCount(t *testing.T, conn *sql.Conn, n int, query string, arg any, want string) (shed int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		var v int
		var err error
		if arg != nil {
			err = conn.QueryRowContext(ctx, query, arg).Scan(&v)
		} else {
			err = conn.QueryRowContext(ctx, query).Scan(&v)
		}
		var me *mysql.MySQLError
		switch {
		case err == nil:
		case errors.As(err, &me) && me.Number == 1203:
			sqlErr(t, err, 1203, "42000")
			if !strings.HasPrefix(me.Message, "Gateway overloaded: ") || !strings.Contains(me.Message, want) ||
				!strings.HasSuffix(me.Message, "this one was not run: retry it") {
				t.Fatalf("shed with message %q, want it to name %s", me.Message, want)
			}
			shed++
		default:
			t.Fatalf("%s: %v", query, err)
		}
	}
	return shed
}

// shownProtections returns the rows of protection that SHOW GATEWAY
// PROTECTIONS lists to an admin of srv.
func shownProtections(t *testing.T, srv *gateway.Server, protection string) []protect.Row {
	t.Helper()
	adm := open(t, dsnFor(srv.Addr().String(), adminUser, adminPass))
	rows, err := adm.Query("SHOW GATEWAY PROTECTIONS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []protect.Row
	for rows.Next() {
		var r protect.Row
		if err := rows.Scan(&r.Protection, &r.Cluster, &r.Scope, &r.Mode, &r.Active, &r.Total, &r.Refused, &r.RefusedWait,
			&r.DryRun, &r.DryRunRefused, &r.Rate, &r.RefusedRate, &r.Detail); err != nil {
			t.Fatal(err)
		}
		if r.Protection == protection {
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// With 4 statements in flight and shedding.max_in_flight 2, about half of
// a priority-50 user's statements (text and prepared) are refused with
// 1203, on a connection that stays usable; a priority-100 user's are
// never, nor statements inside a transaction; the backend stays serving.
// With shedding off (the check that the test can fail) none is.
func TestSheddingInFlight(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("on=", on), func(t *testing.T) {
			conf := "{max_in_flight: 0}"
			if on {
				conf = "{max_in_flight: 2}"
			}
			srv := startTestGateway(t, "shedding", shedYAML(conf, 16))
			vip := open(t, userDSN(srv, vipUser, vipPass, false))
			startOverload(t, vip, 4)

			const n = 40
			const want = "has 4 statements running (shedding.max_in_flight 2), so 50% of statements at priority 50 are refused"
			app := connOf(t, open(t, userDSN(srv, appUser, appPass, false)))
			text := shedCount(t, app, n, "SELECT 1", nil, want)
			prep := connOf(t, open(t, userDSN(srv, appUser, appPass, true)))
			prepared := shedCount(t, prep, n, "SELECT ?", 1, want)
			t.Logf("shed %d of %d text statements, %d of %d prepared", text, n, prepared, n)
			if on && (text == 0 || text == n || prepared == 0 || prepared == n) {
				t.Errorf("shed %d of %d text statements, %d of %d prepared: want some, not all", text, n, prepared, n)
			}
			if !on && text+prepared != 0 {
				t.Errorf("shedding off: %d statements shed", text+prepared)
			}
			if got := shedTotals(srv); got.Total != int64(text+prepared) || got.Refused != got.Total {
				t.Errorf("counters %+v, want %d shed", got, text+prepared)
			}

			// Priority 100: never.
			if shed := shedCount(t, connOf(t, vip), n, "SELECT 1", nil, want); shed != 0 {
				t.Errorf("%d statements of priority 100 shed", shed)
			}
			// Inside a transaction: never, once it has begun (BEGIN itself
			// may be shed: it starts new work).
			ctx := context.Background()
			begins := 0 // shed
			for ; ; begins++ {
				_, err := app.ExecContext(ctx, "BEGIN")
				if err == nil {
					break
				}
				sqlErr(t, err, 1203, "42000")
				if begins == 100 {
					t.Fatal("BEGIN shed 100 times")
				}
			}
			if shed := shedCount(t, app, n, "SELECT 1", nil, want); shed != 0 {
				t.Errorf("%d statements inside a transaction shed", shed)
			}
			if _, err := app.ExecContext(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
			if v := srv.Health().Backend(shared.db.Addr()); v == nil || v.State != healthcheck.StateServing {
				t.Errorf("backend after shedding: %+v, want serving", v)
			}
			if on {
				// SHOW GATEWAY PROTECTIONS: the cluster and the backend,
				// overloaded now.
				var got []string
				for _, r := range shownProtections(t, srv, "shedding") {
					got = append(got, fmt.Sprintf("%s %s active=%d total=%d refused=%d %s", r.Cluster, r.Mode, r.Active, r.Total, r.Refused, r.Detail))
				}
				d := fmt.Sprintf("backend %s has 4 statements running (shedding.max_in_flight 2), shedding 50%% at priority 50", shared.db.Addr())
				tot := text + prepared + begins
				wantRows := []string{fmt.Sprintf("main on active=1 total=%d refused=%d %s", tot, tot, d),
					fmt.Sprintf("main on active=1 total=%d refused=%d %s", tot, tot, d)}
				if fmt.Sprint(got) != fmt.Sprint(wantRows) {
					t.Errorf("SHOW GATEWAY PROTECTIONS shedding rows:\n%q\nwant\n%q", got, wantRows)
				}
			}
		})
	}
}

// Past shedding.max_queue_wait (statements queued for the pool's two
// connections, both held by waiting statements) some of a priority-50
// user's statements are refused at once, naming the setting; the others
// queue and run once the pool frees; a priority-100 user's are never
// shed. With it off none is.
func TestSheddingQueueWait(t *testing.T) {
	const limit = 20 * time.Millisecond
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("on=", on), func(t *testing.T) {
			conf := "{max_queue_wait: 0s}"
			if on {
				conf = fmt.Sprintf("{max_queue_wait: %s}", limit)
			}
			srv := startTestGateway(t, "shedding", shedYAML(conf, 2))
			// The priority-50 user's connections log in first: a login
			// takes a pooled connection too (for its database).
			const n = 20
			app := open(t, userDSN(srv, appUser, appPass, false))
			conns := make([]*sql.Conn, n)
			for i := range conns {
				conns[i] = connOf(t, app)
			}
			vip := open(t, userDSN(srv, vipUser, vipPass, false))
			o := startOverload(t, vip, 2) // the pool's two connections
			// Two more of the never-shed user queue for a connection;
			// wait until they have queued 20 times the limit (the queue
			// wait is the waiters' mean age: the priority-50 statements
			// that queue next bring it down, and must not bring it under
			// the limit before most have been drawn).
			var queued sync.WaitGroup
			for range 2 {
				queued.Go(func() {
					if _, err := vip.Exec("SELECT 1"); err != nil {
						t.Errorf("a queued statement of priority 100: %v", err)
					}
				})
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				var waiting int
				var wait time.Duration
				for _, p := range srv.PoolStats() {
					waiting, wait = waiting+p.Waiting, max(wait, p.QueueWait)
				}
				if waiting >= 2 && wait > 20*limit {
					t.Logf("%d acquires waiting, queue wait %v", waiting, wait)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d acquires waiting, queue wait %v: the pool does not queue", waiting, wait)
				}
			}
			// n statements of the priority-50 user at once: the shed ones
			// answer at once, the others queue.
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for _, c := range conns {
				wg.Go(func() {
					_, err := c.ExecContext(context.Background(), "SELECT 1")
					errs <- err
				})
			}
			// Shed statements answer before the pool frees, so count them
			// first: wait for every answer, or for all the rest to queue.
			shed := 0
			var me *mysql.MySQLError
			for deadline := time.Now().Add(30 * time.Second); ; {
				waiting := 0
				for _, p := range srv.PoolStats() {
					waiting += p.Waiting
				}
				if shed+waiting-2 >= n {
					break
				}
				select {
				case err := <-errs:
					if !errors.As(err, &me) || me.Number != 1203 {
						t.Fatalf("a statement answered while the pool was busy: %v", err)
					}
					sqlErr(t, err, 1203, "42000")
					if !strings.Contains(me.Message, "for a connection to backend "+shared.db.Addr()+" (shedding.max_queue_wait 20ms)") {
						t.Errorf("message %q", me.Message)
					}
					shed++
				case <-time.After(5 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d shed, %d waiting: neither all answered nor all queued", shed, waiting)
				}
			}
			o.stop()
			queued.Wait()
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("a queued statement failed after the pool freed: %v", err)
				}
			}
			t.Logf("shed %d of %d", shed, n)
			if on && shed == 0 || !on && shed != 0 {
				t.Errorf("shed %d of %d statements (on: %v)", shed, n, on)
			}
			if got := shedTotals(srv); got.Total != int64(shed) {
				t.Errorf("counters %+v, want %d shed", got, shed)
			}
		})
	}
}

// A reload turns shedding on and off for the next statements.
func TestSheddingReload(t *testing.T) {
	srv := startTestGateway(t, "shedding", shedYAML("{max_in_flight: 0}", 16))
	startOverload(t, open(t, userDSN(srv, vipUser, vipPass, false)), 4)
	app := connOf(t, open(t, userDSN(srv, appUser, appPass, false)))
	const n = 40
	const want = "(shedding.max_in_flight 2)"
	if shed := shedCount(t, app, n, "SELECT 1", nil, want); shed != 0 || shedTotals(srv).Mode != "off" {
		t.Fatalf("off: %d shed, counters %+v", shed, shedTotals(srv))
	}
	shedReload(t, srv, "{max_in_flight: 2}", 16)
	if shed := shedCount(t, app, n, "SELECT 1", nil, want); shed == 0 || shedTotals(srv).Mode != "on" {
		t.Errorf("after the reload that turned it on: %d shed, counters %+v", shed, shedTotals(srv))
	}
	shedReload(t, srv, "{max_in_flight: 0}", 16)
	if shed := shedCount(t, app, n, "SELECT 1", nil, want); shed != 0 || shedTotals(srv).Mode != "off" {
		t.Errorf("after the reload that turned it off: %d shed, counters %+v", shed, shedTotals(srv))
	}
}
