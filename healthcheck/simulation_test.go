package healthcheck

import (
	"fmt"
	"testing"
	"time"
)

// TestSimulation1000Backends probes 1,000 fake backends whose probes take
// 20 ms each, with BatchSize 100. It asserts counts (never more than
// BatchSize probes in flight, every backend probed exactly once per round)
// and logs the round wall time against the ideal ceil(N/BatchSize) × probe
// time, without asserting a tight clock bound.
func TestSimulation1000Backends(t *testing.T) {
	const (
		n         = 1000
		batch     = 100
		probeTime = 20 * time.Millisecond
		rounds    = 3
	)
	p := newFakeProber()
	p.delay = probeTime
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Addr: fmt.Sprintf("10.0.%d.%d:3306", i/250, i%250), Cluster: fmt.Sprintf("c%d", i/10)}
		r := replicaOK
		if i%10 == 0 {
			r = primaryOK
		}
		p.set(bs[i].Addr, r)
	}
	o, err := newObserver(Config{BatchSize: batch, Timeout: 5 * time.Second, Prober: p, Backends: staticBackends(bs...)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()

	ideal := time.Duration((n+batch-1)/batch) * probeTime
	for round := 1; round <= rounds; round++ {
		p.peak.Store(0)
		start := time.Now()
		o.runRound()
		wall := time.Since(start)
		counts := p.takeCounts()
		peak := p.peak.Load()
		t.Logf("round %d: %d backends, batch %d, probe %v: wall %v (ideal %v, ratio %.2f), peak in flight %d",
			round, n, batch, probeTime, wall, ideal, float64(wall)/float64(ideal), peak)
		if peak > batch {
			t.Errorf("round %d: %d probes in flight, limit %d", round, peak, batch)
		}
		if len(counts) != n {
			t.Errorf("round %d: %d backends probed, want %d", round, len(counts), n)
		}
		for addr, c := range counts {
			if c != 1 {
				t.Errorf("round %d: %s probed %d times", round, addr, c)
			}
		}
		if wall < ideal {
			t.Errorf("round %d: wall %v below the ideal %v: the batch limit is not applied", round, wall, ideal)
		}
		if st := o.Stats(); st.LastRoundDuration <= 0 || st.LastRoundDuration > wall || st.ProbesInFlight != 0 {
			t.Errorf("round %d: stats %+v after a round of %v", round, st, wall)
		}
	}
	if st := o.Stats(); st.Probes != uint64(n*rounds) || st.ProbeFailures != 0 {
		t.Errorf("stats %+v, want %d probes, none failed", st, n*rounds)
	}
	s := o.Snapshot()
	if s.Round != rounds {
		t.Errorf("snapshot round %d, want %d", s.Round, rounds)
	}
	serving, primaries := 0, 0
	for _, v := range s.Backends {
		if v.State == StateServing {
			serving++
		}
	}
	for _, c := range s.Clusters {
		if c.Primary != "" {
			primaries++
		}
	}
	if serving != n || primaries != n/10 {
		t.Errorf("after %d rounds: %d serving, %d primaries; want %d, %d", rounds, serving, primaries, n, n/10)
	}

	// Reading the snapshot is a lock-free pointer load.
	start := time.Now()
	for range 1_000_000 {
		_ = o.Snapshot().Cluster("c7").Primary
	}
	t.Logf("1e6 Snapshot().Cluster().Primary reads: %v", time.Since(start))
}

// TestSimulationRunningLoop runs the same fleet through the real loop to
// show rounds follow each other on schedule with the batch limit held.
func TestSimulationRunningLoop(t *testing.T) {
	const n, batch = 1000, 100
	p := newFakeProber()
	p.delay = 20 * time.Millisecond
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Addr: fmt.Sprintf("b%d:3306", i), Cluster: "c"}
		p.set(bs[i].Addr, replicaOK)
	}
	o, err := New(Config{Interval: 300 * time.Millisecond, BatchSize: batch, Prober: p, Backends: staticBackends(bs...)})
	if err != nil {
		t.Fatal(err)
	}
	// A reader walks the snapshot while rounds are published (for -race).
	stop, readerDone := make(chan struct{}), make(chan int)
	go func() {
		reads := 0
		for {
			select {
			case <-stop:
				readerDone <- reads
				return
			default:
			}
			if c := o.Snapshot().Cluster("c"); c != nil {
				_ = len(c.Replicas)
			}
			reads++
		}
	}()
	start := time.Now()
	waitFor(t, func() bool { return o.Snapshot().Round >= 3 })
	elapsed := time.Since(start)
	close(stop)
	t.Logf("concurrent snapshot reads: %d", <-readerDone)
	o.Close()
	total, peak := p.total.Load(), p.peak.Load()
	t.Logf("3 rounds through the loop (interval 300ms): %v, %d probes, peak in flight %d", elapsed, total, peak)
	if peak > batch {
		t.Errorf("peak in flight %d > %d", peak, batch)
	}
	if s := o.Snapshot(); len(s.Cluster("c").Replicas) != n {
		t.Errorf("serving replicas %d, want %d", len(s.Cluster("c").Replicas), n)
	}
}
