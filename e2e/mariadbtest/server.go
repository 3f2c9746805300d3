package mariadbtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Options configures Start. The zero value starts a server with binary
// logging on and only the root account.
type Options struct {
	// ServerID is the server's server_id. Zero means the lowest ID not yet
	// used by a Server of this process (1 for the first one unless given
	// explicitly), so servers started with zero can replicate from each
	// other. Servers of one replication topology need distinct IDs.
	ServerID int

	// ExtraArgs are extra mariadbd flags, appended after the defaults. When a
	// flag is given twice mariadbd keeps the last value, so these override
	// the defaults. Nil means none. Flags that change the on-disk format
	// (innodb_page_size and the like) are not supported: every data dir is a
	// copy of one template made with the defaults.
	ExtraArgs []string

	// NoBinlog turns binary logging off. False (the default) runs with
	// --log-bin=mysql-bin --binlog-format=ROW --log-slave-updates=ON
	// --gtid-strict-mode=ON, so the server can be a replication source, and
	// a replica of it can be promoted and serve the other replicas (see
	// StartReplication); ExtraArgs can change these. A NoBinlog server can
	// still be a replica, but not a primary.
	NoBinlog bool

	// Users are created after start, besides root. Nil means none.
	Users []User
}

// User is an account created by Start as 'Name'@'%', 'Name'@'localhost' and
// 'Name'@'127.0.0.1', authenticated by mysql_native_password.
type User struct {
	// Name is the user name. It must not be empty.
	Name string
	// Password is the password. Empty means no password.
	Password string
	// Grants is what is granted, in GRANT syntax without the TO clause:
	// "privileges ON object [WITH ...]", for example
	// "ALL PRIVILEGES ON *.* WITH GRANT OPTION" or "SELECT ON demo.*".
	// Empty means "ALL PRIVILEGES ON *.*". ALL PRIVILEGES includes
	// READ_ONLY ADMIN, so such a user can still write on a read_only
	// replica: list privileges (without SUPER-like ones) to test that
	// writes to a replica fail.
	Grants string
}

// Server is a running (or killed) mariadbd started by Start. Its methods are
// safe for concurrent use.
type Server struct {
	// Host is the address the server listens on: always 127.0.0.1.
	Host string
	// Port is the TCP port, the same across Restart.
	Port int
	// Dir is the temporary directory holding everything below; Stop removes it.
	Dir string
	// DataDir is the server's data directory, inside Dir.
	DataDir string
	// Socket is the unix socket path, inside Dir.
	Socket string
	// PIDFile is the pid file mariadbd writes, inside Dir.
	PIDFile string
	// ErrorLog is the server's error log, inside Dir. It is appended to
	// across restarts.
	ErrorLog string
	// ServerID is the server's server_id.
	ServerID int

	binary string
	args   []string

	mu       sync.Mutex
	proc     *process // nil before the first launch
	removed  bool     // Stop has run
	readOnly bool     // set by StartReplication etc.: --read-only on Restart
}

// process is one run of mariadbd.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed after Wait returns
	err    error         // Wait's error, readable once exited is closed
	ours   bool          // we signalled it; its exit status is expected
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stopTimeout is how long Stop and Shutdown wait after SIGTERM before SIGKILL.
const stopTimeout = 20 * time.Second

// defaultStartTimeout bounds Start and Restart when ctx has no deadline.
const defaultStartTimeout = time.Minute

// maxSocketPath is the usable length of sockaddr_un.sun_path on Linux.
const maxSocketPath = 107

// errPortInUse marks a launch that failed because the port was taken.
var errPortInUse = errors.New("port already in use")

