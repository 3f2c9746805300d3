package docker

// Checks that each compose file (compose.yaml, and the fleet's
// fleet/compose.yaml), the gateway config and topology it mounts, the init
// files and the Dockerfile agree, without a Docker engine; and that the
// Dockerfile's build flags make a static binary.

import (
	"debug/elf"
	"maps"
	"net"
	"net/url"
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

	"gopkg.in/yaml.v3"

	"github.com/directgate/directgate/config"
)

const (
	composePath      = "compose.yaml"
	fleetComposePath = "fleet/compose.yaml"
	dockerfilePath   = "Dockerfile"
	repoRoot         = "../.."
	initDir          = "/docker-entrypoint-initdb.d/"
	mariadbDataDir   = "/var/lib/mysql"
)

// composePaths are the compose files the checks read: make run's stack and
// the fleet (make run-fleet's).
var composePaths = []string{composePath, fleetComposePath}

// forEachStack runs check on the stack of every compose file, each in a
// subtest.
func forEachStack(t *testing.T, check func(t *testing.T, s *stack)) {
	for _, path := range composePaths {
		t.Run(strings.ReplaceAll(path, "/", "_"), func(t *testing.T) { check(t, loadStack(t, path)) })
	}
}

// gatewayService is a compose service running the gateway image.
type gatewayService struct {
	name string
	*composeService
	args []string // the command it runs, after the entrypoint
}

// stack is everything the checks read of one compose file, parsed once per
// test.
type stack struct {
	path    string
	compose *composeProject
	df      *dockerfile

	// The services running the gateway image, by what they run (gateway
	// serve, owner, topo put), each sorted by name.
	gateways, owners, topoPuts []gatewayService
	configPath                 string         // host path of the config all of them mount
	base                       *config.Config // that config, as a process loads it
	// cfg is what the gateways serve: base, or with topology.etcd base
	// merged with the topology topo put stores (topologyPath), as a
	// gateway merges it.
	cfg          *config.Config
	topologyPath string
	topology     *config.Topology // that file as written (no defaults)
	cluster      *config.Cluster  // the one the first owner serves

	mariadb     map[string]*composeService // services running the mariadb image
	etcd        map[string]*composeService // services running the etcd image
	primaryName string                     // the mariadb service without read_only
	primaryInit *initScript
}

// directgate is every service running the gateway image.
func (s *stack) directgate() []gatewayService {
	return slices.Concat(s.gateways, s.owners, s.topoPuts)
}

