package main

import (
	"strings"
	"testing"
	"time"
)

const metricsText = `# HELP directgate_pool_dials_total Connections the pool started opening.
# TYPE directgate_pool_dials_total counter
directgate_pool_dials_total{backend="127.0.0.1:2000",cluster="main",pool="default"} 64
directgate_pool_dials_total{backend="127.0.0.1:2000",cluster="main",pool="found_rows"} 2
directgate_pool_dials_total{backend="127.0.0.1:2000",cluster="main",pool="owner"} 5
directgate_pool_dials_total{backend="127.0.0.1:2001",cluster="main",pool="default"} 4
directgate_pool_destroyed_total{backend="127.0.0.1:2000",cluster="main",pool="default"} 56
directgate_pool_dial_errors_total{backend="127.0.0.1:2000",cluster="main",pool="default"} 1
directgate_pool_acquire_timeouts_total{backend="127.0.0.1:2000",cluster="main",pool="default"} 0
directgate_pool_waits_total{backend="127.0.0.1:2000",cluster="main",pool="default"} 40
directgate_pool_wait_seconds_total{backend="127.0.0.1:2000",cluster="main",pool="default"} 0.25
directgate_pool_wait_seconds_total{backend="127.0.0.1:2000",cluster="main",pool="found_rows"} 0.125
directgate_pool_connections{backend="127.0.0.1:2000",cluster="main",pool="default",state="idle"} 6
directgate_pool_connections{backend="127.0.0.1:2000",cluster="main",pool="default",state="in_use"} 2
directgate_pool_connections{backend="127.0.0.1:2000",cluster="main",pool="default",state="dialing"} 1
directgate_pool_connections{backend="127.0.0.1:2000",cluster="main",pool="owner",state="idle"} 3
directgate_sessions 12
directgate_odd{note="a \"quoted\", comma\\ and\nline",backend="127.0.0.1:2000"} 7 1700000000000
directgate_broken{backend="127.0.0.1:2000" 3
go_gc_duration_seconds{quantile="0.5"} NaN
`

func TestParsePromText(t *testing.T) {
	samples := parsePromText(metricsText)
	by := map[string]promSample{}
	for _, m := range samples {
		by[m.name+"/"+m.labels["pool"]+"/"+m.labels["backend"]+"/"+m.labels["state"]] = m
	}
	if m := by["directgate_sessions///"]; m.value != 12 || len(m.labels) != 0 {
		t.Errorf("a sample without labels: %+v", m)
	}
	if m := by["directgate_odd//127.0.0.1:2000/"]; m.value != 7 || m.labels["note"] != "a \"quoted\", comma\\ and\nline" {
		t.Errorf("escaped label value, timestamp: %+v", m)
	}
	if _, ok := by["directgate_broken//127.0.0.1:2000/"]; ok {
		t.Error("a line with unclosed labels was read")
	}
	if m := by["directgate_pool_wait_seconds_total/default/127.0.0.1:2000/"]; m.value != 0.25 {
		t.Errorf("a fraction: %+v", m)
	}

	s, err := poolSnapOf(samples, "127.0.0.1:2000")
	if err != nil {
		t.Fatal(err)
	}
	// The owner's pool and the replica's are not counted; found_rows is.
	want := poolSnap{Idle: 6, InUse: 2, Dialing: 1, Dials: 66, DialErrors: 1, Destroyed: 56, Waits: 40, WaitS: 0.375}
	if s != want || s.Open() != 8 {
		t.Errorf("snapshot %+v (open %d), want %+v", s, s.Open(), want)
	}
	if _, err := poolSnapOf(samples, "127.0.0.1:9"); err == nil {
		t.Error("a backend without pools: no error")
	}
}

func TestBurstIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		quiet, want time.Duration
		dflt        bool
	}{
		{6 * time.Minute, 5 * time.Minute, true},
		{10 * time.Minute, 5 * time.Minute, true},
		{5 * time.Minute, 4 * time.Minute, false},
		{2 * time.Minute, time.Minute, false},
		{time.Minute, 30 * time.Second, false},
		{45 * time.Second, 22 * time.Second, false},
		{minBurstQuiet, 5 * time.Second, false},
	} {
		got, dflt := burstIdleTimeout(tc.quiet)
		if got != tc.want || dflt != tc.dflt {
			t.Errorf("burstIdleTimeout(%s) = %s, %v; want %s, %v", tc.quiet, got, dflt, tc.want, tc.dflt)
		}
	}
	// Whatever the quiet phase, what is left of it after idle_timeout
	// holds two of the pool's maintenance passes (every idle_timeout/2,
	// at most 30s: pools.checkInterval), so the connections lifo leaves
	// unused are closed before the burst.
	for quiet := minBurstQuiet; quiet <= 12*time.Minute; quiet += 5 * time.Second {
		idle, _ := burstIdleTimeout(quiet)
		if pass := min(idle/2, 30*time.Second); quiet-idle < 2*pass || idle <= 0 {
			t.Errorf("quiet %s: idle_timeout %s leaves %s, less than two passes of %s", quiet, idle, quiet-idle, pass)
		}
	}
}

