package gateway

import "testing"

func TestHoldProcessors(t *testing.T) {
	for _, c := range []struct {
		loops, procs int
		godebug      string
		want         bool
	}{
		{0, 2, "", false},
		{1, 2, "", true},
		{2, 2, "", false}, // nothing left for the other goroutines
		{3, 8, "", true},
		{1, 1, "", false},
		{1, 2, "gctrace=1,asyncpreemptoff=1", false}, // no signal would free a held processor
		{1, 2, "asyncpreemptoff=0", true},
	} {
		if got := holdProcessors(c.loops, c.procs, c.godebug); got != c.want {
			t.Errorf("holdProcessors(%d loops, GOMAXPROCS %d, GODEBUG %q) = %v, want %v", c.loops, c.procs, c.godebug, got, c.want)
		}
	}
}
