package wire

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/directgate/directgate/internal/ioloop"
)

// loopState is what a socket needs to be driven by a loop task.
//
// The task's operations hold the descriptor (they run inside RawConn
// callbacks), so a Close from another goroutine closes it only once the
// operation in flight ends: Close, and a deadline changed from another
// goroutine, interrupt that operation (busy says there is one), which
// then reports the close or the deadline, or starts again under the new
// deadline. The deadlines are kept here for the task's operations; they
// also go to the net.Conn, whose poller then refuses an operation past
// its deadline before it starts.
type loopState struct {
	task    atomic.Pointer[ioloop.Task]
	busy    atomic.Bool
	closing atomic.Bool
	rdl     atomic.Int64 // read deadline, UnixNano; 0: none
	wdl     atomic.Int64 // write deadline, UnixNano; 0: none
}

// SetTask makes the loop task t read and write c's socket from now on;
// nil gives it back to goroutines and the runtime's poller. Only the
// goroutine or task that reads and writes c may call it, and only between
// reads and writes. While a task has c, no one else reads or writes it
// (other goroutines may set deadlines and call CloseSocket). Connections
// without a TCP socket ignore it.
func (c *Conn) SetTask(t *ioloop.Task) {
	if c.sock.rc != nil {
		c.sock.loop.task.Store(t)
	}
}

// Task returns the loop task set with SetTask, or nil.
func (c *Conn) Task() *ioloop.Task { return c.sock.loop.task.Load() }

// SetDeadline sets both deadlines (net.Conn).
func (s *socket) SetDeadline(t time.Time) error {
	s.loop.rdl.Store(unixNano(t))
	s.loop.wdl.Store(unixNano(t))
	err := s.Conn.SetDeadline(t)
	s.interruptTask()
	return err
}

// SetReadDeadline sets the read deadline (net.Conn).
func (s *socket) SetReadDeadline(t time.Time) error {
	s.loop.rdl.Store(unixNano(t))
	err := s.Conn.SetReadDeadline(t)
	s.interruptTask()
	return err
}

// SetWriteDeadline sets the write deadline (net.Conn).
func (s *socket) SetWriteDeadline(t time.Time) error {
	s.loop.wdl.Store(unixNano(t))
	err := s.Conn.SetWriteDeadline(t)
	s.interruptTask()
	return err
}

// Close closes the socket (net.Conn), ending a loop task's operation in
// flight.
func (s *socket) Close() error {
	s.loop.closing.Store(true)
	s.interruptTask()
	return s.Conn.Close()
}

