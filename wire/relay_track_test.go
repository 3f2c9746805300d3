package wire

import (
	"bytes"
	"io"
	"testing"
)

// okEnd is the OK packet with header 0xfe that ends rows on a
// CLIENT_DEPRECATE_EOF connection.
func okEnd(status, warnings uint16, track []byte) []byte {
	b := []byte{eofHeader, 0, 0, byte(status), byte(status >> 8), byte(warnings), byte(warnings >> 8)}
	if len(track) > 0 {
		b = append(b, 0) // empty info
		b = appendLenEnc(b, uint64(len(track)))
		b = append(b, track...)
	}
	return b
}

// okTracked is an OK packet from a CLIENT_SESSION_TRACK backend.
func okTracked(affected, id uint64, status uint16, info string, track []byte) []byte {
	b := []byte{okHeader}
	b = appendLenEnc(b, affected)
	b = appendLenEnc(b, id)
	if len(track) > 0 {
		status |= StatusSessionStateChange
	}
	b = append(b, byte(status), byte(status>>8), 0, 0)
	if info != "" || len(track) > 0 {
		b = appendLenEncString(b, info)
	}
	if len(track) > 0 {
		b = appendLenEnc(b, uint64(len(track)))
		b = append(b, track...)
	}
	return b
}

// trackEntry builds one session-state entry.
func trackEntry(typ byte, parts ...string) []byte {
	var data []byte
	for _, p := range parts {
		data = appendLenEncString(data, p)
	}
	return appendLenEncString([]byte{typ}, string(data))
}

const trackedBackend = CapProtocol41 | CapDeprecateEOF | CapSessionTrack

func relayTracked(t *testing.T, r *Relay, kind ResponseKind, backendBytes []byte) ([][]byte, Result) {
	t.Helper()
	var toClient bytes.Buffer
	client := NewConn(&memConn{r: bytes.NewReader(nil), w: &toClient}, 4096, 4096)
	backend := NewConn(&memConn{r: bytes.NewReader(backendBytes), w: io.Discard}, 4096, 4096)
	client.SetSeq(1)
	backend.SetSeq(1)
	r.BackendCaps = trackedBackend
	res, err := r.Run(client, backend, kind)
	if err != nil {
		t.Fatal(err)
	}
	seqs, ps := splitPackets(t, toClient.Bytes())
	for i, s := range seqs {
		if s != byte(i+1) {
			t.Fatalf("sequence ids %v, want 1..%d", seqs, len(seqs))
		}
	}
	return ps, res
}

// A classic client of a CLIENT_DEPRECATE_EOF backend gets the EOF after
// the definitions and a classic EOF at the end, with the final OK's
// status and warnings; the tracker data stays with the gateway.
func TestRelayDeprecateBackendClassicClient(t *testing.T) {
	gtid := trackEntry(TrackSystemVariable, "last_gtid", "0-1-5")
	in := packets(1, []byte{1}, colDef("a"), textRow("1"), textRow("2"), okEnd(StatusAutocommit|StatusSessionStateChange, 2, gtid))
	ps, res := relayTracked(t, &Relay{ClientCaps: CapProtocol41, StatusHint: StatusAutocommit | StatusCursorExists}, ResponseQuery, in)
	if len(ps) != 6 {
		t.Fatalf("want count, def, EOF, 2 rows, EOF; got %d packets", len(ps))
	}
	if !bytes.Equal(ps[2], AppendEOF(nil, 0, StatusAutocommit)) {
		t.Fatalf("definitions EOF %x: a cursor bit of another statement must not leak into it", ps[2])
	}
	if !bytes.Equal(ps[5], AppendEOF(nil, 2, StatusAutocommit)) {
		t.Fatalf("final EOF %x", ps[5])
	}
	if !bytes.Equal(res.Track, gtid) {
		t.Fatalf("Track %x, want %x", res.Track, gtid)
	}
}

