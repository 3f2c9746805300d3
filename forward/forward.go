// Package forward sends the statements that need a cluster's owner process
// (sequences and message queues) to it, over a pool of connections of its
// own, and relays the owner's answers to clients.
//
// A Forwarder never touches a client session's backend connection: a
// session that is pinned (user variables, an open transaction) still gets
// its sequence values, and no owner connection outlives the statement that
// used it, except a STREAM's, which lives as long as the stream. When the
// owner cannot be reached within Config.Timeout the statement fails with an
// *OwnerError naming the owner's address; nothing else is affected. A
// pooled connection the owner has closed (it stopped or died) is found
// by a non-blocking peek and skipped before it takes a statement.
//
// The Forwarder learns which tables the owner serves by asking it (SHOW
// OWNER TABLES) every Config.Refresh, and from the static list in the
// configuration; Tables returns the current set without locking.
//
// # Following a leader
//
// With Config.Leader (owners in a standby group, elected in etcd) the
// owner's address is the leader's and moves with it: the Forwarder opens
// a new pool for the new leader and closes the old one, which closes its
// idle connections at once, its busy ones when their statement ends, and
// cuts the streams relayed from it. A statement in flight on the old
// leader gets Config.Timeout to end; past it its connection is cut and
// it fails (it may have run): an old leader that is paused or cut off
// would otherwise hold it for as long as TCP lets it. A statement that finds no leader, or
// one that cannot be reached or refuses it as a standby before anything
// ran, waits for the leader to change (or tries again every 100 ms) for
// up to Config.LeaderWait, then fails. What counts as "nothing ran":
// the connection could not be had (dial failed, the owner refused the
// login, the pool was closed by a move), the command could not be
// written, or the owner answered with error 1290 and nothing else (a
// standby's or a lapsed leader's refusal). Once the owner may have run
// the statement (the connection broke while the answer was awaited or
// relayed) it is never sent again.
package forward

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

// Leader says where a cluster's owner is when owners run as a standby
// group and the address moves with the leadership (fleet.Observer is
// one).
type Leader interface {
	// Leader returns the leading owner's address ("" while none is
	// known) and a channel closed when it changes.
	Leader() (addr string, changed <-chan struct{})
}

// Config configures a Forwarder.
type Config struct {
	// Cluster names the cluster, for errors and logs.
	Cluster string
	// Addr is the owner's host:port. Ignored with Leader.
	Addr string
	// Leader, when set, is where the owner is: the Forwarder follows it
	// (see the package doc).
	Leader Leader
	// LeaderWait bounds how long a statement waits for a leader that can
	// take it, with Leader. Default 5s; negative: no wait.
	LeaderWait time.Duration
	// User and Password log in to the owner (the cluster's backend
	// account).
	User, Password string
	// PoolSize bounds the open connections to the owner.
	PoolSize int
	// Timeout bounds connecting to the owner and waiting for a free
	// connection, so statements fail fast when it is down.
	Timeout time.Duration
	// Refresh is how often the owner's table list is read again.
	Refresh time.Duration
	// Sequences and Messages are tables ("db.table") known without asking
	// the owner.
	Sequences, Messages []string
	// Logger receives warnings. Default: discard.
	Logger hclog.Logger
}

// Kind is what an owner table is.
type Kind uint8

const (
	// KindNone is a table the owner does not serve.
	KindNone Kind = iota
	// KindSequence is a sequence table.
	KindSequence
	// KindMessage is a message table.
	KindMessage
)

// Tables is an immutable set of owner tables by lower-case "db.table".
type Tables struct {
	kinds map[string]Kind
}

// Kind returns what the table db.table is to the owner. Names are matched
// case-insensitively.
func (t *Tables) Kind(qualified string) Kind {
	if t == nil || len(t.kinds) == 0 {
		return KindNone
	}
	if k, ok := t.kinds[qualified]; ok {
		return k
	}
	return t.kinds[strings.ToLower(qualified)]
}

// Len is the number of tables.
func (t *Tables) Len() int { return len(t.kinds) }

// OwnerError is a statement that could not reach the owner.
type OwnerError struct {
	Cluster, Addr string
	Err           error
}

