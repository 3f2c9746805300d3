package wire

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
)

// The column the relay tests build by hand (colDef in relay_test.go).
var handColumn = Column{Schema: "db", Table: "t", Name: "a", Charset: 33, Length: 255, Type: TypeVarString}

func TestAppendColumnDefMatchesHandBuilt(t *testing.T) {
	if got, want := AppendColumnDef(nil, handColumn), colDef("a"); !bytes.Equal(got, want) {
		t.Fatalf("AppendColumnDef\n got %x\nwant %x", got, want)
	}
}

func TestColumnDefRoundTrip(t *testing.T) {
	for _, c := range []Column{
		handColumn,
		{Name: "nextval", Charset: BinaryCollation, Length: 20, Type: TypeLongLong, Flags: FlagNotNull | FlagBinary | FlagNum},
		{Schema: "s", Table: "alias", OrgTable: "real", Name: "x", OrgName: "col", Charset: 45, Length: 1 << 31, Type: TypeBlob, Flags: FlagBlob, Decimals: 0x1f},
		{Schema: strings.Repeat("s", 300), Table: "t", Name: "n", Type: TypeNewDecimal, Decimals: 4},
	} {
		got, err := ParseColumnDef(AppendColumnDef(nil, c))
		if err != nil {
			t.Fatal(err)
		}
		if got != c {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, c)
		}
	}
	if _, err := ParseColumnDef([]byte{3, 'd', 'e'}); err == nil {
		t.Fatal("truncated definition parsed")
	}
	if _, err := ParseColumnDef(AppendColumnDef(nil, handColumn)[:20]); err == nil {
		t.Fatal("definition without its fixed fields parsed")
	}
}

func TestAppendTextRow(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 300)
	got := AppendTextRow(nil, [][]byte{[]byte("1"), nil, {}, long})
	want := append([]byte{1, '1', 0xfb, 0, 0xfc, 0x2c, 0x01}, long...)
	if !bytes.Equal(got, want) {
		t.Fatalf("row\n got %x\nwant %x", got, want)
	}
}

func TestAppendTextRowDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 256)
	row := [][]byte{[]byte("12345"), nil, []byte("hello")}
	if n := testing.AllocsPerRun(100, func() { buf = AppendTextRow(buf[:0], row) }); n != 0 {
		t.Fatalf("AppendTextRow allocated %v times", n)
	}
	c := Column{Schema: "db", Table: "t", Name: "id", Type: TypeLongLong}
	if n := testing.AllocsPerRun(100, func() { buf = AppendColumnDef(buf[:0], c) }); n != 0 {
		t.Fatalf("AppendColumnDef allocated %v times", n)
	}
}

var testCols = []Column{
	{Schema: "db", Table: "t", Name: "id", Charset: BinaryCollation, Length: 20, Type: TypeLongLong, Flags: FlagNotNull | FlagPriKey | FlagNum},
	{Schema: "db", Table: "t", Name: "msg", Charset: 45, Length: 1020, Type: TypeVarString},
}

var testRows = [][][]byte{
	{[]byte("1"), []byte("hello")},
	{[]byte("2"), nil},
	{[]byte("3"), bytes.Repeat([]byte("y"), 70000)},
}