// A CLIENT_DEPRECATE_EOF client without CLIENT_SESSION_TRACK gets the
// final OK without the gateway's tracker data and without the
// state-changed bit; an OK packet's info stays (length-encoded, as MariaDB
// sends it).
func TestRelayStripsTrackersForUntrackedClient(t *testing.T) {
	schema := trackEntry(TrackSchema, "db2")
	ps, res := relayTracked(t, &Relay{ClientCaps: CapProtocol41 | CapDeprecateEOF}, ResponseQuery,
		packets(1, okTracked(2, 7, StatusAutocommit, "Rows matched: 2  Changed: 2  Warnings: 0", schema)))
	want := []byte{okHeader, 2, 7, byte(StatusAutocommit), 0, 0, 0}
	want = appendLenEncString(want, "Rows matched: 2  Changed: 2  Warnings: 0")
	if len(ps) != 1 || !bytes.Equal(ps[0], want) {
		t.Fatalf("got %q, want %q", ps, want)
	}
	if res.OK.AffectedRows != 2 || res.OK.LastInsertID != 7 || !bytes.Equal(res.Track, schema) {
		t.Fatalf("result %+v", res)
	}
}

// A CLIENT_SESSION_TRACK client sees only what its own trackers cover:
// by default the schema, not last_gtid or the state-change flag.
func TestRelayFiltersTrackersForTrackedClient(t *testing.T) {
	schema := trackEntry(TrackSchema, "db2")
	track := append(append(append([]byte(nil), trackEntry(TrackSystemVariable, "last_gtid", "0-1-9")...), schema...), trackEntry(TrackStateChange, "1")...)
	caps := CapProtocol41 | CapDeprecateEOF | CapSessionTrack
	ps, _ := relayTracked(t, &Relay{ClientCaps: caps, Trackers: DefaultTrackFilter()}, ResponseQuery,
		packets(1, okTracked(0, 0, StatusAutocommit, "", track)))
	if len(ps) != 1 || !bytes.Equal(ps[0], okTracked(0, 0, StatusAutocommit, "", schema)) {
		t.Fatalf("got %q", ps)
	}
	// Nothing left for the client: no flag, no block.
	ps, _ = relayTracked(t, &Relay{ClientCaps: caps, Trackers: DefaultTrackFilter()}, ResponseQuery,
		packets(1, okTracked(1, 0, StatusAutocommit, "", trackEntry(TrackSystemVariable, "last_gtid", "0-1-9"))))
	if len(ps) != 1 || !bytes.Equal(ps[0], okTracked(1, 0, StatusAutocommit, "", nil)) {
		t.Fatalf("got %q", ps)
	}
	// session_track_system_variables='*' passes it.
	all := &TrackFilter{AllVars: true}
	ps, _ = relayTracked(t, &Relay{ClientCaps: caps, Trackers: all}, ResponseQuery,
		packets(1, okTracked(1, 0, StatusAutocommit, "", trackEntry(TrackSystemVariable, "last_gtid", "0-1-9"))))
	if !bytes.Equal(ps[0], okTracked(1, 0, StatusAutocommit, "", trackEntry(TrackSystemVariable, "last_gtid", "0-1-9"))) {
		t.Fatalf("got %q", ps)
	}
}

// A cursor opened by COM_STMT_EXECUTE: MariaDB with CLIENT_DEPRECATE_EOF
// answers the definitions with an OK packet carrying the cursor bit; a
// classic client gets it as the EOF after the definitions, and no rows.
func TestRelayCursorFromDeprecateBackend(t *testing.T) {
	in := packets(1, []byte{1}, colDef("a"), okEnd(StatusAutocommit|StatusCursorExists, 0, nil))
	ps, res := relayTracked(t, &Relay{ClientCaps: CapProtocol41, Cursor: true}, ResponseQuery, in)
	if len(ps) != 3 || !bytes.Equal(ps[2], AppendEOF(nil, 0, StatusAutocommit|StatusCursorExists)) || !res.CursorOpened {
		t.Fatalf("got %q, %+v", ps, res)
	}
}

