package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/directgate/directgate/config"
)

// sysbench 1.0.20 output of a successful run, trimmed.
const okOutput = `sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 8
Initializing random number generator from current time

Forcing shutdown in 13 seconds

Initializing worker threads...

Threads started!

SQL statistics:
    queries performed:
        read:                            159141
        write:                           0
        other:                           0
        total:                           159141
    transactions:                        159141 (52998.53 per sec.)
    queries:                             159141 (52998.53 per sec.)
    ignored errors:                      3      (1.00 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          3.0022s
    total number of events:              159141

Latency (ms):
         min:                                    0.02
         avg:                                    0.15
         max:                                   18.92
         95th percentile:                        0.31
         sum:                                23944.60
`

// sysbench output when the server refuses COM_STMT_PREPARE (a gateway
// without prepared statements).
const fatalOutput = `sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Forcing shutdown in 13 seconds

Initializing worker threads...

FATAL: mysql_stmt_prepare() failed
FATAL: MySQL error: 1047 "Unknown command 0x16: the gateway does not support it yet"
FATAL: mysql_stmt_prepare() failed
FATAL: MySQL error: 1047 "Unknown command 0x16: the gateway does not support it yet"
FATAL: ` + "`thread_init'" + ` function failed: /usr/share/sysbench/oltp_common.lua:284: SQL API error
`

func TestParseSysbench(t *testing.T) {
	o := parseSysbench(okOutput)
	if !o.HasReport || o.Forced || len(o.Fatal) != 0 {
		t.Fatalf("report/forced/fatal = %v/%v/%q", o.HasReport, o.Forced, o.Fatal)
	}
	if o.Queries != 159141 || o.QPS != 52998.53 || o.TPS != 52998.53 || o.P95Ms != 0.31 || o.AvgMs != 0.15 ||
		o.IgnoredErrors != 3 || o.Reconnects != 0 || o.TotalTimeS != 3.0022 {
		t.Fatalf("parsed %+v", o)
	}

	o = parseSysbench(fatalOutput)
	if o.HasReport || o.Queries != 0 {
		t.Fatalf("fatal output: report %v, queries %d", o.HasReport, o.Queries)
	}
	want := []string{
		"FATAL: mysql_stmt_prepare() failed",
		`FATAL: MySQL error: 1047 "Unknown command 0x16: the gateway does not support it yet"`,
		"FATAL: `thread_init' function failed: /usr/share/sysbench/oltp_common.lua:284: SQL API error",
	}
	if strings.Join(o.Fatal, "\n") != strings.Join(want, "\n") {
		t.Fatalf("fatal lines:\n%s\nwant:\n%s", strings.Join(o.Fatal, "\n"), strings.Join(want, "\n"))
	}

	// Lines that differ only in the query are one error.
	lost := "FATAL: mysql_drv_query() returned error 2013 (Lost connection to server during query) for query 'SELECT c FROM sbtest1 WHERE id=%d'\n"
	o = parseSysbench(fmt.Sprintf(lost, 1) + fmt.Sprintf(lost, 2))
	if len(o.Fatal) != 1 || !strings.Contains(o.Fatal[0], "id=1") {
		t.Fatalf("lost-connection lines: %q", o.Fatal)
	}

	if !parseSysbench("FATAL: The --max-time limit has expired, forcing shutdown...\n").Forced {
		t.Fatal("forced shutdown not detected")
	}
}

func TestParseProc(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 12 0 100 0 0\n"
	got, err := parseStatCPU([]byte(stat))
	if err != nil || got != 325 {
		t.Fatalf("parseStatCPU = %d, %v; want 325", got, err)
	}
	if _, err := parseStatCPU([]byte("1234 (x) S 1 2")); err == nil {
		t.Fatal("short stat: no error")
	}
	status := "Name:\tgateway\nVmPeak:\t 2000 kB\nVmHWM:\t   25600 kB\nVmRSS:\t   20000 kB\n"
	if got, err := parseStatusKB([]byte(status), "VmHWM"); err != nil || got != 25600*1024 {
		t.Fatalf("VmHWM = %d, %v", got, err)
	}
	if _, err := parseStatusKB([]byte(status), "VmSwap"); err == nil {
		t.Fatal("missing key: no error")
	}
}

