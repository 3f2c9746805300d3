package owner

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/wire"
)

// serverVersion is announced in the owner's greeting.
const serverVersion = "10.11.0-directgate-owner"

// ownerCaps are the capabilities the owner offers: the gateway's, without
// CLIENT_DEPRECATE_EOF (results use classic EOF packets, as gateways
// expect from a backend), multi-statements and LOCAL INFILE.
const ownerCaps = wire.ServerCaps &^ (wire.CapDeprecateEOF | wire.CapMultiStatements | wire.CapLocalFiles | wire.CapSessionTrack)

const (
	// loginFailureLimit failed logins from one address or for one user
	// name within a minute make the answers to more of them come
	// loginFailureDelay apart.
	loginFailureLimit = 5
	loginFailureDelay = time.Second
	// handshakeTimeout bounds the time a client gets to log in.
	handshakeTimeout = 10 * time.Second
	// keepBuffer is the largest buffer a session keeps between commands.
	keepBuffer = 1 << 20
	// streamWriteTimeout bounds writing one batch to a subscriber; a
	// subscriber that does not read for this long is dropped.
	streamWriteTimeout = 30 * time.Second
	// maxPacket bounds a command from a gateway.
	maxPacket = 64 << 20
)

// session is one gateway connection. Its goroutine runs handshake and
// loop; nothing else touches its Conn, except, during a STREAM, the
// queue's deliveries (which write, serialized by streamSub.mu) and the
// watcher that waits for the client to close (which only peeks).
type session struct {
	o       *Owner
	id      uint32
	nc      net.Conn
	c       *wire.Conn
	log     hclog.Logger
	caps    uint32
	db      string // default database: from the handshake, then COM_INIT_DB
	loginDB string
	rw      wire.ResultWriter
	buf     []byte
	// stmtID numbers the statements COM_STMT_PREPARE described.
	stmtID uint32
	// wait is the command loop's wait for the next command (shutdown
	// interrupts it).
	wait mysqlserver.Wait
	// errSent is set by writeErr: the statement being answered ended in
	// an error packet (metrics).
	errSent bool
}

// NewConn implements mysqlserver.Handler: the session of a gateway's
// connection.
func (o *Owner) NewConn(nc net.Conn, id uint32) mysqlserver.Conn {
	ss := &session{
		o: o, id: id, nc: nc, c: wire.NewConn(nc, 16<<10, 16<<10),
		log: o.log.Named("session").With("conn_id", id, "client_addr", nc.RemoteAddr().String()),
	}
	ss.c.MaxPacket = maxPacket
	ss.rw = wire.ResultWriter{Conn: ss.c, Status: wire.StatusAutocommit}
	return ss
}

// Serve implements mysqlserver.Conn: the handshake, then commands.
func (ss *session) Serve() {
	if ss.o.front.Closing() {
		return
	}
	if err := ss.handshake(); err != nil {
		ss.log.Debug("handshake failed", "error", err)
		return
	}
	if err := ss.loop(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errStreamEnded) && !ss.o.front.Closing() {
		ss.log.Debug("connection ended", "error", err)
	}
}

// InterruptIfIdle implements mysqlserver.Conn: it ends the session's wait
// for its next command (Shutdown).
func (ss *session) InterruptIfIdle() {
	ss.wait.Interrupt(ss.nc)
}

// ForceClose implements mysqlserver.Conn: it cuts the connection and the
// statements in flight of every session (only a shutdown that stopped
// waiting calls it).
func (ss *session) ForceClose() {
	_ = ss.nc.Close()
	ss.o.hardCancel()
}

