// Package fleet keeps a fleet of gateways and owners on etcd: the topology
// (clusters and users) they all apply, the registration of every live
// process under a lease, and the leaderships elected among them (the
// discovery prober of a cluster, the owner of a cluster).
//
// Keys, under the configured prefix (default /directgate):
//
//	topology                  the topology document (YAML: clusters, users)
//	members/gateway/<id>      a live gateway (JSON Member), bound to its lease
//	members/owner/<id>        a live owner process, bound to its lease
//
// etcd is the only consensus in the fleet; this package builds nothing of
// its own on top of it but key layout and timing. It knows nothing of
// client sessions: the gateway hands it a Reloader and reads its Status.
package fleet
