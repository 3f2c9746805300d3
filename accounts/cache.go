package accounts

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Loader runs query on the server holding the accounts and passes each
// row to fn (its values valid only during the call; NULL is nil).
type Loader func(ctx context.Context, query string, fn func(row [][]byte)) error

// Config is what the cache needs of mariadb_accounts.
type Config struct {
	// Enabled: the accounts are read; off, Run only waits.
	Enabled bool
	// Refresh is the time between two periodic loads.
	Refresh time.Duration
	// MaxAccounts bounds the rows kept.
	MaxAccounts int
	// Tick is how often Run calls its after function at least; 0: every
	// Refresh.
	Tick time.Duration
}

// missSpacing is the least time between two loads caused by logins that
// matched no row.
const missSpacing = time.Second

// ErrNotLoaded is returned by Lookup when the accounts could never be read.
var ErrNotLoaded = errors.New("MariaDB's accounts could not be read")

// Cache keeps the account rows of mysql.global_priv, sorted as MariaDB
// sorts them, and reloads them periodically (Run), after an account
// change through the gateway (Changing) and on a login that matches no
// row (at most once per missSpacing, unless an account change is under
// way). Safe for concurrent use.
type Cache struct {
	load Loader
	log  hclog.Logger
	conf atomic.Pointer[Config]
	rows atomic.Pointer[[]Row]
	// gen moves at the start and at the end of every account change;
	// changing counts the changes under way.
	gen      atomic.Uint64
	changing atomic.Int64
	nudge    chan struct{}

	// mu serializes loads and guards the fields below.
	mu       sync.Mutex
	loaded   bool
	loadGen  uint64
	lastLoad time.Time
	lastErr  string
}

// New returns a cache reading rows with load. Nothing is read until Run
// or Lookup.
func New(conf Config, load Loader, log hclog.Logger) *Cache {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	c := &Cache{load: load, log: log, nudge: make(chan struct{}, 1)}
	c.conf.Store(&conf)
	return c
}

// SetConfig applies a reloaded configuration from the next load on.
func (c *Cache) SetConfig(conf Config) { c.conf.Store(&conf) }

// Run loads the accounts every Refresh and whenever nudged, while
// enabled, and calls after every Tick and after each load (enabled or
// not), until stop is closed.
func (c *Cache) Run(stop <-chan struct{}, after func()) {
	var last time.Time
	load := true
	for {
		conf := c.conf.Load()
		if load && conf.Enabled {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = c.reload(ctx, false)
			cancel()
			last = time.Now()
		}
		after()
		wait := conf.Refresh
		if conf.Enabled {
			wait -= time.Since(last)
		}
		if conf.Tick > 0 && conf.Tick < wait {
			wait = conf.Tick
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-stop:
			t.Stop()
			return
		case <-c.nudge:
			load = true
		case <-t.C:
			load = time.Since(last) >= conf.Refresh
		}
		t.Stop()
	}
}

// Changing marks the start of a statement that may change accounts; done
// marks its end: the next login reads the accounts again first, and the
// background loop reloads them at once.
func (c *Cache) Changing() (done func()) {
	c.gen.Add(1)
	c.changing.Add(1)
	return func() {
		c.changing.Add(-1)
		c.gen.Add(1)
		select {
		case c.nudge <- struct{}{}:
		default:
		}
	}
}

// Lookup returns the row MariaDB would pick for user logging in from ip,
// reading the accounts first when an account change happened since the
// last load, and again when no row matches (rate-limited).
func (c *Cache) Lookup(ctx context.Context, user string, ip netip.Addr) (Row, bool, error) {
	if c.stale() {
		_ = c.reload(ctx, false)
	}
	rows := c.rows.Load()
	if rows == nil {
		if err := c.reload(ctx, false); err != nil {
			return Row{}, false, err
		}
		rows = c.rows.Load()
	}
	if r, ok := match(*rows, user, ip); ok {
		return r, true, nil
	}
	if err := c.reload(ctx, true); err != nil {
		return Row{}, false, nil
	}
	r, ok := match(*c.rows.Load(), user, ip)
	return r, ok, nil
}

