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
//	owners/<cluster>/election/<lease>
//	                          a candidate to own the cluster (value: its
//	                          address), bound to its lease; the oldest leads
//	discovery/<cluster>/election/<lease>
//	                          a gateway candidate to probe the cluster's
//	                          backends for the fleet (value: its ID)
//	discovery/<cluster>/results
//	                          the probing gateway's latest results (JSON)
//
// A gateway's Agent applies the topology (through a Reloader), keeps the
// gateway's pools within its share of each max_backend_connections
// (budget.go: Shares, demand published in the Member record) and shares
// discovery (discovery.go: Discovery, a healthcheck.Share).
//
// Elections (Election, Candidate, Observer) elect one leader per role and
// cluster: the owner of a cluster, and the gateway that probes it.
// Candidates campaign with etcd's election recipe; observers (gateways)
// follow who leads. A leader is Valid only while its lease is known to
// hold, a margin (a quarter of the TTL) before etcd could expire it,
// counting from each renewal's send; it steps down by itself when
// renewals stop, before anyone else can be elected.
//
// etcd is the only consensus in the fleet; this package builds nothing of
// its own on top of it but key layout and timing. It knows nothing of
// client sessions: the gateway hands it a Reloader and reads its Status.
package fleet
