package gateway

import (
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
				Used: be.budget.Used(), Limit: be.budget.Limit(), Probes: probeConns,
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
// together (fleet.Budgeted); an unknown backend is ignored (a reload
// removed it meanwhile).
func (s *Server) SetBackendLimit(cluster, backend string, limit int) {
	c := s.clusters[cluster]
	if c == nil {
		return
	}
	if be := c.backend(backend); be != nil {
		be.budget.SetLimit(limit)
	}
}
