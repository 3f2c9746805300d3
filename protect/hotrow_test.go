package protect

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

func hotConf(conc, queue int, wait time.Duration, dry bool) config.HotRow {
	return config.HotRow{MaxConcurrency: conc, MaxQueue: &queue, MaxWait: wait, DryRun: config.Switch(dry)}
}

var testRow = hotKey{table: "db.t", column: "id", value: "1"}

// Waiters get the row in the order they came, one at a time.
func TestHotRowFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h HotRows
		cfg := hotConf(1, 10, time.Minute, false)
		if held, err := h.acquire(context.Background(), nil, testRow, cfg, nil, nil); !held || err != nil {
			t.Fatalf("first acquire: %v %v", held, err)
		}
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				held, err := h.acquire(context.Background(), nil, testRow, cfg, nil, nil)
				if !held || err != nil {
					t.Errorf("waiter %d: %v %v", i, held, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				h.release(nil, testRow.slot(), cfg.MaxConcurrency)
			}()
			synctest.Wait() // waiter i is queued before i+1 comes
		}
		if rows := h.Rows(&config.Cluster{HotRow: cfg}); rows[0].Active != 5 || rows[0].Total != 5 {
			t.Errorf("while queued: %+v", rows[0])
		}
		h.release(nil, testRow.slot(), cfg.MaxConcurrency)
		wg.Wait()
		if fmt.Sprint(order) != "[0 1 2 3 4]" {
			t.Errorf("order %v, want 0..4", order)
		}
		rows := h.Rows(&config.Cluster{HotRow: cfg})
		if rows[0].Active != 0 || rows[0].Total != 5 || rows[0].Mode != "on" || len(rows) != 2 || rows[1].Scope != "db.t" {
			t.Errorf("after: %+v", rows)
		}
		if s := h.slots[testRow.slot()]; len(s.holders) != 0 || len(s.waiters) != 0 {
			t.Errorf("slot left %+v", s)
		}
	})
}

// Past max_queue the next is refused at once with 1205 naming the row.
func TestHotRowQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h HotRows
		cfg := hotConf(1, 2, time.Minute, false)
		h.acquire(context.Background(), nil, testRow, cfg, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for range 2 {
			go h.acquire(ctx, nil, testRow, cfg, nil, nil)
		}
		synctest.Wait()
		held, err := h.acquire(context.Background(), nil, testRow, cfg, nil, nil)
		if held || err == nil || err.Code != 1205 || err.State != "HY000" ||
			!strings.Contains(err.Message, "hot row db.t key id=1 has 2 transactions queued") {
			t.Fatalf("third waiter: %v %v", held, err)
		}
		// Another row is not affected.
		other := hotKey{table: "db.t", column: "id", value: "2"}
		if held, err := h.acquire(context.Background(), nil, other, cfg, nil, nil); !held || err != nil {
			t.Errorf("other row: %v %v", held, err)
		}
		cancel()
		synctest.Wait()
		rows := h.Rows(&config.Cluster{HotRow: cfg})
		if rows[0].Refused != 1 || rows[0].Active != 0 {
			t.Errorf("counters %+v", rows[0])
		}
	})
}

// A waiter gives up after max_wait (1205), or when its client is gone
// (and then nothing holds the row on its behalf).
func TestHotRowWaitBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h HotRows
		cfg := hotConf(1, 5, 3*time.Second, false)
		h.acquire(context.Background(), nil, testRow, cfg, nil, nil)
		start := time.Now()
		held, err := h.acquire(context.Background(), nil, testRow, cfg, nil, nil)
		if held || err == nil || err.Code != 1205 || !strings.Contains(err.Message, "hot_row.max_wait") {
			t.Fatalf("timed out waiter: %v %v", held, err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("waited %v", d)
		}
		var gone atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := h.acquire(context.Background(), nil, testRow, cfg, gone.Load, nil)
			if held || err == nil || err.Code != 1317 {
				t.Errorf("gone waiter: %v %v", held, err)
			}
		}()
		synctest.Wait()
		gone.Store(true)
		wg.Wait()
		h.release(nil, testRow.slot(), cfg.MaxConcurrency)
		if s := h.slots[testRow.slot()]; len(s.holders) != 0 || len(s.waiters) != 0 {
			t.Errorf("slot left %+v", s)
		}
		rows := h.Rows(&config.Cluster{HotRow: cfg})
		if rows[0].Refused != 1 || rows[0].RefusedWait != 1 || rows[0].Total != 2 {
			t.Errorf("counters %+v", rows[0])
		}
	})
}

