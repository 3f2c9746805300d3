package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// twopcStack is twoClusters in transaction_mode twopc, with the owner of
// cluster main (the coordinator log's) as a process of its own, and a
// resolve_after of one second.
type twopcStack struct {
	*twoClusters
	bin, config, ownerAddr, httpAddr string
	owner                            *exec.Cmd
	ownerLog                         *logBuffer
}

// resolveAfter is the tests' twopc.resolve_after.
const resolveAfter = time.Second

func startTwoPC(t *testing.T, name string) *twopcStack {
	t.Helper()
	st := &twopcStack{bin: buildGateway(t), ownerAddr: freeAddr(t), httpAddr: freeAddr(t)}
	st.twoClusters = newTwoClusters(t, name, "twopc",
		fmt.Sprintf("twopc: {log_cluster: main, resolve_after: %s}\nhealth: {interval: 200ms, timeout: 1s}", resolveAfter),
		"    owner: "+st.ownerAddr)
	mustExec(t, st.main, "CREATE TABLE ledger (tid INT PRIMARY KEY)")
	mustExec(t, st.bill, "CREATE TABLE ledger (tid INT PRIMARY KEY)")
	st.config = filepath.Join(t.TempDir(), "gateway.yaml")
	if err := writeFile(st.config, st.yaml); err != nil {
		t.Fatal(err)
	}
	st.startOwner(t)
	t.Cleanup(func() { st.stopOwner(syscall.SIGTERM) })
	return st
}

// startOwner runs the owner of cluster main and waits for it to listen.
func (st *twopcStack) startOwner(t *testing.T) {
	t.Helper()
	st.owner, st.ownerLog = startOwnerProcess(t, st.bin, st.config, st.ownerAddr, st.httpAddr)
}

// stopOwner signals the owner and waits for it.
func (st *twopcStack) stopOwner(sig syscall.Signal) {
	if st.owner == nil {
		return
	}
	_ = st.owner.Process.Signal(sig)
	_ = st.owner.Wait()
	st.owner = nil
}

// gatewayProcess runs the gateway binary on the stack's configuration with
// the crash hook armed at crash ("" none); it is killed when the test
// ends. It returns the process and its address.
func (st *twopcStack) gatewayProcess(t *testing.T, crash string) (*exec.Cmd, string) {
	t.Helper()
	addr := freeAddr(t)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("gateway-%d.yaml", rand.IntN(1<<30)))
	if err := writeFile(path, strings.Replace(st.yaml, "listen: 127.0.0.1:0", "listen: "+addr, 1)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(st.bin, "serve", "--config", path)
	cmd.Env = append(os.Environ(), crashPointEnv+"="+crash)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return cmd, addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// crashPointEnv is the gateway's test crash hook (cmd/gateway/crash.go).
const crashPointEnv = "DIRECTGATE_CRASH_POINT"

// killBackendConns kills, as root, every idle connection of the backend
// account on srv: the gateway's, and the test's own (database/sql
// reconnects). (information_schema.INNODB_TRX is a cache refreshed every
// 100 ms: it cannot tell which connection holds a transaction.)
func killBackendConns(t *testing.T, srv interface{ RootDB() (*sql.DB, error) }) {
	t.Helper()
	root, err := srv.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	killIdle(t, root, backendUser)
}

// prepared counts the gateway's XA branches prepared on db.
func prepared(t *testing.T, db *sql.DB) int {
	t.Helper()
	rows, err := db.Query("XA RECOVER")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var format, gl, bl int
		var data []byte
		if err := rows.Scan(&format, &gl, &bl, &data); err != nil {
			t.Fatal(err)
		}
		if format == 0x6467 {
			n++
		}
	}
	return n
}