// Start copies the template data dir into a new temporary directory, starts
// mariadbd on a free port of 127.0.0.1, waits until it accepts connections
// and sets up the accounts (see the package documentation). ctx bounds the
// start only; the server runs until Stop, Shutdown or Kill. When ctx has no
// deadline a minute is allowed.
//
// On error nothing is left running and the temporary directory is removed.
// An error from a server that failed to boot includes the tail of its error
// log.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()

	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	for _, u := range opts.Users {
		if u.Name == "" {
			return nil, errors.New("mariadbtest: Options.Users: a user has an empty Name")
		}
	}
	tpl, err := templateDataDir(ctx, bins)
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "mariadbtest-")
	if err != nil {
		return nil, fmt.Errorf("mariadbtest: %w", err)
	}
	s := &Server{
		Host:     "127.0.0.1",
		Dir:      dir,
		DataDir:  filepath.Join(dir, "data"),
		Socket:   filepath.Join(dir, "mysqld.sock"),
		PIDFile:  filepath.Join(dir, "mysqld.pid"),
		ErrorLog: filepath.Join(dir, "error.log"),
		ServerID: allocServerID(opts.ServerID),
		binary:   bins.mariadbd,
	}
	defer func() {
		if err != nil {
			if stopErr := s.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	if len(s.Socket) > maxSocketPath {
		return nil, fmt.Errorf("mariadbtest: socket path %s is longer than %d bytes: set TMPDIR to a shorter directory", s.Socket, maxSocketPath)
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("mariadbtest: %w", err)
	}

	// The free port is found by binding and closing it, so someone else may
	// take it before mariadbd binds: retry with a fresh port and data dir.
	const attempts = 5
	for i := 1; ; i++ {
		if err := os.RemoveAll(s.DataDir); err != nil {
			return nil, fmt.Errorf("mariadbtest: %w", err)
		}
		if err := copyDir(tpl, s.DataDir); err != nil {
			return nil, fmt.Errorf("mariadbtest: copy template data dir: %w", err)
		}
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
		s.args = s.serverArgs(opts)
		s.mu.Lock()
		err = s.launchLocked(ctx)
		s.mu.Unlock()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortInUse) || i == attempts {
			return nil, err
		}
	}
	if err := s.setup(ctx, opts.Users); err != nil {
		return nil, err
	}
	return s, nil
}

// serverArgs are mariadbd's flags. --no-defaults must come first.
func (s *Server) serverArgs(opts Options) []string {
	args := []string{
		"--no-defaults",
		"--datadir=" + s.DataDir,
		"--port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1",
		"--socket=" + s.Socket,
		"--pid-file=" + s.PIDFile,
		"--log-error=" + s.ErrorLog,
		"--tmpdir=" + filepath.Join(s.Dir, "tmp"),
		"--server-id=" + strconv.Itoa(s.ServerID),
		"--skip-name-resolve",
		"--innodb-buffer-pool-size=64M",
		"--innodb-log-file-size=48M",
		// Nothing to gain from saving and reloading the page list of a
		// throwaway server; skipping it makes start and stop quicker.
		"--innodb-buffer-pool-load-at-startup=OFF",
		"--innodb-buffer-pool-dump-at-shutdown=OFF",
		"--max-connections=2000",
	}
	args = append(args, userArgs()...)
	// Named explicitly: the default names derive from the host name. Any
	// server can be a replica, so each has a relay log name.
	args = append(args, "--relay-log=relay-bin")
	if !opts.NoBinlog {
		args = append(args,
			"--log-bin=mysql-bin", "--binlog-format=ROW",
			// A replica binlogs what it applies, so once promoted it can
			// serve the other replicas from their @@gtid_slave_pos.
			"--log-slave-updates=ON",
			// Out-of-order GTIDs and transactions a replica has but its
			// primary lacks stop replication with an error instead of
			// diverging silently.
			"--gtid-strict-mode=ON",
		)
	}
	return append(args, opts.ExtraArgs...)
}

// serverIDs hands out server IDs for Options.ServerID zero.
var serverIDs struct {
	mu   sync.Mutex
	used map[int]bool
}

// allocServerID returns want (if not zero) or the lowest unused ID, and
// records it as used.
func allocServerID(want int) int {
	serverIDs.mu.Lock()
	defer serverIDs.mu.Unlock()
	if serverIDs.used == nil {
		serverIDs.used = make(map[int]bool)
	}
	id := want
	if id == 0 {
		id = 1
		for serverIDs.used[id] {
			id++
		}
	}
	serverIDs.used[id] = true
	return id
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, defaultStartTimeout)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("mariadbtest: find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("mariadbtest: find a free port: %w", err)
	}
	return port, nil
}

