package gateway

import (
	"fmt"
	"net/http"
)

// HTTPHandler serves the gateway's HTTP endpoints on a mux of its own:
// /healthz answers 200 while the process serves.
func (s *Server) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.closing.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
