// Package sqlconnect holds what the gateway's own database/sql access
// (the owner's primary connections and two-phase commit, the health
// prober) needs around go-sql-driver's connector.
package sqlconnect

import (
	"context"
	"database/sql/driver"
	"errors"

	"github.com/go-sql-driver/mysql"
)

// Retrying wraps c so that a login that fails as a malformed packet is
// tried once more. go-sql-driver drops a trailing 0 byte from an auth
// switch's data, so MariaDB's ed25519 scramble (32 bytes, any of which
// may be 0) comes out one byte short once in 256 logins and the driver
// reports ErrMalformPkt; a second login gets a new scramble.
func Retrying(c driver.Connector) driver.Connector { return retrying{c} }

type retrying struct{ driver.Connector }

// Connect implements driver.Connector.
func (r retrying) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := r.Connector.Connect(ctx)
	if errors.Is(err, mysql.ErrMalformPkt) {
		conn, err = r.Connector.Connect(ctx)
	}
	return conn, err
}
