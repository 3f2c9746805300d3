package difffuzz

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Divergence is the first step at which a client saw something through
// the gateway that it did not see directly.
type Divergence struct {
	// Client is the script's client number; Step the index in its steps.
	Client, Step int
	// Tag is the step's grammar rule; Text the step as written in Format.
	Tag, Text string
	// Direct and Gateway are what the client saw.
	Direct, Gateway []record
	// Later counts the client's further diverging steps.
	Later int
}

// Signature groups divergences that are likely the same defect: the
// step's grammar rule, with rules that observe the same state merged.
func (d *Divergence) Signature() string {
	switch d.Tag {
	case "call", "function", "trigger", "read-foreign-vars", "binary-read-foreign-vars":
		return "uservar-set-by-routine"
	case "set-uservar", "select-into", "assign-uservar", "read-uservar":
		return "uservar"
	case "observe", "next-txn":
		return "next-transaction-isolation"
	case "read-child":
		// The child row holds the LAST_INSERT_ID() of the prepared
		// insert before it.
		return "binary-last-insert-id"
	}
	return d.Tag
}

// String renders the divergence with both sides' records.
func (d *Divergence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "client %d (db %s), step %d [%s]: %s\n", d.Client, dbName(d.Client), d.Step, d.Tag, d.Text)
	fmt.Fprintf(&b, "    direct:\n%s", indentRecords(d.Direct, d.Gateway))
	fmt.Fprintf(&b, "    gateway:\n%s", indentRecords(d.Gateway, d.Direct))
	if d.Later > 0 {
		fmt.Fprintf(&b, "    (and %d later steps of this client diverge too)\n", d.Later)
	}
	return b.String()
}

// indentRecords renders recs, one per block, marking those that other
// lacks.
func indentRecords(recs, other []record) string {
	var b strings.Builder
	if len(recs) == 0 {
		b.WriteString("      (nothing)\n")
	}
	for i, r := range recs {
		mark := "   "
		if i >= len(other) || other[i].key != r.key {
			mark = " ! "
		}
		text := r.text
		if i < len(other) && other[i].key != r.key && other[i].text == r.text {
			text = r.key // the difference is in bytes the text does not show
		}
		for j, line := range strings.Split(text, "\n") {
			if j == 0 {
				fmt.Fprintf(&b, "     %s%s\n", mark, line)
			} else {
				fmt.Fprintf(&b, "        %s\n", line)
			}
		}
	}
	return b.String()
}

func sameRecords(a, b []record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key {
			return false
		}
	}
	return true
}

// compare returns the first divergence of each client.
func compare(r *Round, direct, gw []clientRun) []Divergence {
	var out []Divergence
	for i, s := range r.Scripts {
		var d *Divergence
		for j, st := range s.Steps {
			if sameRecords(direct[i].steps[j], gw[i].steps[j]) {
				continue
			}
			if d != nil {
				d.Later++
				continue
			}
			d = &Divergence{Client: s.Client, Step: j, Tag: st.Tag, Text: st.String(),
				Direct: direct[i].steps[j], Gateway: gw[i].steps[j]}
		}
		if d != nil {
			out = append(out, *d)
		}
	}
	return out
}

// RoundResult is the outcome of one round.
type RoundResult struct {
	Divergences []Divergence
	// Direct and Gateway are how long each phase ran.
	Direct, Gateway time.Duration
	// Disagreements are the gateway's classifier disagreements
	// (directgate_classifier_disagreements_total) by kind.
	Disagreements map[string]float64
	// direct and gateway are what each client saw, as r.Scripts.
	direct, gateway []clientRun
}

// diverges reports whether the step of client whose text is text
// diverged, and returns that divergence.
func (res *RoundResult) diverges(r *Round, client int, text string) (Divergence, bool) {
	for i, s := range r.Scripts {
		if s.Client != client {
			continue
		}
		for j, st := range s.Steps {
			if st.String() != text || sameRecords(res.direct[i].steps[j], res.gateway[i].steps[j]) {
				continue
			}
			return Divergence{Client: client, Step: j, Tag: st.Tag, Text: text,
				Direct: res.direct[i].steps[j], Gateway: res.gateway[i].steps[j]}, true
		}
	}
	return Divergence{}, false
}

