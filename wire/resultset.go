package wire

import (
	"encoding/binary"
	"errors"
)

// Column types (MYSQL_TYPE_*), the type byte of a column definition. The
// text protocol sends every value as a string; the type tells the client
// how to read it.
const (
	TypeDecimal    byte = 0x00
	TypeTiny       byte = 0x01
	TypeShort      byte = 0x02
	TypeLong       byte = 0x03
	TypeFloat      byte = 0x04
	TypeDouble     byte = 0x05
	TypeNull       byte = 0x06
	TypeTimestamp  byte = 0x07
	TypeLongLong   byte = 0x08
	TypeInt24      byte = 0x09
	TypeDate       byte = 0x0a
	TypeTime       byte = 0x0b
	TypeDatetime   byte = 0x0c
	TypeYear       byte = 0x0d
	TypeVarchar    byte = 0x0f
	TypeBit        byte = 0x10
	TypeJSON       byte = 0xf5
	TypeNewDecimal byte = 0xf6
	TypeEnum       byte = 0xf7
	TypeSet        byte = 0xf8
	TypeTinyBlob   byte = 0xf9
	TypeMediumBlob byte = 0xfa
	TypeLongBlob   byte = 0xfb
	TypeBlob       byte = 0xfc
	TypeVarString  byte = 0xfd
	TypeString     byte = 0xfe
	TypeGeometry   byte = 0xff
)

// Column definition flags (*_FLAG).
const (
	FlagNotNull       uint16 = 0x0001
	FlagPriKey        uint16 = 0x0002
	FlagUniqueKey     uint16 = 0x0004
	FlagMultipleKey   uint16 = 0x0008
	FlagBlob          uint16 = 0x0010
	FlagUnsigned      uint16 = 0x0020
	FlagZerofill      uint16 = 0x0040
	FlagBinary        uint16 = 0x0080
	FlagEnum          uint16 = 0x0100
	FlagAutoIncrement uint16 = 0x0200
	FlagTimestamp     uint16 = 0x0400
	FlagSet           uint16 = 0x0800
	FlagNoDefault     uint16 = 0x1000
	FlagOnUpdateNow   uint16 = 0x2000
	FlagNum           uint16 = 0x8000
)

// BinaryCollation is the collation id of binary strings, numbers and
// temporal values in column definitions (63, "binary").
const BinaryCollation uint16 = 63

// Column is one column definition of a result set (protocol 4.1 form).
type Column struct {
	// Schema is the database of the column's table; empty for computed
	// columns.
	Schema string
	// Table is the table name or alias; empty for computed columns.
	Table string
	// OrgTable is the table's real name. Empty means Table.
	OrgTable string
	// Name is the column name or alias as the client sees it.
	Name string
	// OrgName is the column's real name. Empty means Name.
	OrgName string
	// Charset is the collation id of the values: BinaryCollation for
	// numbers, temporal values and binary strings. Zero is sent as is.
	Charset uint16
	// Length is the column's maximum display length in bytes.
	Length uint32
	// Type is one of the Type* constants.
	Type byte
	// Flags are Flag* bits.
	Flags uint16
	// Decimals is the number of decimals of numbers and fractional
	// seconds: 0x1f for floating point without a fixed scale.
	Decimals byte
	// Computed sends the original table and column names empty, whatever
	// OrgTable and OrgName say, as MariaDB does for an expression such as
	// SELECT ROW_COUNT().
	Computed bool
}

// AppendColumnCount appends the first packet of a result set: the number
// of columns as a length-encoded integer.
func AppendColumnCount(b []byte, n uint64) []byte { return appendLenEnc(b, n) }

// AppendColumnDef appends the payload of a column definition packet for c.
func AppendColumnDef(b []byte, c Column) []byte {
	orgTable, orgName := c.OrgTable, c.OrgName
	if orgTable == "" {
		orgTable = c.Table
	}
	if orgName == "" {
		orgName = c.Name
	}
	if c.Computed {
		orgTable, orgName = "", ""
	}
	b = appendLenEncString(b, "def")
	b = appendLenEncString(b, c.Schema)
	b = appendLenEncString(b, c.Table)
	b = appendLenEncString(b, orgTable)
	b = appendLenEncString(b, c.Name)
	b = appendLenEncString(b, orgName)
	b = append(b, 0x0c) // length of the fixed-length fields below
	b = binary.LittleEndian.AppendUint16(b, c.Charset)
	b = binary.LittleEndian.AppendUint32(b, c.Length)
	b = append(b, c.Type)
	b = binary.LittleEndian.AppendUint16(b, c.Flags)
	return append(b, c.Decimals, 0, 0)
}

// ParseColumnDef decodes the payload of a column definition packet
// (protocol 4.1). OrgTable and OrgName are left empty when they equal
// Table and Name, so ParseColumnDef(AppendColumnDef(nil, c)) == c for a c
// built that way.
func ParseColumnDef(p []byte) (Column, error) {
	var c Column
	var fields [6]string
	for i := range fields {
		s, n, ok := readLenEncString(p)
		if !ok {
			return c, ErrMalformed
		}
		fields[i], p = string(s), p[n:]
	}
	if fields[0] != "def" {
		return c, errors.New("wire: column definition without catalog \"def\"")
	}
	if len(p) < 13 || p[0] < 0x0c {
		return c, ErrMalformed
	}
	c.Schema, c.Table, c.Name = fields[1], fields[2], fields[4]
	if fields[3] != c.Table {
		c.OrgTable = fields[3]
	}
	if fields[5] != c.Name {
		c.OrgName = fields[5]
	}
	c.Charset = binary.LittleEndian.Uint16(p[1:])
	c.Length = binary.LittleEndian.Uint32(p[3:])
	c.Type = p[7]
	c.Flags = binary.LittleEndian.Uint16(p[8:])
	c.Decimals = p[10]
	return c, nil
}

