// Package mariadbtest starts real mariadbd processes for end-to-end tests.
//
// Each [Server] runs in its own temporary directory (data dir, unix socket,
// pid file, error log) and listens on a free port of 127.0.0.1 only.
// Initialising a data dir with mariadb-install-db is done once per mariadbd
// version and user: the result is kept as a template under
// os.TempDir()/directgate-mariadbtest and copied for every server, so a
// Start costs a file copy plus the server's boot.
//
// Accounts: root has no password and is reachable only over the server's
// unix socket ([Server.RootDB]); the anonymous accounts and the root accounts
// for 127.0.0.1, ::1 and the host name are dropped. Each [User] of
// [Options.Users] is created as 'name'@'%', 'name'@'localhost' and
// 'name'@'127.0.0.1' with mysql_native_password. This setup runs with
// sql_log_bin=0, so it never reaches the binary log and replicas cloned from
// the same template can make the same accounts themselves.
//
// mariadbd and mariadb-install-db are looked up in PATH, then in /usr/sbin,
// /usr/local/sbin and /usr/local/mysql/bin. When they are missing, [Start]
// returns an error wrapping [ErrNotInstalled]; e2e/local/deps.sh installs
// them on Debian.
//
// # Replication
//
// Servers binlog with log_slave_updates and gtid_strict_mode on (unless
// [Options.NoBinlog]) and get distinct server IDs, so any of them can be a
// GTID primary or replica:
//
//	r.StartReplication(ctx, p) // r replicates p from p's current position
//	... writes on p ...
//	r.WaitCaughtUp(ctx, p)     // r has applied everything p has binlogged
//	r.Promote(ctx)             // r stops replicating, read_only=0
//	r2.ChangePrimary(ctx, r)   // r2 follows r from its own position
//
// Replicas are read_only=1 (also after [Server.Restart]), reconnect to their
// primary every second and restart their threads after [Server.Kill] and
// Restart. Replicas connect with an account the harness creates on the
// primary without binlogging it.
//
// # Teardown
//
// A server outlives the test that started it unless it is stopped, so stop
// it even when later setup fails. [Start] cleans up after itself when it
// returns an error. In a TestMain, os.Exit skips deferred calls: return the
// exit code from a function and let that function defer the Stop:
//
//	func TestMain(m *testing.M) { os.Exit(run(m)) }
//
//	func run(m *testing.M) (code int) {
//		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
//		defer cancel()
//		srv, err := mariadbtest.Start(ctx, mariadbtest.Options{
//			Users: []mariadbtest.User{{Name: "app", Password: "app"}},
//		})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			return 1
//		}
//		defer func() {
//			if err := srv.Stop(); err != nil {
//				fmt.Fprintln(os.Stderr, err)
//				code = 1
//			}
//		}()
//		// more setup here may fail and return early: srv still stops.
//		return m.Run()
//	}
//
// Inside a single test, use t.Cleanup(func() { _ = srv.Stop() }) right after
// Start succeeds.
//
// The child mariadbd is put in its own process group, so a Ctrl-C in the
// terminal reaches the test binary and not the server, and on Linux it is
// sent SIGKILL if the test binary dies without stopping it (its temporary
// directory is then left behind).
package mariadbtest
