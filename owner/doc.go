// Package owner is the owner process of one cluster (`gateway owner`): the
// single writer of the cluster's Vitess-style sequence and message tables.
// Gateways forward the statements on those tables to it over the MySQL
// protocol; it runs them against the cluster's primary.
//
// # Serving gateways
//
// The owner listens on the cluster's owner address (or WithListen's,
// gateway owner --listen). Clients log in with
// the cluster's backend_user and backend_password (mysql_native_password;
// caching_sha2_password fast auth is accepted too) and may name a default
// database, changed later with COM_INIT_DB (any name is accepted: the
// owner checks tables, not databases). Results use classic EOF packets:
// the owner never offers CLIENT_DEPRECATE_EOF, as gateways expect of a
// backend, and the gateway's relay converts for its own clients. Commands:
// COM_QUERY, COM_STMT_PREPARE and COM_STMT_CLOSE (below), COM_INIT_DB,
// COM_PING, COM_QUIT, COM_RESET_CONNECTION (back to the login database)
// and COM_SET_OPTION (answered with EOF, like MariaDB); anything else,
// COM_STMT_EXECUTE included, gets error 1047 (08S01). One statement per
// query; table names may be qualified or not (then the default database
// applies) and match case-insensitively.
//
// COM_STMT_PREPARE of any statement below describes it as MariaDB
// describes a statement it prepares: the number of its ? placeholders
// (each defined as MariaDB defines one: "?", binary, type NULL) and the
// columns its query returns (nextval; a STREAM's columns; none for
// INSERT and ack), or the error its query would get for an unknown table
// or an unsupported statement. n of NEXT n VALUES may be a placeholder
// there. The owner keeps nothing, and COM_STMT_CLOSE has no answer:
// gateways run prepared owner statements as queries with the parameters
// written in as literals, and turn the rows of the answer into binary
// rows for their clients.
//
//   - SELECT NEXT n VALUES FROM seq, SELECT NEXT VALUE FROM|FOR seq: one
//     column nextval (BIGINT, type 0x08, binary collation), one row: the
//     first of n fresh values. n < 1 is error 1210 (HY000); an unknown
//     table 1146 (42S02).
//   - INSERT INTO msgs ...: run verbatim on the primary; the answer is the
//     primary's OK (affected rows, last insert id) or its error unchanged.
//     The table's poller runs at once, so new messages go out without
//     waiting for vt_poller_interval.
//   - STREAM * FROM msgs: a result that never ends: the id column and the
//     user columns (see below), an EOF, then rows as messages come due,
//     each batch flushed at once. It ends with error 1053 (08S01) when the
//     owner shuts down, 1146 when the table stops being a message table,
//     1105 when its columns change; the connection then closes.
//   - UPDATE msgs SET time_acked = ..., ... WHERE ... id IN (...) (or
//     id = v; other AND-ed conditions are allowed): an ack, run verbatim
//     on the primary; the acked ids leave the cache.
//   - SHOW OWNER TABLES: columns db, table, kind (VARCHAR,
//     utf8mb4_general_ci), one row per owned table, kind "sequence" or
//     "message". Gateways poll it to learn what to forward.
//   - Anything else: error 1235 (42000) "This version of the owner doesn't
//     support: ...; send it to the gateway".
//
// Without a default database an unqualified name is error 1046 (3D000).
// When the primary cannot be reached, or discovery knows none within the
// cluster's failover_buffer, statements fail with error 1429 (HY000)
// saying why; errors of the primary itself reach the client unchanged.
//
// # Tables
//
// On start, when the primary changes and on Reload (SIGHUP), the owner
// reads information_schema on the primary: every base table outside the
// system schemas whose comment contains vitess_sequence or vitess_message
// (as Vitess decides), plus owner_tables from the configuration. Sequence
// tables need columns id, next_id and cache; message tables id, priority,
// epoch, time_next and time_acked. Tables without them are left out with
// a warning. A table that stays keeps its sequence block, cache and
// subscribers across discoveries.
//
// A message table's comment carries its settings, in seconds (fractions
// allowed) as in Vitess: vt_ack_wait (default 30), vt_purge_after (86400),
// vt_batch_size (10), vt_cache_size (10000), vt_poller_interval (30),
// vt_min_backoff (default: the ack wait), vt_max_backoff (0: no cap) and
// vt_message_cols=id|col|... (the streamed columns, id first). Without
// vt_message_cols a STREAM sends every column except priority, epoch,
// time_next and time_acked, id first, then in table order; like Vitess it
// streams time_created and time_scheduled when the table has them. Column
// definitions are built from information_schema exactly as MariaDB sends
// them on a utf8mb4 connection (a test compares them with the server's).
// time_next, time_acked and time_created are nanoseconds since the epoch.
//
// # Sequences
//
// As in Vitess, each sequence keeps a block [next, last) in memory. When
// a request for n values does not fit, the owner reserves a new block in
// a transaction of its own on the primary: SELECT next_id, cache ... WHERE
// id = 0 FOR UPDATE; the block continues from memory when next_id still
// is what this process last wrote, else it starts at next_id (or at last,
// if next_id went backwards); next_id advances by the smallest multiple of
// cache that fits n; UPDATE; COMMIT. Only then are values handed out, so
// values strictly increase in hand-out order and are never handed out
// twice, across owner restarts and primary changes. Blocks are bound to a
// primary generation: when discovery names a different primary (or the
// backend account changes) memory is dropped and the next request reserves
// from the table. A reservation that fails for any reason (including an
// unknown COMMIT outcome) also drops memory. Gaps are allowed.
//
// # Messages
//
// Each message table has a queue, built like Vitess's message manager.
// The poller runs every vt_poller_interval and right after an insert or a
// new subscription, but only while someone subscribes: it reads unacked
// rows with time_next <= now, by priority then time_next (earliest first;
// Vitess takes the newest first within a priority), at most vt_cache_size,
// into a cache deduplicated by id. The send loop takes up to vt_batch_size
// messages and the next subscriber that is not busy, round robin, and
// hands the batch to a delivery, which postpones the batch on the primary
// first, in one statement:
//
//	UPDATE t SET time_next = CASE id WHEN ... END, epoch = IFNULL(epoch, 0) + 1
//	WHERE id IN (...) AND time_acked IS NULL
//
// with time_next = now + vt_ack_wait + backoff, backoff = vt_min_backoff
// doubled epoch times, times a jitter in [2/3, 4/3), clamped to
// [vt_min_backoff, vt_max_backoff]. Only then are the rows written to the
// subscriber. So a message reaches one subscriber at a time, and comes
// back (to any subscriber) when it was not acked in time, including when
// its subscriber died; a batch that cannot be postponed is not sent and
// stays due. Vitess postpones after sending; the owner does it before so
// that no message is in a client's hands without a recorded deadline.
// Delivery is at least once. Inserts are run as written: a row gets
// time_next from the statement or from the column default (Vitess's
// schema uses DEFAULT 0, i.e. due at once), as in Vitess, which does not
// rewrite message inserts either. A purger deletes rows acked more than
// vt_purge_after ago, 500 at a time, every poller interval (at least every
// second), subscribers or not.
//
// # Standby groups
//
// Without WithLeadership the owner is the cluster's only owner and always
// serves, as above. With it (gateway owner with topology.etcd and no
// owner address: fleet.Candidate in the cluster's owner election) it is
// one of a group: it serves only while it leads, in a term.
//
//   - A standby runs discovery and follows the primary like the leader
//     (so it can take over at once), but refuses logins, after checking
//     the password, and every statement with error 1290 (HY000) "The
//     owner of cluster C at A is running as a standby so it cannot
//     execute this statement; the leader is L". 1290 is what a read-only
//     server answers a write: nothing ran, and a gateway that follows the
//     election holds it back and sends the statement to the leader.
//   - Fencing: a statement starts in the current term; a NEXT VALUES
//     checks that the term is still Valid (its lease holds, with a
//     margin) right before it writes the value. A term that lapsed in
//     between answers 1290 "lost its leadership" instead: the value is a
//     gap, never handed out. Sequence blocks are bound to the term as to
//     the primary's generation (blockGen): a new term, even of the same
//     process, reserves from the table first, after every block another
//     leader committed, so values stay unique and strictly increasing
//     across failovers. Lease time is the owner's own clock, so the
//     reservation also carries the term into MariaDB, which refuses it
//     once a newer term has reserved (fence.go).
//   - Message queues poll, deliver and purge only while the owner leads;
//     a delivery checks again before it postpones its batch and before it
//     writes it. When a term ends every stream ends with 1290 "no longer
//     the leader; STREAM again"; a new term empties the caches and polls.
//     What the last leader sent unacked was postponed first, so it comes
//     back after its ack wait; nothing is lost, delivery stays at least
//     once. The postponements and purges carry the term into MariaDB
//     too, and the client's inserts and acks check it: once a newer term
//     has written to a message table, an older term's write to it is
//     refused (1290) before it ran, and that queue stops acting in the
//     older term (fence.go says which writes and why).
//
// # Observability
//
// HTTPHandler serves /healthz, /readyz (200 while the owner serves: it
// leads or is the only owner, has a primary and its table list; else 503
// with the reasons, a standby naming the leader) and /metrics, the
// Prometheus exposition of Registry, a registry per Owner
// (directgate_owner_*, see metrics.go). gateway owner --http-listen
// serves it. Statements and logins are counted on counters resolved at
// start; the per-table counts are atomics on each sequence and queue, and
// sizes are read at scrape time: counting adds no lock and no allocation
// to a statement.
//
// # Concurrency
//
// One goroutine serves each connection and runs its statements in turn.
// A sequence serializes its callers with its own mutex, held across a
// reservation (one round trip to the primary); different sequences never
// wait for each other. The table set is an immutable value behind an
// atomic pointer. A queue's mutex guards its cache and subscribers and is
// never held across I/O; its poll lock orders polls against the changes
// a delivery or an ack has committed, so a stale read cannot put such a
// message back into the cache. During a STREAM the session goroutine
// waits; deliveries write the rows (serialized per stream), and a watcher
// peeks at the connection to notice the client leaving, which ends the
// subscription; a write that fails or blocks for 30s does too.
//
// Shutdown closes the listener, ends every stream, closes idle
// connections, lets statements in flight finish until its context ends,
// then cuts what is left; discovery and the primary's connections close
// last. Every goroutine runs under a safego group and is waited for.
package owner
