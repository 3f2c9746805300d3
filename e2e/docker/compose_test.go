package docker

// Checks that compose.yaml, gateway.yaml, the init files and the Dockerfile
// agree, without a Docker engine; and that the Dockerfile's build flags make
// a static binary.

import (
	"debug/elf"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/config"
)

const (
	composePath    = "compose.yaml"
	dockerfilePath = "Dockerfile"
	repoRoot       = "../.."
	initDir        = "/docker-entrypoint-initdb.d/"
	mariadbDataDir = "/var/lib/mysql"
)

// stack is everything the checks read, parsed once per test.
type stack struct {
	compose *composeProject
	df      *dockerfile

	gatewayName, ownerName string
	gateway, owner         *composeService
	gatewayArgs, ownerArgs []string // the command each runs, after the entrypoint
	configPath             string   // host path of the gateway config
	cfg                    *config.Config
	cluster                *config.Cluster // the one the owner serves

	mariadb     map[string]*composeService // services running the mariadb image
	primaryName string                     // the mariadb service without read_only
	primaryInit *initScript
}

func loadStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{compose: loadCompose(t, composePath), df: parseDockerfile(t, dockerfilePath), mariadb: map[string]*composeService{}}
	final := s.df.Stages[len(s.df.Stages)-1]
	entry, err := execForm(final.last("ENTRYPOINT"))
	if err != nil {
		t.Fatalf("Dockerfile ENTRYPOINT: %v", err)
	}
	defCmd, err := execForm(final.last("CMD"))
	if err != nil {
		t.Fatalf("Dockerfile CMD: %v", err)
	}
	wantDockerfile, _ := filepath.Abs(dockerfilePath)
	for name, svc := range s.compose.Services {
		if isMariaDB(svc.Image) {
			s.mariadb[name] = svc
			continue
		}
		if svc.Build == nil {
			continue
		}
		df := svc.Build.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		if got, _ := filepath.Abs(filepath.Join(svc.Build.Context, df)); got != wantDockerfile {
			continue
		}
		if svc.Entrypoint != nil && !slices.Equal(svc.Entrypoint, entry) {
			t.Errorf("service %s: entrypoint %q overrides the image's %q", name, svc.Entrypoint, entry)
		}
		args := []string(svc.Command)
		if args == nil {
			args = defCmd
		}
		if len(args) == 0 {
			t.Fatalf("service %s: no command", name)
		}
		switch args[0] {
		case "serve":
			if s.gateway != nil {
				t.Fatalf("services %s and %s both run gateway serve: the checks expect one", s.gatewayName, name)
			}
			s.gatewayName, s.gateway, s.gatewayArgs = name, svc, args
		case "owner":
			if s.owner != nil {
				t.Fatalf("services %s and %s both run gateway owner: the checks expect one", s.ownerName, name)
			}
			s.ownerName, s.owner, s.ownerArgs = name, svc, args
		default:
			t.Fatalf("service %s: runs %q, neither serve nor owner", name, args)
		}
	}
	if s.gateway == nil || s.owner == nil {
		t.Fatalf("compose.yaml: want one service running serve and one running owner from %s (found %q, %q)", dockerfilePath, s.gatewayName, s.ownerName)
	}

	// The config file: what --config names inside the containers, mounted
	// from the same host file into both.
	for _, svc := range []struct {
		name string
		s    *composeService
		args []string
	}{{s.gatewayName, s.gateway, s.gatewayArgs}, {s.ownerName, s.owner, s.ownerArgs}} {
		path, ok := flagValue(svc.args, "--config")
		if !ok {
			t.Fatalf("service %s: command %q has no --config", svc.name, svc.args)
		}
		m := findMount(svc.s, path)
		if m == nil || m.Type != "bind" {
			t.Fatalf("service %s: --config %s, but no file is bind-mounted there (volumes: %+v)", svc.name, path, svc.s.Volumes)
		}
		if !m.ReadOnly {
			t.Errorf("service %s: the config %s is not mounted read-only (:ro)", svc.name, path)
		}
		if s.configPath == "" {
			s.configPath = m.Source
		} else if filepath.Clean(m.Source) != filepath.Clean(s.configPath) {
			t.Errorf("owner and gateway mount different configs: %s and %s", s.configPath, m.Source)
		}
	}
	if s.cfg, err = config.Load(s.configPath); err != nil {
		t.Fatalf("the config compose mounts: %v", err)
	}
	clusterName, ok := flagValue(s.ownerArgs, "--cluster")
	if !ok {
		t.Fatalf("service %s: command %q has no --cluster", s.ownerName, s.ownerArgs)
	}
	for i := range s.cfg.Clusters {
		if s.cfg.Clusters[i].Name == clusterName {
			s.cluster = &s.cfg.Clusters[i]
		}
	}
	if s.cluster == nil {
		t.Fatalf("service %s: --cluster %s, but %s has no such cluster", s.ownerName, clusterName, s.configPath)
	}

	for name, svc := range s.mariadb {
		if !isOn(serverFlags(svc.Command)["read-only"]) {
			if s.primaryName != "" {
				t.Fatalf("mariadb services %s and %s both run without --read-only: which is the primary?", s.primaryName, name)
			}
			s.primaryName = name
		}
	}
	if s.primaryName == "" {
		t.Fatal("compose.yaml: no mariadb service without --read-only (the primary)")
	}
	initFiles := initMounts(s.mariadb[s.primaryName], ".sql")
	if len(initFiles) != 1 {
		t.Fatalf("service %s: want one .sql file mounted into %s, found %q", s.primaryName, initDir, initFiles)
	}
	s.primaryInit = parseInitSQL(t, initFiles[0])
	return s
}

