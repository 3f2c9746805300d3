package gateway

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// trackerSQL turns on every session-state tracker of a backend connection,
// so that the server reports in each OK packet what a statement changed
// (MariaDB 10.2+ and MySQL 5.7+ have these names).
const trackerSQL = "SET SESSION session_track_schema = ON, session_track_state_change = ON, " +
	"session_track_system_variables = '*', session_track_transaction_info = 'CHARACTERISTICS'"

// loginSQL runs once on every new backend connection: it reads the
// server's defaults that the gateway must honour for clients (the packet
// limit, the trackers a client gets by default), then turns the trackers on.
const loginSQL = defaultsSQL + "; " + trackerSQL

// backendDefaults are what a cluster's backends gave a fresh session.
type backendDefaults struct {
	// maxPacket is the backend's max_allowed_packet.
	maxPacket int
	// trackers is what a CLIENT_SESSION_TRACK client gets by default.
	trackers *wire.TrackFilter
}

// initSession prepares a new backend connection: reads the server's
// defaults into c and turns the session trackers on. A server without
// trackers (it refuses the SET) leaves the connection untracked: the
// classifier alone then decides.
func (c *cluster) initSession(bc *backendConn) error {
	d, err := parseDefaults(bc, loginSQL)
	var sqlErr *wire.SQLError
	switch {
	case err == nil:
		bc.tracked = bc.Caps&wire.CapSessionTrack != 0
	case errors.As(err, &sqlErr):
		c.log.Debug("backend has no session trackers; session state is followed by parsing statements only", "backend", bc.addr, "error", err)
	default:
		return err
	}
	if d.trackers != nil {
		c.defaults.Store(&d)
	}
	return nil
}

// defaultsSQL reads what loginSQL reads, alone.
const defaultsSQL = "SELECT @@max_allowed_packet, @@session_track_schema, @@session_track_state_change, " +
	"@@session_track_system_variables, @@session_track_transaction_info"

// readDefaults reads the server's defaults again on bc, a connection
// whose session was just reset (after a SET GLOBAL).
func (c *cluster) readDefaults(bc *backendConn) error {
	d, err := parseDefaults(bc, defaultsSQL)
	var sqlErr *wire.SQLError
	switch {
	case errors.As(err, &sqlErr):
		return nil // nothing to follow
	case err != nil:
		return err
	}
	if d.trackers != nil {
		c.defaults.Store(&d)
	}
	return nil
}

// parseDefaults runs q, which starts with defaultsSQL's SELECT, and reads
// its row.
func parseDefaults(bc *backendConn, q string) (backendDefaults, error) {
	var d backendDefaults
	err := bc.QueryRows(q, func(row [][]byte) {
		if len(row) != 5 {
			return
		}
		d.maxPacket, _ = strconv.Atoi(string(row[0]))
		d.trackers = &wire.TrackFilter{}
		for i, name := range [...]string{"session_track_schema", "session_track_state_change", "session_track_system_variables", "session_track_transaction_info"} {
			d.trackers = d.trackers.With(name, string(row[i+1]))
		}
	})
	return d, err
}

// enableTrackers turns the trackers on again after a reset.
func (bc *backendConn) enableTrackers() error {
	if !bc.tracked {
		return nil
	}
	_, err := bc.Exec(trackerSQL)
	return err
}

// serverState is what a backend's session trackers reported for one
// statement (all OK packets of its answer).
type serverState struct {
	schema      string
	hasSchema   bool
	vars        []trackedVar
	changed     bool
	txnChars    string
	hasTxnChars bool
	txnState    string
	gtid        string
}

type trackedVar struct{ name, value string }

// read decodes entries (wire.Result.Track) into st, reusing its memory.
func (st *serverState) read(entries []byte) {
	*st = serverState{vars: st.vars[:0]}
	wire.EachTrack(entries, func(typ byte, data []byte) {
		switch typ {
		case wire.TrackSchema:
			if s, ok := wire.TrackString(data); ok {
				st.schema, st.hasSchema = string(s), true
			}
		case wire.TrackStateChange:
			st.changed = true
		case wire.TrackTransactionCharacteristics:
			if s, ok := wire.TrackString(data); ok {
				st.txnChars, st.hasTxnChars = string(s), true
			}
		case wire.TrackTransactionState:
			if s, ok := wire.TrackString(data); ok {
				st.txnState = string(s)
			}
		case wire.TrackSystemVariable:
			name, value, ok := wire.TrackVariable(data)
			if !ok {
				return
			}
			if string(name) == "last_gtid" {
				st.gtid = string(value)
				return
			}
			st.vars = append(st.vars, trackedVar{name: strings.ToLower(string(name)), value: string(value)})
		}
	})
}

