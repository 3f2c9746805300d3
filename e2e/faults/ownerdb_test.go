package faults

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/e2e/faultproxy"
	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/owner"
)

// The owner→MariaDB link (issue 35), outside the soak: an owner without
// election whose link to MariaDB is a fault proxy, and a gateway that
// reaches MariaDB directly and forwards NEXT VALUE, message inserts, acks
// and STREAM to the owner.

// ownerStatementBound is what bounds an owner statement whose link to
// MariaDB went silent: the owner's own statement timeout (30 s, which
// also is go-sql-driver's read timeout on its MariaDB connections) ends
// it with 1429; the gateway's wait for a fixed owner's answer
// (forward.FixedOwnerAnswer, 35 s) would cut it otherwise. The bound
// checked is the gateway's, with room for a loaded machine.
const ownerStatementBound = forward.FixedOwnerAnswer + 5*time.Second

// ownerLinkStack starts an owner whose link to MariaDB is a fault proxy
// and a gateway straight to MariaDB that forwards to the owner.
func ownerLinkStack(t *testing.T, name string) (*faultproxy.Link, *owner.Owner, string) {
	t.Helper()
	l := link(t, "owner-mariadb")
	o := startOwner(t, l)
	gw := startGatewayWith(t, name, "{size: 8, min_idle: 0, acquire_timeout: 5s}", "{interval: 200ms, timeout: 500ms}",
		fmt.Sprintf("    owner: %q\n    owner_timeout: 1s\n", o.Addr().String()), primary.Addr())
	return l, o, gw.Addr().String()
}

