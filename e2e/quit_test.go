package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The gateway's backend connections leave MariaDB as a client that is
// done does (COM_QUIT): when a pool closes them at rest (idle, at
// shutdown, a connection XA left behind), MariaDB counts no aborted
// client and logs no "Aborted connection" warning, as it would for every
// one at its default log_warnings=2.
func TestPoolClosesQuit(t *testing.T) {
	forIOLoops(t, "", func(t *testing.T, loops int) {
		user := fmt.Sprintf("dg_quit%d", loops)
		backendThreads := backendAccount(t, user, "quit-secret")
		logStart := fileSize(t, shared.db.ErrorLog)

		srv := startTestGateway(t, "quit", clusterYAML(loops, user, "quit-secret",
			"{size: 4, min_idle: 0, idle_timeout: 200ms}"))
		db := open(t, dsnFor(srv.Addr().String(), appUser, appPass))
		db.SetMaxOpenConns(4)
		// Four at once: four backend connections, which the idle timeout
		// then closes.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := db.Exec("SELECT SLEEP(0.2)"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		allClosed := func(what string) {
			waitUntil(t, func() bool { return backendThreads() == 0 }, func() string {
				return fmt.Sprintf("%s: %d backend threads still open", what, backendThreads())
			})
		}
		allClosed("the idle connections to close")

		// XA leaves a connection that no reset may clear: retired.
		ctx := context.Background()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"XA START 'quit'", "SELECT 1", "XA END 'quit'", "XA ROLLBACK 'quit'"} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		conn.Close()
		db.Close()
		allClosed("the XA connection to close")

		// What is open at shutdown closes too: a gateway whose idle
		// connections stay.
		srv2 := startTestGateway(t, "quit", clusterYAML(loops, user, "quit-secret", "{size: 4, min_idle: 0}"))
		db2 := open(t, dsnFor(srv2.Addr().String(), appUser, appPass))
		if _, err := db2.Exec("SELECT 1"); err != nil {
			t.Fatal(err)
		}
		db2.Close()
		if backendThreads() == 0 {
			t.Fatal("no backend connection open before the shutdown")
		}
		shutCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := srv2.Shutdown(shutCtx); err != nil {
			t.Fatal(err)
		}
		allClosed("the gateway's connections to close")

		var aborted []string
		for _, line := range strings.Split(readErrorLog(t, shared.db.ErrorLog, logStart), "\n") {
			if strings.Contains(line, "Aborted connection") && strings.Contains(line, "user: '"+user+"'") {
				aborted = append(aborted, line)
			}
		}
		if len(aborted) > 0 {
			t.Errorf("MariaDB logged %d of the gateway's connections as aborted:\n%s", len(aborted), strings.Join(aborted, "\n"))
		}
	})
}

// fileSize returns the size of the file at path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// readErrorLog returns what the file at path holds past offset.
func readErrorLog(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}
