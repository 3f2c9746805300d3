package faults

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/faultproxy"
	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/healthcheck"
)

// unprotected runs TestSlowReplica with its protections off
// (max_replica_lag 1h, no max_replica_latency): the lag and latency
// scenarios must then fail, the replica keeping its reads.
var unprotected = flag.Bool("faults.unprotected", false, "run TestSlowReplica with max_replica_lag and max_replica_latency off (it must fail)")

// The replica scenarios' discovery settings and protections; the bounds
// below are computed from them.
const (
	replInterval   = 200 * time.Millisecond
	replRise       = 2
	replFall       = 2
	replMaxLag     = 2 * time.Second
	replMaxLatency = 100 * time.Millisecond
	// replQuiet is how long no read may start on the replica for it to
	// count as out of the read set.
	replQuiet = time.Second
)

// lagBound is the documented bound for a replica that falls behind:
// Seconds_Behind_Master (whole seconds) passes max_replica_lag at most
// max_replica_lag + 1 s after the write it is behind on, and the next
// probe (within interval) publishes it when its round ends (within
// timeout).
func lagBound(timeout time.Duration) time.Duration {
	return replMaxLag + time.Second + replInterval + timeout
}

// slowBound is the documented bound for a replica slowed past
// max_replica_latency, or past the probe timeout: the probe in flight
// when the latency begins may still time a fast round trip, then fall
// probes must agree, each round lasting at most the longer of interval
// and timeout.
func slowBound(timeout time.Duration) time.Duration {
	return (replFall + 1) * max(replInterval, timeout)
}

// recoverBound is the documented bound for a replica to get reads again
// once its link is fast: the probe in flight may still be slow, then rise
// probes must be fast (or good).
func recoverBound(timeout time.Duration) time.Duration {
	return (replRise + 1) * max(replInterval, timeout)
}

// slack is how far past its documented bound a measured figure may be on
// a loaded test machine before the test fails.
func slack(bound time.Duration) time.Duration { return 2 * bound }

// replicaPair is a MariaDB primary with a GTID replica of its own (the
// suite's primary does not binlog), database testDB on both.
type replicaPair struct {
	primary, replica *mariadbtest.Server
}

// startReplicaPair starts the pair; it stops with the test.
func startReplicaPair(t *testing.T) *replicaPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Not ALL PRIVILEGES (it includes READ_ONLY ADMIN); REPLICA MONITOR
	// for discovery to read the lag.
	users := []mariadbtest.User{{Name: backendUser, Password: backendPass,
		Grants: "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, PROCESS, REPLICA MONITOR ON *.*"}}
	pair := &replicaPair{}
	for _, s := range []**mariadbtest.Server{&pair.primary, &pair.replica} {
		srv, err := mariadbtest.Start(ctx, mariadbtest.Options{Users: users})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Stop() })
		*s = srv
	}
	if err := pair.replica.StartReplication(ctx, pair.primary); err != nil {
		t.Fatal(err)
	}
	root := serverRoot(t, pair.primary)
	for _, q := range []string{"CREATE DATABASE " + testDB, "CREATE TABLE " + testDB + ".lagged (id INT PRIMARY KEY)",
		"CREATE TABLE " + testDB + ".writes (id INT AUTO_INCREMENT PRIMARY KEY)"} {
		if _, err := root.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := pair.replica.WaitCaughtUp(ctx, pair.primary); err != nil {
		t.Fatal(err)
	}
	return pair
}

