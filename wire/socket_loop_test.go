package wire

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/directgate/directgate/internal/ioloop"
)

// onTask runs fn as a task of a new loop, with the conns given to it, and
// waits for it.
func onTask(t *testing.T, fn func(tk *ioloop.Task), conns ...*Conn) {
	t.Helper()
	l, err := ioloop.New(ioloop.Config{})
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	defer l.Close()
	done := make(chan struct{})
	if err := l.Go(func(tk *ioloop.Task) {
		defer close(done)
		for _, c := range conns {
			c.SetTask(tk)
		}
		fn(tk)
		for _, c := range conns {
			c.SetTask(nil)
		}
	}); err != nil {
		t.Fatal(err)
	}
	<-done
}

// On a task the socket reads and writes what a net.Conn would, and reports
// end of stream, deadlines and closed sockets as a net.Conn does.
func TestLoopSocketIO(t *testing.T) {
	a, b := tcpPair(t)
	c := NewConn(a, 4096, 4096)
	s := c.sock
	msg := make([]byte, 1<<20) // more than a socket buffer: partial sends
	for i := range msg {
		msg[i] = byte(i)
	}
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, len(msg))
		_, _ = io.ReadFull(b, buf)
		got <- buf
		_, _ = b.Write([]byte("pong"))
	}()
	onTask(t, func(*ioloop.Task) {
		if n, err := s.Write(msg); err != nil || n != len(msg) {
			t.Errorf("Write: %d, %v", n, err)
			return
		}
		buf := make([]byte, 16)
		if n, err := io.ReadAtLeast(s, buf, 4); err != nil || string(buf[:n]) != "pong" {
			t.Errorf("Read: %q %v", buf[:n], err)
			return
		}
		_ = s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := s.Read(buf)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Read past its deadline: %v, want a timeout", err)
		}
		_ = s.SetReadDeadline(time.Time{})
		_ = b.Close()
		if _, err := s.Read(buf); err != io.EOF {
			t.Errorf("Read after the peer closed: %v, want io.EOF", err)
		}
		_ = c.Close()
		if _, err := s.Read(buf); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read after Close: %v, want net.ErrClosed", err)
		}
	}, c)
	if b := <-got; string(b) != string(msg) {
		t.Error("the peer did not receive what was written")
	}
}

// A command sent with SendCommand on a task goes out with the receive of
// its answer, in order with what was written before it, and allocates
// nothing.
func TestLoopSendCommand(t *testing.T) {
	a, b := tcpPair(t)
	go echoCommands(b)
	c := NewConn(a, 4096, 4096)
	onTask(t, func(*ioloop.Task) {
		for i := range 50 {
			cmd := []byte{ComQuery, 'S', byte(i)}
			if err := c.SendCommand(cmd); err != nil {
				t.Error(err)
				return
			}
			p, err := c.ReadPacket()
			if err != nil || string(p) != string(cmd) {
				t.Errorf("answer %d: %q %v, want %q", i, p, err, cmd)
				return
			}
		}
		if err := c.SendCommand([]byte{ComQuery, '1'}); err != nil {
			t.Error(err)
		}
		if err := c.WriteCommand([]byte{ComQuery, '2'}); err != nil { // sends the held one first
			t.Error(err)
		}
		for _, want := range []string{"\x031", "\x032"} {
			c.ResetSeq()
			c.SetSeq(1)
			if p, err := c.ReadPacket(); err != nil || string(p) != want {
				t.Errorf("answer %q %v, want %q", p, err, want)
			}
		}
		if allocs, err := sendCommandAllocs(c); err != nil || allocs != 0 {
			t.Errorf("%.1f allocations per SendCommand and answer on a task (%v), want 0", allocs, err)
		}
	}, c)
}

// A held command that cannot be sent fails its read with a SendError on a
// task too.
func TestLoopSendCommandFailure(t *testing.T) {
	a, _ := tcpPair(t)
	c := NewConn(a, 4096, 4096)
	if err := a.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	onTask(t, func(*ioloop.Task) { checkSendFailure(t, c) }, c)
}

