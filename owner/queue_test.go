package owner

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/wire"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeRow is one row of a fake message table.
type fakeRow struct {
	priority, timeNext, epoch int64
	acked                     bool
}

// fakeMessages is a message table in memory.
type fakeMessages struct {
	mu        sync.Mutex
	rows      map[string]*fakeRow
	postpones [][]postponement
	failNext  error         // the next postpone fails with it
	gate      chan struct{} // when set, each postpone waits for a value
	loads     int
	cutoffs   []int64
}

func newFakeMessages() *fakeMessages { return &fakeMessages{rows: map[string]*fakeRow{}} }

func (f *fakeMessages) insert(id string, priority, timeNext int64) {
	f.mu.Lock()
	f.rows[id] = &fakeRow{priority: priority, timeNext: timeNext}
	f.mu.Unlock()
}

func (f *fakeMessages) ack(id string) {
	f.mu.Lock()
	f.rows[id].acked = true
	f.mu.Unlock()
}

func (f *fakeMessages) row(id string) fakeRow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.rows[id]
}

func (f *fakeMessages) loadDue(_ context.Context, now int64, limit int) ([]*message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	var out []*message
	for id, r := range f.rows {
		if !r.acked && r.timeNext <= now {
			out = append(out, &message{id: id, priority: r.priority, timeNext: r.timeNext, epoch: r.epoch, row: [][]byte{[]byte(id), []byte("body " + id)}})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].priority != out[j].priority {
			return out[i].priority < out[j].priority
		}
		if out[i].timeNext != out[j].timeNext {
			return out[i].timeNext < out[j].timeNext
		}
		return out[i].id < out[j].id
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (f *fakeMessages) postpone(_ context.Context, _ uint64, due []postponement) error {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failNext; err != nil {
		f.failNext = nil
		return err
	}
	f.postpones = append(f.postpones, due)
	for _, d := range due {
		if r := f.rows[d.id]; r != nil && !r.acked {
			r.timeNext = d.timeNext
			r.epoch++
		}
	}
	return nil
}

func (f *fakeMessages) purge(_ context.Context, _ uint64, cutoff int64) (int64, error) {
	f.mu.Lock()
	f.cutoffs = append(f.cutoffs, cutoff)
	f.mu.Unlock()
	return 0, nil
}

// fakeSub records what it receives. While hold is set, send blocks until
// the test sends on release. fail makes send fail.
type fakeSub struct {
	name    string
	got     chan string
	release chan struct{}
	hold    bool
	fail    bool
	check   func(ids []string)
}

func newFakeSub(name string) *fakeSub {
	return &fakeSub{name: name, got: make(chan string, 100), release: make(chan struct{})}
}

func (s *fakeSub) send(rows [][][]byte) error {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = string(r[0])
	}
	if s.check != nil {
		s.check(ids)
	}
	if s.hold {
		<-s.release
	}
	if s.fail {
		return errors.New("connection reset")
	}
	for _, id := range ids {
		s.got <- id
	}
	return nil
}

// receive waits for n ids from s.
func receive(t *testing.T, s *fakeSub, n int) []string {
	t.Helper()
	var ids []string
	timeout := time.After(5 * time.Second)
	for len(ids) < n {
		select {
		case id := <-s.got:
			ids = append(ids, id)
		case <-timeout:
			t.Fatalf("%s received %v, want %d messages", s.name, ids, n)
		}
	}
	return ids
}

// nothing checks that s receives nothing for a short while.
func nothing(t *testing.T, s *fakeSub) {
	t.Helper()
	select {
	case id := <-s.got:
		t.Fatalf("%s unexpectedly received %s", s.name, id)
	case <-time.After(100 * time.Millisecond):
	}
}

func testOptions() msgOptions {
	return msgOptions{AckWait: 10 * time.Second, PurgeAfter: time.Hour, BatchSize: 1, CacheSize: 100,
		PollInterval: time.Hour, MinBackoff: 10 * time.Second}
}

// startQueue runs a queue over store with a fake clock at 1000s and a
// jitter of exactly 1.
func startQueue(t *testing.T, opts msgOptions, store queueStore) (*queue, *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: time.Unix(1000, 0)}
	q := newQueue("db.msgs", opts, store, []wire.Column{{Name: "id"}, {Name: "body"}}, hclog.NewNullLogger(), clock.now, func() float64 { return 0.5 })
	q.start()
	t.Cleanup(func() { q.close(nil) })
	return q, clock
}

