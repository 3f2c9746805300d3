package e2e

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/wire"
)

// pipeGateway starts a gateway with pipelining: {connections: n}, a
// pool of 8 and more lines of the cluster's.
func pipeGateway(t *testing.T, n int, more ...string) *gateway.Server {
	t.Helper()
	return pipeGatewayConf(t, fmt.Sprintf("{connections: %d}", n), more...)
}

// pipeGatewayConf is pipeGateway with the whole pipelining setting.
func pipeGatewayConf(t *testing.T, pipelining string, more ...string) *gateway.Server {
	t.Helper()
	return pipeGatewayAs(t, backendUser, backendPass, pipelining, more...)
}

// pipeGatewayAs is pipeGatewayConf with the backend account user.
func pipeGatewayAs(t *testing.T, user, pass, pipelining string, more ...string) *gateway.Server {
	t.Helper()
	yaml := clusterYAML(0, user, pass, "{size: 8, min_idle: 2, acquire_timeout: 30s}",
		append([]string{"pipelining: " + pipelining}, more...)...)
	return startTestGateway(t, "pipelining", strings.Replace(yaml, `http_listen: "off"`, "http_listen: 127.0.0.1:0", 1))
}

// pipeRead sends q on the classic-protocol connection bc and returns its
// raw answer.
func pipeRead(t *testing.T, bc *wire.BackendConn, q string) []byte {
	t.Helper()
	if err := bc.WriteCommand(append([]byte{wire.ComQuery}, q...)); err != nil {
		t.Fatal(err)
	}
	return rawResult(t, bc.Conn, false)
}

// pipeMetric reads one of the gateway's pipelining metrics (summed).
func pipeMetric(t *testing.T, h http.Handler, family string) float64 {
	t.Helper()
	return scrapeCounter(t, h, family, nil)
}

// TestPipeliningAnswersEachClient: many clients' reads share two
// connections, and every client gets the answer of its own read, with
// the reads behind others carrying their SHOW WARNINGS prelude (listed)
// or not (counted); with consolidation on too, its leaders' reads are the
// ones pipelined.
func TestPipeliningAnswersEachClient(t *testing.T) {
	consolTable(t, 200, 10)
	for _, warnings := range []string{"listed", "counted"} {
		for _, consolidation := range []bool{false, true} {
			t.Run(fmt.Sprintf("warnings=%s,consolidation=%v", warnings, consolidation), func(t *testing.T) {
				pipeAnswersEachClient(t, pipeGatewayConf(t, "{connections: 2, warnings: "+warnings+"}",
					fmt.Sprintf("consolidation: {enabled: %v}", consolidation)))
			})
		}
	}
}

