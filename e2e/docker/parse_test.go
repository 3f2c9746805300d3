package docker

// Parsers for the files of this directory: the parts of the compose file
// format, of Dockerfiles, of shell words and of SQL that the checks need.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeProject is a compose file, as far as the checks read it.
type composeProject struct {
	Name     string                     `yaml:"name"`
	Services map[string]*composeService `yaml:"services"`
	Volumes  map[string]any             `yaml:"volumes"`
}

type composeService struct {
	Image       string        `yaml:"image"`
	Build       *composeBuild `yaml:"build"`
	Hostname    string        `yaml:"hostname"`
	Entrypoint  words         `yaml:"entrypoint"`
	Command     words         `yaml:"command"`
	Environment env           `yaml:"environment"`
	Volumes     []mount       `yaml:"volumes"`
	Ports       []port        `yaml:"ports"`
	Expose      []string      `yaml:"expose"`
	DependsOn   dependsOn     `yaml:"depends_on"`
	Healthcheck *healthcheck  `yaml:"healthcheck"`
	Restart     string        `yaml:"restart"`
	// StopGracePeriod is how long docker waits after SIGTERM before
	// SIGKILL; empty means 10s.
	StopGracePeriod string `yaml:"stop_grace_period"`
}

// composeBuild is build: CONTEXT or build: {context, dockerfile}.
type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func (b *composeBuild) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		b.Context = n.Value
		return nil
	}
	type plain composeBuild
	return n.Decode((*plain)(b))
}

// words is a command, entrypoint or healthcheck test: a list, or a string
// split like a shell would.
type words []string

func (w *words) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		s, err := shellWords(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		*w = s
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*w = l
	return nil
}

// env is environment: a mapping or a list of NAME=VALUE.
type env map[string]string

func (e *env) UnmarshalYAML(n *yaml.Node) error {
	m := env{}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = n.Content[i+1].Value
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			k, v, _ := strings.Cut(c.Value, "=")
			m[k] = v
		}
	default:
		return fmt.Errorf("line %d: environment is neither a mapping nor a list", n.Line)
	}
	*e = m
	return nil
}

// mount is one entry of a service's volumes, short or long syntax.
type mount struct {
	Type     string // bind, volume (named or anonymous)
	Source   string // host path or volume name; empty for an anonymous volume
	Target   string
	ReadOnly bool
}

func (m *mount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var l struct {
			Type     string `yaml:"type"`
			Source   string `yaml:"source"`
			Target   string `yaml:"target"`
			ReadOnly bool   `yaml:"read_only"`
		}
		if err := n.Decode(&l); err != nil {
			return err
		}
		*m = mount{Type: l.Type, Source: l.Source, Target: l.Target, ReadOnly: l.ReadOnly}
		return nil
	}
	parts := strings.Split(n.Value, ":")
	switch len(parts) {
	case 1:
		*m = mount{Type: "volume", Target: parts[0]}
		return nil
	case 2, 3:
		*m = mount{Source: parts[0], Target: parts[1]}
		if len(parts) == 3 {
			for opt := range strings.SplitSeq(parts[2], ",") {
				m.ReadOnly = m.ReadOnly || opt == "ro"
			}
		}
	default:
		return fmt.Errorf("line %d: volume %q is not SOURCE:TARGET[:MODE]", n.Line, n.Value)
	}
	m.Type = "volume"
	if strings.HasPrefix(m.Source, ".") || strings.HasPrefix(m.Source, "/") || strings.HasPrefix(m.Source, "~") {
		m.Type = "bind"
	}
	return nil
}

// port is one entry of a service's ports, short or long syntax.
type port struct {
	HostIP    string
	Published string // empty: a random host port
	Target    string
	Protocol  string
}

