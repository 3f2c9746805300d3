package difffuzz

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Options configure Run.
type Options struct {
	// Scripts is how many client scripts to run in all; a round runs
	// Gen.Clients of them at once. Zero means 60.
	Scripts int
	// Seed seeds the generator; round i of a seed is always the same.
	Seed uint64
	// Round, when not negative, runs only that round of the seed (to
	// replay a failure). Negative runs rounds 0, 1, ...
	Round int
	// Gen shapes the scripts.
	Gen GenOptions
	// SelfCheck runs the direct phase twice instead of direct then
	// gateway: it checks that the fuzzer itself is deterministic.
	SelfCheck bool
	// Shrink bounds the shrinking of each finding.
	Shrink ShrinkOptions
	// MaxShrunk is how many findings (distinct signatures) are shrunk,
	// in the order they were found. Zero means 6; negative means none.
	MaxShrunk int
	// StopAfter stops starting rounds once this many distinct signatures
	// diverged. Zero means 20.
	StopAfter int
	// MaxTime stops starting rounds after this long. Zero means no limit
	// (Scripts bounds the run).
	MaxTime time.Duration
	// Dump logs every step of every round with what both phases saw
	// (verbose: for debugging the fuzzer).
	Dump bool
	// Logf reports progress. Nil means none.
	Logf func(format string, args ...any)
}

// Finding is every divergence of one signature.
type Finding struct {
	Signature string
	// First is the first divergence seen, in Round.
	First Divergence
	Round *Round
	// Count counts divergences of this signature over all rounds.
	Count int
	// Shrunk is the shrunk round, when shrinking ran.
	Shrunk *ShrinkResult
}

// Report is the outcome of Run.
type Report struct {
	Seed                        uint64
	Rounds, Scripts, Statements int
	// Took is the time of the rounds, Shrinking the time spent shrinking.
	Took, Shrinking time.Duration
	Findings        []*Finding
	// Errors are rounds that could not run.
	Errors []error
	// Disagreements sums the gateways' classifier disagreements by kind.
	Disagreements map[string]float64
}

// Run generates and runs rounds until opts.Scripts scripts ran, then
// shrinks the first divergence of each signature.
func Run(ctx context.Context, e *Env, o Options) *Report {
	if o.Scripts <= 0 {
		o.Scripts = 60
	}
	if o.MaxShrunk == 0 {
		o.MaxShrunk = 6
	}
	if o.StopAfter <= 0 {
		o.StopAfter = 20
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	o.Gen = o.Gen.withDefaults()
	rep := &Report{Seed: o.Seed}
	bySig := map[string]*Finding{}
	start := time.Now()
	rounds := (o.Scripts + o.Gen.Clients - 1) / o.Gen.Clients
	first := 0
	if o.Round >= 0 {
		first, rounds = o.Round, 1
	}
	for i := first; i < first+rounds && ctx.Err() == nil; i++ {
		if o.MaxTime > 0 && time.Since(start) > o.MaxTime {
			o.Logf("time limit %v reached after %d rounds", o.MaxTime, rep.Rounds)
			break
		}
		if len(bySig) >= o.StopAfter {
			o.Logf("stopping: %d distinct divergences found", len(bySig))
			break
		}
		r := Generate(o.Seed, i, o.Gen)
		res, err := e.RunRound(ctx, r, o.SelfCheck)
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("round %d: %w", i, err))
			o.Logf("round %d: %v", i, err)
			continue
		}
		rep.Rounds++
		if o.Dump {
			o.Logf("%s", res.dump(r))
		}
		rep.Scripts += len(r.Scripts)
		rep.Statements += r.Statements()
		for k, v := range res.Disagreements {
			if rep.Disagreements == nil {
				rep.Disagreements = map[string]float64{}
			}
			rep.Disagreements[k] += v
		}
		var tags []string
		for _, d := range res.Divergences {
			tags = append(tags, d.Tag)
			f := bySig[d.Signature()]
			if f == nil {
				f = &Finding{Signature: d.Signature(), First: d, Round: r}
				bySig[d.Signature()] = f
				rep.Findings = append(rep.Findings, f)
			}
			f.Count++
		}
		o.Logf("round %d: pool %d %s, io_loops %d, %d clients, %d statements; direct %v, gateway %v; %d diverging clients %v",
			i, r.PoolSize, r.PoolOrder, r.IOLoops, len(r.Scripts), r.Statements(), res.Direct.Round(time.Millisecond), res.Gateway.Round(time.Millisecond), len(res.Divergences), tags)
	}
	rep.Took = time.Since(start)

	// The most frequent first: they matter most and reproduce best.
	order := append([]*Finding(nil), rep.Findings...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].Count > order[j].Count })
	start = time.Now()
	for i, f := range order {
		if o.MaxShrunk < 0 || i >= o.MaxShrunk || ctx.Err() != nil || o.SelfCheck {
			break
		}
		o.Logf("shrinking [%s] (client %d step %d of round %d)", f.Signature, f.First.Client, f.First.Step, f.Round.Index)
		f.Shrunk = e.Shrink(ctx, f.Round, f.First, o.Shrink)
		o.Logf("shrunk [%s]: %d runs, %v, reproduced %v, %d clients, %d steps left", f.Signature, f.Shrunk.Runs,
			f.Shrunk.Took.Round(time.Millisecond), f.Shrunk.Reproduced, len(f.Shrunk.Round.Scripts), f.Shrunk.Round.Statements())
	}
	rep.Shrinking = time.Since(start)
	return rep
}

