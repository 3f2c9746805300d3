package e2e

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/wire"
)

// Owner statements through the binary protocol: go-sql-driver with
// interpolateParams off (its default) sends every Exec and Query with
// arguments as COM_STMT_PREPARE + COM_STMT_EXECUTE. A new user found that
// a prepared INSERT into an auto_increment table failed with 1364 (the id
// was not filled) and that prepared NEXT VALUE and STREAM were refused
// with 1295; these tests pin down that they work as their text forms do.

// preparedSession opens one session on gateway i whose statements with
// arguments use the binary protocol.
func (o *ownerStack) preparedSession(t *testing.T, i int) *sql.DB {
	t.Helper()
	return o.openSession(t, i, "")
}

// sameError checks that the text and the prepared form of a statement
// failed with the same error number and SQLSTATE, num (state).
func sameError(t *testing.T, what string, textErr, prepErr error, num uint16, state string) {
	t.Helper()
	var te, pe *mysql.MySQLError
	if !errors.As(textErr, &te) || !errors.As(prepErr, &pe) {
		t.Fatalf("%s: text %v, prepared %v: want MySQL errors", what, textErr, prepErr)
	}
	if te.Number != num || te.SQLState != pe.SQLState || te.Number != pe.Number || string(te.SQLState[:]) != state {
		t.Fatalf("%s: text %d (%s) %q, prepared %d (%s) %q; want %d (%s) for both",
			what, te.Number, te.SQLState, te.Message, pe.Number, pe.SQLState, pe.Message, num, state)
	}
}

// insertID runs an INSERT and returns the OK packet's insert id, after
// checking that LAST_INSERT_ID() on the session says the same.
func insertID(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", q, args, err)
	}
	id, _ := res.LastInsertId()
	var lid int64
	if err := db.QueryRow("SELECT LAST_INSERT_ID()").Scan(&lid); err != nil || lid != id {
		t.Fatalf("%s: LAST_INSERT_ID() = %d (%v), OK packet %d", q, lid, err, id)
	}
	return id
}

// itemOf reads the item of order id.
func itemOf(t *testing.T, db *sql.DB, id int64) string {
	t.Helper()
	var item string
	if err := db.QueryRow("SELECT item FROM orders WHERE id = ?", id).Scan(&item); err != nil {
		t.Fatalf("order %d: %v", id, err)
	}
	return item
}

