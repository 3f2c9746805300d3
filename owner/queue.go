package owner

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/wire"
)

// queueStore is the message table on the primary, as a queue sees it.
type queueStore interface {
	// loadDue reads at most limit unacked messages with time_next <= now
	// (ns), by priority then time_next.
	loadDue(ctx context.Context, now int64, limit int) ([]*message, error)
	// postpone sets time_next of each unacked message to its due time and
	// increments its epoch, in one statement, in leadership term.
	postpone(ctx context.Context, term uint64, due []postponement) error
	// purge deletes up to purgeBatch messages acked before cutoff (ns),
	// in leadership term, and returns how many it deleted.
	purge(ctx context.Context, term uint64, cutoff int64) (int64, error)
	// Both are the leader's own writes: behind the fence of an elected
	// owner, a term a newer one has written over is refused with
	// *staleTermError and nothing is written (fence.go).
}

// purgeBatch is the most rows one purge statement deletes.
const purgeBatch = 500

// statementTimeout bounds every statement the owner runs on the primary.
const statementTimeout = 30 * time.Second

// postponement is the new time_next of one message being sent.
type postponement struct {
	id       string
	timeNext int64
}

// message is one due message in a queue's cache.
type message struct {
	// id is the id column as the text protocol shows it: the cache key.
	id       string
	priority int64
	timeNext int64
	epoch    int64
	// row holds the streamed columns, id first; nil elements are NULL.
	row [][]byte
	// defunct marks a message acked while waiting in the cache: it is
	// dropped when it reaches the top of the heap.
	defunct bool
}

// subscriber receives the rows of one STREAM.
type subscriber interface {
	// send writes rows (each the streamed columns, id first) and flushes
	// them. An error ends the subscription.
	send(rows [][][]byte) error
}

// subscription is a subscriber registered with a queue.
type subscription struct {
	s    subscriber
	busy bool // a delivery to it is in flight; guarded by queue.mu
	done chan struct{}
	once sync.Once
	err  *wire.SQLError // why the queue ended it; read after done
}

// end ends the subscription once, with reason (nil when the subscriber
// itself failed or left).
func (s *subscription) end(reason *wire.SQLError) {
	s.once.Do(func() {
		s.err = reason
		close(s.done)
	})
}

// Done is closed when the subscription ends.
func (s *subscription) Done() <-chan struct{} { return s.done }

// queue delivers the messages of one message table to its subscribers,
// as Vitess's message manager does: a poller loads due messages into a
// bounded cache, a send loop hands them out in batches, round robin over
// the subscribers that are not busy, and each batch is postponed on the
// primary (time_next moved past the ack wait plus backoff, epoch + 1)
// before it is written to its subscriber, so a message that is not acked
// comes back by itself, and one sent to a subscriber that died is not
// lost. A purger deletes old acked messages.
//
// Concurrency: mu guards the cache, the subscribers and the options; it
// is never held across I/O. pollMu is held by a poll from its read of the
// table until its rows are in the cache, and by whoever forgets messages
// after changing them on the primary (a finished delivery, an ack), so a
// poll cannot put back a message from a snapshot older than that change.
type queue struct {
	name string
	log  hclog.Logger
	now  func() time.Time
	rnd  func() float64

	pollMu sync.Mutex

	mu       sync.Mutex
	opts     msgOptions
	store    queueStore
	fields   []wire.Column
	heap     msgHeap
	inQueue  map[string]*message
	inFlight map[string]struct{}
	subs     []*subscription
	cursor   int  // where the round robin looks first
	pending  bool // the last poll filled the cache: more may be due
	// repoll is set when a poll read a full page of messages that were
	// all in flight: the next finished delivery polls again, as more may
	// be due behind them.
	repoll bool
	closed bool
	// failing is set while postpones or polls fail, so only the first
	// failure of a streak is logged at warn level.
	failing bool

	// lead, when set, returns the leadership term the queue acts in and
	// whether it may poll and deliver: an owner that does not lead (or
	// whose lease may have run out) does neither. Set before start; nil:
	// always, in staticTerm.
	lead func() (term uint64, ok bool)
	// superseded is the newest term the fence refused a write of: a newer
	// term wrote to the table since, so the queue does not act in it (or
	// any older), whatever lead says.
	superseded atomic.Uint64

	// stats counts what the queue did, for metrics.
	stats queueStats

	wake    chan struct{} // nudges the send loop
	pollReq chan struct{} // asks for a poll now
	ctx     context.Context
	cancel  context.CancelFunc
	group   *safego.Group
}

