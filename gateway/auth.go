package gateway

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// errAuthFailed ends a session whose login was refused (already logged).
var errAuthFailed = errors.New("authentication failed")

// errInsecureTransport ends a plain session refused by
// require_secure_transport.
var errInsecureTransport = errors.New("insecure transport refused")

// errUserLimit ends a session refused by its user's max_connections.
var errUserLimit = errors.New("user connection limit reached")

// handshake greets the client, authenticates it against the configured
// users and, when it named a database, checks that database on a backend.
func (ss *Session) handshake() error {
	// ss.nc is the socket: its deadlines also bound the TLS handshake and
	// every read and write over TLS.
	start := time.Now()
	_ = ss.nc.SetDeadline(start.Add(ss.srv.cfg.HandshakeTimeout))
	defer ss.nc.SetDeadline(time.Time{})
	salt, err := wire.NewSalt()
	if err != nil {
		return err
	}
	ss.salt = salt
	g := &wire.Greeting{
		ServerVersion: ss.srv.serverVersion(),
		ConnectionID:  ss.id,
		Salt:          salt,
		Caps:          wire.ServerCaps,
		Collation:     ss.srv.serverCollation(),
		Status:        wire.StatusAutocommit,
		AuthPlugin:    ss.srv.cfg.Auth.GreetingPlugin(),
	}
	ct := ss.srv.tls.Load()
	resp, plugin, answer, err := wire.ServerHandshakeTLS(ss.client, g, ct.conf)
	switch {
	case errors.Is(err, wire.ErrTLSRequested):
		ss.writeErr(wire.NewError(1043, "08S01", "Bad handshake: this gateway does not offer TLS (set tls.cert and tls.key in its config); connect without SSL"))
		return err
	case errors.Is(err, wire.ErrBadHandshake):
		ss.writeErr(wire.NewError(1043, "08S01", "Bad handshake"))
		return err
	case err != nil:
		return err
	}
	if ct.require && ss.client.TLS() == nil {
		ss.log.Warn("login refused: plain connection while require_secure_transport is on", "user", resp.User)
		ss.writeErr(wire.NewError(erSecureTransportRequired, "HY000", "Connections using insecure transport are prohibited while --require_secure_transport=ON."))
		return errInsecureTransport
	}
	ss.caps = resp.Caps & wire.ServerCaps
	// caching_sha2_password may go on with more packets (fast path or
	// full authentication); ss.client.TLS() decides how the password
	// travels.
	user, acct, refusal, err := ss.checkLogin(plugin, resp.User, salt, answer)
	if err != nil {
		return err
	}
	if refusal != nil {
		return ss.denied(resp.User, refusal)
	}
	if e := ss.srv.admitUser(ss, user); e != nil {
		ss.log.Warn("login refused: user connection limit", "user", user.User, "max_connections", user.MaxConnections)
		ss.leaveLogin(acct)
		ss.writeErr(e)
		return errUserLimit
	}
	ss.user, ss.account = user, acct
	ss.attrs = resp.AttrList // before owner: others read it once they see an owner
	ss.owner.Store(&user.User)
	ss.endParked()
	ss.cluster = ss.srv.clusters[user.Cluster]
	ss.home, ss.txnMode = ss.cluster, user.TransactionMode
	ss.collation = resp.Collation
	ss.resetState()
	if e := handshakeDBError(resp.Database, resp.Collation); e != nil {
		ss.writeErr(e)
		return e
	}
	if resp.Database != "" {
		restore := ss.boundLoginWaits(start) // loginwait.go
		err := ss.loginDB(resp.Database)
		restore()
		if err != nil {
			ss.writeErr(toClientError(err))
			return err
		}
	}
	// The account's grants, as MariaDB reads them at login (remembered
	// for the account's sessions: privileges.go).
	ss.accountPrivs()
	return ss.writeOK(wire.OK{Status: ss.status})
}

// handshakeDBError is MariaDB's answer to a login whose database name does
// not convert from the client's character set to the server's (utf8mb3):
// from a utf8mb3 or binary client, a character of four bytes or bytes
// that are not UTF-8 (make compat: main.mysql_not_windows). Nil when the
// name converts, or the client's character set is another.
func handshakeDBError(db string, collation byte) *wire.SQLError {
	var cs string
	switch {
	case collation == 63:
		cs = "binary"
	case collation == 33 || collation == 83 || collation >= 192 && collation <= 215 || collation == 223:
		cs = "utf8mb3"
	default:
		return nil
	}
	for i := 0; i < len(db); {
		r, n := utf8.DecodeRuneInString(db[i:])
		if r == utf8.RuneError && n == 1 || n == 4 {
			return wire.NewError(1300, "HY000", "Invalid %s character string: '%s'", cs, errConvString(db))
		}
		i += n
	}
	return nil
}

// errConvString writes s as MariaDB's messages quote a string that did
// not convert: printable ASCII as it is, every other byte as \xHH.
func errConvString(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02X", c)
		}
	}
	return b.String()
}

// RSAPublicKey is the key caching_sha2_password clients on plain TCP
// encrypt their password with (auth.rsa_private_key, or generated at
// start); clients may be given it ahead (go-sql-driver's serverPubKey,
// mysql --server-public-key-path) instead of asking for it.
func (s *Server) RSAPublicKey() *rsa.PublicKey { return s.auth.PublicKey() }

// checkPassword checks a login's answer against user's configured
// password. A password given as a mysql_native_password hash can only
// verify mysql_native_password scrambles; a clear-text one works with
// caching_sha2_password too (which may exchange more packets).
func (ss *Session) checkPassword(plugin, name string, salt, answer []byte, user config.User, known bool) (bool, error) {
	if sec := user.Secret(); known && sec.IsHash() {
		return plugin == wire.NativePassword && sec.CheckNative(salt, answer), nil
	}
	return ss.srv.auth.Check(ss.client, plugin, name, salt, answer, user.Password, known)
}

// denied refuses a login with MariaDB's error (checkLogin logged why).
func (ss *Session) denied(user string, refusal *wire.SQLError) error {
	ss.authFailed(user) // a guessing client gets each answer late
	ss.writeErr(refusal)
	return errAuthFailed
}

// connectDB sets the database the client named in its handshake (or in
// COM_CHANGE_USER), checked by the backend like COM_INIT_DB: the pooled
// connection's state sync sends it, so a connection already on that
// database costs nothing.
func (ss *Session) connectDB(db string) error {
	db, t, _ := splitTarget(db)
	prev, prevTarget := ss.db, ss.target
	ss.db, ss.target = db, t
	ss.nextState()
	if db == "" {
		return nil
	}
	ss.now = time.Now()
	if _, err := ss.backend(querypath.Route{Kind: querypath.KindRead}, "", false); err != nil {
		ss.db, ss.target = prev, prevTarget
		ss.nextState()
		return err
	}
	ss.releaseLease()
	return nil
}
