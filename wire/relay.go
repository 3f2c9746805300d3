package wire

import (
	"encoding/binary"
	"io"
)

// BackendError wraps a failure to read from or write to the backend during
// a relay: the backend connection is unusable and must be destroyed.
type BackendError struct{ Err error }

func (e *BackendError) Error() string { return "backend connection: " + e.Err.Error() }
func (e *BackendError) Unwrap() error { return e.Err }

// ClientError wraps a failure to read from or write to the client during a
// relay: the client connection is gone. The backend connection is in an
// unknown protocol state and must be destroyed.
type ClientError struct{ Err error }

func (e *ClientError) Error() string { return "client connection: " + e.Err.Error() }
func (e *ClientError) Unwrap() error { return e.Err }

// ResponseKind says which response layout to expect from the backend.
type ResponseKind uint8

const (
	// ResponseQuery is the answer to COM_QUERY and COM_STMT_EXECUTE: OK,
	// ERR, a LOCAL INFILE request or a result set, repeated while the
	// server announces more results.
	ResponseQuery ResponseKind = iota
	// ResponseOK is a single OK or ERR packet (COM_INIT_DB, COM_PING,
	// COM_RESET_CONNECTION, COM_STMT_RESET, ...).
	ResponseOK
	// ResponsePrepare is the answer to COM_STMT_PREPARE.
	ResponsePrepare
	// ResponseFieldList is the answer to COM_FIELD_LIST: column definitions
	// up to an EOF.
	ResponseFieldList
	// ResponseFetch is the answer to COM_STMT_FETCH: rows up to an EOF.
	ResponseFetch
	// ResponseRaw is one packet of any content (COM_STATISTICS).
	ResponseRaw
)

// Result summarizes a relayed response.
type Result struct {
	// Status and Warnings come from the last OK or EOF packet.
	Status   uint16
	Warnings uint16
	// OK is the last OK packet's content (affected rows, insert id).
	OK OK
	// Err is the ERR packet that ended the response, if any.
	Err *SQLError
	// Packets counts packets written to the client.
	Packets int
	// Prepare holds the statement id, columns and params of a
	// COM_STMT_PREPARE answer.
	StmtID       uint32
	Columns      uint16
	Params       uint16
	HadResultSet bool
	// Rows counts the rows of the last result set of the response (a
	// result set starts the count again), as FOUND_ROWS() counts a plain
	// SELECT's.
	Rows          uint64
	LocalInfileRq bool
	// Held is set when Err was kept from the client (Relay.HoldReadOnly).
	Held bool
	// CursorOpened is set when a COM_STMT_EXECUTE sent with Relay.Cursor
	// opened a cursor: its rows come with COM_STMT_FETCH.
	CursorOpened bool
	// Track holds the session-state entries (CLIENT_SESSION_TRACK) of
	// every OK packet of the response, concatenated in order; read them
	// with EachTrack. It points into the relay's buffer and is valid until
	// the next Run.
	Track []byte
}

