package wire

import "encoding/binary"

// This file reads the parameters of a COM_STMT_EXECUTE: the gateway binds
// them itself for statements whose server has no binary protocol (the
// owner).

// Param is one bound parameter of a COM_STMT_EXECUTE.
type Param struct {
	// Type is the parameter's type (a Type* constant); Unsigned is the
	// flag sent with it.
	Type     byte
	Unsigned bool
	// Null is set for a NULL value (its bit in the null bitmap, or type
	// TypeNull).
	Null bool
	// LongData is set when Value came with COM_STMT_SEND_LONG_DATA:
	// MariaDB takes such a value as a string (binary for BLOB types),
	// whatever the type.
	LongData bool
	// Value is the value in its binary-protocol form, without the length
	// prefix of strings and temporal values: little-endian integers and
	// IEEE floats of the type's width, the temporal layout of
	// BinaryTime, the bytes of anything else. It points into the packet
	// or into the long data.
	Value []byte
}

// executeHeader is the length of a COM_STMT_EXECUTE before its null
// bitmap: command, statement id, flags, iteration count.
const executeHeader = 10

// ParseExecuteParams reads the n parameters of a COM_STMT_EXECUTE packet p
// (command byte included). types are the parameter types (two bytes
// each) to use when p does not send its own (new-params-bound flag 0):
// the statement's last. longData returns what COM_STMT_SEND_LONG_DATA sent
// for parameter i, if anything: such a parameter has no value in p, and
// its null bit is ignored, as MariaDB does. A packet that is too short,
// or a parameter without a type, is ErrMalformed.
func ParseExecuteParams(p []byte, n int, types []byte, longData func(i int) ([]byte, bool)) ([]Param, error) {
	if n == 0 {
		return nil, nil
	}
	nb := (n + 7) / 8
	if len(p) < executeHeader+nb+1 {
		return nil, ErrMalformed
	}
	nulls := p[executeHeader : executeHeader+nb]
	rest := p[executeHeader+nb+1:]
	if p[executeHeader+nb] == 1 {
		if len(rest) < 2*n {
			return nil, ErrMalformed
		}
		types, rest = rest[:2*n], rest[2*n:]
	}
	if len(types) < 2*n {
		return nil, ErrMalformed
	}
	params := make([]Param, n)
	for i := range params {
		pr := &params[i]
		pr.Type, pr.Unsigned = types[2*i], types[2*i+1]&0x80 != 0
		if data, ok := longData(i); ok {
			pr.Value, pr.LongData = data, true
			continue
		}
		if nulls[i/8]&(1<<(i%8)) != 0 || pr.Type == TypeNull {
			pr.Null = true
			continue
		}
		v, size, ok := paramValue(pr.Type, rest)
		if !ok {
			return nil, ErrMalformed
		}
		pr.Value, rest = v, rest[size:]
	}
	return params, nil
}

// paramValue cuts the value of a parameter of type typ from the start of
// b: its bytes, and how many bytes of b it took.
func paramValue(typ byte, b []byte) (v []byte, size int, ok bool) {
	if w := fixedWidth(typ); w > 0 {
		if len(b) < w {
			return nil, 0, false
		}
		return b[:w], w, true
	}
	switch typ {
	case TypeDate, TypeDatetime, TypeTimestamp, TypeTime:
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return nil, 0, false
		}
		return b[1 : 1+int(b[0])], 1 + int(b[0]), true
	}
	s, size, ok := readLenEncString(b)
	return s, size, ok
}

// fixedWidth is the width of a fixed-size binary value of type typ, 0 for
// the others.
func fixedWidth(typ byte) int {
	switch typ {
	case TypeTiny:
		return 1
	case TypeShort, TypeYear:
		return 2
	case TypeLong, TypeInt24, TypeFloat:
		return 4
	case TypeLongLong, TypeDouble:
		return 8
	}
	return 0
}

// BinaryTime is a temporal value in the binary protocol: DATE, DATETIME
// and TIMESTAMP use Year to Micro; TIME uses Negative, Days and Hour to
// Micro.
type BinaryTime struct {
	Negative             bool
	Year                 uint16
	Month, Day           uint8
	Days                 uint32
	Hour, Minute, Second uint8
	Micro                uint32
}

// ParseBinaryTime decodes the value of a temporal parameter or column of
// type typ (without its length byte). ok is false for a length the type
// does not have.
func ParseBinaryTime(typ byte, v []byte) (t BinaryTime, ok bool) {
	if typ == TypeTime {
		switch len(v) {
		case 0:
			return t, true
		case 8, 12:
		default:
			return t, false
		}
		t.Negative = v[0] == 1
		t.Days = binary.LittleEndian.Uint32(v[1:])
		t.Hour, t.Minute, t.Second = v[5], v[6], v[7]
		if len(v) == 12 {
			t.Micro = binary.LittleEndian.Uint32(v[8:])
		}
		return t, true
	}
	switch len(v) {
	case 0, 4, 7, 11:
	default:
		return t, false
	}
	if len(v) >= 4 {
		t.Year, t.Month, t.Day = binary.LittleEndian.Uint16(v), v[2], v[3]
	}
	if len(v) >= 7 {
		t.Hour, t.Minute, t.Second = v[4], v[5], v[6]
	}
	if len(v) == 11 {
		t.Micro = binary.LittleEndian.Uint32(v[7:])
	}
	return t, true
}

// AppendBinaryTime appends t as the value of a temporal column of type
// typ: its length byte, then the shortest layout that holds it, as
// MariaDB sends it.
func AppendBinaryTime(b []byte, typ byte, t BinaryTime) []byte {
	if typ == TypeTime {
		switch {
		case t.Micro != 0:
			b = append(b, 12)
		case t.Days != 0 || t.Hour != 0 || t.Minute != 0 || t.Second != 0:
			b = append(b, 8)
		default:
			return append(b, 0)
		}
		neg := byte(0)
		if t.Negative {
			neg = 1
		}
		b = append(b, neg)
		b = binary.LittleEndian.AppendUint32(b, t.Days)
		b = append(b, t.Hour, t.Minute, t.Second)
		if t.Micro != 0 {
			b = binary.LittleEndian.AppendUint32(b, t.Micro)
		}
		return b
	}
	n := byte(0)
	switch {
	case t.Micro != 0:
		n = 11
	case t.Hour != 0 || t.Minute != 0 || t.Second != 0:
		n = 7
	case t.Year != 0 || t.Month != 0 || t.Day != 0:
		n = 4
	}
	b = append(b, n)
	if n >= 4 {
		b = binary.LittleEndian.AppendUint16(b, t.Year)
		b = append(b, t.Month, t.Day)
	}
	if n >= 7 {
		b = append(b, t.Hour, t.Minute, t.Second)
	}
	if n == 11 {
		b = binary.LittleEndian.AppendUint32(b, t.Micro)
	}
	return b
}
