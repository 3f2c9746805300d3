package gateway

import (
	"testing"
	"time"

	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

func TestSplitTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		db   string
		tgt  target
		seen bool
	}{
		{"shop@replica", "shop", targetReplica, true},
		{"shop@REPLICA", "shop", targetReplica, true},
		{"shop@rdonly", "shop", targetReplica, true},
		{"shop@primary", "shop", targetPrimary, true},
		{"shop@master", "shop", targetPrimary, true},
		{"@replica", "", targetReplica, true},
		{"shop", "shop", targetDefault, false},
		{"my@db", "my@db", targetDefault, false},
		{"a@b@replica", "a@b", targetReplica, true},
	} {
		db, tgt, ok := splitTarget(tc.in)
		if db != tc.db || tgt != tc.tgt || ok != tc.seen {
			t.Errorf("splitTarget(%q) = %q, %v, %v; want %q, %v, %v", tc.in, db, tgt, ok, tc.db, tc.tgt, tc.seen)
		}
	}
}

func TestRoutingDecisions(t *testing.T) {
	ss := benchSession(t, 2)
	primary := ss.cluster.backend("fake:1")
	where := func(sql string) *backend {
		t.Helper()
		route := ss.srv.classifier.Classify(sql)
		conn, err := ss.backend(route, "", false)
		if err != nil {
			t.Fatal(err)
		}
		be := conn.be
		res := wire.Result{Status: ss.status}
		if querypath.ResultDiag(sql).FoundRowsAreRows {
			res.HadResultSet = true // what a SELECT answers
		}
		ss.afterStatement(conn, route, res, []byte(sql))
		conn.dirty = false // these connections do no I/O: no reset
		ss.setPins(0)
		ss.releaseLease()
		return be
	}
	replica := where("SELECT 1")
	if replica == primary {
		t.Fatal("read went to the primary with replica_reads on")
	}
	for range 20 {
		if be := where("SELECT c FROM t WHERE id = 1"); be != replica {
			t.Fatalf("session moved from %s to %s without cause", replica.addr, be.addr)
		}
	}
	for _, sql := range []string{
		"UPDATE t SET c = 1",
		"SELECT c FROM t WHERE id = 1 FOR UPDATE",
		"SELECT LAST_INSERT_ID()",
		"SELECT @x := 1",
		"SELECT GET_LOCK('a', 0)",
		"SHOW SLAVE STATUS",
	} {
		if be := where(sql); be != primary {
			t.Errorf("%q went to %s, want the primary", sql, be.addr)
		}
	}
	// In a transaction every statement goes to the primary.
	ss.status = wire.StatusInTrans | wire.StatusAutocommit
	if be := where("SELECT 1"); be != primary {
		t.Errorf("read in a transaction went to %s", be.addr)
	}
	ss.status = wire.StatusAutocommit
	// USE db@primary overrides replica_reads for the session.
	ss.target = targetPrimary
	if be := where("SELECT 1"); be != primary {
		t.Errorf("read with target primary went to %s", be.addr)
	}
	ss.target = targetDefault

	// The sticky replica turns slow compared with the other: the session
	// moves, and stays on the new one.
	now := time.Now()
	for range 50 {
		replica.load.Begin()
		replica.load.End(now.Add(-20*time.Millisecond), now)
	}
	var other *backend
	for _, be := range *ss.cluster.backends.Load() {
		if be != primary && be != replica {
			other = be
		}
	}
	other.load.Begin()
	other.load.End(now.Add(-time.Millisecond), now)
	// Leaving is a new weighted random pick (the slow replica keeps a small
	// chance), made again at every statement until the session is on a
	// replica it may keep.
	moved := false
	for range 30 {
		if where("SELECT 1") == other {
			moved = true
			break
		}
	}
	if !moved {
		t.Fatalf("session stayed on the replica scoring %v while %s scores %v", replica.load.Score(), other.addr, other.load.Score())
	}
	for range 10 {
		if be := where("SELECT 1"); be != other {
			t.Fatal("session did not stay on its new replica")
		}
	}
}

// TestPickReplicaLeavesOutLaggingAndSlow: a replica qualifies for reads
// only while its lag is known and at most max_replica_lag and discovery
// does not call it slow (its probe round trip above max_replica_latency);
// when none qualifies, reads go to the primary (pickReplica returns nil).
func TestPickReplicaLeavesOutLaggingAndSlow(t *testing.T) {
	ss := benchSession(t, 2) // fake:1 primary, fake:2 and fake:3 replicas
	conf := *ss.cluster.conf.Load()
	conf.MaxReplicaLag = new(2 * time.Second)
	view := func(lag time.Duration, lagKnown, slow bool) *healthcheck.BackendView {
		return &healthcheck.BackendView{State: healthcheck.StateServing, Role: healthcheck.RoleReplica, Slow: slow,
			Last: healthcheck.Result{Reachable: true, ReadOnly: true, Replica: true, Lag: lag, LagKnown: lagKnown, RTT: time.Millisecond}}
	}
	for _, tc := range []struct {
		what   string
		r2, r3 *healthcheck.BackendView
		want   string // "" for the primary
	}{
		{"fake:2 slow", view(0, true, true), view(0, true, false), "fake:3"},
		{"fake:3 lagging past max_replica_lag", view(0, true, false), view(3*time.Second, true, false), "fake:2"},
		{"fake:3 at max_replica_lag", view(3*time.Second, true, false), view(2*time.Second, true, false), "fake:3"},
		{"fake:2 lag unknown, fake:3 slow", view(0, false, false), view(0, true, true), ""},
		{"both slow", view(0, true, true), view(0, true, true), ""},
	} {
		snap := &healthcheck.Snapshot{
			Clusters: map[string]*healthcheck.Cluster{"main": {Name: "main", Primary: "fake:1", Replicas: []string{"fake:2", "fake:3"}}},
			Backends: map[string]*healthcheck.BackendView{"fake:2": tc.r2, "fake:3": tc.r3},
		}
		for range 20 { // a random pick: every one must qualify
			got := ""
			if be := ss.pickReplica(snap, &conf, ""); be != nil {
				got = be.addr
			}
			if got != tc.want {
				t.Fatalf("%s: read goes to %q, want %q", tc.what, got, tc.want)
			}
		}
	}
}
