package wire

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// memConn is a net.Conn over in-memory reader and writer.
type memConn struct {
	net.Conn
	r io.Reader
	w io.Writer
}

func (c *memConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *memConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// packets frames payloads with sequence ids starting at seq.
func packets(seq byte, payloads ...[]byte) []byte {
	var b []byte
	for _, p := range payloads {
		b = append(b, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq)
		b = append(b, p...)
		seq++
	}
	return b
}

// splitPackets parses framed packets back into (seq, payload) pairs.
func splitPackets(t *testing.T, b []byte) (seqs []byte, payloads [][]byte) {
	t.Helper()
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("truncated header")
		}
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		seqs = append(seqs, b[3])
		payloads = append(payloads, b[4:4+n])
		b = b[4+n:]
	}
	return
}

func colDef(name string) []byte {
	var b []byte
	for _, s := range []string{"def", "db", "t", "t", name, name} {
		b = appendLenEncString(b, s)
	}
	b = append(b, 0x0c, 33, 0, 0xff, 0, 0, 0, 253, 0, 0, 0, 0, 0)
	return b
}

func textRow(vals ...string) []byte {
	var b []byte
	for _, v := range vals {
		b = appendLenEncString(b, v)
	}
	return b
}

func eofPkt(warn, status uint16) []byte { return AppendEOF(nil, warn, status) }

// relayOnce runs one relay of backendBytes and returns what the client got.
func relayOnce(t *testing.T, caps uint32, kind ResponseKind, backendBytes []byte, clientIn []byte) ([]byte, Result, []byte, error) {
	t.Helper()
	var toClient, toBackend bytes.Buffer
	client := NewConn(&memConn{r: bytes.NewReader(clientIn), w: &toClient}, 4096, 4096)
	backend := NewConn(&memConn{r: bytes.NewReader(backendBytes), w: &toBackend}, 4096, 4096)
	client.SetSeq(1)
	backend.SetSeq(1)
	r := &Relay{ClientCaps: caps}
	res, err := r.Run(client, backend, kind)
	return toClient.Bytes(), res, toBackend.Bytes(), err
}

func TestRelayResultSetClassic(t *testing.T) {
	in := packets(1, []byte{2}, colDef("a"), colDef("b"), eofPkt(0, 2), textRow("1", "x"), textRow("2", "y"), eofPkt(1, 2))
	out, res, _, err := relayOnce(t, CapProtocol41, ResponseQuery, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in) {
		t.Fatalf("classic client must get the backend's bytes unchanged\n got %x\nwant %x", out, in)
	}
	if res.Warnings != 1 || res.Status != 2 || !res.HadResultSet {
		t.Fatalf("result %+v", res)
	}
}

