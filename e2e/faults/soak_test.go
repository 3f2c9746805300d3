package faults

import (
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/faultproxy"
)

// soakDuration runs TestSoak (make soak sets it; 0 skips).
var soakDuration = flag.Duration("soak.duration", 0, "run TestSoak this long (make soak SOAK_DURATION=...)")

// soakSysbench runs sysbench beside the Go clients when it is installed.
var soakSysbench = flag.Bool("soak.sysbench", true, "run sysbench through the second gateway during TestSoak")

// soakGrace is how long after a fault ends a failure is still counted
// as the fault's (discovery's rise probes, the owner pool's redial).
const soakGrace = 3 * time.Second

// soakMaxOps bounds each client's loop besides the duration.
const soakMaxOps = 5_000_000

// faultWindow is one fault the soak fired.
type faultWindow struct {
	kind, link string
	from, to   time.Time
}

// soakRun is what a soak saw.
type soakRun struct {
	mu       sync.Mutex
	windows  []faultWindow
	fails    map[string]int    // by fault kind; "none" outside every window
	sample   map[string]string // one error per fault kind
	ok       map[string]int    // successful operations by workload
	draws    map[int][]int64   // sequence values by client
	inserted []int64           // acknowledged inserts
	badReads int               // reads that saw a wrong row count
}

// failed records a failure at time at.
func (r *soakRun) failed(at time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kind := "none"
	for _, w := range r.windows {
		if !at.Before(w.from) && (w.to.IsZero() || at.Before(w.to.Add(soakGrace))) {
			kind = w.kind
		}
	}
	r.fails[kind]++
	if _, ok := r.sample[kind]; !ok {
		r.sample[kind] = err.Error()
	}
}

// succeeded counts a successful operation of workload what.
func (r *soakRun) succeeded(what string) {
	r.mu.Lock()
	r.ok[what]++
	r.mu.Unlock()
}

// usage is the process's resources at one moment.
type usage struct {
	rssKB, goroutines, backendThreads, preparedStmts int
}

func (u usage) String() string {
	return fmt.Sprintf("RSS %d KiB, %d goroutines, %d MariaDB threads, %d statements prepared on MariaDB", u.rssKB, u.goroutines, u.backendThreads, u.preparedStmts)
}

// measure reads the test process's RSS and goroutines (the gateways and
// the owner run in it) and MariaDB's Threads_connected.
func measure(t *testing.T, root *sql.DB) usage {
	t.Helper()
	runtime.GC()
	var u usage
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		if m := regexp.MustCompile(`VmRSS:\s+(\d+)`).FindSubmatch(b); m != nil {
			u.rssKB, _ = strconv.Atoi(string(m[1]))
		}
	}
	u.goroutines = runtime.NumGoroutine()
	var name string
	if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &u.backendThreads); err != nil {
		t.Fatal(err)
	}
	if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &u.preparedStmts); err != nil {
		t.Fatal(err)
	}
	return u
}

// soakStack is the soak's processes and links.
type soakStack struct {
	gws   []string // gateway addresses
	links []*faultproxy.Link
}

// startSoakStack starts an owner (its link to MariaDB proxied) and two
// gateways, each with a proxied link to MariaDB and to the owner.
func startSoakStack(t *testing.T) soakStack {
	t.Helper()
	var st soakStack
	ownerLink := link(t, "owner-mariadb")
	o := startOwner(t, ownerLink)
	st.links = append(st.links, ownerLink)
	for i := range 2 {
		db := link(t, fmt.Sprintf("gateway%d-mariadb", i+1))
		ow := faultproxy.New(t, fmt.Sprintf("gateway%d-owner", i+1), o.Addr().String())
		gw := startGatewayWith(t, fmt.Sprintf("gateway%d", i+1), "{size: 12, min_idle: 2, acquire_timeout: 5s}",
			"{interval: 200ms, timeout: 500ms}", fmt.Sprintf("    owner: %q\n    owner_timeout: 2s\n    failover_buffer: 3s\n", ow.Addr()), db.Addr())
		st.gws = append(st.gws, gw.Addr().String())
		st.links = append(st.links, db, ow)
	}
	return st
}

