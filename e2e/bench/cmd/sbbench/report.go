package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// runResult is one sysbench run, as stored in results.json. Pointers are
// null when the value could not be measured.
type runResult struct {
	Case    string    `json:"case"`
	Target  string    `json:"target"` // "direct", "haproxy", "gorelay", "gateway", "gateway-loop" or a peer
	Round   int       `json:"round"`
	Started time.Time `json:"started"`
	WallS   float64   `json:"wall_s"`
	OK      bool      `json:"ok"`
	// Failure is why the run failed: sysbench's exit status and its
	// distinct FATAL/error lines.
	Failure string `json:"failure,omitempty"`

	Queries int64   `json:"queries"`
	QPS     float64 `json:"qps"`
	TPS     float64 `json:"tps"`
	P95Ms   float64 `json:"p95_ms"`
	// P99Ms (hot-row cases, which report the 99th percentile instead of
	// the 95th).
	P99Ms *float64 `json:"p99_ms,omitempty"`
	// RowLockWaits is the rise of the primary's Innodb_row_lock_waits over
	// the run; ThreadsRunning* its Threads_running sampled every 250 ms
	// (hot-row cases).
	RowLockWaits         *int64   `json:"innodb_row_lock_waits,omitempty"`
	ThreadsRunningMedian *float64 `json:"threads_running_median,omitempty"`
	ThreadsRunningMax    *float64 `json:"threads_running_max,omitempty"`
	// BackendSelects is the rise of the primary's Com_select over the run
	// (consolidation cases): the selects MariaDB ran, against the
	// client's Queries.
	BackendSelects *int64  `json:"backend_com_select,omitempty"`
	AvgMs          float64 `json:"avg_ms"`
	IgnoredErrors  int64   `json:"ignored_errors"`
	Reconnects     int64   `json:"reconnects"`
	TotalTimeS     float64 `json:"sysbench_total_time_s"`

	// CPU is counted between sysbench's "Threads started!" and its report
	// when CPUWindowExact, else from its start to its exit. Mariadbd* is
	// the primary; Replica* the replica's mariadbd, measured in the
	// replica-read cases only (every target); Proxy* the proxy process
	// (haproxy, gorelay, the gateway, a peer given with its PID); Machine*
	// the busy time of all CPUs (/proc/stat: total - idle - iowait).
	CPUWindowS       float64  `json:"cpu_window_s"`
	CPUWindowExact   bool     `json:"cpu_window_exact"`
	MariadbCPUS      *float64 `json:"mariadbd_cpu_s"`
	MariadbCPUPer1kQ *float64 `json:"mariadbd_cpu_s_per_1k_queries"`
	ReplicaCPUS      *float64 `json:"replica_mariadbd_cpu_s,omitempty"`
	ReplicaCPUPer1kQ *float64 `json:"replica_mariadbd_cpu_s_per_1k_queries,omitempty"`
	ProxyCPUS        *float64 `json:"proxy_cpu_s,omitempty"`
	ProxyCPUPer1kQ   *float64 `json:"proxy_cpu_s_per_1k_queries,omitempty"`
	// ProxySyscallsPerQ and ProxyCtxSwPerQ are the proxy's system calls
	// (perf's raw_syscalls:sys_enter; without perf, /proc/PID/io
	// syscr+syscw: read/write calls only) and context switches (every
	// thread's voluntary+nonvoluntary) per query over the same window.
	ProxySyscallsPerQ *float64 `json:"proxy_syscalls_per_query,omitempty"`
	ProxyCtxSwPerQ    *float64 `json:"proxy_ctx_switches_per_query,omitempty"`
	MachineCPUS       *float64 `json:"machine_cpu_s"`
	MachineCPUPer1kQ  *float64 `json:"machine_cpu_s_per_1k_queries"`
	CPUNote           string   `json:"cpu_note,omitempty"`
	// ReplicaWaitS is how long the run waited for the gateway's discovery
	// to put the replica in its read set; ReplicaNote says when it was
	// not there any more after the run.
	ReplicaWaitS   float64 `json:"replica_wait_s,omitempty"`
	ReplicaNote    string  `json:"replica_note,omitempty"`
	GatewayPeakRSS *int64  `json:"gateway_peak_rss_bytes,omitempty"`
	RSSNote        string  `json:"rss_note,omitempty"`
	ProxyNote      string  `json:"proxy_note,omitempty"`
	SysbenchCPUS   float64 `json:"sysbench_cpu_s"`
	Output         string  `json:"output_file"`
	// PoolOrder is the pool_order_burst case's run of a target: the
	// fields above are its quiet phase, this the fill, the pool and the
	// burst.
	PoolOrder *poolOrderRun `json:"pool_order,omitempty"`

	Interrupted bool `json:"-"`
}

