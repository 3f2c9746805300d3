// Command sbbench is `make bench`: a side-by-side sysbench benchmark of
// MariaDB reached directly and through the gateway, on one machine, in one
// run.
//
// It starts its own MariaDB: a primary and a replica (throwaway data dirs
// under the system temp directory, free ports of 127.0.0.1, 256 MiB buffer
// pools; the primary binlogs in row format with sync_binlog=0, the replica
// follows it by GTID replication, read_only, without a binary log). It
// creates the gateway's backend account on both (explicit grants, not ALL
// PRIVILEGES, with REPLICA MONITOR so the gateway's probes read the lag)
// and the sbtest database, prepares the sysbench tables once on the
// primary, waits for the replica to apply them, starts bin/gateway on free
// ports, then runs every case in A B A B order: direct, gateway, direct,
// gateway, for the configured number of rounds. Cases are the
// oltp_point_select, oltp_read_only and oltp_read_write workloads with
// prepared statements on (--db-ps-mode=auto) and off (--db-ps-mode=disable)
// at 8 and 64 client threads, plus a multiplexing case: 512 client threads
// through a second gateway whose pool holds at most 32 backend
// connections, against MariaDB with 512 direct connections.
//
// Every gateway lists both backends. In those cases replica_reads is off
// and replication is paused (STOP SLAVE on the replica, which then sits
// idle): every statement goes to the primary, as on the direct side, so
// the ratios compare with those of a single-server setup. The
// read_only_replicas cases (oltp_read_only, both ps modes, 8 threads) run
// a third gateway with replica_reads on: replication runs, the replica has
// caught up and is in the gateway's read set (/debug/health) before each
// gateway run, and reads go to the replica. Their direct side still uses
// the primary alone: one MariaDB against the gateway in front of two.
// Both sides run sysbench with --skip-trx=on, because the gateway keeps
// reads inside a transaction on the primary. The replica's mariadbd CPU
// is measured too; the gateway's health view after each of their runs is
// saved next to the sysbench output.
//
// For every run it records sysbench's QPS, p95 latency, ignored errors and
// fatal failures (a failing run is recorded with sysbench's error text and
// the benchmark goes on), the CPU time of the primary mariadbd (and the
// replica's, in the read_only_replicas cases) and of the gateway from
// /proc/PID/stat over the measured window (from sysbench's "Threads
// started!" to its report), and the gateway's peak RSS (VmHWM, reset before
// each run through /proc/PID/clear_refs).
//
// Output goes to results/<timestamp>/ (results.json with every run,
// summary.md, ratios.svg, the sysbench output of every run and the gateway
// logs, the gateway configs and the mariadbd error logs) and one table on
// stdout. results/latest points at the newest run.
//
// Every child process (mariadbd, gateways, sysbench) runs in its own process
// group and is killed by the kernel if sbbench dies; on normal exit, error,
// SIGINT, SIGTERM or SIGHUP sbbench stops them by PID: sysbench first, then
// the gateways, then the replica, then the primary.
//
// Settings come from flags, each with an environment variable as its
// default (see -help): BENCH_QUICK=1 selects a short run (point_select and
// read_write, 8 threads, 8 s runs, small tables, no multiplexing or
// replica-read cases) that finishes in under three minutes;
// BENCH_CASES=replicas runs only the read_only_replicas cases (of a full
// run: without BENCH_QUICK).
package main