func isMariaDB(image string) bool {
	name, _, _ := strings.Cut(image[strings.LastIndexByte(image, '/')+1:], ":")
	return name == "mariadb"
}

// findMount returns the mount of svc at target, or nil.
func findMount(svc *composeService, target string) *mount {
	for i := range svc.Volumes {
		if filepath.Clean(svc.Volumes[i].Target) == filepath.Clean(target) {
			return &svc.Volumes[i]
		}
	}
	return nil
}

// initMounts returns the host files bind-mounted into the image's init
// directory whose names end in ext.
func initMounts(svc *composeService, ext string) []string {
	var files []string
	for _, m := range svc.Volumes {
		if m.Type == "bind" && strings.HasPrefix(m.Target, initDir) && strings.HasSuffix(m.Target, ext) {
			files = append(files, m.Source)
		}
	}
	return files
}

// mariadbPort is the port a mariadb service listens on in its container.
func mariadbPort(svc *composeService) string {
	if p, ok := serverFlags(svc.Command)["port"]; ok {
		return p
	}
	return "3306"
}

// resolvesTo reports whether host names service name inside the compose
// network (its service name or host name).
func resolvesTo(host, name string, svc *composeService) bool {
	return host == name || (svc.Hostname != "" && host == svc.Hostname)
}

func splitAddr(t *testing.T, key, addr string) (string, string) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return h, p
}

// Every backend is a mariadb service at its port, and every mariadb
// service is a backend; the owner address is the owner service and the
// gateway listens on all interfaces on the ports compose publishes.
func TestComposeAddresses(t *testing.T) {
	s := loadStack(t)
	seen := map[string]bool{}
	for _, cl := range s.cfg.Clusters {
		for _, b := range cl.Backends {
			host, p := splitAddr(t, "backend", b)
			found := false
			for name, svc := range s.mariadb {
				if resolvesTo(host, name, svc) {
					found = true
					seen[name] = true
					if p != mariadbPort(svc) {
						t.Errorf("cluster %s: backend %s: service %s listens on %s", cl.Name, b, name, mariadbPort(svc))
					}
				}
			}
			if !found {
				t.Errorf("cluster %s: backend %s is no mariadb service of compose.yaml", cl.Name, b)
			}
		}
	}
	for name := range s.mariadb {
		if !seen[name] {
			t.Errorf("mariadb service %s is in no cluster's backends", name)
		}
	}

	// The owner listens on clusters[].owner: its host must be the owner
	// container (resolvable inside it too), its port exposed.
	if s.cluster.Owner == "" {
		t.Fatalf("cluster %s: the owner service runs, but the cluster has no owner address", s.cluster.Name)
	}
	host, p := splitAddr(t, "owner", s.cluster.Owner)
	if !resolvesTo(host, s.ownerName, s.owner) {
		t.Errorf("cluster %s: owner %s is not the owner service %s (hostname %q)", s.cluster.Name, s.cluster.Owner, s.ownerName, s.owner.Hostname)
	}
	if s.owner.Expose != nil && !slices.Contains(s.owner.Expose, p) {
		t.Errorf("service %s: listens on %s (clusters[].owner) but exposes %q", s.ownerName, p, s.owner.Expose)
	}
	exposed := strings.Fields(s.df.Stages[len(s.df.Stages)-1].last("EXPOSE"))

	for _, l := range []struct{ key, addr string }{{"listen", s.cfg.Listen}, {"http_listen", s.cfg.HTTPListen}, {"owner", s.cluster.Owner}} {
		_, p := splitAddr(t, l.key, l.addr)
		if !slices.Contains(exposed, p) && !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("Dockerfile: EXPOSE %q lacks %s (%s)", exposed, p, l.key)
		}
	}
	// Published ports reach a container on its network interface, not on
	// its loopback: the gateway must listen on all interfaces, on each
	// published port, published as the same port on the host (the README
	// connects to 15306).
	for _, l := range []struct{ key, addr string }{{"listen", s.cfg.Listen}, {"http_listen", s.cfg.HTTPListen}} {
		host, p := splitAddr(t, l.key, l.addr)
		if host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("%s %s: inside a container listen on 0.0.0.0 (published ports do not reach %s)", l.key, l.addr, host)
		}
		published := false
		for _, pp := range s.gateway.Ports {
			if pp.Target == p && pp.Protocol == "tcp" {
				published = true
				if pp.Published != p {
					t.Errorf("service %s: container port %s (%s) published as %q, want the same port", s.gatewayName, p, l.key, pp.Published)
				}
			}
		}
		if !published {
			t.Errorf("service %s: %s %s is not a published container port (ports: %+v)", s.gatewayName, l.key, l.addr, s.gateway.Ports)
		}
	}
}

