package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/directgate/directgate/healthcheck"
)

// Two gateways share discovery: one leads and probes, the other takes its
// published results; when the leader stops, the other takes over.
func TestDiscoveryShares(t *testing.T) {
	_, c := startEtcd(t)
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	interval := 100 * time.Millisecond
	a := c.StartDiscovery(ctxA, "a", []string{"main"}, interval)
	waitFor(t, "a to lead", func() bool { return a.Leads("main") })
	b := c.StartDiscovery(ctxB, "b", []string{"main"}, interval)
	be := healthcheck.Backend{Addr: "127.0.0.1:1", Cluster: "main"}

	if _, ok := a.Result(be); ok {
		t.Fatal("the leader got a result to take instead of probing")
	}
	if _, ok := b.Result(be); ok {
		t.Fatal("the follower has a result before anything was published")
	}
	// The leader probes; its results reach the follower.
	// (Probed again on every poll: a result is fresh for 3 intervals
	// only, and the test may be slower than that on a loaded machine.)
	waitFor(t, "the follower to take the leader's result", func() bool {
		a.Probed(be, healthcheck.Result{Reachable: true, ServerID: 7, RTT: time.Millisecond})
		r, ok := b.Result(be)
		return ok && r.ServerID == 7 && r.Reachable
	})
	// A gateway that joins now starts with the leader's latest results
	// (its interval of 10 s keeps them fresh however slow this test is).
	ctxC, stopC := context.WithCancel(context.Background())
	defer stopC()
	if r, ok := c.StartDiscovery(ctxC, "c", []string{"main"}, 10*time.Second).Result(be); !ok || r.ServerID != 7 {
		t.Fatalf("a joining follower: %+v, %v; want the published result at once", r, ok)
	}
	stopC()
	waitFor(t, "the failed probe to reach the follower", func() bool {
		a.Probed(be, healthcheck.Result{Err: errors.New("connection refused")})
		r, ok := b.Result(be)
		return ok && r.Err != nil && r.Err.Error() == "connection refused"
	})
	// A follower's own probes are not published.
	b.Probed(be, healthcheck.Result{Reachable: true, ServerID: 9})
	time.Sleep(3 * interval)
	if r, _ := b.Result(be); r.ServerID == 9 {
		t.Fatal("a follower's probe was published")
	}
	// Results go stale without a leader: the follower probes itself.
	stopA()
	waitFor(t, "b to take over", func() bool { return b.Leads("main") })
	if _, ok := b.Result(be); ok {
		t.Fatal("the new leader takes results instead of probing")
	}
}