// handshake greets the gateway and checks its login against the
// cluster's backend account (mysql_native_password; caching_sha2_password
// fast auth is accepted too).
func (ss *session) handshake() error {
	_ = ss.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer ss.nc.SetDeadline(time.Time{})
	salt, err := wire.NewSalt()
	if err != nil {
		return err
	}
	g := &wire.Greeting{
		ServerVersion: serverVersion, ConnectionID: ss.id, Salt: salt, Caps: ownerCaps,
		Collation: wire.DefaultCollation, Status: wire.StatusAutocommit, AuthPlugin: wire.NativePassword,
	}
	resp, plugin, answer, err := wire.ServerHandshake(ss.c, g)
	switch {
	case errors.Is(err, wire.ErrTLSRequested):
		return ss.fail(wire.NewError(1043, "08S01", "Bad handshake: the owner does not offer TLS; connect without SSL"))
	case errors.Is(err, wire.ErrBadHandshake):
		_ = ss.fail(wire.NewError(1043, "08S01", "Bad handshake"))
		return err
	case err != nil:
		return err
	}
	ss.caps = resp.Caps & ownerCaps
	ss.rw.Caps = ss.caps
	cl := ss.o.conf.Load().cluster
	if resp.User != cl.BackendUser || !wire.CheckScramble(plugin, salt, answer, cl.BackendPassword) {
		ss.o.metrics.login(loginDenied)
		ss.log.Warn("login refused: gateways log in with the cluster's backend_user", "user", resp.User)
		// The login guards the cluster's backend password: failures are
		// paced per address and user name, as the gateway's.
		if d := ss.o.logins.Failed(remoteHost(ss.nc), resp.User, loginFailureLimit, loginFailureDelay); d > 0 {
			time.Sleep(d)
		}
		using := "NO"
		if len(answer) > 0 {
			using = "YES"
		}
		return ss.fail(wire.NewError(1045, "28000", "Access denied for user '%s' (using password: %s)", resp.User, using))
	}
	if _, standby := ss.o.leading(); standby != nil {
		// Only a logged-in gateway learns who leads.
		ss.o.metrics.login(loginStandby)
		return ss.fail(standby)
	}
	ss.o.metrics.login(loginOK)
	if plugin == wire.CachingSha2Password {
		if err := ss.c.WritePacket([]byte{0x01, 0x03}); err != nil { // fast auth success
			return err
		}
	}
	if resp.Caps&wire.CapConnectWithDB != 0 {
		ss.db, ss.loginDB = resp.Database, resp.Database
	}
	if err := ss.writeOK(wire.OK{Status: wire.StatusAutocommit}); err != nil {
		return err
	}
	return ss.c.Flush()
}

// fail sends e and returns it, for errors that end the connection.
func (ss *session) fail(e *wire.SQLError) error {
	if err := ss.writeErr(e); err == nil {
		_ = ss.c.Flush()
	}
	return e
}

func (ss *session) writeOK(ok wire.OK) error {
	ss.buf = wire.AppendOK(ss.buf[:0], ok)
	return ss.c.WritePacket(ss.buf)
}

func (ss *session) writeErr(e *wire.SQLError) error {
	ss.errSent = true
	ss.buf = wire.AppendERR(ss.buf[:0], e)
	return ss.c.WritePacket(ss.buf)
}

// loop answers commands until the client quits, fails or a stream ends.
func (ss *session) loop() error {
	l := mysqlserver.Loop{
		Conn: ss.c, Wait: &ss.wait, KeepBuffer: keepBuffer,
		Stop: ss.o.front.Closing,
		Idle: func() (time.Duration, error) {
			ss.rw.ShrinkBuffer(keepBuffer)
			if cap(ss.buf) > keepBuffer {
				ss.buf = nil
			}
			return 0, nil
		},
		Dispatch: ss.dispatch,
		WriteErr: func(e *wire.SQLError) error {
			if err := ss.writeErr(e); err != nil {
				return err
			}
			return ss.c.Flush()
		},
	}
	return l.Run()
}

// errStreamEnded ends the loop after a STREAM closed the connection.
var errStreamEnded = errors.New("stream ended")

