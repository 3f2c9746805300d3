package difffuzz

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/e2e/mariadbtest"
	"github.com/directgate/directgate/gateway"
	"github.com/hashicorp/go-hclog"
)

// Accounts: clients log in to the gateway as appUser; the gateway logs in
// to MariaDB as backendUser, and so do the clients of the direct run and
// the side connections, so that error messages naming the account agree.
const (
	appUser, appPassword         = "app", "app-secret"
	backendUser, backendPassword = "gateway", "backend-secret"
)

// EnvOptions configure StartEnv.
type EnvOptions struct {
	// GatewayLog receives the gateway's log. Nil means io.Discard.
	GatewayLog io.Writer
	// GatewayLogLevel is the gateway's log level. Empty means "error".
	GatewayLogLevel string
	// GeneralLog, when set, is a file for MariaDB's general query log.
	GeneralLog string
	// Pipelining, when above 0, is the gateway's pipelining.connections
	// in rounds whose pool is larger (pipelined reads, sessions on
	// goroutines only; consolidation's leaders pipeline theirs).
	Pipelining int
}

// Env is the MariaDB the fuzzer runs against, and what it needs to start
// gateways in front of it.
type Env struct {
	srv  *mariadbtest.Server
	root *sql.DB
	opts EnvOptions
}

// StartEnv starts a MariaDB on a loopback port with the accounts above.
// Stored functions may be created without SUPER despite binary logging
// (log_bin_trust_function_creators); InnoDB lock waits end after a
// second and metadata lock waits after ten, so that a statement stuck
// behind a leaked lock fails instead of hanging.
func StartEnv(ctx context.Context, o EnvOptions) (*Env, error) {
	if o.GatewayLog == nil {
		o.GatewayLog = io.Discard
	}
	if o.GatewayLogLevel == "" {
		o.GatewayLogLevel = "error"
	}
	srv, err := mariadbtest.Start(ctx, mariadbtest.Options{
		Users: []mariadbtest.User{{Name: backendUser, Password: backendPassword}},
		ExtraArgs: []string{
			"--log-bin-trust-function-creators=1",
			"--innodb-lock-wait-timeout=1",
			"--lock-wait-timeout=10",
		},
	})
	if err != nil {
		return nil, err
	}
	e := &Env{srv: srv, opts: o}
	e.root, err = srv.RootDB()
	if err != nil {
		return nil, errors.Join(err, srv.Stop())
	}
	e.root.SetMaxOpenConns(32)
	e.root.SetMaxIdleConns(32)
	if o.GeneralLog != "" {
		// Every statement MariaDB runs, from either side: for replaying
		// a divergence.
		for _, q := range []string{"SET GLOBAL general_log_file = '" + strings.ReplaceAll(o.GeneralLog, "'", "''") + "'", "SET GLOBAL general_log = 1"} {
			if _, err := e.root.ExecContext(ctx, q); err != nil {
				return nil, errors.Join(err, e.Close())
			}
		}
	}
	return e, nil
}

// Close stops MariaDB.
func (e *Env) Close() error {
	return errors.Join(e.root.Close(), e.srv.Stop())
}

// Addr is MariaDB's address.
func (e *Env) Addr() string { return e.srv.Addr() }

// schema returns the statements that give client c fresh databases:
// fz<c> with tables t, parent, child, side and trg, procedures p_set,
// p_sel and p_cur, function f_set and a trigger on trg; fz<c>b with another table
// t. Auto-increment values start at a value of the client's own, so an id
// that leaked from another client is recognisable.
func schema(c int) []string {
	a, b := dbName(c), dbName(c)+"b"
	base := (c + 1) * 1000
	return []string{
		"DROP DATABASE IF EXISTS " + a,
		"DROP DATABASE IF EXISTS " + b,
		"CREATE DATABASE " + a,
		"CREATE DATABASE " + b,
		fmt.Sprintf("CREATE TABLE %s.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(32), n INT) ENGINE=InnoDB AUTO_INCREMENT=%d", a, base),
		fmt.Sprintf("INSERT INTO %s.t (id, v, n) VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)", a),
		fmt.Sprintf("CREATE TABLE %s.parent (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB AUTO_INCREMENT=%d", a, base+500),
		fmt.Sprintf("CREATE TABLE %s.child (id INT AUTO_INCREMENT PRIMARY KEY, parent_id BIGINT) ENGINE=InnoDB AUTO_INCREMENT=%d", a, base+800),
		fmt.Sprintf("CREATE TABLE %s.side (id INT PRIMARY KEY) ENGINE=InnoDB", a),
		fmt.Sprintf("CREATE TABLE %s.trg (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB AUTO_INCREMENT=%d", a, base+900),
		fmt.Sprintf("CREATE TRIGGER %s.trg_ai AFTER INSERT ON %s.trg FOR EACH ROW SET @from_trigger = NEW.v", a, a),
		fmt.Sprintf("CREATE PROCEDURE %s.p_set(x INT) SET @from_proc = x", a),
		fmt.Sprintf("CREATE PROCEDURE %s.p_sel() SELECT @from_proc AS from_proc", a),
		fmt.Sprintf("CREATE FUNCTION %s.f_set(x INT) RETURNS INT DETERMINISTIC BEGIN SET @from_func = x; RETURN x + 1; END", a),
		// A cursor open while a result set goes out: MariaDB flags it on
		// the column definitions of a text CALL.
		fmt.Sprintf("CREATE PROCEDURE %s.p_cur() BEGIN DECLARE v INT; DECLARE c CURSOR FOR SELECT id FROM %s.t ORDER BY id; "+
			"OPEN c; FETCH c INTO v; SELECT id, v FROM %s.t ORDER BY id LIMIT 3; CLOSE c; END", a, a, a),
		fmt.Sprintf("CREATE TABLE %s.t (id INT PRIMARY KEY, w VARCHAR(10)) ENGINE=InnoDB", b),
		fmt.Sprintf("INSERT INTO %s.t VALUES (10, 'b-ten')", b),
	}
}

