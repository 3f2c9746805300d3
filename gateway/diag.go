package gateway

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// diagSet is a set of the previous statement's diagnostic values.
type diagSet uint8

const (
	// diagRowCount is ROW_COUNT().
	diagRowCount diagSet = 1 << iota
	// diagFoundRows is FOUND_ROWS().
	diagFoundRows
	// diagWarnings is the condition list of SHOW WARNINGS with its counts
	// (@@warning_count, @@error_count).
	diagWarnings

	diagAll = diagRowCount | diagFoundRows | diagWarnings
)

// diagnostics is what the session's previous statement left for
// ROW_COUNT(), FOUND_ROWS(), @@warning_count, @@error_count and SHOW
// WARNINGS|ERRORS. MariaDB keeps these per connection; a multiplexed
// session keeps them here so that they do not depend on which backend
// connection serves it next.
//
// Most statements tell the gateway their values in their answer (an OK
// packet's affected rows, a result set's row count, a warning count of 0):
// those are kept here at once. The rest (a CALL, a batch, an error, warnings,
// a SELECT SQL_CALC_FOUND_ROWS) stay on the session's connection (onConn)
// and are read from it, with one query, before it goes back to the pool
// (capture). A statement that reads only these values (querypath.DiagRead)
// is answered from here when they are not on the session's connection.
type diagnostics struct {
	// onConn are the values that live only on the leased connection.
	onConn diagSet
	// rowCount is ROW_COUNT(), foundRows FOUND_ROWS().
	rowCount  int64
	foundRows uint64
	// warnCount and errCount are @@warning_count and @@error_count;
	// conds the conditions SHOW WARNINGS lists (level, code, message as
	// the server wrote them, at most max_error_count of them).
	warnCount, errCount uint64
	conds               [][3][]byte
	// planted says the statement running was preceded on its connection
	// by diagMarkerSQL (plantDiagMarker).
	planted bool
}

// fresh sets what a new MariaDB connection reports.
func (d *diagnostics) fresh() {
	*d = diagnostics{foundRows: 1}
}

// lost is called when the connection holding onConn values is gone: what
// it held cannot be read any more, and a new connection's values stand in.
func (d *diagnostics) lost() {
	if d.onConn&diagRowCount != 0 {
		d.rowCount = 0
	}
	if d.onConn&diagFoundRows != 0 {
		d.foundRows = 1
	}
	if d.onConn&diagWarnings != 0 {
		d.setWarnings(0, 0)
	}
	d.onConn = 0
}

// localError records an error the gateway answered itself (a KILL it
// refused, a backend it could not reach) as what the statement left: SHOW
// WARNINGS shows it and ROW_COUNT() is -1, as after an error of MariaDB's.
func (d *diagnostics) localError(e *wire.SQLError) {
	d.rowCount = -1
	d.onConn &^= diagRowCount | diagWarnings
	d.setWarnings(1, 1)
	d.conds = append(d.conds, [3][]byte{[]byte("Error"), strconv.AppendUint(nil, uint64(e.Code), 10), []byte(e.Message)})
}

func (d *diagnostics) setWarnings(warnings, errs uint64) {
	d.warnCount, d.errCount = warnings, errs
	clear(d.conds)
	d.conds = d.conds[:0]
}

