package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// target is where sysbench connects.
type target struct {
	addr     string // 127.0.0.1:PORT
	user     string
	password string
}

// sbArgs are the sysbench arguments for workload (oltp_point_select, ...)
// and command (prepare, run) against t; extra go before the command.
func sbArgs(workload, command string, t target, tables, tableSize, threads, seconds int, psMode string, extra ...string) []string {
	host, port, _ := strings.Cut(t.addr, ":")
	args := []string{
		workload,
		"--db-driver=mysql",
		"--mysql-host=" + host,
		"--mysql-port=" + port,
		"--mysql-user=" + t.user,
		"--mysql-password=" + t.password,
		"--mysql-db=sbtest",
		"--tables=" + strconv.Itoa(tables),
		"--table-size=" + strconv.Itoa(tableSize),
		"--threads=" + strconv.Itoa(threads),
	}
	if command == "run" {
		args = append(args,
			"--time="+strconv.Itoa(seconds),
			"--events=0",
			"--db-ps-mode="+psMode,
			"--percentile=95",
			"--report-interval=0",
			// Threads still busy 10 s after --time (a statement that never
			// returns) end the run instead of hanging it.
			"--forced-shutdown=10",
		)
	}
	args = append(args, extra...)
	return append(args, command)
}

// sbOutput is what one sysbench run reported.
type sbOutput struct {
	Queries       int64
	QPS           float64
	TPS           float64
	P95Ms         float64
	P99Ms         float64
	AvgMs         float64
	IgnoredErrors int64
	Reconnects    int64
	TotalTimeS    float64
	HasReport     bool // the "SQL statistics:" report was printed
	Forced        bool // sysbench forced the shutdown: some thread hung
	Fatal         []string
}

