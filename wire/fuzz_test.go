package wire

import (
	"bytes"
	"io"
	"testing"
)

func FuzzParseHandshakeResponse(f *testing.F) {
	f.Add(AppendHandshakeResponse(nil, &HandshakeResponse{
		Caps: BackendCaps | CapConnectWithDB, MaxPacket: 1 << 24, Collation: 45, User: "app",
		AuthData: ScrambleNative(bytes.Repeat([]byte{1}, 20), "pw"), Database: "db", AuthPlugin: NativePassword,
		Attrs: map[string]string{"_client_name": "x"},
	}))
	f.Add(make([]byte, 32))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := ParseHandshakeResponse(p)
		if err == nil && r == nil {
			t.Fatal("nil response without error")
		}
	})
}

func FuzzParseGreeting(f *testing.F) {
	salt := bytes.Repeat([]byte{7}, 20)
	f.Add(AppendGreeting(nil, &Greeting{ServerVersion: "10.11", ConnectionID: 1, Salt: salt, Caps: ServerCaps, Collation: 45, AuthPlugin: NativePassword}))
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _ = ParseGreeting(p)
	})
}

func FuzzReadPacket(f *testing.F) {
	f.Add(packets(0, []byte{ComQuery, 's'}), uint16(100))
	f.Add([]byte{0xff, 0xff, 0xff, 0, 1}, uint16(64))
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		c := NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, 64, 64)
		c.MaxPacket = int(max%4096) + 1
		for i := 0; i < 16; i++ {
			p, err := c.ReadPacket()
			if err != nil {
				return
			}
			if len(p) > c.MaxPacket {
				t.Fatalf("packet of %d bytes over the %d limit", len(p), c.MaxPacket)
			}
		}
	})
}

// FuzzRelay feeds arbitrary backend bytes to the relay: it must end (with
// a result or an error), never panic, and never write more packets than it
// read.
func FuzzRelay(f *testing.F) {
	f.Add(packets(1, []byte{1}, colDef("a"), eofPkt(0, 2), textRow("1"), eofPkt(0, 2)), uint8(0), false)
	f.Add(packets(1, AppendOK(nil, OK{Status: StatusMoreResults}), AppendOK(nil, OK{})), uint8(0), true)
	f.Add(packets(1, []byte{0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0}, colDef("?"), eofPkt(0, 2), colDef("c"), eofPkt(0, 2)), uint8(2), true)
	f.Add(packets(1, append([]byte{0xfb}, "f"...)), uint8(0), false)
	f.Add(packets(1, AppendERR(nil, &SQLError{Code: ErOptionPreventsStatement, State: "HY000", Message: "read-only"})), uint8(0x80), false)
	f.Fuzz(func(t *testing.T, in []byte, kind uint8, deprecate bool) {
		caps := CapProtocol41 | CapLocalFiles
		if deprecate {
			caps |= CapDeprecateEOF
		}
		var out bytes.Buffer
		client := NewConn(&memConn{r: bytes.NewReader(packets(2, []byte("x"), nil)), w: &out}, 64, 64)
		backend := NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, 128, 64)
		client.SetSeq(1)
		backend.SetSeq(1)
		r := &Relay{ClientCaps: caps, HoldReadOnly: kind&0x80 != 0}
		res, _ := r.Run(client, backend, ResponseKind(kind%6))
		if res.Packets > len(in)/4+2 {
			t.Fatalf("wrote %d packets from %d bytes", res.Packets, len(in))
		}
		if res.Held && (res.Packets != 0 || out.Len() != 0 || res.Err == nil || res.Err.Code != ErOptionPreventsStatement) {
			t.Fatalf("held response: %+v, %d bytes written", res, out.Len())
		}
	})
}
