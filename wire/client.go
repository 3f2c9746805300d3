package wire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
)

// BackendCaps are the capabilities the gateway asks for on backend
// connections. Backends speak the classic EOF protocol; the relay converts
// for CLIENT_DEPRECATE_EOF clients, so one pool serves both kinds.
// CLIENT_FOUND_ROWS is added per pool; multi-statements are switched per
// session with COM_SET_OPTION.
const BackendCaps = CapLongPassword | CapLongFlag | CapLocalFiles | CapProtocol41 |
	CapTransactions | CapSecureConnection | CapMultiStatements | CapMultiResults |
	CapPSMultiResults | CapPluginAuth | CapPluginAuthLenenc | CapConnectAttrs

// DialOptions says how to open a backend connection.
type DialOptions struct {
	User     string
	Password string
	// PasswordSHA1, when set, logs in with SHA1(password) instead of
	// Password: mysql_native_password's answer needs no more (a server
	// asking for another plugin fails the dial). It is as secret as the
	// password: never log it.
	PasswordSHA1 []byte
	// Caps are added to BackendCaps (for example CapFoundRows).
	Caps uint32
	// Collation is sent in the handshake; 0 means DefaultCollation.
	Collation byte
	// ReadBuffer and WriteBuffer size the connection's buffers; 0 means 64
	// KiB and 16 KiB.
	ReadBuffer, WriteBuffer int
	// Attrs are sent as connection attributes (program_name and so on).
	Attrs map[string]string
	// TLS, when not nil, encrypts the connection: after the greeting an
	// SSL request is sent and a TLS handshake run with this configuration
	// before the handshake response, which then goes over TLS. An empty
	// ServerName is set to the host of addr. Nil: plain connection.
	TLS *tls.Config
	// TLSPreferred makes TLS optional: a server that does not offer it
	// gets a plain connection. False: such a server fails the dial with
	// ErrNoServerTLS.
	TLSPreferred bool
}

// ErrNoServerTLS is returned by Dial when TLS is required and the server
// does not offer it.
var ErrNoServerTLS = errors.New("the server does not offer TLS (start it with ssl-cert and ssl-key, or lower backend_tls.mode)")

// BackendConn is an authenticated connection to a MySQL server.
type BackendConn struct {
	*Conn
	// Greeting is the server's handshake.
	Greeting *Greeting
	// Caps are the negotiated capabilities.
	Caps uint32
}

// Dial connects to addr and authenticates. ctx bounds the whole handshake.
func Dial(ctx context.Context, addr string, o DialOptions) (*BackendConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	rs, ws := o.ReadBuffer, o.WriteBuffer
	if rs <= 0 {
		rs = 64 << 10
	}
	if ws <= 0 {
		ws = 16 << 10
	}
	bc := &BackendConn{Conn: NewConn(nc, rs, ws)}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	err = bc.handshake(addr, o)
	if !stop() && err != nil {
		err = errors.Join(ctx.Err(), err)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return bc, nil
}

func (bc *BackendConn) handshake(addr string, o DialOptions) error {
	p, err := bc.ReadPacket()
	if err != nil {
		return fmt.Errorf("reading greeting: %w", err)
	}
	g, err := ParseGreeting(p)
	if err != nil {
		return err
	}
	bc.Greeting = g
	if g.Caps&CapProtocol41 == 0 {
		return errors.New("server does not speak protocol 4.1")
	}
	caps := (BackendCaps | o.Caps) & g.Caps
	caps |= CapProtocol41 | CapSecureConnection
	bc.Caps = caps
	coll := o.Collation
	if coll == 0 {
		coll = DefaultCollation
	}
	plugin := g.AuthPlugin
	if plugin == "" {
		plugin = NativePassword
	}
	sec := secret{password: o.Password, sha1: o.PasswordSHA1}
	if sec.sha1 != nil {
		plugin = NativePassword
	}
	auth, err := scrambleFor(plugin, g.Salt, sec)
	if err != nil {
		plugin = NativePassword
		auth, _ = scrambleFor(plugin, g.Salt, sec)
	}
	const maxPacket = 1 << 30
	if o.TLS != nil {
		if g.Caps&CapSSL == 0 {
			if !o.TLSPreferred {
				return ErrNoServerTLS
			}
		} else if err := bc.startTLS(addr, o.TLS, caps|CapSSL, maxPacket, coll); err != nil {
			return err
		} else {
			caps |= CapSSL
			bc.Caps = caps
		}
	}
	resp := &HandshakeResponse{
		Caps: caps, MaxPacket: maxPacket, Collation: coll, User: o.User,
		AuthData: auth, AuthPlugin: plugin, Attrs: o.Attrs,
	}
	if caps&CapConnectAttrs == 0 {
		resp.Attrs = nil
	}
	if err := bc.WritePacket(AppendHandshakeResponse(nil, resp)); err != nil {
		return err
	}
	if err := bc.Flush(); err != nil {
		return err
	}
	return bc.authResult(plugin, g.Salt, sec)
}

// startTLS sends the SSL request and switches the connection to TLS.
func (bc *BackendConn) startTLS(addr string, conf *tls.Config, caps, maxPacket uint32, coll byte) error {
	if err := bc.WritePacket(AppendSSLRequest(nil, caps, maxPacket, coll)); err != nil {
		return err
	}
	if conf.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		conf = conf.Clone()
		conf.ServerName = host
	}
	if _, err := bc.StartTLSClient(conf); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	return nil
}

