package wire

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
)

// This file turns text-protocol rows into binary-protocol rows, for the
// answer to a COM_STMT_EXECUTE that a server without the binary protocol
// (the owner) answered as a text query (Relay.BinaryRows).

// colType is what the binary row format needs of a column definition.
type colType struct {
	typ      byte
	unsigned bool
}

// errBadTextValue is a text value that its column's type cannot hold.
var errBadTextValue = errors.New("wire: text value does not fit its column type")

// parseColType reads the type and the unsigned flag of a column
// definition payload.
func parseColType(p []byte) (colType, bool) {
	for range 6 { // catalog, schema, table, org_table, name, org_name
		_, n, ok := readLenEncString(p)
		if !ok {
			return colType{}, false
		}
		p = p[n:]
	}
	if len(p) < 10 || p[0] < 0x0c {
		return colType{}, false
	}
	return colType{typ: p[7], unsigned: binary.LittleEndian.Uint16(p[8:])&FlagUnsigned != 0}, true
}

// appendBinaryRow appends the binary-protocol form of the text-protocol
// row payload text, whose columns are cols: the 0x00 header, the NULL
// bitmap (offset 2), then each non-NULL value in its type's binary form.
// A row whose values do not match cols is ErrMalformed or
// errBadTextValue.
func appendBinaryRow(b, text []byte, cols []colType) ([]byte, error) {
	b = append(b, okHeader)
	bitmap := len(b)
	for range (len(cols) + 9) / 8 {
		b = append(b, 0)
	}
	for i, c := range cols {
		if len(text) > 0 && text[0] == nullValue {
			b[bitmap+(i+2)/8] |= 1 << ((i + 2) % 8)
			text = text[1:]
			continue
		}
		v, n, ok := readLenEncString(text)
		if !ok {
			return b, ErrMalformed
		}
		text = text[n:]
		var err error
		if b, err = appendBinaryValue(b, c, v); err != nil {
			return b, err
		}
	}
	if len(text) != 0 {
		return b, ErrMalformed
	}
	return b, nil
}

// appendBinaryValue appends the binary form of the text value v of a
// column of type c.
func appendBinaryValue(b []byte, c colType, v []byte) ([]byte, error) {
	s := string(v)
	switch c.typ {
	case TypeTiny, TypeShort, TypeYear, TypeLong, TypeInt24, TypeLongLong:
		return appendBinaryInt(b, c, s)
	case TypeFloat:
		f, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return b, errBadTextValue
		}
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f))), nil
	case TypeDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return b, errBadTextValue
		}
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
	case TypeDate, TypeDatetime, TypeTimestamp:
		t, ok := parseTextDate(s)
		if !ok {
			return b, errBadTextValue
		}
		return AppendBinaryTime(b, c.typ, t), nil
	case TypeTime:
		t, ok := parseTextTime(s)
		if !ok {
			return b, errBadTextValue
		}
		return AppendBinaryTime(b, c.typ, t), nil
	}
	// Decimals, strings, bits, enums, sets, JSON, geometry: the bytes.
	b = appendLenEnc(b, uint64(len(v)))
	return append(b, v...), nil
}

// appendBinaryInt appends the integer s as a little-endian value of its
// column type's width.
func appendBinaryInt(b []byte, c colType, s string) ([]byte, error) {
	w := fixedWidth(c.typ)
	bits := 8 * w
	if c.typ == TypeInt24 {
		bits = 24 // sent in four bytes
	}
	var u uint64
	if c.unsigned {
		v, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return b, errBadTextValue
		}
		u = v
	} else {
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return b, errBadTextValue
		}
		u = uint64(v)
	}
	for i := range w {
		b = append(b, byte(u>>(8*i)))
	}
	return b, nil
}

// parseTextDate reads a DATE, DATETIME or TIMESTAMP in MariaDB's text
// form: YYYY-MM-DD, optionally followed by HH:MM:SS and a fraction of up
// to six digits.
func parseTextDate(s string) (BinaryTime, bool) {
	var t BinaryTime
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return t, false
	}
	y, ok1 := digits(s[0:4])
	m, ok2 := digits(s[5:7])
	d, ok3 := digits(s[8:10])
	if !ok1 || !ok2 || !ok3 {
		return t, false
	}
	t.Year, t.Month, t.Day = uint16(y), uint8(m), uint8(d)
	if len(s) == 10 {
		return t, true
	}
	if s[10] != ' ' {
		return t, false
	}
	h, mi, sec, micro, ok := clock(s[11:], 2)
	t.Hour, t.Minute, t.Second, t.Micro = uint8(h), mi, sec, micro
	return t, ok && h < 24
}

// parseTextTime reads a TIME in MariaDB's text form: an optional minus,
// hours (at least two digits), minutes, seconds and a fraction of up to
// six digits.
func parseTextTime(s string) (BinaryTime, bool) {
	var t BinaryTime
	if len(s) > 0 && s[0] == '-' {
		t.Negative, s = true, s[1:]
	}
	colon := 0
	for colon < len(s) && s[colon] != ':' {
		colon++
	}
	h, mi, sec, micro, ok := clock(s, colon)
	if !ok || colon < 2 {
		return t, false
	}
	t.Days, t.Hour, t.Minute, t.Second, t.Micro = h/24, uint8(h%24), mi, sec, micro
	return t, true
}

// clock reads H..H:MM:SS[.ffffff] with an hour of hourDigits digits.
func clock(s string, hourDigits int) (h uint32, m, sec uint8, micro uint32, ok bool) {
	if hourDigits < 1 || hourDigits > 9 || len(s) < hourDigits+6 || s[hourDigits] != ':' || s[hourDigits+3] != ':' {
		return 0, 0, 0, 0, false
	}
	hv, ok1 := digits(s[:hourDigits])
	mv, ok2 := digits(s[hourDigits+1 : hourDigits+3])
	sv, ok3 := digits(s[hourDigits+4 : hourDigits+6])
	if !ok1 || !ok2 || !ok3 || mv > 59 || sv > 59 {
		return 0, 0, 0, 0, false
	}
	frac := s[hourDigits+6:]
	if frac != "" {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 7 {
			return 0, 0, 0, 0, false
		}
		f, okf := digits(frac[1:])
		if !okf {
			return 0, 0, 0, 0, false
		}
		for range 7 - len(frac) {
			f *= 10
		}
		micro = f
	}
	return hv, uint8(mv), uint8(sv), micro, true
}

// digits reads a run of decimal digits (nothing else) as a number.
func digits(s string) (uint32, bool) {
	if s == "" {
		return 0, false
	}
	var v uint32
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + uint32(s[i]-'0')
	}
	return v, true
}
