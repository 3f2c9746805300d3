package gateway

import (
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/internal/safego"
)

// A backend can go silent without a reset (a network partition, a frozen
// VM, a firewall that drops): the statements running on it would wait for
// an answer that never comes, as no backend read has a timeout (a
// statement may rightly run for hours). Discovery notices: its probes
// time out, and after health.fall of them the backend is not serving.
// Then the connections the gateway has open to it are cut, in use or
// not, and the statements on them fail as on a backend that died (1158,
// retried only where a statement that failed before any byte reached the
// client may be). So a client waits at most about health.fall ×
// health.interval + health.timeout for its error, never forever (issue
// 35; e2e/faults TestSilentBackendMidStatement).
//
// Only discovery's own verdict cuts: a backend not serving while its last
// probe reached it (a failure the query path reported, awaiting rise
// probes) keeps its statements. And the verdict is confirmed first: the
// cutter opens a connection of its own and waits up to silentConfirm for
// the server's first byte (its greeting). A probe that timed out only
// because this machine was starved of CPU (TestConnectionBudget on a
// loaded 2-core VM did that) is answered then, and nothing is cut. (The
// server counts that connection, closed after the greeting, as one
// aborted connect: once per outage.)

// liveConns is the set of a backend's open connections.
type liveConns struct {
	mu sync.Mutex
	m  map[*backendConn]struct{}
}

// add records bc as open.
func (lc *liveConns) add(bc *backendConn) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.m == nil {
		lc.m = make(map[*backendConn]struct{})
	}
	lc.m[bc] = struct{}{}
}

// remove forgets bc (closed).
func (lc *liveConns) remove(bc *backendConn) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	delete(lc.m, bc)
}

// cut closes the socket of every open connection: a read or write in
// flight on one fails at once, and its owner (the pool, or the session
// holding it) destroys it. It returns how many it cut.
func (lc *liveConns) cut() int {
	lc.mu.Lock()
	conns := make([]*backendConn, 0, len(lc.m))
	for bc := range lc.m {
		conns = append(conns, bc)
	}
	lc.mu.Unlock()
	for _, bc := range conns {
		_ = bc.CloseSocket() // the socket only: the owner keeps bc's books
	}
	return len(conns)
}

// untrack takes bc out of its backend's open connections (closed).
func (bc *backendConn) untrack() {
	if bc.be != nil {
		bc.be.live.remove(bc)
	}
}

// silentCutter follows discovery's snapshots and cuts the connections of
// backends that stop answering probes.
type silentCutter struct {
	// timeout is health.timeout.
	timeout time.Duration
	group   *safego.Group
	stop    chan struct{}
	once    sync.Once
}

// startSilentCutter starts the cutter (Serve).
func (s *Server) startSilentCutter() {
	c := &silentCutter{timeout: s.cfg.Health.Timeout, group: safego.New(s.log), stop: make(chan struct{})}
	if s.health == nil || !s.cutter.CompareAndSwap(nil, c) {
		return
	}
	c.group.Go("silent backend cutter", func() { c.run(s.health, s.clusters, s.log) })
}

// stopSilentCutter stops the cutter and waits for it (idempotent).
func (s *Server) stopSilentCutter() {
	if c := s.cutter.Load(); c != nil {
		c.once.Do(func() { close(c.stop) })
		c.group.Wait()
	}
}

// run cuts, once per outage, the connections of each backend discovery
// found unreachable, until stop.
func (c *silentCutter) run(h *healthcheck.Observer, clusters map[string]*cluster, log hclog.Logger) {
	cutFor := map[string]bool{} // addr -> cut in this outage
	for {
		snap := h.Snapshot()
		for _, cl := range clusters {
			for addr, be := range *cl.backends.Load() {
				v := snap.Backend(addr)
				unreachable := v != nil && v.State == healthcheck.StateNotServing && !v.LastProbe.IsZero() && !v.Last.Reachable
				switch {
				case unreachable && !cutFor[addr]:
					cutFor[addr] = true
					if answers(addr, silentConfirm(c.timeout)) {
						log.Info("backend unreachable by discovery but it answered a connection: nothing cut", "backend", addr, "reason", v.Reason)
						continue
					}
					if n := be.live.cut(); n > 0 {
						log.Warn("backend unreachable by discovery: its connections are cut, statements on them fail", "backend", addr, "connections", n, "reason", v.Reason)
					}
				case !unreachable:
					delete(cutFor, addr)
				}
			}
		}
		select {
		case <-snap.Changed():
		case <-c.stop:
			return
		}
	}
}

// silentConfirm is how long the cutter waits for a backend's greeting
// before it believes discovery: twice health.timeout, at least 2 s.
func silentConfirm(probeTimeout time.Duration) time.Duration {
	return max(2*probeTimeout, 2*time.Second)
}

// answers reports whether the server at addr sends a first byte on a new
// connection within d.
func answers(addr string, d time.Duration) bool {
	nc, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return false
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	n, _ := nc.Read(b[:])
	return n == 1
}
