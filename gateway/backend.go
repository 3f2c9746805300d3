package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/balance"
	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/protect"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
)

// unknownDB marks a backend connection whose default database is not known
// (after COM_RESET_CONNECTION): the next sync sets it explicitly.
const unknownDB = "\x00unknown"

// backendConn is a pooled backend connection with the session state the
// gateway has put on it.
type backendConn struct {
	*wire.BackendConn
	// addr is the backend's address, for errors; be is the backend.
	addr string
	be   *backend
	// db is the default database ("" none, unknownDB not known).
	db string
	// vars are the session variables applied on top of a fresh
	// connection's, by canonical name, with their SQL values.
	vars map[string]string
	// multiStmt tells whether CLIENT_MULTI_STATEMENTS is on.
	multiStmt bool
	// syncedState is the session state version last applied; 0 none.
	syncedState uint64
	// dirty is set when the connection carries state the gateway cannot
	// see (user variables, temporary tables, locks): it is reset before it
	// serves another session.
	dirty bool
	// stmts are the statements prepared on this connection, shared by
	// every session it serves; useClock orders them for eviction.
	stmts    map[connStmtKey]*connStmt
	useClock uint64
	// user and password are the account it logged in with, kept for
	// COM_CHANGE_USER; key is its pool's.
	user, password string
	key            poolKey
	// tracked is set when the server reports session state changes in
	// its OK packets (see initSession).
	tracked bool
	// lastInsertID is the connection's LAST_INSERT_ID() when
	// insertIDKnown; a statement that may have changed it makes it
	// unknown until it is read back.
	lastInsertID  uint64
	insertIDKnown bool
	// closed is set when the server closed the connection after an
	// answer (an error such as 1153 or 1927, COMMIT RELEASE): it is
	// destroyed, and that is no backend failure.
	closed bool
	// globals is cluster.globals when the connection's session started
	// (login or reset): its session defaults are the server's globals of
	// then.
	globals uint64
	// warnListed says the connection's warning list may hold conditions
	// (a statement raised some, whoever ran it; a statement without
	// tables keeps the list). False after a reset.
	warnListed bool
	// discard is set when the connection must be closed rather than
	// reset when its session lets it go: it ran XA statements (see
	// querypath.PinXA).
	discard bool
}

// poolKey names one of a backend's pools: the account its connections
// log in as and whether they have CLIENT_FOUND_ROWS (the one capability a
// connection cannot change after its handshake).
type poolKey struct {
	// user and password are the backend account; user "" is the cluster's
	// backend_user, read when a connection is dialed, so that a reload's
	// new credentials apply to that pool.
	user, password string
	foundRows      bool
	// For a MariaDB account (mariadb_accounts): hashed says password is
	// SHA1(password) (mysql_native_password's stage 1), host is the
	// account row's Host and version its version (accounts.Row); anon
	// says the row is the anonymous account (''), not user's. Version 0:
	// not such an account.
	hashed, anon bool
	host         string
	version      uint64
}

// backend is one backend server of a cluster: its pools and the load the
// gateway puts on it.
type backend struct {
	addr    string
	cluster *cluster
	// load counts statements in flight and their latency score, for
	// replica selection.
	load balance.Load

	// pools by account and CLIENT_FOUND_ROWS, each opened on first use
	// (only the cluster account's plain pool warms up). Copy-on-write:
	// read without a lock on every statement, replaced under mu.
	pools atomic.Pointer[map[poolKey]*pools.Pool[*backendConn]]
	mu    sync.Mutex
	// closed is set by close (under mu): no pool opens after it.
	closed bool
	// stmts counts the binary-protocol statements prepared on the
	// backend's pooled connections (makeStmtRoom).
	stmts atomic.Int64
	// budget bounds the connections of all the backend's pools together
	// (max_backend_connections; with a fleet, this gateway's share).
	budget *pools.Budget
	// probeRoom lets discovery probe the backend: under a fleet-wide cap,
	// only once the fleet's budget holds the probe's connection.
	probeRoom *probeRoom
	// killers are the connections set aside for KILL QUERY, by account
	// (kill.go); guarded by mu.
	killers map[poolKey]*killer
	// live are the pools' open connections, cut when discovery finds the
	// backend unreachable (silentcut.go).
	live liveConns
	// pipes carry pipelined reads (pipeline.go).
	pipes pipeGroups
}

