package gateway

import (
	"strings"
	"testing"

	"github.com/directgate/directgate/config"
)

// twoClusterSession is benchSession with a second cluster, billing, that
// lists the database billing (main lists none: it holds the rest).
func twoClusterSession(t *testing.T) *Session {
	t.Helper()
	ss := benchSession(t, 0)
	srv := ss.srv
	// Discovery reads the clusters, which a server never changes once
	// built: stopped (its last snapshot stays) before the test adds one.
	srv.health.Close()
	billing := &cluster{name: "billing", log: srv.log}
	bconf := config.Cluster{Name: "billing", Databases: []string{"billing"}}
	billing.conf.Store(&bconf)
	billing.newProtections(nil)
	srv.clusters["billing"], srv.clusterNames = billing, []string{"main", "billing"}
	cfg := *srv.cfg
	cfg.Clusters = []config.Cluster{*srv.clusters["main"].conf.Load(), bconf}
	srv.dbs = newDBMap(&cfg, srv.clusters)
	if srv.dbs == nil {
		t.Fatal("no database map")
	}
	ss.home = ss.cluster
	return ss
}

// TestStatementCluster: a statement's cluster is its tables' databases',
// else the current database's; two clusters in one statement is 1235
// naming both.
func TestStatementCluster(t *testing.T) {
	ss := twoClusterSession(t)
	m := ss.srv.dbs
	for _, tc := range []struct {
		db, sql, want string
	}{
		{"", "SELECT 1", "main"},
		{"demo", "SELECT c FROM t WHERE id = 1", "main"},
		{"billing", "SELECT c FROM t WHERE id = 1", "billing"},
		{"demo", "UPDATE billing.acct SET bal = bal + 1 WHERE id = 1", "billing"},
		{"billing", "SELECT * FROM demo.t", "main"},
		{"billing", "SELECT * FROM information_schema.TABLES", "billing"},
		{"billing", "SELECT a.x FROM t AS a", "billing"},
		{"demo", "INSERT INTO billing.acct VALUES (1, 2) RETURNING id", "billing"}, // unparsed: read from the text
		{"demo", "SELECT * FROM t JOIN billing.acct USING (id)", "error"},
		{"demo", "INSERT INTO demo.t SELECT * FROM billing.acct", "error"},
	} {
		c, e := ss.statementCluster(m, tc.sql, tc.db)
		got := "error"
		if e == nil {
			got = c.name
		} else if e.Code != 1235 || !strings.Contains(e.Message, "cluster main") || !strings.Contains(e.Message, "cluster billing") {
			t.Errorf("%q: %v", tc.sql, e)
		}
		if got != tc.want {
			t.Errorf("db %q, %q: cluster %s, want %s", tc.db, tc.sql, got, tc.want)
		}
	}
}

// With several clusters, routing a statement without qualified names on
// the session's cluster allocates nothing.
func TestRouteClustersAllocatesNothing(t *testing.T) {
	ss := twoClusterSession(t)
	for _, q := range benchQueries {
		route := ss.srv.classifier.Classify(q)
		if n := testing.AllocsPerRun(100, func() {
			if handled, err := ss.routeClusters(q, route); handled || err != nil {
				t.Fatal(handled, err)
			}
		}); n != 0 {
			t.Errorf("%q: %v allocations per statement, want 0", q, n)
		}
	}
}
