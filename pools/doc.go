// Package pools holds round-robin pools of connections to one backend.
//
// A Pool is generic over its connection type: it knows nothing about SQL or
// the MySQL protocol, only that a connection can be dialed and closed. The
// gateway builds one Pool per backend and user and leases connections from
// it with Acquire; a Lease goes back with Release, or with Destroy when the
// connection is broken.
//
// # Round robin
//
// Idle connections are reused first in, first out: a released connection
// goes to the tail of the idle queue and Acquire takes the head, so every
// idle connection is used in turn and load spreads over all of them. Callers
// that find the queue empty wait in arrival order.
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
// books next to puddle's. puddle fixes its maximum size at construction,
// keeps idle resources as a stack (last in, first out: the opposite of
// round robin) and holds a destroyed resource's slot until its close ends;
// the pool used none of that and read none of puddle's counters, so it was
// dropped rather than kept as a second set of books.
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