func (p *port) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var l struct {
			Target    string `yaml:"target"`
			Published string `yaml:"published"`
			HostIP    string `yaml:"host_ip"`
			Protocol  string `yaml:"protocol"`
		}
		if err := n.Decode(&l); err != nil {
			return err
		}
		*p = port{HostIP: l.HostIP, Published: l.Published, Target: l.Target, Protocol: l.Protocol}
	} else {
		s, proto, _ := strings.Cut(n.Value, "/")
		p.Protocol = proto
		// [HOST_IP:][PUBLISHED:]TARGET; an IPv6 host address is in brackets.
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			p.Target = s[i+1:]
			s = s[:i]
			if j := strings.LastIndexByte(s, ':'); j >= 0 && !strings.HasSuffix(s, "]") {
				p.HostIP, p.Published = strings.Trim(s[:j], "[]"), s[j+1:]
			} else {
				p.Published = s
			}
		} else {
			p.Target = s
		}
	}
	if p.Protocol == "" {
		p.Protocol = "tcp"
	}
	return nil
}

// dependsOn is depends_on: a list of services (condition service_started)
// or a mapping of service to {condition}.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	m := dependsOn{}
	switch n.Kind {
	case yaml.SequenceNode:
		for _, c := range n.Content {
			m[c.Value] = "service_started"
		}
	case yaml.MappingNode:
		// Decoded, not walked: a merge key (<<: *anchor) brings entries in.
		var l map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&l); err != nil {
			return err
		}
		for name, v := range l {
			if v.Condition == "" {
				v.Condition = "service_started"
			}
			m[name] = v.Condition
		}
	default:
		return fmt.Errorf("line %d: depends_on is neither a list nor a mapping", n.Line)
	}
	*d = m
	return nil
}

type healthcheck struct {
	Test    words `yaml:"test"`
	Disable bool  `yaml:"disable"`
}

func loadCompose(t *testing.T, path string) *composeProject {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p composeProject
	if err := yaml.Unmarshal(data, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(p.Services) == 0 {
		t.Fatalf("%s: no services", path)
	}
	// Relative paths are relative to the compose file's directory; the
	// checks read them from the test's (this) directory.
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
			return p
		}
		return filepath.Join(dir, p)
	}
	for _, svc := range p.Services {
		if svc.Build != nil {
			b := *svc.Build // a copy: services merged from one anchor may share it
			if b.Context == "" {
				b.Context = "."
			}
			b.Context = rel(b.Context)
			svc.Build = &b
		}
		for i := range svc.Volumes {
			if m := &svc.Volumes[i]; m.Type == "bind" {
				m.Source = rel(m.Source)
			}
		}
	}
	return &p
}

// imageName is the name of an image reference, without registry, path,
// tag and digest: mariadb for docker.io/library/mariadb:10.11.
func imageName(image string) string {
	name, _, _ := strings.Cut(image[strings.LastIndexByte(image, '/')+1:], "@")
	name, _, _ = strings.Cut(name, ":")
	return name
}

// imageTag is the tag of an image reference, or "".
func imageTag(image string) string {
	name, _, _ := strings.Cut(image[strings.LastIndexByte(image, '/')+1:], "@")
	_, tag, _ := strings.Cut(name, ":")
	return tag
}

// headerComment is the comment a file opens with: its leading # lines.
func headerComment(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for line := range strings.Lines(string(data)) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// flagValue finds --name VALUE or --name=VALUE in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// serverFlags reads mariadbd flags: --name[=value], names lower case with
// '-' for '_'. A bare flag has the value "ON"; a later one wins.
func serverFlags(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		a, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			v = "ON"
		}
		m[strings.ReplaceAll(strings.ToLower(k), "_", "-")] = v
	}
	return m
}

// isOn reports whether a server flag value means on.
func isOn(v string) bool {
	switch strings.ToUpper(v) {
	case "ON", "1", "TRUE", "YES":
		return true
	}
	return false
}

// dockerfile is a Dockerfile's stages, as far as the checks read them.
type dockerfile struct {
	Stages []*dockerStage
}

type dockerStage struct {
	From, Name   string
	Instructions []dockerInstruction
}

type dockerInstruction struct {
	Cmd  string // upper case: RUN, COPY, ...
	Args string // the rest, continuation lines joined
	Line int
}

