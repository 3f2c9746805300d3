package owner

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/internal/sqlconnect"
	"github.com/go-sql-driver/mysql"

	"github.com/directgate/directgate/wire"
)

// primary is the owner's way to the cluster's primary as of one discovery
// snapshot: a go-sql-driver pool, plus pools whose connections start in a
// given default database for the statements the owner runs verbatim.
// When discovery names another primary, a new primary value with the
// next generation replaces this one and this one is closed.
type primary struct {
	addr string
	// gen numbers the primaries this process has used, from 1; sequence
	// blocks are bound to it.
	gen  uint64
	user string
	pass string
	// tls encrypts the connections (backend_tls); nil: plain.
	tls          *tls.Config
	tlsPreferred bool
	db           *sql.DB
	// fenced: the owner is one of a standby group; its writes carry its
	// term into a transaction MariaDB checks, and limit how long MariaDB
	// keeps it open while the owner is silent (fence.go). noIdleTimeout:
	// the server does not know the setting (MySQL).
	fenced        bool
	noIdleTimeout atomic.Bool
	// fence creates the fence table the writes of a fenced owner check
	// (fence.go).
	fence fenceSetup

	mu     sync.Mutex
	byDB   map[string]*sql.DB
	closed bool
}

// Pool limits per primary pool: the owner's own statements are short, and
// sequence reservations hold a connection for one transaction each.
const (
	primaryMaxOpen   = 32
	primaryMaxIdle   = 8
	primaryLifetime  = 10 * time.Minute
	primaryIOTimeout = 30 * time.Second
)

// newPrimary opens (lazily: no connection yet) the pools to addr.
func newPrimary(addr string, gen uint64, user, password string, tlsConf *tls.Config, tlsPreferred bool) (*primary, error) {
	p := &primary{addr: addr, gen: gen, user: user, pass: password, tls: tlsConf, tlsPreferred: tlsPreferred, byDB: map[string]*sql.DB{}}
	db, err := p.open("")
	if err != nil {
		return nil, err
	}
	p.db = db
	return p, nil
}

func (p *primary) open(schema string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User = p.user
	cfg.Passwd = p.pass
	cfg.Net = "tcp"
	cfg.Addr = p.addr
	cfg.DBName = schema
	cfg.Timeout = 5 * time.Second
	cfg.ReadTimeout = primaryIOTimeout
	cfg.WriteTimeout = primaryIOTimeout
	// Arguments are written into the statement text by the driver, which
	// escapes them for the session's sql_mode: one round trip, text
	// protocol, so result values are exactly what a client would read.
	cfg.InterpolateParams = true
	if p.tls != nil {
		cfg.TLS, cfg.AllowFallbackToPlaintext = p.tls, p.tlsPreferred
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(sqlconnect.Retrying(connector))
	db.SetMaxOpenConns(primaryMaxOpen)
	db.SetMaxIdleConns(primaryMaxIdle)
	db.SetConnMaxLifetime(primaryLifetime)
	return db, nil
}

// forSchema returns a pool whose connections have default database schema
// ("" is the plain pool), so a statement naming tables without a database
// runs as the client meant it.
func (p *primary) forSchema(schema string) (*sql.DB, error) {
	if schema == "" {
		return p.db, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the connection to this primary was closed (the primary changed)")
	}
	if db := p.byDB[schema]; db != nil {
		return db, nil
	}
	db, err := p.open(schema)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(2)
	p.byDB[schema] = db
	return db, nil
}

// close closes every pool, waiting for the statements in flight.
func (p *primary) close() error {
	p.mu.Lock()
	p.closed = true
	dbs := []*sql.DB{p.db}
	for _, db := range p.byDB {
		dbs = append(dbs, db)
	}
	p.mu.Unlock()
	var errs []error
	for _, db := range dbs {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
}

// reserveBlock implements blockStore for the sequence table t in
// leadership term; a fenced owner's reservation is refused by MariaDB
// when a newer term has reserved (fence.go).
func (p *primary) reserveBlock(ctx context.Context, t *table, term uint64, plan func(nextID, cache int64) (int64, error)) error {
	return p.inTx(ctx, p.db, t, term, fenceRaise, func(tx *sql.Tx) error {
		var nextID, cache sql.NullInt64
		err := tx.QueryRowContext(ctx, "SELECT next_id, cache FROM "+t.quoted()+" WHERE id = 0 FOR UPDATE").Scan(&nextID, &cache)
		if errors.Is(err, sql.ErrNoRows) {
			return wire.NewError(1105, "HY000", "sequence table %s.%s has no row with id 0: insert one (INSERT INTO %s (id, next_id, cache) VALUES (0, 1, 1000))", t.Schema, t.Name, t.quoted())
		}
		if err != nil {
			return err
		}
		if !nextID.Valid || !cache.Valid {
			return wire.NewError(1105, "HY000", "sequence table %s.%s: next_id and cache of row 0 must not be NULL", t.Schema, t.Name)
		}
		newNext, err := plan(nextID.Int64, cache.Int64)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE "+t.quoted()+" SET next_id = ? WHERE id = 0", newNext)
		return err
	})
}

// tableBlocks binds a sequence table to a primary, as a blockStore.
type tableBlocks struct {
	p    *primary
	t    *table
	term uint64
}

func (b tableBlocks) reserveBlock(ctx context.Context, plan func(nextID, cache int64) (int64, error)) error {
	return b.p.reserveBlock(ctx, b.t, b.term, plan)
}
