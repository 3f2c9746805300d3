package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
)

// rssKiB reads a process's resident set size.
func rssKiB(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// BenchmarkIdleClientMemory measures the gateway's resident memory with
// many idle client connections (logged in, no statement running), and its
// peak with 1,000 of them busy for 3 s on a pool of 8 backend connections,
// for the budget in docs/operations.md#memory. The gateway runs as its own process (not
// built with -race). A measurement, not a speed: it runs once whatever
// b.N is; run it with -benchtime 1x:
//
//	go test -run '^$' -bench ClientMemory -benchtime 1x ./e2e/
func BenchmarkIdleClientMemory(b *testing.B) {
	clients := raiseFileLimit(10_000)
	pid, addr := startGatewayProcess(b, "max_client_connections: 20000")
	conns, base := dialIdle(b, pid, addr, clients, nil)
	rss := rssKiB(b, pid)
	b.Logf("gateway RSS: %d MiB with 1 idle client, %d MiB with %d idle clients (%.1f KiB per client)",
		base>>10, rss>>10, len(conns), float64(rss-base)/float64(len(conns)))

	// 1,000 of them busy for a few seconds (pool of 8 backend connections).
	active := min(1000, len(conns))
	stop := make(chan struct{})
	errs := make(chan error, active)
	var queries atomic.Int64
	for _, c := range conns[:active] {
		go func() {
			for n := 0; n < 100_000; n++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if err := c.QueryRows("SELECT 1", func([][]byte) {}); err != nil {
					errs <- err
					return
				}
				queries.Add(1)
			}
			errs <- nil
		}()
	}
	peak := rss
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, rssKiB(b, pid))
	}
	close(stop)
	for range active {
		if err := <-errs; err != nil {
			b.Fatalf("active client: %v", err)
		}
	}
	b.Logf("gateway RSS: peak %d MiB with %d active clients (of %d connected), %d statements in 3 s",
		peak>>10, active, len(conns), queries.Load())
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(rss-base)/float64(len(conns)), "KiB/idle-client")
	b.ReportMetric(float64(rss)/1024, "MiB-idle")
	b.ReportMetric(float64(peak)/1024, "MiB-peak-busy")
}

// BenchmarkIdleTLSClientMemory measures the gateway's resident memory per
// idle client connection that logged in over TLS (2,000 of them); see
// BenchmarkIdleClientMemory.
func BenchmarkIdleTLSClientMemory(b *testing.B) {
	const clients = 2000
	pki := newPKI(b)
	cert, key := pki.issue(b, "gateway", 2, true, false)
	pid, addr := startGatewayProcess(b, fmt.Sprintf("max_client_connections: 20000\ntls: {cert: %s, key: %s}", cert, key))
	// The test's own certificate.
	conns, base := dialIdle(b, pid, addr, clients, &tls.Config{InsecureSkipVerify: true})
	rss := rssKiB(b, pid)
	b.Logf("gateway RSS: %d MiB with 1 idle TLS client, %d MiB with %d (%.1f KiB per TLS client)",
		base>>10, rss>>10, len(conns), float64(rss-base)/float64(len(conns)))
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(rss-base)/float64(len(conns)), "KiB/idle-client")
	b.ReportMetric(float64(rss)/1024, "MiB-idle")
}

// raiseFileLimit raises the soft open-file limit for n client connections
// (both ends of each live on this machine, and the gateway inherits the
// limit) and returns how many fit under the hard limit.
func raiseFileLimit(n int) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*n+1000) {
		lim.Cur = min(lim.Max, uint64(2*n+1000))
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		n = min(n, int(lim.Cur-1000)/2)
	}
	return n
}

// startGatewayProcess runs the gateway binary on a free address with the
// opsYAML config plus the top-level keys top, stops it with SIGTERM when
// the test ends, and returns its pid and MySQL address.
func startGatewayProcess(t testing.TB, top string) (pid int, addr string) {
	t.Helper()
	bin := buildGateway(t)
	addr = freeAddr(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	cfg := strings.Replace(opsYAML(top, "", "size: 8, min_idle: 2"), "listen: 127.0.0.1:0", "listen: "+addr, 1)
	if err := writeFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	return cmd.Process.Pid, addr
}

// dialIdle logs in n clients (plain, or TLS with tlsConf) and keeps them
// idle; they are closed when the test ends. base is the gateway's RSS
// with the first one connected.
func dialIdle(t testing.TB, pid int, addr string, n int, tlsConf *tls.Config) (conns []*wire.BackendConn, base int64) {
	t.Helper()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for len(conns) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass, ReadBuffer: 512, WriteBuffer: 512, TLS: tlsConf})
		cancel()
		if err != nil {
			if len(conns) == 0 {
				time.Sleep(50 * time.Millisecond) // still starting
				continue
			}
			t.Fatalf("client %d: %v", len(conns), err)
		}
		if len(conns) == 0 {
			time.Sleep(200 * time.Millisecond)
			base = rssKiB(t, pid)
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	return conns, base
}
