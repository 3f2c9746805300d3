// Command sbbench is `make bench`: a side-by-side sysbench benchmark of
// MariaDB reached directly, through HAProxy, through a minimal Go relay,
// through the gateway and through any external proxy the user runs, on one
// machine, in one run.
//
// It starts its own MariaDB: a primary and a replica (throwaway data dirs
// under the system temp directory, free ports of 127.0.0.1, 256 MiB buffer
// pools; the primary binlogs in row format with sync_binlog=0, the replica
// follows it by GTID replication, read_only, without a binary log). It
// creates the backend account gateway/secret on both (explicit grants, not
// ALL PRIVILEGES, with REPLICA MONITOR so the gateway's probes read the lag)
// and the sbtest database, prepares the sysbench tables once on the
// primary and waits for the replica to apply them.
//
// Then it runs every case for the configured number of rounds; each round
// runs sysbench once against every target, in the same order (-targets,
// BENCH_TARGETS; direct always, first):
//
//   - direct: the primary.
//   - haproxy: HAProxy in TCP mode in front of the primary (config written
//     to haproxy.cfg: mode tcp, 1 h client and server timeouts, maxconn
//     4096, nbthread at its default), run as `haproxy -db -f haproxy.cfg`:
//     in the foreground, without a master process, so its PID is the
//     process that does the work.
//   - gorelay: bin/gorelay (e2e/bench/cmd/gorelay) in front of the primary:
//     io.Copy in one goroutine per direction, the floor a Go proxy cannot
//     go below.
//   - gateway: the gateway of the case (below).
//   - gateway-loop: the same gateway with io_loops: 1, its sessions on an
//     io_uring loop. A default target where the kernel allows io_uring
//     (sbbench starts a loop to find out); elsewhere it would only repeat
//     gateway's numbers.
//   - gateway-pipe: the same gateway with pipelining: {connections: 2}
//     (reads written behind the reads in flight on a few shared
//     connections). Only when asked for (-targets): pipelining is off by
//     default.
//   - proxysql: ProxySQL started by the up.sh of the ProxySQL anchor
//     (../shared/anchors/proxysql) in front of the primary, when
//     -proxysql-up (PROXYSQL_UP) names it; a default target then, and the
//     results say "ProxySQL: not built" otherwise. Its CPU is measured.
//   - peers (-peers, BENCH_PEERS: name=[user:password@]host:port[#pid]):
//     endpoints the user runs, a ProxySQL for example, which must forward
//     to the benchmark's primary with the backend account (or the given
//     one). The primary's port is chosen anew in every run (mariadbtest
//     picks a free one), so sbbench prints its address once MariaDB is up
//     and waits up to three minutes for each peer to answer SELECT
//     @@datadir with the primary's: point the peer at that address then.
//     A peer's CPU is measured only when its PID is given.
//
// sbbench starts HAProxy, gorelay and the gateways on free ports when they
// are first needed, waits until a MySQL login through them works, and
// restarts them for the next run if they die.
//
// Cases are the oltp_point_select, oltp_read_only and oltp_read_write
// workloads with prepared statements on (--db-ps-mode=auto) and off
// (--db-ps-mode=disable) at 8 and 64 client threads, plus a multiplexing
// case: 512 client threads, through a gateway whose pool holds at most 32
// backend connections; the other targets pass the 512 connections on to
// MariaDB.
//
// Every gateway lists both backends. In those cases replica_reads is off
// and replication is paused (STOP SLAVE on the replica, which then sits
// idle): every target sends every statement to the primary, so the ratios
// compare with those of a single-server setup. The read_only_replicas
// cases (oltp_read_only, both ps modes, 8 threads) run only direct and a
// third gateway with replica_reads on (a relay would forward to the
// primary and repeat the read_only rows): replication runs, the replica
// has caught up and is in the gateway's read set (/debug/health) before
// each gateway run, and reads go to the replica. Direct still uses the
// primary alone: one MariaDB against the gateway in front of two. Both run
// sysbench with --skip-trx=on, because the gateway keeps reads inside a
// transaction on the primary. The replica's mariadbd CPU is measured too;
// the gateway's health view after each of their runs is saved next to the
// sysbench output. Without the gateway target there are no such cases.
//
// The equal-rate case (full runs; -rate, env BENCH_RATE, default 10000,
// 0 leaves it out) runs oltp_point_select at 8 threads with sysbench's
// --rate: every target gets the same queries per second, so mariadbd's CPU
// per query compares targets without the rate effect.
//
// The hot-row cases (full runs, with the gateway target) run
// e2e/bench/lua/hotrow.lua (-lua names its directory): 64 threads, each
// transaction updating one of 4 rows, prepared statements, direct and
// through a gateway without ("hotrow t=64", the main gateway) and with
// hot-row protection ("hotrow protected t=64": hot_row max_concurrency 1,
// max_queue 64). sysbench reports the 99th percentile for them, ignores
// 1205 and 1213 (retrying the transaction), and each run also records the
// rise of the primary's Innodb_row_lock_waits and its Threads_running,
// sampled every 250 ms (median and maximum); summary.md lists them under
// "Hot rows".
//
// The consolidation cases (full runs, with the gateway target) run
// e2e/bench/lua/consolidation.lua: 64 threads of text-protocol point
// selects of the same 10 rows of sbtest1, direct and through a gateway
// without ("consolidation off t=64", the main gateway) and with query
// consolidation ("consolidation t=64": consolidation enabled). Each run
// also records the rise of the primary's Com_select; summary.md lists,
// under "Consolidation", the backend selects per client query and the
// mariadbd and gateway CPU per query.
//
// The pool_order_burst case (full and quick runs, with the gateway target;
// last; one round whatever -rounds says; poolorder.go) measures the
// trade-off of clusters[].pool.order. For each order, round_robin then
// lifo, against the same MariaDB, a fresh gateway (pool size 64, min_idle
// 4, max_dials 4, idle_timeout at its default 5m, otherwise as the main
// gateway; stopped after its run) first has 64 client sessions each open a
// transaction and read a row at the same time, so its pool opens all 64
// connections, as after any earlier peak; then runs a quiet phase of 8
// sysbench threads of oltp_point_select (--db-ps-mode=disable) for
// -burst-quiet (BENCH_BURST_QUIET, default 6m, quick 1m), rate-limited to
// -burst-rate queries per second (BENCH_BURST_RATE, default 5000; 0
// unlimited) so every target serves the same load; then at once a burst
// of 64 threads for 15 s with --report-interval=1 --percentile=99. It
// reports per order mariadbd's CPU per query over the quiet phase, the
// pool's open connections after the fill and before the burst and those
// closed in between, the connections the gateway dialed during the burst
// (the rise of directgate_pool_dials_total for the primary on the
// gateway's /metrics, from before the burst's sysbench started to after
// it ended, and the part before its "Threads started!": each login checks
// the database on a pooled connection), the acquires that waited for a
// connection and their total wait, the first second's p99 (sysbench's
// first interval line), the burst's QPS and p99, how long sysbench took
// to connect its clients, and the rise of MariaDB's Connections (the
// dials plus the health probes' own connections). Direct runs first as a
// reference: no pool, a quiet phase of at most 1m, and a burst whose 64
// connections are sysbench's own. With a quiet phase under 6m the
// gateways' idle_timeout shrinks with it (quiet - 1m, quiet/2 below 2m;
// summary.md says so), so that lifo's unused connections close before the
// burst, as with the defaults. The case is not in the summary table:
// summary.md has a section for it ("Pool order") and stdout a table with
// a column per target.
//
// Before a case's first round every target runs -warmup seconds
// (BENCH_WARMUP, default 5, 0 for none) of the case's workload,
// unmeasured, as floorbench.sh does (not the hot-row, consolidation and
// pool order cases).
//
// For every run it records sysbench's QPS, p95 latency, ignored errors and
// fatal failures (a failing run is recorded with sysbench's error text and
// the benchmark goes on), and over the measured window (from sysbench's
// "Threads started!" to its report) the CPU time of the primary mariadbd
// (and the replica's, in the read_only_replicas cases) and of the proxy
// process (utime+stime from /proc/PID/stat), and the busy time of the
// whole machine (the first line of /proc/stat: total minus idle minus
// iowait, every CPU and every process, sysbench's included), each divided
// by sysbench's query count; the proxy's system calls (perf stat -e
// raw_syscalls:sys_enter -p PID over the window; without perf,
// /proc/PID/io's syscr+syscw, read/write-family calls only) and context
// switches (every thread's voluntary+nonvoluntary) per query; and the
// gateway's peak RSS (VmHWM, reset
// before each run through /proc/PID/clear_refs). The summary has one row
// per case and target; ×direct is the median over rounds of the target's
// QPS divided by direct's QPS of the same round.
//
// Output goes to results/<timestamp>/ (results.json with every run,
// summary.md, ratios.svg, the sysbench output of every run, the configs
// and logs of HAProxy, gorelay and the gateways, and the mariadbd error
// logs) and one table on stdout. results/latest points at the newest run.
//
// Every child process (mariadbd, HAProxy, gorelay, gateways, sysbench)
// runs in its own process group and is killed by the kernel if sbbench
// dies; on normal exit, error, SIGINT, SIGTERM or SIGHUP sbbench stops
// them by PID: sysbench first, then the gateways, gorelay and HAProxy, then
// the replica, then the primary.
//
// Settings come from flags, each with an environment variable as its
// default (see -help): BENCH_QUICK=1 selects a short run (point_select and
// read_write, 8 threads, 8 s runs, small tables, no multiplexing or
// replica-read cases, the pool_order_burst case with a 1m quiet phase)
// that finishes in about eleven minutes, five of them the pool order case;
// BENCH_CASES=replicas runs only the read_only_replicas cases (of a full
// run: without BENCH_QUICK); BENCH_CASES=pool_order_burst only the pool
// order case (about 15 minutes, 4 with BENCH_QUICK=1);
// BENCH_TARGETS=gateway runs direct and the gateway only, as before
// HAProxy and gorelay were added.
package main