// afterStatement records what a statement that ran on the session's
// connection left. sql is its text; nil for a command other than a query or
// an execute; noBackslash says the session's sql_mode has
// NO_BACKSLASH_ESCAPES. It reads sql only as far as it must (the first two words of
// a read; a write whole) and does not allocate.
func (d *diagnostics) afterStatement(sql []byte, route querypath.Route, res wire.Result, noBackslash bool) {
	if route.MultiStatement && res.Err == nil && res.Warnings == 0 && d.onConn&diagWarnings == 0 &&
		(d.warnCount > 0 || d.errCount > 0) && !querypath.BatchUsesTables(unsafe.String(unsafe.SliceData(sql), len(sql)), noBackslash) {
		// A batch of statements that use no table and raised nothing
		// leaves the warnings the session holds, which its connection
		// never saw (a KILL the gateway refused, say).
		d.onConn = diagAll &^ diagWarnings
		return
	}
	if sql == nil || route.MultiStatement || res.CursorOpened || isCall(sql) {
		// A batch, a procedure, another command: the server knows.
		d.onConn = diagAll
		return
	}
	if res.Err != nil {
		// ROW_COUNT() is -1 after an error, the conditions are on the
		// connection, and FOUND_ROWS() is as it was unless rows were on
		// their way (MariaDB sets it when a SELECT ends).
		d.rowCount = -1
		d.onConn = d.onConn&^diagRowCount | diagWarnings
		if res.HadResultSet {
			d.onConn |= diagFoundRows
		}
		return
	}
	text := unsafe.String(unsafe.SliceData(sql), len(sql))
	listed := d.warnCount > 0 || d.errCount > 0
	if res.HadResultSet {
		d.rowCount = -1
		d.onConn &^= diagRowCount
		e := querypath.ResultDiag(text)
		switch {
		case e.ShowDiagnostics:
			return
		case e.KeepsFoundRows:
			// FOUND_ROWS() is where it was.
		case e.FoundRowsAreRows && route.Pin&querypath.PinFoundRows == 0:
			d.foundRows = res.Rows
			d.onConn &^= diagFoundRows
		default:
			d.onConn |= diagFoundRows
		}
	} else {
		d.rowCount = int64(res.OK.AffectedRows)
		d.onConn &^= diagRowCount
		if d.onConn&diagFoundRows == 0 && !keepsFoundRows(route) && !querypath.StatementDiag(text).KeepsFoundRows {
			d.onConn |= diagFoundRows
		}
	}
	switch {
	case res.Warnings > 0:
		d.onConn |= diagWarnings
	case d.onConn&diagWarnings != 0:
		// Cleared or kept on the connection, as the server decides.
	case listed && querypath.StatementDiag(text).UsesTables:
		d.setWarnings(0, 0)
	}
}

// afterPrepare records what a COM_STMT_PREPARE of sql left. What it raised
// is what SHOW WARNINGS shows next (and ROW_COUNT() is -1 after an error):
// read before release. One that raised nothing empties the warning list
// when the statement uses a table, as MariaDB does, and keeps it
// otherwise.
func (d *diagnostics) afterPrepare(sql string, res wire.Result) {
	switch {
	case res.Err != nil || res.Warnings > 0:
		d.onConn |= diagWarnings
		if res.Err != nil {
			d.rowCount, d.onConn = -1, d.onConn&^diagRowCount
		}
	case d.onConn&diagWarnings == 0 && (d.warnCount > 0 || d.errCount > 0) && querypath.StatementDiag(sql).UsesTables:
		d.setWarnings(0, 0)
	}
}

// keepsFoundRows reports what the route alone tells: transaction control
// and USE leave FOUND_ROWS() alone.
func keepsFoundRows(route querypath.Route) bool {
	switch route.Kind {
	case querypath.KindBegin, querypath.KindCommit, querypath.KindRollback, querypath.KindUse:
		return true
	}
	return false
}

// captureDiag reads the values the session left on conn before conn
// serves anyone else. A non-nil error is a broken connection.
func (ss *Session) captureDiag(conn *backendConn) error {
	d := &ss.diag
	if d.onConn == 0 {
		return nil
	}
	want := d.onConn
	d.onConn = 0
	ss.srv.metrics.diagCapture()
	var vals [4][]byte
	err := conn.QueryRows("SELECT ROW_COUNT(), FOUND_ROWS(), @@warning_count, @@error_count", func(row [][]byte) {
		for i := range min(len(row), len(vals)) {
			vals[i] = append(vals[i][:0], row[i]...)
		}
	})
	if err == nil && (parseUint(vals[2]) > 0 || parseUint(vals[3]) > 0) {
		conn.warnListed = true
	}
	if err == nil && want&diagWarnings != 0 {
		d.setWarnings(parseUint(vals[2]), parseUint(vals[3]))
		if d.warnCount > 0 || d.errCount > 0 {
			err = conn.QueryRows("SHOW WARNINGS", func(row [][]byte) {
				if len(row) == 3 {
					d.conds = append(d.conds, [3][]byte{clone(row[0]), clone(row[1]), clone(row[2])})
				}
			})
		}
	}
	if err != nil {
		d.onConn = want
		d.lost()
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			return nil
		}
		return err
	}
	if want&diagRowCount != 0 {
		d.rowCount, _ = strconv.ParseInt(string(vals[0]), 10, 64)
	}
	if want&diagFoundRows != 0 {
		d.foundRows = parseUint(vals[1])
	}
	return nil
}