// startReplicaGateway starts a gateway with replica reads on over the
// pair's primary and replicaAddr (the replica, or a fault proxy in front
// of it), with health timeout and the cluster keys more, and waits until
// discovery knows the primary and the replica's lag.
func startReplicaGateway(t *testing.T, name string, pair *replicaPair, replicaAddr string, timeout time.Duration, more string) *gateway.Server {
	t.Helper()
	health := fmt.Sprintf("{interval: %s, timeout: %s, rise: %d, fall: %d}", replInterval, timeout, replRise, replFall)
	srv := startGatewayWith(t, name, "{size: 8, min_idle: 2, acquire_timeout: 5s}", health,
		"    replica_reads: on\n"+more, pair.primary.Addr(), replicaAddr)
	waitFor(t, "a primary and a replica with a known lag", func() bool {
		s := srv.Health()
		c := s.Cluster("main")
		return c != nil && c.Primary != "" && len(c.Replicas) == 1 && s.Backend(c.Replicas[0]).Last.LagKnown && !s.Backend(c.Replicas[0]).Slow
	})
	return srv
}

// stmt is one statement through the gateway: a read of @@server_id (id
// the server that answered) or a write (id 0).
type stmt struct {
	start time.Time
	took  time.Duration
	id    int
	err   error
}

