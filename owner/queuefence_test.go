package owner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// msgRow is what a test reads of one message row.
type msgRow struct {
	timeNext, epoch int64
	acked           bool
}

// queueFenceRun plays two owners of one message table (issue 35): the old
// leader (term 10) read messages 1-4 as due and computed their
// postponement, then was paused past its lease; the new leader (term 20)
// delivered them (postponed: time_next to its ack wait, epoch 1). The old
// one resumes without noticing (its lease check is what failed) and
// writes what it was about to: its postponement, a purge, and a client's
// insert and ack that had reached it before the pause. fenced switches
// the fence MariaDB checks on or off for the old leader. It returns the
// rows afterwards, whether message 9 (the late insert) is there, and the
// old leader's errors for its postpone, purge, insert and ack.
func queueFenceRun(t *testing.T, fenced bool) (rows map[int64]msgRow, inserted bool, errs [4]error) {
	t.Helper()
	srv := needServer(t)
	root := rootDB(t)
	const name = "qfence_msgs"
	makeMsgTable(t, root, name)
	mustExecRoot(t, root,
		"INSERT INTO "+testDB+"."+name+" (id, body) VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four')",
		"DELETE FROM directgate_owner.fence WHERE seq = '"+testDB+"."+name+"'")
	tbl := &table{Schema: testDB, Name: name, kind: kindMessage}
	cols := []columnInfo{{Name: "id", Numeric: true}, {Name: "body"}}
	owner := func(fenced bool) (*primary, *sqlQueue) {
		p, err := newPrimary(srv.Addr(), 1, backendUser, backendPass, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.close() })
		p.fenced = fenced
		return p, newSQLQueue(tbl, cols, func() (*primary, error) { return p, nil }, func(string, error) {})
	}
	oldP, old := owner(fenced)
	_, next := owner(true)
	ctx := context.Background()

	// The old leader reads the due messages and computes their
	// postponement (time_next 1000+id); then it is paused.
	due, err := old.loadDue(ctx, 1, 10)
	if err != nil || len(due) != 4 {
		t.Fatalf("the old leader's poll: %d messages, %v", len(due), err)
	}
	var oldDue, newDue []postponement
	for _, m := range due {
		oldDue = append(oldDue, postponement{id: m.id, timeNext: 1000 + int64(len(oldDue))})
		newDue = append(newDue, postponement{id: m.id, timeNext: 5000})
	}
	// The new leader delivers them.
	if err := next.postpone(ctx, 20, newDue); err != nil {
		t.Fatal(err)
	}
	// The old leader resumes.
	errs[0] = old.postpone(ctx, 10, oldDue)
	_, errs[1] = old.purge(ctx, 10, 1<<62)
	db, err := oldP.forSchema(testDB)
	if err != nil {
		t.Fatal(err)
	}
	client := func(q string) error {
		return oldP.write(ctx, db, tbl, 10, fenceCheck, func(e execer) error { _, err := e.ExecContext(ctx, q); return err })
	}
	errs[2] = client("INSERT INTO " + name + " (id, body) VALUES (9, 'late')")
	errs[3] = client(fmt.Sprintf("UPDATE %s SET time_acked = 7, time_next = NULL WHERE id IN (4) AND time_acked IS NULL", name))

	rows = map[int64]msgRow{}
	rs, err := root.Query("SELECT id, IFNULL(time_next, -1), epoch, time_acked IS NOT NULL FROM " + testDB + "." + name)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var id int64
		var r msgRow
		if err := rs.Scan(&id, &r.timeNext, &r.epoch, &r.acked); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	_, inserted = rows[9]
	delete(rows, 9)
	return rows, inserted, errs
}

// TestQueueFenceRefusesStaleTerm: once a newer term has postponed
// messages of a table, the old term's postponement of them is refused
// by MariaDB (1290) and leaves time_next and epoch as the new leader set
// them; so are its purge and the client insert and ack that reached it
// late (they did not run: the gateway sends them to the new leader).
// With the fence switched off the old term's postponement lands after
// the new term's: it moves time_next of messages the new leader has in
// flight back to 1000 (they would come back before their ack wait) and
// counts a second delivery; the late insert lands too.
func TestQueueFenceRefusesStaleTerm(t *testing.T) {
	rows, inserted, errs := queueFenceRun(t, true)
	for i, what := range []string{"postpone", "purge", "insert", "ack"} {
		var st *staleTermError
		if !errors.As(errs[i], &st) || st.err.Code != 1290 || st.newer != 20 {
			t.Errorf("with the fence, the old term's %s: %v, want 1290 naming term 20", what, errs[i])
		}
	}
	t.Logf("with the fence the old term's postpone got: %v", errs[0])
	t.Logf("with the fence the old term's client insert got: %v", errs[2])
	for id, r := range rows {
		if r != (msgRow{timeNext: 5000, epoch: 1}) {
			t.Errorf("with the fence, message %d: %+v, want the new term's time_next 5000, epoch 1, unacked", id, r)
		}
	}
	if inserted {
		t.Error("with the fence, the old term's late insert landed")
	}

	rows, inserted, errs = queueFenceRun(t, false)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("without the fence, write %d of the old term failed: %v", i, err)
		}
	}
	landed := 0
	for id, r := range rows {
		if r.timeNext != 5000 && !r.acked {
			landed++
			t.Logf("without the fence, message %d: time_next %d, epoch %d after the new term set 5000, 1", id, r.timeNext, r.epoch)
		}
	}
	if landed == 0 || !inserted {
		t.Fatalf("without the fence: %v, late insert landed %v: the test does not see what the fence prevents", rows, inserted)
	}
	t.Logf("without the fence: the old term's postponement of %d messages landed after the new term's, and its late insert landed", landed)
}

