package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

// MySQL error numbers and SQLSTATEs the gateway produces itself.
const (
	erConCount         = 1040 // ER_CON_COUNT_ERROR
	erAccessDenied     = 1045 // ER_ACCESS_DENIED_ERROR
	erUnknownCom       = 1047 // ER_UNKNOWN_COM_ERROR
	erServerShutdown   = 1053 // ER_SERVER_SHUTDOWN
	erNetPacketTooLarg = 1153 // ER_NET_PACKET_TOO_LARGE
	erMalformedPacket  = 1835 // ER_MALFORMED_PACKET
	// The gateway's own connection failures use server-range numbers:
	// client libraries keep 2000-2999 for themselves, and libmariadb turns
	// a 2xxx sent by a server into 2027 "Received malformed packet".
	erConnectToBackend = 1429 // ER_CONNECT_TO_FOREIGN_DATA_SOURCE: a backend (or the owner) cannot be reached
	erNetReadError     = 1158 // ER_NET_READ_ERROR (08S01): the backend connection broke during the statement
	erUnknownError     = 1105 // ER_UNKNOWN_ERROR
	erNotSupportedYet  = 1235 // ER_NOT_SUPPORTED_YET
	erLockWaitTimeout  = 1205
)

// toClientError maps any error of the query path to the MySQL error the
// client sees. Backend errors pass through unchanged; everything else gets
// a real error number and a message that says what to do.
func toClientError(err error) *wire.SQLError {
	var sqlErr *wire.SQLError
	var timeout *pools.AcquireTimeoutError
	var dialErr *dialError
	var backendErr *wire.BackendError
	var splitBrain *splitBrainError
	var ownerErr *forward.OwnerError
	var noPrimary *noPrimaryError
	switch {
	case errors.As(err, &ownerErr):
		return wire.NewError(erConnectToBackend, "HY000", "Can't connect to the owner: %s; sequence and message statements need `gateway owner` running for the cluster, other statements are not affected", ownerErr.Error())
	case errors.As(err, &splitBrain):
		return wire.NewError(wire.ErOptionPreventsStatement, "HY000", "The gateway refuses this statement: %s; writes resume when exactly one backend has read_only=OFF (set read_only=ON on all but the primary)", splitBrain.Error())
	case errors.As(err, &noPrimary):
		return wire.NewError(erConnectToBackend, "HY000", "Can't reach a primary: %s; check the backends' health (GET /debug/health on the gateway's HTTP port) or raise failover_buffer", noPrimary.Error())
	case errors.As(err, &timeout):
		return wire.NewError(erConCount, "08004", "Too many connections: %s", timeout.Error())
	case errors.As(err, &dialErr):
		return wire.NewError(erConnectToBackend, "HY000", "%s; check that the backend is running and that backend_user/backend_password are right", dialErr.Error())
	case errors.As(err, &backendErr):
		return wire.NewError(erNetReadError, "08S01", "Lost connection to backend during query (%v); the statement may not have completed, retry it", backendErr.Err)
	case errors.As(err, &sqlErr):
		return sqlErr
	case errors.Is(err, pools.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, errShuttingDown):
		return wire.NewError(erServerShutdown, "08S01", "Server shutdown in progress: the gateway is stopping, reconnect")
	}
	return wire.NewError(erUnknownError, "HY000", "gateway error: %v", err)
}

// errShuttingDown is returned to statements that arrive during shutdown.
var errShuttingDown = errors.New("gateway shutting down")

// backendLost wraps a broken backend connection for the mapper.
func backendLost(addr string, err error) error {
	return &wire.BackendError{Err: fmt.Errorf("%s: %w", addr, err)}
}
