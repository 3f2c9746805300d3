package owner

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/directgate/directgate/wire"
)

// fenceRun plays two owners of one sequence (cache 5) on the shared
// server: the old leader (term 10) reserved a block and was paused past
// its lease; the new leader (term 20) reserved the next; the old one
// resumes without noticing (its lease check is what failed) and uses up
// its block, then needs another. It returns the values each answered,
// and the old leader's error for its second reservation. fenced switches
// the fence MariaDB checks on or off.
func fenceRun(t *testing.T, fenced bool) (oldValues, newValues []int64, staleErr error) {
	t.Helper()
	srv := needServer(t)
	root := rootDB(t)
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS " + testDB + ".fence_seq (id INT PRIMARY KEY, next_id BIGINT, cache BIGINT) COMMENT 'vitess_sequence'",
		"REPLACE INTO " + testDB + ".fence_seq VALUES (0, 1, 5)",
		"CREATE DATABASE IF NOT EXISTS directgate_owner",
		"CREATE TABLE IF NOT EXISTS directgate_owner.fence (seq VARCHAR(200) NOT NULL PRIMARY KEY, term BIGINT UNSIGNED NOT NULL)",
		"DELETE FROM directgate_owner.fence WHERE seq = '" + testDB + ".fence_seq'",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tbl := &table{Schema: testDB, Name: "fence_seq", kind: kindSequence}
	owner := func(term uint64) func() (int64, error) {
		p, err := newPrimary(srv.Addr(), 1, backendUser, backendPass, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.close() })
		p.fenced = fenced
		seq := &sequence{}
		return func() (int64, error) {
			return seq.nextValues(context.Background(), blockGen{primary: 1, term: term}, tableBlocks{p: p, t: tbl, term: term}, 1)
		}
	}
	old, next := owner(10), owner(20)
	draw := func(f func() (int64, error), into *[]int64) error {
		v, err := f()
		if err == nil {
			*into = append(*into, v)
		}
		return err
	}
	must := func(f func() (int64, error), into *[]int64) {
		if err := draw(f, into); err != nil {
			t.Fatal(err)
		}
	}
	must(old, &oldValues)
	must(next, &newValues)
	for range 4 {
		must(old, &oldValues) // from its block in memory
	}
	staleErr = draw(old, &oldValues) // its block is used up: a reservation in term 10
	must(next, &newValues)
	return oldValues, newValues, staleErr
}

// TestFenceRefusesStaleTerm: a leader whose term ended can at worst
// hand out what is left of the block it had reserved (the lease check,
// not this fence, stops that): every value it answers is below the new
// leader's first. With the fence MariaDB refuses its next reservation
// (1290, nothing handed out); with the fence switched off that
// reservation lands after the new term's and the old leader answers a
// value above the new leader's: the invariant breaks.
func TestFenceRefusesStaleTerm(t *testing.T) {
	oldValues, newValues, err := fenceRun(t, true)
	var se *wire.SQLError
	if !errors.As(err, &se) || se.Code != wire.ErOptionPreventsStatement {
		t.Fatalf("the old term's reservation after the new one's: %v, want 1290", err)
	}
	t.Logf("with the fence: old term %v, new term %v; the old leader's reservation got %v", oldValues, newValues, err)
	if v := staleAbove(oldValues, newValues); v != 0 {
		t.Fatalf("with the fence the old term answered %d, above the new term's first value %d", v, newValues[0])
	}

	oldValues, newValues, err = fenceRun(t, false)
	if err != nil {
		t.Fatalf("without the fence the old term's reservation failed: %v", err)
	}
	v := staleAbove(oldValues, newValues)
	if v == 0 {
		t.Fatalf("without the fence: old term %v, new term %v: the test does not see what the fence prevents", oldValues, newValues)
	}
	t.Logf("without the fence: old term %v, new term %v: the old term answered %d, above the new term's first value", oldValues, newValues, v)
}

// staleAbove returns the first value of the old term above the new
// term's first value, or 0.
func staleAbove(oldValues, newValues []int64) int64 {
	for _, v := range oldValues {
		if v > newValues[0] {
			return v
		}
	}
	return 0
}

// TestFenceRaiseOneStatement pins down what the one-statement raise
// reads from the OK packet (LAST_INSERT_ID(expr)): a new row reads 0 even
// on a connection whose last raise carried a newer term back, an equal
// term passes, a newer one refuses, and a newer term raises the row.
func TestFenceRaiseOneStatement(t *testing.T) {
	srv := needServer(t)
	p, err := newPrimary(srv.Addr(), 1, backendUser, backendPass, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	p.db.SetMaxOpenConns(1) // one connection: what a raise leaves on it is seen by the next
	p.fenced = true
	root := rootDB(t)
	a := &table{Schema: testDB, Name: "raise_a", kind: kindMessage}
	b := &table{Schema: testDB, Name: "raise_b", kind: kindMessage}
	if _, err := root.Exec("DELETE FROM directgate_owner.fence WHERE seq IN ('" + testDB + ".raise_a', '" + testDB + ".raise_b')"); err != nil {
		t.Fatal(err)
	}
	raise := func(tbl *table, term uint64) error {
		return p.inTx(context.Background(), p.db, tbl, term, fenceRaise, func(*sql.Tx) error { return nil })
	}
	stale := func(err error) bool { var st *staleTermError; return errors.As(err, &st) }
	for _, step := range []struct {
		tbl       *table
		term      uint64
		wantStale bool
	}{
		{a, 50, false}, // new row
		{a, 50, false}, // equal
		{a, 40, true},  // older: the OK packet carries 50 back
		{b, 40, false}, // a new row right after: reads 0, not the 50 left on the connection
		{b, 60, false}, // newer raises
		{b, 59, true},
	} {
		err := raise(step.tbl, step.term)
		if stale(err) != step.wantStale || (err != nil && !stale(err)) {
			t.Fatalf("%s term %d: %v, want stale %v", step.tbl.Name, step.term, err, step.wantStale)
		}
	}
	var have uint64
	if err := root.QueryRow("SELECT term FROM directgate_owner.fence WHERE seq = '" + testDB + ".raise_b'").Scan(&have); err != nil || have != 60 {
		t.Fatalf("raise_b's fence row: %d (%v), want 60", have, err)
	}
}
