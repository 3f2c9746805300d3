package e2e

import (
	"fmt"
	"sync"
	"testing"

	"github.com/directgate/directgate/config"
)

// The pool's reuse order shows in which MariaDB thread serves each
// statement of one client: under round_robin the pool's connections in
// turn, under lifo always the same one. The pool's books (puddle's) match
// MariaDB's process list at rest: after churn, after a reload that
// shrinks the pool and switches the order, and after one that caps the
// backend's connections (the budget).
func TestPoolOrder(t *testing.T) {
	const user, pass = "dg_order", "order-secret"
	backendThreads := backendAccount(t, user, pass)

	for _, order := range []string{config.PoolOrderRoundRobin, config.PoolOrderLIFO} {
		t.Run(order, func(t *testing.T) {
			yaml := func(pool string) string { return clusterYAML(0, user, pass, pool) }
			srv := startTestGateway(t, "order", yaml("{size: 4, min_idle: 4, order: "+order+"}"))
			openConns := func() int {
				n := 0
				for _, p := range srv.PoolStats() {
					n += p.Open
				}
				return n
			}
			// At rest the books and MariaDB agree (a discovery probe
			// may be connected for a moment: polled until it is gone).
			booksMatch := func(what string, want int) {
				t.Helper()
				waitUntil(t, func() bool { o := openConns(); return o == backendThreads() && (want < 0 || o == want) },
					func() string {
						return fmt.Sprintf("%s: the pools count %d open, MariaDB shows %d threads (want %d)", what, openConns(), backendThreads(), want)
					})
			}
			booksMatch("warm-up", 4)

			db := open(t, dsnFor(srv.Addr().String(), appUser, appPass))
			db.SetMaxOpenConns(1)
			threads := func() []int64 {
				var ids []int64
				for range 12 {
					var id int64
					// The backend's thread id (CONNECTION_ID() speaks the
					// gateway's ids).
					if err := db.QueryRow("SELECT @@pseudo_thread_id").Scan(&id); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, id)
				}
				return ids
			}
			inTurn := func(ids []int64, n int) bool {
				seen := map[int64]bool{}
				for i, id := range ids {
					seen[id] = true
					if i >= n && id != ids[i-n] {
						return false
					}
				}
				return len(seen) == n
			}
			ids := threads()
			t.Logf("%s: one client's statements ran on backend threads %v", order, ids)
			switch order {
			case config.PoolOrderRoundRobin:
				if !inTurn(ids, 4) {
					t.Errorf("round_robin: one client's statements ran on threads %v; want the pool's 4 in turn", ids)
				}
			case config.PoolOrderLIFO:
				if !inTurn(ids, 1) {
					t.Errorf("lifo: one client's statements ran on threads %v; want one thread", ids)
				}
			}

			// Churn: 16 clients on 4 connections.
			many := open(t, dsnFor(srv.Addr().String(), appUser, appPass))
			many.SetMaxOpenConns(16)
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for range 20 {
						if _, err := many.Exec("SELECT SLEEP(0.001)"); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			booksMatch("after churn", 4)

			// A reload shrinks the pool and switches the order.
			other := config.PoolOrderLIFO
			if order == other {
				other = config.PoolOrderRoundRobin
			}
			cfg, err := config.Parse([]byte(yaml("{size: 2, min_idle: 2, order: " + other + "}")))
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			booksMatch("after the reload to size 2", 2)
			for _, p := range srv.PoolStats() {
				if p.Order.String() != other {
					t.Errorf("pool %s/%s reuses %v after the reload to %s", p.Backend, p.BackendUser, p.Order, other)
				}
			}
			threads() // each idle connection once: from now on the new order
			ids = threads()
			t.Logf("after the reload to %s: %v", other, ids)
			want := map[string]int{config.PoolOrderRoundRobin: 2, config.PoolOrderLIFO: 1}[other]
			if !inTurn(ids, want) {
				t.Errorf("after the reload to %s: threads %v; want %d in turn", other, ids, want)
			}

			// A budget move: max_backend_connections 3 leaves the pools 2
			// beside discovery's probe, under load of 8 clients.
			cfg, err = config.Parse([]byte(yaml("{size: 4, min_idle: 1, order: "+other+"}") +
				"    max_backend_connections: 3\n"))
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			for range 8 {
				wg.Go(func() {
					for range 10 {
						if _, err := many.Exec("SELECT SLEEP(0.001)"); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			booksMatch("after a budget of 2", -1)
			if n := openConns(); n > 2 {
				t.Errorf("%d connections open under a budget of 2", n)
			}
		})
	}
}

// backendAccount creates MariaDB account user (password pass, every
// privilege) for a gateway of the test's own to log in with, drops it when
// the test ends, and returns a count of the account's threads on MariaDB.
func backendAccount(t *testing.T, user, pass string) (threads func() int) {
	t.Helper()
	root, err := shared.db.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, root,
		"DROP USER IF EXISTS '"+user+"'@'%'",
		"CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+pass+"'",
		"GRANT ALL PRIVILEGES ON *.* TO '"+user+"'@'%'")
	t.Cleanup(func() {
		_, _ = root.Exec("DROP USER IF EXISTS '" + user + "'@'%'")
		root.Close()
	})
	return func() int {
		var n int
		if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}
