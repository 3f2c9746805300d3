package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// Many clients on a pool of two: every statement runs once and answers
// right, whether the sessions wait for a connection in the pool's queue
// (goroutines) or on their loop, where sessions pass connections on to
// each other; and when no connection comes free within acquire_timeout,
// the statement fails with error 1040 naming the pool, runs nowhere, and
// the session goes on.
func TestPoolWaits(t *testing.T) {
	mustExec(t, direct(t),
		"CREATE TABLE IF NOT EXISTS poolwait (id INT PRIMARY KEY, n INT NOT NULL)",
		"DELETE FROM poolwait")
	forIOLoops(t, "", func(t *testing.T, loops int) {
		srv := startTestGateway(t, "poolwait", clusterYAML(loops, backendUser, backendPass,
			"{size: 2, min_idle: 0, acquire_timeout: 1s}", "hot_row: {max_concurrency: 0}"))
		db := open(t, dsnFor(srv.Addr().String(), appUser, appPass))
		const clients, each = 24, 25
		db.SetMaxOpenConns(clients)
		base := loops * 1000
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				id := base + c
				if _, err := db.Exec("INSERT INTO poolwait VALUES (?, 0)", id); err != nil {
					t.Error(err)
					return
				}
				for i := range each {
					if _, err := db.Exec("UPDATE poolwait SET n = n + 1 WHERE id = ?", id); err != nil {
						t.Error(err)
						return
					}
					var n int
					if err := db.QueryRow("SELECT n FROM poolwait WHERE id = ?", id).Scan(&n); err != nil || n != i+1 {
						t.Errorf("client %d after %d updates: n = %d, %v", c, i+1, n, err)
						return
					}
				}
			})
		}
		wg.Wait()
		var rows, total int
		if err := direct(t).QueryRow("SELECT COUNT(*), SUM(n) FROM poolwait WHERE id BETWEEN ? AND ?", base, base+clients-1).Scan(&rows, &total); err != nil {
			t.Fatal(err)
		}
		if rows != clients || total != clients*each {
			t.Fatalf("%d rows, %d updates; want %d, %d: a statement ran twice or not at all", rows, total, clients, clients*each)
		}
		if loops > 0 {
			passed := metricValue(t, srv, "directgate_io_loop_connection_waits_total", map[string]string{"outcome": "passed"})
			offloads := metricValue(t, srv, "directgate_io_loop_session_offloads_total", map[string]string{"reason": "pool"})
			t.Logf("on the loop: %v waits passed a connection, %v went to the pool's queue", passed, offloads)
			if passed == 0 {
				t.Error("no session passed its connection on to a waiting one")
			}
		}

		// Both connections held by open transactions: a third statement
		// times out, and runs once they are given back.
		ctx := context.Background()
		for i := range 2 {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec("UPDATE poolwait SET n = n + 1 WHERE id = ?", base+i); err != nil {
				t.Fatal(err)
			}
		}
		_, err := db.Exec("UPDATE poolwait SET n = n + 100 WHERE id = ?", base+2)
		if me := sqlErr(t, err, 1040, "08004"); !strings.Contains(me.Message, "acquire_timeout") {
			t.Errorf("the timeout's message says nothing of what to change: %s", me.Message)
		}
		if loops > 0 {
			if n := metricValue(t, srv, "directgate_io_loop_connection_waits_total", map[string]string{"outcome": "timeout"}); n != 1 {
				t.Errorf("waits on the loop timed out: %v, want 1", n)
			}
		}
		var n int
		if err := direct(t).QueryRow("SELECT n FROM poolwait WHERE id = ?", base+2).Scan(&n); err != nil || n != each {
			t.Fatalf("the statement that timed out: n = %d, %v; want %d (it must not run)", n, err, each)
		}
	})
}
