// Package docker holds the container setup of directgate and its checks:
//
//	Dockerfile               the gateway image (static binary on scratch)
//	compose.yaml             primary, GTID replica, owner and gateway
//	gateway.yaml             the gateway config compose mounts
//	primary-init.sql         accounts and demo schema, binlogged on the primary
//	replica-init.sh          makes the replica replicate the primary from its first event
//	fleet/compose.yaml       the fleet: etcd, the same primary and replica, a one-shot
//	                         topology service (gateway topo put), two owners electing
//	                         a leader, three gateways
//	fleet/gateway.yaml       the fleet's gateway config: listen addresses, topology.etcd
//	fleet/topology.yaml      the clusters and users it stores in etcd
//
// No Docker engine is needed for the tests: they parse these files and
// check that they agree (addresses, ports, accounts, mounts, health
// conditions, start order; the fleet's topology through the gateway's own
// validation, and the fleet's stack against compose.yaml's), build the
// binary with the Dockerfile's flags and check it is static, and run the
// init files against real mariadbd processes (package mariadbtest) when
// MariaDB is installed.
package docker
