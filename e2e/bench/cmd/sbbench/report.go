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
	Side    string    `json:"side"` // "direct" or "gateway"
	Round   int       `json:"round"`
	Started time.Time `json:"started"`
	WallS   float64   `json:"wall_s"`
	OK      bool      `json:"ok"`
	// Failure is why the run failed: sysbench's exit status and its
	// distinct FATAL/error lines.
	Failure string `json:"failure,omitempty"`

	Queries       int64   `json:"queries"`
	QPS           float64 `json:"qps"`
	TPS           float64 `json:"tps"`
	P95Ms         float64 `json:"p95_ms"`
	AvgMs         float64 `json:"avg_ms"`
	IgnoredErrors int64   `json:"ignored_errors"`
	Reconnects    int64   `json:"reconnects"`
	TotalTimeS    float64 `json:"sysbench_total_time_s"`

	// CPU is counted between sysbench's "Threads started!" and its report
	// when CPUWindowExact, else from its start to its exit. Mariadbd* is
	// the primary; Replica* the replica's mariadbd, measured in the
	// replica-read cases only (both sides).
	CPUWindowS       float64  `json:"cpu_window_s"`
	CPUWindowExact   bool     `json:"cpu_window_exact"`
	MariadbCPUS      *float64 `json:"mariadbd_cpu_s"`
	MariadbCPUPer1kQ *float64 `json:"mariadbd_cpu_s_per_1k_queries"`
	ReplicaCPUS      *float64 `json:"replica_mariadbd_cpu_s,omitempty"`
	ReplicaCPUPer1kQ *float64 `json:"replica_mariadbd_cpu_s_per_1k_queries,omitempty"`
	GatewayCPUS      *float64 `json:"gateway_cpu_s,omitempty"`
	GatewayCPUPer1kQ *float64 `json:"gateway_cpu_s_per_1k_queries,omitempty"`
	CPUNote          string   `json:"cpu_note,omitempty"`
	// ReplicaWaitS is how long the run waited for the gateway's discovery
	// to put the replica in its read set; ReplicaNote says when it was
	// not there any more after the run.
	ReplicaWaitS   float64 `json:"replica_wait_s,omitempty"`
	ReplicaNote    string  `json:"replica_note,omitempty"`
	GatewayPeakRSS *int64  `json:"gateway_peak_rss_bytes,omitempty"`
	RSSNote        string  `json:"rss_note,omitempty"`
	GatewayNote    string  `json:"gateway_note,omitempty"`
	SysbenchCPUS   float64 `json:"sysbench_cpu_s"`
	Output         string  `json:"output_file"`

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
	if r.GatewayCPUPer1kQ != nil {
		s += fmt.Sprintf(", gateway %.1f µs/q", *r.GatewayCPUPer1kQ*1000)
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

// caseSummary condenses a case's runs: medians over the successful runs of
// each side, the ratio as the median of per-round gateway/direct ratios
// (rounds where both sides succeeded).
type caseSummary struct {
	benchCase
	DirectQPS         *float64  `json:"direct_qps"`
	GatewayQPS        *float64  `json:"gateway_qps"`
	Ratio             *float64  `json:"ratio"`
	RoundRatios       []float64 `json:"round_ratios"`
	DirectP95Ms       *float64  `json:"direct_p95_ms"`
	GatewayP95Ms      *float64  `json:"gateway_p95_ms"`
	GatewayUSPerQ     *float64  `json:"gateway_cpu_us_per_query"`
	MariadbUSPerQDir  *float64  `json:"mariadbd_cpu_us_per_query_direct"`
	MariadbUSPerQGw   *float64  `json:"mariadbd_cpu_us_per_query_gateway"`
	ReplicaUSPerQGw   *float64  `json:"replica_mariadbd_cpu_us_per_query_gateway"`
	DirectErrors      int64     `json:"direct_ignored_errors"`
	GatewayErrors     int64     `json:"gateway_ignored_errors"`
	DirectRuns        int       `json:"direct_runs"`
	GatewayRuns       int       `json:"gateway_runs"`
	DirectFailed      int       `json:"direct_failed"`
	GatewayFailed     int       `json:"gateway_failed"`
	GatewayPeakRSSMiB *float64  `json:"gateway_peak_rss_mib"`
	Status            string    `json:"status"`
	DirectFailures    []string  `json:"direct_failures,omitempty"`
	GatewayFailures   []string  `json:"gateway_failures,omitempty"`
	ReplicaNotes      []string  `json:"replica_notes,omitempty"`
}

func summarize(cases []benchCase, runs []runResult) []caseSummary {
	var out []caseSummary
	for _, c := range cases {
		s := caseSummary{benchCase: c}
		directByRound, gatewayByRound := map[int]float64{}, map[int]float64{}
		var dq, gq, dp, gp, gcpu, mcd, mcg, rcg []float64
		var rss *float64
		for _, r := range runs {
			if r.Case != c.Name {
				continue
			}
			if r.Side == "direct" {
				s.DirectRuns++
				s.DirectErrors += r.IgnoredErrors
				if !r.OK {
					s.DirectFailed++
					s.DirectFailures = addFailure(s.DirectFailures, r.Failure)
					continue
				}
				directByRound[r.Round] = r.QPS
				dq, dp = append(dq, r.QPS), append(dp, r.P95Ms)
				if r.MariadbCPUPer1kQ != nil {
					mcd = append(mcd, *r.MariadbCPUPer1kQ*1000)
				}
				continue
			}
			s.GatewayRuns++
			s.GatewayErrors += r.IgnoredErrors
			if r.GatewayPeakRSS != nil && (rss == nil || mib(*r.GatewayPeakRSS) > *rss) {
				rss = ptr(mib(*r.GatewayPeakRSS))
			}
			if !r.OK {
				s.GatewayFailed++
				s.GatewayFailures = addFailure(s.GatewayFailures, r.Failure)
				continue
			}
			gatewayByRound[r.Round] = r.QPS
			gq, gp = append(gq, r.QPS), append(gp, r.P95Ms)
			if r.GatewayCPUPer1kQ != nil {
				gcpu = append(gcpu, *r.GatewayCPUPer1kQ*1000)
			}
			if r.MariadbCPUPer1kQ != nil {
				mcg = append(mcg, *r.MariadbCPUPer1kQ*1000)
			}
			if r.ReplicaCPUPer1kQ != nil {
				rcg = append(rcg, *r.ReplicaCPUPer1kQ*1000)
			}
			if r.ReplicaNote != "" {
				s.ReplicaNotes = addFailure(s.ReplicaNotes, r.ReplicaNote)
			}
		}
		rounds := make([]int, 0, len(directByRound))
		for round := range directByRound {
			rounds = append(rounds, round)
		}
		sort.Ints(rounds)
		for _, round := range rounds {
			d := directByRound[round]
			if g, ok := gatewayByRound[round]; ok && d > 0 {
				s.RoundRatios = append(s.RoundRatios, g/d)
			}
		}
		s.DirectQPS, s.GatewayQPS, s.Ratio = median(dq), median(gq), median(s.RoundRatios)
		s.DirectP95Ms, s.GatewayP95Ms = median(dp), median(gp)
		s.GatewayUSPerQ, s.MariadbUSPerQDir, s.MariadbUSPerQGw = median(gcpu), median(mcd), median(mcg)
		s.ReplicaUSPerQGw = median(rcg)
		s.GatewayPeakRSSMiB = rss
		s.Status = status(s)
		out = append(out, s)
	}
	return out
}

// addFailure appends f unless list holds it already.
func addFailure(list []string, f string) []string {
	if slices.Contains(list, f) {
		return list
	}
	return append(list, f)
}

func status(s caseSummary) string {
	switch {
	case s.DirectRuns+s.GatewayRuns == 0:
		return "not run"
	case s.DirectFailed == 0 && s.GatewayFailed == 0:
		return "ok"
	}
	var parts []string
	if s.GatewayFailed > 0 {
		parts = append(parts, fmt.Sprintf("gateway %d/%d failed", s.GatewayFailed, s.GatewayRuns))
	}
	if s.DirectFailed > 0 {
		parts = append(parts, fmt.Sprintf("direct %d/%d failed", s.DirectFailed, s.DirectRuns))
	}
	return "FAILED: " + strings.Join(parts, ", ")
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
	{"direct QPS", "direct QPS", false},
	{"gw QPS", "gateway QPS", false},
	{"gw/direct", "gw/direct", false},
	{"p95ms d", "p95 ms direct", false},
	{"p95ms gw", "p95 ms gateway", false},
	{"gw µs/q", "gateway µs CPU/query", false},
	{"db µs/q d", "mariadbd µs CPU/query direct", false},
	{"db µs/q gw", "primary mariadbd µs CPU/query via gateway", false},
	{"rep µs/q gw", "replica mariadbd µs CPU/query via gateway", false},
	{"err d/gw", "errors direct/gateway", false},
	{"gw RSS MiB", "gateway peak RSS MiB", false},
	{"status", "status", true},
}

const tableLegend = `gw/direct: median over rounds of gateway QPS / direct QPS (1.00 = as fast as direct).
p95ms: sysbench's 95th percentile latency per event. gw µs/q: gateway CPU per query; db µs/q: the primary
mariadbd's CPU per query, direct (d) and through the gateway (gw); rep µs/q gw: the replica mariadbd's, through
the gateway; from /proc/PID/stat over the run. err: sysbench ignored errors, summed. gw RSS: gateway VmHWM
during the case. Values are medians over the successful runs.
Every gateway lists the primary and the replica. read_only_replicas cases: the gateway side uses TWO servers
(replica_reads: on, so reads go to the replica, the primary is the fallback), the direct side the primary
alone; both run sysbench --skip-trx=on (the gateway keeps reads inside a transaction on the primary). Other
cases: replica_reads off and replication paused, every statement goes to the primary, like direct.`

func tableRow(s caseSummary) []string {
	errs := "-"
	if s.DirectRuns+s.GatewayRuns > 0 {
		errs = fmt.Sprintf("%d/%d", s.DirectErrors, s.GatewayErrors)
	}
	return []string{
		s.Name, num(s.DirectQPS, 0), num(s.GatewayQPS, 0), num(s.Ratio, 2),
		num(s.DirectP95Ms, 2), num(s.GatewayP95Ms, 2),
		num(s.GatewayUSPerQ, 1), num(s.MariadbUSPerQDir, 1), num(s.MariadbUSPerQGw, 1), num(s.ReplicaUSPerQGw, 1),
		errs, num(s.GatewayPeakRSSMiB, 1), s.Status,
	}
}

// printTable writes the summary table, its legend and the failures.
func printTable(w io.Writer, sums []caseSummary) {
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

func writeFailures(w io.Writer, sums []caseSummary, indent string) {
	first := true
	for _, s := range sums {
		for _, side := range []struct {
			name string
			list []string
		}{{"direct", s.DirectFailures}, {"gateway", s.GatewayFailures}} {
			for _, f := range side.list {
				if first {
					fmt.Fprintln(w, "\nFailures (distinct sysbench errors per case and side):")
					first = false
				}
				fmt.Fprintf(w, "%s- %s, %s:\n", indent, s.Name, side.name)
				for _, l := range strings.Split(f, "\n") {
					fmt.Fprintf(w, "%s      %s\n", indent, l)
				}
			}
		}
	}
}

// writeReplicaNotes lists the replica-read cases whose replica was out of
// the gateway's read set after a run (its reads went to the primary).
func writeReplicaNotes(w io.Writer, sums []caseSummary, indent string) {
	first := true
	for _, s := range sums {
		for _, n := range s.ReplicaNotes {
			if first {
				fmt.Fprintln(w, "\nReplica notes (reads may have gone to the primary):")
				first = false
			}
			fmt.Fprintf(w, "%s- %s: %s\n", indent, s.Name, n)
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
	Summary     []caseSummary     `json:"summary"`
	Runs        []runResult       `json:"runs"`
	Description string            `json:"description"`
}

const jsonDescription = "sysbench direct vs through the gateway, A B A B per case. " +
	"qps and p95_ms are sysbench's; *_cpu_s are utime+stime deltas from /proc/PID/stat over cpu_window_s " +
	"(mariadbd_* is the primary, replica_mariadbd_* the replica, measured in replica_reads cases only); " +
	"cases with replica_reads true run the gateway over the primary and the replica with replica_reads: on, " +
	"direct against the primary alone; in the other cases replication is paused and every statement goes to the primary; " +
	"*_per_1k_queries divide them by sysbench's query count; gateway_peak_rss_bytes is VmHWM, reset before each gateway run. " +
	"summary: medians over successful runs; ratio is the median over rounds of gateway_qps/direct_qps."

func (b *bench) doc(runErr error) resultsDoc {
	d := resultsDoc{
		Started: b.started, Finished: time.Now(), DurationS: time.Since(b.started).Seconds(),
		Settings: b.s, Env: b.env, PrepareS: b.prepareS, Cases: b.cases,
		Summary: summarize(b.cases, b.runs), Runs: b.runs, Description: jsonDescription,
		Warnings: b.warnings,
	}
	d.Complete = runErr == nil && len(b.runs) == len(b.cases)*b.s.Rounds*2
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
		fmt.Printf("INCOMPLETE RUN (%d of %d runs)\n", len(b.runs), len(b.cases)*b.s.Rounds*2)
	}
	printTable(os.Stdout, d.Summary)
	fmt.Printf("\nTook %s. Results: %s (results.json, summary.md, ratios.svg, sysbench/)\n",
		fmtDuration(time.Duration(d.DurationS*float64(time.Second))), b.dir)
	return nil
}

func chartTitle(d resultsDoc) string {
	mode := "full"
	if d.Settings.Quick {
		mode = "quick"
	}
	return fmt.Sprintf("gateway QPS / direct QPS — %s run %s, %s, %ds x %d rounds",
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
	fmt.Fprintf(&b, "- mode: %s; %d s per run, %d rounds per case in A B A B order (direct, gateway, ...); took %s\n",
		mode, d.Settings.Seconds, d.Settings.Rounds, fmtDuration(time.Duration(d.DurationS*float64(time.Second))))
	fmt.Fprintf(&b, "- data: %d tables x %d rows (prepared in %.1f s)\n", d.Settings.Tables, d.Settings.TableSize, d.PrepareS)
	for _, k := range []string{"git_commit", "gateway", "mariadbd", "mariadbd_flags", "topology", "sysbench", "go", "cpus", "cpu_model", "kernel"} {
		if v := d.Env[k]; v != "" {
			fmt.Fprintf(&b, "- %s: `%s`\n", k, v)
		}
	}
	fmt.Fprintf(&b, "- gateways: every one lists the primary and the replica; pools of %d connections per backend (`main`, and `replicas` for the read_only_replicas cases), %d for the multiplexing case (`mux`); replica_reads off except in `replicas` (max_replica_lag %s)\n\n",
		mainPoolSize, muxPoolSize, maxReplicaLag)

	b.WriteString("## Summary\n\n")
	b.WriteString("Medians over successful runs. **gw/direct** is the median over rounds of gateway QPS / direct QPS. ")
	b.WriteString("CPU columns are µs of CPU time per sysbench query (utime+stime from /proc/PID/stat). ")
	b.WriteString("Errors are sysbench's ignored errors summed over runs.\n\n")
	for _, s := range d.Summary {
		if s.ReplicaReads {
			b.WriteString("**read_only_replicas cases: the gateway side uses two servers**, the primary and the replica, with `replica_reads: on` ")
			b.WriteString("(reads go to the replica, the primary is the fallback); the direct side uses the primary alone. ")
			b.WriteString("Their gw/direct compares one MariaDB with the gateway in front of two; for the database CPU per query of the gateway side add ")
			b.WriteString("the primary's and the replica's columns. Both sides run sysbench with `--skip-trx=on` (autocommit): ")
			b.WriteString("the gateway keeps reads inside a transaction on the primary. In every other case `replica_reads` is off ")
			b.WriteString("and replication is paused: every statement goes to the primary, as direct.\n\n")
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
	b.WriteString("\n![gateway/direct QPS ratios](ratios.svg)\n")

	var fails strings.Builder
	writeFailures(&fails, d.Summary, "")
	if fails.Len() > 0 {
		b.WriteString("\n## Failures\n\n```")
		b.WriteString(strings.TrimPrefix(fails.String(), "\nFailures (distinct sysbench errors per case and side):"))
		b.WriteString("```\n")
	}
	var notes strings.Builder
	writeReplicaNotes(&notes, d.Summary, "")
	if notes.Len() > 0 {
		b.WriteString("\n## Replica notes\n\nAfter these runs the replica was not in the gateway's read set, so some reads went to the primary:\n\n")
		b.WriteString(strings.TrimPrefix(notes.String(), "\nReplica notes (reads may have gone to the primary):\n"))
	}

	b.WriteString("\n## Runs\n\n")
	b.WriteString("| # | case | side | round | QPS | p95 ms | ignored errors | mariadbd µs/q | replica µs/q | gateway µs/q | gw peak RSS MiB | CPU window s | ok | output |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for i, r := range d.Runs {
		var mq, rq, gq, rss *float64
		if r.MariadbCPUPer1kQ != nil {
			mq = ptr(*r.MariadbCPUPer1kQ * 1000)
		}
		if r.ReplicaCPUPer1kQ != nil {
			rq = ptr(*r.ReplicaCPUPer1kQ * 1000)
		}
		if r.GatewayCPUPer1kQ != nil {
			gq = ptr(*r.GatewayCPUPer1kQ * 1000)
		}
		if r.GatewayPeakRSS != nil {
			rss = ptr(mib(*r.GatewayPeakRSS))
		}
		ok := "yes"
		if !r.OK {
			ok = "**no**"
		}
		out := "-"
		if r.Output != "" {
			out = "[log](" + r.Output + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %.0f | %.2f | %d | %s | %s | %s | %s | %.1f | %s | %s |\n",
			i+1, r.Case, r.Side, r.Round, r.QPS, r.P95Ms, r.IgnoredErrors, num(mq, 1), num(rq, 1), num(gq, 1), num(rss, 1), r.CPUWindowS, ok, out)
	}
	return b.String()
}
