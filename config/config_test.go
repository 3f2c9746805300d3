package config

import (
	"strings"
	"testing"
	"time"
)

const minimal = `
users: [{user: app, password: app}]
clusters:
  - name: main
    backend_user: gateway
    backends: ["127.0.0.1:13306"]
`

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Clusters[0].Pool
	if c.Listen != "127.0.0.1:15306" || c.HTTPListen != "127.0.0.1:15000" || c.Log.Level != "info" || c.Log.Format != "text" {
		t.Errorf("top-level defaults: %+v", c)
	}
	if p.Size != 64 || *p.MinIdle != 4 || p.MaxDials != 4 || *p.IdleTimeout != 5*time.Minute ||
		*p.MaxLifetime != 30*time.Minute || p.AcquireTimeout != 2*time.Second || p.DialTimeout != 5*time.Second {
		t.Errorf("pool defaults: %+v", p)
	}
	if c.Users[0].Cluster != "main" {
		t.Errorf("user cluster default %q", c.Users[0].Cluster)
	}
}

func TestExplicitZeroes(t *testing.T) {
	c, err := Parse([]byte(minimal + "    pool: {min_idle: 0, idle_timeout: 0s, max_lifetime: 0s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Clusters[0].Pool
	if *p.MinIdle != 0 || *p.IdleTimeout != 0 || *p.MaxLifetime != 0 {
		t.Errorf("explicit zeroes lost: %+v", p)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := map[string]string{
		"listen: nonsense\n" + minimal:                 "listen:",
		"log: {level: loud}\n" + minimal:               "log.level",
		"bogus_key: 1\n" + minimal:                     "bogus_key",
		minimal + "    pool: {size: -1}\n":             "clusters[0].pool.size",
		minimal + "    pool: {size: 2, min_idle: 3}\n": "clusters[0].pool.min_idle",
		`users: [{user: app, cluster: nope}]
clusters: [{name: main, backend_user: g, backends: ["h:1"]}]`: "users[0].cluster",
		`users: [{user: app}]
clusters: [{name: main, backends: ["h:1"]}]`: "clusters[0].backend_user",
		`users: [{user: app}]
clusters: [{name: main, backend_user: g, backends: ["nohost"]}]`: "clusters[0].backends[0]",
		`users: [{user: a}, {user: a}]
clusters: [{name: main, backend_user: g, backends: ["h:1"]}]`: "users[1].user",
	}
	for in, key := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("config %q: error %v does not name %s", in, err, key)
		}
	}
}
