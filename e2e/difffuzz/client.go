package difffuzz

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/directgate/directgate/wire"
)

// baseCaps are the capabilities every fuzz client asks for; a script adds
// CLIENT_MULTI_STATEMENTS, CLIENT_DEPRECATE_EOF or CLIENT_FOUND_ROWS (see
// Script.Caps). CLIENT_SESSION_TRACK is never asked for, so an OK packet
// ends with the info string.
const baseCaps = wire.CapLongPassword | wire.CapLongFlag | wire.CapConnectWithDB |
	wire.CapProtocol41 | wire.CapTransactions | wire.CapSecureConnection |
	wire.CapMultiResults | wire.CapPSMultiResults | wire.CapPluginAuth |
	wire.CapPluginAuthLenenc

// optionalCaps are the capabilities a script may add to baseCaps.
const optionalCaps = wire.CapMultiStatements | wire.CapDeprecateEOF | wire.CapFoundRows

// commandTimeout bounds one command and its whole answer: a server that
// stops answering fails the step instead of hanging the run.
const commandTimeout = 90 * time.Second

// dialConfig says how a fuzz client logs in.
type dialConfig struct {
	addr, user, password, db string
	// caps are added to baseCaps (a subset of optionalCaps).
	caps uint32
	// collation is the handshake collation; 0 means wire.DefaultCollation.
	collation byte
}

// rawConn is a MySQL protocol client that reports every packet of every
// answer, so that OK packet fields, EOF packets and row bytes can be
// compared. It is built on wire.Conn; the handshake is done here rather
// than with wire.Dial so that the capabilities are exactly the script's
// (wire.Dial always asks for CLIENT_MULTI_STATEMENTS).
type rawConn struct {
	*wire.Conn
	nc net.Conn
	// caps are the negotiated capabilities.
	caps uint32
	// id is the connection id of the greeting: MariaDB's thread id, or the
	// gateway's session id.
	id uint32
}

// dialRaw connects and logs in. ctx bounds the handshake.
func dialRaw(ctx context.Context, c dialConfig) (*rawConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	} else {
		_ = nc.SetDeadline(time.Now().Add(commandTimeout))
	}
	rc := &rawConn{Conn: wire.NewConn(nc, 64<<10, 16<<10), nc: nc}
	if err := rc.login(c); err != nil {
		nc.Close()
		return nil, fmt.Errorf("login to %s as %s: %w", c.addr, c.user, err)
	}
	_ = nc.SetDeadline(time.Time{})
	return rc, nil
}

func (rc *rawConn) login(c dialConfig) error {
	p, err := rc.ReadPacket()
	if err != nil {
		return err
	}
	g, err := wire.ParseGreeting(p)
	if err != nil {
		return err
	}
	rc.id = g.ConnectionID
	want := baseCaps | c.caps&optionalCaps
	// Only the capabilities that change what is compared must be there
	// (MariaDB leaves out CLIENT_LONG_PASSWORD, its "MySQL" bit).
	if missing := (want & (optionalCaps | wire.CapProtocol41)) &^ g.Caps; missing != 0 {
		return fmt.Errorf("server lacks capabilities %#x", missing)
	}
	rc.caps = want
	coll := c.collation
	if coll == 0 {
		coll = wire.DefaultCollation
	}
	plugin := g.AuthPlugin
	if plugin != wire.CachingSha2Password {
		plugin = wire.NativePassword
	}
	auth, err := scramble(plugin, g.Salt, c.password)
	if err != nil {
		return err
	}
	resp := &wire.HandshakeResponse{
		Caps: want, MaxPacket: 1 << 24, Collation: coll, User: c.user,
		AuthData: auth, Database: c.db, AuthPlugin: plugin,
	}
	if err := rc.WritePacket(wire.AppendHandshakeResponse(nil, resp)); err != nil {
		return err
	}
	if err := rc.Flush(); err != nil {
		return err
	}
	for range 4 {
		p, err := rc.ReadPacket()
		if err != nil {
			return err
		}
		switch {
		case wire.IsOK(p):
			return nil
		case wire.IsERR(p):
			return wire.ParseERR(p)
		case len(p) == 2 && p[0] == 0x01 && p[1] == 0x03:
			continue // caching_sha2_password fast path: the OK follows
		case len(p) > 0 && p[0] == 0xfe:
			// Auth switch request: plugin name, NUL, scramble, NUL.
			name, rest, ok := cutNul(p[1:])
			if !ok {
				return wire.ErrMalformed
			}
			if len(rest) > 0 && rest[len(rest)-1] == 0 {
				rest = rest[:len(rest)-1]
			}
			ans, err := scramble(string(name), rest, c.password)
			if err != nil {
				return err
			}
			if err := rc.WritePacket(ans); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected packet during login: % x", p)
		}
	}
	return errors.New("login did not finish")
}

