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

// gatewayProc is one gateway process under benchmark, restarted by ensure
// when it has died.
type gatewayProc struct {
	name         string // "main", "mux" or "replicas", part of file names
	bin          string
	dir          string   // results dir: config, log and profile go here
	backends     []string // MariaDB host:port: the primary and the replica
	poolSize     int      // per backend
	replicaReads bool
	profile      bool // pass --cpuprofile
	user, pwd    string

	addr     string
	httpAddr string // /debug/health
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	starts   int
	ready    int    // starts that got as far as answering a login
	lastExit string // how the previous process ended, when it died on its own
}

// config is the gateway's YAML for this benchmark. Discovery (health)
// runs with its defaults; with replica_reads off every statement goes to
// the primary, as with a single backend.
func (g *gatewayProc) config() string {
	quoted := make([]string, len(g.backends))
	for i, b := range g.backends {
		quoted[i] = strconv.Quote(b)
	}
	return fmt.Sprintf(`# Written by sbbench (make bench).
listen: %s
http_listen: %s
log: {level: warn}
users: [{user: %s, password: %s}]
clusters:
  - name: main
    backend_user: gateway
    backend_password: secret
    backends: [%s]
    pool: {size: %d, min_idle: 4, max_dials: 4, acquire_timeout: 10s}
    replica_reads: %s
    max_replica_lag: %s
`, g.addr, g.httpAddr, g.user, g.pwd, strings.Join(quoted, ", "), g.poolSize, onOff(g.replicaReads), maxReplicaLag)
}

func (g *gatewayProc) pid() int {
	if g.cmd == nil || !g.running() {
		return 0
	}
	return g.cmd.Process.Pid
}

func (g *gatewayProc) running() bool {
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

// ensure starts the gateway if it is not running, on a fresh free port, and
// waits until it answers a login. It reports whether it started a process,
// and in restarted whether one had run before and died.
func (g *gatewayProc) ensure(ctx context.Context) (started, restarted bool, err error) {
	if g.running() {
		return false, false, nil
	}
	started = true
	if g.cmd != nil {
		restarted = true
		g.lastExit = fmt.Sprintf("gateway %s (pid %d) had exited: %v", g.name, g.cmd.Process.Pid, g.waitErr)
	}
	g.starts++
	if g.addr, err = freeAddr(); err != nil {
		return started, restarted, err
	}
	if g.httpAddr, err = freeAddr(); err != nil {
		return started, restarted, err
	}
	cfgPath := fmt.Sprintf("%s/gateway-%s.yaml", g.dir, g.name)
	if err := os.WriteFile(cfgPath, []byte(g.config()), 0o600); err != nil {
		return started, restarted, err
	}
	logPath := fmt.Sprintf("%s/gateway-%s.log", g.dir, g.name)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return started, restarted, err
	}
	fmt.Fprintf(logf, "--- sbbench: start %d of gateway %s on %s at %s\n", g.starts, g.name, g.addr, time.Now().Format(time.RFC3339))
	args := []string{"serve", "--config", cfgPath}
	if g.profile {
		args = append(args, "--cpuprofile", fmt.Sprintf("%s/gateway-%s-%d.pprof", g.dir, g.name, g.starts))
	}
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
	if err := g.waitReady(ctx); err != nil {
		g.stop()
		return started, restarted, fmt.Errorf("gateway %s on %s: %w (log: %s)", g.name, g.addr, err, logPath)
	}
	g.ready++
	return started, restarted, nil
}

// waitReady logs in through the gateway until it works, the process exits,
// ctx ends or 30 s pass. The "accepting MySQL clients" line is logged at
// info level, which this benchmark turns off.
func (g *gatewayProc) waitReady(ctx context.Context) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = g.user, g.pwd, "tcp", g.addr, "sbtest"
	cfg.Timeout = 2 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxIdleConns(0)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-g.exited:
			return fmt.Errorf("exited during start: %v", g.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %v)", ctx.Err(), last)
		case <-tick.C:
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last = db.PingContext(pctx)
		pcancel()
		if last == nil {
			return nil
		}
	}
}

// stop sends SIGTERM and waits up to 20 s (the gateway's drain takes up to
// its 10 s drain_timeout), then SIGKILL. It returns how the process
// ended; nil when it was not running or exited 0 after SIGTERM.
func (g *gatewayProc) stop() error {
	if !g.running() {
		return nil
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(20 * time.Second)
	defer t.Stop()
	select {
	case <-g.exited:
		if g.waitErr != nil {
			return fmt.Errorf("gateway %s exited after SIGTERM with %v", g.name, g.waitErr)
		}
		return nil
	case <-t.C:
		_ = g.cmd.Process.Kill()
		<-g.exited
		return fmt.Errorf("gateway %s did not stop within 20s of SIGTERM; killed", g.name)
	}
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
func (g *gatewayProc) health(ctx context.Context) (*healthDoc, []byte, error) {
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
func (g *gatewayProc) waitReplica(ctx context.Context, replica string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		d, _, err := g.health(ctx)
		if err == nil {
			var ok bool
			if ok, last = d.readsFrom(replica); ok {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-g.exited:
			return fmt.Errorf("gateway %s exited: %v", g.name, g.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("after %s: %s", limit, last)
		case <-tick.C:
		}
	}
}

// saveHealth writes /debug/health to path and reports whether the gateway
// reads from replica.
func (g *gatewayProc) saveHealth(path, replica string) (bool, error) {
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
