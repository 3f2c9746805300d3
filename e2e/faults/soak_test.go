package faults

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/e2e/faultproxy"
	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/healthcheck"
)

// soakDuration runs TestSoak (make soak sets it; 0 skips).
var soakDuration = flag.Duration("soak.duration", 0, "run TestSoak this long (make soak SOAK_DURATION=...)")

// soakSysbench runs sysbench beside the Go clients when it is installed.
var soakSysbench = flag.Bool("soak.sysbench", true, "run sysbench through the second gateway during TestSoak")

// soakGrace is how long after a fault ends a failure is still counted
// as the fault's (discovery's rise probes, the owner pool's redial).
const soakGrace = 3 * time.Second

// soakRecentOps is how many of a client's last operations a wrong read's
// report shows.
const soakRecentOps = 6

// soakMaxOps bounds each client's loop besides the duration.
const soakMaxOps = 5_000_000

// The soak's replica settings: reads leave a replica behind by more than
// soakMaxLag or whose probe round trip is above soakMaxLatency; the
// slowdown fault delays every answer on a replica link by soakSlowdownMS
// (± 10), above the cap and within the probe timeout (a probe is about 7
// round trips).
const (
	soakMaxLag     = 2 * time.Second
	soakMaxLatency = 60 * time.Millisecond
	soakSlowdownMS = 100
	soakHealth     = "{interval: 200ms, timeout: 1s, rise: 2, fall: 2}"
)

// The bounds on growth from the start (under load, after a 5 s warm-up)
// to the end (idle, 5 s after the workloads stopped) of the test process,
// which runs both gateways and the owner. Memory is compared after a
// garbage collection that returns free memory to the system, and at the
// end after the soak's own records (every sequence value, insert and
// message it saw: tens of MiB after 30 minutes) are dropped, so what is
// left is the gateways' and the owner's.
const (
	soakMoreGoroutines   = 50
	soakMoreBackendConns = 30 // on the primary and the replica together
	soakMoreSessions     = 10
	soakMoreRSSKB        = 64 << 10
	soakMoreHeapKB       = 32 << 10
)

// faultWindow is one fault the soak fired.
type faultWindow struct {
	kind, link string
	from, to   time.Time
}

// soakRun is what a soak saw.
type soakRun struct {
	mu       sync.Mutex
	windows  []faultWindow
	fails    map[string]map[string]int // by fault kind ("none" outside every window), then workload
	sample   map[string]string         // one error per fault kind
	ok       map[string]int            // successful operations by workload
	draws    map[int][]int64           // sequence values by client
	inserted []int64                   // acknowledged inserts
	badReads int                       // reads that saw a wrong row count or total
	badRead  string                    // the first of them
	diagnose bool                      // reads report their backend thread and transaction
	direct   bool                      // clients log in to MariaDB itself (a control without gateways)
	readsBy  map[int]int               // successful reads by server id
	causal   map[int]int               // read-your-writes checks by server id
	stale    []string                  // read-your-writes checks that missed the write
	replica  map[string]int            // samples of the replicas' state in discovery
	slowest  map[string]time.Duration  // the longest operation by workload, failed or not
	hung     []string                  // operations cut by the clients' read timeout
}

func newSoakRun() *soakRun {
	return &soakRun{fails: map[string]map[string]int{}, sample: map[string]string{}, ok: map[string]int{},
		draws: map[int][]int64{}, readsBy: map[int]int{}, causal: map[int]int{}, replica: map[string]int{},
		slowest: map[string]time.Duration{}}
}

// soakReadTimeout is the soak's clients' read timeout: far above every
// documented bound (35 s for an owner statement in flight on a silent
// link), so that an answer that never ends is a finding, not a hang of
// the soak.
const soakReadTimeout = time.Minute

// soakOpen is open with the soak's read timeout.
func soakOpen(t *testing.T, addr string) *sql.DB {
	t.Helper()
	return soakOpenAs(t, addr, appUser, appPass)
}

