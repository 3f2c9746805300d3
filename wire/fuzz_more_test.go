package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// splitSizes are the payload sizes FuzzSplitPackets picks from, around
// the 16 MiB boundary where a logical packet is split.
var splitSizes = []int{0, 1, 255, 1 << 16, MaxPacketPayload - 1, MaxPacketPayload, MaxPacketPayload + 1}

// FuzzSplitPackets writes a payload with WritePacket (split at 16 MiB),
// then damages one byte of the stream: undamaged, it reads back equal with
// the right sequence ids; damaged, reading ends with an error or a packet
// within MaxPacket, never a panic.
func FuzzSplitPackets(f *testing.F) {
	f.Add(uint8(0), uint8(3), byte(0), uint32(0), byte(0), false)
	f.Add(uint8(5), uint8(0), byte(7), uint32(3), byte(9), true)       // bad sequence id of the first part
	f.Add(uint8(6), uint8(2), byte(0), uint32(1<<24+3), byte(0), true) // bad sequence id of the second part
	f.Add(uint8(4), uint8(1), byte(1), uint32(0), byte(0xff), true)    // length says more than there is
	f.Fuzz(func(t *testing.T, sel, extra uint8, seq byte, at uint32, with byte, damage bool) {
		n := splitSizes[int(sel)%len(splitSizes)] + int(extra%4)
		payload := bytes.Repeat([]byte{seq ^ 0x5a}, n)
		var stream bytes.Buffer
		w := NewConn(&memConn{r: bytes.NewReader(nil), w: &stream}, 64, 64<<10)
		w.SetSeq(seq)
		if err := w.WritePacket(payload); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		in := stream.Bytes()
		if damage && len(in) > 0 {
			in[int(at)%len(in)] = with
		}
		r := NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, 4096, 64)
		r.SetSeq(seq)
		r.MaxPacket = 32 << 20
		p, err := r.ReadPacket()
		if damage {
			if err == nil && len(p) > r.MaxPacket {
				t.Fatalf("packet of %d bytes over the limit", len(p))
			}
			return
		}
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(p, payload) {
			t.Fatalf("read %d bytes back, wrote %d", len(p), n)
		}
		if want := seq + byte(n/MaxPacketPayload) + 1; r.Seq() != want || w.Seq() != want {
			t.Fatalf("sequence after %d bytes: read %d, write %d, want %d", n, r.Seq(), w.Seq(), want)
		}
		if _, err := r.ReadPacket(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the packet: %v", err)
		}
	})
}

// FuzzGreetingRoundTrip: a greeting the gateway writes parses back equal.
func FuzzGreetingRoundTrip(f *testing.F) {
	f.Add("10.11.6-MariaDB-0+deb12u1", uint32(7), bytes.Repeat([]byte{'a'}, 20), uint32(ServerCaps), byte(45), uint16(StatusAutocommit), NativePassword)
	f.Add("8.0.36", uint32(1<<31), []byte("12345678901234567890"), uint32(ServerCaps|CapSSL), byte(255), uint16(0), CachingSha2Password)
	f.Fuzz(func(t *testing.T, version string, id uint32, salt []byte, caps uint32, coll byte, status uint16, plugin string) {
		if len(salt) != 20 || bytes.IndexByte(salt, 0) >= 0 || bytes.IndexByte([]byte(version), 0) >= 0 ||
			bytes.IndexByte([]byte(plugin), 0) >= 0 || plugin == "" {
			return // not something the gateway sends
		}
		caps |= CapProtocol41 | CapSecureConnection | CapPluginAuth
		g := &Greeting{ServerVersion: version, ConnectionID: id, Salt: salt, Caps: caps, Collation: coll, Status: status, AuthPlugin: plugin}
		got, err := ParseGreeting(AppendGreeting(nil, g))
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		if got.ServerVersion != version || got.ConnectionID != id || !bytes.Equal(got.Salt, salt) ||
			got.Collation != coll || got.Status != status || got.AuthPlugin != plugin {
			t.Fatalf("wrote %+v, read %+v", g, got)
		}
	})
}

