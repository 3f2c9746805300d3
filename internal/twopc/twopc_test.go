package twopc

import (
	"testing"
	"time"
)

func TestIDsAndStatements(t *testing.T) {
	start := time.Unix(1700000000, 123456789)
	g := NewGTRID(start)
	if len(g) > 64 {
		t.Fatalf("gtrid %q longer than XA's 64 bytes", g)
	}
	if got, ok := Started(g); !ok || !got.Equal(start) {
		t.Fatalf("Started(%q) = %v %v", g, got, ok)
	}
	if _, ok := Started("other-123"); ok {
		t.Fatal("a foreign gtrid parsed")
	}
	if x := XID(g, "it's"); x != "'"+g+"','it''s',25703" {
		t.Fatalf("XID %s", x)
	}
	verb, gt, parts, ok := ParseStatement(CommitStatement(g, []string{"main", "o'k"}))
	if !ok || verb != VerbCommit || gt != g || parts != "main,o'k" {
		t.Fatalf("commit: %q %q %q %v", verb, gt, parts, ok)
	}
	verb, gt, _, ok = ParseStatement(ForgetStatement(g))
	if !ok || verb != VerbForget || gt != g {
		t.Fatalf("forget: %q %q %v", verb, gt, ok)
	}
	for _, bad := range []string{"DIRECTGATE TWOPC COMMIT 'x'", "DIRECTGATE TWOPC FORGET 'x' y", "DIRECTGATE TWOPC DROP 'x'", "SELECT 1"} {
		if _, _, _, ok := ParseStatement(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
