package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The hot-row cases (issue 17): 64 threads running transactions that
// update the same few rows (e2e/bench/lua/hotrow.lua), direct against the
// gateway without and with hot-row protection. Besides throughput and
// latency (the 99th percentile), each run records how MariaDB fared: the
// rise of Innodb_row_lock_waits and Threads_running, sampled.

// hotRowSample is how often Threads_running is read during a run.
const hotRowSample = 250 * time.Millisecond

// prepareHotRows creates the hot-row table once, when a hot-row case is to
// run.
func (b *bench) prepareHotRows(ctx context.Context) error {
	i := slices.IndexFunc(b.cases, func(c benchCase) bool { return c.HotRows })
	if i < 0 {
		return nil
	}
	args := sbArgs(b.cases[i].Workload, "prepare", b.direct(), 1, 1, 1, 0, "")
	r, err := runSysbench(ctx, args, filepath.Join(b.dir, "sysbench", "000-prepare-hotrow.txt"), 5*time.Minute,
		func() cpuSample { return cpuSample{} })
	if err != nil {
		return err
	}
	if r.exitErr != nil || r.timedOut {
		return fmt.Errorf("sysbench prepare of %s failed (%v): %s", b.cases[i].Workload, r.exitErr, lastLines(r.out, 10))
	}
	return nil
}

// hotRowWatch reads the primary's lock waits before and after a run and
// samples its Threads_running meanwhile.
type hotRowWatch struct {
	db      *sql.DB
	waits0  int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	running []float64
}

// watchHotRows starts watching the primary for one run.
func (b *bench) watchHotRows(ctx context.Context) (*hotRowWatch, error) {
	db, err := openDB(b.direct())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	w := &hotRowWatch{db: db}
	if w.waits0, err = globalStatus(ctx, db, "Innodb_row_lock_waits"); err != nil {
		db.Close()
		return nil, fmt.Errorf("reading Innodb_row_lock_waits: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(hotRowSample)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				if n, err := globalStatus(sctx, db, "Threads_running"); err == nil {
					w.running = append(w.running, float64(n))
				}
			}
		}
	}()
	return w, nil
}

// stop ends the watch and returns the rise of Innodb_row_lock_waits and
// the median and maximum of Threads_running (nil when not read).
func (w *hotRowWatch) stop() (waits *int64, median, peak *float64) {
	w.cancel()
	w.wg.Wait()
	defer w.db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := globalStatus(ctx, w.db, "Innodb_row_lock_waits"); err == nil {
		waits = ptr(n - w.waits0)
	}
	if len(w.running) > 0 {
		slices.Sort(w.running)
		median, peak = ptr(w.running[len(w.running)/2]), ptr(w.running[len(w.running)-1])
	}
	return waits, median, peak
}

// globalStatus reads one of SHOW GLOBAL STATUS's counters.
func globalStatus(ctx context.Context, db *sql.DB, name string) (int64, error) {
	var k string
	var v int64
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&k, &v)
	return v, err
}

// caseRuns returns the runs of the cases that in selects, in order.
func caseRuns(cases []benchCase, runs []runResult, in func(benchCase) bool) []runResult {
	names := map[string]bool{}
	for _, c := range cases {
		if in(c) {
			names[c.Name] = true
		}
	}
	var out []runResult
	for _, r := range runs {
		if names[r.Case] {
			out = append(out, r)
		}
	}
	return out
}

// hotRowMarkdown is the hot-row section of summary.md: every run of the
// hot-row cases.
func hotRowMarkdown(cases []benchCase, runs []runResult) string {
	var b strings.Builder
	for _, r := range caseRuns(cases, runs, func(c benchCase) bool { return c.HotRows }) {
		if b.Len() == 0 {
			b.WriteString("\n## Hot rows\n\n")
			b.WriteString("64 threads, each transaction `BEGIN; UPDATE hotrow SET n = n + 1 WHERE id = <one of 4>; COMMIT` ")
			b.WriteString("(e2e/bench/lua/hotrow.lua, prepared statements); `hotrow protected` runs the gateway with ")
			b.WriteString("`hot_row: {max_concurrency: 1, max_queue: 64}`, `hotrow` without. Lock waits: the rise of the primary's ")
			b.WriteString("`Innodb_row_lock_waits` over the run; Threads_running sampled every 250 ms.\n\n")
			b.WriteString("| case | target | round | transactions/s | p99 ms | ignored errors | row lock waits | Threads_running median | Threads_running max | ok |\n")
			b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		}
		waits := "-"
		if r.RowLockWaits != nil {
			waits = fmt.Sprint(*r.RowLockWaits)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %s | %d | %s | %s | %s | %v |\n", r.Case, r.Target, r.Round, r.TPS,
			num(r.P99Ms, 2), r.IgnoredErrors, waits, num(r.ThreadsRunningMedian, 0), num(r.ThreadsRunningMax, 0), r.OK)
	}
	return b.String()
}
