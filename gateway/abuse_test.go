package gateway

import (
	"fmt"
	"testing"
	"time"
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

func TestAddrGuardFailures(t *testing.T) {
	g := newAddrGuard()
	now := time.Unix(1000, 0)
	g.now = func() time.Time { return now }
	for i := 1; i <= 5; i++ {
		if d := g.failed("a", 5, time.Second); d != 0 {
			t.Fatalf("failure %d delayed %s", i, d)
		}
	}
	if d := g.failed("a", 5, time.Second); d != time.Second {
		t.Fatalf("sixth failure: delay %s", d)
	}
	if d := g.failed("b", 5, time.Second); d != 0 {
		t.Fatal("another address delayed")
	}
	now = now.Add(failWindow + time.Second)
	if d := g.failed("a", 5, time.Second); d != 0 {
		t.Fatalf("after the window: delay %s", d)
	}
	// A flood of addresses does not grow the map past its bound.
	for i := 0; i < 3*maxFailAddrs; i++ {
		g.failed(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255), 5, time.Second)
	}
	if len(g.fails) > maxFailAddrs {
		t.Fatalf("%d addresses remembered", len(g.fails))
	}
}
