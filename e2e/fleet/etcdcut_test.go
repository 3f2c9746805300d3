package fleet_test

import (
	"database/sql"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/faultproxy"
)

// budgetHold is the gateways' topology.etcd.budget_hold in
// TestGatewayCutFromEtcd; 0s turns the protection off, to see the test
// fail without it.
var budgetHold = flag.Duration("fleet.budget_hold", time.Minute, "topology.etcd.budget_hold of TestGatewayCutFromEtcd's gateways (0s: the protection off)")

// Issue 35: a gateway cut from etcd but not from MariaDB. Three gateways
// share max_backend_connections 30 under the same heavy load (15 clients
// each, 20 ms statements: 10 connections each); the first one's link to
// etcd goes silent (a blackhole, toxiproxy) for four lease TTLs. It
// shrinks to its floor share (5) before its lease can expire, and the
// others, once it has, hold that floor back: MariaDB never sees more
// than 30 connections from the gateways, sampled every 20 ms. The cut
// gateway's statements keep succeeding from its floor; after the link
// comes back it registers again and its share grows back.
func TestGatewayCutFromEtcd(t *testing.T) {
	const prefix, maxConns, clients = "/fleet-etcdcut", 30, 15
	peak := watchConns(t, maxConns)
	putTopology(t, prefix, topology(fmt.Sprintf("    max_backend_connections: %d\n", maxConns), shared.primary))

	link := faultproxy.New(t, "gateway-etcd", shared.etcd.Endpoint)
	hold := fmt.Sprintf(", budget_hold: %s", *budgetHold)
	gws := []*proc{startGatewayVia(t, prefix, link.Addr(), hold)}
	for range 2 {
		gws = append(gws, startGatewayVia(t, prefix, shared.etcd.Endpoint, hold))
	}
	key := "main/" + shared.primary.Addr()

	var dbs []*sql.DB
	for _, g := range gws {
		db := g.db(t)
		db.SetMaxOpenConns(clients)
		dbs = append(dbs, db)
	}
	l := startLoadOf(dbs, clients, "DO SLEEP(0.02)", 0)
	defer func() {
		if l != nil {
			l.end()
		}
	}()
	waitFor(t, "every gateway to take its share of the load", func() bool {
		for _, g := range gws {
			if tg, _ := shareOf(t, g, key); tg < 9 {
				return false
			}
		}
		return true
	})
	for i, g := range gws {
		tg, held := shareOf(t, g, key)
		t.Logf("before the cut: gateway %d's share %v, holds %v", i, tg, held)
	}

	const cutFor = 8 * time.Second // four lease TTLs
	if err := link.Silence(faultproxy.Up); err != nil {
		t.Fatal(err)
	}
	if err := link.Silence(faultproxy.Down); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	servedBefore := l.okBy[0].Load()
	if *budgetHold > 0 {
		took := waitFor(t, "the cut gateway to shrink to its floor", func() bool { return gws[0].fleetStatus(t)["budget_cut_to_floor"] == true })
		tg, held := shareOf(t, gws[0], key)
		t.Logf("the cut gateway kept its floor %v (holds %v) %v after the cut (lease TTL 2s)", tg, held, took.Round(time.Millisecond))
	}
	waitFor(t, "the cut gateway's registration to expire", func() bool {
		return strings.Count(topo(t, prefix, "status"), "\ngateway ") == 2
	})
	expired := time.Since(cut)
	time.Sleep(cutFor - time.Since(cut))
	for i, g := range gws[1:] {
		tg, held := shareOf(t, g, key)
		t.Logf("during the cut: gateway %d's share %v, holds %v", i+1, tg, held)
	}
	link.Clear()
	t.Logf("etcd link cut for %v (the registration expired after %v): the cut gateway served %d statements meanwhile, %d failed",
		time.Since(cut).Round(time.Millisecond), expired.Round(time.Millisecond), l.okBy[0].Load()-servedBefore, l.failedBy[0].Load())
	took := waitFor(t, "the cut gateway to register again and grow back", func() bool {
		tg, _ := shareOf(t, gws[0], key)
		return gws[0].fleetStatus(t)["etcd_connected"] == true && tg >= 9 &&
			strings.Count(topo(t, prefix, "status"), "\ngateway ") == 3
	})
	t.Logf("after the link came back: registered, share back above the floor after %v", took.Round(time.Millisecond))
	for i, g := range gws {
		tg, held := shareOf(t, g, key)
		t.Logf("after: gateway %d's share %v, holds %v", i, tg, held)
	}
	l.end()
	for i := range gws {
		t.Logf("gateway %d: %d statements, %d failed", i, l.okBy[i].Load(), l.failedBy[i].Load())
	}
	if f := l.failed.Load(); f > 0 {
		t.Errorf("%d statements failed; first: %v", f, l.firstErr)
	}
	l = nil
	t.Logf("MariaDB saw at most %d connections from the gateways (cap %d, budget_hold %s)", peak(), maxConns, *budgetHold)
	if p := peak(); p > maxConns {
		t.Errorf("MariaDB saw %d connections from the gateways, above max_backend_connections %d", p, maxConns)
	}
}