// The cursor bit on a text CALL's result set (the procedure has a cursor
// open) does not end the relay: the rows follow.
func TestRelayCursorBitOfCallHasRows(t *testing.T) {
	in := packets(1, []byte{1}, colDef("x"), eofPkt(0, 0x6a), textRow("1"), eofPkt(0, 0x6a), AppendOK(nil, OK{Status: 0x22}))
	out, res, _, err := relayOnce(t, CapProtocol41, ResponseQuery, in, nil)
	if err != nil || !bytes.Equal(out, in) || res.CursorOpened || res.Status != 0x22 {
		t.Fatalf("err %v, res %+v, out %x", err, res, out)
	}
	in = packets(1, []byte{1}, colDef("x"), textRow("1"), okEnd(0x6a, 0, nil), AppendOK(nil, OK{Status: 0x22}))
	ps, res := relayTracked(t, &Relay{ClientCaps: CapProtocol41}, ResponseQuery, in)
	if len(ps) != 6 || res.Status != 0x22 {
		t.Fatalf("got %d packets, %+v", len(ps), res)
	}
}

// COM_STMT_PREPARE from a CLIENT_DEPRECATE_EOF backend: a classic client
// gets an EOF after the parameters and after the columns.
func TestRelayPrepareDeprecateBackend(t *testing.T) {
	ok := []byte{0, 7, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0}
	in := packets(1, ok, colDef("?"), colDef("?"), colDef("a"))
	ps, res := relayTracked(t, &Relay{ClientCaps: CapProtocol41, StmtID: 3}, ResponsePrepare, in)
	if len(ps) != 6 || !IsEOF(ps[3]) || !IsEOF(ps[5]) || res.StmtID != 7 || ps[0][1] != 3 {
		t.Fatalf("got %q, %+v", ps, res)
	}
	ps, _ = relayTracked(t, &Relay{ClientCaps: CapProtocol41 | CapDeprecateEOF}, ResponsePrepare, packets(1, ok, colDef("?"), colDef("?"), colDef("a")))
	if len(ps) != 4 {
		t.Fatalf("CLIENT_DEPRECATE_EOF client: %d packets, want 4", len(ps))
	}
}

// The more-results bit of a synthesized definitions EOF follows the
// expected number of results of a batch.
func TestRelayBatchMoreResults(t *testing.T) {
	in := packets(1,
		[]byte{1}, colDef("a"), textRow("1"), okEnd(StatusAutocommit|StatusMoreResults, 0, nil),
		[]byte{1}, colDef("b"), textRow("2"), okEnd(StatusAutocommit, 0, nil))
	ps, _ := relayTracked(t, &Relay{ClientCaps: CapProtocol41, StatusHint: StatusAutocommit, Results: 2}, ResponseQuery, in)
	if len(ps) != 10 {
		t.Fatalf("%d packets", len(ps))
	}
	if _, st := ParseEOF(ps[2]); st != StatusAutocommit|StatusMoreResults {
		t.Fatalf("first definitions EOF status %#x", st)
	}
	if _, st := ParseEOF(ps[7]); st != StatusAutocommit {
		t.Fatalf("last definitions EOF status %#x", st)
	}
}

func TestTrackEntries(t *testing.T) {
	b := append(trackEntry(TrackSystemVariable, "sql_mode", "ANSI"), trackEntry(TrackTransactionCharacteristics, "SET TRANSACTION READ ONLY;")...)
	var got []string
	ok := EachTrack(b, func(typ byte, data []byte) {
		switch typ {
		case TrackSystemVariable:
			n, v, _ := TrackVariable(data)
			got = append(got, string(n)+"="+string(v))
		case TrackTransactionCharacteristics:
			s, _ := TrackString(data)
			got = append(got, string(s))
		}
	})
	if !ok || len(got) != 2 || got[0] != "sql_mode=ANSI" || got[1] != "SET TRANSACTION READ ONLY;" {
		t.Fatalf("%v %q", ok, got)
	}
	if EachTrack([]byte{0, 9, 1}, func(byte, []byte) {}) {
		t.Fatal("a truncated entry must be reported")
	}
}

