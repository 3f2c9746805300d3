package gateway

import (
	"net"
	"sync"
	"time"
)

// failWindow is how far back failed logins from an address count.
const failWindow = time.Minute

// maxFailAddrs bounds the addresses whose failed logins are remembered:
// past it, expired entries are dropped, then arbitrary ones.
const maxFailAddrs = 10000

// addrGuard limits what one source address can do: connections at once
// (max_connections_per_address) and the pace of failed logins
// (auth_failure_limit, auth_failure_delay). Its maps are bounded: conns
// holds only addresses with live connections, fails at most maxFailAddrs
// addresses, each forgotten a minute after its last failure.
type addrGuard struct {
	mu    sync.Mutex
	conns map[string]int
	fails map[string]*failures
	now   func() time.Time
}

// failures are an address's failed logins in the current window.
type failures struct {
	since time.Time // start of the window
	n     int
}

func newAddrGuard() *addrGuard {
	return &addrGuard{conns: map[string]int{}, fails: map[string]*failures{}, now: time.Now}
}

// addrOf is the IP address of a client, without the port.
func addrOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// admit counts a connection from addr, or refuses it (false) when addr
// already has max (> 0) connections. A refused connection is not counted.
func (g *addrGuard) admit(addr string, max int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if max > 0 && g.conns[addr] >= max {
		return false
	}
	g.conns[addr]++
	return true
}

// release uncounts a connection admit counted.
func (g *addrGuard) release(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns[addr] <= 1 {
		delete(g.conns, addr)
		return
	}
	g.conns[addr]--
}

// failed records a failed login from addr and returns how long to hold
// the connection before closing it: delay once addr has more than limit
// failures within failWindow, else 0.
func (g *addrGuard) failed(addr string, limit int, delay time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	f := g.fails[addr]
	if f == nil || now.Sub(f.since) > failWindow {
		if f == nil && len(g.fails) >= maxFailAddrs {
			g.sweep(now)
		}
		f = &failures{since: now}
		g.fails[addr] = f
	}
	f.n++
	if f.n > limit {
		return delay
	}
	return 0
}

// sweep drops expired entries of fails; when none expired, it drops
// arbitrary ones down to three quarters of the bound, so a flood of
// addresses cannot grow the map. Called with mu held.
func (g *addrGuard) sweep(now time.Time) {
	for a, f := range g.fails {
		if now.Sub(f.since) > failWindow {
			delete(g.fails, a)
		}
	}
	for a := range g.fails {
		if len(g.fails) < maxFailAddrs*3/4 {
			break
		}
		delete(g.fails, a)
	}
}

// authFailed records a failed login (handshake or COM_CHANGE_USER) of the
// session's client and, once its address has failed more than
// auth_failure_limit times within a minute, waits auth_failure_delay.
// Call it before writing the access denied error, so a guessing client
// gets each answer late; Serve calls it after a handshake refused
// without it.
func (ss *Session) authFailed() {
	ss.failNoted = true
	cfg := ss.srv.cfg
	if d := ss.srv.guard.failed(addrOf(ss.nc.RemoteAddr()), cfg.AuthFailureLimit, *cfg.AuthFailureDelay); d > 0 {
		ss.log.Debug("delaying a failed login: too many from this address", "delay", d)
		time.Sleep(d)
	}
}

// writeDeadlineConn sets a write deadline of timeout before each write to
// the client, so a client that stops reading is cut after timeout.
type writeDeadlineConn struct {
	net.Conn
	timeout time.Duration
}

// NetConn returns the wrapped connection (for wire.Conn's checks of the
// socket).
func (c writeDeadlineConn) NetConn() net.Conn { return c.Conn }

func (c writeDeadlineConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.Conn.Write(p)
}
