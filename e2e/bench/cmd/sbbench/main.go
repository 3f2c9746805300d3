package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/internal/ioloop"
)

// settings are the knobs of one benchmark run.
type settings struct {
	Quick   bool `json:"quick"`
	Seconds int  `json:"seconds_per_run"`
	// Warmup is the unmeasured sysbench run of every target before a
	// case's first round, in seconds (0: none), as floorbench.sh does:
	// pools fill, the Go heap grows and ProxySQL connects before a
	// measured window starts.
	Warmup     int    `json:"warmup_s"`
	Rounds     int    `json:"rounds"`
	Tables     int    `json:"tables"`
	TableSize  int    `json:"table_size"`
	CaseFilter string `json:"case_filter,omitempty"`
	CPUProfile bool   `json:"gateway_cpuprofile"`
	Gateway    string `json:"gateway_binary"`
	Gorelay    string `json:"gorelay_binary"`
	// LuaDir holds the repository's sysbench scripts (hotrow.lua).
	LuaDir string `json:"lua_dir"`
	// Rate is the queries per second of the equal-rate case (0: no such
	// case): every target gets the same load, so mariadbd's CPU per
	// query compares targets without the rate effect (MariaDB spends
	// more per query when it serves fewer).
	Rate int `json:"equal_rate"`
	// BurstQuiet is the quiet phase of the pool_order_burst case (8
	// clients before the burst of 64); see poolorder.go.
	BurstQuiet time.Duration `json:"pool_order_burst_quiet_ns"`
	// BurstRate is sysbench's --rate in that quiet phase (0: unlimited).
	BurstRate int `json:"pool_order_burst_quiet_rate"`
	// Targets are what sysbench runs against in every round of a case, in
	// this order: direct first, then the proxies and peers.
	Targets []string `json:"targets"`
	Peers   []peer   `json:"peers,omitempty"`
	// ProxySQLUp is the ProxySQL anchor's up.sh (-proxysql-up,
	// PROXYSQL_UP), "" when none is built; ProxySQLBin the binary it
	// runs (PROXYSQL_BIN, "" for up.sh's default).
	ProxySQLUp  string `json:"proxysql_up,omitempty"`
	ProxySQLBin string `json:"proxysql_bin,omitempty"`
	ResultsDir  string `json:"-"`
}

// Built-in targets. Peers add their own names.
const (
	targetDirect  = "direct"  // the MariaDB primary
	targetHAProxy = "haproxy" // HAProxy in TCP mode in front of the primary
	targetGorelay = "gorelay" // e2e/bench/cmd/gorelay in front of the primary
	targetGateway = "gateway" // the gateway of the case (main, mux or replicas)
	// targetGatewayLoop is the gateway of the case with io_loops: 1 (its
	// sessions on an io_uring loop). A default target where the kernel
	// allows io_uring.
	targetGatewayLoop = "gateway-loop"
	// targetGatewayPipe is the gateway of the case with pipelining:
	// {connections: 2} (docs/sessions.md, "Pipelined reads"). Not a
	// default target: pipelining is off by default.
	targetGatewayPipe = "gateway-pipe"
)

// builtinTargets run when -targets is not given, and gateway-loop too
// where io_uring works; knownTargets may be given.
var (
	builtinTargets = []string{targetDirect, targetHAProxy, targetGorelay, targetGateway}
	knownTargets   = append(slices.Clone(builtinTargets), targetGatewayLoop, targetGatewayPipe, targetProxySQL)
)

// peer is an external endpoint the user runs (a ProxySQL, ...), which must
// forward to the benchmark's primary.
type peer struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"`
	User     string `json:"user"`
	Password string `json:"-"`
	// PID is the peer's process, whose CPU is measured like a proxy's; 0:
	// not measured.
	PID int `json:"pid,omitempty"`
}

func (p peer) target() target { return target{addr: p.Addr, user: p.User, password: p.Password} }

// benchCase is one comparison: a sysbench workload at a thread count and
// prepared-statement mode, run directly and through one of the gateways.
type benchCase struct {
	Name     string `json:"name"`
	Workload string `json:"workload"`
	PSMode   string `json:"ps_mode"`
	Threads  int    `json:"threads"`
	// Targets run in every round, in this order; direct is first.
	Targets []string `json:"targets"`
	// Gateway is the gateway of the gateway target: "main" (pool 64),
	// "mux" (pool 32), "replicas" (pool 64 per backend, replica_reads on),
	// "hotrow" (hot_row on) or "consolidation" (consolidation on).
	Gateway  string `json:"gateway"`
	PoolSize int    `json:"gateway_pool_size"`
	// ReplicaReads: the gateway sends reads to the replica (replica_reads:
	// on), so it uses two mariadbd while direct uses the
	// primary alone.
	ReplicaReads bool `json:"replica_reads"`
	// HotRows marks a hot-row case: the workload is e2e/bench/lua/hotrow.lua
	// (64 threads updating a few rows), sysbench reports the 99th
	// percentile, and each run records MariaDB's Innodb_row_lock_waits and
	// Threads_running. HotRowProtection turns the gateway's hot_row on.
	HotRows          bool `json:"hot_rows,omitempty"`
	HotRowProtection bool `json:"hot_row_protection,omitempty"`
	// HotReads marks a consolidation case: the workload is
	// e2e/bench/lua/consolidation.lua (64 threads of point selects of 10
	// rows), and each run records the rise of the primary's Com_select.
	// Consolidation turns the gateway's consolidation on.
	HotReads      bool `json:"hot_reads,omitempty"`
	Consolidation bool `json:"consolidation,omitempty"`
	// SkipTrx runs sysbench with --skip-trx=on (every target): every query
	// in autocommit mode. The gateway keeps reads inside a transaction on
	// the primary, so oltp_read_only's BEGIN ... COMMIT would never reach
	// the replica.
	SkipTrx bool `json:"sysbench_skip_trx"`
	// Rate, when not zero, is sysbench's --rate: events (here queries)
	// per second, the same for every target.
	Rate int `json:"rate,omitempty"`
	// RoundsFactor, when above 1, multiplies the rounds of the case.
	RoundsFactor int `json:"rounds_factor,omitempty"`
	// PoolOrderBurst marks the pool_order_burst case (poolorder.go): its
	// targets are direct and a fresh gateway per pool order (gateway-
	// round_robin, gateway-lifo), each running a quiet phase of 8 clients
	// and then a burst of 64; it runs one round whatever -rounds says.
	PoolOrderBurst bool `json:"pool_order_burst,omitempty"`
}

// rounds is how many rounds c runs when every case runs base rounds.
func (c benchCase) rounds(base int) int {
	if c.PoolOrderBurst {
		return 1
	}
	return base * max(c.RoundsFactor, 1)
}

// rateRoundsFactor multiplies the rounds of the equal-rate case. Its
// column of interest, mariadbd's CPU per query, moves by ±10 % from round
// to round on a shared 2-core machine, as much as the gaps it is read for;
// its runs are cheap next to the whole bench.
const rateRoundsFactor = 3

