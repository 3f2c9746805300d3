package queryrules

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/directgate/directgate/querystats"
	"gopkg.in/yaml.v3"
)

func compileYAML(t *testing.T, doc string) (*Set, error) {
	t.Helper()
	var specs []Spec
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&specs); err != nil {
		t.Fatal(err)
	}
	return Compile(specs)
}

func stmt(sql, user, db string) *Statement {
	var n querystats.Normalizer
	text, fp := n.Normalize(sql)
	return &Statement{Fingerprint: fp, Text: append([]byte(nil), text...), User: user, Database: db, Client: netip.MustParseAddr("10.1.2.3")}
}

func TestMatch(t *testing.T) {
	var n querystats.Normalizer
	_, fp := n.Normalize("SELECT * FROM orders WHERE id = 1")
	set, err := compileYAML(t, `
- name: no-audit-scan
  match: {pattern: "(?i)^select .* from audit", tables: [demo.audit], kind: select, users: [app], databases: [demo]}
  deny: "audit scans run on the reporting replica"
- name: report
  match: {fingerprint: "`+fp.String()+`"}
  route: replica
  continue: true
- name: cap
  match: {tables: [orders], clients: [10.0.0.0/8]}
  timeout: 2s
  max_rows: 1000
  priority: 10
- name: watch
  match: {kind: delete}
  deny: no
  dry_run: true
- name: all-logged
  log: true
`)
	if err != nil {
		t.Fatal(err)
	}
	d := set.Match(stmt("SELECT * FROM audit WHERE at > '2020-01-01'", "app", "demo"))
	if d.Deny == nil || d.Deny.Name != "no-audit-scan" {
		t.Fatalf("audit scan: %+v", d)
	}
	if d := set.Match(stmt("SELECT * FROM audit", "other", "demo")); d.Deny != nil {
		t.Fatalf("other user denied: %+v", d)
	}
	d = set.Match(stmt("select * from orders where id=77", "app", "demo"))
	if d.Route != RouteReplica || d.Timeout != 2*time.Second || d.MaxRows != 1000 || !d.HasPriority || d.Priority != 10 || d.TimeoutRule.Name != "cap" {
		t.Fatalf("orders: %+v", d)
	}
	d = set.Match(stmt("DELETE FROM t WHERE id = 1", "app", "demo"))
	if d.Deny != nil || d.Log == nil || d.Log.Name != "all-logged" || d.DryRun {
		t.Fatalf("delete: %+v", d)
	}
	r := set.Rules()
	if r[0].Hits() != 1 || r[1].Hits() != 1 || r[2].Hits() != 1 || r[3].DryRunHits() != 1 || r[3].Hits() != 0 || r[4].Hits() != 2 {
		t.Fatalf("hits %d %d %d %d/%d %d", r[0].Hits(), r[1].Hits(), r[2].Hits(), r[3].Hits(), r[3].DryRunHits(), r[4].Hits())
	}
	next, _ := compileYAML(t, `[{name: report, route: primary}]`)
	next.Inherit(set)
	if next.Rules()[0].Hits() != 1 {
		t.Fatal("Inherit lost the hits")
	}
	if d := (*Set)(nil).Match(stmt("select 1", "", "")); d != (Decision{}) {
		t.Fatal("nil set decided")
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`[{match: {kind: select}, deny: x}]`, "query_rules[0] (): name: required"},
		{`[{name: a, log: true}, {name: a, log: true}]`, `query_rules[1] (a): name "a" is taken by query_rules[0]`},
		{`[{name: a, match: {pattern: "("}, deny: x}]`, "query_rules[0] (a): match.pattern: error parsing regexp"},
		{`[{name: a, match: {kind: selects}, deny: x}]`, `match.kind: "selects" is not one of`},
		{`[{name: a, match: {fingerprint: zz}, deny: x}]`, "match.fingerprint"},
		{`[{name: a, match: {clients: [nowhere]}, deny: x}]`, "match.clients[0]"},
		{`[{name: a, match: {tables: [a.b.c]}, deny: x}]`, "match.tables[0]"},
		{`[{name: a, route: somewhere}]`, "route:"},
		{`[{name: a, deny: x, route: primary}]`, "deny: a denied statement runs nowhere"},
		{`[{name: a}]`, "no action"},
		{`[{name: a, priority: 101}]`, "priority: 101"},
		{`[{name: a, timeout: -1s}]`, "timeout: must not be negative"},
	}
	for _, c := range cases {
		_, err := compileYAML(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.doc, err, c.want)
		}
	}
}

func TestKindOf(t *testing.T) {
	for text, want := range map[string]string{
		"select ?": "select", "with x as (select ?) select ?": "select", "insert into t values (...)": "insert",
		"alter table t add c int": "ddl", "begin": "transaction", "(select ?) union (select ?)": "select",
		"do sleep(?)": "other", "": "other", "set autocommit = ?": "set",
	} {
		if got := KindOf([]byte(text)); got != want {
			t.Errorf("KindOf(%q) = %s, want %s", text, got, want)
		}
	}
}

func TestTables(t *testing.T) {
	cases := []struct {
		sql, db string
		want    []string
		match   bool
	}{
		{"SELECT * FROM audit a JOIN users u ON a.u = u.id", "demo", []string{"demo.users"}, true},
		{"SELECT * FROM demo.audit", "other", []string{"demo.audit"}, true},
		{"SELECT * FROM audit", "other", []string{"demo.audit"}, false},
		{"SELECT * FROM t1, `t2` WHERE x = 1", "d", []string{"t2"}, true},
		{"INSERT INTO logs (a) VALUES (1)", "d", []string{"logs"}, true},
		{"UPDATE LOW_PRIORITY stock SET n = 1", "d", []string{"d.stock"}, true},
		{"SELECT 1 FROM dual", "d", []string{"dual"}, false},
	}
	for _, c := range cases {
		var tl tableList
		tl.read(stmt(c.sql, "", c.db).Text)
		if got := tl.any(c.want, c.db); got != c.match {
			t.Errorf("%q in %s: tables %v, match %v = %v, want %v", c.sql, c.db, tl.names[:tl.n], c.want, got, c.match)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	var specs []Spec
	_ = yaml.Unmarshal([]byte(`
- {name: a, match: {pattern: "^select .* from audit"}, deny: x}
- {name: b, match: {users: [report]}, route: replica}
- {name: c, match: {tables: [demo.big]}, timeout: 2s}
`), &specs)
	set, err := Compile(specs)
	if err != nil {
		b.Fatal(err)
	}
	st := stmt("SELECT c FROM sbtest1 WHERE id=5", "sbtest", "sbtest")
	b.ReportAllocs()
	for b.Loop() {
		_ = set.Match(st)
	}
}
