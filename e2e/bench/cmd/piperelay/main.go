// Command piperelay measures what pipelining statements on a few backend
// connections is worth: the ceiling of a hop that, unlike every proxy in
// `make bench` (the gateway and ProxySQL included), writes a statement to
// a backend connection while the answers of the statements before it are
// still on their way. It is a measuring tool, not a proxy:
//
//   - it authenticates nobody: every login is accepted (loopback only);
//   - it serves the text protocol only: COM_QUERY is pipelined, COM_QUIT
//     ends the client, every other command gets OK without reaching the
//     backend (so COM_INIT_DB, COM_PING and prepared statements lie);
//   - the backend connections are opened at start with -user and
//     -password, in database -db, and shared by every client: a statement
//     that changes session state (SET, USE, a transaction) changes it for
//     everyone, so only stateless autocommit reads such as sysbench's
//     oltp_point_select with --db-ps-mode=disable measure anything.
//
// Each client's statement goes to the next backend connection in turn and
// is written at once; one goroutine per backend connection reads the
// answers in the order the statements were written and copies each to
// its client. MariaDB then finds the next statement waiting when it
// finishes one, instead of sleeping until it arrives.
//
// Usage: piperelay -listen 127.0.0.1:PORT -backend 127.0.0.1:PORT -conns 4
//
// docs/benchmarks.md has its figures beside the gateway and ProxySQL
// ("Pipelining: what it would be worth") and how they were taken.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/wire"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3307", "address to accept clients on")
	backendAddr := flag.String("backend", "127.0.0.1:3306", "MariaDB to pipeline every statement to")
	conns := flag.Int("conns", 4, "backend connections that carry every client's statements")
	user := flag.String("user", "gateway", "backend account")
	password := flag.String("password", "secret", "backend account's password")
	db := flag.String("db", "sbtest", "database of the backend connections")
	capture := flag.Bool("capture-warnings", false, "write \"SHOW WARNINGS;\" before each statement sent while another is in flight on its connection, and drop that result (what keeping every statement's warnings list costs)")
	flag.Parse()
	if err := run(*listen, *backendAddr, *conns, *user, *password, *db, *capture); err != nil {
		fmt.Fprintln(os.Stderr, "piperelay:", err)
		os.Exit(1)
	}
}

func run(listen, addr string, n int, user, password, db string, capture bool) error {
	if n < 1 {
		return errors.New("-conns must be at least 1")
	}
	backends := make([]*backend, 0, n)
	for range n {
		b, err := dialBackend(addr, user, password, db)
		if err != nil {
			return err
		}
		backends = append(backends, b)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	r := &relay{backends: backends, capture: capture}
	for _, b := range backends {
		go func() {
			err := b.answer()
			log.Fatalf("piperelay: backend connection: %v", err)
		}()
	}
	for {
		nc, err := ln.Accept()
		if err != nil {
			return err
		}
		go r.serve(nc)
	}
}

// relay hands each client statement to the next backend connection.
type relay struct {
	backends []*backend
	next     atomic.Uint32
	ids      atomic.Uint32
	// capture: -capture-warnings.
	capture bool
}

// client is one accepted connection. mu is held while an answer is
// copied to it: its next statement may go to another backend connection,
// whose answer must wait until the previous one is flushed.
type client struct {
	mu sync.Mutex
	nc net.Conn
	bw *bufio.Writer
}

// backend is one shared backend connection. mu keeps the order in which
// statements are written and the order of pending the same.
type backend struct {
	mu      sync.Mutex
	nc      net.Conn
	br      *bufio.Reader
	pending chan sent
	// inflight counts the statements written and not yet answered.
	inflight atomic.Int32
}

// sent is a statement written to a backend connection: whose answer it
// is, and whether a SHOW WARNINGS result comes before it.
type sent struct {
	c        *client
	prefixed bool
}

func dialBackend(addr, user, password, db string) (*backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, addr, wire.DialOptions{User: user, Password: password})
	if err != nil {
		return nil, err
	}
	if err := bc.WriteCommand(append([]byte{wire.ComInitDB}, db...)); err != nil {
		return nil, err
	}
	if p, err := bc.ReadPacket(); err != nil {
		return nil, err
	} else if p[0] != 0 {
		return nil, fmt.Errorf("USE %s: %q", db, p)
	}
	// Read and written directly from here on: the answers are parsed by
	// answer, and statements are written while it reads.
	nc := bc.NetConn().(interface{ NetConn() net.Conn }).NetConn()
	return &backend{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), pending: make(chan sent, 1<<16)}, nil
}