// Pool sizes of the gateways. The multiplexing case puts muxThreads
// clients on muxPoolSize backend connections.
const (
	mainPoolSize = 64
	muxPoolSize  = 32
	muxThreads   = 512
)

// defaultRate is the equal-rate case's queries per second: about half of
// what the slowest target (a Go relay) served at 8 threads on the 2-core
// machines this runs on.
const defaultRate = 10000

// hotRowThreads is the client thread count of the hot-row cases.
const hotRowThreads = 64

// replicaThreads is the client thread count of the replica-read cases.
const replicaThreads = 8

// maxReplicaLag is the replicas gateway's max_replica_lag (the gateway's
// default, written out so the bench can check the replica qualifies).
const maxReplicaLag = 10 * time.Second

// backendGrants are the backend account's privileges, on the primary and
// the replica. Not ALL PRIVILEGES: that includes READ_ONLY ADMIN, which
// lets writes through read_only on the replica. REPLICA MONITOR lets the
// gateway's probes read the replication lag.
const backendGrants = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, CREATE TEMPORARY TABLES, " +
	"LOCK TABLES, EXECUTE, PROCESS, REPLICA MONITOR ON *.*"

// MariaDB flags on top of mariadbtest's defaults (which already set
// max_connections=2000), for the primary and the replica. The data set
// fits the buffer pool; redo is flushed once a second rather than at every
// commit and the binary log (on the primary, for replication; row format)
// never, so oltp_read_write measures the query path instead of the disk's
// fsync latency. The replica runs without a binary log.
var mariadbArgs = []string{
	"--sync-binlog=0",
	"--innodb-buffer-pool-size=256M",
	"--innodb-log-file-size=256M",
	"--innodb-flush-log-at-trx-commit=2",
	"--max-connections=2000",
	"--max-prepared-stmt-count=1048576",
	"--thread-cache-size=1024",
}

func main() { os.Exit(run()) }

func run() (code int) {
	s, err := parseSettings(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbbench:", err)
		return 2
	}
	cases, err := buildCases(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbbench:", err)
		return 2
	}
	if slices.Contains(s.Targets, targetGatewayLoop) && !ioUring() {
		logf("io_uring is not available here: gateway-loop runs its sessions on goroutines, as gateway does")
	}

	// The first SIGINT/SIGTERM/SIGHUP cancels ctx: the running sysbench is
	// killed, partial results are written and everything is stopped. Later
	// signals only say so; they must not kill sbbench half-way through its
	// teardown (its children would get SIGKILL and leave their files).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		first := true
		for sig := range sigs {
			if first {
				logf("got %v: stopping sysbench, writing partial results, stopping the gateway and MariaDB", sig)
				cancel()
				first = false
				continue
			}
			logf("got %v: already stopping, please wait", sig)
		}
	}()

	b := &bench{s: s, cases: cases, clk: clockTicks(), started: time.Now()}
	err = b.main(ctx)
	if b.dir != "" {
		if werr := b.writeResults(err); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbbench:", err)
		return 1
	}
	if ctx.Err() != nil {
		return 130
	}
	return 0
}

// parseSettings reads flags; each flag's default comes from its BENCH_*
// environment variable, then from the quick or full preset.
func parseSettings(args []string, getenv func(string) string) (settings, error) {
	envBool := func(k string) bool {
		v := strings.ToLower(strings.TrimSpace(getenv(k)))
		return v != "" && v != "0" && v != "false" && v != "no"
	}
	var s settings
	quick := envBool("BENCH_QUICK")
	for _, a := range args { // -quick decides the presets below
		if a == "-quick" || a == "--quick" || a == "-quick=true" || a == "--quick=true" {
			quick = true
		}
	}
	seconds, rounds, tableSize := 20, 2, 100000
	if quick {
		seconds, rounds, tableSize = 8, 2, 10000
	}
	envInt := func(k string, def int) (int, error) {
		v := strings.TrimSpace(getenv(k))
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s=%q: want a positive integer", k, v)
		}
		return n, nil
	}
	var err error
	var errs []error
	if seconds, err = envInt("BENCH_TIME", seconds); err != nil {
		errs = append(errs, err)
	}
	if rounds, err = envInt("BENCH_ROUNDS", rounds); err != nil {
		errs = append(errs, err)
	}
	warmup, err := envWarmup(getenv("BENCH_WARMUP"))
	if err != nil {
		errs = append(errs, err)
	}
	tables, err := envInt("BENCH_TABLES", 4)
	if err != nil {
		errs = append(errs, err)
	}
	if tableSize, err = envInt("BENCH_TABLE_SIZE", tableSize); err != nil {
		errs = append(errs, err)
	}
	rate, err := envInt("BENCH_RATE", defaultRate)
	if err != nil {
		errs = append(errs, err)
	}
	burstRate, err := envInt("BENCH_BURST_RATE", defaultBurstRate)
	if err != nil {
		errs = append(errs, err)
	}
	quiet := defaultBurstQuiet
	if quick {
		quiet = quickBurstQuiet
	}
	if v := strings.TrimSpace(getenv("BENCH_BURST_QUIET")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minBurstQuiet {
			errs = append(errs, fmt.Errorf("BENCH_BURST_QUIET=%q: want a duration of at least %s, e.g. 6m", v, minBurstQuiet))
		}
		quiet = d
	}
	if err := errors.Join(errs...); err != nil {
		return s, err
	}

	fs := flag.NewFlagSet("sbbench", flag.ContinueOnError)
	fs.BoolVar(&s.Quick, "quick", quick, "short run: point_select and read_write, 8 threads, no multiplexing or replica-read cases (env BENCH_QUICK=1)")
	fs.IntVar(&s.Seconds, "time", seconds, "seconds per sysbench run (env BENCH_TIME; 20, quick 8)")
	fs.IntVar(&s.Warmup, "warmup", warmup, "seconds of unmeasured sysbench per target before each case's first round; 0 for none (env BENCH_WARMUP)")
	fs.IntVar(&s.Rounds, "rounds", rounds, "rounds per case; each round runs every target once, direct first (env BENCH_ROUNDS)")
	fs.IntVar(&s.Tables, "tables", tables, "sysbench tables (env BENCH_TABLES)")
	fs.IntVar(&s.TableSize, "table-size", tableSize, "rows per table (env BENCH_TABLE_SIZE; 100000, quick 10000)")
	fs.StringVar(&s.CaseFilter, "cases", getenv("BENCH_CASES"), "run only cases whose name matches this regexp, e.g. 'point_select' or 'replicas' (env BENCH_CASES)")
	fs.BoolVar(&s.CPUProfile, "cpuprofile", envBool("BENCH_CPUPROFILE"), "pass --cpuprofile to the gateways; profiles go to the results dir (env BENCH_CPUPROFILE=1)")
	fs.StringVar(&s.Gateway, "gateway", "bin/gateway", "gateway binary")
	fs.StringVar(&s.Gorelay, "gorelay", "bin/gorelay", "gorelay binary (go build -o bin/gorelay ./e2e/bench/cmd/gorelay)")
	fs.IntVar(&s.Rate, "rate", rate, "queries per second of the equal-rate point_select case, below what every target sustains; 0 leaves the case out (env BENCH_RATE)")
	fs.DurationVar(&s.BurstQuiet, "burst-quiet", quiet, "quiet phase of the pool_order_burst case: 8 clients for this long, then the burst of 64; below 6m the gateways' idle_timeout shrinks with it (env BENCH_BURST_QUIET; 6m, quick 1m)")
	fs.IntVar(&s.BurstRate, "burst-rate", burstRate, "queries per second of the pool_order_burst case's quiet phase, for every target; 0 unlimited (env BENCH_BURST_RATE)")
	fs.StringVar(&s.LuaDir, "lua", "e2e/bench/lua", "directory of the repository's sysbench scripts (hotrow.lua)")
	targets := fs.String("targets", getenv("BENCH_TARGETS"), "comma-separated targets run in every round: direct (always run), haproxy, gorelay, gateway and peer names; "+
		"default direct,haproxy,gorelay,gateway, gateway-loop where io_uring works, and every peer (env BENCH_TARGETS)")
	peers := fs.String("peers", getenv("BENCH_PEERS"), "external endpoints forwarding to the benchmark's primary, as name=[user:password@]host:port[#pid],...; "+
		"credentials default to gateway:secret, #pid measures that process's CPU (env BENCH_PEERS)")
	pxUp := fs.String("proxysql-up", getenv("PROXYSQL_UP"), "the ProxySQL anchor's up.sh (../shared/anchors/proxysql): ProxySQL runs as the proxysql target, in front of the primary (env PROXYSQL_UP)")
	fs.StringVar(&s.ProxySQLBin, "proxysql-bin", getenv("PROXYSQL_BIN"), "the proxysql binary up.sh starts; default bin/proxysql beside up.sh (env PROXYSQL_BIN)")
	fs.StringVar(&s.ResultsDir, "results", "results", "parent of the results/<timestamp> directory")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if s.Warmup < 0 || s.Seconds < 1 || s.Rounds < 1 || s.Tables < 1 || s.TableSize < 1 {
		return s, errors.New("-time, -rounds, -tables and -table-size must be positive, -warmup not negative")
	}
	if s.Rate < 0 {
		return s, errors.New("-rate must not be negative")
	}
	if s.BurstRate < 0 {
		return s, errors.New("-burst-rate must not be negative")
	}
	if s.BurstQuiet < minBurstQuiet {
		return s, fmt.Errorf("-burst-quiet must be at least %s", minBurstQuiet)
	}
	if s.Peers, err = parsePeers(*peers); err != nil {
		return s, fmt.Errorf("-peers: %w", err)
	}
	return s, s.setTargets(*targets, *pxUp)
}