// pool returns the backend's pool of the cluster's account for clients
// with or without CLIENT_FOUND_ROWS, creating it on first use.
func (be *backend) pool(foundRows bool) (*pools.Pool[*backendConn], error) {
	return be.poolFor(poolKey{foundRows: foundRows})
}

// poolFor returns the backend's pool for k, creating it on first use. It
// fails with pools.ErrClosed once the backend is closed.
func (be *backend) poolFor(k poolKey) (*pools.Pool[*backendConn], error) {
	if m := be.pools.Load(); m != nil {
		if p := (*m)[k]; p != nil {
			return p, nil
		}
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	var old map[poolKey]*pools.Pool[*backendConn]
	if m := be.pools.Load(); m != nil {
		old = *m
	}
	if p := old[k]; p != nil {
		return p, nil
	}
	if be.closed {
		return nil, pools.ErrClosed
	}
	p, err := be.cluster.newPool(be, k)
	if err != nil {
		return nil, err
	}
	next := make(map[poolKey]*pools.Pool[*backendConn], len(old)+1)
	for ok, op := range old {
		next[ok] = op
	}
	next[k] = p
	be.pools.Store(&next)
	return p, nil
}

// eachPool calls f for every pool the backend has opened.
func (be *backend) eachPool(f func(poolKey, *pools.Pool[*backendConn])) {
	if m := be.pools.Load(); m != nil {
		for k, p := range *m {
			f(k, p)
		}
	}
}

// prune closes the pools of users' own backend accounts that keep
// reports false for (after a reload changed or removed them): idle
// connections at once, leased ones when they come back. A session still
// using such an account opens its pool again.
func (be *backend) prune(keep func(poolKey) bool) {
	be.mu.Lock()
	m := be.pools.Load()
	if m == nil {
		be.mu.Unlock()
		return
	}
	next := make(map[poolKey]*pools.Pool[*backendConn], len(*m))
	var drop []*pools.Pool[*backendConn]
	for k, p := range *m {
		if k.user == "" || keep(k) {
			next[k] = p
		} else {
			drop = append(drop, p)
		}
	}
	be.pools.Store(&next)
	be.mu.Unlock()
	for _, p := range drop {
		p.Close()
	}
}

// broke handles a connection to this backend that failed mid-use: the
// backend is reported to discovery (probed at once), and its idle
// connections, likely dead too when the server went away, are closed.
func (be *backend) broke() {
	if h := be.cluster.health.Load(); h != nil {
		h.ReportFailure(be.addr)
	}
	be.eachPool(func(_ poolKey, p *pools.Pool[*backendConn]) { p.CloseIdle() })
}

// close closes the backend's pools: idle connections at once, leased
// ones when their statements end and they come back.
func (be *backend) close() {
	be.mu.Lock()
	defer be.mu.Unlock()
	be.closed = true
	be.closeKillers()
	be.pipes.retireAll(true)
	be.eachPool(func(_ poolKey, p *pools.Pool[*backendConn]) { p.Close() })
}

// cluster is one configured cluster: its backends and what the gateway
// learned about the servers.
type cluster struct {
	name string
	log  hclog.Logger
	// globals counts the SET GLOBAL statements sessions ran through the
	// gateway: a backend connection logged in (or reset) before the last
	// one carries the old session defaults (see backendConn.globals).
	globals atomic.Uint64
	// health receives dial failures; set once discovery runs.
	health atomic.Pointer[healthcheck.Observer]
	// dialKill, when not nil, replaces dial for the connections set aside
	// for KILL QUERY (tests with fake backends).
	dialKill func(ctx context.Context, be *backend, k poolKey) (*backendConn, error)

	// conf is the cluster's configuration; a reload swaps it.
	conf atomic.Pointer[config.Cluster]
	// fleetBudget says max_backend_connections is shared by a fleet of
	// gateways (topology.etcd): the fleet's agent sets each backend's
	// limit.
	fleetBudget bool
	// tls is conf.BackendTLS with its files read; a reload swaps it.
	tls atomic.Pointer[backendTLS]
	// backends maps address to backend, copy-on-write: sessions read it
	// without a lock, reloads replace it under mu.
	backends atomic.Pointer[map[string]*backend]
	mu       sync.Mutex

	// collations maps collation ids to "charset COLLATE name", loaded
	// from the backend the first time a client needs one.
	collMu     sync.Mutex
	collations map[byte]string
	// dbChecks remembers the databases logins found (loginwait.go).
	dbChecks grantCache

	// greeting of the first connection, for the version and collation
	// the gateway announces.
	greeting atomic.Pointer[wire.Greeting]
	// defaults are what the latest new backend connection reported of
	// the server's defaults (packet limit, trackers).
	defaults atomic.Pointer[backendDefaults]

	// fwd forwards sequence and message statements to the cluster's
	// owner; nil without one.
	fwd *forward.Forwarder
	// autoInc maps "db.table" (lower case) to its auto_increment setting.
	autoInc atomic.Pointer[map[string]*config.AutoIncrement]
	// columns caches tables' column names in order, for INSERTs without
	// a column list into auto_increment tables.
	colMu   sync.Mutex
	columns map[string][]string
	// keys caches tables' single-column primary and unique key columns
	// (lower case), for hot-row protection (protect.HotRows, through
	// protections.go).
	keyMu sync.Mutex
	keys  map[string]map[string]bool
	// guards are the cluster's protections (protections.go); thr and
	// consol two of them the gateway also reads directly.
	guards *protect.Set
	thr    *protect.Throttle
	consol *protect.Consolidation[consolKey]
}

// newCluster builds the cluster of cfg; fleet says its connection cap is
// shared by a fleet of gateways (see cluster.fleetBudget); leader, when
// not nil, is where its owner is (owners elected in etcd, no owner
// address); classify finds the row a statement writes, for hot-row
// protection.
func newCluster(cfg config.Cluster, log hclog.Logger, refresh time.Duration, fleet bool, leader forward.Leader, classify func(string) (querypath.RowWrite, bool)) (*cluster, error) {
	c := &cluster{name: cfg.Name, log: log, fleetBudget: fleet}
	c.conf.Store(&cfg)
	c.newProtections(classify)
	bt, err := loadBackendTLS(cfg)
	if err != nil {
		return nil, err
	}
	c.tls.Store(bt)
	c.setAutoIncrement(cfg.AutoIncrement)
	empty := map[string]*backend{}
	c.backends.Store(&empty)
	if _, err := c.setBackends(cfg.Backends); err != nil {
		c.close()
		return nil, err
	}
	if cfg.Owner != "" || leader != nil {
		wait := *cfg.FailoverBuffer // owner statements wait for a leader as writes for a primary
		if wait == 0 {
			wait = -1 // no wait
		}
		fwd, err := forward.New(forward.Config{
			Cluster: cfg.Name, Addr: cfg.Owner, Leader: leader, LeaderWait: wait,
			User: cfg.BackendUser, Password: cfg.BackendPassword,
			PoolSize: cfg.OwnerPoolSize, Timeout: cfg.OwnerTimeout, Refresh: refresh,
			Sequences: cfg.OwnerTables.Sequences, Messages: cfg.OwnerTables.Messages,
			Logger: log.Named("owner"),
		})
		if err != nil {
			c.close()
			return nil, err
		}
		c.fwd = fwd
	}
	return c, nil
}

// setAutoIncrement installs the auto_increment settings and forgets the
// cached column lists.
func (c *cluster) setAutoIncrement(list []config.AutoIncrement) {
	m := make(map[string]*config.AutoIncrement, len(list))
	for i := range list {
		m[strings.ToLower(list[i].Table)] = &list[i]
	}
	c.autoInc.Store(&m)
	c.colMu.Lock()
	c.columns = nil
	c.colMu.Unlock()
}

// autoIncrement returns the auto_increment setting of table "db.table"
// (lower case), or nil.
func (c *cluster) autoIncrement(table string) *config.AutoIncrement {
	m := *c.autoInc.Load()
	if len(m) == 0 {
		return nil
	}
	return m[table]
}

// tableColumns returns the columns of table "db.table" in order, asking
// the primary the first time.
func (c *cluster) tableColumns(ss *Session, table string) ([]string, error) {
	c.colMu.Lock()
	cols, ok := c.columns[table]
	c.colMu.Unlock()
	if ok {
		return cols, nil
	}
	err := c.queryPrimary(ss, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE "+tableIs(table)+" ORDER BY ORDINAL_POSITION", func(row [][]byte) {
		if len(row) == 1 {
			cols = append(cols, string(row[0]))
		}
	})
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, wire.NewError(1146, "42S02", "Table '%s' doesn't exist", table)
	}
	c.colMu.Lock()
	if c.columns == nil {
		c.columns = map[string][]string{}
	}
	c.columns[table] = cols
	c.colMu.Unlock()
	return cols, nil
}