// pipeAnswersEachClient runs TestPipeliningAnswersEachClient's load
// through srv.
func pipeAnswersEachClient(t *testing.T, srv *gateway.Server) {
	const clients, reads = 12, 150
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			db, err := sql.Open("mysql", hotRowDSN(srv, false))
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			for i := range reads {
				id := 1 + (c*reads+i)%200
				var v string
				if err := db.QueryRow("SELECT v FROM e2e.consol WHERE id = ?", id).Scan(&v); err != nil {
					errs <- err
					return
				}
				if v != fmt.Sprint("v", id) {
					errs <- fmt.Errorf("client %d asked for row %d and got %q", c, id, v)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h := srv.HTTPHandler()
	piped := pipeMetric(t, h, "directgate_pipelined_reads_total")
	t.Logf("%v of %d reads pipelined", piped, clients*reads)
	if piped < clients*reads/2 {
		t.Errorf("%v of %d reads pipelined", piped, clients*reads)
	}
	if n := pipeMetric(t, h, "directgate_pipelined_reads_in_flight"); n != 0 {
		t.Errorf("%v reads in flight after every client was answered", n)
	}
}

// TestPipeliningClientGoneMidAnswer: a client that leaves in the middle
// of its answer leaves the rest of it on the shared connection; the read
// queued behind it must not take that rest for its own answer. It runs
// the usual way instead, and gets its own.
func TestPipeliningClientGoneMidAnswer(t *testing.T) {
	consolTable(t, 400, 8000) // an answer of 3 MB: more than the sockets hold
	srv := pipeGateway(t, 1)
	h := srv.HTTPHandler()
	// One read first, so that the pipe exists.
	small := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	read := func(q string) []byte { t.Helper(); return pipeRead(t, small, q) }
	read("SELECT v FROM e2e.consol WHERE id = 2")
	unlock := lockTable(t)
	const big = "SELECT /* pipe-big */ id, pad FROM e2e.consol"
	leaver := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	if err := leaver.WriteCommand(append([]byte{wire.ComQuery}, big...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return inMariaDB(t, big) == 1 }, func() string { return "the big read is not running in MariaDB" })
	const mine = "SELECT v FROM e2e.consol WHERE id = 1"
	if err := small.WriteCommand(append([]byte{wire.ComQuery}, mine...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return pipeMetric(t, h, "directgate_pipelined_reads_in_flight") == 2 },
		func() string { return "the small read did not join the pipe behind the big one" })
	leaver.Close() // gone before its answer
	unlock()
	got := rawResult(t, small.Conn, false)
	want := directRaw(t, 0, mine)[0]
	if !strings.Contains(string(got), "v1") || len(got) != len(want) {
		t.Fatalf("the read behind the client that left got %q, MariaDB answers %q", clip(got), clip(want))
	}
	// Because the pipe was broken, not because the read found its
	// answer out of sequence (the check that would catch a rest read as
	// an answer only most of the time).
	for reason, want := range map[string]float64{"pipe_broken": 1, "connection_lost": 0} {
		if n := scrapeCounter(t, h, "directgate_pipelined_read_fallbacks_total", map[string]string{"reason": reason}); n != want {
			t.Errorf("%v fallbacks for %s, want %v", n, reason, want)
		}
	}
	// The session goes on, on a new pipe.
	if got := read(mine); !strings.Contains(string(got), "v1") {
		t.Fatalf("the next read got %q", clip(got))
	}
}

// pipeWarnRead is a read with a warning (the string compared with the
// INT key is truncated), and what reads the warnings after it.
const (
	pipeWarnRead = "SELECT v FROM e2e.consol WHERE id = '3x'"
	pipeShowWarn = "SHOW WARNINGS"
	pipeWarnCnt  = "SELECT @@warning_count"
)

// TestPipeliningWarnings: a pipelined read with warnings, or an error,
// leaves SHOW WARNINGS and the counts what MariaDB shows, whether nothing
// is queued behind it on its pipe (they are read from the connection) or
// a read is (its prelude lists them before that read clears them).
func TestPipeliningWarnings(t *testing.T) {
	const (
		bad    = "SELECT nocol FROM e2e.consol WHERE id = 1"
		errCnt = "SELECT @@error_count"
	)
	consolTable(t, 10, 10)
	srv := pipeGateway(t, 1)
	h := srv.HTTPHandler()
	want := directRaw(t, 0, pipeWarnRead, pipeShowWarn, pipeWarnCnt)
	if !strings.Contains(string(want[1]), "Truncated") {
		t.Fatalf("MariaDB's SHOW WARNINGS after %s: %q: want a truncation warning", pipeWarnRead, clip(want[1]))
	}
	c := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	read := func(q string) []byte { t.Helper(); return pipeRead(t, c, q) }
	// The read's answer: its row and its final EOF, warning count
	// included. (The EOF after the column definitions carries 0 through the
	// gateway, pipelined or not, where MariaDB puts the count already.)
	sameRead := func(t *testing.T, got []byte) {
		t.Helper()
		end := want[0][len(want[0])-9:]
		if !bytes.Contains(got, []byte("\x02v3")) || !bytes.HasSuffix(got, end) {
			t.Fatalf("the read: gateway %q, MariaDB %q", clip(got), clip(want[0]))
		}
	}
	t.Run("alone", func(t *testing.T) {
		sameRead(t, read(pipeWarnRead))
		for i, q := range []string{pipeShowWarn, pipeWarnCnt} {
			if got := read(q); !bytes.Equal(maskNoIndex(got), maskNoIndex(want[i+1])) {
				t.Fatalf("%s: gateway %q, MariaDB %q", q, clip(got), clip(want[i+1]))
			}
		}
		// An error: its answer and its condition, as MariaDB's; the
		// session goes on.
		wantBad := directRaw(t, 0, bad, pipeShowWarn)
		for i, q := range []string{bad, pipeShowWarn} {
			if got := read(q); !bytes.Equal(maskNoIndex(got), maskNoIndex(wantBad[i])) {
				t.Fatalf("%s: gateway %q, MariaDB %q", q, clip(got), clip(wantBad[i]))
			}
		}
		if n := pipeMetric(t, h, "directgate_pipelined_read_conditions_lost_total"); n != 0 {
			t.Fatalf("%v reads lost their conditions", n)
		}
	})
	// Queued behind: the read behind clears the conditions on the
	// connection, and its prelude listed them first. Each head read
	// (warnings, an error) waits on a table lock while the read behind
	// joins its pipe; then its session shows what MariaDB's would.
	for _, head := range []string{pipeWarnRead, bad} {
		t.Run("queued behind/"+head, func(t *testing.T) {
			wantAll := directRaw(t, 0, head, pipeShowWarn, pipeWarnCnt, errCnt)
			got := pipeQueueBehind(t, srv, c, head)
			switch {
			case head == pipeWarnRead:
				sameRead(t, got)
			case !bytes.Equal(maskNoIndex(got), maskNoIndex(wantAll[0])):
				t.Fatalf("%s: gateway %q, MariaDB %q", head, clip(got), clip(wantAll[0]))
			}
			for i, q := range []string{pipeShowWarn, pipeWarnCnt, errCnt} {
				if got := read(q); !bytes.Equal(maskNoIndex(got), maskNoIndex(wantAll[i+1])) {
					t.Fatalf("%s: gateway %q, MariaDB %q", q, clip(got), clip(wantAll[i+1]))
				}
			}
			if n := pipeMetric(t, h, "directgate_pipelined_read_conditions_lost_total"); n != 0 {
				t.Fatalf("%v reads lost their conditions", n)
			}
		})
	}
}

// pipeQueueBehind runs the read head on c (a session of srv, whose pipe
// for it is its only one) while a read of another session is queued
// behind it on the pipe: head waits on a table lock until the other read
// has joined. It checks the other read's answer and returns head's.
func pipeQueueBehind(t *testing.T, srv *gateway.Server, c *wire.BackendConn, head string) []byte {
	t.Helper()
	h := srv.HTTPHandler()
	unlock := lockTable(t)
	if err := c.WriteCommand(append([]byte{wire.ComQuery}, head...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return inMariaDB(t, head) == 1 }, func() string { return "the read is not running in MariaDB" })
	other := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	const behind = "SELECT v FROM e2e.consol WHERE id = 1"
	if err := other.WriteCommand(append([]byte{wire.ComQuery}, behind...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return pipeMetric(t, h, "directgate_pipelined_reads_in_flight") == 2 },
		func() string { return "the second read did not join the pipe" })
	unlock()
	got := rawResult(t, c.Conn, false)
	if o := rawResult(t, other.Conn, false); !bytes.Contains(o, []byte("\x02v1")) {
		t.Fatalf("the read behind: %q, want the row of id 1", clip(o))
	}
	return got
}

// TestPipeliningWarningsCounted: with warnings: counted, a read with
// warnings and a read queued behind it keeps the counts right, but SHOW
// WARNINGS has nothing to list (the read behind cleared it), and the loss
// is counted.
func TestPipeliningWarningsCounted(t *testing.T) {
	consolTable(t, 10, 10)
	srv := pipeGatewayConf(t, "{connections: 1, warnings: counted}")
	want := directRaw(t, 0, pipeWarnRead, pipeWarnCnt)
	c := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	pipeQueueBehind(t, srv, c, pipeWarnRead)
	if got := pipeRead(t, c, pipeWarnCnt); !bytes.Equal(got, want[1]) {
		t.Fatalf("%s: gateway %q, MariaDB %q", pipeWarnCnt, clip(got), clip(want[1]))
	}
	if got := pipeRead(t, c, pipeShowWarn); strings.Contains(string(got), "Truncated") {
		t.Fatalf("SHOW WARNINGS listed %q: the read behind should have cleared it", clip(got))
	}
	if n := pipeMetric(t, srv.HTTPHandler(), "directgate_pipelined_read_conditions_lost_total"); n != 1 {
		t.Fatalf("%v reads lost their conditions, want 1", n)
	}
}

// TestPipeliningLatePipe: a read that waits (here on a table lock) makes
// its pipe late once it has been out longer than late_after: a read that
// comes then does not queue behind it, where it would wait for the lock
// too, but runs the usual way and is answered while the lock holds.
func TestPipeliningLatePipe(t *testing.T) {
	consolTable(t, 3, 10)
	db := direct(t)
	for _, q := range []string{"CREATE TABLE IF NOT EXISTS e2e.pipe_other (id INT PRIMARY KEY, v INT)", "REPLACE INTO e2e.pipe_other VALUES (1, 41)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	const late = 30 * time.Millisecond
	srv := pipeGatewayConf(t, fmt.Sprintf("{connections: 1, late_after: %s}", late))
	h := srv.HTTPHandler()
	c := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	other := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	pipeRead(t, other, "SELECT v FROM e2e.pipe_other WHERE id = 1") // the pipe is open
	unlock := lockTable(t)
	const locked = "SELECT v FROM e2e.consol WHERE id = 2"
	if err := c.WriteCommand(append([]byte{wire.ComQuery}, locked...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return inMariaDB(t, locked) == 1 }, func() string { return "the read is not waiting in MariaDB" })
	waitUntil(t, func() bool { return pipeMetric(t, h, "directgate_pipelined_reads_in_flight") == 1 },
		func() string { return "the locked read is not on the pipe" })
	time.Sleep(2 * late) // the pipe's read is now out longer than late_after
	// A bound for a read stuck behind the lock (the failure), not a measure.
	if err := other.NetConn().SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := pipeRead(t, other, "SELECT v FROM e2e.pipe_other WHERE id = 1"); !bytes.Contains(got, []byte("\x0241")) {
		t.Fatalf("the read while the pipe is late: %q", clip(got))
	}
	if n := pipeMetric(t, h, "directgate_pipelined_reads_late_total"); n != 1 {
		t.Fatalf("%v reads found the pipe late, want 1", n)
	}
	unlock()
	if got := rawResult(t, c.Conn, false); !bytes.Contains(got, []byte("\x02v2")) {
		t.Fatalf("the locked read: %q", clip(got))
	}
}

// TestPipeliningPerSessionState: a pipe serves only the session state its
// connection was brought to. With one pipe allowed, sessions in two
// states take turns with it (a state without a pipe takes the other's
// idle one, brought in line anew), and each reads what its state says: a
// double-quoted word is a string by default and a column under
// ANSI_QUOTES.
func TestPipeliningPerSessionState(t *testing.T) {
	consolTable(t, 3, 10)
	srv := pipeGateway(t, 1)
	h := srv.HTTPHandler()
	plain := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	ansi := dialRaw(t, srv.Addr().String(), appUser, appPass, 0, "SET SESSION sql_mode = 'ANSI_QUOTES'")
	const q = `SELECT "v" FROM e2e.consol WHERE id = 1`
	read := func(bc *wire.BackendConn) []byte {
		t.Helper()
		// The read before ends its turn just after its answer is sent: a
		// read of the other state that comes before that finds the one
		// pipe busy and goes the usual way.
		waitUntil(t, func() bool { return pipeMetric(t, h, "directgate_pipelined_reads_in_flight") == 0 },
			func() string { return "a pipelined read stays in flight" })
		return pipeRead(t, bc, q)
	}
	// A first read waits for the gateway to know its primary, which a
	// read that finds none does the usual way; the count starts after it.
	read(plain)
	base := pipeMetric(t, h, "directgate_pipelined_reads_total")
	for i := range 3 {
		if got := read(plain); !bytes.Contains(got, []byte("\x01v\x05")) || bytes.Contains(got, []byte("v1")) {
			t.Fatalf("round %d, default sql_mode: %q, want the string 'v'", i, clip(got))
		}
		if got := read(ansi); !bytes.Contains(got, []byte("\x02v1")) {
			t.Fatalf("round %d, ANSI_QUOTES: %q, want the column v of row 1", i, clip(got))
		}
	}
	if n := pipeMetric(t, h, "directgate_pipelined_reads_total") - base; n != 6 {
		t.Errorf("%v reads pipelined, want 6", n)
	}
}

// TestPipeliningIdlePipeClosedByServer: MariaDB may close a connection
// while it is idle (an administrator's KILL, wait_timeout, a restart),
// sending an ERR first. A pipe's connection closed so must not hand that
// ERR to the next read as its answer, nor count as the backend failing:
// the read gets its row.
func TestPipeliningIdlePipeClosedByServer(t *testing.T) {
	consolTable(t, 3, 10)
	// A backend account of its own: the test kills its idle connections.
	const user, pass = "pipeidle", "pipeidle-secret"
	ensureAccount(t, user, pass)
	srv := pipeGatewayAs(t, user, pass, "{connections: 1}")
	h := srv.HTTPHandler()
	c := dialRaw(t, srv.Addr().String(), appUser, appPass, 0)
	const q = "SELECT v FROM e2e.consol WHERE id = 2"
	if got := pipeRead(t, c, q); !bytes.Contains(got, []byte("\x02v2")) {
		t.Fatalf("the first read: %q", clip(got))
	}
	if n := pipeMetric(t, h, "directgate_pipelined_reads_total"); n != 1 {
		t.Fatalf("%v reads pipelined, want 1", n)
	}
	waitUntil(t, func() bool { return pipeMetric(t, h, "directgate_pipelined_reads_in_flight") == 0 },
		func() string { return "the read stays in flight" })
	waitUntil(t, func() bool { return killIdle(t, rootDB(t), user) >= 1 },
		func() string { return "no idle backend connection to kill" })
	time.Sleep(100 * time.Millisecond) // the ERR and the close reach the gateway
	if got := pipeRead(t, c, q); !bytes.Contains(got, []byte("\x02v2")) {
		t.Fatalf("the read after the pipe's connection was killed: %q", clip(got))
	}
	if n := pipeMetric(t, h, "directgate_pipelined_read_fallbacks_total"); n != 0 {
		t.Fatalf("%v reads fell back: the dead pipe was used", n)
	}
}

// TestPipeliningKillQuery: KILL QUERY of a session whose pipelined read
// runs (here waiting on a table lock) interrupts it as MariaDB would
// (1317, at once, the lock still held), and the read queued behind it on
// the pipe, which a late kill could have hit, runs the usual way and gets
// its row. The killed session goes on.
func TestPipeliningKillQuery(t *testing.T) {
	consolTable(t, 3, 10)
	srv := pipeGateway(t, 1)
	h := srv.HTTPHandler()
	addr := srv.Addr().String()
	c, other, killer := dialRaw(t, addr, appUser, appPass, 0), dialRaw(t, addr, appUser, appPass, 0), dialRaw(t, addr, appUser, appPass, 0)
	const locked, behind = "SELECT v FROM e2e.consol WHERE id = 2", "SELECT v FROM e2e.consol WHERE id = 1"
	pipeRead(t, c, behind) // the gateway knows its primary; the pipe is open
	unlock := lockTable(t)
	if err := c.WriteCommand(append([]byte{wire.ComQuery}, locked...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return inMariaDB(t, locked) == 1 }, func() string { return "the read is not waiting in MariaDB" })
	if err := other.WriteCommand(append([]byte{wire.ComQuery}, behind...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return pipeMetric(t, h, "directgate_pipelined_reads_in_flight") == 2 },
		func() string { return "the second read did not join the pipe" })
	if got := pipeRead(t, killer, fmt.Sprintf("KILL QUERY %d", c.Greeting.ConnectionID)); len(got) < 5 || got[4] != 0 {
		t.Fatalf("KILL QUERY: %q", clip(got))
	}
	// A bound for a read the kill did not reach (the failure), not a measure.
	if err := c.NetConn().SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got := rawResult(t, c.Conn, false)
	if len(got) < 7 || !wire.IsERR(got[4:]) || binary.LittleEndian.Uint16(got[5:7]) != 1317 {
		t.Fatalf("the killed read: %q, want ERR 1317", clip(got))
	}
	unlock()
	if got := rawResult(t, other.Conn, false); !bytes.Contains(got, []byte("\x02v1")) {
		t.Fatalf("the read behind: %q, want the row of id 1", clip(got))
	}
	if n := pipeMetric(t, h, "directgate_pipelined_read_fallbacks_total"); n != 1 {
		t.Fatalf("%v reads fell back, want 1: the read behind the killed one", n)
	}
	if err := c.NetConn().SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := pipeRead(t, c, locked); !bytes.Contains(got, []byte("\x02v2")) {
		t.Fatalf("the killed session's next read: %q", clip(got))
	}
}