// envWarmup reads BENCH_WARMUP: seconds, 0 for none, 5 when unset.
func envWarmup(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 5, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("BENCH_WARMUP=%q: want seconds, 0 for none", v)
	}
	return n, nil
}

// setTargets resolves the ProxySQL anchor's up.sh (pxUp) and -targets
// (targets) into s. A peer named proxysql replaces the anchor's ProxySQL.
func (s *settings) setTargets(targets, pxUp string) error {
	s.ProxySQLUp = proxySQLScript(pxUp, s.ProxySQLBin)
	peerPX := slices.ContainsFunc(s.Peers, func(p peer) bool { return p.Name == targetProxySQL })
	if peerPX {
		s.ProxySQLUp = ""
	}
	var err error
	if s.Targets, err = parseTargets(targets, s.Peers, ioUring(), s.ProxySQLUp != ""); err != nil {
		return fmt.Errorf("-targets: %w", err)
	}
	if slices.Contains(s.Targets, targetProxySQL) && s.ProxySQLUp == "" && !peerPX {
		return fmt.Errorf("-targets: %s", proxySQLAbsent)
	}
	return nil
}

var peerName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// parsePeers reads -peers: name=[user:password@]host:port[#pid], comma
// separated.
func parsePeers(v string) ([]peer, error) {
	var out []peer
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, rest, ok := strings.Cut(item, "=")
		if !ok || !peerName.MatchString(name) {
			return nil, fmt.Errorf("%q: want name=[user:password@]host:port[#pid], the name of letters, digits, _ and -", item)
		}
		if (name != targetProxySQL && slices.Contains(knownTargets, name)) || slices.ContainsFunc(out, func(p peer) bool { return p.Name == name }) {
			return nil, fmt.Errorf("%q: the name %s is taken", item, name)
		}
		p := peer{Name: name, User: "gateway", Password: "secret"}
		if i := strings.LastIndexByte(rest, '#'); i >= 0 {
			pid, err := strconv.Atoi(rest[i+1:])
			if err != nil || pid < 1 {
				return nil, fmt.Errorf("%q: #%s is not a PID", item, rest[i+1:])
			}
			p.PID, rest = pid, rest[:i]
		}
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			cred := rest[:i]
			p.User, p.Password, _ = strings.Cut(cred, ":")
			rest = rest[i+1:]
			if p.User == "" {
				return nil, fmt.Errorf("%q: empty user", item)
			}
		}
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%q: %q is not host:port", item, rest)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: bad port %q", item, port)
		}
		p.Addr = rest
		out = append(out, p)
	}
	return out, nil
}