func TestPoolOrderTargets(t *testing.T) {
	c := poolOrderCase(settings{BurstRate: 5000})
	if strings.Join(c.Targets, ",") != "direct,gateway-round_robin,gateway-lifo" {
		t.Fatalf("targets %v", c.Targets)
	}
	for tgt, want := range map[string]string{"direct": "", "gateway-round_robin": "round_robin", "gateway-lifo": "lifo", "gateway": ""} {
		if got := targetOrder(tgt); got != want {
			t.Errorf("targetOrder(%q) = %q, want %q", tgt, got, want)
		}
	}
	// The ETA counts the quiet phases: direct's at most a minute.
	b := &bench{s: settings{Rounds: 2, Seconds: 20, BurstQuiet: 6 * time.Minute}, cases: []benchCase{
		{Name: "x", Targets: []string{"direct", "gateway"}}, c,
	}}
	perRun := b.perRun()
	total := 4*perRun + b.poolOrderWall("direct") + 2*b.poolOrderWall("gateway-lifo")
	if got := b.remaining(1); got != total {
		t.Errorf("remaining(1) = %s, want %s", got, total)
	}
	if got := b.remaining(6); got != 2*b.poolOrderWall("gateway-lifo") {
		t.Errorf("remaining(6) = %s", got)
	}
	if b.poolOrderWall("direct") >= 2*time.Minute || b.poolOrderWall("gateway-lifo") < 6*time.Minute {
		t.Errorf("walls: direct %s, gateway %s", b.poolOrderWall("direct"), b.poolOrderWall("gateway-lifo"))
	}
}

