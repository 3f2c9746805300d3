package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/wire"
	"github.com/go-sql-driver/mysql"
)

// processRows reads SHOW [FULL] PROCESSLIST: id -> user, info.
func processRows(t *testing.T, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string) map[int64][2]string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if strings.Join(cols, ",") != "Id,User,Host,db,Command,Time,State,Info,Progress" {
		t.Fatalf("%s: columns %v", q, cols)
	}
	out := map[int64][2]string{}
	for rows.Next() {
		var id int64
		var user, host, command string
		var db, state, info sql.NullString
		var secs int64
		var progress float64
		if err := rows.Scan(&id, &user, &host, &db, &command, &secs, &state, &info, &progress); err != nil {
			t.Fatal(err)
		}
		out[id] = [2]string{user, info.String}
	}
	return out
}

// oneConn opens one connection to dsn, closed when the test ends.
func oneConn(t *testing.T, dsn string) *sql.Conn {
	t.Helper()
	db := open(t, dsn)
	db.SetMaxOpenConns(1)
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTenantIsolation is the reproduction: alice (app) runs a
// slow statement; bob (nopass), on the same backend account, sees only
// his own sessions, gets 1095 for every KILL form, and alice's statement
// runs on. CONNECTION_ID() is the gateway's id, the same on every call.
func TestTenantIsolation(t *testing.T) {
	ctx := context.Background()
	alice := login(t)
	aliceID := int64(alice.Greeting.ConnectionID)
	alice.ResetSeq()
	if err := alice.WriteCommand(append([]byte{0x03}, "SELECT 'alice secret query', SLEEP(3)"...)); err != nil {
		t.Fatal(err)
	}
	bob := oneConn(t, shared.gwDSN("nopass", "", "", nil))
	var bobID int64
	for i := 0; i < 3; i++ {
		var id int64
		if err := bob.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if i > 0 && id != bobID {
			t.Fatalf("CONNECTION_ID() changed from %d to %d within one session", bobID, id)
		}
		bobID = id
	}
	time.Sleep(200 * time.Millisecond) // alice's statement is running
	for _, q := range []string{"SHOW PROCESSLIST", "SHOW FULL PROCESSLIST"} {
		rows := processRows(t, bob, q)
		if _, ok := rows[aliceID]; ok {
			t.Errorf("bob's %s shows alice's session: %v", q, rows)
		}
		for id, r := range rows {
			if r[0] != "nopass" || strings.Contains(r[1], "alice secret") {
				t.Errorf("bob's %s shows %d: %v", q, id, r)
			}
		}
		if _, ok := rows[bobID]; !ok {
			t.Errorf("bob's %s lacks bob's own session %d: %v", q, bobID, rows)
		}
	}
	for _, q := range []string{
		fmt.Sprintf("KILL %d", aliceID), fmt.Sprintf("KILL QUERY %d", aliceID), fmt.Sprintf("KILL CONNECTION %d", aliceID),
		fmt.Sprintf("KILL QUERY %d+0", aliceID), fmt.Sprintf("KILL (%d)", aliceID), "KILL USER " + appUser,
		fmt.Sprintf("SELECT 1; KILL QUERY %d", aliceID), fmt.Sprintf("PREPARE k FROM 'KILL QUERY %d'", aliceID),
	} {
		_, err := bob.ExecContext(ctx, q)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1095 {
			t.Errorf("bob: %s: %v, want error 1095", q, err)
		}
	}
	// The admin sees alice's statement.
	adm := open(t, shared.gwDSN(adminUser, adminPass, "", nil))
	rows := processRows(t, adm, "SHOW FULL PROCESSLIST")
	if r, ok := rows[aliceID]; !ok || r[0] != appUser || !strings.Contains(r[1], "alice secret query") {
		t.Errorf("the admin's SHOW FULL PROCESSLIST: alice's line %v (all: %v)", r, rows)
	}
	// alice's statement was not interrupted: SLEEP answers 0.
	p, err := alice.ReadPacket()
	if err != nil || p[0] != 2 { // two columns
		t.Fatalf("alice's answer: %x %v", p, err)
	}
	for {
		p, err := alice.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if p[0] == 0xfe || p[0] == 0xff {
			if p[0] == 0xff {
				t.Fatalf("alice's statement failed: %x", p)
			}
			break
		}
		if strings.HasPrefix(string(p), "\x12alice secret query") && !strings.HasSuffix(string(p), "\x010") {
			t.Fatalf("alice's SLEEP was interrupted: row %q", p)
		}
	}
}

// TestIdleTransactionTimeout: a client idle inside a transaction past
// idle_transaction_timeout is closed, its transaction rolled back, and
// its backend connection serves others (a pool of one here).
func TestIdleTransactionTimeout(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS ten_idle", "CREATE TABLE ten_idle (id INT PRIMARY KEY)")
	srv := startTestGateway(t, "ten-idle", opsYAML("idle_transaction_timeout: 1s", "", "size: 1, min_idle: 0, acquire_timeout: 10s"))
	addr := srv.Addr().String()
	a := open(t, dsnFor(addr, appUser, appPass))
	a.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := a.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExecConn(t, ctx, conn, "BEGIN", "INSERT INTO ten_idle VALUES (1)")
	time.Sleep(2500 * time.Millisecond)
	if _, err := conn.ExecContext(ctx, "INSERT INTO ten_idle VALUES (2)"); err == nil {
		t.Fatal("a session idle in a transaction past idle_transaction_timeout still runs statements")
	}
	b := open(t, dsnFor(addr, appUser, appPass))
	if _, err := b.Exec("SELECT 1"); err != nil {
		t.Fatalf("another client after the idle one was closed: %v", err)
	}
	var n int
	if err := direct(t).QueryRow("SELECT COUNT(*) FROM ten_idle").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after the idle transaction was closed: %d (%v), want 0: rolled back", n, err)
	}
}

