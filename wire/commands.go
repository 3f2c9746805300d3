package wire

import "encoding/binary"

// This file holds the layouts of client commands the gateway reads or
// builds beyond COM_QUERY: COM_CHANGE_USER, COM_PROCESS_KILL and the
// statement-id header of the COM_STMT_* commands.

// ChangeUser is the content of a COM_CHANGE_USER packet.
type ChangeUser struct {
	// User is the account to log in as, DB the default database ("" none).
	User, DB string
	// Plugin is the authentication plugin the client used ("" when it
	// sent none: mysql_native_password).
	Plugin string
	// Auth is the client's answer to the session's scramble.
	Auth []byte
	// Collation is the client's character set (0: unchanged).
	Collation byte
}

// ParseChangeUser reads a COM_CHANGE_USER packet (command byte included)
// of a client with capabilities caps.
func ParseChangeUser(p []byte, caps uint32) (ChangeUser, error) {
	var r ChangeUser
	if len(p) == 0 {
		return r, ErrMalformed
	}
	rest := p[1:]
	cstr := func() (string, bool) {
		for i, c := range rest {
			if c == 0 {
				s := string(rest[:i])
				rest = rest[i+1:]
				return s, true
			}
		}
		return "", false
	}
	var ok bool
	if r.User, ok = cstr(); !ok {
		return r, ErrMalformed
	}
	if caps&CapSecureConnection != 0 {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return r, ErrMalformed
		}
		r.Auth = append([]byte(nil), rest[1:1+int(rest[0])]...)
		rest = rest[1+int(rest[0]):]
	} else {
		s, ok := cstr()
		if !ok {
			return r, ErrMalformed
		}
		r.Auth = []byte(s)
	}
	if len(rest) == 0 {
		return r, nil
	}
	if r.DB, ok = cstr(); !ok {
		r.DB, rest = string(rest), nil
	}
	if len(rest) >= 2 {
		r.Collation = rest[0]
		rest = rest[2:]
	}
	if caps&CapPluginAuth != 0 && len(rest) > 0 {
		if r.Plugin, ok = cstr(); !ok {
			r.Plugin = string(rest)
		}
	}
	return r, nil
}

// ParseProcessKill reads the connection id of a COM_PROCESS_KILL packet.
func ParseProcessKill(p []byte) (id uint32, ok bool) {
	if len(p) < 5 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(p[1:]), true
}

// StmtCommandID reads the statement id of a COM_STMT_EXECUTE, _FETCH,
// _CLOSE, _RESET or _SEND_LONG_DATA packet.
func StmtCommandID(p []byte) (id uint32, ok bool) {
	if len(p) < 5 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(p[1:]), true
}

// SetStmtCommandID rewrites the statement id of such a packet in place
// (the gateway's id to the backend connection's). p must hold one.
func SetStmtCommandID(p []byte, id uint32) { binary.LittleEndian.PutUint32(p[1:], id) }

// AppendStmtCommand appends the header of a COM_STMT_* command: the
// command byte and the statement id.
func AppendStmtCommand(b []byte, cmd byte, id uint32) []byte {
	b = append(b, cmd)
	return binary.LittleEndian.AppendUint32(b, id)
}

// ExecuteFlags returns the cursor flags byte of a COM_STMT_EXECUTE packet
// (0 when it is too short to hold one).
func ExecuteFlags(p []byte) byte {
	if len(p) < 6 {
		return 0
	}
	return p[5]
}

// ParseSendLongData reads a COM_STMT_SEND_LONG_DATA packet: the statement
// id, the parameter number and its chunk of data (pointing into p).
func ParseSendLongData(p []byte) (id uint32, param uint16, data []byte, ok bool) {
	if len(p) < 7 {
		return 0, 0, nil, false
	}
	return binary.LittleEndian.Uint32(p[1:]), binary.LittleEndian.Uint16(p[5:]), p[7:], true
}

// AppendSendLongData appends a COM_STMT_SEND_LONG_DATA packet: a chunk of
// parameter param of statement id.
func AppendSendLongData(b []byte, id uint32, param uint16, data []byte) []byte {
	b = AppendStmtCommand(b, ComStmtSendLongData, id)
	b = binary.LittleEndian.AppendUint16(b, param)
	return append(b, data...)
}
