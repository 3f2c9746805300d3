package wire

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
)

// ServerCaps are the capabilities the gateway offers to clients.
const ServerCaps = CapLongPassword | CapFoundRows | CapLongFlag | CapConnectWithDB |
	CapNoSchema | CapLocalFiles | CapIgnoreSpace | CapProtocol41 | CapInteractive |
	CapIgnoreSigpipe | CapTransactions | CapSecureConnection | CapMultiStatements |
	CapMultiResults | CapPSMultiResults | CapPluginAuth | CapConnectAttrs |
	CapPluginAuthLenenc | CapDeprecateEOF | CapSessionTrack

// Greeting is the server's initial handshake packet (protocol version 10).
type Greeting struct {
	ServerVersion string
	ConnectionID  uint32
	Salt          []byte // 20 bytes of auth plugin data
	Caps          uint32
	Collation     byte
	Status        uint16
	AuthPlugin    string
}

// NewSalt returns 20 random bytes usable as auth plugin data: no NUL and
// no '$' bytes, as MySQL servers generate them.
func NewSalt() ([]byte, error) {
	salt := make([]byte, 20)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	for i, b := range salt {
		b &= 0x7f
		if b == 0 || b == '$' {
			b++
		}
		salt[i] = b
	}
	return salt, nil
}

// AppendGreeting appends the payload of g.
func AppendGreeting(b []byte, g *Greeting) []byte {
	b = append(b, 10)
	b = append(b, g.ServerVersion...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, g.ConnectionID)
	b = append(b, g.Salt[:8]...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(g.Caps))
	b = append(b, g.Collation)
	b = binary.LittleEndian.AppendUint16(b, g.Status)
	b = binary.LittleEndian.AppendUint16(b, uint16(g.Caps>>16))
	b = append(b, byte(len(g.Salt)+1))
	b = append(b, make([]byte, 10)...)
	b = append(b, g.Salt[8:]...)
	b = append(b, 0)
	b = append(b, g.AuthPlugin...)
	return append(b, 0)
}

// ErrMalformed reports a packet that does not follow the protocol.
var ErrMalformed = errors.New("wire: malformed packet")

// ParseGreeting decodes a server's initial handshake packet.
func ParseGreeting(p []byte) (*Greeting, error) {
	if len(p) < 1 {
		return nil, ErrMalformed
	}
	if p[0] == errHeader {
		return nil, ParseERR(p)
	}
	if p[0] != 10 {
		return nil, errors.New("wire: unsupported protocol version")
	}
	g := &Greeting{}
	ver, n, ok := readNulString(p[1:])
	if !ok {
		return nil, ErrMalformed
	}
	g.ServerVersion = string(ver)
	i := 1 + n
	if len(p) < i+4+8+1+2 {
		return nil, ErrMalformed
	}
	g.ConnectionID = binary.LittleEndian.Uint32(p[i:])
	i += 4
	salt := append([]byte(nil), p[i:i+8]...)
	i += 9
	g.Caps = uint32(binary.LittleEndian.Uint16(p[i:]))
	i += 2
	if len(p) >= i+1+2+2+1+10 {
		g.Collation = p[i]
		g.Status = binary.LittleEndian.Uint16(p[i+1:])
		g.Caps |= uint32(binary.LittleEndian.Uint16(p[i+3:])) << 16
		authLen := int(p[i+5])
		i += 16
		if g.Caps&CapSecureConnection != 0 {
			n := max(13, authLen-8)
			if len(p) < i+n {
				return nil, ErrMalformed
			}
			salt = append(salt, bytes.TrimRight(p[i:i+n], "\x00")...)
			i += n
		}
		if g.Caps&CapPluginAuth != 0 {
			name, _, ok := readNulString(p[i:])
			if !ok {
				name = p[i:]
			}
			g.AuthPlugin = string(name)
		}
	}
	g.Salt = salt
	return g, nil
}

// HandshakeResponse is a client's answer to the greeting.
type HandshakeResponse struct {
	Caps       uint32
	MaxPacket  uint32
	Collation  byte
	User       string
	AuthData   []byte
	Database   string
	AuthPlugin string
	Attrs      map[string]string
	// AttrList are the connection attributes a parsed response carried,
	// in the order the client sent them (the first 64, as Attrs);
	// AppendHandshakeResponse writes Attrs.
	AttrList []Attr
}

// Attr is one connection attribute.
type Attr struct{ Name, Value string }

// IsSSLRequest reports whether p is a short SSL request packet rather than
// a full handshake response.
func IsSSLRequest(p []byte) bool {
	return len(p) == 32 && binary.LittleEndian.Uint32(p)&CapSSL != 0
}

