package wire

import (
	"encoding/binary"
	"time"
)

// The features of the relay on top of its steps, one small function each:
//
//   - EOF conversion: a classic client gets classic EOF packets, a
//     CLIENT_DEPRECATE_EOF client OK packets with header 0xfe, whatever the
//     backend sends (finish, definitionsEOFForClassic);
//   - session state: the tracker entries of OK packets are kept for the
//     caller and filtered for the client (okPacket, clientStatus,
//     txnEntries);
//   - the read-only hold (holdReadOnly);
//   - the transaction-status override (overrideEOF, txnStatus);
//   - the statement-id rewrite (rewriteStmtID);
//   - LOAD DATA LOCAL INFILE (localInfile).

// holdReadOnly reports whether the ERR packet the run is at (in
// Result.Err) is kept from the client: with HoldReadOnly, a read-only
// refusal (1290) that is the whole response.
func (r *Relay) holdReadOnly() bool {
	rs := &r.run
	return r.HoldReadOnly && rs.step == stepHead && rs.sent == 0 && rs.res.Err.Code == ErOptionPreventsStatement
}

// rewriteStmtID puts StmtID, when set, into a COM_STMT_PREPARE OK packet in
// place: clients see the gateway's ids, not the backend's.
func (r *Relay) rewriteStmtID(p []byte) {
	if r.StmtID != 0 {
		binary.LittleEndian.PutUint32(p[1:], r.StmtID)
	}
}

// txnMask is the status bits OverrideTxn replaces.
const txnMask = StatusInTrans | StatusAutocommit | StatusInTransReadonly

// txnStatus applies OverrideTxn to a status.
func (r *Relay) txnStatus(s uint16) uint16 {
	if !r.OverrideTxn {
		return s
	}
	return s&^txnMask | r.TxnStatus&txnMask
}

// overrideEOF applies OverrideTxn to a classic EOF packet in place and to
// its parsed status.
func (r *Relay) overrideEOF(p []byte, status *uint16) {
	if r.OverrideTxn {
		*status = r.txnStatus(*status)
		setEOFStatus(p, *status)
	}
}

// defsStatus is the status for the EOF after column definitions that a
// CLIENT_DEPRECATE_EOF backend does not send: the hint, with more results
// while the expected count says so.
func (r *Relay) defsStatus() uint16 {
	s := r.StatusHint
	if r.Results > 0 && r.run.done+1 < r.Results {
		s |= StatusMoreResults
	}
	return s
}

// statusAnsiQuotes is MariaDB's SERVER_STATUS_ANSI_QUOTES.
const statusAnsiQuotes uint16 = 0x8000