func TestPickRoundRobin(t *testing.T) {
	q := &queue{}
	a, b, c := &subscription{}, &subscription{}, &subscription{}
	q.subs = []*subscription{a, b, c}
	var order []*subscription
	for range 6 {
		order = append(order, q.pickLocked())
	}
	if want := []*subscription{a, b, c, a, b, c}; !slices.Equal(order, want) {
		t.Fatal("free subscribers are not taken in turn")
	}
	b.busy = true
	if got := []*subscription{q.pickLocked(), q.pickLocked(), q.pickLocked()}; !slices.Equal(got, []*subscription{a, c, a}) {
		t.Fatal("a busy subscriber is not skipped")
	}
	a.busy, c.busy = true, true
	if q.pickLocked() != nil {
		t.Fatal("picked a busy subscriber")
	}
}

// Each message goes to one subscriber; deliveries are shared between
// subscribers; each message is postponed before it is sent.
func TestQueueDeliversEachMessageOnce(t *testing.T) {
	store := newFakeMessages()
	for i := range 20 {
		store.insert(strconv.Itoa(i), 0, 0)
	}
	q, clock := startQueue(t, testOptions(), store)
	subs := []*fakeSub{newFakeSub("a"), newFakeSub("b")}
	// a's first delivery waits until b has subscribed: on a busy host
	// the queue could otherwise hand all 20 to a before b is there.
	subs[0].hold = true
	for _, s := range subs {
		s.check = func(ids []string) {
			for _, id := range ids {
				r := store.row(id)
				if want := clock.now().Add(20 * time.Second).UnixNano(); r.epoch != 1 || r.timeNext != want {
					t.Errorf("message %s sent before it was postponed: epoch %d, time_next %d (want 1, %d)", id, r.epoch, r.timeNext, want)
				}
			}
		}
		q.subscribe(s)
	}
	close(subs[0].release)
	seen := map[string]bool{}
	count := map[string]int{}
	timeout := time.After(5 * time.Second)
	for len(seen) < 20 {
		select {
		case id := <-subs[0].got:
			count["a"]++
			if seen[id] {
				t.Fatalf("message %s delivered twice", id)
			}
			seen[id] = true
		case id := <-subs[1].got:
			count["b"]++
			if seen[id] {
				t.Fatalf("message %s delivered twice", id)
			}
			seen[id] = true
		case <-timeout:
			t.Fatalf("delivered %d of 20", len(seen))
		}
	}
	if count["a"] == 0 || count["b"] == 0 {
		t.Fatalf("deliveries not shared: %v", count)
	}
	nothing(t, subs[0])
}

// Priority first, then the oldest due message.
func TestQueueOrder(t *testing.T) {
	store := newFakeMessages()
	store.insert("late-low", 5, 100)
	store.insert("early-low", 5, 50)
	store.insert("high", 1, 900)
	opts := testOptions()
	q, _ := startQueue(t, opts, store)
	s := newFakeSub("a")
	s.hold = true
	q.subscribe(s)
	// The first poll may race the subscription; wait until all three are
	// cached, then let the subscriber read.
	waitFor(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.inQueue)+len(q.inFlight) == 3 })
	close(s.release)
	got := receive(t, s, 3)
	// The first batch may have been popped before the others arrived.
	if !slices.Equal(got[1:], []string{"early-low", "late-low"}) && !slices.Equal(got, []string{"high", "early-low", "late-low"}) {
		t.Fatalf("order %v", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// settled waits until no message of q is being delivered: a poll
// requested before that would skip a message still in flight.
func settled(t *testing.T, q *queue) {
	t.Helper()
	waitFor(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.inFlight) == 0 })
}

