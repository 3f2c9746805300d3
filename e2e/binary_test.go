package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildGateway builds cmd/gateway into a temporary directory.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/directgate/directgate/cmd/gateway").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startBinary runs `gateway serve` against the shared MariaDB on a free
// port and waits until it accepts connections.
func startBinary(t *testing.T, bin string, shutdownTimeout string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`listen: %s
http_listen: "off"
shutdown_timeout: %s
users: [{user: %s, password: %s}]
clusters:
  - {name: main, backend_user: %s, backend_password: %s, backends: [%q], pool: {size: 4, min_idle: 1}}
`, addr, shutdownTimeout, appUser, appPass, backendUser, backendPass, shared.db.Addr())
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", path)
	logs := &strings.Builder{}
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
	return cmd, addr, logs
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
	t.Logf("forced shutdown took %v", time.Since(start))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("drain timeout: want exit 1, got %v\n%s", err, logs.String())
	}
	<-errc
}