// dispatch answers one command.
func (ss *session) dispatch(p []byte) error {
	var err error
	end := false
	switch p[0] {
	case wire.ComQuit:
		return io.EOF
	case wire.ComPing:
		err = ss.writeOK(wire.OK{Status: wire.StatusAutocommit})
	case wire.ComInitDB:
		ss.db = string(p[1:])
		err = ss.writeOK(wire.OK{Status: wire.StatusAutocommit})
	case wire.ComResetConnection:
		ss.db = ss.loginDB
		err = ss.writeOK(wire.OK{Status: wire.StatusAutocommit})
	case wire.ComSetOption:
		ss.buf = wire.AppendEOF(ss.buf[:0], 0, wire.StatusAutocommit)
		err = ss.c.WritePacket(ss.buf)
	case wire.ComQuery:
		end, err = ss.query(string(p[1:]))
	case wire.ComStmtPrepare:
		err = ss.prepare(string(p[1:]))
	case wire.ComStmtClose:
		return nil // nothing kept (prepare), no answer
	default:
		err = ss.writeErr(wire.NewError(mysqlserver.ErUnknownCom, "08S01", "Unknown command"))
	}
	switch {
	case err != nil:
		return err
	case end: // a stream has closed the connection itself
		return errStreamEnded
	}
	return ss.c.Flush()
}

// query answers one COM_QUERY and counts it. end reports that the
// connection must close (a STREAM ended). An error is a connection
// failure; statement errors are sent to the client.
func (ss *session) query(q string) (end bool, err error) {
	st := parseStatement(ss.o.parser, q)
	ss.errSent = false
	end, err = ss.answer(st, q)
	ss.o.metrics.statement(st.kind, err != nil || ss.errSent)
	return end, err
}

// answer answers the parsed statement st of query q (see query).
func (ss *session) answer(st statement, q string) (end bool, err error) {
	if st.kind == stmtUnsupported {
		return false, ss.writeErr(unsupported(q))
	}
	if st.err != nil {
		return false, ss.writeErr(st.err)
	}
	term, standby := ss.o.leading()
	if standby != nil {
		return false, ss.writeErr(standby)
	}
	ctx, cancel := context.WithTimeout(ss.o.hard, statementTimeout)
	defer cancel()
	switch st.kind {
	case stmtShowTables:
		return false, ss.showTables(ctx)
	case stmtLogCommit, stmtLogForget:
		return false, ss.logStatement(ctx, st)
	}
	t, sqlErr := ss.resolve(ctx, st.table, wantedKind(st.kind))
	if sqlErr != nil {
		return false, ss.writeErr(sqlErr)
	}
	switch st.kind {
	case stmtNext:
		return false, ss.nextValues(ctx, t, st.count, term)
	case stmtInsert, stmtAck:
		return false, ss.exec(ctx, t, st, q, term)
	}
	return true, ss.stream(t, term)
}

// unsupported is the answer to a statement the owner does not answer.
func unsupported(q string) *wire.SQLError {
	if len(q) > 200 {
		q = q[:200] + "..."
	}
	return wire.NewError(1235, "42000", "This version of the owner doesn't support: %s; send it to the gateway", q)
}

// wantedKind is the kind of table a statement of kind k names.
func wantedKind(k stmtKind) kind {
	if k == stmtNext {
		return kindSequence
	}
	return kindMessage
}

// resolve finds the owned table a statement names, with the session's
// default database for an unqualified name.
func (ss *session) resolve(ctx context.Context, name tableName, want kind) (*table, *wire.SQLError) {
	schema := name.Schema
	if schema == "" {
		schema = ss.db
	}
	if schema == "" {
		return nil, wire.NewError(1046, "3D000", "No database selected")
	}
	t, err := ss.o.lookupTable(ctx, schema, name.Name)
	if err != nil {
		return nil, ss.o.toSQLError(err, nil, "")
	}
	if t == nil || t.kind != want {
		if want == kindSequence {
			return nil, wire.NewError(1146, "42S02", "Table '%s.%s' doesn't exist or is not a sequence the owner knows (comment vitess_sequence or owner_tables.sequences)", schema, name.Name)
		}
		return nil, wire.NewError(1146, "42S02", "Table '%s.%s' doesn't exist or is not a message table the owner knows (comment vitess_message or owner_tables.messages)", schema, name.Name)
	}
	return t, nil
}