// Current reports whether the account user@host is loaded with version v:
// it still exists and has not changed since.
func (c *Cache) Current(user, host string, v uint64) bool {
	rows := c.rows.Load()
	if rows == nil {
		return true // nothing known: keep what there is
	}
	for _, r := range *rows {
		if r.User == user && r.Host == host {
			return r.Version == v
		}
	}
	return false
}

// stale reports an account change since the last load began, or one
// under way (its answer may have reached a client that logs in now).
func (c *Cache) stale() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.loaded || c.loadGen != c.gen.Load() || c.changing.Load() > 0
}

// reload reads the rows again. miss asks for a load after a login matched
// nothing: skipped when the last one is recent and no account change is
// under way.
func (c *Cache) reload(ctx context.Context, miss bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if miss && c.loaded && c.changing.Load() == 0 && time.Since(c.lastLoad) < missSpacing {
		return nil
	}
	g := c.gen.Load()
	conf := c.conf.Load()
	rows, err := c.read(ctx, conf.MaxAccounts)
	if err != nil {
		c.noteError(err)
		if !c.loaded {
			return fmt.Errorf("%w: %v", ErrNotLoaded, err)
		}
		return err
	}
	if c.lastErr != "" {
		c.log.Info("MariaDB's accounts read again")
		c.lastErr = ""
	}
	sortRows(rows)
	c.rows.Store(&rows)
	c.loaded, c.loadGen, c.lastLoad = true, g, time.Now()
	return nil
}

// noteError logs a failed load when its reason changed.
func (c *Cache) noteError(err error) {
	if msg := err.Error(); msg != c.lastErr {
		c.lastErr = msg
		c.log.Error("cannot read MariaDB's accounts (the backend account of mariadb_accounts.cluster needs SELECT on mysql.global_priv)", "error", err)
	}
}

// Query reads the accounts of mysql.global_priv (MariaDB 10.4 and later):
// user, host, plugin, authentication string, global privileges, lock,
// role flag, several plugins (IDENTIFIED VIA ... OR ...).
const Query = "SELECT User, Host, JSON_VALUE(Priv, '$.plugin'), JSON_VALUE(Priv, '$.authentication_string'), " +
	"JSON_VALUE(Priv, '$.access'), JSON_VALUE(Priv, '$.account_locked'), JSON_VALUE(Priv, '$.is_role'), " +
	"JSON_EXISTS(Priv, '$.auth_or') FROM mysql.global_priv"

// read runs Query, keeping at most max rows, twice when the first try
// fails: a pooled connection may have died since its last use (a server
// restart, KILL), and the second try gets another.
func (c *Cache) read(ctx context.Context, max int) ([]Row, error) {
	rows, err := c.readOnce(ctx, max)
	if err != nil && ctx.Err() == nil {
		rows, err = c.readOnce(ctx, max)
	}
	return rows, err
}

// readOnce runs Query once.
func (c *Cache) readOnce(ctx context.Context, max int) ([]Row, error) {
	var rows []Row
	over := false
	err := c.load(ctx, fmt.Sprintf("%s LIMIT %d", Query, max+1), func(v [][]byte) {
		if len(v) != 8 {
			return
		}
		if string(v[6]) == "true" {
			return // a role: nobody logs in as it
		}
		if len(rows) == max {
			over = true
			return
		}
		rows = append(rows, rowOf(v))
	})
	if err != nil {
		return nil, err
	}
	if over {
		c.log.Warn("more accounts than mariadb_accounts.max_accounts: the rest are not loaded", "max_accounts", max)
	}
	return rows, nil
}

// rowOf builds a Row from Query's values.
func rowOf(v [][]byte) Row {
	r := Row{User: string(v[0]), Host: string(v[1]), Plugin: string(v[2]), AuthString: string(v[3]), Locked: string(v[5]) == "true"}
	if r.Plugin == "" {
		r.Plugin = NativePassword
	}
	if string(v[7]) == "1" {
		r.Plugin += " OR another (IDENTIFIED VIA ... OR ...)"
	}
	h := fnv.New64a()
	for _, b := range [][]byte{v[2], v[3], v[4], v[5]} {
		h.Write(b)
		h.Write([]byte{0})
	}
	r.Version = h.Sum64() | 1
	return r
}
