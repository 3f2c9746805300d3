package wire

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// The raw socket reads and writes what a net.Conn would, and reports end
// of stream, deadlines and closed sockets as a net.Conn does.
func TestSocketRawIO(t *testing.T) {
	a, b := tcpPair(t)
	s := newSocket(a)
	if s.rc == nil {
		t.Fatal("a TCP connection did not get raw system calls")
	}
	msg := make([]byte, 1<<20) // more than a socket buffer: partial writes
	for i := range msg {
		msg[i] = byte(i)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.Write(msg)
		errc <- err
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Write: %v", err)
	}
	for i := range got {
		if got[i] != msg[i] {
			t.Fatalf("byte %d differs", i)
		}
	}
	go b.Write([]byte("pong"))
	buf := make([]byte, 16)
	if n, err := io.ReadAtLeast(s, buf, 4); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("Read: %q %v", buf[:n], err)
	}
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := s.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v, want a timeout", err)
	}
	s.SetReadDeadline(time.Time{})
	b.Close()
	if _, err := s.Read(buf); err != io.EOF {
		t.Fatalf("Read after the peer closed: %v, want io.EOF", err)
	}
	a.Close()
	if _, err := s.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read of a closed socket: %v, want net.ErrClosed", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write of a closed socket: %v, want net.ErrClosed", err)
	}
}

// A peer that stops reading makes a write fail after the write timeout.
func TestSocketWriteTimeout(t *testing.T) {
	a, _ := tcpPair(t)
	c := NewConn(a, 4096, 4096)
	c.SetWriteTimeout(100 * time.Millisecond)
	big := make([]byte, 1<<20)
	var err error
	for i := 0; i < 64 && err == nil; i++ { // at most 64 MiB: the buffers fill long before
		_, err = c.sock.Write(big)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("writing to a peer that does not read: %v, want a timeout", err)
	}
}

// A read and a write through the raw socket allocate nothing.
func TestSocketAllocs(t *testing.T) {
	a, b := tcpPair(t)
	s, p := newSocket(a), newSocket(b)
	out, in := []byte("ping"), make([]byte, 4)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.Write(out); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(p, in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per write and read, want 0", allocs)
	}
}
