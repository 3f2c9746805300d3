// Package forward sends the statements that need a cluster's owner process
// (sequences and message queues) to it, over a pool of connections of its
// own, and relays the owner's answers to clients.
//
// A Forwarder never touches a client session's backend connection: a
// session that is pinned (user variables, an open transaction) still gets
// its sequence values, and no owner connection outlives the statement that
// used it, except a STREAM's, which lives as long as the stream. When the
// owner cannot be reached within Config.Timeout the statement fails with an
// *OwnerError naming the owner's address; nothing else is affected.
//
// The Forwarder learns which tables the owner serves by asking it (SHOW
// OWNER TABLES) every Config.Refresh, and from the static list in the
// configuration; Tables returns the current set without locking.
package forward

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

// Config configures a Forwarder.
type Config struct {
	// Cluster names the cluster, for errors and logs.
	Cluster string
	// Addr is the owner's host:port.
	Addr string
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
	return fmt.Sprintf("cannot reach the owner of cluster %s at %s: %v", e.Cluster, e.Addr, e.Err)
}

func (e *OwnerError) Unwrap() error { return e.Err }

// conn is a pooled connection to the owner and its default database.
type conn struct {
	*wire.BackendConn
	db string
}

// Forwarder forwards statements to one cluster's owner. Its methods are
// safe for concurrent use.
type Forwarder struct {
	cfg    Config
	log    hclog.Logger
	pool   *pools.Pool[*conn]
	static map[string]Kind
	tables atomic.Pointer[Tables]
	group  *safego.Group
	ctx    context.Context
	cancel context.CancelFunc
}

// New builds a Forwarder and starts refreshing the owner's table list.
// It does not wait for the owner.
func New(cfg Config) (*Forwarder, error) {
	if cfg.Addr == "" {
		return nil, errors.New("forward: Config.Addr is required")
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
	f := &Forwarder{cfg: cfg, log: cfg.Logger, static: map[string]Kind{}, group: safego.New(cfg.Logger)}
	for _, t := range cfg.Sequences {
		f.static[strings.ToLower(t)] = KindSequence
	}
	for _, t := range cfg.Messages {
		f.static[strings.ToLower(t)] = KindMessage
	}
	f.tables.Store(&Tables{kinds: f.static})
	p, err := pools.New(pools.Config[*conn]{
		Name:           "owner/" + cfg.Cluster,
		Size:           max(cfg.PoolSize, 1),
		MinIdle:        -1,
		IdleTimeout:    time.Minute,
		AcquireTimeout: cfg.Timeout,
		DialTimeout:    cfg.Timeout,
		Dial:           f.dial,
		Logger:         cfg.Logger.Named("pool"),
	})
	if err != nil {
		return nil, err
	}
	f.pool = p
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.group.Go("owner tables refresh", f.refreshLoop)
	return f, nil
}

// Addr is the owner's address.
func (f *Forwarder) Addr() string { return f.cfg.Addr }

// Tables returns the tables the owner serves, as last learned.
func (f *Forwarder) Tables() *Tables { return f.tables.Load() }

// Stat returns the owner pool's figures.
func (f *Forwarder) Stat() pools.Stat { return f.pool.Stat() }

// Close stops the refresh loop and closes the pool.
func (f *Forwarder) Close() {
	f.cancel()
	f.group.Wait()
	f.pool.Close()
}

func (f *Forwarder) dial(ctx context.Context) (*conn, error) {
	bc, err := wire.Dial(ctx, f.cfg.Addr, wire.DialOptions{
		User: f.cfg.User, Password: f.cfg.Password,
		Attrs: map[string]string{"program_name": "directgate"},
	})
	if err != nil {
		return nil, err
	}
	return &conn{BackendConn: bc}, nil
}

// acquire takes a connection with the default database db.
func (f *Forwarder) acquire(db string) (*pools.Lease[*conn], error) {
	l, err := f.pool.Acquire(context.Background())
	if err != nil {
		return nil, &OwnerError{Cluster: f.cfg.Cluster, Addr: f.cfg.Addr, Err: err}
	}
	c := l.Conn()
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
			return nil, &OwnerError{Cluster: f.cfg.Cluster, Addr: f.cfg.Addr, Err: err}
		}
		c.db = db
	}
	return l, nil
}

