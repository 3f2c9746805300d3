package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/directgate/directgate/config"
)

// users[].max_pool_share: a user's sessions hold at most that share of
// each backend's pool at once, so a few clients of one user (idle
// transactions, slow readers, a burst) cannot starve every other user.
// Each (user, backend) has a semaphore of max(1, share × pool size)
// tokens; a session holds one while it holds a connection of that
// backend.

// shareKey names one user's share of one backend's pool.
type shareKey struct{ user, backend string }

// poolShares are the semaphores of the users with a max_pool_share.
type poolShares struct {
	mu   sync.Mutex
	sems map[shareKey]chan struct{}
}

// sem returns the semaphore of user's share of be's pool (made on first
// use, sized from the cluster's pool size then).
func (ps *poolShares) sem(user config.User, be *backend) chan struct{} {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	k := shareKey{user.User, be.addr}
	if s := ps.sems[k]; s != nil {
		return s
	}
	n := max(1, int(user.MaxPoolShare*float64(be.cluster.conf.Load().Pool.Size)))
	s := make(chan struct{}, n)
	if ps.sems == nil {
		ps.sems = map[shareKey]chan struct{}{}
	}
	ps.sems[k] = s
	return s
}

// reset forgets the semaphores (a reload may change shares and sizes);
// sessions holding a token give it back to the semaphore they took it
// from.
func (ps *poolShares) reset() {
	ps.mu.Lock()
	ps.sems = nil
	ps.mu.Unlock()
}

// shareError is a statement that waited acquire_timeout for one of its
// user's own connections.
type shareError struct {
	user, backend string
	share         float64
	held          int
	waited        time.Duration
}

func (e *shareError) Error() string {
	return fmt.Sprintf("user %s holds its max_pool_share (%g: %d connections) of %s's pool and waited %v for one of them; end idle transactions of this user, or raise max_pool_share",
		e.user, e.share, e.held, e.backend, e.waited)
}

// takeShare takes a token of the session's share of be's pool, waiting up
// to the pool's acquire_timeout. It is a no-op for users without a share.
func (ss *Session) takeShare(be *backend) error {
	if ss.user.MaxPoolShare <= 0 || ss.user.MaxPoolShare >= 1 || ss.share != nil {
		return nil
	}
	sem := ss.srv.shares.sem(ss.user, be)
	select {
	case sem <- struct{}{}:
		ss.share = sem
		return nil
	default:
	}
	ss.proc.waiting(waitShare)
	defer ss.proc.waiting(waitNone)
	var err error
	ss.blocking(offloadShare, func() { err = ss.waitShare(be, sem) })
	return err
}

// waitShare is takeShare's wait for a token of sem, up to be's pool's
// acquire_timeout.
func (ss *Session) waitShare(be *backend, sem chan struct{}) error {
	wait := be.cluster.conf.Load().Pool.AcquireTimeout
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		ss.share = sem
		return nil
	case <-t.C:
		return &shareError{user: ss.user.User, backend: be.addr, share: ss.user.MaxPoolShare, held: cap(sem), waited: wait}
	case <-ss.statementContext().Done():
		return context.Cause(ss.statementContext())
	}
}

// giveShare gives back the session's token, if it holds one.
func (ls *leaseState) giveShare() {
	if ls.share != nil {
		<-ls.share
		ls.share = nil
	}
}
