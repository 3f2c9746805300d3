package owner

import (
	"context"

	"github.com/directgate/directgate/wire"
)

// prepare answers COM_STMT_PREPARE of a statement the owner answers as a
// query: the number of its ? placeholders and its result columns, as
// MariaDB describes a statement it prepares. The owner keeps nothing:
// gateways run prepared owner statements as queries with the parameters
// written in, so the statement id only has to be valid in the answer, and
// COM_STMT_CLOSE has nothing to close. Unknown tables and statements get
// the errors their query would get.
func (ss *session) prepare(q string) error {
	st := parseStatement(ss.o.parser, q)
	if st.kind == stmtUnsupported {
		return ss.writeErr(unsupported(q))
	}
	if st.err != nil && !st.countParam {
		return ss.writeErr(st.err)
	}
	_, params, err := ss.o.parser.Parse2(q)
	if err != nil {
		params = nil // the scanner's forms: no placeholders
	}
	ctx, cancel := context.WithTimeout(ss.o.hard, statementTimeout)
	defer cancel()
	var cols []wire.Column
	switch st.kind {
	case stmtShowTables:
		if err := ss.o.waitDiscovered(ctx); err != nil {
			return ss.writeErr(ss.o.toSQLError(err, nil, ""))
		}
		cols = ownerTablesColumns()
	default:
		t, sqlErr := ss.resolve(ctx, st.table, wantedKind(st.kind))
		if sqlErr != nil {
			return ss.writeErr(sqlErr)
		}
		switch st.kind {
		case stmtNext:
			cols = []wire.Column{nextvalColumn()}
		case stmtStream:
			cols = t.queue.columns()
		}
	}
	ss.stmtID++
	return ss.rw.PrepareOK(ss.stmtID, uint16(len(params)), cols)
}
