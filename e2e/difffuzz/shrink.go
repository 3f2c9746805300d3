package difffuzz

import (
	"context"
	"time"
)

// ShrinkOptions bound the shrinking of one divergence.
type ShrinkOptions struct {
	// MaxRuns bounds the candidate rounds run. Zero means 60.
	MaxRuns int
	// MaxTime bounds the time spent. Zero means 30s.
	MaxTime time.Duration
	// Attempts is how often the original round runs before it is judged
	// not to reproduce (timing decides some divergences). Zero means 3.
	// A smaller candidate runs once: a candidate that failed by chance
	// only leaves the result less small.
	Attempts int
}

func (o ShrinkOptions) withDefaults() ShrinkOptions {
	if o.MaxRuns <= 0 {
		o.MaxRuns = 60
	}
	if o.MaxTime <= 0 {
		o.MaxTime = 30 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	return o
}

// ShrinkResult is a shrunk round.
type ShrinkResult struct {
	// Round is the smallest round found that still shows the divergence;
	// the original round when it did not reproduce.
	Round *Round
	// Divergence is the divergence as the last reproducing run saw it.
	Divergence Divergence
	// Reproduced says whether the original round showed the divergence
	// again; when false nothing was shrunk.
	Reproduced bool
	// Runs counts the rounds run; Took is the time spent.
	Runs int
	Took time.Duration
}

// unit is one step of one script of the round being shrunk.
type unit struct{ script, step int }

// Shrink removes clients and steps from r while the step of d still
// diverges (same client, same step text), by delta debugging: first whole
// clients, then chunks of steps of halving size. Every candidate runs
// against fresh databases and a fresh gateway, up to o.Attempts times.
func (e *Env) Shrink(ctx context.Context, r *Round, d Divergence, o ShrinkOptions) *ShrinkResult {
	o = o.withDefaults()
	start := time.Now()
	res := &ShrinkResult{Round: r, Divergence: d}
	defer func() { res.Took = time.Since(start) }()
	budget := func() bool {
		return res.Runs < o.MaxRuns && time.Since(start) < o.MaxTime && ctx.Err() == nil
	}
	cache := directCache{}
	test := func(cand *Round, attempts int) bool {
		for range attempts {
			if !budget() {
				return false
			}
			res.Runs++
			rr, err := e.runRound(ctx, cand, false, cache)
			if err != nil {
				continue
			}
			if dv, ok := rr.diverges(cand, d.Client, d.Text); ok {
				res.Divergence = dv
				return true
			}
		}
		return false
	}
	if !test(r, o.Attempts) {
		return res
	}
	res.Reproduced = true

	// The diverging step is always kept; every other step is a unit.
	var units []unit
	for si, s := range r.Scripts {
		for j := range s.Steps {
			if s.Client == d.Client && j == d.Step {
				continue
			}
			units = append(units, unit{si, j})
		}
	}
	build := func(keep []unit) *Round {
		in := make(map[unit]bool, len(keep))
		for _, u := range keep {
			in[u] = true
		}
		c := r.clone()
		c.Scripts = c.Scripts[:0]
		for si, s := range r.Scripts {
			var steps []Step
			for j, st := range s.Steps {
				if in[unit{si, j}] || s.Client == d.Client && j == d.Step {
					steps = append(steps, st)
				}
			}
			if len(steps) > 0 {
				s.Steps = steps
				c.Scripts = append(c.Scripts, s)
			}
		}
		return c
	}
	without := func(drop func(unit) bool) []unit {
		var keep []unit
		for _, u := range units {
			if !drop(u) {
				keep = append(keep, u)
			}
		}
		return keep
	}
	accept := func(keep []unit) bool {
		cand := build(keep)
		if test(cand, 1) {
			units, res.Round = keep, cand
			return true
		}
		return false
	}

	// A pool of one connection makes most leaks deterministic.
	if r.PoolSize > 1 && budget() {
		cand := r.clone()
		cand.PoolSize = 1
		if test(cand, 2) {
			r, res.Round = cand, cand
		}
	}
	target := -1
	for si, s := range r.Scripts {
		if s.Client == d.Client {
			target = si
		}
	}
	// The steps after the diverging one cannot change what it saw (only
	// the timing of other clients).
	if budget() {
		accept(without(func(u unit) bool { return u.script == target && u.step > d.Step }))
	}
	// Whole clients, by ddmin over the other clients.
	var others []int
	for si := range r.Scripts {
		if si != target {
			others = append(others, si)
		}
	}
	for n := 1; len(others) > 0 && budget(); {
		chunk := (len(others) + n - 1) / n
		removed := false
		for lo := 0; lo < len(others) && budget(); lo += chunk {
			hi := min(lo+chunk, len(others))
			drop := map[int]bool{}
			for _, si := range others[lo:hi] {
				drop[si] = true
			}
			if accept(without(func(u unit) bool { return drop[u.script] })) {
				others = append(others[:lo:lo], others[hi:]...)
				removed = true
				break
			}
		}
		if !removed {
			if n >= len(others) {
				break
			}
			n = min(2*n, len(others))
		}
	}

	// Steps, by ddmin: remove chunks of 1/n of the units; on success
	// keep the granularity, else refine it.
	n := 2
	for len(units) > 0 && budget() {
		chunk := (len(units) + n - 1) / n
		removed := false
		for lo := 0; lo < len(units) && budget(); lo += chunk {
			hi := min(lo+chunk, len(units))
			drop := make(map[unit]bool, hi-lo)
			for _, u := range units[lo:hi] {
				drop[u] = true
			}
			if accept(without(func(u unit) bool { return drop[u] })) {
				removed = true
				n = max(n-1, 2)
				break
			}
		}
		if !removed {
			if n >= len(units) {
				break
			}
			n = min(2*n, len(units))
		}
	}
	return res
}
