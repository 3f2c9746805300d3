package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// sysbench 1.0.20 output of a run with --report-interval=1
// --percentile=99, trimmed; with --rate it also prints queue lines.
const intervalOutput = `sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 64
Report intermediate results every 1 second(s)

Threads started!

[ 1s ] thds: 64 tps: 11932.54 qps: 11932.54 (r/w/o: 11932.54/0.00/0.00) lat (ms,99%): 17.63 err/s: 0.00 reconn/s: 0.00
[ 1s ] queue length: 0, concurrency: 3
[ 2s ] thds: 64 tps: 14593.24 qps: 14593.24 (r/w/o: 14593.24/0.00/0.00) lat (ms,99%): 11.87 err/s: 1.50 reconn/s: 2.00
[ 10s ] thds: 63 tps: 0.00 qps: 0.00 (r/w/o: 0.00/0.00/0.00) lat (ms,99%): 0.00 err/s: 0.00 reconn/s: 0.00
[ 11s ] thds: 64 tps: 12.00 qps: 12.00 (r/w/o: 12.
SQL statistics:
    queries:                             234739 (15631.27 per sec.)
Latency (ms):
         99th percentile:                       11.87
`

func TestParseIntervals(t *testing.T) {
	got := parseIntervals(intervalOutput)
	want := []sbInterval{
		{Second: 1, Threads: 64, TPS: 11932.54, QPS: 11932.54, Pct: 99, LatMs: 17.63},
		{Second: 2, Threads: 64, TPS: 14593.24, QPS: 14593.24, Pct: 99, LatMs: 11.87, ErrPS: 1.5, ReconnPS: 2},
		{Second: 10, Threads: 63, Pct: 99},
	}
	if len(got) != len(want) {
		t.Fatalf("%d intervals, want %d (the queue line and the cut line left out): %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("interval %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if o := parseSysbench(intervalOutput); o.P99Ms != 11.87 || o.Queries != 234739 {
		t.Errorf("the report after the intervals: %+v", o)
	}
	if got := parseIntervals(okOutput); len(got) != 0 {
		t.Errorf("a run without intervals: %+v", got)
	}
	// sysbench prints 95 when asked for --percentile=95, and fractions
	// of a second are read as they come.
	got = parseIntervals("[ 0.5s ] thds: 8 tps: 1.00 qps: 2.00 (r/w/o: 2.00/0.00/0.00) lat (ms,95%): 3.10 err/s: 0.00 reconn/s: 0.00\n")
	if len(got) != 1 || got[0].Second != 0.5 || got[0].Pct != 95 || got[0].LatMs != 3.1 || got[0].QPS != 2 {
		t.Errorf("0.5s at 95%%: %+v", got)
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

	// /proc/stat: busy = user+nice+system+irq+softirq+steal (total of the
	// first eight fields minus idle and iowait); guest is in user already.
	procStat := "cpu  767873 10 528242 4511337 50595 7 153255 1200 300 0\n" +
		"cpu0 383936 5 264121 2255668 25297 3 76627 600 150 0\nintr 1 2 3\n"
	if got, err := parseProcStat([]byte(procStat)); err != nil || got != 767873+10+528242+7+153255+1200 {
		t.Fatalf("parseProcStat = %d, %v", got, err)
	}
	// An old kernel's shorter line.
	if got, err := parseProcStat([]byte("cpu 10 20 30 400 50\n")); err != nil || got != 60 {
		t.Fatalf("parseProcStat, 5 fields = %d, %v", got, err)
	}
	for _, bad := range []string{"", "intr 1 2\ncpu 1 2 3 4 5\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q): no error", bad)
		}
	}
	if busy, err := machineBusyTicks(); err != nil || busy <= 0 {
		t.Fatalf("this machine's /proc/stat: %d, %v", busy, err)
	}
}

func TestSettingsAndCases(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	s, err := parseSettings(nil, env(nil))
	if err != nil || s.Quick || s.Seconds != 20 || s.Rounds != 2 || s.TableSize != 100000 {
		t.Fatalf("full defaults: %+v, %v", s, err)
	}
	cases, err := buildCases(s)
	if err != nil || len(cases) != 22 {
		t.Fatalf("full run: %d cases, %v; want 3 workloads x 2 thread counts x 2 ps modes + 2 replica reads + 1 equal rate + 2 hot rows + 2 consolidation + 2 mux + 1 pool order", len(cases), err)
	}
	if c := cases[len(cases)-2]; c.Threads != muxThreads || c.PoolSize != muxPoolSize || c.Gateway != "mux" {
		t.Fatalf("the last case but one is not the multiplexing case: %+v", c)
	}
	if c := cases[len(cases)-1]; !c.PoolOrderBurst || c.Name != "pool_order_burst" || c.Rate != defaultBurstRate || c.PSMode != "disable" ||
		c.PoolSize != 64 || c.rounds(2) != 1 || s.BurstQuiet != 6*time.Minute {
		t.Fatalf("the last case is not the pool order case (quiet %s): %+v", s.BurstQuiet, c)
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
		"point_select ps=disable t=8 rate=10000," +
		"hotrow t=64,hotrow protected t=64," +
		"consolidation off t=64,consolidation t=64," +
		"mux point_select ps=auto t=512 pool=32,mux point_select ps=disable t=512 pool=32," +
		"pool_order_burst"
	if got := strings.Join(names, ","); got != wantOrder {
		t.Fatalf("full run cases:\n%s\nwant:\n%s", got, wantOrder)
	}
	for i, gw := range []string{"main", "hotrow"} {
		c := cases[15+i]
		if !c.HotRows || c.HotRowProtection != (gw == "hotrow") || c.Gateway != gw || c.Threads != 64 || !strings.HasSuffix(c.Workload, "/hotrow.lua") {
			t.Errorf("hot-row case: %+v", c)
		}
	}
	for i, gw := range []string{"main", "consolidation"} {
		c := cases[17+i]
		if !c.HotReads || c.Consolidation != (gw == "consolidation") || c.Gateway != gw || c.Threads != 64 || c.PSMode != "disable" || !strings.HasSuffix(c.Workload, "/consolidation.lua") {
			t.Errorf("consolidation case: %+v", c)
		}
	}
	if c := cases[8]; c.Workload != "oltp_read_only" || c.PSMode != "auto" || c.Threads != 8 || c.PoolSize != mainPoolSize {
		t.Fatalf("replica case: %+v", c)
	}
	if c := cases[14]; c.Rate != defaultRate || c.Workload != "oltp_point_select" || c.PSMode != "disable" || c.rounds(2) != 2*rateRoundsFactor {
		t.Fatalf("equal-rate case: %+v", c)
	}
	if c := cases[0]; c.rounds(2) != 2 {
		t.Fatalf("%s: %d rounds of 2, want 2", c.Name, c.rounds(2))
	}
	if s2, err := parseSettings([]string{"-rate", "0"}, env(nil)); err != nil {
		t.Fatal(err)
	} else if cases, err := buildCases(s2); err != nil || len(cases) != 21 {
		t.Fatalf("-rate 0: %d cases, %v", len(cases), err)
	}
	// Every case runs the default targets (gateway-loop where io_uring
	// works), but the replica-read and hot-row cases only direct and the
	// gateway.
	defaults := "direct,haproxy,gorelay,gateway"
	if ioUring() {
		defaults += ",gateway-loop"
	}
	for _, c := range cases {
		want := defaults
		if c.ReplicaReads || c.HotRows || c.HotReads {
			want = "direct,gateway"
		}
		if c.PoolOrderBurst {
			want = "direct,gateway-round_robin,gateway-lifo"
		}
		if got := strings.Join(c.Targets, ","); got != want {
			t.Errorf("case %q: targets %s, want %s", c.Name, got, want)
		}
	}
	// Without the gateway target there are no replica-read cases.
	s.Targets = []string{"direct", "haproxy"}
	if cases, err = buildCases(s); err != nil || len(cases) != 15 || strings.Join(cases[14].Targets, ",") != "direct,haproxy" {
		t.Fatalf("without the gateway: %d cases, %v", len(cases), err)
	}
	s.CaseFilter = "replicas"
	if _, err := buildCases(s); err == nil || !strings.Contains(err.Error(), "gateway target") {
		t.Fatalf("replicas filter without the gateway: %v", err)
	}

	s, err = parseSettings(nil, env(map[string]string{"BENCH_QUICK": "1", "BENCH_TIME": "5"}))
	if err != nil || !s.Quick || s.Seconds != 5 || s.TableSize != 10000 {
		t.Fatalf("quick: %+v, %v", s, err)
	}
	cases, _ = buildCases(s)
	if len(cases) != 5 || s.BurstQuiet != time.Minute || !cases[4].PoolOrderBurst {
		t.Fatalf("quick run: %d cases, quiet phase %s; want 4 and the pool order case with 1m", len(cases), s.BurstQuiet)
	}
	for _, c := range cases[:4] {
		if c.ReplicaReads || c.Gateway != "main" {
			t.Fatalf("quick run has %+v", c)
		}
	}

	// BENCH_CASES=pool_order_burst: that case alone, once, in a full or a
	// quick run.
	for _, quick := range []string{"", "1"} {
		s, err = parseSettings(nil, env(map[string]string{"BENCH_CASES": "pool_order_burst", "BENCH_QUICK": quick, "BENCH_ROUNDS": "3"}))
		if err != nil {
			t.Fatal(err)
		}
		cases, err = buildCases(s)
		if err != nil || len(cases) != 1 || !cases[0].PoolOrderBurst || cases[0].rounds(s.Rounds) != 1 {
			t.Fatalf("pool_order_burst filter (quick %q): %+v, %v", quick, cases, err)
		}
	}
	s, err = parseSettings([]string{"-burst-rate", "0"}, env(map[string]string{"BENCH_BURST_QUIET": "90s"}))
	if err != nil || s.BurstQuiet != 90*time.Second || s.BurstRate != 0 {
		t.Fatalf("BENCH_BURST_QUIET=90s -burst-rate 0: %+v, %v", s, err)
	}
	if c := poolOrderCase(s); c.Rate != 0 {
		t.Fatalf("-burst-rate 0: case rate %d", c.Rate)
	}
	if s, err = parseSettings([]string{"-burst-quiet", "2m"}, env(map[string]string{"BENCH_BURST_RATE": "3000"})); err != nil ||
		s.BurstQuiet != 2*time.Minute || poolOrderCase(s).Rate != 3000 {
		t.Fatalf("-burst-quiet 2m, BENCH_BURST_RATE=3000: %+v, %v", s, err)
	}
	for _, bad := range []string{"5s", "six minutes", "-1m"} {
		if _, err := parseSettings(nil, env(map[string]string{"BENCH_BURST_QUIET": bad})); err == nil || !strings.Contains(err.Error(), "BENCH_BURST_QUIET") {
			t.Errorf("BENCH_BURST_QUIET=%q: %v", bad, err)
		}
	}
	if _, err := parseSettings([]string{"-burst-quiet", "1s"}, env(nil)); err == nil {
		t.Error("-burst-quiet 1s: no error")
	}
	if _, err := parseSettings([]string{"-burst-rate", "-1"}, env(nil)); err == nil {
		t.Error("-burst-rate -1: no error")
	}
	// Without the gateway target there is no pool order case.
	s.Targets, s.CaseFilter = []string{"direct", "haproxy"}, "pool_order"
	if _, err := buildCases(s); err == nil || !strings.Contains(err.Error(), "gateway target") {
		t.Fatalf("pool_order filter without the gateway: %v", err)
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
	wantAll(t, "args", joined, "--mysql-port=3306", "--threads=8", "--time=20", "--db-ps-mode=disable", "--skip-trx=on run")
	if args[len(args)-1] != "run" {
		t.Fatalf("the command is not last: %s", joined)
	}
	if joined := strings.Join(sbArgs("oltp_common", "prepare", tgt, 4, 100, 4, 0, ""), " "); strings.Contains(joined, "--time") {
		t.Fatalf("prepare with run options: %s", joined)
	}
}

func TestTargetsAndPeers(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	peers, err := parsePeers(" proxysql=127.0.0.1:6033 , px2=bench:p:w@d@localhost:7000#4242,")
	if err != nil {
		t.Fatal(err)
	}
	want := []peer{
		{Name: "proxysql", Addr: "127.0.0.1:6033", User: "gateway", Password: "secret"},
		{Name: "px2", Addr: "localhost:7000", User: "bench", Password: "p:w@d", PID: 4242},
	}
	if fmt.Sprint(peers) != fmt.Sprint(want) {
		t.Fatalf("peers %+v, want %+v", peers, want)
	}
	if p, _ := parsePeers("a=[::1]:6033"); len(p) != 1 || p[0].Addr != "[::1]:6033" {
		t.Fatalf("IPv6 peer: %+v", p)
	}
	for _, bad := range []string{"127.0.0.1:6033", "a b=h:1", "gateway=h:1", "a=h:1,a=h:2", "a=h", "a=h:0", "a=h:1#x", "a=h:1#0", "a=:pw@h:1", "a=:1"} {
		if _, err := parsePeers(bad); err == nil {
			t.Errorf("parsePeers(%q): no error", bad)
		}
	}

	for _, tc := range []struct {
		flag  string
		loops bool
		want  string
	}{
		{"", true, "direct,haproxy,gorelay,gateway,gateway-loop,proxysql,px2"},
		{"", false, "direct,haproxy,gorelay,gateway,proxysql,px2"},
		{"gateway", true, "direct,gateway"},
		{" gateway, px2 ,direct,gateway", true, "direct,gateway,px2"},
		{"gorelay,haproxy", true, "direct,gorelay,haproxy"},
		{"gateway,gateway-loop", false, "direct,gateway,gateway-loop"},
		{"gateway,gateway-pipe", true, "direct,gateway,gateway-pipe"},
	} {
		got, err := parseTargets(tc.flag, peers, tc.loops, false)
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("parseTargets(%q, io_uring %v) = %v, %v; want %s", tc.flag, tc.loops, got, err, tc.want)
		}
	}
	if _, err := parseTargets("direct,nginx", peers, true, false); err == nil {
		t.Error("unknown target: no error")
	}

	s, err := parseSettings([]string{"-quick", "-targets", "gateway,ps"}, env(map[string]string{"BENCH_PEERS": "ps=127.0.0.1:6033"}))
	if err != nil || strings.Join(s.Targets, ",") != "direct,gateway,ps" || len(s.Peers) != 1 || s.Gorelay != "bin/gorelay" {
		t.Fatalf("settings: %+v, %v", s, err)
	}
	s, err = parseSettings(nil, env(map[string]string{"BENCH_TARGETS": "haproxy"}))
	if err != nil || strings.Join(s.Targets, ",") != "direct,haproxy" {
		t.Fatalf("BENCH_TARGETS: %+v, %v", s.Targets, err)
	}
	if _, err := parseSettings([]string{"-peers", "x"}, env(nil)); err == nil || !strings.Contains(err.Error(), "-peers") {
		t.Fatalf("bad -peers: %v", err)
	}
	if _, err := parseSettings([]string{"-targets", "x"}, env(nil)); err == nil || !strings.Contains(err.Error(), "-targets") {
		t.Fatalf("bad -targets: %v", err)
	}
	// The password never reaches results.json.
	js, _ := json.Marshal(want[1])
	if strings.Contains(string(js), "p:w@d") {
		t.Fatalf("peer JSON holds the password: %s", js)
	}
}

func TestHAProxyConfig(t *testing.T) {
	cfg := haproxyConfig("127.0.0.1:1000", "127.0.0.1:2000")
	wantAll(t, "config", cfg,
		"\nglobal\n    maxconn 4096\n",
		"\ndefaults\n    mode tcp\n    maxconn 4096\n",
		"timeout client 1h", "timeout server 1h", "timeout connect 5s",
		"\nfrontend mysql\n    bind 127.0.0.1:1000\n    default_backend primary\n",
		"\nbackend primary\n    server primary 127.0.0.1:2000\n",
	)
	if strings.Contains(cfg, "nbthread") || strings.Contains(cfg, "master-worker") || strings.Contains(cfg, "daemon") {
		t.Errorf("config sets threads or process mode:\n%s", cfg)
	}
	if haproxyMaxConn < muxThreads+16 {
		t.Errorf("maxconn %d is too low for %d clients", haproxyMaxConn, muxThreads)
	}
	// HAProxy itself accepts it, where it is installed.
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/haproxy"); serr != nil {
			t.Log("haproxy is not installed: config not checked by haproxy -c")
			return
		}
		bin = "/usr/sbin/haproxy"
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

func TestGatewayConfigPoolOrder(t *testing.T) {
	for _, tc := range []struct {
		order string
		idle  time.Duration
	}{{"", 0}, {"lifo", 0}, {"round_robin", 30 * time.Second}, {"lifo", 4 * time.Minute}} {
		g := &proxyProc{
			kind: "gateway", name: "gateway-x", addr: "127.0.0.1:1000", httpAddr: "127.0.0.1:1001", backends: []string{"127.0.0.1:2000"},
			poolSize: 64, user: "app", pwd: "app", order: tc.order, idleTimeout: tc.idle,
		}
		c, err := config.Parse([]byte(g.gatewayConfig()))
		if err != nil {
			t.Fatalf("%+v: %v\n%s", tc, err, g.gatewayConfig())
		}
		p := c.Clusters[0].Pool
		wantOrder, wantIdle := tc.order, tc.idle
		if wantOrder == "" {
			wantOrder = config.PoolOrderRoundRobin
		}
		if wantIdle == 0 {
			wantIdle = defaultIdleTimeout
		}
		if p.Order != wantOrder || p.IdleTimeout == nil || *p.IdleTimeout != wantIdle || p.Size != 64 || p.MinIdle == nil || *p.MinIdle != 4 {
			t.Errorf("%+v: parsed pool %+v", tc, p)
		}
		if tc.idle == 0 && strings.Contains(g.gatewayConfig(), "idle_timeout") {
			t.Errorf("the default idle_timeout is written out:\n%s", g.gatewayConfig())
		}
	}
}

func TestGatewayConfig(t *testing.T) {
	for _, replicaReads := range []bool{false, true} {
		loops := 0
		if replicaReads {
			loops = 1
		}
		g := &proxyProc{
			kind: "gateway", name: "gateway-x", addr: "127.0.0.1:1000", httpAddr: "127.0.0.1:1001", backends: []string{"127.0.0.1:2000", "127.0.0.1:2001"},
			poolSize: 64, replicaReads: replicaReads, user: "app", pwd: "app", ioLoops: loops,
		}
		c, err := config.Parse([]byte(g.gatewayConfig()))
		if err != nil {
			t.Fatalf("replica reads %v: %v\n%s", replicaReads, err, g.gatewayConfig())
		}
		cl := c.Clusters[0]
		if bool(cl.ReplicaReads) != replicaReads || cl.MaxReplicaLag == nil || *cl.MaxReplicaLag != maxReplicaLag || cl.Pool.Size != 64 ||
			strings.Join(cl.Backends, ",") != "127.0.0.1:2000,127.0.0.1:2001" || c.HTTPListen != "127.0.0.1:1001" || c.IOLoops != loops {
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
	c := benchCase{Name: "point_select ps=auto t=8", Targets: []string{"direct", "haproxy", "gorelay", "gateway", "proxysql"}}
	f := func(v float64) *float64 { return &v }
	rss := int64(30 << 20)
	runs := []runResult{
		{Case: c.Name, Target: "direct", Round: 1, OK: true, QPS: 1000, P95Ms: 1, MariadbCPUPer1kQ: f(0.02), MachineCPUPer1kQ: f(0.05)},
		{Case: c.Name, Target: "haproxy", Round: 1, OK: true, QPS: 950, P95Ms: 1.1, ProxyCPUPer1kQ: f(0.004), MariadbCPUPer1kQ: f(0.022), MachineCPUPer1kQ: f(0.06)},
		{Case: c.Name, Target: "gorelay", Round: 1, OK: true, QPS: 900, P95Ms: 1.2, ProxyCPUPer1kQ: f(0.006)},
		{Case: c.Name, Target: "gateway", Round: 1, OK: true, QPS: 800, P95Ms: 2, ProxyCPUPer1kQ: f(0.01), GatewayPeakRSS: &rss},
		{Case: c.Name, Target: "proxysql", Round: 1, OK: true, QPS: 700, P95Ms: 2.5},
		{Case: c.Name, Target: "direct", Round: 2, OK: true, QPS: 2000, P95Ms: 3, IgnoredErrors: 2, MachineCPUPer1kQ: f(0.07)},
		{Case: c.Name, Target: "haproxy", Round: 2, OK: true, QPS: 1800, P95Ms: 3, ProxyCPUPer1kQ: f(0.006)},
		{Case: c.Name, Target: "gorelay", Round: 2, OK: false, Failure: "gorelay exited during the run"},
		{Case: c.Name, Target: "gateway", Round: 2, OK: true, QPS: 1000, P95Ms: 4},
		{Case: c.Name, Target: "proxysql", Round: 2, OK: true, QPS: 1500, P95Ms: 2.5},
		{Case: c.Name, Target: "direct", Round: 3, OK: false, Failure: "sysbench exit status 1\nFATAL: direct boom"},
		{Case: c.Name, Target: "haproxy", Round: 3, OK: true, QPS: 5000},
		{Case: c.Name, Target: "gorelay", Round: 3, OK: true, QPS: 950},
		{Case: c.Name, Target: "gateway", Round: 3, OK: false, Failure: "sysbench exit status 1\nFATAL: boom"},
		{Case: c.Name, Target: "proxysql", Round: 3, OK: true, QPS: 1500},
	}
	sums := summarize([]benchCase{c}, runs)
	if len(sums) != 5 {
		t.Fatalf("%d rows, want one per target", len(sums))
	}
	by := map[string]targetSummary{}
	for i, s := range sums {
		if s.Target != c.Targets[i] || s.Case != c.Name {
			t.Fatalf("row %d: %s/%s", i, s.Case, s.Target)
		}
		by[s.Target] = s
	}
	d, hp, gr, gw, px := by["direct"], by["haproxy"], by["gorelay"], by["gateway"], by["proxysql"]
	// Ratios per round against direct of the same round; round 3's direct
	// failed, so it has no ratio.
	for _, tc := range []struct {
		s      targetSummary
		ratio  string
		rounds int
	}{{d, "1.00", 2}, {hp, "0.93", 2}, {gr, "0.90", 1}, {gw, "0.65", 2}, {px, "0.72", 2}} {
		if num(tc.s.Ratio, 2) != tc.ratio || len(tc.s.RoundRatios) != tc.rounds {
			t.Errorf("%s: ratio %s over %v, want %s over %d rounds", tc.s.Target, num(tc.s.Ratio, 3), tc.s.RoundRatios, tc.ratio, tc.rounds)
		}
	}
	if num(d.QPS, 0) != "1500" || num(hp.QPS, 0) != "1800" || num(gw.QPS, 0) != "900" || num(px.QPS, 0) != "1500" {
		t.Errorf("QPS medians: direct %s haproxy %s gateway %s proxysql %s", num(d.QPS, 0), num(hp.QPS, 0), num(gw.QPS, 0), num(px.QPS, 0))
	}
	if num(d.MachineUSPerQ, 1) != "60.0" || num(d.MariadbUSPerQ, 1) != "20.0" || d.ProxyUSPerQ != nil {
		t.Errorf("direct CPU: machine %s db %s proxy %s", num(d.MachineUSPerQ, 1), num(d.MariadbUSPerQ, 1), num(d.ProxyUSPerQ, 1))
	}
	if num(hp.ProxyUSPerQ, 1) != "5.0" || num(gw.ProxyUSPerQ, 1) != "10.0" || px.ProxyUSPerQ != nil || gw.MariadbUSPerQ != nil {
		t.Errorf("proxy CPU: haproxy %s gateway %s proxysql %s; gateway db %s",
			num(hp.ProxyUSPerQ, 1), num(gw.ProxyUSPerQ, 1), num(px.ProxyUSPerQ, 1), num(gw.MariadbUSPerQ, 1))
	}
	if d.Errors != 2 || d.Status != "FAILED: 1/3 runs" || gw.Status != "FAILED: 1/3 runs" || hp.Status != "ok" || len(gw.Failures) != 1 {
		t.Errorf("errors %d, status direct %q gateway %q haproxy %q, failures %q", d.Errors, d.Status, gw.Status, hp.Status, gw.Failures)
	}
	if num(gw.GatewayPeakRSSMiB, 0) != "30" || hp.GatewayPeakRSSMiB != nil {
		t.Errorf("rss %s / %s", num(gw.GatewayPeakRSSMiB, 0), num(hp.GatewayPeakRSSMiB, 0))
	}

	// The outputs accept a case with no successful run, and one whose
	// direct runs all failed.
	x := benchCase{Name: "x & <y>", Targets: []string{"direct", "gateway", "haproxy"}}
	failed := summarize([]benchCase{x}, []runResult{
		{Case: x.Name, Target: "direct", Round: 1, Failure: "FATAL: direct"},
		{Case: x.Name, Target: "gateway", Round: 1, Failure: "FATAL: no"},
		{Case: x.Name, Target: "haproxy", Round: 1, OK: true, QPS: 10},
	})
	if failed[0].Status != "FAILED: 1/1 runs" || failed[1].Status != "FAILED: 1/1 runs" || failed[2].Status != "ok" || failed[2].Ratio != nil {
		t.Fatalf("failed case: %+v", failed)
	}
	sums = append(sums, failed...)
	var out strings.Builder
	printTable(&out, sums)
	wantAll(t, "table", out.String(), "×direct", "machine µs/q", "0.65", "FAILED: 1/1 runs", "FATAL: boom", "FATAL: no", "point_select ps=auto t=8, gateway:", "gorelay = a minimal Go TCP relay")
	md := markdown(resultsDoc{Summary: sums, Runs: runs, Env: map[string]string{}, Settings: settings{Targets: c.Targets}})
	wantAll(t, "markdown", md,
		"| point_select ps=auto t=8 | direct | 1500 | 1.00 | 2.00 | - | - | - | 20.0 | 1.00 | - | 60.0 | 2 | - | FAILED: 1/3 runs |",
		"| point_select ps=auto t=8 | haproxy | 1800 | 0.93 | 1.10 | 5.0 | - | - | 22.0 | 1.10 | - | 60.0 | 0 | - | ok |",
		"| point_select ps=auto t=8 | gateway | 900 | 0.65 | 3.00 | 10.0 | - | - | - | - | - | - | 0 | 30.0 | FAILED: 1/3 runs |",
		"| 2 | point_select ps=auto t=8 | haproxy | 1 | 950 | 1.10 | 0 | 4.0 | 22.0 | - | 60.0 | - |",
		"targets in this order: direct, haproxy, gorelay, gateway, proxysql",
	)
	if strings.Contains(md, "two servers") {
		t.Error("the two-server note appears without a replica-read case")
	}
	svg := ratioSVG(sums, "title <&>")
	if err := wellFormed(svg); err != nil {
		t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
	}
	wantAll(t, "SVG", svg, "failed (1/1 runs)", "no ratio: direct failed in its rounds", "gateway goal 0.7", ">x &amp; &lt;y&gt;<", ">haproxy<", ">proxysql<", targetColors["gorelay"], peerColors[0], ">0.93<")
	if strings.Contains(svg, ">direct</text>\n<rect") || strings.Contains(svg, "two servers") {
		t.Errorf("SVG draws a direct bar or the two-server note:\n%s", svg)
	}
	// One bar per non-direct target: 4 in the first case, none in the
	// second (no ratios), plus the legend's 4 squares and the background.
	if n := strings.Count(svg, "<rect "); n != 1+4+4 {
		t.Errorf("SVG has %d rects, want 9:\n%s", n, svg)
	}
}

func TestSummarizeReplicaReads(t *testing.T) {
	c := benchCase{Name: "read_only_replicas ps=auto t=8", Workload: "oltp_read_only", Threads: 8, Targets: []string{"direct", "gateway"},
		Gateway: "replicas", ReplicaReads: true, SkipTrx: true}
	f := func(v float64) *float64 { return &v }
	runs := []runResult{
		{Case: c.Name, Target: "direct", Round: 1, OK: true, QPS: 1000, MariadbCPUPer1kQ: f(0.05), ReplicaCPUPer1kQ: f(0)},
		{Case: c.Name, Target: "gateway", Round: 1, OK: true, QPS: 900, MariadbCPUPer1kQ: f(0.002), ReplicaCPUPer1kQ: f(0.04), ProxyCPUPer1kQ: f(0.03)},
		{Case: c.Name, Target: "direct", Round: 2, OK: true, QPS: 1000, MariadbCPUPer1kQ: f(0.05), ReplicaCPUPer1kQ: f(0)},
		{Case: c.Name, Target: "gateway", Round: 2, OK: true, QPS: 1100, MariadbCPUPer1kQ: f(0.004), ReplicaCPUPer1kQ: f(0.06),
			ReplicaNote: "after the run the replica was not in the gateway's read set (see x-health.json)"},
	}
	sums := summarize([]benchCase{c}, runs)
	d, s := sums[0], sums[1]
	if num(s.Ratio, 2) != "1.00" || num(s.ReplicaUSPerQ, 1) != "50.0" || num(s.MariadbUSPerQ, 1) != "3.0" || num(d.MariadbUSPerQ, 1) != "50.0" {
		t.Fatalf("ratio %s, replica %s, primary gw %s, primary direct %s",
			num(s.Ratio, 2), num(s.ReplicaUSPerQ, 1), num(s.MariadbUSPerQ, 1), num(d.MariadbUSPerQ, 1))
	}
	if len(s.ReplicaNotes) != 1 || s.Status != "ok" {
		t.Fatalf("notes %q, status %q", s.ReplicaNotes, s.Status)
	}
	var out strings.Builder
	printTable(&out, sums)
	wantAll(t, "table", out.String(), "rep µs/q", "TWO servers", "50.0", "Replica notes", "not in the gateway's read set", "run direct and the gateway only")
	md := markdown(resultsDoc{Summary: sums, Runs: runs, Env: map[string]string{}})
	wantAll(t, "markdown", md,
		"| read_only_replicas ps=auto t=8 | gateway | 1000 | 1.00 |",
		"replica mariadbd µs CPU/query",
		"The gateway uses two servers",
		"run direct and the gateway only",
		"## Replica notes",
		"| 2 | read_only_replicas ps=auto t=8 | gateway | 1 | 900 | 0.00 | 0 | 30.0 | 2.0 | 40.0 | - |",
	)
	svg := ratioSVG(sums, "t")
	if err := wellFormed(svg); err != nil {
		t.Fatalf("SVG: %v", err)
	}
	if !strings.Contains(svg, "1.00 *") || !strings.Contains(svg, "two servers") {
		t.Errorf("SVG does not mark the replica-read case:\n%s", svg)
	}
}

// wantAll fails t for each of wants that text, the output called what,
// does not contain.
func wantAll(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
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

func TestRetry(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := retry(ctx, time.Second, time.Millisecond, nil, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("retry: %v after %d calls", err, calls)
	}
	err = retry(ctx, 30*time.Millisecond, time.Millisecond, nil, func(context.Context) error { return errors.New("never") })
	if err == nil || !strings.Contains(err.Error(), "never") || !strings.Contains(err.Error(), "30ms") {
		t.Fatalf("retry past its limit: %v", err)
	}
	exited := make(chan struct{})
	close(exited)
	err = retry(ctx, time.Minute, time.Millisecond, exited, func(context.Context) error { return errors.New("refused") })
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("retry with the process gone: %v", err)
	}
}

func TestReadProcCounts(t *testing.T) {
	c, err := readProcCounts(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if !c.ok || c.Syscalls <= 0 || c.CtxSwitches <= 0 {
		t.Errorf("readProcCounts(self) = %+v; want positive counts", c)
	}
	if n := fieldSum([]byte("syscr: 3\nsyscw: 4\nrchar: 100\n"), "syscr:", "syscw:"); n != 7 {
		t.Errorf("fieldSum = %d, want 7", n)
	}
}

func TestSyscallCounter(t *testing.T) {
	if n, err := parsePerfCount([]byte("\n1234,,raw_syscalls:sys_enter,5000,100.00,,\n")); err != nil || n != 1234 {
		t.Errorf("parsePerfCount = %d, %v; want 1234", n, err)
	}
	if _, err := parsePerfCount([]byte("<not counted>,,raw_syscalls:sys_enter,0,0.00,,\n")); err == nil {
		t.Error("parsePerfCount accepted <not counted>")
	}
	if !perfWorks() {
		t.Skip("perf cannot count " + perfEvent + " here")
	}
	c := newSyscallCounter(os.Getpid(), true)
	if _, ok := c.mark(); ok {
		t.Fatal("the launch sample counts")
	}
	if n, ok := c.mark(); !ok || n != 0 {
		t.Fatalf("window start = %d, %v", n, ok)
	}
	for range 100 {
		_, _ = os.Stat("/")
	}
	if n, ok := c.mark(); !ok || n < 100 {
		t.Errorf("window end = %d, %v; want at least 100 system calls", n, ok)
	}
}

// TestProxySQLTarget: proxysql is a default target only with a ProxySQL
// build (or a peer of that name), and summary.md says when it is absent.
func TestProxySQLTarget(t *testing.T) {
	got, err := parseTargets("", nil, false, true)
	if err != nil || !slices.Contains(got, targetProxySQL) {
		t.Errorf("with a build: targets %v, %v; want proxysql among them", got, err)
	}
	if got, _ := parseTargets("", nil, false, false); slices.Contains(got, targetProxySQL) {
		t.Errorf("without a build: targets %v include proxysql", got)
	}
	env := func(k string) string { return map[string]string{"PROXYSQL_UP": "/nonexistent/up.sh"}[k] }
	s, err := parseSettings(nil, env)
	if err != nil || s.ProxySQLUp != "" || slices.Contains(s.Targets, targetProxySQL) {
		t.Errorf("missing up.sh: %+v, %v; want no proxysql target", s.Targets, err)
	}
	if _, err := parseSettings([]string{"-targets", "gateway,proxysql"}, env); err == nil {
		t.Error("-targets proxysql without a build was accepted")
	}
	dir := t.TempDir()
	up := filepath.Join(dir, "up.sh")
	if err := os.WriteFile(up, []byte("exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := proxySQLScript(up, filepath.Join(dir, "bin", "proxysql")); got != "" {
		t.Errorf("up.sh without its binary: %q, want none", got)
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "proxysql"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := proxySQLScript(up, ""); got != up {
		t.Errorf("up.sh with bin/proxysql beside it: %q, want %q", got, up)
	}
	md := markdown(resultsDoc{Env: map[string]string{}, Settings: settings{Targets: []string{targetDirect}}})
	if !strings.Contains(md, proxySQLAbsent) {
		t.Errorf("summary.md lacks %q", proxySQLAbsent)
	}
}
