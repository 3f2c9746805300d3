package gateway

import (
	"math/bits"
	"strings"
	"sync/atomic"

	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/querypath"
)

// pinSet is every reason a session can hold its backend connection between
// statements: the classifier's reasons (querypath.Pin) in the low 16 bits,
// and those the gateway sees itself above them.
type pinSet uint32

const (
	// pinTxn: the backend reports an open transaction or autocommit off.
	pinTxn pinSet = 1 << (16 + iota)
	// pinCursor: a prepared statement has an open cursor (COM_STMT_FETCH).
	pinCursor
	// pinWarnings: the last statement left warnings that a SHOW WARNINGS
	// right after it must read from the same connection.
	pinWarnings
	// pinNextTxn: SET TRANSACTION (without SESSION) set characteristics
	// of the next transaction on the connection; the server's transaction
	// tracker says when they are used up.
	pinNextTxn
	// pinServerState: the server reported a session state change that the
	// classifier did not account for (a user variable set inside a
	// procedure, function or trigger, ...). Ends with the session.
	pinServerState
)

// transientPins last only until the next statement.
const transientPins = pinSet(querypath.TransientPins) | pinWarnings

// stickyPins leave state on the backend connection that the gateway cannot
// see: the connection is reset before another session gets it.
const stickyPins = pinSet(querypath.PinUserVar|querypath.PinTempTable|querypath.PinLock|
	querypath.PinLockTables|querypath.PinPrepare|querypath.PinFoundRows|querypath.PinUnreplayable|querypath.PinXA) |
	pinNextTxn | pinServerState

// pinName names a single reason, as counted in PinStats.
func pinName(bit pinSet) string {
	switch bit {
	case pinTxn:
		return "transaction"
	case pinCursor:
		return "cursor"
	case pinWarnings:
		return "warnings"
	case pinNextTxn:
		return "next_transaction"
	case pinServerState:
		return "server_state"
	}
	return querypath.Pin(bit).String()
}

// String lists the reasons, for logs.
func (p pinSet) String() string {
	if p == 0 {
		return "none"
	}
	var names []string
	for rest := p; rest != 0; rest &= rest - 1 {
		names = append(names, pinName(rest&-rest))
	}
	return strings.Join(names, "|")
}

// pinStats counts how often sessions got pinned, by reason, and how many
// sessions ever held state that pinned them beyond a transaction.
type pinStats struct {
	counts   [32]atomic.Int64
	sessions atomic.Int64
	sticky   atomic.Int64
}

// add counts each reason in added.
func (s *pinStats) add(added pinSet) {
	for rest := added; rest != 0; rest &= rest - 1 {
		s.counts[bits.TrailingZeros32(uint32(rest))].Add(1)
	}
}

// snapshot returns the counts by reason name.
func (s *pinStats) snapshot() map[string]int64 {
	m := map[string]int64{}
	for i := range bits.Len32(uint32(querypath.PinXA)) {
		m[pinName(1<<i)] = s.counts[i].Load()
	}
	for _, b := range []pinSet{pinTxn, pinCursor, pinWarnings, pinNextTxn, pinServerState} {
		m[pinName(b)] = s.counts[bits.TrailingZeros32(uint32(b))].Load()
	}
	return m
}

// SessionStats returns how many client sessions logged in, and how many of
// them were ever pinned by session state (anything but transactions and
// the one-statement holds); the others stayed multiplexed throughout.
func (s *Server) SessionStats() (sessions, pinnedByState int64) {
	return s.pinStats.sessions.Load(), s.pinStats.sticky.Load()
}

// PinStats returns how many times a session got pinned to its backend
// connection, by reason: transaction, user_var, temp_table, lock,
// lock_tables, prepare, found_rows, last_result, unreplayable, xa,
// cursor, warnings, next_transaction, server_state.
func (s *Server) PinStats() map[string]int64 { return s.pinStats.snapshot() }

// leaseState is the backend connection the session holds and why: during
// a statement always, between statements while pins say it must (state
// that lives only on that connection). Objects that pin are tracked by
// name so the pin ends with the last of them.
type leaseState struct {
	// lease is the backend connection serving the current statement, and
	// between statements the connection the session is pinned to.
	lease *pools.Lease[*backendConn]
	// leaseRole says whether lease was taken from the primary or a
	// replica.
	leaseRole role
	// pins are the reasons the session holds lease between statements;
	// everPinned records a pin by session state, for SessionStats.
	pins       pinSet
	everPinned bool
	// share is the semaphore of the user's max_pool_share the session
	// holds a token of while it holds lease (share.go); nil none.
	share chan struct{}
	// tempTables and sqlStmts are the session's temporary tables
	// (db.table) and SQL-level prepared statement names (lower case),
	// which pin it until the last is gone.
	tempTables map[string]struct{}
	sqlStmts   map[string]struct{}
	// join is the statement that opens the session's transaction over
	// clusters on this cluster's connection before the next statement
	// runs there (clusters.go); "" none.
	join string
}

// hasTemp reports whether the session has the temporary table name
// (db.table).
func (ls *leaseState) hasTemp(name string) bool {
	_, ok := ls.tempTables[name]
	return ok
}
