package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/directgate/directgate/accounts"
	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// MariaDB's own accounts log in (mariadb_accounts, off by default): a
// client whose name no users[] entry has is checked against the account
// rows of mysql.global_priv as MariaDB checks them (package accounts), for
// the client's own address. Its sessions then run as the account, on pools
// keyed by the account row, its version and SHA1(password) derived from
// the client's answer: a changed account (password, global grants, lock)
// gets new pools, and the old ones close (idle connections at once, the
// others when their sessions let them go), so that no connection logged in
// before the change serves a new session. Every connection dialed as an
// account checks that MariaDB took it for the very row the gateway matched
// (SELECT CURRENT_USER()): MariaDB checks the gateway's address, the
// gateway the client's.

// mdbAccounts is the server's state of mariadb_accounts.
type mdbAccounts struct {
	conf  atomic.Pointer[config.MariaDBAccounts]
	cache *accounts.Cache
	// pools counts the sessions of each account pool key (foundRows
	// false), bounding the keys at max_pools.
	pools accounts.Tracker[poolKey]
	group *safego.Group
	stop  chan struct{}
	once  sync.Once
}

// accountLogin is what a session logged in as a MariaDB account keeps.
type accountLogin struct {
	// key is its pools' key, foundRows false.
	key poolKey
}

// newMDBAccounts builds the state of mariadb_accounts; its loop starts
// with Serve.
func (s *Server) newMDBAccounts(conf config.MariaDBAccounts) *mdbAccounts {
	a := &mdbAccounts{group: safego.New(s.log), stop: make(chan struct{})}
	a.conf.Store(&conf)
	a.cache = accounts.New(cacheConfig(conf), s.loadAccounts, s.log.Named("mariadb_accounts"))
	return a
}

func cacheConfig(c config.MariaDBAccounts) accounts.Config {
	// The pools are swept at least every pool_idle (and every second
	// at most).
	return accounts.Config{Enabled: c.Enabled, Refresh: c.Refresh, MaxAccounts: c.MaxAccounts, Tick: max(c.PoolIdle, time.Second)}
}

// setConfig applies a reloaded mariadb_accounts.
func (a *mdbAccounts) setConfig(c config.MariaDBAccounts) {
	a.conf.Store(&c)
	a.cache.SetConfig(cacheConfig(c))
}

// on reports whether the mode is enabled.
func (a *mdbAccounts) on() bool { return a != nil && a.conf.Load().Enabled }

// start runs the accounts' refresh loop (once).
func (s *Server) startMDBAccounts() {
	a := s.accts
	a.once.Do(func() {
		a.group.Go("mariadb accounts", func() { a.cache.Run(a.stop, s.sweepAccountPools) })
	})
}

// stopMDBAccounts stops the loop and waits for it.
func (s *Server) stopMDBAccounts() {
	a := s.accts
	if a == nil {
		return
	}
	a.once.Do(func() {})
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	a.group.Wait()
}

// accountsCluster is mariadb_accounts.cluster, by default the first
// cluster.
func (s *Server) accountsCluster() string {
	if c := s.accts.conf.Load().Cluster; c != "" || len(s.clusterNames) == 0 {
		return c
	}
	return s.clusterNames[0]
}

// accountsBackend is where the accounts of cluster are read and checked:
// its primary, or while it has none (read_only turned on, a failover) a
// serving replica, which has the same accounts when they replicate.
func (s *Server) accountsBackend(cluster string) (*backend, error) {
	c := s.clusters[cluster]
	cs := s.health.Snapshot().Cluster(cluster)
	if c == nil || cs == nil {
		return nil, fmt.Errorf("no cluster %q", cluster)
	}
	for _, addr := range append([]string{cs.Primary}, cs.Replicas...) {
		if be := c.backend(addr); addr != "" && be != nil {
			return be, nil
		}
	}
	return nil, fmt.Errorf("cluster %s has no serving backend", cluster)
}

// loadAccounts runs the cache's query on the primary of
// mariadb_accounts.cluster (accountsBackend) with the cluster's backend
// account.
func (s *Server) loadAccounts(ctx context.Context, query string, fn func([][]byte)) error {
	be, err := s.accountsBackend(s.accountsCluster())
	if err != nil {
		return err
	}
	p, err := be.pool(false)
	if err != nil {
		return err
	}
	l, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	err = l.Conn().QueryRows(query, fn)
	endLease(l, err)
	return err
}

