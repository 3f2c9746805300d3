package docker

// Checks of the fleet compose file (fleet/compose.yaml) beyond those every
// compose file gets (compose_test.go): the shape of make run-fleet, and
// that it is make run's stack but for what a fleet changes.

import (
	"reflect"
	"regexp"
	"strconv"
	"testing"

	"github.com/directgate/directgate/config"
)

// etcd pinned to a release; several gateways and a standby owner per
// cluster; a fleet-wide connection budget every gateway gets a share of
// and the servers accept.
func TestComposeFleetShape(t *testing.T) {
	s := loadStack(t, fleetComposePath)
	if !s.base.FromEtcd() {
		t.Fatalf("%s: no topology.etcd: the fleet's clusters and users come from etcd", s.configPath)
	}
	if s.base.FileTopologyIgnored {
		t.Errorf("%s has clusters or users, which topology.etcd ignores: they belong in %s", s.configPath, s.topologyPath)
	}
	for name, svc := range s.etcd {
		if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(imageTag(svc.Image)) {
			t.Errorf("etcd service %s: image %s: pin a release (vX.Y.Z)", name, svc.Image)
		}
	}
	if len(s.gateways) < 2 {
		t.Errorf("%d gateway service: a fleet has several", len(s.gateways))
	}
	owners := map[string]int{}
	for _, o := range s.owners {
		name, _ := flagValue(o.args, "--cluster")
		owners[name]++
	}
	for name, n := range owners {
		if n < 2 {
			t.Errorf("cluster %s: %d owner service: want a leader and a standby", name, n)
		}
	}

	for _, cl := range s.cfg.Clusters {
		budget := cl.MaxBackendConnections
		if budget == 0 {
			t.Errorf("cluster %s: no max_backend_connections: the gateways share no budget", cl.Name)
			continue
		}
		// Each gateway holds at least discovery's probe and one pooled
		// connection per backend.
		if budget < 2*len(s.gateways) {
			t.Errorf("cluster %s: max_backend_connections %d is less than 2 for each of %d gateways", cl.Name, budget, len(s.gateways))
		}
		for _, b := range cl.Backends {
			host, _ := splitAddr(t, "backend", b)
			name, svc := s.mariadbService(host)
			if svc == nil {
				continue // TestComposeAddresses says so
			}
			maxConns := 151 // MariaDB's default
			if v, ok := serverFlags(svc.Command)["max-connections"]; ok {
				maxConns, _ = strconv.Atoi(v)
			}
			if budget > maxConns {
				t.Errorf("cluster %s: max_backend_connections %d is above service %s's --max-connections %d", cl.Name, budget, name, maxConns)
			}
		}
	}
}

// The fleet runs make run's demo: compose.yaml's databases as they are
// (so TestInitFilesOnMariaDB covers its init files too), gateway.yaml's
// settings, cluster and users, but for the owner address (the gateways
// follow the elected owner), the connection budget and where clusters and
// users live.
func TestComposeFleetLikeCompose(t *testing.T) {
	fleet, classic := loadStack(t, fleetComposePath), loadStack(t, composePath)

	for name, svc := range fleet.mariadb {
		if c, ok := classic.mariadb[name]; !ok {
			t.Errorf("mariadb service %s: not in %s", name, composePath)
		} else if !reflect.DeepEqual(svc, c) {
			t.Errorf("mariadb service %s differs from %s's:\n%s: %+v\n%s: %+v", name, composePath, fleetComposePath, *svc, composePath, *c)
		}
	}
	for name := range classic.mariadb {
		if _, ok := fleet.mariadb[name]; !ok {
			t.Errorf("mariadb service %s of %s: not in %s", name, composePath, fleetComposePath)
		}
	}

	// The file's own keys.
	f, c := *fleet.base, *classic.base
	f.Topology, f.Clusters, f.Users, f.FileTopologyIgnored = c.Topology, c.Clusters, c.Users, c.FileTopologyIgnored
	// twopc.log_cluster defaults to the first cluster: the topology's.
	f.TwoPC.LogCluster = c.TwoPC.LogCluster
	if !reflect.DeepEqual(f, c) {
		t.Errorf("%s differs from %s beyond topology, clusters and users:\n%+v\n%+v", fleet.configPath, classic.configPath, *fleet.base, *classic.base)
	}

	if !reflect.DeepEqual(fleet.cfg.Users, classic.cfg.Users) {
		t.Errorf("users of %s differ from %s's: %+v, %+v", fleet.topologyPath, classic.configPath, fleet.cfg.Users, classic.cfg.Users)
	}
	if len(fleet.cfg.Clusters) != len(classic.cfg.Clusters) {
		t.Errorf("%s has %d clusters, %s %d", fleet.topologyPath, len(fleet.cfg.Clusters), classic.configPath, len(classic.cfg.Clusters))
	}
	for _, fc := range fleet.cfg.Clusters {
		cc := clusterNamed(classic.cfg, fc.Name)
		if cc == nil {
			t.Errorf("cluster %s of %s: not in %s", fc.Name, fleet.topologyPath, classic.configPath)
			continue
		}
		a, b := fc, *cc
		for _, cl := range []*config.Cluster{&a, &b} {
			cl.Owner, cl.MaxBackendConnections = "", 0
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("cluster %s differs beyond owner and max_backend_connections:\n%s: %+v\n%s: %+v", fc.Name, fleet.topologyPath, fc, classic.configPath, *cc)
		}
	}
}
