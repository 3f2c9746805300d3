package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
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
	name      string // "main" or "mux", part of file names
	bin       string
	dir       string // results dir: config, log and profile go here
	backend   string // MariaDB host:port
	poolSize  int
	profile   bool // pass --cpuprofile
	user, pwd string

	addr     string
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	starts   int
	ready    int    // starts that got as far as answering a login
	lastExit string // how the previous process ended, when it died on its own
}

// config is the gateway's YAML for this benchmark.
func (g *gatewayProc) config() string {
	return fmt.Sprintf(`# Written by sbbench (make bench).
listen: %s
http_listen: "off"
log: {level: warn}
users: [{user: %s, password: %s}]
clusters:
  - name: main
    backend_user: gateway
    backend_password: secret
    backends: [%q]
    pool: {size: %d, min_idle: 4, max_dials: 4, acquire_timeout: 10s}
`, g.addr, g.user, g.pwd, g.backend, g.poolSize)
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
// its 10 s shutdown_timeout), then SIGKILL. It returns how the process
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
