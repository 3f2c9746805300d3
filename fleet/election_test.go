package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/e2e/etcdtest"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }

func TestFenceMargin(t *testing.T) {
	for _, tc := range []struct{ ttl, want time.Duration }{
		{2 * time.Second, 500 * time.Millisecond},
		{10 * time.Second, 2500 * time.Millisecond},
	} {
		if got := fenceMargin(tc.ttl); got != tc.want {
			t.Errorf("margin of TTL %v: %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

// The fence is open from lead until the last renewal's send time plus the
// TTL, less the margin; never for another term, never after stepDown.
func TestFence(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	f := newFence(clk.now, 500*time.Millisecond)
	if f.lead(7) {
		t.Fatal("led without a lease")
	}
	start := clk.t
	f.renewed(start, 2*time.Second) // open until start + 1.5 s
	if f.valid(7) || f.current() != 0 {
		t.Fatal("valid before lead")
	}
	if !f.lead(7) || !f.valid(7) || f.current() != 7 {
		t.Fatal("lead with a fresh lease failed")
	}
	if f.valid(6) || f.valid(0) {
		t.Fatal("another term is valid")
	}
	clk.add(1499 * time.Millisecond)
	if !f.valid(7) {
		t.Fatal("closed before TTL - margin")
	}
	clk.add(time.Millisecond)
	if f.valid(7) || f.current() != 0 {
		t.Fatal("open at TTL - margin after the last renewal's send")
	}
	// A renewal sent earlier, answered late, does not shorten the fence;
	// a later one reopens it for the same term.
	f.renewed(start.Add(100*time.Millisecond), 2*time.Second)
	if !f.valid(7) || !f.expiry().Equal(start.Add(1600*time.Millisecond)) {
		t.Fatalf("after a renewal sent at +100ms: valid %v, expiry %v", f.valid(7), f.expiry().Sub(start))
	}
	f.renewed(start, 2*time.Second)
	if !f.expiry().Equal(start.Add(1600 * time.Millisecond)) {
		t.Fatal("an older renewal shortened the fence")
	}
	f.stepDown()
	if f.valid(7) || f.current() != 0 {
		t.Fatal("valid after stepDown")
	}
	// An expired lease cannot open a term.
	clk.add(time.Second)
	if f.lead(8) {
		t.Fatal("led with an expired lease")
	}
	f.reset()
	if !f.expiry().IsZero() {
		t.Fatal("reset kept the lease")
	}
}

// dialMore connects another client (another process) to the test etcd.
func dialMore(t *testing.T, srv *etcdtest.Server) *Client {
	t.Helper()
	c, err := Dial(&config.Etcd{Endpoints: []string{srv.Endpoint}, Prefix: "/test", DialTimeout: 2 * time.Second, LeaseTTL: 2 * time.Second}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitChange waits for ch with a bound.
func waitChange(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// One candidate leads, the other stands by; observers see the leader's
// value; when the leader stops, the standby leads at once (the lease is
// revoked, not left to expire) in a later term.
func TestElectionLeaderStandby(t *testing.T) {
	srv, c := startEtcd(t)
	ctx := context.Background()
	obs := c.Election(RoleOwners, "main").Observe(ctx)
	if v, _ := obs.Leader(); v != "" {
		t.Fatalf("leader %q before any candidate", v)
	}

	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	a := dialMore(t, srv).Election(RoleOwners, "main").Candidate("a:1")
	ch := a.Changed()
	a.Campaign(actx)
	waitChange(t, "a to lead", ch)
	termA := a.Term()
	if termA == 0 || !a.Valid(termA) {
		t.Fatalf("a: term %d valid %v", termA, a.Valid(termA))
	}
	waitFor(t, "observers to see a", func() bool { v, _ := obs.Leader(); w, _ := a.Leader(); return v == "a:1" && w == "a:1" })

	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	b := dialMore(t, srv).Election(RoleOwners, "main").Candidate("b:2")
	chB := b.Changed()
	b.Campaign(bctx)
	time.Sleep(500 * time.Millisecond)
	if b.Term() != 0 || !a.Valid(termA) {
		t.Fatalf("with a leading: b term %d, a valid %v", b.Term(), a.Valid(termA))
	}
	waitFor(t, "b to see a lead", func() bool { v, _ := b.Leader(); return v == "a:1" })

	start := time.Now()
	stopA()
	<-a.Done()
	if a.Valid(termA) || a.Term() != 0 {
		t.Fatal("a still valid after it stopped")
	}
	waitChange(t, "b to lead", chB)
	took := time.Since(start)
	termB := b.Term()
	if termB <= termA || !b.Valid(termB) {
		t.Fatalf("b: term %d after a's %d, valid %v", termB, termA, b.Valid(termB))
	}
	if took > time.Second {
		t.Errorf("b led %v after a resigned; a resignation should hand over at once", took)
	}
	waitFor(t, "observers to see b", func() bool { v, _ := obs.Leader(); return v == "b:2" })

	stopB()
	<-b.Done()
	waitFor(t, "observers to see no leader", func() bool { v, _ := obs.Leader(); return v == "" })
}

// A leader cut off from etcd stops being Valid before etcd expires its
// lease: when the standby starts leading, the old leader's fence closed
// at least half its margin earlier. (Regression guard for the fencing of
// sequence values across a failover.)
func TestElectionFenceClosesBeforeTakeover(t *testing.T) {
	srv, _ := startEtcd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca := dialMore(t, srv)
	a := ca.Election(RoleOwners, "main").Candidate("a:1")
	ch := a.Changed()
	a.Campaign(ctx)
	waitChange(t, "a to lead", ch)
	termA := a.Term()

	b := dialMore(t, srv).Election(RoleOwners, "main").Candidate("b:2")
	chB := b.Changed()
	b.Campaign(ctx)
	time.Sleep(300 * time.Millisecond)

	// Cut a off: its client is closed, its lease is left to expire (or,
	// when the close lets a's revoke through, a steps down first). When a
	// stopped being valid is watched, not read off its fence: a fence a
	// stepped down from keeps its last expiry.
	cut := time.Now()
	closedAt := make(chan time.Time, 1)
	go func() {
		for a.Valid(termA) {
			time.Sleep(time.Millisecond)
		}
		closedAt <- time.Now()
	}()
	_ = ca.Close()
	waitChange(t, "b to lead", chB)
	led := time.Now()
	var closed time.Time
	select {
	case closed = <-closedAt:
	default:
		t.Fatal("a is still valid while b leads")
	}
	// The watcher may run late on a loaded machine: a was invalid by its
	// fence's expiry at the latest (no renewal arrives after the cut).
	if exp := a.fence.expiry(); exp.Before(closed) {
		closed = exp
	}
	// When the close let a's revoke through, a stepped down and b led
	// at once: the fence only had to close first (checked above). When
	// a's lease was left to expire (b leads a TTL after the cut), the
	// fence closed its margin before the expiry.
	margin := fenceMargin(2 * time.Second)
	if gap := led.Sub(closed); led.Sub(cut) >= time.Second && gap < margin/2 {
		t.Fatalf("a stopped being valid only %v before b led (margin %v), %v after the cut", gap, margin, led.Sub(cut))
	}
	t.Logf("cut off at 0; a stopped being valid at %v; b led at %v (lease TTL 2s)",
		closed.Sub(cut).Round(time.Millisecond), led.Sub(cut).Round(time.Millisecond))
	if a.Term() != 0 {
		t.Fatal("a did not step down")
	}
}
