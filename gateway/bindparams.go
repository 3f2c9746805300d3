package gateway

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// A prepared statement for the owner (and a prepared INSERT whose column
// the gateway fills from a sequence) runs as the text statement the
// client would have sent: its parameters are written into the text as
// literals that MariaDB reads back as the values the binary protocol
// would have bound (bindStmt).

// erIllegalValue is MariaDB's ER_ILLEGAL_VALUE_FOR_TYPE.
const erIllegalValue = 1367

// bindStmt returns the text of st with the parameters of its execute
// packet p written in. A packet that cannot be read is 1835, a count of
// placeholders that is not the statement's 1210, a value SQL cannot
// write (a NaN) 1367.
func (ss *Session) bindStmt(st *stmt, p []byte) (string, *wire.SQLError) {
	params, err := wire.ParseExecuteParams(p, int(st.params), st.types, st.longDataOf)
	if err != nil {
		return "", wire.NewError(mysqlserver.ErMalformedPacket, "08S01", "Malformed communication packet")
	}
	lits := make([]string, len(params))
	lf := literalFormat{
		noBackslash:    ss.status&wire.StatusNoBackslashEscapes != 0,
		charset:        ss.backslashCharset(),
		numericStrings: st.route.Kind == querypath.KindSequence,
	}
	for i, prm := range params {
		lit, sqlErr := lf.literal(prm)
		if sqlErr != nil {
			return "", sqlErr
		}
		lits[i] = lit
	}
	sql, ok := querypath.BindParams(st.sql, lf.noBackslash, lits)
	if !ok {
		return "", wire.NewError(1210, "HY000", "Incorrect arguments to mysqld_stmt_execute: the statement's %d parameters do not match its placeholders", len(params))
	}
	return sql, nil
}

// longDataOf returns what COM_STMT_SEND_LONG_DATA sent for parameter i.
func (st *stmt) longDataOf(i int) ([]byte, bool) {
	var data []byte
	found := false
	for _, ld := range st.longData {
		if int(ld.param) == i {
			data = append(data, ld.data...)
			found = true
		}
	}
	return data, found
}

// literalFormat says how parameters are written as literals.
type literalFormat struct {
	// noBackslash is the session's NO_BACKSLASH_ESCAPES: quotes are
	// doubled, backslashes are plain characters.
	noBackslash bool
	// charset is the session's client character set when it is one
	// whose multibyte characters may hold a backslash byte (big5, cp932,
	// gbk, sjis, gb18030): a string that may hold such a character is
	// written in hexadecimal with that character set's introducer rather
	// than escaped byte by byte.
	charset string
	// numericStrings writes a string that is an integer as a number:
	// n of NEXT n VALUES may come as a string (PDO sends every parameter
	// so), which the statement's syntax does not take.
	numericStrings bool
}

// literal writes the parameter prm as an SQL literal of the value
// MariaDB would bind: NULL; integers and floating point numbers (with an
// exponent, so DOUBLE) in decimal; DECIMAL as its digits; temporal
// values as DATE, TIME and TIMESTAMP literals; BLOB and GEOMETRY as
// binary strings (X'..'); everything else as a string in the client's
// character set.
func (lf literalFormat) literal(prm wire.Param) (string, *wire.SQLError) {
	if prm.Null {
		return "NULL", nil
	}
	v := prm.Value
	if prm.LongData {
		if isBinaryType(prm.Type) {
			return "X'" + hex.EncodeToString(v) + "'", nil
		}
		return lf.stringLiteral(v), nil
	}
	switch prm.Type {
	case wire.TypeTiny, wire.TypeShort, wire.TypeYear, wire.TypeLong, wire.TypeInt24, wire.TypeLongLong:
		return intLiteral(v, prm.Unsigned), nil
	case wire.TypeFloat:
		return floatLiteral(float64(math.Float32frombits(binary.LittleEndian.Uint32(v))))
	case wire.TypeDouble:
		return floatLiteral(math.Float64frombits(binary.LittleEndian.Uint64(v)))
	case wire.TypeDecimal, wire.TypeNewDecimal:
		if isDecimal(v) {
			return string(v), nil
		}
	case wire.TypeDate, wire.TypeDatetime, wire.TypeTimestamp, wire.TypeTime:
		return timeLiteral(prm.Type, v)
	}
	if isBinaryType(prm.Type) {
		return "X'" + hex.EncodeToString(v) + "'", nil
	}
	if lf.numericStrings && isInteger(v) {
		return string(v), nil
	}
	return lf.stringLiteral(v), nil
}

// isBinaryType reports whether MariaDB binds a parameter of type typ
// as a binary string: BLOB and GEOMETRY.
func isBinaryType(typ byte) bool {
	switch typ {
	case wire.TypeTinyBlob, wire.TypeMediumBlob, wire.TypeLongBlob, wire.TypeBlob, wire.TypeGeometry:
		return true
	}
	return false
}

