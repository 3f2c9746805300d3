package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// benchProber reports fake:1 as a writable primary and every other backend
// as a replica without lag.
type benchProber struct{}

func (benchProber) Probe(_ context.Context, b healthcheck.Backend) healthcheck.Result {
	if b.Addr == "fake:1" {
		return healthcheck.Result{Reachable: true, RTT: time.Millisecond}
	}
	return healthcheck.Result{Reachable: true, ReadOnly: true, Replica: true, LagKnown: true, RTT: time.Millisecond}
}

// benchSession builds a session over real pools of connections that do no
// I/O, and discovery that knows their backends (a primary, and replicas
// with replica reads on when replicas > 0), to measure the gateway's own
// work per statement.
func benchSession(b testing.TB, replicas int) *Session {
	b.Helper()
	addrs := []string{"fake:1"}
	for i := range replicas {
		addrs = append(addrs, fmt.Sprintf("fake:%d", i+2))
	}
	srv := testServer(b, addrs, replicas > 0, nopDial, benchProber{}, 10*time.Millisecond)
	ss := &Session{srv: srv, log: srv.log, cluster: srv.clusters["main"], replayState: replayState{versions: &srv.stateIDs}, clientSide: clientSide{status: wire.StatusAutocommit, collation: wire.DefaultCollation}}
	ss.resetState()
	return ss
}

// BenchmarkRouteStatement is the gateway's work for one statement outside a
// transaction, without the network: classify, take a pooled connection and
// check its session state, then record the result and release it.
func BenchmarkRouteStatement(b *testing.B) { benchRoute(b, 0) }

// BenchmarkRouteStatementReplicas is BenchmarkRouteStatement with replica
// reads over two replicas: reads also pick (and keep) a replica.
func BenchmarkRouteStatementReplicas(b *testing.B) { benchRoute(b, 2) }

// BenchmarkRouteStatementShedding is BenchmarkRouteStatement with load
// shedding on, the backend within its limits: each statement reads its
// backend's load.
func BenchmarkRouteStatementShedding(b *testing.B) {
	benchRoute(b, 0, func(c *config.Cluster) { c.Shedding = config.Shedding{MaxInFlight: 100, MaxQueueWait: time.Second} })
}

// benchRoute runs the benchmarks over a primary and replicas, with the
// cluster's settings changed by mod.
func benchRoute(b *testing.B, replicas int, mod ...func(*config.Cluster)) {
	ss := benchSession(b, replicas)
	conf := *ss.cluster.conf.Load()
	for _, m := range mod {
		m(&conf)
	}
	ss.cluster.conf.Store(&conf)
	// run() takes the statement's arrival time from its metrics span; a
	// fixed one here (the idle check then never peeks, as under load).
	ss.now = time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		routeOnce(b, ss, benchQueries[i%len(benchQueries)])
	}
}

// benchQueries are sysbench's statements: a point select, an update, a
// range.
var benchQueries = []string{
	"SELECT c FROM sbtest1 WHERE id=5042",
	"UPDATE sbtest3 SET k=k+1 WHERE id=5000",
	"SELECT DISTINCT c FROM sbtest2 WHERE id BETWEEN 10 AND 109 ORDER BY c",
}

// routeOnce is the gateway's work for statement q, without the network.
func routeOnce(tb testing.TB, ss *Session, q string) {
	route := ss.srv.classifier.Classify(q)
	ss.choosing(wire.ComQuery, route, true) // as run does
	conn, err := ss.backend(route, "", false)
	ss.guard.Chose()
	if err != nil {
		tb.Fatal(err)
	}
	res := wire.Result{Status: wire.StatusAutocommit, HadResultSet: true, Rows: 1}
	if route.DML != querypath.DMLNone {
		res = wire.Result{Status: wire.StatusAutocommit, OK: wire.OK{AffectedRows: 1}}
	}
	ss.afterStatement(conn, route, res, unsafe.Slice(unsafe.StringData(q), len(q)))
	if ss.lease != nil { // a write holds its connection for one statement
		ss.setPins(0)
		ss.releaseLease()
	}
}

// The statement path allocates nothing: classify, pick a backend (the
// primary, or a replica), lease and release a connection, record.
func TestRouteStatementAllocatesNothing(t *testing.T) {
	for _, replicas := range []int{0, 2} {
		ss := benchSession(t, replicas)
		ss.now = time.Now()
		for _, q := range benchQueries {
			routeOnce(t, ss, q) // warm: pools dialed, replicas picked
			if n := testing.AllocsPerRun(100, func() { routeOnce(t, ss, q) }); n != 0 {
				t.Errorf("%d replicas, %q: %v allocations per statement, want 0", replicas, q, n)
			}
		}
	}
}
