package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// targetProxySQL is ProxySQL, started by the ProxySQL anchor's up.sh
// (../shared/anchors/proxysql) in front of the primary when -proxysql-up
// (PROXYSQL_UP) names that script. A default target then.
const targetProxySQL = "proxysql"

// proxySQLAbsent is what the results say when no ProxySQL build is
// configured.
const proxySQLAbsent = "ProxySQL: not built (see ../shared/anchors/proxysql; set PROXYSQL_UP to its up.sh)"

// proxySQL is the ProxySQL that up.sh started. It is not sbbench's child
// (up.sh starts it in the background and exits), so it is stopped by PID.
type proxySQL struct {
	up, bin string // up.sh; PROXYSQL_BIN passed to it ("" leaves up.sh's default)
	addr    string
	pidNo   int
}

// proxySQLScript returns the up.sh of -proxysql-up when it exists and
// so does the binary it would start (bin, else bin/proxysql beside it,
// else proxysql on PATH), else "": no ProxySQL is built.
func proxySQLScript(path, bin string) string {
	if path == "" {
		return ""
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() {
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	if _, err := os.Stat(proxySQLBin(&proxySQL{up: abs, bin: bin})); err != nil {
		if _, perr := exec.LookPath("proxysql"); bin != "" || perr != nil {
			return ""
		}
	}
	return abs
}

// startProxySQL runs up.sh against the primary. up.sh logs in to the
// backend as root with an empty password over TCP, which mariadbtest
// allows only on its socket: a loopback-only root@127.0.0.1 without a
// password is added first (not binlogged; the server is thrown away).
// Without the proxysql target (or with a peer of that name) it only
// says so.
func (b *bench) startProxySQL(ctx context.Context) error {
	if !slices.Contains(b.s.Targets, targetProxySQL) {
		logf("%s", proxySQLAbsent)
		return nil
	}
	if b.s.ProxySQLUp == "" {
		return nil
	}
	b.pxsql = &proxySQL{up: b.s.ProxySQLUp, bin: b.s.ProxySQLBin}
	root, err := b.db.RootDB()
	if err != nil {
		return err
	}
	defer root.Close()
	conn, err := root.Conn(ctx)
	if err != nil {
		return err
	}
	for _, q := range []string{"SET SESSION sql_log_bin = 0",
		"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''",
		"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			return fmt.Errorf("proxysql: %s: %w", q, err)
		}
	}
	conn.Close()
	_, port, _ := strings.Cut(b.db.Addr(), ":")
	stack := filepath.Join(b.dir, "proxysql-stack")
	cmd := exec.CommandContext(ctx, "bash", b.pxsql.up, port, stack)
	cmd.Env = os.Environ()
	if b.pxsql.bin != "" {
		cmd.Env = append(cmd.Env, "PROXYSQL_BIN="+b.pxsql.bin)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errLog, err := os.Create(filepath.Join(b.dir, "proxysql-up.log"))
	if err != nil {
		return err
	}
	defer errLog.Close()
	cmd.Stderr = errLog
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("proxysql: %s: %w (see proxysql-up.log)", b.pxsql.up, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return fmt.Errorf("proxysql: up.sh printed %q, want \"PORT PID\"", out)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		return fmt.Errorf("proxysql: bad PID %q", f[1])
	}
	b.pxsql.addr, b.pxsql.pidNo = "127.0.0.1:"+f[0], pid
	logf("ProxySQL on %s, pid %d (threads=2, multiplexing on; %s)", b.pxsql.addr, pid, b.pxsql.up)
	return nil
}

// proxySQLBin is the binary up.sh runs by default: PROXYSQL_BIN, else
// bin/proxysql beside up.sh.
func proxySQLBin(p *proxySQL) string {
	if p.bin != "" {
		return p.bin
	}
	return filepath.Join(filepath.Dir(p.up), "bin", "proxysql")
}

// target is how sysbench logs in through ProxySQL: up.sh's frontend user.
func (p *proxySQL) target() target { return target{addr: p.addr, user: "sbtest", password: "sbtest"} }

// stop sends SIGTERM and waits up to 20 s for the process to go, then
// SIGKILL.
func (p *proxySQL) stop() error {
	if p == nil || p.pidNo == 0 {
		return nil
	}
	pid := p.pidNo
	p.pidNo = 0
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil // already gone
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return errors.New("proxysql did not stop within 20s of SIGTERM; killed")
}