func TestPoolOrderReport(t *testing.T) {
	c := poolOrderCase(settings{BurstRate: 5000})
	other := benchCase{Name: "point_select ps=auto t=8", Targets: []string{"direct", "gateway"}}
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	first := sbInterval{Second: 1, Threads: 64, QPS: 9000, Pct: 99, LatMs: 42.5}
	runs := []runResult{
		{Case: other.Name, Target: "direct", Round: 1, OK: true, QPS: 1000},
		{Case: c.Name, Target: "direct", Round: 1, OK: true, Queries: 300000, QPS: 5000, P95Ms: 0.5, MariadbCPUPer1kQ: f(0.040),
			PoolOrder: &poolOrderRun{QuietS: 60, QuietThreads: 8, QuietRate: 5000, Burst: burstPhase{
				OK: true, Queries: 400000, QPS: 26000, P99Ms: 9.1, ConnectS: f(0.1), FirstSecond: &sbInterval{Second: 1, QPS: 20000, LatMs: 12}, BackendLogins: n(64),
				Intervals: []sbInterval{{Second: 1, QPS: 20000, LatMs: 12}, {Second: 2, QPS: 27000, LatMs: 8.25}},
			}}},
		{Case: c.Name, Target: "gateway-round_robin", Round: 1, OK: true, Queries: 1800000, QPS: 5000, P95Ms: 0.9,
			MariadbCPUPer1kQ: f(0.055), ProxyCPUPer1kQ: f(0.030),
			PoolOrder: &poolOrderRun{Order: "round_robin", IdleTimeoutS: 300, IdleTimeoutDefault: true, QuietS: 360, QuietThreads: 8, QuietRate: 5000,
				FillInUse: n(64), OpenBeforeQuiet: n(64), OpenBeforeBurst: n(64), QuietDials: n(0), QuietClosed: n(0),
				Burst: burstPhase{OK: true, Queries: 200000, QPS: 13000, P99Ms: 15, ConnectS: f(0.2), FirstSecond: &first,
					Dials: n(0), DialsAtStart: n(0), Waits: n(3), WaitS: f(0.001), BackendLogins: n(8)}}},
		{Case: c.Name, Target: "gateway-lifo", Round: 1, Failure: "burst: sysbench exit status 1\nFATAL: boom",
			Queries: 1800000, QPS: 5000, P95Ms: 0.7, MariadbCPUPer1kQ: f(0.045),
			PoolOrder: &poolOrderRun{Order: "lifo", IdleTimeoutS: 300, IdleTimeoutDefault: true, QuietS: 360, QuietThreads: 8, QuietRate: 5000,
				FillInUse: n(64), OpenBeforeQuiet: n(64), OpenBeforeBurst: n(9), QuietDials: n(1), QuietClosed: n(56),
				Burst:       burstPhase{Failure: "sysbench exit status 1\nFATAL: boom", Dials: n(55), DialsAtStart: n(2), BackendLogins: n(63)},
				MetricsNote: "gateway /metrics: connection refused"}},
	}
	cases := []benchCase{other, c}
	sums := summarize(cases, runs)
	if len(sums) != 2 || sums[0].Case != other.Name || sums[1].Case != other.Name {
		t.Fatalf("the summary has the pool order case: %+v", sums)
	}

	md := markdown(resultsDoc{Cases: cases, Summary: sums, Runs: runs, Env: map[string]string{}})
	wantAll(t, "markdown", md,
		"## Summary",
		"## Pool order: a burst after a quiet phase",
		"| target | pool order | idle_timeout | quiet phase |",
		"| direct | - | - | 1m0s × 8 threads, 5000 q/s | 5000 | 0.50 | 40.0 | - | - | - | - | - | 0.10 | - | - | - | - | 64 | 12.00 | 20000 | 26000 | 9.10 | yes |",
		"| gateway-round_robin | round_robin | 5m0s (default) | 6m0s × 8 threads, 5000 q/s | 5000 | 0.90 | 55.0 | 30.0 | 64 | 64 | 0 | 64 | 0.20 | 0 | 0 | 3 | 0.001 | 8 | 42.50 | 9000 | 13000 | 15.00 | yes |",
		"| gateway-lifo | lifo | 5m0s (default) | 6m0s × 8 threads, 5000 q/s | 5000 | 0.70 | 45.0 | - | 64 | 64 | 56 | 9 | - | 55 | 2 | - | - | 63 | - | - | - | - | **no** |",
		"gateway-lifo failed:\n\n```\nburst: sysbench exit status 1\nFATAL: boom\n```",
		"gateway-lifo: gateway /metrics: connection refused",
		"- direct: 1s 20000/12.00, 2s 27000/8.25",
	)
	if strings.Contains(md, "shorter than 6m") {
		t.Error("the shortened idle_timeout is noted with the default one")
	}
	// The runs table lists their quiet phase.
	wantAll(t, "markdown runs", md, "| 4 | pool_order_burst | gateway-lifo | 1 | 5000 | 0.70 |")

	var out strings.Builder
	printPoolOrder(&out, cases, runs)
	lines := strings.Split(out.String(), "\n")
	wantAll(t, "text", out.String(), "pool_order_burst: per pool order", "gateway-lifo failed:\nburst: sysbench exit status 1")
	// Transposed: a line per column, a column per target.
	var dials string
	for _, l := range lines {
		if strings.HasPrefix(l, "dials in burst") && dials == "" {
			dials = l
		}
	}
	if f := strings.Fields(strings.TrimPrefix(dials, "dials in burst")); strings.Join(f, " ") != "- 0 55" {
		t.Errorf("dials line %q", dials)
	}

	// A short quiet phase says that idle_timeout was shortened; with only
	// this case there is no summary table.
	short := []runResult{{Case: c.Name, Target: "gateway-lifo", Round: 1, OK: true,
		PoolOrder: &poolOrderRun{Order: "lifo", IdleTimeoutS: 30, QuietS: 60, QuietThreads: 8}}}
	md = markdown(resultsDoc{Cases: []benchCase{c}, Summary: summarize([]benchCase{c}, short), Runs: short, Env: map[string]string{}})
	wantAll(t, "short markdown", md, "The quiet phase (1m0s) is shorter than 6m, so `idle_timeout` was shortened from its 5m default to 30s", "| 30s |")
	if strings.Contains(md, "## Summary") || strings.Contains(md, "ratios.svg") {
		t.Errorf("an empty summary table:\n%s", md)
	}
	if svg := ratioSVG(nil, "t"); wellFormed(svg) != nil {
		t.Errorf("an empty chart is not well-formed: %s", svg)
	}
	out.Reset()
	printPoolOrder(&out, []benchCase{other}, runs[:1])
	if out.Len() != 0 {
		t.Errorf("printed without the case: %q", out.String())
	}
}