// The accounts gateway.yaml and the replica use are the ones the primary's
// init makes, with the right privileges; the init starts the binary log
// afresh and binlogs them so they replicate.
func TestComposeAccounts(t *testing.T) {
	s := loadStack(t)
	in := s.primaryInit
	if len(in.Statements) == 0 || !regexp.MustCompile(`(?i)^RESET (MASTER|BINARY LOGS)$`).MatchString(in.Statements[0]) {
		t.Errorf("primary init: the first statement must be RESET MASTER (the replica replicates the binary log from its start), got %q", in.Statements[:min(1, len(in.Statements))])
	}
	for _, st := range in.Statements {
		if strings.Contains(strings.ToUpper(st), "SQL_LOG_BIN") {
			t.Errorf("primary init: %q: its accounts and schema must be binlogged to reach the replica", st)
		}
	}

	for _, cl := range s.cfg.Clusters {
		a := in.account(cl.BackendUser, "%")
		if a == nil {
			t.Errorf("cluster %s: backend_user %s: the primary init makes no '%s'@'%%'", cl.Name, cl.BackendUser, cl.BackendUser)
			continue
		}
		if a.Password != cl.BackendPassword {
			t.Errorf("cluster %s: backend_password differs from the password of '%s'@'%%' in the primary init", cl.Name, cl.BackendUser)
		}
		if !a.has("SLAVE MONITOR", "REPLICA MONITOR", "REPLICATION CLIENT") {
			t.Errorf("'%s'@'%%' lacks SLAVE MONITOR: health probes cannot read replication lag (privileges %q)", a.User, a.Privileges)
		}
		// These let writes through read_only (README, The backend account).
		if a.has("ALL", "ALL PRIVILEGES", "SUPER", "READ_ONLY ADMIN") {
			t.Errorf("'%s'@'%%' has %q: ALL PRIVILEGES, SUPER and READ_ONLY ADMIN let writes through read_only", a.User, a.Privileges)
		}
		if !a.has("SELECT") || !a.has("INSERT") {
			t.Errorf("'%s'@'%%' cannot read and write: %q", a.User, a.Privileges)
		}
	}

	// The client account of the README.
	if !slices.ContainsFunc(s.cfg.Users, func(u config.User) bool { return u.User == "app" && u.Password == "app" }) {
		t.Errorf("users: no app/app (the README and compose.yaml connect with -uapp -papp): %+v", s.cfg.Users)
	}

	// The demo schema the config refers to.
	for _, ai := range s.cluster.AutoIncrement {
		if _, ok := in.Tables[ai.Table]; !ok {
			t.Errorf("auto_increment table %s: not created by the primary init", ai.Table)
		}
		if c, ok := in.Tables[ai.Sequence]; !ok || !strings.HasPrefix(c, "vitess_sequence") {
			t.Errorf("auto_increment sequence %s: not created by the primary init with COMMENT 'vitess_sequence' (comment %q)", ai.Sequence, c)
		}
	}

	for name, svc := range s.mariadb {
		e := svc.Environment
		if e["MARIADB_ROOT_PASSWORD"] == "" && e["MARIADB_ALLOW_EMPTY_ROOT_PASSWORD"] == "" && e["MARIADB_RANDOM_ROOT_PASSWORD"] == "" && e["MARIADB_ROOT_PASSWORD_HASH"] == "" {
			t.Errorf("service %s: the image needs a MARIADB_ROOT_PASSWORD (or _HASH, ALLOW_EMPTY_, RANDOM_) to initialise", name)
		}
		// MARIADB_USER, _DATABASE and _REPLICATION_USER are made binlogged
		// on every server (the replica would replicate a duplicate);
		// MARIADB_MASTER_HOST sets up replication without GTIDs, racing
		// replica-init.sh.
		for _, v := range []string{"USER", "DATABASE", "REPLICATION_USER", "MASTER_HOST"} {
			for _, pre := range []string{"MARIADB_", "MYSQL_"} {
				if _, ok := e[pre+v]; ok {
					t.Errorf("service %s: %s%s: accounts and databases come from the primary init only", name, pre, v)
				}
			}
		}
		if name == s.primaryName {
			continue
		}

		// A replica: its init points it at the primary with an account of
		// the primary's init.
		scripts := initMounts(svc, ".sh")
		if len(scripts) != 1 {
			t.Errorf("replica %s: want one .sh mounted into %s, found %q", name, initDir, scripts)
			continue
		}
		host, port := e["DIRECTGATE_PRIMARY_HOST"], e["DIRECTGATE_PRIMARY_PORT"]
		if !resolvesTo(host, s.primaryName, s.mariadb[s.primaryName]) || port != mariadbPort(s.mariadb[s.primaryName]) {
			t.Errorf("replica %s: DIRECTGATE_PRIMARY_HOST/PORT %s:%s is not the primary %s:%s", name, host, port, s.primaryName, mariadbPort(s.mariadb[s.primaryName]))
		}
		user, pass := e["DIRECTGATE_REPL_USER"], e["DIRECTGATE_REPL_PASSWORD"]
		switch a := in.account(user, "%"); {
		case a == nil:
			t.Errorf("replica %s: DIRECTGATE_REPL_USER %q: the primary init makes no '%s'@'%%'", name, user, user)
		case a.Password != pass:
			t.Errorf("replica %s: DIRECTGATE_REPL_PASSWORD is not the password of '%s'@'%%' in the primary init", name, user)
		case !a.has("REPLICATION SLAVE", "REPLICATION REPLICA"):
			t.Errorf("'%s'@'%%' lacks REPLICATION SLAVE: %q", user, a.Privileges)
		}
		raw, err := os.ReadFile(scripts[0])
		if err != nil {
			t.Fatal(err)
		}
		// What runs, not what the comments say.
		script := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(raw, nil)
		for _, want := range []string{"DIRECTGATE_PRIMARY_HOST", "DIRECTGATE_PRIMARY_PORT", "DIRECTGATE_REPL_USER", "DIRECTGATE_REPL_PASSWORD"} {
			if !strings.Contains(string(script), "$"+want) {
				t.Errorf("%s does not use $%s", scripts[0], want)
			}
		}
		for _, re := range []string{`(?i)MASTER_USE_GTID\s*=\s*slave_pos`, `(?im)^\s*RESET MASTER;`, `(?i)gtid_slave_pos\s*=\s*''`} {
			if !regexp.MustCompile(re).Match(script) {
				t.Errorf("%s: no match for %s", scripts[0], re)
			}
		}
		if bash, err := exec.LookPath("bash"); err == nil {
			if out, err := exec.Command(bash, "-n", scripts[0]).CombinedOutput(); err != nil {
				t.Errorf("bash -n %s: %v\n%s", scripts[0], err, out)
			}
		}
	}
}