// authResult reads the server's answers after a handshake response or
// COM_CHANGE_USER, following auth switch requests, until OK or ERR. salt
// is the scramble the last answer was computed from; an auth switch
// brings a new one.
func (bc *BackendConn) authResult(plugin string, salt []byte, sec secret) error {
	for range 6 {
		p, err := bc.ReadPacket()
		if err != nil {
			return fmt.Errorf("reading auth result: %w", err)
		}
		switch {
		case IsOK(p):
			return nil
		case IsERR(p):
			return ParseERR(p)
		case len(p) > 0 && p[0] == eofHeader:
			// Auth switch request: plugin name, then its data.
			name, n, ok := readNulString(p[1:])
			if !ok {
				return ErrMalformed
			}
			plugin = string(name)
			data := p[1+n:]
			// The scramble may come NUL-terminated; ed25519's is 32 bytes,
			// any of which may be 0.
			if len(data) > 0 && data[len(data)-1] == 0 && (plugin != ClientEd25519 || len(data) == 33) {
				data = data[:len(data)-1]
			}
			salt = append([]byte(nil), data...)
			ans, err := scrambleFor(plugin, salt, sec)
			if err != nil {
				return err
			}
			if err := bc.WritePacket(ans); err != nil {
				return err
			}
		case len(p) == 2 && p[0] == authMoreData && plugin == CachingSha2Password:
			switch p[1] {
			case sha2FastAuthSuccess: // OK follows
				continue
			case sha2FullAuth:
			default:
				return ErrMalformed
			}
			if sec.sha1 != nil {
				return errors.New("the backend asks for the password in full, which the gateway does not know for this account")
			}
			if err := bc.sha2FullAuth(salt, sec.password); err != nil {
				return err
			}
		default:
			return ErrMalformed
		}
		if err := bc.Flush(); err != nil {
			return err
		}
	}
	return errors.New("authentication did not finish")
}

// sha2FullAuth answers caching_sha2_password's perform_full_authentication:
// over TLS the password in clear text, NUL-terminated; over plain TCP the
// password encrypted with the server's RSA public key, asked for first
// (0x02) and sent back in an AuthMoreData packet. The caller flushes.
func (bc *BackendConn) sha2FullAuth(salt []byte, password string) error {
	if bc.TLS() != nil {
		return bc.WritePacket(append([]byte(password), 0))
	}
	if err := bc.WritePacket([]byte{sha2RequestKey}); err != nil {
		return err
	}
	if err := bc.Flush(); err != nil {
		return err
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return fmt.Errorf("reading the server's public key: %w", err)
	}
	if IsERR(p) {
		return ParseERR(p)
	}
	if len(p) < 2 || p[0] != authMoreData {
		return fmt.Errorf("reading the server's public key: %w", ErrMalformed)
	}
	pub, err := ParsePublicKeyPEM(p[1:])
	if err != nil {
		return err
	}
	enc, err := EncryptPassword(password, salt, pub)
	if err != nil {
		return err
	}
	return bc.WritePacket(enc)
}