// Relay copies one response from a backend connection to a client
// connection packet by packet: rows are never decoded, nothing buffers a
// whole result. It converts between the backend's end-of-result packets
// (classic EOF, or OK packets with CLIENT_DEPRECATE_EOF) and the client's,
// gives the client only the session-state information it asked for, and
// rewrites sequence ids to the client's.
type Relay struct {
	// ClientCaps are the capabilities the client negotiated.
	ClientCaps uint32
	// BackendCaps are the backend connection's: with CLIENT_DEPRECATE_EOF
	// its results end with OK packets, with CLIENT_SESSION_TRACK those
	// carry session-state information.
	BackendCaps uint32
	// Trackers says which session-state entries a CLIENT_SESSION_TRACK
	// client receives (what MariaDB would send it with its own
	// session_track_* settings); nil passes every entry.
	Trackers *TrackFilter
	// TxnState and TxnChars are the session's transaction state (eight
	// characters) and characteristics as last reported, for a client that
	// turns session_track_transaction_info on: MariaDB reports them at once.
	TxnState, TxnChars string
	// Cursor is set for a COM_STMT_EXECUTE that asked for a cursor: only
	// then does the cursor-exists status bit after the column definitions
	// mean that no rows follow. (MariaDB also sets that bit on result sets
	// of a CALL whose procedure has a cursor open; their rows follow.)
	Cursor bool
	// StatusHint is the session's status, used for the EOF packet a
	// classic client expects after column definitions when the backend
	// (CLIENT_DEPRECATE_EOF) sends none; with StatusMoreResults when the
	// caller knows more results follow each result set (a CALL).
	StatusHint uint16
	// Results, when not zero, is how many results (OK packets and result
	// sets) the caller expects, for the more-results bit of those EOF
	// packets (a multi-statement batch of that many statements).
	Results int
	// StmtID, when not zero, replaces the statement id in the OK packet of
	// a COM_STMT_PREPARE answer: clients see the gateway's ids, not the
	// backend's.
	StmtID uint32
	// HoldReadOnly, when set, keeps an ERR 1290 (ER_OPTION_PREVENTS_STATEMENT,
	// the server is read-only) that is the whole response from the client:
	// Run returns it in Result.Err with Result.Held set and writes nothing,
	// so the caller may retry the statement on another server or send the
	// error itself.
	HoldReadOnly bool
	// OverrideTxn, when set, replaces the transaction bits (in
	// transaction, autocommit, read-only transaction) of every OK and EOF
	// status with TxnStatus's: for answers from a server other than the
	// one holding the client's transaction (the owner process).
	OverrideTxn bool
	TxnStatus   uint16
	// scratch holds the small packets the relay builds itself, okBuf a
	// rewritten OK packet; track and kept the session-state entries of a
	// response and of one rewritten packet. All are reused across Runs.
	scratch [16]byte
	okBuf   []byte
	track   []byte
	kept    []byte
	// sent counts packets written to the client in this Run; done the
	// results completed.
	sent, done int
}

const inspectLen = 16

// relay states
const (
	stFirst = iota
	stColumns
	stColumnsEOF
	stRows
	stParams
	stParamsEOF
	stPrepColumns
	stPrepColumnsEOF
	stDone
)

