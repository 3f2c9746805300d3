package accounts

import (
	"bytes"
	"crypto/sha1"
	"fmt"
	"strings"
	"testing"

	"github.com/directgate/directgate/wire"
)

// nativeAuth is PASSWORD(pw) as MariaDB stores it.
func nativeAuth(pw string) string {
	s1 := sha1.Sum([]byte(pw))
	s2 := sha1.Sum(s1[:])
	return "*" + strings.ToUpper(fmt.Sprintf("%x", s2))
}

// TestVerifyNativeRoundTrip checks the scramble against wire's own
// mysql_native_password answer, and that the derived SHA1(password) logs
// in again: wire's scramble from it is the client's.
func TestVerifyNativeRoundTrip(t *testing.T) {
	salt, err := wire.NewSalt()
	if err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"secret", "pässwörd", strings.Repeat("x", 100)} {
		auth := nativeAuth(pw)
		answer := wire.ScrambleNative(salt, pw)
		stage1, ok := VerifyNative(salt, answer, auth)
		if !ok {
			t.Fatalf("%q: right answer refused", pw)
		}
		if want := sha1.Sum([]byte(pw)); !bytes.Equal(stage1, want[:]) {
			t.Errorf("%q: stage1 %x, want %x", pw, stage1, want)
		}
		salt2, _ := wire.NewSalt()
		if got, want := wire.ScrambleNativeSHA1(salt2, stage1), wire.ScrambleNative(salt2, pw); !bytes.Equal(got, want) {
			t.Errorf("%q: the scramble from stage1 differs from the password's", pw)
		}
		if _, ok := VerifyNative(salt, wire.ScrambleNative(salt, pw+"x"), auth); ok {
			t.Errorf("%q: wrong password accepted", pw)
		}
		if _, ok := VerifyNative(salt, nil, auth); ok {
			t.Errorf("%q: empty answer accepted", pw)
		}
		if _, ok := VerifyNative(salt, answer, strings.ToLower(auth)); !ok {
			t.Errorf("%q: lower-case hash refused", pw)
		}
	}
}

func TestVerifyNativeNoPassword(t *testing.T) {
	salt, _ := wire.NewSalt()
	if s1, ok := VerifyNative(salt, nil, ""); !ok || s1 != nil {
		t.Errorf("no password, empty answer: %x %v", s1, ok)
	}
	if _, ok := VerifyNative(salt, wire.ScrambleNative(salt, "x"), ""); ok {
		t.Error("no password, an answer: accepted")
	}
	if _, ok := VerifyNative(salt, wire.ScrambleNative(salt, "x"), "*BAD"); ok {
		t.Error("malformed hash accepted")
	}
}
