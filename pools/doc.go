// Package pools holds pools of connections to one backend.
//
// A Pool is generic over its connection type: it knows nothing about SQL or
// the MySQL protocol, only that a connection can be dialed and closed. The
// gateway builds one Pool per backend and user and leases connections from
// it with Acquire; a Lease goes back with Release, or with Destroy when the
// connection is broken.
//
// # Reuse order
//
// Idle connections are reused last in, first out: Acquire takes the
// connection released last. A pool larger than its load keeps using the
// same few connections, whose server threads and caches stay warm, and the
// others close after Config.IdleTimeout (never below Config.MinIdle, which
// is the warm capacity kept for bursts). The pool used to take them first
// in, first out (round robin), which spread the load over every open
// connection: 8 clients rotating over 64 connections made MariaDB spend a
// quarter more CPU per query than over the few they needed. Callers that
// find no idle connection wait in arrival order, and a connection released
// while they wait goes to the first of them.
//
// # Accounting
//
// The pool keeps one set of books, under one mutex: the connections open
// and the dials in flight, against a size and a MinIdle that Resize may
// change at any time (a configuration reload, or a share of a budget that
// moves). A dial starts only after it has reserved its place in those
// books, so the pool never holds more than its size, and a destroyed
// connection frees its place at once (its close runs in the background).
//
// Earlier versions built on github.com/jackc/puddle/v2 and kept these
// books next to puddle's. puddle fixes its maximum size at construction
// and holds a destroyed resource's slot until its close ends; the pool
// used neither and read none of puddle's counters, so it was dropped
// rather than kept as a second set of books.
//
// # Dialing
//
// A dial runs in its own goroutine, at most Config.MaxDials at once, with a
// context that carries the values of the caller's context but not its
// cancellation, and that ends after Config.DialTimeout or when the pool is
// closed. A caller that gives up while its dial is in flight does not abort
// it: the new connection joins the idle queue for the next caller (see pgx
// issue 1259, where cancelled callers made a struggling database face a
// flood of reconnects).
//
// # Maintenance
//
// One background goroutine per pool dials up to Config.MinIdle connections
// at start and whenever the pool falls below it, and closes idle connections
// past their lifetime or idle longer than Config.IdleTimeout, never going
// below Config.MinIdle.
package pools
