package wire

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-done
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestPeerClosed(t *testing.T) {
	c, s := tcpPair(t)
	conn := NewConn(c, 1024, 1024)
	if conn.PeerClosed() {
		t.Fatal("an open idle connection reported closed")
	}
	// The peer sends something unasked (MariaDB's error before it closes).
	if _, err := s.Write([]byte{1, 0, 0, 0, 0xff}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !conn.PeerClosed() {
		if time.Now().After(deadline) {
			t.Fatal("unasked bytes not noticed")
		}
		time.Sleep(time.Millisecond)
	}
	c2, s2 := tcpPair(t)
	conn2 := NewConn(c2, 1024, 1024)
	s2.Close()
	deadline = time.Now().Add(5 * time.Second)
	for !conn2.PeerClosed() {
		if time.Now().After(deadline) {
			t.Fatal("a closed peer not noticed")
		}
		time.Sleep(time.Millisecond)
	}
	// A pipe has no socket: never reported closed.
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if NewConn(p1, 64, 64).PeerClosed() {
		t.Fatal("pipe reported closed")
	}
}

// BenchmarkPeerClosed is the cost of the check a pooled connection gets
// before it serves after being idle: one recv(MSG_PEEK|MSG_DONTWAIT).
func BenchmarkPeerClosed(b *testing.B) {
	c, _ := tcpPair(b)
	conn := NewConn(c, 1024, 1024)
	b.ReportAllocs()
	for b.Loop() {
		if conn.PeerClosed() {
			b.Fatal("closed")
		}
	}
}

// Quit says goodbye before it closes: the server reads a COM_QUIT as a
// command of its own (sequence id 0), then the end of the stream. A peer
// already gone is no error: the connection is closed all the same.
func TestQuit(t *testing.T) {
	c, s := tcpPair(t)
	bc := &BackendConn{Conn: NewConn(c, 64, 64)}
	bc.SetSeq(3) // left from the last command
	if err := bc.Quit(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{1, 0, 0, 0, ComQuit}; !bytes.Equal(b, want) {
		t.Fatalf("server read % x, want % x", b, want)
	}

	c, s = tcpPair(t)
	s.Close()
	if err := (&BackendConn{Conn: NewConn(c, 64, 64)}).Quit(); err != nil {
		t.Fatalf("Quit to a closed peer: %v", err)
	}
}
