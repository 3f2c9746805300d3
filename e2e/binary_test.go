package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildGateway returns the path of cmd/gateway, built once per run of
// the package (a link costs seconds, and a score of tests run the binary)
// into a directory runTests removes at the end.
func buildGateway(t testing.TB) string {
	t.Helper()
	gatewayBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "directgate-e2e-bin-")
		if err != nil {
			gatewayBin.err = err
			return
		}
		gatewayBin.dir = dir
		bin := filepath.Join(dir, "gateway")
		if out, err := exec.Command("go", "build", "-pgo=off", "-o", bin, "github.com/directgate/directgate/cmd/gateway").CombinedOutput(); err != nil {
			gatewayBin.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		gatewayBin.path = bin
	})
	if gatewayBin.err != nil {
		t.Fatal(gatewayBin.err)
	}
	return gatewayBin.path
}

// gatewayBin is buildGateway's build, shared by the package's tests.
var gatewayBin struct {
	once      sync.Once
	dir, path string
	err       error
}

// removeGatewayBin removes buildGateway's directory, if it made one.
func removeGatewayBin() {
	if gatewayBin.dir != "" {
		os.RemoveAll(gatewayBin.dir)
	}
}

// startBinary runs `gateway serve` against the shared MariaDB on a free
// port and waits until it accepts connections.
func startBinary(t *testing.T, bin string, shutdownTimeout string) (*exec.Cmd, string, *logBuffer) {
	cmd, addr, logs, _ := startBinaryConfig(t, bin, shutdownTimeout, "", "")
	return cmd, addr, logs
}

// startBinaryConfig is startBinary with extra users in the config and,
// when httpYAML is not empty, its HTTP settings (http_listen and http)
// instead of http_listen: "off"; it also returns the config file's path.
func startBinaryConfig(t *testing.T, bin, shutdownTimeout, extraUsers, httpYAML string) (*exec.Cmd, string, *logBuffer, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeBinaryConfig(t, path, addr, shutdownTimeout, extraUsers, httpYAML)
	cmd := exec.Command(bin, "serve", "--config", path)
	logs := &logBuffer{}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "accepting MySQL clients") {
				once = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("gateway did not start:\n%s", logs.String())
	}
	return cmd, addr, logs, path
}

// logBuffer collects a process's log lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeBinaryConfig writes the config of startBinaryConfig to path.
func writeBinaryConfig(t *testing.T, path, addr, shutdownTimeout, extraUsers, httpYAML string) {
	t.Helper()
	if httpYAML == "" {
		httpYAML = `http_listen: "off"`
	}
	cfg := fmt.Sprintf(`listen: %s
%s
drain_timeout: %s
users: [{user: %s, password: %s}%s]
clusters:
  - {name: main, backend_user: %s, backend_password: %s, backends: [%q], pool: {size: 4, min_idle: 1}}
`, addr, httpYAML, shutdownTimeout, appUser, appPass, extraUsers, backendUser, backendPass, shared.db.Addr())
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// SIGHUP re-reads the config file without dropping clients; an invalid
// file is refused with the reason and the running config stays.
func TestBinaryReload(t *testing.T) {
	bin := buildGateway(t)
	cmd, addr, logs, path := startBinaryConfig(t, bin, "10s", "", "")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	app := open(t, fmt.Sprintf("%s:%s@tcp(%s)/", appUser, appPass, addr))
	conn, err := app.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	login := func() error {
		db, err := sql.Open("mysql", fmt.Sprintf("second:pw@tcp(%s)/", addr))
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Ping()
	}
	if err := login(); err == nil {
		t.Fatal("user 'second' logged in before it was configured")
	}
	writeBinaryConfig(t, path, addr, "10s", ", {user: second, password: pw}", "")
	cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for login() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("user added by SIGHUP cannot log in:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.WriteFile(path, []byte("users: [oops"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	for !strings.Contains(logs.String(), "reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("invalid config not reported:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := login(); err != nil {
		t.Fatalf("after a refused reload the running config changed: %v", err)
	}
	if err := conn.PingContext(context.Background()); err != nil {
		t.Fatalf("client connection dropped by reloads: %v", err)
	}
}

// SIGTERM lets a statement in flight finish and exits 0; when the drain
// times out the process exits non-zero.
func TestBinaryShutdown(t *testing.T) {
	bin := buildGateway(t)

	cmd, addr, _ := startBinary(t, bin, "10s")
	db := open(t, fmt.Sprintf("%s:%s@tcp(%s)/", appUser, appPass, addr))
	errc := make(chan error, 1)
	go func() {
		_, err := db.Exec("SELECT SLEEP(1)")
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-errc; err != nil {
		t.Fatalf("statement in flight was cut: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("clean shutdown exited with %v", err)
	}

	cmd, addr, logs := startBinary(t, bin, "200ms")
	db = open(t, fmt.Sprintf("%s:%s@tcp(%s)/", appUser, appPass, addr))
	go func() {
		_, err := db.Exec("SELECT SLEEP(5)")
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	t.Logf("forced shutdown took %v\n%s", time.Since(start), logs.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("drain timeout: want exit 1, got %v\n%s", err, logs.String())
	}
	<-errc
}

// TestBinaryHTTPToken: with http.token_file, the gateway's HTTP endpoints
// answer 401 without the bearer token and serve with it; /healthz and
// /readyz stay open (load balancers send no token).
func TestBinaryHTTPToken(t *testing.T) {
	bin := buildGateway(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	ln.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, _, logs, _ := startBinaryConfig(t, bin, "10s", "", fmt.Sprintf("http_listen: %s\nhttp: {token_file: %q}", httpAddr, tokenFile))
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	get := func(path, token string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+httpAddr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, logs.String())
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/debug/status", "/debug/health"} {
		if code := get(path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
		if code := get(path, "wrong"); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, code)
		}
		if code := get(path, "s3cret-token"); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d, want 200", path, code)
		}
	}
	if code := get("/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz without a token: %d, want 200", code)
	}
}
