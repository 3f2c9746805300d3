package wire

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"

	"filippo.io/edwards25519"
)

// ClientEd25519 is MariaDB's ed25519 auth plugin as clients name it.
const ClientEd25519 = "client_ed25519"

// caching_sha2_password speaks in AuthMoreData packets (0x01 and one
// byte) after the scramble: the server says fast_auth_success or
// perform_full_authentication; the client may ask for the RSA public key.
const (
	authMoreData        = 0x01
	sha2RequestKey      = 0x02
	sha2FastAuthSuccess = 0x03
	sha2FullAuth        = 0x04
)

// SignEd25519 is the client_ed25519 answer to a 32-byte scramble: an
// Ed25519 signature of the scramble whose key MariaDB derives from the
// password itself rather than from a 32-byte seed: h = SHA512(password),
// the secret scalar is h[:32] clamped and h[32:] is the nonce prefix; the
// rest is RFC 8032 signing. It verifies with crypto/ed25519.Verify and
// Ed25519PublicKey(password).
func SignEd25519(scramble []byte, password string) []byte {
	h := sha512.Sum512([]byte(password))
	s, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		panic(err) // 32 bytes always clamp
	}
	pub := new(edwards25519.Point).ScalarBaseMult(s).Bytes()
	rh := sha512.New()
	rh.Write(h[32:])
	rh.Write(scramble)
	r, err := edwards25519.NewScalar().SetUniformBytes(rh.Sum(nil))
	if err != nil {
		panic(err) // 64 bytes are always uniform
	}
	R := new(edwards25519.Point).ScalarBaseMult(r).Bytes()
	kh := sha512.New()
	kh.Write(R)
	kh.Write(pub)
	kh.Write(scramble)
	k, err := edwards25519.NewScalar().SetUniformBytes(kh.Sum(nil))
	if err != nil {
		panic(err)
	}
	S := edwards25519.NewScalar().MultiplyAdd(k, s, r)
	return append(R, S.Bytes()...)
}

// Ed25519PublicKey is the public key MariaDB stores for an ed25519 user
// with password (what PASSWORD() gives, before base64).
func Ed25519PublicKey(password string) []byte {
	h := sha512.Sum512([]byte(password))
	s, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		panic(err)
	}
	return new(edwards25519.Point).ScalarBaseMult(s).Bytes()
}

// xorSalt XORs the NUL-terminated password with the salt repeated, as
// caching_sha2_password does before RSA encryption so that the cipher
// text is bound to the connection.
func xorSalt(pw, salt []byte) []byte {
	out := make([]byte, len(pw))
	for i := range pw {
		out[i] = pw[i] ^ salt[i%len(salt)]
	}
	return out
}

// EncryptPassword is the caching_sha2_password full-authentication answer
// over a plain connection: the NUL-terminated password XORed with the
// salt (its first 20 bytes), encrypted with RSA-OAEP (SHA-1) for pub.
func EncryptPassword(password string, salt []byte, pub *rsa.PublicKey) ([]byte, error) {
	salt = salt[:min(len(salt), 20)]
	if len(salt) == 0 {
		return nil, errors.New("wire: no salt to encrypt the password with")
	}
	plain := xorSalt(append([]byte(password), 0), salt)
	return rsa.EncryptOAEP(sha1.New(), rand.Reader, pub, plain, nil)
}

// DecryptPassword undoes EncryptPassword and returns the password without
// its NUL.
func DecryptPassword(key *rsa.PrivateKey, salt, data []byte) ([]byte, error) {
	salt = salt[:min(len(salt), 20)]
	if len(salt) == 0 {
		return nil, errors.New("wire: no salt to decrypt the password with")
	}
	plain, err := rsa.DecryptOAEP(sha1.New(), nil, key, data, nil)
	if err != nil {
		return nil, err
	}
	pw := xorSalt(plain, salt)
	if len(pw) == 0 || pw[len(pw)-1] != 0 {
		return nil, ErrMalformed
	}
	return pw[:len(pw)-1], nil
}

// MarshalPublicKeyPEM encodes pub as MySQL sends it: a PEM "PUBLIC KEY"
// block (PKIX).
func MarshalPublicKeyPEM(pub *rsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKeyPEM decodes a server's RSA public key, PKIX or PKCS #1.
func ParsePublicKeyPEM(b []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("wire: the server's public key is not PEM")
	}
	if pub, err := x509.ParsePKCS1PublicKey(block.Bytes); err == nil {
		return pub, nil
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("wire: the server's public key: %w", err)
	}
	pub, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("wire: the server's public key is a %T, not RSA", k)
	}
	return pub, nil
}

// sha2Digest is what caching_sha2_password keeps per user in its cache:
// SHA256(SHA256(password)).
func sha2Digest(password []byte) [32]byte {
	s1 := sha256.Sum256(password)
	return sha256.Sum256(s1[:])
}