// Summary is one line: what ran, how long, what diverged.
func (rep *Report) Summary() string {
	rate := 0.0
	if rep.Took > 0 {
		rate = float64(rep.Scripts) / rep.Took.Seconds()
	}
	kinds := make([]string, 0, len(rep.Disagreements))
	for k := range rep.Disagreements {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var dis []string
	for _, k := range kinds {
		dis = append(dis, fmt.Sprintf("%s=%.0f", k, rep.Disagreements[k]))
	}
	return fmt.Sprintf("seed %d: %d rounds, %d scripts, %d statements in %v (%.1f scripts/s), shrinking %v; %d distinct divergences, %d rounds failed to run; classifier disagreements: %s",
		rep.Seed, rep.Rounds, rep.Scripts, rep.Statements, rep.Took.Round(time.Millisecond), rate,
		rep.Shrinking.Round(time.Millisecond), len(rep.Findings), len(rep.Errors), strings.Join(dis, " "))
}

// String is the summary and every finding with its shrunk round.
func (rep *Report) String() string {
	var b strings.Builder
	b.WriteString(rep.Summary())
	b.WriteString("\n")
	fs := append([]*Finding(nil), rep.Findings...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Count > fs[j].Count })
	for _, f := range fs {
		b.WriteString(f.String(rep.Seed))
	}
	for _, err := range rep.Errors {
		fmt.Fprintf(&b, "round error: %v\n", err)
	}
	return b.String()
}

// String describes the finding: where it was first seen, and the shrunk
// reproduction.
func (f *Finding) String(seed uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== DIVERGENCE [%s]: %d clients diverged first at a step of this rule\n", f.Signature, f.Count)
	fmt.Fprintf(&b, "first seen in round %d (replay: DIFFFUZZ_SEED=%d DIFFFUZZ_ROUND=%d), ", f.Round.Index, seed, f.Round.Index)
	b.WriteString(f.First.String())
	s := f.Shrunk
	switch {
	case s == nil:
		b.WriteString("not shrunk; the round:\n")
		b.WriteString(f.Round.Format(f.First.Client, f.First.Step))
	case !s.Reproduced:
		fmt.Fprintf(&b, "did not reproduce in %d runs (timing); the round:\n", s.Runs)
		b.WriteString(f.Round.Format(f.First.Client, f.First.Step))
	default:
		fmt.Fprintf(&b, "--- shrunk in %d runs (%v) to %d clients, %d steps:\n", s.Runs, s.Took.Round(time.Millisecond), len(s.Round.Scripts), s.Round.Statements())
		b.WriteString(s.Round.Format(s.Divergence.Client, s.Divergence.Step))
		b.WriteString("--- as seen on the shrunk round: ")
		b.WriteString(s.Divergence.String())
	}
	return b.String()
}