// makeSeq (re)creates sequence table name with the given cache.
func makeSeq(t *testing.T, root *sql.DB, name string, cache int) {
	t.Helper()
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + name,
		"CREATE TABLE " + name + " (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		fmt.Sprintf("INSERT INTO %s VALUES (0, 1, %d)", name, cache),
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// call is one statement a client ran: when it began, how long it took,
// how it ended.
type call struct {
	at   time.Time
	took time.Duration
	err  error
}

// drawer is one client drawing NEXT VALUE in a loop.
type drawer struct {
	values []int64
	calls  []call
}

// drawUntil runs n clients (a connection each) drawing NEXT VALUE FROM
// seq through gateway addr until stop closes; the returned function
// waits for them and returns what each saw.
func drawUntil(t *testing.T, addr, seq string, n int, stop <-chan struct{}) func() []*drawer {
	t.Helper()
	ds := make([]*drawer, n)
	var wg sync.WaitGroup
	for i := range ds {
		ds[i] = &drawer{}
		db := open(t, addr)
		db.SetMaxOpenConns(1)
		wg.Go(func() {
			d := ds[i]
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				var v int64
				err := db.QueryRow("SELECT NEXT VALUE FROM " + seq).Scan(&v)
				d.calls = append(d.calls, call{at: start, took: time.Since(start), err: err})
				if err == nil {
					d.values = append(d.values, v)
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	return func() []*drawer { wg.Wait(); return ds }
}

// checkValues checks that no value was handed out twice, each client's
// values strictly increase, and the sequence row is past every value.
func checkValues(t *testing.T, root *sql.DB, seq string, ds []*drawer) int {
	t.Helper()
	seen := map[int64]int{}
	var top int64
	total := 0
	for i, d := range ds {
		for j, v := range d.values {
			if j > 0 && v <= d.values[j-1] {
				t.Errorf("client %d: value %d after %d", i, v, d.values[j-1])
			}
			if c, dup := seen[v]; dup {
				t.Errorf("value %d handed out twice (clients %d and %d)", v, c, i)
			}
			seen[v] = i
			top = max(top, v)
			total++
		}
	}
	var next int64
	if err := root.QueryRow("SELECT next_id FROM " + seq + " WHERE id = 0").Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next <= top {
		t.Errorf("the sequence row says next_id %d, but %d was handed out", next, top)
	}
	return total
}

// ownerStatements is the owner's count of statements of kind (sequence,
// message, stream) by outcome.
func ownerStatements(t *testing.T, o *owner.Owner, kind string) (ok, failed float64) {
	t.Helper()
	families, err := o.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "directgate_owner_statements_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] != kind {
				continue
			}
			if labels["outcome"] == "ok" {
				ok += m.GetCounter().GetValue()
			} else {
				failed += m.GetCounter().GetValue()
			}
		}
	}
	return ok, failed
}

// openTransactions counts the transactions open on MariaDB for the
// backend account (the owner's).
func openTransactions(t *testing.T, root *sql.DB) int {
	t.Helper()
	var n int
	err := root.QueryRow("SELECT COUNT(*) FROM information_schema.innodb_trx x JOIN information_schema.processlist p ON p.id = x.trx_mysql_thread_id WHERE p.user = ?", backendUser).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantOwnerLinkError checks a failed call: 1429 within bound, whose
// message says what to do (run it again, or check first; or, when the
// owner found no primary, raise failover_buffer).
func wantOwnerLinkError(t *testing.T, who string, c call, bound time.Duration) {
	t.Helper()
	var me *mysql.MySQLError
	switch {
	case !errors.As(c.err, &me):
		t.Errorf("%s: %v after %v: not a MySQL error packet", who, c.err, c.took)
	case me.Number != 1429:
		t.Errorf("%s: %v after %v, want 1429", who, c.err, c.took)
	case !strings.Contains(me.Message, "again") && !strings.Contains(me.Message, "raise failover_buffer"):
		t.Errorf("%s: %q does not say what to do", who, me.Message)
	case c.took > bound:
		t.Errorf("%s: error after %v, past the bound %v", who, c.took, bound)
	}
}

// TestOwnerLinkResetCut: the owner's link to MariaDB is reset, and cut
// after so many bytes (in either direction, at several points of the
// reservation's BEGIN, SELECT ... FOR UPDATE, UPDATE, COMMIT), while 4
// clients draw NEXT VALUE from a sequence with cache 1 (every value is a
// reservation). Each failed statement gets 1429 at once, saying the
// primary could not be reached and whether it may have run; the gateway
// does not send it again (the owner counted as many sequence statements
// as the clients sent); no value is handed out twice, each client's
// values increase, the sequence row is past every value, and no
// transaction of the owner stays open on MariaDB (each cut reservation
// was rolled back or committed).
func TestOwnerLinkResetCut(t *testing.T) {
	needStack(t)
	root := rootDB(t)
	makeSeq(t, root, "ol_cut_seq", 1)
	l, o, gw := ownerLinkStack(t, "ownerlinkcut")
	warm := open(t, gw)
	var v int64
	if err := warm.QueryRow("SELECT NEXT VALUE FROM ol_cut_seq").Scan(&v); err != nil {
		t.Fatal(err)
	}
	ok0, failed0 := ownerStatements(t, o, "sequence")

	stop := make(chan struct{})
	wait := drawUntil(t, gw, "ol_cut_seq", 4, stop)
	faults := []struct {
		name string
		add  func() error
	}{
		{"reset of results", func() error { return l.Reset(faultproxy.Down) }},
		{"reset of commands", func() error { return l.Reset(faultproxy.Up) }},
		{"results cut after 11 bytes", func() error { return l.CutAfter(faultproxy.Down, 11) }},
		{"results cut after 60 bytes", func() error { return l.CutAfter(faultproxy.Down, 60) }},
		{"results cut after 150 bytes", func() error { return l.CutAfter(faultproxy.Down, 150) }},
		{"commands cut after 40 bytes", func() error { return l.CutAfter(faultproxy.Up, 40) }},
		{"commands cut after 120 bytes", func() error { return l.CutAfter(faultproxy.Up, 120) }},
	}
	for _, f := range faults {
		time.Sleep(300 * time.Millisecond)
		if err := f.add(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		l.Clear()
	}
	time.Sleep(time.Second)
	close(stop)
	ds := wait()

	failed, sent := 0, 0
	var slowest time.Duration
	samples := map[string]bool{}
	for i, d := range ds {
		sent += len(d.calls)
		for _, c := range d.calls {
			if c.err == nil {
				continue
			}
			failed++
			slowest = max(slowest, c.took)
			// Discovery may find the primary gone for a moment: the
			// statements then wait failover_buffer (5 s) for it.
			wantOwnerLinkError(t, fmt.Sprintf("client %d", i), c, 10*time.Second)
			if len(samples) < 4 {
				samples[c.err.Error()] = true
			}
		}
	}
	got := checkValues(t, root, "ol_cut_seq", ds)
	t.Logf("%d statements, %d values, %d failed (slowest error after %v)", sent, got, failed, slowest.Round(time.Millisecond))
	for s := range samples {
		t.Logf("error: %s", s)
	}
	if failed == 0 {
		t.Error("no statement failed: the faults did not hit a reservation")
	}
	ok1, failed1 := ownerStatements(t, o, "sequence")
	if owned := int(ok1 - ok0 + failed1 - failed0); owned != sent {
		t.Errorf("the owner ran %d sequence statements for %d the clients sent: the gateway sent some again", owned, sent)
	}
	start := time.Now()
	for openTransactions(t, root) > 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d transactions of the owner still open on MariaDB 10 s after the last fault", openTransactions(t, root))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("no transaction of the owner open on MariaDB %v after the last check began", time.Since(start).Round(time.Millisecond))
	if err := warm.QueryRow("SELECT NEXT VALUE FROM ol_cut_seq").Scan(&v); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
}

// makeMsgs (re)creates message table name: ack wait 2 s, polled every
// second.
func makeMsgs(t *testing.T, root *sql.DB, name string) {
	t.Helper()
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + name,
		"CREATE TABLE " + name + ` (
			id BIGINT PRIMARY KEY, priority BIGINT NOT NULL DEFAULT 0, epoch BIGINT NOT NULL DEFAULT 0,
			time_next BIGINT DEFAULT 0, time_acked BIGINT, body VARCHAR(64), KEY next_idx (time_next)
		) COMMENT 'vitess_message,vt_ack_wait=2,vt_purge_after=86400,vt_batch_size=5,vt_cache_size=1000,vt_poller_interval=1'`,
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// msgRun is a producer, a STREAM subscriber and an acker of one message
// table through a gateway.
type msgRun struct {
	mu        sync.Mutex
	delivered map[int64]int
	inserted  map[int64]bool  // answered OK (or 1062: a retry of one that ran)
	ackOK     map[int64]int64 // the time_acked of the ack that changed the row, answered OK
	calls     map[string][]call
	streams   int // STREAMs begun
}

func (r *msgRun) record(what string, c call) {
	r.mu.Lock()
	r.calls[what] = append(r.calls[what], c)
	r.mu.Unlock()
}

// runMessages inserts ids 1..total (one every 20 ms, each retried until
// it is in) until inserts ends, streams the table and acks each delivery
// (AND time_acked IS NULL, retried while it fails) until ctx ends.
func runMessages(ctx, inserts context.Context, t *testing.T, gw, table string, total int64) (*msgRun, func()) {
	r := &msgRun{delivered: map[int64]int{}, inserted: map[int64]bool{}, ackOK: map[int64]int64{}, calls: map[string][]call{}}
	var wg sync.WaitGroup
	toAck := make(chan int64, 100_000)
	prod, acker, sub := open(t, gw), open(t, gw), open(t, gw)
	prod.SetMaxOpenConns(1)
	acker.SetMaxOpenConns(8)
	wg.Go(func() {
		for id := int64(1); id <= total && inserts.Err() == nil; id++ {
			for inserts.Err() == nil {
				start := time.Now()
				_, err := prod.Exec(fmt.Sprintf("INSERT INTO %s (id, body) VALUES (%d, 'm%d')", table, id, id))
				var me *mysql.MySQLError
				if errors.As(err, &me) && me.Number == 1062 {
					err = nil // a retry of an insert that had run
				}
				r.record("insert", call{at: start, took: time.Since(start), err: err})
				if err == nil {
					r.mu.Lock()
					r.inserted[id] = true
					r.mu.Unlock()
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			r.mu.Lock()
			r.streams++
			r.mu.Unlock()
			err := streamIDs(ctx, sub, table, func(id int64) {
				r.mu.Lock()
				r.delivered[id]++
				r.mu.Unlock()
				toAck <- id
			})
			if ctx.Err() == nil {
				t.Logf("STREAM ended: %v; again", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	// Each delivery is acked 300 ms later, on a connection of its own, so
	// acks are in flight when a fault begins.
	var ack func(id int64)
	ack = func(id int64) {
		stamp := time.Now().UnixNano()
		start := time.Now()
		res, err := acker.Exec(fmt.Sprintf("UPDATE %s SET time_acked = %d, time_next = NULL WHERE id IN (%d) AND time_acked IS NULL", table, stamp, id))
		r.record("ack", call{at: start, took: time.Since(start), err: err})
		if err != nil {
			// Sent again: it may have run, and AND time_acked IS NULL
			// makes a second one change nothing.
			if ctx.Err() == nil {
				time.Sleep(200 * time.Millisecond)
				ack(id)
			}
			return
		}
		if n, _ := res.RowsAffected(); n == 1 {
			r.mu.Lock()
			if prev, twice := r.ackOK[id]; twice {
				t.Errorf("message %d acked twice: time_acked %d, then %d", id, prev, stamp)
			}
			r.ackOK[id] = stamp
			r.mu.Unlock()
		}
	}
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-toAck:
				wg.Go(func() {
					time.Sleep(300 * time.Millisecond)
					ack(id)
				})
			}
		}
	})
	return r, wg.Wait
}

// streamIDs runs STREAM * FROM table on one connection of db and calls
// each with every id delivered, until the stream ends or ctx does.
func streamIDs(ctx context.Context, db *sql.DB, table string, each func(id int64)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "STREAM * FROM "+table)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var body sql.NullString
		if err := rows.Scan(&id, &body); err != nil {
			return err
		}
		each(id)
	}
	return rows.Err()
}

// checkMessages waits until every message in the table is acked, then
// checks that each was delivered at least once and acked exactly once:
// the rows acked by an ack answered OK carry that ack's time_acked (no
// later ack changed them), and every insert answered OK is there.
func checkMessages(t *testing.T, root *sql.DB, table string, r *msgRun) {
	t.Helper()
	start := time.Now()
	for {
		var unacked int
		if err := root.QueryRow("SELECT COUNT(*) FROM " + table + " WHERE time_acked IS NULL").Scan(&unacked); err != nil {
			t.Fatal(err)
		}
		if unacked == 0 {
			break
		}
		if time.Since(start) > 30*time.Second {
			rows, err := root.Query("SELECT id, time_next, epoch FROM " + table + " WHERE time_acked IS NULL")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id, next, epoch int64
				if err := rows.Scan(&id, &next, &epoch); err != nil {
					t.Fatal(err)
				}
				r.mu.Lock()
				t.Logf("unacked: message %d, time_next %v from now, epoch %d, delivered %d times", id, time.Until(time.Unix(0, next)).Round(time.Millisecond), epoch, r.delivered[id])
				r.mu.Unlock()
			}
			rows.Close()
			t.Fatalf("%d messages still unacked 30 s after the faults", unacked)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rows, err := root.Query("SELECT id, time_acked FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	inTable := map[int64]bool{}
	again := 0
	for rows.Next() {
		var id, acked int64
		if err := rows.Scan(&id, &acked); err != nil {
			t.Fatal(err)
		}
		inTable[id] = true
		switch n := r.delivered[id]; {
		case n == 0:
			t.Errorf("message %d never delivered", id)
		case n > 1:
			again++
		}
		if stamp, ok := r.ackOK[id]; ok && stamp != acked {
			t.Errorf("message %d: its ack set time_acked %d, the row has %d: acked twice", id, stamp, acked)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range r.inserted {
		if !inTable[id] {
			t.Errorf("message %d: its insert was answered OK but it is not in the table", id)
		}
	}
	t.Logf("%d messages, all delivered and acked once, %d delivered more than once, %d acks answered OK; %d STREAMs", len(inTable), again, len(r.ackOK), r.streams)
}

// slowest returns the longest of calls and how many failed.
func slowest(calls []call) (time.Duration, int) {
	var d time.Duration
	n := 0
	for _, c := range calls {
		d = max(d, c.took)
		if c.err != nil {
			n++
		}
	}
	return d, n
}

// TestOwnerLinkSilent: the owner's link to MariaDB goes silent (data
// dropped both ways, the connections kept open) while 4 clients draw
// NEXT VALUE (cache 3: some statements are reservations), a producer
// inserts messages, a STREAM subscriber receives them and an acker acks
// each. Every statement ends within ownerStatementBound (the owner's
// statement timeout: 1429), never a hang; the STREAM stays open and
// delivers again after; no value twice, each client's increasing;
// every message delivered at least once and acked exactly once; the
// owner serves values again soon after the link is back. It holds the
// link silent past the owner's statement timeout: make faults only.
func TestOwnerLinkSilent(t *testing.T) {
	long(t)
	root := rootDB(t)
	makeSeq(t, root, "ol_silent_seq", 3)
	makeMsgs(t, root, "ol_silent_msgs")
	l, _, gw := ownerLinkStack(t, "ownerlinksilent")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inserts, stopInserts := context.WithCancel(ctx)
	defer stopInserts()
	msgs, msgsDone := runMessages(ctx, inserts, t, gw, "ol_silent_msgs", 5000)
	stop := make(chan struct{})
	wait := drawUntil(t, gw, "ol_silent_seq", 4, stop)

	time.Sleep(2 * time.Second)
	if err := l.Silence(faultproxy.Down); err != nil {
		t.Fatal(err)
	}
	if err := l.Silence(faultproxy.Up); err != nil {
		t.Fatal(err)
	}
	silent := time.Now()
	time.Sleep(ownerStatementBound)
	l.Clear()
	back := time.Now()
	t.Logf("link silent for %v", back.Sub(silent).Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	close(stop)
	stopInserts()
	ds := wait()

	// Every statement ended within the bound; the first value, insert
	// and ack after the link came back.
	firstOK := func(calls []call) time.Duration {
		for _, c := range calls {
			if c.err == nil && c.at.After(back) {
				return c.at.Add(c.took).Sub(back)
			}
		}
		return -1
	}
	for i, d := range ds {
		worst, failed := slowest(d.calls)
		for _, c := range d.calls {
			if c.err != nil {
				wantOwnerLinkError(t, fmt.Sprintf("client %d", i), c, ownerStatementBound)
			}
		}
		if worst > ownerStatementBound {
			t.Errorf("client %d: a statement took %v", i, worst)
		}
		first := firstOK(d.calls)
		if first < 0 {
			t.Errorf("client %d: no value after the link came back", i)
		}
		t.Logf("client %d: %d statements, %d failed, slowest %v; a value %v after the link came back", i, len(d.calls), failed, worst.Round(time.Millisecond), first.Round(time.Millisecond))
	}
	got := checkValues(t, root, "ol_silent_seq", ds)
	t.Logf("%d values, none twice", got)

	checkMessages(t, root, "ol_silent_msgs", msgs)
	cancel()
	msgsDone()
	msgs.mu.Lock()
	defer msgs.mu.Unlock()
	for _, what := range []string{"insert", "ack"} {
		calls := msgs.calls[what]
		worst, failed := slowest(calls)
		for _, c := range calls {
			if c.err != nil && c.at.Before(back) {
				wantOwnerLinkError(t, what, c, ownerStatementBound)
			}
		}
		t.Logf("%s: %d statements, %d failed, slowest %v; one answered OK %v after the link came back", what, len(calls), failed, worst.Round(time.Millisecond), firstOK(calls).Round(time.Millisecond))
	}
	var errs []string
	for _, what := range []string{"insert", "ack"} {
		for _, c := range msgs.calls[what] {
			if c.err != nil {
				errs = append(errs, what+": "+c.err.Error())
			}
		}
	}
	sort.Strings(errs)
	if len(errs) > 0 {
		t.Logf("first error: %s", errs[0])
	}
}
