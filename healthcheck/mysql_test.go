package healthcheck

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMySQLProber probes real servers when HEALTHCHECK_MYSQL_ADDR (one or
// more comma-separated host:port of one cluster) is set, with
// HEALTHCHECK_MYSQL_USER (default root) and HEALTHCHECK_MYSQL_PASSWORD, then
// runs an Observer over them and logs its snapshot. It is skipped
// otherwise.
func TestMySQLProber(t *testing.T) {
	addrs := os.Getenv("HEALTHCHECK_MYSQL_ADDR")
	if addrs == "" {
		t.Skip("HEALTHCHECK_MYSQL_ADDR not set")
	}
	user := os.Getenv("HEALTHCHECK_MYSQL_USER")
	if user == "" {
		user = "root"
	}
	p := MySQLProber{User: user, Password: os.Getenv("HEALTHCHECK_MYSQL_PASSWORD"), Timeout: 2 * time.Second}
	var bs []Backend
	for _, addr := range strings.Split(addrs, ",") {
		b := Backend{Addr: addr, Cluster: "c"}
		bs = append(bs, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r := p.Probe(ctx, b)
		cancel()
		t.Logf("probe %s: %+v", addr, r)
		if r.Err != nil || !r.Reachable {
			t.Fatalf("probe failed: %+v", r)
		}
		if r.Version == "" || r.RTT <= 0 {
			t.Errorf("missing version or RTT: %+v", r)
		}
	}

	o, err := New(Config{Interval: 100 * time.Millisecond, Prober: p, Backends: staticBackends(bs...)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	waitFor(t, func() bool { return o.Snapshot().Round >= 2 })
	s := o.Snapshot()
	c := s.Cluster("c")
	t.Logf("cluster: primary %q (%s) split brain %v replicas %v", c.Primary, c.NoPrimaryReason, c.SplitBrain, c.Replicas)
	for _, a := range c.Backends {
		v := s.Backend(a)
		t.Logf("  %s: %v %v reason %q lag %v known %v rtt %v", a, v.State, v.Role, v.Reason, v.Last.Lag, v.Last.LagKnown, v.Last.RTT)
	}
}

func TestMySQLProberUnreachable(t *testing.T) {
	p := MySQLProber{User: "nobody", Timeout: 200 * time.Millisecond}
	// Port 1 on loopback: refused at once.
	r := p.Probe(context.Background(), Backend{Addr: "127.0.0.1:1", Cluster: "c"})
	if r.Reachable || r.Err == nil {
		t.Fatalf("probe of a closed port: %+v", r)
	}
	if ok, _ := judge(r); ok {
		t.Error("unreachable result judged good")
	}
}