// Run relays one response of the given kind from backend to client. The
// client's sequence id must be set to the first id of the response (one past
// the command's), and the backend's likewise. It flushes the client at the
// end and whenever the backend has nothing more buffered, so results that
// trickle in reach the client without waiting for the end.
func (r *Relay) Run(client, backend *Conn, kind ResponseKind) (res Result, err error) {
	r.sent = 0
	r.track = r.track[:0]
	defer func() {
		res.Packets = r.sent
		if len(r.track) > 0 {
			res.Track = r.track
		}
	}()
	deprecateEOF := r.ClientCaps&CapDeprecateEOF != 0
	backendOKEnd := r.BackendCaps&CapDeprecateEOF != 0
	state := stFirst
	var remaining uint64
	var params, columns uint64
	cont := false      // the next packet continues a split packet
	refused := false   // a LOAD DATA LOCAL INFILE request was refused for the client
	defsEnded := false // column definitions ended without an EOF (backendOKEnd)
	r.done = 0
	for state != stDone {
		if backend.br.Buffered() < 4 {
			if err := client.bw.Flush(); err != nil {
				return res, &ClientError{err}
			}
		}
		hdr, err := backend.br.Peek(4)
		if err != nil {
			return res, &BackendError{eofErr(err)}
		}
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		if hdr[3] != backend.seq {
			return res, &BackendError{ErrSequence}
		}
		backend.seq++
		var p []byte // the payload, or its first bytes for a large packet
		whole := 4+n <= backend.br.Size()
		if backend.br.Buffered() < 4+min(n, inspectLen) || (whole && backend.br.Buffered() < 4+n) {
			// About to wait for the backend: let the client see what we have.
			if err := client.bw.Flush(); err != nil {
				return res, &ClientError{err}
			}
		}
		if whole {
			full, err := backend.br.Peek(4 + n)
			if err != nil {
				return res, &BackendError{eofErr(err)}
			}
			p = full[4:]
		} else {
			full, err := backend.br.Peek(4 + inspectLen)
			if err != nil {
				return res, &BackendError{eofErr(err)}
			}
			p = full[4:]
		}
		if cont {
			cont = n == MaxPacketPayload
			if err := r.forward(client, backend, n, whole); err != nil {
				return res, err
			}
			continue
		}
		cont = n == MaxPacketPayload
		if len(p) > n {
			p = p[:n]
		}
		first := byte(0)
		if n > 0 {
			first = p[0]
		}
		// An end-of-rows packet: a classic EOF is always short; with
		// CLIENT_DEPRECATE_EOF it is an OK packet with header 0xfe, which
		// a row can only start with when it is 16 MiB or more.
		isEnd := first == eofHeader && whole && (n < 9 || backendOKEnd && n < MaxPacketPayload)
		if first == errHeader && !cont && state != stColumns && state != stPrepColumns && state != stParams {
			res.Err = ParseERR(p)
			if r.HoldReadOnly && state == stFirst && r.sent == 0 && res.Err.Code == ErOptionPreventsStatement {
				if _, err := backend.br.Discard(4 + n); err != nil {
					return res, &BackendError{err}
				}
				res.Held = true
				return res, nil
			}
			if defsEnded && !deprecateEOF {
				if err := r.writeDefsEOF(client, 0, r.defsStatus()); err != nil {
					return res, err
				}
			}
			if err := r.forward(client, backend, n, whole); err != nil {
				return res, err
			}
			state = stDone
			continue
		}
		switch state {
		case stFirst:
			switch {
			case refused:
				// The backend's answer to the empty file stays here.
				if _, err := backend.br.Discard(4 + n); err != nil {
					return res, &BackendError{err}
				}
				res.Err = NewError(1148, "42000", "The used command is not allowed with this MariaDB version: the client did not enable LOAD DATA LOCAL INFILE")
				if err := client.WritePacket(AppendERR(r.scratch[:0], res.Err)); err != nil {
					return res, &ClientError{err}
				}
				state = stDone
				continue
			case kind == ResponseRaw:
				state = stDone
			case kind == ResponsePrepare && first == okHeader && n >= 12:
				res.StmtID = binary.LittleEndian.Uint32(p[1:])
				if r.StmtID != 0 {
					binary.LittleEndian.PutUint32(p[1:], r.StmtID)
				}
				columns = uint64(binary.LittleEndian.Uint16(p[5:]))
				params = uint64(binary.LittleEndian.Uint16(p[7:]))
				res.Columns, res.Params = uint16(columns), uint16(params)
				res.Warnings = binary.LittleEndian.Uint16(p[10:])
				state = r.afterPrepareOK(params, columns, &remaining)
			case kind == ResponseFieldList || kind == ResponseFetch:
				if isEnd {
					return res, r.finish(client, backend, p, &res, &state, deprecateEOF, true)
				}
				state = stRows
			case first == okHeader && whole:
				more, err := r.okPacket(client, backend, p, &res)
				if err != nil {
					return res, err
				}
				if kind != ResponseQuery || !more {
					state = stDone
				}
				continue
			case first == localInfileHeader && kind == ResponseQuery && !refused:
				res.LocalInfileRq = true
				if r.ClientCaps&CapLocalFiles == 0 {
					// The client did not allow LOCAL INFILE: answer the
					// backend with an empty file and refuse like MariaDB.
					refused = true
					if _, err := backend.br.Discard(4 + n); err != nil {
						return res, &BackendError{err}
					}
					if err := backend.WritePacket(nil); err != nil {
						return res, &BackendError{err}
					}
					if err := backend.Flush(); err != nil {
						return res, &BackendError{err}
					}
					continue
				}
				if err := r.forward(client, backend, n, whole); err != nil {
					return res, err
				}
				if err := r.localInfile(client, backend); err != nil {
					return res, err
				}
				continue
			case kind == ResponseQuery:
				cnt, _, good := readLenEnc(p)
				if !good || cnt == 0 {
					return res, &BackendError{ErrMalformed}
				}
				res.HadResultSet = true
				res.Rows = 0
				remaining = cnt
				state = stColumns
			default:
				state = stDone
			}
		case stColumns, stPrepColumns, stParams:
			if err := r.forward(client, backend, n, whole); err != nil {
				return res, err
			}
			remaining--
			if remaining > 0 {
				continue
			}
			if !backendOKEnd {
				state++ // the matching EOF state
				continue
			}
			// No EOF follows the definitions.
			switch state {
			case stColumns:
				// A classic client gets its EOF with the first row, or
				// with the cursor's answer.
				defsEnded = true
				state = stRows
				continue
			case stParams:
				state = stDone
				if columns > 0 {
					state, remaining = stPrepColumns, columns
				}
			case stPrepColumns:
				state = stDone
			}
			if !deprecateEOF {
				if err := r.writeDefsEOF(client, 0, r.defsStatus()); err != nil {
					return res, err
				}
			}
			continue
		case stColumnsEOF, stParamsEOF, stPrepColumnsEOF:
			if !isEnd || n >= 9 {
				return res, &BackendError{ErrMalformed}
			}
			res.Warnings, res.Status = ParseEOF(p)
			if r.OverrideTxn {
				res.Status = r.txnStatus(res.Status)
				setEOFStatus(p, res.Status)
			}
			next := stRows
			switch state {
			case stParamsEOF:
				next = stDone
				if columns > 0 {
					next, remaining = stPrepColumns, columns
				}
			case stPrepColumnsEOF:
				next = stDone
			case stColumnsEOF:
				if r.Cursor && res.Status&StatusCursorExists != 0 {
					// A cursor was opened: rows come with COM_STMT_FETCH.
					res.CursorOpened = true
					if err := r.finish(client, backend, p, &res, &state, deprecateEOF, true); err != nil {
						return res, err
					}
					continue
				}
			}
			state = next
			if deprecateEOF {
				// CLIENT_DEPRECATE_EOF drops the EOF after definitions.
				if _, err := backend.br.Discard(4 + n); err != nil {
					return res, &BackendError{err}
				}
				continue
			}
		case stRows:
			if defsEnded {
				defsEnded = false
				if isEnd && r.Cursor && kind == ResponseQuery {
					if _, st := endStatus(p); st&StatusCursorExists != 0 {
						// A cursor was opened: this packet stands for the
						// EOF after the definitions; rows come with
						// COM_STMT_FETCH.
						res.CursorOpened = true
						return res, r.finish(client, backend, p, &res, &state, deprecateEOF, true)
					}
				}
				if !deprecateEOF {
					if err := r.writeDefsEOF(client, 0, r.defsStatus()); err != nil {
						return res, err
					}
				}
			}
			if isEnd {
				if err := r.finish(client, backend, p, &res, &state, deprecateEOF, kind != ResponseQuery); err != nil {
					return res, err
				}
				continue
			}
			res.Rows++
		}
		if err := r.forward(client, backend, n, whole); err != nil {
			return res, err
		}
	}
	if err := client.bw.Flush(); err != nil {
		return res, &ClientError{err}
	}
	return res, nil
}

