package mysqlserver

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// maxBackoff bounds the pause after repeated temporary accept failures.
const maxBackoff = time.Second

// acceptLoop accepts connections from ln and hands each to handle (which must not
// block: start a goroutine) until Accept fails. It returns nil when
// stopping reports true at that point (the server closed ln on purpose),
// else the error. Temporary failures are logged and retried after a pause
// that doubles from 5ms up to a second.
func acceptLoop(ln net.Listener, log hclog.Logger, stopping func() bool, handle func(net.Conn)) error {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if stopping() {
				return nil
			}
			if temporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), maxBackoff)
				log.Warn("accept failed, retrying", "error", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		handle(nc)
	}
}

// temporary reports whether an accept error is worth retrying.
func temporary(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// IDs hands out connection ids (the MySQL handshake's thread id) that are
// unique among a server's live connections: they wrap after 2^32 and skip
// 0 and the ids inUse reports. The zero value is ready.
type IDs struct{ last atomic.Uint32 }

// Next returns the next id that inUse reports free.
func (ids *IDs) Next(inUse func(uint32) bool) uint32 {
	for {
		id := ids.last.Add(1)
		if id != 0 && !inUse(id) {
			return id
		}
	}
}
