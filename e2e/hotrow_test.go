package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/protect"
	"github.com/go-sql-driver/mysql"
)

// hotRowGateway starts a gateway whose cluster has the hot_row settings
// given (a YAML flow map), and returns it with a pool of at most n
// connections through it; prepared makes the pool use server-side
// prepared statements for queries with arguments.
func hotRowGateway(t *testing.T, hotRow string, n int, prepared bool) (*gateway.Server, *sql.DB) {
	t.Helper()
	srv := startTestGateway(t, "hotrow", hotRowYAML(hotRow, n))
	db := open(t, hotRowDSN(srv, prepared))
	db.SetMaxOpenConns(n)
	return srv, db
}

// hotRowYAML is the configuration of hotRowGateway.
func hotRowYAML(hotRow string, n int) string {
	return killWaitYAML(hotRow, n+4, 0)
}

// hotRowDSN is the app user's DSN for srv; prepared makes queries with
// arguments server-side prepared statements.
func hotRowDSN(srv *gateway.Server, prepared bool) string {
	return userDSN(srv, appUser, appPass, prepared)
}

// userDSN is user's DSN for srv and the test database; prepared makes
// queries with arguments server-side prepared statements.
func userDSN(srv *gateway.Server, user, pass string, prepared bool) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, pass, "tcp", srv.Addr().String(), testDB
	c.Timeout = 10 * time.Second
	c.InterpolateParams = !prepared
	return c.FormatDSN()
}

// hotRowTable (re)creates e2e.hotrow with rows 1..3.
func hotRowTable(t *testing.T) {
	t.Helper()
	mustExec(t, direct(t),
		"DROP TABLE IF EXISTS hotrow",
		"CREATE TABLE hotrow (id INT PRIMARY KEY, code VARCHAR(20) UNIQUE, n INT NOT NULL DEFAULT 0) ENGINE=InnoDB",
		"INSERT INTO hotrow (id, code) VALUES (1, 'one'), (2, 'two'), (3, 'three')")
}

// rowLockWaits reads MariaDB's Innodb_row_lock_waits.
func rowLockWaits(t *testing.T) int64 {
	t.Helper()
	var name string
	var v int64
	if err := direct(t).QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'").Scan(&name, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// hotRowTotals returns the cluster-wide hot_row counters.
func hotRowTotals(srv *gateway.Server) protect.Row {
	for _, r := range srv.Protections() {
		if r.Protection == "hot_row" && r.Scope == "*" {
			return r
		}
	}
	return protect.Row{}
}

// contend runs n transactions at once, each updating row 1 and holding
// it for hold before committing, and returns their errors.
func contend(t *testing.T, db *sql.DB, n int, hold time.Duration) []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				errs[i] = err
				return
			}
			if _, err = tx.Exec("UPDATE hotrow SET n = n + 1 WHERE id = 1"); err != nil {
				_ = tx.Rollback()
				errs[i] = err
				return
			}
			time.Sleep(hold)
			errs[i] = tx.Commit()
		}()
	}
	wg.Wait()
	return errs
}

// With protection on, transactions on one row queue at the gateway: no
// lock wait in MariaDB, every transaction done, the queue counted. With it
// off (the check that the test can fail), MariaDB's lock waits rise and
// nothing is queued.
func TestHotRowQueues(t *testing.T) {
	const n = 6
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("on=", on), func(t *testing.T) {
			hotRowTable(t)
			conf := "{max_concurrency: 0}"
			if on {
				conf = "{max_concurrency: 1, max_queue: 20, max_wait: 20s}"
			}
			srv, db := hotRowGateway(t, conf, n, false)
			before := rowLockWaits(t)
			for i, err := range contend(t, db, n, 100*time.Millisecond) {
				if err != nil {
					t.Fatalf("transaction %d: %v", i, err)
				}
			}
			waits := rowLockWaits(t) - before
			var got int
			if err := db.QueryRow("SELECT n FROM hotrow WHERE id = 1").Scan(&got); err != nil || got != n {
				t.Fatalf("n = %d (%v), want %d", got, err, n)
			}
			tot := hotRowTotals(srv)
			if on && (waits != 0 || tot.Total < 1 || tot.Active != 0 || tot.Refused != 0) {
				t.Errorf("protected: %d row lock waits in MariaDB, counters %+v; want none and some queued", waits, tot)
			}
			if !on && (waits == 0 || tot.Total != 0) {
				t.Errorf("unprotected: %d row lock waits in MariaDB, counters %+v; want some and nothing queued", waits, tot)
			}
		})
	}
}