// afterPrepareOK picks the state after a COM_STMT_PREPARE OK packet.
func (r *Relay) afterPrepareOK(params, columns uint64, remaining *uint64) int {
	switch {
	case params > 0:
		*remaining = params
		return stParams
	case columns > 0:
		*remaining = columns
		return stPrepColumns
	}
	return stDone
}

// defsStatus is the status for the EOF after column definitions that a
// CLIENT_DEPRECATE_EOF backend does not send: the hint, with more results
// while the expected count says so.
func (r *Relay) defsStatus() uint16 {
	s := r.StatusHint
	if r.Results > 0 && r.done+1 < r.Results {
		s |= StatusMoreResults
	}
	return s
}

// writeDefsEOF writes the classic EOF packet that ends definitions, for a
// classic client of a backend that sends none.
func (r *Relay) writeDefsEOF(client *Conn, warnings, status uint16) error {
	// Only the session's lasting bits and what the caller predicts (more
	// results of a CALL): a cursor and the like belong to other
	// statements. MariaDB's no-index bits cannot be known here.
	status &= StatusInTrans | StatusAutocommit | StatusInTransReadonly | StatusNoBackslashEscapes |
		statusAnsiQuotes | StatusMoreResults
	if err := client.WritePacket(AppendEOF(r.scratch[:0], warnings, status)); err != nil {
		return &ClientError{err}
	}
	r.sent++
	return nil
}

