package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// perfEvent is the tracepoint sbbench counts a proxy's system calls with:
// every system call, sockets' send/recv/splice included, which
// /proc/PID/io (syscr, syscw: read- and write-family calls only) misses.
const perfEvent = "raw_syscalls:sys_enter"

// perfWorks reports whether `perf stat` can count perfEvent here (perf
// installed, tracepoints readable).
func perfWorks() bool {
	out, err := exec.Command("perf", "stat", "-x,", "-e", perfEvent, "--", "true").CombinedOutput()
	if err != nil {
		return false
	}
	n, err := parsePerfCount(out)
	return err == nil && n > 0
}

// parsePerfCount reads the count of perfEvent from `perf stat -x,` output.
func parsePerfCount(out []byte) (int64, error) {
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, ",")
		if len(f) >= 3 && f[2] == perfEvent {
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("perf stat printed no %s count: %q", perfEvent, lastLines(string(out), 3))
}

// syscallCounter counts the system calls of a process (all its threads)
// with `perf stat -p` between sysbench's "Threads started!" and its
// report: runSysbench samples at its launch, at the first and at the
// second; the counter starts perf at the second sample and stops it at
// the third. nil counts nothing.
type syscallCounter struct {
	pid   int
	marks int
	cmd   *exec.Cmd
	out   bytes.Buffer
}

func newSyscallCounter(pid int, usePerf bool) *syscallCounter {
	if pid <= 0 || !usePerf {
		return nil
	}
	return &syscallCounter{pid: pid}
}

// perfSettle is how long perf gets to attach before the window starts.
const perfSettle = 100 * time.Millisecond

// mark is called with every sample: it returns the system calls counted
// so far, and whether this sample is the start (0) or the end of the
// counted window.
func (c *syscallCounter) mark() (int64, bool) {
	if c == nil {
		return 0, false
	}
	c.marks++
	switch c.marks {
	case 2:
		cmd := exec.Command("perf", "stat", "-x,", "-e", perfEvent, "-p", strconv.Itoa(c.pid))
		cmd.Stderr = &c.out
		cmd.SysProcAttr = childAttr()
		if cmd.Start() != nil {
			return 0, false
		}
		c.cmd = cmd
		time.Sleep(perfSettle)
		return 0, true
	case 3:
		n, err := c.stop()
		return n, err == nil
	}
	return 0, false
}

// stop ends perf, if it runs, and returns its count.
func (c *syscallCounter) stop() (int64, error) {
	if c == nil || c.cmd == nil {
		return 0, fmt.Errorf("perf is not running")
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	_ = c.cmd.Wait()
	c.cmd = nil
	return parsePerfCount(c.out.Bytes())
}

// countSyscalls decides how proxies' system calls are counted (perf, else
// /proc/PID/io) and notes it in the results' environment.
func (b *bench) countSyscalls() {
	if b.perf = perfWorks(); b.perf {
		b.env["proxy_syscalls"] = "perf stat -e " + perfEvent + " (every system call)"
		return
	}
	b.env["proxy_syscalls"] = "/proc/PID/io syscr+syscw: read/write-family calls only, no send/recv/splice/io_uring (perf " + perfEvent + " is not available)"
}

// sampler returns runSysbench's sample function for a run (CPU of the
// given processes, the proxy's system calls and context switches) and a
// function that ends its system call counting.
func (b *bench) sampler(mariadbPID, replicaPID, proxyPID int) (sample func() cpuSample, end func()) {
	sc := newSyscallCounter(proxyPID, b.perf)
	return func() cpuSample {
		s := takeSample(mariadbPID, replicaPID, proxyPID)
		if sc == nil {
			s.sys, s.sysOK = s.proxyIO.Syscalls, s.proxyIO.ok
		} else {
			s.sys, s.sysOK = sc.mark()
		}
		return s
	}, func() { _, _ = sc.stop() }
}
