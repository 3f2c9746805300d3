package fleet_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/fleet"
)

const (
	ownerDB  = "owner_fleet"
	leaseTTL = 2 * time.Second // baseConfig's lease_ttl
)

// ownerTopology is the fleet's topology for the owner tests: cluster main
// over the primary, without an owner address (owners are elected).
func ownerTopology() string { return topology("", shared.primary) }

// createOwnerTables makes a fresh sequence (cache 50, so the failovers
// fall between reservations and inside blocks alike) and message table.
func createOwnerTables(t *testing.T) {
	t.Helper()
	root, err := shared.primary.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + ownerDB,
		"CREATE DATABASE " + ownerDB,
		"CREATE TABLE " + ownerDB + ".seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"INSERT INTO " + ownerDB + ".seq VALUES (0, 1, 50)",
		"CREATE TABLE " + ownerDB + `.msgs (
			id BIGINT PRIMARY KEY, priority BIGINT NOT NULL DEFAULT 0, epoch BIGINT NOT NULL DEFAULT 0,
			time_next BIGINT DEFAULT 0, time_acked BIGINT, body VARCHAR(64),
			KEY next_idx (time_next), KEY ack_idx (time_acked)
		) COMMENT 'vitess_message,vt_ack_wait=1,vt_purge_after=3600,vt_batch_size=10,vt_poller_interval=0.2'`,
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// ownerProc is an owner process of the fleet under prefix, on addr.
type ownerProc struct {
	*proc
	addr string
}

// startOwner starts `gateway owner --listen addr` in the fleet under
// prefix and waits until it accepts gateways (as leader or standby).
func startOwner(t *testing.T, prefix, addr string) *ownerProc {
	t.Helper()
	p := startProc(t, baseConfig("127.0.0.1:1", `"off"`, prefix), "owner accepting gateways",
		"owner", "--cluster", "main", "--listen", addr)
	return &ownerProc{proc: p, addr: addr}
}

// kill SIGKILLs the process and waits for it.
func (p *ownerProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// observeOwners follows the owner election of cluster main under prefix,
// as gateways do.
func observeOwners(t *testing.T, prefix string) *fleet.Observer {
	t.Helper()
	fc, err := fleet.Dial(&config.Etcd{Endpoints: []string{shared.etcd.Endpoint}, Prefix: prefix,
		DialTimeout: 2 * time.Second, LeaseTTL: leaseTTL}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); fc.Close() })
	return fc.Election(fleet.RoleOwners, "main").Observe(ctx)
}

// waitLeader waits until the observed leader is one of owners (and not
// avoid) and returns it.
func waitLeader(t *testing.T, obs *fleet.Observer, avoid string, owners ...*ownerProc) *ownerProc {
	t.Helper()
	var leader *ownerProc
	waitFor(t, "an owner to lead", func() bool {
		addr, _ := obs.Leader()
		for _, o := range owners {
			if o.addr == addr && addr != avoid {
				leader = o
				return true
			}
		}
		return false
	})
	return leader
}

