package gateway

import (
	"os"
	"runtime"
	"strings"

	"github.com/directgate/directgate/internal/ioloop"
	"github.com/directgate/directgate/pools"
)

// Sessions on io_uring loops (io_loops). With loops, each session runs
// as a task of one of them (ioloop) instead of a goroutine: the same code,
// the same one statement path, but its reads and writes, of the client
// and of the backend connection it leases, are operations of the loop's
// ring, submitted with every other session's in one system call, and the
// session waits for them as a coroutine of the loop's thread.
//
// The rule that keeps that safe: while on its task, a session waits for
// nothing but its own sockets. Whatever else may wait (a pooled
// connection, a sleep, another session's result, another connection such
// as the owner's or a KILL's) runs through blocking, which gives the
// session's sockets back to goroutines and runs it on one while the task
// waits. A wait forgotten there stalls every session of the loop for as
// long, and deadlocks them when it waits for one of them.

// startLoops starts the io_uring loops io_loops asks for and has the
// front run sessions on them. A kernel that refuses io_uring (too old,
// kernel.io_uring_disabled, a container's seccomp profile) leaves the
// sessions on goroutines, with a warning.
func (s *Server) startLoops() {
	n := s.cfg.IOLoops
	if n == 0 {
		return
	}
	hold := holdProcessors(n, runtime.GOMAXPROCS(0), os.Getenv("GODEBUG"))
	loops := make([]*ioloop.Loop, 0, n)
	for range n {
		l, err := ioloop.New(ioloop.Config{HoldProcessor: hold})
		if err != nil {
			s.log.Warn("io_loops: io_uring is not available here; sessions run on goroutines", "error", err)
			for _, l := range loops {
				l.Close()
			}
			return
		}
		loops = append(loops, l)
	}
	s.log.Info("sessions run on io_uring loops", "io_loops", n, "hold_processors", hold)
	waits := make(map[*ioloop.Loop]loopWaits, n)
	for _, l := range loops {
		waits[l] = loopWaits{}
	}
	s.loopWaits.Store(&waits)
	s.loops.Store(&loops)
	s.front.RunOnLoops(loops)
}

// holdProcessors reports whether n loops keep their Go processors while
// they wait (ioloop.Config.HoldProcessor): only while that leaves at
// least one of gomaxprocs to the other goroutines (the pool waits,
// owner statements and health checks that sessions offload, the
// listener, the garbage collector's workers), and only with the runtime's
// asynchronous preemption on, whose signal frees a held processor for a
// stop of the world.
func holdProcessors(n, gomaxprocs int, godebug string) bool {
	for _, kv := range strings.Split(godebug, ",") {
		if strings.TrimSpace(kv) == "asyncpreemptoff=1" {
			return false
		}
	}
	return n > 0 && n < gomaxprocs
}

// closeLoops stops the loops, once no session runs on them.
func (s *Server) closeLoops() {
	if loops := s.loops.Swap(nil); loops != nil {
		for _, l := range *loops {
			l.Close()
		}
	}
}

// ServeTask implements mysqlserver.TaskConn: Serve as the loop task t.
func (ss *Session) ServeTask(t *ioloop.Task) {
	ss.loopWaits = (*ss.srv.loopWaits.Load())[t.Loop()]
	ss.setTask(t)
	defer ss.setTask(nil)
	ss.Serve()
}

// setTask makes t (nil: goroutines) read and write the session's client
// and its leased backend connection.
func (ss *Session) setTask(t *ioloop.Task) {
	ss.task = t
	ss.client.SetTask(t)
	if ss.lease != nil {
		ss.lease.Conn().SetTask(t)
	}
}

// loopSide is a session's io_uring loop, when it runs on one.
type loopSide struct {
	// task is the io_uring loop task the session runs as, while it reads
	// and writes its sockets through it; nil on a goroutine, and while
	// blocking runs something that may wait.
	task *ioloop.Task
	// loopWaits are the connection queues of the session's loop, and
	// connWait its part in one while it waits (connwait.go).
	loopWaits loopWaits
	connWait  connWaiter
}

// blocking runs fn, which may wait for something other than the
// session's own sockets (why says what, for the metrics). On a loop it
// runs on a goroutine while the session's task waits, with the session's
// sockets given back to goroutines meanwhile (fn may read and write them,
// lease or give back connections); elsewhere it just runs.
func (ss *Session) blocking(why offloadReason, fn func()) {
	t := ss.task
	if t == nil {
		fn()
		return
	}
	ss.srv.metrics.offload(why)
	ss.setTask(nil)
	t.Offload(fn)
	ss.setTask(t)
}

// offloadReason is what a session on a loop waited for on a goroutine
// (Session.blocking), the reason label of
// directgate_io_loop_session_offloads_total.
type offloadReason uint8

const (
	offloadPool          offloadReason = iota // a pooled connection, none idle
	offloadShare                              // the user's max_pool_share
	offloadBuffer                             // a primary, in the failover buffer
	offloadThrottle                           // the throttler's admission
	offloadHotRow                             // a hot row's turn
	offloadConsolidation                      // a consolidated read's leader
	offloadOwner                              // a statement forwarded to the owner
	offloadKill                               // a KILL of another session's statement
	offloadOwnQuery                           // a query of the gateway's own
	offloadLoginDelay                         // the failed-login delay
	numOffloadReasons
)

var offloadNames = [numOffloadReasons]string{"pool", "pool_share", "failover_buffer", "throttle", "hot_row", "consolidation", "owner", "kill", "own_query", "login_delay"}

func (r offloadReason) String() string { return offloadNames[r] }

// acquire leases a connection from pool: an idle one at once, else, on a
// loop, while every connection is busy, one passed on by a session of the
// same loop (waitOnLoop: no goroutine, no wake-up), else through blocking
// (a dial, or a wait, in the pool's Acquire).
func (ss *Session) acquire(pool *pools.Pool[*backendConn]) (*pools.Lease[*backendConn], error) {
	if ss.task == nil {
		return pool.Acquire(ss.statementContext())
	}
	if l, ok := pool.TryAcquire(); ok {
		return l, nil
	}
	if pool.Busy() && ss.statementContext().Err() == nil {
		if l, done, err := ss.waitOnLoop(pool); done {
			return l, err
		}
	}
	return ss.acquireBlocking(pool)
}

// acquireBlocking is acquire's wait in the pool's Acquire, on a
// goroutine: a function of its own, so that what its closure captures
// is not allocated on acquire's fast paths.
func (ss *Session) acquireBlocking(pool *pools.Pool[*backendConn]) (l *pools.Lease[*backendConn], err error) {
	ss.blocking(offloadPool, func() { l, err = pool.Acquire(ss.statementContext()) })
	return l, err
}

// leased makes the session's task, if any, read and write the connection
// of the lease it just took.
func (ss *Session) leased(l *pools.Lease[*backendConn]) {
	if ss.task != nil {
		l.Conn().SetTask(ss.task)
	}
}

// unleased gives the connection of a lease the session is about to give
// back to goroutines: the pool, or another session, uses it next.
func unleased(l *pools.Lease[*backendConn]) { l.Conn().SetTask(nil) }