// ChangeUser logs the connection in again (COM_CHANGE_USER) as user with
// database db ("" for none). The server resets the session as for a new
// connection.
func (bc *BackendConn) ChangeUser(user, password, db string) error {
	return bc.changeUser(user, secret{password: password}, db)
}

// ChangeUserSHA1 is ChangeUser with SHA1(password) (see
// DialOptions.PasswordSHA1).
func (bc *BackendConn) ChangeUserSHA1(user string, passwordSHA1 []byte, db string) error {
	return bc.changeUser(user, secret{sha1: passwordSHA1}, db)
}

func (bc *BackendConn) changeUser(user string, sec secret, db string) error {
	plugin := bc.Greeting.AuthPlugin
	if plugin == "" || sec.sha1 != nil {
		plugin = NativePassword
	}
	auth, err := scrambleFor(plugin, bc.Greeting.Salt, sec)
	if err != nil {
		plugin = NativePassword
		auth, _ = scrambleFor(plugin, bc.Greeting.Salt, sec)
	}
	b := []byte{ComChangeUser}
	b = append(b, user...)
	b = append(b, 0, byte(len(auth)))
	b = append(b, auth...)
	b = append(b, db...)
	b = append(b, 0, DefaultCollation, 0)
	b = append(b, plugin...)
	b = append(b, 0)
	if bc.Caps&CapConnectAttrs != 0 {
		b = append(b, 0)
	}
	if err := bc.WriteCommand(b); err != nil {
		return err
	}
	return bc.authResult(plugin, bc.Greeting.Salt, sec)
}

// secret is what a login proves: the password, or only its SHA1
// (mysql_native_password's stage 1).
type secret struct {
	password string
	sha1     []byte
}

func scrambleFor(plugin string, salt []byte, sec secret) ([]byte, error) {
	password := sec.password
	if sec.sha1 != nil {
		if plugin != NativePassword {
			return nil, fmt.Errorf("backend asks for auth plugin %q; this account can log in only with mysql_native_password", plugin)
		}
		return ScrambleNativeSHA1(salt, sec.sha1), nil
	}
	switch plugin {
	case NativePassword:
		return ScrambleNative(salt, password), nil
	case CachingSha2Password:
		return ScrambleCachingSha2(salt, password), nil
	case ClientEd25519:
		if len(salt) != 32 {
			return nil, fmt.Errorf("client_ed25519: the scramble is %d bytes, not 32: %w", len(salt), ErrMalformed)
		}
		return SignEd25519(salt, password), nil
	}
	return nil, fmt.Errorf("backend asks for auth plugin %q, which the gateway does not speak; use mysql_native_password, caching_sha2_password or ed25519 for the backend user", plugin)
}

// Exec runs a statement whose result the caller does not want (SET, USE,
// ROLLBACK) and returns the final OK. Result rows are read and dropped.
// A backend error comes back as *SQLError; any other error means the
// connection is broken.
func (bc *BackendConn) Exec(query string) (OK, error) {
	var ok OK
	err := bc.query(query, func([][]byte) {}, &ok)
	return ok, err
}

// QueryRows runs a query and calls row for each text-protocol row (nil
// elements are NULL). It is meant for the gateway's own small queries.
func (bc *BackendConn) QueryRows(query string, row func([][]byte)) error {
	var ok OK
	return bc.query(query, row, &ok)
}

func (bc *BackendConn) query(query string, row func([][]byte), last *OK) error {
	cmd := make([]byte, 0, 1+len(query))
	cmd = append(cmd, ComQuery)
	cmd = append(cmd, query...)
	if err := bc.WriteCommand(cmd); err != nil {
		return err
	}
	for {
		more, err := bc.ReadResult(row, last)
		if err != nil || !more {
			return err
		}
	}
}

