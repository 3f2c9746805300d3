package healthcheck

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// fakeEd25519Server accepts logins the way MariaDB does for an ed25519
// account: the greeting offers mysql_native_password, then an auth switch
// to client_ed25519 carries a 32-byte scramble. The first login's
// scramble ends in a 0 byte; later ones do not. Any answer is accepted;
// SELECT 1 is answered, every other query gets an error. logins counts
// the scrambles sent.
type fakeEd25519Server struct {
	ln     net.Listener
	logins atomic.Int32
}

func startFakeEd25519(t *testing.T) *fakeEd25519Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeEd25519Server{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(nc)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return s
}

func writePacket(nc net.Conn, seq byte, payload []byte) error {
	h := []byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}
	_, err := nc.Write(append(h, payload...))
	return err
}

func readPacket(br *bufio.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return nil, err
	}
	p := make([]byte, int(h[0])|int(h[1])<<8|int(h[2])<<16)
	_, err := io.ReadFull(br, p)
	return p, err
}

func (s *fakeEd25519Server) serve(nc net.Conn) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	const caps = 1 | 4 | 0x200 | 0x8000 | 0x80000 // long password, long flag, protocol 41, secure connection, plugin auth
	g := []byte{10}
	g = append(g, "5.5.5-10.11.6-MariaDB-fake\x00"...)
	g = binary.LittleEndian.AppendUint32(g, 1)
	g = append(g, "abcdefgh\x00"...)
	g = binary.LittleEndian.AppendUint16(g, caps&0xffff)
	g = append(g, 45)
	g = binary.LittleEndian.AppendUint16(g, 2)
	g = binary.LittleEndian.AppendUint16(g, caps>>16)
	g = append(g, 21)
	g = append(g, make([]byte, 10)...)
	g = append(g, "ijklmnopqrst\x00mysql_native_password\x00"...)
	if writePacket(nc, 0, g) != nil {
		return
	}
	if _, err := readPacket(br); err != nil {
		return
	}
	scramble := make([]byte, 32)
	for i := range scramble {
		scramble[i] = byte(i + 1)
	}
	if s.logins.Add(1) == 1 {
		scramble[31] = 0
	}
	if writePacket(nc, 2, append([]byte("\xfeclient_ed25519\x00"), scramble...)) != nil {
		return
	}
	if _, err := readPacket(br); err != nil {
		return
	}
	ok := []byte{0, 0, 0, 2, 0, 0, 0}
	if writePacket(nc, 4, ok) != nil {
		return
	}
	for {
		p, err := readPacket(br)
		if err != nil || len(p) == 0 || p[0] == 1 { // gone, or COM_QUIT
			return
		}
		if string(p[1:]) != "SELECT 1" {
			_ = writePacket(nc, 1, append([]byte{0xff, 0x28, 0x04, '#', '4', '2', '0', '0', '0'}, "not faked"...))
			continue
		}
		col := []byte("\x03def\x00\x00\x00\x011\x00\x0c\x3f\x00\x01\x00\x00\x00\x08\x81\x00\x00\x00\x00")
		eof := []byte{0xfe, 0, 0, 2, 0}
		for i, q := range [][]byte{{1}, col, eof, {1, '1'}, eof} {
			if writePacket(nc, byte(i+1), q) != nil {
				return
			}
		}
	}
}

// TestMySQLProberEd25519ScrambleEndingInZero: a login whose ed25519
// scramble ends in 0 reads as malformed in go-sql-driver (it drops the
// byte); the probe logs in again and reaches the server.
func TestMySQLProberEd25519ScrambleEndingInZero(t *testing.T) {
	s := startFakeEd25519(t)
	p := MySQLProber{User: "u", Password: "pw", Timeout: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := p.Probe(ctx, Backend{Addr: s.ln.Addr().String(), Cluster: "c"})
	if !r.Reachable {
		t.Fatalf("probe did not reach the server: %+v", r)
	}
	if n := s.logins.Load(); n != 2 {
		t.Fatalf("%d logins, want 2 (the first one's scramble ends in 0)", n)
	}
}
