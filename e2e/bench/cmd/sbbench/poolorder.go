package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/directgate/directgate/config"
)

// The pool_order_burst case (issue 31) measures the trade-off of
// clusters[].pool.order. round_robin hands out the connection idle
// longest: every open connection stays in use, none ages out under steady
// load, and a burst finds them open; MariaDB runs every one of its threads
// in turn. lifo hands out the connection released last: a pool larger than
// its load keeps using a few connections (fewer MariaDB threads, less CPU
// per query), the rest close after idle_timeout, and a burst dials them
// again.
//
// For each order, a fresh gateway (pool size 64, min_idle 4, max_dials 4,
// idle_timeout at its default 5m, otherwise the main gateway) runs:
//
//  1. the fill: 64 client sessions each open a transaction and read a row,
//     all at once, so the pool opens all 64 connections (the state a pool
//     is in after any earlier peak of 64 clients), then commit;
//  2. the quiet phase: sysbench oltp_point_select, 8 threads,
//     --db-ps-mode=disable, for -burst-quiet (6m), rate-limited to
//     -burst-rate queries per second (defaultBurstRate; 0 unlimited), so
//     that both orders and direct serve the same load and mariadbd's CPU
//     per query compares them without the rate effect. Not the
//     equal-rate case's 10000: on the shared 2-core machines this runs on
//     the gateway's path then used both cores, sysbench's queue grew
//     (p95 in the hundreds of ms) and the phase was not quiet; an
//     unlimited one would be a saturation test, not a quiet phase;
//  3. the burst, at once: sysbench oltp_point_select, 64 threads,
//     --db-ps-mode=disable, burstSeconds, --report-interval=1
//     --percentile=99: its first interval line is the first second's
//     99th percentile.
//
// It reports per order the pool's dials during the burst (the rise of the
// gateway's directgate_pool_dials_total for the primary, read from its
// /metrics before sysbench starts and after it ends, and at sysbench's
// "Threads started!": the 64 logins each check the database sbtest on a
// pooled connection, so dials happen before sysbench's clock starts too),
// the first second's p99, the burst's QPS and p99, and mariadbd's CPU per
// query in the quiet phase (/proc/PID/stat over sysbench's window); with
// them the pool's open connections after the fill and before the burst,
// the connections closed during the quiet phase (directgate_pool_destroyed_total),
// the acquires that waited for a connection during the burst and their
// total wait (directgate_pool_waits_total, _wait_seconds_total: the first
// second's p99 spans some ten thousand statements, so a few dozen waiting
// for dials may not move it), the time sysbench took to connect its 64
// clients, and MariaDB's logins
// during the burst (the rise of its Connections status: the gateway's
// dials plus its health probes' own connections, one per probe, every
// 2 s).
//
// Direct runs first, as a reference: no pool, no fill, and a quiet phase
// of at most directQuietMax (nothing ages out there); its burst's 64
// sysbench connections are MariaDB logins made before sysbench's clock
// starts.
//
// With a quiet phase shorter than 6m the gateways' idle_timeout shrinks
// with it (burstIdleTimeout), so that the connections lifo leaves unused
// close before the burst as they do with the defaults.

const (
	poolOrderCaseName = "pool_order_burst"
	// quietThreads and burstThreads are the client threads of the two
	// phases; burstSeconds the burst's length.
	quietThreads = 8
	burstThreads = 64
	burstSeconds = 15
	// defaultBurstRate is the quiet phase's queries per second.
	defaultBurstRate = 5000
	// defaultBurstQuiet is the quiet phase of a full run (the 6
	// minutes: beyond the default idle_timeout of 5m), quickBurstQuiet a
	// quick run's; minBurstQuiet the shortest -burst-quiet takes.
	defaultBurstQuiet = 6 * time.Minute
	quickBurstQuiet   = time.Minute
	minBurstQuiet     = 10 * time.Second
	// directQuietMax bounds direct's quiet phase: with no pool nothing
	// ages out, and its CPU per query is steady well before.
	directQuietMax = time.Minute
	// defaultIdleTimeout is the gateway's default pool.idle_timeout.
	defaultIdleTimeout = 5 * time.Minute
	// fillLimit bounds the fill (64 logins and dials).
	fillLimit = time.Minute
)

// poolOrders are the gateway targets of the case, in the order they run.
var poolOrders = []string{config.PoolOrderRoundRobin, config.PoolOrderLIFO}

