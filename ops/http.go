package ops

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/httpserve"
	"github.com/directgate/directgate/statuspage"
	"github.com/hashicorp/go-hclog"
)

// Handler serves the gateway's HTTP endpoints on a mux of its own:
//   - /healthz answers 200 while the process serves, 503 once it shuts down;
//   - /readyz answers 200 when every cluster has a primary and the gateway
//     is not shutting down, else 503 with the reasons;
//   - /metrics is the Prometheus exposition of the gateway's own registry;
//   - /debug/status is a page with every backend's role, state, lag,
//     latency and pools, the top statements, sessions and pins
//     (?format=json: the same data as JSON);
//   - /debug/health gives discovery's latest snapshot (roles, states, lag,
//     probe and statement latency per backend), /debug/pins the session
//     and pin counters, /debug/queries the query digests, as JSON.
//
// With http.token set (httpConf), every endpoint but /healthz, /readyz and
// (with http.public_metrics) /metrics answers 401 without "Authorization:
// Bearer <token>". log gets what cannot be served.
func Handler(g Gateway, httpConf *config.HTTP, log hclog.Logger) http.Handler {
	mux := routes(g, log)
	if httpConf != nil {
		return httpserve.RequireToken(mux, *httpConf)
	}
	return mux
}

// routes is the mux of every endpoint.
func routes(g Gateway, log hclog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		_, reasons := g.Readiness()
		httpserve.WriteReadiness(w, reasons)
	})
	mux.HandleFunc("/debug/status", func(w http.ResponseWriter, r *http.Request) {
		v, err := g.StatusView(r.URL.Query().Get("top"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		statuspage.Serve(w, r, v, log)
	})
	mux.HandleFunc("/debug/queries", func(w http.ResponseWriter, r *http.Request) { serveQueries(g, w, r) })
	if reg := g.Registry(); reg != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			ErrorLog:      httpserve.PromLogger{Log: log},
			ErrorHandling: promhttp.ContinueOnError,
		}))
	} else {
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "metrics are not set up on this server", http.StatusNotFound)
		})
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if g.Closing() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/debug/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(g.HealthView())
	})
	mux.HandleFunc("/debug/pins", func(w http.ResponseWriter, r *http.Request) {
		sessions, pinned, byReason := g.PinCounts()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"sessions":                 sessions,
			"sessions_pinned_by_state": pinned,
			"pins_by_reason":           byReason,
		})
	})
	return mux
}
