package difffuzz

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/directgate/directgate/wire"
)

// statusMask selects the server status flags that are compared between
// the direct and the gateway run: IN_TRANS (0x1), AUTOCOMMIT (0x2),
// MORE_RESULTS_EXISTS (0x8), CURSOR_EXISTS (0x40), LAST_ROW_SENT (0x80),
// DB_DROPPED (0x100), NO_BACKSLASH_ESCAPES (0x200), METADATA_CHANGED
// (0x400), PS_OUT_PARAMS (0x1000) and IN_TRANS_READONLY (0x2000).
// Ignored: NO_GOOD_INDEX_USED (0x10) and NO_INDEX_USED (0x20), which
// describe query plans; QUERY_WAS_SLOW (0x800), which depends on timing;
// SESSION_STATE_CHANGED (0x4000), which depends on the session trackers
// the gateway turns on for its backend connections; and 0x8000, unused
// by MariaDB.
const statusMask uint16 = 0xffff &^ (wire.StatusNoGoodIndexUsed | wire.StatusNoIndexUsed |
	wire.StatusQueryWasSlow | wire.StatusSessionStateChange | 0x8000)

// columnsEOFMask selects what is compared of the status of the EOF packet
// that ends column definitions for a classic client: only
// CURSOR_EXISTS, which tells the client that no rows follow, and only in
// binary results (COM_STMT_EXECUTE): in a text result MariaDB sets it while
// a procedure has a cursor open, and the rows follow all the same. The gateway's
// backend connections use CLIENT_DEPRECATE_EOF (so that the session
// trackers at the end of a result set reach it), and MariaDB sends no EOF
// there: the gateway writes that EOF itself, before the rows, when the
// server's other bits are not known yet (IN_TRANS of a statement that
// starts a transaction with autocommit off, MORE_RESULTS of a batch or a
// procedure's result). The EOF after the rows, with the server's status,
// is compared with statusMask.
const columnsEOFMask = wire.StatusCursorExists

// record is one thing a client saw: an OK, ERR or EOF packet, a result
// set, the answer to a prepare, or a failure of the connection.
type record struct {
	// key is what is compared: every byte the client sees, except the
	// masked status flags, statement ids and the connection ids in error
	// messages (see normalizeError).
	key string
	// text is key for people: decoded values where key has bytes.
	text string
	// status is the raw status of an OK or EOF (for MORE_RESULTS).
	status uint16
}

func okRecord(p []byte) record {
	kind := "OK"
	if p[0] == 0xfe {
		kind = "OK(end of rows)"
	}
	ok, good := wire.ParseOK(p)
	if !good {
		return rawRecord("malformed OK", p)
	}
	info := okInfo(p)
	head := fmt.Sprintf("%s affected=%d insert_id=%d status=%s warnings=%d info=",
		kind, ok.AffectedRows, ok.LastInsertID, statusString(ok.Status&statusMask), ok.Warnings)
	text := head + strconv.Quote(info)
	// MariaDB sends the info string length-encoded; show it decoded.
	if s, n, good := wire.ReadLenEncString([]byte(info)); good && n == len(info) {
		text = head + strconv.Quote(string(s))
	}
	return record{key: head + strconv.Quote(info), text: text, status: ok.Status}
}

// okInfo returns the info string of an OK packet: everything after the
// warnings count (no CLIENT_SESSION_TRACK is negotiated).
func okInfo(p []byte) string {
	i := 1
	for range 2 {
		_, n, ok := wire.ReadLenEncInt(p[i:])
		if !ok {
			return ""
		}
		i += n
	}
	if len(p) < i+4 {
		return ""
	}
	return string(p[i+4:])
}

func eofRecord(label string, p []byte) record { return eofRecordMask(label, p, statusMask) }

