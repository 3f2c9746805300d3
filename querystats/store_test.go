package querystats

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestStoreRecord(t *testing.T) {
	s := New(Config{MaxDigests: 100, ExampleLength: 8})
	now := time.Unix(1000, 0)
	k := Key{Fingerprint: 7, User: "app", Database: "demo", Cluster: "main"}
	s.Record(k, []byte("select ?"), "select 1234567890", Sample{Duration: time.Millisecond, RowsSent: 1, Role: "replica"}, now)
	s.Record(k, []byte("select ?"), "select 2", Sample{Duration: 3 * time.Millisecond, Failed: true, ErrCode: 1146, Warnings: 2, Role: "primary"}, now.Add(time.Second))
	s.Record(Key{Fingerprint: 7, User: "other"}, []byte("select ?"), "", Sample{}, now)
	top := s.Top(ByTotalTime, 0)
	if len(top) != 2 {
		t.Fatalf("%d entries, want 2", len(top))
	}
	d := top[0]
	if d.User != "app" || d.Count != 2 || d.Errors != 1 || d.ErrorCodes[1146] != 1 || d.Warnings != 2 ||
		d.TotalTime != 4*time.Millisecond || d.MaxTime != 3*time.Millisecond || d.RowsSent != 1 || d.Role != "primary" {
		t.Fatalf("entry %+v", d)
	}
	if d.Example != "select 2" || d.Text != "select ?" || !d.FirstSeen.Equal(now) || !d.LastSeen.Equal(now.Add(time.Second)) {
		t.Fatalf("entry %+v", d)
	}
	if p := d.P99(); p != 3*time.Millisecond {
		t.Errorf("p99 %v, want 3ms (capped by max)", p)
	}
	if p := d.P50(); p < time.Millisecond || p > 2048*time.Microsecond {
		t.Errorf("p50 %v, want within 1ms..2ms", p)
	}
	s.Reset()
	if s.Len() != 0 {
		t.Fatal("Reset left entries")
	}
}

func TestStoreEviction(t *testing.T) {
	for _, max := range []int{1, 10, 100, 5000} {
		s := New(Config{MaxDigests: max})
		for i := 0; i < 3*max+50; i++ {
			s.Record(Key{Fingerprint: Fingerprint(hash([]byte(fmt.Sprint(i))))}, []byte("x"), "", Sample{}, time.Now())
			if n := s.Len(); n > max {
				t.Fatalf("max %d: %d entries", max, n)
			}
		}
		if s.Len() != max && max < 64 {
			t.Errorf("max %d: %d entries, want the store full", max, s.Len())
		}
		if got, want := s.Evicted(), uint64(3*max+50-s.Len()); got != want {
			t.Errorf("max %d: evicted %d, want %d", max, got, want)
		}
	}
}

func TestStoreLRU(t *testing.T) {
	s := New(Config{MaxDigests: 2})
	now := time.Now()
	s.Record(Key{Fingerprint: 1}, nil, "", Sample{}, now)
	s.Record(Key{Fingerprint: 2}, nil, "", Sample{}, now)
	s.Record(Key{Fingerprint: 1}, nil, "", Sample{}, now) // 2 is now the least recent
	s.Record(Key{Fingerprint: 3}, nil, "", Sample{}, now)
	got := map[Fingerprint]bool{}
	for _, d := range s.Top(ByCount, 0) {
		got[d.Fingerprint] = true
	}
	if !got[1] || !got[3] || got[2] {
		t.Fatalf("kept %v, want 1 and 3", got)
	}
}

func TestStoreConcurrent(t *testing.T) {
	s := New(Config{MaxDigests: 5000, ExampleLength: 64})
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				s.Record(Key{Fingerprint: Fingerprint(i % 7), User: "u"}, []byte("q"), "ex", Sample{Failed: i%10 == 0, ErrCode: 1062}, time.Now())
				if i%100 == 0 {
					_ = s.Top(ByErrors, 3)
				}
			}
		}()
	}
	wg.Wait()
	var count, errs uint64
	for _, d := range s.Top(ByCount, 0) {
		count += d.Count
		errs += d.ErrorCodes[1062]
	}
	if count != 32*500 || errs != 32*50 {
		t.Fatalf("count %d errors %d, want %d and %d", count, errs, 32*500, 32*50)
	}
}

func TestTopOrder(t *testing.T) {
	s := New(Config{MaxDigests: 10})
	now := time.Now()
	s.Record(Key{Fingerprint: 1}, nil, "", Sample{Duration: time.Second}, now)
	for i := 0; i < 3; i++ {
		s.Record(Key{Fingerprint: 2}, nil, "", Sample{Duration: time.Millisecond, Failed: true}, now)
	}
	if top := s.Top(ByTotalTime, 1); len(top) != 1 || top[0].Fingerprint != 1 {
		t.Errorf("by total_time: %+v", top)
	}
	if top := s.Top(ByCount, 0); top[0].Fingerprint != 2 {
		t.Errorf("by count: %+v", top)
	}
	if top := s.Top(ByErrors, 0); top[0].Fingerprint != 2 {
		t.Errorf("by errors: %+v", top)
	}
	if top := s.Top(ByP99, 0); top[0].Fingerprint != 1 {
		t.Errorf("by p99: %+v", top)
	}
	for _, name := range []string{"total_time", "count", "errors", "p99"} {
		if _, ok := ParseOrder(name); !ok {
			t.Errorf("ParseOrder(%q) failed", name)
		}
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 0; i < 99; i++ {
		h.add(100 * time.Microsecond)
	}
	h.add(time.Second)
	if q := h.quantile(0.5); q != 128*time.Microsecond {
		t.Errorf("p50 %v", q)
	}
	if q := h.quantile(0.99); q != 128*time.Microsecond {
		t.Errorf("p99 %v", q)
	}
	if q := h.quantile(1); q < time.Second {
		t.Errorf("p100 %v", q)
	}
	var empty histogram
	if empty.quantile(0.5) != 0 {
		t.Error("empty histogram")
	}
	h.add(time.Hour)
}

func TestParseShowQueries(t *testing.T) {
	good := map[string]ShowQueries{
		"SHOW GATEWAY QUERIES":                           {},
		"show gateway queries order by count limit 5;":   {Order: ByCount, Limit: 5},
		"SHOW GATEWAY QUERIES ORDER BY p99":              {Order: ByP99},
		"SHOW GATEWAY QUERIES LIMIT 3":                   {Limit: 3},
		"SHOW GATEWAY QUERIES RESET":                     {Reset: true},
		"SHOW  GATEWAY\nQUERIES ORDER BY ERRORS LIMIT 0": {Order: ByErrors},
	}
	for sql, want := range good {
		got, err := ParseShowQueries(sql)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", sql, got, err, want)
		}
	}
	for _, sql := range []string{"SHOW GATEWAY QUERIES ORDER BY rows", "SHOW GATEWAY QUERIES LIMIT x", "SHOW GATEWAY QUERIES RESET ALL", "SHOW GATEWAY QUERIES LIMIT 1 2"} {
		if _, err := ParseShowQueries(sql); err == nil {
			t.Errorf("%q accepted", sql)
		}
	}
}
