package wire

import (
	"crypto/tls"
	"errors"
	"syscall"
)

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
	nc := c.nc
	tc, isTLS := nc.(*tls.Conn)
	if isTLS {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n > 0:
			// Unasked bytes: an error before a close. Over TLS they may
			// also be a record the server sends on its own (a session
			// ticket): only the end of the stream counts there.
			closed = !isTLS
		case rerr == nil:
			closed = true // n == 0: end of stream
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EINTR):
		default:
			closed = true // ECONNRESET and the like
		}
		return true // never wait for readiness
	})
	return closed || err != nil
}
