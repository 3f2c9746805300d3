package wire

import (
	"crypto/tls"
	"errors"
	"syscall"
)

// peeker checks a socket for a close by its peer without blocking. It is
// built once per connection (PeerClosed allocates nothing after that).
type peeker struct {
	raw    syscall.RawConn
	isTLS  bool
	closed bool
	buf    [1]byte
	fn     func(fd uintptr) bool
}

// peek is the RawConn.Read callback: one recv(MSG_PEEK|MSG_DONTWAIT).
func (p *peeker) peek(fd uintptr) bool {
	n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case n > 0:
		// Unasked bytes: an error before a close. Over TLS they may also
		// be a record the server sends on its own (a session ticket):
		// only the end of the stream counts there.
		p.closed = !p.isTLS
	case err == nil:
		p.closed = true // n == 0: end of stream
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
	default:
		p.closed = true // ECONNRESET and the like
	}
	return true // never wait for readiness
}

// PeerClosed reports whether the peer has closed the connection or sent
// something unasked (MariaDB sends an ERR before it closes an idle
// connection: wait_timeout, KILL): either way the connection must not
// serve a command. It never blocks: one non-blocking peek at the socket
// (recv with MSG_PEEK|MSG_DONTWAIT), and none when the read buffer already
// holds bytes. Connections without a socket (tests' pipes) report false.
func (c *Conn) PeerClosed() bool {
	if c.br.Buffered() > 0 {
		return true
	}
	if c.peek == nil {
		nc := c.nc
		tc, isTLS := nc.(*tls.Conn)
		if isTLS {
			nc = tc.NetConn()
		}
		sc, ok := nc.(syscall.Conn)
		if !ok {
			return false
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		c.peek = &peeker{raw: raw, isTLS: isTLS}
		c.peek.fn = c.peek.peek
	}
	p := c.peek
	p.closed = false
	if err := p.raw.Read(p.fn); err != nil {
		return true
	}
	return p.closed
}
