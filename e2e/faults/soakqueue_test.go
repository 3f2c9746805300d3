package faults

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
)

// The soak's message queue: acks wait 2 s, redeliveries back off at most
// 4 s more, the poller runs every 200 ms, acked rows stay an hour (the
// check reads them at the end).
const soakMsgsDDL = `CREATE TABLE soak_msgs (
	id BIGINT PRIMARY KEY, priority BIGINT NOT NULL DEFAULT 0, epoch BIGINT NOT NULL DEFAULT 0,
	time_next BIGINT DEFAULT 0, time_acked BIGINT, producer INT,
	KEY next_idx (time_next), KEY ack_idx (time_acked)
) COMMENT 'vitess_message,vt_ack_wait=2,vt_max_backoff=4,vt_purge_after=3600,vt_batch_size=10,vt_cache_size=5000,vt_poller_interval=0.2'`

// queueRun is what the soak's message workload saw, per message id.
type queueRun struct {
	mu        sync.Mutex
	inserted  map[int64]bool  // inserts acknowledged by an OK
	maybe     map[int64]bool  // inserts that failed (they may have run)
	delivered map[int64]int   // rows streamed to a consumer
	acked     map[int64]int64 // the sum of the acks' affected rows
	ackFailed map[int64]int   // acks that failed (they may have run)
	unacked   map[int64]bool  // first deliveries the consumer did not ack
	streams   int             // STREAMs begun
	ends      map[string]int  // how streams ended: watchdog, error
}

func newQueueRun() *queueRun {
	return &queueRun{inserted: map[int64]bool{}, maybe: map[int64]bool{}, delivered: map[int64]int{},
		acked: map[int64]int64{}, ackFailed: map[int64]int{}, unacked: map[int64]bool{}, ends: map[string]int{}}
}