// ParseHandshakeResponse decodes a protocol 4.1 handshake response.
func ParseHandshakeResponse(p []byte) (*HandshakeResponse, error) {
	if len(p) < 32 {
		return nil, ErrMalformed
	}
	r := &HandshakeResponse{}
	r.Caps = binary.LittleEndian.Uint32(p)
	if r.Caps&CapProtocol41 == 0 {
		return nil, errors.New("wire: client does not speak protocol 4.1")
	}
	r.MaxPacket = binary.LittleEndian.Uint32(p[4:])
	r.Collation = p[8]
	i := 32
	user, n, ok := readNulString(p[i:])
	if !ok {
		return nil, ErrMalformed
	}
	r.User = string(user)
	i += n
	switch {
	case r.Caps&CapPluginAuthLenenc != 0:
		data, n, ok := readLenEncString(p[i:])
		if !ok {
			return nil, ErrMalformed
		}
		r.AuthData, i = append([]byte(nil), data...), i+n
	case r.Caps&CapSecureConnection != 0:
		if i >= len(p) || i+1+int(p[i]) > len(p) {
			return nil, ErrMalformed
		}
		l := int(p[i])
		r.AuthData, i = append([]byte(nil), p[i+1:i+1+l]...), i+1+l
	default:
		data, n, ok := readNulString(p[i:])
		if !ok {
			return nil, ErrMalformed
		}
		r.AuthData, i = append([]byte(nil), data...), i+n
	}
	if r.Caps&CapConnectWithDB != 0 && i < len(p) {
		db, n, ok := readNulString(p[i:])
		if !ok {
			db, n = p[i:], len(p)-i
		}
		r.Database, i = string(db), i+n
	}
	if r.Caps&CapPluginAuth != 0 && i < len(p) {
		name, n, ok := readNulString(p[i:])
		if !ok {
			name, n = p[i:], len(p)-i
		}
		r.AuthPlugin, i = string(name), i+n
	}
	if r.Caps&CapConnectAttrs != 0 && i < len(p) {
		total, n, ok := readLenEnc(p[i:])
		if !ok || uint64(len(p)-i-n) < total {
			return nil, ErrMalformed
		}
		attrs := p[i+n : i+n+int(total)]
		r.Attrs = make(map[string]string)
		for len(attrs) > 0 {
			k, n, ok := readLenEncString(attrs)
			if !ok {
				return nil, ErrMalformed
			}
			attrs = attrs[n:]
			v, n, ok := readLenEncString(attrs)
			if !ok {
				return nil, ErrMalformed
			}
			attrs = attrs[n:]
			if len(r.Attrs) < 64 {
				if _, dup := r.Attrs[string(k)]; !dup {
					r.AttrList = append(r.AttrList, Attr{string(k), string(v)})
				}
				r.Attrs[string(k)] = string(v)
			}
		}
	}
	return r, nil
}

// AppendHandshakeResponse appends the payload of a handshake response.
func AppendHandshakeResponse(b []byte, r *HandshakeResponse) []byte {
	b = binary.LittleEndian.AppendUint32(b, r.Caps)
	b = binary.LittleEndian.AppendUint32(b, r.MaxPacket)
	b = append(b, r.Collation)
	b = append(b, make([]byte, 23)...)
	b = append(b, r.User...)
	b = append(b, 0)
	b = appendLenEncString(b, string(r.AuthData))
	if r.Caps&CapConnectWithDB != 0 {
		b = append(b, r.Database...)
		b = append(b, 0)
	}
	b = append(b, r.AuthPlugin...)
	b = append(b, 0)
	if r.Caps&CapConnectAttrs != 0 {
		var kv []byte
		for k, v := range r.Attrs {
			kv = appendLenEncString(kv, k)
			kv = appendLenEncString(kv, v)
		}
		b = appendLenEnc(b, uint64(len(kv)))
		b = append(b, kv...)
	}
	return b
}

// AppendAuthSwitch appends an auth switch request asking the client to
// answer salt with plugin.
func AppendAuthSwitch(b []byte, plugin string, salt []byte) []byte {
	b = append(b, eofHeader)
	b = append(b, plugin...)
	b = append(b, 0)
	b = append(b, salt...)
	return append(b, 0)
}

// ScrambleNative computes the mysql_native_password answer to salt:
// SHA1(password) XOR SHA1(salt + SHA1(SHA1(password))). An empty password
// gives an empty answer.
func ScrambleNative(salt []byte, password string) []byte {
	if password == "" {
		return nil
	}
	stage1 := sha1.Sum([]byte(password))
	return ScrambleNativeSHA1(salt, stage1[:])
}

// ScrambleNativeSHA1 is ScrambleNative from SHA1(password) (stage1, 20
// bytes): SHA1(password) XOR SHA1(salt + SHA1(SHA1(password))).
func ScrambleNativeSHA1(salt, stage1 []byte) []byte {
	stage2 := sha1.Sum(stage1)
	h := sha1.New()
	h.Write(salt[:min(len(salt), 20)])
	h.Write(stage2[:])
	out := h.Sum(nil)
	for i := range out {
		out[i] ^= stage1[i]
	}
	return out
}

