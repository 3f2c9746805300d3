package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/wire"
)

// Reads are made to overlap without timing: a direct connection holds
// LOCK TABLES consol WRITE, so every read of the table waits in MariaDB
// (or, consolidated, at the gateway behind the one that waits in
// MariaDB) until the test unlocks it, having counted both.

// consolYAML is the configuration of a consolidation test's gateway:
// hotRowGateway's, with hot-row protection off.
func consolYAML(consolidation string) string {
	return hotRowYAML("{max_concurrency: 0}", 36) + "    consolidation: " + consolidation + "\n"
}

// consolGateway starts a gateway with the consolidation settings given (a
// YAML flow map).
func consolGateway(t *testing.T, consolidation string) *gateway.Server {
	t.Helper()
	return startTestGateway(t, "consolidation", consolYAML(consolidation))
}

// consolReload reloads srv with the consolidation settings given.
func consolReload(t *testing.T, srv *gateway.Server, consolidation string) {
	t.Helper()
	cfg, err := config.Parse([]byte(consolYAML(consolidation)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// consolTable (re)creates e2e.consol with rows 1..n, each pad bytes
// wide.
func consolTable(t *testing.T, n, pad int) {
	t.Helper()
	db := direct(t)
	mustExec(t, db, "DROP TABLE IF EXISTS consol",
		"CREATE TABLE consol (id INT PRIMARY KEY, v VARCHAR(40), pad TEXT, d DATETIME(3), x DECIMAL(10,2)) ENGINE=InnoDB")
	for i := 1; i <= n; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO consol VALUES (%d, 'v%d', REPEAT('p', %d), '2024-01-02 03:04:05.%03d', %d.25)", i, i, pad, i, i))
	}
}

// consolTotals returns the cluster's consolidation row.
func consolTotals(srv *gateway.Server) protect.Row {
	for _, r := range srv.Protections() {
		if r.Protection == "consolidation" && r.Scope == "*" {
			return r
		}
	}
	return protect.Row{}
}

// lockTable holds LOCK TABLES consol WRITE on a direct connection and
// returns the function that unlocks it (also run when the test ends).
func lockTable(t *testing.T) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	c, err := direct(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(ctx, "LOCK TABLES consol WRITE"); err != nil {
		t.Fatal(err)
	}
	done := false
	unlock = func() {
		if !done {
			done = true
			_, _ = c.ExecContext(ctx, "UNLOCK TABLES")
			c.Close()
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// inMariaDB counts the statements running in MariaDB whose text is q.
func inMariaDB(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := direct(t).QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitUntil polls cond for at most 30 s (a bound for a stuck test, never
// a measure) and fails with what describes the state.
func waitUntil(t *testing.T, cond func() bool, state func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", state())
		}
	}
}

// consolClient is a raw protocol client of a consolidation test.
type consolClient struct {
	bc   *wire.BackendConn
	caps uint32
	q    string
}

// dialRaw logs in to addr with a raw protocol client (extra caps, the
// setup statements run first) and closes it when the test ends.
func dialRaw(t *testing.T, addr, user, pass string, caps uint32, setup ...string) *wire.BackendConn {
	t.Helper()
	return dialRawWith(t, addr, wire.DialOptions{User: user, Password: pass, Caps: caps}, setup...)
}

// dialRawWith is dialRaw with every dial option.
func dialRawWith(t *testing.T, addr string, o wire.DialOptions, setup ...string) *wire.BackendConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := wire.Dial(ctx, addr, o)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { bc.Close() })
	_ = bc.NetConn().SetDeadline(time.Now().Add(60 * time.Second))
	for _, s := range setup {
		if _, err := bc.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return bc
}

// send sends the client's query without reading the answer.
func (c *consolClient) send(t *testing.T) {
	t.Helper()
	if err := c.bc.WriteCommand(append([]byte{wire.ComQuery}, c.q...)); err != nil {
		t.Fatal(err)
	}
}

// directRaw is the answer of MariaDB itself to q, then to each of after,
// for a client with caps: raw packets, headers included.
func directRaw(t *testing.T, caps uint32, q string, after ...string) [][]byte {
	t.Helper()
	bc := dialRaw(t, shared.db.Addr(), backendUser, backendPass, caps)
	var out [][]byte
	for _, s := range append([]string{q}, after...) {
		if err := bc.WriteCommand(append([]byte{wire.ComQuery}, s...)); err != nil {
			t.Fatal(err)
		}
		out = append(out, rawResult(t, bc.Conn, bc.Caps&wire.CapDeprecateEOF != 0))
	}
	return out
}

// answeredAsDirect reads each classic client's answer to q and compares
// it with MariaDB's, byte for byte (but the no-index status bits).
func answeredAsDirect(t *testing.T, clients []*consolClient, q string) {
	t.Helper()
	want := directRaw(t, 0, q)[0]
	for i, c := range clients {
		if got := rawResult(t, c.bc.Conn, false); !bytes.Equal(maskNoIndex(got), maskNoIndex(want)) {
			t.Fatalf("client %d: answer differs from MariaDB's\ngateway %s\ndirect  %s", i, clip(got), clip(want))
		}
	}
}

// Identical reads in flight together run once: with the table locked, six
// clients (three classic, three CLIENT_DEPRECATE_EOF) send one SELECT;
// with consolidation on, MariaDB runs it once per packet layout and the
// gateway holds the four others, and every client then gets MariaDB's
// answer byte for byte, and FOUND_ROWS() as MariaDB would tell it. With
// consolidation off (the check that the test can fail) MariaDB runs six.
// The gateway starts with it off and a reload turns it on.
func TestConsolidationIdenticalReads(t *testing.T) {
	consolTable(t, 10, 30)
	srv := consolGateway(t, "{enabled: false}")
	const q = "SELECT /* consol-identical */ id, v, pad, d, x FROM e2e.consol WHERE id <= 10 ORDER BY id"
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("on=", on), func(t *testing.T) {
			if on {
				consolReload(t, srv, "{enabled: true}")
			}
			before := consolTotals(srv)
			unlock := lockTable(t)
			var clients []*consolClient
			for i := range 6 {
				caps := uint32(0)
				if i%2 == 1 {
					caps = wire.CapDeprecateEOF
				}
				c := &consolClient{bc: dialRaw(t, srv.Addr().String(), appUser, appPass, caps), caps: caps, q: q}
				c.send(t)
				clients = append(clients, c)
			}
			state := func() string {
				return fmt.Sprintf("%d in MariaDB, %d waiting at the gateway", inMariaDB(t, q), consolTotals(srv).Active)
			}
			waitUntil(t, func() bool { return inMariaDB(t, q)+int(consolTotals(srv).Active) == 6 }, state)
			running, waiting := inMariaDB(t, q), consolTotals(srv).Active
			t.Logf("%d statements in MariaDB, %d waiting at the gateway", running, waiting)
			wantRunning, wantWaiting := 6, int64(0)
			if on {
				wantRunning, wantWaiting = 2, 4
			}
			if running != wantRunning || waiting != wantWaiting {
				t.Errorf("%d statements in MariaDB and %d waiting at the gateway, want %d and %d", running, waiting, wantRunning, wantWaiting)
			}
			unlock()
			want := map[uint32][][]byte{}
			for _, caps := range []uint32{0, wire.CapDeprecateEOF} {
				want[caps] = directRaw(t, caps, q, "SELECT FOUND_ROWS()")
			}
			for i, c := range clients {
				got := rawResult(t, c.bc.Conn, c.caps != 0)
				if !bytes.Equal(maskNoIndex(got), maskNoIndex(want[c.caps][0])) {
					t.Fatalf("client %d (caps %x): answer differs from MariaDB's\ngateway %s\ndirect  %s", i, c.caps, clip(got), clip(want[c.caps][0]))
				}
				if err := c.bc.WriteCommand(append([]byte{wire.ComQuery}, "SELECT FOUND_ROWS()"...)); err != nil {
					t.Fatal(err)
				}
				if got := rawResult(t, c.bc.Conn, c.caps != 0); !bytes.Equal(got, want[c.caps][1]) {
					t.Fatalf("client %d: FOUND_ROWS() after the read: %q, want %q", i, got, want[c.caps][1])
				}
			}
			after := consolTotals(srv)
			followed := after.Total - before.Total
			if on && (followed != 4 || after.Mode != "on") || !on && (followed != 0 || after.Mode != "off") {
				t.Errorf("consolidation row %+v (before %+v)", after, before)
			}
		})
	}
	// The counters reach /metrics, and SHOW GATEWAY PROTECTIONS lists them.
	rec := httptest.NewRecorder()
	srv.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`directgate_consolidation_followers_total{cluster="main"} 4`,
		`directgate_consolidation_leaders_total{cluster="main"} 2`,
		`directgate_consolidation_waiting{cluster="main"} 0`,
		`directgate_consolidation_mode{cluster="main",mode="on"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	adm := open(t, dsnFor(srv.Addr().String(), adminUser, adminPass))
	rows, err := adm.Query("SHOW GATEWAY PROTECTIONS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var prot, cluster, scope, mode, rate, refusedRate, detail string
		var active, total, refused, refusedWait, dry, dryRefused int64
		if err := rows.Scan(&prot, &cluster, &scope, &mode, &active, &total, &refused, &refusedWait, &dry, &dryRefused, &rate, &refusedRate, &detail); err != nil {
			t.Fatal(err)
		}
		if prot == "consolidation" {
			found = true
			if cluster != "main" || scope != "*" || mode != "on" || total != 4 || !strings.Contains(detail, "2 leaders with followers") {
				t.Errorf("SHOW GATEWAY PROTECTIONS: %s %s %s %s total=%d detail=%q", prot, cluster, scope, mode, total, detail)
			}
		}
	}
	if !found {
		t.Error("SHOW GATEWAY PROTECTIONS has no consolidation row")
	}
}

// Reads that differ in what their result depends on are not
// consolidated: another default database, another session variable, a
// transaction, a locking read, NOW(), another gateway user (on the same
// backend account). Two plain clients of the same read
// are, in the same run (so the test sees consolidation where it should).
func TestConsolidationOnlyIdentical(t *testing.T) {
	consolTable(t, 3, 10)
	srv := consolGateway(t, "{enabled: true}")
	addr := srv.Addr().String()
	const (
		plain  = "SELECT /* consol-plain */ id, v FROM e2e.consol ORDER BY id"
		byDB   = "SELECT /* consol-db */ id, v FROM e2e.consol ORDER BY id"
		byVar  = "SELECT /* consol-var */ id, d FROM e2e.consol ORDER BY id"
		byUser = "SELECT /* consol-user */ id, v FROM e2e.consol ORDER BY id"
		inTxn  = "SELECT /* consol-txn */ id, v FROM e2e.consol ORDER BY id"
		locked = "SELECT /* consol-lock */ id, v FROM e2e.consol WHERE id = 1 FOR UPDATE"
		clock  = "SELECT /* consol-now */ id, NOW() > d FROM e2e.consol ORDER BY id"
	)
	cases := []struct {
		q      string
		setups [2][]string
		admin  bool // the second client logs in as the admin user
		want   int  // statements in MariaDB
	}{
		{plain, [2][]string{nil, nil}, false, 1},
		{byDB, [2][]string{{"USE e2e"}, {"USE mysql"}}, false, 2},
		{byVar, [2][]string{{"SET time_zone = '+00:00'"}, {"SET time_zone = '+05:00'"}}, false, 2},
		{byUser, [2][]string{nil, nil}, true, 2},
		{inTxn, [2][]string{{"BEGIN"}, {"BEGIN"}}, false, 2},
		{locked, [2][]string{nil, nil}, false, 2},
		{clock, [2][]string{nil, nil}, false, 2},
	}
	var clients []*consolClient
	for _, tc := range cases {
		for i, setup := range tc.setups {
			user, pass := appUser, appPass
			if tc.admin && i == 1 {
				user, pass = adminUser, adminPass
			}
			clients = append(clients, &consolClient{bc: dialRaw(t, addr, user, pass, 0, setup...), q: tc.q})
		}
	}
	unlock := lockTable(t)
	for _, c := range clients {
		c.send(t)
	}
	total := func() int {
		n := 0
		for _, tc := range cases {
			n += inMariaDB(t, tc.q)
		}
		return n
	}
	waitUntil(t, func() bool { return total()+int(consolTotals(srv).Active) == len(clients) },
		func() string { return fmt.Sprintf("%d in MariaDB, %d waiting", total(), consolTotals(srv).Active) })
	for _, tc := range cases {
		if n := inMariaDB(t, tc.q); n != tc.want {
			t.Errorf("%s: %d statements in MariaDB, want %d", tc.q, n, tc.want)
		}
	}
	unlock()
	for i, c := range clients {
		if got := rawResult(t, c.bc.Conn, false); wire.IsERR(got[4:]) {
			t.Errorf("client %d (%s): error %q", i, c.q, got)
		}
	}
	if tot := consolTotals(srv); tot.Total != 1 {
		t.Errorf("consolidation row %+v, want 1 follower", tot)
	}
}

// A result above max_result_bytes is not kept: the followers wait for the
// leader, then run their own read, and every client gets MariaDB's
// answer.
func TestConsolidationLargeResult(t *testing.T) {
	consolTable(t, 20, 200) // about 4 KiB
	srv := consolGateway(t, "{enabled: true, max_result_bytes: 1KiB}")
	const q = "SELECT /* consol-large */ id, pad FROM e2e.consol ORDER BY id"
	unlock := lockTable(t)
	var clients []*consolClient
	for range 4 {
		c := &consolClient{bc: dialRaw(t, srv.Addr().String(), appUser, appPass, 0), q: q}
		c.send(t)
		clients = append(clients, c)
	}
	waitUntil(t, func() bool { return inMariaDB(t, q) == 1 && consolTotals(srv).Active == 3 },
		func() string {
			return fmt.Sprintf("%d in MariaDB, %d waiting", inMariaDB(t, q), consolTotals(srv).Active)
		})
	unlock()
	answeredAsDirect(t, clients, q)
	tot := consolTotals(srv)
	if tot.Total != 0 || !strings.Contains(tot.Detail, "3 too large") {
		t.Errorf("consolidation row %+v", tot)
	}
}

// A follower whose client leaves stops waiting; KILL QUERY of a waiting
// follower ends its wait with error 1317; the leader and the other
// follower are answered as usual.
func TestConsolidationKillFollower(t *testing.T) {
	consolTable(t, 3, 10)
	srv := consolGateway(t, "{enabled: true}")
	const q = "SELECT /* consol-kill */ id, v FROM e2e.consol ORDER BY id"
	unlock := lockTable(t)
	var clients []*consolClient
	for i := range 4 {
		c := &consolClient{bc: dialRaw(t, srv.Addr().String(), appUser, appPass, 0), q: q}
		c.send(t)
		clients = append(clients, c)
		if i == 0 {
			// The first is the leader: its statement waits in MariaDB.
			waitUntil(t, func() bool { return inMariaDB(t, q) == 1 },
				func() string { return fmt.Sprintf("%d in MariaDB", inMariaDB(t, q)) })
		}
	}
	waitUntil(t, func() bool { return inMariaDB(t, q) == 1 && consolTotals(srv).Active == 3 },
		func() string {
			return fmt.Sprintf("%d in MariaDB, %d waiting", inMariaDB(t, q), consolTotals(srv).Active)
		})
	// The last follower's client goes away: its wait ends.
	clients[3].bc.Close()
	waitUntil(t, func() bool { return consolTotals(srv).Active == 2 },
		func() string {
			return fmt.Sprintf("%d waiting after a follower's client left", consolTotals(srv).Active)
		})
	clients = clients[:3]
	victim := 2
	adm := open(t, dsnFor(srv.Addr().String(), adminUser, adminPass))
	if _, err := adm.Exec(fmt.Sprintf("KILL QUERY %d", clients[victim].bc.Greeting.ConnectionID)); err != nil {
		t.Fatal(err)
	}
	got := rawResult(t, clients[victim].bc.Conn, false)
	if !wire.IsERR(got[4:]) || !bytes.Contains(got, []byte("interrupted")) {
		t.Fatalf("killed follower got %q", got)
	}
	waitUntil(t, func() bool { return consolTotals(srv).Active == 1 },
		func() string { return fmt.Sprintf("%d waiting", consolTotals(srv).Active) })
	unlock()
	answeredAsDirect(t, slices.Delete(slices.Clone(clients), victim, victim+1), q)
	// The killed session goes on.
	if _, err := clients[victim].bc.Exec("DO 1"); err != nil {
		t.Fatalf("killed follower's next statement: %v", err)
	}
}

// A read never gets the result of a read that started before a write
// that finished through the gateway before it arrived: after a leader
// started, a client's write (to another table) makes the next identical
// read run on its own. The same read without the write in between joins
// the leader (the check that the test sees consolidation at all).
func TestConsolidationNotAcrossWrites(t *testing.T) {
	consolTable(t, 3, 10)
	mustExec(t, direct(t), "DROP TABLE IF EXISTS consol_other", "CREATE TABLE consol_other (id INT PRIMARY KEY, n INT)", "INSERT INTO consol_other VALUES (1, 0)")
	srv := consolGateway(t, "{enabled: true}")
	addr := srv.Addr().String()
	const q = "SELECT /* consol-writes */ id, v FROM e2e.consol ORDER BY id"
	var clients []*consolClient
	for range 3 {
		clients = append(clients, &consolClient{bc: dialRaw(t, addr, appUser, appPass, 0), q: q})
	}
	writer := dialRaw(t, addr, appUser, appPass, 0)
	unlock := lockTable(t)
	clients[0].send(t)
	waitUntil(t, func() bool { return inMariaDB(t, q) == 1 }, func() string { return fmt.Sprintf("%d in MariaDB", inMariaDB(t, q)) })
	clients[1].send(t) // joins the leader
	waitUntil(t, func() bool { return consolTotals(srv).Active == 1 }, func() string { return fmt.Sprintf("%d waiting", consolTotals(srv).Active) })
	if _, err := writer.Exec("UPDATE e2e.consol_other SET n = n + 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	clients[2].send(t) // must not join: the write ended after the leader started
	waitUntil(t, func() bool { return inMariaDB(t, q)+int(consolTotals(srv).Active) == 3 },
		func() string {
			return fmt.Sprintf("%d in MariaDB, %d waiting", inMariaDB(t, q), consolTotals(srv).Active)
		})
	if n, w := inMariaDB(t, q), consolTotals(srv).Active; n != 2 || w != 1 {
		t.Errorf("%d statements in MariaDB and %d waiting, want 2 and 1", n, w)
	}
	unlock()
	answeredAsDirect(t, clients, q)
}

// Over TLS the copy is taken in the clear and sent again through each
// follower's own TLS (or none): two TLS clients and a plain one share one
// read, and each gets MariaDB's answer.
func TestConsolidationTLS(t *testing.T) {
	consolTable(t, 5, 20)
	pki := newPKI(t)
	cert, key := pki.issue(t, "gateway", 30, true, false)
	srv := startTestGateway(t, "consolidation", consolYAML("{enabled: true}")+fmt.Sprintf("tls: {cert: %s, key: %s}\n", cert, key))
	const q = "SELECT /* consol-tls */ id, v, pad FROM e2e.consol ORDER BY id"
	addr := srv.Addr().String()
	tlsConf := &tls.Config{RootCAs: pki.pool, ServerName: "127.0.0.1"}
	clients := []*consolClient{
		{bc: dialRawWith(t, addr, wire.DialOptions{User: appUser, Password: appPass, TLS: tlsConf}), q: q},
		{bc: dialRawWith(t, addr, wire.DialOptions{User: appUser, Password: appPass, TLS: tlsConf}), q: q},
		{bc: dialRaw(t, addr, appUser, appPass, 0), q: q},
	}
	if clients[0].bc.TLS() == nil || clients[1].bc.TLS() == nil || clients[2].bc.TLS() != nil {
		t.Fatal("the clients are not over TLS, TLS and plain")
	}
	unlock := lockTable(t)
	for _, c := range clients {
		c.send(t)
	}
	waitUntil(t, func() bool { return inMariaDB(t, q)+int(consolTotals(srv).Active) == 3 },
		func() string {
			return fmt.Sprintf("%d in MariaDB, %d waiting", inMariaDB(t, q), consolTotals(srv).Active)
		})
	if n, w := inMariaDB(t, q), consolTotals(srv).Active; n != 1 || w != 2 {
		t.Errorf("%d statements in MariaDB and %d waiting, want 1 and 2", n, w)
	}
	unlock()
	answeredAsDirect(t, clients, q)
}