// last returns the value of the stage's last instruction cmd, or "".
func (s *dockerStage) last(cmd string) string {
	v := ""
	for _, in := range s.Instructions {
		if in.Cmd == cmd {
			v = in.Args
		}
	}
	return v
}

func parseDockerfile(t *testing.T, path string) *dockerfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var df dockerfile
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		start := i + 1
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue // comment lines inside a continued instruction
			}
			line = strings.TrimSuffix(line, `\`) + " " + next
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := dockerInstruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := &dockerStage{From: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			}
			df.Stages = append(df.Stages, st)
			continue
		}
		if len(df.Stages) == 0 {
			t.Fatalf("%s:%d: %s before FROM", path, start, in.Cmd)
		}
		st := df.Stages[len(df.Stages)-1]
		st.Instructions = append(st.Instructions, in)
	}
	if len(df.Stages) == 0 {
		t.Fatalf("%s: no FROM", path)
	}
	return &df
}

// execForm reads the JSON (exec) form of ENTRYPOINT or CMD.
func execForm(args string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(args), &l); err != nil {
		return nil, fmt.Errorf("%q is not the exec form [\"...\"]: %w", args, err)
	}
	return l, nil
}

// goBuild is the `go build` command of a Dockerfile RUN instruction.
type goBuild struct {
	Env    []string // NAME=VALUE before the command
	Flags  []string // the flags, without -o
	Output string   // the -o argument
	Pkgs   []string // the packages
	Line   int
}

// findGoBuild finds the one RUN instruction running go build and splits it:
// [NAME=VALUE...] go build FLAGS... -o OUT PKGS...
func findGoBuild(t *testing.T, df *dockerfile) goBuild {
	t.Helper()
	var found []dockerInstruction
	for _, st := range df.Stages {
		for _, in := range st.Instructions {
			if in.Cmd == "RUN" && strings.Contains(in.Args, "go build") {
				found = append(found, in)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("Dockerfile: want exactly one RUN with go build (the build flags live there), found %d", len(found))
	}
	in := found[0]
	w, err := shellWords(in.Args)
	if err != nil {
		t.Fatalf("Dockerfile:%d: %v", in.Line, err)
	}
	b := goBuild{Line: in.Line}
	i := 0
	for ; i < len(w) && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(w[i]); i++ {
		b.Env = append(b.Env, w[i])
	}
	if i+1 >= len(w) || w[i] != "go" || w[i+1] != "build" {
		t.Fatalf("Dockerfile:%d: want [NAME=VALUE...] go build ..., one command only: %q", in.Line, in.Args)
	}
	for i += 2; i < len(w); i++ {
		a := w[i]
		switch {
		case a == "&&" || a == "||" || a == ";" || a == "|":
			t.Fatalf("Dockerfile:%d: the go build RUN must be one command (found %q)", in.Line, a)
		case a == "-o" && i+1 < len(w):
			b.Output = w[i+1]
			i++
		case strings.HasPrefix(a, "-o="):
			b.Output = a[3:]
		case strings.HasPrefix(a, "-"):
			b.Flags = append(b.Flags, a)
		default:
			b.Pkgs = append(b.Pkgs, a)
		}
	}
	if b.Output == "" || len(b.Pkgs) == 0 {
		t.Fatalf("Dockerfile:%d: go build needs -o OUT and a package: %q", in.Line, in.Args)
	}
	return b
}

// shellWords splits s like a POSIX shell does for a simple command: blanks
// separate words, '...' is literal, "..." keeps \" \\ \$ \` escapes, and a
// backslash outside quotes escapes the next character. Expansions ($X,
// $(...), globs) are not performed: they are kept as written.
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// sqlStatements splits a SQL script into statements: comments removed,
// split at ';' outside quotes, blanks collapsed to one space.
func sqlStatements(script string) []string {
	var stmts []string
	var cur strings.Builder
	flush := func() {
		s := strings.Join(strings.Fields(cur.String()), " ")
		if s != "" {
			stmts = append(stmts, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for ; j < len(script) && script[j] != c; j++ {
				if script[j] == '\\' && c != '`' {
					j++
				}
			}
			cur.WriteString(script[i:min(j+1, len(script))])
			i = j
		case c == '#' || (c == '-' && strings.HasPrefix(script[i:], "--") &&
			(i+2 == len(script) || strings.IndexByte(" \t\r\n", script[i+2]) >= 0)):
			for i < len(script) && script[i] != '\n' {
				i++
			}
			cur.WriteByte(' ')
		case c == '/' && strings.HasPrefix(script[i:], "/*"):
			end := strings.Index(script[i+2:], "*/")
			if end < 0 {
				i = len(script)
			} else {
				i += end + 3
			}
			cur.WriteByte(' ')
		case c == ';':
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return stmts
}

