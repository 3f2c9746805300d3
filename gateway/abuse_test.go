package gateway

import (
	"testing"
)

func TestAddrGuardConnections(t *testing.T) {
	g := newAddrGuard()
	for i := 0; i < 3; i++ {
		if !g.admit("10.0.0.1", 3) {
			t.Fatalf("connection %d refused", i)
		}
	}
	if g.admit("10.0.0.1", 3) {
		t.Fatal("fourth connection admitted")
	}
	if !g.admit("10.0.0.2", 3) {
		t.Fatal("another address refused")
	}
	g.release("10.0.0.1")
	if !g.admit("10.0.0.1", 3) {
		t.Fatal("refused after a release")
	}
	for i := 0; i < 3; i++ {
		g.release("10.0.0.1")
	}
	g.release("10.0.0.2")
	if len(g.conns) != 0 {
		t.Fatalf("addresses without connections kept: %v", g.conns)
	}
	if !g.admit("x", 0) {
		t.Fatal("limit 0 must mean no limit")
	}
}