// launchLocked starts mariadbd with s.args and waits until it answers over
// its socket. If it does not, the process is killed and the error carries
// the new part of the error log. s.mu must be held.
func (s *Server) launchLocked(ctx context.Context) error {
	logStart := fileSize(s.ErrorLog)
	stderrPath := filepath.Join(s.Dir, "mariadbd.stderr")
	stderr, err := os.OpenFile(stderrPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	stderrStart := fileSize(stderrPath)

	args := s.args
	if s.readOnly {
		args = append(args[:len(args):len(args)], "--read-only=ON")
	}
	cmd := exec.Command(s.binary, args...)
	cmd.Dir = s.Dir
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	stderr.Close() // the child has its own copy
	if err != nil {
		return fmt.Errorf("mariadbtest: start %s: %w", s.binary, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	s.proc = p

	if err := s.waitReady(ctx, p); err != nil {
		p.ours = true // this failure is reported here, not again by Stop
		if p.running() {
			_ = cmd.Process.Kill()
			<-p.exited
		}
		log := readFrom(s.ErrorLog, logStart) + readFrom(stderrPath, stderrStart)
		if strings.Contains(log, "Address already in use") || strings.Contains(log, "Bind on TCP/IP port") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return fmt.Errorf("mariadbtest: mariadbd on %s (dir %s): %w\n--- error log tail ---\n%s", s.Addr(), s.Dir, err, tail([]byte(log), 25))
	}
	return nil
}

// waitReady polls the server's socket until a ping succeeds, the process
// exits or ctx ends.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	db, err := sql.Open("mysql", s.rootDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxIdleConns(0)

	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("exited during start: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last ping error: %v)", ctx.Err(), lastErr)
		case <-tick.C:
		}
		// The socket appears when the server is about to accept
		// connections; before that a ping would only fail.
		if _, err := os.Stat(s.Socket); err != nil {
			lastErr = err
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		lastErr = db.PingContext(pctx)
		cancel()
		if lastErr == nil {
			return nil
		}
	}
}

// setup drops the anonymous and non-socket root accounts and creates users.
// It runs with sql_log_bin=0 so none of it reaches the binary log.
func (s *Server) setup(ctx context.Context, users []User) error {
	db, err := sql.Open("mysql", s.rootDSN())
	if err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mariadbtest: connect as root over %s: %w", s.Socket, err)
	}
	defer conn.Close()

	run := func(q string) error {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mariadbtest: setup: %s: %w", redact(q), err)
		}
		return nil
	}
	if err := run("SET SESSION sql_log_bin = 0"); err != nil {
		return err
	}

	rows, err := conn.QueryContext(ctx,
		"SELECT User, Host FROM mysql.user WHERE User = '' OR (User = 'root' AND Host <> 'localhost')")
	if err != nil {
		return fmt.Errorf("mariadbtest: setup: list accounts: %w", err)
	}
	var drop []string
	for rows.Next() {
		var u, h string
		if err := rows.Scan(&u, &h); err != nil {
			rows.Close()
			return fmt.Errorf("mariadbtest: setup: list accounts: %w", err)
		}
		drop = append(drop, quote(u)+"@"+quote(h))
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("mariadbtest: setup: list accounts: %w", err)
	}
	for _, a := range drop {
		if err := run("DROP USER " + a); err != nil {
			return err
		}
	}

	for _, u := range users {
		privs, with := splitGrants(u.Grants)
		for _, host := range []string{"%", "localhost", "127.0.0.1"} {
			account := quote(u.Name) + "@" + quote(host)
			if err := run("CREATE USER " + account + " IDENTIFIED BY " + quote(u.Password)); err != nil {
				return err
			}
			if err := run("GRANT " + privs + " TO " + account + with); err != nil {
				return err
			}
		}
	}
	return run("FLUSH PRIVILEGES")
}

// withClause finds the start of "WITH GRANT OPTION" / "WITH MAX_..." in a
// grant, which GRANT wants after the TO clause.
var withClause = regexp.MustCompile(`(?i)\s+WITH\s+(GRANT\s+OPTION|MAX_)`)

// splitGrants splits "privs ON obj [WITH ...]" into "privs ON obj" and
// " WITH ..." (with a leading space, or empty).
func splitGrants(grants string) (privs, with string) {
	g := strings.TrimSpace(grants)
	if g == "" {
		return "ALL PRIVILEGES ON *.*", ""
	}
	if loc := withClause.FindStringIndex(g); loc != nil {
		return g[:loc[0]], " " + strings.TrimSpace(g[loc[0]:])
	}
	return g, ""
}