func TestSettingsAndCases(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	s, err := parseSettings(nil, env(nil))
	if err != nil || s.Quick || s.Seconds != 20 || s.Rounds != 2 || s.TableSize != 100000 {
		t.Fatalf("full defaults: %+v, %v", s, err)
	}
	cases, err := buildCases(s)
	if err != nil || len(cases) != 16 {
		t.Fatalf("full run: %d cases, %v; want 3 workloads x 2 thread counts x 2 ps modes + 2 replica reads + 2 mux", len(cases), err)
	}
	if c := cases[len(cases)-1]; c.Threads != muxThreads || c.PoolSize != muxPoolSize || c.Gateway != "mux" {
		t.Fatalf("last case is not the multiplexing case: %+v", c)
	}
	// The replica-read cases follow read_only, before any case that writes.
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
		if c.ReplicaReads != (c.Gateway == "replicas") || c.SkipTrx != c.ReplicaReads {
			t.Errorf("case %q: gateway %s, replica reads %v, skip trx %v", c.Name, c.Gateway, c.ReplicaReads, c.SkipTrx)
		}
	}
	wantOrder := "point_select ps=auto t=8,point_select ps=disable t=8,point_select ps=auto t=64,point_select ps=disable t=64," +
		"read_only ps=auto t=8,read_only ps=disable t=8,read_only ps=auto t=64,read_only ps=disable t=64," +
		"read_only_replicas ps=auto t=8,read_only_replicas ps=disable t=8," +
		"read_write ps=auto t=8,read_write ps=disable t=8,read_write ps=auto t=64,read_write ps=disable t=64," +
		"mux point_select ps=auto t=512 pool=32,mux point_select ps=disable t=512 pool=32"
	if got := strings.Join(names, ","); got != wantOrder {
		t.Fatalf("full run cases:\n%s\nwant:\n%s", got, wantOrder)
	}
	if c := cases[8]; c.Workload != "oltp_read_only" || c.PSMode != "auto" || c.Threads != 8 || c.PoolSize != mainPoolSize {
		t.Fatalf("replica case: %+v", c)
	}

	s, err = parseSettings(nil, env(map[string]string{"BENCH_QUICK": "1", "BENCH_TIME": "5"}))
	if err != nil || !s.Quick || s.Seconds != 5 || s.TableSize != 10000 {
		t.Fatalf("quick: %+v, %v", s, err)
	}
	cases, _ = buildCases(s)
	if len(cases) != 4 {
		t.Fatalf("quick run: %d cases, want 4", len(cases))
	}
	for _, c := range cases {
		if c.ReplicaReads || c.Gateway != "main" {
			t.Fatalf("quick run has %+v", c)
		}
	}

	// BENCH_CASES=replicas: the two replica-read cases of a full run.
	s, err = parseSettings(nil, env(map[string]string{"BENCH_CASES": "replicas", "BENCH_TIME": "20", "BENCH_ROUNDS": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	cases, err = buildCases(s)
	if err != nil || len(cases) != 2 || !cases[0].ReplicaReads || !cases[1].ReplicaReads || cases[1].PSMode != "disable" {
		t.Fatalf("replicas filter: %+v, %v", cases, err)
	}
	s.Quick = true
	if _, err := buildCases(s); err == nil || !strings.Contains(err.Error(), "BENCH_QUICK") {
		t.Fatalf("replicas filter in a quick run: %v, want an error pointing at BENCH_QUICK", err)
	}

	s, err = parseSettings([]string{"-quick", "-cases", "ps=disable"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cases, err = buildCases(s)
	if err != nil || len(cases) != 2 {
		t.Fatalf("filtered: %d cases, %v", len(cases), err)
	}
	if _, err := buildCases(settings{CaseFilter: "nothing-matches"}); err == nil {
		t.Fatal("a filter matching nothing: no error")
	}
	if _, err := parseSettings(nil, env(map[string]string{"BENCH_ROUNDS": "0"})); err == nil {
		t.Fatal("BENCH_ROUNDS=0: no error")
	}
}

func TestSysbenchArgs(t *testing.T) {
	tgt := target{addr: "127.0.0.1:3306", user: "u", password: "p"}
	args := sbArgs("oltp_read_only", "run", tgt, 4, 100, 8, 20, "disable", "--skip-trx=on")
	joined := strings.Join(args, " ")
	for _, want := range []string{"--mysql-port=3306", "--threads=8", "--time=20", "--db-ps-mode=disable", "--skip-trx=on run"} {
		if !strings.Contains(joined, want) {
			t.Errorf("args lack %q: %s", want, joined)
		}
	}
	if args[len(args)-1] != "run" {
		t.Fatalf("the command is not last: %s", joined)
	}
	if joined := strings.Join(sbArgs("oltp_common", "prepare", tgt, 4, 100, 4, 0, ""), " "); strings.Contains(joined, "--time") {
		t.Fatalf("prepare with run options: %s", joined)
	}
}

func TestGatewayConfig(t *testing.T) {
	for _, replicaReads := range []bool{false, true} {
		g := &gatewayProc{
			name: "x", addr: "127.0.0.1:1000", httpAddr: "127.0.0.1:1001", backends: []string{"127.0.0.1:2000", "127.0.0.1:2001"},
			poolSize: 64, replicaReads: replicaReads, user: "app", pwd: "app",
		}
		c, err := config.Parse([]byte(g.config()))
		if err != nil {
			t.Fatalf("replica reads %v: %v\n%s", replicaReads, err, g.config())
		}
		cl := c.Clusters[0]
		if bool(cl.ReplicaReads) != replicaReads || cl.MaxReplicaLag == nil || *cl.MaxReplicaLag != maxReplicaLag || cl.Pool.Size != 64 ||
			strings.Join(cl.Backends, ",") != "127.0.0.1:2000,127.0.0.1:2001" || c.HTTPListen != "127.0.0.1:1001" {
			t.Fatalf("replica reads %v: parsed %+v, http %s", replicaReads, cl, c.HTTPListen)
		}
	}
}

func TestHealthReadsFrom(t *testing.T) {
	const replica = "127.0.0.1:2001"
	doc := func(replicas, lag string) *healthDoc {
		var d healthDoc
		js := `{"round": 3, "clusters": [{"name": "main", "primary": "127.0.0.1:2000", "replicas": ` + replicas + `,
			"backends": [{"addr": "127.0.0.1:2000", "state": "serving", "role": "primary", "lag_seconds": null},
			             {"addr": "127.0.0.1:2001", "state": "serving", "role": "replica", "lag_seconds": ` + lag + `}]}]}`
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			t.Fatal(err)
		}
		return &d
	}
	for _, tc := range []struct {
		replicas, lag string
		ok            bool
	}{
		{`["127.0.0.1:2001"]`, "0", true},
		{`["127.0.0.1:2001"]`, "null", false},
		{`["127.0.0.1:2001"]`, "11", false},
		{`[]`, "0", false},
	} {
		ok, why := doc(tc.replicas, tc.lag).readsFrom(replica)
		if ok != tc.ok || ok == (why != "") {
			t.Errorf("replicas %s lag %s: %v %q, want %v", tc.replicas, tc.lag, ok, why, tc.ok)
		}
	}
	if ok, _ := doc(`["127.0.0.1:2001"]`, "0").readsFrom("127.0.0.1:9"); ok {
		t.Error("an unknown replica qualifies")
	}
}

func TestSummarize(t *testing.T) {
	c := benchCase{Name: "point_select ps=auto t=8"}
	f := func(v float64) *float64 { return &v }
	rss := int64(30 << 20)
	runs := []runResult{
		{Case: c.Name, Side: "direct", Round: 1, OK: true, QPS: 1000, P95Ms: 1, MariadbCPUPer1kQ: f(0.02)},
		{Case: c.Name, Side: "gateway", Round: 1, OK: true, QPS: 800, P95Ms: 2, GatewayCPUPer1kQ: f(0.01), GatewayPeakRSS: &rss},
		{Case: c.Name, Side: "direct", Round: 2, OK: true, QPS: 2000, P95Ms: 3, IgnoredErrors: 2},
		{Case: c.Name, Side: "gateway", Round: 2, OK: true, QPS: 1000, P95Ms: 4},
		{Case: c.Name, Side: "direct", Round: 3, OK: true, QPS: 1000, P95Ms: 1},
		{Case: c.Name, Side: "gateway", Round: 3, OK: false, Failure: "sysbench exit status 1\nFATAL: boom"},
	}
	s := summarize([]benchCase{c}, runs)[0]
	// Round ratios 0.8 and 0.5 (round 3's gateway failed): median 0.65.
	if s.Ratio == nil || *s.Ratio != 0.65 || len(s.RoundRatios) != 2 {
		t.Fatalf("ratio %v, rounds %v", num(s.Ratio, 3), s.RoundRatios)
	}
	if *s.DirectQPS != 1000 || *s.GatewayQPS != 900 || *s.GatewayUSPerQ != 10 || *s.MariadbUSPerQDir != 20 {
		t.Fatalf("medians: direct %v gateway %v gw µs %v db µs %v",
			num(s.DirectQPS, 1), num(s.GatewayQPS, 1), num(s.GatewayUSPerQ, 1), num(s.MariadbUSPerQDir, 1))
	}
	if s.MariadbUSPerQGw != nil {
		t.Fatal("mariadbd CPU via gateway was never measured but has a value")
	}
	if s.DirectErrors != 2 || s.GatewayFailed != 1 || s.Status != "FAILED: gateway 1/3 failed" || len(s.GatewayFailures) != 1 {
		t.Fatalf("errors %d, failed %d, status %q, failures %q", s.DirectErrors, s.GatewayFailed, s.Status, s.GatewayFailures)
	}
	if *s.GatewayPeakRSSMiB != 30 {
		t.Fatalf("rss %v", *s.GatewayPeakRSSMiB)
	}

	// The outputs accept a case with no successful run.
	failed := summarize([]benchCase{{Name: "x & <y>"}}, []runResult{{Case: "x & <y>", Side: "gateway", Failure: "FATAL: no"}})
	sums := append([]caseSummary{s}, failed...)
	var out strings.Builder
	printTable(&out, sums)
	for _, want := range []string{"0.65", "FAILED: gateway 1/1 failed", "FATAL: boom", "FATAL: no"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	md := markdown(resultsDoc{Summary: sums, Runs: runs, Env: map[string]string{}})
	if !strings.Contains(md, "| point_select ps=auto t=8 | 1000 | 900 | 0.65 |") {
		t.Errorf("markdown row missing:\n%s", md)
	}
	if strings.Contains(md, "two servers") || strings.Contains(svgNoReplicas(sums), "two servers") {
		t.Error("the two-server note appears without a replica-read case")
	}
	svg := ratioSVG(sums, "title <&>")
	if err := wellFormed(svg); err != nil {
		t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
	}
	if !strings.Contains(svg, "failed (gateway 1/1 failed)") {
		t.Errorf("SVG does not mark the failed case:\n%s", svg)
	}
}

func svgNoReplicas(sums []caseSummary) string { return ratioSVG(sums, "t") }

func TestSummarizeReplicaReads(t *testing.T) {
	c := benchCase{Name: "read_only_replicas ps=auto t=8", Workload: "oltp_read_only", Threads: 8,
		Gateway: "replicas", ReplicaReads: true, SkipTrx: true}
	f := func(v float64) *float64 { return &v }
	runs := []runResult{
		{Case: c.Name, Side: "direct", Round: 1, OK: true, QPS: 1000, MariadbCPUPer1kQ: f(0.05), ReplicaCPUPer1kQ: f(0)},
		{Case: c.Name, Side: "gateway", Round: 1, OK: true, QPS: 900, MariadbCPUPer1kQ: f(0.002), ReplicaCPUPer1kQ: f(0.04), GatewayCPUPer1kQ: f(0.03)},
		{Case: c.Name, Side: "direct", Round: 2, OK: true, QPS: 1000, MariadbCPUPer1kQ: f(0.05), ReplicaCPUPer1kQ: f(0)},
		{Case: c.Name, Side: "gateway", Round: 2, OK: true, QPS: 1100, MariadbCPUPer1kQ: f(0.004), ReplicaCPUPer1kQ: f(0.06),
			ReplicaNote: "after the run the replica was not in the gateway's read set (see x-health.json)"},
	}
	sums := summarize([]benchCase{c}, runs)
	s := sums[0]
	if num(s.Ratio, 2) != "1.00" || num(s.ReplicaUSPerQGw, 1) != "50.0" || num(s.MariadbUSPerQGw, 1) != "3.0" || num(s.MariadbUSPerQDir, 1) != "50.0" {
		t.Fatalf("ratio %s, replica %s, primary gw %s, primary direct %s",
			num(s.Ratio, 2), num(s.ReplicaUSPerQGw, 1), num(s.MariadbUSPerQGw, 1), num(s.MariadbUSPerQDir, 1))
	}
	if len(s.ReplicaNotes) != 1 || s.Status != "ok" {
		t.Fatalf("notes %q, status %q", s.ReplicaNotes, s.Status)
	}
	var out strings.Builder
	printTable(&out, sums)
	for _, want := range []string{"rep µs/q gw", "TWO servers", "50.0", "Replica notes", "not in the gateway's read set"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	md := markdown(resultsDoc{Summary: sums, Runs: runs, Env: map[string]string{}})
	for _, want := range []string{
		"| read_only_replicas ps=auto t=8 | 1000 | 1000 | 1.00 |",
		"replica mariadbd µs CPU/query via gateway",
		"the gateway side uses two servers",
		"## Replica notes",
		"| 2 | read_only_replicas ps=auto t=8 | gateway | 1 | 900 | 0.00 | 0 | 2.0 | 40.0 | 30.0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	svg := ratioSVG(sums, "t")
	if err := wellFormed(svg); err != nil {
		t.Fatalf("SVG: %v", err)
	}
	if !strings.Contains(svg, "1.00 *") || !strings.Contains(svg, "two servers") {
		t.Errorf("SVG does not mark the replica-read case:\n%s", svg)
	}
}

func wellFormed(s string) error {
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func TestMedian(t *testing.T) {
	if median(nil) != nil {
		t.Fatal("median of nothing is not nil")
	}
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{4, 1}, 2.5}, {[]float64{5, 1, 3}, 3}} {
		if got := *median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