// sqlAccount is an account made by CREATE USER, with its global privileges.
type sqlAccount struct {
	User, Host, Password string
	Privileges           []string // GRANTed ON *.*, upper case
}

const sqlString = `'((?:[^'\\]|\\.)*)'`

var (
	createUserRE = regexp.MustCompile(`(?i)^CREATE USER (?:IF NOT EXISTS )?` + sqlString + `@` + sqlString + ` IDENTIFIED BY ` + sqlString + `$`)
	grantRE      = regexp.MustCompile(`(?i)^GRANT (.+?) ON \*\.\* TO ` + sqlString + `@` + sqlString + `(?: WITH .*)?$`)
	createTable  = regexp.MustCompile("(?i)^CREATE TABLE (?:IF NOT EXISTS )?`?(\\w+)`?\\.`?(\\w+)`? \\(.*\\)(?: (.*))?$")
	tableComment = regexp.MustCompile(`(?i)\bCOMMENT\s*=?\s*` + sqlString + `\s*$`)
)

func unquoteSQL(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\'`, `'`, `\"`, `"`, `\0`, "\x00").Replace(s)
}

// initScript is what a primary's init SQL makes.
type initScript struct {
	Statements []string
	Accounts   map[string]*sqlAccount // by user@host
	Tables     map[string]string      // db.table -> table comment
}

func parseInitSQL(t *testing.T, path string) *initScript {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &initScript{Statements: sqlStatements(string(data)), Accounts: map[string]*sqlAccount{}, Tables: map[string]string{}}
	for _, st := range s.Statements {
		if m := createUserRE.FindStringSubmatch(st); m != nil {
			a := &sqlAccount{User: unquoteSQL(m[1]), Host: unquoteSQL(m[2]), Password: unquoteSQL(m[3])}
			s.Accounts[a.User+"@"+a.Host] = a
			continue
		}
		if m := grantRE.FindStringSubmatch(st); m != nil {
			a := s.Accounts[unquoteSQL(m[2])+"@"+unquoteSQL(m[3])]
			if a == nil {
				t.Errorf("%s: GRANT before CREATE USER: %s", filepath.Base(path), st)
				continue
			}
			for p := range strings.SplitSeq(m[1], ",") {
				a.Privileges = append(a.Privileges, strings.Join(strings.Fields(strings.ToUpper(p)), " "))
			}
			continue
		}
		if m := createTable.FindStringSubmatch(st); m != nil {
			comment := ""
			if c := tableComment.FindStringSubmatch(m[3]); c != nil {
				comment = unquoteSQL(c[1])
			}
			s.Tables[m[1]+"."+m[2]] = comment
		}
	}
	return s
}

// account returns the account user@host, or nil.
func (s *initScript) account(user, host string) *sqlAccount { return s.Accounts[user+"@"+host] }

func (a *sqlAccount) has(priv ...string) bool {
	for _, p := range a.Privileges {
		for _, want := range priv {
			if p == want {
				return true
			}
		}
	}
	return false
}

func TestShellWords(t *testing.T) {
	for in, want := range map[string][]string{
		`CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/gateway ./cmd/gateway`: {
			"CGO_ENABLED=0", "go", "build", "-trimpath", "-ldflags=-s -w", "-o", "/out/gateway", "./cmd/gateway"},
		`a "b \"c\" d" e\ f '' x`: {"a", `b "c" d`, "e f", "", "x"},
	} {
		got, err := shellWords(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("shellWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := shellWords(`a 'b`); err == nil {
		t.Error("unterminated quote: no error")
	}
}

