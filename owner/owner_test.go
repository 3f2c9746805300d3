package owner

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/wire"
)

// The integration tests share one mariadbd, started by TestMain unless
// -short. The backend account has explicit grants, not ALL PRIVILEGES.
const (
	testDB       = "ownertest"
	backendUser  = "owner_backend"
	backendUser2 = "owner_backend2"
	backendPass  = "owner pw"
	backendGrant = "SELECT, INSERT, UPDATE, DELETE, REPLICA MONITOR ON *.*"
)

var shared *mariadbtest.Server

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run owns the shared server so its Stop runs whatever happens.
func run(m *testing.M) (code int) {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{NoBinlog: true, Users: []mariadbtest.User{
		{Name: backendUser, Password: backendPass, Grants: backendGrant},
		{Name: backendUser2, Password: backendPass, Grants: backendGrant},
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		// glog (imported by the vitess parser) starts a flush daemon in init.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}()
	if err := createSchema(srv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared = srv
	return m.Run()
}

// msgComment makes redelivery quick: back after 1s + 0.2..0.27s.
const msgComment = "vitess_message,vt_ack_wait=1,vt_min_backoff=0.2,vt_purge_after=1,vt_batch_size=4,vt_cache_size=100,vt_poller_interval=0.3"

func createSchema(srv *mariadbtest.Server) error {
	root, err := srv.RootDB()
	if err != nil {
		return err
	}
	defer root.Close()
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + testDB,
		"CREATE DATABASE " + testDB,
		"CREATE TABLE " + testDB + ".seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO " + testDB + ".seq VALUES (0, 1, 1000)",
		"CREATE TABLE " + testDB + ".small_seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO " + testDB + ".small_seq VALUES (0, 100, 3)",
		"CREATE TABLE " + testDB + ".listed_seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT)",
		"INSERT INTO " + testDB + ".listed_seq VALUES (0, 1, 10)",
		"CREATE TABLE " + testDB + ".plain (id INT PRIMARY KEY)",
		"CREATE TABLE " + testDB + `.msgs (
			id BIGINT PRIMARY KEY, priority TINYINT NOT NULL DEFAULT 50, epoch BIGINT NOT NULL DEFAULT 0,
			time_next BIGINT DEFAULT 0, time_acked BIGINT, time_created BIGINT, body VARCHAR(64),
			KEY next_idx (time_next), KEY poller_idx (time_acked, priority, time_next)
		) COMMENT '` + msgComment + `'`,
	} {
		if _, err := root.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	// The backend account cannot create the fence table elected owners
	// write to (no CREATE grant): without it every test with election
	// depended on TestFenceRefusesStaleTerm running first.
	for _, q := range fenceDDL {
		if _, err := root.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// freshSchema creates the test schema again, for a test that counts on
// the sequences' first values and an empty message table (so that
// -count=N repeats it).
func freshSchema(t *testing.T) {
	t.Helper()
	if err := createSchema(needServer(t)); err != nil {
		t.Fatal(err)
	}
}

func needServer(t *testing.T) *mariadbtest.Server {
	t.Helper()
	if shared == nil {
		t.Skip("starts mariadbd; skipped in -short mode")
	}
	return shared
}

// ownerYAML is a deployment file whose cluster "main" has the shared
// server as its only backend and an owner on a free port.
func ownerYAML(user string) string { return ownerYAMLFor(user, shared.Addr()) }

func ownerYAMLFor(user, backend string) string {
	return fmt.Sprintf(`
users: [{user: app, password: app}]
health: {interval: 100ms, timeout: 1s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %q
    backends: [%q]
    owner: 127.0.0.1:0
    failover_buffer: 2s
    owner_tables:
      sequences: [%s.listed_seq]
`, user, backendPass, backend, testDB)
}

func testLogger() hclog.Logger {
	level := os.Getenv("OWNER_TEST_LOG") // e.g. debug
	if level == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: "owner", Level: hclog.LevelFromString(level), Output: os.Stderr})
}

// startOwner runs an owner for cluster main until the test ends.
func startOwner(t *testing.T) *Owner {
	t.Helper()
	needServer(t)
	return startOwnerWith(t, ownerYAML(backendUser))
}

func startOwnerWith(t *testing.T, yaml string, opts ...Option) *Owner {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(cfg, "main", testLogger(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- o.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return o
}

// clientDB opens a go-sql-driver pool to the owner (text protocol).
func clientDB(t *testing.T, o *Owner, db string) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = backendUser, backendPass, "tcp", o.Addr().String(), db
	cfg.InterpolateParams = true
	cfg.Timeout = 5 * time.Second
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pool := sql.OpenDB(c)
	t.Cleanup(func() { pool.Close() })
	return pool
}

func rootDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := needServer(t).RootDB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func nextValue(t *testing.T, db *sql.DB, q string) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow(q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// wantSQLError checks err is a server error with code and state.
func wantSQLError(t *testing.T, err error, code uint16, state string) *mysql.MySQLError {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != code || string(me.SQLState[:]) != state {
		t.Fatalf("got %v, want error %d (%s)", err, code, state)
	}
	return me
}

// checkNextValues checks NEXT VALUE and NEXT n VALUES on a fresh owner:
// one BIGINT column nextval, consecutive blocks, the block reserved ahead
// in the table, and a configured sequence without a comment.
func checkNextValues(t *testing.T, db, root *sql.DB) {
	t.Helper()
	rows, err := db.Query("SELECT NEXT VALUE FROM seq")
	if err != nil {
		t.Fatal(err)
	}
	types, _ := rows.ColumnTypes()
	if len(types) != 1 || types[0].Name() != "nextval" || types[0].DatabaseTypeName() != "BIGINT" {
		t.Fatalf("columns %v", types)
	}
	var v1 int64
	if !rows.Next() || rows.Scan(&v1) != nil || rows.Next() {
		t.Fatal("want exactly one row")
	}
	rows.Close()
	v2 := nextValue(t, db, "SELECT NEXT 10 VALUES FROM seq")
	v3 := nextValue(t, db, "select next value from `OWNERTEST`.`Seq`")
	if v2 != v1+1 || v3 != v2+10 {
		t.Fatalf("values %d, %d, %d: want consecutive blocks", v1, v2, v3)
	}
	var nextID int64
	if err := root.QueryRow("SELECT next_id FROM " + testDB + ".seq WHERE id = 0").Scan(&nextID); err != nil || nextID <= v3 {
		t.Fatalf("next_id %d (%v): not reserved ahead of %d", nextID, err, v3)
	}
	if v := nextValue(t, db, "SELECT NEXT VALUE FROM listed_seq"); v != 1 {
		t.Fatalf("configured sequence without comment: %d", v)
	}
}

// nextValuesConcurrently asks small_seq for values from many connections
// at once, several n, checks that no value is handed out twice and
// each client's values rise, and returns the highest value handed out.
func nextValuesConcurrently(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	const conns, per = 16, 150
	db.SetMaxOpenConns(conns)
	type got struct {
		vals []int64
		ns   []int64
	}
	results := make([]got, conns)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Go(func() {
			for i := range per {
				n := int64(1 + i%4)
				var v int64
				if err := db.QueryRow(fmt.Sprintf("SELECT NEXT %d VALUES FROM small_seq", n)).Scan(&v); err != nil {
					t.Error(err)
					return
				}
				results[c].vals = append(results[c].vals, v)
				results[c].ns = append(results[c].ns, n)
			}
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	var highest int64
	check := func(r got, who string) {
		for i, v := range r.vals {
			if i > 0 && v <= r.vals[i-1] {
				t.Fatalf("%s: %d after %d", who, v, r.vals[i-1])
			}
			for k := range r.ns[i] {
				if seen[v+k] {
					t.Fatalf("%s: value %d handed out twice", who, v+k)
				}
				seen[v+k] = true
				highest = max(highest, v+k)
			}
		}
	}
	for c, r := range results {
		check(r, fmt.Sprintf("client %d", c))
	}
	return highest
}

func TestOwnerSequences(t *testing.T) {
	freshSchema(t)
	o := startOwner(t)
	db := clientDB(t, o, testDB)
	root := rootDB(t)
	checkNextValues(t, db, root)
	highest := nextValuesConcurrently(t, db)

	// The primary changes (here: the owner's account, which opens new
	// connections with a new generation): memory is not trusted, the
	// block is reserved again from the table.
	before := nextValue(t, db, "SELECT NEXT VALUE FROM seq")
	var nextID int64
	cfg2, err := config.Parse([]byte(ownerYAML(backendUser2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := root.QueryRow("SELECT next_id FROM " + testDB + ".seq WHERE id = 0").Scan(&nextID); err != nil {
		t.Fatal(err)
	}
	if err := o.Reload(cfg2); err != nil {
		t.Fatal(err)
	}
	if after := nextValue(t, db, "SELECT NEXT VALUE FROM seq"); after != nextID || after <= before {
		t.Fatalf("after a primary change: %d, want the table's next_id %d (memory had %d)", after, nextID, before+1)
	}

	// The owner restarts: the new process continues above everything
	// handed out.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	o2 := startOwner(t)
	db2 := clientDB(t, o2, testDB)
	if v := nextValue(t, db2, "SELECT NEXT VALUE FROM small_seq"); v <= highest {
		t.Fatalf("the restarted owner handed out %d, not above %d", v, highest)
	}
	if v := nextValue(t, db2, "SELECT NEXT VALUE FROM seq"); v <= before+1 {
		t.Fatalf("the restarted owner handed out %d from seq, not above %d", v, before+1)
	}

	// Errors.
	_, err = db2.Exec("SELECT NEXT 0 VALUES FROM seq")
	wantSQLError(t, err, 1210, "HY000")
	_, err = db2.Exec("SELECT NEXT -3 VALUES FROM seq")
	wantSQLError(t, err, 1210, "HY000")
	_, err = db2.Exec("SELECT NEXT VALUE FROM plain")
	if me := wantSQLError(t, err, 1146, "42S02"); !strings.Contains(me.Message, "'ownertest.plain'") {
		t.Fatalf("message %q", me.Message)
	}
	_, err = db2.Exec("STREAM * FROM seq")
	wantSQLError(t, err, 1146, "42S02")
	_, err = db2.Exec("SELECT 1")
	if me := wantSQLError(t, err, 1235, "42000"); !strings.Contains(me.Message, "send it to the gateway") {
		t.Fatalf("message %q", me.Message)
	}
	_, err = clientDB(t, o2, "").Exec("SELECT NEXT VALUE FROM seq")
	wantSQLError(t, err, 1046, "3D000")
}

// streamClient reads STREAM * FROM msgs through go-sql-driver.
type streamClient struct {
	ids    chan int64
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream ended; err says why
	err    error
	cols   []string
}

func subscribe(t *testing.T, o *Owner) *streamClient {
	t.Helper()
	db := clientDB(t, o, testDB)
	ctx, cancel := context.WithCancel(context.Background())
	rows, err := db.QueryContext(ctx, "STREAM * FROM msgs")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &streamClient{ids: make(chan int64, 1000), cancel: cancel, done: make(chan struct{})}
	s.cols, _ = rows.Columns()
	go func() {
		defer close(s.done)
		defer rows.Close()
		for rows.Next() {
			var id int64
			var created, body sql.NullString
			if s.err = rows.Scan(&id, &created, &body); s.err != nil {
				return
			}
			s.ids <- id
		}
		s.err = rows.Err()
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// subscribers waits until the message queue has n subscribers.
func subscribers(t *testing.T, o *Owner, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		q := o.tables.Load().lookup(testDB, "msgs").queue
		q.mu.Lock()
		have := len(q.subs)
		q.mu.Unlock()
		if have == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers, want %d", have, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// collect reads n ids from the subscribers within d.
func collect(t *testing.T, n int, d time.Duration, subs ...*streamClient) map[int64]int {
	t.Helper()
	got := map[int64]int{} // id -> subscriber index
	timeout := time.After(d)
	for len(got) < n {
		for i, s := range subs {
			select {
			case id := <-s.ids:
				if prev, dup := got[id]; dup {
					t.Fatalf("message %d delivered to subscribers %d and %d", id, prev, i)
				}
				got[id] = i
			default:
			}
		}
		select {
		case <-timeout:
			t.Fatalf("received %d of %d messages", len(got), n)
		case <-time.After(time.Millisecond):
		}
	}
	return got
}

func insertMessages(t *testing.T, db *sql.DB, ids ...int64) {
	t.Helper()
	var vals []string
	for _, id := range ids {
		vals = append(vals, fmt.Sprintf("(%d, %d, 'body %d')", id, time.Now().UnixNano(), id))
	}
	res, err := db.Exec("INSERT INTO msgs (id, time_created, body) VALUES " + strings.Join(vals, ", "))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != int64(len(ids)) {
		t.Fatalf("insert affected %d rows, want %d", n, len(ids))
	}
}

func ackMessages(t *testing.T, db *sql.DB, ids ...int64) {
	t.Helper()
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = fmt.Sprint(id)
	}
	res, err := db.Exec(fmt.Sprintf("UPDATE msgs SET time_acked = %d, time_next = NULL WHERE id IN (%s) AND time_acked IS NULL",
		time.Now().UnixNano(), strings.Join(list, ", ")))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != int64(len(ids)) {
		t.Fatalf("ack affected %d rows, want %d", n, len(ids))
	}
}

// deliverShared inserts 20 messages and checks that each is delivered
// once, shared by both subscribers, then acks them.
func deliverShared(t *testing.T, db *sql.DB, a, b *streamClient) {
	t.Helper()
	ids := make([]int64, 20)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	start := time.Now()
	insertMessages(t, db, ids...)
	got := collect(t, 20, 5*time.Second, a, b)
	t.Logf("20 messages inserted and delivered in %v", time.Since(start))
	per := [2]int{}
	for _, i := range got {
		per[i]++
	}
	if per[0] == 0 || per[1] == 0 {
		t.Fatalf("deliveries per subscriber %v: not shared", per)
	}
	ackMessages(t, db, ids...)
}

// logDeliveryLatency measures insert to delivery latency, one message at a
// time, and logs its median and maximum.
func logDeliveryLatency(t *testing.T, db *sql.DB, a, b *streamClient) {
	t.Helper()
	var lat []time.Duration
	for id := int64(1000); id < 1020; id++ {
		start := time.Now()
		insertMessages(t, db, id)
		collect(t, 1, 5*time.Second, a, b)
		lat = append(lat, time.Since(start))
		ackMessages(t, db, id)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("insert -> delivery through the owner: median %v, max %v (20 messages)", lat[len(lat)/2], lat[len(lat)-1])
}

// waitPurged waits until the acked messages are purged, after
// vt_purge_after (1s), and fails after 8s.
func waitPurged(t *testing.T, root *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for {
		var left int
		if err := root.QueryRow("SELECT COUNT(*) FROM " + testDB + ".msgs WHERE time_acked IS NOT NULL").Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acked messages not purged", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestOwnerMessages(t *testing.T) {
	freshSchema(t)
	o := startOwner(t)
	db := clientDB(t, o, testDB)
	root := rootDB(t)

	a, b := subscribe(t, o), subscribe(t, o)
	if want := []string{"id", "time_created", "body"}; !slices.Equal(a.cols, want) {
		t.Fatalf("streamed columns %v, want %v", a.cols, want)
	}
	subscribers(t, o, 2)

	deliverShared(t, db, a, b)

	logDeliveryLatency(t, db, a, b)

	// Not acked: back after the ack wait plus backoff, epoch 2.
	// The clock starts before the insert: surely before the owner's own
	// clock read for the first send, however slow the way back here.
	first := time.Now()
	insertMessages(t, db, 100)
	collect(t, 1, 5*time.Second, a, b)
	collect(t, 1, 5*time.Second, a, b)
	if d := time.Since(first); d < 900*time.Millisecond {
		t.Fatalf("unacked message back after %v, before the ack wait", d)
	}
	var epoch int64
	if err := root.QueryRow("SELECT epoch FROM " + testDB + ".msgs WHERE id = 100").Scan(&epoch); err != nil || epoch != 2 {
		t.Fatalf("epoch %d (%v), want 2", epoch, err)
	}
	ackMessages(t, db, 100)

	// A subscriber that leaves gets nothing more; the other gets all.
	a.cancel()
	<-a.done
	subscribers(t, o, 1)
	insertMessages(t, db, 200, 201, 202, 203, 204)
	got := collect(t, 5, 5*time.Second, b)
	for id, i := range got {
		if i != 0 {
			t.Fatalf("message %d went to a closed subscriber", id)
		}
	}
	ackMessages(t, db, 200, 201, 202, 203, 204)

	// A message sent to a subscriber that then dies comes back to another.
	c := subscribe(t, o)
	subscribers(t, o, 2)
	b.cancel()
	<-b.done
	subscribers(t, o, 1)
	insertMessages(t, db, 300)
	collect(t, 1, 5*time.Second, c)
	ackMessages(t, db, 300)

	waitPurged(t, root)

	// Errors: a sequence is not a message table; DELETE is not the owner's.
	_, err := db.Exec("INSERT INTO seq (id, next_id, cache) VALUES (5, 1, 1)")
	wantSQLError(t, err, 1146, "42S02")
	_, err = db.Exec("DELETE FROM msgs WHERE id = 1")
	wantSQLError(t, err, 1235, "42000")
	insertMessages(t, db, 400)
	_, err = db.Exec("INSERT INTO msgs (id, body) VALUES (400, 'dup')")
	wantSQLError(t, err, 1062, "23000") // the primary's error, unchanged

	// Shutdown ends the stream with error 1053.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
		wantSQLError(t, c.err, 1053, "08S01")
	case <-time.After(5 * time.Second):
		t.Fatal("stream did not end at shutdown")
	}
}

// The gateway talks to the owner with package wire's client; SHOW OWNER
// TABLES is how it learns the tables.
func TestOwnerWireClient(t *testing.T) {
	o := startOwner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bc := dialOwner(ctx, t, o)
	if bc.Caps&wire.CapDeprecateEOF != 0 {
		t.Fatal("the owner must speak classic EOF")
	}
	var tables []string
	if err := bc.QueryRows("SHOW OWNER TABLES", func(row [][]byte) {
		tables = append(tables, fmt.Sprintf("%s.%s:%s", row[0], row[1], row[2]))
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"ownertest.listed_seq:sequence", "ownertest.msgs:message", "ownertest.seq:sequence", "ownertest.small_seq:sequence"}
	if !slices.Equal(tables, want) {
		t.Fatalf("SHOW OWNER TABLES: %v, want %v", tables, want)
	}
	if _, err := bc.SimpleCommand([]byte{wire.ComPing}); err != nil {
		t.Fatal(err)
	}
	if _, err := bc.SimpleCommand(append([]byte{wire.ComInitDB}, testDB...)); err != nil {
		t.Fatal(err)
	}
	var v []byte
	if err := bc.QueryRows("SELECT NEXT 2 VALUES FROM seq", func(row [][]byte) { v = append([]byte{}, row[0]...) }); err != nil || len(v) == 0 {
		t.Fatalf("NEXT VALUES over wire: %q, %v", v, err)
	}
	_, err := bc.SimpleCommand([]byte{wire.ComStatistics})
	var se *wire.SQLError
	if !errors.As(err, &se) || se.Code != 1047 {
		t.Fatalf("unknown command: %v", err)
	}
	if _, err := wire.Dial(ctx, o.Addr().String(), wire.DialOptions{User: backendUser, Password: "wrong"}); !errors.As(err, &se) || se.Code != 1045 {
		t.Fatalf("wrong password: %v", err)
	}
}

// TestOwnerThroughput reports NEXT VALUE rates directly against the owner
// (cache 1000), one connection and 16.
func TestOwnerThroughput(t *testing.T) {
	o := startOwner(t)
	db := clientDB(t, o, testDB)
	for _, conns := range []int{1, 16} {
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		end := time.Now().Add(time.Second)
		start := time.Now()
		for range conns {
			wg.Go(func() {
				n := 0
				for time.Now().Before(end) {
					var v int64
					if err := db.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&v); err != nil {
						t.Error(err)
						return
					}
					n++
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		t.Logf("NEXT VALUE, %2d connection(s): %.0f/s", conns, float64(total)/time.Since(start).Seconds())
	}
}

// The primary dies: statements fail with 2003 and a clear message; it
// comes back: the owner finds it, reserves a fresh block (memory is not
// trusted across the outage) and serves again.
func TestOwnerPrimaryDown(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{NoBinlog: true, Users: []mariadbtest.User{
		{Name: backendUser, Password: backendPass, Grants: backendGrant},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	root, err := srv.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, q := range []string{
		"CREATE DATABASE " + testDB,
		"CREATE TABLE " + testDB + ".seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO " + testDB + ".seq VALUES (0, 1, 1000)",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	o := startOwnerWith(t, strings.Replace(ownerYAMLFor(backendUser, srv.Addr()), "failover_buffer: 2s", "failover_buffer: 500ms", 1))
	db := clientDB(t, o, testDB)
	db.SetConnMaxIdleTime(0)
	first := nextValue(t, db, "SELECT NEXT VALUE FROM seq")

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// Kill the block in memory too: the next value needs the primary.
	if _, err := db.Exec("SELECT NEXT 999 VALUES FROM seq"); err != nil {
		t.Fatal(err) // still within the first block: served from memory
	}
	// Discovery (every 100 ms) may have marked it down already on a slow
	// machine: then the message is the one checked below.
	_, err = db.Exec("SELECT NEXT VALUE FROM seq")
	if me := wantSQLError(t, err, 1429, "HY000"); !strings.Contains(me.Message, "primary of cluster main at "+srv.Addr()) && !strings.Contains(me.Message, "no serving writable backend") {
		t.Fatalf("message %q", me.Message)
	} else {
		t.Logf("primary killed: %s", me.Message)
	}
	// Discovery marks it down: statements then fail after the failover
	// buffer, saying there is no primary.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = db.Exec("SELECT NEXT VALUE FROM seq")
		if me := wantSQLError(t, err, 1429, "HY000"); strings.Contains(me.Message, "no serving writable backend") {
			t.Logf("primary marked down: %s", me.Message)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still no 'no primary' error: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var v int64
	deadline = time.Now().Add(10 * time.Second)
	for {
		if err = db.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&v); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no value after the primary came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v != first+1000 {
		t.Fatalf("after the outage: %d, want %d (a fresh block from next_id)", v, first+1000)
	}
}