// TestMaxPoolShare: a user with max_pool_share 0.5 of a pool of two holds
// at most one connection; its second session waits acquire_timeout and
// gets 1040, while another user is served from the rest of the pool.
func TestMaxPoolShare(t *testing.T) {
	srv := startTestGateway(t, "ten-share", opsYAML("", "  - {user: greedy, password: g, max_pool_share: 0.5}", "size: 2, min_idle: 0, acquire_timeout: 1s"))
	addr := srv.Addr().String()
	ctx := context.Background()
	g := open(t, dsnFor(addr, "greedy", "g"))
	holder, err := g.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	mustExecConn(t, ctx, holder, "BEGIN", "SELECT 1")
	_, err = g.ExecContext(ctx, "SELECT 2")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1040 || !strings.Contains(me.Message, "max_pool_share") {
		t.Fatalf("greedy's second session: %v, want error 1040 naming max_pool_share", err)
	}
	other := open(t, dsnFor(addr, appUser, appPass))
	if _, err := other.Exec("SELECT 3"); err != nil {
		t.Fatalf("another user next to greedy's share: %v", err)
	}
	mustExecConn(t, ctx, holder, "COMMIT")
	if _, err := g.ExecContext(ctx, "SELECT 4"); err != nil {
		t.Fatalf("greedy after its transaction ended: %v", err)
	}
}

// TestLocalInfileTimeout: a client that starts LOAD DATA LOCAL INFILE and
// sends nothing is cut after local_infile_timeout, and its backend
// connection serves others (a pool of one here).
func TestLocalInfileTimeout(t *testing.T) {
	mustExec(t, direct(t), "DROP TABLE IF EXISTS ten_ld", "CREATE TABLE ten_ld (id INT)")
	srv := startTestGateway(t, "ten-infile", opsYAML("local_infile_timeout: 1s", "", "size: 1, min_idle: 0, acquire_timeout: 10s"))
	addr := srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, wire.DialOptions{User: appUser, Password: appPass, Caps: wire.CapLocalFiles})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteCommand(append([]byte{wire.ComQuery}, "LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE "+testDB+".ten_ld"...)); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil || len(p) == 0 || p[0] != 0xfb {
		t.Fatalf("want the LOCAL INFILE request, got %x %v", p, err)
	}
	// Send nothing: the gateway cuts the client.
	_ = c.NetConn().SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.ReadAll(c.NetConn()); err != nil {
		t.Fatalf("the stalled LOCAL INFILE client was not cut: %v", err)
	}
	b := open(t, dsnFor(addr, appUser, appPass))
	if _, err := b.Exec("SELECT 1"); err != nil {
		t.Fatalf("another client after the stalled one: %v", err)
	}
}

