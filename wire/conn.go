package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// ErrPacketTooLarge is returned by ReadPacket when a logical packet exceeds
// the connection's limit. The connection must be closed after it: the rest of
// the packet was not read.
var ErrPacketTooLarge = errors.New("wire: packet larger than max_allowed_packet")

// ErrSequence is returned when a packet arrives with an unexpected sequence
// id, which means the peer and we disagree about the protocol state.
var ErrSequence = errors.New("wire: packet out of sequence")

// Conn is one end of a MySQL protocol connection: buffered reads and writes
// of packets with their sequence ids. The same type serves the client side
// (the gateway as server) and the backend side (the gateway as client).
type Conn struct {
	nc net.Conn
	// sock is the transport the buffers read and write: the socket with
	// raw system calls and the write timeout (socket.go). TLS runs on it.
	sock *socket
	br   *bufio.Reader
	bw   *bufio.Writer
	seq  byte
	// buf holds the last packet returned by ReadPacket, aux the last of
	// ReadPacketAux.
	buf, aux []byte
	// MaxPacket bounds ReadPacket; 0 means 1 GiB, the protocol's maximum.
	MaxPacket int
	// peek serves PeerClosed, gone PeerGone; each built on first use.
	peek, gone *peeker
	// tee, when set, is teeState: the write buffer writes through it
	// (StartTee).
	tee      *tee
	teeState tee
}

// NewConn wraps nc with a read buffer of rsize and a write buffer of wsize
// bytes.
func NewConn(nc net.Conn, rsize, wsize int) *Conn {
	s := newSocket(nc)
	return &Conn{nc: s, sock: s, br: bufio.NewReaderSize(s, rsize), bw: bufio.NewWriterSize(s, wsize)}
}

// SetWriteTimeout makes every write fail that cannot finish within d (a
// peer that stops reading); 0, the default, never. It holds over TLS too.
func (c *Conn) SetWriteTimeout(d time.Duration) { c.sock.writeTimeout = d }

// NetConn returns the connection c reads and writes: the socket (a
// wrapper of the net.Conn given to NewConn, which its NetConn method
// returns), or its *tls.Conn after StartTLSServer or StartTLSClient.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the connection (over TLS, after a close_notify alert).
func (c *Conn) Close() error { return c.nc.Close() }

// CloseSocket closes the socket under c, without TLS's close_notify: for
// another goroutine than the one that reads and writes c (ending a
// session from outside). An operation of c's loop task in flight ends.
func (c *Conn) CloseSocket() error { return c.sock.Close() }

// ResetSeq starts a new command: the next packet written or read has
// sequence id 0.
func (c *Conn) ResetSeq() { c.seq = 0 }

// Seq returns the sequence id the next packet will carry.
func (c *Conn) Seq() byte { return c.seq }

// SetSeq sets the sequence id of the next packet.
func (c *Conn) SetSeq(s byte) { c.seq = s }

// Buffered reports how many bytes are buffered for reading.
func (c *Conn) Buffered() int { return c.br.Buffered() }

// WaitReadable waits up to d for the peer to send something, without
// consuming it. It reports false when nothing arrived in time. Over TLS it
// waits for a decrypted byte: a read that times out leaves a tls.Conn
// usable (only write timeouts break it).
func (c *Conn) WaitReadable(d time.Duration) (bool, error) {
	if c.br.Buffered() > 0 {
		return true, nil
	}
	if err := c.nc.SetReadDeadline(time.Now().Add(d)); err != nil {
		return false, err
	}
	_, err := c.br.Peek(1)
	if rerr := c.nc.SetReadDeadline(time.Time{}); err == nil {
		err = rerr
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false, nil
	}
	return err == nil, err
}

// ReadPacket reads one logical packet (joining packets split at 16 MiB) and
// returns its payload. The slice is valid until the next ReadPacket on c.
func (c *Conn) ReadPacket() ([]byte, error) {
	p, err := c.readInto(c.buf[:0])
	c.buf = p
	return p, err
}

// ReadPacketAux is ReadPacket into a second buffer, leaving the payload
// of the last ReadPacket intact (LOAD DATA LOCAL INFILE content arrives
// while the command that asked for it is still in use).
func (c *Conn) ReadPacketAux() ([]byte, error) {
	p, err := c.readInto(c.aux[:0])
	c.aux = p
	return p, err
}