func scramble(plugin string, salt []byte, password string) ([]byte, error) {
	switch plugin {
	case wire.NativePassword:
		return wire.ScrambleNative(salt, password), nil
	case wire.CachingSha2Password:
		return wire.ScrambleCachingSha2(salt, password), nil
	}
	return nil, fmt.Errorf("auth plugin %q is not supported by the fuzz client", plugin)
}

func cutNul(b []byte) (before, after []byte, ok bool) {
	for i, c := range b {
		if c == 0 {
			return b[:i], b[i+1:], true
		}
	}
	return nil, nil, false
}

// deprecateEOF reports whether result sets end with an OK packet instead
// of EOF packets.
func (rc *rawConn) deprecateEOF() bool { return rc.caps&wire.CapDeprecateEOF != 0 }

// send starts a command and arms the command timeout.
func (rc *rawConn) send(cmd []byte) error {
	_ = rc.nc.SetDeadline(time.Now().Add(commandTimeout))
	return rc.WriteCommand(cmd)
}

// query runs a COM_QUERY and returns every result of its answer.
func (rc *rawConn) query(sql string) ([]record, error) {
	if err := rc.send(append([]byte{wire.ComQuery}, sql...)); err != nil {
		return nil, err
	}
	return rc.readResults(false)
}

// initDB runs a COM_INIT_DB.
func (rc *rawConn) initDB(db string) ([]record, error) {
	if err := rc.send(append([]byte{wire.ComInitDB}, db...)); err != nil {
		return nil, err
	}
	return rc.readResults(false)
}

// setOption runs a COM_SET_OPTION: multi-statements on or off.
func (rc *rawConn) setOption(on bool) ([]record, error) {
	opt := byte(1)
	if on {
		opt = 0
	}
	if err := rc.send([]byte{wire.ComSetOption, opt, 0}); err != nil {
		return nil, err
	}
	p, err := rc.ReadPacket()
	if err != nil {
		return nil, err
	}
	switch {
	case wire.IsERR(p):
		return []record{errRecord(p)}, nil
	case wire.IsEOF(p) && len(p) == 5:
		return []record{eofRecord("set-option EOF", p)}, nil
	}
	return []record{okRecord(p)}, nil
}

// readResults reads the answer to a query or an execute: results until
// one without SERVER_MORE_RESULTS_EXISTS, or an error. binary says rows
// are in the binary protocol.
func (rc *rawConn) readResults(binary bool) ([]record, error) {
	var out []record
	for range 1000 {
		p, err := rc.ReadPacket()
		if err != nil {
			return out, err
		}
		switch {
		case len(p) == 0:
			return append(out, rawRecord("empty packet", p)), wire.ErrMalformed
		case wire.IsERR(p):
			return append(out, errRecord(p)), nil
		case wire.IsOK(p):
			r := okRecord(p)
			out = append(out, r)
			if r.status&wire.StatusMoreResults == 0 {
				return out, nil
			}
			continue
		case p[0] == 0xfb:
			// LOCAL INFILE request: the fuzzer never sends files.
			out = append(out, record{key: "LOCAL INFILE request", text: "LOCAL INFILE request"})
			if err := rc.WritePacket(nil); err != nil {
				return out, err
			}
			if err := rc.Flush(); err != nil {
				return out, err
			}
			continue
		}
		rs, more, err := rc.readResultSet(p, binary)
		out = append(out, rs...)
		if err != nil || !more {
			return out, err
		}
	}
	return out, errors.New("more than 1000 results")
}

// readResultSet reads a result set whose column count packet is first.
// It returns the records (the result set, and an ERR that ended it) and
// whether more results follow.
func (rc *rawConn) readResultSet(first []byte, binaryRows bool) ([]record, bool, error) {
	n, _, ok := wire.ReadLenEncInt(first)
	if !ok || n > 4096 {
		return []record{rawRecord("bad column count", first)}, false, wire.ErrMalformed
	}
	rs := &resultSet{binary: binaryRows}
	for range n {
		p, err := rc.ReadPacket()
		if err != nil {
			return nil, false, err
		}
		rs.cols = append(rs.cols, append([]byte(nil), p...))
	}
	if !rc.deprecateEOF() {
		p, err := rc.ReadPacket()
		if err != nil {
			return nil, false, err
		}
		if !wire.IsEOF(p) {
			return []record{rawRecord("expected EOF after columns", p)}, false, wire.ErrMalformed
		}
		mask := columnsEOFMask
		if !binaryRows {
			// A text result has no cursor: MariaDB's flag there (a
			// procedure's open cursor) means nothing to a client.
			mask = 0
		}
		e := eofRecordMask("columns EOF", p, mask)
		rs.colsEOF = &e
	}
	for rows := 0; ; rows++ {
		if rows > 100000 {
			return nil, false, errors.New("more than 100000 rows")
		}
		p, err := rc.ReadPacket()
		if err != nil {
			return nil, false, err
		}
		switch {
		case wire.IsERR(p):
			return []record{rs.record(), errRecord(p)}, false, nil
		case rc.deprecateEOF() && p[0] == 0xfe && len(p) < 0xffffff:
			end := okRecord(p)
			rs.end = end
			return []record{rs.record()}, end.status&wire.StatusMoreResults != 0, nil
		case !rc.deprecateEOF() && wire.IsEOF(p):
			end := eofRecord("EOF", p)
			rs.end = end
			return []record{rs.record()}, end.status&wire.StatusMoreResults != 0, nil
		}
		rs.rows = append(rs.rows, append([]byte(nil), p...))
	}
}

