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
// # Construction and accounting
//
// github.com/jackc/puddle/v2 constructs, destroys and counts the
// connections. puddle keeps its own idle set as a stack (last in, first
// out), which is the opposite of what we want, so the pool never releases a
// connection to puddle: from puddle's point of view every live connection
// stays acquired, and the idle queue is ours (a buffered channel). The pool
// asks puddle for a resource only when its own counters say there is room
// for a new connection, and gives connections back to puddle only to
// destroy them.
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