// nullValue marks a NULL in a text-protocol row.
const nullValue byte = 0xfb

// AppendTextRow appends the payload of a text-protocol row: each value as
// a length-encoded string, a nil value as NULL (an empty non-nil slice is
// the empty string).
func AppendTextRow(b []byte, values [][]byte) []byte {
	for _, v := range values {
		if v == nil {
			b = append(b, nullValue)
			continue
		}
		b = appendLenEnc(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

// AppendResultEnd appends the packet that ends the rows of a result set:
// a classic EOF packet, or for a client with CLIENT_DEPRECATE_EOF in caps
// an OK packet with header 0xfe.
func AppendResultEnd(b []byte, caps uint32, warnings, status uint16) []byte {
	if caps&CapDeprecateEOF != 0 {
		b = append(b, eofHeader, 0, 0)
		return append(b, byte(status), byte(status>>8), byte(warnings), byte(warnings>>8))
	}
	return AppendEOF(b, warnings, status)
}

// ResultWriter writes a text-protocol result set to a connection packet by
// packet, building each packet in one reused buffer, so a result costs no
// allocation once the buffer has grown. Packets are buffered by the Conn:
// call Flush on it to send them (End does not flush, so small results
// leave in one write).
//
// The Conn's sequence id must be the first of the response (one past the
// command's, as after ReadPacket of the command). A result set is
// Columns, any number of Row, then End; Row may be called long after
// Columns (an endless STREAM result is Columns followed by Rows only).
type ResultWriter struct {
	// Conn receives the packets.
	Conn *Conn
	// Caps are the client's negotiated capabilities. With CapDeprecateEOF
	// no EOF follows the column definitions and End writes an OK packet
	// with header 0xfe; without it both are classic EOF packets.
	Caps uint32
	// Status is the server status sent in the EOF packets (for example
	// StatusAutocommit).
	Status uint16
	buf    []byte
}

// Columns writes the column count, one definition per column and, for a
// classic client, the EOF that ends the definitions.
func (w *ResultWriter) Columns(cols []Column) error {
	w.buf = AppendColumnCount(w.buf[:0], uint64(len(cols)))
	if err := w.Conn.WritePacket(w.buf); err != nil {
		return err
	}
	return w.definitions(cols)
}

// ParamColumn is the definition MariaDB sends for each parameter of a
// prepared statement: named "?", binary, of type NULL.
func ParamColumn() Column {
	return Column{Name: "?", Charset: BinaryCollation, Type: TypeNull, Flags: FlagBinary, Computed: true}
}

// PrepareOK writes the answer to a COM_STMT_PREPARE: the OK packet with
// statement id, then a ParamColumn per parameter and the definitions of
// the result columns, each list (when not empty) ended by an EOF for a
// classic client.
func (w *ResultWriter) PrepareOK(id uint32, params uint16, cols []Column) error {
	w.buf = AppendPrepareOK(w.buf[:0], id, uint16(len(cols)), params, 0)
	if err := w.Conn.WritePacket(w.buf); err != nil {
		return err
	}
	if params > 0 {
		defs := make([]Column, params)
		for i := range defs {
			defs[i] = ParamColumn()
		}
		if err := w.definitions(defs); err != nil {
			return err
		}
	}
	if len(cols) == 0 {
		return nil
	}
	return w.definitions(cols)
}

// definitions writes one definition per column and, for a classic
// client, the EOF that ends them.
func (w *ResultWriter) definitions(cols []Column) error {
	for _, c := range cols {
		w.buf = AppendColumnDef(w.buf[:0], c)
		if err := w.Conn.WritePacket(w.buf); err != nil {
			return err
		}
	}
	if w.Caps&CapDeprecateEOF != 0 {
		return nil
	}
	w.buf = AppendEOF(w.buf[:0], 0, w.Status)
	return w.Conn.WritePacket(w.buf)
}

// RawColumns is Columns for definitions that are already packet payloads
// (as a server sent them).
func (w *ResultWriter) RawColumns(defs [][]byte) error {
	w.buf = AppendColumnCount(w.buf[:0], uint64(len(defs)))
	if err := w.Conn.WritePacket(w.buf); err != nil {
		return err
	}
	for _, d := range defs {
		if err := w.Conn.WritePacket(d); err != nil {
			return err
		}
	}
	if w.Caps&CapDeprecateEOF != 0 {
		return nil
	}
	w.buf = AppendEOF(w.buf[:0], 0, w.Status)
	return w.Conn.WritePacket(w.buf)
}

// Row writes one text-protocol row (nil values are NULL).
func (w *ResultWriter) Row(values [][]byte) error {
	w.buf = AppendTextRow(w.buf[:0], values)
	return w.Conn.WritePacket(w.buf)
}

// End writes the packet that ends the rows, with the given warning count
// and w.Status.
func (w *ResultWriter) End(warnings uint16) error {
	w.buf = AppendResultEnd(w.buf[:0], w.Caps, warnings, w.Status)
	return w.Conn.WritePacket(w.buf)
}

// ShrinkBuffer drops the packet buffer when it grew beyond max bytes.
func (w *ResultWriter) ShrinkBuffer(max int) {
	if cap(w.buf) > max {
		w.buf = nil
	}
}