// Forward sends command p to the owner with default database db and
// relays the answer to client through relay. A connection that fails, or
// whose answer was cut short, is closed; the result's Packets tells
// whether anything reached the client. A COM_STMT_PREPARE (kind
// ResponsePrepare) only asks the owner to describe the statement: the
// statement is closed on the owner at once (Result.StmtID is the
// owner's id), and the gateway runs it as a query.
func (f *Forwarder) Forward(relay *wire.Relay, client *wire.Conn, db string, p []byte, kind wire.ResponseKind) (wire.Result, error) {
	l, err := f.acquire(db)
	if err != nil {
		return wire.Result{}, err
	}
	c := l.Conn()
	if err := c.WriteCommand(p); err != nil {
		l.Destroy()
		return wire.Result{}, &OwnerError{Cluster: f.cfg.Cluster, Addr: f.cfg.Addr, Err: err}
	}
	relay.BackendCaps = c.Caps
	res, err := relay.Run(client, c.Conn, kind)
	if err != nil {
		l.Destroy()
		var ce *wire.ClientError
		if errors.As(err, &ce) {
			return res, err
		}
		return res, &OwnerError{Cluster: f.cfg.Cluster, Addr: f.cfg.Addr, Err: err}
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

// Stream sends a STREAM command p and relays the endless result to client
// until the client goes away (stop is closed by the caller when it sees
// that) or the owner fails. The owner connection is always closed
// afterwards: the owner ends the subscription when it sees it close.
func (f *Forwarder) Stream(relay *wire.Relay, client *wire.Conn, db string, p []byte, stop <-chan struct{}) (wire.Result, error) {
	l, err := f.acquire(db)
	if err != nil {
		return wire.Result{}, err
	}
	defer l.Destroy()
	c := l.Conn()
	done := make(chan struct{})
	defer close(done)
	f.group.Go("owner stream stop", func() {
		select {
		case <-stop:
			_ = c.Close() // unblocks the relay
		case <-done:
		}
	})
	if err := c.WriteCommand(p); err != nil {
		return wire.Result{}, &OwnerError{Cluster: f.cfg.Cluster, Addr: f.cfg.Addr, Err: err}
	}
	relay.BackendCaps = c.Caps
	res, err := relay.Run(client, c.Conn, wire.ResponseQuery)
	if err != nil {
		var ce *wire.ClientError
		if errors.As(err, &ce) {
			return res, err
		}
		return res, &OwnerError{Cluster: f.cfg.Cluster, Addr: f.cfg.Addr, Err: err}
	}
	return res, nil
}

// NextValues reserves n consecutive values of the sequence table seq
// ("db.table") and returns the first.
func (f *Forwarder) NextValues(seq string, n int64) (int64, error) {
	l, err := f.acquire("")
	if err != nil {
		return 0, err
	}
	var first int64
	got := false
	var perr error
	err = l.Conn().QueryRows("SELECT NEXT "+strconv.FormatInt(n, 10)+" VALUES FROM "+quoteQualified(seq), func(row [][]byte) {
		if len(row) == 1 && row[0] != nil {
			first, perr = strconv.ParseInt(string(row[0]), 10, 64)
			got = perr == nil
		}
	})
	if err != nil {
		var sqlErr *wire.SQLError
		if errors.As(err, &sqlErr) {
			l.Release()
			return 0, err
		}
		l.Destroy()
		return 0, &OwnerError{Cluster: f.cfg.Cluster, Addr: f.cfg.Addr, Err: err}
	}
	l.Release()
	if !got {
		return 0, fmt.Errorf("owner of cluster %s gave no value for %s: %v", f.cfg.Cluster, seq, perr)
	}
	return first, nil
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
				f.log.Warn("cannot read the owner's tables; keeping the last known list", "owner", f.cfg.Addr, "error", err)
				warned = true
			}
		} else {
			warned = false
		}
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh reads the owner's table list now.
func (f *Forwarder) Refresh() error { return f.refresh() }

func (f *Forwarder) refresh() error {
	l, err := f.acquire("")
	if err != nil {
		return err
	}
	kinds := make(map[string]Kind, len(f.static))
	for k, v := range f.static {
		kinds[k] = v
	}
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