// brief is the one-line progress report of a run.
func (r runResult) brief() string {
	if !r.OK {
		return "FAILED: " + strings.ReplaceAll(firstLines(r.Failure, 3), "\n", " | ")
	}
	s := fmt.Sprintf("%.0f qps, p95 %.2f ms", r.QPS, r.P95Ms)
	if r.IgnoredErrors > 0 {
		s += fmt.Sprintf(", %d ignored errors", r.IgnoredErrors)
	}
	if r.MariadbCPUPer1kQ != nil {
		s += fmt.Sprintf(", mariadbd %.1f µs/q", *r.MariadbCPUPer1kQ*1000)
	}
	if r.ReplicaCPUPer1kQ != nil {
		s += fmt.Sprintf(", replica %.1f µs/q", *r.ReplicaCPUPer1kQ*1000)
	}
	if r.ProxyCPUPer1kQ != nil {
		s += fmt.Sprintf(", proxy %.1f µs/q", *r.ProxyCPUPer1kQ*1000)
	}
	if r.MachineCPUPer1kQ != nil {
		s += fmt.Sprintf(", machine %.1f µs/q", *r.MachineCPUPer1kQ*1000)
	}
	if r.GatewayPeakRSS != nil {
		s += fmt.Sprintf(", gateway peak RSS %.1f MiB", mib(*r.GatewayPeakRSS))
	}
	return s
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// targetSummary condenses the runs of one target in one case: medians
// over its successful runs, the ratios as medians of per-round
// target/direct ratios (rounds where both succeeded): of QPS, and of
// mariadbd's CPU per query.
type targetSummary struct {
	Case              string    `json:"case"`
	Target            string    `json:"target"`
	ReplicaReads      bool      `json:"replica_reads"`
	QPS               *float64  `json:"qps"`
	Ratio             *float64  `json:"ratio_to_direct"`
	RoundRatios       []float64 `json:"round_ratios"`
	P95Ms             *float64  `json:"p95_ms"`
	ProxyUSPerQ       *float64  `json:"proxy_cpu_us_per_query"`
	ProxySyscallsPerQ *float64  `json:"proxy_syscalls_per_query"`
	ProxyCtxSwPerQ    *float64  `json:"proxy_ctx_switches_per_query"`
	MariadbUSPerQ     *float64  `json:"mariadbd_cpu_us_per_query"`
	MariadbRatio      *float64  `json:"mariadbd_cpu_ratio_to_direct"`
	ReplicaUSPerQ     *float64  `json:"replica_mariadbd_cpu_us_per_query"`
	MachineUSPerQ     *float64  `json:"machine_cpu_us_per_query"`
	Errors            int64     `json:"ignored_errors"`
	Runs              int       `json:"runs"`
	Failed            int       `json:"failed"`
	GatewayPeakRSSMiB *float64  `json:"gateway_peak_rss_mib,omitempty"`
	Status            string    `json:"status"`
	Failures          []string  `json:"failures,omitempty"`
	ReplicaNotes      []string  `json:"replica_notes,omitempty"`
}

// summarize returns one row per case and target, in the order of cases
// and of each case's targets. The pool_order_burst case has a table of
// its own (poolOrderRows): its targets are not alternatives serving the
// same load.
func summarize(cases []benchCase, runs []runResult) []targetSummary {
	var out []targetSummary
	for _, c := range cases {
		if c.PoolOrderBurst {
			continue
		}
		directByRound := map[int]runResult{}
		for _, r := range runs {
			if r.Case == c.Name && r.Target == targetDirect && r.OK {
				directByRound[r.Round] = r
			}
		}
		for _, t := range c.Targets {
			out = append(out, summarizeTarget(c, t, runs, directByRound))
		}
	}
	return out
}

func summarizeTarget(c benchCase, tgt string, runs []runResult, directByRound map[int]runResult) targetSummary {
	s := targetSummary{Case: c.Name, Target: tgt, ReplicaReads: c.ReplicaReads}
	byRound := map[int]runResult{}
	var qps, p95, proxy, db, replica, machine, sysc, ctxsw []float64
	us := func(list []float64, per1k *float64) []float64 {
		if per1k == nil {
			return list
		}
		return append(list, *per1k*1000)
	}
	for _, r := range runs {
		if r.Case != c.Name || r.Target != tgt {
			continue
		}
		s.Runs++
		s.Errors += r.IgnoredErrors
		if r.GatewayPeakRSS != nil && (s.GatewayPeakRSSMiB == nil || mib(*r.GatewayPeakRSS) > *s.GatewayPeakRSSMiB) {
			s.GatewayPeakRSSMiB = ptr(mib(*r.GatewayPeakRSS))
		}
		if !r.OK {
			s.Failed++
			s.Failures = addFailure(s.Failures, r.Failure)
			continue
		}
		byRound[r.Round] = r
		qps, p95 = append(qps, r.QPS), append(p95, r.P95Ms)
		proxy, db = us(proxy, r.ProxyCPUPer1kQ), us(db, r.MariadbCPUPer1kQ)
		replica, machine = us(replica, r.ReplicaCPUPer1kQ), us(machine, r.MachineCPUPer1kQ)
		if r.ProxySyscallsPerQ != nil && r.ProxyCtxSwPerQ != nil {
			sysc, ctxsw = append(sysc, *r.ProxySyscallsPerQ), append(ctxsw, *r.ProxyCtxSwPerQ)
		}
		if r.ReplicaNote != "" {
			s.ReplicaNotes = addFailure(s.ReplicaNotes, r.ReplicaNote)
		}
	}
	rounds := make([]int, 0, len(byRound))
	for round := range byRound {
		rounds = append(rounds, round)
	}
	sort.Ints(rounds)
	var dbRatios []float64
	for _, round := range rounds {
		d, ok := directByRound[round]
		if !ok {
			continue
		}
		r := byRound[round]
		if d.QPS > 0 {
			s.RoundRatios = append(s.RoundRatios, r.QPS/d.QPS)
		}
		if r.MariadbCPUPer1kQ != nil && d.MariadbCPUPer1kQ != nil && *d.MariadbCPUPer1kQ > 0 {
			dbRatios = append(dbRatios, *r.MariadbCPUPer1kQ / *d.MariadbCPUPer1kQ)
		}
	}
	s.QPS, s.Ratio, s.P95Ms = median(qps), median(s.RoundRatios), median(p95)
	s.ProxyUSPerQ, s.MariadbUSPerQ, s.MariadbRatio = median(proxy), median(db), median(dbRatios)
	s.ReplicaUSPerQ, s.MachineUSPerQ = median(replica), median(machine)
	s.ProxySyscallsPerQ, s.ProxyCtxSwPerQ = median(sysc), median(ctxsw)
	s.Status = status(s)
	return s
}

// addFailure appends f unless list holds it already.
func addFailure(list []string, f string) []string {
	if slices.Contains(list, f) {
		return list
	}
	return append(list, f)
}

func status(s targetSummary) string {
	switch {
	case s.Runs == 0:
		return "not run"
	case s.Failed == 0:
		return "ok"
	}
	return fmt.Sprintf("FAILED: %d/%d runs", s.Failed, s.Runs)
}

// median returns nil for no values.
func median(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return &s[n/2]
	}
	m := (s[n/2-1] + s[n/2]) / 2
	return &m
}

