package owner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/wire"
)

// The fence MariaDB checks (issue 35). An elected owner acts only while
// its lease holds (leader.go), but lease time is the owner's own clock: a
// leader paused past its lease and resumed could still write after the
// next leader has taken over. So the writes of an elected owner also
// carry its term (the etcd revision of its election key, which grows
// across the fleet) into the transaction that writes, and MariaDB
// refuses them once a newer term has written to the same table: the
// transaction is rolled back and the statement answers 1290, which
// gateways send to the new leader, as nothing ran.
//
// Which writes raise the fence, which only check it, and why:
//
//   - A sequence reservation is the leader's own act: it raises the
//     table's fence row to its term and reads it back in the same
//     transaction as the sequence row. MariaDB's row lock orders the
//     reservations, so once a newer term has reserved from a sequence
//     no older term's reservation of it commits, and no value is handed
//     out twice.
//   - A message queue's delivery bookkeeping (postpone: time_next moved
//     past the ack wait, epoch + 1, before a batch is sent) and its purge
//     of old acked rows are the leader's own acts too, and raise the
//     fence of the message table. A paused leader that resumes mid-
//     delivery must not postpone after the new leader has taken the
//     queue over: it would move time_next and epoch of messages the new
//     leader manages (a message in flight with the new leader would come
//     back early, or late). With the fence its postponement is refused,
//     its batch is not sent, and its queue stops acting for that term.
//     The purge would do no harm late (it deletes only rows any leader
//     deletes), but it runs on every queue about once a second, so it is
//     the write that raises a new leader's fence on a queue nobody
//     streams, for the check below.
//   - A client's insert into or ack of a message table, forwarded
//     through the owner, is the client's statement and runs once
//     whoever leads; an ack is exactly once by the table itself (a
//     second ack of a row finds it acked; write acks with AND time_acked
//     IS NULL). But a statement that reached a leader that was then
//     paused was cut by its gateway (1429, it may have run), and its
//     client may well have run it again through the new leader: run late
//     by the resumed old leader it would insert a second message. So it
//     only checks the fence, under a shared lock (inserts and acks do not
//     wait for each other, only for the leader's own writes), in the
//     transaction that runs it: a newer term there refuses it before it
//     ran.
//
// Each fenced transaction limits how long MariaDB keeps it open while the
// owner is silent (idle_transaction_timeout, fenceIdleTimeout), so an
// owner paused inside one does not hold the fence row, or the sequence
// row, from the next leader.
//
// The fence rows live in fenceTable, one per sequence or message table,
// created on the first fenced write (the backend account needs CREATE on
// directgate_owner, as it needs it on twopc for transaction_mode twopc).
// An owner without election has no fence (term staticTerm), and its
// queue writes run as single statements, as before.

// fenceTable holds the highest term that wrote to each sequence and
// message table, keyed by schema.table.
const fenceTable = "directgate_owner.fence"

// fenceDDL creates fenceTable.
var fenceDDL = []string{
	"CREATE DATABASE IF NOT EXISTS directgate_owner",
	"CREATE TABLE IF NOT EXISTS " + fenceTable + " (" +
		"seq VARCHAR(200) NOT NULL PRIMARY KEY, " +
		"term BIGINT UNSIGNED NOT NULL" +
		") COMMENT 'directgate owner terms: a write of an older term is refused'",
}

// fenceSetup creates fenceTable once per primary; a failure is returned
// to the write and tried again by the next.
type fenceSetup struct {
	mu   sync.Mutex
	done bool
}

// ensure creates fenceTable on db unless it did already.
func (f *fenceSetup) ensure(ctx context.Context, db *sql.DB) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return nil
	}
	// A table made by someone else needs no CREATE grant.
	if _, err := db.ExecContext(ctx, "SELECT term FROM "+fenceTable+" WHERE 1 = 0"); err == nil {
		f.done = true
		return nil
	}
	for _, q := range fenceDDL {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("creating the owner's fence table %s: %w (grant the backend account CREATE on directgate_owner.*)", fenceTable, err)
		}
	}
	f.done = true
	return nil
}

