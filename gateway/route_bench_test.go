package gateway

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
)

// nopConn is a net.Conn that is never read or written.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

// primaryProber reports every backend as a healthy writable primary.
type primaryProber struct{}

func (primaryProber) Probe(context.Context, healthcheck.Backend) healthcheck.Result {
	return healthcheck.Result{Reachable: true, RTT: time.Millisecond}
}

// benchSession builds a session over a real pool of connections that do no
// I/O, and discovery that knows their backend as primary, to measure the
// gateway's own work per statement.
func benchSession(b *testing.B) *Session {
	b.Helper()
	cl, err := querypath.New()
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Parse([]byte("users: [{user: u}]\nclusters: [{name: main, backend_user: g, backends: ['fake:1']}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	srv := &Server{cfg: cfg, classifier: cl, log: hclog.NewNullLogger(), clusters: map[string]*cluster{}}
	c := &cluster{name: "main", log: srv.log}
	c.conf.Store(&cfg.Clusters[0])
	be := &backend{addr: "fake:1", cluster: c}
	p, err := pools.New(pools.Config[*backendConn]{
		Name: "bench", Size: 8, MinIdle: -1,
		Dial: func(context.Context) (*backendConn, error) {
			return &backendConn{BackendConn: &wire.BackendConn{Conn: wire.NewConn(nopConn{}, 16, 16)}, be: be}, nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	be.pools[0] = p
	c.backends.Store(&map[string]*backend{be.addr: be})
	srv.clusters["main"], srv.clusterNames = c, []string{"main"}
	srv.health, err = healthcheck.New(healthcheck.Config{Interval: 10 * time.Millisecond, Rise: 1, Prober: primaryProber{}, Backends: srv.healthBackends})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.health.Close() })
	for snap := srv.health.Snapshot(); snap.Cluster("main") == nil || snap.Cluster("main").Primary == ""; snap = srv.health.Snapshot() {
		<-snap.Changed()
	}
	ss := &Session{srv: srv, log: srv.log, cluster: c, status: wire.StatusAutocommit, collation: wire.DefaultCollation}
	ss.resetState()
	return ss
}

// BenchmarkRouteStatement is the gateway's work for one statement outside a
// transaction, without the network: classify, take a pooled connection and
// check its session state, then record the result and release it.
func BenchmarkRouteStatement(b *testing.B) {
	ss := benchSession(b)
	res := wire.Result{Status: wire.StatusAutocommit}
	queries := []string{
		"SELECT c FROM sbtest1 WHERE id=5042",
		"UPDATE sbtest3 SET k=k+1 WHERE id=5000",
		"SELECT DISTINCT c FROM sbtest2 WHERE id BETWEEN 10 AND 109 ORDER BY c",
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		route := ss.srv.classifier.Classify(queries[i%len(queries)])
		conn, err := ss.backend(route, "", false)
		if err != nil {
			b.Fatal(err)
		}
		ss.afterStatement(conn, route, res)
		if ss.lease != nil { // a write holds its connection for one statement
			ss.setPins(0)
			ss.releaseLease()
		}
	}
}