// An unacked message comes back after the ack wait plus the backoff,
// which doubles with every send; an acked one does not.
func TestQueueRedeliveryAndBackoff(t *testing.T) {
	store := newFakeMessages()
	store.insert("m", 0, 0)
	store.insert("n", 0, 0)
	opts := testOptions()
	opts.BatchSize = 10
	q, clock := startQueue(t, opts, store)
	s := newFakeSub("a")
	q.subscribe(s)
	receive(t, s, 2)
	store.ack("n")
	q.acked([]string{"n"}, 1)
	start := clock.now()
	if r := store.row("m"); r.timeNext != start.Add(20*time.Second).UnixNano() {
		t.Fatalf("first postpone: time_next %d", r.timeNext)
	}
	settled(t, q)
	clock.advance(19 * time.Second)
	q.requestPoll()
	nothing(t, s)
	clock.advance(time.Second)
	q.requestPoll()
	if got := receive(t, s, 1); got[0] != "m" {
		t.Fatalf("redelivered %v", got)
	}
	// Second send: ack wait 10s + backoff 10s << 1.
	if r := store.row("m"); r.epoch != 2 || r.timeNext != clock.now().Add(30*time.Second).UnixNano() {
		t.Fatalf("second postpone: epoch %d, time_next %d", r.epoch, r.timeNext)
	}
	clock.advance(time.Hour)
	store.ack("m")
	q.acked([]string{"m"}, 1)
	q.requestPoll()
	nothing(t, s)
}

// A subscriber whose connection fails is removed; its message, already
// postponed, goes to another subscriber once due again.
func TestQueueSubscriberFailure(t *testing.T) {
	store := newFakeMessages()
	store.insert("m", 0, 0)
	q, clock := startQueue(t, testOptions(), store)
	bad := newFakeSub("bad")
	bad.fail = true
	badSub := q.subscribe(bad)
	select {
	case <-badSub.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a failing subscriber was not removed")
	}
	if r := store.row("m"); r.epoch != 1 {
		t.Fatalf("message not postponed before the failed send: epoch %d", r.epoch)
	}
	good := newFakeSub("good")
	q.subscribe(good)
	nothing(t, good) // not due yet
	settled(t, q)
	clock.advance(20 * time.Second)
	q.requestPoll()
	if got := receive(t, good, 1); got[0] != "m" {
		t.Fatalf("got %v", got)
	}
}

// A batch that cannot be postponed is not sent; it is delivered once the
// primary answers again.
func TestQueuePostponeFailure(t *testing.T) {
	store := newFakeMessages()
	store.failNext = errors.New("primary down")
	store.insert("m", 0, 0)
	q, _ := startQueue(t, testOptions(), store)
	s := newFakeSub("a")
	q.subscribe(s)
	nothing(t, s)
	if r := store.row("m"); r.epoch != 0 {
		t.Fatalf("epoch %d after a failed postpone", r.epoch)
	}
	waitFor(t, func() bool { store.mu.Lock(); defer store.mu.Unlock(); return store.failNext == nil })
	settled(t, q)
	q.requestPoll()
	if got := receive(t, s, 1); got[0] != "m" {
		t.Fatalf("got %v", got)
	}
}

// A message acked while it waits in the cache is not sent.
func TestQueueAckDropsCached(t *testing.T) {
	store := newFakeMessages()
	store.insert("a", 0, 1)
	store.insert("b", 0, 2)
	q, _ := startQueue(t, testOptions(), store)
	s := newFakeSub("s")
	s.hold = true
	q.subscribe(s)
	// "a" is in flight (held), "b" waits in the cache.
	waitFor(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.inFlight) == 1 && len(q.inQueue) == 1 })
	store.ack("b")
	q.acked([]string{"b"}, 1)
	s.release <- struct{}{}
	if got := receive(t, s, 1); got[0] != "a" {
		t.Fatalf("got %v", got)
	}
	nothing(t, s)
}

// The cache holds at most cache_size messages; the rest are loaded once
// it drains.
func TestQueueCacheBound(t *testing.T) {
	store := newFakeMessages()
	for i := range 7 {
		store.insert(strconv.Itoa(i), 0, int64(i))
	}
	opts := testOptions()
	opts.CacheSize = 3
	opts.BatchSize = 2
	q, _ := startQueue(t, opts, store)
	s := newFakeSub("s")
	q.subscribe(s)
	got := receive(t, s, 7)
	slices.Sort(got)
	if !slices.Equal(got, []string{"0", "1", "2", "3", "4", "5", "6"}) {
		t.Fatalf("got %v", got)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.heap) > 3 {
		t.Fatalf("cache holds %d", len(q.heap))
	}
}

