package owner

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/httpserve"
)

// HTTPHandler serves the owner's HTTP endpoints (gateway owner
// --http-listen) on a mux of its own:
//   - /healthz answers 200 while the process serves, 503 once it shuts
//     down;
//   - /readyz answers 200 when the owner serves sequence and message
//     statements: it leads (or is the cluster's only owner), has a
//     primary, has read its table list and is not shutting down; else 503
//     with the reasons, one a line;
//   - /metrics is the Prometheus exposition of the owner's own registry.
//
// hc is the configuration's http section, read once: with http.token set,
// /metrics answers 401 without "Authorization: Bearer <token>" unless
// http.public_metrics.
func (o *Owner) HTTPHandler(hc config.HTTP) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if o.shutting.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", o.serveReadyz)
	mux.Handle("/metrics", promhttp.HandlerFor(o.metrics.reg, promhttp.HandlerOpts{
		ErrorLog:      httpserve.PromLogger{Log: o.log},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return httpserve.RequireToken(mux, hc)
}

// readiness reports whether the owner serves now, and if not, why.
func (o *Owner) readiness() (bool, []string) {
	var reasons []string
	if o.shutting.Load() {
		reasons = append(reasons, "shutting down")
	}
	if _, standby := o.leading(); standby != nil {
		leader, _ := o.lead.Leader()
		switch {
		case leader == "":
			reasons = append(reasons, "standby: no leader elected yet")
		case leader == o.listen:
			reasons = append(reasons, "standby: this owner's leadership lapsed; it campaigns again")
		default:
			reasons = append(reasons, "standby: "+leader+" leads")
		}
	}
	o.primMu.Lock()
	up, why := o.prim != nil, o.noPrimary
	o.primMu.Unlock()
	if !up {
		reasons = append(reasons, "no primary: "+why)
	}
	select {
	case <-o.discovered:
	default:
		reasons = append(reasons, "owner tables not read from the primary yet")
	}
	return len(reasons) == 0, reasons
}

// serveReadyz answers /readyz as the gateway's does.
func (o *Owner) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	_, reasons := o.readiness()
	httpserve.WriteReadiness(w, reasons)
}