// prepared is a statement prepared with COM_STMT_PREPARE.
type prepared struct {
	id     uint32
	params int
}

// prepare runs a COM_STMT_PREPARE. The statement is nil when the server
// refused it.
func (rc *rawConn) prepare(sql string) (*prepared, []record, error) {
	if err := rc.send(append([]byte{wire.ComStmtPrepare}, sql...)); err != nil {
		return nil, nil, err
	}
	p, err := rc.ReadPacket()
	if err != nil {
		return nil, nil, err
	}
	if wire.IsERR(p) {
		return nil, []record{errRecord(p)}, nil
	}
	if len(p) < 12 || p[0] != 0 {
		return nil, []record{rawRecord("bad prepare answer", p)}, wire.ErrMalformed
	}
	st := &prepared{id: binary.LittleEndian.Uint32(p[1:])}
	cols := int(binary.LittleEndian.Uint16(p[5:]))
	st.params = int(binary.LittleEndian.Uint16(p[7:]))
	warnings := binary.LittleEndian.Uint16(p[10:])
	pr := &prepareResult{params: st.params, columns: cols, warnings: warnings, extra: p[12:]}
	for _, part := range []struct {
		n   int
		dst *[][]byte
		eof **record
	}{{st.params, &pr.paramDefs, &pr.paramsEOF}, {cols, &pr.colDefs, &pr.colsEOF}} {
		if part.n == 0 {
			continue
		}
		for range part.n {
			p, err := rc.ReadPacket()
			if err != nil {
				return nil, nil, err
			}
			*part.dst = append(*part.dst, append([]byte(nil), p...))
		}
		if !rc.deprecateEOF() {
			p, err := rc.ReadPacket()
			if err != nil {
				return nil, nil, err
			}
			e := eofRecord("EOF", p)
			*part.eof = &e
		}
	}
	return st, []record{pr.record()}, nil
}

// Binary protocol parameter types.
const (
	typeLongLong  byte = 0x08
	typeNull      byte = 0x06
	typeVarString byte = 0xfd
)

// execute runs a COM_STMT_EXECUTE without a cursor, binding params (which
// must be as many as the statement has; a mismatch is reported as the
// server reports it).
func (rc *rawConn) execute(st *prepared, params []Param) ([]record, error) {
	b := []byte{wire.ComStmtExecute}
	b = binary.LittleEndian.AppendUint32(b, st.id)
	b = append(b, 0)                           // CURSOR_TYPE_NO_CURSOR
	b = binary.LittleEndian.AppendUint32(b, 1) // iteration count
	if n := st.params; n > 0 {
		nulls := make([]byte, (n+7)/8)
		var types, values []byte
		for i := range n {
			var p Param
			if i < len(params) {
				p = params[i]
			} else {
				p = Param{Null: true}
			}
			switch {
			case p.Null:
				nulls[i/8] |= 1 << (i % 8)
				types = append(types, typeNull, 0)
			case p.IsInt:
				types = append(types, typeLongLong, 0)
				values = binary.LittleEndian.AppendUint64(values, uint64(p.Int))
			default:
				types = append(types, typeVarString, 0)
				values = wire.AppendLenEncInt(values, uint64(len(p.Str)))
				values = append(values, p.Str...)
			}
		}
		b = append(b, nulls...)
		b = append(b, 1) // new params bound: the types follow
		b = append(b, types...)
		b = append(b, values...)
	}
	if err := rc.send(b); err != nil {
		return nil, err
	}
	return rc.readResults(true)
}

// closeStmt sends COM_STMT_CLOSE, which has no answer.
func (rc *rawConn) closeStmt(st *prepared) error {
	b := []byte{wire.ComStmtClose}
	b = binary.LittleEndian.AppendUint32(b, st.id)
	return rc.send(b)
}

// quit sends COM_QUIT and closes the connection.
func (rc *rawConn) quit() {
	_ = rc.nc.SetDeadline(time.Now().Add(time.Second))
	_ = rc.WriteCommand([]byte{wire.ComQuit})
	_ = rc.nc.Close()
}
