package mysqlserver

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// scriptedListener returns its errors in order, then net.ErrClosed.
type scriptedListener struct {
	net.Listener
	errs []error
	n    int
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	if l.n < len(l.errs) {
		l.n++
		if err := l.errs[l.n-1]; err != nil {
			return nil, err
		}
		c1, c2 := net.Pipe()
		c2.Close()
		return c1, nil
	}
	return nil, net.ErrClosed
}

func TestRunRetriesTemporaryErrors(t *testing.T) {
	ln := &scriptedListener{errs: []error{syscall.EMFILE, nil, syscall.EMFILE, nil}}
	var handled atomic.Int32
	var stopping atomic.Bool
	err := acceptLoop(ln, hclog.NewNullLogger(), stopping.Load, func(c net.Conn) { handled.Add(1); c.Close() })
	if !errors.Is(err, net.ErrClosed) || handled.Load() != 2 {
		t.Fatalf("acceptLoop = %v with %d connections handled, want net.ErrClosed after 2", err, handled.Load())
	}
	stopping.Store(true)
	ln = &scriptedListener{}
	if err := acceptLoop(ln, hclog.NewNullLogger(), stopping.Load, func(net.Conn) {}); err != nil {
		t.Fatalf("acceptLoop while stopping = %v, want nil", err)
	}
}

func TestIDsSkipZeroAndInUse(t *testing.T) {
	var ids IDs
	ids.last.Store(^uint32(0) - 1) // about to wrap
	used := map[uint32]bool{1: true}
	got := []uint32{ids.Next(func(id uint32) bool { return used[id] }), ids.Next(func(id uint32) bool { return used[id] })}
	if got[0] != ^uint32(0) || got[1] != 2 {
		t.Fatalf("ids %v, want [%d 2] (0 and the id in use skipped)", got, ^uint32(0))
	}
}