// TestOwnerEnforcesUserGrants: two users with their own backend accounts,
// each granted one database. Through the owner (which runs with the
// cluster's account) neither reads, streams, inserts into or burns the
// sequences of the other's database; INSERT ... SELECT into a message
// table is refused; NEXT n VALUES is bounded.
func TestOwnerEnforcesUserGrants(t *testing.T) {
	root := rootDB(t)
	for _, db := range []string{"og_a", "og_b"} {
		mustExec(t, root,
			"DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db,
			"CREATE TABLE "+db+".seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
			"INSERT INTO "+db+".seq VALUES (0, 1, 10)",
			"CREATE TABLE "+db+".secrets (id BIGINT PRIMARY KEY, secret VARCHAR(64))",
			"INSERT INTO "+db+".secrets VALUES (1, 'the secret of "+db+"')",
			"CREATE TABLE "+db+`.msgs (
				id BIGINT PRIMARY KEY, priority BIGINT NOT NULL DEFAULT 0, epoch BIGINT NOT NULL DEFAULT 0,
				time_next BIGINT DEFAULT 0, time_acked BIGINT, body VARCHAR(64),
				KEY next_idx (time_next), KEY ack_idx (time_acked)
			) COMMENT 'vitess_message,vt_ack_wait=2,vt_purge_after=3600,vt_batch_size=20,vt_cache_size=5000,vt_poller_interval=0.2'`)
	}
	for _, u := range []struct{ name, db string }{{"og_alice", "og_a"}, {"og_bob", "og_b"}} {
		for _, host := range []string{"%", "127.0.0.1", "localhost"} {
			mustExec(t, root,
				fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", u.name, host),
				fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s-pw'", u.name, host, u.name),
				fmt.Sprintf("GRANT ALL PRIVILEGES ON %s.* TO '%s'@'%s'", u.db, u.name, host))
		}
	}
	st := startOwnerStackUsers(t, 1, "  - {user: alice, password: a, backend_user: og_alice, backend_password: og_alice-pw}\n"+
		"  - {user: bob, password: b, backend_user: og_bob, backend_password: og_bob-pw}\n")
	alice := open(t, fmt.Sprintf("alice:a@tcp(%s)/og_a?interpolateParams=true", st.gateways[0]))
	bob := open(t, fmt.Sprintf("bob:b@tcp(%s)/og_b?interpolateParams=true", st.gateways[0]))
	var v int64
	if err := alice.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&v); err != nil {
		t.Fatalf("alice's own sequence: %v", err)
	}
	if err := bob.QueryRow("SELECT NEXT VALUE FROM og_b.seq").Scan(&v); err != nil {
		t.Fatalf("bob's own sequence: %v", err)
	}
	denied := func(who string, err error) {
		t.Helper()
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1142 {
			t.Errorf("%s: %v, want error 1142 (the account lacks the privilege)", who, err)
		}
	}
	denied("alice burns bob's sequence", alice.QueryRow("SELECT NEXT 1000 VALUES FROM og_b.seq").Scan(&v))
	denied("bob burns alice's sequence", bob.QueryRow("SELECT NEXT VALUE FROM og_a.seq").Scan(&v))
	_, err := alice.Exec("INSERT INTO og_b.msgs (id, body) VALUES (1, 'from alice')")
	denied("alice inserts into bob's messages", err)
	rows, err := alice.Query("STREAM * FROM og_b.msgs")
	if err == nil {
		rows.Close()
	}
	denied("alice streams bob's messages", err)
	_, err = alice.Exec("INSERT INTO og_a.msgs (id, body) SELECT id, secret FROM og_b.secrets")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1235 {
		t.Errorf("alice: INSERT ... SELECT of bob's secrets into her messages: %v, want error 1235", err)
	}
	var n int
	if err := root.QueryRow("SELECT COUNT(*) FROM og_a.msgs WHERE body LIKE 'the secret%'").Scan(&n); err != nil || n != 0 {
		t.Errorf("bob's secrets in alice's messages: %d (%v)", n, err)
	}
	err = alice.QueryRow("SELECT NEXT 9223372036854000000 VALUES FROM og_a.seq").Scan(&v)
	if !errors.As(err, &me) || me.Number != 1210 {
		t.Errorf("NEXT 9223372036854000000 VALUES: %v, want error 1210 (bounded by cache × 1000)", err)
	}
	var next int64
	if err := root.QueryRow("SELECT next_id FROM og_b.seq").Scan(&next); err != nil || next > 100 {
		t.Errorf("bob's sequence next_id %d (%v): burnt", next, err)
	}
	// Alice may write her own messages.
	if _, err := alice.Exec("INSERT INTO og_a.msgs (id, body) VALUES (7, 'hello')"); err != nil {
		t.Errorf("alice inserts into her own messages: %v", err)
	}
	grantsInTransaction(t, alice, denied, "")
	preparedOwnerGrants(t, st, denied)
}

