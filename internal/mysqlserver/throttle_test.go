package mysqlserver

import (
	"fmt"
	"testing"
	"time"
)

func TestLoginThrottle(t *testing.T) {
	th := NewLoginThrottle()
	now := time.Unix(1000, 0)
	th.Now = func() time.Time { return now }
	for i := 1; i <= 5; i++ {
		if d := th.Failed("a", fmt.Sprintf("u%d", i), 5, time.Second); d != 0 {
			t.Fatalf("failure %d delayed %s", i, d)
		}
	}
	// Past the limit, parallel failures from the address are spaced a
	// second apart: one answer per second between all the connections.
	for i := 1; i <= 3; i++ {
		if d := th.Failed("a", fmt.Sprintf("v%d", i), 5, time.Second); d != time.Duration(i)*time.Second {
			t.Fatalf("failure %d past the limit, at once: delay %s, want %ds", i, d, i)
		}
	}
	if d := th.Failed("b", "w", 5, time.Second); d != 0 {
		t.Fatal("another address and user delayed")
	}
	// A user guessed at from many addresses is throttled too.
	for i := 0; i < 5; i++ {
		th.Failed(fmt.Sprintf("10.0.0.%d", i), "root", 5, time.Second)
	}
	if d := th.Failed("10.0.0.99", "root", 5, time.Second); d != time.Second {
		t.Fatalf("sixth failure for one user from a new address: delay %s", d)
	}
	now = now.Add(failWindow + 5*time.Second)
	if d := th.Failed("a", "x", 5, time.Second); d != 0 {
		t.Fatalf("after the window: delay %s", d)
	}
	// A flood of addresses and names does not grow the map past its bound.
	for i := 0; i < 3*maxFailKeys; i++ {
		th.Failed(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255), fmt.Sprint("n", i), 5, time.Second)
	}
	if n := th.Len(); n > maxFailKeys {
		t.Fatalf("%d keys remembered, bound %d", n, maxFailKeys)
	}
}
