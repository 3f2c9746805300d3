package fleet_test

import (
	"context"
	"database/sql"
	"flag"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serverID asks a new session through db which server answers its reads.
func serverID(t testing.TB, db *sql.DB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int
	if err := conn.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// load runs clients through every gateway until stop, bounded in time and
// count, and counts the statements that failed, in all and per gateway.
type load struct {
	stop       chan struct{}
	wg         sync.WaitGroup
	ok, failed atomic.Int64
	// okBy and failedBy count per gateway (index of dbs).
	okBy, failedBy []atomic.Int64
	mu             sync.Mutex
	firstErr       error
}

// startLoad runs clientsEach clients on every db, each reading
// @@server_id every 5 ms.
func startLoad(dbs []*sql.DB, clientsEach int) *load {
	return startLoadOf(dbs, clientsEach, "SELECT @@server_id", 5*time.Millisecond)
}

// startLoadOf runs clientsEach clients on every db, each running query
// with pause between two.
func startLoadOf(dbs []*sql.DB, clientsEach int, query string, pause time.Duration) *load {
	l := &load{stop: make(chan struct{}), okBy: make([]atomic.Int64, len(dbs)), failedBy: make([]atomic.Int64, len(dbs))}
	deadline := time.Now().Add(3 * time.Minute)
	for i, db := range dbs {
		for range clientsEach {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for n := 0; n < 200000 && time.Now().Before(deadline); n++ {
					select {
					case <-l.stop:
						return
					case <-time.After(pause):
					}
					if _, err := db.Exec(query); err != nil {
						l.failed.Add(1)
						l.failedBy[i].Add(1)
						l.mu.Lock()
						if l.firstErr == nil {
							l.firstErr = err
						}
						l.mu.Unlock()
						continue
					}
					l.ok.Add(1)
					l.okBy[i].Add(1)
				}
			}()
		}
	}
	return l
}

func (l *load) end() { close(l.stop); l.wg.Wait() }

// longOutage makes TestTopologyFromEtcd's etcd outage last a minute
// (make faults; the flag is the fault suite's).
var longOutage = flag.Bool("faults.long", false, "TestTopologyFromEtcd: etcd down for a minute instead of 30 s (make faults)")

// The topology comes from etcd; a change to it (a replica added) reaches
// every gateway without a restart; etcd down for 30 s (a minute with
// -faults.long) under load fails no statement, each gateway says it
// serves from its last topology and keeps its pools at their floor share
// of max_backend_connections, and once etcd is back the gateways register
// again and changes flow again.
func TestTopologyFromEtcd(t *testing.T) {
	const prefix = "/fleet-topology"
	primaryID, replicaID := 201, 202
	// Capped, so that the outage cuts every gateway's pools to its
	// floor (5 of 30, less the probe): the load fits in that.
	const replicaReads = "    replica_reads: on\n    max_backend_connections: 30\n"
	putTopology(t, prefix, topology(replicaReads, shared.primary))
	var gws []*proc
	var dbs []*sql.DB
	for range 3 {
		g := startGateway(t, prefix)
		gws = append(gws, g)
		dbs = append(dbs, g.db(t))
	}
	for i, db := range dbs {
		if id := serverID(t, db); id != primaryID {
			t.Fatalf("gateway %d: reads from server %d before the replica is in the topology, want the primary %d", i, id, primaryID)
		}
	}
	status := topo(t, prefix, "status")
	if n := strings.Count(status, "\ngateway "); n != 3 {
		t.Fatalf("topo status lists %d gateways, want 3:\n%s", n, status)
	}

	l := startLoad(dbs, 4)
	defer func() {
		if l != nil {
			l.end()
		}
	}()

	putTopology(t, prefix, topology(replicaReads, shared.primary, shared.replica))
	for i, db := range dbs {
		took := waitFor(t, "reads from the added replica", func() bool { return serverID(t, db) == replicaID })
		t.Logf("gateway %d reads from the added replica after %v", i, took.Round(time.Millisecond))
	}

	outage := 30 * time.Second
	if *longOutage {
		outage = time.Minute
	}
	before := l.ok.Load()
	start := time.Now()
	if err := shared.etcd.Kill(); err != nil {
		t.Fatal(err)
	}
	for i, g := range gws {
		waitFor(t, "the gateway to report etcd unreachable", func() bool { return g.fleetStatus(t)["etcd_connected"] == false })
		t.Logf("gateway %d reports etcd unreachable after %v", i, time.Since(start).Round(time.Millisecond))
	}
	for i, g := range gws {
		waitFor(t, "the gateway to keep its pools at their floor", func() bool { return g.fleetStatus(t)["budget_cut_to_floor"] == true })
		tg, held := shareOf(t, g, "main/"+shared.primary.Addr())
		t.Logf("gateway %d keeps its floor share %v of the primary (holds %v) after %v", i, tg, held, time.Since(start).Round(time.Millisecond))
	}
	time.Sleep(outage - time.Since(start))
	if err := shared.etcd.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd down for %v: %d statements served meanwhile, %d failed", time.Since(start).Round(time.Millisecond), l.ok.Load()-before, l.failed.Load())
	restarted := time.Now()
	for _, g := range gws {
		waitFor(t, "the gateway to reconnect to etcd and leave its floor", func() bool {
			f := g.fleetStatus(t)
			return f["etcd_connected"] == true && f["budget_cut_to_floor"] != true
		})
	}
	t.Logf("every gateway reconnected to etcd and left its floor %v after etcd restarted", time.Since(restarted).Round(time.Millisecond))
	// Changes flow again: replica reads off sends reads to the primary.
	putTopology(t, prefix, topology("    max_backend_connections: 30\n", shared.primary, shared.replica))
	for _, db := range dbs {
		waitFor(t, "reads from the primary after replica_reads off", func() bool { return serverID(t, db) == primaryID })
	}
	took := waitFor(t, "topo status to show every gateway on the latest revision", func() bool {
		status = topo(t, prefix, "status")
		return strings.Count(status, "\ngateway ") == 3 && !strings.Contains(status, "behind")
	})
	t.Logf("topo status shows every gateway on the latest revision %v after the change:\n%s", took.Round(time.Millisecond), status)
	l.end()
	ok, failed := l.ok.Load(), l.failed.Load()
	l = nil
	t.Logf("load: %d statements, %d failed", ok, failed)
	if failed != 0 {
		t.Fatalf("%d statements failed during topology changes and the etcd outage", failed)
	}
}
