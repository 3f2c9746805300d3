// Package e2e holds the end-to-end tests of directgate: real mariadbd
// processes (started by package mariadbtest in temporary directories on
// loopback ports), the gateway in process, and real clients
// (go-sql-driver/mysql and the mariadb command-line client).
//
// Tests run one after the other, because most share one MariaDB and check
// its state (processlist, status counters, memory). A few long ones call
// t.Parallel and so run together after all the others: each has servers,
// a gateway and tables of its own, asserts nothing about load or memory,
// and spends its time waiting (discovery intervals, paced inserts, the
// gateway's result hold) or working its own server (the 16 MiB packets),
// so overlapping them shortens `make test`. A test that joins them must
// meet the same three conditions.
//
// Measurements (the gateway's memory with many idle clients) are
// benchmarks (`make bench-memory`), not tests: they assert nothing and
// would cost `make test` a minute.
//
// The local stack for `make run` lives in e2e/local.
package e2e