// eofRecordMask is eofRecord comparing only the status bits of mask.
func eofRecordMask(label string, p []byte, mask uint16) record {
	if !wire.IsEOF(p) {
		return rawRecord(label+": not an EOF", p)
	}
	w, st := wire.ParseEOF(p)
	s := fmt.Sprintf("%s warnings=%d status=%s", label, w, statusString(st&mask))
	if len(p) != 5 {
		s += fmt.Sprintf(" (%d bytes)", len(p))
	}
	return record{key: s, text: s, status: st}
}

func errRecord(p []byte) record {
	e := wire.ParseERR(p)
	s := fmt.Sprintf("ERR %d (%s) %s", e.Code, e.State, normalizeError(e.Message))
	return record{key: s, text: s}
}

func rawRecord(label string, p []byte) record {
	s := label + ": " + hex.EncodeToString(p)
	return record{key: s, text: s}
}

// failRecord records a broken connection or protocol error. Only the kind
// of failure is kept: messages name addresses and ports.
func failRecord(err error) record {
	s := "CONNECTION FAILED: " + failureKind(err)
	return record{key: s, text: s + " (" + err.Error() + ")"}
}

func failureKind(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "EOF"), strings.Contains(msg, "connection reset"),
		strings.Contains(msg, "broken pipe"), strings.Contains(msg, "use of closed"):
		return "closed by the server"
	case strings.Contains(msg, "timeout"):
		return "timed out"
	case strings.Contains(msg, "malformed"), strings.Contains(msg, "sequence"):
		return "protocol error"
	}
	return "other"
}

var idInMessage = regexp.MustCompile(`(?i)\b(thread|connection|thread id|connection id|handler) *:? *\(?(\d+)\)?`)

// normalizeError hides numbers that name connections or statements in an
// error message: they differ between the direct and the gateway run.
func normalizeError(msg string) string {
	return idInMessage.ReplaceAllString(msg, "$1 <id>")
}

// statusString renders status flags as hex plus names.
func statusString(s uint16) string {
	names := []struct {
		bit  uint16
		name string
	}{
		{wire.StatusInTrans, "IN_TRANS"}, {wire.StatusAutocommit, "AUTOCOMMIT"},
		{wire.StatusMoreResults, "MORE_RESULTS"}, {wire.StatusCursorExists, "CURSOR"},
		{wire.StatusLastRowSent, "LAST_ROW"}, {wire.StatusDBDropped, "DB_DROPPED"},
		{wire.StatusNoBackslashEscapes, "NO_BACKSLASH_ESCAPES"}, {wire.StatusMetadataChanged, "METADATA_CHANGED"},
		{wire.StatusPSOutParams, "PS_OUT_PARAMS"}, {wire.StatusInTransReadonly, "IN_TRANS_READONLY"},
	}
	var parts []string
	for _, n := range names {
		if s&n.bit != 0 {
			parts = append(parts, n.name)
		}
	}
	return fmt.Sprintf("%#04x[%s]", s, strings.Join(parts, "|"))
}

// resultSet is a result set as read off the wire.
type resultSet struct {
	binary  bool
	cols    [][]byte
	colsEOF *record
	rows    [][]byte
	end     record
}

func (rs *resultSet) record() record {
	var key, text strings.Builder
	kind := "text"
	if rs.binary {
		kind = "binary"
	}
	fmt.Fprintf(&key, "RESULT SET (%s) %d columns", kind, len(rs.cols))
	fmt.Fprintf(&text, "RESULT SET (%s)", kind)
	cols := make([]column, len(rs.cols))
	for i, c := range rs.cols {
		cols[i] = parseColumn(c)
		fmt.Fprintf(&key, "\n  column %s", hex.EncodeToString(c))
		fmt.Fprintf(&text, "\n  column %s", cols[i].String())
	}
	if rs.colsEOF != nil {
		fmt.Fprintf(&key, "\n  %s", rs.colsEOF.key)
		fmt.Fprintf(&text, "\n  %s", rs.colsEOF.text)
	}
	for _, r := range rs.rows {
		fmt.Fprintf(&key, "\n  row %s", hex.EncodeToString(r))
		if rs.binary {
			fmt.Fprintf(&text, "\n  row %s", decodeBinaryRow(r, cols))
		} else {
			fmt.Fprintf(&text, "\n  row %s", decodeTextRow(r, len(cols)))
		}
	}
	if rs.end.key == "" {
		key.WriteString("\n  (ended by the error below)")
		text.WriteString("\n  (ended by the error below)")
	} else {
		fmt.Fprintf(&key, "\n  %s", rs.end.key)
		fmt.Fprintf(&text, "\n  %s", rs.end.text)
	}
	return record{key: key.String(), text: text.String(), status: rs.end.status}
}

