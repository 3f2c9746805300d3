package gateway

import (
	"testing"
	"time"
)

func TestPrivsOf(t *testing.T) {
	for _, c := range []struct {
		types []string
		want  accountPrivs
	}{
		{nil, accountPrivs{}},
		{[]string{"SELECT", "RELOAD"}, accountPrivs{}},
		{[]string{"PROCESS"}, accountPrivs{process: true}},
		{[]string{"CONNECTION ADMIN"}, accountPrivs{killAny: true}},
		{[]string{"SELECT", "SUPER", "PROCESS"}, accountPrivs{process: true, killAny: true}},
	} {
		if got := privsOf(c.types); got != c.want {
			t.Errorf("privsOf(%q) = %+v, want %+v", c.types, got, c.want)
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