// Past max_queue the next transaction on the row is refused at once with
// 1205 naming the row; the slot is given back at COMMIT, ROLLBACK and
// disconnect, and follows the key (text and prepared), not the table.
func TestHotRowRefusal(t *testing.T) {
	for _, prepared := range []bool{false, true} {
		t.Run(fmt.Sprint("prepared=", prepared), func(t *testing.T) {
			hotRowTable(t)
			srv, db := hotRowGateway(t, "{max_concurrency: 1, max_queue: 0, max_wait: 20s}", 4, prepared)
			update := func(db *sql.DB, id any) error {
				_, err := db.Exec("UPDATE hotrow SET n = n + 1 WHERE id = ?", id)
				return err
			}
			refused := func(err error) {
				t.Helper()
				me := sqlErr(t, err, 1205, "HY000")
				if !strings.Contains(me.Message, "hot row e2e.hotrow key id=1 has 0 transactions queued at the gateway") {
					t.Errorf("message %q does not name the row", me.Message)
				}
			}
			for _, end := range []string{"commit", "rollback", "disconnect"} {
				ctx := context.Background()
				holder, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := holder.ExecContext(ctx, "BEGIN"); err != nil {
					t.Fatal(err)
				}
				if _, err := holder.ExecContext(ctx, "UPDATE hotrow SET n = n + 1 WHERE id = ?", 1); err != nil {
					t.Fatal(err)
				}
				refused(update(db, 1))
				// Another key of the table is free.
				if err := update(db, 2); err != nil {
					t.Fatalf("row 2: %v", err)
				}
				switch end {
				case "commit", "rollback":
					_, err = holder.ExecContext(ctx, end)
				case "disconnect":
					err = holder.Raw(func(dc any) error { return dc.(io.Closer).Close() })
				}
				if err != nil {
					t.Fatal(err)
				}
				_ = holder.Close()
				// Free again: at once after COMMIT and ROLLBACK (regression:
				// the row was given back only after their OK reached the
				// client, which could start its next transaction on another
				// connection first and be refused), a moment later after a
				// disconnect, which the gateway sees when it reads the socket.
				err = update(db, 1)
				for deadline := time.Now().Add(5 * time.Second); end == "disconnect" && err != nil && time.Now().Before(deadline); err = update(db, 1) {
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil {
					t.Fatalf("after %s: %v", end, err)
				}
			}
			// Three refusals, and more if the disconnect took a while to see.
			if tot := hotRowTotals(srv); tot.Refused < 3 || tot.Active != 0 {
				t.Errorf("counters %+v, want 3 refused or more", tot)
			}
		})
	}
}

// The unique key works as well as the primary key; a non-key column, a
// range or FOR UPDATE's shared cousin are left to MariaDB.
func TestHotRowKeysOnly(t *testing.T) {
	hotRowTable(t)
	_, db := hotRowGateway(t, "{max_concurrency: 1, max_queue: 0}", 4, false)
	holdRow(t, db, "SELECT * FROM hotrow WHERE code = 'three' FOR UPDATE")
	for _, q := range []string{
		"UPDATE hotrow SET n = 5 WHERE code = 'three'",
		"DELETE FROM hotrow WHERE code = 'THREE'",
		"SELECT * FROM hotrow WHERE code = 'three' FOR UPDATE",
		// A new id, but the unique code meets row 3.
		"INSERT INTO hotrow (id, code) VALUES (9, 'three') ON DUPLICATE KEY UPDATE n = n + 1",
	} {
		_, err := db.Exec(q)
		if me := sqlErr(t, err, 1205, "HY000"); !strings.Contains(me.Message, "hot row e2e.hotrow key code=three") {
			t.Errorf("%s: not refused by the gateway: %s", q, me.Message)
		}
	}
	// Not a key: not queued, so MariaDB's own lock wait (cut short).
	conn := shortLockWait(t, db)
	_, err := conn.ExecContext(context.Background(), "UPDATE hotrow SET code = 'x' WHERE n = 0 AND id = 3 OR id = 3")
	if me := sqlErr(t, err, 1205, "HY000"); strings.Contains(me.Message, "gateway") {
		t.Errorf("an OR was queued at the gateway: %s", me.Message)
	}
}

// Dry run never refuses nor queues: it counts.
func TestHotRowDryRun(t *testing.T) {
	hotRowTable(t)
	srv, db := hotRowGateway(t, "{max_concurrency: 1, max_queue: 0, dry_run: on}", 4, false)
	before := rowLockWaits(t)
	for i, err := range contend(t, db, 3, 100*time.Millisecond) {
		if err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
	}
	tot := hotRowTotals(srv)
	if tot.Mode != "dry_run" || tot.DryRun < 1 || tot.DryRunRefused < 1 || tot.Total != 0 || tot.Refused != 0 {
		t.Errorf("counters %+v", tot)
	}
	if rowLockWaits(t) == before {
		t.Error("no lock wait in MariaDB: did the dry run queue?")
	}
}

// SHOW GATEWAY PROTECTIONS lists hot_row, for admins only.
func TestHotRowShowProtections(t *testing.T) {
	hotRowTable(t)
	srv, db := hotRowGateway(t, "{max_concurrency: 1, max_queue: 0}", 2, false)
	holdRow(t, db, "UPDATE hotrow SET n = 1 WHERE id = 1")
	_, err := db.Exec("UPDATE hotrow SET n = 1 WHERE id = 1")
	sqlErr(t, err, 1205, "HY000")
	_, err = db.Exec("SHOW GATEWAY PROTECTIONS")
	sqlErr(t, err, 1227, "42000")
	var got []string
	for _, r := range shownProtections(t, srv, "hot_row") { // the other protections have their own tests
		got = append(got, fmt.Sprintf("%s %s %s %s refused=%d", r.Protection, r.Cluster, r.Scope, r.Mode, r.Refused))
	}
	want := []string{"hot_row main * on refused=1", "hot_row main e2e.hotrow on refused=1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("SHOW GATEWAY PROTECTIONS = %q, want %q", got, want)
	}
}

// A reload turns the protection on and off for the next statements.
func TestHotRowReload(t *testing.T) {
	hotRowTable(t)
	srv, db := hotRowGateway(t, "{max_concurrency: 0}", 3, false)
	reload := func(hotRow string) {
		t.Helper()
		cfg, err := config.Parse([]byte(hotRowYAML(hotRow, 3)))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	reload("{max_concurrency: 1, max_queue: 0}")
	holdRow(t, db, "UPDATE hotrow SET n = 1 WHERE id = 1")
	_, err := db.Exec("UPDATE hotrow SET n = 1 WHERE id = 1")
	sqlErr(t, err, 1205, "HY000")
	if tot := hotRowTotals(srv); tot.Mode != "on" || tot.Refused != 1 {
		t.Errorf("counters %+v", tot)
	}
	reload("{max_concurrency: 0}")
	if tot := hotRowTotals(srv); tot.Mode != "off" {
		t.Errorf("mode after reload %q", tot.Mode)
	}
}

// holdRow runs q in a transaction of db that stays open until the end of
// the test: the row q locks is held.
func holdRow(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// Two transactions that would wait at the gateway for each other's rows:
// whichever waits second is refused at once (MariaDB would report the
// deadlock at once too), and the other gets its row when the refused
// one rolls back. Without the check both would wait max_wait.
func TestHotRowDeadlock(t *testing.T) {
	hotRowTable(t)
	srv, db := hotRowGateway(t, "{max_concurrency: 1, max_wait: 30s}", 4, false)
	ctx := context.Background()
	var txs [2]*sql.Tx
	for i := range txs {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		if _, err := tx.Exec("UPDATE hotrow SET n = n + 1 WHERE id = ?", i+1); err != nil {
			t.Fatal(err)
		}
		txs[i] = tx
	}
	type result struct {
		i   int
		err error
	}
	done := make(chan result, 2)
	start := time.Now()
	for i, tx := range txs {
		go func() {
			_, err := tx.Exec("UPDATE hotrow SET n = n + 1 WHERE id = ?", 2-i) // the other's row
			done <- result{i, err}
		}()
	}
	first := <-done
	t.Logf("transaction %d refused after %s", first.i, time.Since(start))
	me := sqlErr(t, first.err, 1205, "HY000")
	if !strings.Contains(me.Message, "deadlock") {
		t.Errorf("message %q does not say deadlock", me.Message)
	}
	if err := txs[first.i].Rollback(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil {
		t.Fatalf("the other transaction after the rollback: %v", r.err)
	}
	if err := txs[1-first.i].Commit(); err != nil {
		t.Fatal(err)
	}
	if tot := hotRowTotals(srv); tot.RefusedDeadlock != 1 {
		t.Errorf("counters %+v, want 1 refused as a deadlock", tot)
	}
}

// A key added through the gateway counts at once: the keys learnt before
// are forgotten after the ALTER.
func TestHotRowSchemaChange(t *testing.T) {
	hotRowTable(t)
	_, db := hotRowGateway(t, "{max_concurrency: 1, max_queue: 0}", 4, false)
	for _, q := range []string{
		"UPDATE hotrow SET n = n WHERE id = 2", // the gateway learns the keys
		"ALTER TABLE hotrow ADD COLUMN u INT NULL, ADD UNIQUE KEY (u)",
		"UPDATE hotrow SET u = 7 WHERE id = 1",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	holdRow(t, db, "UPDATE hotrow SET n = 1 WHERE u = 7")
	// Were u not known as a key, MariaDB's own lock wait (cut short).
	conn := shortLockWait(t, db)
	_, err := conn.ExecContext(context.Background(), "UPDATE hotrow SET n = 2 WHERE u = 7")
	if me := sqlErr(t, err, 1205, "HY000"); !strings.Contains(me.Message, "hot row e2e.hotrow key u=7") {
		t.Errorf("not refused by the gateway: %s", me.Message)
	}
}

// shortLockWait is a connection of db whose InnoDB lock waits last 1 s.
func shortLockWait(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	return conn
}
