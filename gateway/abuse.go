package gateway

import (
	"net"
	"sync"
	"time"
)

// addrGuard limits the connections one source address has at once
// (max_connections_per_address). Its map holds only addresses with live
// connections. The pace of failed logins is mysqlserver.LoginThrottle's.
type addrGuard struct {
	mu    sync.Mutex
	conns map[string]int
}

func newAddrGuard() *addrGuard {
	return &addrGuard{conns: map[string]int{}}
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

// authFailed records a failed login (handshake or COM_CHANGE_USER) of the
// session's client as user and, once its address or that user name has
// failed more than auth_failure_limit times within a minute, waits for
// its turn: answers to failures are spaced auth_failure_delay apart per
// address and per user name, across connections. Call it before writing
// the access denied error, so a guessing client gets each answer late;
// Serve calls it after a handshake refused without it.
func (ss *Session) authFailed(user string) {
	ss.failNoted = true
	cfg := ss.srv.cfg
	if d := ss.srv.logins.Failed(addrOf(ss.nc.RemoteAddr()), user, cfg.AuthFailureLimit, *cfg.AuthFailureDelay); d > 0 {
		ss.log.Debug("delaying a failed login: too many from this address or for this user", "delay", d)
		ss.blocking(offloadLoginDelay, func() { time.Sleep(d) })
	}
}
