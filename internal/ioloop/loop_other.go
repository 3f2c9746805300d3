//go:build !linux

package ioloop

import (
	"errors"
	"time"
)

// Loop is an event loop; on this system New always fails.
type Loop struct{}

// Config sizes a loop.
type Config struct {
	// Entries is the number of submission slots of the loop's ring.
	Entries uint32
	// HoldProcessor keeps the loop's Go processor while it waits.
	HoldProcessor bool
}

// Stats are a loop's counts since it started.
type Stats struct {
	Enters, Completions, Offloads uint64
	Tasks                         int64
}

// Stats returns l's counts.
func (l *Loop) Stats() Stats { return Stats{} }

// Task is a function running on a loop; there are none on this system.
type Task struct{}

// Errors of a task's I/O.
var (
	ErrTimeout  = errors.New("ioloop: i/o timeout")
	ErrCanceled = errors.New("ioloop: i/o canceled")
	ErrClosed   = errors.New("ioloop: loop closed")
)

var errUnsupported = errors.New("ioloop: io_uring loops run on Linux only")

// New fails: io_uring is Linux's.
func New(Config) (*Loop, error) { return nil, errUnsupported }

// Go fails.
func (*Loop) Go(func(*Task)) error { return errUnsupported }

// Close does nothing.
func (*Loop) Close() {}

// Interrupt does nothing.
func (*Task) Interrupt() {}

// Recv fails.
func (*Task) Recv(int, []byte, time.Time) (int, error) { return 0, errUnsupported }

// Send fails.
func (*Task) Send(int, []byte, time.Time) (int, error) { return 0, errUnsupported }

// TrySend fails.
func (*Task) TrySend(int, []byte) (int, error) { return 0, errUnsupported }

// SendRecv fails.
func (*Task) SendRecv(int, []byte, []byte, time.Time) (int, int, error) {
	return 0, 0, errUnsupported
}

// Park fails.
func (*Task) Park(time.Time) error { return errUnsupported }

// Wake does nothing.
func (*Task) Wake() {}

// WakeAsync does nothing.
func (*Task) WakeAsync() {}

// Offload runs fn.
func (*Task) Offload(fn func()) { fn() }

// Loop returns nil.
func (*Task) Loop() *Loop { return nil }
