// Package etcdtest starts throwaway etcd servers for tests: Debian's etcd
// binary (package etcd-server) as a child process, one member, on free
// loopback ports, its data in a temporary directory. A test that needs the
// fleet's topology, registrations or elections starts one with Start and
// stops it with Stop; Kill and Restart simulate an etcd outage.
//
// When no etcd binary is found, Start returns ErrNoEtcd: callers skip the
// test then (make test installs the package through e2e/local/deps.sh).
package etcdtest

import (
	"context"
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
	"time"
)

// ErrNoEtcd says no etcd binary was found on PATH or in /usr/bin.
var ErrNoEtcd = errors.New("etcdtest: no etcd binary (apt-get install etcd-server)")

// Server is a running (or killed) etcd started by Start. Its methods are
// safe for concurrent use.
type Server struct {
	// ClientURL is the address clients reach the server at,
	// http://127.0.0.1:PORT; Endpoint is the same as host:port.
	ClientURL, Endpoint string
	// Dir holds the data directory and the log; Stop removes it.
	Dir string

	binary string
	args   []string

	mu      sync.Mutex
	proc    *exec.Cmd
	exited  chan struct{}
	removed bool
}

// startTimeout bounds Start and Restart when ctx has no deadline.
const startTimeout = 30 * time.Second

// Start launches etcd on two free ports of 127.0.0.1 and waits until its
// /health endpoint answers. On error nothing is left running.
func Start(ctx context.Context) (*Server, error) {
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s := &Server{
		ClientURL: client,
		Endpoint:  strings.TrimPrefix(client, "http://"),
		Dir:       dir,
		binary:    bin,
		args: []string{
			"--name", "test",
			"--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", "test=" + peer,
			"--initial-cluster-state", "new",
			"--logger", "zap",
			"--log-outputs", filepath.Join(dir, "etcd.log"),
		},
	}
	if err := s.Restart(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func findBinary() (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd", nil
	}
	return "", ErrNoEtcd
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: find a free port: %w", err)
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Restart starts the server again after Kill, on the same ports and data,
// and waits until it is healthy. Start uses it for the first launch.
func (s *Server) Restart(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return errors.New("etcdtest: Restart after Stop")
	}
	if s.proc != nil && s.running() {
		return fmt.Errorf("etcdtest: Restart: etcd on %s is still running", s.Endpoint)
	}
	out, err := os.OpenFile(filepath.Join(s.Dir, "etcd.stderr"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	cmd := exec.Command(s.binary, s.args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	out.Close()
	if err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", s.binary, err)
	}
	s.proc, s.exited = cmd, make(chan struct{})
	exited := s.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	if err := s.waitHealthy(ctx); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("etcdtest: etcd on %s (dir %s): %w\n--- log tail ---\n%s", s.Endpoint, s.Dir, err, s.logTail())
	}
	return nil
}

func (s *Server) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// waitHealthy polls /health until it says true, the process exits or ctx
// ends.
func (s *Server) waitHealthy(ctx context.Context) error {
	hc := &http.Client{Timeout: time.Second}
	for {
		if !s.running() {
			return errors.New("etcd exited during start")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.ClientURL+"/health", nil)
		if resp, err := hc.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if strings.Contains(string(body), `"true"`) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string {
	var b []byte
	for _, f := range []string{"etcd.log", "etcd.stderr"} {
		d, _ := os.ReadFile(filepath.Join(s.Dir, f))
		b = append(b, d...)
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// PID is the running process's id, 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.running() {
		return 0
	}
	return s.proc.Process.Pid
}

// Kill stops the server with SIGKILL and keeps its data for Restart.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signalLocked(syscall.SIGKILL)
}

func (s *Server) signalLocked(sig syscall.Signal) error {
	if s.proc == nil || !s.running() {
		return nil
	}
	if err := s.proc.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("etcdtest: signal etcd: %w", err)
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.proc.Process.Kill()
		<-s.exited
	}
	return nil
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s) and removes its
// directory. Calling it twice is fine.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil
	}
	err := s.signalLocked(syscall.SIGTERM)
	s.removed = true
	return errors.Join(err, os.RemoveAll(s.Dir))
}
