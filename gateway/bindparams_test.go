package gateway

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

func le(v uint64, n int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, v)
	return b[:n]
}

// TestParamLiterals: each binary-protocol parameter is written as the
// literal of the value MariaDB binds for it.
func TestParamLiterals(t *testing.T) {
	cases := []struct {
		name string
		lf   literalFormat
		prm  wire.Param
		want string
	}{
		{"null", literalFormat{}, wire.Param{Type: wire.TypeLongLong, Null: true}, "NULL"},
		{"tiny -1", literalFormat{}, wire.Param{Type: wire.TypeTiny, Value: []byte{0xff}}, "-1"},
		{"tiny unsigned 255", literalFormat{}, wire.Param{Type: wire.TypeTiny, Unsigned: true, Value: []byte{0xff}}, "255"},
		{"short", literalFormat{}, wire.Param{Type: wire.TypeShort, Value: le(0x8000, 2)}, "-32768"},
		{"long", literalFormat{}, wire.Param{Type: wire.TypeLong, Value: le(123456, 4)}, "123456"},
		{"longlong min", literalFormat{}, wire.Param{Type: wire.TypeLongLong, Value: le(1<<63, 8)}, "-9223372036854775808"},
		{"longlong unsigned max", literalFormat{}, wire.Param{Type: wire.TypeLongLong, Unsigned: true, Value: le(math.MaxUint64, 8)}, "18446744073709551615"},
		{"float", literalFormat{}, wire.Param{Type: wire.TypeFloat, Value: le(uint64(math.Float32bits(0.1)), 4)}, "1.0000000149011612e-01"},
		{"double", literalFormat{}, wire.Param{Type: wire.TypeDouble, Value: le(math.Float64bits(2.5), 8)}, "2.5e+00"},
		{"decimal", literalFormat{}, wire.Param{Type: wire.TypeNewDecimal, Value: []byte("-12.50")}, "-12.50"},
		{"decimal odd", literalFormat{}, wire.Param{Type: wire.TypeNewDecimal, Value: []byte("1e3")}, "'1e3'"},
		{"date", literalFormat{}, wire.Param{Type: wire.TypeDate, Value: []byte{0xe8, 0x07, 2, 29}}, "DATE'2024-02-29'"},
		{"zero date", literalFormat{}, wire.Param{Type: wire.TypeDate, Value: nil}, "DATE'0000-00-00'"},
		{"datetime", literalFormat{}, wire.Param{Type: wire.TypeDatetime, Value: []byte{0xe8, 0x07, 2, 29, 13, 14, 15}}, "TIMESTAMP'2024-02-29 13:14:15'"},
		{"timestamp micro", literalFormat{}, wire.Param{Type: wire.TypeTimestamp, Value: append([]byte{0xe8, 0x07, 2, 29, 13, 14, 15}, le(120, 4)...)}, "TIMESTAMP'2024-02-29 13:14:15.000120'"},
		{"time", literalFormat{}, wire.Param{Type: wire.TypeTime, Value: append([]byte{1}, append(le(34, 4), 22, 59, 59)...)}, "TIME'-838:59:59'"},
		{"blob", literalFormat{}, wire.Param{Type: wire.TypeBlob, Value: []byte{0, '\'', 0xff}}, "X'0027ff'"},
		{"empty blob", literalFormat{}, wire.Param{Type: wire.TypeBlob}, "X''"},
		{"string", literalFormat{}, wire.Param{Type: wire.TypeString, Value: []byte("it's a \\ and \x00")}, `'it''s a \\ and \0'`},
		{"string no backslash", literalFormat{noBackslash: true}, wire.Param{Type: wire.TypeVarString, Value: []byte("it's a \\")}, `'it''s a \'`},
		{"string utf8", literalFormat{}, wire.Param{Type: wire.TypeVarString, Value: []byte("héllo ✓")}, "'héllo ✓'"},
		// 0x95 0x5c is one sjis character: escaping its second byte
		// would break it.
		{"sjis", literalFormat{charset: "sjis"}, wire.Param{Type: wire.TypeVarString, Value: []byte{0x95, 0x5c, '\''}}, "_sjis X'955c27'"},
		{"sjis plain", literalFormat{charset: "sjis"}, wire.Param{Type: wire.TypeVarString, Value: []byte("a\\b")}, `'a\\b'`},
		{"long data", literalFormat{}, wire.Param{Type: wire.TypeLong, LongData: true, Value: []byte("12")}, "'12'"},
		{"long data blob", literalFormat{}, wire.Param{Type: wire.TypeLongBlob, LongData: true, Value: []byte("ab")}, "X'6162'"},
		{"count as string", literalFormat{numericStrings: true}, wire.Param{Type: wire.TypeVarString, Value: []byte("5")}, "5"},
		{"string not a count", literalFormat{numericStrings: true}, wire.Param{Type: wire.TypeVarString, Value: []byte("5x")}, "'5x'"},
	}
	for _, c := range cases {
		got, err := c.lf.literal(c.prm)
		if err != nil || got != c.want {
			t.Errorf("%s: %q (%v), want %q", c.name, got, err, c.want)
		}
	}
	if _, err := (literalFormat{}).literal(wire.Param{Type: wire.TypeDouble, Value: le(math.Float64bits(math.NaN()), 8)}); err == nil || err.Code != erIllegalValue {
		t.Errorf("NaN: %v, want error %d", err, erIllegalValue)
	}
	if _, err := (literalFormat{}).literal(wire.Param{Type: wire.TypeDate, Value: []byte{1, 2}}); err == nil {
		t.Error("a date of 2 bytes was written")
	}
}