// statementFailed maps err for the client and tells discovery about a
// primary that failed or refused a write as read-only.
func (ss *session) statementFailed(p *primary, t *table, err error) error {
	var me *mysql.MySQLError
	switch {
	case isConnError(err):
		ss.o.reportFailure(p.addr, err)
	case errors.As(err, &me) && me.Number == wire.ErOptionPreventsStatement:
		ss.o.health.Check(p.addr)
	}
	return ss.writeErr(ss.o.toSQLError(err, t, p.addr))
}

// nextvalColumn is the one column of a NEXT VALUES result.
func nextvalColumn() wire.Column {
	return wire.Column{Name: "nextval", Charset: wire.BinaryCollation, Length: 20, Type: wire.TypeLongLong,
		Flags: wire.FlagNotNull | wire.FlagBinary}
}

// nextValues answers SELECT NEXT n VALUES in leadership term: one row,
// the first value. The value goes out only if the term still holds right
// before it is written (the fence): a lapsed term answers with an error
// instead, and the value is a gap.
func (ss *session) nextValues(ctx context.Context, t *table, n int64, term uint64) error {
	p, err := ss.o.currentPrimary(ctx)
	if err != nil {
		return ss.writeErr(ss.o.toSQLError(err, t, ""))
	}
	v, err := t.seq.nextValues(ctx, blockGen{primary: p.gen, term: term}, tableBlocks{p: p, t: t, term: term}, n)
	if !ss.o.stillLeading(term) {
		// Nothing goes out of a lapsed term, whatever became of the
		// reservation (MariaDB may have ended a paused owner's
		// transaction).
		return ss.writeErr(ss.o.lostLeadershipError())
	}
	if err != nil {
		return ss.statementFailed(p, t, err)
	}
	t.seq.values.Add(uint64(n))
	cols := [1]wire.Column{nextvalColumn()}
	if err := ss.rw.Columns(cols[:]); err != nil {
		return err
	}
	var num [20]byte
	row := [1][]byte{strconv.AppendInt(num[:0], v, 10)}
	if err := ss.rw.Row(row[:]); err != nil {
		return err
	}
	return ss.rw.End(0)
}

// exec runs an insert into or an ack of a message table on the primary,
// verbatim, in the session's default database, in leadership term, and
// answers with the primary's OK. An insert makes the queue poll at once;
// an ack drops the acked ids from its cache. An elected owner runs it
// behind the table's fence (fence.go): when a newer term has written to
// the table, it is refused with 1290 before it ran, and the gateway sends
// it to the new leader.
func (ss *session) exec(ctx context.Context, t *table, st statement, q string, term uint64) error {
	p, err := ss.o.currentPrimary(ctx)
	if err != nil {
		return ss.writeErr(ss.o.toSQLError(err, t, ""))
	}
	schema := ""
	if st.table.Schema == "" {
		schema = ss.db
	}
	db, err := p.forSchema(schema)
	if err != nil {
		return ss.statementFailed(p, t, err)
	}
	var res sql.Result
	// Not before this term has fenced the old ones out of the table.
	err = ss.o.raiseFence(ctx, p, t, term)
	if err == nil {
		err = p.write(ctx, db, t, term, fenceCheck, func(e execer) (err error) {
			res, err = e.ExecContext(ctx, q)
			return err
		})
	}
	var stale *staleTermError
	if errors.As(err, &stale) {
		t.queue.supersede(stale)
	}
	if err != nil {
		return ss.statementFailed(p, t, err)
	}
	affected, _ := res.RowsAffected()
	lastID, _ := res.LastInsertId()
	if st.kind == stmtInsert {
		t.queue.inserted(affected)
	} else {
		t.queue.acked(st.ids, affected)
	}
	return ss.writeOK(wire.OK{AffectedRows: uint64(affected), LastInsertID: uint64(lastID), Status: wire.StatusAutocommit})
}