// grantsInTransaction: inside a transaction (the session holds its
// connection) the owner grant checks run on that connection. With
// prepared set, the statements go as prepared ones (db must use the
// binary protocol).
func grantsInTransaction(t *testing.T, db *sql.DB, denied func(string, error), prepared string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	next := func(seq string) error {
		if prepared != "" {
			return conn.QueryRowContext(ctx, "SELECT NEXT ? VALUES FROM "+seq, 5).Scan(new(int64))
		}
		return conn.QueryRowContext(ctx, "SELECT NEXT 5 VALUES FROM "+seq).Scan(new(int64))
	}
	mustExecConn(t, ctx, conn, "BEGIN", "INSERT INTO og_a.secrets VALUES (2, 'in a transaction')")
	if err := next("og_a.seq"); err != nil {
		t.Errorf("alice's own sequence inside a transaction%s: %v", prepared, err)
	}
	denied("alice burns bob's sequence inside a transaction"+prepared, next("og_b.seq"))
	mustExecConn(t, ctx, conn, "ROLLBACK")
}

// preparedOwnerGrants: the checks of TestOwnerEnforcesUserGrants hold for
// prepared statements (the binary protocol) too, with the same errors.
func preparedOwnerGrants(t *testing.T, st *ownerStack, denied func(string, error)) {
	t.Helper()
	alice := open(t, fmt.Sprintf("alice:a@tcp(%s)/og_a", st.gateways[0]))
	_, err := alice.Prepare("SELECT NEXT VALUE FROM og_b.seq")
	denied("alice prepares NEXT VALUE of bob's sequence", err)
	denied("alice burns bob's sequence, prepared", alice.QueryRow("SELECT NEXT ? VALUES FROM og_b.seq", 1000).Scan(new(int64)))
	_, err = alice.Prepare("STREAM * FROM og_b.msgs")
	denied("alice prepares a STREAM of bob's messages", err)
	_, err = alice.Exec("INSERT INTO og_b.msgs (id, body) VALUES (?, ?)", 2, "from alice")
	denied("alice inserts into bob's messages, prepared", err)
	_, err = alice.Exec("UPDATE og_b.msgs SET time_acked = ? WHERE id IN (?)", 1, 1)
	denied("alice acks bob's messages, prepared", err)
	var v int64
	if err := alice.QueryRow("SELECT NEXT ? VALUES FROM seq", 2).Scan(&v); err != nil {
		t.Errorf("alice's own sequence, prepared: %v", err)
	}
	if _, err := alice.Exec("INSERT INTO og_a.msgs (id, body) VALUES (?, ?)", 8, "prepared hello"); err != nil {
		t.Errorf("alice inserts into her own messages, prepared: %v", err)
	}
	// INSERT ... SELECT into a message table: refused as the text form is.
	_, err = alice.Exec("INSERT INTO og_a.msgs (id, body) SELECT id + ?, secret FROM og_a.secrets", 100)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1235 {
		t.Errorf("alice: prepared INSERT ... SELECT into her messages: %v, want error 1235", err)
	}
	grantsInTransaction(t, alice, denied, ", prepared")
}