func (e *OwnerError) Error() string {
	if e.Addr == "" {
		return fmt.Sprintf("no owner of cluster %s leads: %v", e.Cluster, e.Err)
	}
	return fmt.Sprintf("cannot reach the owner of cluster %s at %s: %v", e.Cluster, e.Addr, e.Err)
}

func (e *OwnerError) Unwrap() error { return e.Err }

// conn is a pooled connection to the owner and its default database.
type conn struct {
	*wire.BackendConn
	db string
}

// target is the owner the Forwarder sends to, with its pool. A move to
// another owner replaces it.
type target struct {
	addr string
	// pool is nil while no owner is known (addr "").
	pool *pools.Pool[*conn]
	// ctx ends (and moved is closed) when the Forwarder stops sending to
	// this target.
	ctx    context.Context
	cancel context.CancelFunc
	moved  <-chan struct{}
}

// Forwarder forwards statements to one cluster's owner. Its methods are
// safe for concurrent use.
type Forwarder struct {
	cfg    Config
	log    hclog.Logger
	static map[string]Kind
	tables atomic.Pointer[Tables]
	group  *safego.Group
	ctx    context.Context
	cancel context.CancelFunc

	// cur is read without a lock; moveMu serializes moves.
	cur    atomic.Pointer[target]
	moveMu sync.Mutex
	// refreshNow asks for the table list now (a new leader).
	refreshNow chan struct{}
}

