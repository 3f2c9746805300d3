// Package fleet_test runs fleets of real gateway processes (and owners) on
// one etcd, all started by the tests on free loopback ports: the topology
// in etcd, its changes applied without a restart, an etcd outage under
// load. Each test uses its own etcd key prefix.
package fleet_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
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

	_ "github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/e2e/etcdtest"
	"github.com/directgate/directgate/e2e/mariadbtest"
)

const (
	appUser, appPass         = "app", "app-secret"
	backendUser, backendPass = "gateway", "backend-secret"
)

// env is what every test of the package shares: the gateway binary, one
// etcd, and a MariaDB primary with a replica.
type env struct {
	bin              string
	etcd             *etcdtest.Server
	primary, replica *mariadbtest.Server
}

var shared *env

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, etcdtest.ErrNoEtcd) {
			fmt.Fprintln(os.Stderr, "skipping the fleet tests")
			os.Exit(0)
		}
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "fleet-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	e := &env{bin: filepath.Join(dir, "gateway")}
	if out, err := exec.Command("go", "build", "-pgo=off", "-o", e.bin, "github.com/directgate/directgate/cmd/gateway").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("go build: %v\n%s", err, out)
	}
	if e.etcd, err = etcdtest.Start(ctx); err != nil {
		return 0, err
	}
	defer e.etcd.Stop()
	users := []mariadbtest.User{{Name: backendUser, Password: backendPass,
		Grants: "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, PROCESS, REPLICA MONITOR ON *.*"}}
	if e.primary, err = mariadbtest.Start(ctx, mariadbtest.Options{ServerID: 201, Users: users}); err != nil {
		return 0, err
	}
	defer e.primary.Stop()
	if e.replica, err = mariadbtest.Start(ctx, mariadbtest.Options{ServerID: 202, Users: users}); err != nil {
		return 0, err
	}
	defer e.replica.Stop()
	if err := e.replica.StartReplication(ctx, e.primary); err != nil {
		return 0, err
	}
	shared = e
	return m.Run(), nil
}

// topology is a topology document with one cluster "main" over backends
// and clusterYAML added to the cluster's keys (each line indented by four
// spaces).
func topology(clusterYAML string, backends ...*mariadbtest.Server) string {
	var addrs []string
	for _, b := range backends {
		addrs = append(addrs, fmt.Sprintf("%q", b.Addr()))
	}
	return fmt.Sprintf(`users:
  - {user: %s, password: %s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%s]
    pool: {size: 16, min_idle: 1, acquire_timeout: 10s}
%s`, appUser, appPass, backendUser, backendPass, strings.Join(addrs, ", "), clusterYAML)
}

// freeAddr returns a free loopback address.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// baseConfig is the file of a fleet process: its addresses, etcd under
// prefix, and fast discovery.
func baseConfig(listen, httpAddr, prefix string) string {
	return baseConfigVia(listen, httpAddr, prefix, shared.etcd.Endpoint, "")
}

// baseConfigVia is baseConfig with etcd reached at endpoint (a fault
// proxy) and more keys of topology.etcd (", key: value" each).
func baseConfigVia(listen, httpAddr, prefix, endpoint, etcdMore string) string {
	return fmt.Sprintf(`listen: %s
http_listen: %s
log: {level: info}
health: {interval: 200ms, timeout: 1s}
topology:
  etcd: {endpoints: [%q], prefix: %s, lease_ttl: 2s%s}
`, listen, httpAddr, endpoint, prefix, etcdMore)
}

// proc is a gateway (or owner) process of a test.
type proc struct {
	cmd        *exec.Cmd
	addr, http string
	config     string
	logs       *logBuffer
	exited     chan struct{}
}

// startProc runs the binary with args (the config path is appended as
// --config) and waits until its log says ready; it is stopped at the end
// of the test.
func startProc(t *testing.T, config, ready string, args ...string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{config: path, logs: &logBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(shared.bin, append(args, "--config", path)...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			p.logs.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), ready) {
				once = true
				close(up)
			}
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("log of %s:\n%s", strings.Join(p.cmd.Args, " "), p.logs.String())
		}
	})
	select {
	case <-up:
	case <-p.exited:
		t.Fatalf("%v exited during start:\n%s", p.cmd.Args, p.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not start:\n%s", p.cmd.Args, p.logs.String())
	}
	return p
}

// stop ends the process with SIGTERM and waits for it.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// exitedNow reports whether the process has exited.
func (p *proc) exitedNow() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// startGateway starts `gateway serve` in the fleet under prefix.
func startGateway(t *testing.T, prefix string) *proc {
	t.Helper()
	return startGatewayVia(t, prefix, shared.etcd.Endpoint, "")
}

// startGatewayVia is startGateway with baseConfigVia's endpoint and
// etcdMore.
func startGatewayVia(t *testing.T, prefix, endpoint, etcdMore string) *proc {
	t.Helper()
	listen, httpAddr := freeAddr(t), freeAddr(t)
	p := startProc(t, baseConfigVia(listen, httpAddr, prefix, endpoint, etcdMore), "accepting MySQL clients", "serve")
	p.addr, p.http = listen, httpAddr
	return p
}

// topo runs `gateway topo ARGS` with the config of the fleet under prefix.
func topo(t *testing.T, prefix string, args ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "topo-client.yaml")
	if err := os.WriteFile(path, []byte(baseConfig("127.0.0.1:1", `"off"`, prefix)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(shared.bin, append(append([]string{"topo"}, args...), "--config", path)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gateway topo %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// putTopology stores doc with `gateway topo put`.
func putTopology(t *testing.T, prefix, doc string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	topo(t, prefix, "put", "--file", path)
}

// db opens a client pool through the gateway at addr.
func (p *proc) db(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/?timeout=10s", appUser, appPass, p.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// status reads the gateway's /debug/status JSON.
func (p *proc) status(t testing.TB) map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + p.http + "/debug/status?format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("status: %v\n%s", err, body)
	}
	return v
}

// fleetStatus is the "fleet" part of the status.
func (p *proc) fleetStatus(t testing.TB) map[string]any {
	f, _ := p.status(t)["fleet"].(map[string]any)
	return f
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > time.Minute {
			t.Fatalf("after a minute, still waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
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