// TestBindStmt: a whole execute packet, with types remembered from an
// earlier execute and long data, binds into the statement text; a
// statement whose placeholders do not match its parameters is 1210.
func TestBindStmt(t *testing.T) {
	ss := &Session{}
	st := &stmt{sql: "INSERT INTO msgs (id, body, note) VALUES (?, ?, ?)", params: 3,
		types:    []byte{wire.TypeLongLong, 0, wire.TypeVarString, 0, wire.TypeBlob, 0},
		longData: []longData{{param: 2, data: []byte("lo")}, {param: 2, data: []byte("ng")}}}
	p := []byte{wire.ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0x02, 0}
	p = append(p, le(7, 8)...)
	got, sqlErr := ss.bindStmt(st, p)
	if want := "INSERT INTO msgs (id, body, note) VALUES (7, NULL, X'6c6f6e67')"; sqlErr != nil || got != want {
		t.Fatalf("%q (%v), want %q", got, sqlErr, want)
	}
	st.sql = "INSERT INTO msgs (id) VALUES (?)"
	if _, sqlErr := ss.bindStmt(st, p); sqlErr == nil || sqlErr.Code != 1210 {
		t.Fatalf("3 parameters, 1 placeholder: %v, want 1210", sqlErr)
	}
	if _, sqlErr := ss.bindStmt(st, p[:11]); sqlErr == nil || sqlErr.Code != 1835 {
		t.Fatalf("cut packet: %v, want 1835", sqlErr)
	}
	// n of NEXT n VALUES as a string parameter.
	seq := &stmt{sql: "SELECT NEXT ? VALUES FROM seq", params: 1, route: querypath.Route{Kind: querypath.KindSequence}}
	q := []byte{wire.ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, wire.TypeString, 0, 1, '5'}
	if got, sqlErr := ss.bindStmt(seq, q); sqlErr != nil || got != "SELECT NEXT 5 VALUES FROM seq" {
		t.Fatalf("%q (%v)", got, sqlErr)
	}
}

// TestBackslashCharset: the session's character set counts only when its
// multibyte characters may hold a backslash byte.
func TestBackslashCharset(t *testing.T) {
	for _, c := range []struct {
		vars      map[string]string
		collation byte
		pending   bool
		want      string
	}{
		{nil, 45, false, ""},
		{map[string]string{"names": "utf8mb4 COLLATE utf8mb4_unicode_ci"}, 45, false, ""},
		{map[string]string{"names": "'gbk'"}, 45, false, "gbk"},
		{map[string]string{"names": "gbk", "character_set_client": "'utf8mb4'"}, 45, false, ""},
		{map[string]string{"character set": "BIG5"}, 45, false, "big5"},
		{nil, 13, true, "sjis"},
		{nil, 8, true, ""},
	} {
		ss := &Session{}
		ss.vars, ss.collation, ss.namesPending = c.vars, c.collation, c.pending
		if got := ss.backslashCharset(); got != c.want {
			t.Errorf("%v, collation %d: %q, want %q", c.vars, c.collation, got, c.want)
		}
	}
}