// intLiteral reads a little-endian integer of v's width.
func intLiteral(v []byte, unsigned bool) string {
	var u uint64
	for i := len(v) - 1; i >= 0; i-- {
		u = u<<8 | uint64(v[i])
	}
	if unsigned {
		return strconv.FormatUint(u, 10)
	}
	shift := 64 - 8*uint(len(v)) // sign-extend from v's width
	return strconv.FormatInt(int64(u<<shift)>>shift, 10)
}

// floatLiteral writes f with an exponent (a DOUBLE literal) and as many
// digits as it takes to read the same double back.
func floatLiteral(f float64) (string, *wire.SQLError) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", wire.NewError(erIllegalValue, "22007", "Illegal double '%v' value found during parsing: SQL has no literal for it", f)
	}
	return strconv.FormatFloat(f, 'e', -1, 64), nil
}

// timeLiteral writes a DATE, DATETIME, TIMESTAMP or TIME value.
func timeLiteral(typ byte, v []byte) (string, *wire.SQLError) {
	t, ok := wire.ParseBinaryTime(typ, v)
	if !ok {
		return "", wire.NewError(mysqlserver.ErMalformedPacket, "08S01", "Malformed communication packet: a temporal parameter of %d bytes", len(v))
	}
	frac := ""
	if t.Micro != 0 {
		frac = fmt.Sprintf(".%06d", t.Micro)
	}
	switch typ {
	case wire.TypeDate:
		return fmt.Sprintf("DATE'%04d-%02d-%02d'", t.Year, t.Month, t.Day), nil
	case wire.TypeTime:
		sign := ""
		if t.Negative {
			sign = "-"
		}
		hours := uint64(t.Days)*24 + uint64(t.Hour)
		return fmt.Sprintf("TIME'%s%02d:%02d:%02d%s'", sign, hours, t.Minute, t.Second, frac), nil
	}
	return fmt.Sprintf("TIMESTAMP'%04d-%02d-%02d %02d:%02d:%02d%s'", t.Year, t.Month, t.Day, t.Hour, t.Minute, t.Second, frac), nil
}

// isDecimal reports whether v is a plain decimal number ([-]digits[.digits]),
// a literal of the same DECIMAL value.
func isDecimal(v []byte) bool {
	s := strings.TrimPrefix(string(v), "-")
	whole, frac, dot := strings.Cut(s, ".")
	return allDigits(whole) && (!dot || allDigits(frac))
}

// isInteger reports whether v is [-]digits.
func isInteger(v []byte) bool { return allDigits(strings.TrimPrefix(string(v), "-")) }

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// stringLiteral quotes v for the session: quotes doubled, and with
// backslash escapes on, backslashes and NUL escaped. In a character set
// whose multibyte characters may hold a backslash byte, a string with a
// byte above 0x7f next to a backslash is written in hexadecimal instead:
// escaping it byte by byte could split such a character.
func (lf literalFormat) stringLiteral(v []byte) string {
	if !lf.noBackslash && lf.charset != "" && mayHideBackslash(v) {
		return "_" + lf.charset + " X'" + hex.EncodeToString(v) + "'"
	}
	var b strings.Builder
	b.Grow(len(v) + 2)
	b.WriteByte('\'')
	for _, c := range v {
		switch {
		case c == '\'':
			b.WriteString("''")
		case c == '\\' && !lf.noBackslash:
			b.WriteString(`\\`)
		case c == 0 && !lf.noBackslash:
			b.WriteString(`\0`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// mayHideBackslash reports whether v has a backslash byte right after a
// byte above 0x7f (the second byte of a multibyte character, maybe).
func mayHideBackslash(v []byte) bool {
	for i := 1; i < len(v); i++ {
		if v[i] == '\\' && v[i-1] >= 0x80 {
			return true
		}
	}
	return false
}

// backslashCharsets are the character sets whose multibyte characters
// may hold the byte 0x5c, by name and by the ids of their collations
// that fit a handshake.
var backslashCharsets = map[string][]byte{
	"big5": {1, 84}, "sjis": {13, 88}, "gbk": {28, 87}, "cp932": {95, 96}, "gb18030": {248, 249, 250},
}

// backslashCharset returns the session's client character set when it is
// one of backslashCharsets, else "": from what the session set
// (character_set_client, SET NAMES, SET CHARACTER SET), else from its
// handshake collation.
func (ss *Session) backslashCharset() string {
	for _, name := range []string{"character_set_client", "names", "character set"} {
		if v, ok := ss.vars[name]; ok {
			cs, _, _ := strings.Cut(strings.TrimSpace(v), " ")
			cs = strings.ToLower(strings.Trim(cs, "'\"`"))
			if _, ok := backslashCharsets[cs]; ok {
				return cs
			}
			return ""
		}
	}
	if ss.namesPending {
		for cs, ids := range backslashCharsets {
			for _, id := range ids {
				if id == ss.collation {
					return cs
				}
			}
		}
	}
	return ""
}
