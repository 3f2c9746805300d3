package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/directgate/directgate/wire"
)

// passwordHash is PASSWORD('password') on MariaDB, as mysql.user keeps it.
const passwordHash = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"

func TestSecretCheckNative(t *testing.T) {
	salt := bytes.Repeat([]byte{7}, 20)
	good := wire.ScrambleNative(salt, "password")
	bad := wire.ScrambleNative(salt, "Password")
	for _, pw := range []string{"password", passwordHash, strings.ToLower(passwordHash)} {
		s := ParseSecret(pw)
		if got := s.IsHash(); got != (pw != "password") {
			t.Errorf("%q: IsHash %v", pw, got)
		}
		if !s.CheckNative(salt, good) {
			t.Errorf("%q: right scramble refused", pw)
		}
		// A trailing NUL after the 20 bytes of salt, as in the greeting.
		if !s.CheckNative(append(salt[:20:20], 0), good) {
			t.Errorf("%q: right scramble refused with a NUL-terminated salt", pw)
		}
		for _, wrong := range [][]byte{bad, nil, good[:19], append(good[:20:20], 0)} {
			if s.CheckNative(salt, wrong) {
				t.Errorf("%q: wrong scramble %x accepted", pw, wrong)
			}
		}
		if _, ok := s.Clear(); ok == s.IsHash() {
			t.Errorf("%q: Clear ok %v", pw, ok)
		}
		for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
			if out := fmt.Sprintf(f, s); strings.Contains(out, "password") || strings.Contains(out, "2470") {
				t.Errorf("%q printed with %s shows the secret: %s", pw, f, out)
			}
		}
	}
	var none Secret
	if !none.Empty() || !none.CheckNative(salt, nil) || none.CheckNative(salt, good) {
		t.Error("the empty password must accept only the empty scramble")
	}
	// Not a hash: wrong length or not hex; these are clear text.
	for _, pw := range []string{"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E1", "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1EZZ"} {
		if ParseSecret(pw).IsHash() {
			t.Errorf("%q taken for a hash", pw)
		}
	}
}

func TestSecretsFromFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("s3cret-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DG_TEST_BACKEND_PW", "s3cret-env")
	t.Setenv("DG_TEST_USER_BACKEND_PW", "s3cret-user")
	c, err := Parse([]byte(`users:
  - {user: app, password_file: ` + file + `, backend_user: alice, backend_password_env: DG_TEST_USER_BACKEND_PW}
clusters: [{name: main, backend_user: g, backend_password_env: DG_TEST_BACKEND_PW, backends: ["h:1"]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Users[0]; u.Password != "s3cret-file" || u.BackendPassword != "s3cret-user" || u.BackendUser != "alice" {
		t.Errorf("user: %q %q %q", u.Password, u.BackendPassword, u.BackendUser)
	}
	if c.Clusters[0].BackendPassword != "s3cret-env" {
		t.Errorf("cluster backend_password %q", c.Clusters[0].BackendPassword)
	}
}

func TestSecretErrorsNameTheKeyNotTheSecret(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DG_TEST_SET", "hunter2")
	cluster := "\nclusters: [{name: main, backend_user: g, backends: [\"h:1\"]}]"
	cases := map[string]string{
		"users: [{user: app, password: hunter2, password_env: DG_TEST_SET}]" + cluster:                                     "users[0].password",
		"users: [{user: app, password_file: " + dir + "/missing}]" + cluster:                                               "users[0].password_file",
		"users: [{user: app, password_file: " + empty + "}]" + cluster:                                                     "users[0].password_file",
		"users: [{user: app, password_env: DG_TEST_UNSET_XYZ}]" + cluster:                                                  "users[0].password_env",
		"users: [{user: app, backend_password: hunter2}]" + cluster:                                                        "users[0].backend_password",
		"users: [{user: app, backend_user: a, backend_password: \"" + passwordHash + "\"}]" + cluster:                      "users[0].backend_password",
		"users: [{user: app, backend_user: a, backend_password: hunter2, backend_password_file: " + empty + "}]" + cluster: "users[0].backend_password",
		`users: [{user: app}]
clusters: [{name: main, backend_user: g, backend_password: hunter2, backend_password_env: DG_TEST_SET, backends: ["h:1"]}]`: "clusters[0].backend_password",
		`users: [{user: app}]
clusters: [{name: main, backend_user: g, backend_password_env: NOPE_NOT_SET_XYZ, backends: ["h:1"]}]`: "clusters[0].backend_password_env",
	}
	for in, key := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("config %q: error %v does not name %s", in, err, key)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "2470C0") {
			t.Errorf("config %q: error shows the secret: %v", in, err)
		}
	}
}
