package owner

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeLead is a Leadership the test sets by hand.
type fakeLead struct {
	mu      sync.Mutex
	term    uint64
	leader  string
	changed chan struct{}
	// valid, when set, decides Valid for the current term (a lease that
	// lapses mid-statement).
	valid func() bool
}

func newFakeLead() *fakeLead { return &fakeLead{changed: make(chan struct{})} }

func (f *fakeLead) Term() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term
}

func (f *fakeLead) Valid(term uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return term != 0 && term == f.term && (f.valid == nil || f.valid())
}

func (f *fakeLead) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeLead) Leader() (string, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, f.changed
}

// set makes term current (0: standby) with leader as the observed leader.
func (f *fakeLead) set(term uint64, leader string, valid func() bool) {
	f.mu.Lock()
	f.term, f.leader, f.valid = term, leader, valid
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// startPair starts two owners of cluster main under fake leaderships.
func startPair(t *testing.T) (a, b *Owner, la, lb *fakeLead) {
	t.Helper()
	needServer(t)
	la, lb = newFakeLead(), newFakeLead()
	a = startOwnerWith(t, ownerYAML(backendUser), WithLeadership(la))
	b = startOwnerWith(t, ownerYAML(backendUser), WithLeadership(lb))
	for _, o := range []*Owner{a, b} {
		select {
		case <-o.discovered:
		case <-time.After(30 * time.Second):
			t.Fatal("no table discovery within 30 s")
		}
	}
	return a, b, la, lb
}

// A standby refuses logins and statements with 1290 naming the leader;
// values stay unique and increasing as the leadership moves back and
// forth, and a term that lapses while a value is being handed out hands
// out nothing.
func TestOwnerStandbyPairSequences(t *testing.T) {
	needServer(t)
	root := rootDB(t)
	t.Cleanup(func() { _, _ = root.Exec("DROP TABLE IF EXISTS " + testDB + ".ha_seq") })
	mustExecRoot(t, root, "DROP TABLE IF EXISTS "+testDB+".ha_seq",
		"CREATE TABLE "+testDB+".ha_seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO "+testDB+".ha_seq VALUES (0, 1, 10)")
	a, b, la, lb := startPair(t)
	bAddr := b.Addr().String()
	la.set(0, bAddr, nil)
	lb.set(5, bAddr, nil)

	dbA, dbB := clientDB(t, a, testDB), clientDB(t, b, testDB)
	err := dbA.Ping()
	if me := wantSQLError(t, err, 1290, "HY000"); !strings.Contains(me.Message, "standby") || !strings.Contains(me.Message, bAddr) {
		t.Fatalf("standby login: %q", me.Message)
	}
	next := func(db *sql.DB) int64 { t.Helper(); return nextValue(t, db, "SELECT NEXT VALUE FROM ha_seq") }
	if v := next(dbB); v != 1 {
		t.Fatalf("b, term 5: %d, want 1", v)
	}
	if v := next(dbB); v != 2 {
		t.Fatalf("b, term 5: %d, want 2", v)
	}

	// b steps down, a leads: b's open connection is refused per
	// statement; a starts after b's block.
	aAddr := a.Addr().String()
	lb.set(0, aAddr, nil)
	la.set(6, aAddr, nil)
	_, err = dbB.Exec("SELECT NEXT VALUE FROM ha_seq")
	if me := wantSQLError(t, err, 1290, "HY000"); !strings.Contains(me.Message, aAddr) {
		t.Fatalf("standby statement: %q", me.Message)
	}
	if v := next(dbA); v != 11 {
		t.Fatalf("a, term 6: %d, want 11 (b reserved [1, 11))", v)
	}

	// The lease lapses between a's start of the statement and the handout.
	calls := 0
	la.set(6, aAddr, func() bool { calls++; return calls == 1 })
	_, err = dbA.Exec("SELECT NEXT VALUE FROM ha_seq")
	if me := wantSQLError(t, err, 1290, "HY000"); !strings.Contains(me.Message, "lost its leadership") {
		t.Fatalf("lapsed term: %q", me.Message)
	}
	la.set(7, aAddr, nil)
	if v := next(dbA); v != 21 {
		t.Fatalf("a, term 7: %d, want 21 (a new term reserves from the table)", v)
	}
	// b leads again: its old block [3, 11) is never used.
	la.set(0, bAddr, nil)
	lb.set(8, bAddr, nil)
	if v := next(dbB); v != 31 {
		t.Fatalf("b, term 8: %d, want 31", v)
	}
}

// makeMsgTable creates message table name (id, body) in testDB afresh,
// dropped when the test ends.
func makeMsgTable(tb testing.TB, root *sql.DB, name string) {
	tb.Helper()
	tb.Cleanup(func() { _, _ = root.Exec("DROP TABLE IF EXISTS " + testDB + "." + name) })
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + testDB + "." + name,
		"CREATE TABLE " + testDB + "." + name + ` (
			id BIGINT PRIMARY KEY, priority TINYINT NOT NULL DEFAULT 50, epoch BIGINT NOT NULL DEFAULT 0,
			time_next BIGINT DEFAULT 0, time_acked BIGINT, body VARCHAR(64), KEY next_idx (time_next)
		) COMMENT '` + msgComment + `'`,
	} {
		if _, err := root.Exec(q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

func mustExecRoot(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// streamIDs streams table through db and sends each id to the returned
// channel; the error channel gets why the stream ended.
func streamIDs(t *testing.T, db *sql.DB, table string) (<-chan int64, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rows, err := db.QueryContext(ctx, "STREAM * FROM "+table)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ids, ended := make(chan int64, 100), make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer rows.Close()
		cols, _ := rows.Columns()
		dest := make([]any, len(cols))
		for i := range dest {
			dest[i] = new(sql.RawBytes)
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				ended <- err
				return
			}
			var id int64
			fmt.Sscan(string(*dest[0].(*sql.RawBytes)), &id)
			ids <- id
		}
		ended <- rows.Err()
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ids, ended
}

// wantStreamEnd waits for a stream of streamIDs to end with 1290 whose
// message says say.
func wantStreamEnd(t *testing.T, ended <-chan error, say string) {
	t.Helper()
	select {
	case err := <-ended:
		if me := wantSQLError(t, err, 1290, "HY000"); !strings.Contains(me.Message, say) {
			t.Fatalf("stream end: %q, want it to say %q", me.Message, say)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end")
	}
}

// The leader's streams end when it steps down; the new leader delivers
// what the old one had sent unacked (after the ack wait) and what it had
// not sent yet: nothing is lost.
func TestOwnerStandbyTakesOverMessages(t *testing.T) {
	needServer(t)
	root := rootDB(t)
	makeMsgTable(t, root, "ha_msgs")
	a, b, la, lb := startPair(t)
	aAddr, bAddr := a.Addr().String(), b.Addr().String()
	la.set(1, aAddr, nil)
	lb.set(0, aAddr, nil)
	dbA, dbB := clientDB(t, a, testDB), clientDB(t, b, testDB)

	ids, ended := streamIDs(t, dbA, "ha_msgs")
	sent := time.Now() // before the owner's clock read for the sends, however slow the way back here
	if _, err := dbA.Exec("INSERT INTO ha_msgs (id, body) VALUES (1, 'one'), (2, 'two'), (3, 'three')"); err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for len(got) < 3 {
		select {
		case id := <-ids:
			got[id]++
		case <-time.After(5 * time.Second):
			t.Fatalf("the leader delivered %v of 3", got)
		}
	}
	// b takes over: a's stream ends with 1290, unacked 1-3 stay due.
	la.set(0, bAddr, nil)
	lb.set(2, bAddr, nil)
	wantStreamEnd(t, ended, "no longer the leader")
	if _, err := dbB.Exec("INSERT INTO ha_msgs (id, body) VALUES (4, 'four'), (5, 'five')"); err != nil {
		t.Fatal(err)
	}
	ids, _ = streamIDs(t, dbB, "ha_msgs")
	got = map[int64]int{}
	for len(got) < 5 {
		select {
		case id := <-ids:
			got[id]++
			if _, err := dbB.Exec(fmt.Sprintf("UPDATE ha_msgs SET time_acked = %d, time_next = NULL WHERE id IN (%d)", time.Now().UnixNano(), id)); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the new leader delivered %v of 5", got)
		}
	}
	if d := time.Since(sent); d < 900*time.Millisecond {
		t.Fatalf("the old leader's unacked messages came back %v after it sent them, before the 1 s ack wait", d)
	}
	t.Logf("the new leader delivered all 5 messages; the old leader's 3 unacked ones %v after it sent them (ack wait 1 s)", time.Since(sent).Round(time.Millisecond))
	for id, n := range got {
		if n != 1 {
			t.Errorf("message %d delivered %d times by the new leader", id, n)
		}
	}
}
