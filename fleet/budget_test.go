package fleet

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestShares(t *testing.T) {
	for _, tc := range []struct {
		max    int
		demand map[string]float64
		want   map[string]int
	}{
		{30, map[string]float64{"a": 0, "b": 0, "c": 0}, map[string]int{"a": 10, "b": 10, "c": 10}},
		// One gateway with 80 % of the demand: floors of 5, the other 15
		// by demand.
		{30, map[string]float64{"a": 8, "b": 1, "c": 1}, map[string]int{"a": 17, "b": 7, "c": 6}},
		{30, map[string]float64{"a": 5}, map[string]int{"a": 30}},
		// A cap too small for the floor of 2 each: even split.
		{5, map[string]float64{"a": 9, "b": 0, "c": 0}, map[string]int{"a": 3, "b": 1, "c": 1}},
		{0, map[string]float64{"a": 1}, map[string]int{}},
	} {
		got := Shares(tc.max, tc.demand)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Shares(%d, %v) = %v, want %v", tc.max, tc.demand, got, tc.want)
		}
	}
}

// Whatever the demands, shares add up to the cap (never more), and each
// gateway keeps at least the floor the cap allows.
func TestSharesNeverExceedTheCap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		max := r.IntN(200)
		g := 1 + r.IntN(12)
		d := map[string]float64{}
		for i := range g {
			d[fmt.Sprint("gw", i)] = r.Float64() * float64(r.IntN(3)) * 50
		}
		got := Shares(max, d)
		sum := 0
		for _, v := range got {
			sum += v
			if floor := min(max/g, minShare); max > 0 && v < floor {
				t.Fatalf("Shares(%d, %v): %d below the floor %d", max, d, v, floor)
			}
		}
		if max > 0 && sum != max {
			t.Fatalf("Shares(%d, %v) = %v: sum %d", max, d, got, sum)
		}
	}
}