// ScrambleCachingSha2 computes the caching_sha2_password fast-path answer:
// SHA256(password) XOR SHA256(SHA256(SHA256(password)) + salt).
func ScrambleCachingSha2(salt []byte, password string) []byte {
	if password == "" {
		return nil
	}
	s1 := sha256.Sum256([]byte(password))
	s2 := sha256.Sum256(s1[:])
	h := sha256.New()
	h.Write(s2[:])
	h.Write(salt[:min(len(salt), 20)])
	out := h.Sum(nil)
	for i := range out {
		out[i] ^= s1[i]
	}
	return out
}

// CheckScramble reports whether answer is the right response to salt for
// password under plugin, in constant time.
func CheckScramble(plugin string, salt, answer []byte, password string) bool {
	var want []byte
	switch plugin {
	case NativePassword:
		want = ScrambleNative(salt, password)
	case CachingSha2Password:
		want = ScrambleCachingSha2(salt, password)
	default:
		return false
	}
	if len(want) == 0 {
		return len(answer) == 0
	}
	return subtle.ConstantTimeCompare(want, answer) == 1
}

// ServerHandshake's errors the caller answers with an error packet.
var (
	// ErrTLSRequested is for a client that asked for TLS, which the
	// caller does not offer.
	ErrTLSRequested = errors.New("client asked for TLS")
	// ErrBadHandshake wraps a handshake response that does not parse.
	ErrBadHandshake = errors.New("bad handshake response")
)

// ErrTLSHandshake wraps a failed TLS handshake with a client; the
// connection cannot carry an error packet after it.
var ErrTLSHandshake = errors.New("TLS handshake with the client failed")

// ServerHandshake runs the server side of a login up to the password
// check: it sends greeting g, reads the client's handshake response and,
// when the client offers an auth plugin other than mysql_native_password
// and caching_sha2_password, switches it to mysql_native_password with the
// same salt. It returns the response and the plugin and auth data to check
// with CheckScramble against g.Salt. A client asking for TLS gets
// ErrTLSRequested; a response that does not parse, an error wrapping
// ErrBadHandshake. The caller writes the error packets.
func ServerHandshake(c *Conn, g *Greeting) (resp *HandshakeResponse, plugin string, answer []byte, err error) {
	return ServerHandshakeTLS(c, g, nil)
}

// ServerHandshakeTLS is ServerHandshake offering TLS when conf is not nil:
// the greeting advertises CapSSL, and a client that sends an SSL request
// gets a TLS handshake on the same socket (c switches to it, see
// StartTLSServer), after which its handshake response is read over TLS.
// A TLS handshake failure comes back wrapping ErrTLSHandshake; no error
// packet can be sent after it. c.TLS() tells whether the client switched.
func ServerHandshakeTLS(c *Conn, g *Greeting, conf *tls.Config) (resp *HandshakeResponse, plugin string, answer []byte, err error) {
	greeting := *g
	if conf != nil {
		greeting.Caps |= CapSSL
	}
	if err := c.WritePacket(AppendGreeting(nil, &greeting)); err != nil {
		return nil, "", nil, err
	}
	if err := c.Flush(); err != nil {
		return nil, "", nil, err
	}
	p, err := c.ReadPacket()
	if err != nil {
		return nil, "", nil, err
	}
	if IsSSLRequest(p) {
		if conf == nil {
			return nil, "", nil, ErrTLSRequested
		}
		if _, err := c.StartTLSServer(conf); err != nil {
			return nil, "", nil, fmt.Errorf("%w: %w", ErrTLSHandshake, err)
		}
		if p, err = c.ReadPacket(); err != nil {
			return nil, "", nil, err
		}
		if IsSSLRequest(p) {
			return nil, "", nil, fmt.Errorf("%w: a second SSL request", ErrBadHandshake)
		}
	}
	resp, err = ParseHandshakeResponse(p)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w: %w", ErrBadHandshake, err)
	}
	plugin, answer = resp.AuthPlugin, resp.AuthData
	if resp.Caps&CapPluginAuth == 0 {
		plugin = NativePassword
	}
	if plugin != NativePassword && plugin != CachingSha2Password {
		plugin = NativePassword
		if err := c.WritePacket(AppendAuthSwitch(nil, plugin, g.Salt)); err != nil {
			return nil, "", nil, err
		}
		if err := c.Flush(); err != nil {
			return nil, "", nil, err
		}
		if answer, err = c.ReadPacket(); err != nil {
			return nil, "", nil, err
		}
	}
	return resp, plugin, answer, nil
}