// tableIs is the condition on information_schema's TABLE_SCHEMA and
// TABLE_NAME that selects table "db.table".
func tableIs(table string) string {
	db, t, _ := strings.Cut(table, ".")
	return "TABLE_SCHEMA = '" + strings.ReplaceAll(db, "'", "''") + "' AND TABLE_NAME = '" + strings.ReplaceAll(t, "'", "''") + "'"
}

// queryPrimary runs the query sql on a pooled connection of the primary,
// as the session's backend account, passing each row to fn.
func (c *cluster) queryPrimary(ss *Session, sql string, fn func(row [][]byte)) error {
	be, err := ss.primaryBackend(ss.srv.health.Snapshot(), c.conf.Load(), "", false)
	if err != nil {
		return err
	}
	k := ss.poolKey()
	k.foundRows = false
	p, err := be.poolFor(k)
	if err != nil {
		return err
	}
	// A connection of its own, with whatever waits that takes.
	ss.blocking(offloadOwnQuery, func() {
		var l *pools.Lease[*backendConn]
		if l, err = p.Acquire(ss.statementContext()); err != nil {
			return
		}
		err = l.Conn().QueryRows(sql, fn)
		if endLease(l, err) {
			err = backendLost(be.addr, err)
		}
	})
	return err
}

// setBackends makes addrs the cluster's backends: new ones get pools
// (warming up), removed ones are returned for the caller to close once
// no session picks them any more.
func (c *cluster) setBackends(addrs []string) (removed []*backend, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.backends.Load()
	next := make(map[string]*backend, len(addrs))
	for _, a := range addrs {
		if be := old[a]; be != nil {
			next[a] = be
			continue
		}
		be := &backend{addr: a, cluster: c, budget: pools.NewBudget(c.backendLimit()), probeRoom: newProbeRoom(!c.fleetCapped())}
		if _, err := be.pool(false); err != nil {
			for _, nb := range next {
				if old[nb.addr] == nil {
					nb.close()
				}
			}
			return nil, err
		}
		next[a] = be
	}
	for a, be := range old {
		if next[a] == nil {
			removed = append(removed, be)
		}
	}
	c.backends.Store(&next)
	return removed, nil
}

