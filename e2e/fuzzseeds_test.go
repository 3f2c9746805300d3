package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
)

// TestCaptureFuzzSeeds records real MariaDB packets as the seed corpora
// of wire's fuzz targets (wire/testdata/fuzz/<Target>/mariadb-*). It runs
// only with DIRECTGATE_CAPTURE_SEEDS=1: the checked-in files are its
// output, regenerated when the targets' arguments change.
func TestCaptureFuzzSeeds(t *testing.T) {
	if os.Getenv("DIRECTGATE_CAPTURE_SEEDS") != "1" {
		t.Skip("set DIRECTGATE_CAPTURE_SEEDS=1 to rewrite wire/testdata/fuzz/*/mariadb-*")
	}
	mustExec(t, direct(t), "DROP TABLE IF EXISTS seeds",
		"CREATE TABLE seeds (id INT PRIMARY KEY, name VARCHAR(20), at DATETIME(3) NULL, n DECIMAL(8,2))",
		"INSERT INTO seeds VALUES (1, 'one', '2024-01-02 03:04:05.678', 1.5), (2, NULL, NULL, -2), (3, 'three', NULL, 0)")
	dir := filepath.Join("..", "wire", "testdata", "fuzz")
	write := func(target, name string, args ...any) {
		t.Helper()
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch v := a.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
			case string:
				fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(v))
			case uint8:
				fmt.Fprintf(&b, "uint8(%d)\n", v)
			case uint32:
				fmt.Fprintf(&b, "uint32(%d)\n", v)
			case uint16:
				fmt.Fprintf(&b, "uint16(%d)\n", v)
			case bool:
				fmt.Fprintf(&b, "bool(%v)\n", v)
			default:
				t.Fatalf("seed argument of type %T", a)
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, target, "mariadb-"+name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Backends always answer with EOF packets (the gateway dials without
	// CLIENT_DEPRECATE_EOF); the targets' deprecate flag is the client's.
	{
		rec := startRecorder(t, shared.db.Addr())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		bc, err := wire.Dial(ctx, rec.addr(), wire.DialOptions{User: backendUser, Password: backendPass})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		_ = bc.NetConn().SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := bc.Exec("USE " + testDB); err != nil {
			t.Fatal(err)
		}
		fromServer, fromClient := rec.take()
		{
			greeting := fromServer[4 : 4+int(fromServer[0])|int(fromServer[1])<<8]
			write("FuzzParseGreeting", "greeting", greeting)
			write("FuzzClientLogin", "native-ok", fromServer, backendPass)
			// The client's bytes start at its handshake response (seq 1).
			write("FuzzServerLogin", "native", fromClient, uint8(0))
			resp := fromClient[4 : 4+int(fromClient[0])|int(fromClient[1])<<8]
			write("FuzzParseHandshakeResponse", "dial", resp)
			if g, err := wire.ParseGreeting(greeting); err == nil {
				write("FuzzGreetingRoundTrip", "mariadb", g.ServerVersion, g.ConnectionID, g.Salt, g.Caps, g.Collation, g.Status, g.AuthPlugin)
			}
		}
		relay := func(target, name string, kind wire.ResponseKind, cmd []byte) *wire.Result {
			t.Helper()
			if err := bc.WriteCommand(cmd); err != nil {
				t.Fatal(err)
			}
			client := wire.NewConn(&sinkConn{r: bytes.NewReader(framed(2, []byte("9\n8\n"), nil))}, 4096, 4096)
			client.SetSeq(1)
			r := &wire.Relay{ClientCaps: bc.Caps}
			res, err := r.Run(client, bc.Conn, kind)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, _ := rec.take()
			write(target, name, got, uint8(kind), false)
			write(target, name+"-deprecate-eof", got, uint8(kind), true)
			return &res
		}
		query := func(q string) []byte { return append([]byte{wire.ComQuery}, q...) }
		relay("FuzzRelay", "rows", wire.ResponseQuery, query("SELECT * FROM seeds ORDER BY id"))
		relay("FuzzRelay", "multi", wire.ResponseQuery, query("SELECT 1 AS a; UPDATE seeds SET n = n WHERE id = 1; SELECT name FROM seeds WHERE id = 2"))
		relay("FuzzRelay", "error", wire.ResponseQuery, query("SELECT * FROM no_such_table"))
		relay("FuzzRelay", "ok", wire.ResponseQuery, query("UPDATE seeds SET n = n + 0 WHERE id > 0"))
		relay("FuzzRelay", "infile", wire.ResponseQuery, query("LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE seeds (id)"))
		relay("FuzzRelay", "fieldlist", wire.ResponseFieldList, append([]byte{wire.ComFieldList}, "seeds\x00"...))
		relay("FuzzRelayBinary", "prepare-params", wire.ResponsePrepare, append([]byte{wire.ComStmtPrepare}, "SELECT id, name, ? FROM seeds WHERE id > ?"...))
		res := relay("FuzzRelayBinary", "prepare", wire.ResponsePrepare, append([]byte{wire.ComStmtPrepare}, "SELECT * FROM seeds ORDER BY id"...))
		exec := func(flags byte) []byte {
			b := []byte{wire.ComStmtExecute}
			b = binary.LittleEndian.AppendUint32(b, res.StmtID)
			b = append(b, flags)
			return binary.LittleEndian.AppendUint32(b, 1)
		}
		relay("FuzzRelayBinary", "execute", wire.ResponseQuery, exec(0))
		relay("FuzzRelayBinary", "execute-cursor", wire.ResponseQuery, exec(1))
		fetch := binary.LittleEndian.AppendUint32([]byte{wire.ComStmtFetch}, res.StmtID)
		relay("FuzzRelayBinary", "fetch", wire.ResponseFetch, binary.LittleEndian.AppendUint32(fetch, 2))
		relay("FuzzRelayBinary", "fetch-last", wire.ResponseFetch, binary.LittleEndian.AppendUint32(fetch, 2))
		{
			if err := bc.WriteCommand(query("SELECT * FROM seeds ORDER BY id")); err != nil {
				t.Fatal(err)
			}
			client := wire.NewConn(&sinkConn{r: bytes.NewReader(nil)}, 4096, 4096)
			client.SetSeq(1)
			if _, err := (&wire.Relay{ClientCaps: bc.Caps}).Run(client, bc.Conn, wire.ResponseQuery); err != nil {
				t.Fatal(err)
			}
			got, _ := rec.take()
			write("FuzzReadPacket", "rows", got, uint16(4095))
			// Single packets of that response, and an OK and an ERR.
			for i, p := range payloads(got) {
				if i < 3 {
					write("FuzzResultPackets", fmt.Sprintf("rows-%d", i), p)
				}
			}
		}
		bc.Close()
	}
}

// framed frames payloads with sequence ids from seq.
func framed(seq byte, ps ...[]byte) []byte {
	var b []byte
	for _, p := range ps {
		b = append(b, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq)
		b = append(b, p...)
		seq++
	}
	return b
}

// payloads splits framed packets.
func payloads(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 4 {
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		if len(b) < 4+n {
			break
		}
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out
}

// sinkConn is a net.Conn reading from r and discarding writes.
type sinkConn struct {
	net.Conn
	r io.Reader
}

func (c *sinkConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *sinkConn) Write(p []byte) (int, error) { return len(p), nil }

// recorder is a one-connection TCP proxy that keeps what each side sent
// since the last take.
type recorder struct {
	ln                   net.Listener
	mu                   sync.Mutex
	fromServer, fromClnt []byte
}

func startRecorder(t *testing.T, backend string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s, err := net.Dial("tcp", backend)
		if err != nil {
			return
		}
		defer s.Close()
		done := make(chan struct{}, 2)
		go func() { r.copy(s, c, &r.fromClnt); done <- struct{}{} }()
		go func() { r.copy(c, s, &r.fromServer); done <- struct{}{} }()
		<-done
	}()
	return r
}

func (r *recorder) addr() string { return r.ln.Addr().String() }

// copy forwards src to dst, recording each chunk before forwarding it.
func (r *recorder) copy(dst io.Writer, src io.Reader, into *[]byte) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			*into = append(*into, buf[:n]...)
			r.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// take returns and forgets what each side sent since the last take.
func (r *recorder) take() (fromServer, fromClient []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fromServer, fromClient = r.fromServer, r.fromClnt
	r.fromServer, r.fromClnt = nil, nil
	return fromServer, fromClient
}
