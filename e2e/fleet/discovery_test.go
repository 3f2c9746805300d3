package fleet_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/mariadbtest"
)

// connections reads a server's Connections counter: every probe opens a
// connection of its own, pooled connections stay open.
func connections(t testing.TB, s *mariadbtest.Server) int64 {
	t.Helper()
	db, err := s.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Connections'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// leaders returns the indexes of the gateways that probe cluster main for
// the fleet.
func leaders(t testing.TB, gws []*proc) []int {
	var out []int
	for i, g := range gws {
		if g.exitedNow() {
			continue
		}
		l, _ := g.fleetStatus(t)["discovery_leader_of"].([]any)
		if len(l) == 1 && l[0] == "main" {
			out = append(out, i)
		}
	}
	return out
}

// Discovery runs once per fleet: the probe load on each backend stays flat
// from 1 to 3 to 10 gateways, and another gateway takes over the probing
// within a lease TTL of the leader's death.
func TestDiscoveryOncePerFleet(t *testing.T) {
	window := 4 * time.Second
	rates := map[int]float64{}
	for _, n := range []int{1, 3, 10} {
		prefix := fmt.Sprintf("/fleet-discovery-%d", n)
		putTopology(t, prefix, topology("", shared.primary, shared.replica))
		var gws []*proc
		for range n {
			gws = append(gws, startGateway(t, prefix))
		}
		waitFor(t, "one discovery leader", func() bool { return len(leaders(t, gws)) == 1 })
		time.Sleep(time.Second) // warm-up dials and the first rounds are done
		p0, r0 := connections(t, shared.primary), connections(t, shared.replica)
		time.Sleep(window)
		p1, r1 := connections(t, shared.primary), connections(t, shared.replica)
		// One of the counted connections on each is this test's own read.
		rate := float64(max(p1-p0-1, r1-r0-1)) / window.Seconds()
		rates[n] = rate
		t.Logf("%2d gateways: %.1f probes/s on the primary, %.1f on the replica (discovery interval 200ms)", n,
			float64(p1-p0-1)/window.Seconds(), float64(r1-r0-1)/window.Seconds())

		if n == 3 {
			// The leader dies: another takes over within a lease TTL.
			lead := leaders(t, gws)[0]
			killed := time.Now()
			if err := gws[lead].cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-gws[lead].exited
			took := waitFor(t, "a new discovery leader", func() bool { return len(leaders(t, gws)) == 1 })
			t.Logf("discovery leader SIGKILLed: gateway %d leads after %v (lease TTL 2s)", leaders(t, gws)[0], time.Since(killed).Round(time.Millisecond))
			_ = took
		}
		for _, g := range gws {
			g.stop()
		}
	}
	if rates[10] > 1.2*rates[1]+0.5 {
		t.Errorf("probe rate with 10 gateways %.1f/s, with one %.1f/s: not flat", rates[10], rates[1])
	}
}

// writeServer asks which server takes a session's transaction.
func writeServer(ctx context.Context, db *sql.DB) (int, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var id int
	err = tx.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id)
	return id, err
}

// After a primary change, every gateway routes writes to the new primary;
// the followers learn of it from the fleet's prober.
func TestPrimaryChangeReachesEveryGateway(t *testing.T) {
	const prefix = "/fleet-switchover"
	putTopology(t, prefix, topology("", shared.primary, shared.replica))
	var dbs []*sql.DB
	for range 3 {
		dbs = append(dbs, startGateway(t, prefix).db(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, db := range dbs {
		if id, err := writeServer(ctx, db); err != nil || id != 201 {
			t.Fatalf("writes go to %d (%v), want 201", id, err)
		}
	}
	setReadOnly := func(s *mariadbtest.Server, on int) {
		db, err := s.RootDB()
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(fmt.Sprintf("SET GLOBAL read_only = %d", on)); err != nil {
			t.Fatal(err)
		}
	}
	// Switch over: the old primary read-only, the replica promoted, the
	// old primary replicating from it.
	setReadOnly(shared.primary, 1)
	if err := shared.replica.WaitCaughtUp(ctx, shared.primary); err != nil {
		t.Fatal(err)
	}
	if err := shared.replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	defer func() {
		// Switch back for the other tests.
		setReadOnly(shared.replica, 1)
		if err := shared.primary.ChangePrimary(ctx, shared.replica); err != nil {
			t.Fatal(err)
		}
		if err := shared.primary.WaitCaughtUp(ctx, shared.replica); err != nil {
			t.Fatal(err)
		}
		if err := shared.primary.Promote(ctx); err != nil {
			t.Fatal(err)
		}
		if err := shared.replica.ChangePrimary(ctx, shared.primary); err != nil {
			t.Fatal(err)
		}
	}()
	if err := shared.primary.ChangePrimary(ctx, shared.replica); err != nil {
		t.Fatal(err)
	}
	for i, db := range dbs {
		waitFor(t, "writes on the new primary", func() bool {
			id, err := writeServer(ctx, db)
			return err == nil && id == 202
		})
		t.Logf("gateway %d writes to the new primary %v after it was promoted", i, time.Since(changed).Round(time.Millisecond))
	}
}