// parseTargets reads -targets; empty means the built-in targets (and
// gateway-loop with loops: io_uring works here; proxysql with proxysql: a
// ProxySQL build is configured) and every peer. direct always runs,
// first: the ratios are to it.
func parseTargets(v string, peers []peer, loops, proxysql bool) ([]string, error) {
	var names []string
	if strings.TrimSpace(v) == "" {
		names = slices.Clone(builtinTargets)
		if loops {
			names = append(names, targetGatewayLoop)
		}
		if proxysql {
			names = append(names, targetProxySQL)
		}
		for _, p := range peers {
			names = append(names, p.Name)
		}
	} else {
		names = strings.Split(v, ",")
	}
	out := []string{targetDirect}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || slices.Contains(out, n) {
			continue
		}
		if !slices.Contains(knownTargets, n) && !slices.ContainsFunc(peers, func(p peer) bool { return p.Name == n }) {
			return nil, fmt.Errorf("unknown target %q: want direct, haproxy, gorelay, gateway, gateway-loop, gateway-pipe, proxysql or a name from -peers", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// protectionCases are the two cases of a protection: hotRowThreads
// threads running e2e/bench/lua/<name>.lua, direct and through the main
// gateway ("<name> t=64", or "<name> off t=64" for consolidation, whose
// on case has the plain name), then through gateway gw with the
// protection on; set marks each case.
func protectionCases(name, gw, psMode, luaDir string, set func(c *benchCase, on bool)) []benchCase {
	var out []benchCase
	for _, on := range []bool{false, true} {
		c := benchCase{
			Workload: filepath.Join(luaDir, name+".lua"), PSMode: psMode, Threads: hotRowThreads,
			Targets: []string{targetDirect, targetGateway}, Gateway: "main", PoolSize: mainPoolSize,
		}
		switch {
		case on && name == "hotrow":
			c.Name, c.Gateway = fmt.Sprintf("hotrow protected t=%d", hotRowThreads), gw
		case on:
			c.Name, c.Gateway = fmt.Sprintf("%s t=%d", name, hotRowThreads), gw
		case name == "hotrow":
			c.Name = fmt.Sprintf("hotrow t=%d", hotRowThreads)
		default:
			c.Name = fmt.Sprintf("%s off t=%d", name, hotRowThreads)
		}
		set(&c, on)
		out = append(out, c)
	}
	return out
}

// buildCases lists the cases of a full or quick run, filtered by
// s.CaseFilter, each with the targets it runs. The replica-read cases
// follow the read_only ones: no case before them writes, so the replica has
// nothing to catch up on. They run direct and the gateway only (a relay or
// peer forwards to the primary: it would repeat the read_only rows), and
// not at all without the gateway target. Quick runs leave them out (with
// them a quick run would take minutes more); -cases replicas runs them
// alone.
func buildCases(s settings) ([]benchCase, error) {
	workloads := []string{"oltp_point_select", "oltp_read_only", "oltp_read_write"}
	threads := []int{8, 64}
	targets := s.Targets
	if len(targets) == 0 {
		targets = builtinTargets
	}
	mux, replicas := true, slices.Contains(targets, targetGateway)
	if s.Quick {
		workloads = []string{"oltp_point_select", "oltp_read_write"}
		threads = []int{8}
		mux, replicas = false, false
	}
	var all []benchCase
	for _, w := range workloads {
		for _, t := range threads {
			for _, ps := range []string{"auto", "disable"} {
				all = append(all, benchCase{
					Name:     fmt.Sprintf("%s ps=%s t=%d", strings.TrimPrefix(w, "oltp_"), ps, t),
					Workload: w, PSMode: ps, Threads: t, Targets: targets, Gateway: "main", PoolSize: mainPoolSize,
				})
			}
		}
		if w == "oltp_read_only" && replicas {
			for _, ps := range []string{"auto", "disable"} {
				all = append(all, benchCase{
					Name:     fmt.Sprintf("read_only_replicas ps=%s t=%d", ps, replicaThreads),
					Workload: "oltp_read_only", PSMode: ps, Threads: replicaThreads, Targets: []string{targetDirect, targetGateway},
					Gateway: "replicas", PoolSize: mainPoolSize, ReplicaReads: true, SkipTrx: true,
				})
			}
		}
	}
	if !s.Quick && s.Rate > 0 {
		// The same load for every target: mariadbd's CPU per query
		// without the rate effect.
		all = append(all, benchCase{
			Name:     fmt.Sprintf("point_select ps=disable t=8 rate=%d", s.Rate),
			Workload: "oltp_point_select", PSMode: "disable", Threads: 8, Targets: targets, Gateway: "main", PoolSize: mainPoolSize,
			Rate: s.Rate, RoundsFactor: rateRoundsFactor,
		})
	}
	if !s.Quick && slices.Contains(targets, targetGateway) {
		// Hot rows, then hot reads: direct against the gateway without,
		// then with, the protection.
		all = append(all, protectionCases("hotrow", "hotrow", "auto", s.LuaDir, func(c *benchCase, on bool) {
			c.HotRows, c.HotRowProtection = true, on
		})...)
		all = append(all, protectionCases("consolidation", "consolidation", "disable", s.LuaDir, func(c *benchCase, on bool) {
			c.HotReads, c.Consolidation = true, on
		})...)
	}
	if mux {
		for _, ps := range []string{"auto", "disable"} {
			all = append(all, benchCase{
				Name:     fmt.Sprintf("mux point_select ps=%s t=%d pool=%d", ps, muxThreads, muxPoolSize),
				Workload: "oltp_point_select", PSMode: ps, Threads: muxThreads, Targets: targets, Gateway: "mux", PoolSize: muxPoolSize,
			})
		}
	}
	if slices.Contains(targets, targetGateway) {
		// Last: its quiet phase is minutes long, and it starts gateways
		// of its own.
		all = append(all, poolOrderCase(s))
	}
	if s.CaseFilter == "" {
		return all, nil
	}
	re, err := regexp.Compile(s.CaseFilter)
	if err != nil {
		return nil, fmt.Errorf("-cases: %w", err)
	}
	var out []benchCase
	for _, c := range all {
		if re.MatchString(c.Name) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		if s.Quick {
			return nil, fmt.Errorf("-cases %q matches none of the quick run's cases (the read_only, 64-thread, mux, replica-read and hot-row cases need a full run: unset BENCH_QUICK)", s.CaseFilter)
		}
		if !replicas {
			return nil, fmt.Errorf("-cases %q matches none of the cases (the replica-read, hot-row and pool_order_burst cases need the gateway target)", s.CaseFilter)
		}
		return nil, fmt.Errorf("-cases %q matches none of the cases", s.CaseFilter)
	}
	return out, nil
}

// bench is the state of one benchmark run.
type bench struct {
	s       settings
	cases   []benchCase
	clk     int64
	started time.Time

	dir     string // results/<timestamp>
	env     map[string]string
	db      *mariadbtest.Server // the primary
	replica *mariadbtest.Server // GTID replica of db
	// replicating is whether the replica's replication threads run: only
	// for the replica-read cases (see syncReplica).
	replicating bool
	// proxies are the processes sbbench runs in front of MariaDB, by
	// name: gateway-main, gateway-mux, gateway-replicas, haproxy, gorelay.
	proxies map[string]*proxyProc
	pxsql   *proxySQL // the proxysql target; nil without it
	// perf: proxies' system calls are counted with perf (perfEvent);
	// without it, /proc/PID/io's read/write-family calls only.
	perf     bool
	haproxy  string // binary
	runs     []runResult
	prepareS float64
	overhead []float64 // wall time beyond --time of successful runs, for the ETA
	warnings []string  // problems that did not stop the benchmark
}

// warn logs a problem that does not invalidate the measurements (a process
// that needed SIGKILL to stop, ...) and keeps it for results.json.
func (b *bench) warn(err error) {
	logf("warning: %v", err)
	b.warnings = append(b.warnings, err.Error())
}

// main runs the whole benchmark. Processes it starts are stopped before it
// returns, whatever happens.
func (b *bench) main(ctx context.Context) (err error) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		return errors.New("sysbench is not installed: run e2e/local/deps.sh --with-bench (as root)")
	}
	if err := b.findBinaries(); err != nil {
		return err
	}
	if err := b.makeDir(); err != nil {
		return err
	}
	raiseFileLimit()

	totalRuns := b.totalRuns()
	logf("results: %s", b.dir)
	logf("%d cases x %d rounds x targets %s = %d runs of %ds; %d tables x %d rows; about %s in all",
		len(b.cases), b.s.Rounds, strings.Join(b.s.Targets, ", "), totalRuns, b.s.Seconds, b.s.Tables, b.s.TableSize,
		fmtDuration(b.remaining(1)+10*time.Second))
	for _, p := range b.s.Peers {
		if !slices.Contains(b.s.Targets, p.Name) {
			logf("peer %s is not in -targets: not run", p.Name)
		}
	}

	logf("starting MariaDB: a primary and a replica")
	users := []mariadbtest.User{{Name: "gateway", Password: "secret", Grants: backendGrants}}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The primary binlogs (mariadbtest's default: row format, GTIDs) so
	// the replica can follow it.
	b.db, err = mariadbtest.Start(startCtx, mariadbtest.Options{ExtraArgs: mariadbArgs, Users: users})
	if err != nil {
		return fmt.Errorf("start MariaDB: %w", err)
	}
	defer b.stopServer("MariaDB primary", b.db, "mariadbd-error.log")
	b.replica, err = mariadbtest.Start(startCtx, mariadbtest.Options{NoBinlog: true, ExtraArgs: mariadbArgs, Users: users})
	if err != nil {
		return fmt.Errorf("start the MariaDB replica: %w", err)
	}
	defer b.stopServer("MariaDB replica", b.replica, "mariadbd-replica-error.log")
	// Before anything is written: the replica gets only what the primary
	// binlogs from now on.
	if err := b.replica.StartReplication(startCtx, b.db); err != nil {
		return fmt.Errorf("start replication: %w", err)
	}
	b.replicating = true
	cancel()
	if err := b.createDatabase(); err != nil {
		return err
	}
	logf("MariaDB %s: primary on %s (pid %d, dir %s), replica on %s (pid %d, dir %s)", b.env["mariadbd"],
		b.db.Addr(), b.db.PID(), b.db.Dir, b.replica.Addr(), b.replica.PID(), b.replica.Dir)
	b.collectEnv()

	b.proxies = map[string]*proxyProc{}
	defer func() {
		// The gateways first (each with and without io_loops: every
		// one drains and writes its profile), then the relays.
		names := slices.Sorted(maps.Keys(b.proxies))
		slices.SortStableFunc(names, func(a, c string) int {
			return cmpBool(a == targetGorelay || a == targetHAProxy, c == targetGorelay || c == targetHAProxy)
		})
		for _, name := range names {
			if g := b.proxies[name]; g.running() {
				logf("stopping %s (pid %d)", name, g.pid())
				if serr := g.stop(); serr != nil {
					b.warn(serr)
				}
			}
		}
		if serr := b.pxsql.stop(); serr != nil {
			b.warn(serr)
		}
	}()
	if err := b.startProxySQL(ctx); err != nil {
		return err
	}

	if err := b.waitPeers(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	if err := b.prepareHotRows(ctx); err != nil {
		return err
	}

	runNo := 0
	for ci, c := range b.cases {
		if err := b.syncReplica(ctx, c.ReplicaReads); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := b.warmUp(ctx, c); err != nil {
			return err
		}
		rounds := c.rounds(b.s.Rounds)
		for round := 1; round <= rounds; round++ {
			for _, tgt := range c.Targets {
				if ctx.Err() != nil {
					return nil
				}
				runNo++
				logf("[%d/%d] case %d/%d %s: round %d/%d %s (ETA %s)",
					runNo, totalRuns, ci+1, len(b.cases), c.Name, round, rounds, tgt, fmtDuration(b.remaining(runNo)))
				var r runResult
				var err error
				if c.PoolOrderBurst {
					r, err = b.runPoolOrder(ctx, c, tgt, runNo)
				} else {
					r, err = b.runOne(ctx, c, tgt, round, runNo)
				}
				if err != nil {
					return err
				}
				if r.Interrupted {
					return nil
				}
				b.runs = append(b.runs, r)
				logf("    %s", r.brief())
				if err := b.writeJSON(nil); err != nil {
					return err
				}
				if b.db.PID() == 0 {
					return errors.New("the primary mariadbd is no longer running (see mariadbd-error.log in the results dir)")
				}
				if b.replica.PID() == 0 {
					return errors.New("the replica mariadbd is no longer running (see mariadbd-replica-error.log in the results dir)")
				}
				time.Sleep(500 * time.Millisecond) // let the last run's connections close
			}
		}
	}
	return nil
}

// warmUp runs sysbench for s.Warmup seconds against every target of c,
// unmeasured (round 0, its output kept as ...-r0.txt), before c's first
// round. Not for the cases that measure a transition (pool order) or
// count server events over a run (hot rows, consolidation).
func (b *bench) warmUp(ctx context.Context, c benchCase) error {
	if b.s.Warmup == 0 || c.PoolOrderBurst || c.HotRows || c.HotReads {
		return nil
	}
	seconds := b.s.Seconds
	b.s.Seconds = b.s.Warmup
	defer func() { b.s.Seconds = seconds }()
	for _, tgt := range c.Targets {
		if ctx.Err() != nil {
			return nil
		}
		r, err := b.runOne(ctx, c, tgt, 0, 0)
		if err != nil {
			return err
		}
		if !r.OK && !r.Interrupted {
			logf("    warm-up of %s failed: %s", tgt, r.brief())
		}
	}
	logf("case %s: warmed up (%ds per target, not recorded)", c.Name, b.s.Warmup)
	return nil
}

// findBinaries checks that the binaries of the selected targets exist and
// makes their paths absolute.
func (b *bench) findBinaries() error {
	checked := map[*string]bool{} // gateway, gateway-loop and gateway-pipe share one
	for _, bin := range []struct {
		target, flag string
		path         *string
		build        string
	}{
		{targetGateway, "-gateway", &b.s.Gateway, "make build"},
		{targetGatewayLoop, "-gateway", &b.s.Gateway, "make build"},
		{targetGatewayPipe, "-gateway", &b.s.Gateway, "make build"},
		{targetGorelay, "-gorelay", &b.s.Gorelay, "go build -o bin/gorelay ./e2e/bench/cmd/gorelay"},
	} {
		if !slices.Contains(b.s.Targets, bin.target) || checked[bin.path] {
			continue
		}
		checked[bin.path] = true
		abs, err := filepath.Abs(*bin.path)
		if err != nil {
			return err
		}
		if st, err := os.Stat(abs); err != nil || st.IsDir() {
			return fmt.Errorf("%s binary %s (%s) is missing: run %s", bin.target, abs, bin.flag, bin.build)
		}
		*bin.path = abs
	}
	if slices.Contains(b.s.Targets, targetHAProxy) {
		// Debian installs it in /usr/sbin, outside a normal user's PATH.
		path, err := exec.LookPath("haproxy")
		if err != nil {
			if _, serr := os.Stat("/usr/sbin/haproxy"); serr != nil {
				return errors.New("haproxy is not installed: run e2e/local/deps.sh --with-bench (as root), or leave it out of -targets")
			}
			path = "/usr/sbin/haproxy"
		}
		b.haproxy = path
	}
	return nil
}

// peerWait is how long waitPeers waits for each peer to reach the primary.
const peerWait = 3 * time.Minute

// waitPeers waits until every peer target logs in and forwards to the
// benchmark's primary (its @@datadir is the primary's): the primary's
// port is new in every run, so a peer must be pointed at it after sbbench
// has started MariaDB and printed its address.
func (b *bench) waitPeers(ctx context.Context) error {
	want := filepath.Clean(b.db.DataDir)
	for _, p := range b.s.Peers {
		if !slices.Contains(b.s.Targets, p.Name) {
			continue
		}
		if p.PID > 0 {
			if _, err := cpuTicks(p.PID); err != nil {
				return fmt.Errorf("peer %s: pid %d: %w", p.Name, p.PID, err)
			}
		}
		logf("peer %s on %s: waiting up to %s until it forwards to the primary %s", p.Name, p.Addr, peerWait, b.db.Addr())
		if err := waitForward(ctx, p.target(), want, peerWait); err != nil {
			return fmt.Errorf("peer %s on %s does not forward to the primary %s: %w", p.Name, p.Addr, b.db.Addr(), err)
		}
		logf("peer %s forwards to the primary", p.Name)
	}
	return nil
}

// waitForward queries SELECT @@datadir through t every second until it
// answers want, ctx ends or limit passes.
func waitForward(ctx context.Context, t target, want string, limit time.Duration) error {
	db, err := openDB(t)
	if err != nil {
		return err
	}
	defer db.Close()
	return retry(ctx, limit, time.Second, nil, func(ctx context.Context) error {
		var dir string
		if err := db.QueryRowContext(ctx, "SELECT @@datadir").Scan(&dir); err != nil {
			return err
		}
		if filepath.Clean(dir) != want {
			return fmt.Errorf("it reaches a server with datadir %s, not %s", dir, want)
		}
		return nil
	})
}

// remaining estimates the wall time of the runs from the from-th (1 for
// all) to the last, for progress messages.
func (b *bench) remaining(from int) time.Duration {
	var d time.Duration
	n := 0
	for _, c := range b.cases {
		for range c.rounds(b.s.Rounds) {
			for _, tgt := range c.Targets {
				if n++; n < from {
					continue
				}
				if c.PoolOrderBurst {
					d += b.poolOrderWall(tgt)
				} else {
					d += b.perRun()
				}
			}
		}
	}
	return d
}

// perRun estimates the wall time of one run, for progress messages.
func (b *bench) perRun() time.Duration {
	over := 0.5
	if n := len(b.overhead); n > 0 {
		sum := 0.0
		for _, o := range b.overhead {
			sum += o
		}
		over = sum / float64(n)
	}
	return time.Duration((float64(b.s.Seconds) + over + 0.5) * float64(time.Second))
}

func (b *bench) makeDir() error {
	if err := os.MkdirAll(b.s.ResultsDir, 0o755); err != nil {
		return err
	}
	stamp := b.started.Format("20060102-150405")
	dir := filepath.Join(b.s.ResultsDir, stamp)
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 20 {
			return err
		}
		dir = filepath.Join(b.s.ResultsDir, fmt.Sprintf("%s-%d", stamp, i))
	}
	if err := os.Mkdir(filepath.Join(dir, "sysbench"), 0o755); err != nil {
		return err
	}
	b.dir = dir
	latest := filepath.Join(b.s.ResultsDir, "latest")
	if st, err := os.Lstat(latest); err == nil && st.Mode()&os.ModeSymlink != 0 {
		_ = os.Remove(latest)
	}
	_ = os.Symlink(filepath.Base(dir), latest)
	return nil
}

func (b *bench) createDatabase() error {
	root, err := b.db.RootDB()
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE sbtest"); err != nil {
		return fmt.Errorf("create database sbtest: %w", err)
	}
	var version string
	if err := root.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		return err
	}
	b.env = map[string]string{"mariadbd": version}
	return nil
}

