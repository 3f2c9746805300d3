package wire

import (
	"io"
	"testing"
)

func BenchmarkReadPacket(b *testing.B) {
	cmd := packets(0, append([]byte{ComQuery}, "SELECT c FROM sbtest1 WHERE id=5042"...))
	c := NewConn(&memConn{r: &loopReader{data: cmd}, w: io.Discard}, 16<<10, 16<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(cmd)))
	for i := 0; i < b.N; i++ {
		c.ResetSeq()
		if _, err := c.ReadPacket(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteCommand(b *testing.B) {
	cmd := append([]byte{ComQuery}, "SELECT c FROM sbtest1 WHERE id=5042"...)
	c := NewConn(&memConn{w: io.Discard}, 16<<10, 16<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(cmd) + 4))
	for i := 0; i < b.N; i++ {
		if err := c.WriteCommand(cmd); err != nil {
			b.Fatal(err)
		}
	}
}
