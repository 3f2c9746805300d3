package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// The consolidation cases (issue 17): 64 threads of text-protocol point
// selects of the same 10 rows (e2e/bench/lua/consolidation.lua), direct
// against the gateway without and with query consolidation. Besides
// throughput, each run records the rise of the primary's Com_select: the
// selects MariaDB ran per select a client sent, and with the mariadbd CPU
// per query what consolidation saves the database.

// comSelectWatch reads the primary's Com_select before and after a run.
type comSelectWatch struct {
	db *sql.DB
	n0 int64
}

// watchSelects starts watching the primary's Com_select for one run.
func (b *bench) watchSelects(ctx context.Context) (*comSelectWatch, error) {
	db, err := openDB(b.direct())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	w := &comSelectWatch{db: db}
	if w.n0, err = globalStatus(ctx, db, "Com_select"); err != nil {
		db.Close()
		return nil, fmt.Errorf("reading Com_select: %w", err)
	}
	return w, nil
}

// stop returns the rise of Com_select since watchSelects; nil when it
// could not be read.
func (w *comSelectWatch) stop(ctx context.Context) *int64 {
	defer w.db.Close()
	n, err := globalStatus(ctx, w.db, "Com_select")
	if err != nil {
		return nil
	}
	return ptr(n - w.n0)
}

// consolidationMarkdown is the consolidation section of summary.md: every
// run of the consolidation cases.
func consolidationMarkdown(cases []benchCase, runs []runResult) string {
	var b strings.Builder
	for _, r := range caseRuns(cases, runs, func(c benchCase) bool { return c.HotReads }) {
		if b.Len() == 0 {
			b.WriteString("\n## Consolidation\n\n")
			b.WriteString("64 threads, each event `SELECT c FROM sbtest1 WHERE id = <one of 10>` (e2e/bench/lua/consolidation.lua, ")
			b.WriteString("text protocol); `consolidation` runs the gateway with `consolidation: {enabled: true}`, `consolidation off` without. ")
			b.WriteString("Backend/client: the rise of the primary's `Com_select` over the run divided by the queries sysbench counted ")
			b.WriteString("(the gateway's own probes included); CPU in µs of CPU time per client query.\n\n")
			b.WriteString("| case | target | round | queries/s | p95 ms | backend selects | backend/client | mariadbd µs/query | proxy µs/query | ok |\n")
			b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		}
		sel, ratio := "-", "-"
		if r.BackendSelects != nil {
			sel = fmt.Sprint(*r.BackendSelects)
			if r.Queries > 0 {
				ratio = fmt.Sprintf("%.3f", float64(*r.BackendSelects)/float64(r.Queries))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %.2f | %s | %s | %s | %s | %v |\n", r.Case, r.Target, r.Round, r.QPS, r.P95Ms,
			sel, ratio, num(microsPerQuery(r.MariadbCPUPer1kQ), 1), num(microsPerQuery(r.ProxyCPUPer1kQ), 1), r.OK)
	}
	return b.String()
}

// microsPerQuery turns CPU seconds per 1000 queries into µs per query.
func microsPerQuery(per1k *float64) *float64 {
	if per1k == nil {
		return nil
	}
	return ptr(*per1k * 1000)
}