// charsetVars are what SET NAMES and SET CHARACTER SET report; the
// classifier's "names" and "character set" replay them (and the
// collation, which the tracker does not report).
var charsetVars = map[string]bool{
	"character_set_client": true, "character_set_connection": true,
	"character_set_results": true, "collation_connection": true,
}

// explainsStateChange reports whether the classifier accounts for every
// piece of session state the server may have flagged for route: a plain
// SET or USE (their variables and database are in the trackers' other
// entries), or state the classifier pins or unpins itself.
func explainsStateChange(route querypath.Route) bool {
	const own = querypath.PinUserVar | querypath.PinTempTable | querypath.PinPrepare |
		querypath.PinUnreplayable | querypath.PinLockTables
	return route.Kind == querypath.KindSet || route.Kind == querypath.KindUse ||
		route.Pin&own != 0 || route.Unpin&(querypath.PinTempTable|querypath.PinPrepare) != 0
}

// applyServerState records what the backend's trackers reported for a
// statement on conn (the server is the authority on session state) and
// returns the pins it adds and those it ends. Variables the classifier
// named are recorded by applySet, with their literal values; the server's
// report adds what the classifier missed (a SET inside a procedure, a
// batch, an EXECUTE) and counts it as a disagreement.
func (ss *Session) applyServerState(conn *backendConn, route querypath.Route, res wire.Result) (add, end pinSet) {
	st := &ss.tracked
	st.read(res.Track)
	m := ss.srv.metrics
	trackersOff := false // the client set a session_track_* variable
	if st.gtid != "" && validGTID(st.gtid) && ss.leaseRole == rolePrimary {
		ss.lastGTID, ss.gtidSeenOn = st.gtid, nil
		ss.gtidPending = false
	}
	if st.hasSchema && res.Err == nil {
		if !route.MultiStatement && route.Kind == querypath.KindUse && route.Database != st.schema {
			m.disagreement(disagreeSchema)
		}
		if ss.db != st.schema || conn.db != st.schema {
			ss.dbChangedOn(conn, strings.Clone(st.schema))
		}
	}
	if res.Err == nil && !route.SetStatement {
		for _, v := range route.Vars {
			if !strings.HasPrefix(v.Name, "session_track_") {
				continue
			}
			// The client's own trackers: what it is shown changes (the
			// server does not always report it: a variable list without
			// session_track_system_variables in it); the backend's
			// trackers are turned on again below.
			trackersOff = true
			if val, err := readVar(conn, v.Name); err == nil {
				ss.trackers = ss.trackers.With(v.Name, strings.Trim(val, "'"))
			}
		}
	}
	if !route.SetStatement {
		pins, off := ss.applyTrackedVars(conn, route)
		add |= pins
		trackersOff = trackersOff || off
	}
	if st.changed && !explainsStateChange(route) {
		// State the gateway cannot see or replay (a user variable set
		// inside a procedure, function or trigger, ...): the session
		// keeps this connection until it ends.
		add |= pinServerState
		m.disagreement(disagreeStateChange)
	}
	if st.txnState != "" {
		ss.txnState = st.txnState
	}
	if st.hasTxnChars {
		ss.txnChars = st.txnChars
	}
	inTxn := res.Status&wire.StatusInTrans != 0
	if st.hasTxnChars {
		if st.txnChars != "" && !inTxn {
			add |= pinNextTxn
			if !route.NextTxn {
				m.disagreement(disagreeNextTxn)
			}
		} else if st.txnChars == "" {
			end |= pinNextTxn
		}
	} else if route.NextTxn && res.Err == nil {
		// The classifier expected next-transaction characteristics the
		// server did not report (MariaDB's SET tx_isolation without a
		// scope is a session variable): the server wins.
		m.disagreement(disagreeNextTxn)
	}
	if trackersOff {
		// The client's SET of a session_track_* variable reached the
		// backend connection too.
		if err := conn.enableTrackers(); err != nil {
			conn.dirty = true
		}
	}
	return add, end
}

