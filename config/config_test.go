package config

import (
	"strings"
	"testing"
	"time"
)

const minimal = `
users: [{user: app, password: app}]
clusters:
  - name: main
    backend_user: gateway
    backends: ["127.0.0.1:13306"]
`

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Clusters[0].Pool
	if c.Listen != "127.0.0.1:15306" || c.HTTPListen != "127.0.0.1:15000" || c.Log.Level != "info" || c.Log.Format != "text" {
		t.Errorf("top-level defaults: %+v", c)
	}
	if p.Size != 64 || *p.MinIdle != 4 || p.MaxDials != 4 || p.Order != "round_robin" || *p.IdleTimeout != 5*time.Minute ||
		*p.MaxLifetime != 30*time.Minute || p.AcquireTimeout != 2*time.Second || p.DialTimeout != 5*time.Second {
		t.Errorf("pool defaults: %+v", p)
	}
	cl := c.Clusters[0]
	if cl.ReplicaReads || *cl.MaxReplicaLag != 10*time.Second || cl.CausalReads || *cl.CausalTimeout != time.Second ||
		*cl.FailoverBuffer != 5*time.Second || cl.StickinessThreshold != 1.5 || *cl.HotLimit != 64 {
		t.Errorf("cluster defaults: %+v", cl)
	}
	if h := c.Health; h.Interval != 2*time.Second || h.BatchSize != 100 || h.Timeout != time.Second || h.Rise != 2 || h.Fall != 2 {
		t.Errorf("health defaults: %+v", h)
	}
	if c.Users[0].Cluster != "main" {
		t.Errorf("user cluster default %q", c.Users[0].Cluster)
	}
	if c.Users[0].TransactionMode != TxnSingle || c.TwoPC.LogCluster != "main" || c.TwoPC.ResolveAfter != 10*time.Second {
		t.Errorf("transaction defaults: %q %+v", c.Users[0].TransactionMode, c.TwoPC)
	}
}

func TestHotRowDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Clusters[0].HotRow; h.MaxConcurrency != 0 || *h.MaxQueue != 20 || h.MaxWait != 10*time.Second || h.DryRun {
		t.Errorf("hot_row defaults: %+v", h)
	}
	c, err = Parse([]byte(minimal + "    hot_row: {max_concurrency: 1, max_queue: 0, dry_run: on}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Clusters[0].HotRow; h.MaxConcurrency != 1 || *h.MaxQueue != 0 || !h.DryRun {
		t.Errorf("hot_row set: %+v", h)
	}
}

func TestProtectionDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Clusters[0]
	if cl.Throttle.MaxLag != 0 || cl.Throttle.MaxDelay != 2*time.Second || cl.Throttle.DryRun {
		t.Errorf("throttle defaults: %+v", cl.Throttle)
	}
	if cl.Consolidation.Enabled || cl.Consolidation.MaxResultBytes != 1<<20 {
		t.Errorf("consolidation defaults: %+v", cl.Consolidation)
	}
	if cl.Shedding.MaxInFlight != 0 || cl.Shedding.MaxQueueWait != 0 {
		t.Errorf("shedding defaults: %+v", cl.Shedding)
	}
	if *c.Users[0].Priority != 50 {
		t.Errorf("priority default %d", *c.Users[0].Priority)
	}
	c, err = Parse([]byte(minimal + "    throttle: {max_lag: 5s, max_delay: 1s}\n    consolidation: {enabled: on, max_result_bytes: 64KiB}\n    shedding: {max_in_flight: 40, max_queue_wait: 50ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl = c.Clusters[0]
	if cl.Throttle.MaxLag != 5*time.Second || cl.Throttle.MaxDelay != time.Second || !cl.Consolidation.Enabled ||
		cl.Consolidation.MaxResultBytes != 64<<10 || cl.Shedding.MaxInFlight != 40 || cl.Shedding.MaxQueueWait != 50*time.Millisecond {
		t.Errorf("protections set: %+v %+v %+v", cl.Throttle, cl.Consolidation, cl.Shedding)
	}
}

// TestPipeliningSettings: pipelining is off by default, with its bound
// and warnings mode defaulted; a bad mode or a pipe count not below the
// pool's size is refused with what to write instead.
func TestPipeliningSettings(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Clusters[0].Pipelining; p.Connections != 0 || p.LateAfter != 20*time.Millisecond || p.Warnings != PipeWarningsListed {
		t.Errorf("pipelining defaults: %+v", p)
	}
	c, err = Parse([]byte(minimal + "    pipelining: {connections: 2, late_after: 5ms, warnings: counted}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Clusters[0].Pipelining; p.Connections != 2 || p.LateAfter != 5*time.Millisecond || p.Warnings != PipeWarningsCounted {
		t.Errorf("pipelining set: %+v", p)
	}
	for extra, want := range map[string]string{
		"    pipelining: {connections: 2, warnings: lost}\n":  `pipelining.warnings: is "lost"; use "listed"`,
		"    pipelining: {connections: 64}\n":                 "pipelining.connections: must be below pool.size (64)",
		"    pipelining: {connections: 2, late_after: -1s}\n": "pipelining.late_after: must not be negative",
	} {
		if _, err := Parse([]byte(minimal + extra)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", strings.TrimSpace(extra), err, want)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"0": 0, "1048576": 1 << 20, "1MiB": 1 << 20, "512 KiB": 512 << 10, "2GiB": 2 << 30, "1KB": 1000, "3mb": 3e6, "7B": 7} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1 PiB", "-1", "1.5MiB", "99999999999999999999"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) took it", in)
		}
	}
}

func TestExplicitZeroes(t *testing.T) {
	c, err := Parse([]byte(minimal + "    pool: {min_idle: 0, idle_timeout: 0s, max_lifetime: 0s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Clusters[0].Pool
	if *p.MinIdle != 0 || *p.IdleTimeout != 0 || *p.MaxLifetime != 0 {
		t.Errorf("explicit zeroes lost: %+v", p)
	}
}

func TestSwitch(t *testing.T) {
	for in, want := range map[string]bool{"on": true, "off": false, "true": true, "no": false, "ON": true} {
		c, err := Parse([]byte(minimal + "    replica_reads: " + in + "\n    causal_reads: " + in + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if bool(c.Clusters[0].ReplicaReads) != want || bool(c.Clusters[0].CausalReads) != want {
			t.Errorf("%s: got %v", in, c.Clusters[0].ReplicaReads)
		}
	}
	if _, err := Parse([]byte(minimal + "    replica_reads: sometimes\n")); err == nil || !strings.Contains(err.Error(), "not on or off") {
		t.Errorf("bad switch: %v", err)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := map[string]string{
		"listen: nonsense\n" + minimal:                 "listen:",
		"log: {level: loud}\n" + minimal:               "log.level",
		"bogus_key: 1\n" + minimal:                     "bogus_key",
		minimal + "    pool: {size: -1}\n":             "clusters[0].pool.size",
		minimal + "    pool: {size: 2, min_idle: 3}\n": "clusters[0].pool.min_idle",
		minimal + "    pool: {order: fifo}\n":          "clusters[0].pool.order",
		`users: [{user: app, cluster: nope}]
clusters: [{name: main, backend_user: g, backends: ["h:1"]}]`: "users[0].cluster",
		`users: [{user: app}]
clusters: [{name: main, backends: ["h:1"]}]`: "clusters[0].backend_user",
		`users: [{user: app}]
clusters: [{name: main, backend_user: g, backends: ["nohost"]}]`: "clusters[0].backends[0]",
		"health: {interval: 1ms}\n" + minimal:                      "health.interval",
		minimal + "    stickiness_threshold: 0.5\n":                "clusters[0].stickiness_threshold",
		minimal + "    failover_buffer: -1s\n":                     "clusters[0].failover_buffer",
		minimal + "    max_replica_latency: -1ms\n":                "clusters[0].max_replica_latency",
		minimal + "    hot_row: {max_concurrency: -1}\n":           "clusters[0].hot_row.max_concurrency",
		minimal + "    hot_row: {max_queue: -1}\n":                 "clusters[0].hot_row.max_queue",
		minimal + "    hot_row: {max_wait: -1s}\n":                 "clusters[0].hot_row.max_wait",
		minimal + "    throttle: {max_lag: -1s}\n":                 "clusters[0].throttle.max_lag",
		minimal + "    shedding: {max_in_flight: -1}\n":            "clusters[0].shedding.max_in_flight",
		minimal + "    consolidation: {max_result_bytes: 1 PiB}\n": "line",
		`users: [{user: app, priority: 101}]
clusters: [{name: main, backend_user: g, backends: ["h:1"]}]`: "users[0].priority",
		`users: [{user: app}]
clusters:
  - {name: a, backend_user: g, backends: ["h:1"]}
  - {name: b, backend_user: g, backends: ["h:1"]}`: "clusters[1].backends[0]",
		`users: [{user: a}, {user: a}]
clusters: [{name: main, backend_user: g, backends: ["h:1"]}]`: "users[1].user",
		`users: [{user: app, transaction_mode: twopc}]
clusters: [{name: main, backend_user: g, backends: ["h:1"]}]`: "users[0].transaction_mode",
		`users: [{user: app, transaction_mode: xa}]
clusters: [{name: main, backend_user: g, backends: ["h:1"]}]`: "users[0].transaction_mode",
		`users: [{user: app}]
twopc: {log_cluster: nope}
clusters: [{name: main, backend_user: g, backends: ["h:1"]}]`: "twopc.log_cluster",
		`users: [{user: app}]
clusters:
  - {name: a, backend_user: g, backends: ["h:1"], databases: [demo]}
  - {name: b, backend_user: g, backends: ["h:2"], databases: [billing, demo]}`: "clusters[1].databases[1]",
		`users: [{user: app}]
clusters: [{name: main, backend_user: g, backends: ["h:1"], databases: ["a.b"]}]`: "clusters[0].databases[0]",
	}
	for in, key := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("config %q: error %v does not name %s", in, err, key)
		}
	}
}

// A non-loopback http_listen needs a token, or an explicit insecure.
func TestHTTPListenNeedsToken(t *testing.T) {
	base := "users: [{user: u}]\nclusters: [{name: main, backend_user: g, backends: ['127.0.0.1:3306']}]\n"
	for extra, ok := range map[string]bool{
		"http_listen: 127.0.0.1:15000\n":                       true,
		"http_listen: '[::1]:15000'\n":                         true,
		"http_listen: localhost:15000\n":                       true,
		"http_listen: off\n":                                   true,
		"http_listen: 0.0.0.0:15000\n":                         false,
		"http_listen: ':15000'\n":                              false,
		"http_listen: 10.0.0.5:15000\n":                        false,
		"http_listen: 0.0.0.0:15000\nhttp: {token: t}\n":       true,
		"http_listen: 0.0.0.0:15000\nhttp: {insecure: true}\n": true,
		"http: {cert: a.pem}\n":                                false,
	} {
		_, err := Parse([]byte(base + extra))
		if (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", extra, err, ok)
		}
	}
	t.Setenv("DG_HTTP_TOKEN", "from-env")
	c, err := Parse([]byte(base + "http_listen: 0.0.0.0:15000\nhttp: {token_env: DG_HTTP_TOKEN}\n"))
	if err != nil || c.HTTP.Token != "from-env" {
		t.Fatalf("token_env: %v, token %q", err, c.HTTP.Token)
	}
}

// gateway owner --http-listen follows http_listen's rules, named by its
// flag; off and empty mean no HTTP.
func TestCheckHTTPListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		http HTTP
		ok   bool
	}{
		{"", HTTP{}, true},
		{"off", HTTP{}, true},
		{"127.0.0.1:15001", HTTP{}, true},
		{"0.0.0.0:15001", HTTP{}, false},
		{"0.0.0.0:15001", HTTP{Token: "t"}, true},
		{"0.0.0.0:15001", HTTP{Insecure: true}, true},
		{"15001", HTTP{}, false},
		{"127.0.0.1:15001", HTTP{Cert: "c.pem"}, false},
	} {
		c := &Config{HTTP: tc.http}
		err := c.CheckHTTPListen("--http-listen", tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("%q %+v: %v, want ok %v", tc.addr, tc.http, err, tc.ok)
		}
		if err != nil && tc.http.Cert == "" && !strings.Contains(err.Error(), "--http-listen") {
			t.Errorf("%q: %v does not name the flag", tc.addr, err)
		}
	}
}

// io_loops: 0 by default (goroutines), a number of loops when set, and
// refused below 0 or above maxIOLoops with the key named.
func TestIOLoops(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil || c.IOLoops != 0 {
		t.Fatalf("default io_loops %d, %v; want 0", c.IOLoops, err)
	}
	if c, err := Parse([]byte("io_loops: 2\n" + minimal)); err != nil || c.IOLoops != 2 {
		t.Fatalf("io_loops: 2 parsed as %v, %v", c, err)
	}
	for _, bad := range []string{"-1", "257"} {
		if _, err := Parse([]byte("io_loops: " + bad + "\n" + minimal)); err == nil || !strings.Contains(err.Error(), "io_loops") {
			t.Errorf("io_loops: %s: %v, want an error naming io_loops", bad, err)
		}
	}
}