// ownerDB opens a client pool to the owner database through gateway g,
// one connection (one client).
func (p *proc) ownerClient(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=10s", appUser, appPass, p.addr, ownerDB))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// draw is one NEXT VALUE: when it was sent and answered, through which
// gateway by which client, and the value.
type draw struct {
	gw, client int
	sent, recv time.Time
	v          int64
}

// checkRealTimeOrder checks that a draw answered before another was sent
// got a smaller value (what one owner at a time guarantees, across
// failovers too); it returns the first violation.
func checkRealTimeOrder(ds []draw) error {
	bySent := slices.Clone(ds)
	sort.Slice(bySent, func(i, j int) bool { return bySent[i].sent.Before(bySent[j].sent) })
	byRecv := slices.Clone(ds)
	sort.Slice(byRecv, func(i, j int) bool { return byRecv[i].recv.Before(byRecv[j].recv) })
	var maxDone draw
	k := 0
	for _, d := range bySent {
		for k < len(byRecv) && byRecv[k].recv.Before(d.sent) {
			if byRecv[k].v > maxDone.v {
				maxDone = byRecv[k]
			}
			k++
		}
		if k > 0 && d.v <= maxDone.v {
			return fmt.Errorf("value %d (gateway %d client %d, sent %s) after %d (gateway %d client %d, answered %s before)",
				d.v, d.gw, d.client, d.sent.Format("15:04:05.000000"), maxDone.v, maxDone.gw, maxDone.client, maxDone.recv.Format("15:04:05.000000"))
		}
	}
	return nil
}

// seqLoad is clients drawing NEXT VALUE through gateways, each recording
// every draw, until end (bounded in count and time).
type seqLoad struct {
	gws   int
	mu    sync.Mutex
	draws []draw
	errs  []string
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startSeqLoad(t *testing.T, gws []*proc, clients int) *seqLoad {
	t.Helper()
	const maxDraws = 100000
	l := &seqLoad{gws: len(gws), stop: make(chan struct{})}
	deadline := time.Now().Add(3 * time.Minute)
	for g, gw := range gws {
		for c := range clients {
			db := gw.ownerClient(t)
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for i := 0; i < maxDraws && time.Now().Before(deadline); i++ {
					select {
					case <-l.stop:
						return
					default:
					}
					sent := time.Now()
					var v int64
					err := db.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&v)
					recv := time.Now()
					l.mu.Lock()
					if err != nil {
						l.errs = append(l.errs, fmt.Sprintf("%s gateway %d client %d: %v", recv.Format("15:04:05.000"), g, c, err))
					} else {
						l.draws = append(l.draws, draw{gw: g, client: c, sent: sent, recv: recv, v: v})
					}
					l.mu.Unlock()
					if err != nil {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}()
		}
	}
	t.Cleanup(l.end)
	return l
}

// end stops the clients and waits for them; later calls do nothing.
func (l *seqLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// counts returns the draws and the failures so far.
func (l *seqLoad) counts() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.draws), len(l.errs)
}

// firstAfter returns, per gateway, when the first draw sent after at was
// answered (zero: none yet).
func (l *seqLoad) firstAfter(at time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]time.Time, l.gws)
	for _, d := range l.draws {
		if d.sent.After(at) && (out[d.gw].IsZero() || d.recv.Before(out[d.gw])) {
			out[d.gw] = d.recv
		}
	}
	return out
}

// outage waits until every gateway has answered a draw sent after at and
// returns the longest time without service, and a line per gateway.
func (l *seqLoad) outage(t *testing.T, at time.Time) (time.Duration, string) {
	t.Helper()
	var firsts []time.Time
	waitFor(t, "every gateway to serve values again", func() bool {
		firsts = l.firstAfter(at)
		return !slices.ContainsFunc(firsts, time.Time.IsZero)
	})
	var worst time.Duration
	var per []string
	for g, f := range firsts {
		d := f.Sub(at)
		worst = max(worst, d)
		per = append(per, fmt.Sprintf("gateway %d %v", g, d.Round(time.Millisecond)))
	}
	return worst, strings.Join(per, ", ")
}