// sweepAccountPools closes the account pools no session used for
// pool_idle and those of accounts that changed or went away since their
// login, with their side connections.
func (s *Server) sweepAccountPools() {
	a := s.accts
	used := a.pools.Sweep(a.conf.Load().PoolIdle, time.Now())
	keep := func(k poolKey) bool {
		if k.version == 0 {
			return true // users[]' accounts: pruneUserPools
		}
		k.foundRows = false
		return used(k) && a.cache.Current(k.rowUser(), k.host, k.version)
	}
	for _, name := range s.clusterNames {
		for _, be := range *s.clusters[name].backends.Load() {
			drop := false
			be.eachPool(func(k poolKey, _ *pools.Pool[*backendConn]) { drop = drop || !keep(k) })
			if drop {
				be.prune(keep)
			}
			be.pruneKillers(keep)
		}
	}
}

// pruneKillers closes the side connections of the accounts keep refuses.
func (be *backend) pruneKillers(keep func(poolKey) bool) {
	be.mu.Lock()
	defer be.mu.Unlock()
	for k, kl := range be.killers {
		if keep(k) {
			continue
		}
		kl.mu.Lock()
		if kl.conn != nil {
			_ = kl.conn.Quit()
			kl.conn = nil
		}
		kl.mu.Unlock()
		delete(be.killers, k)
	}
}

// accountKey is the session's pool key when it logged in as a MariaDB
// account.
func (ss *Session) accountKey() (poolKey, bool) {
	if ss.account == nil {
		return poolKey{}, false
	}
	k := ss.account.key
	k.foundRows = ss.caps&wire.CapFoundRows != 0
	return k, true
}

// leaveAccount ends the session's use of its account's pools.
func (ss *Session) leaveAccount() {
	if ss.account != nil {
		ss.srv.accts.pools.Leave(ss.account.key, time.Now())
		ss.account = nil
	}
}