func parseUint(b []byte) uint64 {
	n, _ := strconv.ParseUint(string(b), 10, 64)
	return n
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// diagNeeds is the set of values a DiagRead reads.
func diagNeeds(r querypath.DiagRead) diagSet {
	var s diagSet
	if r.Reads(querypath.DiagRowCount) {
		s |= diagRowCount
	}
	if r.Reads(querypath.DiagFoundRows) {
		s |= diagFoundRows
	}
	if r.Reads(querypath.DiagWarningCount) || r.Reads(querypath.DiagErrorCount) {
		s |= diagWarnings
	}
	return s
}

// answerDiag answers a statement that reads only the previous statement's
// diagnostics from the session's copy of them, when they are not (all) on
// the session's connection. handled is false when the statement goes to
// the server: it holds every value it reads.
func (ss *Session) answerDiag(sql string, route querypath.Route) (handled bool, err error) {
	if route.MultiStatement || route.Kind != querypath.KindShowWarnings && !route.ReadsLastResult {
		return false, nil
	}
	r, ok := querypath.ParseDiagRead(sql)
	if !ok {
		return false, nil
	}
	need := diagNeeds(r)
	d := &ss.diag
	if ss.lease != nil && d.onConn&need == need {
		return false, nil
	}
	if ss.lease != nil && d.onConn&need != 0 {
		conn := ss.lease.Conn()
		if err := ss.captureDiag(conn); err != nil {
			ss.dropLease()
			ss.lostBackendState()
			return true, ss.writeErr(toClientError(backendLost(conn.addr, err)))
		}
	}
	sp := startStatement(ss.now)
	sp.route, sp.outcome = routeLocal, outcomeOK
	defer ss.srv.metrics.endStatement(&sp)
	ss.srv.metrics.diagAnswer()
	if r.Show == querypath.DiagShowWarnings || r.Show == querypath.DiagShowErrors {
		return true, ss.showConditions(r, route)
	}
	w := wire.ResultWriter{Conn: ss.client, Caps: ss.caps, Status: ss.status}
	cols := make([]wire.Column, 0, max(1, len(r.Columns)))
	row := make([][]byte, 0, cap(cols))
	num := func(name string, unsigned bool, v []byte) {
		c := wire.Column{Name: name, Charset: wire.BinaryCollation, Length: 21, Type: wire.TypeLongLong, Computed: true}
		if unsigned {
			c.Flags = wire.FlagUnsigned | wire.FlagBinary
		} else {
			c.Flags = wire.FlagNotNull | wire.FlagBinary
		}
		cols = append(cols, c)
		row = append(row, v)
	}
	switch r.Show {
	case querypath.DiagShowCountWarnings:
		num("@@session.warning_count", true, strconv.AppendUint(nil, d.warnCount, 10))
	case querypath.DiagShowCountErrors:
		num("@@session.error_count", true, strconv.AppendUint(nil, d.errCount, 10))
	default:
		for _, c := range r.Columns {
			switch c.Value {
			case querypath.DiagRowCount:
				num(c.Name, false, strconv.AppendInt(nil, d.rowCount, 10))
			case querypath.DiagFoundRows:
				num(c.Name, false, strconv.AppendUint(nil, d.foundRows, 10))
			case querypath.DiagWarningCount:
				num(c.Name, true, strconv.AppendUint(nil, d.warnCount, 10))
			case querypath.DiagErrorCount:
				num(c.Name, true, strconv.AppendUint(nil, d.errCount, 10))
			}
		}
		// A SELECT: it returned one row.
		d.foundRows = 1
		d.onConn &^= diagFoundRows
	}
	d.rowCount = -1
	d.onConn &^= diagRowCount
	if err := w.Columns(cols); err != nil {
		return true, err
	}
	if err := w.Row(row); err != nil {
		return true, err
	}
	if err := w.End(0); err != nil {
		return true, err
	}
	return true, ss.client.Flush()
}

// showConditions answers SHOW WARNINGS or SHOW ERRORS from the session's
// copy of the list. The column definitions come from the server (SHOW
// WARNINGS LIMIT 0 on a connection in the session's state: their character
// set is the session's), the rows from the copy.
func (ss *Session) showConditions(r querypath.DiagRead, route querypath.Route) error {
	d := &ss.diag
	conn, err := ss.backend(route, "", false)
	if err != nil {
		return ss.writeErr(toClientError(err))
	}
	defs, err := showWarningsDefs(conn)
	if err != nil {
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			if ss.pins == 0 {
				ss.releaseLease()
			}
			return ss.writeErr(sqlErr)
		}
		ss.dropLease()
		ss.lostBackendState()
		return ss.writeErr(toClientError(backendLost(conn.addr, err)))
	}
	if ss.pins == 0 {
		ss.releaseLease()
	}
	w := wire.ResultWriter{Conn: ss.client, Caps: ss.caps, Status: ss.status}
	if err := w.RawColumns(defs); err != nil {
		return err
	}
	var skipped, sent int64
	for _, c := range d.conds {
		if r.Show == querypath.DiagShowErrors && string(c[0]) != "Error" {
			continue
		}
		if skipped < r.Offset {
			skipped++
			continue
		}
		if r.Limit >= 0 && sent >= r.Limit {
			break
		}
		if err := w.Row([][]byte{c[0], c[1], c[2]}); err != nil {
			return err
		}
		sent++
	}
	if err := w.End(0); err != nil {
		return err
	}
	d.rowCount = -1
	d.onConn &^= diagRowCount
	return ss.client.Flush()
}

