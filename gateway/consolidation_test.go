package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/wire"
)

// Equal tracker filters give equal signatures, whatever their pointers.
func TestTrackSignature(t *testing.T) {
	a, b := &Session{}, &Session{}
	a.trackers, b.trackers = wire.DefaultTrackFilter(), wire.DefaultTrackFilter()
	if a.trackSignature() != b.trackSignature() {
		t.Fatal("equal filters, different signatures")
	}
	b.trackers = b.trackers.With("session_track_schema", "OFF")
	if a.trackSignature() == b.trackSignature() {
		t.Fatal("different filters, equal signatures")
	}
}

// BenchmarkConsolidationLeader is a read through a fake backend (net.Pipe)
// with consolidation off, and on with nobody following: what a leader
// pays for its key and its copy.
func BenchmarkConsolidationLeader(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprint("on=", on), func(b *testing.B) {
			f := &fakeServer{addr: "fake:1", answer: func(_ int, cmd []byte) [][]byte { return resultSet(0, "row-1") }}
			srv := testServer(b, []string{f.addr}, false, f.dial, scriptProber{primary: f.addr}, time.Hour)
			conf := *srv.clusters["main"].conf.Load()
			conf.Consolidation = config.Consolidation{Enabled: config.Switch(on), MaxResultBytes: 1 << 20}
			srv.clusters["main"].conf.Store(&conf)
			benchPointSelect(b, srv)
			if r := srv.clusters["main"].consol.Rows(&conf)[0]; r.Total != 0 {
				b.Fatal("a follower")
			}
		})
	}
}

// BenchmarkQueryStats is a point select through a fake backend
// (net.Pipe), dispatch to the end of its answer, with query digests off
// and on: what query_stats costs a statement.
func BenchmarkQueryStats(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprint("on=", on), func(b *testing.B) {
			f := &fakeServer{addr: "fake:1", answer: func(_ int, cmd []byte) [][]byte { return resultSet(0, "row-1") }}
			srv := testServer(b, []string{f.addr}, false, f.dial, scriptProber{primary: f.addr}, time.Hour)
			cfg := &config.Config{QueryStats: config.QueryStats{Enabled: &on}}
			cfg.ApplyDefaults()
			if err := srv.insight.configure(cfg); err != nil {
				b.Fatal(err)
			}
			benchPointSelect(b, srv)
		})
	}
}

// benchPointSelect runs a point select through a session of srv, dispatch
// to the end of its answer, b.N times.
func benchPointSelect(b *testing.B, srv *Server) {
	ss, nc := sessionOf(srv, 0)
	p := append([]byte{wire.ComQuery}, "SELECT c FROM sbtest1 WHERE id = 5"...)
	b.ReportAllocs()
	for b.Loop() {
		ss.client.SetSeq(1)
		if err := ss.dispatch(p); err != nil {
			b.Fatal(err)
		}
		nc.mu.Lock()
		nc.out.Reset()
		nc.mu.Unlock()
	}
}
