package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "gateway ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
	if code := run(nil, &out, &errb); code != 2 {
		t.Fatalf("no args: exit %d", code)
	}
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 {
		t.Fatalf("unknown command: exit %d", code)
	}
}

// A bad configuration makes serve exit non-zero with the key in the message.
func TestServeRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(path, []byte("users: []\nclusters: []\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--config", path}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errb.String(), "clusters") {
		t.Fatalf("error does not name the key: %s", errb.String())
	}
	// A flag that overrides the file is validated too.
	os.WriteFile(path, []byte("users: [{user: a}]\nclusters: [{name: m, backend_user: g, backends: ['127.0.0.1:1']}]\n"), 0o600)
	errb.Reset()
	if code := run([]string{"serve", "--config", path, "--log-level", "shout"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "log.level") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// The HTTP endpoints show every user's sessions: serve refuses an
// http_listen other machines reach without a token, flag or file.
func TestServeRefusesOpenHTTPWithoutToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(path, []byte("users: [{user: a}]\nclusters: [{name: m, backend_user: g, backends: ['127.0.0.1:1']}]\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--config", path, "--http-listen", "0.0.0.0:0"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "http.token") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
