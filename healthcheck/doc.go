// Package healthcheck discovers the state of the backends: which ones
// serve, which one is the primary of each cluster, and how far behind the
// replicas are.
//
// Discovery is a background process, not a per-session one. An Observer
// runs one loop that, every Config.Interval, probes every backend returned
// by Config.Backends in shuffled order, with at most Config.BatchSize
// probes in flight, and then publishes one immutable Snapshot through an
// atomic pointer. Sessions read the snapshot with Observer.Snapshot, which
// takes no lock. A round over N backends whose probes take p lasts about
// ceil(N/BatchSize) × p.
//
// # Probing
//
// A Prober checks one backend. MySQLProber is the real one: it opens a
// connection of its own for every probe (never a serving pool's), times a
// SELECT 1, and reads @@read_only, @@server_id, @@version and the
// replication status (SHOW ALL SLAVES STATUS on MariaDB, then SHOW REPLICA
// STATUS and SHOW SLAVE STATUS). Tests inject fakes. A prober may decline
// to probe (a Result whose Err wraps ErrNotProbed, as a gateway does while
// a fleet-wide connection cap has no room for the probe's connection):
// the backend's state, the probe counts and the share are left alone.
//
// # States
//
// Every backend is StateUnknown when it first appears; its first good
// probe makes it StateServing (there is nothing to flap from yet). After
// that, Config.Fall failed probes in a row make it StateNotServing and
// Config.Rise good ones serving again; a single bad or good probe changes
// nothing. A
// probe fails when the backend is unreachable or when the prober reports
// an error. A replica whose lag is NULL (replication stopped) or cannot be
// read still serves: readers leave it out by its lag, and it may be about
// to be promoted. A slow probe within Config.Timeout is a good probe: a
// slow backend is not a dead one. The snapshot keeps, for every backend,
// the reason for its state and since when it holds; state changes are
// logged, single probes are not.
//
// A slow backend can still be kept from readers: with Config.MaxLatency,
// a backend whose probe round trip (the SELECT 1) is above its cluster's
// cap on Fall probes in a row is marked Slow in the snapshot, and Rise
// probes in a row within the cap clear it (the first timed probe decides
// alone). Slow leaves State alone; readers give slow replicas no reads.
//
// A caller that sees a connection error calls Observer.ReportFailure: the
// backend is marked not serving (suspect) at once, a snapshot saying so is
// published before the call returns, and the backend is probed at once.
// Probes begun before the report do not count. The first probe after the
// report decides alone: good, the backend serves again (a false alarm
// costs one probe); failed, it is down and needs Rise good probes.
// Observer.Check probes one backend at once (throttled per backend), for
// example when a backend the snapshot calls primary refuses a write as
// read-only. Observer.Refresh requests an early round without waiting;
// early rounds start no sooner than Interval/4 after the previous round
// started. Snapshot.Changed lets a caller wait for the next snapshot.
//
// # Roles
//
// Within a cluster, a serving backend with read_only off is writable. With
// exactly one writable backend, it is the primary (RolePrimary). With
// several, the cluster is in split brain: Cluster.SplitBrain is set, no
// primary is chosen (writes must be refused, never guessed), and the
// condition is logged at error level. Serving read-only backends are
// replicas, listed fastest probe round-trip first.
//
// # Concurrency
//
// All methods of Observer are safe for concurrent use. The observer's
// mutex guards its bookkeeping only; it is never held across a probe or a
// log call. Close cancels the probes in flight and waits for the loop.
package healthcheck