// collectEnv records what the numbers depend on.
func (b *bench) collectEnv() {
	out := func(name string, args ...string) string {
		o, err := exec.Command(name, args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(o))
	}
	b.env["sysbench"] = out("sysbench", "--version")
	if slices.Contains(b.s.Targets, targetGateway) || slices.Contains(b.s.Targets, targetGatewayLoop) || slices.Contains(b.s.Targets, targetGatewayPipe) {
		b.env["gateway"] = out(b.s.Gateway, "version")
	}
	if b.haproxy != "" {
		b.env["haproxy"], _, _ = strings.Cut(out(b.haproxy, "-v"), "\n")
	}
	if b.s.ProxySQLUp != "" && slices.Contains(b.s.Targets, targetProxySQL) {
		b.env["proxysql"] = out(proxySQLBin(&proxySQL{up: b.s.ProxySQLUp, bin: b.s.ProxySQLBin}), "-V")
	}
	b.env["go"] = runtime.Version()
	b.env["cpus"] = strconv.Itoa(runtime.NumCPU())
	b.env["kernel"] = out("uname", "-sr")
	b.env["host"], _ = os.Hostname()
	b.env["clk_tck"] = strconv.FormatInt(b.clk, 10)
	if c := out("git", "rev-parse", "--short", "HEAD"); c != "" {
		if out("git", "status", "--porcelain", "--untracked-files=no") != "" {
			c += "-dirty"
		}
		b.env["git_commit"] = c
	}
	if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch([]byte(readFile("/proc/cpuinfo"))); m != nil {
		b.env["cpu_model"] = string(m[1])
	}
	b.countSyscalls()
	b.env["mariadbd_flags"] = strings.Join(mariadbArgs, " ")
	b.env["topology"] = "primary (binary log on, row format, GTID) + one replica (GTID replication, read_only, no binary log); " +
		"replication runs only for the replica-read cases; haproxy and gorelay forward to the primary; every gateway lists both"
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// prepare creates and fills the sysbench tables, directly on MariaDB, one
// table per thread.
func (b *bench) prepare(ctx context.Context) error {
	logf("preparing %d sysbench tables x %d rows", b.s.Tables, b.s.TableSize)
	t0 := time.Now()
	args := sbArgs("oltp_common", "prepare", b.direct(), b.s.Tables, b.s.TableSize, min(b.s.Tables, 8), 0, "")
	r, err := runSysbench(ctx, args, filepath.Join(b.dir, "sysbench", "000-prepare.txt"), 15*time.Minute,
		func() cpuSample { return cpuSample{} })
	if err != nil {
		return err
	}
	if r.interrupted {
		return nil
	}
	if r.exitErr != nil || r.timedOut {
		return fmt.Errorf("sysbench prepare failed (%v): %s", r.exitErr, lastLines(r.out, 10))
	}
	b.prepareS = time.Since(t0).Seconds()
	logf("prepared in %.1fs", b.prepareS)
	t0 = time.Now()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	if err := b.replica.WaitCaughtUp(wctx, b.db); err != nil {
		return fmt.Errorf("replica after prepare: %w", err)
	}
	logf("replica caught up in %.1fs", time.Since(t0).Seconds())
	return nil
}

// stopServer stops a mariadbd at the end, keeping its error log in the
// results dir as name.
func (b *bench) stopServer(what string, s *mariadbtest.Server, name string) {
	logf("stopping %s (pid %d)", what, s.PID())
	errLog, _ := os.ReadFile(s.ErrorLog)
	_ = os.WriteFile(filepath.Join(b.dir, name), errLog, 0o644)
	if err := s.Stop(); err != nil {
		b.warn(err)
	}
}

// syncReplica runs the replica's replication threads for the replica-read
// cases (want) and waits until it has applied everything the primary has
// written; for the other cases it stops them (STOP SLAVE), so the replica
// sits idle and those cases load the machine as a single MariaDB did
// before the replica existed. Writes of the cases in between (oltp_read_write)
// are applied when replication starts again, outside any measurement.
func (b *bench) syncReplica(ctx context.Context, want bool) error {
	if !want {
		if !b.replicating {
			return nil
		}
		if err := b.replicaExec(ctx, "STOP SLAVE"); err != nil {
			return err
		}
		b.replicating = false
		logf("replication paused (STOP SLAVE on the replica) for the cases without replica reads")
		return nil
	}
	t0 := time.Now()
	if !b.replicating {
		if err := b.replicaExec(ctx, "START SLAVE"); err != nil {
			return err
		}
		b.replicating = true
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	if err := b.replica.WaitCaughtUp(wctx, b.db); err != nil {
		return fmt.Errorf("replica catching up: %w", err)
	}
	logf("replication running, replica caught up with the primary (%.1fs)", time.Since(t0).Seconds())
	return nil
}

// replicaExec runs q as root on the replica.
func (b *bench) replicaExec(ctx context.Context, q string) error {
	root, err := b.replica.RootDB()
	if err != nil {
		return err
	}
	defer root.Close()
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := root.ExecContext(qctx, q); err != nil {
		return fmt.Errorf("replica %s: %s: %w", b.replica.Addr(), q, err)
	}
	return nil
}

func (b *bench) direct() target {
	return target{addr: b.db.Addr(), user: "gateway", password: "secret"}
}

// proxy returns the proxy process of target tgt (haproxy, gorelay or
// gateway) for case c, started (or restarted after a crash) and ready,
// with a note when it was restarted.
func (b *bench) proxy(ctx context.Context, c benchCase, tgt string) (*proxyProc, string, error) {
	name := tgt
	switch tgt {
	case targetGateway:
		name = "gateway-" + c.Gateway
	case targetGatewayLoop:
		name = "gateway-" + c.Gateway + "-loop"
	case targetGatewayPipe:
		name = "gateway-" + c.Gateway + "-pipe"
	}
	g := b.proxies[name]
	if g == nil {
		g = &proxyProc{kind: tgt, name: name, dir: b.dir, backends: []string{b.db.Addr()}, user: "gateway", pwd: "secret"}
		switch tgt {
		case targetGateway, targetGatewayLoop, targetGatewayPipe:
			g.kind = targetGateway
			switch tgt {
			case targetGatewayLoop:
				g.ioLoops = 1
			case targetGatewayPipe:
				g.pipelining = benchPipelining
			}
			g.bin, g.user, g.pwd = b.s.Gateway, "app", "app"
			g.backends = append(g.backends, b.replica.Addr())
			g.poolSize, g.replicaReads, g.profile = c.PoolSize, c.ReplicaReads, b.s.CPUProfile
			g.hotRow, g.consolidation = c.HotRowProtection, c.Consolidation
		case targetHAProxy:
			g.bin = b.haproxy
		case targetGorelay:
			g.bin = b.s.Gorelay
		}
		b.proxies[name] = g
	}
	started, restarted, err := g.ensure(ctx)
	if err != nil {
		return g, "", err
	}
	note := ""
	if restarted {
		note = g.lastExit + "; restarted"
		logf("    %s", note)
	}
	if started {
		what := ""
		if g.kind == targetGateway {
			what = fmt.Sprintf(" (pool %d, replica_reads %s, hot_row %s, consolidation %s, io_loops %d)", g.poolSize, onOff(g.replicaReads), onOff(g.hotRow), onOff(g.consolidation), g.ioLoops)
		}
		logf("    %s%s on %s, pid %d", g.name, what, g.addr, g.pid())
	}
	return g, note, nil
}

// runOne runs sysbench once for case c against target tgt and measures
// it. A failing sysbench is a result, not an error; errors are for what
// stops the benchmark (MariaDB gone, a proxy that does not start, files
// that cannot be written).
func (b *bench) runOne(ctx context.Context, c benchCase, tgt string, round, runNo int) (runResult, error) {
	r := runResult{
		Case: c.Name, Target: tgt, Round: round, Started: time.Now(),
		Output: filepath.Join("sysbench", fmt.Sprintf("%03d-%s-%s-r%d.txt", runNo, slug(c.Name), slug(tgt), round)),
	}
	dst := b.direct()
	var g *proxyProc // the proxy sbbench runs, nil for direct and peers
	proxyPID := 0
	switch tgt {
	case targetDirect:
	case targetHAProxy, targetGorelay, targetGateway, targetGatewayLoop, targetGatewayPipe:
		var err error
		g, r.ProxyNote, err = b.proxy(ctx, c, tgt)
		if err != nil {
			if ctx.Err() != nil {
				r.Interrupted = true
				return r, nil
			}
			// A proxy that never came up is a setup problem: stop. One
			// that ran before and does not come back fails this run only;
			// the next run against it tries again.
			if g.ready == 0 {
				return r, err
			}
			r.Failure = g.name + " did not restart: " + err.Error()
			r.WallS = time.Since(r.Started).Seconds()
			r.Output = ""
			return r, nil
		}
		dst = target{addr: g.addr, user: g.user, password: g.pwd}
		proxyPID = g.pid()
	default:
		if tgt == targetProxySQL && b.pxsql != nil {
			dst, proxyPID = b.pxsql.target(), b.pxsql.pidNo
			break
		}
		i := slices.IndexFunc(b.s.Peers, func(p peer) bool { return p.Name == tgt })
		if i < 0 {
			return r, fmt.Errorf("unknown target %q", tgt)
		}
		dst, proxyPID = b.s.Peers[i].target(), b.s.Peers[i].PID
	}
	if g != nil && g.kind == targetGateway {
		if c.ReplicaReads {
			// Discovery must have seen the replica serving with a known
			// lag under max_replica_lag, else every read goes to the
			// primary.
			t0 := time.Now()
			err := g.waitReplica(ctx, b.replica.Addr(), 60*time.Second)
			r.ReplicaWaitS = time.Since(t0).Seconds()
			if err != nil {
				if ctx.Err() != nil {
					r.Interrupted = true
					return r, nil
				}
				r.Failure = "the gateway does not read from the replica: " + err.Error()
				r.WallS = time.Since(r.Started).Seconds()
				r.Output = ""
				return r, nil
			}
		}
		if err := resetPeakRSS(g.pid()); err != nil {
			r.RSSNote = "VmHWM could not be reset (" + err.Error() + "): peak since the gateway started"
		}
	}
	mariadbPID, replicaPID := b.db.PID(), 0
	if c.ReplicaReads {
		replicaPID = b.replica.PID()
	}
	sample, endSample := b.sampler(mariadbPID, replicaPID, proxyPID)
	defer endSample()

	var extra []string
	if c.SkipTrx {
		extra = append(extra, "--skip-trx=on")
	}
	if c.Rate > 0 {
		extra = append(extra, "--rate="+strconv.Itoa(c.Rate))
	}
	var hot *hotRowWatch
	if c.HotRows {
		// The later --percentile wins; lock wait timeouts (MariaDB's or
		// the gateway's refusals) are counted, and the event retried.
		extra = append(extra, "--percentile=99", "--mysql-ignore-errors=1205,1213")
		var err error
		if hot, err = b.watchHotRows(ctx); err != nil {
			return r, err
		}
	}
	var selects *comSelectWatch
	if c.HotReads {
		var err error
		if selects, err = b.watchSelects(ctx); err != nil {
			return r, err
		}
	}
	args := sbArgs(c.Workload, "run", dst, b.s.Tables, b.s.TableSize, c.Threads, b.s.Seconds, c.PSMode, extra...)
	hard := time.Duration(b.s.Seconds)*time.Second + 90*time.Second
	sr, err := runSysbench(ctx, args, filepath.Join(b.dir, r.Output), hard, sample)
	if hot != nil {
		r.RowLockWaits, r.ThreadsRunningMedian, r.ThreadsRunningMax = hot.stop()
	}
	if selects != nil {
		r.BackendSelects = selects.stop(ctx)
	}
	if err != nil {
		return r, err
	}
	r.WallS = time.Since(r.Started).Seconds()
	if sr.interrupted {
		r.Interrupted = true
		return r, nil
	}
	o := b.record(&r, sr, hard, g, proxyPID, replicaPID)
	if c.HotRows {
		r.P99Ms = &o.P99Ms // sysbench reported the 99th percentile instead of the 95th
	}
	if g != nil && g.kind == targetGateway && g.running() {
		if hwm, err := statusKB(g.pid(), "VmHWM"); err == nil {
			r.GatewayPeakRSS = &hwm
		}
		if c.ReplicaReads {
			// Discovery's view after the run, kept for the record: a
			// replica that dropped out of the read set (probes timing out
			// on a saturated machine) sent the reads back to the primary.
			health := strings.TrimSuffix(r.Output, ".txt") + "-health.json"
			inSet, err := g.saveHealth(filepath.Join(b.dir, health), b.replica.Addr())
			switch {
			case err != nil:
				r.ReplicaNote = "gateway health not read after the run: " + err.Error()
			case !inSet:
				r.ReplicaNote = "after the run the replica was not in the gateway's read set (see " + health + ")"
			}
			if r.ReplicaNote != "" {
				logf("    warning: %s", r.ReplicaNote)
			}
		}
	}
	if r.OK {
		b.overhead = append(b.overhead, r.WallS-float64(b.s.Seconds))
	}
	return r, nil
}

// record fills r from sysbench's run sr (killed after hard): what sysbench
// reported, whether the run failed and why (g, the proxy sbbench runs for
// it, nil for none, must have lived through it), and the CPU of mariadbd,
// the replica's (replicaPID > 0), the proxy's (proxyPID > 0) and the
// machine per query. It returns sysbench's parsed report.
func (b *bench) record(r *runResult, sr *sbRun, hard time.Duration, g *proxyProc, proxyPID, replicaPID int) sbOutput {
	o := parseSysbench(sr.out)
	r.Queries, r.QPS, r.TPS, r.P95Ms, r.AvgMs = o.Queries, o.QPS, o.TPS, o.P95Ms, o.AvgMs
	r.IgnoredErrors, r.Reconnects, r.TotalTimeS = o.IgnoredErrors, o.Reconnects, o.TotalTimeS
	r.SysbenchCPUS = sr.clientCPU.Seconds()
	r.CPUWindowS = sr.end.at.Sub(sr.begin.at).Seconds()
	r.CPUWindowExact = sr.windowExact

	var fail []string
	switch {
	case sr.timedOut:
		fail = append(fail, fmt.Sprintf("sysbench killed: still running %s after start", hard))
	case sr.exitErr != nil:
		fail = append(fail, "sysbench "+sr.exitErr.Error())
	case o.Forced:
		fail = append(fail, "sysbench forced the shutdown: threads still busy 10s after --time")
	case !o.HasReport || o.Queries == 0:
		fail = append(fail, "sysbench reported no queries")
	}
	if g != nil && !g.running() {
		fail = append(fail, fmt.Sprintf("%s exited during the run: %v", g.name, g.waitErr))
	}
	if len(fail) > 0 {
		if len(o.Fatal) > 0 {
			fail = append(fail, o.Fatal...)
		} else {
			fail = append(fail, lastLines(sr.out, 5))
		}
		r.Failure = strings.Join(fail, "\n")
	}
	r.OK = r.Failure == ""

	if sr.begin.err == nil && sr.end.err == nil && r.Queries > 0 {
		perQ := func(ticks int64) (*float64, *float64) {
			cpu := float64(ticks) / float64(b.clk)
			return &cpu, ptr(cpu / float64(r.Queries) * 1000)
		}
		r.MariadbCPUS, r.MariadbCPUPer1kQ = perQ(sr.end.mariadb - sr.begin.mariadb)
		r.MachineCPUS, r.MachineCPUPer1kQ = perQ(sr.end.machine - sr.begin.machine)
		if proxyPID > 0 {
			r.ProxyCPUS, r.ProxyCPUPer1kQ = perQ(sr.end.proxy - sr.begin.proxy)
		}
		q := float64(r.Queries)
		if a, z := sr.begin, sr.end; a.sysOK && z.sysOK {
			r.ProxySyscallsPerQ = ptr(float64(z.sys-a.sys) / q)
		}
		if a, z := sr.begin.proxyIO, sr.end.proxyIO; a.ok && z.ok {
			r.ProxyCtxSwPerQ = ptr(float64(z.CtxSwitches-a.CtxSwitches) / q)
		}
		if replicaPID > 0 {
			r.ReplicaCPUS, r.ReplicaCPUPer1kQ = perQ(sr.end.replica - sr.begin.replica)
		}
	} else if err := errors.Join(sr.begin.err, sr.end.err); err != nil {
		r.CPUNote = "CPU not measured: " + err.Error()
	}
	return o
}

func ptr[T any](v T) *T { return &v }

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// slug turns a case name into a file name part.
func slug(s string) string {
	return strings.Trim(nonWord.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var logOut io.Writer = os.Stderr

func logf(format string, args ...any) {
	fmt.Fprintf(logOut, "sbbench %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func fmtDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// ioUring reports whether this machine's kernel lets a process use
// io_uring (the gateway's io_loops): a loop starts and stops.
func ioUring() bool {
	l, err := ioloop.New(ioloop.Config{})
	if err != nil {
		return false
	}
	l.Close()
	return true
}
