// Package faultproxy puts a fault-injecting TCP proxy on one link of the
// e2e harness (gateway to MariaDB, gateway to owner, owner to MariaDB,
// gateway or owner to etcd): Shopify's toxiproxy, run in the test
// process. A Link forwards 127.0.0.1:<port> to its upstream until a fault
// is added: silence (data dropped, connections kept open), latency, a cut
// after so many bytes, a reset, or the link down (connections closed,
// new ones refused). Faults apply per direction: Down is what travels
// from upstream to the client of the link, Up the other way.
package faultproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Direction is the way the data a fault acts on travels.
type Direction string

const (
	// Down is from the upstream server to the link's client (results).
	Down Direction = "downstream"
	// Up is from the link's client to the upstream server (commands).
	Up Direction = "upstream"
)

// Link is one proxied link. Its methods are safe for concurrent use.
type Link struct {
	name  string
	proxy *toxiproxy.Proxy

	mu     sync.Mutex
	faults []string
}

// New starts a link named name to upstream (host:port) on a free
// loopback port; it stops with the test.
func New(t testing.TB, name, upstream string) *Link {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("fault proxy %s: %v", name, err)
	}
	t.Cleanup(p.Stop)
	return &Link{name: name, proxy: p}
}

// Addr is the address clients of the link dial.
func (l *Link) Addr() string { return l.proxy.Listen }

// Name is the link's name.
func (l *Link) Name() string { return l.name }

// add adds a toxic of kind with attributes on dir.
func (l *Link) add(kind string, dir Direction, attrs map[string]any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := fmt.Sprintf("%s_%s_%d", kind, dir, len(l.faults))
	body, err := json.Marshal(map[string]any{"name": name, "type": kind, "stream": string(dir), "toxicity": 1.0, "attributes": attrs})
	if err != nil {
		return err
	}
	if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		return fmt.Errorf("fault proxy %s: %s: %w", l.name, kind, err)
	}
	l.faults = append(l.faults, name)
	return nil
}

// Silence drops all data on dir and keeps the connections open (a
// network that goes quiet without a reset: a blackhole).
func (l *Link) Silence(dir Direction) error {
	return l.add("timeout", dir, map[string]any{"timeout": 0})
}

// Latency delays the data on dir by ms milliseconds, ± jitter.
func (l *Link) Latency(dir Direction, ms, jitter int) error {
	return l.add("latency", dir, map[string]any{"latency": ms, "jitter": jitter})
}

// CutAfter closes each connection once bytes more bytes went through on
// dir: a stream cut midway.
func (l *Link) CutAfter(dir Direction, bytes int) error {
	return l.add("limit_data", dir, map[string]any{"bytes": bytes})
}

// Reset resets the connections (TCP RST) on their next data on dir.
func (l *Link) Reset(dir Direction) error {
	return l.add("reset_peer", dir, map[string]any{"timeout": 0})
}

// Clear removes every fault; the link forwards again.
func (l *Link) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.proxy.Toxics.ResetToxics(context.Background())
	l.faults = nil
}

// Faults lists the faults in force.
func (l *Link) Faults() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.faults...)
}
