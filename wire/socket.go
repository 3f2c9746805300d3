package wire

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// socket is the transport under a Conn's buffers: the network connection,
// with two additions.
//
// Raw system calls. A TCP socket is read and written with raw read(2) and
// write(2) on its non-blocking descriptor, through syscall.RawConn: the
// runtime's poller still parks the goroutine when the socket is not ready
// (EAGAIN) and still enforces deadlines, but a call that does not wait
// skips the runtime's system call bookkeeping. That bookkeeping is more
// than its own cost under a proxy's load: every write on loopback runs the
// receiver's TCP input and wake-up in the writer's thread (several µs), the
// runtime's monitor sees the processor "in a system call" for that long,
// takes it away and hands it to another thread (a futex wake-up and two
// context switches), and wakes itself every 20 µs to do so. A raw call
// never leaves the processor, so none of that happens. Neither call can
// block: the descriptor is non-blocking, and EAGAIN goes back to the
// poller.
//
// A write timeout. With writeTimeout set, a write that cannot finish
// within it fails (a peer that stops reading). On a raw socket the
// deadline is armed only when a write would wait (EAGAIN: the peer's
// receive buffer is full) and cleared when it is done, so the writes that
// do not wait, nearly all of them, cost no timer; armed when needed, it
// survives whoever clears the socket's deadlines meanwhile (the end of a
// handshake's timeout). Other sockets get the deadline at every write.
//
// A held write (Conn.SendCommand). A command is written by the read that
// waits for its answer, inside the poller's read call: the poller clears
// the socket's readiness before it calls us, so once the command is sent
// the goroutine can park at once, without the read(2) that would only
// return EAGAIN (the answer cannot be there yet: the server has not seen
// the command). Any data that arrives after the command, the answer
// included, sets the readiness again, so no wake-up is lost; a readiness
// left over from before only costs that one read after all. That is one
// system call fewer per statement.
//
// A loop task (socket_loop.go). With a task set (Conn.SetTask), reads and
// writes are operations on the task's io_uring loop instead of system
// calls, and the task, not the goroutine, waits for them.
type socket struct {
	net.Conn
	rc syscall.RawConn // nil: not a TCP socket; use Conn's Read and Write

	writeTimeout time.Duration

	// The arguments and results of the raw calls, one set per direction
	// (a reader and a writer may run at once), in fields so that the
	// method values are made once, not per call.
	rd, wr rawCall

	// held is the write of a command held back by holdNext (buf is what
	// is left of it, errno its failure): the next Read sends it before it
	// waits (readHeld is that Read's RawConn callback), the next Write
	// before its own bytes. heldBuf is its storage, kept.
	held     rawCall
	heldBuf  []byte
	holdNext bool
	readHeld func(fd uintptr) bool

	loop loopState
}

// maxHeld is the largest command a socket holds back for its next read;
// a longer one is written at once.
const maxHeld = 4096

// SendError is the failure of a command's write that Conn.SendCommand held
// back for the read of its answer: the read reports it, and nothing of an
// answer was read. As with Conn.WriteCommand's errors, the server may have
// got part of the command.
type SendError struct{ Err error }

func (e *SendError) Error() string { return "sending the command: " + e.Err.Error() }
func (e *SendError) Unwrap() error { return e.Err }

// rawCall is one direction's raw system call: its buffer, its result and
// the RawConn callbacks that make it (tryFn, for writes, reports EAGAIN
// in again instead of waiting).
type rawCall struct {
	buf   []byte
	n     int
	errno syscall.Errno
	again bool
	fn    func(fd uintptr) bool
	tryFn func(fd uintptr) bool
	// A loop task's call (socket_loop.go): its error, and the RawConn
	// callback that makes it.
	taskErr error
	taskFn  func(fd uintptr) bool
}

// newSocket wraps nc; a *net.TCPConn gets raw system calls.
func newSocket(nc net.Conn) *socket {
	s := &socket{Conn: nc}
	if tc, ok := nc.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			s.rc = rc
			s.rd.fn = s.rd.read
			s.wr.fn = s.wr.write
			s.wr.tryFn = s.wr.tryWrite
			s.readHeld = s.sendHeldThenRead
			s.rd.taskFn = s.taskRead
			s.wr.taskFn = s.taskWrite
		}
	}
	return s
}

// NetConn returns the wrapped connection.
func (s *socket) NetConn() net.Conn { return s.Conn }

