package protect

import (
	"testing"
	"time"

	"github.com/directgate/directgate/config"
)

// The chance is 0 at the limit, grows with the overload, falls with the
// priority, never passes 0.9, and is 0 for priority 100.
func TestShedChance(t *testing.T) {
	for _, c := range []struct {
		over     float64
		priority int
		want     float64
	}{
		{0, 0, 0},
		{0.1, 50, 0.05},
		{0.5, 50, 0.25},
		{1, 50, 0.5},
		{1, 0, 0.9},
		{1, 90, 0.1},
		{1, 100, 0},
		{50, 99, 0.5},
		{50, 100, 0},
		{50, 0, 0.9},
	} {
		if got := shedChance(c.over, c.priority); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("shedChance(%v, %d) = %v, want %v", c.over, c.priority, got, c.want)
		}
	}
}

// The overload is the excess over the limit exceeded most, as a fraction
// of that limit; a limit of 0 is off.
func TestShedOverload(t *testing.T) {
	cfg := config.Shedding{MaxInFlight: 40, MaxQueueWait: 100 * time.Millisecond}
	for _, c := range []struct {
		cfg    config.Shedding
		load   shedLoad
		over   float64
		reason shedReason
	}{
		{cfg, shedLoad{inFlight: 40, queueWait: 100 * time.Millisecond}, 0, shedInFlight},
		{cfg, shedLoad{inFlight: 50}, 0.25, shedInFlight},
		{cfg, shedLoad{inFlight: 50, queueWait: 150 * time.Millisecond}, 0.5, shedQueueWait},
		{cfg, shedLoad{inFlight: 80, queueWait: 150 * time.Millisecond}, 1, shedInFlight},
		{config.Shedding{}, shedLoad{inFlight: 1000, queueWait: time.Hour}, 0, shedInFlight},
		{config.Shedding{MaxQueueWait: time.Second}, shedLoad{inFlight: 1000, queueWait: 3 * time.Second}, 2, shedQueueWait},
	} {
		over, reason := shedOverload(c.cfg, c.load)
		if over != c.over || over > 0 && reason != c.reason {
			t.Errorf("shedOverload(%+v, %+v) = %v %v, want %v %v", c.cfg, c.load, over, reason, c.over, c.reason)
		}
	}
}
