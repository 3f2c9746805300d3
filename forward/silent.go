package forward

import "time"

// FixedOwnerAnswer bounds the wait for a fixed owner's answer (one
// without election, which never moves): the owner bounds each of its
// statements on the primary at 30 s, so an owner that has sent nothing
// for longer is silent (a partition, a frozen machine) and the statement
// fails with 1429 (it may have run) instead of waiting forever (issue 35:
// e2e/faults TestSilentOwner found the hang). An elected owner's
// statements are bounded when the leadership moves (bound).
const FixedOwnerAnswer = 35 * time.Second

// boundFixed gives a statement in flight on c, sent to a fixed owner,
// FixedOwnerAnswer to be answered; the returned function lifts the
// bound.
func (f *Forwarder) boundFixed(c *conn) (stop func() bool) {
	nc := c.NetConn()
	_ = nc.SetReadDeadline(time.Now().Add(FixedOwnerAnswer))
	return func() bool {
		_ = nc.SetReadDeadline(time.Time{})
		return true
	}
}