// staleTermError is the fence's refusal: term has ended, and newer has
// written to the table since. Nothing of the refused transaction was
// committed. It unwraps to the 1290 the client gets.
type staleTermError struct {
	term, newer uint64
	err         *wire.SQLError
}

func (e *staleTermError) Error() string { return e.err.Error() }
func (e *staleTermError) Unwrap() error { return e.err }

// staleTerm refuses a write of term to t, a table term newer has written
// to since.
func staleTerm(t *table, term, newer uint64) *staleTermError {
	var e *wire.SQLError
	if t.kind == kindSequence {
		e = wire.NewError(wire.ErOptionPreventsStatement, "HY000",
			"This owner's leadership term %d has ended: term %d has reserved from sequence %s.%s since, so MariaDB refused this reservation; nothing was handed out, run it again (gateways send it to the new leader)",
			term, newer, t.Schema, t.Name)
	} else {
		e = wire.NewError(wire.ErOptionPreventsStatement, "HY000",
			"This owner's leadership term %d has ended: term %d has written to message table %s.%s since, so MariaDB refused this statement; it did not run, run it again (gateways send it to the new leader)",
			term, newer, t.Schema, t.Name)
	}
	return &staleTermError{term: term, newer: newer, err: e}
}

// fenceMode says how a fenced write meets the fence.
type fenceMode int

const (
	// fenceRaise: the leader's own write raises the row to its term.
	fenceRaise fenceMode = iota
	// fenceCheck: a client's statement only checks that no newer term
	// is there, under a shared lock.
	fenceCheck
)