// poolOrderTarget is the target name of the gateway with pool order o.
func poolOrderTarget(o string) string { return targetGateway + "-" + o }

// targetOrder is the pool order of a target of the case; "" for direct.
func targetOrder(tgt string) string {
	o, _ := strings.CutPrefix(tgt, targetGateway+"-")
	if o == tgt {
		return ""
	}
	return o
}

// poolOrderCase is the case: direct, then a gateway per order.
func poolOrderCase(s settings) benchCase {
	c := benchCase{
		Name: poolOrderCaseName, Workload: "oltp_point_select", PSMode: "disable", Threads: burstThreads,
		Targets: []string{targetDirect}, Gateway: "burst", PoolSize: mainPoolSize, Rate: s.BurstRate, PoolOrderBurst: true,
	}
	for _, o := range poolOrders {
		c.Targets = append(c.Targets, poolOrderTarget(o))
	}
	return c
}

// burstIdleTimeout is the gateways' idle_timeout for a quiet phase of
// quiet, and whether it is the default (left out of the config). With the
// default 5m and 6m of quiet, the connections lifo leaves unused close in
// the quiet phase's last minute, which holds two of the pool's maintenance
// passes (every min(idle_timeout/2, 30s)). A shorter quiet phase keeps
// that: idle_timeout is quiet − 1m, and quiet/2 below 2m (a plain 5/6 of
// quiet would leave less than one pass after it: with 1m of quiet, 50s
// and passes every 25s, the connections would close after the burst
// began).
func burstIdleTimeout(quiet time.Duration) (time.Duration, bool) {
	switch {
	case quiet >= defaultIdleTimeout+time.Minute:
		return defaultIdleTimeout, true
	case quiet >= 2*time.Minute:
		return quiet - time.Minute, false
	}
	return max(quiet/2, time.Second).Truncate(time.Second), false
}

// quietFor is the quiet phase of target tgt.
func (b *bench) quietFor(tgt string) time.Duration {
	if targetOrder(tgt) == "" {
		return min(b.s.BurstQuiet, directQuietMax)
	}
	return b.s.BurstQuiet
}

// poolOrderWall estimates the wall time of the case's run of tgt.
func (b *bench) poolOrderWall(tgt string) time.Duration {
	over := 10 * time.Second // sysbench starts and stops twice
	if targetOrder(tgt) != "" {
		over += 15 * time.Second // the gateway starts, fills and drains
	}
	return b.quietFor(tgt) + burstSeconds*time.Second + over
}

// poolOrderRun is what the case measured of one target, besides the
// quiet phase's sysbench numbers in the runResult that holds it. Pointers
// are nil when not measured (direct has no pool).
type poolOrderRun struct {
	Order string `json:"order,omitempty"` // round_robin, lifo; "" for direct
	// IdleTimeoutS is the gateway's pool.idle_timeout; IdleTimeoutDefault
	// whether it was left at its default (not in the config).
	IdleTimeoutS       float64 `json:"idle_timeout_s,omitempty"`
	IdleTimeoutDefault bool    `json:"idle_timeout_default,omitempty"`
	QuietS             float64 `json:"quiet_s"`
	QuietThreads       int     `json:"quiet_threads"`
	QuietRate          int     `json:"quiet_rate,omitempty"`
	// FillS is how long the fill took; FillInUse the pool's connections
	// in use with the fill's 64 transactions open; FillError why the fill
	// failed.
	FillS     float64 `json:"fill_s,omitempty"`
	FillInUse *int64  `json:"fill_in_use,omitempty"`
	FillError string  `json:"fill_error,omitempty"`
	// OpenBeforeQuiet and OpenBeforeBurst are the pool's open connections
	// (idle and in use) at the start and the end of the quiet phase;
	// QuietDials and QuietClosed the connections it opened and closed
	// meanwhile.
	OpenBeforeQuiet *int64     `json:"open_before_quiet,omitempty"`
	OpenBeforeBurst *int64     `json:"open_before_burst,omitempty"`
	QuietDials      *int64     `json:"quiet_dials,omitempty"`
	QuietClosed     *int64     `json:"quiet_closed,omitempty"`
	Burst           burstPhase `json:"burst"`
	MetricsNote     string     `json:"metrics_note,omitempty"`
}