func loadStack(t *testing.T, path string) *stack {
	t.Helper()
	s := &stack{path: path, compose: loadCompose(t, path), df: parseDockerfile(t, dockerfilePath),
		mariadb: map[string]*composeService{}, etcd: map[string]*composeService{}}
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
	for _, name := range slices.Sorted(maps.Keys(s.compose.Services)) {
		svc := s.compose.Services[name]
		switch imageName(svc.Image) {
		case "mariadb":
			s.mariadb[name] = svc
			continue
		case "etcd":
			s.etcd[name] = svc
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
		g := gatewayService{name: name, composeService: svc, args: args}
		switch {
		case args[0] == "serve":
			s.gateways = append(s.gateways, g)
		case args[0] == "owner":
			s.owners = append(s.owners, g)
		case args[0] == "topo" && len(args) > 1 && args[1] == "put":
			s.topoPuts = append(s.topoPuts, g)
		default:
			t.Fatalf("service %s: runs %q, none of serve, owner and topo put", name, args)
		}
	}
	if len(s.gateways) == 0 || len(s.owners) == 0 {
		t.Fatalf("%s: want services running serve and owner from %s (found %d and %d)", path, dockerfilePath, len(s.gateways), len(s.owners))
	}

	// The config file: what --config names inside the containers, mounted
	// from the same host file into all of them.
	for _, g := range s.directgate() {
		p := hostFile(t, g, "--config")
		if s.configPath == "" {
			s.configPath = p
		} else if filepath.Clean(p) != filepath.Clean(s.configPath) {
			t.Errorf("service %s mounts %s as its config, the others %s: want one config", g.name, p, s.configPath)
		}
	}
	if s.base, err = config.Load(s.configPath); err != nil {
		t.Fatalf("the config %s mounts: %v", path, err)
	}
	s.cfg = s.base
	switch {
	case s.base.FromEtcd():
		if len(s.topoPuts) != 1 {
			t.Fatalf("%s: %s has topology.etcd: want one service running topo put (it stores the clusters and users), found %d", path, s.configPath, len(s.topoPuts))
		}
		s.topologyPath = hostFile(t, s.topoPuts[0], "--file")
		doc, err := os.ReadFile(s.topologyPath)
		if err != nil {
			t.Fatal(err)
		}
		if s.topology, err = config.ParseTopology(doc); err != nil {
			t.Fatalf("%s: %v", s.topologyPath, err)
		}
		s.cfg = s.withTopology(t, doc)
	case len(s.topoPuts) > 0:
		t.Fatalf("service %s runs topo put, but %s has no topology.etcd", s.topoPuts[0].name, s.configPath)
	}
	for _, o := range s.owners {
		name, ok := flagValue(o.args, "--cluster")
		if !ok {
			t.Fatalf("service %s: command %q has no --cluster", o.name, o.args)
		}
		cl := clusterNamed(s.cfg, name)
		if cl == nil {
			t.Fatalf("service %s: --cluster %s, but the configuration has no such cluster", o.name, name)
		}
		if s.cluster == nil {
			s.cluster = cl
		}
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
		t.Fatalf("%s: no mariadb service without --read-only (the primary)", path)
	}
	initFiles := initMounts(s.mariadb[s.primaryName], ".sql")
	if len(initFiles) != 1 {
		t.Fatalf("service %s: want one .sql file mounted into %s, found %q", s.primaryName, initDir, initFiles)
	}
	s.primaryInit = parseInitSQL(t, initFiles[0])
	return s
}

// hostFile returns the host file bind-mounted (read-only) where flag of
// g's command (--config, --file) points.
func hostFile(t *testing.T, g gatewayService, flag string) string {
	t.Helper()
	path, ok := flagValue(g.args, flag)
	if !ok {
		t.Fatalf("service %s: command %q has no %s", g.name, g.args, flag)
	}
	m := findMount(g.composeService, path)
	if m == nil || m.Type != "bind" {
		t.Fatalf("service %s: %s %s, but no file is bind-mounted there (volumes: %+v)", g.name, flag, path, g.Volumes)
	}
	if !m.ReadOnly {
		t.Errorf("service %s: %s is not mounted read-only (:ro)", g.name, path)
	}
	return m.Source
}

// withTopology merges the topology document doc into s.base as every
// gateway of the fleet does, validating it with the gateway's own rules.
func (s *stack) withTopology(t *testing.T, doc []byte) *config.Config {
	t.Helper()
	cfg, err := s.base.WithTopology(doc)
	if err != nil && onlyOwnerAddressMissing(err) {
		// config.Validate asks auto_increment for clusters[].owner even
		// under topology.etcd, where the gateways follow the owner elected
		// through etcd (gateway owner --listen) and the cluster has no
		// owner address. Until it stops asking, validate the rest with the
		// address the owners publish standing in for it.
		standIn, _ := flagValue(s.owners[0].args, "--listen")
		t.Logf("%s: config still asks for an owner address (%v); checking the rest with owner: %q standing in", s.topologyPath, err, standIn)
		if cfg, err = s.base.WithTopology(withOwnerAddress(t, doc, standIn)); err == nil {
			for i := range cfg.Clusters { // in the document's order
				cfg.Clusters[i].Owner = s.topology.Clusters[i].Owner
			}
		}
	}
	if err != nil {
		t.Fatalf("%s on top of %s, as a gateway applies it: %v", s.topologyPath, s.configPath, err)
	}
	return cfg
}

// onlyOwnerAddressMissing reports whether every error in err is the one of
// auto_increment without an owner address.
func onlyOwnerAddressMissing(err error) bool {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if !strings.Contains(e.Error(), ".auto_increment: needs an owner") {
			return false
		}
	}
	return true
}

