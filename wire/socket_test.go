package wire

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
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

// deadlineLog is a TCP connection that logs the write deadlines set on it.
// armed, when set, is closed at the first deadline that is not zero.
type deadlineLog struct {
	*net.TCPConn
	set   []time.Time
	armed chan struct{}
}

func (d *deadlineLog) SetWriteDeadline(t time.Time) error {
	d.set = append(d.set, t)
	if !t.IsZero() && d.armed != nil {
		close(d.armed)
		d.armed = nil
	}
	return d.TCPConn.SetWriteDeadline(t)
}

// A write timeout costs no deadline for writes that do not wait; a write
// that waits gets one for that wait, cleared afterwards so that it cannot
// fail a later write.
func TestSocketWriteTimeoutArmedOnlyToWait(t *testing.T) {
	a, b := tcpPair(t)
	s := newSocket(a)
	log := &deadlineLog{TCPConn: a.(*net.TCPConn)}
	s.Conn = log // the raw calls stay on a's descriptor
	s.writeTimeout = time.Minute
	armed := make(chan struct{})
	go func() {
		// Drain only once the big write waits: a reader that keeps up
		// from the start can spare it the wait.
		<-armed
		_, _ = io.Copy(io.Discard, b)
	}()
	for range 100 {
		if _, err := s.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
	}
	if len(log.set) != 0 {
		t.Fatalf("%d write deadlines set for 100 writes that did not wait, want 0", len(log.set))
	}
	big := make([]byte, 16<<20) // more than both socket buffers: it waits
	log.armed = armed
	if _, err := s.Write(big); err != nil {
		t.Fatal(err)
	}
	if len(log.set) != 2 || log.set[0].IsZero() || !log.set[1].IsZero() {
		t.Fatalf("write deadlines around a write that waited: %v, want one armed, then cleared", log.set)
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

// echoCommands answers every packet that arrives on server with the same
// payload, in one write, until the connection ends.
func echoCommands(server net.Conn) {
	sc := NewConn(server, 4096, 4096)
	for {
		p, err := sc.ReadPacket()
		if err != nil {
			return
		}
		sc.SetSeq(1)
		if sc.WritePacket(p) != nil || sc.Flush() != nil {
			return
		}
		sc.ResetSeq()
	}
}

// A command sent with SendCommand is written by the read of its answer,
// which then waits without the read(2) that would find nothing: one read
// call per answer.
func TestSendCommandSkipsEmptyRead(t *testing.T) {
	a, b := tcpPair(t)
	go echoCommands(b)
	c := NewConn(a, 4096, 4096)
	reads := 0
	read := c.sock.rd.fn
	c.sock.rd.fn = func(fd uintptr) bool { reads++; return read(fd) }
	const n = 50
	for i := range n {
		cmd := []byte{ComQuery, 'S', byte(i)}
		if err := c.SendCommand(cmd); err != nil {
			t.Fatal(err)
		}
		p, err := c.ReadPacket()
		if err != nil || string(p) != string(cmd) {
			t.Fatalf("answer %d: %q %v, want %q", i, p, err, cmd)
		}
	}
	if reads != n {
		t.Errorf("%d read calls for %d answers, want one each", reads, n)
	}
	if allocs, err := sendCommandAllocs(c); err != nil || allocs != 0 {
		t.Errorf("%.1f allocations per SendCommand and answer (%v), want 0", allocs, err)
	}
}

// sendCommandAllocs counts the allocations of a SendCommand and the read
// of its answer on c, whose peer answers every command; err is the first
// failure. (Not t.Fatal: it also runs on loop tasks.)
func sendCommandAllocs(c *Conn) (allocs float64, err error) {
	ping := []byte{ComPing}
	allocs = testing.AllocsPerRun(50, func() {
		if err == nil {
			err = c.SendCommand(ping)
		}
		if err == nil {
			_, err = c.ReadPacket()
		}
	})
	return allocs, err
}

// checkSendFailure sends a command on c, whose socket can no longer send,
// and checks that the read of its answer fails with a SendError of EPIPE.
func checkSendFailure(t *testing.T, c *Conn) {
	t.Helper()
	if err := c.SendCommand([]byte{ComPing}); err != nil {
		t.Error(err)
		return
	}
	_, err := c.ReadPacket()
	var se *SendError
	if !errors.As(err, &se) || !errors.Is(err, syscall.EPIPE) {
		t.Errorf("read after a failed send: %v, want a SendError with EPIPE", err)
	}
}

// A held command goes out before anything written after it, and is not
// sent before the read or write that sends it; of a long command only the
// last part is held.
func TestSendCommandOrder(t *testing.T) {
	a, b := tcpPair(t)
	c := NewConn(a, 4096, 4096)
	if err := c.SendCommand([]byte{ComQuery, '1'}); err != nil {
		t.Fatal(err)
	}
	_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := b.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the held command arrived before its read: %d bytes, %v", n, err)
	}
	_ = b.SetReadDeadline(time.Time{})
	if err := c.WriteCommand([]byte{ComQuery, '2'}); err != nil {
		t.Fatal(err)
	}
	long := make([]byte, 3*maxHeld)
	long[0] = ComQuery
	if err := c.SendCommand(long); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		sc := NewConn(b, 16384, 4096)
		for i, want := range [][]byte{{ComQuery, '1'}, {ComQuery, '2'}, long} {
			sc.ResetSeq()
			p, err := sc.ReadPacket()
			if err != nil || string(p) != string(want) {
				errc <- fmt.Errorf("packet %d: %d bytes %v, want %d bytes", i, len(p), err, len(want))
				return
			}
		}
		if err := sc.WritePacket([]byte{okHeader}); err != nil {
			errc <- err
			return
		}
		errc <- sc.Flush()
	}()
	if p, err := c.ReadPacket(); err != nil || len(p) != 1 {
		t.Fatalf("answer: %q %v", p, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// A held command that cannot be sent fails its read with a SendError, and
// a read that times out before sending it does too.
func TestSendCommandFailure(t *testing.T) {
	a, _ := tcpPair(t)
	c := NewConn(a, 4096, 4096)
	if err := a.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	checkSendFailure(t, c)

	a, _ = tcpPair(t)
	c = NewConn(a, 4096, 4096)
	if err := c.SendCommand([]byte{ComPing}); err != nil {
		t.Fatal(err)
	}
	_ = a.SetReadDeadline(time.Now().Add(-time.Second))
	var se *SendError
	if _, err := c.ReadPacket(); !errors.As(err, &se) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline with a command held: %v, want a SendError that timed out", err)
	}
}

// A held command that the socket cannot take whole is finished by Write,
// which waits for room, and the answer is read after it.
func TestSendCommandFullSocket(t *testing.T) {
	a, b := tcpPair(t)
	c := NewConn(a, 4096, 4096)
	// Fill the socket's send buffer and the peer's receive buffer.
	fill := make([]byte, 64<<10)
	sent := 0
	_ = a.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	for sent < 64<<20 {
		n, err := c.sock.Write(fill)
		sent += n
		if err != nil {
			break
		}
	}
	_ = a.SetWriteDeadline(time.Time{})
	if err := c.SendCommand([]byte{ComQuery, 'x'}); err != nil {
		t.Fatal(err)
	}
	go func() {
		// Drain the filler, then answer the command. The deadline turns
		// a count of sent bytes that is off into a failure, not a hang.
		_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(b, make([]byte, sent)); err != nil {
			t.Errorf("draining the %d bytes written: %v", sent, err)
			a.Close()
			return
		}
		_ = b.SetReadDeadline(time.Time{})
		echoCommands(b)
	}()
	p, err := c.ReadPacket()
	if err != nil || string(p) != string([]byte{ComQuery, 'x'}) {
		t.Fatalf("answer after a full socket: %q %v", p, err)
	}
}