var (
	reQueries    = regexp.MustCompile(`(?m)^\s*queries:\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	reTrans      = regexp.MustCompile(`(?m)^\s*transactions:\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	reIgnored    = regexp.MustCompile(`(?m)^\s*ignored errors:\s+(\d+)`)
	reReconnects = regexp.MustCompile(`(?m)^\s*reconnects:\s+(\d+)`)
	reP95        = regexp.MustCompile(`(?m)^\s*95th percentile:\s+([\d.]+)`)
	reP99        = regexp.MustCompile(`(?m)^\s*99th percentile:\s+([\d.]+)`)
	reAvg        = regexp.MustCompile(`(?m)^\s*avg:\s+([\d.]+)`)
	reTotalTime  = regexp.MustCompile(`(?m)^\s*total time:\s+([\d.]+)s`)
)

// parseSysbench reads the report of `sysbench ... run` (1.0.x format).
func parseSysbench(out string) sbOutput {
	var o sbOutput
	o.HasReport = strings.Contains(out, "SQL statistics:")
	o.Forced = strings.Contains(out, "limit has expired, forcing shutdown")
	if m := reQueries.FindStringSubmatch(out); m != nil {
		o.Queries, _ = strconv.ParseInt(m[1], 10, 64)
		o.QPS, _ = strconv.ParseFloat(m[2], 64)
	}
	if m := reTrans.FindStringSubmatch(out); m != nil {
		o.TPS, _ = strconv.ParseFloat(m[2], 64)
	}
	if m := reIgnored.FindStringSubmatch(out); m != nil {
		o.IgnoredErrors, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reReconnects.FindStringSubmatch(out); m != nil {
		o.Reconnects, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reP95.FindStringSubmatch(out); m != nil {
		o.P95Ms, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reP99.FindStringSubmatch(out); m != nil {
		o.P99Ms, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reAvg.FindStringSubmatch(out); m != nil {
		o.AvgMs, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reTotalTime.FindStringSubmatch(out); m != nil {
		o.TotalTimeS, _ = strconv.ParseFloat(m[1], 64)
	}
	o.Fatal = errorLines(out, 6)
	return o
}

// sbInterval is one of the lines sysbench prints every --report-interval
// seconds of a run (1.0.x format):
//
//	[ 1s ] thds: 64 tps: 27044.85 qps: 27044.85 (r/w/o: 27044.85/0.00/0.00) lat (ms,99%): 6.21 err/s: 0.00 reconn/s: 0.00
//
// Each line covers the interval that ends at its second (the first, the
// run's first second: sysbench's clock starts at "Threads started!",
// every client connected); LatMs is the --percentile percentile of the
// events of that interval, Pct that percentile.
type sbInterval struct {
	Second   float64 `json:"s"`
	Threads  int     `json:"threads"`
	TPS      float64 `json:"tps"`
	QPS      float64 `json:"qps"`
	Pct      float64 `json:"pct"`
	LatMs    float64 `json:"lat_ms"`
	ErrPS    float64 `json:"err_per_s"`
	ReconnPS float64 `json:"reconn_per_s"`
}

var (
	reIntervalHead = regexp.MustCompile(`^\[\s*([\d.]+)s\s*\]\s+thds:\s+(\d+)\s`)
	reIntervalTPS  = regexp.MustCompile(`\stps:\s+([\d.]+)`)
	reIntervalQPS  = regexp.MustCompile(`\sqps:\s+([\d.]+)`)
	reIntervalLat  = regexp.MustCompile(`\slat \(ms,([\d.]+)%\):\s+([\d.]+)`)
	reIntervalErr  = regexp.MustCompile(`\serr/s:\s+([\d.]+)`)
	reIntervalRec  = regexp.MustCompile(`\sreconn/s:\s+([\d.]+)`)
)

// parseIntervals returns the interval lines of a run's output, in order.
// A line that starts like one ("[ 3s ] thds: N") but lacks its tps, qps
// or latency (a line cut short by a killed sysbench) is left out, and so
// are the "[ Ns ] queue length: ..." lines of a run with --rate.
func parseIntervals(out string) []sbInterval {
	var list []sbInterval
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		h := reIntervalHead.FindStringSubmatch(line)
		if h == nil {
			continue
		}
		tps, qps, lat := reIntervalTPS.FindStringSubmatch(line), reIntervalQPS.FindStringSubmatch(line), reIntervalLat.FindStringSubmatch(line)
		if tps == nil || qps == nil || lat == nil {
			continue
		}
		var iv sbInterval
		iv.Second, _ = strconv.ParseFloat(h[1], 64)
		iv.Threads, _ = strconv.Atoi(h[2])
		iv.TPS, _ = strconv.ParseFloat(tps[1], 64)
		iv.QPS, _ = strconv.ParseFloat(qps[1], 64)
		iv.Pct, _ = strconv.ParseFloat(lat[1], 64)
		iv.LatMs, _ = strconv.ParseFloat(lat[2], 64)
		if m := reIntervalErr.FindStringSubmatch(line); m != nil {
			iv.ErrPS, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := reIntervalRec.FindStringSubmatch(line); m != nil {
			iv.ReconnPS, _ = strconv.ParseFloat(m[1], 64)
		}
		list = append(list, iv)
	}
	return list
}

// quoted matches single-quoted text in sysbench's error lines (the failing
// query, the SQLSTATE).
var quoted = regexp.MustCompile(`'[^']*'`)

// errorLines returns up to max distinct lines that report errors: FATAL
// lines, the MySQL error lines sysbench prints before them, and Lua errors.
// Every thread of a failing run repeats them, with a different query, hence
// the de-duplication on the text outside quotes.
func errorLines(out string, max int) []string {
	seen := map[string]bool{}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		key := quoted.ReplaceAllString(l, "'…'")
		if l == "" || seen[key] {
			continue
		}
		if !strings.HasPrefix(l, "FATAL:") && !strings.Contains(l, "error") && !strings.Contains(l, "Error") {
			continue
		}
		if strings.HasPrefix(l, "ignored errors:") || strings.HasPrefix(l, "(last message repeated") {
			continue
		}
		seen[key] = true
		if len(lines) < max {
			lines = append(lines, l)
		}
	}
	return lines
}

// cpuSample is the CPU time used so far by the primary mariadbd, the
// replica's, the proxy and the whole machine.
type cpuSample struct {
	at      time.Time
	mariadb int64 // clock ticks, the primary
	replica int64 // clock ticks; 0 when the replica is not measured
	proxy   int64 // clock ticks; 0 without a measured proxy process
	// proxyIO are the proxy's read/write calls and context switches so
	// far (zero when unreadable: not an error, the CPU columns stand
	// alone); sys its system calls so far when sysOK (see record).
	proxyIO procCounts
	sys     int64
	sysOK   bool
	machine int64 // clock ticks, busy time of all CPUs (/proc/stat)
	err     error
}

// takeSample reads the CPU time of the processes and of the machine; a
// zero replicaPID or proxyPID is not measured.
func takeSample(mariadbPID, replicaPID, proxyPID int) cpuSample {
	s := cpuSample{at: time.Now()}
	var err1, err2, err3, err4 error
	s.mariadb, err1 = cpuTicks(mariadbPID)
	if replicaPID > 0 {
		s.replica, err2 = cpuTicks(replicaPID)
	}
	if proxyPID > 0 {
		s.proxy, err3 = cpuTicks(proxyPID)
		s.proxyIO, _ = readProcCounts(proxyPID)
	}
	s.machine, err4 = machineBusyTicks()
	s.err = errors.Join(err1, err2, err3, err4)
	return s
}

// sbRun is one sysbench process and the CPU samples around its measured
// window.
type sbRun struct {
	out         string
	exitErr     error // from Wait; nil when sysbench exited 0
	timedOut    bool  // killed by the hard deadline
	interrupted bool  // killed because ctx ended
	begin, end  cpuSample
	windowExact bool // both samples were taken at sysbench's markers
	// launched is when sysbench was started; started when it printed
	// "Threads started!" (zero if it never did): between them it
	// connected its clients (and ran its thread_init).
	launched, started time.Time
	clientCPU         time.Duration
}

// runSysbench runs sysbench with args, copies its output to logPath, and
// samples CPU (through sample) when sysbench prints "Threads started!"
// (every client connected, the clock starts) and when it starts its report
// ("SQL statistics:", threads joined), falling back to process start and
// exit. It kills sysbench's process group when ctx ends or after
// hardTimeout.
func runSysbench(ctx context.Context, args []string, logPath string, hardTimeout time.Duration, sample func() cpuSample) (*sbRun, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "$ sysbench %s\n", strings.Join(args, " "))

	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("sysbench", args...)
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.SysProcAttr = childAttr()
	r := &sbRun{begin: sample()}
	r.launched = time.Now()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start sysbench: %w (install it with e2e/local/deps.sh --with-bench)", err)
	}
	pw.Close()

	done := make(chan struct{})
	killed := make(chan string, 1)
	go func() {
		t := time.NewTimer(hardTimeout)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-ctx.Done():
			killed <- "interrupted"
		case <-t.C:
			killed <- "timeout"
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}()

	var b strings.Builder
	sawStart, sawEnd := false, false
	sc := bufio.NewScanner(io.TeeReader(pr, logf))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !sawStart && strings.HasPrefix(line, "Threads started!"):
			sawStart = true
			r.started = time.Now()
			r.begin = sample()
		case !sawEnd && strings.HasPrefix(line, "SQL statistics:"):
			sawEnd = true
			r.end = sample()
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	pr.Close()
	r.exitErr = cmd.Wait()
	close(done)
	if !sawEnd {
		r.end = sample()
	}
	r.windowExact = sawStart && sawEnd
	r.out = b.String()
	if cmd.ProcessState != nil {
		r.clientCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	select {
	case why := <-killed:
		r.timedOut = why == "timeout"
		r.interrupted = why == "interrupted"
	default:
	}
	return r, nil
}