// withOwnerAddress returns the topology document doc with owner: addr in
// every cluster that has no owner key, the rest as written.
func withOwnerAddress(t *testing.T, doc []byte, addr string) []byte {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil || len(root.Content) != 1 {
		t.Fatalf("topology: %v", err)
	}
	top := root.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "clusters" {
			continue
		}
		for _, cl := range top.Content[i+1].Content {
			has := false
			for j := 0; j+1 < len(cl.Content); j += 2 {
				has = has || cl.Content[j].Value == "owner"
			}
			if !has {
				cl.Content = append(cl.Content,
					&yaml.Node{Kind: yaml.ScalarNode, Value: "owner"}, &yaml.Node{Kind: yaml.ScalarNode, Value: addr})
			}
		}
	}
	out, err := yaml.Marshal(&root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// clusterNamed returns cfg's cluster name, or nil.
func clusterNamed(cfg *config.Config, name string) *config.Cluster {
	for i := range cfg.Clusters {
		if cfg.Clusters[i].Name == name {
			return &cfg.Clusters[i]
		}
	}
	return nil
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
// service is a backend; each owner listens on an address of its own
// service; etcd's endpoints are the etcd service; the gateways listen on
// all interfaces on ports compose publishes; every published port is on
// 127.0.0.1, fixed and distinct, and the ports the file's header comment
// connects to are published.
func TestComposeAddresses(t *testing.T) {
	forEachStack(t, func(t *testing.T, s *stack) {
		checkBackends(t, s)
		checkOwnerAddresses(t, s)
		checkEtcdAddresses(t, s)
		checkGatewayPorts(t, s)
		checkOwnerHTTP(t, s)
		checkPublished(t, s)
	})
}

func checkBackends(t *testing.T, s *stack) {
	seen := map[string]bool{}
	for _, cl := range s.cfg.Clusters {
		for _, b := range cl.Backends {
			host, p := splitAddr(t, "backend", b)
			name, svc := s.mariadbService(host)
			if svc == nil {
				t.Errorf("cluster %s: backend %s is no mariadb service of %s", cl.Name, b, s.path)
				continue
			}
			seen[name] = true
			if p != mariadbPort(svc) {
				t.Errorf("cluster %s: backend %s: service %s listens on %s", cl.Name, b, name, mariadbPort(svc))
			}
		}
	}
	for name := range s.mariadb {
		if !seen[name] {
			t.Errorf("mariadb service %s is in no cluster's backends", name)
		}
	}
}

// mariadbService returns the mariadb service host names, or "" and nil.
func (s *stack) mariadbService(host string) (string, *composeService) {
	for name, svc := range s.mariadb {
		if resolvesTo(host, name, svc) {
			return name, svc
		}
	}
	return "", nil
}

// exposed reports whether the image EXPOSEs port p.
func (s *stack) exposed(p string) bool {
	e := strings.Fields(s.df.Stages[len(s.df.Stages)-1].last("EXPOSE"))
	return slices.Contains(e, p) || slices.Contains(e, p+"/tcp")
}

// An owner listens on clusters[].owner, or with topology.etcd on its
// --listen address, which the leader publishes and the gateways follow.
// Either way the host must be the owner's container (resolvable inside it
// too) and the port exposed.
func checkOwnerAddresses(t *testing.T, s *stack) {
	listens := map[string]string{} // address -> service
	owned := map[string]string{}   // cluster -> service, without etcd
	for _, o := range s.owners {
		name, _ := flagValue(o.args, "--cluster")
		cl := clusterNamed(s.cfg, name)
		addr, flagged := flagValue(o.args, "--listen")
		if s.base.FromEtcd() {
			if cl.Owner != "" {
				t.Errorf("cluster %s: owner %s: with topology.etcd the gateways follow the owner elected through etcd, not a fixed address", cl.Name, cl.Owner)
			}
			if !flagged {
				t.Errorf("service %s: with topology.etcd an owner needs --listen HOST:PORT (the address it publishes when it leads)", o.name)
				continue
			}
		} else {
			// No election without etcd: one owner per cluster, at its
			// owner address.
			if other, dup := owned[cl.Name]; dup {
				t.Errorf("services %s and %s both own cluster %s: without topology.etcd nothing elects one", other, o.name, cl.Name)
			}
			owned[cl.Name] = o.name
			if cl.Owner == "" {
				t.Errorf("cluster %s: the owner service %s runs, but the cluster has no owner address", cl.Name, o.name)
				continue
			}
			if flagged && addr != cl.Owner {
				t.Errorf("service %s: --listen %s, but the gateways forward to clusters[].owner %s", o.name, addr, cl.Owner)
			}
			addr = cl.Owner
		}
		host, p := splitAddr(t, o.name+": owner address", addr)
		if !resolvesTo(host, o.name, o.composeService) {
			t.Errorf("service %s: owner address %s is not this service (hostname %q)", o.name, addr, o.Hostname)
		}
		if o.Expose != nil && !slices.Contains(o.Expose, p) {
			t.Errorf("service %s: listens on %s but exposes %q", o.name, p, o.Expose)
		}
		if !s.exposed(p) {
			t.Errorf("Dockerfile: EXPOSE lacks %s (owner address of %s)", p, o.name)
		}
		if other, dup := listens[addr]; dup {
			t.Errorf("services %s and %s: same owner address %s", other, o.name, addr)
		}
		listens[addr] = o.name
	}
}

// etcdURLs parses the comma-separated URLs of an etcd flag of svc.
func etcdURLs(t *testing.T, name string, svc *composeService, flag string) []*url.URL {
	t.Helper()
	v, ok := flagValue(svc.Command, flag)
	if !ok {
		t.Fatalf("etcd service %s: no %s", name, flag)
	}
	var urls []*url.URL
	for raw := range strings.SplitSeq(v, ",") {
		u, err := url.Parse(raw)
		if err != nil || u.Port() == "" {
			t.Fatalf("etcd service %s: %s %q: want scheme://host:port (%v)", name, flag, raw, err)
		}
		urls = append(urls, u)
	}
	return urls
}

// topology.etcd's endpoints are etcd services at a port they listen on
// for clients; etcd listens for them on all interfaces and advertises its
// service name.
func checkEtcdAddresses(t *testing.T, s *stack) {
	e := s.base.Topology.Etcd
	if e == nil {
		return
	}
	if len(s.etcd) == 0 {
		t.Fatalf("%s: %s has topology.etcd, but no service runs the etcd image", s.path, s.configPath)
	}
	clientPorts := map[string][]string{}
	for name, svc := range s.etcd {
		for _, u := range etcdURLs(t, name, svc, "--listen-client-urls") {
			if h := u.Hostname(); h != "0.0.0.0" && h != "::" {
				t.Errorf("etcd service %s: --listen-client-urls %s: listen on 0.0.0.0 (the other containers reach it on its network interface)", name, u)
			}
			clientPorts[name] = append(clientPorts[name], u.Port())
		}
		for _, u := range etcdURLs(t, name, svc, "--advertise-client-urls") {
			if !resolvesTo(u.Hostname(), name, svc) || !slices.Contains(clientPorts[name], u.Port()) {
				t.Errorf("etcd service %s: --advertise-client-urls %s is not this service at a client port %q", name, u, clientPorts[name])
			}
		}
	}
	for _, ep := range e.Endpoints {
		hostPort := ep
		if _, rest, ok := strings.Cut(ep, "://"); ok {
			hostPort = rest
		}
		host, p := splitAddr(t, "topology.etcd.endpoints", hostPort)
		found := false
		for name, svc := range s.etcd {
			if resolvesTo(host, name, svc) {
				found = true
				if !slices.Contains(clientPorts[name], p) {
					t.Errorf("topology.etcd.endpoints: %s: etcd service %s listens for clients on %q", ep, name, clientPorts[name])
				}
			}
		}
		if !found {
			t.Errorf("topology.etcd.endpoints: %s is no etcd service of %s", ep, s.path)
		}
	}
}

// Published ports reach a container on its network interface, not on its
// loopback: the gateways must listen on all interfaces, on ports every
// gateway publishes. The first gateway publishes them as the same ports on
// the host (the README connects to 15306).
func checkGatewayPorts(t *testing.T, s *stack) {
	for _, l := range []struct{ key, addr string }{{"listen", s.cfg.Listen}, {"http_listen", s.cfg.HTTPListen}} {
		host, p := splitAddr(t, l.key, l.addr)
		if host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("%s %s: inside a container listen on 0.0.0.0 (published ports do not reach %s)", l.key, l.addr, host)
		}
		if !s.exposed(p) {
			t.Errorf("Dockerfile: EXPOSE lacks %s (%s)", p, l.key)
		}
		for i, g := range s.gateways {
			published := false
			for _, pp := range g.Ports {
				if pp.Target == p && pp.Protocol == "tcp" {
					published = true
					if i == 0 && pp.Published != p {
						t.Errorf("service %s: container port %s (%s) published as %q, want the same port", g.name, p, l.key, pp.Published)
					}
				}
			}
			if !published {
				t.Errorf("service %s: %s %s is not a published container port (ports: %+v)", g.name, l.key, l.addr, g.Ports)
			}
		}
	}
}

// An owner's --http-listen, when given, passes the file's http rules (a
// token, or insecure, off loopback), listens on all interfaces on a port
// the image exposes, and is published: the owners' HTTP is for the host.
func checkOwnerHTTP(t *testing.T, s *stack) {
	for _, o := range s.owners {
		addr, ok := flagValue(o.args, "--http-listen")
		if !ok || addr == "off" || addr == "" {
			continue
		}
		if err := s.base.CheckHTTPListen("--http-listen", addr); err != nil {
			t.Errorf("service %s: %v", o.name, err)
		}
		host, p := splitAddr(t, o.name+": --http-listen", addr)
		if host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("service %s: --http-listen %s: inside a container listen on 0.0.0.0 (published ports do not reach %s)", o.name, addr, host)
		}
		if !s.exposed(p) {
			t.Errorf("Dockerfile: EXPOSE lacks %s (--http-listen of %s)", p, o.name)
		}
		if !slices.ContainsFunc(o.Ports, func(pp port) bool { return pp.Target == p && pp.Protocol == "tcp" }) {
			t.Errorf("service %s: --http-listen %s is not a published container port (ports: %+v)", o.name, addr, o.Ports)
		}
	}
}

