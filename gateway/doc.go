// Package gateway is the client-facing side of directgate: the MySQL
// protocol listener, authentication against the configured users, and one
// Session per client connection holding that client's state (default
// database, session variables, pinned backend connection, transaction).
//
// Concurrency contract: each client connection is served by exactly one
// goroutine (internal/mysqlserver runs it), which runs the handshake and
// then reads and answers commands one at a time. A Session is touched only
// by that goroutine, so its state needs no lock, except its sessionView:
// what shutdown, KILL from other sessions, SHOW PROCESSLIST and the status
// page read, each field atomic or under its own mutex (killMu orders a
// kill before the session lets its statement's connection go; proc.mu
// guards its processlist line).
//
// A Session is in parts, each in its own file: clientSide (session.go),
// replayState (state.go), routeState (route.go), leaseState (pins.go),
// preparedStmts (stmt.go), sessionClusters (clusters.go), sessionView
// (session.go), loopSide (loop.go), exchanging (session.go), diagnostics
// (diag.go), and its guard in the protections (package protect, called
// from protections.go). Logic that needs one part only is a method of
// that part (promoted to Session, so callers do not name the part);
// Session's own methods are the ones that coordinate several parts with
// the backends.
//
// What operators see is not here: the HTTP endpoints and SHOW GATEWAY's
// tables are package ops, the status page package statuspage, and they
// read the server only through opsGateway (http.go), a set of read-only
// views.
//
// The query path: read the command packet, classify it (querypath), take
// the session's pinned backend connection or one from the primary's pool
// (pools), bring the backend session in line with the client's (database,
// variables, capabilities), forward the command and relay the response
// packets as they arrive (wire.Relay), then decide from the statement and
// the backend's status flags whether the session stays pinned.
//
// Session state is what the server says it is: backend connections log in
// with CLIENT_SESSION_TRACK and CLIENT_DEPRECATE_EOF and every session
// tracker on (track.go), the relay hands the tracker entries of each answer
// to the session (wire.Result.Track), and applyServerState records what is
// replayable (variables, database) and pins for what is not (state the
// server reports that the classifier did not see, next-transaction
// characteristics). The classifier decides routing and adds what the
// trackers never report (GET_LOCK, SELECT @x := ...); where the two
// disagree the server wins and a metric counts it. LAST_INSERT_ID() is kept
// per connection and replayed where it differs; what the client's own
// statement closes (KILL, COMMIT RELEASE, 1153) is never taken for a
// backend failure.
//
// Sequence and message statements go to the cluster's owner (owner.go,
// ownergrants.go), which speaks only the text protocol for statements:
// prepared ones run as their text with the parameters written in as
// literals, and the owner's text rows reach the client as binary rows
// (ownerstmt.go, bindparams.go).
package gateway
