package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// HTTPHandler serves the gateway's HTTP endpoints on a mux of its own:
// /healthz answers 200 while the process serves; /debug/pins gives the
// session and pin counters as JSON.
func (s *Server) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.closing.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
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