// The servers can replicate and be promoted, with distinct ids, and keep
// their data in named volumes.
func TestComposeServerFlags(t *testing.T) {
	s := loadStack(t)
	ids := map[string]string{}
	for name, svc := range s.mariadb {
		f := serverFlags(svc.Command)
		id := f["server-id"]
		if n, err := strconv.Atoi(id); err != nil || n < 1 {
			t.Errorf("service %s: --server-id %q", name, id)
		} else if other, dup := ids[id]; dup {
			t.Errorf("services %s and %s: same --server-id %s", name, other, id)
		}
		ids[id] = name
		if f["log-bin"] == "" || f["log-bin"] == "ON" {
			t.Errorf("service %s: --log-bin=NAME missing (unnamed, it follows the container's changing host name)", name)
		}
		if f["relay-log"] == "" || f["relay-log"] == "ON" {
			t.Errorf("service %s: --relay-log=NAME missing (unnamed, it follows the container's changing host name)", name)
		}
		if !strings.EqualFold(f["binlog-format"], "ROW") {
			t.Errorf("service %s: --binlog-format=ROW missing", name)
		}
		for _, k := range []string{"log-slave-updates", "gtid-strict-mode"} {
			if !isOn(f[k]) {
				t.Errorf("service %s: --%s=ON missing", name, k)
			}
		}
		if isOn(f["skip-slave-start"]) {
			t.Errorf("service %s: --skip-slave-start: the replica would not resume replicating after its init", name)
		}
		m := findMount(svc, mariadbDataDir)
		if m == nil || m.Type != "volume" || m.Source == "" {
			t.Errorf("service %s: %s is not a named volume", name, mariadbDataDir)
		} else if _, ok := s.compose.Volumes[m.Source]; !ok {
			t.Errorf("service %s: volume %s is not declared under volumes:", name, m.Source)
		}
		if name != s.primaryName && !isOn(f["read-only"]) {
			t.Errorf("replica %s: --read-only=ON missing", name)
		}
	}
}

