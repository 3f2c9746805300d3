package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/wire"
)

const ownerDB = "owner_e2e"

// ownerStack is the shared MariaDB, an owner process (the real binary, so
// it can be killed) and in-process gateways forwarding to it.
type ownerStack struct {
	// httpAddr is the owner's --http-listen (/healthz, /readyz, /metrics).
	bin, config, ownerAddr, httpAddr string
	owner                            *exec.Cmd
	ownerLog                         *logBuffer
	gateways                         []string // MySQL addresses
	servers                          []*gateway.Server
}

// ownerInUse is the owner pool's connections in use, summed over the
// gateways.
func (o *ownerStack) ownerInUse() int {
	n := 0
	for _, s := range o.servers {
		for _, p := range s.PoolStats() {
			if p.Owner {
				n += p.InUse
			}
		}
	}
	return n
}

// watchOwnerPool samples ownerInUse every millisecond until stop is
// called, which returns the peak.
func (o *ownerStack) watchOwnerPool() (stop func() int) {
	done := make(chan struct{})
	peak := make(chan int, 1)
	go func() {
		p := 0
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				peak <- p
				return
			case <-t.C:
				p = max(p, o.ownerInUse())
			}
		}
	}()
	return func() int { close(done); return <-peak }
}

// ownerTables creates the sequence, message and auto_increment tables.
func ownerTables(t *testing.T) {
	t.Helper()
	root, err := shared.db.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	mustExec(t, root,
		"DROP DATABASE IF EXISTS "+ownerDB,
		"CREATE DATABASE "+ownerDB,
		"CREATE TABLE "+ownerDB+".seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO "+ownerDB+".seq VALUES (0, 1, 1000)",
		"CREATE TABLE "+ownerDB+".small_seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO "+ownerDB+".small_seq VALUES (0, 100, 3)",
		"CREATE TABLE "+ownerDB+".orders (id BIGINT PRIMARY KEY, item VARCHAR(32) NOT NULL, qty INT DEFAULT 1)",
		"CREATE TABLE "+ownerDB+`.msgs (
			id BIGINT PRIMARY KEY, priority BIGINT NOT NULL DEFAULT 0, epoch BIGINT NOT NULL DEFAULT 0,
			time_next BIGINT DEFAULT 0, time_acked BIGINT, sent_ns BIGINT, body VARCHAR(64),
			KEY next_idx (time_next), KEY ack_idx (time_acked)
		) COMMENT 'vitess_message,vt_ack_wait=2,vt_purge_after=3600,vt_batch_size=20,vt_cache_size=5000,vt_poller_interval=0.2'`,
	)
}

// startOwnerStack writes a config with an owner, starts the owner binary
// and n gateways.
func startOwnerStack(t *testing.T, n int) *ownerStack {
	t.Helper()
	return startOwnerStackUsers(t, n, "")
}

// startOwnerStackUsers is startOwnerStack with more users (YAML list
// items, each on a line of its own).
func startOwnerStackUsers(t *testing.T, n int, users string) *ownerStack {
	t.Helper()
	ownerTables(t)
	o := &ownerStack{bin: buildGateway(t), ownerAddr: freeAddr(t), httpAddr: freeAddr(t)}
	o.config = filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := strings.Replace(ownerYAML(o.ownerAddr), "clusters:\n", users+"clusters:\n", 1)
	if err := writeFile(o.config, yaml); err != nil {
		t.Fatal(err)
	}
	o.startOwner(t)
	t.Cleanup(func() { o.stopOwner(syscall.SIGTERM) })
	for i := 0; i < n; i++ {
		srv := startTestGateway(t, fmt.Sprintf("gateway-owner-%d", i), yaml)
		o.servers = append(o.servers, srv)
		o.gateways = append(o.gateways, srv.Addr().String())
	}
	return o
}

