package mysqlserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/directgate/directgate/wire"
)

// MySQL error numbers the gateway and the owner send themselves. Their own
// connection failures use server-range numbers: client libraries keep
// 2000-2999 for themselves, and libmariadb turns a 2xxx sent by a server
// into 2027 "Received malformed packet".
const (
	ErConCount          = 1040 // ER_CON_COUNT_ERROR
	ErAccessDenied      = 1045 // ER_ACCESS_DENIED_ERROR
	ErUnknownCom        = 1047 // ER_UNKNOWN_COM_ERROR
	ErServerShutdown    = 1053 // ER_SERVER_SHUTDOWN
	ErNetPacketTooLarge = 1153 // ER_NET_PACKET_TOO_LARGE
	ErNetReadError      = 1158 // ER_NET_READ_ERROR (08S01)
	ErConnectToForeign  = 1429 // ER_CONNECT_TO_FOREIGN_DATA_SOURCE: a backend, the primary or the owner cannot be reached
	ErMalformedPacket   = 1835 // ER_MALFORMED_PACKET
	ErUnknownError      = 1105 // ER_UNKNOWN_ERROR
	ErNotSupportedYet   = 1235 // ER_NOT_SUPPORTED_YET
)

// ErrShuttingDown is the error of a statement that arrives, or waits,
// while the server shuts down.
var ErrShuttingDown = errors.New("server shutting down")

// NoPrimaryError is a statement that found no primary within the
// cluster's failover_buffer.
type NoPrimaryError struct {
	Cluster, Reason string
	// Waited is how long the statement waited for discovery to find one.
	Waited time.Duration
}

func (e *NoPrimaryError) Error() string {
	return fmt.Sprintf("no primary for cluster %s after waiting %v: %s", e.Cluster, e.Waited, e.Reason)
}

// PacketTooLarge is MariaDB's error for a packet above max_allowed_packet,
// word for word (the connection ends after it, as on MariaDB). What to do
// about it goes to the log (PacketTooLargeAdvice): clients and tests match
// MariaDB's text.
func PacketTooLarge() *wire.SQLError {
	return wire.NewError(ErNetPacketTooLarge, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes")
}

// PacketTooLargeAdvice says, for the log, what to do about a packet above
// max bytes.
func PacketTooLargeAdvice(max int) string {
	return fmt.Sprintf("client packet above max_allowed_packet (%d bytes): send smaller statements or raise max_allowed_packet (the gateway's, and the backend's: the smaller one applies)", max)
}

// ShutdownError is what a client gets when the server stops under it.
func ShutdownError() *wire.SQLError {
	return wire.NewError(ErServerShutdown, "08S01", "Server shutdown in progress: reconnect (to another instance, or once this one is back)")
}

// ClientError maps the errors every front end of this project shares to
// what the client sees, and reports false for others: a server's
// *wire.SQLError unchanged, a NoPrimaryError as 1429, a shutdown
// (ErrShuttingDown, a cancelled context) as 1053. Callers map their own
// errors first.
func ClientError(err error) (*wire.SQLError, bool) {
	var sqlErr *wire.SQLError
	var noPrimary *NoPrimaryError
	switch {
	case errors.As(err, &sqlErr):
		return sqlErr, true
	case errors.As(err, &noPrimary):
		return wire.NewError(ErConnectToForeign, "HY000", "Can't reach a primary: %s; check the backends' health (GET /debug/health on the gateway's HTTP port) or raise failover_buffer", noPrimary.Error()), true
	case errors.Is(err, ErrShuttingDown), errors.Is(err, context.Canceled):
		return ShutdownError(), true
	}
	return nil, false
}