// check ends the load and checks every draw: no value twice; each
// client's values strictly increase; per gateway and across gateways, a
// value answered before another was asked for is smaller; the sequence
// row is ahead of them all. It returns the draws and the failures.
func (l *seqLoad) check(t *testing.T) (int, []string) {
	t.Helper()
	l.end()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int64]draw{}
	type key struct{ gw, client int }
	last := map[key]int64{}
	byGW := make([][]draw, l.gws)
	sort.Slice(l.draws, func(i, j int) bool { return l.draws[i].recv.Before(l.draws[j].recv) })
	var highest int64
	for _, d := range l.draws {
		if prev, dup := seen[d.v]; dup {
			t.Fatalf("value %d handed out twice: gateway %d client %d and gateway %d client %d", d.v, prev.gw, prev.client, d.gw, d.client)
		}
		seen[d.v] = d
		k := key{d.gw, d.client}
		if d.v <= last[k] {
			t.Fatalf("gateway %d client %d: value %d after %d", d.gw, d.client, d.v, last[k])
		}
		last[k] = d.v
		byGW[d.gw] = append(byGW[d.gw], d)
		highest = max(highest, d.v)
	}
	for g, ds := range byGW {
		if err := checkRealTimeOrder(ds); err != nil {
			t.Fatalf("gateway %d: %v", g, err)
		}
	}
	if err := checkRealTimeOrder(l.draws); err != nil {
		t.Fatalf("across gateways: %v", err)
	}
	root, err := shared.primary.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var nextID int64
	if err := root.QueryRow("SELECT next_id FROM " + ownerDB + ".seq WHERE id = 0").Scan(&nextID); err != nil || nextID <= highest {
		t.Fatalf("next_id %d (%v) is not above the highest value handed out, %d", nextID, err, highest)
	}
	return len(l.draws), slices.Clone(l.errs)
}

// startOwnerFleet stores the owner topology under prefix and starts two
// owners and three gateways; it returns them, the leader and an observer
// of the election.
func startOwnerFleet(t *testing.T, prefix string) (owners []*ownerProc, leader *ownerProc, gws []*proc, obs *fleet.Observer) {
	t.Helper()
	createOwnerTables(t)
	putTopology(t, prefix, ownerTopology())
	obs = observeOwners(t, prefix)
	owners = []*ownerProc{startOwner(t, prefix, freeAddr(t)), startOwner(t, prefix, freeAddr(t))}
	leader = waitLeader(t, obs, "", owners...)
	for range 3 {
		gws = append(gws, startGateway(t, prefix))
	}
	waitFor(t, "topo status to show a leader and a standby", func() bool {
		status := topo(t, prefix, "status")
		return strings.Contains(status, " leader ") && strings.Contains(status, " standby ")
	})
	return owners, leader, gws, obs
}

// failoverRound is what one round of failoverRounds saw.
type failoverRound struct {
	from, to *ownerProc
	// elected is when the election named the next leader, worst the
	// longest time without service through a gateway (per: each's),
	// both from the end of the old leader.
	elected, worst time.Duration
	per            string
	values, failed int
}

// failoverRounds starts two owners and 3 gateways × clients drawing NEXT
// VALUE under prefix; then, twice, it ends the leader with end (a
// signal), waits for the next one and for every gateway to serve values
// again, waits for the old leader to exit and restarts it on its address
// as a standby. It returns the rounds and the load, still running.
func failoverRounds(t *testing.T, prefix string, clients int, end func(*ownerProc)) ([]failoverRound, *seqLoad) {
	t.Helper()
	owners, leader, gws, obs := startOwnerFleet(t, prefix)
	l := startSeqLoad(t, gws, clients)
	waitFor(t, "values through every gateway", func() bool { n, _ := l.counts(); return n > 2000 })
	var rounds []failoverRound
	for range 2 {
		time.Sleep(time.Second) // load on the leader
		r := failoverRound{from: leader}
		var failedBefore int
		r.values, failedBefore = l.counts()
		at := time.Now()
		end(leader)
		r.to = waitLeader(t, obs, leader.addr, owners...)
		r.elected = time.Since(at)
		r.worst, r.per = l.outage(t, at)
		_, failed := l.counts()
		r.failed = failed - failedBefore
		rounds = append(rounds, r)
		select {
		case <-leader.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("the owner at %s did not exit", leader.addr)
		}
		owners[slices.Index(owners, leader)] = startOwner(t, prefix, leader.addr)
		leader = r.to
	}
	time.Sleep(time.Second)
	return rounds, l
}