// ReadResult reads one result of the answer to a command already written
// (an OK, an ERR or a result set, whose rows it hands to row as QueryRows
// does) and reports whether more results follow
// (SERVER_MORE_RESULTS_EXISTS). last, when not nil, gets the OK, or the
// status of the result set's end. With row and last nil it skips the
// result and allocates nothing. The sequence id must be the result's
// first: 1 for the first result of an answer (SetSeq). A backend error
// comes back as *SQLError; any other error means the connection is
// broken.
func (bc *BackendConn) ReadResult(row func([][]byte), last *OK) (more bool, err error) {
	for {
		p, err := bc.ReadPacket()
		if err != nil {
			return false, err
		}
		switch {
		case IsERR(p):
			return false, ParseERR(p)
		case IsOK(p):
			ok, _ := ParseOK(p)
			if last != nil {
				*last = ok
			}
			return ok.Status&StatusMoreResults != 0, nil
		case len(p) > 0 && p[0] == localInfileHeader:
			if err := bc.WritePacket(nil); err != nil {
				return false, err
			}
			if err := bc.Flush(); err != nil {
				return false, err
			}
			continue
		}
		ncols, _, ok := readLenEnc(p)
		if !ok {
			return false, ErrMalformed
		}
		if err := bc.skipDefinitions(int(ncols)); err != nil {
			return false, err
		}
		var vals [][]byte
		if row != nil {
			vals = make([][]byte, ncols)
		}
		for {
			p, err := bc.ReadPacket()
			if err != nil {
				return false, err
			}
			if IsERR(p) {
				return false, ParseERR(p)
			}
			if bc.isEnd(p) {
				_, st := endStatus(p)
				if last != nil {
					last.Status = st
				}
				return st&StatusMoreResults != 0, nil
			}
			if row == nil {
				continue
			}
			rest := p
			for i := range vals {
				if len(rest) > 0 && rest[0] == 0xfb {
					vals[i], rest = nil, rest[1:]
					continue
				}
				s, n, ok := readLenEncString(rest)
				if !ok {
					return false, ErrMalformed
				}
				vals[i], rest = s, rest[n:]
			}
			row(vals)
		}
	}
}

// SimpleCommand sends a one-packet command (COM_PING, COM_INIT_DB,
// COM_RESET_CONNECTION, COM_SET_OPTION) and reads its OK, EOF or ERR.
func (bc *BackendConn) SimpleCommand(cmd []byte) (OK, error) {
	if err := bc.WriteCommand(cmd); err != nil {
		return OK{}, err
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return OK{}, err
	}
	switch {
	case IsERR(p):
		return OK{}, ParseERR(p)
	case IsEOF(p):
		w, st := ParseEOF(p)
		return OK{Status: st, Warnings: w}, nil
	}
	ok, good := ParseOK(p)
	if !good {
		return OK{}, ErrMalformed
	}
	return ok, nil
}

// Prepare prepares query on the connection (COM_STMT_PREPARE) and reads
// the whole answer, returning the statement id and the counts of
// parameters and columns. A backend error comes back as *SQLError.
func (bc *BackendConn) Prepare(query string) (id uint32, params, columns uint16, err error) {
	cmd := make([]byte, 0, 1+len(query))
	cmd = append(cmd, ComStmtPrepare)
	cmd = append(cmd, query...)
	if err := bc.WriteCommand(cmd); err != nil {
		return 0, 0, 0, err
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return 0, 0, 0, err
	}
	if IsERR(p) {
		return 0, 0, 0, ParseERR(p)
	}
	if len(p) < 12 || p[0] != okHeader {
		return 0, 0, 0, ErrMalformed
	}
	id = binary.LittleEndian.Uint32(p[1:])
	columns = binary.LittleEndian.Uint16(p[5:])
	params = binary.LittleEndian.Uint16(p[7:])
	for _, n := range []uint16{params, columns} {
		if n == 0 {
			continue
		}
		if err := bc.skipDefinitions(int(n)); err != nil {
			return 0, 0, 0, err
		}
	}
	return id, params, columns, nil
}

// skipDefinitions reads n column or parameter definitions and, on a
// classic connection, the EOF after them.
func (bc *BackendConn) skipDefinitions(n int) error {
	if bc.Caps&CapDeprecateEOF == 0 {
		n++
	}
	for range n {
		if _, err := bc.ReadPacket(); err != nil {
			return err
		}
	}
	return nil
}