// stmtLoad runs statements through a gateway from several clients until
// stop, and keeps every one: reads of @@server_id (startReads), or
// writes (startWrites, id 0).
type stmtLoad struct {
	mu    sync.Mutex
	stmts []stmt
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// startReads starts n clients reading @@server_id through db.
func startReads(db *sql.DB, n int) *stmtLoad {
	return startLoad(n, func() (id int, err error) { return id, db.QueryRow("SELECT @@server_id").Scan(&id) })
}

// startWrites starts n clients inserting rows of table writes through
// db.
func startWrites(db *sql.DB, n int) *stmtLoad {
	return startLoad(n, func() (int, error) { _, err := db.Exec("INSERT INTO writes VALUES ()"); return 0, err })
}

// startLoad starts n clients running op, 10 ms apart.
func startLoad(n int, op func() (int, error)) *stmtLoad {
	l := &stmtLoad{done: make(chan struct{})}
	for range n {
		l.wg.Go(func() {
			for {
				select {
				case <-l.done:
					return
				default:
				}
				r := stmt{start: time.Now()}
				r.id, r.err = op()
				r.took = time.Since(r.start)
				l.mu.Lock()
				l.stmts = append(l.stmts, r)
				l.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	return l
}

// stop stops the clients and waits for their statements in flight; it is
// idempotent.
func (l *stmtLoad) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

// since returns the statements that started at or after from.
func (l *stmtLoad) since(from time.Time) []stmt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []stmt
	for _, r := range l.stmts {
		if !r.start.Before(from) {
			out = append(out, r)
		}
	}
	return out
}

// check fails the test for every failed statement and logs the count
// and the slowest.
func (l *stmtLoad) check(t *testing.T, what string) {
	t.Helper()
	all := l.since(time.Time{})
	failed, slowest := 0, time.Duration(0)
	for _, r := range all {
		slowest = max(slowest, r.took)
		if r.err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("%s: a statement failed: %v", what, r.err)
			}
		}
	}
	t.Logf("%s: %d statements, %d failed, the slowest %v", what, len(all), failed, slowest.Round(time.Millisecond))
}

// waitLeaves waits until no read started on the server replicaID for
// replQuiet while reads went on elsewhere, and returns how long after
// from the last read on it started (0 if none did). It fails the test
// when the replica still gets reads limit after from.
func (l *stmtLoad) waitLeaves(t *testing.T, replicaID int, from time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for {
		time.Sleep(50 * time.Millisecond)
		last, othersAfter := from, 0
		for _, r := range l.since(from) {
			if r.err == nil && r.id == replicaID {
				last = r.start
			}
		}
		for _, r := range l.since(last.Add(replQuiet)) {
			if r.err == nil && r.id != replicaID {
				othersAfter++
			}
		}
		if othersAfter > 0 {
			return last.Sub(from)
		}
		if time.Since(from) > limit+replQuiet {
			t.Fatalf("the replica still got reads %v after the fault began (the last started %v after it); the bound with slack is %v",
				time.Since(from).Round(time.Millisecond), last.Sub(from).Round(time.Millisecond), limit)
		}
	}
}

// waitBack waits until a read that started after from is served by the
// server replicaID and returns how long after from that read started.
func (l *stmtLoad) waitBack(t *testing.T, replicaID int, from time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for {
		time.Sleep(50 * time.Millisecond)
		for _, r := range l.since(from) {
			if r.err == nil && r.id == replicaID {
				return r.start.Sub(from)
			}
		}
		if time.Since(from) > limit {
			t.Fatalf("the replica got no read within %v after the fault ended", limit)
		}
	}
}

// TestSlowReplica: a replica that falls behind past max_replica_lag, or
// whose link slows past max_replica_latency or past the probe timeout,
// stops getting reads within the documented bound (computed from the
// health settings; measured figures are logged), no read fails, and it
// gets reads again once it caught up or the link is fast again. With
// -faults.unprotected (no lag or latency cap) the first two must fail.
func TestSlowReplica(t *testing.T) {
	needStack(t)
	pair := startReplicaPair(t)
	primaryID, replicaID := pair.primary.ServerID, pair.replica.ServerID
	maxLag, maxLatency := replMaxLag.String(), replMaxLatency.String()
	if *unprotected {
		maxLag, maxLatency = "1h", "0s"
	}

	t.Run("Lag", func(t *testing.T) {
		const timeout = time.Second
		srv := startReplicaGateway(t, "lag", pair, pair.replica.Addr(), timeout, "    max_replica_lag: "+maxLag+"\n")
		db := open(t, srv.Addr().String())
		l := startReads(db, 4)
		defer l.stop()
		time.Sleep(500 * time.Millisecond)
		if n := len(l.since(time.Time{})); n == 0 || l.since(time.Time{})[n-1].id != replicaID {
			t.Fatalf("reads do not go to the replica %d before the lag (primary %d)", replicaID, primaryID)
		}
		// The replica's SQL thread waits for a table lock held on the
		// replica while the primary writes that table: it runs (the lag
		// is known) and falls behind.
		lock, err := serverRoot(t, pair.replica).Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close()
		if _, err := lock.ExecContext(context.Background(), "LOCK TABLES "+testDB+".lagged WRITE"); err != nil {
			t.Fatal(err)
		}
		locked := true
		defer func() {
			if locked {
				_, _ = lock.ExecContext(context.Background(), "UNLOCK TABLES")
			}
		}()
		wrote := time.Now()
		if _, err := serverRoot(t, pair.primary).Exec("INSERT INTO " + testDB + ".lagged VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		bound := lagBound(timeout)
		left := l.waitLeaves(t, replicaID, wrote, slack(bound))
		last := srv.Health().Backend(pair.replica.Addr()).Last
		t.Logf("lagging replica: its last read started %v after the write it is behind on (bound %v: max_replica_lag %v + 1 s + interval %v + timeout %v); lag seen %v (known %v)",
			left.Round(time.Millisecond), bound, replMaxLag, replInterval, timeout, last.Lag, last.LagKnown)
		if !last.LagKnown || last.Lag <= replMaxLag {
			t.Errorf("the replica left the read set with its lag %v (known %v): not by max_replica_lag", last.Lag, last.LagKnown)
		}
		if left > slack(bound) {
			t.Errorf("the lagging replica got reads for %v, past the bound %v with slack", left, bound)
		}
		time.Sleep(time.Second) // reads go on, on the primary
		if _, err := lock.ExecContext(context.Background(), "UNLOCK TABLES"); err != nil {
			t.Fatal(err)
		}
		locked = false
		caught := time.Now()
		back := l.waitBack(t, replicaID, caught, slack(replInterval+timeout))
		t.Logf("caught-up replica: reads again %v after UNLOCK TABLES (bound interval + timeout: %v)", back.Round(time.Millisecond), replInterval+timeout)
		l.stop()
		l.check(t, "lag")
	})

	t.Run("Latency", func(t *testing.T) {
		// The link's latency puts the probe's round trip (SELECT 1) at
		// about 200 ms, above max_replica_latency, while the whole probe
		// (a handful of round trips) stays within its timeout.
		v := slowLink(t, pair, "latency", 2*time.Second, 100, "    max_replica_latency: "+maxLatency+"\n",
			"slow", func(v *healthcheck.BackendView) bool { return v.Slow })
		if v.State != healthcheck.StateServing || !v.Slow {
			t.Errorf("a replica slowed within the probe timeout: state %v, slow %v; want serving and slow", v.State, v.Slow)
		}
	})

	t.Run("LatencyPastProbeTimeout", func(t *testing.T) {
		// More latency each way than the probe's timeout: the probes
		// fail and the health checks take the replica out, with no
		// latency cap.
		slowLink(t, pair, "latency-timeout", time.Second, 1100, "",
			"not_serving", func(v *healthcheck.BackendView) bool { return v.State == healthcheck.StateNotServing })
	})
}

// slowLink puts the replica behind a fault proxy, starts a gateway over
// it (health timeout, cluster keys more) with reads and writes running,
// adds oneWay ms of latency each way, and checks that the replica stops
// getting reads within slowBound and gets them again within
// recoverBound once the link is fast, that discovery finds it what
// (cond) within slowBound too, and that no statement failed (writes too:
// a probe cut halfway must not make the replica look writable). It
// returns the replica's view in discovery once cond held.
func slowLink(t *testing.T, pair *replicaPair, name string, timeout time.Duration, oneWay int, more, what string, cond func(*healthcheck.BackendView) bool) healthcheck.BackendView {
	t.Helper()
	link := faultproxy.New(t, "gateway-replica", pair.replica.Addr())
	srv := startReplicaGateway(t, name, pair, link.Addr(), timeout, more)
	reads := startReads(open(t, srv.Addr().String()), 4)
	defer reads.stop()
	writes := startWrites(open(t, srv.Addr().String()), 2)
	defer writes.stop()
	time.Sleep(500 * time.Millisecond)
	slowed := time.Now()
	for _, dir := range []faultproxy.Direction{faultproxy.Down, faultproxy.Up} {
		if err := link.Latency(dir, oneWay, 0); err != nil {
			t.Fatal(err)
		}
	}
	bound := slowBound(timeout)
	left := reads.waitLeaves(t, pair.replica.ServerID, slowed, slack(bound))
	var v healthcheck.BackendView
	waitFor(t, "the replica "+what, func() bool {
		v = *srv.Health().Backend(link.Addr())
		return cond(&v)
	})
	found := time.Since(slowed)
	t.Logf("replica slowed by %d ms each way: its last read started %v after, %s after %v (bound %v: (fall %d + 1) × max(interval %v, timeout %v)); probe round trip %v, state %v %s, slow %v",
		oneWay, left.Round(time.Millisecond), what, found.Round(time.Millisecond), bound, replFall, replInterval, timeout, v.Last.RTT.Round(time.Millisecond), v.State, v.Reason, v.Slow)
	if left > slack(bound) {
		t.Errorf("the slowed replica got reads for %v, past the bound %v with slack", left.Round(time.Millisecond), bound)
	}
	if found > slack(bound) {
		t.Errorf("the replica was found %s after %v, past the bound %v with slack", what, found.Round(time.Millisecond), bound)
	}
	time.Sleep(time.Second) // reads go on, on the primary
	fast := time.Now()
	link.Clear()
	backBound := recoverBound(timeout)
	back := reads.waitBack(t, pair.replica.ServerID, fast, slack(backBound))
	t.Logf("link fast again: reads on the replica %v after (bound (rise %d + 1) × max(interval, timeout): %v)", back.Round(time.Millisecond), replRise, backBound)
	reads.stop()
	writes.stop()
	reads.check(t, name+" reads")
	writes.check(t, name+" writes")
	return v
}