// showWarningsDefs runs SHOW WARNINGS LIMIT 0 on conn and returns its
// column definitions. It changes nothing the session can see on conn but
// ROW_COUNT(), which becomes -1 as after SHOW WARNINGS.
func showWarningsDefs(conn *backendConn) ([][]byte, error) {
	raw, err := conn.QueryRaw(append([]byte{wire.ComQuery}, "SHOW WARNINGS LIMIT 0"...), 0)
	if err != nil {
		return nil, err
	}
	if len(raw.Defs) == 0 {
		return nil, wire.ErrMalformed
	}
	return raw.Defs, nil
}

// inTransaction asks conn whether a transaction is open and whether it is
// read-only, keeping what the previous statement left for the session first
// (the query would replace FOUND_ROWS()). A non-nil error is a broken
// connection.
func (ss *Session) inTransaction(conn *backendConn) (in, readOnly bool, err error) {
	if err := ss.captureDiag(conn); err != nil {
		return false, false, err
	}
	var v, ro []byte
	err = conn.QueryRows("SELECT @@in_transaction, @@tx_read_only", func(row [][]byte) {
		if len(row) == 2 {
			v = append(v[:0], row[0]...)
			ro = append(ro[:0], row[1]...)
		}
	})
	var sqlErr *wire.SQLError
	if errors.As(err, &sqlErr) {
		return true, false, nil
	}
	return string(v) == "1", string(ro) == "1", err
}

// A CALL of a procedure that uses no table and raises nothing leaves the
// warning list as it was, and the server alone knows whether it did (the
// procedure's body is not the gateway's to read). When the session's list
// lives here, not on the connection (its statement ran on another one),
// the connection's list is first replaced by a marker; after the CALL a
// list that is still the marker means the CALL kept it: the session's own
// list stands. (The CALL's OK packet counts only its own warnings either
// way: checked on 10.11.)

// diagMarker is the text of the marker warning: 1292 "Truncated incorrect
// INTEGER value: '<diagMarker>'".
const diagMarker = "directgate: the warnings of the session are kept by the gateway"

