package owner

import (
	"context"
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/wire"
)

// isConnError reports whether err is a failure to reach or keep talking
// to the primary, as opposed to an answer of the server or of the owner
// itself.
func isConnError(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	var se *wire.SQLError
	var np *mysqlserver.NoPrimaryError
	return !errors.As(err, &me) && !errors.As(err, &se) && !errors.As(err, &np) &&
		!errors.Is(err, context.Canceled) && !errors.As(err, new(exhaustedError))
}

// toSQLError maps an error of a statement to what the client gets:
// server errors unchanged (number, SQLSTATE, message), the owner's own
// with MySQL numbers; what it shares with the gateway (no primary, a
// shutdown) is mysqlserver.ClientError's. t names the table and addr the
// primary for messages that need them.
func (o *Owner) toSQLError(err error, t *table, addr string) *wire.SQLError {
	if e, ok := mysqlserver.ClientError(err); ok {
		return e
	}
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me):
		state := string(me.SQLState[:])
		if me.SQLState[0] == 0 {
			state = "HY000"
		}
		return &wire.SQLError{Code: me.Number, State: state, Message: me.Message}
	case errors.As(err, new(exhaustedError)):
		return wire.NewError(4084, "HY000", "Sequence '%s.%s' has run out", t.Schema, t.Name)
	}
	return wire.NewError(mysqlserver.ErConnectToForeign, "HY000", "Can't reach the primary of cluster %s at %s: %v; %s", o.cluster, addr, err, mayHaveRun(t))
}

// mayHaveRun tells the client of a statement on t whose connection to the
// primary failed what became of it and what to do: the link may have
// failed after the primary ran it.
func mayHaveRun(t *table) string {
	switch {
	case t == nil:
		return "try again"
	case t.kind == kindSequence:
		return "no value was handed out (a reserved block may become a gap): run it again"
	}
	return "the statement may have run on the primary: check before running it again (an ack written with AND time_acked IS NULL can simply run again)"
}
