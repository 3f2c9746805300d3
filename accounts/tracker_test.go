package accounts

import (
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	var tr Tracker[string]
	now := time.Now()
	if !tr.Enter("a", 2) || !tr.Enter("b", 2) || !tr.Enter("a", 2) {
		t.Fatal("enter under the bound refused")
	}
	if tr.Enter("c", 2) {
		t.Fatal("a third key with both in use admitted")
	}
	tr.Leave("b", now)
	if !tr.Enter("c", 2) {
		t.Fatal("the idle key did not make room")
	}
	tr.Leave("c", now.Add(-time.Hour))
	keep := tr.Sweep(time.Minute, now)
	if !keep("a") || keep("b") || keep("c") {
		t.Errorf("sweep kept a=%v b=%v c=%v", keep("a"), keep("b"), keep("c"))
	}
}