func ownerYAML(ownerAddr string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
health: {interval: 500ms, timeout: 1s}
users:
  - {user: %s, password: %s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {size: 16, min_idle: 1, acquire_timeout: 10s}
    owner: %s
    owner_pool_size: 32
    auto_increment:
      - {table: %s.orders, column: id, sequence: %s.small_seq}
`, logLevel(), appUser, appPass, backendUser, backendPass, shared.db.Addr(), ownerAddr, ownerDB, ownerDB)
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startOwner runs `gateway owner` and waits until it accepts connections.
func (o *ownerStack) startOwner(t *testing.T) {
	t.Helper()
	o.owner, o.ownerLog = startOwnerProcess(t, o.bin, o.config, o.ownerAddr, o.httpAddr)
}

// startOwnerProcess runs the owner of cluster main on config and waits
// until it listens on addr.
func startOwnerProcess(t *testing.T, bin, config, addr, httpAddr string) (*exec.Cmd, *logBuffer) {
	t.Helper()
	cmd := exec.Command(bin, "owner", "--config", config, "--cluster", "main", "--http-listen", httpAddr)
	logs := &logBuffer{}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return cmd, logs
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("owner did not start:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopOwner signals the owner and waits for it.
func (o *ownerStack) stopOwner(sig syscall.Signal) {
	if o.owner == nil {
		return
	}
	_ = o.owner.Process.Signal(sig)
	_ = o.owner.Wait()
	o.owner = nil
}

// session opens one gateway session on gateway i.
func (o *ownerStack) session(t *testing.T, i int) *sql.DB {
	t.Helper()
	return o.openSession(t, i, "?interpolateParams=true")
}

// openSession opens one session on gateway i with DSN parameters params.
func (o *ownerStack) openSession(t *testing.T, i int, params string) *sql.DB {
	t.Helper()
	db := open(t, fmt.Sprintf("%s:%s@tcp(%s)/%s%s", appUser, appPass, o.gateways[i], ownerDB, params))
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db
}

// TestOwnerSequences: 2 gateways × 8 clients ask for NEXT VALUE while the
// owner is killed and restarted: no value twice, each client's values
// strictly increase, and the sequence row is never behind.
func TestOwnerSequences(t *testing.T) {
	st := startOwnerStack(t, 2)
	const clients, perClient = 8, 5000
	values := make([][]int64, 2*clients)
	var failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	var done atomic.Int64
	for c := range values {
		db := st.session(t, c%2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(2 * time.Minute)
			for len(values[c]) < perClient && time.Now().Before(deadline) {
				var v int64
				if err := db.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&v); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					time.Sleep(10 * time.Millisecond)
					continue
				}
				values[c] = append(values[c], v)
				done.Add(1)
			}
		}()
	}
	stopWatch := st.watchOwnerPool()
	for done.Load() < clients*perClient/2 {
		time.Sleep(10 * time.Millisecond)
	}
	st.stopOwner(syscall.SIGKILL)
	killedAt := done.Load()
	time.Sleep(300 * time.Millisecond)
	st.startOwner(t)
	wg.Wait()
	t.Logf("owner killed after %d values, restarted; %d statements failed while it was down (first: %v); owner pool peak in use %d (2 gateways, 16 clients)",
		killedAt, failures.Load(), firstErr.Load(), stopWatch())

	seen := map[int64]int{}
	var highest int64
	for c, vs := range values {
		if len(vs) != perClient {
			t.Fatalf("client %d got %d values of %d", c, len(vs), perClient)
		}
		for i, v := range vs {
			if i > 0 && v <= vs[i-1] {
				t.Fatalf("client %d: value %d after %d", c, v, vs[i-1])
			}
			if prev, dup := seen[v]; dup {
				t.Fatalf("value %d handed to clients %d and %d", v, prev, c)
			}
			seen[v] = c
			highest = max(highest, v)
		}
	}
	var next int64
	if err := open(t, shared.directDSN(ownerDB)).QueryRow("SELECT next_id FROM seq WHERE id = 0").Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next <= highest {
		t.Fatalf("sequence row next_id %d is behind the highest value handed out %d", next, highest)
	}
	// n values at once, and a clear error for n < 1.
	db := st.session(t, 0)
	var a, b int64
	if err := db.QueryRow("SELECT NEXT 10 VALUES FROM seq").Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&b); err != nil || b != a+10 {
		t.Fatalf("after NEXT 10 VALUES = %d: NEXT VALUE = %d (%v), want %d", a, b, err, a+10)
	}
	_, err := db.Exec("SELECT NEXT 0 VALUES FROM seq")
	sqlErr(t, err, 1210, "HY000")
}

// TestOwnerForwardingKeepsSessions: a session with user variables and an
// open transaction gets sequence values; no owner connection leaks.
func TestOwnerForwardingKeepsSessions(t *testing.T) {
	st := startOwnerStack(t, 1)
	db := st.session(t, 0)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExecConn := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExecConn("SET @mine = 42")
	mustExecConn("BEGIN")
	mustExecConn("INSERT INTO orders (id, item) VALUES (1, 'in tx')")
	var prev int64
	for i := 0; i < 50; i++ {
		var v int64
		if err := conn.QueryRowContext(ctx, "SELECT NEXT VALUE FROM seq").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v <= prev {
			t.Fatalf("value %d after %d", v, prev)
		}
		prev = v
	}
	var mine, inTx int
	if err := conn.QueryRowContext(ctx, "SELECT @mine, COUNT(*) FROM orders WHERE id = 1").Scan(&mine, &inTx); err != nil || mine != 42 || inTx != 1 {
		t.Fatalf("session state after owner statements: @mine=%d, row in tx visible=%d (%v)", mine, inTx, err)
	}
	if n := st.ownerInUse(); n != 0 {
		t.Fatalf("owner connections in use after the statements: %d", n)
	}
	mustExecConn("ROLLBACK")
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE id = 1").Scan(&inTx); err != nil || inTx != 0 {
		t.Fatalf("rolled back row still there: %d (%v)", inTx, err)
	}
	// The owner is down: owner statements fail fast, others work.
	st.stopOwner(syscall.SIGTERM)
	start := time.Now()
	_, err = conn.ExecContext(ctx, "SELECT NEXT VALUE FROM seq")
	me := sqlErr(t, err, 1429, "HY000")
	if !strings.Contains(me.Message, st.ownerAddr) || time.Since(start) > 3*time.Second {
		t.Fatalf("owner down: after %v: %s", time.Since(start), me.Message)
	}
	var one int
	if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("a plain statement failed while the owner is down: %v", err)
	}
}

// TestOwnerAutoIncrement: INSERTs into an auto_increment table get ids from
// the sequence; LAST_INSERT_ID() and the OK packet report the first.
func TestOwnerAutoIncrement(t *testing.T) {
	st := startOwnerStack(t, 1)
	db := st.session(t, 0)
	check := func(q string, rows int) []int64 {
		t.Helper()
		res, err := db.Exec(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		first, _ := res.LastInsertId()
		var lid int64
		if err := db.QueryRow("SELECT LAST_INSERT_ID()").Scan(&lid); err != nil || lid != first {
			t.Fatalf("%s: LAST_INSERT_ID() = %d (%v), OK packet %d", q, lid, err, first)
		}
		var ids []int64
		r, err := db.Query("SELECT id FROM orders WHERE id >= ? ORDER BY id LIMIT ?", first, rows)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var id int64
			r.Scan(&id)
			ids = append(ids, id)
		}
		r.Close()
		return ids
	}
	mustExec(t, db, "DELETE FROM orders")
	ids := check("INSERT INTO orders (item) VALUES ('a'), ('b'), ('c'), ('d')", 4)
	if len(ids) != 4 || ids[0] < 100 || ids[3] != ids[0]+3 {
		t.Fatalf("multi-row insert ids %v, want 4 consecutive from the sequence (next_id 100)", ids)
	}
	ids2 := check("INSERT INTO orders (id, item, qty) VALUES (NULL, 'e', 2)", 1)
	if len(ids2) != 1 || ids2[0] != ids[3]+1 {
		t.Fatalf("NULL id got %v after %v", ids2, ids)
	}
	ids3 := check("INSERT INTO orders VALUES (NULL, 'f', 3), (NULL, 'g', 4)", 2)
	if len(ids3) != 2 || ids3[0] != ids2[0]+1 {
		t.Fatalf("no column list: ids %v after %v", ids3, ids2)
	}
	// Too few values for the table's columns: MariaDB's own error.
	_, err := db.Exec("INSERT INTO orders VALUES (NULL)")
	sqlErr(t, err, 1136, "21S01")
	// An explicit id is kept.
	mustExec(t, db, "INSERT INTO orders (id, item) VALUES (7, 'explicit')")
	var item string
	if err := db.QueryRow("SELECT item FROM orders WHERE id = 7").Scan(&item); err != nil || item != "explicit" {
		t.Fatalf("explicit id: %q (%v)", item, err)
	}
}

// subscriber reads STREAM * FROM msgs through a gateway with a raw client
// (so the test can cut its connection), acking what it gets.
type subscriber struct {
	name string
	addr string
	ack  *sql.DB
	mu   sync.Mutex
	conn *wire.BackendConn
	dead atomic.Bool
	// noAck makes the subscriber take messages without acking them (one
	// that hangs before it dies).
	noAck bool
	onMsg func(id, sentNS int64, at time.Time)
}

func (s *subscriber) run(stop <-chan struct{}) {
	for !s.dead.Load() {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		bc, err := wire.Dial(ctx, s.addr, wire.DialOptions{User: appUser, Password: appPass})
		cancel()
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		s.conn = bc
		s.mu.Unlock()
		// Acks go out in batches from a goroutine of their own, at least
		// every 20 ms, so the last messages are acked too while the stream
		// goes on.
		acks := make(chan int64, 1024)
		ackDone := make(chan struct{})
		go func() {
			defer close(ackDone)
			var batch []int64
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			flush := func() {
				if len(batch) == 0 {
					return
				}
				ids := make([]string, len(batch))
				for i, id := range batch {
					ids[i] = strconv.FormatInt(id, 10)
				}
				q := fmt.Sprintf("UPDATE msgs SET time_acked = %d, time_next = NULL WHERE id IN (%s)", time.Now().UnixNano(), strings.Join(ids, ","))
				// Retry while the owner is down (bounded): an ack that
				// gives up only makes the message come back later.
				for try := 0; try < 200; try++ {
					if _, err := s.ack.Exec(q); err == nil {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				batch = batch[:0]
			}
			for {
				select {
				case id, ok := <-acks:
					if !ok {
						flush()
						return
					}
					if batch = append(batch, id); len(batch) >= 20 {
						flush()
					}
				case <-tick.C:
					flush()
				}
			}
		}()
		go func() { <-stop; bc.Close() }()
		streamStart := time.Now()
		err = bc.QueryRows("STREAM * FROM "+ownerDB+".msgs", func(row [][]byte) {
			if s.dead.Load() {
				return
			}
			at := time.Now()
			id, _ := strconv.ParseInt(string(row[0]), 10, 64)
			var sent int64
			for i := range row {
				if i > 0 && row[i] != nil {
					if v, err := strconv.ParseInt(string(row[i]), 10, 64); err == nil && v > 1e18 {
						sent = v
					}
				}
			}
			s.onMsg(id, sent, at)
			if !s.noAck {
				acks <- id
			}
		})
		close(acks)
		<-ackDone
		bc.Close()
		if err != nil && time.Since(streamStart) < 100*time.Millisecond {
			time.Sleep(50 * time.Millisecond) // the owner is down: do not spin
		}
	}
}

// kill cuts the subscriber's connection without acking what it holds.
func (s *subscriber) kill() {
	s.dead.Store(true)
	s.mu.Lock()
	if s.conn != nil {
		s.conn.Close()
	}
	s.mu.Unlock()
}

// TestOwnerMessages: 10,000 messages to 3 subscribers, one killed midway,
// the owner restarted once: every message acked, none lost, a message is
// delivered again only after the ack wait.
func TestOwnerMessages(t *testing.T) {
	// Parallel: its own owner, gateways and database, paced at 1,000
	// messages a second (see the package doc).
	t.Parallel()
	st := startOwnerStack(t, 1)
	const total = 10_000
	const ackWait = 2 * time.Second
	type delivery struct {
		at   time.Time
		by   string
		sent int64
	}
	var mu sync.Mutex
	got := map[int64][]delivery{}
	var latencies []time.Duration
	stop := make(chan struct{})
	var subs []*subscriber
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		// sub0 takes messages without acking them until it is killed:
		// they must come back, to the others, after the ack wait.
		s := &subscriber{name: fmt.Sprint("sub", i), addr: st.gateways[0], ack: st.session(t, 0), noAck: i == 0}
		s.ack.SetMaxOpenConns(2)
		s.onMsg = func(id, sent int64, at time.Time) {
			mu.Lock()
			got[id] = append(got[id], delivery{at, s.name, sent})
			if len(got[id]) == 1 && sent > 0 {
				latencies = append(latencies, at.Sub(time.Unix(0, sent)))
			}
			mu.Unlock()
		}
		subs = append(subs, s)
		wg.Add(1)
		go func() { defer wg.Done(); s.run(stop) }()
	}
	time.Sleep(300 * time.Millisecond) // subscribers connected
	prod := st.session(t, 0)
	stopWatch := st.watchOwnerPool()
	start := time.Now()
	for i := 1; i <= total; i++ {
		// About 1,000 messages per second.
		if wait := time.Until(start.Add(time.Duration(i) * time.Millisecond)); wait > 0 {
			time.Sleep(wait)
		}
		q := fmt.Sprintf("INSERT INTO msgs (id, sent_ns, body) VALUES (%d, %d, 'm%d')", i, time.Now().UnixNano(), i)
		for try := 0; ; try++ {
			_, err := prod.Exec(q)
			if err == nil {
				break
			}
			if try > 200 {
				t.Fatalf("insert %d: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		switch i {
		case total / 3:
			subs[0].kill()
		case total / 2:
			st.stopOwner(syscall.SIGKILL)
			st.startOwner(t)
		}
	}
	t.Logf("inserted %d messages in %v", total, time.Since(start))
	// Wait until every message is acked (the killed subscriber's come back
	// after the ack wait).
	direct := open(t, shared.directDSN(ownerDB))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var unacked int
		if err := direct.QueryRow("SELECT COUNT(*) FROM msgs WHERE time_acked IS NULL").Scan(&unacked); err != nil {
			t.Fatal(err)
		}
		if unacked == 0 {
			break
		}
		if time.Now().After(deadline) {
			rows, err := direct.Query("SELECT id, epoch, time_next FROM msgs WHERE time_acked IS NULL LIMIT 20")
			if err == nil {
				mu.Lock()
				for rows.Next() {
					var id, epoch int64
					var next sql.NullInt64
					rows.Scan(&id, &epoch, &next)
					t.Logf("unacked %d: epoch %d, time_next in %v, delivered %d times: %+v", id, epoch,
						time.Until(time.Unix(0, next.Int64)).Round(time.Millisecond), len(got[id]), got[id])
				}
				mu.Unlock()
				rows.Close()
			}
			t.Logf("owner log:\n%s", st.ownerLog.String())
			t.Fatalf("%d messages still unacked", unacked)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	peak := stopWatch()

	mu.Lock()
	defer mu.Unlock()
	var count int
	if err := direct.QueryRow("SELECT COUNT(*) FROM msgs").Scan(&count); err != nil || count != total {
		t.Fatalf("table holds %d messages (%v), want %d", count, err, total)
	}
	if redelivered := len(got) - total; redelivered < 0 {
		t.Fatalf("%d messages delivered, want %d", len(got), total)
	}
	redelivered, early := 0, 0
	for id := int64(1); id <= total; id++ {
		ds := got[id]
		if len(ds) == 0 {
			t.Fatalf("message %d never delivered", id)
		}
		for i := 1; i < len(ds); i++ {
			redelivered++
			if gap := ds[i].at.Sub(ds[i-1].at); gap < ackWait-200*time.Millisecond {
				early++
				if early <= 5 {
					t.Errorf("message %d delivered again %v after %s got it (ack wait %v)", id, gap, ds[i-1].by, ackWait)
				}
			}
		}
	}
	unackedBySub0 := 0
	for _, ds := range got {
		if ds[0].by == "sub0" {
			unackedBySub0++
		}
	}
	if redelivered < unackedBySub0 {
		t.Errorf("%d messages went to the subscriber that never acked, only %d redeliveries", unackedBySub0, redelivered)
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[int(float64(len(latencies)-1)*p)] }
	t.Logf("messages: %d delivered at least once, %d redeliveries (%d early; %d first went to the subscriber that never acked); insert-to-delivery latency median %v, p99 %v (at ~1,000 messages/s); owner pool peak in use %d (3 streams, 1 producer, acks)",
		total, redelivered, early, unackedBySub0, pct(0.5), pct(0.99), peak)
}

// TestOwnerSequenceThroughput measures NEXT VALUE calls per second through
// one gateway, from 1 and from 16 clients (cache 1000).
func TestOwnerSequenceThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	st := startOwnerStack(t, 1)
	for _, clients := range []int{1, 16} {
		var n atomic.Int64
		var failed atomic.Int64
		stopWatch := st.watchOwnerPool()
		var wg sync.WaitGroup
		end := time.Now().Add(2 * time.Second)
		for c := 0; c < clients; c++ {
			db := st.session(t, 0)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 1_000_000 && time.Now().Before(end); i++ {
					var v int64
					if err := db.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&v); err != nil {
						failed.Add(1)
						continue
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		peak := stopWatch()
		t.Logf("NEXT VALUE through the gateway, %d client(s): %.0f values/s (%d failed); owner pool peak in use %d",
			clients, float64(n.Load())/2, failed.Load(), peak)
		if failed.Load() != 0 {
			t.Errorf("%d NEXT VALUE calls failed", failed.Load())
		}
	}
}
