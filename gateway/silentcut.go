package gateway

import (
	"sync"

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
// probes) keeps its statements.

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
	group *safego.Group
	stop  chan struct{}
	once  sync.Once
}

// startSilentCutter starts the cutter (Serve).
func (s *Server) startSilentCutter() {
	c := &silentCutter{group: safego.New(s.log), stop: make(chan struct{})}
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
