package wire

import (
	"bytes"
	"io"
	"testing"
)

// teeRelay relays resp to a client while teeing at most max bytes, and
// returns what the client got and the copy.
func teeRelay(t *testing.T, caps uint32, resp []byte, max int) (got, copied []byte, complete bool) {
	t.Helper()
	var toClient bytes.Buffer
	client := NewConn(&memConn{r: bytes.NewReader(nil), w: &toClient}, 4096, 4096)
	backend := NewConn(&memConn{r: bytes.NewReader(resp), w: io.Discard}, 4096, 4096)
	client.SetSeq(1)
	backend.SetSeq(1)
	if !client.StartTee(nil, max) {
		t.Fatal("StartTee refused on an empty write buffer")
	}
	r := &Relay{ClientCaps: caps}
	if _, err := r.Run(client, backend, ResponseQuery); err != nil {
		t.Fatal(err)
	}
	copied, complete = client.StopTee()
	return toClient.Bytes(), copied, complete
}

// The copy is byte for byte what the client got (EOF conversion, split
// packets included), and written to another client with WriteRaw it
// gives that client the same bytes; past max the copy is incomplete.
func TestTeeCopiesTheAnswer(t *testing.T) {
	big := bytes.Repeat([]byte{'r'}, MaxPacketPayload+100)
	for _, tc := range []struct {
		name string
		caps uint32
		resp []byte
	}{
		{"classic", CapProtocol41, packets(1, []byte{1}, colDef("a"), eofPkt(0, 2), textRow("1"), textRow("2"), eofPkt(0, 2))},
		{"deprecate_eof", CapProtocol41 | CapDeprecateEOF, packets(1, []byte{1}, colDef("a"), eofPkt(0, 2), textRow("1"), eofPkt(0, 2))},
		{"split_row", CapProtocol41, append(packets(1, []byte{1}, colDef("a"), eofPkt(0, 2), append([]byte{0xfc, 0x64, 0, 1}, big...)[:MaxPacketPayload]),
			packets(5, append([]byte{0xfc, 0x64, 0, 1}, big...)[MaxPacketPayload:], eofPkt(0, 2))...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, copied, complete := teeRelay(t, tc.caps, tc.resp, 64<<20)
			if !complete || !bytes.Equal(got, copied) {
				t.Fatalf("complete %v; client got %d bytes, copy has %d (equal %v)", complete, len(got), len(copied), bytes.Equal(got, copied))
			}
			var other bytes.Buffer
			c := NewConn(&memConn{r: bytes.NewReader(nil), w: &other}, 4096, 4096)
			if err := c.WriteRaw(copied, 9); err != nil {
				t.Fatal(err)
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(other.Bytes(), got) || c.Seq() != 9 {
				t.Fatalf("WriteRaw: %d bytes, seq %d", other.Len(), c.Seq())
			}
			_, _, complete = teeRelay(t, tc.caps, tc.resp, len(got)-1)
			if complete {
				t.Fatal("a copy bounded below the answer's size is complete")
			}
		})
	}
}

// StartTee refuses while bytes are buffered; StopTee without a tee
// returns nothing.
func TestTeeRefusesBufferedBytes(t *testing.T) {
	c := NewConn(&memConn{r: bytes.NewReader(nil), w: io.Discard}, 4096, 4096)
	if buf, complete := c.StopTee(); buf != nil || complete {
		t.Fatal("StopTee without StartTee")
	}
	if err := c.WritePacket([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if c.StartTee(nil, 100) {
		t.Fatal("StartTee with a packet buffered")
	}
}

// BenchmarkRelay1RowTee is BenchmarkRelay1Row with a tee into a reused
// buffer: the cost a consolidation leader pays when nobody follows.
func BenchmarkRelay1RowTee(b *testing.B) {
	resp := packets(1, []byte{2}, colDef("id"), colDef("c"), eofPkt(0, 2),
		textRow("12345", "67890123456-12345678901-23456789012-34567890123"), eofPkt(0, 2))
	backend := NewConn(&memConn{r: &loopReader{data: resp}, w: io.Discard}, 64<<10, 4096)
	client := NewConn(&memConn{r: bytes.NewReader(nil), w: io.Discard}, 4096, 16<<10)
	r := &Relay{ClientCaps: CapProtocol41}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		client.SetSeq(1)
		backend.SetSeq(1)
		client.StartTee(buf, 1<<20)
		if _, err := r.Run(client, backend, ResponseQuery); err != nil {
			b.Fatal(err)
		}
		buf, _ = client.StopTee()
	}
}
