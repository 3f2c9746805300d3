// Package safego runs long-lived goroutines under a group that waits for
// them and turns a panic into a logged error instead of a crash of the
// whole gateway.
package safego

import (
	"runtime/debug"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// Group owns a set of goroutines. The zero value is not usable: build it
// with New.
type Group struct {
	wg  sync.WaitGroup
	log hclog.Logger
}

// New returns a group that logs panics to log.
func New(log hclog.Logger) *Group {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Group{log: log}
}

// Go runs fn in a new goroutine. A panic in fn is recovered and logged with
// its stack under name.
func (g *Group) Go(name string, fn func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				g.log.Error("goroutine panicked", "goroutine", name, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		fn()
	}()
}

// Wait blocks until every goroutine started by Go has returned.
func (g *Group) Wait() { g.wg.Wait() }
