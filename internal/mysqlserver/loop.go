package mysqlserver

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/wire"
)

// Loop reads a connection's commands and hands them to Dispatch one at a
// time. Fill it in once per connection and call Run after the handshake.
type Loop struct {
	// Socket is the client's socket (for read deadlines); Conn reads and
	// writes its packets.
	Socket net.Conn
	Conn   *wire.Conn
	// Busy is false while the loop waits for a command: a shutdown
	// interrupts only such a wait (see InterruptIfIdle).
	Busy *atomic.Bool
	// KeepBuffer is the largest read buffer kept between commands.
	KeepBuffer int
	// Stop reports, before each wait, that the loop should end (the server
	// is closing and the connection has nothing open).
	Stop func() bool
	// Idle, when set, runs before each wait for a command. It returns how
	// long the client may stay silent (0: no limit); an error ends the
	// loop.
	Idle func() (time.Duration, error)
	// Dispatch answers one command: p is its packet, never empty. An error
	// ends the loop.
	Dispatch func(p []byte) error
	// WriteErr sends an error to the client and flushes (for a command
	// that cannot be read).
	WriteErr func(*wire.SQLError) error
}

// Run answers commands until the client quits (Dispatch returns io.EOF),
// a command cannot be read, Dispatch fails, or Stop reports true before a
// wait. It returns nil when it stopped, else the error that ended it (an
// idle timeout is os.ErrDeadlineExceeded). A packet above Conn.MaxPacket,
// out of sequence or empty gets an error packet first: 1153 or 1835.
func (l *Loop) Run() error {
	for {
		if l.Stop() {
			return nil
		}
		l.Conn.ResetSeq()
		l.Conn.ShrinkBuffer(l.KeepBuffer)
		var idle time.Duration
		if l.Idle != nil {
			var err error
			if idle, err = l.Idle(); err != nil {
				return err
			}
		}
		if idle > 0 {
			// Before Busy goes false, so a shutdown's interrupt wins.
			_ = l.Socket.SetReadDeadline(time.Now().Add(idle))
		}
		l.Busy.Store(false)
		if l.Stop() {
			return nil
		}
		p, err := l.Conn.ReadPacket()
		l.Busy.Store(true)
		if idle > 0 && err == nil {
			_ = l.Socket.SetReadDeadline(time.Time{})
		}
		switch {
		case errors.Is(err, wire.ErrPacketTooLarge):
			_ = l.WriteErr(PacketTooLarge(l.Conn.MaxPacket))
			return err
		case errors.Is(err, wire.ErrSequence):
			_ = l.WriteErr(wire.NewError(ErMalformedPacket, "08S01", "Malformed communication packet: %v", err))
			return err
		case err != nil:
			return err
		case len(p) == 0:
			_ = l.WriteErr(wire.NewError(ErMalformedPacket, "08S01", "Malformed communication packet: empty command"))
			return wire.ErrMalformed
		}
		if err := l.Dispatch(p); err != nil {
			return err
		}
	}
}

// InterruptIdle ends a wait for the next command by setting the socket's
// read deadline to now: the read fails with os.ErrDeadlineExceeded and the
// loop's caller ends the connection. The caller decides whether the loop
// is waiting (Busy false).
func InterruptIdle(socket net.Conn) { _ = socket.SetReadDeadline(time.Now()) }
