package main

import (
	"bytes"
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// childAttr puts a child in its own process group (a terminal's Ctrl-C goes
// to sbbench only, which then stops the children in order) and has the
// kernel SIGKILL it if sbbench dies first. Pdeathsig fires when the thread
// that started the child exits; Go ends threads only for goroutines locked
// with runtime.LockOSThread, which this program never does.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// clockTicks is the kernel's USER_HZ (getconf CLK_TCK), the unit of utime
// and stime in /proc/PID/stat. It is 100 on every Linux built for x86 and
// arm; getconf is asked anyway.
func clockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 100
}

// cpuTicks returns utime+stime of process pid (all its threads, live and
// ended), in clock ticks: fields 14 and 15 of /proc/PID/stat.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU extracts utime+stime from the text of /proc/PID/stat. The
// command name (field 2) is in parentheses and may hold spaces or
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(b []byte) (int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/PID/stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc/PID/stat: %d fields after the name", len(f))
	}
	utime, err1 := strconv.ParseInt(f[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("malformed /proc/PID/stat: %w", err)
	}
	return utime + stime, nil
}

// procCounts are a process's system calls (syscr + syscw of /proc/PID/io:
// read-like and write-like calls, which on a proxy are nearly all of them)
// and context switches (voluntary + nonvoluntary of every thread's
// /proc/PID/task/TID/status; /proc/PID/status counts the main thread only).
type procCounts struct {
	Syscalls, CtxSwitches int64
	ok                    bool
}

// readProcCounts reads pid's procCounts. Threads that have ended take their
// context switches with them; the proxies here keep theirs.
func readProcCounts(pid int) (procCounts, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/io")
	if err != nil {
		return procCounts{}, err
	}
	var c procCounts
	c.Syscalls = fieldSum(b, "syscr:", "syscw:")
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return procCounts{}, err
	}
	for _, t := range tasks {
		if st, err := os.ReadFile(dir + "/task/" + t.Name() + "/status"); err == nil {
			c.CtxSwitches += fieldSum(st, "voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")
		}
	}
	c.ok = true
	return c, nil
}

// fieldSum adds the numbers after the given "key:" line prefixes of b.
func fieldSum(b []byte, keys ...string) int64 {
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range keys {
			if rest, ok := strings.CutPrefix(line, k); ok {
				v, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
				n += v
			}
		}
	}
	return n
}

// machineBusyTicks returns the busy time of all CPUs since boot, in clock
// ticks: the "cpu" line of /proc/stat.
func machineBusyTicks() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStat(b)
}

// parseProcStat extracts the busy time from the text of /proc/stat: on the
// first line ("cpu  user nice system idle iowait irq softirq steal guest
// guest_nice", summed over CPUs) the total of the first eight fields minus
// idle and iowait. guest and guest_nice are already counted in user and
// nice.
func parseProcStat(b []byte) (int64, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, fmt.Errorf("malformed /proc/stat: first line %q", line)
	}
	var busy int64
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc/stat: %w", err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, nil
}

// statusKB returns a "Key:   N kB" value of /proc/PID/status in bytes.
func statusKB(pid int, key string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, key)
}

func parseStatusKB(b []byte, key string) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/status %s: %w", key, err)
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("/proc/PID/status has no %s", key)
}