// waitResolved waits, within the resolver's bound and a margin for a
// loaded machine, until neither cluster holds a prepared branch.
func (st *twopcStack) waitResolved(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(resolveAfter + 30*time.Second)
	for prepared(t, st.main)+prepared(t, st.bill) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("XA branches still prepared (main %d, billing %d); owner log:\n%s", prepared(t, st.main), prepared(t, st.bill), st.ownerLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ledger reads a cluster's transfer ids.
func ledger(t *testing.T, db *sql.DB) map[int]bool {
	t.Helper()
	rows, err := db.Query("SELECT tid FROM ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[id] = true
	}
	return out
}

// checkBank checks the invariant: the same transfers on both clusters,
// each moving one unit from main's account 1 to billing's, the total
// unchanged.
func (st *twopcStack) checkBank(t *testing.T) (transfers map[int]bool) {
	t.Helper()
	lm, lb := ledger(t, st.main), ledger(t, st.bill)
	for id := range lm {
		if !lb[id] {
			t.Errorf("transfer %d applied on main only", id)
		}
	}
	for id := range lb {
		if !lm[id] {
			t.Errorf("transfer %d applied on billing only", id)
		}
	}
	a, b := balances(t, st.main, st.mainDB+".acct"), balances(t, st.bill, st.billDB+".acct")
	if a[1]+a[2]+b[1]+b[2] != 400 || a[1] != 100-len(lm) || b[1] != 100+len(lb) {
		t.Errorf("balances: main %v billing %v after %d transfers", a, b, len(lm))
	}
	return lm
}

// transfer moves one unit from main to billing in one twopc transaction
// recorded as id in both ledgers.
func (st *twopcStack) transfer(c *sql.Conn, id int) error {
	ctx := context.Background()
	for _, q := range []string{
		"BEGIN",
		"UPDATE acct SET bal = bal - 1 WHERE id = 1",
		fmt.Sprintf("INSERT INTO ledger VALUES (%d)", id),
		"UPDATE " + st.billDB + ".acct SET bal = bal + 1 WHERE id = 1",
		fmt.Sprintf("INSERT INTO %s.ledger VALUES (%d)", st.billDB, id),
		"COMMIT",
	} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			_, _ = c.ExecContext(ctx, "ROLLBACK")
			return err
		}
	}
	return nil
}

// TestTwoPC: in transaction_mode twopc a transaction over both clusters
// commits and rolls back on both, a one-cluster transaction commits in
// one phase, a participant lost before COMMIT rolls every one back, and
// nothing stays prepared.
func TestTwoPC(t *testing.T) {
	st := startTwoPC(t, "twopc")
	st.gw = startTestGateway(t, "gateway-twopc", st.yaml).Addr().String()
	ctx := context.Background()
	c := st.session(t, st.mainDB)
	var mode string
	if err := c.QueryRowContext(ctx, "SELECT @@transaction_mode").Scan(&mode); err != nil || mode != "twopc" {
		t.Fatalf("@@transaction_mode %q %v", mode, err)
	}
	if err := st.transfer(c, 1); err != nil {
		t.Fatal(err)
	}
	st.checkBank(t)
	// Rolled back on both.
	run(t, c, "BEGIN")
	run(t, c, "UPDATE acct SET bal = 0")
	run(t, c, "UPDATE "+st.billDB+".acct SET bal = 0")
	admin := oneConn(t, gatewayDSN(st.gw, adminUser, adminPass, "", nil))
	rows, err := admin.QueryContext(ctx, "SHOW GATEWAY TRANSACTIONS")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for rows.Next() {
		var state, mode, gtrid, clusters, age sql.NullString
		var sess sql.NullInt64
		if err := rows.Scan(&state, &mode, &gtrid, &clusters, &sess, &age); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, state.String+" "+mode.String+" "+clusters.String)
	}
	rows.Close()
	if len(seen) != 1 || seen[0] != "in_flight twopc main,billing" {
		t.Errorf("SHOW GATEWAY TRANSACTIONS: %q", seen)
	}
	run(t, c, "ROLLBACK")
	st.checkBank(t)
	// One cluster: one phase, no log.
	run(t, c, "BEGIN")
	run(t, c, "UPDATE acct SET bal = bal + 1 WHERE id = 2")
	run(t, c, "COMMIT")
	if b := balances(t, st.main, st.mainDB+".acct"); b[2] != 101 {
		t.Errorf("one-phase commit: %v", b)
	}
	run(t, c, "UPDATE acct SET bal = bal - 1 WHERE id = 2")
	// Billing's connection is lost before COMMIT: everything rolls back.
	run(t, c, "BEGIN")
	run(t, c, "UPDATE acct SET bal = bal - 1 WHERE id = 1")
	run(t, c, "INSERT INTO ledger VALUES (2)")
	run(t, c, "UPDATE "+st.billDB+".acct SET bal = bal + 1 WHERE id = 1")
	run(t, c, "INSERT INTO "+st.billDB+".ledger VALUES (2)")
	killBackendConns(t, st.billSr)
	if _, err := c.ExecContext(ctx, "COMMIT"); err == nil {
		t.Fatal("COMMIT succeeded with a participant lost")
	}
	if got := st.checkBank(t); len(got) != 1 {
		t.Errorf("ledger after the failed COMMIT: %v", got)
	}
	if n := prepared(t, st.main) + prepared(t, st.bill); n != 0 {
		t.Errorf("%d branches left prepared", n)
	}
	// The session goes on, and the log keeps nothing of done work.
	if err := st.transfer(c, 3); err != nil {
		t.Fatal(err)
	}
	if got := st.checkBank(t); len(got) != 2 {
		t.Errorf("ledger: %v", got)
	}
	var left int
	if err := st.main.QueryRow("SELECT COUNT(*) FROM twopc.log WHERE state = 'commit'").Scan(&left); err != nil || left != 0 {
		t.Errorf("log records left: %d %v", left, err)
	}
	// A client that leaves in the middle: both branches roll back.
	{
		db := open(t, gatewayDSN(st.gw, appUser, appPass, st.mainDB, nil))
		db.SetMaxOpenConns(1)
		for _, q := range []string{"BEGIN", "UPDATE acct SET bal = 0 WHERE id = 1", "UPDATE " + st.billDB + ".acct SET bal = 0 WHERE id = 1"} {
			mustExec(t, db, q)
		}
		db.Close()
		// Its row locks go with it: a direct write gets them.
		bc, err := st.bill.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		run(t, bc, "SET SESSION innodb_lock_wait_timeout = 1")
		for i := 0; ; i++ {
			_, err := bc.ExecContext(ctx, "UPDATE acct SET bal = bal WHERE id = 1")
			if err == nil {
				break
			}
			if i == 30 {
				t.Fatalf("billing's row still locked after the client left: %v", err)
			}
		}
		bc.Close()
		if got := st.checkBank(t); len(got) != 2 {
			t.Errorf("ledger after the client left: %v", got)
		}
	}
	// Nothing run: COMMIT is the gateway's. AND CHAIN goes on in a new
	// transaction over both clusters.
	run(t, c, "BEGIN")
	run(t, c, "COMMIT")
	run(t, c, "BEGIN")
	run(t, c, "UPDATE acct SET bal = bal - 1 WHERE id = 1")
	run(t, c, "UPDATE "+st.billDB+".acct SET bal = bal + 1 WHERE id = 1")
	run(t, c, "COMMIT AND CHAIN")
	run(t, c, "UPDATE acct SET bal = 0 WHERE id = 1")
	run(t, c, "UPDATE "+st.billDB+".acct SET bal = 0 WHERE id = 1")
	run(t, c, "ROLLBACK")
	mustExec(t, st.main, "UPDATE acct SET bal = bal + 1 WHERE id = 1")
	mustExec(t, st.bill, "UPDATE acct SET bal = bal - 1 WHERE id = 1")
	if got := st.checkBank(t); len(got) != 2 {
		t.Errorf("ledger after COMMIT AND CHAIN: %v", got)
	}
	// A transaction with characteristics cannot be XA: it stays on one
	// cluster.
	run(t, c, "START TRANSACTION READ WRITE")
	run(t, c, "UPDATE acct SET bal = bal WHERE id = 1")
	_, err = c.ExecContext(ctx, "UPDATE "+st.billDB+".acct SET bal = bal WHERE id = 1")
	sqlErr(t, err, 1235, "42000")
	run(t, c, "ROLLBACK")
}

