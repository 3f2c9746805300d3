package wire

import (
	"crypto/tls"
	"encoding/binary"
	"net"
)

// AppendSSLRequest appends the payload of an SSL request: the first 32
// bytes of a handshake response (caps, which must include CapSSL, the
// largest packet and the collation), after which the client starts TLS.
func AppendSSLRequest(b []byte, caps, maxPacket uint32, collation byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, caps|CapSSL)
	b = binary.LittleEndian.AppendUint32(b, maxPacket)
	b = append(b, collation)
	return append(b, make([]byte, 23)...)
}

// StartTLSServer switches c to TLS as the server, on the same socket,
// after the peer's SSL request, and runs the TLS handshake. Buffers and
// the sequence id are kept, so the next packet read is the handshake
// response sent over TLS. The socket's deadlines bound the handshake.
func (c *Conn) StartTLSServer(conf *tls.Config) (*tls.Conn, error) {
	return c.startTLS(func(nc net.Conn) *tls.Conn { return tls.Server(nc, conf) })
}

// StartTLSClient switches c to TLS as the client, after sending an SSL
// request, and runs the TLS handshake; see StartTLSServer.
func (c *Conn) StartTLSClient(conf *tls.Config) (*tls.Conn, error) {
	return c.startTLS(func(nc net.Conn) *tls.Conn { return tls.Client(nc, conf) })
}

func (c *Conn) startTLS(wrap func(net.Conn) *tls.Conn) (*tls.Conn, error) {
	if err := c.bw.Flush(); err != nil {
		return nil, err
	}
	var raw net.Conn = c.sock
	if n := c.br.Buffered(); n > 0 {
		// A client may send its TLS ClientHello right behind the SSL
		// request, without waiting: those bytes are already in the read
		// buffer and belong to the TLS layer.
		pre, _ := c.br.Peek(n)
		raw = &prefixConn{Conn: c.sock, pre: append([]byte(nil), pre...)}
	}
	tc := wrap(raw)
	c.nc = tc
	c.peek = nil
	c.br.Reset(tc)
	c.bw.Reset(tc)
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	return tc, nil
}

// TLS returns the connection's TLS layer, or nil when it is plain.
func (c *Conn) TLS() *tls.Conn {
	tc, _ := c.nc.(*tls.Conn)
	return tc
}

// prefixConn is a net.Conn whose first reads return pre.
type prefixConn struct {
	net.Conn
	pre []byte
}

// NetConn returns the connection under the prefix.
func (p *prefixConn) NetConn() net.Conn { return p.Conn }

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