// isEnd reports whether p ends a row set on this connection: a classic
// EOF, or with CLIENT_DEPRECATE_EOF an OK packet with header 0xfe.
func (bc *BackendConn) isEnd(p []byte) bool {
	if bc.Caps&CapDeprecateEOF != 0 {
		return len(p) > 0 && p[0] == eofHeader && len(p) < MaxPacketPayload
	}
	return IsEOF(p)
}

// SendNoReply sends a command that the server does not answer
// (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA).
func (bc *BackendConn) SendNoReply(cmd []byte) error { return bc.WriteCommand(cmd) }

// quitTimeout bounds the write of COM_QUIT. A connection at rest has room
// in its socket for the packet, so only a peer that stopped reading (or a
// TLS record that cannot go out) ever waits.
const quitTimeout = time.Second

// Quit ends the connection the way a client leaves: COM_QUIT, then Close.
// The server then counts a normal disconnect; a connection merely closed
// counts as an aborted client (Aborted_clients), and MariaDB logs an
// "Aborted connection" warning for it at its default log_warnings=2.
//
// Call Quit only between commands. In the middle of one (a result not
// read to its end, LOAD DATA LOCAL INFILE's content expected) the server
// would take the packet as part of it: close such a connection with
// Close. The connection is closed even when the packet cannot be sent;
// Quit returns Close's error.
func (bc *BackendConn) Quit() error {
	if err := bc.nc.SetWriteDeadline(time.Now().Add(quitTimeout)); err == nil {
		_ = bc.WriteCommand([]byte{ComQuit}) // closed below either way
	}
	return bc.Close()
}

// RawResult is the whole answer to a query, packet payloads as the server
// sent them (see QueryRaw).
type RawResult struct {
	// Defs are the column definitions, Rows the text rows.
	Defs, Rows [][]byte
	// Status and Warnings are those of the final OK or EOF.
	Status, Warnings uint16
	// OK is set when the answer was an OK packet (no result set).
	OK *OK
}

// ErrResultTooLarge is returned by QueryRaw for an answer of more rows
// than it keeps.
var ErrResultTooLarge = errors.New("wire: result larger than the caller keeps")

// QueryRaw sends query (a COM_QUERY payload, command byte included) and
// returns its answer, one result set or OK, with at most maxRows rows
// (more fail with ErrResultTooLarge, after the answer is read to its
// end). It is meant for the gateway's own small answers that it rewrites
// before the client sees them; a server error comes back as *SQLError.
func (bc *BackendConn) QueryRaw(cmd []byte, maxRows int) (*RawResult, error) {
	if err := bc.WriteCommand(cmd); err != nil {
		return nil, err
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return nil, err
	}
	switch {
	case IsERR(p):
		return nil, ParseERR(p)
	case IsOK(p):
		ok, _ := ParseOK(p)
		return &RawResult{OK: &ok, Status: ok.Status, Warnings: ok.Warnings}, nil
	}
	n, _, good := readLenEnc(p)
	if !good || n == 0 || n > 4096 {
		return nil, ErrMalformed
	}
	res := &RawResult{Defs: make([][]byte, n)}
	for i := range res.Defs {
		if p, err = bc.ReadPacket(); err != nil {
			return nil, err
		}
		res.Defs[i] = append([]byte(nil), p...)
	}
	if bc.Caps&CapDeprecateEOF == 0 {
		if _, err := bc.ReadPacket(); err != nil { // the EOF after the definitions
			return nil, err
		}
	}
	tooMany := false
	for {
		if p, err = bc.ReadPacket(); err != nil {
			return nil, err
		}
		switch {
		case IsERR(p):
			return nil, ParseERR(p)
		case bc.isEnd(p):
			res.Warnings, res.Status = endStatus(p)
			if tooMany {
				return nil, ErrResultTooLarge
			}
			return res, nil
		case len(res.Rows) >= maxRows:
			tooMany = true
		default:
			res.Rows = append(res.Rows, append([]byte(nil), p...))
		}
	}
}
