package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/healthcheck"
)

// Under a fleet-wide cap, discovery does not open its probe connection to
// a backend until the fleet's budget gives the gateway room for it
// (SetBackendLimit with probes): a probe waits for that within its
// timeout, then declines (healthcheck.ErrNotProbed). Without a fleet, or
// without a cap, it probes at once.
func TestProbeWaitsForFleetRoom(t *testing.T) {
	cfg, err := config.Parse([]byte(`users: [{user: app}]
clusters:
  - {name: capped, backend_user: g, backends: ["127.0.0.1:1"], max_backend_connections: 10, pool: {min_idle: 0}}
  - {name: free, backend_user: g, backends: ["127.0.0.1:2"], pool: {min_idle: 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{clusters: map[string]*cluster{}}
	for _, cc := range cfg.Clusters {
		c, err := newCluster(cc, hclog.NewNullLogger(), time.Second, true, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.close)
		s.clusters[cc.Name] = c
		s.clusterNames = append(s.clusterNames, cc.Name)
	}
	p := clusterProber{s: s, timeout: time.Second}
	probe := func(cluster, addr string, wait time.Duration) healthcheck.Result {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		return p.Probe(ctx, healthcheck.Backend{Addr: addr, Cluster: cluster})
	}
	capped, free := healthcheck.Backend{Addr: "127.0.0.1:1", Cluster: "capped"}, healthcheck.Backend{Addr: "127.0.0.1:2", Cluster: "free"}

	if r := probe(free.Cluster, free.Addr, time.Second); r.Err == nil || errors.Is(r.Err, healthcheck.ErrNotProbed) {
		t.Fatalf("uncapped backend: %v, want a real probe (refused)", r.Err)
	}
	if r := probe(capped.Cluster, capped.Addr, 50*time.Millisecond); !errors.Is(r.Err, healthcheck.ErrNotProbed) {
		t.Fatalf("capped backend before any share: %v, want ErrNotProbed", r.Err)
	}
	loads := s.BackendLoads()
	for _, l := range loads {
		if l.Cluster == "capped" && (l.ProbesHeld || l.Limit != 0 || l.Max != 10) {
			t.Fatalf("capped backend's load before any share: %+v", l)
		}
	}

	// A share without the probes: the pools may grow, the probe still
	// waits; with them, a waiting probe goes at once.
	s.SetBackendLimit(capped.Cluster, capped.Addr, 4, false)
	done := make(chan healthcheck.Result, 1)
	go func() { done <- probe(capped.Cluster, capped.Addr, 10*time.Second) }()
	select {
	case r := <-done:
		t.Fatalf("the probe went before its room: %v", r.Err)
	case <-time.After(50 * time.Millisecond):
	}
	s.SetBackendLimit(capped.Cluster, capped.Addr, 4, true)
	if r := <-done; r.Err == nil || errors.Is(r.Err, healthcheck.ErrNotProbed) {
		t.Fatalf("after the room was given: %v, want a real probe (refused)", r.Err)
	}
	for _, l := range s.BackendLoads() {
		if l.Cluster == "capped" && (!l.ProbesHeld || l.Limit != 4) {
			t.Fatalf("capped backend's load after its share: %+v", l)
		}
	}
}
