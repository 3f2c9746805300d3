package wire

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"testing"
)

// typedColDef is a column definition of the given type and flags.
func typedColDef(name string, typ byte, flags uint16) []byte {
	return AppendColumnDef(nil, Column{Name: name, Charset: BinaryCollation, Type: typ, Flags: flags})
}

// textRowNulls is textRow where a nil value is NULL.
func textRowNulls(vals ...[]byte) []byte { return AppendTextRow(nil, vals) }

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestAppendBinaryValue: each column type's text value becomes the bytes
// MariaDB sends for it in a binary row.
func TestAppendBinaryValue(t *testing.T) {
	cases := []struct {
		typ      byte
		unsigned bool
		text     string
		want     []byte
	}{
		{TypeTiny, false, "-1", []byte{0xff}},
		{TypeTiny, true, "255", []byte{0xff}},
		{TypeShort, false, "-2", le16(0xfffe)},
		{TypeYear, true, "2024", le16(2024)},
		{TypeLong, false, "2147483647", le32(math.MaxInt32)},
		{TypeInt24, true, "16777215", le32(16777215)},
		{TypeLongLong, false, "-9223372036854775808", le64(1 << 63)},
		{TypeLongLong, true, "18446744073709551615", le64(math.MaxUint64)},
		{TypeFloat, false, "1.5", le32(math.Float32bits(1.5))},
		{TypeDouble, false, "-2.25e-10", le64(math.Float64bits(-2.25e-10))},
		{TypeDate, false, "2024-02-29", cat([]byte{4}, le16(2024), []byte{2, 29})},
		{TypeDate, false, "0000-00-00", []byte{0}},
		{TypeDatetime, false, "2024-02-29 13:14:15", cat([]byte{7}, le16(2024), []byte{2, 29, 13, 14, 15})},
		{TypeTimestamp, false, "2024-02-29 13:14:15.000120", cat([]byte{11}, le16(2024), []byte{2, 29, 13, 14, 15}, le32(120))},
		{TypeDatetime, false, "2024-02-29 00:00:00.5", cat([]byte{11}, le16(2024), []byte{2, 29, 0, 0, 0}, le32(500000))},
		{TypeDatetime, false, "0000-00-00 00:00:00", []byte{0}},
		{TypeTime, false, "00:00:00", []byte{0}},
		{TypeTime, false, "-838:59:59", cat([]byte{8, 1}, le32(34), []byte{22, 59, 59})},
		{TypeTime, false, "12:34:56.000001", cat([]byte{12, 0}, le32(0), []byte{12, 34, 56}, le32(1))},
		{TypeNewDecimal, false, "12.50", []byte{5, '1', '2', '.', '5', '0'}},
		{TypeVarString, false, "héllo", append([]byte{6}, "héllo"...)},
		{TypeBlob, false, "", []byte{0}},
		{TypeJSON, false, `{"a":1}`, append([]byte{7}, `{"a":1}`...)},
	}
	for _, c := range cases {
		got, err := appendBinaryValue(nil, colType{typ: c.typ, unsigned: c.unsigned}, []byte(c.text))
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("type 0x%02x %q: % x (%v), want % x", c.typ, c.text, got, err, c.want)
		}
	}
}

// TestAppendBinaryValueRejects: text a column of that type cannot hold
// is an error, not a wrong value.
func TestAppendBinaryValueRejects(t *testing.T) {
	cases := []struct {
		typ      byte
		unsigned bool
		text     string
	}{
		{TypeTiny, false, "128"},
		{TypeTiny, true, "-1"},
		{TypeInt24, false, "8388608"},
		{TypeLongLong, false, "1.5"},
		{TypeDouble, false, "abc"},
		{TypeDate, false, "2024-2-29"},
		{TypeDatetime, false, "2024-02-29T13:14:15"},
		{TypeDatetime, false, "2024-02-29 24:00:00"},
		{TypeDatetime, false, "2024-02-29 13:14:15.1234567"},
		{TypeTime, false, "1:00:00"},
		{TypeTime, false, "10:60:00"},
	}
	for _, c := range cases {
		if got, err := appendBinaryValue(nil, colType{typ: c.typ, unsigned: c.unsigned}, []byte(c.text)); err == nil {
			t.Errorf("type 0x%02x %q: % x, want an error", c.typ, c.text, got)
		}
	}
}