// num formats an optional number with prec decimals; "-" when absent.
func num(v *float64, prec int) string {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, *v)
}

// columns of the summary table: the text header (short, for a terminal),
// the Markdown header, and whether the column is left-aligned.
var columns = []struct {
	text, md string
	left     bool
}{
	{"case", "case", true},
	{"target", "target", true},
	{"QPS", "QPS", false},
	{"×direct", "×direct", false},
	{"p95 ms", "p95 ms", false},
	{"proxy µs/q", "proxy µs CPU/query", false},
	{"sysc/q", "proxy syscalls/query", false},
	{"cs/q", "proxy context switches/query", false},
	{"db µs/q", "mariadbd µs CPU/query", false},
	{"db ×direct", "mariadbd CPU/query ×direct", false},
	{"rep µs/q", "replica mariadbd µs CPU/query", false},
	{"machine µs/q", "machine µs CPU/query", false},
	{"errors", "ignored errors", false},
	{"gw RSS MiB", "gateway peak RSS MiB", false},
	{"status", "status", true},
}

const tableLegend = `Targets, each run in every round, in this order: direct = the MariaDB primary; haproxy = HAProxy in TCP mode
in front of it; gorelay = a minimal Go TCP relay (io.Copy per direction: the floor of a Go proxy); gateway = the
gateway; gateway-loop = the same gateway with io_loops: 1 (a default target where io_uring works); gateway-pipe = the
same gateway with pipelining: {connections: 2} (only when asked for); proxysql = ProxySQL
2.7.1 started by the anchor's up.sh (threads=2, multiplexing on; a default target when PROXYSQL_UP names it); any other name = a peer given with -peers (an endpoint you run, forwarding to the primary).
×direct: median over rounds of the target's QPS / direct QPS in the same round (1.00 = as fast as direct).
p95 ms: sysbench's 95th percentile latency per event. CPU per query, from /proc over sysbench's measured window:
proxy = the proxy process (haproxy, gorelay, the gateway; a peer only when given with #pid); db = the primary
mariadbd; rep = the replica mariadbd (read_only_replicas cases only); machine = the busy time of ALL CPUs
(/proc/stat: total - idle - iowait): sysbench, MariaDB, the proxy and anything else running on the machine.
machine minus direct's machine is what a target costs the machine per query; gateway minus gorelay proxy
µs/q is what the gateway spends above the floor of a Go relay. errors: sysbench ignored errors, summed.
db ×direct: median over rounds of the target's db µs/q / direct's in the same round (a target's over haproxy's
is what it costs MariaDB beyond a relay; read it in the equal-rate case, which runs more rounds).
sysc/q and cs/q: the proxy's system calls (perf's raw_syscalls:sys_enter; without perf /proc/PID/io syscr+syscw,
read/write calls only) and context switches (voluntary+nonvoluntary, every thread) per query over the same window. gw RSS: gateway VmHWM during the case. Values are medians over the successful runs.
Every gateway lists the primary and the replica. read_only_replicas cases run direct and the gateway only (a
relay would forward to the primary and repeat the read_only rows): the gateway uses TWO servers (replica_reads:
on, reads go to the replica, the primary is the fallback), direct the primary alone; both run sysbench
--skip-trx=on (the gateway keeps reads inside a transaction on the primary). Other cases: replica_reads off and
replication paused, every target sends every statement to the primary.`