// burstPhase is the burst's sysbench run and what the gateway and MariaDB
// did during it.
type burstPhase struct {
	OK      bool    `json:"ok"`
	Failure string  `json:"failure,omitempty"`
	Output  string  `json:"output_file"`
	Threads int     `json:"threads"`
	Seconds int     `json:"seconds"`
	Queries int64   `json:"queries"`
	QPS     float64 `json:"qps"`
	P99Ms   float64 `json:"p99_ms"`
	// ConnectS is the time from sysbench's start to its "Threads
	// started!": every client connected (through the gateway: each login
	// checked the database on a pooled connection).
	ConnectS *float64 `json:"connect_s,omitempty"`
	// FirstSecond is sysbench's first interval line: the first second of
	// the burst, from "Threads started!" on.
	FirstSecond *sbInterval  `json:"first_second,omitempty"`
	Intervals   []sbInterval `json:"intervals,omitempty"`
	// Dials is the rise of the pool's dials from before sysbench started
	// to after it ended, DialsAtStart the part before "Threads started!"
	// (the logins); DialErrors and AcquireTimeouts rose with them.
	Dials           *int64 `json:"dials,omitempty"`
	DialsAtStart    *int64 `json:"dials_before_threads_started,omitempty"`
	DialErrors      *int64 `json:"dial_errors,omitempty"`
	AcquireTimeouts *int64 `json:"acquire_timeouts,omitempty"`
	OpenAfter       *int64 `json:"open_after,omitempty"`
	// Waits are the acquires that found no idle connection and waited
	// (for a dial or a release), WaitS their total wait.
	Waits *int64   `json:"pool_waits,omitempty"`
	WaitS *float64 `json:"pool_wait_s,omitempty"`
	// BackendLogins is the rise of MariaDB's Connections over the burst.
	BackendLogins  *int64   `json:"mariadb_logins,omitempty"`
	IgnoredErrors  int64    `json:"ignored_errors"`
	Reconnects     int64    `json:"reconnects"`
	MariadbPer1kQ  *float64 `json:"mariadbd_cpu_s_per_1k_queries,omitempty"`
	ProxyCPUPer1kQ *float64 `json:"proxy_cpu_s_per_1k_queries,omitempty"`
}