func TestSQLStatements(t *testing.T) {
	got := sqlStatements("-- c1\nRESET MASTER;\nCREATE TABLE a.b (x INT) COMMENT 'p;q -- r';# c2\n/* c3; */ SELECT 1 ;\n--x\n")
	want := []string{"RESET MASTER", "CREATE TABLE a.b (x INT) COMMENT 'p;q -- r'", "SELECT 1", "--x"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sqlStatements = %q, want %q", got, want)
	}
}

func TestPortSyntax(t *testing.T) {
	for in, want := range map[string]port{
		`"127.0.0.1:15306:15306"`: {HostIP: "127.0.0.1", Published: "15306", Target: "15306", Protocol: "tcp"},
		`"15000:15000/udp"`:       {Published: "15000", Target: "15000", Protocol: "udp"},
		`"3306"`:                  {Target: "3306", Protocol: "tcp"},
		`"[::1]:80:8080"`:         {HostIP: "::1", Published: "80", Target: "8080", Protocol: "tcp"},
		`{target: 1, published: "2", host_ip: 0.0.0.0}`: {HostIP: "0.0.0.0", Published: "2", Target: "1", Protocol: "tcp"},
	} {
		var p port
		if err := yaml.Unmarshal([]byte(in), &p); err != nil || p != want {
			t.Errorf("port %s = %+v, %v; want %+v", in, p, err, want)
		}
	}
	var m mount
	if err := yaml.Unmarshal([]byte(`./a.yaml:/etc/a.yaml:ro`), &m); err != nil || m != (mount{Type: "bind", Source: "./a.yaml", Target: "/etc/a.yaml", ReadOnly: true}) {
		t.Errorf("mount = %+v, %v", m, err)
	}
}

// Merge keys (<<: *anchor), as the fleet compose file uses them, and paths
// relative to the compose file's directory.
func TestComposeSyntax(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "compose.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	err := os.WriteFile(path, []byte(`
x-base: &base
  build: {context: .., dockerfile: D}
  volumes: ["./a.yaml:/etc/a.yaml:ro", "data:/data", "/abs:/abs"]
  restart: on-failure
x-deps: &deps
  db: {condition: service_healthy}
services:
  a:
    <<: *base
    restart: "no"
    depends_on: *deps
  b:
    <<: *base
    depends_on:
      <<: *deps
      a: {condition: service_completed_successfully}
      c:
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, path)
	dir := filepath.Dir(path)
	a, b := p.Services["a"], p.Services["b"]
	if a.Restart != "no" || b.Restart != "on-failure" {
		t.Errorf("restart: a %q, b %q; want no, on-failure", a.Restart, b.Restart)
	}
	if want := (dependsOn{"db": "service_healthy"}); !reflect.DeepEqual(a.DependsOn, want) {
		t.Errorf("a depends_on %v, want %v", a.DependsOn, want)
	}
	if want := (dependsOn{"db": "service_healthy", "a": "service_completed_successfully", "c": "service_started"}); !reflect.DeepEqual(b.DependsOn, want) {
		t.Errorf("b depends_on %v, want %v", b.DependsOn, want)
	}
	for name, svc := range p.Services {
		if svc.Build.Context != filepath.Dir(dir) {
			t.Errorf("%s: build context %q, want %q", name, svc.Build.Context, filepath.Dir(dir))
		}
		want := []mount{
			{Type: "bind", Source: filepath.Join(dir, "a.yaml"), Target: "/etc/a.yaml", ReadOnly: true},
			{Type: "volume", Source: "data", Target: "/data"},
			{Type: "bind", Source: "/abs", Target: "/abs"},
		}
		if !reflect.DeepEqual(svc.Volumes, want) {
			t.Errorf("%s: volumes %+v, want %+v", name, svc.Volumes, want)
		}
	}
	if a.Build == b.Build {
		t.Error("services merged from one anchor share their build")
	}
}