// An owner whose lease check still says it leads (paused, resumed, not
// noticed yet) after another took the queue over: the client insert that
// reaches it is refused with 1290 before it ran (its gateway sends it to
// the leader) and its queue stands down, so a STREAM on it ends with 1290
// too; the leader's stream and inserts go on.
func TestOwnerStaleLeaderQueueFenced(t *testing.T) {
	needServer(t)
	root := rootDB(t)
	makeMsgTable(t, root, "stale_msgs")
	mustExecRoot(t, root, "INSERT INTO "+testDB+".stale_msgs (id, body) VALUES (1, 'one'), (2, 'two'), (3, 'three')")
	a, b, la, lb := startPair(t)
	bAddr := b.Addr().String()
	la.set(1, a.Addr().String(), nil) // a's clock has not noticed
	lb.set(2, bAddr, nil)
	dbA, dbB := clientDB(t, a, testDB), clientDB(t, b, testDB)

	ids, _ := streamIDs(t, dbB, "stale_msgs")
	for range 3 {
		select {
		case <-ids:
		case <-time.After(5 * time.Second):
			t.Fatal("the leader (term 2) delivered less than 3 messages")
		}
	}
	_, err := dbA.Exec("INSERT INTO stale_msgs (id, body) VALUES (9, 'late')")
	if me := wantSQLError(t, err, 1290, "HY000"); !strings.Contains(me.Message, "term 2 has written to message table") {
		t.Fatalf("insert on the stale leader: %q", me.Message)
	}
	var n int
	if err := root.QueryRow("SELECT COUNT(*) FROM " + testDB + ".stale_msgs WHERE id = 9").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused insert: %d rows (%v), want 0", n, err)
	}
	_, ended := streamIDs(t, dbA, "stale_msgs")
	wantStreamEnd(t, ended, "STREAM again")
	if _, err := dbB.Exec("INSERT INTO stale_msgs (id, body) VALUES (9, 'again')"); err != nil {
		t.Fatalf("the insert on the leader: %v", err)
	}
	select {
	case id := <-ids:
		if id != 9 {
			t.Fatalf("the leader delivered %d, want 9", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the leader did not deliver the insert it took")
	}
}

// BenchmarkPostpone measures one delivery batch's postponement (10
// messages) on the shared MariaDB, unfenced (one statement) and fenced
// (a transaction: BEGIN, SET idle_transaction_timeout, the fence raise,
// the UPDATE, COMMIT), and reports the statements each sends as
// round-trips/op.
//
//	go test -run '^$' -bench Postpone -benchtime 2000x ./owner
func BenchmarkPostpone(b *testing.B) {
	if shared == nil {
		b.Skip("starts mariadbd; skipped in -short mode")
	}
	root, err := shared.RootDB()
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	makeMsgTable(b, root, "bench_msgs")
	if _, err := root.Exec("INSERT INTO " + testDB + ".bench_msgs (id, body) SELECT seq, 'body' FROM " + testDB + ".seq_1_to_10"); err != nil {
		b.Fatal(err)
	}
	tbl := &table{Schema: testDB, Name: "bench_msgs", kind: kindMessage}
	due := make([]postponement, 10)
	for i := range due {
		due[i] = postponement{id: fmt.Sprint(i + 1), timeNext: 5000}
	}
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("fenced=%v", fenced), func(b *testing.B) {
			p, err := newPrimary(shared.Addr(), 1, backendUser, backendPass, nil, false)
			if err != nil {
				b.Fatal(err)
			}
			defer p.close()
			p.fenced = fenced
			s := newSQLQueue(tbl, []columnInfo{{Name: "id", Numeric: true}, {Name: "body"}}, func() (*primary, error) { return p, nil }, func(string, error) {})
			ctx := context.Background()
			if err := s.postpone(ctx, 1, due); err != nil { // warm: connection, fence table
				b.Fatal(err)
			}
			questions := func() int64 {
				var name string
				var n int64
				if err := p.db.QueryRow("SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
					b.Fatal(err)
				}
				return n
			}
			p.db.SetMaxOpenConns(1) // one connection, so its Questions count what the batches sent
			before := questions()
			b.ResetTimer()
			for b.Loop() {
				if err := s.postpone(ctx, 1, due); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(questions()-before-1)/float64(b.N), "round-trips/op")
		})
	}
}
