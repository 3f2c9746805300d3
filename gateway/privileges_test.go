package gateway

import (
	"testing"
	"time"
)

func TestPrivsOf(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  accountPrivs
	}{
		{nil, accountPrivs{}},
		{[]string{"GRANT SELECT, RELOAD ON *.* TO `u`@`%`"}, accountPrivs{}},
		{[]string{"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*D8'", "GRANT PROCESS ON `db`.* TO `u`@`%`"}, accountPrivs{}},
		{[]string{"GRANT PROCESS ON *.* TO `u`@`%`"}, accountPrivs{process: true}},
		{[]string{"GRANT `r` TO `u`@`%`", "GRANT USAGE ON *.* TO `u`@`%`", "GRANT `r2` TO `r`", "GRANT CONNECTION ADMIN ON *.* TO `r`",
			"GRANT PROCESS ON *.* TO `r2`", "SET DEFAULT ROLE `r` FOR `u`@`%`"}, accountPrivs{process: true, killAny: true}},
		{[]string{"GRANT SELECT, SUPER, PROCESS ON *.* TO `u`@`localhost` WITH GRANT OPTION"}, accountPrivs{process: true, killAny: true}},
		{[]string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"}, accountPrivs{process: true, killAny: true}},
		{[]string{"GRANT SELECT (PROCESS) ON `d`.`t` TO `u`@`%`"}, accountPrivs{}},
	} {
		if got := privsOf(c.lines); got != c.want {
			t.Errorf("privsOf(%q) = %+v, want %+v", c.lines, got, c.want)
		}
	}
}

func TestChangesGrants(t *testing.T) {
	for sql, want := range map[string]bool{
		"FLUSH PRIVILEGES":                      true,
		"grant process on *.* to u":             true,
		"REVOKE SUPER ON *.* FROM u":            true,
		"ALTER TABLE t ADD c INT":               false,
		"CREATE TABLE flush (a INT)":            false,
		"  flush no_write_to_binlog privileges": true,
	} {
		if got := changesGrants(sql); got != want {
			t.Errorf("changesGrants(%q) = %v, want %v", sql, got, want)
		}
	}
}

// TestPrivCacheBounded: entries expire after privTTL, the map is emptied
// when full, forget drops everything.
func TestPrivCacheBounded(t *testing.T) {
	var c privCache
	now := time.Now()
	c.put("a", accountPrivs{process: true}, now)
	if p, ok := c.get("a", now.Add(privTTL-time.Second)); !ok || !p.process {
		t.Fatalf("get within the TTL: %+v, %v", p, ok)
	}
	if _, ok := c.get("a", now.Add(privTTL)); ok {
		t.Error("an entry outlived privTTL")
	}
	for i := range maxPrivEntries + 1 {
		c.put(string(rune('a'+i%26))+string(rune(i)), accountPrivs{}, now)
	}
	if len(c.m) > maxPrivEntries {
		t.Errorf("%d entries, bound %d", len(c.m), maxPrivEntries)
	}
	c.forget()
	if _, ok := c.get("a", now); ok {
		t.Error("forget kept an entry")
	}
}
