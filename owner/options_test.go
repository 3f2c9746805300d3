package owner

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func TestParseMsgOptions(t *testing.T) {
	o, err := parseMsgOptions("vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=10000,vt_poller_interval=30")
	if err != nil {
		t.Fatal(err)
	}
	want := msgOptions{AckWait: 30 * time.Second, PurgeAfter: 86400 * time.Second, BatchSize: 10, CacheSize: 10000,
		PollInterval: 30 * time.Second, MinBackoff: 30 * time.Second}
	if !equalOptions(o, want) {
		t.Fatalf("got %+v\nwant %+v", o, want)
	}

	o, err = parseMsgOptions("vitess_message, vt_ack_wait=0.5,vt_poller_interval=0.2,vt_min_backoff=0.25,vt_max_backoff=10,vt_message_cols=id|body,other=x,junk")
	if err != nil {
		t.Fatal(err)
	}
	want = defaultMsgOptions()
	want.AckWait, want.PollInterval, want.MinBackoff, want.MaxBackoff = 500*time.Millisecond, 200*time.Millisecond, 250*time.Millisecond, 10*time.Second
	want.Columns = []string{"id", "body"}
	if !equalOptions(o, want) {
		t.Fatalf("got %+v\nwant %+v", o, want)
	}

	// Defaults: every attribute missing; min backoff follows ack wait.
	o, err = parseMsgOptions("vitess_message,vt_ack_wait=7")
	if err != nil || o.MinBackoff != 7*time.Second || o.BatchSize != 10 || o.CacheSize != 10000 || o.MaxBackoff != 0 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	for _, bad := range []string{
		"vitess_message,vt_ack_wait=0", "vitess_message,vt_ack_wait=-1", "vitess_message,vt_ack_wait=x",
		"vitess_message,vt_batch_size=0", "vitess_message,vt_cache_size=1.5", "vitess_message,vt_poller_interval=NaN",
		"vitess_message,vt_message_cols=body|id", "vitess_message,vt_purge_after=1e300",
	} {
		if _, err := parseMsgOptions(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func equalOptions(a, b msgOptions) bool { return reflect.DeepEqual(a, b) }

func TestBackoff(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		epoch    int64
		min, max time.Duration
		rnd      float64
		want     time.Duration
	}{
		{0, 10 * s, 0, 0.5, 10 * s},       // jitter 1.0
		{1, 10 * s, 0, 0.5, 20 * s},       // doubles
		{3, 10 * s, 0, 0.5, 80 * s},       // 10 << 3
		{0, 10 * s, 0, 0, 10 * s},         // jitter 2/3 clamped to min
		{2, 10 * s, 0, 0, 40 * s * 2 / 3}, // jitter 2/3
		{2, 10 * s, 0, 0.999999, 53333 * s / 1000},
		{5, 10 * s, 60 * s, 0.5, 60 * s},     // capped
		{200, 10 * s, 0, 0.5, math.MaxInt64}, // saturates, no overflow
		{200, 10 * s, time.Hour, 0.9, time.Hour},
		{0, 0, 0, 0.5, 0},
	} {
		got := backoff(tc.epoch, tc.min, tc.max, tc.rnd)
		if d := got - tc.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("backoff(%d, %v, %v, %v) = %v, want %v", tc.epoch, tc.min, tc.max, tc.rnd, got, tc.want)
		}
	}
	now := time.Unix(1000, 0)
	o := msgOptions{AckWait: 30 * s, MinBackoff: 30 * s}
	if got, want := nextDue(now, 0, o, 0.5), now.Add(60*s).UnixNano(); got != want {
		t.Fatalf("nextDue = %d, want %d", got, want)
	}
	if got := nextDue(now, 100, o, 0.5); got != math.MaxInt64 {
		t.Fatalf("nextDue far out = %d, want MaxInt64", got)
	}
}