// applyTrackedVars records the session variables the server reported for
// a statement on conn (not a SET the classifier parsed): what the
// classifier missed is counted as a disagreement. It returns the pins
// the report adds (a value that cannot be replayed) and whether the
// client changed its own trackers (the backend's are turned on again).
func (ss *Session) applyTrackedVars(conn *backendConn, route querypath.Route) (add pinSet, trackersOff bool) {
	st, m := &ss.tracked, ss.srv.metrics
	changedVars := false
	names := false
	for _, v := range route.Vars {
		if v.Name == "names" || v.Name == "character set" {
			names = true
		}
	}
	for _, v := range st.vars {
		if strings.HasPrefix(v.name, "session_track_") {
			// The client's own trackers change what it is shown
			// (the relay applied that already, to this answer);
			// the backend's are turned on again.
			if !classifierNamed(route, v.name) {
				ss.trackers = ss.trackers.With(v.name, v.value)
			}
			trackersOff = true
			continue
		}
		if names && charsetVars[v.name] || classifierNamed(route, v.name) {
			continue
		}
		if v.name == "autocommit" {
			continue // the transaction status bits follow it
		}
		lit, err := sqlLiteral(v.value)
		if err != nil {
			add |= pinSet(querypath.PinUnreplayable)
			continue
		}
		if ss.vars[v.name] != lit {
			ss.vars[v.name] = lit
			changedVars = true
		}
		m.disagreement(disagreeVariable)
	}
	if changedVars {
		ss.varsChangedOn(conn)
	}
	return add, trackersOff
}

// classifierNamed reports whether the classifier listed variable name
// among route's replayable variables.
func classifierNamed(route querypath.Route, name string) bool {
	for _, v := range route.Vars {
		if v.Name == name {
			return true
		}
	}
	return false
}

// defaultTrackers is what a new client session is shown of session
// state: the backends' own defaults.
func (ss *Session) defaultTrackers() *wire.TrackFilter {
	if d := ss.cluster.defaults.Load(); d != nil {
		return d.trackers
	}
	return wire.DefaultTrackFilter()
}

// maxPacket is the largest command the session accepts: the smaller of
// the gateway's max_allowed_packet and the backends' (a larger one would
// make the backend drop the connection).
func (ss *Session) maxPacket() int {
	n := ss.srv.cfg.MaxAllowedPacket
	if ss.cluster != nil {
		if d := ss.cluster.defaults.Load(); d != nil && d.maxPacket > 0 && d.maxPacket < n {
			n = d.maxPacket
		}
	}
	return n
}

// closesConnection reports whether MariaDB closes the connection after
// sending error code: the client's own doing (its KILL, a packet above
// max_allowed_packet, an idle timeout it set, a network error while it
// sent), never a sign that the backend is failing.
func closesConnection(code uint16) bool {
	switch code {
	case 1153, // ER_NET_PACKET_TOO_LARGE
		1927,                   // ER_CONNECTION_KILLED
		4031,                   // ER_CLIENT_INTERACTION_TIMEOUT
		1158, 1159, 1160, 1161, // ER_NET_READ_ERROR .. ER_NET_WRITE_INTERRUPTED
		1184: // ER_NEW_ABORTING_CONNECTION
		return true
	}
	return false
}

// notSentError is a command that could not be written to the backend
// connection: the server never got all of it, so nothing ran, and the
// command may go to another connection whatever it is.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "sending to the backend: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// sendFailed handles a command that could not be written to conn. The
// server may have said why it closed the connection (an ERR packet such
// as 1153 or 4031 waits in the socket): then that is the answer, relayed
// to the client, and the connection is marked closed. Otherwise the
// failure is a notSentError.
func (ss *Session) sendFailed(conn *backendConn, err error) (wire.Result, error) {
	conn.closed = true
	_ = conn.NetConn().SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	p, rerr := conn.ReadPacketAnySeq()
	if rerr != nil || !wire.IsERR(p) {
		return wire.Result{}, &notSentError{err}
	}
	e := wire.ParseERR(p)
	if werr := ss.writeErr(e); werr != nil {
		return wire.Result{Err: e}, &wire.ClientError{Err: werr}
	}
	return wire.Result{Err: e, Packets: 1}, nil
}

