package owner

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// sqlQueue is a queueStore over a message table on the current primary.
type sqlQueue struct {
	// primary returns the current primary without waiting for one.
	primary func() (*primary, error)
	// failed is told about connection failures (discovery re-probes).
	failed func(addr string, err error)
	t      *table
	table  string // `db`.`table`
	// cols are the streamed columns, id first; idNumeric says whether
	// ids are integers (written as numbers into statements).
	cols      []columnInfo
	idNumeric bool
	// selectDue is the poll statement, built once.
	selectDue string
}

// newSQLQueue builds the store of the message table t with streamed
// columns cols (id first).
func newSQLQueue(t *table, cols []columnInfo, current func() (*primary, error), failed func(string, error)) *sqlQueue {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
	}
	return &sqlQueue{
		primary: current, failed: failed, t: t, table: t.quoted(), cols: cols, idNumeric: cols[0].Numeric,
		selectDue: "SELECT priority, time_next, epoch, " + strings.Join(names, ", ") + " FROM " + t.quoted() +
			" WHERE time_acked IS NULL AND time_next <= ? ORDER BY priority, time_next LIMIT ?",
	}
}

// run calls fn with the current primary and reports connection failures.
func (s *sqlQueue) run(fn func(p *primary) error) error {
	p, err := s.primary()
	if err != nil {
		return err
	}
	err = fn(p)
	if isConnError(err) {
		s.failed(p.addr, err)
	}
	return err
}

func (s *sqlQueue) loadDue(ctx context.Context, now int64, limit int) ([]*message, error) {
	var out []*message
	err := s.run(func(p *primary) error {
		rows, err := p.db.QueryContext(ctx, s.selectDue, now, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		raw := make([]sql.RawBytes, 3+len(s.cols))
		dest := make([]any, len(raw))
		for i := range raw {
			dest[i] = &raw[i]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			m := &message{row: make([][]byte, len(s.cols))}
			m.priority, _ = strconv.ParseInt(string(raw[0]), 10, 64)
			m.timeNext, _ = strconv.ParseInt(string(raw[1]), 10, 64)
			m.epoch, _ = strconv.ParseInt(string(raw[2]), 10, 64)
			for i, v := range raw[3:] {
				if v != nil {
					m.row[i] = append(make([]byte, 0, len(v)), v...)
				}
			}
			if m.row[0] == nil {
				continue // a NULL id cannot be postponed or acked
			}
			m.id = string(m.row[0])
			out = append(out, m)
		}
		return rows.Err()
	})
	return out, err
}

// idArg is an id as a statement argument: a number for integer ids (so
// the primary key lookup needs no conversion), else a string.
func (s *sqlQueue) idArg(id string) any {
	if s.idNumeric {
		if v, err := strconv.ParseInt(id, 10, 64); err == nil {
			return v
		}
		if v, err := strconv.ParseUint(id, 10, 64); err == nil {
			return v
		}
	}
	return id
}

func (s *sqlQueue) postpone(ctx context.Context, term uint64, due []postponement) error {
	if len(due) == 0 {
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, 3*len(due))
	b.WriteString("UPDATE ")
	b.WriteString(s.table)
	b.WriteString(" SET time_next = CASE id")
	for _, d := range due {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, s.idArg(d.id), d.timeNext)
	}
	b.WriteString(" END, epoch = IFNULL(epoch, 0) + 1 WHERE id IN (")
	for i, d := range due {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
		args = append(args, s.idArg(d.id))
	}
	b.WriteString(") AND time_acked IS NULL")
	return s.run(func(p *primary) error {
		return p.write(ctx, p.db, s.t, term, fenceRaise, func(q execer) error {
			_, err := q.ExecContext(ctx, b.String(), args...)
			return err
		})
	})
}

func (s *sqlQueue) purge(ctx context.Context, term uint64, cutoff int64) (int64, error) {
	var n int64
	err := s.run(func(p *primary) error {
		return p.write(ctx, p.db, s.t, term, fenceRaise, func(q execer) error {
			res, err := q.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE time_acked < ? LIMIT %d", s.table, purgeBatch), cutoff)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
	})
	return n, err
}