// resetPeakRSS resets VmHWM of pid to its current RSS (Linux 4.0+, writing 5
// to /proc/PID/clear_refs; needs the right to ptrace the process).
func resetPeakRSS(pid int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit (at most
// 1<<20) for this process and its children: sysbench at 512 threads and a
// gateway with 512 clients need more than the usual 1024. The Go runtime
// raises its own soft limit at start but gives children the original one
// back unless the program calls Setrlimit itself, hence the call even when
// the limit is already high.
func raiseFileLimit() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	lim.Cur = max(lim.Cur, min(lim.Max, 1<<20))
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// freeAddr returns 127.0.0.1:PORT with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// proxyProc is one proxy process under benchmark, started by sbbench and
// restarted by ensure when it has died: a gateway, HAProxy or gorelay.
type proxyProc struct {
	kind     string // "gateway", "haproxy" or "gorelay"
	name     string // part of file names and messages: "gateway-main", "haproxy", "gorelay"
	bin      string
	dir      string   // results dir: config, log and profile go here
	backends []string // MariaDB host:port: the gateway's primary and replica, a relay's primary
	// user and pwd log in through the proxy: the gateway's own account,
	// the backend account through a relay.
	user, pwd string

	// Gateways only.
	poolSize      int // per backend
	replicaReads  bool
	hotRow        bool // hot_row: {max_concurrency: 1, max_queue: 64}
	consolidation bool // consolidation: {enabled: true}
	ioLoops       int  // io_loops
	pipelining    int  // pipelining.connections (0: off)
	profile       bool // pass --cpuprofile
	// order is pool.order (round_robin, lifo); "" leaves it out (the
	// gateway's default, round_robin). idleTimeout is pool.idle_timeout;
	// 0 leaves it out (the default, 5m).
	order       string
	idleTimeout time.Duration

	addr     string
	httpAddr string // gateways: /debug/health
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	starts   int
	ready    int    // starts that got as far as answering a login
	lastExit string // how the previous process ended, when it died on its own
}

// gatewayConfig is the gateway's YAML for this benchmark. Discovery
// (health) runs with its defaults; with replica_reads off every statement
// goes to the primary, as with a single backend. The cluster lists its
// database (clusters[].databases), which with one cluster must cost
// nothing.
func (g *proxyProc) gatewayConfig() string {
	quoted := make([]string, len(g.backends))
	for i, b := range g.backends {
		quoted[i] = strconv.Quote(b)
	}
	hotRow := "{max_concurrency: 0}"
	if g.hotRow {
		hotRow = "{max_concurrency: 1, max_queue: 64}"
	}
	pool := ""
	if g.order != "" {
		pool += ", order: " + g.order
	}
	if g.idleTimeout > 0 {
		pool += ", idle_timeout: " + g.idleTimeout.String()
	}
	return fmt.Sprintf(`# Written by sbbench (make bench).
listen: %s
http_listen: %s
log: {level: warn}
io_loops: %d
users: [{user: %s, password: %s}]
clusters:
  - name: main
    databases: [sbtest]
    backend_user: gateway
    backend_password: secret
    backends: [%s]
    pool: {size: %d, min_idle: 4, max_dials: 4, acquire_timeout: 10s%s}
    replica_reads: %s
    max_replica_lag: %s
    hot_row: %s
    consolidation: {enabled: %v}
    pipelining: {connections: %d}
`, g.addr, g.httpAddr, g.ioLoops, g.user, g.pwd, strings.Join(quoted, ", "), g.poolSize, pool, onOff(g.replicaReads), maxReplicaLag, hotRow, g.consolidation, g.pipelining)
}

// benchPipelining is gateway-pipe's pipelining.connections: 2 was the
// best of 2, 4 and 8 at 64 and 512 clients on a 2-core machine
// (docs/benchmarks.md, "Pipelining").
const benchPipelining = 2

// haproxyMaxConn bounds HAProxy's connections (global and per frontend): the
// 512-thread case needs 512 plus the readiness logins.
const haproxyMaxConn = 4096

// haproxyConfig is HAProxy's configuration: plain TCP forwarding from listen
// to backend, timeouts far beyond a run, no logging, nbthread left at its
// default (one thread per CPU).
func haproxyConfig(listen, backend string) string {
	return fmt.Sprintf(`# Written by sbbench (make bench).
global
    maxconn %d

defaults
    mode tcp
    maxconn %d
    timeout connect 5s
    timeout client 1h
    timeout server 1h

frontend mysql
    bind %s
    default_backend primary

backend primary
    server primary %s
`, haproxyMaxConn, haproxyMaxConn, listen, backend)
}

// startArgs writes the proxy's config file, if it has one, and returns its
// command line.
func (g *proxyProc) startArgs() ([]string, error) {
	switch g.kind {
	case "gateway":
		var err error
		if g.httpAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		cfgPath := filepath.Join(g.dir, g.name+".yaml")
		if err := os.WriteFile(cfgPath, []byte(g.gatewayConfig()), 0o600); err != nil {
			return nil, err
		}
		args := []string{"serve", "--config", cfgPath}
		if g.profile {
			args = append(args, "--cpuprofile", filepath.Join(g.dir, fmt.Sprintf("%s-%d.pprof", g.name, g.starts)))
		}
		return args, nil
	case "haproxy":
		// -db: foreground, no master process, so the PID is the process
		// that does the work.
		cfgPath := filepath.Join(g.dir, g.name+".cfg")
		if err := os.WriteFile(cfgPath, []byte(haproxyConfig(g.addr, g.backends[0])), 0o600); err != nil {
			return nil, err
		}
		return []string{"-db", "-f", cfgPath}, nil
	case "gorelay":
		return []string{"-listen", g.addr, "-backend", g.backends[0]}, nil
	}
	return nil, fmt.Errorf("unknown proxy kind %q", g.kind)
}

func (g *proxyProc) pid() int {
	if g.cmd == nil || !g.running() {
		return 0
	}
	return g.cmd.Process.Pid
}

func (g *proxyProc) running() bool {
	if g.exited == nil {
		return false
	}
	select {
	case <-g.exited:
		return false
	default:
		return true
	}
}

// ensure starts the proxy if it is not running, on a fresh free port, and
// waits until it answers a login. It reports whether it started a process,
// and in restarted whether one had run before and died.
func (g *proxyProc) ensure(ctx context.Context) (started, restarted bool, err error) {
	if g.running() {
		return false, false, nil
	}
	started = true
	if g.cmd != nil {
		restarted = true
		g.lastExit = fmt.Sprintf("%s (pid %d) had exited: %v", g.name, g.cmd.Process.Pid, g.waitErr)
	}
	g.starts++
	if g.addr, err = freeAddr(); err != nil {
		return started, restarted, err
	}
	args, err := g.startArgs()
	if err != nil {
		return started, restarted, err
	}
	logPath := filepath.Join(g.dir, g.name+".log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return started, restarted, err
	}
	fmt.Fprintf(logf, "--- sbbench: start %d of %s on %s at %s\n", g.starts, g.name, g.addr, time.Now().Format(time.RFC3339))
	cmd := exec.Command(g.bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = childAttr()
	err = cmd.Start()
	logf.Close() // the child has its own copy
	if err != nil {
		return started, restarted, fmt.Errorf("start %s: %w", g.bin, err)
	}
	g.cmd = cmd
	g.exited = make(chan struct{})
	exited := g.exited
	go func() {
		g.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := waitLogin(ctx, target{addr: g.addr, user: g.user, password: g.pwd}, 30*time.Second, g.exited); err != nil {
		if !g.running() {
			err = fmt.Errorf("%w: %v", err, g.waitErr)
		}
		g.stop()
		return started, restarted, fmt.Errorf("%s on %s: %w (log: %s)", g.name, g.addr, err, logPath)
	}
	g.ready++
	return started, restarted, nil
}

// waitLogin logs in to t (database sbtest) until it works, exited is
// closed (the process behind t ended; nil for none), ctx ends or limit
// passes. The gateway's "accepting MySQL clients" line is logged at info
// level, which this benchmark turns off, and a relay accepts before its
// backend answers: a login is the one sign of readiness every target gives.
func waitLogin(ctx context.Context, t target, limit time.Duration, exited <-chan struct{}) error {
	db, err := openDB(t)
	if err != nil {
		return err
	}
	defer db.Close()
	return retry(ctx, limit, 50*time.Millisecond, exited, db.PingContext)
}

// retry calls try (each call bounded by 5 s) every interval until it
// returns nil, exited is closed (nil: never), ctx ends or limit passes,
// and then returns try's last error.
func retry(ctx context.Context, limit, interval time.Duration, exited <-chan struct{}, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		last := try(tctx)
		tcancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the process exited (last error: %w)", last)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", limit, last)
		case <-tick.C:
		}
	}
}

// openDB opens a connection pool to t, database sbtest, keeping no idle
// connection.
func openDB(t target) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = t.user, t.password, "tcp", t.addr, "sbtest"
	cfg.Timeout = 2 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(0)
	return db, nil
}

