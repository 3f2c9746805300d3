package config

import (
	"strings"
	"testing"
	"time"
)

const etcdOnly = `
topology: {etcd: {endpoints: ["127.0.0.1:2379"]}}
`

func TestEtcdTopologyDefaults(t *testing.T) {
	c, err := Parse([]byte(etcdOnly))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Topology.Etcd
	if !c.FromEtcd() || e.Prefix != "/directgate" || e.DialTimeout != 5*time.Second || e.LeaseTTL != 10*time.Second || *e.BudgetHold != 5*time.Minute {
		t.Errorf("etcd defaults: %+v", e)
	}
	if len(c.Clusters) != 0 || c.FileTopologyIgnored {
		t.Errorf("clusters %v, ignored %v", c.Clusters, c.FileTopologyIgnored)
	}
}

func TestEtcdTopologyIgnoresFileClusters(t *testing.T) {
	c, err := Parse([]byte(minimal + etcdOnly))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Clusters) != 0 || len(c.Users) != 0 || !c.FileTopologyIgnored {
		t.Errorf("clusters %v users %v ignored %v", c.Clusters, c.Users, c.FileTopologyIgnored)
	}
}

func TestWithTopology(t *testing.T) {
	base, err := Parse([]byte(etcdOnly + "listen: 127.0.0.1:4000\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := base.WithTopology([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:4000" || len(c.Clusters) != 1 || c.Clusters[0].Pool.Size != 64 || c.Users[0].Cluster != "main" {
		t.Errorf("merged: listen %s clusters %+v users %+v", c.Listen, c.Clusters, c.Users)
	}
	if len(base.Clusters) != 0 {
		t.Error("WithTopology changed its receiver")
	}
	// A second topology replaces the first one's clusters and users.
	c2, err := c.WithTopology([]byte(strings.Replace(minimal, "app", "other", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Users[0].User != "other" || len(c2.Users) != 1 {
		t.Errorf("users %+v", c2.Users)
	}
}

func TestWithTopologyErrors(t *testing.T) {
	base, err := Parse([]byte(etcdOnly))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ doc, want string }{
		{"", "at least one cluster and one user"},
		{"listen: 1.2.3.4:5\n" + minimal, "field listen not found"},
		{strings.Replace(minimal, `backends: ["127.0.0.1:13306"]`, `backends: ["nope"]`, 1), "clusters[0].backends[0]"},
		{minimal + "  - name: main\n    backend_user: g\n    backends: [\"127.0.0.1:1\"]\n", `clusters[1].name: "main" is used twice`},
	} {
		_, err := base.WithTopology([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("doc %q: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestEtcdValidation(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`topology: {etcd: {}}`, "topology.etcd.endpoints: at least one"},
		{`topology: {etcd: {endpoints: [a:1], prefix: x}}`, "topology.etcd.prefix"},
		{`topology: {etcd: {endpoints: [a:1], prefix: /x/}}`, "topology.etcd.prefix"},
		{`topology: {etcd: {endpoints: [a:1], lease_ttl: 1s}}`, "topology.etcd.lease_ttl"},
		{`topology: {etcd: {endpoints: [a:1], lease_ttl: 2500ms}}`, "topology.etcd.lease_ttl"},
		{`topology: {etcd: {endpoints: [a:1], budget_hold: -1s}}`, "topology.etcd.budget_hold"},
		{`topology: {etcd: {endpoints: [a:1], tls: {cert: c}}}`, "topology.etcd.tls"},
		{`topology: {etcd: {endpoints: [a:1], password: p, password_env: P}}`, "topology.etcd.password"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