// Another goroutine ends a task's wait by moving the read deadline to now
// (the way a shutdown interrupts an idle session); a deadline moved later
// lets the wait go on; CloseSocket ends it with net.ErrClosed and the peer
// sees the close.
func TestLoopInterruptFromOutside(t *testing.T) {
	a, b := tcpPair(t)
	c := NewConn(a, 4096, 4096)
	waiting := make(chan struct{}, 3)
	go func() {
		<-waiting
		time.Sleep(10 * time.Millisecond) // let the task's receive start
		_ = c.NetConn().SetReadDeadline(time.Now())
		<-waiting
		time.Sleep(10 * time.Millisecond)
		_ = c.NetConn().SetReadDeadline(time.Now().Add(time.Hour))
		time.Sleep(10 * time.Millisecond)
		_, _ = b.Write([]byte{1, 0, 0, 0, ComPing})
		<-waiting
		time.Sleep(10 * time.Millisecond)
		_ = c.CloseSocket()
	}()
	onTask(t, func(*ioloop.Task) {
		waiting <- struct{}{}
		if _, err := c.ReadPacket(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read interrupted by a deadline of now: %v, want a timeout", err)
		}
		_ = c.NetConn().SetReadDeadline(time.Time{})
		waiting <- struct{}{}
		c.ResetSeq()
		if p, err := c.ReadPacket(); err != nil || len(p) != 1 || p[0] != ComPing {
			t.Errorf("read across a deadline moved later: %x %v, want the ping", p, err)
		}
		waiting <- struct{}{}
		c.ResetSeq()
		if _, err := c.ReadPacket(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("read ended by CloseSocket: %v, want net.ErrClosed", err)
		}
	}, c)
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the peer read %d bytes, %v after CloseSocket, want io.EOF", n, err)
	}
}

// A write to a peer that stops reading fails after the write timeout on
// a task too.
func TestLoopWriteTimeout(t *testing.T) {
	a, _ := tcpPair(t)
	c := NewConn(a, 4096, 4096)
	c.SetWriteTimeout(50 * time.Millisecond)
	onTask(t, func(*ioloop.Task) {
		big := make([]byte, 1<<20)
		var err error
		for range 256 {
			if _, err = c.sock.Write(big); err != nil {
				break
			}
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("write to a peer that does not read: %v, want a timeout", err)
		}
	}, c)
}

// TLS runs on a task's socket: the handshake, and a command each way.
func TestLoopTLS(t *testing.T) {
	cert := selfSigned(t)
	a, b := tcpPair(t)
	srv, cli := NewConn(a, 4096, 4096), NewConn(b, 4096, 4096)
	errc := make(chan error, 1)
	go func() {
		if _, err := cli.StartTLSClient(&tls.Config{InsecureSkipVerify: true}); err != nil {
			errc <- err
			return
		}
		if err := cli.WriteCommand([]byte{ComPing}); err != nil {
			errc <- err
			return
		}
		p, err := cli.ReadPacket()
		if err == nil && string(p) != "pong" {
			err = errors.New("answer " + string(p))
		}
		errc <- err
	}()
	onTask(t, func(*ioloop.Task) {
		if _, err := srv.StartTLSServer(&tls.Config{Certificates: []tls.Certificate{cert}}); err != nil {
			t.Error(err)
			return
		}
		if ok, err := srv.WaitReadable(5 * time.Second); !ok || err != nil {
			t.Errorf("WaitReadable: %v %v", ok, err)
		}
		if p, err := srv.ReadPacket(); err != nil || len(p) != 1 || p[0] != ComPing {
			t.Errorf("command over TLS: %x %v", p, err)
			return
		}
		if err := srv.WritePacket([]byte("pong")); err != nil {
			t.Error(err)
		}
		if err := srv.Flush(); err != nil {
			t.Error(err)
		}
	}, srv)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