// FuzzClientLogin runs the gateway's side of a backend login (greeting,
// handshake response, auth switch requests, caching_sha2_password's more
// data and public key) against arbitrary server bytes: it must end with a
// result or an error, never panic or loop.
func FuzzClientLogin(f *testing.F) {
	salt := bytes.Repeat([]byte{3}, 20)
	greet := func(plugin string) []byte {
		return AppendGreeting(nil, &Greeting{ServerVersion: "10.11.6-MariaDB", ConnectionID: 9, Salt: salt,
			Caps: ServerCaps | CapPluginAuth, Collation: 45, Status: StatusAutocommit, AuthPlugin: plugin})
	}
	pub := authenticator(f).PublicKeyPEM()
	f.Add(packets(0, greet(NativePassword)), "pw")
	f.Add(append(packets(0, greet(NativePassword)), packets(2, AppendOK(nil, OK{}))...), "pw")
	f.Add(append(packets(0, greet(NativePassword)), packets(2, AppendERR(nil, &SQLError{Code: 1045, State: "28000", Message: "Access denied"}))...), "pw")
	f.Add(append(packets(0, greet(NativePassword)), packets(2, AppendAuthSwitch(nil, CachingSha2Password, salt), []byte{1, 4},
		append([]byte{1}, pub...), AppendOK(nil, OK{}))...), "pw")
	f.Add(append(packets(0, greet(CachingSha2Password)), packets(2, []byte{1, 3}, AppendOK(nil, OK{}))...), "pw")
	f.Add(append(packets(0, greet(NativePassword)), packets(2, AppendAuthSwitch(nil, ClientEd25519, bytes.Repeat([]byte{0}, 32)), AppendOK(nil, OK{}))...), "pw")
	f.Add(append(packets(0, greet("dialog")), packets(2, AppendAuthSwitch(nil, "mysql_clear_password", nil))...), "")
	f.Fuzz(func(t *testing.T, in []byte, password string) {
		bc := &BackendConn{Conn: NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, 256, 256)}
		bc.MaxPacket = 1 << 16
		_ = bc.handshake("127.0.0.1:3306", DialOptions{User: "u", Password: password})
	})
}

// FuzzServerLogin runs the gateway's side of a client login (greeting,
// handshake response, SSL request refused, switch to
// mysql_native_password, caching_sha2_password full authentication with
// the public key request) against arbitrary client bytes.
func FuzzServerLogin(f *testing.F) {
	salt := bytes.Repeat([]byte{5}, 20)
	resp := func(plugin string, auth []byte) []byte {
		return AppendHandshakeResponse(nil, &HandshakeResponse{Caps: BackendCaps | CapPluginAuth | CapConnectWithDB,
			MaxPacket: 1 << 24, Collation: 45, User: "app", AuthData: auth, Database: "db", AuthPlugin: plugin,
			Attrs: map[string]string{"_client_name": "libmariadb"}})
	}
	f.Add(packets(1, resp(NativePassword, ScrambleNative(salt, "pw"))), uint8(0))
	f.Add(packets(1, resp(CachingSha2Password, ScrambleCachingSha2(salt, "pw")), []byte{2}, bytes.Repeat([]byte{9}, 256)), uint8(1))
	f.Add(packets(1, resp(CachingSha2Password, ScrambleCachingSha2(salt, "pw")), append([]byte("pw"), 0)), uint8(1))
	f.Add(packets(1, resp("client_ed25519", []byte{1, 2}), ScrambleNative(salt, "pw")), uint8(0))
	f.Add(packets(1, AppendSSLRequest(nil, BackendCaps|CapSSL, 1<<24, 45)), uint8(0))
	f.Add(packets(1, resp(NativePassword, nil)), uint8(2))
	a := authenticator(f)
	f.Fuzz(func(t *testing.T, in []byte, user uint8) {
		c := NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, 256, 256)
		c.MaxPacket = 1 << 16
		g := &Greeting{ServerVersion: "10.11.0-MariaDB-directgate", ConnectionID: 1, Salt: salt, Caps: ServerCaps,
			Collation: 45, Status: StatusAutocommit, AuthPlugin: NativePassword}
		r, plugin, answer, err := ServerHandshake(c, g)
		if err != nil {
			return
		}
		if r == nil || (plugin != NativePassword && plugin != CachingSha2Password) {
			t.Fatalf("response %v, plugin %q", r, plugin)
		}
		ok, _ := a.Check(c, plugin, r.User, salt, answer, []string{"pw", "", "other"}[user%3], user%4 != 3)
		if ok && user%4 == 3 {
			t.Fatal("an unknown user logged in")
		}
	})
}