// soakProducer inserts messages through db until the deadline, at most
// one every 20 ms, ids id<<40 + n.
func soakProducer(r *soakRun, q *queueRun, db *sql.DB, id int, deadline time.Time) {
	next := int64(id) << 40
	for n := 0; n < soakMaxOps && time.Now().Before(deadline); n++ {
		next++
		start := time.Now()
		_, err := db.Exec(fmt.Sprintf("INSERT INTO soak_msgs (id, producer) VALUES (%d, %d)", next, id))
		q.mu.Lock()
		if err == nil {
			q.inserted[next] = true
		} else {
			q.maybe[next] = true
		}
		q.mu.Unlock()
		r.took("message insert", time.Since(start))
		if err != nil {
			r.failed(time.Now(), "message insert", err)
		} else {
			r.succeeded("message insert")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// soakConsumer STREAMs soak_msgs through the gateway at addr and acks
// every message it gets, one ack per id (UPDATE ... WHERE id IN (id) AND
// time_acked IS NULL, through ack), until stop; one first delivery in 100
// it leaves unacked, to come back. A watchdog closes a
// stream that brought nothing for 5 s (a silenced link) or lived 15-45 s;
// the consumer then streams again.
func soakConsumer(r *soakRun, q *queueRun, addr string, ack *sql.DB, stop <-chan struct{}) {
	for n := 0; n < 100_000; n++ {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		bc, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass})
		cancel()
		if err != nil {
			r.failed(time.Now(), "stream", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		q.mu.Lock()
		q.streams++
		q.mu.Unlock()
		acks := make(chan int64, 4096)
		var wg sync.WaitGroup
		wg.Go(func() {
			for id := range acks {
				soakAck(r, q, ack, id)
			}
		})
		var lastRow sync.Mutex
		last := time.Now()
		watched := make(chan struct{})
		var closedBy string
		wg.Go(func() {
			life := time.NewTimer(15*time.Second + rand.N(30*time.Second))
			defer life.Stop()
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-watched:
					return
				case <-stop:
					closedBy = "stop"
				case <-life.C:
					closedBy = "lifetime"
				case <-tick.C:
					lastRow.Lock()
					idle := time.Since(last)
					lastRow.Unlock()
					if idle < 5*time.Second {
						continue
					}
					closedBy = "idle 5 s"
				}
				bc.Close()
				return
			}
		})
		err = bc.QueryRows("STREAM * FROM "+testDB+".soak_msgs", func(row [][]byte) {
			id, perr := strconv.ParseInt(string(row[0]), 10, 64)
			lastRow.Lock()
			last = time.Now()
			lastRow.Unlock()
			if perr != nil {
				return
			}
			q.mu.Lock()
			q.delivered[id]++
			// One first delivery in 100 is not acked: the message must
			// come back after the ack wait.
			skip := q.delivered[id] == 1 && rand.IntN(100) == 0
			if skip {
				q.unacked[id] = true
			}
			q.mu.Unlock()
			if !skip {
				acks <- id
			}
		})
		close(watched)
		close(acks)
		wg.Wait()
		bc.Close()
		q.mu.Lock()
		switch {
		case closedBy != "":
			q.ends["closed by the consumer ("+closedBy+")"]++
		case err != nil:
			q.ends["error"]++
		default:
			q.ends["ended"]++
		}
		q.mu.Unlock()
		if closedBy == "" && err != nil {
			r.failed(time.Now(), "stream", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// soakAck acks message id, trying again (5 times at most, 200 ms apart)
// after an error: a retry of an ack that ran finds the row acked (0
// rows), so the sum of affected rows stays 1.
func soakAck(r *soakRun, q *queueRun, db *sql.DB, id int64) {
	for try := 0; try < 5; try++ {
		start := time.Now()
		res, err := db.Exec(fmt.Sprintf("UPDATE soak_msgs SET time_acked = %d, time_next = NULL WHERE id IN (%d) AND time_acked IS NULL", time.Now().UnixNano(), id))
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		q.mu.Lock()
		if err == nil {
			q.acked[id] += n
		} else {
			q.ackFailed[id]++
		}
		q.mu.Unlock()
		r.took("ack", time.Since(start))
		if err == nil {
			r.succeeded("ack")
			return
		}
		r.failed(time.Now(), "ack", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAcked waits (at most limit) until every row of soak_msgs is acked.
func waitAcked(root *sql.DB, limit time.Duration) (unacked int, took time.Duration) {
	start := time.Now()
	for {
		err := root.QueryRow("SELECT COUNT(*) FROM soak_msgs WHERE time_acked IS NULL").Scan(&unacked)
		if (err == nil && unacked == 0) || time.Since(start) > limit {
			return unacked, time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// queueViolations checks the queue on the primary (root) against what the
// clients saw: every acknowledged insert is there, no row nobody inserted,
// every row acked and delivered at least once, nothing delivered that is
// not a row, every message left unacked on purpose delivered again, and
// per id the acks' affected rows sum to 1 (0 or 1 for an id one of whose
// acks failed: it may have run). It returns the figures
// too.
func queueViolations(t *testing.T, q *queueRun, root *sql.DB) (figures string, out []string) {
	t.Helper()
	rows, err := root.Query("SELECT id, time_acked IS NOT NULL FROM soak_msgs")
	if err != nil {
		return "", []string{"reading soak_msgs: " + err.Error()}
	}
	inTable := map[int64]bool{} // id: acked
	for rows.Next() {
		var id int64
		var acked bool
		if err := rows.Scan(&id, &acked); err != nil {
			t.Fatal(err)
		}
		inTable[id] = acked
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	q.mu.Lock()
	defer q.mu.Unlock()
	add := func(max int, format string, ids []int64) {
		if len(ids) == 0 {
			return
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		out = append(out, fmt.Sprintf(format, len(ids), ids[:min(len(ids), max)]))
	}
	var missing, phantom, unacked, undelivered, strayDelivery, ackedTwice, ackedNever, notBack []int64
	for id := range q.inserted {
		if _, ok := inTable[id]; !ok {
			missing = append(missing, id)
		}
	}
	ackedRows, maybeLanded, deliveries, redelivered, unsure := 0, 0, 0, 0, 0
	for id, acked := range inTable {
		if !q.inserted[id] && !q.maybe[id] {
			phantom = append(phantom, id)
		}
		if q.maybe[id] {
			maybeLanded++
		}
		if acked {
			ackedRows++
		} else {
			unacked = append(unacked, id)
		}
		if q.delivered[id] == 0 {
			undelivered = append(undelivered, id)
		}
		if q.unacked[id] && q.delivered[id] < 2 {
			notBack = append(notBack, id)
		}
		switch sum := q.acked[id]; {
		case sum > 1:
			ackedTwice = append(ackedTwice, id)
		case sum == 0 && q.ackFailed[id] == 0:
			ackedNever = append(ackedNever, id)
		case sum == 0:
			unsure++
		}
	}
	for id, n := range q.delivered {
		deliveries += n
		redelivered += n - 1
		if _, ok := inTable[id]; !ok {
			strayDelivery = append(strayDelivery, id)
		}
	}
	failedAcks := 0
	for _, n := range q.ackFailed {
		failedAcks += n
	}
	add(5, "%d acknowledged message inserts missing: %v", missing)
	add(5, "%d message rows nobody inserted: %v", phantom)
	add(5, "%d messages never acked: %v", unacked)
	add(5, "%d messages never delivered: %v", undelivered)
	add(5, "%d deliveries of ids that are no row: %v", strayDelivery)
	add(5, "%d messages whose acks' affected rows sum past 1: %v", ackedTwice)
	add(5, "%d messages left unacked on purpose never came back: %v", notBack)
	add(5, "%d delivered messages whose acks all succeeded with 0 rows: %v", ackedNever)
	figures = fmt.Sprintf("%d inserts acknowledged, %d failed (%d of those landed); %d rows, %d acked; %d deliveries (%d again after the ack wait; %d left unacked on purpose) over %d streams (ends: %v); %d acks failed, %d ids acked only by an ack whose answer was lost",
		len(q.inserted), len(q.maybe), maybeLanded, len(inTable), ackedRows, deliveries, redelivered, len(q.unacked), q.streams, q.ends, failedAcks, unsure)
	return figures, out
}