// runPoolOrder runs the case for target tgt: direct, or a fresh gateway
// with the target's pool order, stopped at the end. The runResult holds
// the quiet phase as runOne's would, and the rest in PoolOrder.
func (b *bench) runPoolOrder(ctx context.Context, c benchCase, tgt string, runNo int) (runResult, error) {
	base := fmt.Sprintf("%03d-%s-%s", runNo, slug(c.Name), slug(tgt))
	r := runResult{Case: c.Name, Target: tgt, Round: 1, Started: time.Now(), Output: filepath.Join("sysbench", base+"-quiet.txt")}
	po := &poolOrderRun{Order: targetOrder(tgt), QuietThreads: quietThreads, QuietRate: c.Rate}
	r.PoolOrder = po
	quiet := b.quietFor(tgt)
	po.QuietS = quiet.Seconds()
	dst := b.direct()
	var g *proxyProc
	proxyPID := 0
	if po.Order != "" {
		idle, dflt := burstIdleTimeout(quiet)
		po.IdleTimeoutS, po.IdleTimeoutDefault = idle.Seconds(), dflt
		g = &proxyProc{
			kind: targetGateway, name: "gateway-burst-" + po.Order, bin: b.s.Gateway, dir: b.dir,
			backends: []string{b.db.Addr(), b.replica.Addr()}, user: "app", pwd: "app",
			poolSize: c.PoolSize, profile: b.s.CPUProfile, order: po.Order,
		}
		if !dflt {
			g.idleTimeout = idle
		}
		if old := b.proxies[g.name]; old != nil && old.running() {
			if err := old.stop(); err != nil {
				b.warn(err)
			}
		}
		b.proxies[g.name] = g
		if _, _, err := g.ensure(ctx); err != nil {
			if ctx.Err() != nil {
				r.Interrupted = true
				return r, nil
			}
			return r, err
		}
		defer func() {
			if err := g.stop(); err != nil {
				b.warn(err)
			}
		}()
		logf("    %s (pool %d, order %s, idle_timeout %s) on %s, pid %d", g.name, g.poolSize, po.Order, idle, g.addr, g.pid())
		dst = target{addr: g.addr, user: g.user, password: g.pwd}
		proxyPID = g.pid()

		t0 := time.Now()
		inUse, err := b.fillPool(ctx, g, dst, c.PoolSize)
		po.FillS = time.Since(t0).Seconds()
		if err != nil {
			if ctx.Err() != nil {
				r.Interrupted = true
				return r, nil
			}
			po.FillError = err.Error()
			r.Failure = "the fill failed: " + err.Error()
			r.WallS = time.Since(r.Started).Seconds()
			r.Output = ""
			return r, nil
		}
		po.FillInUse = &inUse
		logf("    fill: %d connections in use at once (%.1fs)", inUse, po.FillS)
	}
	snap := func() *poolSnap {
		if g == nil {
			return nil
		}
		s, err := g.poolSnap(ctx, b.db.Addr())
		if err != nil {
			po.MetricsNote = addNote(po.MetricsNote, "gateway /metrics: "+err.Error())
			return nil
		}
		return &s
	}

	// The quiet phase.
	s0 := snap()
	var extra []string
	if c.Rate > 0 {
		extra = append(extra, "--rate="+strconv.Itoa(c.Rate))
	}
	sample := func() cpuSample { return takeSample(b.db.PID(), 0, proxyPID) }
	args := sbArgs(c.Workload, "run", dst, b.s.Tables, b.s.TableSize, quietThreads, int(quiet.Seconds()), c.PSMode, extra...)
	hard := quiet + 90*time.Second
	sr, err := runSysbench(ctx, args, filepath.Join(b.dir, r.Output), hard, sample)
	if err != nil {
		return r, err
	}
	if sr.interrupted {
		r.Interrupted = true
		return r, nil
	}
	b.record(&r, sr, hard, g, proxyPID, 0)
	s1 := snap()
	if s0 != nil && s1 != nil {
		po.OpenBeforeQuiet, po.OpenBeforeBurst = ptr(s0.Open()), ptr(s1.Open())
		po.QuietDials, po.QuietClosed = ptr(s1.Dials-s0.Dials), ptr(s1.Destroyed-s0.Destroyed)
	}
	logf("    quiet phase: %s%s", r.brief(), po.quietBrief())

	// The burst, at once.
	bp := &po.Burst
	bp.Output, bp.Threads, bp.Seconds = filepath.Join("sysbench", base+"-burst.txt"), burstThreads, burstSeconds
	mon, err := openDB(b.direct())
	if err != nil {
		return r, err
	}
	defer mon.Close()
	mon.SetMaxOpenConns(1)
	mon.SetMaxIdleConns(1)
	logins0, lerr := globalStatus(ctx, mon, "Connections")
	// The pool at each CPU sample, by the sample's time: the one taken
	// at "Threads started!" splits the dials.
	snaps := map[time.Time]*poolSnap{}
	bsample := func() cpuSample {
		s := takeSample(b.db.PID(), 0, proxyPID)
		snaps[s.at] = snap()
		return s
	}
	before := snap()
	args = sbArgs(c.Workload, "run", dst, b.s.Tables, b.s.TableSize, burstThreads, burstSeconds, c.PSMode, "--report-interval=1", "--percentile=99")
	hard = burstSeconds*time.Second + 90*time.Second
	sr, err = runSysbench(ctx, args, filepath.Join(b.dir, bp.Output), hard, bsample)
	if err != nil {
		return r, err
	}
	if sr.interrupted {
		r.Interrupted = true
		return r, nil
	}
	after := snap()
	if lerr == nil {
		if n, err := globalStatus(ctx, mon, "Connections"); err == nil {
			bp.BackendLogins = ptr(n - logins0)
		}
	}
	var br runResult
	o := b.record(&br, sr, hard, g, proxyPID, 0)
	bp.OK, bp.Failure, bp.Queries, bp.QPS, bp.P99Ms = br.OK, br.Failure, br.Queries, br.QPS, o.P99Ms
	bp.IgnoredErrors, bp.Reconnects = br.IgnoredErrors, br.Reconnects
	bp.MariadbPer1kQ, bp.ProxyCPUPer1kQ = br.MariadbCPUPer1kQ, br.ProxyCPUPer1kQ
	if !sr.started.IsZero() {
		bp.ConnectS = ptr(sr.started.Sub(sr.launched).Seconds())
	}
	bp.Intervals = parseIntervals(sr.out)
	if len(bp.Intervals) > 0 && bp.Intervals[0].Second == 1 {
		bp.FirstSecond = &bp.Intervals[0]
	}
	if before != nil && after != nil {
		bp.Dials, bp.OpenAfter = ptr(after.Dials-before.Dials), ptr(after.Open())
		bp.DialErrors, bp.AcquireTimeouts = ptr(after.DialErrors-before.DialErrors), ptr(after.AcquireTimeouts-before.AcquireTimeouts)
		bp.Waits, bp.WaitS = ptr(after.Waits-before.Waits), ptr(after.WaitS-before.WaitS)
		if at := snaps[sr.begin.at]; at != nil && !sr.started.IsZero() {
			bp.DialsAtStart = ptr(at.Dials - before.Dials)
		}
	}
	var fail []string
	if r.Failure != "" {
		fail = append(fail, "quiet phase: "+r.Failure)
	}
	if bp.Failure != "" {
		fail = append(fail, "burst: "+bp.Failure)
	}
	r.Failure = strings.Join(fail, "\n")
	r.OK = r.Failure == ""
	r.WallS = time.Since(r.Started).Seconds()
	logf("    burst: %s", bp.brief())
	if g != nil && g.running() {
		if hwm, err := statusKB(g.pid(), "VmHWM"); err == nil {
			r.GatewayPeakRSS = &hwm
		}
	}
	return r, nil
}

