package fleet

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// isLeaseGone reports whether err says the lease no longer exists (it
// expired while etcd was out of reach), so a new one must be granted.
func isLeaseGone(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || rpctypes.ErrorDesc(err) == rpctypes.ErrLeaseNotFound.Error()
}
