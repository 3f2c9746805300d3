package protect

import (
	"strings"
	"testing"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/querypath"
)

// Statements that may change data move the write count; reads, USE,
// BEGIN, ROLLBACK and SETs of literals do not.
func TestMayWrite(t *testing.T) {
	c, err := querypath.New()
	if err != nil {
		t.Fatal(err)
	}
	for sql, want := range map[string]bool{
		"SELECT * FROM t":                   false,
		"USE db":                            false,
		"BEGIN":                             false,
		"ROLLBACK":                          false,
		"SET time_zone = '+00:00'":          false,
		"SET sql_mode = CONCAT(@@sql_mode)": true,
		"SET @x = f()":                      true,
		"SELECT 1; SELECT 2":                true,
		"UPDATE t SET n = 1":                true,
		"INSERT INTO t VALUES (1)":          true,
		"COMMIT":                            true,
		"CALL p()":                          true,
		"SELECT * FROM t FOR UPDATE":        true,
		"DO f()":                            true,
	} {
		if got := MayWrite(c.Classify(sql)); got != want {
			t.Errorf("MayWrite(%q) = %v, want %v", sql, got, want)
		}
	}
}

// The protection row tells the mode and the counters.
func TestConsolidationRow(t *testing.T) {
	var co Consolidation[string]
	co.waiting.Store(2)
	co.followed.Store(7)
	co.leaders.Store(3)
	co.tooLarge.Store(1)
	conf := &config.Cluster{}
	rows := co.Rows(conf)
	if len(rows) != 1 || rows[0].Mode != "off" || rows[0].Active != 2 || rows[0].Total != 7 || !strings.Contains(rows[0].Detail, "3 leaders with followers") || !strings.Contains(rows[0].Detail, "1 too large") {
		t.Fatalf("rows %+v", rows)
	}
	conf.Consolidation.Enabled = true
	if rows := co.Rows(conf); rows[0].Mode != "on" {
		t.Fatalf("mode %q", rows[0].Mode)
	}
}
