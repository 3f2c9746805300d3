package gateway

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"vitess.io/vitess/go/vt/sqlparser"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// ownerRoute says whether a statement goes to the cluster's owner, and how.
type ownerRoute uint8

const (
	ownerNone ownerRoute = iota
	ownerForward
	ownerStream
	ownerAutoIncrement
)

// routeOwner decides whether route, a statement run in database db,
// needs the owner: SELECT NEXT ... VALUES FROM a sequence table, STREAM,
// INSERTs into and acks (UPDATEs) of message tables, and INSERTs into
// tables whose column is filled from a sequence (auto_increment in the
// config). MariaDB's own NEXT VALUE FOR goes to the primary.
func (ss *Session) routeOwner(db string, route querypath.Route) (ownerRoute, *config.AutoIncrement) {
	switch {
	case route.Kind == querypath.KindSequence && !route.NativeSyntax:
		return ownerForward, nil
	case route.Kind == querypath.KindStream:
		return ownerStream, nil
	case route.Table == "" || route.DML != querypath.DMLInsert && route.DML != querypath.DMLUpdate:
		return ownerNone, nil
	}
	c := ss.cluster
	if c.fwd == nil {
		return ownerNone, nil
	}
	name := ownerName(db, route.Table)
	if c.fwd.Tables().Kind(name) == forward.KindMessage {
		return ownerForward, nil
	}
	if route.DML == querypath.DMLInsert {
		if ai := c.autoIncrement(name); ai != nil {
			return ownerAutoIncrement, ai
		}
	}
	return ownerNone, nil
}

// runOwner runs sql, the text of COM_QUERY p run in database db, whose
// route needs the owner (or and ai are routeOwner's answer): sequence
// and message statements go to the owner after the user's grants are
// checked; an auto_increment INSERT gets its values filled in and runs
// on the primary, or runs asIs when there is nothing to fill. Prepared
// statements come here too, with their parameters written in.
//
// It runs through blocking: the owner's connections, the grant probes'
// and a STREAM's watch of the client are not the session's own sockets.
func (ss *Session) runOwner(db, sql string, p []byte, route querypath.Route, or ownerRoute, ai *config.AutoIncrement, asIs func() error) (err error) {
	ss.blocking(offloadOwner, func() { err = ss.runOwnerNow(db, sql, p, route, or, ai, asIs) })
	return err
}

// runOwnerNow is runOwner's work.
func (ss *Session) runOwnerNow(db, sql string, p []byte, route querypath.Route, or ownerRoute, ai *config.AutoIncrement, asIs func() error) error {
	if or == ownerAutoIncrement {
		rewritten, handled, err := ss.autoIncrementFill(db, sql, route, ai)
		switch {
		case handled:
			return err
		case rewritten == "":
			return asIs()
		}
		return ss.run(append([]byte{wire.ComQuery}, rewritten...), route, wire.ResponseQuery)
	}
	if handled, err := ss.checkOwnerGrants(db, route, sql); handled {
		return err
	}
	if or == ownerStream {
		return ss.streamOwner(db, p)
	}
	_, err := ss.forwardOwner(db, p, wire.ResponseQuery)
	return err
}

// ownerName qualifies a table name with database db, lower case.
func ownerName(db, table string) string {
	if !strings.Contains(table, ".") {
		table = db + "." + table
	}
	return strings.ToLower(table)
}

// noOwner is the error for owner statements in a cluster without one.
func (ss *Session) noOwner() *wire.SQLError {
	return wire.NewError(1235, "42000", "This version of the gateway doesn't yet support sequence and message statements without an owner: set clusters[].owner for cluster %s and run `gateway owner`", ss.cluster.name)
}