// queueStats counts a queue's messages, for metrics: atomics, read at
// scrape time without the queue's mutex.
type queueStats struct {
	// inserted and acked are the primary's affected rows of the inserts
	// and acks that went through the owner; delivered counts messages
	// written to subscribers (again when redelivered); purged, rows the
	// purger deleted.
	inserted, delivered, acked, purged atomic.Uint64
}

// newQueue builds a queue; start runs its loops. now and rnd (a uniform
// draw from [0, 1), safe for concurrent use) are injectable for tests.
func newQueue(name string, opts msgOptions, store queueStore, fields []wire.Column, log hclog.Logger, now func() time.Time, rnd func() float64) *queue {
	ctx, cancel := context.WithCancel(context.Background())
	return &queue{
		name: name, log: log, now: now, rnd: rnd,
		opts: opts, store: store, fields: fields,
		inQueue: map[string]*message{}, inFlight: map[string]struct{}{},
		wake: make(chan struct{}, 1), pollReq: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, group: safego.New(log),
	}
}

// start runs the send, poll and purge loops until close.
func (q *queue) start() {
	q.group.Go("message send loop "+q.name, q.sendLoop)
	q.group.Go("message poller "+q.name, q.pollLoop)
	q.group.Go("message purger "+q.name, q.purgeLoop)
}

// close stops the loops, waits for deliveries in flight and ends every
// subscription with reason.
func (q *queue) close(reason *wire.SQLError) {
	q.mu.Lock()
	q.closed = true
	subs := q.subs
	q.subs = nil
	q.clearLocked()
	q.mu.Unlock()
	q.cancel()
	for _, s := range subs {
		s.end(reason)
	}
	q.group.Wait()
}

// reconfigure applies what a new discovery found. When the streamed
// columns changed, every subscription ends with an error (its clients
// read rows of the old shape) and the cache is emptied.
func (q *queue) reconfigure(opts msgOptions, store queueStore, fields []wire.Column) {
	q.mu.Lock()
	var ended []*subscription
	if !equalColumns(q.fields, fields) {
		ended = q.subs
		q.subs = nil
		q.clearLocked()
	}
	q.opts, q.store, q.fields = opts, store, fields
	q.mu.Unlock()
	for _, s := range ended {
		s.end(wire.NewError(1105, "HY000", "the columns of message table %s changed: STREAM it again", q.name))
	}
	q.requestPoll()
}

