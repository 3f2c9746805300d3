package wire

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peeker checks a socket for a close by its peer without blocking. It is
// built once per connection (PeerClosed allocates nothing after that).
type peeker struct {
	raw    syscall.RawConn
	isTLS  bool
	closed bool
	// noSocket: the connection has none (tests' pipes); broken: its
	// socket could not be reached.
	noSocket, broken bool
	buf              [1]byte
	fn               func(fd uintptr) bool
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
		nc, isTLS := socketOf(c.nc)
		c.peek = newPeeker(nc, isTLS)
	}
	return c.peek.check()
}

// PeerGone reports whether the peer has closed or reset the connection:
// the end of the stream, or an error such as ECONNRESET. Unlike
// PeerClosed, bytes the peer sent (a client's next command, sent before
// the answer to the last) do not count, and the read buffer is not looked
// at: it may be called from another goroutine than the one reading c
// (watching a client while its statement runs). Connections without a
// socket report false.
func (c *Conn) PeerGone() bool {
	if c.gone == nil {
		nc, _ := socketOf(c.nc)
		// Bytes waiting are not a close: read them as TLS does.
		c.gone = newPeeker(nc, true)
	}
	return c.gone.check()
}

// newPeeker builds the peeker of socket nc; onlyEnd makes bytes waiting
// count as open (see peek).
func newPeeker(nc net.Conn, onlyEnd bool) *peeker {
	p := &peeker{isTLS: onlyEnd}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		p.noSocket = true
		return p
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		p.broken = true
		return p
	}
	p.raw = raw
	p.fn = p.peek
	return p
}

// check peeks once: true for a closed (or broken) socket, false for an
// open one or no socket at all.
func (p *peeker) check() bool {
	switch {
	case p.noSocket:
		return false
	case p.broken:
		return true
	}
	p.closed = false
	if err := p.raw.Read(p.fn); err != nil {
		return true
	}
	return p.closed
}

// socketOf unwraps nc down to the connection that holds the socket: TLS,
// and wrappers that expose what they wrap with a NetConn method (as
// *tls.Conn does). isTLS reports whether TLS was among them.
func socketOf(nc net.Conn) (_ net.Conn, isTLS bool) {
	for range 8 {
		if _, ok := nc.(*tls.Conn); ok {
			isTLS = true
		}
		w, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = w.NetConn()
	}
	return nc, isTLS
}