func addNote(notes, n string) string {
	if notes == "" {
		return n
	}
	if strings.Contains(notes, n) {
		return notes
	}
	return notes + "; " + n
}

// quietBrief is the pool part of the quiet phase's progress line.
func (po *poolOrderRun) quietBrief() string {
	if po.OpenBeforeBurst == nil {
		return ""
	}
	return fmt.Sprintf("; pool open %d → %d (%d dialed, %d closed)", *po.OpenBeforeQuiet, *po.OpenBeforeBurst, *po.QuietDials, *po.QuietClosed)
}

// brief is the burst's progress line.
func (bp *burstPhase) brief() string {
	if !bp.OK {
		return "FAILED: " + strings.ReplaceAll(firstLines(bp.Failure, 3), "\n", " | ")
	}
	s := fmt.Sprintf("%.0f qps, p99 %.2f ms", bp.QPS, bp.P99Ms)
	if bp.FirstSecond != nil {
		s += fmt.Sprintf(", first second %.0f qps p99 %.2f ms", bp.FirstSecond.QPS, bp.FirstSecond.LatMs)
	}
	if bp.ConnectS != nil {
		s += fmt.Sprintf(", connect %.2fs", *bp.ConnectS)
	}
	if bp.Dials != nil {
		s += fmt.Sprintf(", %d dials", *bp.Dials)
		if bp.DialsAtStart != nil {
			s += fmt.Sprintf(" (%d before Threads started!)", *bp.DialsAtStart)
		}
	}
	if bp.Waits != nil {
		s += fmt.Sprintf(", %d pool waits (%.3fs)", *bp.Waits, *bp.WaitS)
	}
	if bp.BackendLogins != nil {
		s += fmt.Sprintf(", %d MariaDB logins", *bp.BackendLogins)
	}
	return s
}

// fillPool has n client sessions through the gateway g (as t) each open a
// transaction and read a row, all at the same time, so that the pool
// holds n connections in use at once, then commit. It returns the pool's
// connections in use while every transaction was open.
func (b *bench) fillPool(ctx context.Context, g *proxyProc, t target, n int) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, fillLimit)
	defer cancel()
	db, err := openDB(t)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(n)
	ready := make(chan error, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Conn(ctx)
			if err != nil {
				ready <- err
				return
			}
			defer conn.Close()
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				ready <- err
				return
			}
			var id int64
			if err := tx.QueryRowContext(ctx, "SELECT id FROM sbtest1 LIMIT 1").Scan(&id); err != nil {
				_ = tx.Rollback()
				ready <- err
				return
			}
			ready <- nil
			select {
			case <-release:
			case <-ctx.Done():
			}
			_ = tx.Commit()
		}()
	}
	var errs []error
	for range n {
		if err := <-ready; err != nil && len(errs) < 3 {
			errs = append(errs, err)
		}
	}
	s, serr := g.poolSnap(ctx, b.db.Addr())
	close(release)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	if s.InUse < int64(n) {
		return s.InUse, fmt.Errorf("%d of %d connections in use with %d transactions open", s.InUse, n, n)
	}
	return s.InUse, nil
}

