package wire

import (
	"io"
	"time"
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
	// Midway is set when the response broke off (Run returned an error)
	// within definitions: a result set's column definitions, a prepared
	// statement's parameters or columns, or the EOF after them. The
	// client, which has the packets before, reads whatever comes next as
	// one more definition, an ERR packet too: the only clean end is its
	// connection closed.
	Midway bool
	// CursorOpened is set when a COM_STMT_EXECUTE sent with Relay.Cursor
	// opened a cursor: its rows come with COM_STMT_FETCH.
	CursorOpened bool
	// Bytes counts the bytes of the packets relayed to the client.
	Bytes uint64
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
	// An ERR right after the definitions then stands where their EOF
	// would be: the statement failed while MariaDB materialized it.
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
	// BeforeEnd, when set, is called with the result once the response
	// has ended, before its last bytes are flushed to the client: for
	// what must be done before the client can send its next command.
	BeforeEnd func(res *Result)
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
	// InfileTimeout, when set, bounds the wait for each packet of a LOAD
	// DATA LOCAL INFILE file from the client; past it the relay fails
	// with a ClientError (the backend gets the end of the file first).
	InfileTimeout time.Duration
	// BinaryRows, when set, sends the rows of the backend's text-protocol
	// result sets to the client in the binary-protocol row format, by the
	// types of their column definitions: the answer to a COM_STMT_EXECUTE
	// that was sent to a server without the binary protocol (the owner)
	// as a text query. Rows are converted one at a time as they arrive.
	BinaryRows bool
	// MaxRows, when not zero, cuts a result set past that many rows:
	// OnMaxRows is called once, as the row after the last one allowed
	// arrives, and returns the error the client gets in place of the
	// rest of the response, which is read from the backend and dropped
	// (the caller stops the statement there). Result.Err is that error.
	MaxRows   uint64
	OnMaxRows func() *SQLError
	// scratch holds the small packets the relay builds itself, okBuf a
	// rewritten OK packet; track and kept the session-state entries of a
	// response and of one rewritten packet. All are reused across Runs.
	scratch [16]byte
	okBuf   []byte
	track   []byte
	kept    []byte
	// cols are the column types of the result set, rowBuf the converted
	// row (BinaryRows).
	cols   []colType
	rowBuf []byte
	// run is the state of the Run in progress.
	run runState
}

// runState is what one Run tracks between packets.
type runState struct {
	client, backend *Conn
	kind            ResponseKind
	res             Result
	// step is what the next packet is expected to be; remaining counts
	// the definitions left in a step of definitions; params and columns
	// are a COM_STMT_PREPARE answer's counts.
	step            step
	remaining       uint64
	params, columns uint64
	sent, done      int  // packets written to the client; results completed
	cont            bool // the next packet continues a split packet
	refused         bool // a LOAD DATA LOCAL INFILE request was refused for the client
	defsEnded       bool // column definitions ended without an EOF (a CLIENT_DEPRECATE_EOF backend)
	deprecateEOF    bool // the client has CLIENT_DEPRECATE_EOF
	backendOKEnd    bool // the backend has CLIENT_DEPRECATE_EOF
	// pk is the packet the run is at.
	pk packet
	// cut is the error of a response cut at MaxRows: the rest of it is
	// dropped, and the client gets cut at its end.
	cut *SQLError
}

// step is what the relay expects of the next packet of a response.
type step uint8

const (
	// stepHead is a response's first packet, or the next result's: OK,
	// ERR, a LOCAL INFILE request, a result set's column count, a
	// COM_STMT_PREPARE OK, ...
	stepHead step = iota
	// stepColumns, stepParams and stepPrepColumns are definitions of a
	// result set's columns, or of a prepared statement's parameters and
	// columns; each is followed by its EOF step (classic backends only).
	stepColumns
	stepColumnsEOF
	stepParams
	stepParamsEOF
	stepPrepColumns
	stepPrepColumnsEOF
	// stepRows is rows up to the packet that ends them.
	stepRows
	stepDone
)

// inDefinitions reports whether the packets expected are definitions,
// which may start with any byte (an ERR header included).
func (s step) inDefinitions() bool {
	return s == stepColumns || s == stepParams || s == stepPrepColumns
}

// midway reports whether the client expects definitions or the EOF after
// them: a response that breaks off there cannot end with an ERR packet.
func (s step) midway() bool {
	return s >= stepColumns && s <= stepPrepColumnsEOF
}

// inspectLen is how much of a packet too large for the read buffer the
// relay looks at.
const inspectLen = 16

// packet is the backend packet the relay is at: the header is read, the
// payload is not consumed yet.
type packet struct {
	// n is the payload's length; whole says it fits the read buffer, so p
	// is all of it, else p is its first bytes.
	n     int
	whole bool
	p     []byte
	// first is the payload's first byte (0 when empty); splits says the
	// packet is the first part of a split one (its length is the
	// largest).
	first  byte
	splits bool
	// isEnd says it ends rows: a classic EOF is always short; with
	// CLIENT_DEPRECATE_EOF it is an OK packet with header 0xfe, which a
	// row can only start with when it is 16 MiB or more.
	isEnd bool
}