// TestOwnerPreparedAutoIncrement: a prepared INSERT into an
// auto_increment table gets its id from the sequence, as the text INSERT
// does: LastInsertId, LAST_INSERT_ID(), multi-row, a NULL id parameter,
// an explicit id, MariaDB's own errors, and a statement prepared in the
// database before a USE.
func TestOwnerPreparedAutoIncrement(t *testing.T) {
	st := startOwnerStack(t, 1)
	text, prep := st.session(t, 0), st.preparedSession(t, 0)
	mustExec(t, text, "DELETE FROM orders")

	a := insertID(t, text, "INSERT INTO orders (item) VALUES ('text')")
	b := insertID(t, prep, "INSERT INTO orders (item) VALUES (?)", "prepared")
	if a < 100 || b != a+1 || itemOf(t, text, b) != "prepared" {
		t.Fatalf("text insert got id %d, prepared %d (item %q); want consecutive ids from the sequence (next_id 100)", a, b, itemOf(t, text, b))
	}
	c := insertID(t, prep, "INSERT INTO orders (item, qty) VALUES (?, ?), (?, ?)", "m1", 1, "m2", 2)
	if c != b+1 || itemOf(t, text, c) != "m1" || itemOf(t, text, c+1) != "m2" {
		t.Fatalf("prepared multi-row insert: first id %d after %d", c, b)
	}
	d := insertID(t, prep, "INSERT INTO orders (id, item) VALUES (?, ?)", nil, "null id")
	if d != c+2 || itemOf(t, text, d) != "null id" {
		t.Fatalf("NULL id parameter: id %d after %d", d, c+1)
	}
	e := insertID(t, text, "INSERT INTO orders VALUES (NULL, 'no list', 3)")
	f := insertID(t, prep, "INSERT INTO orders VALUES (?, ?, ?)", nil, "no list", 3)
	if e != d+1 || f != e+1 {
		t.Fatalf("no column list: text id %d, prepared %d, after %d", e, f, d)
	}

	// An explicit id is kept, with the same OK packet as the text form.
	tres, terr := text.Exec("INSERT INTO orders (id, item) VALUES (9001, 'explicit')")
	pres, perr := prep.Exec("INSERT INTO orders (id, item) VALUES (?, ?)", 9002, "explicit")
	if terr != nil || perr != nil {
		t.Fatalf("explicit ids: %v, %v", terr, perr)
	}
	tid, _ := tres.LastInsertId()
	pid, _ := pres.LastInsertId()
	if tid != pid || itemOf(t, text, 9002) != "explicit" {
		t.Fatalf("explicit id: text insert id %d, prepared %d", tid, pid)
	}

	// MariaDB's own errors, the same for both.
	_, terr = text.Exec("INSERT INTO orders VALUES (NULL)")
	_, perr = prep.Exec("INSERT INTO orders VALUES (?)", nil)
	sameError(t, "too few values", terr, perr, 1136, "21S01")
	_, terr = text.Exec("INSERT INTO orders (id, item) VALUES (9001, 'again')")
	_, perr = prep.Exec("INSERT INTO orders (id, item) VALUES (?, ?)", 9001, "again")
	sameError(t, "duplicate id", terr, perr, 1062, "23000")

	// A prepared statement runs in the database it was prepared in.
	ctx := context.Background()
	conn, err := prep.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stmt, err := conn.PrepareContext(ctx, "INSERT INTO orders (item) VALUES (?)")
	if err != nil {
		t.Fatal(err)
	}
	mustExecConn(t, ctx, conn, "USE information_schema")
	res, err := stmt.Exec("after USE")
	if err != nil {
		t.Fatalf("prepared insert after USE: %v", err)
	}
	g, _ := res.LastInsertId()
	// (The text INSERT with too few values took a value before MariaDB
	// refused it; the prepared one was refused at prepare: gaps are
	// allowed.)
	if g <= f || itemOf(t, text, g) != "after USE" {
		t.Fatalf("prepared insert after USE: id %d after %d", g, f)
	}
	stmt.Close()
}

// nextValue reads one value of a NEXT VALUES statement.
func nextValue(t *testing.T, q interface {
	QueryRow(...any) *sql.Row
}, args ...any) int64 {
	t.Helper()
	var v int64
	if err := q.QueryRow(args...).Scan(&v); err != nil {
		t.Fatalf("NEXT VALUES %v: %v", args, err)
	}
	return v
}

// textQuery is a text statement with QueryRow's shape, for nextValue.
type textQuery struct {
	db *sql.DB
	q  string
}

func (tq textQuery) QueryRow(args ...any) *sql.Row { return tq.db.QueryRow(tq.q, args...) }

// columnShape is what a client learns of a result column.
type columnShape struct {
	Name, Type string
	Nullable   bool
	Scan       reflect.Type
}

func columnShapes(t *testing.T, rows *sql.Rows) []columnShape {
	t.Helper()
	cts, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	var out []columnShape
	for _, c := range cts {
		n, _ := c.Nullable()
		out = append(out, columnShape{c.Name(), c.DatabaseTypeName(), n, c.ScanType()})
	}
	return out
}