// 3 gateways × 8 clients draw NEXT VALUE while the leading owner is
// SIGKILLed twice (two owners; the killed one is restarted as a standby):
// no value twice; each client's values, and each gateway's and the
// fleet's in real-time order (a value answered before another was asked
// for is smaller), strictly increase; the time without service per
// failover is logged and stays under 2 × the lease TTL.
func TestOwnerFailoverSequences(t *testing.T) {
	const clients, gateways = 8, 3
	rounds, l := failoverRounds(t, "/fleet-owner-seq", clients, func(p *ownerProc) {
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	})
	for i, r := range rounds {
		t.Logf("failover %d: leader %s SIGKILLed after %d values; %s elected after %v; first value answered through %s; %d statements failed",
			i+1, r.from.addr, r.values, r.to.addr, r.elected.Round(time.Millisecond), r.per, r.failed)
		// The target (2 × the lease TTL) is reported, not asserted: a
		// wall-clock bound flakes on a shared machine. Far above it, the
		// failover did not happen by lease expiry at all.
		switch {
		case r.worst > 5*leaseTTL:
			t.Errorf("failover %d: %v without service, far above the lease TTL (%v): no takeover at lease expiry", i+1, r.worst.Round(time.Millisecond), leaseTTL)
		case r.worst > 2*leaseTTL:
			t.Logf("failover %d: %v without service, above the target of 2 × the lease TTL (%v)", i+1, r.worst.Round(time.Millisecond), 2*leaseTTL)
		}
	}
	n, errs := l.check(t)
	t.Logf("%d values through %d gateways × %d clients, all distinct and in order; %d statements failed (those in flight on a killed owner), e.g. %v",
		n, gateways, clients, len(errs), errs[:min(len(errs), 3)])
	if len(errs) > 2*gateways*clients {
		t.Errorf("%d statements failed in 2 failovers: more than the %d that can be in flight", len(errs), 2*gateways*clients)
	}
}

// A leader stopped with SIGTERM resigns before it drains: the standby
// leads at once, and the statements the old leader refused in between go
// to the new one. Under load from 3 gateways × 8 clients, twice: no
// statement fails, values stay distinct and in order.
func TestOwnerSwitchoverSequences(t *testing.T) {
	const clients, gateways = 8, 3
	rounds, l := failoverRounds(t, "/fleet-owner-switch", clients, func(p *ownerProc) {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	})
	for i, r := range rounds {
		t.Logf("switchover %d: leader %s got SIGTERM; %s elected after %v; first value answered through %s",
			i+1, r.from.addr, r.to.addr, r.elected.Round(time.Millisecond), r.per)
		if !strings.Contains(r.from.logs.String(), "stopped cleanly") {
			t.Errorf("switchover %d: the old leader did not stop cleanly:\n%s", i+1, r.from.logs.String())
		}
		// A resignation hands over at once; only a wait of several lease
		// TTLs (the lease expiring instead) is a failure, not noise.
		if r.worst > 3*leaseTTL {
			t.Errorf("switchover %d: %v without service, above 3 × the lease TTL: the resignation did not hand over", i+1, r.worst.Round(time.Millisecond))
		}
	}
	n, errs := l.check(t)
	t.Logf("%d values through %d gateways × %d clients, all distinct and in order; %d statements failed", n, gateways, clients, len(errs))
	if len(errs) > 0 {
		t.Errorf("%d statements failed in 2 switchovers, e.g. %v", len(errs), errs[:min(len(errs), 3)])
	}
}