// Start order: the replica after a healthy primary, owner and gateway after
// healthy databases, the gateway after the owner; health checks where a
// condition waits for them. Stop: docker's SIGKILL comes after drain_timeout.
func TestComposeDependencies(t *testing.T) {
	s := loadStack(t)
	for name, svc := range s.compose.Services {
		for dep, cond := range svc.DependsOn {
			target, ok := s.compose.Services[dep]
			if !ok {
				t.Errorf("service %s: depends on %s, which does not exist", name, dep)
				continue
			}
			if cond == "service_healthy" && (target.Healthcheck == nil || target.Healthcheck.Disable || len(target.Healthcheck.Test) == 0) {
				t.Errorf("service %s: waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
	}
	for name, svc := range s.mariadb {
		h := svc.Healthcheck
		if h == nil || !slices.Contains(h.Test, "healthcheck.sh") || !slices.Contains(h.Test, "--connect") || !slices.Contains(h.Test, "--innodb_initialized") {
			t.Errorf("service %s: healthcheck should be healthcheck.sh --connect --innodb_initialized (healthy only after the init): %+v", name, h)
		}
		if name != s.primaryName && svc.DependsOn[s.primaryName] != "service_healthy" {
			t.Errorf("replica %s: depends_on %s must be condition: service_healthy (its init replicates the primary's init)", name, s.primaryName)
		}
		for _, dependent := range []string{s.gatewayName, s.ownerName} {
			if s.compose.Services[dependent].DependsOn[name] != "service_healthy" {
				t.Errorf("service %s: depends_on %s must be condition: service_healthy", dependent, name)
			}
		}
	}
	if _, ok := s.gateway.DependsOn[s.ownerName]; !ok {
		t.Errorf("service %s: should depend on %s", s.gatewayName, s.ownerName)
	}
	for name, svc := range map[string]*composeService{s.gatewayName: s.gateway, s.ownerName: s.owner} {
		grace := 10 * time.Second
		if svc.StopGracePeriod != "" {
			var err error
			if grace, err = time.ParseDuration(svc.StopGracePeriod); err != nil {
				t.Errorf("service %s: stop_grace_period: %v", name, err)
			}
		}
		if grace <= s.cfg.DrainTimeout {
			t.Errorf("service %s: stop_grace_period %v is not above drain_timeout %v: docker kills it while it drains", name, grace, s.cfg.DrainTimeout)
		}
	}
	// Same image for both, built once from the repository root.
	if s.gateway.Image == "" || s.gateway.Image != s.owner.Image {
		t.Errorf("services %s and %s: want the same image name, got %q and %q", s.gatewayName, s.ownerName, s.gateway.Image, s.owner.Image)
	}
	for _, svc := range []*composeService{s.gateway, s.owner} {
		if _, err := os.Stat(filepath.Join(svc.Build.Context, "go.mod")); err != nil {
			t.Errorf("build context %s is not the repository root: %v", svc.Build.Context, err)
		}
	}
}

// The image: a static binary on an empty base, non-root, serve by default;
// the Go version of the build image matches go.mod; the build context keeps
// every package the binary needs.
func TestDockerfile(t *testing.T) {
	s := loadStack(t)
	df := s.df
	final := df.Stages[len(df.Stages)-1]
	if final.From != "scratch" && !strings.HasPrefix(final.From, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s: want scratch or distroless/static (the binary is static)", final.From)
	}
	uid, gid, _ := strings.Cut(final.last("USER"), ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("final stage USER %q: want a numeric non-root uid (no users file in scratch)", final.last("USER"))
	} else if gid != "" {
		if _, err := strconv.Atoi(gid); err != nil {
			t.Errorf("final stage USER %q: numeric gid", final.last("USER"))
		}
	}
	entry, _ := execForm(final.last("ENTRYPOINT"))
	cmd, _ := execForm(final.last("CMD"))
	if len(entry) != 1 || len(cmd) == 0 || cmd[0] != "serve" {
		t.Errorf("ENTRYPOINT %q CMD %q: want [binary] and [serve ...]", entry, cmd)
	}

	b := findGoBuild(t, df)
	if !slices.Contains(b.Env, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile:%d: go build without CGO_ENABLED=0: the binary would need libc, absent from %s", b.Line, final.From)
	}
	copied := false
	for _, in := range final.Instructions {
		f := strings.Fields(in.Args)
		if in.Cmd == "COPY" && len(f) == 3 && strings.HasPrefix(f[0], "--from=") && f[1] == b.Output && len(entry) == 1 && f[2] == entry[0] {
			copied = true
		}
	}
	if !copied {
		t.Errorf("final stage: no COPY --from=... %s %q (the built binary as the entrypoint)", b.Output, entry)
	}

	// golang:X.Y... against go.mod's go X.Y.Z.
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	buildFrom := df.Stages[0].From
	tag := regexp.MustCompile(`^(?:docker\.io/(?:library/)?)?golang:(\d+\.\d+)`).FindStringSubmatch(buildFrom)
	if goLine == nil || tag == nil || tag[1] != string(goLine[1]) {
		t.Errorf("build stage FROM %s: want golang:%s (go.mod: go %s)", buildFrom, goLine[1], goLine[1])
	}

	// Dockerfile.dockerignore must not drop a directory the binary needs.
	ignore, err := os.ReadFile(dockerfilePath + ".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/gateway")
	list.Dir = repoRoot
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := filepath.Abs(repoRoot)
	for _, pattern := range strings.Split(string(ignore), "\n") {
		pattern = strings.TrimSpace(pattern)
		if pattern == "" || strings.HasPrefix(pattern, "#") || strings.HasPrefix(pattern, "!") {
			continue
		}
		for _, dir := range strings.Fields(string(out)) {
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				t.Fatal(err)
			}
			for p := rel; p != "." && p != "/"; p = filepath.Dir(p) {
				if ok, _ := filepath.Match(pattern, filepath.ToSlash(p)); ok {
					t.Errorf("Dockerfile.dockerignore: %q excludes %s, needed by ./cmd/gateway", pattern, rel)
				}
			}
		}
	}
}

// Builds the binary with the Dockerfile's flags and checks it is static
// (no interpreter, no shared libraries), stripped as -s asks, and runs.
func TestDockerBuildFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway; skipped with -short")
	}
	b := findGoBuild(t, parseDockerfile(t, dockerfilePath))
	bin := filepath.Join(t.TempDir(), "gateway")
	args := append([]string{"build"}, b.Flags...)
	args = append(append(args, "-o", bin), b.Pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	// The image is linux; the environment of the RUN line comes last.
	cmd.Env = append(append(os.Environ(), "GOOS=linux"), b.Env...)
	t.Logf("%s go %s", strings.Join(b.Env, " "), strings.Join(args, " "))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build with the Dockerfile's flags: %v\n%s", err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter (PT_INTERP): it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q (%v)", libs, err)
	}
	if slices.ContainsFunc(b.Flags, func(fl string) bool {
		return strings.HasPrefix(fl, "-ldflags=") && slices.Contains(strings.Fields(strings.TrimPrefix(fl, "-ldflags=")), "-s")
	}) && f.Section(".symtab") != nil {
		t.Error("-ldflags has -s, but the binary has a symbol table")
	}

	if runtime.GOOS != "linux" {
		t.Skipf("cannot run a linux binary on %s", runtime.GOOS)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "gateway ") {
		t.Fatalf("%s version: %v: %q", bin, err, out)
	}
}
