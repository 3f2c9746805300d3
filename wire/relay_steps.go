package wire

import (
	"encoding/binary"
	"math"
)

// The steps of a response: each takes the packet the relay is at, sends
// the client what it gets of it, and sets the next step. The features on
// top are in relay_hooks.go.

// head takes a response's first packet, or the next result's.
func (r *Relay) head(pk *packet) error {
	rs := &r.run
	switch {
	case rs.refused:
		// The backend's answer to the empty file stays here.
		if err := r.drop(pk); err != nil {
			return err
		}
		rs.res.Err = NewError(1148, "42000", "The used command is not allowed with this MariaDB version: the client did not enable LOAD DATA LOCAL INFILE")
		if err := rs.client.WritePacket(AppendERR(r.scratch[:0], rs.res.Err)); err != nil {
			return &ClientError{err}
		}
		rs.step = stepDone
		return nil
	case rs.kind == ResponseRaw:
		rs.step = stepDone
	case rs.kind == ResponsePrepare && pk.first == okHeader && pk.n >= 12:
		r.prepareOK(pk.p)
	case rs.kind == ResponseFieldList || rs.kind == ResponseFetch:
		if pk.isEnd {
			return r.finish(pk, true)
		}
		rs.step = stepRows
	case pk.first == okHeader && pk.whole:
		more, err := r.okPacket(pk)
		if err != nil {
			return err
		}
		if rs.kind != ResponseQuery || !more {
			rs.step = stepDone
		}
		return nil
	case pk.first == localInfileHeader && rs.kind == ResponseQuery:
		return r.localInfile(pk)
	case rs.kind == ResponseQuery:
		cnt, _, good := readLenEnc(pk.p)
		if !good || cnt == 0 {
			return &BackendError{ErrMalformed}
		}
		rs.res.HadResultSet = true
		rs.res.Rows = 0
		rs.remaining = cnt
		rs.step = stepColumns
		r.cols = r.cols[:0]
	default:
		rs.step = stepDone
	}
	return r.forward(pk)
}

// prepareOK reads a COM_STMT_PREPARE OK packet (rewriting its statement
// id) and picks the definitions that follow.
func (r *Relay) prepareOK(p []byte) {
	rs := &r.run
	rs.res.StmtID = binary.LittleEndian.Uint32(p[1:])
	r.rewriteStmtID(p)
	rs.columns = uint64(binary.LittleEndian.Uint16(p[5:]))
	rs.params = uint64(binary.LittleEndian.Uint16(p[7:]))
	rs.res.Columns, rs.res.Params = uint16(rs.columns), uint16(rs.params)
	rs.res.Warnings = binary.LittleEndian.Uint16(p[10:])
	switch {
	case rs.params > 0:
		rs.step, rs.remaining = stepParams, rs.params
	case rs.columns > 0:
		rs.step, rs.remaining = stepPrepColumns, rs.columns
	default:
		rs.step = stepDone
	}
}

// afterParams is the step after a prepared statement's parameter
// definitions.
func (r *Relay) afterParams() {
	rs := &r.run
	rs.step = stepDone
	if rs.columns > 0 {
		rs.step, rs.remaining = stepPrepColumns, rs.columns
	}
}

// definition takes one column or parameter definition.
func (r *Relay) definition(pk *packet) error {
	rs := &r.run
	binaryCols := r.BinaryRows && rs.step == stepColumns
	if binaryCols {
		if err := r.binaryColumn(pk); err != nil {
			return err
		}
	}
	if err := r.forward(pk); err != nil {
		return err
	}
	rs.remaining--
	if !binaryCols {
		n, err := r.forwardBuffered(int(min(rs.remaining, math.MaxInt32)), false)
		rs.remaining -= uint64(n)
		if err != nil {
			return err
		}
	}
	if rs.remaining > 0 {
		return nil
	}
	if !rs.backendOKEnd {
		rs.step++ // the matching EOF step
		return nil
	}
	// No EOF follows the definitions.
	switch rs.step {
	case stepColumns:
		// A classic client gets its EOF with the first row, or with the
		// cursor's answer.
		rs.defsEnded = true
		rs.step = stepRows
		return nil
	case stepParams:
		r.afterParams()
	case stepPrepColumns:
		rs.step = stepDone
	}
	return r.definitionsEOFForClassic(rs.res.Warnings)
}