// backend returns the backend at addr, or nil when the cluster has none.
func (c *cluster) backend(addr string) *backend { return (*c.backends.Load())[addr] }

// applyPoolConfig gives the pools of every backend the cluster's current
// pool settings (after a reload): sizes and the reuse order at once,
// timeouts for what starts from now on.
func (c *cluster) applyPoolConfig() error {
	pc := c.conf.Load().Pool
	t := pools.Timeouts{
		IdleTimeout: offDuration(*pc.IdleTimeout), MaxLifetime: offDuration(*pc.MaxLifetime),
		AcquireTimeout: pc.AcquireTimeout, DialTimeout: pc.DialTimeout,
	}
	order, err := pools.ParseOrder(pc.Order)
	if err != nil {
		return err
	}
	var errs []error
	for _, be := range *c.backends.Load() {
		be.pipes.retireAll(false) // the next reads open pipes of the new settings
		be.eachPool(func(k poolKey, p *pools.Pool[*backendConn]) {
			minIdle := 0 // only the cluster account's plain pool warms up
			if k == (poolKey{}) {
				minIdle = *pc.MinIdle
			}
			p.SetOrder(order)
			p.Resize(pc.Size, minIdle)
			if err := p.SetTimeouts(t); err != nil {
				errs = append(errs, err)
			}
		})
	}
	return errors.Join(errs...)
}

