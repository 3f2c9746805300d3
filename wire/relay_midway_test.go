package wire

import (
	"encoding/binary"
	"testing"
)

// TestRelayMidway: a response that breaks off within definitions (a result
// set's columns, a prepared statement's parameters or columns, the EOF
// after them) is Midway, one that breaks off before its first packet or
// within rows is not: the gateway may end those with an ERR packet. The
// soak found the gateway writing ERR within a prepare's parameters.
func TestRelayMidway(t *testing.T) {
	prepOK := make([]byte, 12)
	binary.LittleEndian.PutUint32(prepOK[1:], 7)
	binary.LittleEndian.PutUint16(prepOK[5:], 1) // columns
	binary.LittleEndian.PutUint16(prepOK[7:], 2) // params
	for _, tc := range []struct {
		name   string
		kind   ResponseKind
		in     []byte
		midway bool
	}{
		{"nothing", ResponseQuery, nil, false},
		{"columns", ResponseQuery, packets(1, []byte{2}, colDef("a")), true},
		{"columns' EOF", ResponseQuery, packets(1, []byte{2}, colDef("a"), colDef("b")), true},
		{"rows", ResponseQuery, packets(1, []byte{1}, colDef("a"), eofPkt(0, 2), textRow("1")), false},
		{"prepare's params", ResponsePrepare, packets(1, prepOK, colDef("?")), true},
		{"prepare's columns", ResponsePrepare, packets(1, prepOK, colDef("?"), colDef("?"), eofPkt(0, 2)), true},
		{"prepare's columns' EOF", ResponsePrepare, packets(1, prepOK, colDef("?"), colDef("?"), eofPkt(0, 2), colDef("a")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, res, _, err := relayOnce(t, CapProtocol41, tc.kind, tc.in, nil)
			if err == nil {
				t.Fatal("a response cut short relayed without an error")
			}
			if res.Midway != tc.midway {
				t.Errorf("Midway %v, want %v (error %v)", res.Midway, tc.midway, err)
			}
		})
	}
	if _, res, _, err := relayOnce(t, CapProtocol41, ResponsePrepare, packets(1, prepOK, colDef("?"), colDef("?"), eofPkt(0, 2), colDef("a"), eofPkt(0, 2)), nil); err != nil || res.Midway {
		t.Errorf("a whole prepare answer: Midway %v, error %v", res.Midway, err)
	}
}