// Authenticator is the server side of a login's password check, shared by
// every session of a server: mysql_native_password, and
// caching_sha2_password with its cache, fast path and full authentication
// (clear text over TLS, RSA-encrypted over plain TCP). Its methods are
// safe for concurrent use.
type Authenticator struct {
	key    *rsa.PrivateKey
	pubPEM []byte

	mu sync.Mutex
	// cache holds SHA256(SHA256(password)) of the users that passed full
	// authentication, as MySQL's caching_sha2_password cache does: only
	// they may use the fast path. It holds at most max entries.
	cache map[string][32]byte
	max   int
}

// NewAuthenticator returns an Authenticator that decrypts with key (nil:
// a new 2048-bit key) and caches at most cacheSize users (0: 10000).
func NewAuthenticator(key *rsa.PrivateKey, cacheSize int) (*Authenticator, error) {
	if key == nil {
		var err error
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return nil, err
		}
	}
	pubPEM, err := MarshalPublicKeyPEM(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	if cacheSize <= 0 {
		cacheSize = 10000
	}
	return &Authenticator{key: key, pubPEM: pubPEM, cache: map[string][32]byte{}, max: cacheSize}, nil
}

// PublicKey is the RSA key clients encrypt their password with.
func (a *Authenticator) PublicKey() *rsa.PublicKey { return &a.key.PublicKey }

// PublicKeyPEM is PublicKey as sent to clients that ask for it.
func (a *Authenticator) PublicKeyPEM() []byte { return a.pubPEM }

// Forget drops user from the caching_sha2_password cache: its next login
// needs full authentication.
func (a *Authenticator) Forget(user string) {
	a.mu.Lock()
	delete(a.cache, user)
	a.mu.Unlock()
}

// cached reports whether user is in the cache with the digest of password
// (a changed password is a miss), and that digest.
func (a *Authenticator) cached(user, password string) (bool, [32]byte) {
	want := sha2Digest([]byte(password))
	a.mu.Lock()
	got, ok := a.cache[user]
	a.mu.Unlock()
	return ok && got == want, want
}

func (a *Authenticator) remember(user string, digest [32]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.cache[user]; !ok && len(a.cache) >= a.max {
		for k := range a.cache { // evict one, any
			delete(a.cache, k)
			break
		}
	}
	a.cache[user] = digest
}

// Check verifies a client's login answer for plugin (what ServerHandshake
// returned, or a COM_CHANGE_USER's) against salt and the user's clear-text
// password; known false means no such user, which always fails, after the
// same exchange a wrong password gets. For caching_sha2_password it runs
// the rest of the exchange on c: fast_auth_success for a cached user whose
// scramble is right (a cached user with a wrong scramble fails at once, as
// in MySQL); otherwise perform_full_authentication, then the password in
// clear text over TLS, or over plain TCP RSA-encrypted, sending the public
// key first if the client asks (0x02). The caller writes the final OK or
// error. An error means the connection failed.
func (a *Authenticator) Check(c *Conn, plugin, user string, salt, answer []byte, password string, known bool) (bool, error) {
	switch plugin {
	case NativePassword:
		return known && CheckScramble(plugin, salt, answer, password), nil
	case CachingSha2Password:
	default:
		return false, nil
	}
	if len(answer) == 0 {
		// An empty password is sent as an empty scramble, no more.
		return known && password == "", nil
	}
	hit, digest := a.cached(user, password)
	if known && hit && CheckScramble(plugin, salt, answer, password) {
		return true, a.more(c, sha2FastAuthSuccess)
	}
	// A wrong scramble of a cached user goes on to full authentication,
	// like an unknown user's and an uncached one's (as MySQL's server
	// does): a quick refusal would tell who has logged in since start.
	if err := a.more(c, sha2FullAuth); err != nil {
		return false, err
	}
	p, err := c.ReadPacket()
	if err != nil {
		return false, err
	}
	var got []byte
	switch {
	case c.TLS() != nil:
		if len(p) == 0 || p[len(p)-1] != 0 {
			return false, nil
		}
		got = p[:len(p)-1]
	default:
		if len(p) == 1 && p[0] == sha2RequestKey {
			if err := c.WritePacket(append([]byte{authMoreData}, a.pubPEM...)); err != nil {
				return false, err
			}
			if err := c.Flush(); err != nil {
				return false, err
			}
			if p, err = c.ReadPacket(); err != nil {
				return false, err
			}
		}
		// Anything but a cipher text (a clear-text password over plain
		// TCP, garbage) is a wrong password.
		if got, err = DecryptPassword(a.key, salt, p); err != nil {
			return false, nil
		}
	}
	if !known || subtle.ConstantTimeCompare(got, []byte(password)) != 1 {
		return false, nil
	}
	a.remember(user, digest)
	return true, nil
}

// more writes an AuthMoreData packet with one status byte.
func (a *Authenticator) more(c *Conn, status byte) error {
	if err := c.WritePacket([]byte{authMoreData, status}); err != nil {
		return err
	}
	return c.Flush()
}
