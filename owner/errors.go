package owner

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/wire"
)

// noPrimaryError is returned when discovery knows no primary for the
// cluster (none writable, split brain, or not probed yet).
type noPrimaryError struct {
	cluster, reason string
}

func (e *noPrimaryError) Error() string {
	return fmt.Sprintf("cluster %s has no primary: %s", e.cluster, e.reason)
}

// isConnError reports whether err is a failure to reach or keep talking
// to the primary, as opposed to an answer of the server or of the owner
// itself.
func isConnError(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	var se *wire.SQLError
	var np *noPrimaryError
	return !errors.As(err, &me) && !errors.As(err, &se) && !errors.As(err, &np) &&
		!errors.Is(err, context.Canceled) && !errors.As(err, new(exhaustedError))
}

// toSQLError maps an error of a statement to what the client gets:
// server errors unchanged (number, SQLSTATE, message), the owner's own
// with MySQL numbers. t names the table and addr the primary for messages
// that need them.
func (o *Owner) toSQLError(err error, t *table, addr string) *wire.SQLError {
	var se *wire.SQLError
	var me *mysql.MySQLError
	var np *noPrimaryError
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &me):
		state := string(me.SQLState[:])
		if me.SQLState[0] == 0 {
			state = "HY000"
		}
		return &wire.SQLError{Code: me.Number, State: state, Message: me.Message}
	case errors.As(err, new(exhaustedError)):
		return wire.NewError(4084, "HY000", "Sequence '%s.%s' has run out", t.Schema, t.Name)
	case errors.As(err, &np):
		return wire.NewError(erConnectToPrimary, "HY000", "Can't connect to the primary of cluster %s: %s; the owner waited %v for discovery to find one", np.cluster, np.reason, o.failoverBuffer())
	case errors.Is(err, context.Canceled):
		return wire.NewError(1053, "08S01", "Server shutdown in progress")
	}
	return wire.NewError(erConnectToPrimary, "HY000", "Can't reach the primary of cluster %s at %s: %v", o.cluster, addr, err)
}

// erConnectToPrimary (ER_CONNECT_TO_FOREIGN_DATA_SOURCE) is the owner's
// error when it cannot reach the primary: a server-range number (client
// libraries turn a 2xxx sent by a server into "malformed packet").
const erConnectToPrimary = 1429