// New builds a Forwarder and starts refreshing the owner's table list
// (and, with Config.Leader, following the leader). It does not wait for
// the owner.
func New(cfg Config) (*Forwarder, error) {
	if cfg.Addr == "" && cfg.Leader == nil {
		return nil, errors.New("forward: Config.Addr or Config.Leader is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 2 * time.Second
	}
	if cfg.LeaderWait == 0 {
		cfg.LeaderWait = 5 * time.Second
	}
	f := &Forwarder{cfg: cfg, log: cfg.Logger, static: map[string]Kind{}, group: safego.New(cfg.Logger), refreshNow: make(chan struct{}, 1)}
	for _, t := range cfg.Sequences {
		f.static[strings.ToLower(t)] = KindSequence
	}
	for _, t := range cfg.Messages {
		f.static[strings.ToLower(t)] = KindMessage
	}
	f.tables.Store(&Tables{kinds: f.static})
	addr := cfg.Addr
	if cfg.Leader != nil {
		addr, _ = cfg.Leader.Leader()
	}
	t, err := f.newTarget(addr)
	if err != nil {
		return nil, err
	}
	f.cur.Store(t)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if cfg.Leader != nil {
		f.group.Go("owner leader follow", f.followLeader)
	}
	f.group.Go("owner tables refresh", f.refreshLoop)
	return f, nil
}

// newTarget builds the target of the owner at addr ("": none).
func (f *Forwarder) newTarget(addr string) (*target, error) {
	t := &target{addr: addr}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.moved = t.ctx.Done()
	if addr == "" {
		return t, nil
	}
	p, err := pools.New(pools.Config[*conn]{
		Name:           "owner/" + f.cfg.Cluster,
		Size:           max(f.cfg.PoolSize, 1),
		MinIdle:        -1,
		IdleTimeout:    time.Minute,
		AcquireTimeout: f.cfg.Timeout,
		DialTimeout:    f.cfg.Timeout,
		Dial:           func(ctx context.Context) (*conn, error) { return f.dial(ctx, addr) },
		Logger:         f.cfg.Logger.Named("pool"),
	})
	if err != nil {
		return nil, err
	}
	t.pool = p
	return t, nil
}

// followLeader moves to every new leader until Close.
func (f *Forwarder) followLeader() {
	for {
		addr, changed := f.cfg.Leader.Leader()
		f.moveTo(addr)
		select {
		case <-changed:
		case <-f.ctx.Done():
			return
		}
	}
}

// moveTo makes the owner at addr ("": none known) the target: later
// statements go there, the old target's pool closes (idle connections at
// once, busy ones when released) and its streams are cut.
func (f *Forwarder) moveTo(addr string) {
	f.moveMu.Lock()
	defer f.moveMu.Unlock()
	old := f.cur.Load()
	if old.addr == addr {
		return
	}
	t, err := f.newTarget(addr)
	if err != nil {
		f.log.Error("cannot follow the owner leader", "owner", addr, "error", err)
		return
	}
	f.cur.Store(t)
	old.cancel()
	if old.pool != nil {
		old.pool.Close()
	}
	switch {
	case addr == "":
		f.log.Warn("no owner leads: owner statements wait for one", "previous", old.addr)
	default:
		f.log.Info("owner leader changed: forwarding to it", "from", old.addr, "to", addr)
		select { // its table list, now rather than at the next tick
		case f.refreshNow <- struct{}{}:
		default:
		}
	}
}

// Addr is the owner's address: the leader's with Config.Leader ("" while
// none is known).
func (f *Forwarder) Addr() string { return f.cur.Load().addr }

// Tables returns the tables the owner serves, as last learned.
func (f *Forwarder) Tables() *Tables { return f.tables.Load() }

// Stat returns the owner pool's figures (the current leader's).
func (f *Forwarder) Stat() pools.Stat {
	if p := f.cur.Load().pool; p != nil {
		return p.Stat()
	}
	return pools.Stat{}
}

// Close stops the refresh loop (and the leader following) and closes the
// pool.
func (f *Forwarder) Close() {
	f.cancel()
	f.group.Wait()
	f.moveMu.Lock()
	defer f.moveMu.Unlock()
	if p := f.cur.Load().pool; p != nil {
		p.Close()
	}
}

func (f *Forwarder) dial(ctx context.Context, addr string) (*conn, error) {
	bc, err := wire.Dial(ctx, addr, wire.DialOptions{
		User: f.cfg.User, Password: f.cfg.Password,
		Attrs: map[string]string{"program_name": "directgate"},
	})
	if err != nil {
		return nil, err
	}
	return &conn{BackendConn: bc}, nil
}

// errMovedBusy is a statement cut because the owner it was sent to no
// longer leads and did not answer within Config.Timeout (it may be paused
// or cut off: its connection would not fail by itself).
var errMovedBusy = errors.New("the owner no longer leads and did not answer in time; the statement may have run")

// bound gives a statement in flight on c, sent to t, Config.Timeout to
// finish once the Forwarder moves away from t (then its connection
// fails); the returned function ends the watch.
func (f *Forwarder) bound(t *target, c *conn) (stop func() bool) {
	if f.cfg.Leader == nil {
		return f.boundFixed(c) // a fixed owner never moves
	}
	return context.AfterFunc(t.ctx, func() { _ = c.NetConn().SetDeadline(time.Now().Add(f.cfg.Timeout)) })
}

// sentError wraps err, the failure of a statement sent to t, for the
// client: it may have run.
func (f *Forwarder) sentError(t *target, err error) *OwnerError {
	if t.ctx.Err() != nil && f.cfg.Leader != nil {
		err = fmt.Errorf("%w: %w", errMovedBusy, err)
	}
	return f.ownerError(t.addr, err)
}

// ownerError wraps err, a failure to reach the owner at addr.
func (f *Forwarder) ownerError(addr string, err error) *OwnerError {
	return &OwnerError{Cluster: f.cfg.Cluster, Addr: addr, Err: err}
}

// errNoLeader is the failure of a statement that found no owner leading.
var errNoLeader = errors.New("none is elected: run `gateway owner` for the cluster, with topology.etcd")

// attempt is the tries of one request: how long it may still wait for a
// leader that takes it.
type attempt struct {
	f        *Forwarder
	deadline time.Time // zero until the first wait
	noWait   bool
}

// again reports whether a try that ran nothing on the owner at t (who
// could not be reached or refused as a standby) may be tried again: with
// Config.Leader, after the leader changes or 100 ms, within LeaderWait.
func (a *attempt) again(t *target) bool {
	f := a.f
	if f.cfg.Leader == nil || a.noWait || f.cfg.LeaderWait < 0 {
		return false
	}
	now := time.Now()
	if a.deadline.IsZero() {
		a.deadline = now.Add(f.cfg.LeaderWait)
	}
	left := a.deadline.Sub(now)
	if left <= 0 {
		return false
	}
	timer := time.NewTimer(min(left, leaderRetry))
	defer timer.Stop()
	select {
	case <-t.moved:
	case <-timer.C:
	case <-f.ctx.Done():
		return false
	}
	return true
}

// leaderRetry is how often a statement tries a leader that refused it
// (or could not be reached) when the leader does not change meanwhile.
const leaderRetry = 100 * time.Millisecond

// acquire takes a connection to the current owner with the default
// database db. With Config.Leader it waits, within the attempt's
// LeaderWait, for an owner that takes it.
func (f *Forwarder) acquire(a *attempt, db string) (*pools.Lease[*conn], *target, error) {
	for {
		t := f.cur.Load()
		l, err := f.acquireFrom(t, db)
		if err == nil {
			return l, t, nil
		}
		var oe *OwnerError
		if !errors.As(err, &oe) {
			return nil, t, err // the owner's answer to COM_INIT_DB
		}
		if !f.unreachable(err) || !a.again(t) {
			if !a.deadline.IsZero() {
				oe.Err = fmt.Errorf("%w (after waiting %v for a leader to take it)", oe.Err, f.cfg.LeaderWait)
			}
			return nil, t, err
		}
	}
}

// unreachable reports whether err (of acquireFrom) says the owner could
// not take the connection at all: no leader, a dial that failed or was
// refused as a standby, the pool closed by a move. Not a full pool.
func (f *Forwarder) unreachable(err error) bool {
	var de *pools.DialError
	var sqlErr *wire.SQLError
	switch {
	case errors.Is(err, errNoLeader), errors.Is(err, pools.ErrClosed):
		return true
	case errors.As(err, &de):
		return !errors.As(err, &sqlErr) || sqlErr.Code == wire.ErOptionPreventsStatement
	}
	var ns *notSent
	return errors.As(err, &ns)
}

// notSent is a connection that broke before the statement was sent.
type notSent struct{ err error }

func (e *notSent) Error() string { return e.err.Error() }
func (e *notSent) Unwrap() error { return e.err }

// acquireFrom takes a connection to t's owner with the default database
// db. Errors other than the owner's answer to COM_INIT_DB are
// *OwnerError.
func (f *Forwarder) acquireFrom(t *target, db string) (*pools.Lease[*conn], error) {
	if t.pool == nil {
		return nil, f.ownerError("", errNoLeader)
	}
	for dead := 0; ; dead++ {
		l, err := t.pool.Acquire(context.Background())
		if err != nil {
			return nil, f.ownerError(t.addr, err)
		}
		c := l.Conn()
		if c.PeerClosed() && dead < t.pool.Stat().Size {
			// The owner closed it (it stopped or died). One non-blocking
			// peek: cheap next to the round trip the statement costs.
			// An owner that died closed every idle connection of the
			// pool: all are skipped (a statement sent on one would fail
			// though it was not in flight when the owner died), then
			// the pool dials, which fails fast until a leader takes it.
			l.Destroy()
			continue
		}
		if c.db != db {
			// The session's database travels with every request: an
			// unqualified name must not resolve in the previous session's.
			cmd := append([]byte{wire.ComInitDB}, db...)
			if db == "" {
				cmd = []byte{wire.ComResetConnection} // back to no database
			}
			if _, err := c.SimpleCommand(cmd); err != nil {
				var sqlErr *wire.SQLError
				if errors.As(err, &sqlErr) {
					l.Release()
					return nil, err
				}
				l.Destroy()
				return nil, f.ownerError(t.addr, &notSent{err})
			}
			c.db = db
		}
		return l, nil
	}
}

// Forward sends command p to the owner with default database db and
// relays the answer to client through relay. A connection that fails, or
// whose answer was cut short, is closed; the result's Packets tells
// whether anything reached the client. With Config.Leader, a refusal as
// a standby (1290 and nothing else) is held back from the client and the
// command goes to the next leader; when none takes it within LeaderWait
// the refusal is returned as the error. A COM_STMT_PREPARE (kind
// ResponsePrepare) only asks the owner to describe the statement: the
// statement is closed on the owner at once (Result.StmtID is the
// owner's id), and the gateway runs it as a query.
func (f *Forwarder) Forward(relay *wire.Relay, client *wire.Conn, db string, p []byte, kind wire.ResponseKind) (wire.Result, error) {
	a := &attempt{f: f}
	for {
		l, t, err := f.acquire(a, db)
		if err != nil {
			return wire.Result{}, err
		}
		c := l.Conn()
		if err := c.WriteCommand(p); err != nil {
			l.Destroy()
			if a.again(t) { // not sent: nothing ran
				continue
			}
			return wire.Result{}, f.ownerError(t.addr, err)
		}
		stop := f.bound(t, c)
		res, err := f.relay(relay, client, c, kind)
		stop()
		if err != nil {
			l.Destroy()
			var ce *wire.ClientError
			if errors.As(err, &ce) {
				return res, err
			}
			return res, f.sentError(t, err)
		}
		if res.Held {
			l.Release()
			if a.again(t) {
				continue
			}
			return res, res.Err
		}
		if kind == wire.ResponsePrepare && res.Err == nil {
			if err := c.SendNoReply(wire.AppendStmtCommand(nil, wire.ComStmtClose, res.StmtID)); err != nil {
				// The client has its answer; only the connection is lost.
				l.Destroy()
				return res, nil
			}
		}
		l.Release()
		return res, nil
	}
}

// relay runs relay for one answer of c, holding back a standby's refusal
// when following a leader.
func (f *Forwarder) relay(relay *wire.Relay, client *wire.Conn, c *conn, kind wire.ResponseKind) (wire.Result, error) {
	relay.BackendCaps = c.Caps
	held := relay.HoldReadOnly
	relay.HoldReadOnly = f.cfg.Leader != nil
	defer func() { relay.HoldReadOnly = held }()
	return relay.Run(client, c.Conn, kind)
}

// errMoved ends a stream relayed from an owner that no longer leads.
var errMoved = errors.New("the owner leadership moved: STREAM again (it goes to the new leader)")

// Stream sends a STREAM command p and relays the endless result to client
// until the client goes away (stop is closed by the caller when it sees
// that), the owner fails or, with Config.Leader, the leadership moves.
// The owner connection is always closed afterwards: the owner ends the
// subscription when it sees it close.
func (f *Forwarder) Stream(relay *wire.Relay, client *wire.Conn, db string, p []byte, stop <-chan struct{}) (wire.Result, error) {
	a := &attempt{f: f}
	for {
		res, retry, err := f.streamOnce(a, relay, client, db, p, stop)
		if !retry {
			return res, err
		}
	}
}

// streamOnce is one try of Stream; retry says nothing ran and another
// try may follow.
func (f *Forwarder) streamOnce(a *attempt, relay *wire.Relay, client *wire.Conn, db string, p []byte, stop <-chan struct{}) (wire.Result, bool, error) {
	l, t, err := f.acquire(a, db)
	if err != nil {
		return wire.Result{}, false, err
	}
	defer l.Destroy()
	c := l.Conn()
	done := make(chan struct{})
	defer close(done)
	var moved atomic.Bool
	f.group.Go("owner stream stop", func() {
		select {
		case <-stop:
			_ = c.Close() // unblocks the relay
		case <-t.moved:
			moved.Store(true)
			_ = c.Close()
		case <-done:
		}
	})
	if err := c.WriteCommand(p); err != nil {
		if a.again(t) {
			return wire.Result{}, true, nil
		}
		return wire.Result{}, false, f.ownerError(t.addr, err)
	}
	res, err := f.relay(relay, client, c, wire.ResponseQuery)
	switch {
	case err != nil:
		var ce *wire.ClientError
		if errors.As(err, &ce) {
			return res, false, err
		}
		if moved.Load() {
			err = errMoved
		}
		return res, false, f.ownerError(t.addr, err)
	case res.Held:
		if a.again(t) {
			return res, true, nil
		}
		return res, false, res.Err
	}
	return res, false, nil
}

// NextValues reserves n consecutive values of the sequence table seq
// ("db.table") and returns the first. With Config.Leader, a standby's
// refusal sends the request to the next leader, as Forward does.
func (f *Forwarder) NextValues(seq string, n int64) (int64, error) {
	var first int64
	got := false
	var perr error
	_, err := f.run(func(c *conn) error {
		return c.QueryRows("SELECT NEXT "+strconv.FormatInt(n, 10)+" VALUES FROM "+quoteQualified(seq), func(row [][]byte) {
			if len(row) == 1 && row[0] != nil {
				first, perr = strconv.ParseInt(string(row[0]), 10, 64)
				got = perr == nil
			}
		})
	})
	if err != nil {
		return 0, err
	}
	if !got {
		return 0, fmt.Errorf("owner of cluster %s gave no value for %s: %v", f.cfg.Cluster, seq, perr)
	}
	return first, nil
}

// Exec runs stmt on the owner, a statement that answers with OK (the
// coordinator log's). sent is false when the statement certainly did not
// reach the owner (no owner, none reachable): it did not run. With
// Config.Leader, a standby's refusal sends it to the next leader.
func (f *Forwarder) Exec(stmt string) (sent bool, err error) {
	return f.run(func(c *conn) error {
		_, err := c.Exec(stmt)
		return err
	})
}

// run runs q on a connection to the owner, following a new leader when a
// standby refuses it. sent is false when q never ran (no connection).
func (f *Forwarder) run(q func(c *conn) error) (sent bool, err error) {
	a := &attempt{f: f}
	for {
		l, t, err := f.acquire(a, "")
		if err != nil {
			return false, err
		}
		stop := f.bound(t, l.Conn())
		err = q(l.Conn())
		stop()
		if err != nil {
			var sqlErr *wire.SQLError
			if errors.As(err, &sqlErr) {
				l.Release()
				if sqlErr.Code == wire.ErOptionPreventsStatement && a.again(t) {
					continue
				}
				return true, err
			}
			l.Destroy()
			return true, f.sentError(t, err)
		}
		l.Release()
		return true, nil
	}
}

// quoteQualified backquotes each part of "db.table".
func quoteQualified(name string) string {
	db, t, ok := strings.Cut(name, ".")
	q := func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
	if !ok {
		return q(name)
	}
	return q(db) + "." + q(t)
}

// refreshLoop reads the owner's table list now and every Refresh.
func (f *Forwarder) refreshLoop() {
	t := time.NewTicker(f.cfg.Refresh)
	defer t.Stop()
	warned := false
	for {
		if err := f.refresh(); err != nil {
			if !warned {
				f.log.Warn("cannot read the owner's tables; keeping the last known list", "owner", f.Addr(), "error", err)
				warned = true
			}
		} else {
			warned = false
		}
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		case <-f.refreshNow:
		}
	}
}