func TestRelayResultSetDeprecateEOF(t *testing.T) {
	in := packets(1, []byte{1}, colDef("a"), eofPkt(0, 2), textRow("1"), textRow("2"), eofPkt(3, 0x22))
	out, res, _, err := relayOnce(t, CapProtocol41|CapDeprecateEOF, ResponseQuery, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	seqs, ps := splitPackets(t, out)
	if len(ps) != 5 {
		t.Fatalf("want 5 packets (count, def, 2 rows, OK), got %d", len(ps))
	}
	for i, s := range seqs {
		if s != byte(i+1) {
			t.Fatalf("sequence ids %v, want 1..5", seqs)
		}
	}
	want := []byte{0xfe, 0, 0, 0x22, 0, 3, 0}
	if !bytes.Equal(ps[4], want) {
		t.Fatalf("terminator %x, want %x", ps[4], want)
	}
	if res.Status != 0x22 || res.Warnings != 3 {
		t.Fatalf("result %+v", res)
	}
}

func TestRelayMultiResults(t *testing.T) {
	in := packets(1,
		[]byte{1}, colDef("a"), eofPkt(0, 2), textRow("1"), eofPkt(0, 2|StatusMoreResults),
		[]byte{1}, colDef("b"), eofPkt(0, 2), textRow("2"), eofPkt(0, 2|StatusMoreResults),
		AppendOK(nil, OK{AffectedRows: 0, Status: 2}))
	out, res, _, err := relayOnce(t, CapProtocol41, ResponseQuery, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in) {
		t.Fatal("multi-result must pass unchanged")
	}
	if res.Status != 2 {
		t.Fatalf("status %x", res.Status)
	}
}

func TestRelayErrorAndOK(t *testing.T) {
	errPkt := AppendERR(nil, &SQLError{Code: 1146, State: "42S02", Message: "Table 'x.y' doesn't exist"})
	out, res, _, err := relayOnce(t, CapProtocol41, ResponseQuery, packets(1, errPkt), nil)
	if err != nil || res.Err == nil || res.Err.Code != 1146 || res.Err.State != "42S02" {
		t.Fatalf("err %v res %+v", err, res)
	}
	if !bytes.Equal(out, packets(1, errPkt)) {
		t.Fatal("ERR must pass unchanged")
	}
	okPkt := append(AppendOK(nil, OK{AffectedRows: 3, LastInsertID: 7, Status: 3, Warnings: 1}), "Rows matched: 3"...)
	out, res, _, err = relayOnce(t, CapProtocol41, ResponseQuery, packets(1, okPkt), nil)
	if err != nil || res.OK.AffectedRows != 3 || res.OK.LastInsertID != 7 || res.Status != 3 {
		t.Fatalf("err %v res %+v", err, res)
	}
	if !bytes.Equal(out, packets(1, okPkt)) {
		t.Fatal("OK with info must pass unchanged")
	}
}

func TestRelayLargeRowSplit(t *testing.T) {
	big := bytes.Repeat([]byte{'z'}, MaxPacketPayload+10)
	row := textRow(string(big))
	in := packets(1, []byte{1}, colDef("a"), eofPkt(0, 2))
	seq := byte(4)
	for p := row; ; {
		n := min(len(p), MaxPacketPayload)
		in = append(in, byte(n), byte(n>>8), byte(n>>16), seq)
		in = append(in, p[:n]...)
		seq++
		p = p[n:]
		if n < MaxPacketPayload {
			break
		}
	}
	in = append(in, packets(seq, eofPkt(0, 2))...)
	out, _, _, err := relayOnce(t, CapProtocol41, ResponseQuery, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in) {
		t.Fatal("split row must pass unchanged")
	}
}

func TestRelayLocalInfile(t *testing.T) {
	in := packets(1, append([]byte{0xfb}, "/tmp/f"...), AppendOK(nil, OK{AffectedRows: 2, Status: 2}))
	// Second packet's sequence follows the client's data: request 1, data 2,
	// empty 3, OK 4.
	in = append(packets(1, append([]byte{0xfb}, "/tmp/f"...)), packets(4, AppendOK(nil, OK{AffectedRows: 2, Status: 2}))...)
	clientData := packets(2, []byte("a\nb\n"), nil)
	out, res, toBackend, err := relayOnce(t, CapProtocol41|CapLocalFiles, ResponseQuery, in, clientData)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK.AffectedRows != 2 {
		t.Fatalf("res %+v", res)
	}
	if !bytes.Equal(toBackend, clientData) {
		t.Fatalf("backend got %x want %x", toBackend, clientData)
	}
	if _, ps := splitPackets(t, out); len(ps) != 2 {
		t.Fatalf("client got %d packets", len(ps))
	}
	// Without CLIENT_LOCAL_FILES the client gets error 1148 and the backend
	// an empty file.
	in = append(packets(1, append([]byte{0xfb}, "/tmp/f"...)), packets(3, AppendOK(nil, OK{Status: 2}))...)
	out, res, toBackend, err = relayOnce(t, CapProtocol41, ResponseQuery, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || res.Err.Code != 1148 {
		t.Fatalf("res %+v", res)
	}
	if !bytes.Equal(toBackend, packets(2, nil)) {
		t.Fatalf("backend got %x", toBackend)
	}
	if seqs, _ := splitPackets(t, out); len(seqs) != 1 || seqs[0] != 1 {
		t.Fatalf("client seqs %v", seqs)
	}
}

func TestRelayPrepare(t *testing.T) {
	prepOK := []byte{0, 1, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0}
	in := packets(1, prepOK, colDef("?"), colDef("?"), eofPkt(0, 2), colDef("c"), eofPkt(0, 2))
	out, res, _, err := relayOnce(t, CapProtocol41, ResponsePrepare, in, nil)
	if err != nil || !bytes.Equal(out, in) || res.StmtID != 1 || res.Params != 2 || res.Columns != 1 {
		t.Fatalf("classic: err %v res %+v", err, res)
	}
	out, _, _, err = relayOnce(t, CapProtocol41|CapDeprecateEOF, ResponsePrepare, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if seqs, ps := splitPackets(t, out); len(ps) != 4 || seqs[3] != 4 {
		t.Fatalf("deprecate EOF: %d packets, seqs %v", len(ps), seqs)
	}
}

func TestRelayBackendDiesMidResult(t *testing.T) {
	in := packets(1, []byte{1}, colDef("a"), eofPkt(0, 2), textRow("1"))
	in = append(in, 5, 0, 0) // truncated header
	_, res, _, err := relayOnce(t, CapProtocol41, ResponseQuery, in, nil)
	var be *BackendError
	if err == nil || !asBackend(err, &be) {
		t.Fatalf("want BackendError, got %v", err)
	}
	if res.Packets != 0 && res.Err != nil {
		t.Fatal("unexpected error packet")
	}
}

func asBackend(err error, be **BackendError) bool {
	e, ok := err.(*BackendError)
	*be = e
	return ok
}

// sink is a net.Conn that discards writes.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	if l.off == len(l.data) {
		l.off = 0
	}
	n := copy(p, l.data[l.off:])
	l.off += n
	return n, nil
}

func benchRelay(b *testing.B, rows int, caps uint32) {
	resp := packets(1, []byte{2}, colDef("id"), colDef("c"), eofPkt(0, 2))
	seq := byte(5)
	for i := 0; i < rows; i++ {
		resp = append(resp, packets(seq, textRow("12345", "67890123456-12345678901-23456789012-34567890123"))...)
		seq++
	}
	resp = append(resp, packets(seq, eofPkt(0, 2))...)
	backend := NewConn(&memConn{r: &loopReader{data: resp}, w: io.Discard}, 64<<10, 4096)
	client := NewConn(&memConn{r: bytes.NewReader(nil), w: io.Discard}, 4096, 16<<10)
	r := &Relay{ClientCaps: caps}
	b.SetBytes(int64(len(resp)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		client.SetSeq(1)
		backend.SetSeq(1)
		if _, err := r.Run(client, backend, ResponseQuery); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRelay1Row(b *testing.B)             { benchRelay(b, 1, CapProtocol41) }
func BenchmarkRelay1RowDeprecateEOF(b *testing.B) { benchRelay(b, 1, CapProtocol41|CapDeprecateEOF) }
func BenchmarkRelay1000Rows(b *testing.B)         { benchRelay(b, 1000, CapProtocol41) }
func BenchmarkRelay1000RowsDeprecate(b *testing.B) {
	benchRelay(b, 1000, CapProtocol41|CapDeprecateEOF)
}

func TestRelayHoldReadOnly(t *testing.T) {
	ro := AppendERR(nil, &SQLError{Code: ErOptionPreventsStatement, State: "HY000", Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"})
	other := AppendERR(nil, &SQLError{Code: 1146, State: "42S02", Message: "Table 'x.y' doesn't exist"})
	for _, tc := range []struct {
		name string
		hold bool
		pkt  []byte
		held bool
	}{
		{"held", true, ro, true},
		{"not asked", false, ro, false},
		{"other error", true, other, false},
	} {
		var toClient bytes.Buffer
		client := NewConn(&memConn{r: bytes.NewReader(nil), w: &toClient}, 4096, 4096)
		backend := NewConn(&memConn{r: bytes.NewReader(packets(1, tc.pkt)), w: io.Discard}, 4096, 4096)
		client.SetSeq(1)
		backend.SetSeq(1)
		r := &Relay{ClientCaps: CapProtocol41, HoldReadOnly: tc.hold}
		res, err := r.Run(client, backend, ResponseQuery)
		if err != nil || res.Err == nil || res.Held != tc.held {
			t.Fatalf("%s: err %v res %+v", tc.name, err, res)
		}
		if tc.held != (toClient.Len() == 0) || res.Held && res.Packets != 0 {
			t.Errorf("%s: client got %d bytes, %d packets", tc.name, toClient.Len(), res.Packets)
		}
		if backend.br.Buffered() != 0 {
			t.Errorf("%s: %d bytes of the response left unread", tc.name, backend.br.Buffered())
		}
	}
}

func TestRelayOverrideTxn(t *testing.T) {
	okPkt := append(AppendOK(nil, OK{AffectedRows: 300, LastInsertID: 70000, Status: StatusAutocommit | StatusMoreResults}), "info"...)
	rows := [][]byte{{1}, colDef("nextval"), eofPkt(0, StatusAutocommit), textRow("5"), eofPkt(0, StatusAutocommit)}
	in := append(packets(1, okPkt), packets(2, rows...)...)
	for _, deprecate := range []bool{false, true} {
		caps := CapProtocol41
		if deprecate {
			caps |= CapDeprecateEOF
		}
		out, res, err := runRelay(&Relay{ClientCaps: caps, OverrideTxn: true, TxnStatus: StatusInTrans}, in, 4096)
		if err != nil || res.Status != StatusInTrans {
			t.Fatalf("deprecate %v: err %v status %#x", deprecate, err, res.Status)
		}
		_, payloads := splitPackets(t, out)
		ok, good := ParseOK(payloads[0])
		if !good || ok.Status != StatusInTrans|StatusMoreResults || ok.AffectedRows != 300 || ok.LastInsertID != 70000 || !bytes.HasSuffix(payloads[0], []byte("info")) {
			t.Errorf("deprecate %v: OK rewritten to %+v", deprecate, ok)
		}
		last := payloads[len(payloads)-1]
		var status uint16
		if deprecate {
			o, _ := ParseOK(append([]byte{okHeader}, last[1:]...))
			status = o.Status
		} else {
			_, status = ParseEOF(last)
		}
		if status != StatusInTrans {
			t.Errorf("deprecate %v: final status %#x", deprecate, status)
		}
	}
}

// forwardBuffered takes the rows that are whole in the read buffer and
// stops before whatever may not be a row, or is not all there yet.
func TestForwardBufferedStopsBeforeNonRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want int
	}{
		{"rows then EOF", packets(1, textRow("a"), textRow("b"), eofPkt(0, 2)), 2},
		{"rows then ERR", packets(1, textRow("a"), AppendERR(nil, NewError(1317, "70100", "x"))), 1},
		{"empty packet", packets(1, textRow("a"), nil, textRow("b")), 1},
		{"out of sequence", append(packets(1, textRow("a")), packets(9, textRow("b"))...), 1},
		{"partial packet", packets(1, textRow("a"), textRow("bbbbbbbb"))[:14], 1},
		{"limit", packets(1, textRow("a"), textRow("b"), textRow("c")), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			client := NewConn(&memConn{r: bytes.NewReader(nil), w: &out}, 64, 4096)
			backend := NewConn(&memConn{r: bytes.NewReader(tc.in), w: io.Discard}, 4096, 64)
			if _, err := backend.br.Peek(len(tc.in)); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			client.SetSeq(7)
			backend.SetSeq(1)
			r := &Relay{}
			r.run.client, r.run.backend = client, backend
			max := 10
			if tc.name == "limit" {
				max = 2
			}
			n, err := r.forwardBuffered(max, true)
			if err != nil || n != tc.want {
				t.Fatalf("forwardBuffered = %d, %v; want %d", n, err, tc.want)
			}
			if err := client.Flush(); err != nil {
				t.Fatal(err)
			}
			seqs, _ := splitPackets(t, out.Bytes())
			if len(seqs) != n || seqs[0] != 7 || backend.seq != byte(1+n) || client.seq != byte(7+n) {
				t.Errorf("client got sequence ids %v; backend at %d, client at %d", seqs, backend.seq, client.seq)
			}
		})
	}
}

// BeforeEnd sees the final status of the response before the client gets
// its last packet, once.
func TestRelayBeforeEnd(t *testing.T) {
	var toClient bytes.Buffer
	client := NewConn(&memConn{r: bytes.NewReader(nil), w: &toClient}, 4096, 4096)
	okPkt := AppendOK(nil, OK{AffectedRows: 1, Status: StatusAutocommit})
	backend := NewConn(&memConn{r: bytes.NewReader(packets(1, okPkt)), w: io.Discard}, 4096, 4096)
	client.SetSeq(1)
	backend.SetSeq(1)
	calls := 0
	r := &Relay{ClientCaps: CapProtocol41, BeforeEnd: func(res *Result) {
		calls++
		if res.Status != StatusAutocommit || res.OK.AffectedRows != 1 {
			t.Errorf("BeforeEnd saw %+v", res)
		}
		if toClient.Len() != 0 {
			t.Error("the client had the answer before BeforeEnd ran")
		}
	}}
	if _, err := r.Run(client, backend, ResponseQuery); err != nil || calls != 1 {
		t.Fatalf("err %v, %d calls", err, calls)
	}
	if !bytes.Equal(toClient.Bytes(), packets(1, okPkt)) {
		t.Fatal("OK must pass unchanged")
	}
}