// ownerTablesColumns are the columns of SHOW OWNER TABLES.
func ownerTablesColumns() []wire.Column {
	col := func(name string, length uint32) wire.Column {
		return wire.Column{Name: name, Charset: uint16(wire.DefaultCollation), Length: length, Type: wire.TypeVarString, Flags: wire.FlagNotNull}
	}
	return []wire.Column{col("db", 256), col("table", 256), col("kind", 32)}
}

// showTables answers SHOW OWNER TABLES: db, table, kind per owned table.
func (ss *session) showTables(ctx context.Context) error {
	if err := ss.o.waitDiscovered(ctx); err != nil {
		return ss.writeErr(ss.o.toSQLError(err, nil, ""))
	}
	if err := ss.rw.Columns(ownerTablesColumns()); err != nil {
		return err
	}
	row := make([][]byte, 3)
	for _, t := range ss.o.tables.Load().list {
		row[0], row[1], row[2] = []byte(t.Schema), []byte(t.Name), []byte(t.kind.String())
		if err := ss.rw.Row(row); err != nil {
			return err
		}
	}
	return ss.rw.End(0)
}

// stream answers STREAM * FROM t: the column definitions, then rows as
// the queue delivers them, until the client goes away, the queue ends the
// subscription or the owner shuts down (error 1053 ends the result). The
// connection closes afterwards.
func (ss *session) stream(t *table, term uint64) error {
	_ = ss.nc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if err := ss.rw.Columns(t.queue.columns()); err != nil {
		return err
	}
	if err := ss.c.Flush(); err != nil {
		return err
	}
	_ = ss.nc.SetWriteDeadline(time.Time{})
	sub := &streamSub{ss: ss}
	subscription := t.queue.subscribe(sub)
	gone := make(chan struct{})
	ss.o.bgGroup.Go("owner stream watch", func() {
		defer close(gone)
		for {
			// Anything from the client, or its close, ends the stream.
			if ok, err := ss.c.WaitReadable(time.Hour); ok || err != nil {
				return
			}
		}
	})
	var reason *wire.SQLError
	if !ss.o.stillLeading(term) {
		// The term ended before the subscription counted: end it here.
		subscription.end(ss.o.standbyError())
	}
	select {
	case <-subscription.Done():
		reason = subscription.err
	case <-gone:
	case <-ss.o.ctx.Done():
		reason = wire.NewError(1053, "08S01", "Server shutdown in progress")
	}
	t.queue.unsubscribe(subscription)
	sub.finish(reason)
	_ = ss.nc.Close()
	<-gone
	return nil
}

// streamSub is a session as a queue subscriber. mu serializes writes of
// deliveries and of the final error.
type streamSub struct {
	ss     *session
	mu     sync.Mutex
	closed bool
}

func (s *streamSub) send(rows [][][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("stream closed")
	}
	ss := s.ss
	_ = ss.nc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	for _, r := range rows {
		if err := ss.rw.Row(r); err != nil {
			return err
		}
	}
	if err := ss.c.Flush(); err != nil {
		return err
	}
	return ss.nc.SetWriteDeadline(time.Time{})
}

// finish ends the stream: no delivery writes after it; reason, if any,
// is sent as the ERR packet that ends the result.
func (s *streamSub) finish(reason *wire.SQLError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if reason != nil {
		ss := s.ss
		_ = ss.nc.SetWriteDeadline(time.Now().Add(time.Second))
		if ss.writeErr(reason) == nil {
			_ = ss.c.Flush()
		}
	}
}

// remoteHost is the client's IP address, without the port.
func remoteHost(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}
