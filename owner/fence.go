package owner

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/directgate/directgate/wire"
)

// The fence MariaDB checks (issue 35). An elected owner acts only while
// its lease holds (leader.go), but lease time is the owner's own clock: a
// leader paused past its lease and resumed could still commit a
// reservation after the next leader has reserved. So every reservation of
// an elected owner also carries its term (the etcd revision of its
// election key, which grows across the fleet) into the same transaction
// as the sequence row: it raises the table's fence row to its term and
// reads it back, and when a newer term has already written there the
// transaction is rolled back and the statement answers 1290. MariaDB's
// row lock orders the reservations, so once a newer term has reserved
// from a sequence no older term's reservation of it commits.
//
// The fence rows live in fenceTable, one per sequence table, created on
// the first reservation (the backend account needs CREATE on
// directgate_owner, as it needs it on twopc for transaction_mode twopc).
// An owner without election has no fence (term staticTerm).

// fenceTable holds the highest term that reserved from each sequence.
const fenceTable = "directgate_owner.fence"

// fenceDDL creates fenceTable.
var fenceDDL = []string{
	"CREATE DATABASE IF NOT EXISTS directgate_owner",
	"CREATE TABLE IF NOT EXISTS " + fenceTable + " (" +
		"seq VARCHAR(200) NOT NULL PRIMARY KEY, " +
		"term BIGINT UNSIGNED NOT NULL" +
		") COMMENT 'directgate owner terms: a reservation of an older term is refused'",
}

// fenceSetup creates fenceTable once per primary; a failure is returned
// to the reservation and tried again by the next.
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

// staleTermError refuses a reservation of a term older than one that has
// reserved from the sequence: nothing was reserved, nothing goes out.
func staleTermError(t *table, term, newer uint64) *wire.SQLError {
	return wire.NewError(wire.ErOptionPreventsStatement, "HY000",
		"This owner's leadership term %d has ended: term %d has reserved from sequence %s.%s since, so MariaDB refused this reservation; nothing was handed out, run it again (gateways send it to the new leader)",
		term, newer, t.Schema, t.Name)
}

// checkFence raises t's fence row to term within tx and fails with
// staleTermError when a newer term is there already.
func checkFence(ctx context.Context, tx *sql.Tx, t *table, term uint64) error {
	name := t.Schema + "." + t.Name
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+fenceTable+" (seq, term) VALUES (?, ?) "+
		"ON DUPLICATE KEY UPDATE term = GREATEST(term, VALUES(term))", name, term); err != nil {
		return err
	}
	var have uint64
	if err := tx.QueryRowContext(ctx, "SELECT term FROM "+fenceTable+" WHERE seq = ?", name).Scan(&have); err != nil {
		return err
	}
	if have > term {
		return staleTermError(t, term, have)
	}
	return nil
}
