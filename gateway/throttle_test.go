package gateway

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// lagScript is a lag source for tests: set changes the lag and wakes
// the waiters.
type lagScript struct {
	mu      sync.Mutex
	v       *protect.Lag
	changed chan struct{}
}

func newLagScript(v *protect.Lag) *lagScript { return &lagScript{v: v, changed: make(chan struct{})} }

func (l *lagScript) watch() (*protect.Lag, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v, l.changed
}

func (l *lagScript) set(v *protect.Lag) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.v = v
	close(l.changed)
	l.changed = make(chan struct{})
}

// Through a session: reads, COMMIT and the later statements of a
// transaction that has written are never throttled; the first write of
// a transaction and an autocommit write are; the mark is forgotten when
// the transaction ends. Text and prepared alike.
func TestThrottleSession(t *testing.T) {
	var mu sync.Mutex
	inTxn := false
	primary := &fakeServer{addr: "fake:1", caps: wire.CapProtocol41, answer: func(_ int, cmd []byte) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		switch q := commandText(cmd); {
		case q == "BEGIN":
			inTxn = true
		case q == "COMMIT":
			inTxn = false
		case strings.HasPrefix(q, "SELECT"):
			return resultSet(wire.CapProtocol41, "1")
		}
		st := wire.StatusAutocommit
		if inTxn {
			st |= wire.StatusInTrans
		}
		return [][]byte{wire.AppendOK(nil, wire.OK{Status: st})}
	}}
	ss, nc := fakeSession(t, wire.CapProtocol41, primary)
	c := ss.cluster
	conf := *c.conf.Load()
	conf.Throttle = config.Throttle{MaxLag: 5 * time.Second, MaxDelay: time.Millisecond}
	c.conf.Store(&conf)
	ls := newLagScript(protect.NewLag(time.Second, "r", ""))
	c.thr.SetLagSource(ls.watch)
	c.thr.SetDraw(func() float64 { return 0 }) // every transaction held while the lag is above max_lag
	refused := func(sql string) bool {
		t.Helper()
		got := query(t, ss, nc, sql)
		if len(got) == 1 && got[0][0] == 0xff {
			if e := wire.ParseERR(got[0]); e.Code != 1205 {
				t.Fatalf("%s: error %v", sql, e)
			}
			return true
		}
		return false
	}
	// Under max_lag nothing is held; the transaction's first write marks it.
	for _, q := range []string{"BEGIN", "INSERT INTO t VALUES (1)"} {
		if refused(q) {
			t.Fatalf("%s refused under max_lag", q)
		}
	}
	ls.set(protect.NewLag(0, "", "r"))
	for _, q := range []string{"UPDATE t SET n = 1", "SELECT * FROM t FOR UPDATE", "COMMIT"} {
		if refused(q) {
			t.Fatalf("%s of a transaction that wrote was refused", q)
		}
	}
	if ss.guard.InTxn() {
		t.Fatal("the mark outlived the transaction")
	}
	for _, q := range []string{"SELECT 1", "BEGIN", "SELECT 2"} {
		if refused(q) {
			t.Fatalf("%s refused", q)
		}
	}
	if !refused("INSERT INTO t VALUES (2)") {
		t.Fatal("the first write of a transaction was not throttled")
	}
	if !refused("SELECT * FROM t WHERE id = 1 FOR UPDATE") {
		t.Fatal("a locking read starting the writes of a transaction was not throttled")
	}
	if refused("COMMIT") {
		t.Fatal("COMMIT refused")
	}
	if !refused("DELETE FROM t") {
		t.Fatal("an autocommit write was not throttled")
	}
	// The server's word that the transaction wrote is enough.
	query(t, ss, nc, "BEGIN")
	ss.txnState = "T___W___"
	if refused("UPDATE t SET n = 2") {
		t.Fatal("a transaction the server says has written was throttled")
	}
	query(t, ss, nc, "COMMIT")

	// Prepared: the same decision, cached per statement.
	for _, q := range []string{"INSERT INTO t VALUES (?)", "SELECT ?"} {
		st := &stmt{sql: q, route: ss.srv.classifier.Classify(q)}
		e := ss.admit(st.sql, st.route, st, nil)
		if want := strings.HasPrefix(q, "INSERT"); (e != nil) != want {
			t.Errorf("execute %q: %v, want refused %v", q, e, want)
		}
	}
	r := c.thr.Rows(c.conf.Load())[0]
	if r.Refused != 4 || r.Total != 4 || !strings.Contains(r.Detail, "SQL thread stopped on r") {
		t.Errorf("row %+v, want 4 refused", r)
	}
	// Off: an atomic load and nothing else.
	c.conf.Store(&config.Cluster{})
	if refused("INSERT INTO t VALUES (3)") {
		t.Fatal("refused with throttling off")
	}
}

// With throttling off, the check allocates nothing.
func TestThrottleOffAllocs(t *testing.T) {
	ss := &Session{cluster: &cluster{}}
	ss.cluster.conf.Store(&config.Cluster{})
	ss.cluster.newProtections(nil)
	ss.guard.Bind((*guardSession)(ss))
	st := &stmt{sql: "INSERT INTO t VALUES (1)"}
	if n := testing.AllocsPerRun(100, func() {
		_ = ss.admit(st.sql, st.route, nil, nil)
		_ = ss.admit(st.sql, st.route, st, nil)
	}); n != 0 {
		t.Errorf("%v allocations per statement with throttling off", n)
	}
}

// BenchmarkThrottleCheck measures the check of one write statement with
// throttling off, and on with the replicas under max_lag.
func BenchmarkThrottleCheck(b *testing.B) {
	for _, maxLag := range []time.Duration{0, 5 * time.Second} {
		b.Run("max_lag="+maxLag.String(), func(b *testing.B) {
			c := &cluster{name: "c"}
			c.conf.Store(&config.Cluster{Throttle: config.Throttle{MaxLag: maxLag, MaxDelay: time.Second}})
			c.newProtections(nil)
			c.thr.SetLagSource(newLagScript(protect.NewLag(time.Second, "r", "")).watch)
			ss := &Session{cluster: c}
			ss.guard.Bind((*guardSession)(ss))
			sql := "UPDATE t SET n = n + 1 WHERE id = 1"
			cl, err := querypath.New()
			if err != nil {
				b.Fatal(err)
			}
			route := cl.Classify(sql)
			b.ReportAllocs()
			for b.Loop() {
				if e := ss.admit(sql, route, nil, nil); e != nil {
					b.Fatal(e)
				}
				ss.guard.TxnEnded(c.guards)
			}
		})
	}
}
