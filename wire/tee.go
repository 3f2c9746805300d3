package wire

import "io"

// A tee keeps a copy of the bytes a Conn sends to its peer between
// StartTee and StopTee: whole packets, headers and sequence ids as the
// peer got them, so that the same answer can be written again to another
// peer whose command had the same bytes (WriteRaw). It sits between the
// write buffer and the transport (TLS included, in the clear) only while
// it runs: a Conn that never tees pays nothing.
type tee struct {
	w   io.Writer
	buf []byte
	max int
	// over says more than max bytes went through: buf was let go.
	over bool
}

// Write sends p on and keeps a copy of what was sent, up to max bytes.
func (t *tee) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if !t.over {
		if len(t.buf)+n > t.max {
			t.over, t.buf = true, t.buf[:0]
		} else {
			t.buf = append(t.buf, p[:n]...)
		}
	}
	return n, err
}

// transport is what the write buffer writes to: the socket, or the TLS
// layer over it.
func (c *Conn) transport() io.Writer {
	if tc := c.TLS(); tc != nil {
		return tc
	}
	return c.sock
}

// StartTee starts keeping a copy of what c sends, at most max bytes,
// appended to buf[:0] (its array is reused). It reports false, and keeps
// nothing, when bytes written before are still buffered: they would be
// taken for the answer's.
func (c *Conn) StartTee(buf []byte, max int) bool {
	if c.tee != nil || c.bw.Buffered() > 0 {
		return false
	}
	c.teeState = tee{w: c.transport(), buf: buf[:0], max: max}
	c.tee = &c.teeState
	c.bw.Reset(c.tee)
	return true
}

// StopTee flushes what is buffered, stops keeping a copy, and returns
// what was sent since StartTee. complete is false when the copy is not
// all of it: more than max bytes, or a write to the peer failed. buf is
// the caller's from then on, even when incomplete (its array may be
// reused for the next StartTee).
func (c *Conn) StopTee() (buf []byte, complete bool) {
	t := c.tee
	if t == nil {
		return nil, false
	}
	err := c.bw.Flush()
	c.tee = nil
	c.bw.Reset(t.w) // also clears a write error: the caller saw it already
	buf, complete = t.buf, !t.over && err == nil
	c.teeState = tee{}
	return buf, complete
}

// WriteRaw buffers p, whole packets with their headers as StopTee
// returned them, and sets the sequence id of c's next packet to seq. Call
// Flush to send them.
func (c *Conn) WriteRaw(p []byte, seq byte) error {
	if _, err := c.bw.Write(p); err != nil {
		return err
	}
	c.seq = seq
	return nil
}