// soakSchema creates the soak's tables: 10 accounts of 1000, a log, and
// a sequence (cache 100).
func soakSchema(t *testing.T, root *sql.DB) {
	t.Helper()
	for _, q := range []string{
		"DROP TABLE IF EXISTS soak_accounts, soak_log, soak_seq",
		"CREATE TABLE soak_accounts (id INT PRIMARY KEY, bal BIGINT NOT NULL)",
		"INSERT INTO soak_accounts SELECT seq, 1000 FROM seq_1_to_10",
		"CREATE TABLE soak_log (id BIGINT PRIMARY KEY, client INT NOT NULL)",
		"CREATE TABLE soak_seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO soak_seq VALUES (0, 1, 100)",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// soakFaults fires a random fault on a random link every few seconds
// until the deadline: silence both ways, 300 ms latency, resets, or
// results cut after 32 KiB; each held 2-4 s, then 3 s without.
func soakFaults(r *soakRun, links []*faultproxy.Link, deadline time.Time) {
	kinds := []string{"silence", "latency", "reset", "cut"}
	for n := 0; n < 100_000 && time.Now().Add(10*time.Second).Before(deadline); n++ {
		time.Sleep(3 * time.Second)
		l := links[rand.IntN(len(links))]
		kind := kinds[rand.IntN(len(kinds))]
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
// NEXT VALUE from the owner, inserts, and reads, at random.
func soakClient(t *testing.T, r *soakRun, addr string, id int, deadline time.Time) {
	db := open(t, addr)
	db.SetMaxOpenConns(1)
	next := int64(id) << 40 // this client's insert ids
	for n := 0; n < soakMaxOps && time.Now().Before(deadline); n++ {
		var what string
		var err error
		switch p := rand.IntN(10); {
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
			if _, err = db.Exec("INSERT INTO soak_log VALUES (?, ?)", next, id); err == nil {
				r.mu.Lock()
				r.inserted = append(r.inserted, next)
				r.mu.Unlock()
			}
		default:
			what = "read"
			var c int
			if err = db.QueryRow("SELECT COUNT(*) FROM soak_accounts").Scan(&c); err == nil && c != 10 {
				r.mu.Lock()
				r.badReads++
				r.mu.Unlock()
			}
		}
		if err != nil {
			r.failed(time.Now(), err)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		r.succeeded(what)
	}
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

// TestSoak (make soak): two gateways and an owner, 8 clients per gateway
// and, when sysbench is installed, sysbench oltp_read_write through the
// second gateway, while soakFaults fires faults on the five links. It
// reports the statements failed per fault kind and checks: the accounts'
// total never changes (no half transaction), no sequence value twice and
// each client's increasing, every acknowledged insert is there, reads
// never see a wrong row count; and the process's goroutines and MariaDB's
// connections at the end are within a bound of the start.
func TestSoak(t *testing.T) {
	if *soakDuration <= 0 {
		t.Skip("make soak (go test -soak.duration D)")
	}
	needStack(t)
	root := rootDB(t)
	soakSchema(t, root)
	st := startSoakStack(t)
	r := &soakRun{fails: map[string]int{}, sample: map[string]string{}, ok: map[string]int{}, draws: map[int][]int64{}}
	start := time.Now()
	deadline := start.Add(*soakDuration)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { soakClient(t, r, st.gws[i%2], i, deadline) })
	}
	bench := startSysbench(t, root, st.gws[1], *soakDuration)
	time.Sleep(5 * time.Second) // warm: pools filled, blocks reserved
	before := measure(t, root)
	soakFaults(r, st.links, deadline)
	wg.Wait()
	benchOut := bench()
	time.Sleep(5 * time.Second) // idle connections settle
	after := measure(t, root)
	soakReport(t, r, root, time.Since(start), before, after, benchOut)
}

// startSysbench prepares sysbench's tables straight on MariaDB and runs
// oltp_read_write through the gateway at addr for d, errors ignored (it
// reconnects); the returned function waits and returns its summary. When
// sysbench is not installed it returns "sysbench not installed".
func startSysbench(t *testing.T, root *sql.DB, addr string, d time.Duration) func() string {
	t.Helper()
	if !*soakSysbench {
		return func() string { return "off (-soak.sysbench=false)" }
	}
	if _, err := exec.LookPath("sysbench"); err != nil {
		return func() string { return "sysbench not installed" }
	}
	host, port, _ := strings.Cut(addr, ":")

	common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-db=" + testDB, "--tables=2", "--table-size=2000"}
	prep := exec.Command("sysbench", append(common, "--mysql-socket="+primary.Socket,
		"--mysql-user=root", "cleanup")...)
	_ = prep.Run()
	prep = exec.Command("sysbench", append(common, "--mysql-socket="+primary.Socket,
		"--mysql-user=root", "prepare")...)
	if out, err := prep.CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	secs := max(int(d.Seconds())-10, 5)
	cmd := exec.Command("sysbench", append(common, "--mysql-host="+host, "--mysql-port="+port,
		"--mysql-user="+appUser, "--mysql-password="+appPass, "--threads=4", "--time="+strconv.Itoa(secs),
		"--mysql-ignore-errors=all", "--report-interval=0", "run")...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() string {
		err := cmd.Wait()
		var lines []string
		for _, l := range strings.Split(out.String(), "\n") {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "transactions:") || strings.HasPrefix(l, "ignored errors:") || strings.HasPrefix(l, "reconnects:") || strings.HasPrefix(l, "FATAL") {
				lines = append(lines, l)
			}
		}
		if err != nil {
			lines = append(lines, "exit: "+err.Error())
		}
		return strings.Join(lines, "; ")
	}
}

// soakReport logs the figures and checks the invariants.
func soakReport(t *testing.T, r *soakRun, root *sql.DB, took time.Duration, before, after usage, bench string) {
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
	for _, k := range kinds {
		t.Logf("failed during %s (fired %d times): %d, e.g. %s", k, byKind[k], r.fails[k], r.sample[k])
	}
	t.Logf("sysbench through gateway2: %s", bench)
	t.Logf("start: %v; end: %v", before, after)
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
		violations = append(violations, fmt.Sprintf("%d reads saw a wrong row count", r.badReads))
	}
	if after.goroutines > before.goroutines+50 {
		violations = append(violations, fmt.Sprintf("goroutines grew from %d to %d", before.goroutines, after.goroutines))
	}
	if after.backendThreads > before.backendThreads+30 {
		violations = append(violations, fmt.Sprintf("MariaDB threads grew from %d to %d", before.backendThreads, after.backendThreads))
	}
	t.Logf("invariants checked: accounts total, sequence values unique and increasing per client, %d acknowledged inserts present, reads' row count, goroutines (+50), MariaDB threads (+30): %d violations", len(r.inserted), len(violations))
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