// TestOwnerPreparedSequences: prepared NEXT VALUE and NEXT n VALUES
// (literal or parameter) hand out values in one strictly increasing
// series with the text forms, under the same column; errors are the text
// forms' errors.
func TestOwnerPreparedSequences(t *testing.T) {
	st := startOwnerStack(t, 1)
	text, prep := st.session(t, 0), st.preparedSession(t, 0)
	nextStmt, err := prep.Prepare("SELECT NEXT VALUE FROM seq")
	if err != nil {
		t.Fatalf("prepare NEXT VALUE: %v", err)
	}
	defer nextStmt.Close()
	textNext := textQuery{text, "SELECT NEXT VALUE FROM seq"}
	prev := int64(0)
	for i := 0; i < 200; i++ {
		v := nextValue(t, nextStmt)
		if i%2 == 1 {
			v = nextValue(t, textNext)
		}
		if v <= prev {
			t.Fatalf("value %d after %d (call %d)", v, prev, i)
		}
		prev = v
	}

	a := nextValue(t, textQuery{prep, "SELECT NEXT ? VALUES FROM seq"}, 5)
	if b := nextValue(t, textNext); a <= prev || b != a+5 {
		t.Fatalf("prepared NEXT ? VALUES (5) = %d after %d, then NEXT VALUE = %d; want %d", a, prev, b, a+5)
	}
	fiveStmt, err := prep.Prepare("SELECT NEXT 5 VALUES FROM seq")
	if err != nil {
		t.Fatal(err)
	}
	defer fiveStmt.Close()
	c := nextValue(t, fiveStmt)
	if d := nextValue(t, nextStmt); c != a+6 || d != c+5 {
		t.Fatalf("prepared NEXT 5 VALUES = %d (want %d), then prepared NEXT VALUE = %d (want %d)", c, a+6, d, c+5)
	}

	// The same column, through either protocol.
	trows, err := text.Query("SELECT NEXT VALUE FROM seq")
	if err != nil {
		t.Fatal(err)
	}
	tshape := columnShapes(t, trows)
	trows.Close()
	prows, err := nextStmt.Query()
	if err != nil {
		t.Fatal(err)
	}
	pshape := columnShapes(t, prows)
	prows.Close()
	if !reflect.DeepEqual(tshape, pshape) || len(pshape) != 1 || pshape[0].Name != "nextval" || pshape[0].Type != "BIGINT" {
		t.Fatalf("text columns %+v, prepared %+v; want one BIGINT nextval", tshape, pshape)
	}

	// Errors: at prepare when the statement itself is wrong (as MariaDB
	// reports an unknown table), at execute for a bad parameter.
	for _, c := range []struct {
		q     string
		num   uint16
		state string
	}{
		{"SELECT NEXT VALUE FROM nosuch", 1146, "42S02"},
		{"SELECT NEXT VALUE FROM orders", 1146, "42S02"},
		{"SELECT NEXT 0 VALUES FROM seq", 1210, "HY000"},
	} {
		_, terr := text.Exec(c.q)
		_, perr := prep.Prepare(c.q)
		sameError(t, c.q, terr, perr, c.num, c.state)
	}
	_, terr := text.Exec("SELECT NEXT 0 VALUES FROM seq")
	perr := prep.QueryRow("SELECT NEXT ? VALUES FROM seq", 0).Scan(new(int64))
	sameError(t, "NEXT ? VALUES with 0", terr, perr, 1210, "HY000")

	// The owner is down: the same clear error.
	st.stopOwner(syscall.SIGTERM)
	_, terr = text.Exec("SELECT NEXT VALUE FROM seq")
	perr = nextStmt.QueryRow().Scan(new(int64))
	sameError(t, "owner down", terr, perr, 1429, "HY000")
	_, perr = prep.Prepare("SELECT NEXT 2 VALUES FROM seq")
	sameError(t, "owner down at prepare", terr, perr, 1429, "HY000")
}

