package gateway

import (
	"context"
	"sync"

	"github.com/directgate/directgate/fleet"
	"github.com/directgate/directgate/pools"
)

// BackendLoads reports every backend's connections and demand, for the
// fleet's connection budget (fleet.Budgeted).
func (s *Server) BackendLoads() []fleet.BackendLoad {
	var out []fleet.BackendLoad
	for _, name := range s.clusterNames {
		c := s.clusters[name]
		max := c.conf.Load().MaxBackendConnections
		for _, be := range *c.backends.Load() {
			l := fleet.BackendLoad{
				Cluster: name, Backend: be.addr, Max: max,
				Used: be.budget.Used(), Limit: be.budget.Limit(),
				Probes: probeConns, ProbesHeld: be.probeRoom.isOpen(),
			}
			be.eachPool(func(_ poolKey, p *pools.Pool[*backendConn]) {
				st := p.Stat()
				l.InUse += st.InUse
				l.Waiting += st.Waiting
			})
			out = append(out, l)
		}
	}
	return out
}

// SetBackendLimit sets the most connections the pools of a backend hold
// together and, with probes, lets discovery open its probe connection
// (fleet.Budgeted); an unknown backend is ignored (a reload removed it
// meanwhile).
func (s *Server) SetBackendLimit(cluster, backend string, limit int, probes bool) {
	c := s.clusters[cluster]
	if c == nil {
		return
	}
	be := c.backend(backend)
	if be == nil {
		return
	}
	be.budget.SetLimit(limit)
	if probes && be.probeRoom.allow() && s.health != nil {
		s.health.Refresh() // a round that found no room probes now
	}
}

// probeRoom says whether discovery may open its probe connection to a
// backend. It is always open but under a fleet-wide cap
// (max_backend_connections shared by a fleet), where it opens once the
// fleet's budget counts the probe in this gateway's share: a gateway that
// joins a fleet whose cap is handed out waits for the others to make room
// instead of going one connection over.
type probeRoom struct {
	mu     sync.Mutex
	open   bool
	opened chan struct{} // closed when the room opens
}

func newProbeRoom(open bool) *probeRoom {
	r := &probeRoom{open: open, opened: make(chan struct{})}
	if open {
		close(r.opened)
	}
	return r
}

// allow opens the room and reports whether it was closed until now. It
// is never closed again: once the budget counts the probe, it stays
// counted.
func (r *probeRoom) allow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open {
		return false
	}
	r.open = true
	close(r.opened)
	return true
}

func (r *probeRoom) isOpen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open
}

// wait waits until the room is open or ctx ends, and reports whether it
// is open.
func (r *probeRoom) wait(ctx context.Context) bool {
	r.mu.Lock()
	open, opened := r.open, r.opened
	r.mu.Unlock()
	if open {
		return true
	}
	select {
	case <-opened:
		return true
	case <-ctx.Done():
		return false
	}
}