// TestAppendBinaryRow: the header, the NULL bitmap at offset 2 and the
// values of non-NULL columns only.
func TestAppendBinaryRow(t *testing.T) {
	cols := []colType{{typ: TypeLongLong}, {typ: TypeVarString}, {typ: TypeLong}, {typ: TypeVarString}, {typ: TypeVarString}, {typ: TypeVarString}, {typ: TypeTiny}}
	text := textRowNulls([]byte("7"), nil, []byte("-1"), []byte("x"), nil, nil, nil)
	got, err := appendBinaryRow(nil, text, cols)
	if err != nil {
		t.Fatal(err)
	}
	// Columns 1, 4, 5, 6 are NULL: bits 3, 6, 7 of byte 0 and bit 0 of byte 1.
	want := cat([]byte{0, 0xc8, 0x01}, le64(7), le32(0xffffffff), []byte{1, 'x'})
	if !bytes.Equal(got, want) {
		t.Fatalf("% x, want % x", got, want)
	}
	if _, err := appendBinaryRow(nil, text[:len(text)-1], cols); err == nil {
		t.Fatal("a row with a value missing converted")
	}
	if _, err := appendBinaryRow(nil, append(text, 0xfb), cols); err == nil {
		t.Fatal("a row with a value too many converted")
	}
}

// TestParseColType reads the type and the unsigned flag of a definition.
func TestParseColType(t *testing.T) {
	c, ok := parseColType(typedColDef("n", TypeLongLong, FlagNotNull|FlagUnsigned))
	if !ok || c != (colType{typ: TypeLongLong, unsigned: true}) {
		t.Fatalf("%+v %v", c, ok)
	}
	if _, ok := parseColType(colDef("a")[:10]); ok {
		t.Fatal("a truncated definition parsed")
	}
}

// TestRelayBinaryRows: with BinaryRows, a text result set reaches the
// client with its definitions unchanged and its rows in the binary
// format, for classic and CLIENT_DEPRECATE_EOF clients; rows that do
// not fit the read buffer, or an ERR after rows, pass too.
func TestRelayBinaryRows(t *testing.T) {
	big := bytes.Repeat([]byte("m"), 10000)
	defs := [][]byte{typedColDef("id", TypeLongLong, FlagNotNull), typedColDef("body", TypeBlob, 0)}
	in := packets(1, []byte{2}, defs[0], defs[1], eofPkt(0, 2),
		textRowNulls([]byte("5"), []byte("hi")), textRowNulls([]byte("6"), nil), textRowNulls([]byte("7"), big), eofPkt(0, 2))
	for _, caps := range []uint32{CapProtocol41, CapProtocol41 | CapDeprecateEOF} {
		out, res, err := runRelay(&Relay{ClientCaps: caps, BinaryRows: true}, in, 4096)
		if err != nil || res.Rows != 3 {
			t.Fatalf("caps %x: %v, rows %d", caps, err, res.Rows)
		}
		seqs, got := splitPackets(t, out)
		want := [][]byte{{2}, defs[0], defs[1]}
		if caps&CapDeprecateEOF == 0 {
			want = append(want, eofPkt(0, 2))
		}
		want = append(want,
			cat([]byte{0, 0}, le64(5), []byte{2, 'h', 'i'}),
			cat([]byte{0, 0x08}, le64(6)),
			cat([]byte{0, 0}, le64(7), appendLenEnc(nil, uint64(len(big))), big))
		if caps&CapDeprecateEOF == 0 {
			want = append(want, eofPkt(0, 2))
		} else {
			want = append(want, []byte{0xfe, 0, 0, 2, 0, 0, 0})
		}
		if len(got) != len(want) {
			t.Fatalf("caps %x: %d packets, want %d", caps, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) || seqs[i] != byte(i+1) {
				t.Fatalf("caps %x: packet %d (seq %d): % x, want % x", caps, i, seqs[i], got[i], want[i])
			}
		}
	}

	// A row the column types cannot hold is the backend's fault.
	bad := packets(1, []byte{1}, defs[0], eofPkt(0, 2), textRow("x"), eofPkt(0, 2))
	var be *BackendError
	if _, _, err := runRelay(&Relay{ClientCaps: CapProtocol41, BinaryRows: true}, bad, 4096); !asBackend(err, &be) {
		t.Fatalf("a row that does not match its columns: %v, want a backend error", err)
	}
}

