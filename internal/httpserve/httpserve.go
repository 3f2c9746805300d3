// Package httpserve holds what the gateway's and the owner's HTTP
// endpoints share: the listener (HTTPS with http.cert and http.key), the
// server's timeouts, the token check of http.token, and the logger of
// failed metrics scrapes. Each process keeps its own mux and registry.
package httpserve

import (
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/config"
)

// Listen opens the HTTP listener on addr: TLS when hc has a certificate
// and key.
func Listen(addr string, hc config.HTTP) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listen %s: %w", addr, err)
	}
	if hc.Cert == "" {
		return ln, nil
	}
	cert, err := tls.LoadX509KeyPair(hc.Cert, hc.Key)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("config: http.cert/http.key: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// NewServer serves h with timeouts: a client that trickles its request,
// never reads the answer or keeps an idle connection open is cut.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}

// RequireToken returns next unchanged without http.token; with it, a
// request goes through to next when it carries "Authorization: Bearer
// <token>" or asks for one of the endpoints open to all (/healthz,
// /readyz and, with http.public_metrics, /metrics), and gets 401
// otherwise.
func RequireToken(next http.Handler, hc config.HTTP) http.Handler {
	if hc.Token == "" {
		return next
	}
	want := []byte("Bearer " + hc.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz", r.URL.Path == "/readyz", r.URL.Path == "/metrics" && hc.PublicMetrics:
		case subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1:
			w.Header().Set("WWW-Authenticate", `Bearer realm="directgate"`)
			http.Error(w, "401 unauthorized: send http.token as \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// PromLogger logs the errors of a scrape (a collector that failed) at
// warning level; it is promhttp.HandlerOpts.ErrorLog.
type PromLogger struct{ Log hclog.Logger }

// Println implements promhttp.Logger.
func (l PromLogger) Println(v ...any) {
	if l.Log != nil {
		l.Log.Warn("metrics scrape: " + fmt.Sprint(v...))
	}
}

// WriteReadiness answers a /readyz request: 200 "ready" when there is no
// reason not to be, else 503 "not ready:" and the reasons, one a line.
func WriteReadiness(w http.ResponseWriter, reasons []string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(reasons) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:")
		for _, r := range reasons {
			fmt.Fprintln(w, r)
		}
		return
	}
	fmt.Fprintln(w, "ready")
}
