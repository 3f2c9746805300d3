// Package e2e holds the end-to-end tests of directgate: real mariadbd
// processes (started by package mariadbtest in temporary directories on
// loopback ports), the gateway in process, and real clients
// (go-sql-driver/mysql and the mariadb command-line client).
//
// The local stack for `make run` lives in e2e/local.
package e2e
