package mariadbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrNotInstalled is wrapped by the error of Start when mariadbd or
// mariadb-install-db cannot be found.
var ErrNotInstalled = errors.New("mariadbtest: MariaDB server is not installed (Debian: apt-get install -y mariadb-server mariadb-client, or run e2e/local/deps.sh as root)")

// binaries are the programs Start runs.
type binaries struct {
	mariadbd  string
	installDB string
}

// searchDirs are tried after PATH: Debian keeps mariadbd in /usr/sbin, which
// is not in a normal user's PATH.
var searchDirs = []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin", "/usr/local/mysql/scripts"}

func lookProgram(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	for _, d := range searchDirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s not found in PATH or %s: %w", names[0], strings.Join(searchDirs, ", "), ErrNotInstalled)
}

func findBinaries() (binaries, error) {
	d, err := lookProgram("mariadbd", "mysqld")
	if err != nil {
		return binaries{}, err
	}
	i, err := lookProgram("mariadb-install-db", "mysql_install_db")
	if err != nil {
		return binaries{}, err
	}
	return binaries{mariadbd: d, installDB: i}, nil
}

// installArgs are given to mariadb-install-db, after --no-defaults and
// --datadir. The redo log size matches serverArgs so a first boot does not
// resize it.
func installArgs() []string {
	args := []string{
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
		"--skip-name-resolve",
		"--innodb-log-file-size=48M",
	}
	return append(args, userArgs()...)
}

// userArgs is --user=root when running as root: mariadbd refuses to run as
// root without it.
func userArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

// templates caches, per mariadbd binary, the template data dir of this
// process. The templates themselves live on disk and are shared between
// processes.
var templates struct {
	mu   sync.Mutex
	dirs map[string]string
}

const templateReady = "directgate-template-ready"

// templateDataDir returns a data dir initialised by mariadb-install-db for
// this mariadbd version and user, creating it on first use. Callers copy it;
// it is never modified after creation.
//
// The template is built in a private directory and renamed into place, so
// concurrent test binaries (go test ./... runs packages in parallel) never
// see a half-built template: one rename wins, the others use the winner's.
func templateDataDir(ctx context.Context, b binaries) (string, error) {
	templates.mu.Lock()
	defer templates.mu.Unlock()
	if d, ok := templates.dirs[b.mariadbd]; ok {
		return d, nil
	}

	out, err := exec.CommandContext(ctx, b.mariadbd, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mariadbtest: %s --version: %w: %s", b.mariadbd, err, out)
	}
	version := strings.TrimSpace(string(out))
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d\n%q\n", b.mariadbd, version, os.Geteuid(), installArgs())
	key := "mariadb-" + versionNumber(version) + "-" + hex.EncodeToString(h.Sum(nil))[:12]

	parent := filepath.Join(os.TempDir(), "directgate-mariadbtest")
	final := filepath.Join(parent, key)
	if templateComplete(final) {
		d := filepath.Join(final, "data")
		setTemplate(b.mariadbd, d)
		return d, nil
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("mariadbtest: template dir: %w", err)
	}
	// An incomplete template was not made by this package's rename, which is
	// atomic; a /tmp cleaner may have removed part of it. Rebuild it.
	if _, err := os.Stat(final); err == nil {
		_ = os.RemoveAll(final)
	}

	build, err := os.MkdirTemp(parent, ".build-")
	if err != nil {
		return "", fmt.Errorf("mariadbtest: template dir: %w", err)
	}
	defer os.RemoveAll(build) // no-op once renamed

	data := filepath.Join(build, "data")
	args := append([]string{"--no-defaults", "--datadir=" + data}, installArgs()...)
	cmd := exec.CommandContext(ctx, b.installDB, args...)
	out, err = cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mariadbtest: %s %s: %w\n%s", b.installDB, strings.Join(args, " "), err, tail(out, 30))
	}
	if err := os.WriteFile(filepath.Join(build, "VERSION"), []byte(version+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("mariadbtest: template: %w", err)
	}
	if err := os.WriteFile(filepath.Join(build, templateReady), nil, 0o600); err != nil {
		return "", fmt.Errorf("mariadbtest: template: %w", err)
	}
	if err := os.Rename(build, final); err != nil {
		// Another process won the race; use its template.
		if !templateComplete(final) {
			return "", fmt.Errorf("mariadbtest: template: %w", err)
		}
	}
	d := filepath.Join(final, "data")
	setTemplate(b.mariadbd, d)
	return d, nil
}

// templateComplete reports whether dir holds a finished template whose key
// files are still there.
func templateComplete(dir string) bool {
	for _, f := range []string{templateReady, "data/ibdata1", "data/ib_logfile0", "data/mysql/global_priv.MAI"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

func setTemplate(binary, dir string) {
	if templates.dirs == nil {
		templates.dirs = make(map[string]string)
	}
	templates.dirs[binary] = dir
}

// versionNumber extracts "10.11.19" from "mariadbd  Ver 10.11.19-MariaDB-...".
func versionNumber(v string) string {
	f := strings.Fields(v)
	for i, w := range f {
		if w == "Ver" && i+1 < len(f) {
			n, _, _ := strings.Cut(f[i+1], "-")
			if n != "" && strings.Trim(n, "0123456789.") == "" {
				return n
			}
		}
	}
	return "unknown"
}

// copyDir copies the regular files and directories of src into dst, which
// must not exist. On Linux io.Copy between files uses copy_file_range.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm()|0o700)
		case info.Mode().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		default:
			return fmt.Errorf("template %s: unexpected file type %v", path, info.Mode().Type())
		}
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"[... " + strconv.Itoa(len(lines)-n) + " lines cut ...]"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