// clientAddr is the client's IP address.
func (ss *Session) clientAddr() netip.Addr {
	ap, err := netip.ParseAddrPort(ss.nc.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// loginAccount checks a login as a MariaDB account (mariadb_accounts) of
// name, whose answer came with plugin: it returns the user the session
// runs as and the account, or MariaDB's refusal (logged). err is an I/O
// error with the client.
func (ss *Session) loginAccount(name, plugin string, answer []byte) (config.User, *accountLogin, *wire.SQLError, error) {
	ip := ss.clientAddr()
	denied := wire.NewError(mysqlserver.ErAccessDenied, "28000", "Access denied for user '%s'@'%s' (using password: %s)", name, accounts.ClientHost(ip), yesNo(len(answer) > 0))
	var row accounts.Row
	var found bool
	var err error
	ss.blocking(offloadOwnQuery, func() {
		ctx, cancel := context.WithTimeout(ss.context(), ss.srv.cfg.HandshakeTimeout)
		defer cancel()
		row, found, err = ss.srv.accts.cache.Lookup(ctx, name, ip)
	})
	switch {
	case err != nil:
		ss.log.Error("login refused: MariaDB's accounts could not be read", "user", name, "error", err)
		return config.User{}, nil, denied, nil
	case !found:
		ss.log.Warn("login refused: no users[] entry and no MariaDB account matches", "user", name)
		return config.User{}, nil, denied, nil
	case row.Plugin != accounts.NativePassword:
		ss.log.Warn("login refused: the MariaDB account authenticates with a plugin the gateway cannot check (only mysql_native_password and no password)", "account", row.Name(), "plugin", row.Plugin)
		return config.User{}, nil, denied, nil
	}
	if len(answer) > 0 && plugin != wire.NativePassword {
		if answer, err = ss.switchToNative(); err != nil {
			return config.User{}, nil, nil, err
		}
		denied = wire.NewError(mysqlserver.ErAccessDenied, "28000", "Access denied for user '%s'@'%s' (using password: %s)", name, accounts.ClientHost(ip), yesNo(len(answer) > 0))
	}
	stage1, ok := accounts.VerifyNative(ss.salt, answer, row.AuthString)
	if !ok {
		ss.log.Warn("login refused: wrong password for the MariaDB account", "account", row.Name())
		return config.User{}, nil, denied, nil
	}
	if row.Locked {
		ss.log.Warn("login refused: the MariaDB account is locked", "account", row.Name())
		return config.User{}, nil, wire.NewError(4151, "HY000", "Access denied, this account is locked"), nil
	}
	return ss.admitAccount(name, row, stage1, denied)
}

// admitAccount opens the account's pools for a login whose password was
// right: within max_pools, and only when MariaDB takes the gateway's
// connection for the same row (checkAccountHost, at dial).
func (ss *Session) admitAccount(name string, row accounts.Row, stage1 []byte, denied *wire.SQLError) (config.User, *accountLogin, *wire.SQLError, error) {
	conf := ss.srv.accts.conf.Load()
	acct := &accountLogin{key: poolKey{user: name, password: string(stage1), hashed: stage1 != nil, anon: row.User == "", host: row.Host, version: row.Version}}
	if !ss.srv.accts.pools.Enter(acct.key, conf.MaxPools) {
		ss.log.Warn("login refused: every one of mariadb_accounts.max_pools account pools has sessions", "account", row.Name(), "max_pools", conf.MaxPools)
		return config.User{}, nil, wire.NewError(mysqlserver.ErConCount, "08004", "Too many connections"), nil
	}
	k := acct.key
	k.foundRows = ss.caps&wire.CapFoundRows != 0
	var err error
	cluster := ss.srv.accountsCluster()
	ss.blocking(offloadOwnQuery, func() { err = ss.srv.tryAccount(ss.context(), cluster, k) })
	if err != nil {
		ss.srv.accts.pools.Leave(acct.key, time.Now())
		var sqlErr *wire.SQLError
		var hostErr *accountHostError
		switch {
		case errors.As(err, &hostErr):
			ss.log.Warn("login refused: MariaDB takes the gateway's connection for another account row than the client's address matches; add a row for the gateway's host or a users[] entry", "account", row.Name(), "mariadb_chose", hostErr.got)
			return config.User{}, nil, denied, nil
		case errors.As(err, &sqlErr) && sqlErr.Code == mysqlserver.ErAccessDenied:
			ss.log.Warn("login refused: MariaDB refused the gateway's login as the account", "account", row.Name(), "error", err)
			return config.User{}, nil, denied, nil
		case errors.As(err, &sqlErr):
			return config.User{}, nil, sqlErr, nil
		}
		ss.log.Warn("login refused: cannot log in to the backend as the account", "account", row.Name(), "error", err)
		return config.User{}, nil, toClientError(err), nil
	}
	prio := config.DefaultPriority
	u := config.User{User: name, BackendUser: name, Cluster: cluster, TransactionMode: config.TxnSingle, Priority: &prio}
	return u, acct, nil, nil
}

// switchToNative asks the client for a mysql_native_password answer to
// the session's salt (auth switch) and returns it.
func (ss *Session) switchToNative() ([]byte, error) {
	if err := ss.client.WritePacket(wire.AppendAuthSwitch(nil, wire.NativePassword, ss.salt)); err != nil {
		return nil, err
	}
	if err := ss.client.Flush(); err != nil {
		return nil, err
	}
	return ss.client.ReadPacket()
}

// tryAccount makes sure account pool k on the primary of cluster (or a
// replica: accountsBackend) logs in:
// it has a connection (each was checked at dial), or one is dialed now.
func (s *Server) tryAccount(ctx context.Context, cluster string, k poolKey) error {
	for attempt := 0; ; attempt++ {
		err := s.tryAccountPool(ctx, cluster, k)
		if !errors.Is(err, pools.ErrClosed) || attempt == 1 {
			return err
		}
		// The pool was closed between lookup and use (a reload, or
		// prune after an account changed): a second lookup opens a new
		// one, as backend does for a statement.
	}
}

// tryAccountPool is one attempt of tryAccount.
func (s *Server) tryAccountPool(ctx context.Context, cluster string, k poolKey) error {
	be, err := s.accountsBackend(cluster)
	if err != nil {
		return err
	}
	p, err := be.poolFor(k)
	if err != nil {
		return err
	}
	if p.Stat().Open > 0 {
		return nil // dialed and checked already: no wait for one
	}
	l, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	l.Release()
	return nil
}

// accountHostError says MariaDB took a connection for another account
// row than the gateway matched.
type accountHostError struct{ want, got string }

func (e *accountHostError) Error() string {
	return fmt.Sprintf("MariaDB logged the gateway in as %s, not %s", e.got, e.want)
}

// checkAccountHost checks, on a connection just dialed for an account
// pool, that MariaDB chose the row the gateway matched for the client.
func checkAccountHost(conn *backendConn, k poolKey) error {
	if k.version == 0 {
		return nil
	}
	var got string
	err := conn.QueryRows("SELECT CURRENT_USER()", func(row [][]byte) {
		if len(row) == 1 {
			got = string(row[0])
		}
	})
	if err != nil {
		return err
	}
	if want := k.rowUser() + "@" + k.host; got != want {
		return &accountHostError{want: want, got: got}
	}
	return nil
}

// rowUser is the User of the account row of a MariaDB account's pool:
// the login's name, or "" for the anonymous account.
func (k poolKey) rowUser() string {
	if k.anon {
		return ""
	}
	return k.user
}

// yesNo is MariaDB's "using password" word.
func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}

// accountChange marks a statement that may change MariaDB's accounts
// (changesAccounts) while it runs: logins read the accounts again after
// it, and the accounts' pools are swept. It returns what to call when the
// statement ended.
func (ss *Session) accountChange(sql string) func() {
	if !ss.srv.accts.on() || !changesAccounts(sql) {
		return func() {}
	}
	return ss.srv.accts.cache.Changing()
}

// changesAccounts reports whether sql, a statement that commits
// implicitly, may change an account, its password or its global grants:
// CREATE/DROP/RENAME/ALTER USER, CREATE/DROP ROLE, GRANT, REVOKE, SET
// PASSWORD, FLUSH PRIVILEGES (not other FLUSHes: a read of the accounts
// would show in TABLE_STATISTICS after FLUSH TABLE_STATISTICS, make
// compat's main.subselect).
func changesAccounts(sql string) bool {
	b := unsafe.Slice(unsafe.StringData(sql), len(sql))
	w, rest := querypath.FirstWord(b)
	switch {
	case querypath.EqFold(w, "GRANT"), querypath.EqFold(w, "REVOKE"):
		return true
	case querypath.EqFold(w, "FLUSH"):
		return flushesPrivileges(rest)
	case querypath.EqFold(w, "SET"):
		w2, _ := querypath.FirstWord(rest)
		return querypath.EqFold(w2, "PASSWORD")
	case querypath.EqFold(w, "CREATE"), querypath.EqFold(w, "DROP"), querypath.EqFold(w, "ALTER"), querypath.EqFold(w, "RENAME"):
		w2, rest2 := querypath.FirstWord(rest)
		if querypath.EqFold(w2, "OR") { // CREATE OR REPLACE USER
			_, rest3 := querypath.FirstWord(rest2)
			w2, _ = querypath.FirstWord(rest3)
		}
		return querypath.EqFold(w2, "USER") || querypath.EqFold(w2, "ROLE")
	}
	return false
}

// flushesPrivileges reports whether the options of a FLUSH (rest, after
// the keyword) name PRIVILEGES.
func flushesPrivileges(rest []byte) bool {
	for len(rest) > 0 {
		var w []byte
		w, rest = querypath.FirstWord(rest)
		if querypath.EqFold(w, "PRIVILEGES") {
			return true
		}
		if len(w) == 0 && len(rest) > 0 {
			rest = rest[1:] // a comma, an underscore
		}
	}
	return false
}

// checkLogin checks a login (handshake or COM_CHANGE_USER) of name, whose
// answer to salt came with plugin: against users[], or, for a name it
// lacks, against MariaDB's accounts (mariadb_accounts). It returns the
// user, the account for a MariaDB account, or the refusal to send
// (logged); err is an I/O error with the client.
func (ss *Session) checkLogin(plugin, name string, salt, answer []byte) (config.User, *accountLogin, *wire.SQLError, error) {
	user, known := ss.srv.user(name)
	if !known && ss.srv.accts.on() {
		return ss.loginAccount(name, plugin, answer)
	}
	ok, err := ss.checkPassword(plugin, name, salt, answer, user, known)
	if err != nil || ok {
		return user, nil, nil, err
	}
	ss.log.Warn("login refused", "user", name)
	return user, nil, accessDenied(ss, name, len(answer) > 0), nil
}

// leaveLogin gives up an account login that was admitted no further.
func (ss *Session) leaveLogin(acct *accountLogin) {
	if acct != nil {
		ss.srv.accts.pools.Leave(acct.key, time.Now())
	}
}

// privKey names an account in the cache of grants (privileges.go): its
// user name, and for a MariaDB account its row and version too, so that
// an account dropped and created again, or granted more, is read anew.
func privKey(k poolKey) string {
	if k.version == 0 {
		return k.user
	}
	return fmt.Sprintf("%s@%s#%x", k.user, k.host, k.version)
}
