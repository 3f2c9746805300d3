package gateway

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
)

// nopConn is a net.Conn that is never read or written.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

// nopDial dials connections that do no I/O.
func nopDial(be *backend) *backendConn {
	return &backendConn{BackendConn: &wire.BackendConn{Conn: wire.NewConn(nopConn{}, 16, 16)}, be: be}
}

// testServer builds a Server with metrics and one cluster "main" over
// addrs (replica reads on when replicaReads), whose backends have pools of
// eight connections made by dial, and discovery driven by prober every
// interval; it waits until discovery has probed every backend. Nothing
// listens.
func testServer(t testing.TB, addrs []string, replicaReads bool, dial func(*backend) *backendConn, prober healthcheck.Prober, interval time.Duration) *Server {
	t.Helper()
	cl, err := querypath.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf("users: [{user: u}]\nclusters: [{name: main, backend_user: g, replica_reads: %v, backends: ['%s']}]\n",
		replicaReads, strings.Join(addrs, "', '"))))
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{cfg: cfg, classifier: cl, log: hclog.NewNullLogger(), clusters: map[string]*cluster{}}
	srv.front = mysqlserver.New(srv, srv.log)
	srv.metrics = newMetrics(srv)
	c := &cluster{name: "main", log: srv.log}
	c.conf.Store(&cfg.Clusters[0])
	c.newProtections(cl.HotRow)
	backends := map[string]*backend{}
	for _, addr := range addrs {
		be := &backend{addr: addr, cluster: c}
		p, err := pools.New(pools.Config[*backendConn]{
			Name: addr, Size: 8, MinIdle: -1,
			Dial: func(context.Context) (*backendConn, error) { return dial(be), nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		be.pools.Store(&map[poolKey]*pools.Pool[*backendConn]{{}: p})
		backends[addr] = be
	}
	c.backends.Store(&backends)
	srv.clusters["main"], srv.clusterNames = c, []string{"main"}
	srv.health, err = healthcheck.New(healthcheck.Config{Interval: interval, Rise: 1, Fall: 1, Prober: prober, Backends: srv.healthBackends})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.health.Close() })
	c.health.Store(srv.health)
	deadline := time.After(5 * time.Second)
	for snap := srv.health.Snapshot(); snap.Cluster("main") == nil || len(snap.Cluster("main").Backends) != len(addrs); snap = srv.health.Snapshot() {
		select {
		case <-snap.Changed():
		case <-deadline:
			t.Fatal("timed out waiting for discovery to probe every backend")
		}
	}
	return srv
}