// soakOpenAs is soakOpen as user.
func soakOpenAs(t *testing.T, addr, user, pass string) *sql.DB {
	t.Helper()
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, pass, "tcp", addr, testDB
	c.Timeout, c.ReadTimeout = 5*time.Second, soakReadTimeout
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// took records how long an operation of workload what took; one that
// took 90 % of soakReadTimeout or more hung (go-sql-driver reports the
// timeout as invalid connection).
func (r *soakRun) took(what string, d time.Duration) {
	r.mu.Lock()
	r.slowest[what] = max(r.slowest[what], d)
	if d >= soakReadTimeout*9/10 {
		r.hung = append(r.hung, fmt.Sprintf("%s for %v until %s", what, d.Round(time.Millisecond), time.Now().Format("15:04:05.000")))
	}
	r.mu.Unlock()
}

// windowAt names the fault (kind@link) whose window, or grace after it,
// holds at: "none" outside every one. Under r.mu.
func (r *soakRun) windowAt(at time.Time) string {
	kind := "none"
	for _, w := range r.windows {
		if !at.Before(w.from) && (w.to.IsZero() || at.Before(w.to.Add(soakGrace))) {
			kind = w.kind
		}
	}
	return kind
}

// failed records a failure of workload what at time at.
func (r *soakRun) failed(at time.Time, what string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kind := r.windowAt(at)
	if r.fails[kind] == nil {
		r.fails[kind] = map[string]int{}
	}
	r.fails[kind][what]++
	if _, ok := r.sample[kind]; !ok {
		r.sample[kind] = what + ": " + err.Error()
	}
}

// succeeded counts a successful operation of workload what.
func (r *soakRun) succeeded(what string) {
	r.mu.Lock()
	r.ok[what]++
	r.mu.Unlock()
}

// usage is the test process's resources at one moment (it runs the
// gateways and the owner), and MariaDB's view of them.
type usage struct {
	// rssKB and heapKB are the resident set and the Go heap's live bytes
	// after a collection that returned free memory to the system.
	rssKB, heapKB, goroutines int
	// sessions are the gateways' client sessions.
	sessions int
	// backendConns are the connections of the backend account (the
	// gateways' pools and probes, and the owner's) on the primary and
	// the replica.
	backendConns [2]int
	// threads and prepared are the primary's Threads_connected and
	// Prepared_stmt_count.
	threads, prepared int
}

func (u usage) String() string {
	return fmt.Sprintf("RSS %d KiB (Go heap live %d KiB), %d goroutines, %d gateway client sessions, %d+%d backend-account connections on the primary+replica, %d MariaDB threads and %d statements prepared on the primary",
		u.rssKB, u.heapKB, u.goroutines, u.sessions, u.backendConns[0], u.backendConns[1], u.threads, u.prepared)
}

// rssKB is the test process's resident set (VmRSS), 0 if unknown.
func rssKB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+)`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// trend samples the test process's RSS, Go heap in use and goroutines
// every max(30 s, d/20) until stop, for the report: whether they grow
// with time or level off.
func trend(d time.Duration, stop <-chan struct{}) func() string {
	every := max(30*time.Second, d/20)
	var mu sync.Mutex
	var samples []string
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tickUntil(every, stop, 10_000, func() {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mu.Lock()
			samples = append(samples, fmt.Sprintf("%v: %d/%d/%d", time.Since(start).Round(time.Second), rssKB()>>10, ms.HeapInuse>>20, runtime.NumGoroutine()))
			mu.Unlock()
		})
	}()
	return func() string {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(samples, ", ")
	}
}

// measure reads the test process's RSS and goroutines, the gateways'
// sessions, and the connections MariaDB sees.
func measure(t *testing.T, st soakStack, roots [2]*sql.DB) usage {
	t.Helper()
	u := usage{}
	u.rssKB, u.heapKB = memoryKB()
	u.goroutines = runtime.NumGoroutine()
	for _, gw := range st.gws {
		u.sessions += len(gw.Sessions())
	}
	for i, root := range roots {
		if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", backendUser).Scan(&u.backendConns[i]); err != nil {
			t.Fatal(err)
		}
	}
	var name string
	if err := roots[0].QueryRow("SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &u.threads); err != nil {
		t.Fatal(err)
	}
	if err := roots[0].QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &u.prepared); err != nil {
		t.Fatal(err)
	}
	return u
}

// memoryKB collects garbage, returns free memory to the system, and
// reads the resident set and the live heap.
func memoryKB() (rss, heap int) {
	debug.FreeOSMemory() // a collection first
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return rssKB(), int(ms.HeapAlloc >> 10)
}

// memoryViolations compares the memory at the start with the end's,
// measured again once the soak's own records are dropped.
func memoryViolations(t *testing.T, r *soakRun, q *queueRun, before usage) []string {
	r.mu.Lock()
	r.draws, r.inserted = nil, nil
	r.mu.Unlock()
	q.mu.Lock()
	q.inserted, q.maybe, q.delivered, q.acked, q.ackFailed, q.unacked = nil, nil, nil, nil, nil, nil
	q.mu.Unlock()
	rss, heap := memoryKB()
	t.Logf("memory at the end, the soak's records dropped: RSS %d KiB (start %d), Go heap live %d KiB (start %d)", rss, before.rssKB, heap, before.heapKB)
	var out []string
	if rss > before.rssKB+soakMoreRSSKB {
		out = append(out, fmt.Sprintf("RSS grew from %d to %d KiB (bound +%d)", before.rssKB, rss, soakMoreRSSKB))
	}
	if heap > before.heapKB+soakMoreHeapKB {
		out = append(out, fmt.Sprintf("the Go heap grew from %d to %d KiB live (bound +%d)", before.heapKB, heap, soakMoreHeapKB))
	}
	return out
}

// soakStack is the soak's gateways and links.
type soakStack struct {
	gws      []*gateway.Server
	links    []*faultproxy.Link
	replicas []*faultproxy.Link // the gateways' links to the replica
}

// addr is gateway i's address.
func (st soakStack) addr(i int) string { return st.gws[i].Addr().String() }

// startSoakStack starts an owner (its link to the primary proxied) and two
// gateways over the pair, each with proxied links to the primary, the
// replica and the owner, replica reads on with max_replica_lag and
// max_replica_latency, the first with causal reads. Without replicaReads
// the replica gets no reads.
func startSoakStack(t *testing.T, pair *replicaPair, replicaReads bool) soakStack {
	t.Helper()
	var st soakStack
	ownerLink := faultproxy.New(t, "owner-primary", pair.primary.Addr())
	o := startOwner(t, ownerLink)
	st.links = append(st.links, ownerLink)
	for i := range 2 {
		name := fmt.Sprintf("gateway%d", i+1)
		db := faultproxy.New(t, name+"-primary", pair.primary.Addr())
		repl := faultproxy.New(t, name+"-replica", pair.replica.Addr())
		ow := faultproxy.New(t, name+"-owner", o.Addr().String())
		reads := "on"
		if !replicaReads {
			reads = "off"
		}
		more := fmt.Sprintf("    owner: %q\n    owner_timeout: 2s\n    failover_buffer: 3s\n    replica_reads: %s\n    max_replica_lag: %v\n    max_replica_latency: %v\n",
			ow.Addr(), reads, soakMaxLag, soakMaxLatency)
		if i == 0 {
			more += "    causal_reads: on\n"
		}
		gw := startGatewayWith(t, name, "{size: 12, min_idle: 2, acquire_timeout: 5s}", soakHealth, more, db.Addr(), repl.Addr())
		waitFor(t, name+"'s primary and replica", func() bool {
			s := gw.Health()
			c := s.Cluster("main")
			return c != nil && c.Primary != "" && len(c.Replicas) == 1 && s.Backend(c.Replicas[0]).Last.LagKnown
		})
		st.gws = append(st.gws, gw)
		st.links = append(st.links, db, repl, ow)
		st.replicas = append(st.replicas, repl)
	}
	return st
}

// watchReplicas samples every 200 ms until stop whether each gateway's
// replica gets reads (serving, lag within the cap, not slow) or why not.
func watchReplicas(r *soakRun, st soakStack, stop <-chan struct{}) {
	tickUntil(200*time.Millisecond, stop, 1_000_000, func() {
		for i, gw := range st.gws {
			v := gw.Health().Backend(st.replicas[i].Addr())
			state := "unknown"
			switch {
			case v == nil:
			case v.State != healthcheck.StateServing:
				state = "not serving"
			case !v.Last.LagKnown:
				state = "lag unknown"
			case v.Last.Lag > soakMaxLag:
				state = "lagging"
			case v.Slow:
				state = "slow"
			default:
				state = "gets reads"
			}
			r.mu.Lock()
			r.replica[state]++
			r.mu.Unlock()
		}
	})
}

// tickUntil calls fn every d until stop, n times at most.
func tickUntil(d time.Duration, stop <-chan struct{}, n int, fn func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for range n {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		fn()
	}
}

// soakSchema creates the soak's tables on the primary: 10 accounts of
// 1000, a log, a sequence (cache 100) and a message queue.
func soakSchema(t *testing.T, root *sql.DB) {
	t.Helper()
	for _, q := range []string{
		"DROP TABLE IF EXISTS soak_accounts, soak_log, soak_seq, soak_msgs",
		"CREATE TABLE soak_accounts (id INT PRIMARY KEY, bal BIGINT NOT NULL)",
		"INSERT INTO soak_accounts SELECT seq, 1000 FROM seq_1_to_10",
		"CREATE TABLE soak_log (id BIGINT PRIMARY KEY, client INT NOT NULL)",
		"CREATE TABLE soak_seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO soak_seq VALUES (0, 1, 100)",
		soakMsgsDDL,
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// soakFaults fires a random fault on a random link every few seconds
// until the deadline: silence both ways, 300 ms latency, resets, or
// results cut after 32 KiB, and on a link to a replica also a slowdown
// (soakSlowdownMS, above max_replica_latency); each held 2-4 s, then 3 s
// without.
func soakFaults(r *soakRun, st soakStack, links []*faultproxy.Link, deadline time.Time) {
	kinds := []string{"silence", "latency", "reset", "cut"}
	for n := 0; n < 100_000 && time.Now().Add(10*time.Second).Before(deadline); n++ {
		time.Sleep(3 * time.Second)
		l := links[rand.IntN(len(links))]
		ks := kinds
		if slices.Contains(st.replicas, l) {
			ks = append(slices.Clip(kinds), "slowdown")
		}
		kind := ks[rand.IntN(len(ks))]
		var err error
		switch kind {
		case "silence":
			if err = l.Silence(faultproxy.Down); err == nil {
				err = l.Silence(faultproxy.Up)
			}
		case "latency":
			err = l.Latency(faultproxy.Down, 300, 100)
		case "reset":
			err = l.Reset(faultproxy.Down)
		case "cut":
			err = l.CutAfter(faultproxy.Down, 32<<10)
		case "slowdown":
			err = l.Latency(faultproxy.Down, soakSlowdownMS, 10)
		}
		w := faultWindow{kind: kind + "@" + l.Name(), link: l.Name(), from: time.Now()}
		r.mu.Lock()
		r.windows = append(r.windows, w)
		i := len(r.windows) - 1
		r.mu.Unlock()
		if err != nil {
			panic(err) // a fault the proxy refuses is a bug of this test
		}
		time.Sleep(2*time.Second + rand.N(2*time.Second))
		l.Clear()
		r.mu.Lock()
		r.windows[i].to = time.Now()
		r.mu.Unlock()
	}
}

// soakClient runs one client's workload through gateway addr until the
// deadline (or soakMaxOps): transfers between accounts in a transaction,
// NEXT VALUE from the owner, inserts, and reads (outside a transaction:
// the replica's when it qualifies), at random. With causal set (the
// gateway has causal_reads on), a third of the inserts are followed, on
// the same session and past the gateway's 50 ms last_result hold, by a
// read of the row, which must find it.
// With onlyTransfers, half its operations are transfers and half reads.
func soakClient(t *testing.T, r *soakRun, addr string, id int, causal, onlyTransfers bool, deadline time.Time) {
	user, pass := appUser, appPass
	if r.direct {
		user, pass = backendUser, backendPass // MariaDB's own account
	}
	db := soakOpenAs(t, addr, user, pass)
	db.SetMaxOpenConns(1)
	next := int64(id) << 40 // this client's insert ids
	var recent []string     // the session's last operations, for a wrong read's report
	for n := 0; n < soakMaxOps && time.Now().Before(deadline); n++ {
		var what string
		var err error
		start := time.Now()
		p := rand.IntN(10)
		if onlyTransfers {
			p = 9 * rand.IntN(2) // 0: a transfer, 9: a read
		}
		switch {
		case p < 4:
			what, err = "transfer", transfer(db)
		case p < 7:
			what = "next value"
			var v int64
			if err = db.QueryRow("SELECT NEXT VALUE FROM soak_seq").Scan(&v); err == nil {
				r.mu.Lock()
				r.draws[id] = append(r.draws[id], v)
				r.mu.Unlock()
			}
		case p < 9:
			what = "insert"
			next++
			if causal && rand.IntN(3) == 0 {
				what, err = "insert and read it", readYourWrite(r, db, next, id)
			} else if _, err = db.Exec("INSERT INTO soak_log VALUES (?, ?)", next, id); err == nil {
				r.mu.Lock()
				r.inserted = append(r.inserted, next)
				r.mu.Unlock()
			}
		default:
			what, err = "read", r.read(db, addr, id, recent)
		}
		r.took(what, time.Since(start))
		outcome := "ok"
		if err != nil {
			outcome = err.Error()
		}
		recent = append(recent, fmt.Sprintf("%s %s: %s", start.Format("15:04:05.000"), what, outcome))
		if len(recent) > soakRecentOps {
			recent = recent[1:]
		}
		if err != nil {
			r.failed(time.Now(), what, err)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		r.succeeded(what)
	}
}

// read reads the accounts outside a transaction (the replica's when it
// qualifies) through gateway addr and checks their count and total; a
// wrong one is recorded with client id's last operations (recent).
//
// With r.diagnose, the read also reports its backend connection's MariaDB
// thread and the InnoDB transaction INNODB_TRX lists on it, if any (the
// gateway leaves CONNECTION_ID() alone in a statement that reads
// INNODB_TRX). The thread is the read's own; INNODB_TRX is a cache that
// InnoDB refreshes only after 100 ms without a read of it, so with every
// client reading it, it can be seconds old.
func (r *soakRun) read(db *sql.DB, addr string, id int, recent []string) error {
	var c, sum int64
	var server int
	var trx string // with diagnose: "; thread ..., transaction: ..."
	if r.diagnose {
		q := "SELECT COUNT(*), SUM(bal), @@server_id, CONCAT('; thread ', CONNECTION_ID(), ', transaction: ', COALESCE((SELECT GROUP_CONCAT(CONCAT(trx_id, ' ', trx_state, ' since ', trx_started, ', ', trx_rows_modified, ' rows modified, ', trx_tables_locked, ' tables locked')) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()), 'none')) FROM soak_accounts"
		if err := db.QueryRow(q).Scan(&c, &sum, &server, &trx); err != nil {
			return err
		}
	} else if err := db.QueryRow("SELECT COUNT(*), SUM(bal), @@server_id FROM soak_accounts").Scan(&c, &sum, &server); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readsBy[server]++
	if c != 10 || sum != 10_000 {
		r.badReads++
		if r.badRead == "" {
			// What to chase it with: when, during which fault, after
			// which operations of the session.
			r.badRead = fmt.Sprintf("%d rows, total %d on server %d through %s (client %d) at %s (fault %s%s); the session's operations before it, oldest first: %s",
				c, sum, server, addr, id, time.Now().Format("15:04:05.000"), r.windowAt(time.Now()), trx, strings.Join(recent, "; "))
		}
	}
	return nil
}

// readYourWrite inserts row id into soak_log and, on the same session 60
// ms later (past last_result's hold), reads it back; a read that misses
// it is recorded as stale.
func readYourWrite(r *soakRun, db *sql.DB, id int64, client int) error {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO soak_log VALUES (%d, %d)", id, client)); err != nil {
		return err
	}
	r.mu.Lock()
	r.inserted = append(r.inserted, id)
	r.mu.Unlock()
	time.Sleep(60 * time.Millisecond)
	var c, server int
	if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*), @@server_id FROM soak_log WHERE id = %d", id)).Scan(&c, &server); err != nil {
		return err
	}
	r.mu.Lock()
	r.causal[server]++
	if c != 1 {
		r.stale = append(r.stale, fmt.Sprintf("row %d not seen on server %d", id, server))
	}
	r.mu.Unlock()
	return nil
}

// transfer moves 1 between two random accounts in a transaction,
// locking them in id order (no deadlock between transfers).
func transfer(db *sql.DB) error {
	a := 1 + rand.IntN(9)
	b := a + 1 + rand.IntN(10-a)
	if rand.IntN(2) == 0 {
		a, b = b, a
	}
	if a > b {
		return transferOrdered(db, b, a, -1)
	}
	return transferOrdered(db, a, b, 1)
}

// transferOrdered moves amount from account lo to hi (lo < hi) in a
// transaction.
func transferOrdered(db *sql.DB, lo, hi, amount int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE soak_accounts SET bal = bal - ? WHERE id = ?", amount, lo); err != nil {
		return err
	}
	if _, err := tx.Exec("UPDATE soak_accounts SET bal = bal + ? WHERE id = ?", amount, hi); err != nil {
		return err
	}
	return tx.Commit()
}

// TestSoak (make soak): a primary with a replica, an owner and two
// gateways (the test process runs them all), every link behind a fault
// proxy; 8 clients per gateway (transfers, NEXT VALUE, inserts, reads),
// a message producer and a consumer per gateway, and, when sysbench is
// installed, sysbench oltp_read_write in segments through the second
// gateway, while soakFaults fires faults on the seven links. It reports
// the statements failed per fault kind and workload, and checks: the
// accounts' total never changes (no half transaction), no sequence value
// twice and each client's increasing, every acknowledged insert is there,
// reads (the replica's too) never see a wrong row count or total, a
// session's read after its write sees it (causal reads, gateway1), the
// queue's invariants (queueViolations) once every message is acked, and
// the growth of goroutines, RSS, sessions and backend connections within
// the bounds above.
func TestSoak(t *testing.T) {
	if *soakDuration <= 0 {
		t.Skip("make soak (go test -soak.duration D)")
	}
	pair, roots, st := startSoak(t, true)
	root := roots[0]
	r := newSoakRun()
	q := newQueueRun()
	start := time.Now()
	deadline := start.Add(*soakDuration)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { soakClient(t, r, st.addr(i%2), i, i%2 == 0, false, deadline) })
	}
	for i := range 2 {
		db := soakOpen(t, st.addr(i))
		db.SetMaxOpenConns(1)
		wg.Go(func() { soakProducer(r, q, db, 100+i, deadline) })
	}
	stopConsumers := make(chan struct{})
	var consumers sync.WaitGroup
	for i := range 2 {
		ack := soakOpen(t, st.addr(i))
		ack.SetMaxOpenConns(2)
		consumers.Go(func() { soakConsumer(r, q, st.addr(i), ack, stopConsumers) })
	}
	stopWatch := make(chan struct{})
	consumers.Go(func() { watchReplicas(r, st, stopWatch) })
	bench := startSysbench(t, pair.primary, st.addr(1), deadline)
	stopTrend := make(chan struct{})
	trendOut := trend(*soakDuration, stopTrend)
	time.Sleep(5 * time.Second) // warm: pools filled, blocks reserved
	before := measure(t, st, roots)
	soakFaults(r, st, st.links, deadline)
	wg.Wait()
	benchOut := bench()
	unacked, settled := waitAcked(root, time.Minute)
	close(stopConsumers)
	close(stopWatch)
	consumers.Wait()
	time.Sleep(5 * time.Second) // idle connections settle
	after := measure(t, st, roots)
	close(stopTrend)
	t.Logf("RSS MiB/Go heap in use MiB/goroutines over time: %s", trendOut())
	t.Logf("after the load: every message acked %v later (%d unacked)", settled.Round(100*time.Millisecond), unacked)
	soakReport(t, r, q, pair, root, time.Since(start), before, after, benchOut)
	for _, v := range memoryViolations(t, r, q, before) {
		t.Error(v)
	}
}

// startSoak starts the soak's replica pair, its schema and its stack
// (startSoakStack, replicaReads as there); roots
// are root sessions (one connection each, in the test database) on the
// primary and the replica.
func startSoak(t *testing.T, replicaReads bool) (*replicaPair, [2]*sql.DB, soakStack) {
	t.Helper()
	needStack(t)
	pair := startReplicaPair(t)
	var roots [2]*sql.DB
	for i, s := range []*mariadbtest.Server{pair.primary, pair.replica} {
		roots[i] = serverRoot(t, s)
		if _, err := roots[i].Exec("USE " + testDB); err != nil {
			t.Fatal(err)
		}
		roots[i].SetMaxOpenConns(1)
	}
	soakSchema(t, roots[0])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pair.replica.WaitCaughtUp(ctx, pair.primary); err != nil {
		t.Fatal(err)
	}
	return pair, roots, startSoakStack(t, pair, replicaReads)
}

// soakReport logs the figures and checks the invariants.
func soakReport(t *testing.T, r *soakRun, q *queueRun, pair *replicaPair, root *sql.DB, took time.Duration, before, after usage, bench benchFigures) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("soak of %v: %d faults; operations ok: %v", took.Round(time.Second), len(r.windows), r.ok)
	kinds := make([]string, 0, len(r.fails))
	for k := range r.fails {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	byKind := map[string]int{}
	for _, w := range r.windows {
		byKind[w.kind]++
	}
	t.Logf("faults fired (kind@link): %v", byKind)
	// Per kind over all links, then per kind and link.
	perKind := map[string]map[string]int{}
	for k, byWhat := range r.fails {
		kind, _, _ := strings.Cut(k, "@")
		if perKind[kind] == nil {
			perKind[kind] = map[string]int{}
		}
		for what, n := range byWhat {
			perKind[kind][what] += n
		}
	}
	t.Logf("failed per fault kind and workload: %v", perKind)
	for _, k := range kinds {
		total := 0
		for _, n := range r.fails[k] {
			total += n
		}
		t.Logf("failed during %s (fired %d times): %d %v, e.g. %s", k, byKind[k], total, r.fails[k], r.sample[k])
	}
	t.Logf("the longest operation by workload (failed or not): %v", r.slowest)
	t.Logf("sysbench through gateway2: %v", bench)
	t.Logf("reads by server (primary %d, replica %d): %v; read-your-writes checks by server: %v; replicas in discovery (samples every 200 ms, both gateways): %v",
		pair.primary.ServerID, pair.replica.ServerID, r.readsBy, r.causal, r.replica)
	t.Logf("the test process (both gateways and the owner) at the start: %v", before)
	t.Logf("the test process at the end: %v", after)
	var violations []string
	var total int64
	if err := root.QueryRow("SELECT SUM(bal) FROM soak_accounts").Scan(&total); err != nil || total != 10_000 {
		violations = append(violations, fmt.Sprintf("accounts total %d (%v), want 10000: half a transaction landed", total, err))
	}
	violations = append(violations, seqViolations(r.draws)...)
	for _, id := range r.inserted {
		var one int
		if err := root.QueryRow("SELECT 1 FROM soak_log WHERE id = ?", id).Scan(&one); err != nil {
			violations = append(violations, fmt.Sprintf("acknowledged insert %d missing: %v", id, err))
			break
		}
	}
	if r.badReads > 0 {
		violations = append(violations, fmt.Sprintf("%d reads saw a wrong row count or total, e.g. %s", r.badReads, r.badRead))
	}
	if len(r.hung) > 0 {
		violations = append(violations, fmt.Sprintf("%d operations got no answer within the clients' read timeout %v, e.g. %s", len(r.hung), soakReadTimeout, r.hung[0]))
	}
	if len(r.stale) > 0 {
		violations = append(violations, fmt.Sprintf("%d reads after the session's write missed it (causal reads), e.g. %s", len(r.stale), r.stale[0]))
	}
	queue, qv := queueViolations(t, q, root)
	t.Logf("message queue: %s", queue)
	violations = append(violations, qv...)
	if after.goroutines > before.goroutines+soakMoreGoroutines {
		violations = append(violations, fmt.Sprintf("goroutines grew from %d to %d (bound +%d)", before.goroutines, after.goroutines, soakMoreGoroutines))
	}
	if a, b := after.backendConns[0]+after.backendConns[1], before.backendConns[0]+before.backendConns[1]; a > b+soakMoreBackendConns {
		violations = append(violations, fmt.Sprintf("backend-account connections grew from %d to %d (bound +%d)", b, a, soakMoreBackendConns))
	}
	if after.sessions > before.sessions+soakMoreSessions {
		violations = append(violations, fmt.Sprintf("gateway sessions grew from %d to %d (bound +%d)", before.sessions, after.sessions, soakMoreSessions))
	}
	t.Logf("invariants checked: accounts total, sequence values unique and increasing per client, %d acknowledged inserts present, reads' row count and total (%d reads), %d read-your-writes checks, no operation past the read timeout, the queue's (every acknowledged insert there and no other, every row delivered and acked, every message left unacked delivered again, acks' affected rows 1 per id), goroutines (+%d), backend-account connections (+%d), sessions (+%d): %d violations (memory below)",
		len(r.inserted), r.ok["read"], r.ok["insert and read it"], soakMoreGoroutines, soakMoreBackendConns, soakMoreSessions, len(violations))
	for _, v := range violations {
		t.Error(v)
	}
}

// seqViolations checks the sequence draws: no value twice, each client's
// strictly increasing.
func seqViolations(draws map[int][]int64) []string {
	var out []string
	seen := map[int64]int{}
	for c, vs := range draws {
		for i, v := range vs {
			if prev, dup := seen[v]; dup {
				out = append(out, fmt.Sprintf("sequence value %d handed out twice (clients %d and %d)", v, prev, c))
			}
			seen[v] = c
			if i > 0 && v <= vs[i-1] {
				out = append(out, fmt.Sprintf("client %d: sequence value %d after %d", c, v, vs[i-1]))
			}
		}
	}
	return out
}