// rawPrepare prepares q on a raw connection to addr (database ownerDB)
// and returns the statement id and its column definitions.
func rawPrepare(t *testing.T, bc *wire.BackendConn, q string) (uint32, [][]byte) {
	t.Helper()
	if err := bc.WriteCommand(append([]byte{wire.ComStmtPrepare}, q...)); err != nil {
		t.Fatal(err)
	}
	p, err := bc.ReadPacket()
	if err != nil || len(p) < 12 || p[0] != 0 {
		t.Fatalf("prepare %s: % x %v", q, p, err)
	}
	id := binary.LittleEndian.Uint32(p[1:])
	ncols, nparams := int(binary.LittleEndian.Uint16(p[5:])), int(binary.LittleEndian.Uint16(p[7:]))
	if nparams > 0 {
		rawDefs(t, bc, nparams)
	}
	return id, rawDefs(t, bc, ncols)
}

// rawDefs reads n definitions and the EOF after them (a classic client).
func rawDefs(t *testing.T, bc *wire.BackendConn, n int) [][]byte {
	t.Helper()
	var defs [][]byte
	for range n {
		p, err := bc.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, append([]byte(nil), p...))
	}
	if n > 0 {
		if p, err := bc.ReadPacket(); err != nil || p[0] != 0xfe {
			t.Fatalf("after definitions: % x %v", p, err)
		}
	}
	return defs
}

// rawExecute executes statement id (no parameters) and returns the
// column definitions of its result; its rows follow.
func rawExecute(t *testing.T, bc *wire.BackendConn, id uint32) [][]byte {
	t.Helper()
	cmd := append(wire.AppendStmtCommand(nil, wire.ComStmtExecute, id), 0) // no cursor
	cmd = binary.LittleEndian.AppendUint32(cmd, 1)                         // iteration count
	if err := bc.WriteCommand(cmd); err != nil {
		t.Fatal(err)
	}
	p, err := bc.ReadPacket()
	if err != nil || wire.IsERR(p) {
		t.Fatalf("execute: % x %v", p, err)
	}
	n, _ := lenenc(p)
	return rawDefs(t, bc, int(n))
}

// ownerConn is a raw gateway connection on database ownerDB.
func ownerConn(t *testing.T, addr string) *wire.BackendConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bc.Close() })
	_ = bc.NetConn().SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := bc.SimpleCommand(append([]byte{wire.ComInitDB}, ownerDB...)); err != nil {
		t.Fatal(err)
	}
	return bc
}

// TestOwnerPreparedMetadata: the column definitions of the prepare answer
// are those of the execute's result, byte for byte, and the row is a
// binary row of them (NEXT VALUE: header, NULL bitmap, 8-byte BIGINT).
func TestOwnerPreparedMetadata(t *testing.T) {
	st := startOwnerStack(t, 1)
	bc := ownerConn(t, st.gateways[0])
	id, prepCols := rawPrepare(t, bc, "SELECT NEXT VALUE FROM seq")
	execCols := rawExecute(t, bc, id)
	if !reflect.DeepEqual(prepCols, execCols) || len(execCols) != 1 {
		t.Fatalf("prepare columns % x, execute columns % x", prepCols, execCols)
	}
	row, err := bc.ReadPacket()
	if err != nil || len(row) != 10 || row[0] != 0 || row[1] != 0 || binary.LittleEndian.Uint64(row[2:]) < 1 {
		t.Fatalf("binary row % x (%v)", row, err)
	}
	if end, err := bc.ReadPacket(); err != nil || end[0] != 0xfe {
		t.Fatalf("end of rows % x (%v)", end, err)
	}

	sc := ownerConn(t, st.gateways[0])
	id, prepCols = rawPrepare(t, sc, "STREAM * FROM msgs")
	execCols = rawExecute(t, sc, id)
	if !reflect.DeepEqual(prepCols, execCols) || len(execCols) != 3 {
		t.Fatalf("STREAM: prepare columns % x, execute columns % x", prepCols, execCols)
	}
}

// streamRows reads rows of an endless result in the background.
func streamRows(rows *sql.Rows, into func(*sql.Rows) error) <-chan error {
	got := make(chan error, 16)
	go func() {
		for rows.Next() {
			got <- into(rows)
		}
		close(got)
	}()
	return got
}