// prepareResult is the answer to COM_STMT_PREPARE, without the statement
// id.
type prepareResult struct {
	params, columns    int
	warnings           uint16
	extra              []byte
	paramDefs, colDefs [][]byte
	paramsEOF, colsEOF *record
}

func (pr *prepareResult) record() record {
	var key, text strings.Builder
	head := fmt.Sprintf("PREPARED params=%d columns=%d warnings=%d", pr.params, pr.columns, pr.warnings)
	if len(pr.extra) > 0 {
		head += " extra=" + hex.EncodeToString(pr.extra)
	}
	key.WriteString(head)
	text.WriteString(head)
	for _, part := range []struct {
		label string
		defs  [][]byte
		eof   *record
	}{{"param", pr.paramDefs, pr.paramsEOF}, {"column", pr.colDefs, pr.colsEOF}} {
		for _, d := range part.defs {
			fmt.Fprintf(&key, "\n  %s %s", part.label, hex.EncodeToString(d))
			fmt.Fprintf(&text, "\n  %s %s", part.label, parseColumn(d).String())
		}
		if part.eof != nil {
			fmt.Fprintf(&key, "\n  %s", part.eof.key)
			fmt.Fprintf(&text, "\n  %s", part.eof.text)
		}
	}
	return record{key: key.String(), text: text.String()}
}

// column is a decoded column definition.
type column struct {
	catalog, schema, table, orgTable, name, orgName string
	charset                                         uint16
	length                                          uint32
	typ                                             byte
	flags                                           uint16
	decimals                                        byte
	bad                                             []byte // set when the packet did not decode
}

func parseColumn(p []byte) column {
	var c column
	fields := []*string{&c.catalog, &c.schema, &c.table, &c.orgTable, &c.name, &c.orgName}
	rest := p
	for _, f := range fields {
		s, n, ok := wire.ReadLenEncString(rest)
		if !ok {
			return column{bad: p}
		}
		*f, rest = string(s), rest[n:]
	}
	if len(rest) < 13 || rest[0] != 0x0c {
		return column{bad: p}
	}
	c.charset = binary.LittleEndian.Uint16(rest[1:])
	c.length = binary.LittleEndian.Uint32(rest[3:])
	c.typ = rest[7]
	c.flags = binary.LittleEndian.Uint16(rest[8:])
	c.decimals = rest[10]
	if len(rest) != 13 {
		c.bad = rest[13:]
	}
	return c
}

func (c column) String() string {
	if c.bad != nil && c.name == "" {
		return "undecodable " + hex.EncodeToString(c.bad)
	}
	s := fmt.Sprintf("%q type=%#02x charset=%d length=%d flags=%#04x decimals=%d", c.name, c.typ, c.charset, c.length, c.flags, c.decimals)
	if c.schema != "" || c.table != "" {
		s += fmt.Sprintf(" table=%s.%s", c.schema, c.table)
	}
	if c.orgTable != c.table || c.orgName != c.name {
		s += fmt.Sprintf(" org=%s.%s", c.orgTable, c.orgName)
	}
	if c.catalog != "def" {
		s += fmt.Sprintf(" catalog=%q", c.catalog)
	}
	if c.bad != nil {
		s += " trailing=" + hex.EncodeToString(c.bad)
	}
	return s
}

