// Command sbbench is `make bench`: a side-by-side sysbench benchmark of
// MariaDB reached directly and through the gateway, on one machine, in one
// run.
//
// It starts its own MariaDB (a throwaway data dir under the system temp
// directory, on a free port of 127.0.0.1, binary log off, 256 MiB buffer
// pool), creates the gateway's backend account and the sbtest database,
// prepares the sysbench tables once, starts bin/gateway on a free port, then
// runs every case in A B A B order: direct, gateway, direct, gateway, for
// the configured number of rounds. Cases are the oltp_point_select,
// oltp_read_only and oltp_read_write workloads with prepared statements on
// (--db-ps-mode=auto) and off (--db-ps-mode=disable) at 8 and 64 client
// threads, plus a multiplexing case: 512 client threads through a second
// gateway whose pool holds at most 32 backend connections, against MariaDB
// with 512 direct connections.
//
// For every run it records sysbench's QPS, p95 latency, ignored errors and
// fatal failures (a failing run is recorded with sysbench's error text and
// the benchmark goes on), the CPU time of mariadbd and of the gateway from
// /proc/PID/stat over the measured window (from sysbench's "Threads
// started!" to its report), and the gateway's peak RSS (VmHWM, reset before
// each run through /proc/PID/clear_refs).
//
// Output goes to results/<timestamp>/ (results.json with every run,
// summary.md, ratios.svg, the sysbench output of every run and the gateway
// logs) and one table on stdout. results/latest points at the newest run.
//
// Every child process (mariadbd, gateways, sysbench) runs in its own process
// group and is killed by the kernel if sbbench dies; on normal exit, error,
// SIGINT, SIGTERM or SIGHUP sbbench stops them by PID: sysbench first, then
// the gateways, then MariaDB.
//
// Settings come from flags, each with an environment variable as its
// default (see -help): BENCH_QUICK=1 selects a short run (two workloads, 8
// threads, 8 s runs, small tables) that finishes in under three minutes.
package main