// definitionsEOF takes the EOF after definitions (a classic backend).
func (r *Relay) definitionsEOF(pk *packet) error {
	rs := &r.run
	if !pk.isEnd || pk.n >= 9 {
		return &BackendError{ErrMalformed}
	}
	rs.res.Warnings, rs.res.Status = ParseEOF(pk.p)
	r.overrideEOF(pk.p, &rs.res.Status)
	switch rs.step {
	case stepParamsEOF:
		r.afterParams()
	case stepPrepColumnsEOF:
		rs.step = stepDone
	case stepColumnsEOF:
		if r.Cursor && rs.res.Status&StatusCursorExists != 0 {
			// A cursor was opened: rows come with COM_STMT_FETCH.
			rs.res.CursorOpened = true
			return r.finish(pk, true)
		}
		rs.step = stepRows
	}
	if rs.deprecateEOF {
		// CLIENT_DEPRECATE_EOF drops the EOF after definitions.
		return r.drop(pk)
	}
	return r.forward(pk)
}

// row takes a row, or the packet that ends the rows.
func (r *Relay) row(pk *packet) error {
	rs := &r.run
	if rs.defsEnded {
		rs.defsEnded = false
		if pk.isEnd && r.Cursor && rs.kind == ResponseQuery {
			if _, st := endStatus(pk.p); st&StatusCursorExists != 0 {
				// A cursor was opened: this packet stands for the EOF
				// after the definitions; rows come with COM_STMT_FETCH.
				rs.res.CursorOpened = true
				return r.finish(pk, true)
			}
		}
		if err := r.definitionsEOFForClassic(0); err != nil {
			return err
		}
	}
	if pk.isEnd {
		return r.finish(pk, rs.kind != ResponseQuery)
	}
	if rs.cut != nil {
		return r.drop(pk)
	}
	if r.MaxRows > 0 && rs.res.Rows >= r.MaxRows && r.OnMaxRows != nil {
		rs.cut = r.OnMaxRows()
		return r.drop(pk)
	}
	rs.res.Rows++
	if r.BinaryRows && rs.kind == ResponseQuery {
		return r.binaryRow(pk)
	}
	if err := r.forward(pk); err != nil {
		return err
	}
	limit := math.MaxInt
	if r.MaxRows > 0 {
		limit = int(min(r.MaxRows-rs.res.Rows, math.MaxInt32))
	}
	n, err := r.forwardBuffered(limit, true)
	rs.res.Rows += uint64(n)
	return err
}

// forwardBuffered forwards, in one write, up to max packets that follow
// and are already whole in the read buffer: the bulk of a result set's
// rows or definitions, without a step per packet. rows says they are
// rows: then it stops before anything that may not be one (a packet
// starting with 0xfe or 0xff, an empty one), which the steps take. It
// never takes a split packet, nor the rest of one.
func (r *Relay) forwardBuffered(max int, rows bool) (int, error) {
	rs := &r.run
	client, backend := rs.client, rs.backend
	avail := backend.br.Buffered()
	if avail < 5 || max <= 0 || rs.cont || rs.cut != nil {
		return 0, nil
	}
	b, _ := backend.br.Peek(avail)
	off, count := 0, 0
	seq, cseq := backend.seq, client.seq
	for count < max && off+5 <= len(b) {
		n := int(b[off]) | int(b[off+1])<<8 | int(b[off+2])<<16
		if n == 0 || n >= MaxPacketPayload || off+4+n > len(b) || b[off+3] != seq ||
			rows && (b[off+4] == eofHeader || b[off+4] == errHeader) {
			break
		}
		b[off+3] = cseq
		seq++
		cseq++
		count++
		off += 4 + n
	}
	if count == 0 {
		return 0, nil
	}
	backend.seq, client.seq = seq, cseq
	rs.sent += count
	rs.res.Bytes += uint64(off)
	_, werr := client.bw.Write(b[:off])
	if _, err := backend.br.Discard(off); err != nil {
		return count, &BackendError{err}
	}
	if werr != nil {
		return count, &ClientError{werr}
	}
	return count, nil
}

// errPacket takes an ERR packet: it ends the response, unless the
// read-only hold keeps it from the client.
func (r *Relay) errPacket(pk *packet) error {
	rs := &r.run
	rs.res.Err = ParseERR(pk.p)
	if r.holdReadOnly() {
		rs.res.Held = true
		rs.step = stepDone
		return r.drop(pk)
	}
	if rs.defsEnded && !(r.Cursor && rs.kind == ResponseQuery) {
		if err := r.definitionsEOFForClassic(0); err != nil {
			return err
		}
	}
	// (A statement run for a cursor that fails while MariaDB
	// materializes it has its ERR where the EOF after the definitions
	// would be: the classic client gets no EOF first.)
	rs.step = stepDone
	return r.forward(pk)
}