// writeResult builds a whole result set with a ResultWriter, as a server
// answering a command (sequence ids from 1).
func writeResult(t *testing.T, caps uint32) []byte {
	t.Helper()
	var out bytes.Buffer
	c := NewConn(&memConn{r: strings.NewReader(""), w: &out}, 4096, 4096)
	c.SetSeq(1)
	w := &ResultWriter{Conn: c, Caps: caps, Status: StatusAutocommit}
	if err := w.Columns(testCols); err != nil {
		t.Fatal(err)
	}
	for _, r := range testRows {
		if err := w.Row(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(2); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestResultWriterPassesRelay(t *testing.T) {
	classic := writeResult(t, CapProtocol41)
	out, res, _, err := relayOnce(t, CapProtocol41, ResponseQuery, classic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, classic) {
		t.Fatal("a classic client must get the result unchanged through the relay")
	}
	if !res.HadResultSet || res.Warnings != 2 || res.Status != StatusAutocommit || res.Err != nil {
		t.Fatalf("relay result %+v", res)
	}
	// Relayed to a CLIENT_DEPRECATE_EOF client, the result must be what
	// the writer produces for such a client directly.
	out, res, _, err = relayOnce(t, CapProtocol41|CapDeprecateEOF, ResponseQuery, classic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := writeResult(t, CapProtocol41|CapDeprecateEOF); !bytes.Equal(out, want) {
		t.Fatal("relay conversion and ResultWriter disagree on the CLIENT_DEPRECATE_EOF form")
	}
	if res.Warnings != 2 || res.Status != StatusAutocommit {
		t.Fatalf("relay result %+v", res)
	}
}

func TestResultWriterReadByClient(t *testing.T) {
	resp := writeResult(t, CapProtocol41)
	bc := &BackendConn{Conn: NewConn(&memConn{r: bytes.NewReader(resp), w: io.Discard}, 4096, 4096)}
	var got [][][]byte
	err := bc.QueryRows("SELECT id, msg FROM t", func(row [][]byte) {
		cp := make([][]byte, len(row))
		for i, v := range row {
			if v != nil {
				cp[i] = append([]byte{}, v...)
			}
		}
		got = append(got, cp)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, testRows) {
		t.Fatalf("client read %d rows, not the ones written", len(got))
	}
	// The definitions parse back to the columns written.
	_, payloads := splitPackets(t, resp)
	for i, c := range testCols {
		got, err := ParseColumnDef(payloads[1+i])
		if err != nil || got != c {
			t.Fatalf("column %d: %+v, %v", i, got, err)
		}
	}
}

func BenchmarkResultWriterOneRow(b *testing.B) {
	c := NewConn(&memConn{w: io.Discard}, 4096, 4096)
	w := &ResultWriter{Conn: c, Status: StatusAutocommit}
	cols := testCols[:1]
	row := [][]byte{[]byte("123456789")}
	b.ReportAllocs()
	for b.Loop() {
		c.SetSeq(1)
		_ = w.Columns(cols)
		_ = w.Row(row)
		_ = w.End(0)
		_ = c.Flush()
	}
}

// writePrepareOK is what ResultWriter.PrepareOK writes for a client with
// caps.
func writePrepareOK(t *testing.T, caps uint32, params uint16, cols []Column) []byte {
	t.Helper()
	var out bytes.Buffer
	c := NewConn(&memConn{r: strings.NewReader(""), w: &out}, 4096, 4096)
	c.SetSeq(1)
	w := &ResultWriter{Conn: c, Caps: caps, Status: StatusAutocommit}
	if err := w.PrepareOK(7, params, cols); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestPrepareOK: parameter definitions are MariaDB's own bytes (read
// from MariaDB 10.11 for SELECT ?), and the relay reads the answer as a
// COM_STMT_PREPARE answer, converting it for CLIENT_DEPRECATE_EOF clients
// to what the writer makes for them.
func TestPrepareOK(t *testing.T) {
	mariadbParam := []byte{0x03, 'd', 'e', 'f', 0, 0, 0, 1, '?', 0, 0x0c, 0x3f, 0, 0, 0, 0, 0, 0x06, 0x80, 0, 0, 0, 0}
	if got := AppendColumnDef(nil, ParamColumn()); !bytes.Equal(got, mariadbParam) {
		t.Fatalf("parameter definition % x, want % x", got, mariadbParam)
	}
	for _, tc := range []struct {
		params uint16
		cols   []Column
	}{{0, nil}, {2, nil}, {0, testCols}, {1, testCols}} {
		classic := writePrepareOK(t, CapProtocol41, tc.params, tc.cols)
		_, payloads := splitPackets(t, classic)
		if want := 1 + int(tc.params) + len(tc.cols) + min(int(tc.params), 1) + min(len(tc.cols), 1); len(payloads) != want {
			t.Fatalf("%d params, %d columns: %d packets, want %d", tc.params, len(tc.cols), len(payloads), want)
		}
		out, res, _, err := relayOnce(t, CapProtocol41|CapDeprecateEOF, ResponsePrepare, classic, nil)
		if err != nil || res.StmtID != 7 || res.Params != tc.params || int(res.Columns) != len(tc.cols) {
			t.Fatalf("relayed: %+v %v", res, err)
		}
		if want := writePrepareOK(t, CapProtocol41|CapDeprecateEOF, tc.params, tc.cols); !bytes.Equal(out, want) {
			t.Fatalf("%d params, %d columns: relay and writer disagree on the CLIENT_DEPRECATE_EOF form", tc.params, len(tc.cols))
		}
	}
}