// endStatus returns warnings and status of an end-of-rows packet: a
// classic EOF or an OK packet with header 0xfe.
func endStatus(p []byte) (warnings, status uint16) {
	if len(p) < 9 {
		return ParseEOF(p)
	}
	ok, _ := ParseOK(p)
	return ok.Warnings, ok.Status
}

// finish handles the packet that ends a row set (a classic EOF, or an OK
// packet with header 0xfe from a CLIENT_DEPRECATE_EOF backend): it is
// written in the client's form (an OK packet with header 0xfe for
// CLIENT_DEPRECATE_EOF clients, else a classic EOF) and decides whether
// more results follow.
func (r *Relay) finish(client, backend *Conn, p []byte, res *Result, state *int, deprecateEOF, single bool) error {
	n := len(p)
	classicIn := n < 9 && r.BackendCaps&CapDeprecateEOF == 0
	var more bool
	if classicIn {
		res.Warnings, res.Status = ParseEOF(p)
		if r.OverrideTxn {
			res.Status = r.txnStatus(res.Status)
			setEOFStatus(p, res.Status)
		}
		more = res.Status&StatusMoreResults != 0
	}
	if single || classicIn && !more {
		*state = stDone
	} else {
		*state = stFirst
	}
	switch {
	case !classicIn && deprecateEOF:
		m, err := r.okPacket(client, backend, p, res)
		if err != nil {
			return err
		}
		more = m
	case !classicIn:
		// An OK packet to a classic client: an EOF with its warnings
		// and status. Its session state is the gateway's only.
		ok, _, st, _ := parseOK(p, r.BackendCaps)
		r.track = append(r.track, st...)
		r.done++
		ok.Status = r.clientStatus(ok.Status, st)
		if r.OverrideTxn {
			ok.Status = r.txnStatus(ok.Status)
		}
		res.OK, res.Status, res.Warnings = ok, ok.Status, ok.Warnings
		more = ok.Status&StatusMoreResults != 0
		if _, err := backend.br.Discard(4 + n); err != nil {
			return &BackendError{err}
		}
		if err := client.WritePacket(AppendEOF(r.scratch[:0], ok.Warnings, ok.Status)); err != nil {
			return &ClientError{err}
		}
		r.sent++
	case deprecateEOF:
		// A classic EOF to a CLIENT_DEPRECATE_EOF client: an OK packet
		// with header 0xfe.
		b := append(r.scratch[:0], eofHeader, 0, 0, byte(res.Status), byte(res.Status>>8), byte(res.Warnings), byte(res.Warnings>>8))
		if _, err := backend.br.Discard(4 + n); err != nil {
			return &BackendError{err}
		}
		if err := client.WritePacket(b); err != nil {
			return &ClientError{err}
		}
		r.sent++
	default:
		if err := r.forward(client, backend, n, true); err != nil {
			return err
		}
	}
	if !classicIn {
		if single || !more {
			*state = stDone
		} else {
			*state = stFirst
		}
	}
	if *state == stDone {
		if err := client.bw.Flush(); err != nil {
			return &ClientError{err}
		}
	}
	return nil
}