// TestParseExecuteParams reads types, NULLs, fixed and length-encoded
// values, the types of the previous execute, and long data.
func TestParseExecuteParams(t *testing.T) {
	p := []byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0}
	p = append(p, 0x02) // null bitmap: parameter 1
	p = append(p, 1)    // new params bound
	types := []byte{TypeLongLong, 0x80, TypeVarString, 0, TypeDatetime, 0, TypeTiny, 0, TypeBlob, 0}
	p = append(p, types...)
	p = append(p, le64(42)...)
	p = append(p, 7, 0xe8, 0x07, 1, 2, 3, 4, 5)
	p = append(p, 0xff)
	// parameter 4 comes as long data
	long := func(i int) ([]byte, bool) {
		if i == 4 {
			return []byte("long"), true
		}
		return nil, false
	}
	got, err := ParseExecuteParams(p, 5, nil, long)
	if err != nil {
		t.Fatal(err)
	}
	want := []Param{
		{Type: TypeLongLong, Unsigned: true, Value: le64(42)},
		{Type: TypeVarString, Null: true},
		{Type: TypeDatetime, Value: []byte{0xe8, 0x07, 1, 2, 3, 4, 5}},
		{Type: TypeTiny, Value: []byte{0xff}},
		{Type: TypeBlob, Value: []byte("long"), LongData: true},
	}
	for i := range want {
		if got[i].Type != want[i].Type || got[i].Unsigned != want[i].Unsigned || got[i].Null != want[i].Null ||
			got[i].LongData != want[i].LongData || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Errorf("param %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	tm, ok := ParseBinaryTime(TypeDatetime, got[2].Value)
	if !ok || tm.Year != 2024 || tm.Month != 1 || tm.Second != 5 {
		t.Errorf("datetime %+v %v", tm, ok)
	}
	// Without types in the packet, the statement's last are used.
	q := []byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}
	q = append(q, 3, 'a', 'b', 'c')
	got, err = ParseExecuteParams(q, 1, []byte{TypeString, 0}, long)
	if err != nil || string(got[0].Value) != "abc" {
		t.Fatalf("%+v %v", got, err)
	}
	// Too short: every cut of a good packet is refused or parsed, never
	// read past its end.
	for i := range p {
		if _, err := ParseExecuteParams(p[:i], 5, nil, long); err == nil && i < len(p)-1 {
			t.Errorf("packet cut at %d parsed", i)
		}
	}
	if _, err := ParseExecuteParams(q, 1, nil, long); err == nil {
		t.Fatal("no types anywhere: parsed")
	}
}

// FuzzParseExecuteParams: arbitrary packets never panic, and what parses
// has a value for every non-NULL parameter within the packet.
func FuzzParseExecuteParams(f *testing.F) {
	f.Add([]byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, TypeLongLong, 0, 1, 2, 3, 4, 5, 6, 7, 8}, uint8(1), false)
	f.Add([]byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, TypeTime, 0, TypeString, 0, 8, 0, 1, 0, 0, 0, 1, 2, 3, 1, 'x'}, uint8(2), true)
	f.Add([]byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, TypeVarString, 0, 0xfc, 0xff}, uint8(1), false)
	f.Fuzz(func(t *testing.T, p []byte, n uint8, longFirst bool) {
		long := func(i int) ([]byte, bool) { return []byte("L"), longFirst && i == 0 }
		params, err := ParseExecuteParams(p, int(n), []byte{TypeLong, 0}, long)
		if err != nil {
			return
		}
		if len(params) != int(n) {
			t.Fatalf("%d params of %d", len(params), n)
		}
		for i, pr := range params {
			if w := fixedWidth(pr.Type); w > 0 && !pr.Null && !(longFirst && i == 0) && len(pr.Value) != w {
				t.Fatalf("param %d of type %d: %d bytes", i, pr.Type, len(pr.Value))
			}
		}
	})
}

