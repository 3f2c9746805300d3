package accounts

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// rowsLoader answers Query with the rows of *rows (user, host, auth,
// access) and counts the loads.
func rowsLoader(rows *[][4]string, loads *int) Loader {
	return func(_ context.Context, query string, fn func([][]byte)) error {
		*loads++
		if !strings.HasPrefix(query, Query) {
			panic(query)
		}
		for _, r := range *rows {
			fn([][]byte{[]byte(r[0]), []byte(r[1]), []byte(NativePassword), []byte(r[2]), []byte(r[3]), []byte("false"), nil, []byte("0")})
		}
		return nil
	}
}

func TestCacheLookup(t *testing.T) {
	rows := [][4]string{{"a", "%", "", "0"}}
	loads := 0
	c := New(Config{Enabled: true, Refresh: 1e9, MaxAccounts: 2}, rowsLoader(&rows, &loads), nil)
	lo := netip.MustParseAddr("127.0.0.1")
	ctx := context.Background()
	r, ok, err := c.Lookup(ctx, "a", lo)
	if err != nil || !ok || r.Name() != "'a'@'%'" || loads != 1 {
		t.Fatalf("first lookup: %v %v %v, %d loads", r.Name(), ok, err, loads)
	}
	v := r.Version
	// An account created outside: a miss reads again, at most once a
	// second.
	rows = append(rows, [4]string{"b", "%", "", "0"})
	if _, ok, _ := c.Lookup(ctx, "b", lo); ok || loads != 1 {
		t.Fatalf("a miss right after a load read again (%d loads) or found b", loads)
	}
	// Through the gateway: the next login reads again.
	done := c.Changing()
	rows[0][3] = "32" // a global grant
	done()
	if _, ok, _ := c.Lookup(ctx, "b", lo); !ok || loads != 2 {
		t.Fatalf("after a change: b found %v, %d loads", ok, loads)
	}
	if c.Current("a", "%", v) {
		t.Error("a grant left the account's version as it was")
	}
	// max_accounts: the third row is not loaded.
	rows = append(rows, [4]string{"c", "%", "", "0"})
	c.Changing()()
	if _, ok, _ := c.Lookup(ctx, "c", lo); ok {
		t.Error("a row past max_accounts was loaded")
	}
}

// TestCacheRun: the loop loads every Refresh and on a change, and calls
// its after function every Tick in between (virtual time).
func TestCacheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rows := [][4]string{{"a", "%", "", "0"}}
		loads, afters := 0, 0
		c := New(Config{Enabled: true, Refresh: time.Minute, MaxAccounts: 10, Tick: 10 * time.Second}, rowsLoader(&rows, &loads), nil)
		stop := make(chan struct{})
		go c.Run(stop, func() { afters++ })
		time.Sleep(65 * time.Second)
		synctest.Wait()
		if loads != 2 || afters != 7 {
			t.Errorf("after 65s: %d loads, %d sweeps; want 2, 7 (at 0s to 60s)", loads, afters)
		}
		c.Changing()()
		synctest.Wait()
		if loads != 3 {
			t.Errorf("a change did not load at once: %d loads", loads)
		}
		close(stop)
		synctest.Wait()
	})
}

// TestCacheRunOff: off, the loop reads nothing and calls its after
// function every Tick, no more (it once spun: the wait counted from a load
// that never happened).
func TestCacheRunOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rows [][4]string
		loads, afters := 0, 0
		c := New(Config{Refresh: time.Minute, MaxAccounts: 10, Tick: 10 * time.Second}, rowsLoader(&rows, &loads), nil)
		stop := make(chan struct{})
		go c.Run(stop, func() { afters++ })
		time.Sleep(65 * time.Second)
		synctest.Wait()
		if loads != 0 || afters != 7 {
			t.Errorf("after 65s off: %d loads, %d sweeps; want 0, 7", loads, afters)
		}
		close(stop)
		synctest.Wait()
	})
}

// TestCacheReadRetries: a load that fails (a pooled connection killed
// since its last use, make compat's restore) is tried once more, its
// partial rows dropped.
func TestCacheReadRetries(t *testing.T) {
	rows := [][4]string{{"a", "%", "", "0"}, {"b", "%", "", "0"}}
	loads := 0
	ok := rowsLoader(&rows, &loads)
	c := New(Config{Enabled: true, Refresh: time.Minute, MaxAccounts: 10}, func(ctx context.Context, q string, fn func([][]byte)) error {
		if loads == 0 {
			loads++
			fn([][]byte{[]byte("a"), []byte("%"), []byte(NativePassword), nil, nil, nil, nil, []byte("0")})
			return errors.New("EOF")
		}
		return ok(ctx, q, fn)
	}, nil)
	if _, found, err := c.Lookup(context.Background(), "b", netip.MustParseAddr("127.0.0.1")); !found || err != nil {
		t.Fatalf("b: %v %v", found, err)
	}
	if n := len(*c.rows.Load()); n != 2 || loads != 2 {
		t.Errorf("%d rows after %d loads; want 2, 2", n, loads)
	}
}