// forwardOwner sends a statement to the owner, with default database db,
// and relays its answer. The session's backend connection and pins are
// untouched: a session in a transaction gets its answer, with its own
// transaction status.
func (ss *Session) forwardOwner(db string, p []byte, kind wire.ResponseKind) (wire.Result, error) {
	sp := startStatement(ss.now)
	sp.route = routeOwner
	defer ss.srv.metrics.endStatement(&sp)
	fwd := ss.cluster.fwd
	if fwd == nil {
		return wire.Result{}, ss.writeErr(ss.noOwner())
	}
	ss.relay.ClientCaps = ss.caps
	ss.relay.OverrideTxn, ss.relay.TxnStatus = true, ss.status
	res, err := fwd.Forward(&ss.relay, ss.client, db, p, kind)
	ss.relay.OverrideTxn = false
	sp.outcome = outcomeOf(res, err)
	ss.srv.metrics.ownerForward(err)
	return res, ss.ownerDone(res, err)
}

// ownerDone finishes an owner statement: the owner's errors pass through,
// a failure to reach it becomes a clear error.
func (ss *Session) ownerDone(res wire.Result, err error) error {
	if err == nil {
		if res.Err == nil && res.OK.LastInsertID != 0 {
			ss.lastInsertID = res.OK.LastInsertID
		}
		return nil
	}
	var ce *wire.ClientError
	if errors.As(err, &ce) {
		return err
	}
	ss.log.Warn("owner statement failed", "owner", ss.cluster.fwd.Addr(), "error", err)
	if res.Midway {
		return lostMidway(err)
	}
	return ss.writeErr(toClientError(err))
}

// streamOwner relays STREAM * FROM t (in database db), a result that does
// not end, until the client goes away, the owner fails, or the gateway
// shuts down. The client connection is watched for its end while the
// stream runs.
func (ss *Session) streamOwner(db string, p []byte) error {
	fwd := ss.cluster.fwd
	if fwd == nil {
		return ss.writeErr(ss.noOwner())
	}
	stop := make(chan struct{})
	var ending, clientGone atomic.Bool
	watched := make(chan struct{})
	ss.srv.group.Go("stream client watch", func() {
		defer close(watched)
		var b [1]byte
		// Through TLS when the client uses it (a byte of the raw socket
		// would be a piece of a TLS record); ss.nc's deadline still
		// interrupts the read.
		_, err := ss.client.NetConn().Read(b[:])
		if ending.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			return // the stream ended first: the watch is over
		}
		// The client closed, sent something mid-stream, or shutdown
		// interrupted it: end the stream.
		clientGone.Store(!errors.Is(err, os.ErrDeadlineExceeded))
		close(stop)
	})
	ss.streaming.Store(true)
	ss.relay.ClientCaps = ss.caps
	ss.relay.OverrideTxn, ss.relay.TxnStatus = true, ss.status
	res, err := fwd.Stream(&ss.relay, ss.client, db, p, stop)
	ss.relay.OverrideTxn = false
	ss.srv.metrics.ownerForward(err)
	ss.streaming.Store(false)
	ending.Store(true)
	_ = ss.nc.SetReadDeadline(time.Now())
	<-watched
	_ = ss.nc.SetReadDeadline(time.Time{})
	if clientGone.Load() {
		return io.EOF
	}
	select {
	case <-stop:
		// Shutdown: tell the client why its stream ended.
		if res.Packets > 0 {
			return ss.writeErr(wire.NewError(mysqlserver.ErServerShutdown, "08S01", "Server shutdown in progress: the gateway is stopping, reconnect and STREAM again"))
		}
	default:
	}
	return ss.ownerDone(res, err)
}