// FuzzResultPackets feeds arbitrary bytes to the parsers of single
// response packets, and checks that column definitions round-trip.
func FuzzResultPackets(f *testing.F) {
	f.Add(AppendOK(nil, OK{AffectedRows: 3, LastInsertID: 1 << 40, Status: StatusAutocommit, Warnings: 1, Info: "Rows matched: 3"}))
	f.Add(AppendERR(nil, &SQLError{Code: 1146, State: "42S02", Message: "Table 'e2e.x' doesn't exist"}))
	f.Add(AppendEOF(nil, 2, StatusMoreResults))
	f.Add(colDef("id"))
	f.Add(AppendColumnDef(nil, Column{Schema: "db", Table: "t", Name: "n", Charset: 63, Length: 11, Type: 3, Flags: 1, Decimals: 0}))
	f.Add([]byte{0xff, 0x48, 0x04, 'H', 'Y', '0', '0', '0'}) // ERR without '#'
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _ = ParseOK(p)
		_ = ParseERR(p)
		_, _ = ParseEOF(p)
		c, err := ParseColumnDef(p)
		if err != nil {
			return
		}
		again, err := ParseColumnDef(AppendColumnDef(nil, c))
		if err != nil {
			t.Fatalf("%+v does not parse back: %v", c, err)
		}
		if again.Name != c.Name || again.Schema != c.Schema || again.Type != c.Type || again.Length != c.Length ||
			again.Charset != c.Charset || again.Flags != c.Flags || again.Decimals != c.Decimals {
			t.Fatalf("column %+v came back as %+v", c, again)
		}
	})
}

// FuzzRelayBinary is FuzzRelay for the shapes of COM_STMT_EXECUTE,
// COM_STMT_PREPARE and COM_STMT_FETCH answers, seeded with binary rows,
// cursors and prepare responses.
func FuzzRelayBinary(f *testing.F) {
	binRow := []byte{0x00, 0x00, 0x01, 0x00, 0x00, 0x00} // header, null bitmap, INT 1
	f.Add(packets(1, []byte{1}, colDef("a"), eofPkt(0, StatusAutocommit), binRow, binRow, eofPkt(0, StatusAutocommit)), uint8(ResponseQuery), false)
	f.Add(packets(1, []byte{1}, colDef("a"), binRow, append([]byte{0xfe}, AppendOK(nil, OK{Status: StatusAutocommit})[1:]...)), uint8(ResponseQuery), true)
	f.Add(packets(1, []byte{1}, colDef("a"), eofPkt(0, StatusAutocommit|StatusCursorExists)), uint8(ResponseQuery), false)
	f.Add(packets(1, binRow, binRow, eofPkt(0, StatusLastRowSent)), uint8(ResponseFetch), false)
	f.Add(packets(1, []byte{0, 7, 0, 0, 0, 2, 0, 2, 0, 0, 0, 0}, colDef("?"), colDef("?"), eofPkt(0, 0), colDef("a"), colDef("b"), eofPkt(0, 0)), uint8(ResponsePrepare), false)
	f.Add(packets(1, []byte{0, 7, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0}, colDef("?"), colDef("a")), uint8(ResponsePrepare), true)
	f.Add(packets(1, colDef("a"), colDef("b"), eofPkt(0, 0)), uint8(ResponseFieldList), false)
	f.Add(packets(1, append([]byte{0xfb}, "/tmp/x.csv"...)), uint8(ResponseQuery), false)
	f.Add(packets(1, []byte{1}, colDef("a"), eofPkt(0, StatusMoreResults), textRow("1"), eofPkt(0, StatusMoreResults), AppendOK(nil, OK{})), uint8(ResponseQuery), false)
	f.Fuzz(func(t *testing.T, in []byte, kind uint8, deprecate bool) {
		caps := CapProtocol41 | CapLocalFiles
		if deprecate {
			caps |= CapDeprecateEOF
		}
		var out bytes.Buffer
		// The client answers a LOCAL INFILE request with some data and
		// the empty packet that ends it.
		client := NewConn(&memConn{r: bytes.NewReader(packets(2, []byte("1\n2\n"), nil)), w: &out}, 64, 64)
		backend := NewConn(&memConn{r: bytes.NewReader(in), w: io.Discard}, 128, 64)
		client.SetSeq(1)
		backend.SetSeq(1)
		r := &Relay{ClientCaps: caps}
		res, _ := r.Run(client, backend, ResponseKind(kind%6))
		if res.Packets > len(in)/4+2 {
			t.Fatalf("wrote %d packets from %d bytes", res.Packets, len(in))
		}
	})
}

// authenticator makes an Authenticator with a new RSA key, once per
// fuzz target (making one takes a while).
func authenticator(tb testing.TB) *Authenticator {
	tb.Helper()
	a, err := NewAuthenticator(nil, 16)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