// readInto reads one logical packet into buf.
func (c *Conn) readInto(buf []byte) ([]byte, error) {
	limit := c.MaxPacket
	if limit <= 0 {
		limit = 1 << 30
	}
	for {
		hdr, err := c.br.Peek(4)
		if err != nil {
			if err == io.EOF && len(hdr) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		if hdr[3] != c.seq {
			return buf, fmt.Errorf("%w: got %d, want %d", ErrSequence, hdr[3], c.seq)
		}
		c.seq++
		if len(buf)+n > limit {
			return buf, ErrPacketTooLarge
		}
		if _, err := c.br.Discard(4); err != nil {
			return buf, err
		}
		// Fast path: a whole single packet already buffered.
		if n < MaxPacketPayload && len(buf) == 0 && n <= c.br.Buffered() {
			p, _ := c.br.Peek(n)
			buf = append(buf, p...)
			_, _ = c.br.Discard(n)
			return buf, nil
		}
		// The buffer grows with what arrives, not with what the header
		// announces: a peer that announces 16 MiB and sends nothing
		// costs a chunk, not 16 MiB.
		for left := n; left > 0; {
			chunk := min(left, max(readChunk, len(buf)))
			start := len(buf)
			buf = grow(buf, chunk)
			if _, err := io.ReadFull(c.br, buf[start:start+chunk]); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return buf, err
			}
			left -= chunk
		}
		if n < MaxPacketPayload {
			return buf, nil
		}
	}
}

// readChunk is the first step by which a packet's buffer grows while its
// payload arrives; later steps double what was read.
const readChunk = 64 << 10

// grow extends b by n bytes, reallocating when needed.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*cap(b)+n)
	copy(nb, b)
	return nb
}

// ShrinkBuffer drops a read buffer that grew beyond max bytes, so one large
// packet does not keep its memory for the life of the connection.
func (c *Conn) ShrinkBuffer(max int) {
	if cap(c.buf) > max {
		c.buf = nil
	}
	if cap(c.aux) > max {
		c.aux = nil
	}
}

// WritePacket buffers payload as one logical packet, splitting it at 16 MiB.
// Call Flush to send it.
func (c *Conn) WritePacket(payload []byte) error {
	for {
		n := len(payload)
		if n > MaxPacketPayload {
			n = MaxPacketPayload
		}
		if err := c.writeHeader(n); err != nil {
			return err
		}
		if _, err := c.bw.Write(payload[:n]); err != nil {
			return err
		}
		payload = payload[n:]
		if n < MaxPacketPayload {
			return nil
		}
	}
}

func (c *Conn) writeHeader(n int) error {
	// Byte by byte: a local array passed to Write would escape.
	_ = c.bw.WriteByte(byte(n))
	_ = c.bw.WriteByte(byte(n >> 8))
	_ = c.bw.WriteByte(byte(n >> 16))
	err := c.bw.WriteByte(c.seq)
	c.seq++
	return err
}

// Flush sends everything buffered for writing.
func (c *Conn) Flush() error { return c.bw.Flush() }

// WriteCommand starts a new command: it writes payload with sequence id 0
// and flushes.
func (c *Conn) WriteCommand(payload []byte) error {
	c.seq = 0
	if err := c.WritePacket(payload); err != nil {
		return err
	}
	return c.bw.Flush()
}

// WritePipelined writes command payload (one packet, sequence id 0)
// straight to the connection, in one write, without touching what its
// reader uses: the sequence id and the write buffer. It is for a
// connection whose answers another goroutine may be reading meanwhile
// (pools.Pipe): the reader sets the sequence id to 1 (SetSeq) when its
// turn comes. The payload is head followed by rest (head may be empty:
// it lets a caller put text between a command byte and its argument
// without copying twice). buf is scratch storage, returned for reuse. A
// payload of MaxPacketPayload bytes or more is refused: it would need
// several packets.
func (c *Conn) WritePipelined(buf, head, rest []byte) ([]byte, error) {
	n := len(head) + len(rest)
	if n >= MaxPacketPayload {
		return buf, errors.New("wire: a pipelined command must fit one packet")
	}
	buf = append(buf[:0], byte(n), byte(n>>8), byte(n>>16), 0)
	buf = append(append(buf, head...), rest...)
	_, err := c.nc.Write(buf)
	return buf, err
}

// SendCommand is WriteCommand for a command whose answer is read next:
// on a TCP connection without TLS the command (its last 4 KiB at most) is
// held back and sent by that read, which then waits for the answer
// without first trying a read that would find nothing (see socket). A
// failure to send it is returned by the read as a *SendError. Anything
// else written to c before that read sends the command first. Unlike
// WriteCommand it must not run while another goroutine reads c.
func (c *Conn) SendCommand(payload []byte) error {
	if c.sock.rc == nil || c.nc != net.Conn(c.sock) {
		return c.WriteCommand(payload)
	}
	c.seq = 0
	if err := c.WritePacket(payload); err != nil {
		return err
	}
	c.sock.holdNext = true
	err := c.bw.Flush()
	c.sock.holdNext = false
	return err
}

// ReadPacketAnySeq is ReadPacket accepting whatever sequence id the
// packet carries: for an error a server sent while the command was still
// being written, or on its own before it closed the connection.
func (c *Conn) ReadPacketAnySeq() ([]byte, error) {
	hdr, err := c.br.Peek(4)
	if err != nil {
		return nil, eofErr(err)
	}
	c.seq = hdr[3]
	return c.ReadPacket()
}