// A leader that is paused (SIGSTOP: a GC pause, a frozen VM) past its
// lease is fenced: the standby takes over, and once the old leader runs
// again it hands out nothing from its old block (whose values are below
// the new leader's): a statement that reached it during the pause gets
// 1290; it steps down to standby. Under load: no value twice, all in
// real-time order; the statements in flight on the paused leader fail
// owner_timeout after the gateways moved (they may have run), no others.
func TestOwnerPausedLeaderIsFenced(t *testing.T) {
	const prefix = "/fleet-owner-pause"
	owners, leader, gws, obs := startOwnerFleet(t, prefix)
	l := startSeqLoad(t, gws, 8)
	waitFor(t, "values through every gateway", func() bool { n, _ := l.counts(); return n > 2000 })

	// A client straight to the leader (as a gateway logs in).
	direct, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=10s", backendUser, backendPass, leader.addr, ownerDB))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	direct.SetMaxOpenConns(1)
	var v0 int64
	if err := direct.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&v0); err != nil {
		t.Fatal(err)
	}
	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The stop is asynchronous: on a busy machine the leader could still
	// answer the statement below, rightly, before it stops.
	waitFor(t, "every thread of the leader to stop", func() bool { return stopped(leader.cmd.Process.Pid) })
	at := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = leader.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	type answer struct {
		v   int64
		err error
	}
	late := make(chan answer, 1)
	go func() {
		var a answer
		a.err = direct.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&a.v)
		late <- a
	}()
	next := waitLeader(t, obs, leader.addr, owners...)
	worst, per := l.outage(t, at)
	time.Sleep(time.Second) // the new leader serves for a while
	pause := time.Since(at)
	if err := leader.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	t.Logf("leader %s paused for %v; %s led, first value answered through %s", leader.addr, pause.Round(time.Millisecond), next.addr, per)
	if worst > 2*leaseTTL {
		t.Logf("more than 2 × the lease TTL without service: the pause caught the old leader inside a sequence reservation, whose row lock the new leader waited for")
	}
	select {
	case a := <-late:
		var me *mysql.MySQLError
		if a.err == nil {
			t.Fatalf("the paused leader handed out %d after its lease ran out (it handed out %d before)", a.v, v0)
		}
		if !errors.As(a.err, &me) || me.Number != 1290 {
			t.Fatalf("the statement that reached the paused leader: %v, want error 1290", a.err)
		}
		t.Logf("the statement that reached the paused leader got: %v", a.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the paused leader never answered")
	}
	waitFor(t, "the old leader to step down", func() bool { return strings.Contains(leader.logs.String(), "no longer leading") })
	_, err = direct.Exec("SELECT NEXT VALUE FROM seq")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1290 || !strings.Contains(me.Message, "standby") {
		t.Fatalf("the old leader after it resumed: %v, want 1290 as a standby", err)
	}
	time.Sleep(time.Second)
	n, errs := l.check(t)
	t.Logf("%d values through 3 gateways × 8 clients, all distinct and in order; %d statements failed (in flight on the paused leader), e.g. %v",
		n, len(errs), errs[:min(len(errs), 1)])
	if len(errs) > len(gws)*8 {
		t.Errorf("%d statements failed: more than the %d that can be in flight, e.g. %v", len(errs), len(gws)*8, errs[:min(len(errs), 3)])
	}
}

// startMessageFleet makes fresh owner tables and starts two owners and a
// gateway under prefix; it returns an observer of the election, the
// owners, the leader and the gateway.
func startMessageFleet(t *testing.T, prefix string) (*fleet.Observer, []*ownerProc, *ownerProc, *proc) {
	t.Helper()
	createOwnerTables(t)
	putTopology(t, prefix, ownerTopology())
	obs := observeOwners(t, prefix)
	owners := []*ownerProc{startOwner(t, prefix, freeAddr(t)), startOwner(t, prefix, freeAddr(t))}
	leader := waitLeader(t, obs, "", owners...)
	return obs, owners, leader, startGateway(t, prefix)
}

