package config

import (
	"crypto/sha1"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Secret is a password as the gateway can check it: either its clear text
// or only its mysql_native_password hash (the "*" + 40 hex digits that
// MariaDB and MySQL keep in mysql.user, which is HEX(SHA1(SHA1(password)))).
// The zero Secret is the empty password. Its String and GoString never
// show the password, so a Secret printed by mistake leaks nothing.
type Secret struct {
	clear string
	// stage2 is SHA1(SHA1(password)); set only when the config gave the
	// hash, and then clear is empty.
	stage2 []byte
}

// ParseSecret makes a Secret of a configured password: "*" followed by 40
// hex digits is a mysql_native_password hash, anything else clear text.
func ParseSecret(password string) Secret {
	if h, ok := nativeHash(password); ok {
		return Secret{stage2: h}
	}
	return Secret{clear: password}
}

// nativeHash decodes "*" + 40 hex digits.
func nativeHash(s string) ([]byte, bool) {
	if len(s) != 41 || s[0] != '*' {
		return nil, false
	}
	h, err := hex.DecodeString(s[1:])
	if err != nil {
		return nil, false
	}
	return h, true
}

// Empty tells whether the secret is the empty password (no password).
func (s Secret) Empty() bool { return s.clear == "" && s.stage2 == nil }

// IsHash tells whether only the mysql_native_password hash is known: then
// only CheckNative can verify the password, not plugins that need the
// clear text (caching_sha2_password, client_ed25519, clear text).
func (s Secret) IsHash() bool { return s.stage2 != nil }

// Clear returns the password in clear text; ok is false when only its
// hash is known.
func (s Secret) Clear() (password string, ok bool) { return s.clear, s.stage2 == nil }

// CheckNative reports, in constant time, whether scramble is the right
// mysql_native_password answer to salt (the 20 bytes of the greeting; a
// trailing NUL or more is ignored). The answer is SHA1(pw) XOR
// SHA1(salt + SHA1(SHA1(pw))): with SHA1(SHA1(pw)) known, SHA1(pw) is
// recovered from it and hashed again to compare. The empty password
// expects an empty scramble.
func (s Secret) CheckNative(salt, scramble []byte) bool {
	stage2 := s.stage2
	if stage2 == nil {
		if s.clear == "" {
			return len(scramble) == 0
		}
		s1 := sha1.Sum([]byte(s.clear))
		s2 := sha1.Sum(s1[:])
		stage2 = s2[:]
	}
	if len(scramble) != sha1.Size {
		return false
	}
	h := sha1.New()
	h.Write(salt[:min(len(salt), 20)])
	h.Write(stage2)
	stage1 := h.Sum(nil)
	for i := range stage1 {
		stage1[i] ^= scramble[i]
	}
	got := sha1.Sum(stage1)
	return subtle.ConstantTimeCompare(got[:], stage2) == 1
}

// String implements fmt.Stringer without showing the password.
func (s Secret) String() string {
	if s.Empty() {
		return "(none)"
	}
	return "(secret)"
}

// GoString implements fmt.GoStringer without showing the password.
func (s Secret) GoString() string { return "config.Secret" + s.String() }

// Secret returns the user's password (users[].password, or the file or
// environment variable it names) as a Secret.
func (u User) Secret() Secret { return ParseSecret(u.Password) }

// resolveSecret fills *value from the file or environment variable named
// by file or env: at most one of the three may be set. Errors name the
// keys (key, key_file, key_env) and never the secret.
func resolveSecret(bad func(key, format string, args ...any), key string, value *string, file, env string) {
	set := 0
	for _, s := range []string{*value, file, env} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		bad(key, "set only one of %s, %s_file and %s_env", lastKey(key), lastKey(key), lastKey(key))
		return
	}
	switch {
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			// The path is not secret; the error from os names only it.
			bad(key+"_file", "%v", err)
			return
		}
		s := strings.TrimSuffix(string(data), "\n")
		s = strings.TrimSuffix(s, "\r")
		if s == "" {
			bad(key+"_file", "%s is empty", file)
			return
		}
		*value = s
	case env != "":
		s, ok := os.LookupEnv(env)
		if !ok {
			bad(key+"_env", "environment variable %s is not set", env)
			return
		}
		*value = s
	}
}

// lastKey is the last element of a dotted key path.
func lastKey(key string) string {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// resolveSecrets reads every password given by file or environment
// variable into its key, so the rest of the gateway sees only the value.
func (c *Config) resolveSecrets() error {
	return c.resolveSecretsOf(true)
}

// resolveSecretsOf resolves the users' and clusters' secrets and, with
// file, the file's own (http.token, topology.etcd.password).
func (c *Config) resolveSecretsOf(file bool) error {
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	for i := range c.Users {
		u := &c.Users[i]
		k := fmt.Sprintf("users[%d]", i)
		resolveSecret(bad, k+".password", &u.Password, u.PasswordFile, u.PasswordEnv)
		resolveSecret(bad, k+".backend_password", &u.BackendPassword, u.BackendPasswordFile, u.BackendPasswordEnv)
	}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		k := fmt.Sprintf("clusters[%d]", i)
		resolveSecret(bad, k+".backend_password", &cl.BackendPassword, cl.BackendPasswordFile, cl.BackendPasswordEnv)
	}
	if file {
		resolveSecret(bad, "http.token", &c.HTTP.Token, c.HTTP.TokenFile, c.HTTP.TokenEnv)
		if e := c.Topology.Etcd; e != nil {
			resolveSecret(bad, "topology.etcd.password", &e.Password, e.PasswordFile, e.PasswordEnv)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}