// Run relays one response of the given kind from backend to client. The
// client's sequence id must be set to the first id of the response (one past
// the command's), and the backend's likewise. It flushes the client at the
// end and whenever the backend has nothing more buffered, so results that
// trickle in reach the client without waiting for the end.
//
// Each packet goes to the step that expects it (relay_steps.go); the
// features on top (EOF conversion, session-state filtering, the read-only
// hold, the transaction-status override, the statement-id rewrite, LOCAL
// INFILE) are small functions the steps call (relay_hooks.go).
func (r *Relay) Run(client, backend *Conn, kind ResponseKind) (res Result, err error) {
	r.track = r.track[:0]
	rs := &r.run
	*rs = runState{
		client: client, backend: backend, kind: kind,
		deprecateEOF: r.ClientCaps&CapDeprecateEOF != 0,
		backendOKEnd: r.BackendCaps&CapDeprecateEOF != 0,
	}
	err = r.steps()
	res = rs.res
	res.Packets = rs.sent
	res.Midway = err != nil && rs.step.midway()
	if len(r.track) > 0 {
		res.Track = r.track
	}
	rs.client, rs.backend, rs.pk.p = nil, nil, nil
	return res, err
}

// steps hands each packet of the response to its step until the response
// ends.
func (r *Relay) steps() error {
	rs := &r.run
	pk := &rs.pk
	for rs.step != stepDone {
		if err := r.next(pk); err != nil {
			return err
		}
		var err error
		if pk.first == errHeader && !pk.splits && !rs.step.inDefinitions() {
			if err := r.errPacket(pk); err != nil {
				return err
			}
			continue
		}
		switch rs.step {
		case stepHead:
			err = r.head(pk)
		case stepColumns, stepParams, stepPrepColumns:
			err = r.definition(pk)
		case stepColumnsEOF, stepParamsEOF, stepPrepColumnsEOF:
			err = r.definitionsEOF(pk)
		case stepRows:
			err = r.row(pk)
		}
		if err != nil {
			return err
		}
	}
	if rs.cut != nil {
		rs.res.Err = rs.cut
		if err := rs.client.WritePacket(AppendERR(r.scratch[:0], rs.cut)); err != nil {
			return &ClientError{err}
		}
		rs.sent++
	}
	if r.BeforeEnd != nil {
		r.BeforeEnd(&rs.res)
	}
	if err := r.run.client.bw.Flush(); err != nil {
		return &ClientError{err}
	}
	return nil
}

// next reads the header of the backend's next logical packet and peeks its
// payload (all of it when it fits the read buffer). The parts of a split
// packet after the first are forwarded as they come. Before it waits for
// the backend, the client gets what is buffered for it.
func (r *Relay) next(pk *packet) error {
	rs := &r.run
	client, backend := rs.client, rs.backend
	for {
		if backend.br.Buffered() < 4 {
			if err := client.bw.Flush(); err != nil {
				return &ClientError{err}
			}
		}
		hdr, err := backend.br.Peek(4)
		if err != nil {
			return &BackendError{eofErr(err)}
		}
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		if hdr[3] != backend.seq {
			return &BackendError{ErrSequence}
		}
		backend.seq++
		*pk = packet{n: n, whole: 4+n <= backend.br.Size()}
		if backend.br.Buffered() < 4+min(n, inspectLen) || (pk.whole && backend.br.Buffered() < 4+n) {
			// About to wait for the backend: let the client see what we have.
			if err := client.bw.Flush(); err != nil {
				return &ClientError{err}
			}
		}
		peek := inspectLen
		if pk.whole {
			peek = n
		}
		full, err := backend.br.Peek(4 + peek)
		if err != nil {
			return &BackendError{eofErr(err)}
		}
		pk.p = full[4:]
		if rs.cont {
			rs.cont = n == MaxPacketPayload
			if err := r.forward(pk); err != nil {
				return err
			}
			continue
		}
		pk.splits = n == MaxPacketPayload
		rs.cont = pk.splits
		if len(pk.p) > n {
			pk.p = pk.p[:n]
		}
		if n > 0 {
			pk.first = pk.p[0]
		}
		pk.isEnd = pk.first == eofHeader && pk.whole && (n < 9 || rs.backendOKEnd && n < MaxPacketPayload)
		return nil
	}
}

// forward copies the packet to the client with the client's next
// sequence id.
func (r *Relay) forward(pk *packet) error {
	rs := &r.run
	client, backend := rs.client, rs.backend
	if rs.cut != nil {
		return r.drop(pk)
	}
	rs.res.Bytes += uint64(4 + pk.n)
	if pk.whole {
		rs.sent++
		full, _ := backend.br.Peek(4 + pk.n)
		full[3] = client.seq
		client.seq++
		_, werr := client.bw.Write(full)
		if _, err := backend.br.Discard(4 + pk.n); err != nil {
			return &BackendError{err}
		}
		if werr != nil {
			return &ClientError{werr}
		}
		return nil
	}
	if err := client.writeHeader(pk.n); err != nil {
		return &ClientError{err}
	}
	rs.sent++
	if _, err := backend.br.Discard(4); err != nil {
		return &BackendError{err}
	}
	if _, err := io.CopyN(client.bw, backend.br, int64(pk.n)); err != nil {
		// CopyN cannot tell which side failed; ask the writer.
		if ferr := client.bw.Flush(); ferr != nil {
			return &ClientError{ferr}
		}
		return &BackendError{eofErr(err)}
	}
	return nil
}

// drop consumes the packet without sending it.
func (r *Relay) drop(pk *packet) error {
	if _, err := r.run.backend.br.Discard(4 + pk.n); err != nil {
		return &BackendError{err}
	}
	return nil
}

// write sends a packet the relay built itself.
func (r *Relay) write(p []byte) error {
	if r.run.cut != nil {
		return nil
	}
	r.run.res.Bytes += uint64(4 + len(p))
	if err := r.run.client.WritePacket(p); err != nil {
		return &ClientError{err}
	}
	r.run.sent++
	return nil
}

func eofErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