// Closing a queue ends its subscriptions with the reason.
func TestQueueCloseEndsSubscriptions(t *testing.T) {
	store := newFakeMessages()
	q, _ := startQueue(t, testOptions(), store)
	sub := q.subscribe(newFakeSub("s"))
	q.close(wire.NewError(1053, "08S01", "Server shutdown in progress"))
	select {
	case <-sub.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not ended")
	}
	if sub.err == nil || sub.err.Code != 1053 {
		t.Fatalf("reason %v", sub.err)
	}
	if after := q.subscribe(newFakeSub("late")); after.err == nil {
		t.Fatal("a closed queue accepted a subscriber")
	}
}

func TestQueuePurgeCutoff(t *testing.T) {
	store := newFakeMessages()
	clock := &fakeClock{t: time.Unix(5000, 0)}
	opts := testOptions()
	q := newQueue("db.msgs", opts, store, nil, hclog.NewNullLogger(), clock.now, func() float64 { return 0.5 })
	q.purge()
	if len(store.cutoffs) != 1 || store.cutoffs[0] != time.Unix(5000, 0).Add(-time.Hour).UnixNano() {
		t.Fatalf("cutoffs %v", store.cutoffs)
	}
}

// Regression: a poll that reads a full page of messages still in flight
// (popped, not yet postponed) must not leave the messages behind them
// waiting for the next poller interval.
func TestQueuePollBehindInFlight(t *testing.T) {
	store := newFakeMessages()
	store.gate = make(chan struct{})
	for i := range 3 {
		store.insert(strconv.Itoa(i), 0, int64(i))
	}
	opts := testOptions()
	opts.CacheSize = 1
	q, _ := startQueue(t, opts, store)
	s := newFakeSub("s")
	q.subscribe(s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			select {
			case store.gate <- struct{}{}:
			case <-time.After(5 * time.Second):
				return
			}
			// Let a poll see the message in flight before it is postponed.
			time.Sleep(20 * time.Millisecond)
		}
	}()
	got := receive(t, s, 3)
	<-done
	slices.Sort(got)
	if !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Fatalf("got %v", got)
	}
}

// A postponement the fence refuses (a newer term has written to the
// table, issue 35) is not sent: the queue ends its streams with 1290 and
// stops acting in its term, though its lease check still says it leads;
// in a newer term it delivers again.
func TestQueueStaleTermStandsDown(t *testing.T) {
	store := newFakeMessages()
	store.insert("m", 0, 0)
	store.failNext = staleTerm(&table{Schema: "db", Name: "msgs", kind: kindMessage}, 10, 20)
	var mu sync.Mutex
	term := uint64(10)
	clock := &fakeClock{t: time.Unix(1000, 0)}
	q := newQueue("db.msgs", testOptions(), store, []wire.Column{{Name: "id"}, {Name: "body"}}, hclog.NewNullLogger(), clock.now, func() float64 { return 0.5 })
	q.lead = func() (uint64, bool) { mu.Lock(); defer mu.Unlock(); return term, true }
	q.start()
	t.Cleanup(func() { q.close(nil) })

	s := newFakeSub("a")
	sub := q.subscribe(s)
	select {
	case <-sub.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end after the fence refused its term")
	}
	if sub.err == nil || sub.err.Code != wire.ErOptionPreventsStatement || !strings.Contains(sub.err.Message, "STREAM again") {
		t.Fatalf("stream ended with %v, want 1290 STREAM again", sub.err)
	}
	nothing(t, s)
	if r := store.row("m"); r.epoch != 0 {
		t.Fatalf("epoch %d after a refused postpone", r.epoch)
	}
	if q.serving() {
		t.Fatal("the queue still acts in the term the fence refused")
	}
	mu.Lock()
	term = 30
	mu.Unlock()
	s = newFakeSub("b")
	q.subscribe(s)
	if got := receive(t, s, 1); got[0] != "m" {
		t.Fatalf("in a newer term: got %v", got)
	}
}