// A standby takes over message delivery: messages inserted through a
// gateway, some delivered (acked or not) by the leader, the rest not yet;
// the leader is SIGKILLed; a STREAM through the gateway then delivers
// every message, the unacked ones again after the ack wait.
func TestOwnerFailoverMessages(t *testing.T) {
	const prefix = "/fleet-owner-msgs"
	const total = 300
	obs, owners, leader, gw := startMessageFleet(t, prefix)
	prod, acker := gw.ownerClient(t), gw.ownerClient(t)

	insert := func(from, to int) {
		t.Helper()
		for id := from; id <= to; id++ {
			q := fmt.Sprintf("INSERT INTO msgs (id, body) VALUES (%d, 'm%d')", id, id)
			for try := 0; ; try++ {
				_, err := prod.Exec(q)
				var me *mysql.MySQLError
				if err == nil || errors.As(err, &me) && me.Number == 1062 {
					break // a retry of an insert that had run: it is there
				}
				if try > 100 {
					t.Fatalf("insert %d: %v", id, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	ack := func(id int64) {
		q := fmt.Sprintf("UPDATE msgs SET time_acked = %d, time_next = NULL WHERE id IN (%d)", time.Now().UnixNano(), id)
		for try := 0; try < 100; try++ {
			if _, err := acker.Exec(q); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	var mu sync.Mutex
	got := map[int64]int{}
	// stream delivers through the gateway until it ends; ackUpTo: only
	// messages with an id up to it are acked (the others stay unacked,
	// with the leader that dies).
	stream := func(ctx context.Context, ackUpTo int64) error {
		return streamMsgs(ctx, t, gw, func(id int64) {
			mu.Lock()
			got[id]++
			mu.Unlock()
			if id <= ackUpTo {
				ack(id)
			}
		})
	}
	delivered := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	// 100 messages go out through the leader: 1-50 acked, 51-100 not.
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- stream(ctx, 50) }()
	insert(1, 100)
	waitFor(t, "the leader to deliver 100 messages", func() bool { return delivered() >= 100 })
	cancel()
	<-ended
	// 200 more wait in the table with nobody subscribed.
	insert(101, total)
	at := time.Now()
	leader.kill(t)
	next := waitLeader(t, obs, leader.addr, owners...)
	t.Logf("leader %s SIGKILLed; %s elected after %v", leader.addr, next.addr, time.Since(at).Round(time.Millisecond))

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if err := stream(ctx, total); err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond) // the owner moved: STREAM again
			}
		}
	}()
	waitFor(t, "every message delivered", func() bool { return delivered() == total })
	root, err := shared.primary.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	waitAcked(t, root)
	took := time.Since(at)
	cancel()
	mu.Lock()
	defer mu.Unlock()
	again := deliveredAgain(t, got, total)
	for _, id := range again {
		if id <= 50 {
			t.Errorf("message %d was acked before the failover and delivered %d times", id, got[id])
		}
	}
	t.Logf("all %d messages delivered and acked %v after the kill; %d delivered again (the 50 the dead leader had sent unacked come back after the 1 s ack wait)",
		total, took.Round(time.Millisecond), len(again))
}

// waitAcked waits until every row of the message table is acked.
func waitAcked(t *testing.T, root *sql.DB) {
	t.Helper()
	waitFor(t, "every message acked", func() bool {
		var unacked int
		return root.QueryRow("SELECT COUNT(*) FROM "+ownerDB+".msgs WHERE time_acked IS NULL").Scan(&unacked) == nil && unacked == 0
	})
}

// deliveredAgain checks that messages 1 to total were each delivered
// (got counts the deliveries per id) and returns those delivered more
// than once.
func deliveredAgain(t *testing.T, got map[int64]int, total int64) []int64 {
	t.Helper()
	var again []int64
	for id := int64(1); id <= total; id++ {
		switch n := got[id]; {
		case n == 0:
			t.Fatalf("message %d never delivered", id)
		case n > 1:
			again = append(again, id)
		}
	}
	return again
}

// streamMsgs runs STREAM * FROM msgs through gw, one client, and calls
// each with every id delivered, until the stream ends.
func streamMsgs(ctx context.Context, t *testing.T, gw *proc, each func(id int64)) error {
	conn, err := gw.ownerClient(t).Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "STREAM * FROM msgs")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var body sql.NullString
		if err := rows.Scan(&id, &body); err != nil {
			return err
		}
		each(id)
	}
	return rows.Err()
}

