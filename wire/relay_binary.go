package wire

// The relay's conversion of text rows to binary rows (Relay.BinaryRows).

// keepRowBuf is the largest converted-row buffer the relay keeps between
// rows.
const keepRowBuf = 64 << 10

// binaryColumn records the type of a column definition of a result set
// whose rows the client gets in the binary format.
func (r *Relay) binaryColumn(pk *packet) error {
	if !pk.whole || pk.splits {
		return &BackendError{ErrMalformed}
	}
	c, ok := parseColType(pk.p)
	if !ok {
		return &BackendError{ErrMalformed}
	}
	r.cols = append(r.cols, c)
	return nil
}

// binaryRow sends the text row the relay is at to the client in the
// binary format. A row too large for the read buffer, or split over
// several packets, is read whole first.
func (r *Relay) binaryRow(pk *packet) error {
	text, err := r.wholeRow(pk)
	if err != nil {
		return err
	}
	row, err := appendBinaryRow(r.rowBuf[:0], text, r.cols)
	if cap(row) <= keepRowBuf {
		r.rowBuf = row[:0]
	}
	if err != nil {
		return &BackendError{err}
	}
	if pk.whole && !pk.splits {
		if err := r.drop(pk); err != nil {
			return err
		}
	}
	return r.write(row)
}

// wholeRow returns the payload of the row the relay is at. A packet that
// fits the read buffer is peeked (the caller drops it); a larger or split
// one is read now, from its header on.
func (r *Relay) wholeRow(pk *packet) ([]byte, error) {
	if pk.whole && !pk.splits {
		return pk.p, nil
	}
	rs := &r.run
	// next consumed the sequence id of the header it peeked.
	rs.backend.seq--
	rs.cont = false
	p, err := rs.backend.ReadPacket()
	if err != nil {
		return nil, &BackendError{eofErr(err)}
	}
	return p, nil
}