// Read reads into p: one read(2) once the socket is readable.
func (s *socket) Read(p []byte) (int, error) {
	if s.rc == nil {
		return s.Conn.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if t := s.loop.task.Load(); t != nil {
		return s.loopRead(t, p)
	}
	s.rd.buf = p
	fn := s.rd.fn
	if len(s.held.buf) > 0 {
		fn = s.readHeld
	}
	err := s.rc.Read(fn)
	n, errno := s.rd.n, s.rd.errno
	s.rd.buf = nil
	if len(s.held.buf) > 0 || s.held.errno != 0 {
		// The held command is not (all) sent: nothing was read.
		return s.heldFailed(p, err)
	}
	switch {
	case err != nil:
		return 0, s.opError("read", err)
	case errno != 0:
		return 0, s.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// sendHeldThenRead is the RawConn callback of a Read with a command held:
// the first call sends the command and asks the poller to wait for the
// answer; the next ones read. A command the socket cannot take whole
// (EAGAIN) or a failed write ends the call, for heldFailed.
func (s *socket) sendHeldThenRead(fd uintptr) bool {
	h := &s.held
	if len(h.buf) == 0 {
		return s.rd.fn(fd)
	}
	for len(h.buf) > 0 {
		if !h.call(syscall.SYS_WRITE, fd) || h.errno != 0 {
			return true
		}
		h.buf = h.buf[h.n:]
	}
	return false
}

// heldFailed ends a Read whose held command was not all sent: a failed
// write or read call is a SendError; a command the socket could not take
// whole is finished with Write (which waits for room) and the Read is
// made again.
func (s *socket) heldFailed(p []byte, err error) (int, error) {
	rest, errno := s.held.buf, s.held.errno
	s.held.buf, s.held.errno = nil, 0
	switch {
	case errno != 0:
		err = s.opError("write", os.NewSyscallError("write", errno))
	case err != nil:
		err = s.opError("write", err)
	default:
		if _, err = s.write(rest); err == nil {
			return s.Read(p)
		}
	}
	return 0, &SendError{err}
}

// read is the RawConn callback of Read: false asks the poller to wait.
func (c *rawCall) read(fd uintptr) bool { return c.call(syscall.SYS_READ, fd) }

// write is the RawConn callback of Write: false asks the poller to wait
// until the socket is writable.
func (c *rawCall) write(fd uintptr) bool { return c.call(syscall.SYS_WRITE, fd) }

// tryWrite is the RawConn callback of a write that must not wait: EAGAIN
// sets again and ends the call.
func (c *rawCall) tryWrite(fd uintptr) bool {
	if !c.call(syscall.SYS_WRITE, fd) {
		c.again = true
	}
	return true
}

// call makes the system call trap on fd with c's buffer. It reports false
// for EAGAIN (wait for the poller), else true with the result in c.
func (c *rawCall) call(trap, fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&c.buf[0])), uintptr(len(c.buf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			c.n, c.errno = int(n), 0
		default:
			c.n, c.errno = 0, e
		}
		return true
	}
}

// Write writes all of p, within writeTimeout when it is set. A command
// held back is written first; with holdNext set, p is held back instead.
func (s *socket) Write(p []byte) (int, error) {
	if s.holdNext {
		s.holdNext = false
		if len(s.held.buf) == 0 && len(p) <= maxHeld {
			s.heldBuf = append(s.heldBuf[:0], p...)
			s.held.buf = s.heldBuf
			return len(p), nil
		}
	}
	if len(s.held.buf) > 0 {
		held := s.held.buf
		s.held.buf = nil
		if _, err := s.write(held); err != nil {
			return 0, err
		}
	}
	return s.write(p)
}

// write writes all of p, within writeTimeout when it is set.
func (s *socket) write(p []byte) (int, error) {
	if s.rc == nil {
		if s.writeTimeout > 0 {
			if err := s.Conn.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil {
				return 0, err
			}
		}
		return s.Conn.Write(p)
	}
	if t := s.loop.task.Load(); t != nil {
		return s.loopWrite(t, p)
	}
	fn := s.wr.fn
	armed := false
	if s.writeTimeout > 0 {
		fn = s.wr.tryFn // no wait before the deadline is armed
	}
	written := 0
	for written < len(p) {
		s.wr.buf = p[written:]
		s.wr.n, s.wr.errno, s.wr.again = 0, 0, false // a write that times out never calls back
		err := s.rc.Write(fn)
		n, errno, again := s.wr.n, s.wr.errno, s.wr.again
		s.wr.buf = nil
		written += n
		switch {
		case err != nil:
			return written, s.disarm(armed, s.opError("write", err))
		case errno != 0:
			return written, s.disarm(armed, s.opError("write", os.NewSyscallError("write", errno)))
		case again:
			// The socket is full: from here on the write may wait, so
			// within the timeout.
			if err := s.Conn.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil {
				return written, err
			}
			armed, fn = true, s.wr.fn
		}
	}
	return written, s.disarm(armed, nil)
}

// disarm clears the write deadline that write armed, so that it cannot
// fail a later write that does not wait; it returns err.
func (s *socket) disarm(armed bool, err error) error {
	if armed {
		if derr := s.Conn.SetWriteDeadline(time.Time{}); err == nil {
			err = derr
		}
	}
	return err
}

// opError wraps err as the net package does, so that callers' checks
// (net.Error's Timeout, errors.Is os.ErrDeadlineExceeded, net.ErrClosed,
// syscall.ECONNRESET) see what a net.Conn would return.
func (s *socket) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: err}
}