// readInsertID reads conn's LAST_INSERT_ID() into the session after a
// statement that may have changed it.
func (rs *replayState) readInsertID(conn *backendConn) error {
	var v []byte
	err := conn.QueryRows("SELECT LAST_INSERT_ID()", func(row [][]byte) {
		if len(row) == 1 {
			v = append(v[:0], row[0]...)
		}
	})
	if err != nil {
		return err
	}
	id, perr := strconv.ParseUint(string(v), 10, 64)
	if perr != nil {
		return nil
	}
	rs.lastInsertID = id
	conn.lastInsertID, conn.insertIDKnown = id, true
	return nil
}

// isCall reports whether sql runs a stored program (CALL, or a compound
// statement: BEGIN NOT ATOMIC, IF, CASE, LOOP, WHILE, REPEAT): each
// result set it sends has more results after it (at least its final OK).
// It does not allocate: it runs for every statement.
func isCall(sql []byte) bool {
	w, rest := querypath.FirstWord(sql)
	for _, k := range [...]string{"CALL", "IF", "CASE", "LOOP", "WHILE", "REPEAT"} {
		if querypath.EqFold(w, k) {
			return true
		}
	}
	if querypath.EqFold(w, "BEGIN") {
		w, _ = querypath.FirstWord(rest)
		return querypath.EqFold(w, "NOT")
	}
	return false
}

// idleTimeout is how long the session may wait for its next command:
// the wait_timeout (interactive_timeout for CLIENT_INTERACTIVE clients)
// the client set for its session. The backend connections cannot enforce
// it (they serve many sessions), so the gateway closes the client's
// connection itself, as MariaDB would. 0: the server default applies to
// nothing the gateway holds (idle sessions hold no backend connection).
// Inside a transaction the session holds a backend connection: then
// idle_transaction_timeout (the gateway's, or the session's own when
// smaller) bounds the wait too, and the session is closed and its
// transaction rolled back past it, as MariaDB does.
func (ss *Session) idleTimeout() time.Duration {
	name := "wait_timeout"
	if ss.caps&wire.CapInteractive != 0 {
		name = "interactive_timeout"
	}
	d := ss.varSeconds(name)
	if ss.pins&pinTxn != 0 || ss.txn.active {
		// Idle inside a transaction: the gateway's bound, or the
		// session's own idle_transaction_timeout when smaller.
		if cfg := ss.srv.cfg; cfg != nil && cfg.IdleTransactionTimeout != nil {
			d = minPositive(d, *cfg.IdleTransactionTimeout)
		}
		d = minPositive(d, ss.varSeconds("idle_transaction_timeout"))
	}
	return d
}

// varSeconds is the session variable name, a number of seconds, as a
// duration; 0 when unset or not positive.
func (rs *replayState) varSeconds(name string) time.Duration {
	v, ok := rs.vars[name]
	if !ok {
		return 0
	}
	secs, err := strconv.ParseFloat(strings.Trim(v, "'"), 64)
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// minPositive is the smaller of a and b, ignoring zeros.
func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// usesInsertID reports whether route (of sql) reads LAST_INSERT_ID() or
// may change it in a way its OK packet cannot tell (an INSERT's id may be
// an explicit value; a CALL, LOAD DATA, LAST_INSERT_ID(expr) in a SELECT
// or a batch say nothing): it must run where the connection holds the
// session's value. ROW_COUNT() and FOUND_ROWS() also make
// ReadsLastResult; replaying LAST_INSERT_ID() for them would reset what
// they read, so the text is checked for the names that read it.
func usesInsertID(route querypath.Route, sql []byte) bool {
	return route.ReadsLastResult && (querypath.ContainsFold(sql, "LAST_INSERT_ID") || querypath.ContainsFold(sql, "IDENTITY")) ||
		route.MultiStatement ||
		route.DML == querypath.DMLInsert || route.DML == querypath.DMLReplace ||
		route.Pin&querypath.PinLastResult != 0 && route.DML == querypath.DMLNone
}

// currentDatabase asks conn for its default database ("" none).
func currentDatabase(conn *backendConn) (string, error) {
	var db string
	err := conn.QueryRows("SELECT DATABASE()", func(row [][]byte) {
		if len(row) == 1 && row[0] != nil {
			db = string(row[0])
		}
	})
	return db, err
}
