package gateway

import (
	"errors"
	"fmt"

	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

// MySQL error numbers only the gateway sends.
const (
	// erLockWaitTimeout (ER_LOCK_WAIT_TIMEOUT) is the gateway's answer to a
	// statement that waited too long for a primary's GTID on a replica.
	erLockWaitTimeout = 1205
	// erNotOwner (ER_KILL_DENIED_ERROR): a KILL of another user's session.
	erNotOwner = 1095
	// erSpecificAccessDenied (ER_SPECIFIC_ACCESS_DENIED_ERROR): a
	// statement for the gateway's admins only.
	erSpecificAccessDenied = 1227
	// erTooManyUserConnections (ER_TOO_MANY_USER_CONNECTIONS, 42000): a
	// user's max_connections, and a statement shed under overload (a
	// resource limit that, unlike 1040's SQLSTATE 08004, connection
	// pools do not take for a broken connection).
	erTooManyUserConnections = 1203
)

// toClientError maps any error of the query path to the MySQL error the
// client sees. Backend errors pass through unchanged; everything else gets
// a real error number and a message that says what to do. What the
// gateway shares with the owner (a server's error, no primary, a
// shutdown) is mysqlserver.ClientError's, after the gateway's own (which
// may wrap a server's error).
func toClientError(err error) *wire.SQLError {
	var timeout *pools.AcquireTimeoutError
	var dialErr *dialError
	var backendErr *wire.BackendError
	var splitBrain *splitBrainError
	var ownerErr *forward.OwnerError
	var share *shareError
	var loginWait *loginWaitError
	switch {
	case errors.Is(err, errQueryKilled):
		return wire.NewError(1317, "70100", "Query execution was interrupted")
	case errors.As(err, &loginWait):
		return wire.NewError(mysqlserver.ErConCount, "08004", "Too many connections: %v", err)
	case errors.As(err, &share):
		return wire.NewError(mysqlserver.ErConCount, "08004", "Too many connections: %s", share.Error())
	case errors.As(err, &ownerErr):
		return wire.NewError(mysqlserver.ErConnectToForeign, "HY000", "Can't connect to the owner: %s; sequence and message statements need `gateway owner` running for the cluster, other statements are not affected", ownerErr.Error())
	case errors.As(err, &splitBrain):
		return wire.NewError(wire.ErOptionPreventsStatement, "HY000", "The gateway refuses this statement: %s; writes resume when exactly one backend has read_only=OFF (set read_only=ON on all but the primary)", splitBrain.Error())
	case errors.As(err, &timeout):
		return wire.NewError(mysqlserver.ErConCount, "08004", "Too many connections: %s", timeout.Error())
	case errors.As(err, &dialErr):
		return wire.NewError(mysqlserver.ErConnectToForeign, "HY000", "%s; check that the backend is running and that backend_user/backend_password are right", dialErr.Error())
	case errors.As(err, &backendErr):
		return wire.NewError(mysqlserver.ErNetReadError, "08S01", "Lost connection to backend during query (%v); the statement may not have completed, retry it", backendErr.Err)
	}
	if e, ok := mysqlserver.ClientError(err); ok {
		return e
	}
	if errors.Is(err, pools.ErrClosed) {
		return mysqlserver.ShutdownError()
	}
	return wire.NewError(mysqlserver.ErUnknownError, "HY000", "gateway error: %v", err)
}

// backendLost wraps a broken backend connection for the mapper.
func backendLost(addr string, err error) error {
	return &wire.BackendError{Err: fmt.Errorf("%s: %w", addr, err)}
}
