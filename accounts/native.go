package accounts

import (
	"crypto/sha1"
	"crypto/subtle"
	"encoding/hex"
	"strings"
)

// Plugin names of mysql.global_priv.
const (
	// NativePassword is mysql_native_password, the only plugin with a
	// password the gateway checks.
	NativePassword = "mysql_native_password"
)

// nativeHash parses a mysql_native_password authentication string, "*"
// and 40 hex digits, into SHA1(SHA1(password)).
func nativeHash(auth string) ([]byte, bool) {
	if len(auth) != 41 || auth[0] != '*' {
		return nil, false
	}
	h, err := hex.DecodeString(strings.ToLower(auth[1:]))
	return h, err == nil
}

// VerifyNative checks a client's mysql_native_password answer (scramble)
// to the greeting's salt against the account's authentication string, as
// MariaDB does, in constant time. The answer is SHA1(pw) XOR SHA1(salt +
// SHA1(SHA1(pw))): XORed with SHA1(salt + stored hash) it gives back
// SHA1(pw) (stage1), whose SHA1 must be the stored hash. An account
// without password ("") expects an empty answer, and stage1 is nil. The
// returned stage1 logs in to MariaDB as the account (wire.DialOptions):
// treat it as the password.
func VerifyNative(salt, scramble []byte, auth string) (stage1 []byte, ok bool) {
	if auth == "" {
		return nil, len(scramble) == 0
	}
	stage2, good := nativeHash(auth)
	if !good || len(scramble) != sha1.Size {
		return nil, false
	}
	h := sha1.New()
	h.Write(salt[:min(len(salt), 20)])
	h.Write(stage2)
	stage1 = h.Sum(nil)
	for i := range stage1 {
		stage1[i] ^= scramble[i]
	}
	check := sha1.Sum(stage1)
	if subtle.ConstantTimeCompare(check[:], stage2) != 1 {
		return nil, false
	}
	return stage1, true
}
