package gateway

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/pools"
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
	// addr is the backend's address, for errors.
	addr string
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
	// dialOpts are kept for COM_CHANGE_USER.
	user, password string
}

// poolKey says which pool of a backend serves a client: the capability a
// connection cannot change after its handshake.
type poolKey struct {
	addr      string
	foundRows bool
}

// cluster is one configured cluster: its backends' pools and what the
// gateway learned about the servers.
type cluster struct {
	cfg config.Cluster
	log hclog.Logger

	mu    sync.Mutex
	pools map[poolKey]*pools.Pool[*backendConn]

	// collations maps collation ids to "charset COLLATE name", loaded
	// from the backend the first time a client needs one.
	collMu     sync.Mutex
	collations map[byte]string

	// greeting of the first connection, for the version and collation
	// the gateway announces.
	greeting atomic.Pointer[wire.Greeting]
}

func newCluster(cfg config.Cluster, log hclog.Logger) *cluster {
	return &cluster{cfg: cfg, log: log, pools: map[poolKey]*pools.Pool[*backendConn]{}}
}

// primaryAddr is the backend that takes writes. Until health checking
// decides roles, it is the first configured backend.
func (c *cluster) primaryAddr() string { return c.cfg.Backends[0] }

// pool returns the pool for key, creating it on first use.
func (c *cluster) pool(key poolKey) (*pools.Pool[*backendConn], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[key]; p != nil {
		return p, nil
	}
	pc := c.cfg.Pool
	name := fmt.Sprintf("%s/%s/%s", c.cfg.Name, key.addr, c.cfg.BackendUser)
	// pools treats zero as "default" and negative as "off".
	off := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	minIdle := *pc.MinIdle
	if key.foundRows {
		// Only CLIENT_FOUND_ROWS clients use this pool: no warm-up.
		name += "/found_rows"
		minIdle = 0
	}
	if minIdle == 0 {
		minIdle = -1
	}
	p, err := pools.New(pools.Config[*backendConn]{
		Name:           name,
		Size:           pc.Size,
		MinIdle:        minIdle,
		MaxDials:       pc.MaxDials,
		IdleTimeout:    off(*pc.IdleTimeout),
		MaxLifetime:    off(*pc.MaxLifetime),
		AcquireTimeout: pc.AcquireTimeout,
		DialTimeout:    pc.DialTimeout,
		Dial:           func(ctx context.Context) (*backendConn, error) { return c.dial(ctx, key) },
		Logger:         c.log.Named("pool").With("pool", name),
	})
	if err != nil {
		return nil, err
	}
	c.pools[key] = p
	return p, nil
}

func (c *cluster) dial(ctx context.Context, key poolKey) (*backendConn, error) {
	o := wire.DialOptions{
		User: c.cfg.BackendUser, Password: c.cfg.BackendPassword,
		Attrs: map[string]string{"program_name": "directgate"},
	}
	if key.foundRows {
		o.Caps |= wire.CapFoundRows
	}
	bc, err := wire.Dial(ctx, key.addr, o)
	if err != nil {
		return nil, &dialError{addr: key.addr, cluster: c.cfg.Name, user: c.cfg.BackendUser, err: err}
	}
	c.greeting.CompareAndSwap(nil, bc.Greeting)
	return &backendConn{
		BackendConn: bc, addr: key.addr, multiStmt: true,
		user: c.cfg.BackendUser, password: c.cfg.BackendPassword,
	}, nil
}

// close closes every pool of the cluster.
func (c *cluster) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		p.Close()
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
	if _, err := bc.SimpleCommand([]byte{wire.ComResetConnection}); err != nil {
		return err
	}
	bc.vars = map[string]string{"names": "\x00unknown"}
	bc.stmts = nil
	bc.db = unknownDB
	bc.dirty = false
	bc.syncedState = 0
	return nil
}

// changeUserNoDB logs the connection in again without a default database,
// the only way to clear one.
func (bc *backendConn) changeUserNoDB() error {
	if err := bc.ChangeUser(bc.user, bc.password, ""); err != nil {
		return err
	}
	bc.vars = map[string]string{"names": "\x00unknown"}
	bc.stmts = nil
	bc.db = ""
	bc.dirty = false
	bc.syncedState = 0
	return nil
}

// greetingWait is how long Serve waits at start for a first backend
// connection, to announce the backend's version.
const greetingWait = 3 * time.Second
