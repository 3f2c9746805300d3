package pools

import "time"

// Stat is a snapshot of a pool's state and counters, taken by Pool.Stat.
// The connections' gauges and the acquire counters are puddle's books.
// The gauges (Size to QueueWait) are read together and are consistent with
// each other up to connections moving between idle and in use during the
// snapshot; the counters only grow.
type Stat struct {
	// Size is the maximum number of open connections.
	Size int
	// MinIdle is the number of connections the pool keeps open.
	MinIdle int
	// Open is the number of established connections, idle or in use.
	Open int
	// InUse is the number of connections leased out.
	InUse int
	// Idle is the number of connections in the idle queue.
	Idle int
	// Waiting is the number of Acquire calls waiting for a connection now,
	// and of waits outside Acquire (Pool.WaitOutside).
	Waiting int
	// Dialing is the number of dials in flight.
	Dialing int
	// QueueWait is how long an Acquire waits now (see Pool.QueueWait);
	// 0 while none waits.
	QueueWait time.Duration
	// Order is the reuse order.
	Order Order

	// Acquires counts the connections puddle handed out: found idle,
	// released to a waiting caller, or dialed for one (not those a
	// holder passed on with Lease.Pass).
	Acquires int64
	// AcquireTime is the total time those acquires took.
	AcquireTime time.Duration
	// EmptyAcquires counts the acquires that found no idle connection and
	// waited for a release or a dial.
	EmptyAcquires int64
	// EmptyAcquireTime is the total time those acquires waited.
	EmptyAcquireTime time.Duration
	// CanceledAcquires counts the acquires that ended before a connection
	// came: the caller gave up, its AcquireTimeout passed, the pool
	// closed or resized under it.
	CanceledAcquires int64

	// Waits counts Acquire calls that found no idle connection and had to
	// wait (for a release, a dial, a timeout or a cancellation), and waits
	// outside Acquire.
	Waits int64
	// WaitTime is the total time those waits took.
	WaitTime time.Duration
	// Dials counts dials started.
	Dials int64
	// DialErrors counts dials that failed.
	DialErrors int64
	// Destroyed counts connections closed for any reason: broken, expired,
	// idle too long, over size, or the pool closed.
	Destroyed int64
	// AcquireTimeouts counts Acquire calls that ended with
	// *AcquireTimeoutError, and waits outside Acquire that timed out.
	AcquireTimeouts int64
}
