package wire

import (
	"encoding/binary"
	"fmt"
)

// SQLError is a MySQL error as carried by an ERR packet: number, SQLSTATE
// and message. Backend errors are relayed as received; gateway errors are
// built with NewError.
type SQLError struct {
	Code    uint16
	State   string
	Message string
}

// NewError returns a gateway-made error with the given number, SQLSTATE and
// message (formatted like fmt.Sprintf).
func NewError(code uint16, state, format string, args ...any) *SQLError {
	if len(args) > 0 {
		format = fmt.Sprintf(format, args...)
	}
	return &SQLError{Code: code, State: state, Message: format}
}

// Error renders the error like the mysql client does.
func (e *SQLError) Error() string {
	return fmt.Sprintf("ERROR %d (%s): %s", e.Code, e.State, e.Message)
}

// AppendERR appends the payload of an ERR packet for e (protocol 4.1 form).
func AppendERR(b []byte, e *SQLError) []byte {
	state := e.State
	if len(state) != 5 {
		state = "HY000"
	}
	b = append(b, errHeader, byte(e.Code), byte(e.Code>>8), '#')
	b = append(b, state...)
	return append(b, e.Message...)
}

// ParseERR decodes the payload of an ERR packet.
func ParseERR(p []byte) *SQLError {
	e := &SQLError{Code: 1105, State: "HY000"}
	if len(p) < 3 || p[0] != errHeader {
		e.Message = "malformed error packet"
		return e
	}
	e.Code = binary.LittleEndian.Uint16(p[1:])
	rest := p[3:]
	if len(rest) >= 6 && rest[0] == '#' {
		e.State = string(rest[1:6])
		rest = rest[6:]
	}
	e.Message = string(rest)
	return e
}

// OK is the decoded content of an OK packet.
type OK struct {
	AffectedRows uint64
	LastInsertID uint64
	Status       uint16
	Warnings     uint16
	Info         string
}

// AppendOK appends the payload of an OK packet (no session-state data).
func AppendOK(b []byte, ok OK) []byte {
	b = append(b, okHeader)
	b = appendLenEnc(b, ok.AffectedRows)
	b = appendLenEnc(b, ok.LastInsertID)
	b = append(b, byte(ok.Status), byte(ok.Status>>8), byte(ok.Warnings), byte(ok.Warnings>>8))
	return append(b, ok.Info...)
}

// ParseOK decodes an OK packet payload (header 0x00 or, with
// CLIENT_DEPRECATE_EOF, 0xfe). The info string is left empty: callers that
// need it read it from the packet.
func ParseOK(p []byte) (OK, bool) {
	var ok OK
	if len(p) < 1 || (p[0] != okHeader && p[0] != eofHeader) {
		return ok, false
	}
	i := 1
	v, n, good := readLenEnc(p[i:])
	if !good {
		return ok, false
	}
	ok.AffectedRows = v
	i += n
	if v, n, good = readLenEnc(p[i:]); !good {
		return ok, false
	}
	ok.LastInsertID = v
	i += n
	if len(p) < i+4 {
		// OK packets of pre-4.1 servers stop here; treat as no flags.
		return ok, len(p) == i
	}
	ok.Status = binary.LittleEndian.Uint16(p[i:])
	ok.Warnings = binary.LittleEndian.Uint16(p[i+2:])
	return ok, true
}

// AppendEOF appends the payload of a classic EOF packet.
func AppendEOF(b []byte, warnings, status uint16) []byte {
	return append(b, eofHeader, byte(warnings), byte(warnings>>8), byte(status), byte(status>>8))
}

// IsEOF reports whether p is a classic EOF packet (0xfe, shorter than 9).
func IsEOF(p []byte) bool { return len(p) > 0 && p[0] == eofHeader && len(p) < 9 }

// IsERR reports whether p is an ERR packet.
func IsERR(p []byte) bool { return len(p) > 0 && p[0] == errHeader }

// IsOK reports whether p is an OK packet with header 0x00.
func IsOK(p []byte) bool { return len(p) > 0 && p[0] == okHeader }

// ParseEOF decodes warnings and status of a classic EOF packet.
func ParseEOF(p []byte) (warnings, status uint16) {
	if len(p) >= 5 {
		return binary.LittleEndian.Uint16(p[1:]), binary.LittleEndian.Uint16(p[3:])
	}
	return 0, 0
}

// AppendPrepareOK appends the first packet of a COM_STMT_PREPARE answer:
// the statement id, its column and parameter counts and a warning count.
// The definitions of the parameters, then of the columns, follow it.
func AppendPrepareOK(b []byte, id uint32, columns, params, warnings uint16) []byte {
	b = append(b, okHeader)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = binary.LittleEndian.AppendUint16(b, columns)
	b = binary.LittleEndian.AppendUint16(b, params)
	b = append(b, 0) // filler
	return binary.LittleEndian.AppendUint16(b, warnings)
}