// definitionsEOFForClassic writes, for a classic client, the EOF packet
// that ends definitions a CLIENT_DEPRECATE_EOF backend ended without one,
// with warnings as its warning count: MariaDB's count so far (a
// COM_STMT_PREPARE answer's EOFs carry what preparing raised, as its OK
// packet does; clients read the count from the last EOF).
func (r *Relay) definitionsEOFForClassic(warnings uint16) error {
	if r.run.deprecateEOF {
		return nil
	}
	// Only the session's lasting bits and what the caller predicts (more
	// results of a CALL): a cursor and the like belong to other
	// statements. MariaDB's no-index bits cannot be known here.
	status := r.defsStatus() & (StatusInTrans | StatusAutocommit | StatusInTransReadonly | StatusNoBackslashEscapes |
		statusAnsiQuotes | StatusMoreResults)
	return r.write(AppendEOF(r.scratch[:0], warnings, status))
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

// finish takes the packet that ends a row set (a classic EOF, or an OK
// packet with header 0xfe from a CLIENT_DEPRECATE_EOF backend): it is
// written in the client's form (an OK packet with header 0xfe for
// CLIENT_DEPRECATE_EOF clients, else a classic EOF), and the response
// ends unless more results follow (never when single).
func (r *Relay) finish(pk *packet, single bool) error {
	rs := &r.run
	res := &rs.res
	classicIn := pk.n < 9 && !rs.backendOKEnd
	var more bool
	switch {
	case classicIn:
		res.Warnings, res.Status = ParseEOF(pk.p)
		r.overrideEOF(pk.p, &res.Status)
		more = res.Status&StatusMoreResults != 0
		if rs.deprecateEOF {
			// A classic EOF to a CLIENT_DEPRECATE_EOF client: an OK
			// packet with header 0xfe.
			b := append(r.scratch[:0], eofHeader, 0, 0, byte(res.Status), byte(res.Status>>8), byte(res.Warnings), byte(res.Warnings>>8))
			if err := r.drop(pk); err != nil {
				return err
			}
			if err := r.write(b); err != nil {
				return err
			}
		} else if err := r.forward(pk); err != nil {
			return err
		}
	case rs.deprecateEOF:
		m, err := r.okPacket(pk)
		if err != nil {
			return err
		}
		more = m
	default:
		// An OK packet to a classic client: an EOF with its warnings
		// and status. Its session state is the gateway's only.
		ok, _, st, _ := parseOK(pk.p, r.BackendCaps)
		r.track = append(r.track, st...)
		rs.done++
		ok.Status = r.txnStatus(r.clientStatus(ok.Status, st))
		res.OK, res.Status, res.Warnings = ok, ok.Status, ok.Warnings
		more = ok.Status&StatusMoreResults != 0
		if err := r.drop(pk); err != nil {
			return err
		}
		if err := r.write(AppendEOF(r.scratch[:0], ok.Warnings, ok.Status)); err != nil {
			return err
		}
	}
	if single || !more {
		rs.step = stepDone
		if err := rs.client.bw.Flush(); err != nil {
			return &ClientError{err}
		}
		return nil
	}
	rs.step = stepHead
	return nil
}

// okPacket relays a whole OK packet (header 0x00, or 0xfe ending rows from
// a CLIENT_DEPRECATE_EOF backend to a CLIENT_DEPRECATE_EOF client). Its
// session-state entries are kept for the caller (Result.Track); the client
// gets only those it asked for (none without CLIENT_SESSION_TRACK), and an
// info string in its own form. The packet is copied only when it must
// change. more reports whether more results follow.
func (r *Relay) okPacket(pk *packet) (more bool, err error) {
	rs := &r.run
	p := pk.p
	ok, info, st, good := parseOK(p, r.BackendCaps)
	if !good {
		return false, &BackendError{ErrMalformed}
	}
	r.track = append(r.track, st...)
	rs.done++
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
	status = r.txnStatus(status)
	ok.Status = status
	rs.res.OK, rs.res.Status, rs.res.Warnings = ok, ok.Status, ok.Warnings
	if len(keep) == len(st) && (clientTrack == backendTrack || len(st) == 0 && backendTrack) {
		// The client gets the packet as it is, but for its status (a
		// MariaDB OK packet without session state is the same for every
		// client: the info is length-encoded either way).
		setOKStatus(p, status)
		return status&StatusMoreResults != 0, r.forward(pk)
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
	if err := r.drop(pk); err != nil {
		return false, err
	}
	if err := r.write(b); err != nil {
		return false, err
	}
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

// localInfile takes a LOAD DATA LOCAL INFILE request: the client's file
// content goes to the backend until the client's empty packet. A client
// that did not negotiate CLIENT_LOCAL_FILES never sees the request: the
// backend gets an empty file, and the relay answers the client with
// MariaDB's refusal in place of the backend's answer (see head).
func (r *Relay) localInfile(pk *packet) error {
	rs := &r.run
	client, backend := rs.client, rs.backend
	rs.res.LocalInfileRq = true
	if r.ClientCaps&CapLocalFiles == 0 {
		rs.refused = true
		if err := r.drop(pk); err != nil {
			return err
		}
		if err := backend.WritePacket(nil); err != nil {
			return &BackendError{err}
		}
		if err := backend.Flush(); err != nil {
			return &BackendError{err}
		}
		return nil
	}
	if err := r.forward(pk); err != nil {
		return err
	}
	if err := client.bw.Flush(); err != nil {
		return &ClientError{err}
	}
	if r.InfileTimeout > 0 {
		defer client.NetConn().SetReadDeadline(time.Time{})
	}
	for {
		if r.InfileTimeout > 0 {
			// A client that stops sending its file must not hold the
			// backend connection.
			_ = client.NetConn().SetReadDeadline(time.Now().Add(r.InfileTimeout))
		}
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