// TestGatewayIDsInStatements: CONNECTION_ID() inside larger statements and
// reads of information_schema.PROCESSLIST speak of the gateway's sessions:
// bob sees his own, never alice's, and his ids match KILL's; the admin sees
// alice's. A prepared statement's CONNECTION_ID() is the session's too.
func TestGatewayIDsInStatements(t *testing.T) {
	ctx := context.Background()
	alice := login(t)
	aliceID := int64(alice.Greeting.ConnectionID)
	alice.ResetSeq()
	if err := alice.WriteCommand(append([]byte{0x03}, "SELECT 'alice is_marker', SLEEP(2)"...)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for {
			p, err := alice.ReadPacket()
			if err != nil || p[0] == 0xff || p[0] == 0xfe && len(p) < 9 {
				return
			}
		}
	}()
	bob := oneConn(t, shared.gwDSN("nopass", "", "", nil))
	var bobID int64
	if err := bob.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&bobID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // alice's statement is running

	var c, one int64
	rows, err := bob.QueryContext(ctx, "SELECT CONNECTION_ID(), 1")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	for rows.Next() {
		if err := rows.Scan(&c, &one); err != nil {
			t.Fatal(err)
		}
	}
	rows.Close()
	if c != bobID || strings.Join(cols, ",") != "CONNECTION_ID(),1" {
		t.Errorf("SELECT CONNECTION_ID(), 1: %d under %v, want %d under CONNECTION_ID(),1", c, cols, bobID)
	}
	if _, err := bob.ExecContext(ctx, "SET @c = CONNECTION_ID()"); err != nil {
		t.Fatal(err)
	}
	if err := bob.QueryRowContext(ctx, "SELECT @c").Scan(&c); err != nil || c != bobID {
		t.Errorf("SET @c = CONNECTION_ID(): @c = %d (%v), want %d", c, err, bobID)
	}
	ps, err := bob.PrepareContext(ctx, "SELECT CONNECTION_ID() AS c, ?")
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if err := ps.QueryRowContext(ctx, 1).Scan(&c, &one); err != nil || c != bobID {
		t.Errorf("prepared SELECT CONNECTION_ID() AS c, ?: %d (%v), want %d", c, err, bobID)
	}
	var n int64
	if err := bob.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID() AND USER = 'nopass'").Scan(&n); err != nil || n != 1 {
		t.Errorf("bob's own line in information_schema.PROCESSLIST: %d (%v), want 1", n, err)
	}
	ids := func(db interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	}) map[int64]string {
		rows, err := db.QueryContext(ctx, "SELECT p.ID, p.USER, COALESCE(p.INFO, '') FROM `information_schema`.`PROCESSLIST` p ORDER BY p.ID")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[int64]string{}
		for rows.Next() {
			var id int64
			var user, info string
			if err := rows.Scan(&id, &user, &info); err != nil {
				t.Fatal(err)
			}
			out[id] = user + ": " + info
		}
		return out
	}
	seen := ids(bob)
	if _, ok := seen[aliceID]; ok || !strings.HasPrefix(seen[bobID], "nopass: SELECT p.ID") {
		t.Errorf("bob's information_schema.PROCESSLIST: %v (alice %d, bob %d)", seen, aliceID, bobID)
	}
	for id, line := range seen {
		if !strings.HasPrefix(line, "nopass:") {
			t.Errorf("bob sees session %d: %s", id, line)
		}
	}
	adm := open(t, shared.gwDSN(adminUser, adminPass, "", nil))
	if line := ids(adm)[aliceID]; !strings.Contains(line, "alice is_marker") {
		t.Errorf("the admin's information_schema.PROCESSLIST: alice's line %q", line)
	}
}