// serve greets c, accepts its login and pipelines its statements.
func (r *relay) serve(nc net.Conn) {
	defer nc.Close()
	br := bufio.NewReaderSize(nc, 16<<10)
	c := &client{nc: nc, bw: bufio.NewWriterSize(nc, 16<<10)}
	if _, err := nc.Write(greeting(r.ids.Add(1))); err != nil {
		return
	}
	var p []byte
	var err error
	if p, err = readPacket(br, p); err != nil {
		return
	}
	if _, err := nc.Write(ok(2)); err != nil {
		return
	}
	for {
		if p, err = readPacket(br, p); err != nil {
			return
		}
		switch p[4] {
		case wire.ComQuit:
			return
		case wire.ComQuery:
			b := r.backends[r.next.Add(1)%uint32(len(r.backends))]
			b.mu.Lock()
			s := sent{c: c, prefixed: r.capture && b.inflight.Load() > 0}
			w := p
			if s.prefixed {
				w = append(append(append(w[:0:0], 0, 0, 0, 0, wire.ComQuery), "SHOW WARNINGS;"...), p[5:]...)
				n := len(w) - 4
				w[0], w[1], w[2] = byte(n), byte(n>>8), byte(n>>16)
			}
			_, err := b.nc.Write(w)
			if err == nil {
				b.inflight.Add(1)
				b.pending <- s
			}
			b.mu.Unlock()
			if err != nil {
				log.Fatalf("piperelay: writing to the backend: %v", err)
			}
		default:
			c.mu.Lock()
			_, err := nc.Write(ok(1))
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// answer copies the backend's answers, one per statement written, to
// their clients, in order.
func (b *backend) answer() error {
	var p []byte
	for s := range b.pending {
		c := s.c
		if s.prefixed {
			if err := b.skipResultSet(&p); err != nil {
				return err
			}
		}
		c.mu.Lock()
		err := b.copyAnswer(c, &p)
		b.inflight.Add(-1)
		if err == nil {
			_ = c.bw.Flush() // a client gone is its own business
		}
		c.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// copyAnswer copies one answer (the classic EOF protocol: the backend
// was not asked for CLIENT_DEPRECATE_EOF, nor was the client offered it):
// OK, ERR, or result sets, following SERVER_MORE_RESULTS_EXISTS.
func (b *backend) copyAnswer(c *client, p *[]byte) error {
	for {
		var err error
		if *p, err = readPacket(b.br, *p); err != nil {
			return err
		}
		_, _ = c.bw.Write(*p)
		switch (*p)[4] {
		case 0x00:
			if !okMoreResults((*p)[4:]) {
				return nil
			}
			continue
		case 0xff:
			return nil
		case 0xfb:
			return errors.New("LOCAL INFILE is not relayed")
		}
		// A result set: column definitions, EOF, rows, then EOF or ERR.
		eofs := 0
		for {
			if *p, err = readPacket(b.br, *p); err != nil {
				return err
			}
			_, _ = c.bw.Write(*p)
			q := (*p)[4:]
			if q[0] == 0xff && eofs == 1 {
				return nil
			}
			if q[0] != 0xfe || len(q) >= 9 {
				continue
			}
			if eofs++; eofs == 2 {
				if len(q) < 5 || binary.LittleEndian.Uint16(q[3:5])&wire.StatusMoreResults == 0 {
					return nil
				}
				break
			}
		}
	}
}

// skipResultSet reads one result set (column count, definitions, EOF,
// rows, EOF) and drops it.
func (b *backend) skipResultSet(p *[]byte) error {
	eofs := 0
	for first := true; ; first = false {
		var err error
		if *p, err = readPacket(b.br, *p); err != nil {
			return err
		}
		q := (*p)[4:]
		if first && (q[0] == 0xff || q[0] == 0x00) {
			return fmt.Errorf("SHOW WARNINGS answered %q", q)
		}
		if q[0] == 0xfe && len(q) < 9 {
			if eofs++; eofs == 2 {
				return nil
			}
		}
	}
}

// okMoreResults reports SERVER_MORE_RESULTS_EXISTS in OK packet q.
func okMoreResults(q []byte) bool {
	i := 1
	for range 2 { // affected rows, last insert id
		if i >= len(q) {
			return false
		}
		switch q[i] {
		case 0xfc:
			i += 3
		case 0xfd:
			i += 4
		case 0xfe:
			i += 9
		default:
			i++
		}
	}
	return i+2 <= len(q) && binary.LittleEndian.Uint16(q[i:])&wire.StatusMoreResults != 0
}

// readPacket reads one packet, header included, into buf.
func readPacket(br *bufio.Reader, buf []byte) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return nil, err
	}
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	if cap(buf) < 4+n {
		buf = make([]byte, 4+n)
	}
	buf = buf[:4+n]
	copy(buf, h[:])
	if _, err := io.ReadFull(br, buf[4:]); err != nil {
		return nil, err
	}
	return buf, nil
}

// ok is an OK packet with sequence number seq and autocommit on.
func ok(seq byte) []byte {
	return []byte{7, 0, 0, seq, 0, 0, 0, byte(wire.StatusAutocommit), 0, 0, 0}
}

// greeting is a protocol 10 handshake offering mysql_native_password,
// without CLIENT_DEPRECATE_EOF (the backend connections speak classic EOF).
func greeting(id uint32) []byte {
	caps := wire.CapLongPassword | wire.CapLongFlag | wire.CapConnectWithDB | wire.CapProtocol41 |
		wire.CapTransactions | wire.CapSecureConnection | wire.CapPluginAuth | wire.CapMultiResults
	p := []byte{0, 0, 0, 0, 10}
	p = append(p, "5.5.5-10.11.6-MariaDB-piperelay"...)
	p = append(p, 0)
	p = binary.LittleEndian.AppendUint32(p, id)
	p = append(p, "abcdefgh"...) // scramble, first part: the answer is not checked
	p = append(p, 0)
	p = binary.LittleEndian.AppendUint16(p, uint16(caps))
	p = append(p, 45) // utf8mb4_general_ci
	p = binary.LittleEndian.AppendUint16(p, wire.StatusAutocommit)
	p = binary.LittleEndian.AppendUint16(p, uint16(caps>>16))
	p = append(p, 21)
	p = append(p, make([]byte, 10)...)
	p = append(p, "ijklmnopqrst"...)
	p = append(p, 0)
	p = append(p, "mysql_native_password"...)
	p = append(p, 0)
	n := len(p) - 4
	p[0], p[1], p[2] = byte(n), byte(n>>8), byte(n>>16)
	return p
}
