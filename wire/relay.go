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
	StmtID        uint32
	Columns       uint16
	Params        uint16
	HadResultSet  bool
	LocalInfileRq bool
	// Held is set when Err was kept from the client (Relay.HoldReadOnly).
	Held bool
}

// Relay copies one response from a backend connection to a client
// connection packet by packet: rows are never decoded, nothing buffers a
// whole result. It converts between the classic EOF protocol the backend
// speaks and CLIENT_DEPRECATE_EOF when the client asked for it, and it
// rewrites sequence ids to the client's.
type Relay struct {
	// ClientCaps are the capabilities the client negotiated.
	ClientCaps uint32
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
	// scratch holds packets the relay builds itself.
	scratch [16]byte
	// sent counts packets written to the client in this Run.
	sent int
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
	defer func() { res.Packets = r.sent }()
	deprecateEOF := r.ClientCaps&CapDeprecateEOF != 0
	state := stFirst
	var remaining uint64
	var params, columns uint64
	cont := false    // the next packet continues a split packet
	refused := false // a LOCAL INFILE request was refused for the client
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
		// An EOF packet is always short, so p holds all of it.
		isEOF := first == eofHeader && n < 9
		if first == errHeader && !cont && state != stColumns && state != stPrepColumns && state != stParams {
			res.Err = ParseERR(p)
			if r.HoldReadOnly && state == stFirst && r.sent == 0 && res.Err.Code == ErOptionPreventsStatement {
				if _, err := backend.br.Discard(4 + n); err != nil {
					return res, &BackendError{err}
				}
				res.Held = true
				return res, nil
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
				if err := client.WritePacket(AppendERR(r.scratch[:0:0], res.Err)); err != nil {
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
				if isEOF {
					return res, r.finishEOF(client, backend, p, &res, &state, deprecateEOF, true)
				}
				state = stRows
			case first == okHeader:
				ok, good := ParseOK(p)
				if !good {
					return res, &BackendError{ErrMalformed}
				}
				if r.OverrideTxn {
					ok.Status = r.txnStatus(ok.Status)
					setOKStatus(p, ok.Status)
				}
				res.OK, res.Status, res.Warnings = ok, ok.Status, ok.Warnings
				if kind != ResponseQuery || ok.Status&StatusMoreResults == 0 {
					state = stDone
				}
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
				remaining = cnt
				state = stColumns
			default:
				state = stDone
			}
		case stColumns, stPrepColumns, stParams:
			remaining--
			if remaining == 0 {
				state++ // the matching EOF state
			}
		case stColumnsEOF, stParamsEOF, stPrepColumnsEOF:
			if !isEOF {
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
				if res.Status&StatusCursorExists != 0 {
					// A cursor was opened: rows come with COM_STMT_FETCH.
					if err := r.finishEOF(client, backend, p, &res, &state, deprecateEOF, true); err != nil {
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
			if isEOF {
				if err := r.finishEOF(client, backend, p, &res, &state, deprecateEOF, kind != ResponseQuery); err != nil {
					return res, err
				}
				continue
			}
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

// finishEOF handles the EOF that ends a row set: it forwards it (as an OK
// packet with header 0xfe to CLIENT_DEPRECATE_EOF clients) and decides
// whether more results follow.
func (r *Relay) finishEOF(client, backend *Conn, p []byte, res *Result, state *int, deprecateEOF, single bool) error {
	res.Warnings, res.Status = ParseEOF(p)
	if r.OverrideTxn {
		res.Status = r.txnStatus(res.Status)
		setEOFStatus(p, res.Status)
	}
	n := len(p)
	if single || res.Status&StatusMoreResults == 0 {
		*state = stDone
	} else {
		*state = stFirst
	}
	if deprecateEOF {
		b := r.scratch[:0]
		b = append(b, eofHeader, 0, 0, byte(res.Status), byte(res.Status>>8), byte(res.Warnings), byte(res.Warnings>>8))
		if _, err := backend.br.Discard(4 + n); err != nil {
			return &BackendError{err}
		}
		if err := client.WritePacket(b); err != nil {
			return &ClientError{err}
		}
		r.sent++
		if *state == stDone {
			if err := client.bw.Flush(); err != nil {
				return &ClientError{err}
			}
		}
		return nil
	}
	if err := r.forward(client, backend, n, true); err != nil {
		return err
	}
	if *state == stDone {
		if err := client.bw.Flush(); err != nil {
			return &ClientError{err}
		}
	}
	return nil
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