// decodeTextRow renders a text-protocol row as (v1, v2, ...).
func decodeTextRow(p []byte, n int) string {
	vals := make([]string, 0, n)
	rest := p
	for range n {
		if len(rest) > 0 && rest[0] == 0xfb {
			vals, rest = append(vals, "NULL"), rest[1:]
			continue
		}
		s, m, ok := wire.ReadLenEncString(rest)
		if !ok {
			return "undecodable " + hex.EncodeToString(p)
		}
		vals, rest = append(vals, strconv.Quote(string(s))), rest[m:]
	}
	if len(rest) != 0 {
		return "undecodable " + hex.EncodeToString(p)
	}
	return "(" + strings.Join(vals, ", ") + ")"
}

// decodeBinaryRow renders a binary-protocol row as (v1, v2, ...), using
// the column types.
func decodeBinaryRow(p []byte, cols []column) string {
	bad := "undecodable " + hex.EncodeToString(p)
	nb := (len(cols) + 7 + 2) / 8
	if len(p) < 1+nb || p[0] != 0 {
		return bad
	}
	nulls, rest := p[1:1+nb], p[1+nb:]
	vals := make([]string, 0, len(cols))
	for i, c := range cols {
		bit := i + 2
		if nulls[bit/8]&(1<<(bit%8)) != 0 {
			vals = append(vals, "NULL")
			continue
		}
		unsigned := c.flags&wire.FlagUnsigned != 0
		fixed := func(n int) ([]byte, bool) {
			if len(rest) < n {
				return nil, false
			}
			b := rest[:n]
			rest = rest[n:]
			return b, true
		}
		var v string
		switch c.typ {
		case wire.TypeTiny:
			b, ok := fixed(1)
			if !ok {
				return bad
			}
			v = intString(uint64(b[0]), int64(int8(b[0])), unsigned)
		case wire.TypeShort, wire.TypeYear:
			b, ok := fixed(2)
			if !ok {
				return bad
			}
			u := binary.LittleEndian.Uint16(b)
			v = intString(uint64(u), int64(int16(u)), unsigned)
		case wire.TypeLong, wire.TypeInt24:
			b, ok := fixed(4)
			if !ok {
				return bad
			}
			u := binary.LittleEndian.Uint32(b)
			v = intString(uint64(u), int64(int32(u)), unsigned)
		case wire.TypeLongLong:
			b, ok := fixed(8)
			if !ok {
				return bad
			}
			u := binary.LittleEndian.Uint64(b)
			v = intString(u, int64(u), unsigned)
		case wire.TypeFloat:
			b, ok := fixed(4)
			if !ok {
				return bad
			}
			v = strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 'g', -1, 32)
		case wire.TypeDouble:
			b, ok := fixed(8)
			if !ok {
				return bad
			}
			v = strconv.FormatFloat(math.Float64frombits(binary.LittleEndian.Uint64(b)), 'g', -1, 64)
		case wire.TypeDate, wire.TypeDatetime, wire.TypeTimestamp, wire.TypeTime:
			if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
				return bad
			}
			v = "temporal:" + hex.EncodeToString(rest[1:1+int(rest[0])])
			rest = rest[1+int(rest[0]):]
		case wire.TypeNull:
			v = "NULL"
		default:
			s, m, ok := wire.ReadLenEncString(rest)
			if !ok {
				return bad
			}
			v, rest = strconv.Quote(string(s)), rest[m:]
		}
		vals = append(vals, v)
	}
	if len(rest) != 0 {
		return bad
	}
	return "(" + strings.Join(vals, ", ") + ")"
}

func intString(u uint64, s int64, unsigned bool) string {
	if unsigned {
		return strconv.FormatUint(u, 10)
	}
	return strconv.FormatInt(s, 10)
}
