package config

import (
	"strings"
	"testing"
	"time"
)

func TestMariaDBAccountsDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	m := c.MariaDBAccounts
	if m.Enabled || m.Cluster != "" || m.Refresh != 30*time.Second || m.MaxAccounts != 10000 || m.MaxPools != 1000 || m.PoolIdle != time.Minute {
		t.Errorf("mariadb_accounts defaults: %+v", m)
	}
}

func TestMariaDBAccountsValidate(t *testing.T) {
	const noUsers = `
clusters:
  - name: main
    backend_user: gateway
    backends: ["127.0.0.1:13306"]
`
	for _, c := range []struct{ yaml, err string }{
		{minimal + "mariadb_accounts: {enabled: true}\n", ""},
		{noUsers + "mariadb_accounts: {enabled: true, cluster: main, refresh: 5s, max_accounts: 10, max_pools: 5, pool_idle: 10s}\n", ""},
		{noUsers, "users: at least one user is required"},
		{minimal + "mariadb_accounts: {enabled: true, cluster: other}\n", `mariadb_accounts.cluster: no cluster is named "other"`},
		{minimal + "mariadb_accounts: {cluster: other}\n", ""}, // off: not checked
		{minimal + "mariadb_accounts: {refresh: 10ms}\n", "mariadb_accounts.refresh: 10ms is below 1s"},
		{minimal + "mariadb_accounts: {max_accounts: -1}\n", "mariadb_accounts.max_accounts: must be at least 1"},
		{minimal + "mariadb_accounts: {max_pools: -2}\n", "mariadb_accounts.max_pools: must be at least 1"},
		{minimal + "mariadb_accounts: {pool_idle: -1s}\n", "mariadb_accounts.pool_idle: must not be negative"},
		{minimal + "mariadb_accounts: {enable: true}\n", "enable"},
	} {
		_, err := Parse([]byte(c.yaml))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.yaml, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %v, want %q", c.yaml, err, c.err)
		}
	}
}
