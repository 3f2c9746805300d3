package faults

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/mariadbtest"
)

// benchSegment is how long one sysbench run of the soak lasts: sysbench
// 1.0.20 crashes (SIGSEGV) on a lost connection with
// --mysql-ignore-errors=all, so the soak runs it in segments and starts
// the next one when a segment ends or dies.
const benchSegment = 60 * time.Second

// benchFigures is what the soak's sysbench segments did, summed.
type benchFigures struct {
	// failedStarts counts the segments that ended with no report and no
	// crash (sysbench could not connect).
	segments, crashes, failedStarts int
	// fromReports counts the segments whose figures come from the
	// per-second reports (a crashed segment prints no summary).
	fromReports           int
	transactions, queries float64
	ignored, reconnects   float64
	secs                  float64
	sample                string // the first crash or failed start
}

func (b benchFigures) String() string {
	if b.segments == 0 {
		return b.sample
	}
	s := fmt.Sprintf("%d segments of at most %v, %d crashed (signal), %d more ended with no report; %.0f transactions, %.0f queries in %.0f s (%.1f tps), %.0f ignored errors, %.0f reconnects; %d segments' figures summed from per-second reports",
		b.segments, benchSegment, b.crashes, b.failedStarts, b.transactions, b.queries, b.secs, b.transactions/max(b.secs, 1), b.ignored, b.reconnects, b.fromReports)
	if b.sample != "" {
		s += "; e.g. " + b.sample
	}
	return s
}

// startSysbench prepares sysbench's tables straight on the primary (its
// socket) and runs oltp_read_write through the gateway at addr until the
// deadline less 10 s, in segments of benchSegment, errors ignored; the
// returned function waits for the last segment and returns the sums. When
// sysbench is not installed or -soak.sysbench=false it runs nothing.
func startSysbench(t *testing.T, db *mariadbtest.Server, addr string, deadline time.Time) func() benchFigures {
	t.Helper()
	if !*soakSysbench {
		return func() benchFigures { return benchFigures{sample: "off (-soak.sysbench=false)"} }
	}
	if _, err := exec.LookPath("sysbench"); err != nil {
		return func() benchFigures { return benchFigures{sample: "sysbench not installed"} }
	}
	host, port, _ := strings.Cut(addr, ":")
	common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-db=" + testDB, "--tables=2", "--table-size=2000"}
	prep := exec.Command("sysbench", append(common, "--mysql-socket="+db.Socket, "--mysql-user=root", "cleanup")...)
	_ = prep.Run()
	prep = exec.Command("sysbench", append(common, "--mysql-socket="+db.Socket, "--mysql-user=root", "prepare")...)
	if out, err := prep.CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	run := append(common, "--mysql-host="+host, "--mysql-port="+port, "--mysql-user="+appUser,
		"--mysql-password="+appPass, "--threads=4", "--mysql-ignore-errors=all", "--report-interval=1")
	end := deadline.Add(-10 * time.Second)
	done := make(chan benchFigures, 1)
	go func() {
		var b benchFigures
		for n := 0; n < 10_000; n++ {
			left := time.Until(end)
			if left < 5*time.Second {
				break
			}
			secs := int(min(left, benchSegment).Seconds())
			cmd := exec.Command("sysbench", append(run, "--time="+strconv.Itoa(secs), "run")...)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			started := time.Now()
			err := cmd.Run()
			b.segments++
			b.add(out.String(), err)
			if time.Since(started) < 2*time.Second {
				time.Sleep(time.Second) // the gateway refused it: do not spin
			}
		}
		done <- b
	}()
	return func() benchFigures { return <-done }
}

var (
	benchSummary = regexp.MustCompile(`(?m)^\s*(transactions|queries|ignored errors|reconnects):\s+(\d+)`)
	benchTotal   = regexp.MustCompile(`(?m)^\s*total time:\s+([\d.]+)s`)
	benchReport  = regexp.MustCompile(`(?m)^\[ *\d+s \] .*tps: ([\d.]+) qps: ([\d.]+) .*err/s: ([\d.]+) reconn/s: ([\d.]+)`)
)

// add adds one segment's output: its summary when it printed one, else the
// sum of its per-second reports (interval 1 s).
func (b *benchFigures) add(out string, err error) {
	crashed := false
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			crashed = true
			b.crashes++
			if b.sample == "" {
				b.sample = "segment " + strconv.Itoa(b.segments) + ": " + ws.Signal().String() + " after: " + lastLine(out)
			}
		}
	}
	if m := benchSummary.FindAllStringSubmatch(out, -1); len(m) > 0 {
		for _, f := range m {
			v, _ := strconv.ParseFloat(f[2], 64)
			switch f[1] {
			case "transactions":
				b.transactions += v
			case "queries":
				b.queries += v
			case "ignored errors":
				b.ignored += v
			case "reconnects":
				b.reconnects += v
			}
		}
		if m := benchTotal.FindStringSubmatch(out); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			b.secs += v
		}
		return
	}
	reports := benchReport.FindAllStringSubmatch(out, -1)
	if len(reports) == 0 {
		if !crashed {
			b.failedStarts++
		}
		if b.sample == "" {
			b.sample = "segment " + strconv.Itoa(b.segments) + " printed nothing: " + lastLine(out)
		}
		return
	}
	b.fromReports++
	for _, f := range reports {
		tps, _ := strconv.ParseFloat(f[1], 64)
		qps, _ := strconv.ParseFloat(f[2], 64)
		errs, _ := strconv.ParseFloat(f[3], 64)
		rec, _ := strconv.ParseFloat(f[4], 64)
		b.transactions += tps
		b.queries += qps
		b.ignored += errs
		b.reconnects += rec
		b.secs++
	}
}

// lastLine is out's last non-empty line.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
