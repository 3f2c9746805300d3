package wire

import (
	"encoding/binary"
	"strings"
)

// Session-state entry types (CLIENT_SESSION_TRACK), as MariaDB and MySQL
// send them in OK packets.
const (
	// TrackSystemVariable: a system variable changed; data is its name
	// and value, each length-encoded.
	TrackSystemVariable byte = 0
	// TrackSchema: the default database changed; data is its name.
	TrackSchema byte = 1
	// TrackStateChange: some session state changed; data is "1".
	TrackStateChange byte = 2
	// TrackGTIDs: MySQL's session_track_gtids.
	TrackGTIDs byte = 3
	// TrackTransactionCharacteristics: SQL that recreates the next or
	// current transaction's characteristics ("" when none).
	TrackTransactionCharacteristics byte = 4
	// TrackTransactionState: eight characters describing the open
	// transaction.
	TrackTransactionState byte = 5
)

// parseOK decodes an OK packet payload with its info string and its
// session-state entries (the content of the state-change block), read as
// a backend with caps sends them. info and state point into p.
func parseOK(p []byte, caps uint32) (ok OK, info, state []byte, good bool) {
	if len(p) < 1 || (p[0] != okHeader && p[0] != eofHeader) {
		return ok, nil, nil, false
	}
	i := 1
	v, n, g := readLenEnc(p[i:])
	if !g {
		return ok, nil, nil, false
	}
	ok.AffectedRows = v
	i += n
	if v, n, g = readLenEnc(p[i:]); !g {
		return ok, nil, nil, false
	}
	ok.LastInsertID = v
	i += n
	if len(p) < i+4 {
		return ok, nil, nil, len(p) == i
	}
	ok.Status = binary.LittleEndian.Uint16(p[i:])
	ok.Warnings = binary.LittleEndian.Uint16(p[i+2:])
	i += 4
	rest := p[i:]
	if caps&CapSessionTrack == 0 {
		return ok, rest, nil, true
	}
	if len(rest) == 0 {
		return ok, nil, nil, true
	}
	s, n, g := readLenEncString(rest)
	if !g {
		return ok, nil, nil, false
	}
	info, rest = s, rest[n:]
	if ok.Status&StatusSessionStateChange != 0 && len(rest) > 0 {
		if state, _, g = readLenEncString(rest); !g {
			return ok, nil, nil, false
		}
	}
	return ok, info, state, true
}

// EachTrack calls f for every session-state entry in entries (as in
// Result.Track) with its type and data. It stops at the first malformed
// entry and reports whether all were well formed.
func EachTrack(entries []byte, f func(typ byte, data []byte)) bool {
	for len(entries) > 0 {
		typ := entries[0]
		data, n, ok := readLenEncString(entries[1:])
		if !ok {
			return false
		}
		f(typ, data)
		entries = entries[1+n:]
	}
	return true
}

// TrackString decodes the one length-encoded string that is the data of
// a schema, state-change, characteristics or transaction-state entry.
func TrackString(data []byte) ([]byte, bool) {
	s, _, ok := readLenEncString(data)
	return s, ok
}

// TrackVariable decodes a system-variable entry's name and value.
func TrackVariable(data []byte) (name, value []byte, ok bool) {
	name, n, ok := readLenEncString(data)
	if !ok {
		return nil, nil, false
	}
	value, _, ok = readLenEncString(data[n:])
	return name, value, ok
}

// hasTrack reports whether entries hold an entry of type typ.
func hasTrack(entries []byte, typ byte) bool {
	found := false
	EachTrack(entries, func(t byte, _ []byte) { found = found || t == typ })
	return found
}

// appendTrack appends an entry of type typ whose data is the one
// length-encoded string s.
func appendTrack(b []byte, typ byte, s string) []byte {
	b = append(b, typ)
	b = appendLenEnc(b, uint64(len(s))+uint64(len(appendLenEnc(nil, uint64(len(s))))))
	return appendLenEncString(b, s)
}

