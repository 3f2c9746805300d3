package balance

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestLoadScoreFollowsRecentLatency(t *testing.T) {
	var l Load
	now := time.Now()
	if l.Score() != 0 {
		t.Fatal("fresh load has a score")
	}
	l.Begin()
	l.End(now, now.Add(10*time.Millisecond))
	if l.Score() != 10*time.Millisecond || l.InFlight() != 0 {
		t.Fatalf("first sample: %v, in flight %d", l.Score(), l.InFlight())
	}
	// 1000 samples of 1ms over 10 seconds: the 10ms sample is forgotten.
	for i := range 1000 {
		at := now.Add(time.Duration(i+1) * 10 * time.Millisecond)
		l.Begin()
		l.End(at.Add(-time.Millisecond), at)
	}
	if s := l.Score(); s < 990*time.Microsecond || s > 1100*time.Microsecond {
		t.Fatalf("score after 10s of 1ms statements: %v", s)
	}
	// One slow outlier barely moves a busy backend's score.
	at := now.Add(10*time.Second + time.Millisecond)
	l.End(at.Add(-time.Second), at)
	if s := l.Score(); s > 2*time.Millisecond {
		t.Fatalf("one 1s outlier 1ms after the last sample moved the score to %v", s)
	}
}

func TestKeep(t *testing.T) {
	p := Policy{Stickiness: 1.5}
	ms := time.Millisecond
	cands := []Candidate{{Addr: "a", Score: 2 * ms}, {Addr: "b", Score: 2500 * time.Microsecond}, {Addr: "c", Score: 10 * ms}, {Addr: "d"}}
	for _, tc := range []struct {
		cur  int
		keep bool
	}{{0, true}, {1, true}, {2, false}, {3, true}} {
		if got := p.Keep(cands[tc.cur], cands); got != tc.keep {
			t.Errorf("Keep(%s) = %v, want %v", cands[tc.cur].Addr, got, tc.keep)
		}
	}
	// Sub-millisecond differences never move a session.
	tiny := []Candidate{{Addr: "a", Score: 100 * time.Microsecond}, {Addr: "b", Score: 400 * time.Microsecond}}
	if !p.Keep(tiny[1], tiny) {
		t.Error("moved over a 300µs difference")
	}
}

func TestPickSpreadsByLatency(t *testing.T) {
	p := Policy{Stickiness: 1.5}
	r := rand.New(rand.NewPCG(1, 2))
	ms := time.Millisecond
	cands := []Candidate{{Addr: "a", Score: ms, RTT: 100 * time.Microsecond}, {Addr: "b", Score: ms, RTT: 100 * time.Microsecond}, {Addr: "slow", Score: 10 * ms}}
	counts := map[string]int{}
	for range 10000 {
		counts[cands[p.Pick(cands, r.Float64)].Addr]++
	}
	t.Logf("picks: %v", counts)
	if counts["a"] < 4000 || counts["b"] < 4000 {
		t.Errorf("equal replicas not shared evenly: %v", counts)
	}
	if counts["slow"] == 0 || counts["slow"] > 1000 {
		t.Errorf("slow replica got %d of 10000 picks, want some but few", counts["slow"])
	}
	if p.Pick(nil, r.Float64) != -1 || p.Pick(cands[:1], r.Float64) != 0 {
		t.Error("empty or single candidate list")
	}
}

func TestPickAvoidsHotBackends(t *testing.T) {
	p := Policy{Stickiness: 1.5, HotLimit: 10}
	r := rand.New(rand.NewPCG(3, 4))
	cands := []Candidate{{Addr: "hot", InFlight: 100}, {Addr: "cool", InFlight: 2}}
	counts := map[string]int{}
	for range 10000 {
		counts[cands[p.Pick(cands, r.Float64)].Addr]++
	}
	// hot is drawn half the time and kept with probability 10/100.
	if counts["hot"] < 300 || counts["hot"] > 800 {
		t.Errorf("hot backend got %d of 10000 picks, want about 500", counts["hot"])
	}
	allHot := []Candidate{{Addr: "x", InFlight: 1000}, {Addr: "y", InFlight: 500}}
	ys := 0
	for range 1000 {
		if p.Pick(allHot, r.Float64) == 1 {
			ys++
		}
	}
	if ys < 600 {
		t.Errorf("all hot: the less loaded backend got %d of 1000 picks", ys)
	}
}

func BenchmarkPick(b *testing.B) {
	p := Policy{Stickiness: 1.5, HotLimit: 64}
	cands := []Candidate{{Addr: "a", Score: time.Millisecond}, {Addr: "b", Score: 2 * time.Millisecond}, {Addr: "c", Score: time.Millisecond}}
	b.ReportAllocs()
	for b.Loop() {
		p.Pick(cands, nil)
	}
}

// BenchmarkLoad is the per-statement cost of load accounting, from many
// sessions on one backend at once.
func BenchmarkLoad(b *testing.B) {
	var l Load
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			start := time.Now()
			l.Begin()
			l.End(start, time.Now())
		}
	})
}
