package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An elected owner advertises the address gateways dial: never all
// interfaces, never port 0.
func TestCheckAdvertise(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:15307": true,
		"owner-a:15307":   true,
		"[::1]:15307":     true,
		"0.0.0.0:15307":   false,
		"[::]:15307":      false,
		":15307":          false,
		"127.0.0.1:0":     false,
		"127.0.0.1":       false,
	} {
		if err := checkAdvertise(addr); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", addr, err, ok)
		}
	}
}

// gateway owner --http-listen follows http_listen's rules: an address
// other machines reach needs http.token (or http.insecure), and the
// error names the flag.
func TestOwnerRefusesOpenHTTPWithoutToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	os.WriteFile(path, []byte("users: [{user: a}]\nclusters: [{name: m, backend_user: g, backends: ['127.0.0.1:1'], owner: '127.0.0.1:0'}]\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"owner", "--config", path, "--http-listen", "0.0.0.0:0"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "--http-listen") || !strings.Contains(errb.String(), "http.token") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
