package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/directgate/directgate/internal/httpserve"
)

// HTTPHandler serves the gateway's HTTP endpoints on a mux of its own:
//   - /healthz answers 200 while the process serves, 503 once it shuts down;
//   - /readyz answers 200 when every cluster has a primary and the gateway
//     is not shutting down, else 503 with the reasons;
//   - /metrics is the Prometheus exposition of the server's own registry;
//   - /debug/status is a page with every backend's role, state, lag,
//     latency and pools, and sessions and pins (?format=json: the same
//     data as JSON);
//   - /debug/health gives discovery's latest snapshot (roles, states, lag,
//     probe and statement latency per backend) and /debug/pins the session
//     and pin counters, as JSON.
//
// With http.token set, every endpoint but /healthz, /readyz and (with
// http.public_metrics) /metrics answers 401 without "Authorization:
// Bearer <token>".
func (s *Server) HTTPHandler() http.Handler {
	mux := s.routes()
	if s.cfg != nil {
		return httpserve.RequireToken(mux, s.cfg.HTTP)
	}
	return mux
}

// routes is the mux of every endpoint.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", s.serveReadyz)
	mux.HandleFunc("/debug/status", s.serveStatus)
	mux.HandleFunc("/debug/queries", s.serveQueries) // query digests (insight_views.go)
	if s.metrics != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{
			ErrorLog:      httpserve.PromLogger{Log: s.log},
			ErrorHandling: promhttp.ContinueOnError,
		}))
	} else {
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "metrics are not set up on this server", http.StatusNotFound)
		})
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.closing() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/debug/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.healthView())
	})
	mux.HandleFunc("/debug/pins", func(w http.ResponseWriter, r *http.Request) {
		sessions, pinned := s.SessionStats()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"sessions":                 sessions,
			"sessions_pinned_by_state": pinned,
			"pins_by_reason":           s.PinStats(),
		})
	})
	return mux
}

// healthView is the JSON shape of /debug/health.
type healthView struct {
	Round    uint64              `json:"round"`
	Time     time.Time           `json:"time"`
	Clusters []clusterHealthView `json:"clusters"`
	// Statements refused since start: in split brain, and for want of a
	// primary within failover_buffer.
	SplitBrainRefusals uint64 `json:"split_brain_refusals"`
	NoPrimaryFailures  uint64 `json:"no_primary_failures"`
}

type clusterHealthView struct {
	Name            string              `json:"name"`
	Primary         string              `json:"primary"`
	NoPrimaryReason string              `json:"no_primary_reason,omitempty"`
	SplitBrain      bool                `json:"split_brain"`
	Replicas        []string            `json:"replicas"`
	Backends        []backendHealthView `json:"backends"`
}

type backendHealthView struct {
	Addr            string    `json:"addr"`
	State           string    `json:"state"`
	Reason          string    `json:"reason,omitempty"`
	Since           time.Time `json:"since"`
	Role            string    `json:"role"`
	ReadOnly        bool      `json:"read_only"`
	ServerID        uint32    `json:"server_id"`
	Version         string    `json:"version,omitempty"`
	LagSeconds      *float64  `json:"lag_seconds"`
	ReplicationNote string    `json:"replication_note,omitempty"`
	ProbeMillis     float64   `json:"probe_ms"`
	ScoreMillis     float64   `json:"score_ms"`
	InFlight        int64     `json:"in_flight"`
}

func (s *Server) healthView() healthView {
	snap := s.health.Snapshot()
	v := healthView{Round: snap.Round, Time: snap.Time,
		SplitBrainRefusals: s.refusals.splitBrain.Load(), NoPrimaryFailures: s.refusals.noPrimary.Load()}
	for _, name := range s.clusterNames {
		cv := clusterHealthView{Name: name, Replicas: []string{}}
		if c := snap.Cluster(name); c != nil {
			cv.Primary, cv.NoPrimaryReason, cv.SplitBrain = c.Primary, c.NoPrimaryReason, c.SplitBrain
			cv.Replicas = append(cv.Replicas, c.Replicas...)
			for _, addr := range c.Backends {
				b := snap.Backends[addr]
				bv := backendHealthView{
					Addr: addr, State: b.State.String(), Reason: b.Reason, Since: b.Since, Role: b.Role.String(),
					ReadOnly: b.Last.ReadOnly, ServerID: b.Last.ServerID, Version: b.Last.Version,
					ReplicationNote: b.Last.ReplicationNote, ProbeMillis: ms(b.Last.RTT),
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
