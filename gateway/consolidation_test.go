package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// Statements that may change data move the write count; reads, USE,
// BEGIN, ROLLBACK and SETs of literals do not.
func TestMayWrite(t *testing.T) {
	c, err := querypath.New()
	if err != nil {
		t.Fatal(err)
	}
	for sql, want := range map[string]bool{
		"SELECT * FROM t":                   false,
		"USE db":                            false,
		"BEGIN":                             false,
		"ROLLBACK":                          false,
		"SET time_zone = '+00:00'":          false,
		"SET sql_mode = CONCAT(@@sql_mode)": true,
		"SET @x = f()":                      true,
		"SELECT 1; SELECT 2":                true,
		"UPDATE t SET n = 1":                true,
		"INSERT INTO t VALUES (1)":          true,
		"COMMIT":                            true,
		"CALL p()":                          true,
		"SELECT * FROM t FOR UPDATE":        true,
		"DO f()":                            true,
	} {
		if got := mayWrite(c.Classify(sql)); got != want {
			t.Errorf("mayWrite(%q) = %v, want %v", sql, got, want)
		}
	}
}

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

// The protection row tells the mode and the counters.
func TestConsolidationRow(t *testing.T) {
	var co consolidator
	co.waiting.Store(2)
	co.followed.Store(7)
	co.leaders.Store(3)
	co.tooLarge.Store(1)
	conf := &config.Cluster{}
	rows := co.protectionRows("main", conf)
	if len(rows) != 1 || rows[0].Mode != "off" || rows[0].Active != 2 || rows[0].Total != 7 || !strings.Contains(rows[0].Detail, "3 leaders with followers") || !strings.Contains(rows[0].Detail, "1 too large") {
		t.Fatalf("rows %+v", rows)
	}
	conf.Consolidation.Enabled = true
	if rows := co.protectionRows("main", conf); rows[0].Mode != "on" {
		t.Fatalf("mode %q", rows[0].Mode)
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
			if co := &srv.clusters["main"].consol; co.followed.Load() != 0 {
				b.Fatal("a follower")
			}
		})
	}
}