// TestTwoPCCrashPoints is the bank invariant: transfers between the two
// clusters while the gateway dies at each point of a commit (the test
// hook), the coordinator log's owner is killed and restarted, and
// billing's MariaDB is killed and restarted: after the resolver's bound
// nothing is prepared, no transfer is half applied and the total is
// unchanged. E2E_BANK=1 runs 200 transfers per crash point (gateways
// dying at random transfers); the default is one crash per point.
func TestTwoPCCrashPoints(t *testing.T) {
	st := startTwoPC(t, "bank")
	long := os.Getenv("E2E_BANK") != ""
	next := 1
	for _, point := range []string{"before_prepare", "after_prepare", "after_log", "between_commits"} {
		attempted := 0
		for rounds := 0; rounds < 500 && (attempted == 0 || long && attempted < 200); rounds++ {
			nth := 2
			if long {
				nth = 1 + rand.IntN(20)
			}
			gw, addr := st.gatewayProcess(t, fmt.Sprintf("%s:%d", point, nth))
			c := oneConn(t, gatewayDSN(addr, appUser, appPass, st.mainDB, nil))
			crashed := -1
			for i := 0; i < 50; i++ {
				id := next
				next++
				attempted++
				if err := st.transfer(c, id); err != nil {
					crashed = id
					break
				}
			}
			_ = gw.Wait()
			if crashed < 0 {
				t.Fatalf("%s: the gateway never reached the crash point", point)
			}
			switch {
			case point == "after_log" && rounds == 0:
				// The log's owner dies too, and a new one resolves.
				st.stopOwner(syscall.SIGKILL)
				st.startOwner(t)
			case point == "between_commits" && rounds == 0:
				// Billing's MariaDB dies with its branch prepared.
				if err := st.billSr.Kill(); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := st.billSr.Restart(ctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
			}
			st.waitResolved(t)
			done := st.checkBank(t)
			committed := point == "after_log" || point == "between_commits"
			if done[crashed] != committed {
				t.Errorf("%s: transfer %d at the crash: committed %v, want %v", point, crashed, done[crashed], committed)
			}
		}
		t.Logf("%s: %d transfers attempted", point, attempted)
	}
}