// quote returns s as a single-quoted SQL string literal (default sql_mode,
// where backslash escapes).
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`)
	return "'" + r.Replace(s) + "'"
}

var identifiedBy = regexp.MustCompile(`IDENTIFIED BY '(?:[^'\\]|\\.)*'`)

// redact hides passwords in statements quoted in errors.
func redact(q string) string {
	return identifiedBy.ReplaceAllString(q, "IDENTIFIED BY '***'")
}

func (s *Server) rootDSN() string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "unix"
	cfg.Addr = s.Socket
	cfg.Timeout = 5 * time.Second
	return cfg.FormatDSN()
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
}

// DSN returns a go-sql-driver/mysql DSN that connects as user over TCP to
// Addr, with default database db (empty means none) and a 10 s dial timeout.
// interpolateParams is off.
func (s *Server) DSN(user, password, db string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net = "tcp"
	cfg.Addr = s.Addr()
	cfg.DBName = db
	cfg.Timeout = 10 * time.Second
	return cfg.FormatDSN()
}

// RootDB opens a pool that connects as root over the unix socket and checks
// that it can connect. The caller closes it.
func (s *Server) RootDB() (*sql.DB, error) {
	db, err := sql.Open("mysql", s.rootDSN())
	if err != nil {
		return nil, fmt.Errorf("mariadbtest: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mariadbtest: root over %s: %w", s.Socket, err)
	}
	return db, nil
}

// PID returns the process ID of the running mariadbd, or 0 when it is not
// running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.proc.running() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Stop shuts the server down gracefully (SIGTERM; SIGKILL after 20 s) and
// removes its temporary directory. It is idempotent: later calls return nil.
// It reports a server that exited on its own before Stop (a crash), a
// shutdown that needed SIGKILL, and a failure to remove the directory.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil
	}
	err := s.shutdownLocked()
	s.removed = true
	if rmErr := os.RemoveAll(s.Dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("mariadbtest: remove %s: %w", s.Dir, rmErr))
	}
	return err
}

// Shutdown stops the server like Stop but keeps its directory, so Restart
// can start it again. Calling it on a stopped server returns nil.
func (s *Server) Shutdown() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdownLocked()
}

func (s *Server) shutdownLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	if !p.running() {
		if !p.ours {
			p.ours = true // report an unexpected exit once
			return fmt.Errorf("mariadbtest: mariadbd on %s had exited on its own: %v\n--- error log tail ---\n%s", s.Addr(), p.err, s.errorLogTail())
		}
		return nil
	}
	p.ours = true
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("mariadbtest: SIGTERM mariadbd: %w", err)
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("mariadbtest: mariadbd on %s shut down with %v\n--- error log tail ---\n%s", s.Addr(), p.err, s.errorLogTail())
		}
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("mariadbtest: mariadbd on %s did not stop within %v of SIGTERM; killed", s.Addr(), stopTimeout)
	}
}

// Kill sends SIGKILL to the server now and waits for it to die, keeping its
// directory: the test double for "the backend died". Restart brings it back
// (with crash recovery). Calling it on a stopped server returns nil.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil || !p.running() {
		return nil
	}
	p.ours = true
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("mariadbtest: SIGKILL mariadbd: %w", err)
	}
	<-p.exited
	return nil
}

// Restart starts the server again after Kill or Shutdown, on the same port,
// data dir and flags, and waits until it accepts connections. It fails if the
// server is running, if Stop has removed it, or if the port has been taken
// meanwhile. When ctx has no deadline a minute is allowed.
func (s *Server) Restart(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return errors.New("mariadbtest: Restart after Stop: the data dir is gone (use Shutdown or Kill to keep it)")
	}
	if s.proc != nil && s.proc.running() {
		return fmt.Errorf("mariadbtest: Restart: mariadbd on %s is still running (pid %d)", s.Addr(), s.proc.cmd.Process.Pid)
	}
	return s.launchLocked(ctx)
}

func (s *Server) errorLogTail() string {
	b, err := os.ReadFile(s.ErrorLog)
	if err != nil {
		return err.Error()
	}
	return tail(b, 25)
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// readFrom returns the content of path from offset on, at most the last 64 KiB.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if size := fileSize(path); size-offset > 64<<10 {
		offset = size - 64<<10
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(f)
	return buf.String()
}