// offDuration maps the config's "0 means never" to the pools' "negative
// means off".
func offDuration(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// newPool builds the pool k of connections to be.
func (c *cluster) newPool(be *backend, k poolKey) (*pools.Pool[*backendConn], error) {
	cfg := c.conf.Load()
	pc := cfg.Pool
	user := k.user
	if user == "" {
		user = cfg.BackendUser
	}
	name := fmt.Sprintf("%s/%s/%s", cfg.Name, be.addr, user)
	minIdle := *pc.MinIdle
	if k.user != "" {
		// Only one user's sessions use this pool: no warm-up.
		minIdle = 0
	}
	if k.foundRows {
		// Only CLIENT_FOUND_ROWS clients use this pool: no warm-up.
		name += "/found_rows"
		minIdle = 0
	}
	if minIdle == 0 {
		minIdle = -1
	}
	order, err := pools.ParseOrder(pc.Order)
	if err != nil {
		return nil, err
	}
	return pools.New(pools.Config[*backendConn]{
		Name:           name,
		Size:           pc.Size,
		MinIdle:        minIdle,
		MaxDials:       pc.MaxDials,
		Order:          order,
		IdleTimeout:    offDuration(*pc.IdleTimeout),
		MaxLifetime:    offDuration(*pc.MaxLifetime),
		AcquireTimeout: pc.AcquireTimeout,
		DialTimeout:    pc.DialTimeout,
		Dial:           func(ctx context.Context) (*backendConn, error) { return c.dial(ctx, be, k) },
		Logger:         c.log.Named("pool").With("pool", name),
		Budget:         be.budget,
	})
}

// probeConns is the connections discovery keeps to each backend, inside
// max_backend_connections.
const probeConns = 1

// backendLimit is the pools' limit per backend that the configuration
// gives: none without max_backend_connections; with it, the cap less the
// probe connection, or, in a fleet, nothing until the fleet's budget gives
// this gateway its share.
func (c *cluster) backendLimit() int {
	switch max := c.conf.Load().MaxBackendConnections; {
	case max == 0:
		return -1
	case c.fleetBudget:
		return 0
	default:
		return max - probeConns
	}
}

// fleetCapped says the cluster's max_backend_connections is shared by a
// fleet: its backends' pools and probes wait for the fleet's budget.
func (c *cluster) fleetCapped() bool {
	return c.fleetBudget && c.conf.Load().MaxBackendConnections > 0
}

// applyBudgetConfig gives every backend's budget the limit of the
// configuration after a reload. In a fleet, the budget's agent sets the
// share within a tick; here only a cap turned off lifts the limit (and
// opens the probes' room). A cap turned on in a fleet leaves a probe
// room open: the budget counts an open one in this gateway's share.
func (c *cluster) applyBudgetConfig() {
	limit := c.backendLimit()
	for _, be := range *c.backends.Load() {
		if !c.fleetBudget || limit < 0 {
			be.budget.SetLimit(limit)
			be.probeRoom.allow()
		}
	}
}

// dial opens a connection to be for pool k.
func (c *cluster) dial(ctx context.Context, be *backend, k poolKey) (*backendConn, error) {
	cfg := c.conf.Load()
	user, password := k.user, k.password
	if user == "" {
		user, password = cfg.BackendUser, cfg.BackendPassword
	}
	o := wire.DialOptions{
		User: user, Password: password,
		Attrs: map[string]string{"program_name": "directgate"},
	}
	if k.hashed {
		o.Password, o.PasswordSHA1 = "", []byte(password)
	}
	if k.foundRows {
		o.Caps |= wire.CapFoundRows
	}
	// The server reports session state changes (CLIENT_SESSION_TRACK),
	// also those at the end of a result set (CLIENT_DEPRECATE_EOF: only
	// the final OK packet carries them); the relay converts for classic
	// clients.
	o.Caps |= wire.CapSessionTrack | wire.CapDeprecateEOF
	bt := c.tls.Load()
	o.TLS, o.TLSPreferred = bt.conf, bt.preferred
	// Read before the login, as reset does: a SET GLOBAL that lands while
	// this dial is in flight then makes the connection look older than
	// it is (a needless reset), never newer (old defaults served as new).
	globals := c.globals.Load()
	bc, err := wire.Dial(ctx, be.addr, o)
	if err != nil {
		var sqlErr *wire.SQLError
		if h := c.health.Load(); h != nil && !errors.As(err, &sqlErr) && ctx.Err() == nil {
			// Unreachable (not refused by the server): tell discovery.
			h.ReportFailure(be.addr)
		}
		return nil, &dialError{addr: be.addr, cluster: cfg.Name, user: user, err: err}
	}
	conn := &backendConn{
		BackendConn: bc, addr: be.addr, be: be, multiStmt: true,
		user: user, password: password, key: k, insertIDKnown: true,
		globals: globals,
	}
	err = c.initSession(conn)
	if err == nil {
		err = checkAccountHost(conn, k)
	}
	if err != nil {
		if errors.As(err, new(*wire.SQLError)) || errors.As(err, new(*accountHostError)) {
			bc.Quit() // refused, at rest
		} else {
			bc.Close()
		}
		return nil, &dialError{addr: be.addr, cluster: cfg.Name, user: user, err: err}
	}
	c.greeting.CompareAndSwap(nil, bc.Greeting)
	be.live.add(conn)
	return conn, nil
}

// close closes every pool of the cluster and its owner forwarder.
func (c *cluster) close() {
	if c.fwd != nil {
		c.fwd.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, be := range *c.backends.Load() {
		be.close()
	}
}

// collation returns "charset COLLATE collation" for a collation id, asking
// the backend over conn the first time. ok is false for unknown ids. No
// lock is held during the query; concurrent first lookups may both ask.
func (c *cluster) collation(conn *backendConn, id byte) (string, bool, error) {
	c.collMu.Lock()
	m := c.collations
	c.collMu.Unlock()
	if m == nil {
		m = map[byte]string{}
		err := conn.QueryRows("SELECT ID, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLLATIONS WHERE ID < 256", func(row [][]byte) {
			if len(row) == 3 && row[0] != nil && row[1] != nil && row[2] != nil {
				if id, err := strconv.Atoi(string(row[0])); err == nil {
					m[byte(id)] = string(row[1]) + " COLLATE " + string(row[2])
				}
			}
		})
		if err != nil {
			return "", false, err
		}
		c.collMu.Lock()
		c.collations = m
		c.collMu.Unlock()
	}
	s, ok := m[id]
	return s, ok, nil
}

// dialError is a failure to open a backend connection.
type dialError struct {
	addr, cluster, user string
	err                 error
}

func (e *dialError) Error() string {
	return fmt.Sprintf("cannot connect to backend %s of cluster %s: %v", e.addr, e.cluster, e.err)
}
func (e *dialError) Unwrap() error { return e.err }

// resetValue is what a variable the session never set goes back to: the
// collation backend connections log in with for NAMES, else the global
// value.
func resetValue(name string) string {
	if name == "names" {
		return "utf8mb4 COLLATE utf8mb4_general_ci"
	}
	return "DEFAULT"
}

// setItem renders one assignment of a SET statement for replay.
func setItem(b *strings.Builder, name, value string) {
	switch name {
	case "names":
		b.WriteString("NAMES ")
	case "character set":
		b.WriteString("CHARACTER SET ")
	default:
		b.WriteString("@@SESSION.")
		b.WriteString(name)
		b.WriteString(" = ")
	}
	b.WriteString(value)
}

// reset returns the connection to a fresh session (COM_RESET_CONNECTION):
// transactions rolled back, user variables, temporary tables, locks and
// prepared statements dropped, variables back to their global values.
func (bc *backendConn) reset() error {
	c := bc.be.cluster
	globals := c.globals.Load()
	if _, err := bc.SimpleCommand([]byte{wire.ComResetConnection}); err != nil {
		return err
	}
	bc.forgetSession(unknownDB)
	if err := bc.enableTrackers(); err != nil {
		return err
	}
	if bc.globals != globals {
		// The reset session took the server's new globals: read the
		// defaults the gateway follows again (a statement of its own:
		// the connection may have multi-statements off).
		bc.globals = globals
		return c.readDefaults(bc)
	}
	return nil
}

// shortWaitTimeout is the wait_timeout (seconds) below which a session's
// value is taken back before its connection returns to the pool: idle
// there, the server would close it. A longer one is left for the next
// session's sync, which sets what that session wants.
const shortWaitTimeout = 600

// relaxTimeouts puts a short wait_timeout a session set back to the
// server's default, so that the server does not close the connection while
// it waits in the pool. A non-nil error is a broken connection.
func (bc *backendConn) relaxTimeouts() error {
	v, ok := bc.vars["wait_timeout"]
	if !ok {
		return nil
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= shortWaitTimeout {
		return nil
	}
	if _, err := bc.Exec("SET SESSION wait_timeout = DEFAULT"); err != nil {
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			bc.dirty = true // reset next time
			return nil
		}
		return err
	}
	delete(bc.vars, "wait_timeout")
	bc.syncedState = 0
	return nil
}

// Close closes the connection; its pool calls it (the connection's owner
// then). Its statements leave the backend's books.
func (bc *backendConn) Close() error {
	bc.untrack()
	bc.forgetStmts()
	return bc.BackendConn.Close()
}

// Quit is Close for a connection at rest: it says goodbye (COM_QUIT)
// first, so that the server counts no aborted client and logs no
// warning. Its pool calls it (pools.Quitter).
func (bc *backendConn) Quit() error {
	bc.untrack()
	bc.forgetStmts()
	return bc.BackendConn.Quit()
}

// forgetSession records that the connection's session is fresh again
// (after COM_RESET_CONNECTION or COM_CHANGE_USER), with database db.
func (bc *backendConn) forgetSession(db string) {
	bc.vars = map[string]string{"names": "\x00unknown"}
	bc.forgetStmts()
	bc.warnListed = false
	bc.db = db
	bc.dirty = false
	bc.syncedState = 0
	bc.lastInsertID, bc.insertIDKnown = 0, true
}

// changeUserNoDB logs the connection in again without a default database,
// the only way to clear one.
func (bc *backendConn) changeUserNoDB() error {
	change := bc.ChangeUser
	if bc.key.hashed {
		change = func(user, sha1, db string) error { return bc.ChangeUserSHA1(user, []byte(sha1), db) }
	}
	if err := change(bc.user, bc.password, ""); err != nil {
		return err
	}
	bc.forgetSession("")
	return bc.enableTrackers()
}

// greetingWait is how long Serve waits at start for a first backend
// connection, to announce the backend's version.
const greetingWait = 3 * time.Second

// endLease gives back a connection leased for a statement of the gateway's
// own: released when it is still usable (no error, or an error the server
// sent), destroyed when it broke, which endLease reports.
func endLease(l *pools.Lease[*backendConn], err error) (broke bool) {
	var sqlErr *wire.SQLError
	if err == nil || errors.As(err, &sqlErr) {
		l.Release()
		return false
	}
	l.Destroy()
	return true
}