// okPacket relays a whole OK packet (header 0x00, or 0xfe ending rows from
// a CLIENT_DEPRECATE_EOF backend to a CLIENT_DEPRECATE_EOF client). Its
// session-state entries are kept for the caller (Result.Track); the client
// gets only those it asked for (none without CLIENT_SESSION_TRACK), and an
// info string in its own form. The packet is copied only when it must
// change. more reports whether more results follow.
func (r *Relay) okPacket(client, backend *Conn, p []byte, res *Result) (more bool, err error) {
	ok, info, st, good := parseOK(p, r.BackendCaps)
	if !good {
		return false, &BackendError{ErrMalformed}
	}
	r.track = append(r.track, st...)
	r.done++
	clientTrack := r.ClientCaps&CapSessionTrack != 0
	backendTrack := r.BackendCaps&CapSessionTrack != 0
	keep := st
	if !clientTrack {
		keep = nil
	} else if len(st) > 0 && r.Trackers != nil {
		before := r.Trackers
		r.Trackers = r.Trackers.Updated(st)
		r.kept = r.Trackers.Append(r.kept[:0], st)
		if r.Trackers.TxnInfo > before.TxnInfo {
			// The client just turned the transaction tracker on:
			// MariaDB reports the current state (and characteristics)
			// at once, state first.
			r.kept = r.txnEntries(r.kept, st)
		}
		keep = r.kept
	}
	status := ok.Status
	if len(keep) == 0 {
		status &^= StatusSessionStateChange
	}
	if r.OverrideTxn {
		status = r.txnStatus(status)
	}
	ok.Status = status
	res.OK, res.Status, res.Warnings = ok, ok.Status, ok.Warnings
	n := len(p)
	if len(keep) == len(st) && (clientTrack == backendTrack || len(st) == 0 && backendTrack) {
		// The client gets the packet as it is, but for its status (a
		// MariaDB OK packet without session state is the same for every
		// client: the info is length-encoded either way).
		setOKStatus(p, status)
		return status&StatusMoreResults != 0, r.forward(client, backend, n, true)
	}
	b := append(r.okBuf[:0], p[0])
	b = appendLenEnc(b, ok.AffectedRows)
	b = appendLenEnc(b, ok.LastInsertID)
	b = append(b, byte(status), byte(status>>8), byte(ok.Warnings), byte(ok.Warnings>>8))
	switch {
	case clientTrack:
		if len(info) > 0 || len(keep) > 0 {
			b = appendLenEnc(b, uint64(len(info)))
			b = append(b, info...)
		}
		if len(keep) > 0 {
			b = appendLenEnc(b, uint64(len(keep)))
			b = append(b, keep...)
		}
	case backendTrack:
		// MariaDB sends the info length-encoded to every client.
		if len(info) > 0 {
			b = appendLenEnc(b, uint64(len(info)))
			b = append(b, info...)
		}
	default:
		b = append(b, info...) // as the backend sent it
	}
	r.okBuf = b[:0]
	if _, err := backend.br.Discard(4 + n); err != nil {
		return false, &BackendError{err}
	}
	if err := client.WritePacket(b); err != nil {
		return false, &ClientError{err}
	}
	r.sent++
	return status&StatusMoreResults != 0, nil
}

// txnEntries replaces the transaction entries of kept (a copy of some of
// st) with the current state and, at the characteristics level, the
// characteristics: from st when the backend reported them, else the
// session's last.
func (r *Relay) txnEntries(kept, st []byte) []byte {
	state, chars := r.TxnState, r.TxnChars
	if state == "" {
		state = "________"
	}
	EachTrack(st, func(typ byte, data []byte) {
		if s, ok := TrackString(data); ok {
			switch typ {
			case TrackTransactionState:
				state = string(s)
			case TrackTransactionCharacteristics:
				chars = string(s)
			}
		}
	})
	out := kept[:0]
	for rest := kept; len(rest) > 0; {
		_, n, ok := readLenEncString(rest[1:])
		if !ok {
			break
		}
		if t := rest[0]; t != TrackTransactionState && t != TrackTransactionCharacteristics {
			out = append(out, rest[:1+n]...)
		}
		rest = rest[1+n:]
	}
	out = appendTrack(out, TrackTransactionState, state)
	if r.Trackers.TxnInfo >= TrackTxnCharacteristics {
		out = appendTrack(out, TrackTransactionCharacteristics, chars)
	}
	return out
}

