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
// A write timeout. With writeTimeout set, every write gets a deadline
// that far ahead, so a write that cannot finish within it fails (a peer
// that stops reading). Set at every write, it survives whoever clears the
// socket's deadlines meanwhile (the end of a handshake's timeout).
type socket struct {
	net.Conn
	rc syscall.RawConn // nil: not a TCP socket; use Conn's Read and Write

	writeTimeout time.Duration

	// The arguments and results of the raw calls, one set per direction
	// (a reader and a writer may run at once), in fields so that the
	// method values are made once, not per call.
	rd, wr rawCall
}

// rawCall is one direction's raw system call: its buffer, its result and
// the RawConn callback that makes it.
type rawCall struct {
	buf   []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// newSocket wraps nc; a *net.TCPConn gets raw system calls.
func newSocket(nc net.Conn) *socket {
	s := &socket{Conn: nc}
	if tc, ok := nc.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			s.rc = rc
			s.rd.fn = s.rd.read
			s.wr.fn = s.wr.write
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
	s.rd.buf = p
	err := s.rc.Read(s.rd.fn)
	n, errno := s.rd.n, s.rd.errno
	s.rd.buf = nil
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

// read is the RawConn callback of Read: false asks the poller to wait.
func (c *rawCall) read(fd uintptr) bool { return c.call(syscall.SYS_READ, fd) }

// write is the RawConn callback of Write: false asks the poller to wait
// until the socket is writable.
func (c *rawCall) write(fd uintptr) bool { return c.call(syscall.SYS_WRITE, fd) }

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

// Write writes all of p, within writeTimeout when it is set.
func (s *socket) Write(p []byte) (int, error) {
	if s.writeTimeout > 0 {
		if err := s.Conn.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil {
			return 0, err
		}
	}
	if s.rc == nil {
		return s.Conn.Write(p)
	}
	written := 0
	for written < len(p) {
		s.wr.buf = p[written:]
		err := s.rc.Write(s.wr.fn)
		n, errno := s.wr.n, s.wr.errno
		s.wr.buf = nil
		written += n
		switch {
		case err != nil:
			return written, s.opError("write", err)
		case errno != 0:
			return written, s.opError("write", os.NewSyscallError("write", errno))
		}
	}
	return written, nil
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