// checkFence meets t's fence for term within tx (see fenceMode) and fails
// with staleTermError when a newer term is there already. Raising is one
// statement: LAST_INSERT_ID(expr) carries the row's term after the update
// back in the OK packet (0 when the row was new).
func checkFence(ctx context.Context, tx *sql.Tx, t *table, term uint64, mode fenceMode) error {
	name := t.Schema + "." + t.Name
	var have uint64
	if mode == fenceRaise {
		res, err := tx.ExecContext(ctx, "INSERT INTO "+fenceTable+" (seq, term) VALUES (?, ?) "+
			"ON DUPLICATE KEY UPDATE term = LAST_INSERT_ID(GREATEST(term, VALUES(term)))", name, term)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		have = uint64(id)
	} else {
		err := tx.QueryRowContext(ctx, "SELECT term FROM "+fenceTable+" WHERE seq = ? LOCK IN SHARE MODE", name).Scan(&have)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	if have > term {
		return staleTerm(t, term, have)
	}
	return nil
}

// fenceIdleTimeout is how long MariaDB keeps a fenced transaction open
// while the owner sends nothing (idle_transaction_timeout, whole
// seconds): an owner paused while it holds the fence row's or the
// sequence row's lock (a GC pause, a frozen VM) loses the transaction,
// and the lock, before the next leader needs it; the paused owner hands
// out nothing from it (its lapsed term answers 1290).
const fenceIdleTimeout = 2

// inTx runs fn in a transaction on db and commits it. On a fenced
// primary the transaction first meets t's fence for term (mode) and
// limits its idle time; a stale term's is rolled back with
// staleTermError before fn runs.
func (p *primary) inTx(ctx context.Context, db *sql.DB, t *table, term uint64, mode fenceMode, fn func(tx *sql.Tx) error) (err error) {
	if p.fenced {
		if err := p.fence.ensure(ctx, p.db); err != nil {
			return err
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if p.fenced && !p.noIdleTimeout.Load() {
		_, err = tx.ExecContext(ctx, "SET SESSION idle_transaction_timeout = "+strconv.Itoa(fenceIdleTimeout))
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1193 { // ER_UNKNOWN_SYSTEM_VARIABLE: MySQL
			p.noIdleTimeout.Store(true)
			err = nil
		}
		if err != nil {
			return err
		}
	}
	if p.fenced {
		if err = checkFence(ctx, tx, t, term, mode); err != nil {
			return err
		}
	}
	if err = fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// write runs the statements of fn for term on db: on a fenced primary in
// a transaction behind t's fence (inTx), else on db as they are, each
// committing by itself (one round trip, as before the fence).
func (p *primary) write(ctx context.Context, db *sql.DB, t *table, term uint64, mode fenceMode, fn func(q execer) error) error {
	if !p.fenced {
		return fn(db)
	}
	return p.inTx(ctx, db, t, term, mode, func(tx *sql.Tx) error { return fn(tx) })
}

// execer runs a statement: a pool or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// A new term's fence rows are raised when the term starts (issue 35):
// without that, a message table's row rose only at the new leader's
// first postponement or purge (up to a second after it took over, longer
// while nobody streams and the poller interval is long), and a sequence's
// only at the new leader's first reservation; a late write of the old
// term in that window (a client's insert that reached the paused old
// leader, which its gateway has already cut with 1429) was not refused.
// So watchLeadership raises the row of every sequence and message table
// once per term, in the background, and a client's insert or ack in a
// term waits for its table's raise (or does it itself, within its own
// statement timeout) before it runs: a statement the new leader answers
// comes after the old term is fenced out of its table. Sequence
// reservations raise the row themselves, so NEXT VALUE does not wait.

// tableFence records the newest term (and the primary generation) this
// owner raised a table's fence row to. sem (one slot) serializes the
// raises, so a term's raise runs once; a waiter gives up when its
// context ends.
type tableFence struct {
	sem    chan struct{}
	mu     sync.Mutex
	raised blockGen // zero: none yet
}

func newTableFence() *tableFence { return &tableFence{sem: make(chan struct{}, 1)} }

// done reports whether the row was raised for gen.
func (f *tableFence) done(gen blockGen) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raised == gen
}

// raiseFence makes sure t's fence row on p holds term (once per term and
// primary): it raises it in a transaction of its own, or waits for the
// raise under way, within ctx. A newer term there fails it with
// staleTermError (and stops t's queue acting in term). An owner without
// election has no fence: nothing to do.
func (o *Owner) raiseFence(ctx context.Context, p *primary, t *table, term uint64) error {
	f := t.fence
	gen := blockGen{primary: p.gen, term: term}
	if !p.fenced || f == nil || f.done(gen) {
		return nil
	}
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-f.sem }()
	if f.done(gen) {
		return nil
	}
	err := p.inTx(ctx, p.db, t, term, fenceRaise, func(*sql.Tx) error { return nil })
	var stale *staleTermError
	switch {
	case errors.As(err, &stale):
		if t.queue != nil {
			t.queue.supersede(stale)
		}
		return err
	case err != nil:
		if isConnError(err) {
			o.reportFailure(p.addr, err)
		}
		return err
	}
	f.mu.Lock()
	f.raised = gen
	f.mu.Unlock()
	return nil
}

// raiseFences raises the fence row of every sequence and message table
// to term, when term starts (watchLeadership). A failure is logged; the
// first insert or ack of a table tries again.
func (o *Owner) raiseFences(term uint64) {
	p, err := o.primaryNow()
	if err != nil {
		return // each statement raises its table's once there is a primary
	}
	for _, t := range o.tables.Load().list {
		if !o.stillLeading(term) {
			return
		}
		ctx, cancel := context.WithTimeout(o.ctx, statementTimeout)
		err := o.raiseFence(ctx, p, t, term)
		cancel()
		if err != nil && o.ctx.Err() == nil {
			o.log.Warn("cannot raise the fence of a table for this term; its first insert or ack tries again", "table", t.Schema+"."+t.Name, "term", term, "error", err)
		}
	}
}