func tableRow(s targetSummary) []string {
	errs := "-"
	if s.Runs > 0 {
		errs = fmt.Sprint(s.Errors)
	}
	return []string{
		s.Case, s.Target, num(s.QPS, 0), num(s.Ratio, 2), num(s.P95Ms, 2),
		num(s.ProxyUSPerQ, 1), num(s.ProxySyscallsPerQ, 2), num(s.ProxyCtxSwPerQ, 2), num(s.MariadbUSPerQ, 1), num(s.MariadbRatio, 2), num(s.ReplicaUSPerQ, 1), num(s.MachineUSPerQ, 1),
		errs, num(s.GatewayPeakRSSMiB, 1), s.Status,
	}
}

// printTable writes the summary table, its legend and the failures.
func printTable(w io.Writer, sums []targetSummary) {
	rows := [][]string{make([]string, len(columns))}
	for i, c := range columns {
		rows[0][i] = c.text
	}
	for _, s := range sums {
		rows = append(rows, tableRow(s))
	}
	width := make([]int, len(columns))
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, cell := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			if i > 0 {
				line.WriteString("  ")
			}
			if columns[i].left {
				line.WriteString(cell + pad)
			} else {
				line.WriteString(pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, tableLegend)
	writeFailures(w, sums, "")
	writeReplicaNotes(w, sums, "")
}

func writeFailures(w io.Writer, sums []targetSummary, indent string) {
	first := true
	for _, s := range sums {
		for _, f := range s.Failures {
			if first {
				fmt.Fprintln(w, "\nFailures (distinct sysbench errors per case and target):")
				first = false
			}
			fmt.Fprintf(w, "%s- %s, %s:\n", indent, s.Case, s.Target)
			for _, l := range strings.Split(f, "\n") {
				fmt.Fprintf(w, "%s      %s\n", indent, l)
			}
		}
	}
}

// writeReplicaNotes lists the replica-read cases whose replica was out of
// the gateway's read set after a run (its reads went to the primary).
func writeReplicaNotes(w io.Writer, sums []targetSummary, indent string) {
	first := true
	for _, s := range sums {
		for _, n := range s.ReplicaNotes {
			if first {
				fmt.Fprintln(w, "\nReplica notes (reads may have gone to the primary):")
				first = false
			}
			fmt.Fprintf(w, "%s- %s: %s\n", indent, s.Case, n)
		}
	}
}

// resultsDoc is results.json.
type resultsDoc struct {
	Started     time.Time         `json:"started"`
	Finished    time.Time         `json:"finished"`
	DurationS   float64           `json:"duration_s"`
	Complete    bool              `json:"complete"`
	Error       string            `json:"error,omitempty"`
	Warnings    []string          `json:"warnings,omitempty"`
	Settings    settings          `json:"settings"`
	Env         map[string]string `json:"env"`
	PrepareS    float64           `json:"prepare_s"`
	Cases       []benchCase       `json:"cases"`
	Summary     []targetSummary   `json:"summary"`
	Runs        []runResult       `json:"runs"`
	Description string            `json:"description"`
}

const jsonDescription = "sysbench against several targets, run round-robin in each round of a case: direct (the MariaDB primary), " +
	"haproxy (HAProxy in TCP mode in front of it), gorelay (a minimal Go TCP relay, io.Copy per direction), gateway, gateway-loop (the gateway with io_loops: 1, only when asked for), gateway-pipe (the gateway with pipelining: {connections: 2}, only when asked for), and peers (external endpoints, settings.peers). " +
	"qps and p95_ms are sysbench's; *_cpu_s are CPU time deltas over cpu_window_s (sysbench's \"Threads started!\" to its report): " +
	"mariadbd_* the primary's utime+stime, replica_mariadbd_* the replica's (replica_reads cases only), proxy_* the proxy process's " +
	"(haproxy, gorelay, gateway; a peer's only when given a pid), machine_* the busy time of all CPUs from /proc/stat (total - idle - iowait, every process on the machine); " +
	"*_per_1k_queries divide them by sysbench's query count; gateway_peak_rss_bytes is VmHWM, reset before each gateway run. " +
	"Cases with replica_reads true run only direct and the gateway, over the primary and the replica with replica_reads: on, direct against the primary alone; " +
	"in the other cases replication is paused and every target sends every statement to the primary. " +
	"summary: one row per case and target, medians over successful runs; ratio_to_direct is the median over rounds of the target's qps / direct qps in the same round. " +
	"The pool_order_burst case is not in summary: each of its runs (direct, gateway-round_robin, gateway-lifo) holds its quiet phase in the usual fields and the fill, the pool's connections and the burst in pool_order (see e2e/bench/cmd/sbbench/poolorder.go)."

// totalRuns is the number of runs of a complete benchmark.
func (b *bench) totalRuns() int {
	n := 0
	for _, c := range b.cases {
		n += len(c.Targets) * c.rounds(b.s.Rounds)
	}
	return n
}

func (b *bench) doc(runErr error) resultsDoc {
	d := resultsDoc{
		Started: b.started, Finished: time.Now(), DurationS: time.Since(b.started).Seconds(),
		Settings: b.s, Env: b.env, PrepareS: b.prepareS, Cases: b.cases,
		Summary: summarize(b.cases, b.runs), Runs: b.runs, Description: jsonDescription,
		Warnings: b.warnings,
	}
	d.Complete = runErr == nil && len(b.runs) == b.totalRuns()
	if runErr != nil {
		d.Error = runErr.Error()
	}
	return d
}

// writeJSON rewrites results.json; called after every run so an
// interrupted benchmark keeps what it measured.
func (b *bench) writeJSON(runErr error) error {
	data, err := json.MarshalIndent(b.doc(runErr), "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(b.dir, "results.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeResults writes results.json, summary.md and ratios.svg and prints the
// table on stdout.
func (b *bench) writeResults(runErr error) error {
	d := b.doc(runErr)
	if err := b.writeJSON(runErr); err != nil {
		return err
	}
	md := markdown(d)
	if err := os.WriteFile(filepath.Join(b.dir, "summary.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.dir, "ratios.svg"), []byte(ratioSVG(d.Summary, chartTitle(d))), 0o644); err != nil {
		return err
	}
	fmt.Println()
	if !d.Complete {
		fmt.Printf("INCOMPLETE RUN (%d of %d runs)\n", len(b.runs), b.totalRuns())
	}
	if len(d.Summary) > 0 {
		printTable(os.Stdout, d.Summary)
	}
	printPoolOrder(os.Stdout, d.Cases, d.Runs)
	fmt.Printf("\nTook %s. Results: %s (results.json, summary.md, ratios.svg, sysbench/)\n",
		fmtDuration(time.Duration(d.DurationS*float64(time.Second))), b.dir)
	return nil
}

func chartTitle(d resultsDoc) string {
	mode := "full"
	if d.Settings.Quick {
		mode = "quick"
	}
	return fmt.Sprintf("target QPS / direct QPS — %s run %s, %s, %ds x %d rounds",
		mode, d.Started.Format("2006-01-02 15:04"), d.Env["git_commit"], d.Settings.Seconds, d.Settings.Rounds)
}

func markdown(d resultsDoc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark %s\n\n", d.Started.Format("2006-01-02 15:04:05"))
	if !d.Complete {
		fmt.Fprintf(&b, "**Incomplete run** (%d runs).", len(d.Runs))
		if d.Error != "" {
			fmt.Fprintf(&b, " Error: `%s`", strings.ReplaceAll(d.Error, "\n", " "))
		}
		b.WriteString("\n\n")
	}
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, "**Warning:** `%s`\n\n", strings.ReplaceAll(w, "\n", " "))
	}
	mode := "full"
	if d.Settings.Quick {
		mode = "quick (BENCH_QUICK=1)"
	}
	rounds := fmt.Sprint(d.Settings.Rounds)
	if !d.Settings.Quick && d.Settings.Rate > 0 {
		rounds += fmt.Sprintf(" (the equal-rate case: %d)", rateRoundsFactor*d.Settings.Rounds)
	}
	fmt.Fprintf(&b, "- mode: %s; %d s per run, %s rounds per case, each round running the targets in this order: %s; took %s\n",
		mode, d.Settings.Seconds, rounds, strings.Join(d.Settings.Targets, ", "), fmtDuration(time.Duration(d.DurationS*float64(time.Second))))
	fmt.Fprintf(&b, "- data: %d tables x %d rows (prepared in %.1f s)\n", d.Settings.Tables, d.Settings.TableSize, d.PrepareS)
	if !slices.Contains(d.Settings.Targets, targetProxySQL) {
		// neither the anchor's build nor a peer of that name
		fmt.Fprintf(&b, "- %s\n", proxySQLAbsent)
	}
	for _, k := range []string{"git_commit", "gateway", "haproxy", "proxysql", "proxy_syscalls", "mariadbd", "mariadbd_flags", "topology", "sysbench", "go", "cpus", "cpu_model", "kernel"} {
		if v := d.Env[k]; v != "" {
			fmt.Fprintf(&b, "- %s: `%s`\n", k, v)
		}
	}
	for _, p := range d.Settings.Peers {
		pid := "CPU not measured"
		if p.PID > 0 {
			pid = fmt.Sprintf("CPU of pid %d", p.PID)
		}
		fmt.Fprintf(&b, "- peer `%s`: %s as %s (%s)\n", p.Name, p.Addr, p.User, pid)
	}
	fmt.Fprintf(&b, "- gateways: every one lists the primary and the replica; pools of %d connections per backend (`main`, and `replicas` for the read_only_replicas cases), %d for the multiplexing case (`mux`); replica_reads off except in `replicas` (max_replica_lag %s)\n\n",
		mainPoolSize, muxPoolSize, maxReplicaLag)

	if len(d.Summary) > 0 { // not when only pool_order_burst ran
		b.WriteString("## Summary\n\n")
		b.WriteString("One row per case and target; medians over successful runs. Targets: **direct** is the MariaDB primary; **haproxy** HAProxy in TCP mode ")
		b.WriteString("in front of it; **gorelay** a minimal Go TCP relay (io.Copy in one goroutine per direction), the floor a Go proxy cannot go below; ")
		b.WriteString("**gateway** the gateway; **gateway-loop** the gateway with `io_loops: 1`; **gateway-pipe** the gateway with `pipelining: {connections: 2}`; **proxysql** ProxySQL from the anchor's up.sh; other names are peers given with `-peers`. ")
		b.WriteString("**×direct** is the median over rounds of the target's QPS / direct QPS in the same round. ")
		b.WriteString("CPU columns are µs of CPU time per sysbench query over sysbench's measured window: proxy = the proxy process (utime+stime from /proc/PID/stat; ")
		b.WriteString("a peer's only when given with its PID), mariadbd = the primary, replica = the replica, machine = the busy time of all CPUs ")
		b.WriteString("(/proc/stat: total − idle − iowait; everything running on the machine, sysbench included). A target's machine µs/q minus direct's is ")
		b.WriteString("what it costs the machine per query; the gateway's proxy µs/q minus gorelay's is its cost above the Go relay floor. ")
		b.WriteString("Errors are sysbench's ignored errors summed over runs.\n\n")
		for _, s := range d.Summary {
			if s.ReplicaReads {
				b.WriteString("**read_only_replicas cases run direct and the gateway only** (a relay or peer would forward to the primary and repeat the read_only rows). ")
				b.WriteString("**The gateway uses two servers**, the primary and the replica, with `replica_reads: on` ")
				b.WriteString("(reads go to the replica, the primary is the fallback); direct uses the primary alone. ")
				b.WriteString("Their ×direct compares one MariaDB with the gateway in front of two; for the database CPU per query of the gateway add ")
				b.WriteString("the primary's and the replica's columns. Both run sysbench with `--skip-trx=on` (autocommit): ")
				b.WriteString("the gateway keeps reads inside a transaction on the primary. In every other case `replica_reads` is off ")
				b.WriteString("and replication is paused: every target sends every statement to the primary.\n\n")
				break
			}
		}
		b.WriteString("|")
		for _, c := range columns {
			b.WriteString(" " + c.md + " |")
		}
		b.WriteString("\n|")
		for _, c := range columns {
			if c.left {
				b.WriteString("---|")
			} else {
				b.WriteString("---:|")
			}
		}
		b.WriteString("\n")
		for _, s := range d.Summary {
			b.WriteString("| " + strings.Join(tableRow(s), " | ") + " |\n")
		}
		b.WriteString("\n![target/direct QPS ratios](ratios.svg)\n")
	}
	b.WriteString(hotRowMarkdown(d.Cases, d.Runs))
	b.WriteString(consolidationMarkdown(d.Cases, d.Runs))
	b.WriteString(poolOrderMarkdown(d.Cases, d.Runs))

	var fails strings.Builder
	writeFailures(&fails, d.Summary, "")
	if fails.Len() > 0 {
		b.WriteString("\n## Failures\n\n```")
		b.WriteString(strings.TrimPrefix(fails.String(), "\nFailures (distinct sysbench errors per case and target):"))
		b.WriteString("```\n")
	}
	var notes strings.Builder
	writeReplicaNotes(&notes, d.Summary, "")
	if notes.Len() > 0 {
		b.WriteString("\n## Replica notes\n\nAfter these runs the replica was not in the gateway's read set, so some reads went to the primary:\n\n")
		b.WriteString(strings.TrimPrefix(notes.String(), "\nReplica notes (reads may have gone to the primary):\n"))
	}

	b.WriteString("\n## Runs\n\n")
	b.WriteString("| # | case | target | round | QPS | p95 ms | ignored errors | proxy µs/q | mariadbd µs/q | replica µs/q | machine µs/q | gw peak RSS MiB | CPU window s | ok | output |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	perQ := func(per1k *float64) string {
		if per1k == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", *per1k*1000)
	}
	for i, r := range d.Runs {
		rss := "-"
		if r.GatewayPeakRSS != nil {
			rss = fmt.Sprintf("%.1f", mib(*r.GatewayPeakRSS))
		}
		ok := "yes"
		if !r.OK {
			ok = "**no**"
		}
		out := "-"
		if r.Output != "" {
			out = "[log](" + r.Output + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %.0f | %.2f | %d | %s | %s | %s | %s | %s | %.1f | %s | %s |\n",
			i+1, r.Case, r.Target, r.Round, r.QPS, r.P95Ms, r.IgnoredErrors,
			perQ(r.ProxyCPUPer1kQ), perQ(r.MariadbCPUPer1kQ), perQ(r.ReplicaCPUPer1kQ), perQ(r.MachineCPUPer1kQ), rss, r.CPUWindowS, ok, out)
	}
	return b.String()
}