// FuzzRelayTracked relays arbitrary answers of a CLIENT_DEPRECATE_EOF,
// CLIENT_SESSION_TRACK backend to clients of every kind: it must never
// panic, never write more than two packets per backend packet, and keep
// Track to entries of the input.
func FuzzRelayTracked(f *testing.F) {
	gtid := trackEntry(TrackSystemVariable, "last_gtid", "0-1-5")
	f.Add(packets(1, []byte{1}, colDef("a"), textRow("1"), okEnd(StatusAutocommit, 0, gtid)), uint8(ResponseQuery), uint8(0))
	f.Add(packets(1, okTracked(1, 2, StatusAutocommit, "info", gtid)), uint8(ResponseQuery), uint8(7))
	f.Add(packets(1, []byte{1}, colDef("a"), okEnd(StatusCursorExists, 0, nil)), uint8(ResponseQuery), uint8(8))
	f.Add(packets(1, []byte{0, 7, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0}, colDef("?"), colDef("a")), uint8(ResponsePrepare), uint8(1))
	f.Add(packets(1, textRow("1"), okEnd(StatusLastRowSent, 0, nil)), uint8(ResponseFetch), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, kind, flags uint8) {
		caps := CapProtocol41 | CapLocalFiles
		if flags&1 != 0 {
			caps |= CapDeprecateEOF
		}
		if flags&2 != 0 {
			caps |= CapSessionTrack
		}
		var out bytes.Buffer
		client := NewConn(&memConn{r: bytes.NewReader(packets(2, []byte("x"), nil)), w: &out}, 64, 64)
		backend := NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, 128, 64)
		client.SetSeq(1)
		backend.SetSeq(1)
		r := &Relay{ClientCaps: caps, BackendCaps: trackedBackend, Cursor: flags&8 != 0, Results: int(flags >> 4)}
		if flags&4 != 0 {
			r.Trackers = DefaultTrackFilter()
		}
		res, _ := r.Run(client, backend, ResponseKind(kind%6))
		if res.Packets > 2*(len(in)/4)+2 {
			t.Fatalf("wrote %d packets from %d bytes", res.Packets, len(in))
		}
		if len(res.Track) > len(in) {
			t.Fatalf("Track has %d bytes from %d", len(res.Track), len(in))
		}
		EachTrack(res.Track, func(byte, []byte) {})
	})
}

// A statement that changes the client's own trackers is shown with its
// new settings, as MariaDB applies them to the statement's own OK packet;
// turning the transaction tracker on reports the current state at once.
func TestRelayClientTrackerChange(t *testing.T) {
	caps := CapProtocol41 | CapDeprecateEOF | CapSessionTrack
	on := trackEntry(TrackSystemVariable, "session_track_state_change", "ON")
	changed := trackEntry(TrackStateChange, "1")
	r := &Relay{ClientCaps: caps, Trackers: DefaultTrackFilter()}
	ps, _ := relayTracked(t, r, ResponseQuery, packets(1, okTracked(0, 0, StatusAutocommit, "", append(append([]byte(nil), on...), changed...))))
	if !bytes.Equal(ps[0], okTracked(0, 0, StatusAutocommit, "", changed)) {
		t.Fatalf("got %q", ps[0])
	}
	if !r.Trackers.StateChange {
		t.Fatal("the relay's filter did not follow the change")
	}
	txn := trackEntry(TrackSystemVariable, "session_track_transaction_info", "CHARACTERISTICS")
	chars := trackEntry(TrackTransactionCharacteristics, "")
	r = &Relay{ClientCaps: caps, Trackers: &TrackFilter{StateChange: true}, TxnState: "________"}
	in := append(append(append([]byte(nil), txn...), changed...), chars...)
	ps, _ = relayTracked(t, r, ResponseQuery, packets(1, okTracked(0, 0, StatusAutocommit, "", in)))
	want := append(append(append([]byte(nil), changed...), trackEntry(TrackTransactionState, "________")...), chars...)
	if !bytes.Equal(ps[0], okTracked(0, 0, StatusAutocommit, "", want)) {
		t.Fatalf("got %q\nwant %q", ps[0], okTracked(0, 0, StatusAutocommit, "", want))
	}
}

func TestTrackFilterWith(t *testing.T) {
	f := DefaultTrackFilter()
	if g := f.With("sql_mode", "ANSI"); g != f {
		t.Fatal("another variable changed the filter")
	}
	g := f.With("session_track_system_variables", "sql_mode, Time_Zone").With("session_track_schema", "OFF").With("session_track_transaction_info", "STATE")
	if g.Schema || g.AllVars || len(g.Vars) != 2 || g.Vars[1] != "time_zone" || g.TxnInfo != TrackTxnState {
		t.Fatalf("%+v", g)
	}
	if !f.Schema {
		t.Fatal("With changed the original")
	}
}