// Every published port is on the host's loopback (the demo passwords are
// no secret), on a fixed host port no other service publishes; the ports
// the header comment connects to (-PNNNN, 127.0.0.1:NNNN) are among them.
func checkPublished(t *testing.T, s *stack) {
	hostPorts := map[string]string{} // port/protocol -> service
	for _, name := range slices.Sorted(maps.Keys(s.compose.Services)) {
		for _, pp := range s.compose.Services[name].Ports {
			if ip := net.ParseIP(pp.HostIP); ip == nil || !ip.IsLoopback() {
				t.Errorf("service %s: container port %s published on %q: publish on 127.0.0.1 only", name, pp.Target, pp.HostIP)
			}
			if _, err := strconv.Atoi(pp.Published); err != nil {
				t.Errorf("service %s: container port %s published as %q: want one fixed host port", name, pp.Target, pp.Published)
			}
			key := pp.Published + "/" + pp.Protocol
			if other, dup := hostPorts[key]; dup {
				t.Errorf("services %s and %s both publish host port %s", other, name, key)
			}
			hostPorts[key] = name
		}
	}
	for _, m := range regexp.MustCompile(`(?:-P|127\.0\.0\.1:)(\d+)`).FindAllStringSubmatch(headerComment(t, s.path), -1) {
		if _, ok := hostPorts[m[1]+"/tcp"]; !ok {
			t.Errorf("%s: the header comment connects to %s, which no service publishes", s.path, m[0])
		}
	}
}

