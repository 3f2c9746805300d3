package gateway

import (
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/directgate/directgate/querypath"
)

// MariaDB's privileges decide who sees and kills what. A user with a
// backend account of its own (users[].backend_user) has, through the
// gateway, the rights that account's global grants give directly: PROCESS
// sees every session in the process list, SUPER or CONNECTION ADMIN kills
// any, granted to the account or to the role it logs in with (its default
// role, and the roles granted to that role). The grants are read from the
// server on a connection logged in as the account (its side connection,
// never waiting behind the pool) when a session logs in, and again after a
// FLUSH PRIVILEGES, GRANT or REVOKE through the gateway; every session of
// the account shares what was read for privTTL (at most maxPrivEntries
// accounts). users[].admin opens the same doors and the gateway's own
// surfaces; users on the cluster's shared account have only it (that
// account's grants are everyone's).

// privTTL is how long an account's grants, once read, serve its sessions.
const privTTL = time.Minute

// maxPrivEntries bounds the accounts whose grants are remembered (the map
// is emptied when full).
const maxPrivEntries = 10000

// privSQL reads the current account's grants and those of its current
// role, with the roles granted to that role (SHOW GRANTS without FOR, one
// line each: information_schema.USER_PRIVILEGES lists the account's own
// only).
const privSQL = "SHOW GRANTS"

// accountPrivs are the global privileges of a backend account that the
// gateway follows.
type accountPrivs struct {
	// process: PROCESS, the account sees every thread.
	process bool
	// killAny: SUPER or CONNECTION ADMIN, the account kills any thread.
	killAny bool
}

// privEntry is one account's remembered grants.
type privEntry struct {
	privs accountPrivs
	at    time.Time
}

// privCache remembers accounts' grants, by backend user name.
type privCache struct {
	mu sync.Mutex
	m  map[string]privEntry
}

func (c *privCache) get(account string, now time.Time) (accountPrivs, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[account]
	if !ok || now.Sub(e.at) >= privTTL {
		return accountPrivs{}, false
	}
	return e.privs, true
}

func (c *privCache) put(account string, p accountPrivs, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxPrivEntries {
		c.m = map[string]privEntry{}
	}
	c.m[account] = privEntry{p, now}
}

// forget drops every remembered account (FLUSH PRIVILEGES, GRANT, REVOKE).
func (c *privCache) forget() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}

// privsOf reads the global privileges out of privSQL's lines: those of
// "GRANT <privileges> ON *.* TO ..." (ALL PRIVILEGES gives every one).
func privsOf(lines []string) accountPrivs {
	var p accountPrivs
	for _, l := range lines {
		if len(l) < 6 || !strings.EqualFold(l[:6], "GRANT ") {
			continue
		}
		on := strings.Index(l, " ON *.* TO ")
		if on < 0 {
			continue // a role granted, or grants below the global level
		}
		for t := range strings.SplitSeq(l[6:on], ",") {
			switch strings.ToUpper(strings.TrimSpace(t)) {
			case "PROCESS":
				p.process = true
			case "SUPER", "CONNECTION ADMIN":
				p.killAny = true
			case "ALL PRIVILEGES", "ALL":
				p.process, p.killAny = true, true
			}
		}
	}
	return p
}

// seesAll reports whether the session's user sees every session: an admin
// of the gateway, or a user whose own backend account has PROCESS.
func (ss *Session) seesAll() bool { return ss.user.Admin || ss.accountPrivs().process }

// killsAny reports whether the session's user may kill any session: an
// admin of the gateway, or a user whose own backend account has SUPER or
// CONNECTION ADMIN.
func (ss *Session) killsAny() bool { return ss.user.Admin || ss.accountPrivs().killAny }

// accountPrivs returns the global privileges of the session's own backend
// account, read once per session, at login (none for a user on the
// cluster's account, or when they cannot be read: then the next need asks
// again).
func (ss *Session) accountPrivs() accountPrivs {
	if ss.privsRead {
		return ss.privs
	}
	if ss.cluster == nil || ss.user.BackendUser == "" {
		return accountPrivs{}
	}
	k := ss.poolKey()
	if k.user == "" {
		return accountPrivs{} // the cluster's account
	}
	now := time.Now()
	if p, ok := ss.srv.privs.get(privKey(k), now); ok {
		ss.privs, ss.privsRead = p, true
		return p
	}
	be, err := ss.primaryBackend(ss.srv.health.Snapshot(), ss.cluster.conf.Load(), "", true)
	if err != nil {
		ss.log.Warn("cannot read the backend account's grants", "account", k.user, "error", err)
		return accountPrivs{}
	}
	var lines []string
	ss.blocking(offloadOwnQuery, func() {
		err = be.sideConn(k, func(conn *backendConn) error {
			lines = lines[:0]
			return conn.QueryRows(privSQL, func(row [][]byte) {
				if len(row) == 1 && row[0] != nil {
					lines = append(lines, string(row[0]))
				}
			})
		})
	})
	if err != nil {
		ss.log.Warn("cannot read the backend account's grants", "account", k.user, "error", err)
		return accountPrivs{}
	}
	p := privsOf(lines)
	ss.srv.privs.put(privKey(k), p, now)
	ss.privs, ss.privsRead = p, true
	return p
}

// changesGrants reports whether sql, a statement that commits implicitly
// (querypath.Route.ImplicitCommit), may change what accounts are granted:
// FLUSH (PRIVILEGES among its options), GRANT, REVOKE.
func changesGrants(sql string) bool {
	w, _ := querypath.FirstWord(unsafe.Slice(unsafe.StringData(sql), len(sql)))
	return querypath.EqFold(w, "FLUSH") || querypath.EqFold(w, "GRANT") || querypath.EqFold(w, "REVOKE")
}

// grantsChanged forgets every account's remembered grants after a
// statement that may have changed them, and reads the session's own again.
func (ss *Session) grantsChanged() {
	ss.srv.privs.forget()
	ss.privsRead = false
	ss.accountPrivs()
}