func equalColumns(a, b []wire.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// columns returns the column definitions a STREAM sends.
func (q *queue) columns() []wire.Column {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.fields
}

// subscribe registers s. The caller has already written the column
// definitions; rows go to s from now on, until the returned
// subscription's Done is closed.
func (q *queue) subscribe(s subscriber) *subscription {
	sub := &subscription{s: s, done: make(chan struct{})}
	if q.lead != nil {
		if term, ok := q.lead(); ok && term <= q.superseded.Load() {
			sub.end(q.supersededError(term))
			return sub
		}
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		sub.end(wire.NewError(1053, "08S01", "Server shutdown in progress"))
		return sub
	}
	q.subs = append(q.subs, sub)
	q.mu.Unlock()
	q.requestPoll()
	q.signal()
	return sub
}

// unsubscribe removes sub (if still registered) and ends it. With no
// subscriber left the cache is emptied, as nobody would read it.
func (q *queue) unsubscribe(sub *subscription) {
	q.mu.Lock()
	for i, s := range q.subs {
		if s == sub {
			q.subs = append(q.subs[:i], q.subs[i+1:]...)
			if q.cursor > i {
				q.cursor--
			}
			break
		}
	}
	if len(q.subs) == 0 {
		q.clearLocked()
	}
	q.mu.Unlock()
	sub.end(nil)
}

// clearLocked empties the cache of waiting messages. Messages in flight
// stay in inFlight until their delivery ends. Called with mu held.
func (q *queue) clearLocked() {
	q.heap = nil
	q.inQueue = map[string]*message{}
}

// endSubscriptions ends every subscription with reason and empties the
// cache; the queue keeps running for later subscribers (an owner that
// stopped leading).
func (q *queue) endSubscriptions(reason *wire.SQLError) {
	q.mu.Lock()
	subs := q.subs
	q.subs = nil
	q.clearLocked()
	q.mu.Unlock()
	for _, s := range subs {
		s.end(reason)
	}
}

// term returns the leadership term the queue acts in, and whether it may
// poll and deliver now.
func (q *queue) term() (uint64, bool) {
	if q.lead == nil {
		return staticTerm, true
	}
	term, ok := q.lead()
	return term, ok && term > q.superseded.Load()
}

// serving reports whether the queue may poll and deliver now.
func (q *queue) serving() bool {
	_, ok := q.term()
	return ok
}

// holds reports whether the queue still acts in term.
func (q *queue) holds(term uint64) bool {
	now, ok := q.term()
	return ok && now == term
}

// supersede stops the queue from acting in the term the fence refused
// (e): a newer term has written to the table, so this owner's leadership
// has ended, whatever its lease says. Its streams end (their clients
// STREAM again, through a gateway to the new leader) and its cache is
// emptied; it acts again only in a newer term than e's.
func (q *queue) supersede(e *staleTermError) {
	for {
		old := q.superseded.Load()
		if e.term <= old {
			q.log.Debug("the fence refused a write of an ended term", "table", q.name, "term", e.term, "newer", e.newer)
			return
		}
		if q.superseded.CompareAndSwap(old, e.term) {
			break
		}
	}
	q.log.Warn("a newer leadership term has written to this message table: MariaDB refused this owner's write, it stops delivering in its term",
		"table", q.name, "term", e.term, "newer", e.newer)
	q.endSubscriptions(q.supersededError(e.term))
}

// supersededError ends a stream of a term the fence refused.
func (q *queue) supersededError(term uint64) *wire.SQLError {
	return wire.NewError(wire.ErOptionPreventsStatement, "HY000",
		"This owner's leadership term %d has ended: a newer term has written to message table %s since; STREAM again (gateways send it to the new leader)",
		term, q.name)
}

// reset forgets the cached messages (the primary changed: its rows may
// differ) and polls again.
func (q *queue) reset() {
	q.mu.Lock()
	q.clearLocked()
	q.mu.Unlock()
	q.requestPoll()
}

// inserted tells the queue that rows messages were inserted: it polls
// at once instead of waiting for the poller interval.
func (q *queue) inserted(rows int64) {
	q.stats.inserted.Add(uint64(max(rows, 0)))
	q.requestPoll()
}

// acked drops acked messages from the cache; rows is how many the ack
// changed. Call it after the ack was committed.
func (q *queue) acked(ids []string, rows int64) {
	q.stats.acked.Add(uint64(max(rows, 0)))
	q.pollMu.Lock()
	defer q.pollMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if m := q.inQueue[id]; m != nil {
			m.defunct = true
			delete(q.inQueue, id)
		}
	}
}