// setup recreates the databases of every client of r, clients in
// parallel.
func (e *Env) setup(ctx context.Context, r *Round) error {
	var wg sync.WaitGroup
	errs := make([]error, len(r.Scripts))
	for i, s := range r.Scripts {
		wg.Go(func() {
			for _, q := range schema(s.Client) {
				if _, err := e.root.ExecContext(ctx, q); err != nil {
					errs[i] = fmt.Errorf("setup of client %d: %s: %w", s.Client, q, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitRunning waits until MariaDB runs a statement whose text is sql, up
// to limit. It reports whether it saw it.
func (e *Env) waitRunning(ctx context.Context, sql string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var n int
		err := e.root.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", sql).Scan(&n)
		if err == nil && n > 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// runningGateway is a gateway started for one phase.
type runningGateway struct {
	srv  *gateway.Server
	done chan error
}

// startGateway starts an in-process gateway on a loopback port in front
// of the MariaDB, with a pool of poolSize connections that are opened
// only when needed (min_idle 0) and reused in order (pool.order; ""
// is the default), ioLoops io_uring loops (0: sessions on
// goroutines), and query consolidation on (its eligibility checks,
// leaders' copies and write counting run on every read; clients share a
// read only when their state is identical).
func (e *Env) startGateway(poolSize int, order string, ioLoops int) (*runningGateway, error) {
	if order == "" {
		order = "round_robin"
	}
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
http_listen: "off"
log: {level: %s}
io_loops: %d
users:
  - {user: %s, password: %s}
clusters:
  - name: main
    backend_user: %s
    backend_password: %s
    backends: [%q]
    pool: {size: %d, order: %s, min_idle: 0, max_dials: 2, acquire_timeout: 60s}
    consolidation: {enabled: true}
`, e.opts.GatewayLogLevel, ioLoops, appUser, appPassword, backendUser, backendPassword, e.srv.Addr(), poolSize, order)
	if n := e.opts.Pipelining; n > 0 && n < poolSize {
		yaml += fmt.Sprintf("    pipelining: {connections: %d}\n", n)
	}
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		return nil, err
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "gateway", Level: hclog.LevelFromString(e.opts.GatewayLogLevel), Output: e.opts.GatewayLog})
	srv, err := gateway.New(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	g := &runningGateway{srv: srv, done: make(chan error, 1)}
	go func() { g.done <- srv.Serve() }()
	return g, nil
}

func (g *runningGateway) addr() string { return g.srv.Addr().String() }

// disagreements reads the gateway's classifier disagreement counters by
// kind: where its statement classifier and MariaDB's session trackers
// told different stories.
func (g *runningGateway) disagreements() map[string]float64 {
	out := map[string]float64{}
	reg := g.srv.Registry()
	if reg == nil {
		return out
	}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != "directgate_classifier_disagreements_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// stop shuts the gateway down and waits for Serve to return.
func (g *runningGateway) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := g.srv.Shutdown(ctx)
	select {
	case serr := <-g.done:
		if serr != nil && !strings.Contains(serr.Error(), "closed") {
			err = errors.Join(err, serr)
		}
	case <-time.After(15 * time.Second):
		err = errors.Join(err, errors.New("gateway Serve did not return after Shutdown"))
	}
	return err
}
