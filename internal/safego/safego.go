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
		defer g.recoverPanic(name)
		fn()
	}()
}

// Wrap returns fn made part of g, for running it elsewhere than on a
// goroutine of Go's (a task of an ioloop.Loop): Wait waits for it from
// now on until it has returned, and a panic in it is recovered and logged
// under name. Call the result exactly once, or call g.Done instead when
// it will never run.
func Wrap[T any](g *Group, name string, fn func(T)) func(T) {
	g.wg.Add(1)
	return func(v T) {
		defer g.wg.Done()
		defer g.recoverPanic(name)
		fn(v)
	}
}

// Done releases what Wrap counted for a function that will never run.
func (g *Group) Done() { g.wg.Done() }

// recoverPanic, deferred, logs a panic of the function named name.
func (g *Group) recoverPanic(name string) {
	if r := recover(); r != nil {
		g.log.Error("goroutine panicked", "goroutine", name, "panic", r, "stack", string(debug.Stack()))
	}
}

// Wait blocks until every goroutine started by Go, and every function
// Wrap made, has returned.
func (g *Group) Wait() { g.wg.Wait() }