// interruptTask interrupts the task's operation in flight, if any: the
// caller changed what it waits under. (The task's own calls find none.)
func (s *socket) interruptTask() {
	if s.loop.busy.Load() {
		if t := s.loop.task.Load(); t != nil {
			t.Interrupt()
		}
	}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func deadlineOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// loopRead is Read through task t: a receive on its loop, after the held
// command if there is one.
func (s *socket) loopRead(t *ioloop.Task, p []byte) (int, error) {
	for {
		s.rd.buf, s.rd.n, s.rd.taskErr = p, 0, nil
		err := s.rc.Read(s.rd.taskFn)
		n, terr := s.rd.n, s.rd.taskErr
		s.rd.buf, s.rd.taskErr = nil, nil
		if len(s.held.buf) > 0 || s.held.errno != 0 {
			// The held command is not (all) sent: nothing was read.
			if err == nil {
				err = s.loopError("write", terr, s.loop.wdl.Load())
			}
			s.held.buf, s.held.errno = nil, 0
			return 0, &SendError{s.opError("write", err)}
		}
		switch {
		case err != nil:
			return 0, s.opError("read", err)
		case terr == nil && n == 0:
			return 0, io.EOF
		case terr == nil:
			return n, nil
		case errors.Is(terr, ioloop.ErrCanceled) && !s.loop.closing.Load() && !passed(s.loop.rdl.Load()):
			continue // interrupted for a deadline moved later: wait on
		}
		return 0, s.opError("read", s.loopError("read", terr, s.loop.rdl.Load()))
	}
}

// taskRead is the RawConn callback of loopRead.
func (s *socket) taskRead(fd uintptr) bool {
	t := s.loop.task.Load()
	s.loop.busy.Store(true)
	switch {
	case s.loop.closing.Load():
		s.rd.taskErr = net.ErrClosed
	case len(s.held.buf) > 0:
		sent, n, err := t.SendRecv(int(fd), s.held.buf, s.rd.buf, deadlineOf(s.loop.rdl.Load()))
		s.held.buf = s.held.buf[sent:]
		if len(s.held.buf) > 0 && err == nil {
			err = syscall.EPIPE
		}
		s.rd.n, s.rd.taskErr = n, err
	default:
		s.rd.n, s.rd.taskErr = t.Recv(int(fd), s.rd.buf, deadlineOf(s.loop.rdl.Load()))
	}
	s.loop.busy.Store(false)
	return true
}

// loopWrite is write through task t: all of p, within writeTimeout when
// it is set (armed only once the socket is full, as for goroutines) and
// within the write deadline.
func (s *socket) loopWrite(t *ioloop.Task, p []byte) (int, error) {
	written := 0
	for written < len(p) {
		s.wr.buf, s.wr.n, s.wr.taskErr = p[written:], 0, nil
		err := s.rc.Write(s.wr.taskFn)
		n, terr := s.wr.n, s.wr.taskErr
		s.wr.buf, s.wr.taskErr = nil, nil
		written += n
		switch {
		case err != nil:
			return written, s.opError("write", err)
		case terr == nil:
		case errors.Is(terr, ioloop.ErrCanceled) && !s.loop.closing.Load() && !passed(s.loop.wdl.Load()):
		default:
			return written, s.opError("write", s.loopError("write", terr, s.loop.wdl.Load()))
		}
	}
	return written, nil
}

// taskWrite is the RawConn callback of loopWrite.
func (s *socket) taskWrite(fd uintptr) bool {
	t := s.loop.task.Load()
	s.loop.busy.Store(true)
	p := s.wr.buf
	dl := deadlineOf(s.loop.wdl.Load())
	switch {
	case s.loop.closing.Load():
		s.wr.taskErr = net.ErrClosed
	case s.writeTimeout > 0 && (dl.IsZero() || time.Until(dl) > s.writeTimeout):
		// No timer before the socket is full.
		n, err := t.TrySend(int(fd), p)
		s.wr.n, s.wr.taskErr = n, err
		if n == len(p) || err != nil && !errors.Is(err, syscall.EAGAIN) {
			break
		}
		m, err := t.Send(int(fd), p[n:], time.Now().Add(s.writeTimeout))
		s.wr.n, s.wr.taskErr = n+m, err
	default:
		s.wr.n, s.wr.taskErr = t.Send(int(fd), p, dl)
	}
	s.loop.busy.Store(false)
	return true
}

// loopError turns a task operation's error into what a net.Conn reports:
// a timeout is os.ErrDeadlineExceeded, a close net.ErrClosed, a system
// error a *os.SyscallError of call (read or write). dl is the deadline
// the operation ran under.
func (s *socket) loopError(call string, err error, dl int64) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, ioloop.ErrTimeout):
		return os.ErrDeadlineExceeded
	case errors.Is(err, ioloop.ErrCanceled):
		if !s.loop.closing.Load() && passed(dl) {
			return os.ErrDeadlineExceeded
		}
		return net.ErrClosed
	case errors.Is(err, ioloop.ErrClosed):
		return net.ErrClosed
	case errors.As(err, &errno):
		return os.NewSyscallError(call, errno)
	}
	return err
}

// passed reports whether the deadline ns (UnixNano, 0: none) has passed.
func passed(ns int64) bool { return ns != 0 && time.Now().UnixNano() >= ns }