// Refresh reads the owner's table list now.
func (f *Forwarder) Refresh() error { return f.refresh() }

// refreshTimeout bounds reading the owner's table list: an owner that
// does not answer must not stop the refreshes.
const refreshTimeout = 10 * time.Second

func (f *Forwarder) refresh() error {
	l, t, err := f.acquire(&attempt{f: f, noWait: true}, "")
	if err != nil {
		return err
	}
	kinds := make(map[string]Kind, len(f.static))
	for k, v := range f.static {
		kinds[k] = v
	}
	nc := l.Conn().NetConn()
	stop := f.bound(t, l.Conn())
	_ = nc.SetDeadline(time.Now().Add(refreshTimeout)) // after bound: this one holds
	err = l.Conn().QueryRows("SHOW OWNER TABLES", func(row [][]byte) {
		if len(row) < 3 {
			return
		}
		name := strings.ToLower(string(row[0]) + "." + string(row[1]))
		switch string(row[2]) {
		case "sequence":
			kinds[name] = KindSequence
		case "message":
			kinds[name] = KindMessage
		}
	})
	stop()
	_ = nc.SetDeadline(time.Time{})
	if err != nil {
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			l.Release()
		} else {
			l.Destroy()
		}
		return err
	}
	l.Release()
	f.tables.Store(&Tables{kinds: kinds})
	return nil
}