// clientStatus clears the session-state-changed bit when the client gets
// none of the entries st.
func (r *Relay) clientStatus(status uint16, st []byte) uint16 {
	if r.ClientCaps&CapSessionTrack == 0 || len(st) == 0 ||
		r.Trackers != nil && len(r.Trackers.Append(r.kept[:0], st)) == 0 {
		status &^= StatusSessionStateChange
	}
	return status
}

// forward copies the current backend packet (header already peeked, payload
// n bytes) to the client with the client's next sequence id.
func (r *Relay) forward(client, backend *Conn, n int, whole bool) error {
	if whole {
		full, _ := backend.br.Peek(4 + n)
		full[3] = client.seq
		client.seq++
		r.sent++
		_, werr := client.bw.Write(full)
		if _, err := backend.br.Discard(4 + n); err != nil {
			return &BackendError{err}
		}
		if werr != nil {
			return &ClientError{werr}
		}
		return nil
	}
	if err := client.writeHeader(n); err != nil {
		return &ClientError{err}
	}
	r.sent++
	if _, err := backend.br.Discard(4); err != nil {
		return &BackendError{err}
	}
	if _, err := io.CopyN(client.bw, backend.br, int64(n)); err != nil {
		// CopyN cannot tell which side failed; ask the writer.
		if ferr := client.bw.Flush(); ferr != nil {
			return &ClientError{ferr}
		}
		return &BackendError{eofErr(err)}
	}
	return nil
}

// localInfile relays a LOAD DATA LOCAL INFILE exchange: the client's file
// content goes to the backend until the client's empty packet. A client that
// did not negotiate CLIENT_LOCAL_FILES never sees the request: the backend
// gets an empty file, and the caller reports the refusal.
func (r *Relay) localInfile(client, backend *Conn) error {
	if err := client.bw.Flush(); err != nil {
		return &ClientError{err}
	}
	for {
		p, err := client.ReadPacketAux()
		if err != nil {
			// The backend waits for the end of the file: tell it, so the
			// connection stays usable, then report the client failure.
			_ = backend.WritePacket(nil)
			_ = backend.Flush()
			return &ClientError{err}
		}
		if err := backend.WritePacket(p); err != nil {
			return &BackendError{err}
		}
		if len(p) == 0 {
			break
		}
	}
	if err := backend.Flush(); err != nil {
		return &BackendError{err}
	}
	return nil
}

func eofErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// statusAnsiQuotes is MariaDB's SERVER_STATUS_ANSI_QUOTES.
const statusAnsiQuotes uint16 = 0x8000

// txnMask is the status bits OverrideTxn replaces.
const txnMask = StatusInTrans | StatusAutocommit | StatusInTransReadonly

// txnStatus applies OverrideTxn to a status.
func (r *Relay) txnStatus(s uint16) uint16 { return s&^txnMask | r.TxnStatus&txnMask }

// setOKStatus writes status into an OK packet's payload in place.
func setOKStatus(p []byte, status uint16) {
	i := 1
	for range 2 { // affected rows, last insert id
		_, n, ok := readLenEnc(p[i:])
		if !ok {
			return
		}
		i += n
	}
	if len(p) >= i+2 {
		binary.LittleEndian.PutUint16(p[i:], status)
	}
}

// setEOFStatus writes status into an EOF packet's payload in place.
func setEOFStatus(p []byte, status uint16) {
	if len(p) >= 5 {
		binary.LittleEndian.PutUint16(p[3:], status)
	}
}