// Dry run never waits: it counts what would have waited or been refused.
func TestHotRowDryRun(t *testing.T) {
	var h HotRows
	cfg := hotConf(1, 1, time.Minute, true)
	for i := range 3 {
		if held, err := h.acquire(context.Background(), nil, testRow, cfg, nil, nil); !held || err != nil {
			t.Fatalf("acquire %d: %v %v", i, held, err)
		}
	}
	rows := h.Rows(&config.Cluster{HotRow: cfg})
	if r := rows[0]; r.Mode != "dry_run" || r.DryRun != 2 || r.DryRunRefused != 1 || r.Total != 0 || r.Active != 0 {
		t.Errorf("counters %+v", r)
	}
	for range 3 {
		h.release(nil, testRow.slot(), cfg.MaxConcurrency)
	}
	if s := h.slots[testRow.slot()]; len(s.holders) != 0 {
		t.Errorf("slot left %+v", s)
	}
}

// max_concurrency 2 lets two in; turning protection off (0) while some
// wait lets every waiter go.
func TestHotRowConcurrencyAndOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h HotRows
		cfg := hotConf(2, 10, time.Minute, false)
		for range 2 {
			if held, _ := h.acquire(context.Background(), nil, testRow, cfg, nil, nil); !held {
				t.Fatal("not admitted")
			}
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if held, err := h.acquire(context.Background(), nil, testRow, cfg, nil, nil); !held || err != nil {
					t.Errorf("waiter: %v %v", held, err)
				}
			}()
		}
		synctest.Wait()
		h.release(nil, testRow.slot(), 0) // reloaded with protection off
		wg.Wait()
		if s := h.slots[testRow.slot()]; len(s.holders) != 4 || len(s.waiters) != 0 {
			t.Errorf("slot %+v", s)
		}
	})
}

func TestHotRowCandidate(t *testing.T) {
	c, err := querypath.New()
	if err != nil {
		t.Fatal(err)
	}
	for sql, want := range map[string]bool{
		"UPDATE t SET n = 1 WHERE id = 1":                              true,
		"delete from t where id = 1":                                   true,
		"SELECT * FROM t WHERE id = 1 FOR\n UPDATE":                    true,
		"INSERT INTO t (id) VALUES (1) ON DUPLICATE KEY UPDATE id = 1": true,
		"INSERT INTO t (id) VALUES (1)":                                false,
		"SELECT * FROM t WHERE id = 1":                                 false,
		"UPDATE t SET n = 1 WHERE id = 1; SELECT 1":                    false,
	} {
		if got := hotRowCandidate(c.Classify(sql), sql); got != want {
			t.Errorf("hotRowCandidate(%q) = %v, want %v", sql, got, want)
		}
		// The cheap check never hides what the parser would recognise.
		if _, ok := c.HotRow(sql); ok && !want {
			t.Errorf("HotRow recognises %q, which hotRowCandidate skips", sql)
		}
	}
}

// Keys are spread over the slots and stay in range.
func TestHotKeySlot(t *testing.T) {
	seen := map[int]bool{}
	for i := range 1000 {
		k := hotKey{table: "db.t", column: "id", value: string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260))}
		s := k.slot()
		if s < 0 || s >= hotRowSlots {
			t.Fatalf("slot %d", s)
		}
		seen[s] = true
	}
	if len(seen) < 900 {
		t.Errorf("1000 keys in %d slots", len(seen))
	}
}