// stop sends SIGTERM and waits up to 20 s (the gateway's drain takes up to
// its 10 s drain_timeout), then SIGKILL. It returns how the process
// ended; nil when it was not running, or exited 0 or by the SIGTERM after
// it (gorelay has no handler for it).
func (g *proxyProc) stop() error {
	if !g.running() {
		return nil
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(20 * time.Second)
	defer t.Stop()
	select {
	case <-g.exited:
		if g.waitErr != nil && !killedBy(g.cmd, syscall.SIGTERM) {
			return fmt.Errorf("%s exited after SIGTERM with %v", g.name, g.waitErr)
		}
		return nil
	case <-t.C:
		_ = g.cmd.Process.Kill()
		<-g.exited
		return fmt.Errorf("%s did not stop within 20s of SIGTERM; killed", g.name)
	}
}

// killedBy reports whether the ended process of cmd died of sig.
func killedBy(cmd *exec.Cmd, sig syscall.Signal) bool {
	if cmd.ProcessState == nil {
		return false
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// healthDoc is the part of the gateway's /debug/health the bench reads.
type healthDoc struct {
	Round    uint64 `json:"round"`
	Clusters []struct {
		Name     string   `json:"name"`
		Primary  string   `json:"primary"`
		Replicas []string `json:"replicas"`
		Backends []struct {
			Addr       string   `json:"addr"`
			State      string   `json:"state"`
			Role       string   `json:"role"`
			LagSeconds *float64 `json:"lag_seconds"`
			Note       string   `json:"replication_note"`
		} `json:"backends"`
	} `json:"clusters"`
}

// health fetches /debug/health: the decoded document and its raw JSON.
func (g *proxyProc) health(ctx context.Context) (*healthDoc, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.httpAddr+"/debug/health", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, body, fmt.Errorf("GET /debug/health: %s", resp.Status)
	}
	var d healthDoc
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, body, fmt.Errorf("GET /debug/health: %w", err)
	}
	return &d, body, nil
}

// readsFrom reports whether discovery lets the gateway read from replica:
// listed as a serving replica of cluster main, with a known lag under
// max_replica_lag. why says what is missing.
func (d *healthDoc) readsFrom(replica string) (ok bool, why string) {
	for _, c := range d.Clusters {
		if c.Name != "main" {
			continue
		}
		for _, b := range c.Backends {
			if b.Addr != replica {
				continue
			}
			switch {
			case !slices.Contains(c.Replicas, replica):
				return false, fmt.Sprintf("replica %s is %s with role %s", replica, b.State, b.Role)
			case b.LagSeconds == nil:
				return false, fmt.Sprintf("replica %s has an unknown lag %s", replica, b.Note)
			case *b.LagSeconds > maxReplicaLag.Seconds():
				return false, fmt.Sprintf("replica %s lags %.0fs", replica, *b.LagSeconds)
			}
			return true, ""
		}
	}
	return false, fmt.Sprintf("replica %s is not in the health snapshot (round %d)", replica, d.Round)
}

// waitReplica waits until the gateway reads from replica (see readsFrom),
// ctx ends or limit passes.
func (g *proxyProc) waitReplica(ctx context.Context, replica string, limit time.Duration) error {
	err := retry(ctx, limit, 100*time.Millisecond, g.exited, func(ctx context.Context) error {
		d, _, err := g.health(ctx)
		if err != nil {
			return err
		}
		if ok, why := d.readsFrom(replica); !ok {
			return errors.New(why)
		}
		return nil
	})
	if err != nil && !g.running() {
		return fmt.Errorf("%s exited: %v", g.name, g.waitErr)
	}
	return err
}

// saveHealth writes /debug/health to path and reports whether the gateway
// reads from replica.
func (g *proxyProc) saveHealth(path, replica string) (bool, error) {
	d, raw, err := g.health(context.Background())
	if raw != nil {
		if werr := os.WriteFile(path, raw, 0o644); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return false, err
	}
	ok, _ := d.readsFrom(replica)
	return ok, nil
}