// requestPoll asks the poller to run now; requests are coalesced.
func (q *queue) requestPoll() {
	select {
	case q.pollReq <- struct{}{}:
	default:
	}
}

// signal nudges the send loop.
func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// sendLoop hands out batches while there are messages and free
// subscribers, then waits for a nudge.
func (q *queue) sendLoop() {
	for {
		for q.dispatch() {
		}
		select {
		case <-q.ctx.Done():
			return
		case <-q.wake:
		}
	}
}

// dispatch starts one delivery and reports whether it did.
func (q *queue) dispatch() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if len(q.heap) == 0 {
		if q.pending && len(q.subs) > 0 {
			q.pending = false
			q.requestPoll()
		}
		return false
	}
	sub := q.pickLocked()
	if sub == nil {
		return false
	}
	var batch []*message
	for len(batch) < q.opts.BatchSize && len(q.heap) > 0 {
		m := heap.Pop(&q.heap).(*message)
		if m.defunct {
			continue
		}
		delete(q.inQueue, m.id)
		q.inFlight[m.id] = struct{}{}
		batch = append(batch, m)
	}
	if len(batch) == 0 {
		return true // only defunct entries were left: look again
	}
	sub.busy = true
	opts, store := q.opts, q.store
	q.group.Go("message delivery "+q.name, func() { q.deliver(sub, batch, opts, store) })
	return true
}

// pickLocked returns the next subscriber that is not busy, round robin,
// or nil. Called with mu held.
func (q *queue) pickLocked() *subscription {
	n := len(q.subs)
	for i := range n {
		j := (q.cursor + i) % n
		if !q.subs[j].busy {
			q.cursor = (j + 1) % n
			return q.subs[j]
		}
	}
	return nil
}

// deliver postpones batch on the primary, then writes it to sub. A batch
// that cannot be postponed is not sent: it stays due on the primary and
// the poller loads it again. A subscriber that fails to take it is
// removed; its batch comes back after the ack wait like any unacked one.
func (q *queue) deliver(sub *subscription, batch []*message, opts msgOptions, store queueStore) {
	now := q.now()
	due := make([]postponement, len(batch))
	rows := make([][][]byte, len(batch))
	for i, m := range batch {
		due[i] = postponement{id: m.id, timeNext: nextDue(now, m.epoch, opts, q.rnd())}
		rows[i] = m.row
	}
	var err error
	term, leading := q.term()
	if leading {
		ctx, cancel := context.WithTimeout(q.ctx, statementTimeout)
		err = store.postpone(ctx, term, due)
		cancel()
	}
	var stale *staleTermError
	switch {
	case !leading:
		// Not sent: the batch stays due in the table, for the leader.
	case errors.As(err, &stale):
		// A newer term has taken the queue over: nothing was postponed,
		// nothing goes out.
		q.supersede(stale)
	case err != nil:
		q.failed("cannot postpone messages before sending them; they stay due", err)
	case !q.holds(term):
		// Postponed, but the leadership lapsed meanwhile: not sent, the
		// batch comes back after the ack wait like an unacked one.
	default:
		q.recovered()
		if err := sub.s.send(rows); err != nil {
			q.log.Debug("subscriber gone", "table", q.name, "error", err)
			q.unsubscribe(sub)
		} else {
			q.stats.delivered.Add(uint64(len(batch)))
		}
	}
	q.mu.Lock()
	sub.busy = false
	q.mu.Unlock()
	q.forget(batch)
	q.signal()
}

// forget ends the in-flight state of messages whose delivery finished,
// and polls again if a poll found only messages in flight.
func (q *queue) forget(batch []*message) {
	q.pollMu.Lock()
	defer q.pollMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range batch {
		delete(q.inFlight, m.id)
	}
	if q.repoll {
		q.repoll = false
		q.requestPoll()
	}
}