// diagMarkerSQL raises exactly the marker warning. DO uses no table and
// leaves ROW_COUNT() and FOUND_ROWS() alone.
const diagMarkerSQL = "DO CAST('" + diagMarker + "' AS INT)"

// plantDiagMarker replaces conn's warning list with the marker before a
// CALL (sql) when the session's list is not on conn. A non-nil error is
// the statement's: the connection broke.
//
// Before a prepared CALL (ss.execCall) the marker is planted even when
// the session's list is empty: COM_STMT_EXECUTE does not reset the row
// number MariaDB quotes in the warnings it raises while it converts the
// procedure's arguments ("... at row N"), and a statement that raised
// nothing (a SELECT, the gateway's own reads of a connection included)
// leaves it at 1 where a statement that raised a warning leaves it at 0
// (checked on 10.11). The marker, a warning, leaves it at 0, where a
// session's DDL or warning before the CALL leaves it directly.
func (ss *Session) plantDiagMarker(conn *backendConn, route querypath.Route, sql []byte) error {
	d := &ss.diag
	if d.onConn&diagWarnings != 0 || d.warnCount == 0 && d.errCount == 0 && !ss.execCall || route.MultiStatement || !isCall(sql) {
		return nil
	}
	if _, err := conn.Exec(diagMarkerSQL); err != nil {
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			return nil // no marker: the server's list is taken after the CALL, as before
		}
		ss.dropLease()
		return backendLost(conn.addr, err)
	}
	conn.warnListed = true
	d.planted = true
	return nil
}

// maxPlantedFoundRows bounds the FOUND_ROWS() value plantFoundRows sets:
// the server counts that many rows to set it.
const maxPlantedFoundRows = 1 << 20

// plantFoundRows sets FOUND_ROWS() on conn to the session's value before
// a statement that reads it (inside an expression: a plain read is
// answered from the session's copy) when the value is the gateway's, not
// conn's: the statement that left it ran on another connection. A
// non-nil error is the statement's: the connection broke. Where the
// server cannot count (no SEQUENCE engine), the statement reads conn's.
func (ss *Session) plantFoundRows(conn *backendConn, route querypath.Route, pinned bool) error {
	d := &ss.diag
	if route.Unpin&querypath.PinFoundRows == 0 || d.onConn&diagFoundRows != 0 || d.foundRows > maxPlantedFoundRows {
		return nil
	}
	if pinned {
		// The SELECT would replace what the previous statement left.
		if err := ss.captureDiag(conn); err != nil {
			ss.dropLease()
			return backendLost(conn.addr, err)
		}
	}
	q := "SELECT SQL_CALC_FOUND_ROWS 1 FROM DUAL WHERE 0 LIMIT 0"
	if d.foundRows > 0 {
		q = "SELECT SQL_CALC_FOUND_ROWS 1 FROM seq_1_to_" + strconv.FormatUint(d.foundRows, 10) + " LIMIT 0"
	}
	if err := conn.QueryRows(q, func([][]byte) {}); err != nil {
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			return nil
		}
		ss.dropLease()
		return backendLost(conn.addr, err)
	}
	return nil
}

// resolveDiagMarker reads, after a CALL that followed the marker, what
// the CALL left, into the session's copy; a list that is still the
// marker is the session's own list, kept. A non-nil error is a broken
// connection.
func (ss *Session) resolveDiagMarker(conn *backendConn) error {
	d := &ss.diag
	d.planted = false
	warnCount, errCount := d.warnCount, d.errCount
	conds := append([][3][]byte(nil), d.conds...)
	if err := ss.captureDiag(conn); err != nil {
		return err
	}
	if d.onConn&diagWarnings == 0 && d.warnCount == 1 && d.errCount == 0 && len(d.conds) == 1 &&
		string(d.conds[0][1]) == "1292" && strings.Contains(string(d.conds[0][2]), diagMarker) {
		d.warnCount, d.errCount, d.conds = warnCount, errCount, conds
	}
	return nil
}