// FuzzAppendBinaryRow: arbitrary text rows and column types never panic,
// and a converted row is a well-formed binary row of those columns.
func FuzzAppendBinaryRow(f *testing.F) {
	f.Add(textRow("1", "2024-01-02 03:04:05.5", "-12:00:00", "x"), []byte{TypeLongLong, TypeDatetime, TypeTime, TypeVarString}, uint8(0))
	f.Add(textRowNulls(nil, []byte("1.5")), []byte{TypeTiny, TypeFloat}, uint8(1))
	f.Fuzz(func(t *testing.T, text, types []byte, unsigned uint8) {
		if len(types) > 64 {
			return
		}
		cols := make([]colType, len(types))
		for i, typ := range types {
			cols[i] = colType{typ: typ, unsigned: unsigned&(1<<(i%8)) != 0}
		}
		row, err := appendBinaryRow(nil, text, cols)
		if err != nil {
			return
		}
		if n := binaryRowLen(t, row, cols); n != len(row) {
			t.Fatalf("binary row of %d bytes holds %d", len(row), n)
		}
	})
}

// binaryRowLen walks a binary row by its column types and returns the
// bytes it spans.
func binaryRowLen(t *testing.T, row []byte, cols []colType) int {
	t.Helper()
	if len(row) == 0 || row[0] != 0 {
		t.Fatalf("row header % x", row)
	}
	off := 1 + (len(cols)+9)/8
	for i, c := range cols {
		if row[1+(i+2)/8]&(1<<((i+2)%8)) != 0 {
			continue
		}
		v, size, ok := paramValue(c.typ, row[off:])
		if !ok {
			t.Fatalf("column %d (type %d) cut short", i, c.typ)
		}
		if c.typ == TypeDate || c.typ == TypeDatetime || c.typ == TypeTimestamp || c.typ == TypeTime {
			if _, ok := ParseBinaryTime(c.typ, v); !ok {
				t.Fatalf("column %d: temporal value of %d bytes", i, len(v))
			}
		}
		off += size
	}
	return off
}

// FuzzRelayBinaryRows is FuzzRelay with BinaryRows: arbitrary backend
// bytes end the run (a result or an error), never panic, and never make
// more packets than they hold.
func FuzzRelayBinaryRows(f *testing.F) {
	defs := [][]byte{typedColDef("id", TypeLongLong, 0), typedColDef("at", TypeDatetime, 0)}
	f.Add(packets(1, []byte{2}, defs[0], defs[1], eofPkt(0, 2), textRow("1", "2024-01-02 03:04:05"), eofPkt(0, 2)), false)
	f.Add(packets(1, []byte{1}, defs[0], eofPkt(0, 2), textRowNulls(nil), AppendERR(nil, NewError(1053, "08S01", "shutdown"))), true)
	f.Add(packets(1, AppendOK(nil, OK{AffectedRows: 1, LastInsertID: 9})), false)
	f.Fuzz(func(t *testing.T, in []byte, deprecate bool) {
		caps := CapProtocol41
		if deprecate {
			caps |= CapDeprecateEOF
		}
		_, res, _ := runRelay(&Relay{ClientCaps: caps, BinaryRows: true}, in, 128)
		if res.Packets > len(in)/4+2 {
			t.Fatalf("wrote %d packets from %d bytes", res.Packets, len(in))
		}
	})
}

// runRelay relays one answer to a COM_QUERY or COM_STMT_EXECUTE from
// the backend bytes in (read through a buffer of bufSize) with r, and
// returns what the client got.
func runRelay(r *Relay, in []byte, bufSize int) ([]byte, Result, error) {
	var toClient bytes.Buffer
	client := NewConn(&memConn{r: bytes.NewReader(nil), w: &toClient}, 4096, 4096)
	backend := NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, bufSize, 4096)
	client.SetSeq(1)
	backend.SetSeq(1)
	res, err := r.Run(client, backend, ResponseQuery)
	return toClient.Bytes(), res, err
}