// The accounts gateway.yaml and the replica use are the ones the primary's
// init makes, with the right privileges; the init starts the binary log
// afresh and binlogs them so they replicate.
func TestComposeAccounts(t *testing.T) { forEachStack(t, checkAccounts) }

func checkAccounts(t *testing.T, s *stack) {
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
	for _, cl := range s.cfg.Clusters {
		for _, ai := range cl.AutoIncrement {
			if _, ok := in.Tables[ai.Table]; !ok {
				t.Errorf("auto_increment table %s: not created by the primary init", ai.Table)
			}
			if c, ok := in.Tables[ai.Sequence]; !ok || !strings.HasPrefix(c, "vitess_sequence") {
				t.Errorf("auto_increment sequence %s: not created by the primary init with COMMENT 'vitess_sequence' (comment %q)", ai.Sequence, c)
			}
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
func TestComposeServerFlags(t *testing.T) { forEachStack(t, checkServerFlags) }

func checkServerFlags(t *testing.T, s *stack) {
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
	// etcd keeps the topology and the fleet's keys across restarts.
	for name, svc := range s.etcd {
		dir, _ := flagValue(svc.Command, "--data-dir")
		m := findMount(svc, dir)
		if dir == "" || m == nil || m.Type != "volume" || m.Source == "" {
			t.Errorf("etcd service %s: --data-dir %q is not a named volume", name, dir)
		} else if _, ok := s.compose.Volumes[m.Source]; !ok {
			t.Errorf("etcd service %s: volume %s is not declared under volumes:", name, m.Source)
		}
	}
}

// Start order: the replica after a healthy primary, owners and gateways
// after healthy databases, the gateways after the owners; with
// topology.etcd, topo put after a healthy etcd, owners and gateways after
// it has stored the topology. Health checks where a condition waits for
// them, one-shots where one waits for completion. Stop: docker's SIGKILL
// comes after drain_timeout.
func TestComposeDependencies(t *testing.T) { forEachStack(t, checkDependencies) }

func checkDependencies(t *testing.T, s *stack) {
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
			if cond == "service_completed_successfully" && target.Restart != "" && target.Restart != "no" {
				t.Errorf("service %s: waits for %s to complete, which has restart: %s (a one-shot runs once)", name, dep, target.Restart)
			}
		}
	}
	// want checks that service from waits for each of to reach cond.
	want := func(from gatewayService, cond string, to ...string) {
		for _, dep := range to {
			if from.DependsOn[dep] != cond {
				t.Errorf("service %s: depends_on %s must be condition: %s", from.name, dep, cond)
			}
		}
	}
	etcd := slices.Sorted(maps.Keys(s.etcd))
	var topoPuts []string
	for _, p := range s.topoPuts {
		topoPuts = append(topoPuts, p.name)
		want(p, "service_healthy", etcd...)
	}
	for _, g := range slices.Concat(s.gateways, s.owners) {
		want(g, "service_healthy", etcd...)
		want(g, "service_completed_successfully", topoPuts...)
	}
	for name, svc := range s.mariadb {
		h := svc.Healthcheck
		if h == nil || !slices.Contains(h.Test, "healthcheck.sh") || !slices.Contains(h.Test, "--connect") || !slices.Contains(h.Test, "--innodb_initialized") {
			t.Errorf("service %s: healthcheck should be healthcheck.sh --connect --innodb_initialized (healthy only after the init): %+v", name, h)
		}
		if name != s.primaryName && svc.DependsOn[s.primaryName] != "service_healthy" {
			t.Errorf("replica %s: depends_on %s must be condition: service_healthy (its init replicates the primary's init)", name, s.primaryName)
		}
		for _, g := range slices.Concat(s.gateways, s.owners) {
			want(g, "service_healthy", name)
		}
	}
	for _, g := range s.gateways {
		for _, o := range s.owners {
			if _, ok := g.DependsOn[o.name]; !ok {
				t.Errorf("service %s: should depend on %s", g.name, o.name)
			}
		}
	}
	for _, g := range slices.Concat(s.gateways, s.owners) {
		grace := 10 * time.Second
		if g.StopGracePeriod != "" {
			var err error
			if grace, err = time.ParseDuration(g.StopGracePeriod); err != nil {
				t.Errorf("service %s: stop_grace_period: %v", g.name, err)
			}
		}
		if grace <= s.cfg.DrainTimeout {
			t.Errorf("service %s: stop_grace_period %v is not above drain_timeout %v: docker kills it while it drains", g.name, grace, s.cfg.DrainTimeout)
		}
	}
	// One image for all, built from the repository root.
	all := s.directgate()
	for _, g := range all {
		if g.Image == "" || g.Image != all[0].Image {
			t.Errorf("services %s and %s: want the same image name, got %q and %q", all[0].name, g.name, all[0].Image, g.Image)
		}
		if _, err := os.Stat(filepath.Join(g.Build.Context, "go.mod")); err != nil {
			t.Errorf("service %s: build context %s is not the repository root: %v", g.name, g.Build.Context, err)
		}
	}
}

// The image: a static binary on an empty base, non-root, serve by default;
// the Go version of the build image matches go.mod; the build context keeps
// every package the binary needs.
func TestDockerfile(t *testing.T) {
	df := parseDockerfile(t, dockerfilePath)
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
	// -pgo=off: the profile (cmd/gateway/default.pgo) changes no property
	// checked here, and a build with it recompiles the standard library
	// for this test alone (minutes on a cold cache).
	args := append([]string{"build", "-pgo=off"}, b.Flags...)
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