// RunRound runs r directly against MariaDB, then through a fresh gateway
// with a pool of r.PoolSize connections and r.IOLoops loops, each after recreating the
// clients' databases, and compares what the clients saw. With selfCheck
// the second phase is a second direct run: any divergence then is
// nondeterminism of the fuzzer, not a gateway defect. An error means the
// round could not run (setup failed, the gateway did not start).
func (e *Env) RunRound(ctx context.Context, r *Round, selfCheck bool) (*RoundResult, error) {
	return e.runRound(ctx, r, selfCheck, nil)
}

// directCache keeps what clients saw in the direct phase, by script: a
// client alone on its connection to its own databases sees the same
// whatever the other clients do and however long it pauses (the self
// check, Options.SelfCheck, tests that), so shrinking reruns the direct
// phase only for scripts it changed.
type directCache map[string]clientRun

// scriptKey identifies a script for directCache: everything but pauses.
func scriptKey(s *Script) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%d", s.Client, s.Caps, s.Collation)
	for _, st := range s.Steps {
		fmt.Fprintf(&b, "\x00%d/%d/%q/%v", st.Kind, st.Handle, st.SQL, st.Params)
	}
	return b.String()
}

func (e *Env) runRound(ctx context.Context, r *Round, selfCheck bool, cache directCache) (*RoundResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	res := &RoundResult{}
	direct := make([]clientRun, len(r.Scripts))
	todo := &Round{Seed: r.Seed, Index: r.Index, PoolSize: r.PoolSize, IOLoops: r.IOLoops, PoolOrder: r.PoolOrder}
	var todoIdx []int
	for i := range r.Scripts {
		if run, ok := cache[scriptKey(&r.Scripts[i])]; ok {
			direct[i] = run
			continue
		}
		todo.Scripts = append(todo.Scripts, r.Scripts[i])
		todoIdx = append(todoIdx, i)
	}
	start := time.Now()
	if len(todo.Scripts) > 0 {
		if err := e.setup(ctx, todo); err != nil {
			return nil, err
		}
		runs := e.runPhase(ctx, todo, target{name: "direct", addr: e.Addr(), user: backendUser, password: backendPassword})
		for j, run := range runs {
			if run.loginErr != nil {
				return nil, fmt.Errorf("client %d could not log in to MariaDB: %w", todo.Scripts[j].Client, run.loginErr)
			}
			direct[todoIdx[j]] = run
			if cache != nil {
				cache[scriptKey(&todo.Scripts[j])] = run
			}
		}
	}
	res.Direct = time.Since(start)

	if err := e.setup(ctx, r); err != nil {
		return nil, err
	}
	var second []clientRun
	start = time.Now()
	if selfCheck {
		second = e.runPhase(ctx, r, target{name: "direct", addr: e.Addr(), user: backendUser, password: backendPassword})
	} else {
		gw, err := e.startGateway(r.PoolSize, r.PoolOrder, r.IOLoops)
		if err != nil {
			return nil, fmt.Errorf("start gateway: %w", err)
		}
		second = e.runPhase(ctx, r, target{name: "gateway", addr: gw.addr(), user: appUser, password: appPassword})
		res.Disagreements = gw.disagreements()
		if err := gw.stop(); err != nil {
			return nil, fmt.Errorf("stop gateway: %w", err)
		}
	}
	res.Gateway = time.Since(start)
	res.direct, res.gateway = direct, second
	res.Divergences = compare(r, direct, second)
	return res, nil
}

// dump renders every step of r with what both phases saw.
func (res *RoundResult) dump(r *Round) string {
	var b strings.Builder
	fmt.Fprintf(&b, "round %d (pool %d %s, io_loops %d):\n", r.Index, r.PoolSize, r.PoolOrder, r.IOLoops)
	for i, s := range r.Scripts {
		fmt.Fprintf(&b, "client %d (%s):\n", s.Client, s.CapsString())
		for j, st := range s.Steps {
			fmt.Fprintf(&b, "  %3d %s\n", j, st)
			if sameRecords(res.direct[i].steps[j], res.gateway[i].steps[j]) {
				b.WriteString(indentRecords(res.direct[i].steps[j], res.direct[i].steps[j]))
				continue
			}
			fmt.Fprintf(&b, "    direct:\n%s", indentRecords(res.direct[i].steps[j], res.gateway[i].steps[j]))
			fmt.Fprintf(&b, "    second phase:\n%s", indentRecords(res.gateway[i].steps[j], res.direct[i].steps[j]))
		}
	}
	return b.String()
}
