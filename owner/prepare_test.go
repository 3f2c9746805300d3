package owner

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
)

// describePrepared sends COM_STMT_PREPARE of q and reads the answer: the
// parameter count and the column definitions, or the error.
func describePrepared(t *testing.T, bc *wire.BackendConn, q string) (params int, cols []wire.Column, sqlErr *wire.SQLError) {
	t.Helper()
	if err := bc.WriteCommand(append([]byte{wire.ComStmtPrepare}, q...)); err != nil {
		t.Fatal(err)
	}
	p, err := bc.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	if wire.IsERR(p) {
		return 0, nil, wire.ParseERR(p)
	}
	if len(p) != 12 || p[0] != 0 {
		t.Fatalf("%s: prepare answer % x", q, p)
	}
	ncols, nparams := int(binary.LittleEndian.Uint16(p[5:])), int(binary.LittleEndian.Uint16(p[7:]))
	read := func(n int) []wire.Column {
		defs := readDefs(t, bc, n)
		if n > 0 {
			if eof, err := bc.ReadPacket(); err != nil || eof[0] != 0xfe {
				t.Fatalf("%s: after definitions % x %v", q, eof, err)
			}
		}
		return defs
	}
	for _, c := range read(nparams) {
		// MariaDB's: no original names (ParseColumnDef has no Computed).
		if want := (wire.Column{Name: "?", Charset: wire.BinaryCollation, Type: wire.TypeNull, Flags: wire.FlagBinary}); c != want {
			t.Fatalf("%s: parameter definition %+v", q, c)
		}
	}
	return nparams, read(ncols), nil
}

// TestOwnerPrepare: COM_STMT_PREPARE describes each statement the owner
// answers (parameters, result columns as its query sends them) and keeps
// nothing; errors are those of the query.
func TestOwnerPrepare(t *testing.T) {
	o := startOwner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc := dialOwner(ctx, t, o)
	useTestDB(t, bc)
	streamCols := func() []wire.Column {
		sc := dialOwner(ctx, t, o)
		useTestDB(t, sc)
		if err := sc.WriteCommand(append([]byte{wire.ComQuery}, "STREAM * FROM msgs"...)); err != nil {
			t.Fatal(err)
		}
		p, err := sc.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		n, _, _ := wire.ReadLenEncInt(p)
		return readDefs(t, sc, int(n))
	}()
	cases := []struct {
		q      string
		params int
		cols   []wire.Column
	}{
		{"SELECT NEXT VALUE FROM seq", 0, []wire.Column{nextvalColumn()}},
		{"select next 5 values from ownertest.seq", 0, []wire.Column{nextvalColumn()}},
		{"SELECT NEXT ? VALUES FROM seq", 1, []wire.Column{nextvalColumn()}},
		{"STREAM * FROM msgs", 0, streamCols},
		{"INSERT INTO msgs (id, body) VALUES (?, ?), (?, 'x')", 3, nil},
		{"UPDATE msgs SET time_acked = ?, time_next = NULL WHERE id IN (?, ?)", 3, nil},
		{"SHOW OWNER TABLES", 0, ownerTablesColumns()},
	}
	for _, c := range cases {
		params, cols, sqlErr := describePrepared(t, bc, c.q)
		if sqlErr != nil || params != c.params || len(cols) != len(c.cols) {
			t.Fatalf("%s: %d params, %d columns (%v); want %d, %d", c.q, params, len(cols), sqlErr, c.params, len(c.cols))
		}
		for i := range cols {
			if cols[i] != c.cols[i] {
				t.Fatalf("%s: column %d %+v, want %+v", c.q, i, cols[i], c.cols[i])
			}
		}
		// Nothing to close, and no answer to COM_STMT_CLOSE.
		if err := bc.WriteCommand(wire.AppendStmtCommand(nil, wire.ComStmtClose, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		q    string
		code uint16
	}{
		{"SELECT NEXT VALUE FROM plain", 1146},
		{"STREAM * FROM seq", 1146},
		{"SELECT NEXT 0 VALUES FROM seq", 1210},
		{"SELECT 1", 1235},
	} {
		if _, _, sqlErr := describePrepared(t, bc, c.q); sqlErr == nil || sqlErr.Code != c.code {
			t.Fatalf("%s: %v, want error %d", c.q, sqlErr, c.code)
		}
	}
	// The connection is in step: a query after all that works, and
	// COM_STMT_EXECUTE is not a command of the owner.
	var v []byte
	if err := bc.QueryRows("SELECT NEXT VALUE FROM seq", func(row [][]byte) { v = append(v, row[0]...) }); err != nil || len(v) == 0 {
		t.Fatalf("NEXT VALUE after prepares: %q %v", v, err)
	}
	_, err := bc.SimpleCommand([]byte{wire.ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0})
	var se *wire.SQLError
	if !errors.As(err, &se) || se.Code != 1047 {
		t.Fatalf("COM_STMT_EXECUTE: %v, want error 1047", err)
	}
}

// useTestDB makes testDB the connection's default database.
func useTestDB(t *testing.T, bc *wire.BackendConn) {
	t.Helper()
	if _, err := bc.SimpleCommand(append([]byte{wire.ComInitDB}, testDB...)); err != nil {
		t.Fatal(err)
	}
}

// readDefs reads n column definitions.
func readDefs(t *testing.T, bc *wire.BackendConn, n int) []wire.Column {
	t.Helper()
	var defs []wire.Column
	for range n {
		d, err := bc.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		c, err := wire.ParseColumnDef(d)
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, c)
	}
	return defs
}

// dialOwner logs in to the owner with package wire's client (as the
// gateway does), until the test ends.
func dialOwner(ctx context.Context, t *testing.T, o *Owner) *wire.BackendConn {
	t.Helper()
	bc, err := wire.Dial(ctx, o.Addr().String(), wire.DialOptions{User: backendUser, Password: backendPass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bc.Close() })
	return bc
}