func TestProtectionRates(t *testing.T) {
	var pr Rates
	t0 := time.Unix(1000, 0)
	row := func(total, refused int64) []Row {
		return []Row{{Protection: "hot_row", Cluster: "main", Scope: "*", Total: total, Refused: refused},
			{Protection: "hot_row", Cluster: "main", Scope: "db.t", Total: total}}
	}
	pr.Record(row(0, 0), t0)
	pr.Record(row(50, 5), t0.Add(5*time.Second))
	pr.Record(row(100, 10), t0.Add(10*time.Second))
	pr.Record(row(200, 10), t0.Add(15*time.Second)) // the first sample is dropped
	rows := row(300, 20)
	pr.Fill(rows, t0.Add(20*time.Second))
	if rows[0].Rate != 250.0/15 || rows[0].RefusedRate != 15.0/15 {
		t.Errorf("rates %v %v, want %v %v", rows[0].Rate, rows[0].RefusedRate, 250.0/15, 1.0)
	}
	if rows[1].Rate != 0 {
		t.Errorf("a table row got a rate: %v", rows[1].Rate)
	}
	pr.Record(nil, t0.Add(25*time.Second))
	rows = row(300, 20)
	pr.Fill(rows, t0.Add(30*time.Second))
	if rows[0].Rate != 0 {
		t.Errorf("a row that was gone kept its samples: %v", rows[0].Rate)
	}
}

// Transactions that would wait at the gateway for each other's rows are
// refused at once (a deadlock), not after max_wait; a row another
// transaction holds without waiting is no deadlock.
func TestHotRowDeadlock(t *testing.T) {
	other := hotKey{table: "db.t", column: "id", value: "2"}
	if other.slot() == testRow.slot() {
		t.Fatal("test rows share a slot")
	}
	queued := func(h *HotRows, k hotKey) int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.slots[k.slot()].waiters)
	}
	for _, conc := range []int{1, 2} {
		t.Run(fmt.Sprint("max_concurrency=", conc), func(t *testing.T) {
			var h HotRows
			cfg := hotConf(conc, 10, time.Minute, false)
			a, b, c := &hotTxn{}, &hotTxn{}, &hotTxn{}
			mustHold := func(txn *hotTxn, k hotKey) {
				t.Helper()
				if held, err := h.acquire(context.Background(), txn, k, cfg, nil, nil); !held || err != nil {
					t.Fatalf("not admitted: %v", err)
				}
			}
			mustHold(a, testRow)
			mustHold(b, other)
			for range conc - 1 { // fill the rows: the next ones wait
				mustHold(c, testRow)
				mustHold(c, other)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			aDone := make(chan *wire.SQLError, 1)
			go func() { // a waits for b's row
				_, err := h.acquire(ctx, a, other, cfg, nil, nil)
				aDone <- err
			}()
			for queued(&h, other) == 0 {
				time.Sleep(time.Millisecond)
			}
			bDone := make(chan *wire.SQLError, 1)
			go func() { // b would wait for a's row
				_, err := h.acquire(ctx, b, testRow, cfg, nil, nil)
				bDone <- err
			}()
			if conc == 1 {
				err := <-bDone
				if err == nil || err.Code != 1205 || !strings.Contains(err.Message, "deadlock") {
					t.Fatalf("b: %v, want a deadlock refusal", err)
				}
				if r := h.Rows(&config.Cluster{})[0]; r.RefusedDeadlock != 1 || r.Refused != 1 {
					t.Errorf("counters %+v", r)
				}
			} else {
				// c holds both rows and waits for nothing: b waits.
				for queued(&h, testRow) == 0 {
					time.Sleep(time.Millisecond)
				}
				select {
				case err := <-bDone:
					t.Fatalf("b refused: %v", err)
				default:
				}
			}
			cancel()
			if err := <-aDone; err == nil || err.Code != 1317 {
				t.Errorf("a: %v, want interrupted", err)
			}
			if conc == 2 {
				<-bDone
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if a.waiting != 0 || b.waiting != 0 {
				t.Errorf("waits left: a %d, b %d", a.waiting, b.waiting)
			}
		})
	}
}
