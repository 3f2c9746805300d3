package owner

import (
	"database/sql"
	"strings"
	"testing"
	"time"
)

// fenceTerm reads the fence row of testDB.name (0 when there is none).
func fenceTerm(t *testing.T, root *sql.DB, name string) uint64 {
	t.Helper()
	var term uint64
	err := root.QueryRow("SELECT term FROM directgate_owner.fence WHERE seq = ?", testDB+"."+name).Scan(&term)
	if err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return term
}

// Regression (issue 35): a new leader raised its term's fence row only at
// a queue's first postponement or purge, or a sequence's first
// reservation, so until then a late insert of the old term (a client's
// statement that reached the paused old leader) was not refused, and
// landed after its client had been told 1429 and had sent it again to
// the new leader. Now every table's row is raised when the term starts:
// here the new leader (term 2) serves nothing, its queue's purge runs
// only every 30 s and nobody streams, and still both rows hold term 2
// within a few seconds and the old leader's (term 1) late insert is
// refused with 1290 and is not in the table. Without the raise at term
// start the rows stay at 1 (or absent) and the insert lands.
func TestNewTermRaisesFences(t *testing.T) {
	needServer(t)
	root := rootDB(t)
	const msgs, seq = "termfence_msgs", "termfence_seq"
	t.Cleanup(func() { _, _ = root.Exec("DROP TABLE IF EXISTS " + testDB + "." + msgs + ", " + testDB + "." + seq) })
	mustExecRoot(t, root,
		"DROP TABLE IF EXISTS "+testDB+"."+msgs+", "+testDB+"."+seq,
		"CREATE TABLE "+testDB+"."+msgs+` (
			id BIGINT PRIMARY KEY, priority TINYINT NOT NULL DEFAULT 50, epoch BIGINT NOT NULL DEFAULT 0,
			time_next BIGINT DEFAULT 0, time_acked BIGINT, body VARCHAR(64), KEY next_idx (time_next)
		) COMMENT 'vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=4,vt_cache_size=100,vt_poller_interval=30'`,
		"CREATE TABLE "+testDB+"."+seq+" (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO "+testDB+"."+seq+" VALUES (0, 1, 5)",
		"CREATE DATABASE IF NOT EXISTS directgate_owner",
		"CREATE TABLE IF NOT EXISTS directgate_owner.fence (seq VARCHAR(200) NOT NULL PRIMARY KEY, term BIGINT UNSIGNED NOT NULL)",
		"DELETE FROM directgate_owner.fence WHERE seq IN ('"+testDB+"."+msgs+"', '"+testDB+"."+seq+"')")
	a, b, la, lb := startPair(t)
	la.set(1, a.Addr().String(), nil)
	dbA := clientDB(t, a, testDB)
	if _, err := dbA.Exec("INSERT INTO " + msgs + " (id, body) VALUES (1, 'one')"); err != nil {
		t.Fatalf("the insert on the leader of term 1: %v", err)
	}
	// b takes over; a's clock has not noticed (paused, resumed).
	start := time.Now()
	lb.set(2, b.Addr().String(), nil)
	for fenceTerm(t, root, msgs) != 2 || fenceTerm(t, root, seq) != 2 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("5 s into term 2: fence rows %s %d, %s %d, want 2: the new term did not raise them", msgs, fenceTerm(t, root, msgs), seq, fenceTerm(t, root, seq))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("fence rows raised to term 2 %v after it started", time.Since(start).Round(time.Millisecond))
	_, err := dbA.Exec("INSERT INTO " + msgs + " (id, body) VALUES (9, 'late')")
	if me := wantSQLError(t, err, 1290, "HY000"); !strings.Contains(me.Message, "term 2 has written to message table") {
		t.Fatalf("the late insert of term 1: %q", me.Message)
	}
	var n int
	if err := root.QueryRow("SELECT COUNT(*) FROM " + testDB + "." + msgs + " WHERE id = 9").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused insert: %d rows (%v), want 0", n, err)
	}
	dbB := clientDB(t, b, testDB)
	if _, err := dbB.Exec("INSERT INTO " + msgs + " (id, body) VALUES (9, 'again')"); err != nil {
		t.Fatalf("the insert on the leader of term 2: %v", err)
	}
	var v int64
	if err := dbB.QueryRow("SELECT NEXT VALUE FROM " + seq).Scan(&v); err != nil {
		t.Fatalf("NEXT VALUE on the leader of term 2: %v", err)
	}
}
