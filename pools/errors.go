package pools

import (
	"errors"
	"fmt"
	"time"
)

// ErrClosed is returned, wrapped with the pool name, by Acquire on a closed
// pool and to callers waiting in Acquire when the pool closes. Test for it
// with errors.Is.
var ErrClosed = errors.New("pool is closed")

// AcquireTimeoutError is returned by Acquire when no connection became free
// within the pool's AcquireTimeout. It is not returned when the caller's own
// context ends first; Acquire returns the context's error then.
type AcquireTimeoutError struct {
	// Pool is the name of the pool (Config.Name).
	Pool string
	// Size is the pool's maximum number of open connections when the wait
	// ended.
	Size int
	// InUse is the number of connections leased out when the wait ended.
	InUse int
	// Dialing is the number of dials in flight when the wait ended.
	Dialing int
	// Waited is how long Acquire waited: the pool's AcquireTimeout.
	Waited time.Duration
	// Budget is, when the wait ended for want of a unit of the pool's
	// Budget, that budget's limit; 0 otherwise.
	Budget int
}

// Error says which pool ran dry and what to change.
func (e *AcquireTimeoutError) Error() string {
	if e.InUse >= e.Size {
		return fmt.Sprintf("pool %s: no connection free within %v (all %d in use); "+
			"raise pool.size or pool.acquire_timeout, or lower client concurrency",
			e.Pool, e.Waited, e.Size)
	}
	if e.Budget > 0 {
		return fmt.Sprintf("pool %s: no connection free within %v (%d of %d in use): the backend's connection budget "+
			"(max_backend_connections: %d, shared with the backend's other pools and discovery's probe) is spent; "+
			"raise it, lower the pools' sizes, or lower client concurrency",
			e.Pool, e.Waited, e.InUse, e.Size, e.Budget)
	}
	return fmt.Sprintf("pool %s: no connection free within %v (%d of %d in use, %d dialing); "+
		"the backend is slow to accept connections; raise pool.acquire_timeout or check the backend",
		e.Pool, e.Waited, e.InUse, e.Size, e.Dialing)
}

// Timeout reports true: the error is a timeout.
func (e *AcquireTimeoutError) Timeout() bool { return true }

// DialError is returned by Acquire when the dial it started failed. Err is
// the error of Config.Dial (or of its timeout); errors.As and errors.Is see
// through DialError to it.
type DialError struct {
	// Pool is the name of the pool (Config.Name).
	Pool string
	// Err is what Config.Dial returned.
	Err error
}

// Error names the pool and the dial error.
func (e *DialError) Error() string { return "pool " + e.Pool + ": dial: " + e.Err.Error() }

// Unwrap returns the dial error.
func (e *DialError) Unwrap() error { return e.Err }