// autoIncrementFill fills ai.Column of an INSERT (sql, run in database
// db) from the sequence: rows where the column is missing or NULL get
// consecutive values reserved from the owner, the first wrapped in
// LAST_INSERT_ID() so the OK packet's insert id and LAST_INSERT_ID()
// report it, as MySQL does for AUTO_INCREMENT. It returns the rewritten
// statement, with its table qualified when db is not the session's; ""
// when the statement runs as it is (nothing to fill, INSERT ... SELECT,
// text the parser or the column count leaves to the backend's own
// error); handled when the client has its answer already (an error).
func (ss *Session) autoIncrementFill(db, sql string, route querypath.Route, ai *config.AutoIncrement) (rewritten string, handled bool, err error) {
	ins, rows, col, handled, err := ss.autoIncrementTarget(db, sql, route, ai)
	if ins == nil || handled {
		return "", handled, err
	}
	var fill []int
	for i, row := range rows {
		if col >= len(row) {
			// Fewer values than columns: the backend reports its own
			// column-count error.
			return "", false, nil
		}
		if col < 0 {
			fill = append(fill, i)
			continue
		}
		if _, isNull := row[col].(*sqlparser.NullVal); isNull {
			fill = append(fill, i)
		}
	}
	if len(fill) == 0 {
		return "", false, nil
	}
	if ss.cluster.fwd == nil {
		return "", true, ss.writeErr(ss.noOwner())
	}
	first, err := ss.cluster.fwd.NextValues(ai.Sequence, int64(len(fill)))
	ss.srv.metrics.ownerForward(err)
	if err != nil {
		return "", true, ss.ownerDone(wire.Result{}, err)
	}
	if col < 0 {
		ins.Columns = append(ins.Columns, sqlparser.NewIdentifierCI(ai.Column))
		for i := range rows {
			rows[i] = append(rows[i], &sqlparser.NullVal{})
		}
		col = len(ins.Columns) - 1
	}
	for k, i := range fill {
		v := sqlparser.Expr(sqlparser.NewIntLiteral(strconv.FormatInt(first+int64(k), 10)))
		if k == 0 {
			v = &sqlparser.FuncExpr{Name: sqlparser.NewIdentifierCI("LAST_INSERT_ID"), Exprs: []sqlparser.Expr{v}}
		}
		rows[i][col] = v
	}
	if t, ok := ins.Table.Expr.(sqlparser.TableName); ok && db != ss.db && t.Qualifier.IsEmpty() {
		// A prepared statement runs in the database it was prepared in.
		t.Qualifier = sqlparser.NewIdentifierCS(db)
		ins.Table.Expr = t
	}
	return sqlparser.String(ins), false, nil
}

// autoIncrementTarget parses the INSERT sql for autoIncrementFill: its
// AST, its rows of values and the index of ai.Column among its columns
// (-1 when the column list lacks it). ins is nil when the statement
// runs as it is; handled when the client has its answer (an error).
func (ss *Session) autoIncrementTarget(db, sql string, route querypath.Route, ai *config.AutoIncrement) (ins *sqlparser.Insert, rows sqlparser.Values, col int, handled bool, err error) {
	stmt, perr := ss.srv.parser.Parse(sql)
	if perr != nil {
		return nil, nil, 0, false, nil // the backend reports its own syntax error
	}
	ins, ok := stmt.(*sqlparser.Insert)
	if !ok {
		return nil, nil, 0, false, nil
	}
	rows, ok = ins.Rows.(sqlparser.Values)
	if !ok {
		return nil, nil, 0, false, nil // INSERT ... SELECT: the values are not known here
	}
	col = -1
	for i, c := range ins.Columns {
		if strings.EqualFold(c.String(), ai.Column) {
			col = i
		}
	}
	if len(ins.Columns) > 0 {
		return ins, rows, col, false, nil
	}
	// No column list: values follow the table's column order.
	cols, cerr := ss.cluster.tableColumns(ss, ownerName(db, route.Table))
	if cerr != nil {
		return nil, nil, 0, true, ss.writeErr(toClientError(cerr))
	}
	for i, c := range cols {
		if strings.EqualFold(c, ai.Column) {
			col = i
		}
	}
	if col < 0 {
		return nil, nil, 0, true, ss.writeErr(wire.NewError(1054, "42S22", "Unknown column '%s' in 'field list': auto_increment of %s names a column the table lacks", ai.Column, ai.Table))
	}
	return ins, rows, col, false, nil
}
