package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// A peer that announces a 16 MiB packet and sends a few bytes costs a
// chunk of buffer, not the 16 MiB it announced; a packet that does come
// whole is read whole.
func TestReadPacketGrowsWithWhatArrives(t *testing.T) {
	announce := []byte{0xff, 0xff, 0xfe, 0} // 16 MiB - 2
	in := append(append([]byte(nil), announce...), bytes.Repeat([]byte{'x'}, 10)...)
	c := NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, 4096, 4096)
	if _, err := c.ReadPacket(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated packet: %v", err)
	}
	if n := cap(c.buf); n > 2*readChunk {
		t.Fatalf("a 10-byte start of an announced 16 MiB packet holds a %d-byte buffer", n)
	}
	big := bytes.Repeat([]byte{'y'}, 5*readChunk+7)
	c = NewConn(&memConn{r: bytes.NewReader(packets(0, big)), w: io.Discard}, 4096, 4096)
	p, err := c.ReadPacket()
	if err != nil || !bytes.Equal(p, big) {
		t.Fatalf("a %d-byte packet: %d bytes, %v", len(big), len(p), err)
	}
}