// Transaction-info tracking levels (session_track_transaction_info).
const (
	TrackTxnOff byte = iota
	TrackTxnState
	TrackTxnCharacteristics
)

// TrackFilter is what a client's own session_track_* settings let it
// see of the session-state entries the gateway's backend connections
// report (they track everything).
type TrackFilter struct {
	// Schema and StateChange are session_track_schema and
	// session_track_state_change.
	Schema, StateChange bool
	// AllVars is session_track_system_variables='*'; otherwise Vars
	// lists the tracked names in lower case.
	AllVars bool
	Vars    []string
	// TxnInfo is session_track_transaction_info: TrackTxnOff,
	// TrackTxnState or TrackTxnCharacteristics.
	TxnInfo byte
}

// DefaultTrackFilter is MariaDB's default: schema and the variables
// autocommit, character_set_client, character_set_connection,
// character_set_results and time_zone.
func DefaultTrackFilter() *TrackFilter {
	return &TrackFilter{Schema: true, Vars: ParseTrackedVars("autocommit,character_set_client,character_set_connection,character_set_results,time_zone")}
}

// ParseTrackedVars splits a session_track_system_variables value into
// lower-case names.
func ParseTrackedVars(v string) []string {
	var names []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// With returns the filter after the client set its session_track_*
// variable name (lower case) to value; f itself when name is another
// variable.
func (f *TrackFilter) With(name, value string) *TrackFilter {
	g := *f
	switch name {
	case "session_track_schema":
		g.Schema = onValue(value)
	case "session_track_state_change":
		g.StateChange = onValue(value)
	case "session_track_transaction_info":
		g.TxnInfo = TxnInfoLevel(value)
	case "session_track_system_variables":
		g.AllVars, g.Vars = value == "*", nil
		if !g.AllVars {
			g.Vars = ParseTrackedVars(value)
		}
	default:
		return f
	}
	return &g
}

// Updated returns the filter after the session_track_* changes among
// entries (a statement's own changes apply to its own OK packet, as in
// MariaDB); f itself when there are none.
func (f *TrackFilter) Updated(entries []byte) *TrackFilter {
	g := f
	EachTrack(entries, func(typ byte, data []byte) {
		if typ != TrackSystemVariable {
			return
		}
		name, value, ok := TrackVariable(data)
		if ok && len(name) > len("session_track_") && strings.EqualFold(string(name[:len("session_track_")]), "session_track_") {
			g = g.With(strings.ToLower(string(name)), string(value))
		}
	})
	return g
}

// onValue reads an ON/OFF variable value.
func onValue(v string) bool { return v == "1" || strings.EqualFold(v, "ON") }

// TxnInfoLevel reads a session_track_transaction_info value.
func TxnInfoLevel(v string) byte {
	switch strings.ToUpper(v) {
	case "STATE", "1":
		return TrackTxnState
	case "CHARACTERISTICS", "2":
		return TrackTxnCharacteristics
	}
	return TrackTxnOff
}

// keeps reports whether the filter passes an entry.
func (f *TrackFilter) keeps(typ byte, data []byte) bool {
	switch typ {
	case TrackSchema:
		return f.Schema
	case TrackStateChange:
		return f.StateChange
	case TrackTransactionState:
		return f.TxnInfo >= TrackTxnState
	case TrackTransactionCharacteristics:
		return f.TxnInfo >= TrackTxnCharacteristics
	case TrackSystemVariable:
		if f.AllVars {
			return true
		}
		name, _, ok := TrackVariable(data)
		if !ok {
			return false
		}
		for _, v := range f.Vars {
			if len(v) == len(name) && strings.EqualFold(v, string(name)) {
				return true
			}
		}
		return false
	}
	return true
}

// Append appends the entries of entries that the filter passes to b.
func (f *TrackFilter) Append(b, entries []byte) []byte {
	for len(entries) > 0 {
		typ := entries[0]
		data, n, ok := readLenEncString(entries[1:])
		if !ok {
			return b
		}
		if f.keeps(typ, data) {
			b = append(b, entries[:1+n]...)
		}
		entries = entries[1+n:]
	}
	return b
}
