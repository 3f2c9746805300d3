package gateway

import (
	"net/http"
	"time"

	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/ops"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/queryrules"
	"github.com/directgate/directgate/querystats"
	"github.com/directgate/directgate/statuspage"
	"github.com/prometheus/client_golang/prometheus"
)

// HTTPHandler serves the gateway's HTTP endpoints (ops.Handler): the
// operator surfaces read the server through opsGateway.
func (s *Server) HTTPHandler() http.Handler {
	if s.cfg != nil {
		return ops.Handler((*opsGateway)(s), &s.cfg.HTTP, s.log)
	}
	return ops.Handler((*opsGateway)(s), nil, s.log)
}

// opsGateway is the server as its operator surfaces read it
// (ops.Gateway): read-only views, each a snapshot.
type opsGateway Server

var _ ops.Gateway = (*opsGateway)(nil)

// Closing implements ops.Gateway.
func (g *opsGateway) Closing() bool { return (*Server)(g).closing() }

// Readiness implements ops.Gateway.
func (g *opsGateway) Readiness() (bool, []string) { return (*Server)(g).readiness() }

// StatusView implements ops.Gateway.
func (g *opsGateway) StatusView(top string) (statuspage.View, error) {
	s := (*Server)(g)
	if top == "" {
		top = "total_time"
	}
	order, ok := querystats.ParseOrder(top)
	if !ok {
		return statuspage.View{}, errBadTop
	}
	v := s.statusView()
	v.TopOrder = top
	v.Top, v.TopEnabled = s.topStatements(order)
	return v, nil
}

// PinCounts implements ops.Gateway.
func (g *opsGateway) PinCounts() (sessions, pinned int64, byReason map[string]int64) {
	s := (*Server)(g)
	sessions, pinned = s.SessionStats()
	return sessions, pinned, s.PinStats()
}

// Registry implements ops.Gateway.
func (g *opsGateway) Registry() *prometheus.Registry {
	if g.metrics == nil {
		return nil
	}
	return g.metrics.reg
}

// QueryDigests implements ops.Gateway.
func (g *opsGateway) QueryDigests(o querystats.Order, limit int) ([]querystats.Digest, uint64) {
	return (*Server)(g).QueryDigests(o, limit)
}

// QueryStatsOn implements ops.Gateway.
func (g *opsGateway) QueryStatsOn() bool { return g.insight.store.Load() != nil }

// QueryRules implements ops.Gateway.
func (g *opsGateway) QueryRules() []*queryrules.Rule { return (*Server)(g).QueryRules() }

// ClientsOpen implements ops.Gateway.
func (g *opsGateway) ClientsOpen() int64 {
	if g.metrics == nil {
		return 0
	}
	return g.metrics.clientsOpen.Load()
}

// Refusals implements ops.Gateway.
func (g *opsGateway) Refusals() (splitBrain, noPrimary uint64) {
	return g.refusals.splitBrain.Load(), g.refusals.noPrimary.Load()
}

// SessionCounts implements ops.Gateway.
func (g *opsGateway) SessionCounts() (map[string]int64, int64) {
	sc := countSessions((*Server)(g).Sessions())
	return sc.pinned, sc.inTxn
}

// Discovery implements ops.Gateway.
func (g *opsGateway) Discovery() (*healthcheck.Snapshot, healthcheck.Stats, bool) {
	if g.health == nil {
		return nil, healthcheck.Stats{}, false
	}
	return g.health.Snapshot(), g.health.Stats(), true
}

// ClusterNames implements ops.Gateway.
func (g *opsGateway) ClusterNames() []string { return g.clusterNames }

// BackendLoads implements ops.Gateway.
func (g *opsGateway) BackendLoads() []ops.BackendLoad {
	var out []ops.BackendLoad
	for _, name := range g.clusterNames {
		for addr, be := range *g.clusters[name].backends.Load() {
			out = append(out, ops.BackendLoad{Cluster: name, Addr: addr, InFlight: be.load.InFlight(), Score: be.load.Score()})
		}
	}
	return out
}

// PoolStats implements ops.Gateway.
func (g *opsGateway) PoolStats() []ops.PoolStat { return (*Server)(g).PoolStats() }

// Sessions implements ops.Gateway.
func (g *opsGateway) Sessions() []ops.SessionInfo { return (*Server)(g).Sessions() }

// Protections implements ops.Gateway.
func (g *opsGateway) Protections() []protect.Row { return (*Server)(g).Protections() }

// HealthView implements ops.Gateway: discovery's latest snapshot with
// each backend's load.
func (g *opsGateway) HealthView() ops.HealthView {
	s := (*Server)(g)
	snap := s.health.Snapshot()
	v := ops.HealthView{Round: snap.Round, Time: snap.Time,
		SplitBrainRefusals: s.refusals.splitBrain.Load(), NoPrimaryFailures: s.refusals.noPrimary.Load()}
	for _, name := range s.clusterNames {
		cv := ops.ClusterHealth{Name: name, Replicas: []string{}}
		if c := snap.Cluster(name); c != nil {
			cv.Primary, cv.NoPrimaryReason, cv.SplitBrain = c.Primary, c.NoPrimaryReason, c.SplitBrain
			cv.Replicas = append(cv.Replicas, c.Replicas...)
			for _, addr := range c.Backends {
				b := snap.Backends[addr]
				bv := ops.BackendHealth{
					Addr: addr, State: b.State.String(), Reason: b.Reason, Since: b.Since, Role: b.Role.String(),
					ReadOnly: b.Last.ReadOnly, ServerID: b.Last.ServerID, Version: b.Last.Version,
					ReplicationNote: b.Last.ReplicationNote, ProbeMillis: ms(b.Last.RTT), Slow: b.Slow,
				}
				if b.Last.LagKnown {
					lag := b.Last.Lag.Seconds()
					bv.LagSeconds = &lag
				}
				if be := s.clusters[name].backend(addr); be != nil {
					bv.ScoreMillis, bv.InFlight = ms(be.load.Score()), be.load.InFlight()
				}
				cv.Backends = append(cv.Backends, bv)
			}
		}
		v.Clusters = append(v.Clusters, cv)
	}
	return v
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return ops.Millis(d) }