// failed logs err at warn level on the first failure of a streak.
func (q *queue) failed(msg string, err error) {
	q.mu.Lock()
	first := !q.failing
	q.failing = true
	q.mu.Unlock()
	if first {
		q.log.Warn(msg, "table", q.name, "error", err)
	} else {
		q.log.Debug(msg, "table", q.name, "error", err)
	}
}

// recovered ends a failure streak.
func (q *queue) recovered() {
	q.mu.Lock()
	was := q.failing
	q.failing = false
	q.mu.Unlock()
	if was {
		q.log.Info("messages flow again", "table", q.name)
	}
}

// pollLoop polls every poller interval and whenever asked.
func (q *queue) pollLoop() {
	t := time.NewTimer(q.pollInterval())
	defer t.Stop()
	for {
		select {
		case <-q.ctx.Done():
			return
		case <-t.C:
		case <-q.pollReq:
		}
		q.poll()
		t.Reset(q.pollInterval())
	}
}

func (q *queue) pollInterval() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.opts.PollInterval
}

// poll loads due messages into the cache, when anyone subscribes.
func (q *queue) poll() {
	q.pollMu.Lock()
	defer q.pollMu.Unlock()
	q.mu.Lock()
	subs, size, store := len(q.subs), q.opts.CacheSize, q.store
	q.mu.Unlock()
	if subs == 0 || !q.serving() {
		return
	}
	ctx, cancel := context.WithTimeout(q.ctx, statementTimeout)
	ms, err := store.loadDue(ctx, q.now().UnixNano(), size)
	cancel()
	if err != nil {
		if q.ctx.Err() == nil {
			q.failed("cannot read due messages", err)
		}
		return
	}
	q.mu.Lock()
	added, full := 0, false
	for _, m := range ms {
		if _, ok := q.inQueue[m.id]; ok {
			continue
		}
		if _, ok := q.inFlight[m.id]; ok {
			continue
		}
		if len(q.heap) >= size {
			full = true
			break
		}
		heap.Push(&q.heap, m)
		q.inQueue[m.id] = m
		added++
	}
	more := full || len(ms) >= size
	q.pending = more && added > 0
	q.repoll = more && added == 0
	q.mu.Unlock()
	if added > 0 {
		q.signal()
	}
}

// purgeLoop deletes old acked messages every poller interval (at least
// every second), subscribers or not.
func (q *queue) purgeLoop() {
	for {
		t := time.NewTimer(max(q.pollInterval(), time.Second))
		select {
		case <-q.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		q.purge()
	}
}

// purge deletes messages acked more than purge_after ago, in batches of
// purgeBatch while batches come back full (at most 100 per run).
func (q *queue) purge() {
	term, ok := q.term()
	if !ok {
		return // the leader purges
	}
	q.mu.Lock()
	store, after := q.store, q.opts.PurgeAfter
	q.mu.Unlock()
	cutoff := q.now().Add(-after).UnixNano()
	for range 100 {
		ctx, cancel := context.WithTimeout(q.ctx, statementTimeout)
		n, err := store.purge(ctx, term, cutoff)
		cancel()
		var stale *staleTermError
		if errors.As(err, &stale) {
			q.supersede(stale)
			return
		}
		if err != nil {
			if q.ctx.Err() == nil {
				q.log.Debug("purge failed", "table", q.name, "error", err)
			}
			return
		}
		if n > 0 {
			q.stats.purged.Add(uint64(n))
			q.log.Trace("purged acked messages", "table", q.name, "rows", n)
		}
		if n < purgeBatch {
			return
		}
	}
}

// msgHeap orders messages by priority (lower first), then by time_next
// (earlier first).
type msgHeap []*message

func (h msgHeap) Len() int { return len(h) }
func (h msgHeap) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(h[i].priority, h[j].priority), cmp.Compare(h[i].timeNext, h[j].timeNext)) < 0
}
func (h msgHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *msgHeap) Push(x any)   { *h = append(*h, x.(*message)) }
func (h *msgHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return m
}
