package wire

import "encoding/binary"

// readLenEnc decodes a length-encoded integer at b[0:]. ok is false when b
// is too short or starts with a byte that is not a length prefix.
func readLenEnc(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch c := b[0]; {
	case c < 0xfb:
		return uint64(c), 1, true
	case c == 0xfc:
		if len(b) < 3 {
			return 0, 0, false
		}
		return uint64(binary.LittleEndian.Uint16(b[1:])), 3, true
	case c == 0xfd:
		if len(b) < 4 {
			return 0, 0, false
		}
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, 4, true
	case c == 0xfe:
		if len(b) < 9 {
			return 0, 0, false
		}
		return binary.LittleEndian.Uint64(b[1:]), 9, true
	}
	return 0, 0, false
}

// appendLenEnc appends v as a length-encoded integer.
func appendLenEnc(b []byte, v uint64) []byte {
	switch {
	case v < 0xfb:
		return append(b, byte(v))
	case v <= 0xffff:
		return append(b, 0xfc, byte(v), byte(v>>8))
	case v <= 0xffffff:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	}
	return binary.LittleEndian.AppendUint64(append(b, 0xfe), v)
}

// appendLenEncString appends s prefixed by its length-encoded length.
func appendLenEncString(b []byte, s string) []byte {
	return append(appendLenEnc(b, uint64(len(s))), s...)
}

// readLenEncString returns the length-encoded string at b[0:] and the bytes
// it took.
func readLenEncString(b []byte) (s []byte, n int, ok bool) {
	l, m, ok := readLenEnc(b)
	if !ok || uint64(len(b)-m) < l {
		return nil, 0, false
	}
	return b[m : m+int(l)], m + int(l), true
}

// readNulString returns the NUL-terminated string at b[0:] and the bytes it
// took, terminator included.
func readNulString(b []byte) (s []byte, n int, ok bool) {
	for i, c := range b {
		if c == 0 {
			return b[:i], i + 1, true
		}
	}
	return nil, 0, false
}

// ReadLenEncInt decodes the length-encoded integer at the start of b and
// returns it with the number of bytes it took; ok is false when b is too
// short or does not start with a length prefix. For tools (test clients)
// that parse packets the gateway relays untouched.
func ReadLenEncInt(b []byte) (v uint64, n int, ok bool) { return readLenEnc(b) }

// ReadLenEncString returns the length-encoded string at the start of b
// and the bytes it took.
func ReadLenEncString(b []byte) (s []byte, n int, ok bool) { return readLenEncString(b) }

// AppendLenEncInt appends v as a length-encoded integer.
func AppendLenEncInt(b []byte, v uint64) []byte { return appendLenEnc(b, v) }
