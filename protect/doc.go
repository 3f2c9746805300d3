// Package protect holds the gateway's protections: hot-row protection
// (HotRows), transaction throttling by replica lag (Throttle), load
// shedding (Shedding) and query consolidation (Consolidation). Each is a
// Policy of a cluster, kept in the cluster's Set, and each session holds
// one Guard through which it calls them at four fixed points of a
// statement's life:
//
//   - Admit, when the statement is admitted, before any backend is
//     chosen (throttling delays a new write transaction, hot-row
//     protection queues a write on a hot row, consolidation notes a
//     write);
//   - Chosen, once its backend is chosen and before it takes a
//     connection of it (shedding);
//   - AnswerEnded, with the last packet of its answer before the client
//     has it (hot rows given back, consolidation's write count);
//   - TxnEnded, when the server reports the transaction over, and at the
//     session's end.
//
// A policy sees the session only through the small Session interface,
// and a backend through Backend. A new protection is one file here: a
// type that embeds Hooks, implements the points it needs and Rows (its
// line in SHOW GATEWAY PROTECTIONS and on the status page), optionally
// Collector (its metrics), and one line in the gateway's list of a
// cluster's policies (gateway/protections.go); its settings are a key of
// config.Cluster.
//
// Query consolidation is also a relay: the gateway's session runs a
// leader's read and writes its copy to the followers; this package keeps
// the flights and counts them.
package protect
