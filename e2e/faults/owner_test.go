package faults

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/e2e/faultproxy"
	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/owner"
)

// startOwner runs an owner of cluster main (no election) whose link to
// MariaDB is ownerLink; it stops with the test.
func startOwner(t *testing.T, ownerLink *faultproxy.Link) *owner.Owner {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `
users: [{user: %s, password: %q}]
health: {interval: 200ms, timeout: 500ms}
clusters:
  - name: main
    backend_user: %s
    backend_password: %q
    backends: [%q]
    owner: 127.0.0.1:0
`, appUser, appPass, backendUser, backendPass, ownerLink.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	o, err := owner.New(cfg, "main", hclog.New(&hclog.LoggerOptions{Name: "owner", Level: hclog.LevelFromString(logLevel()), Output: os.Stderr}))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Listen(); err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, o.Serve, o.Shutdown)
	return o
}

// TestSilentOwner: the link from the gateway to a fixed owner goes
// silent while 4 clients draw NEXT VALUE: every client gets an error
// (1429, the statement may have run) within the bound, never a hang: the
// statements that find no connection within owner_timeout, and the one in
// flight after forward.FixedOwnerAnswer (before, it waited forever); once
// the link is back values flow again, none twice. It takes over 35 s:
// make faults only.
func TestSilentOwner(t *testing.T) {
	long(t)
	root := rootDB(t)
	for _, q := range []string{
		"DROP TABLE IF EXISTS silent_seq",
		"CREATE TABLE silent_seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO silent_seq VALUES (0, 1, 20)",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	o := startOwner(t, link(t, "owner-mariadb"))
	ol := faultproxy.New(t, "gateway-owner", o.Addr().String())
	db := link(t, "gateway-mariadb")
	gw := startGatewayWith(t, "silentowner", "{size: 4, min_idle: 0, acquire_timeout: 5s}", "{interval: 200ms, timeout: 500ms}",
		fmt.Sprintf("    owner: %q\n    owner_timeout: 1s\n", ol.Addr()), db.Addr())
	bound := forward.FixedOwnerAnswer + 5*time.Second
	clients := open(t, gw.Addr().String())
	var mu sync.Mutex
	seen := map[int64]bool{}
	draw := func() (int64, error) {
		var v int64
		err := clients.QueryRow("SELECT NEXT VALUE FROM silent_seq").Scan(&v)
		if err == nil {
			mu.Lock()
			defer mu.Unlock()
			if seen[v] {
				t.Errorf("value %d handed out twice", v)
			}
			seen[v] = true
		}
		return v, err
	}
	for range 10 {
		if _, err := draw(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ol.Silence(faultproxy.Down); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			start := time.Now()
			_, err := draw()
			took := time.Since(start)
			var me *mysql.MySQLError
			switch {
			case err == nil:
				t.Errorf("client %d got a value through a silent link", c)
			case !errors.As(err, &me) || me.Number != 1429:
				t.Errorf("client %d: %v, want 1429", c, err)
			case took > bound:
				t.Errorf("client %d: error after %v, past %v", c, took, bound)
			default:
				t.Logf("client %d: %v after %v", c, err, took.Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	ol.Clear()
	start := time.Now()
	for {
		if _, err := draw(); err == nil {
			break
		} else if time.Since(start) > 30*time.Second {
			t.Fatalf("no value 30 s after the link came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("values again %v after the link came back", time.Since(start).Round(time.Millisecond))
}