// TestOwnerPreparedMessages: a prepared STREAM has the text STREAM's
// columns and delivers messages inserted with prepared and with text
// INSERTs, values intact; a prepared ack acks.
func TestOwnerPreparedMessages(t *testing.T) {
	st := startOwnerStack(t, 1)
	text, prep := st.session(t, 0), st.preparedSession(t, 0)
	direct := open(t, shared.directDSN(ownerDB))

	tctx, tcancel := context.WithCancel(context.Background())
	trows, err := text.QueryContext(tctx, "STREAM * FROM msgs")
	if err != nil {
		t.Fatal(err)
	}
	tshape := columnShapes(t, trows)
	tcancel()
	trows.Close()

	subscriber := st.preparedSession(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := subscriber.PrepareContext(ctx, "STREAM * FROM msgs")
	if err != nil {
		t.Fatalf("prepare STREAM: %v", err)
	}
	rows, err := stream.QueryContext(ctx)
	if err != nil {
		t.Fatalf("prepared STREAM: %v", err)
	}
	if pshape := columnShapes(t, rows); !reflect.DeepEqual(tshape, pshape) {
		t.Fatalf("STREAM columns: text %+v, prepared %+v", tshape, pshape)
	}
	type msg struct {
		id   int64
		sent sql.NullInt64
		body sql.NullString
	}
	msgs := make(chan msg, 16)
	got := streamRows(rows, func(r *sql.Rows) error {
		var m msg
		err := r.Scan(&m.id, &m.sent, &m.body)
		msgs <- m
		return err
	})
	receive := func(want msg) {
		t.Helper()
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("stream row: %v", err)
			}
			if m := <-msgs; m != want {
				t.Fatalf("streamed %+v, want %+v", m, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d not delivered", want.id)
		}
	}

	body := "héllo 'quoted' \\ back\x00slash"
	now := time.Now().UnixNano()
	if _, err := prep.Exec("INSERT INTO msgs (id, sent_ns, body) VALUES (?, ?, ?)", 1, now, body); err != nil {
		t.Fatalf("prepared message insert: %v", err)
	}
	receive(msg{1, sql.NullInt64{Int64: now, Valid: true}, sql.NullString{String: body, Valid: true}})
	mustExec(t, text, "INSERT INTO msgs (id, body) VALUES (2, 'by text')")
	receive(msg{2, sql.NullInt64{}, sql.NullString{String: "by text", Valid: true}})

	res, err := prep.Exec("UPDATE msgs SET time_acked = ?, time_next = NULL WHERE id IN (?)", time.Now().UnixNano(), 1)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("prepared ack: %d rows (%v)", n, err)
	}
	res, err = text.Exec(fmt.Sprintf("UPDATE msgs SET time_acked = %d, time_next = NULL WHERE id IN (2)", time.Now().UnixNano()))
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("text ack: %d rows (%v)", n, err)
	}
	var acked int
	if err := direct.QueryRow("SELECT COUNT(*) FROM msgs WHERE time_acked IS NOT NULL").Scan(&acked); err != nil || acked != 2 {
		t.Fatalf("acked messages: %d (%v)", acked, err)
	}
	// Errors of the message table's own columns are MariaDB's, unchanged.
	_, terr := text.Exec("INSERT INTO msgs (id, nosuch) VALUES (3, 1)")
	_, perr := prep.Exec("INSERT INTO msgs (id, nosuch) VALUES (?, ?)", 3, 1)
	sameError(t, "unknown column", terr, perr, 1054, "42S22")
	_, terr = text.Exec("INSERT INTO msgs (id) VALUES (1)")
	_, perr = prep.Exec("INSERT INTO msgs (id) VALUES (?)", 1)
	sameError(t, "duplicate message", terr, perr, 1062, "23000")
	cancel()
	rows.Close()
	for deadline := time.Now().Add(5 * time.Second); st.ownerInUse() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("owner connections in use after the stream ended: %d", st.ownerInUse())
		}
	}
}