// poolSnap is the gateway's pools of one backend (every pool but the
// owner's), summed, as its /metrics gives them.
type poolSnap struct {
	Idle, InUse, Dialing                          int64
	Dials, DialErrors, Destroyed, AcquireTimeouts int64
	Waits                                         int64
	WaitS                                         float64
}

// Open is the connections open: idle and in use.
func (s poolSnap) Open() int64 { return s.Idle + s.InUse }

// poolSnap reads the gateway's /metrics for the pools of backend.
func (g *proxyProc) poolSnap(ctx context.Context, backend string) (poolSnap, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.httpAddr+"/metrics", nil)
	if err != nil {
		return poolSnap{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return poolSnap{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return poolSnap{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return poolSnap{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return poolSnapOf(parsePromText(string(body)), backend)
}

// poolSnapOf sums the pool metrics of backend over its pools, the owner's
// excepted.
func poolSnapOf(samples []promSample, backend string) (poolSnap, error) {
	var s poolSnap
	found := false
	for _, m := range samples {
		if m.labels["backend"] != backend || m.labels["pool"] == "owner" {
			continue
		}
		v := int64(m.value)
		switch m.name {
		case "directgate_pool_waits_total":
			s.Waits += v
		case "directgate_pool_wait_seconds_total":
			s.WaitS += m.value
		case "directgate_pool_dials_total":
			s.Dials += v
			found = true
		case "directgate_pool_dial_errors_total":
			s.DialErrors += v
		case "directgate_pool_destroyed_total":
			s.Destroyed += v
		case "directgate_pool_acquire_timeouts_total":
			s.AcquireTimeouts += v
		case "directgate_pool_connections":
			switch m.labels["state"] {
			case "idle":
				s.Idle += v
			case "in_use":
				s.InUse += v
			case "dialing":
				s.Dialing += v
			}
		}
	}
	if !found {
		return s, fmt.Errorf("no directgate_pool_dials_total for backend %s in /metrics", backend)
	}
	return s, nil
}

// promSample is one sample of Prometheus's text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// parsePromText reads the samples of Prometheus's text exposition format:
// `name{label="value",...} value [timestamp]`, comments and blank lines
// skipped, label values unescaped (\\, \" and \n). Lines it cannot read
// are left out.
func parsePromText(text string) []promSample {
	var out []promSample
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		m := promSample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ \t")
		if i <= 0 {
			continue
		}
		m.name, line = line[:i], line[i:]
		if line[0] == '{' {
			rest, ok := parsePromLabels(line[1:], m.labels)
			if !ok {
				continue
			}
			line = rest
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m.value = v
		out = append(out, m)
	}
	return out
}

// parsePromLabels reads `k="v",k2="v2"}` into labels and returns what
// follows the '}'.
func parsePromLabels(s string, labels map[string]string) (string, bool) {
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return "", false
		}
		if s[0] == '}' {
			return s[1:], true
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return "", false
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var v strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			switch ch := s[i]; {
			case ch == '\\' && i+1 < len(s):
				i++
				if s[i] == 'n' {
					v.WriteByte('\n')
				} else {
					v.WriteByte(s[i])
				}
			case ch == '"':
				s, closed = s[i+1:], true
			default:
				v.WriteByte(ch)
			}
			if closed {
				break
			}
		}
		if !closed {
			return "", false
		}
		labels[key] = v.String()
	}
}

// poolOrderRows are the rows of the case's table: a header, then one per
// run.
func poolOrderRows(runs []runResult) [][]string {
	rows := [][]string{{
		"target", "pool order", "idle_timeout", "quiet phase", "quiet QPS", "quiet p95 ms",
		"mariadbd µs/q quiet", "gateway µs/q quiet", "pool in use at fill", "open before quiet", "closed in quiet", "open before burst",
		"burst connect s", "dials in burst", "of them before start", "pool waits in burst", "pool wait s", "MariaDB logins in burst",
		"burst 1st-second p99 ms", "burst 1st-second QPS", "burst QPS", "burst p99 ms", "ok",
	}}
	i64 := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatInt(*v, 10)
	}
	for _, r := range runs {
		po := r.PoolOrder
		if po == nil {
			continue
		}
		bp := &po.Burst
		order, idle := "-", "-"
		if po.Order != "" {
			order = po.Order
			idle = (time.Duration(po.IdleTimeoutS * float64(time.Second))).String()
			if po.IdleTimeoutDefault {
				idle += " (default)"
			}
		}
		quiet := fmt.Sprintf("%s × %d threads", time.Duration(po.QuietS*float64(time.Second)), po.QuietThreads)
		if po.QuietRate > 0 {
			quiet += fmt.Sprintf(", %d q/s", po.QuietRate)
		}
		var p99s, qps1 *float64
		if bp.FirstSecond != nil {
			p99s, qps1 = &bp.FirstSecond.LatMs, &bp.FirstSecond.QPS
		}
		var bqps, bp99 *float64
		if bp.Queries > 0 {
			bqps, bp99 = &bp.QPS, &bp.P99Ms
		}
		var qqps, qp95 *float64
		if r.Queries > 0 {
			qqps, qp95 = &r.QPS, &r.P95Ms
		}
		ok := "yes"
		if !r.OK {
			ok = "**no**"
		}
		rows = append(rows, []string{
			r.Target, order, idle, quiet, num(qqps, 0), num(qp95, 2),
			num(microsPerQuery(r.MariadbCPUPer1kQ), 1), num(microsPerQuery(r.ProxyCPUPer1kQ), 1),
			i64(po.FillInUse), i64(po.OpenBeforeQuiet), i64(po.QuietClosed), i64(po.OpenBeforeBurst),
			num(bp.ConnectS, 2), i64(bp.Dials), i64(bp.DialsAtStart), i64(bp.Waits), num(bp.WaitS, 3), i64(bp.BackendLogins),
			num(p99s, 2), num(qps1, 0), num(bqps, 0), num(bp99, 2), ok,
		})
	}
	return rows
}

const poolOrderLegend = `pool_order_burst: per pool order a fresh gateway (pool size 64, min_idle 4, max_dials 4) has 64 sessions open
a transaction each at once (the pool opens 64 connections), then runs a quiet phase of 8 sysbench threads
(oltp_point_select, ps=disable, rate-limited to -burst-rate queries/s; its p95 includes sysbench's queue: high
means the rate was not sustained), then at once a burst of 64 threads for 15 s (--report-interval=1
--percentile=99). mariadbd µs/q quiet: mariadbd's CPU per query over the quiet phase.
dials in burst: the rise of the gateway's directgate_pool_dials_total (primary) from before the burst's sysbench
started to after it ended; of them before start: before its "Threads started!" (each of the 64 logins checks the
database on a pooled connection). pool waits: acquires that found no idle connection, and their total wait
(directgate_pool_waits_total, _wait_seconds_total). MariaDB logins: the rise of its Connections (the dials plus the health probes'
connections, one per probe every 2 s; direct: sysbench's own). burst connect s: sysbench's start to "Threads
started!". 1st-second p99: the first interval line's 99th percentile. direct (no pool) runs a quiet phase of at most 1m.`

// poolOrderMarkdown is the case's section of summary.md.
func poolOrderMarkdown(cases []benchCase, runs []runResult) string {
	list := caseRuns(cases, runs, func(c benchCase) bool { return c.PoolOrderBurst })
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Pool order: a burst after a quiet phase\n\n")
	b.WriteString("The trade-off of `clusters[].pool.order` (issue 31). For each order a fresh gateway (pool size 64, `min_idle` 4, ")
	b.WriteString("`max_dials` 4, `idle_timeout` as given) first has 64 client sessions open a transaction each at once, so its pool opens ")
	b.WriteString("64 connections; then a quiet phase of 8 sysbench threads (`oltp_point_select`, `--db-ps-mode=disable`, rate-limited ")
	b.WriteString("to `-burst-rate` queries/s so every target serves the same load; its p95 includes sysbench's queue, so a high one means the ")
	b.WriteString("rate was not sustained); then at once a burst of 64 threads for 15 s (`--report-interval=1 --percentile=99`). ")
	b.WriteString("round_robin keeps every open connection in use; lifo keeps using a few and the rest close after `idle_timeout`, so ")
	b.WriteString("the burst dials them again. **mariadbd µs/q quiet** is mariadbd's CPU per query over the quiet phase (utime+stime from ")
	b.WriteString("/proc/PID/stat over sysbench's window); **gateway µs/q** the gateway's. **dials in burst** is the rise of the gateway's ")
	b.WriteString("`directgate_pool_dials_total` (the primary's pools) from before the burst's sysbench started to after it ended; ")
	b.WriteString("**of them before start** happened before sysbench's \"Threads started!\": each of the 64 logins checks the database ")
	b.WriteString("`sbtest` on a pooled connection, so a login may dial; **burst connect s** is how long sysbench took to get there. ")
	b.WriteString("**pool waits** are the acquires that found no idle connection and waited for a dial or a release, with their total wait ")
	b.WriteString("(`directgate_pool_waits_total`, `directgate_pool_wait_seconds_total`): the first second's p99 spans some ten thousand ")
	b.WriteString("statements, so a few dozen waiting for dials may not move it. ")
	b.WriteString("**MariaDB logins** is the rise of MariaDB's `Connections` over the burst: the dials plus the gateway's health probes ")
	b.WriteString("(a connection of their own every 2 s); for direct, sysbench's own 64. **1st-second p99** is sysbench's first ")
	b.WriteString("interval line (the second after \"Threads started!\"). Direct has no pool: no fill, and a quiet phase of at most 1m. ")
	b.WriteString("The Runs table below lists these runs' quiet phase.\n\n")
	for _, r := range list {
		if po := r.PoolOrder; po != nil && po.Order != "" && !po.IdleTimeoutDefault {
			fmt.Fprintf(&b, "**The quiet phase (%s) is shorter than 6m, so `idle_timeout` was shortened from its 5m default to %s** ",
				time.Duration(po.QuietS*float64(time.Second)), time.Duration(po.IdleTimeoutS*float64(time.Second)))
			b.WriteString("(quiet − 1m, or quiet/2 below 2m): the connections lifo leaves unused close before the burst, as they do with ")
			b.WriteString("the defaults and a 6m quiet phase.\n\n")
			break
		}
	}
	rows := poolOrderRows(list)
	b.WriteString("| " + strings.Join(rows[0], " | ") + " |\n|")
	for i := range rows[0] {
		if i < 4 || i == len(rows[0])-1 {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteString("\n")
	for _, row := range rows[1:] {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	for _, r := range list {
		if r.Failure != "" {
			fmt.Fprintf(&b, "\n%s failed:\n\n```\n%s\n```\n", r.Target, r.Failure)
		}
		if r.PoolOrder != nil && r.PoolOrder.MetricsNote != "" {
			fmt.Fprintf(&b, "\n%s: %s\n", r.Target, r.PoolOrder.MetricsNote)
		}
	}
	b.WriteString("\nBurst intervals (sysbench's per-second lines: QPS / p99 ms):\n\n")
	for _, r := range list {
		if r.PoolOrder == nil || len(r.PoolOrder.Burst.Intervals) == 0 {
			continue
		}
		var cells []string
		for _, iv := range r.PoolOrder.Burst.Intervals {
			cells = append(cells, fmt.Sprintf("%.0fs %.0f/%.2f", iv.Second, iv.QPS, iv.LatMs))
		}
		fmt.Fprintf(&b, "- %s: %s\n", r.Target, strings.Join(cells, ", "))
	}
	return b.String()
}

// printPoolOrder writes the case's table on w, transposed (one column per
// target: the table has more columns than a terminal), with its legend.
func printPoolOrder(w io.Writer, cases []benchCase, runs []runResult) {
	list := caseRuns(cases, runs, func(c benchCase) bool { return c.PoolOrderBurst })
	if len(list) == 0 {
		return
	}
	rows := poolOrderRows(list)
	width := make([]int, len(rows))
	for i, row := range rows {
		for _, cell := range row {
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	fmt.Fprintln(w)
	for j := range rows[0] {
		var line strings.Builder
		for i, row := range rows {
			cell := row[j]
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			if i == 0 {
				line.WriteString(cell + pad)
			} else {
				line.WriteString("  " + pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, poolOrderLegend)
	for _, r := range list {
		if r.Failure != "" {
			fmt.Fprintf(w, "\n%s failed:\n%s\n", r.Target, r.Failure)
		}
	}
}
