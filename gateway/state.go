package gateway

import (
	"sort"
	"strings"
	"sync/atomic"

	"github.com/directgate/directgate/wire"
)

// replayState is the session state the gateway can bring onto any backend
// connection, as the server's trackers reported it (track.go): the
// default database, the changed system variables, the multi-statement
// option, LAST_INSERT_ID() and the transaction characteristics. stateID
// changes whenever db, vars or multiStmt change, so a connection knows
// cheaply whether it already carries them (backendConn.stateID).
type replayState struct {
	db        string
	vars      map[string]string
	multiStmt bool
	stateID   uint64
	// versions numbers state versions for every session of the server
	// (Server.stateIDs): a version names one session's state, whatever
	// connection carries it.
	versions *atomic.Uint64
	// globals is cluster.globals when the session started: connections
	// whose sessions are older are reset before they serve it.
	globals uint64
	// stateKeyID and stateKeyStr cache stateKey() for stateID.
	stateKeyID  uint64
	stateKeyStr string
	// lastInsertID is the session's LAST_INSERT_ID(), replayed onto a
	// connection whose own differs for statements that read it;
	// insertIDPending says a statement may have changed it on the leased
	// connection, where it is read back before the connection is released.
	lastInsertID    uint64
	insertIDPending bool
	// insertIDSynced says the leased connection's LAST_INSERT_ID() is the
	// session's (it was, or was replayed, before the session's statements
	// that may change it ran there).
	insertIDSynced bool
	// tracked is scratch for what the server's trackers reported of the
	// last statement; trackers is what the client is shown of them (its
	// own session_track_* settings).
	tracked  serverState
	trackers *wire.TrackFilter
	// trackFor and trackSig cache trackSignature for trackers
	// (consolidation.go).
	trackFor *wire.TrackFilter
	trackSig string
	// txnState and txnChars are the transaction state and
	// characteristics the server last reported.
	txnState, txnChars string
}

// stateKey describes the session state a statement's meaning depends on:
// the database and the session variables (sql_mode, character set, ...).
func (rs *replayState) stateKey() string {
	if rs.stateKeyID == rs.stateID {
		return rs.stateKeyStr
	}
	names := make([]string, 0, len(rs.vars))
	for name := range rs.vars {
		names = append(names, name)
	}
	sort.Strings(names) // the same state gives the same key in every session
	var b strings.Builder
	b.WriteString(rs.db)
	for _, name := range names {
		b.WriteString("\x00" + name + "=" + rs.vars[name])
	}
	key := b.String()
	rs.stateKeyID, rs.stateKeyStr = rs.stateID, key
	return key
}

// qualify gives an unqualified table name the session's database.
func (rs *replayState) qualify(name string) string {
	inQuote := false
	for i := 0; i < len(name); i++ {
		switch {
		case name[i] == '`':
			inQuote = !inQuote
		case name[i] == '.' && !inQuote:
			return name
		}
	}
	return rs.db + "." + name
}

// The rule "conn.syncedState == ss.stateID means conn's database,
// variables and multi-statement option are the session's" holds through
// these three: a change of the session's state takes a new version
// (nextState), and a connection is marked as carrying it only where it
// does (sync, or the statement that made the change ran there).

// nextState gives the session a new state version after a change.
func (rs *replayState) nextState() { rs.stateID = rs.versions.Add(1) }

// dbChangedOn records that a statement on conn made db the default
// database: the session's and conn's.
func (rs *replayState) dbChangedOn(conn *backendConn, db string) {
	rs.db, conn.db = db, db
	rs.nextState()
	conn.syncedState = rs.stateID
}

// varsChangedOn records that rs.vars changed by a statement on conn,
// which therefore has them.
func (rs *replayState) varsChangedOn(conn *backendConn) {
	rs.nextState()
	conn.vars = copyVars(rs.vars)
	conn.syncedState = rs.stateID
}
