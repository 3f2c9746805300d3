package config

import (
	"strings"
	"testing"
	"time"
)

func TestQueryStatsDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	q := c.QueryStats
	if !q.On() || q.MaxDigests != 5000 || q.MaxDigestLength != 1024 || *q.SlowThreshold != time.Second {
		t.Fatalf("query_stats defaults: %+v", q)
	}
	c, err = Parse([]byte(minimal + "query_stats: {enabled: false, max_digests: 10, slow_threshold: 0s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.QueryStats.On() || c.QueryStats.MaxDigests != 10 || *c.QueryStats.SlowThreshold != 0 {
		t.Fatalf("query_stats: %+v", c.QueryStats)
	}
}

func TestQueryRulesRefused(t *testing.T) {
	_, err := Parse([]byte(minimal + `
query_stats: {max_digests: -1}
query_rules:
  - {name: ok, match: {kind: select}, log: true}
  - {name: bad, match: {pattern: "(("}, deny: no}
`))
	for _, want := range []string{"query_stats.max_digests", "query_rules[1] (bad): match.pattern"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

func TestTopologyQueryRules(t *testing.T) {
	base, err := Parse([]byte(etcdOnly + "query_rules: [{name: file, log: true}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	doc := "clusters: [{name: main, backends: ['127.0.0.1:3306'], backend_user: gw, backend_password: x}]\nusers: [{user: app, password: x}]\n"
	c, err := base.WithTopology([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.QueryRules) != 1 || c.QueryRules[0].Name != "file" {
		t.Fatalf("without the key the file's rules stay: %+v", c.QueryRules)
	}
	c, err = base.WithTopology([]byte(doc + "query_rules: [{name: fleet, deny: no}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.QueryRules) != 1 || c.QueryRules[0].Name != "fleet" {
		t.Fatalf("the document's rules replace the file's: %+v", c.QueryRules)
	}
	if _, err := base.WithTopology([]byte(doc + "query_rules: [{name: bad}]\n")); err == nil || !strings.Contains(err.Error(), "query_rules[0] (bad): no action") {
		t.Fatalf("bad rule in the document: %v", err)
	}
}