// stopped reports whether every thread of process pid is stopped (state T
// in /proc/pid/task/*/stat).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
			return false
		}
	}
	return true
}

// A leader paused (SIGSTOP) while it delivers messages, past its lease
// (issue 35): the standby takes the queue over and the old leader
// resumes. Every message is delivered at least once and acked exactly
// once (acks written with AND time_acked IS NULL: their affected rows add
// up to the messages, and every row is acked). Whether the pause caught
// the old leader between its lease check and its postponement (then the
// fence in MariaDB refuses it: owner.TestQueueFenceRefusesStaleTerm pins
// that down) is a matter of timing; the log says which.
func TestOwnerPausedLeaderMessages(t *testing.T) {
	const prefix = "/fleet-owner-pause-msgs"
	const total = 300
	obs, owners, leader, gw := startMessageFleet(t, prefix)
	root, err := shared.primary.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var values []string
	for id := 1; id <= total; id++ {
		values = append(values, fmt.Sprintf("(%d, 'm%d')", id, id))
	}
	if _, err := root.Exec("INSERT INTO " + ownerDB + ".msgs (id, body) VALUES " + strings.Join(values, ", ")); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	got := map[int64]int{}
	var ackedRows int64
	ackErrs := 0
	acker := gw.ownerClient(t)
	ack := func(id int64) {
		q := fmt.Sprintf("UPDATE msgs SET time_acked = %d, time_next = NULL WHERE id IN (%d) AND time_acked IS NULL", time.Now().UnixNano(), id)
		for try := 0; try < 200; try++ {
			res, err := acker.Exec(q)
			if err == nil {
				n, _ := res.RowsAffected()
				mu.Lock()
				ackedRows += n
				mu.Unlock()
				return
			}
			mu.Lock()
			ackErrs++
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}
	delivered := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		for ctx.Err() == nil {
			err := streamMsgs(ctx, t, gw, func(id int64) {
				mu.Lock()
				got[id]++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // a consumer at work: the leader is mid-delivery when paused
				ack(id)
			})
			if err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond) // the owner moved: STREAM again
			}
		}
	}()

	waitFor(t, "the leader to deliver 50 messages", func() bool { return delivered() >= 50 })
	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = leader.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	at := time.Now()
	next := waitLeader(t, obs, leader.addr, owners...)
	before := delivered()
	waitFor(t, "the new leader to deliver", func() bool { return delivered() > before })
	time.Sleep(time.Second) // the new leader delivers for a while
	if err := leader.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	t.Logf("leader %s paused after %d messages for %v; %s led", leader.addr, before, time.Since(at).Round(time.Millisecond), next.addr)
	waitFor(t, "the old leader to step down", func() bool { return strings.Contains(leader.logs.String(), "no longer leading") })
	waitFor(t, "every message delivered", func() bool { return delivered() == total })
	waitAcked(t, root)
	cancel()
	<-streamed
	mu.Lock()
	defer mu.Unlock()
	again := len(deliveredAgain(t, got, total))
	// An ack whose answer was lost (it may have run) and was sent again
	// finds its row acked: its rows count once, through the first.
	if ackedRows > total || (ackErrs == 0 && ackedRows != total) {
		t.Fatalf("acks changed %d rows for %d messages (%d ack attempts failed)", ackedRows, total, ackErrs)
	}
	fenced := strings.Contains(leader.logs.String(), "MariaDB refused this owner's write")
	t.Logf("all %d messages delivered, %d of them again (unacked when the leader paused: back after the 1 s ack wait); acks changed %d rows, %d ack attempts failed and were sent again; the fence refused a write of the old leader after it resumed: %v",
		total, again, ackedRows, ackErrs, fenced)
}
