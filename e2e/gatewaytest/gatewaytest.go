// Package gatewaytest starts gateways inside a test process, for the
// end-to-end suites (e2e, e2e/faults): one config, one shutdown, one log
// level for all of them.
package gatewaytest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/gateway"
	"github.com/hashicorp/go-hclog"
)

// LogLevel is the log level of the gateways tests start: the E2E_LOG
// environment variable, else warn.
func LogLevel() string {
	if l := os.Getenv("E2E_LOG"); l != "" {
		return l
	}
	return "warn"
}

// Start starts an in-process gateway from a YAML config, logging as
// name to standard error, and shuts it down when the test ends.
func Start(t testing.TB, name, yaml string) *gateway.Server {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(cfg, hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.LevelFromString(LogLevel()), Output: os.Stderr}))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ServeUntilCleanup(t, srv.Serve, srv.Shutdown)
	return srv
}

// ServeUntilCleanup runs serve on a goroutine until the test ends, then
// shuts it down (10 s at most) and waits for serve to return.
func ServeUntilCleanup(t testing.TB, serve func() error, shutdown func(context.Context) error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = shutdown(ctx)
		<-done
	})
}
