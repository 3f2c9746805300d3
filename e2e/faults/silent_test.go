package faults

import (
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/faultproxy"
)

// silentBound is the documented bound for a statement on a backend that
// goes silent: discovery's probes time out (health.timeout) fall times in
// a row at health.interval, then the statements in flight on it are cut.
// With the settings below (interval 200ms, timeout 500ms) that is about
// 2 s; the bound leaves room for a loaded machine.
const silentBound = 10 * time.Second

// outcome is how one statement ended.
type outcome struct {
	what string
	err  error
	took time.Duration
}

// TestSilentBackendMidStatement: the link from the gateway to MariaDB
// goes silent (no data either way, no reset) while a read and a write are
// running and a transaction is open: each client gets an error within
// silentBound (never a hang), the write ran at most once, the
// transaction's COMMIT fails and its change is not there, and once the
// link is back the gateway serves on fresh connections.
func TestSilentBackendMidStatement(t *testing.T) {
	needStack(t)
	root := rootDB(t)
	if _, err := root.Exec("CREATE TABLE IF NOT EXISTS silent (id INT PRIMARY KEY, n INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Exec("REPLACE INTO silent VALUES (1, 0), (2, 0)"); err != nil {
		t.Fatal(err)
	}
	l := link(t, "gateway-mariadb")
	srv := startGateway(t, "silent", "{size: 4, min_idle: 0, acquire_timeout: 5s}", "{interval: 200ms, timeout: 500ms}", l.Addr())
	db := open(t, srv.Addr().String())
	if _, err := db.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	stmts := map[string]string{
		"read":  "SELECT SLEEP(1)",
		"write": "UPDATE silent SET n = n + 1 WHERE id = 1 AND SLEEP(1) = 0",
	}
	var mu sync.Mutex
	var outs []outcome
	var wg sync.WaitGroup
	for what, q := range stmts {
		wg.Go(func() {
			start := time.Now()
			_, err := db.Exec(q)
			mu.Lock()
			outs = append(outs, outcome{what, err, time.Since(start)})
			mu.Unlock()
		})
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE silent SET n = n + 10 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // both on the backend
	for _, dir := range []faultproxy.Direction{faultproxy.Down, faultproxy.Up} {
		if err := l.Silence(dir); err != nil {
			t.Fatal(err)
		}
	}
	wg.Go(func() {
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		err := tx.Commit()
		mu.Lock()
		outs = append(outs, outcome{"commit", err, time.Since(start)})
		mu.Unlock()
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * silentBound):
		l.Clear()
		t.Fatalf("statements on a silent backend still running after %v: a hang", 3*silentBound)
	}
	for _, o := range outs {
		t.Logf("%s: %v after %v", o.what, o.err, o.took.Round(time.Millisecond))
		if o.err == nil {
			t.Errorf("%s succeeded through a silent link", o.what)
		}
		if o.took > silentBound {
			t.Errorf("%s: error after %v, past the bound %v", o.what, o.took.Round(time.Millisecond), silentBound)
		}
	}
	l.Clear()
	var n int
	if err := root.QueryRow("SELECT n FROM silent WHERE id = 1").Scan(&n); err != nil || n > 1 {
		t.Fatalf("the write ran %d times (%v): more than once", n, err)
	}
	// The transaction's connection to MariaDB closes once the link is back
	// (the gateway closed its end): MariaDB rolls it back.
	waitFor(t, "the transaction to be rolled back", func() bool {
		var m int
		return root.QueryRow("SELECT n FROM silent WHERE id = 2 LOCK IN SHARE MODE").Scan(&m) == nil && m == 0
	})
	t.Logf("serving again %v after the link came back", waitServes(t, db).Round(time.Millisecond))
}

// waitFor polls cond every 50 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// waitServes waits until statements through db succeed again (discovery
// marks the backend up after its rise count; bounded at 30 s) and then
// runs 20 more, which must all succeed.
func waitServes(t *testing.T, db *sql.DB) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if _, err := db.Exec("SELECT 1"); err == nil {
			break
		} else if time.Since(start) > 30*time.Second {
			t.Fatalf("no statement served 30 s after the fault ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	for i := range 20 {
		if _, err := db.Exec("SELECT 1"); err != nil {
			t.Fatalf("statement %d after recovery: %v", i, err)
		}
	}
	return took
}
