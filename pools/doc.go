// Package pools holds pools of connections to one backend, built on
// github.com/jackc/puddle/v2.
//
// A Pool is generic over its connection type: it knows nothing about SQL or
// the MySQL protocol, only that a connection can be dialed and closed. The
// gateway builds one Pool per backend and user and leases connections from
// it with Acquire; a Lease goes back with Release, or with Destroy when the
// connection is broken.
//
// # puddle owns the connections
//
// Each Pool is a puddle.Pool of seats (a Lease is a seat): puddle
// constructs them (the pool's constructor dials), holds them, hands them
// out (its Acquire serves waiting callers first come, first served, and
// dials when none is idle and there is room), and destroys them. Its books
// are the pool's books: Stat's Open, InUse, Idle and Dialing and the
// acquire counters are puddle's Stat, and the pool keeps no count of
// connections of its own. What puddle lacks is built around it:
//
//   - The reuse order (below).
//   - A size that changes at run time. puddle fixes MaxSize at
//     construction, so a new size is a new puddle pool, a generation: the
//     old one retires, its idle connections move to the new one at once
//     (puddle's Hijack, then CreateResource with the connection as what
//     the constructor returns), its leased ones when they are released,
//     and what the new one has no room for is closed; callers waiting in
//     the old one wait in the new one. Budget tokens taken in the
//     constructor would not do: puddle's Acquire calls the constructor
//     whenever it finds nothing idle and has room, so a caller would wait
//     for a token inside the constructor, deaf to connections released
//     meanwhile. A generation starts only on a reload (Resize); the fleet's
//     share of a connection limit moves the Budget, not the size.
//   - The Budget shared by the pools of a backend: the constructor takes
//     a unit for each dial and the close gives it back. With none free the
//     constructor refuses at once, and Acquire waits outside puddle for a
//     unit or a released connection, taking an idle connection of a
//     sibling pool to free a unit.
//   - Dials bounded by MaxDials and DialTimeout, with the values but not the
//     cancellation of the caller's context: a caller that gives up leaves
//     its dial to finish for the next one (puddle does the same; see pgx
//     issue 1259, where cancelled callers made a struggling database face a
//     flood of reconnects).
//   - Lifetimes with jitter, idle timeouts and MinIdle: one maintenance
//     goroutine per pool takes every idle seat as pgxpool does
//     (AcquireAllIdle), closes what is expired or idle too long, gives the
//     rest back in their order, and dials up to MinIdle
//     (CreateResource).
//   - COM_QUIT at rest (Quitter).
//   - The hand-off (handoff.go): a caller that finds every seat leased
//     waits in the pool's own first-come, first-served queue, and Release
//     gives the connection straight to the first in it, without the
//     contexts, timers and semaphore channels a wait in puddle's Acquire
//     costs. Callers wait in puddle's Acquire only while dials are
//     possible or in flight.
//   - The waits outside Acquire of an event loop's tasks (WaitOutside,
//     Lease.Pass, TryAcquire) and how long callers queue (QueueWait).
//   - Pipe (pipe.go): one lease shared by callers that each write a
//     request before the answers of the ones before are back and read
//     their own answer in turn (pipelining); a turn that leaves its answer
//     unread breaks the pipe for every turn behind it.
//
// A connection the pool closes leaves puddle's books at once (Hijack) and
// is closed in the background; its budget unit comes back once the close
// has returned. puddle's own Destroy would count it in use until then.
// puddle's TryAcquire constructs a seat in the background when it finds
// none idle and has room; the pool's TryAcquire never dials, so its
// constructor refuses that seat at once, and for that moment Stat counts
// it as dialing.
//
// # Reuse order
//
// Config.Order, RoundRobin by default, says which idle connection goes
// out next. RoundRobin hands out the connection idle longest, so every
// open connection is used in turn: all stay warm, none ages out under
// steady load, and a burst finds them open instead of dialing them all at
// once, which a database or its container may not survive. LIFO hands out
// the connection released last: a pool larger than its load keeps using
// the same few connections and the server runs fewer threads (MariaDB
// spent a quarter more CPU per query with 8 clients rotating over 64
// connections than over the few they needed), and the others close after
// IdleTimeout, so a burst dials them again. docs/sessions.md#connection-pools
// measures both sides.
//
// puddle keeps its idle seats on a stack: it always hands out the seat
// released last (TestPuddleHandsOutLastReleased), and has no way to take
// another. LIFO is puddle's own order. RoundRobin is the one thing kept
// beside puddle: a seat released under RoundRobin gives its connection to
// the pool's round-robin queue and goes idle empty, and a seat acquired
// empty takes the connection first in the queue. Seats are alike, so which
// seat carries a connection does not matter; puddle's counts stay exact
// (an empty idle seat is one idle connection, queued), and every empty
// idle seat finds a connection in the queue, because a connection is
// queued before its seat goes idle and taken after a seat is acquired.
package pools
