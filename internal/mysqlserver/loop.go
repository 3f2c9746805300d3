package mysqlserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/directgate/directgate/wire"
)

// Loop reads a connection's commands and hands them to Dispatch one at a
// time. Fill it in once per connection and call Run after the handshake.
type Loop struct {
	// Conn reads and writes the connection's packets.
	Conn *wire.Conn
	// Wait is the loop's wait for a command: a shutdown interrupts only
	// such a wait (see InterruptIfIdle), and the connection's Sweep
	// expires it at its idle limit (Wait.Expire).
	Wait *Wait
	// KeepBuffer is the largest read buffer kept between commands.
	KeepBuffer int
	// Stop reports, before each wait, that the loop should end (the server
	// is closing and the connection has nothing open).
	Stop func() bool
	// Idle, when set, runs before each wait for a command. It returns how
	// long the client may stay silent (0: no limit), which the
	// connection's Sweep enforces with Wait.Expire; an error ends the
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
		var deadline time.Time
		if l.Idle != nil {
			idle, err := l.Idle()
			if err != nil {
				return err
			}
			if idle > 0 {
				deadline = time.Now().Add(idle)
			}
		}
		// Before the Stop check, so a shutdown's interrupt wins.
		l.Wait.begin(deadline)
		if l.Stop() {
			l.Wait.end()
			return nil
		}
		p, err := l.Conn.ReadPacket()
		if !l.Wait.end() {
			// Expired or interrupted: the socket's reads fail from now
			// on, also when the command arrived just before.
			if err == nil {
				err = os.ErrDeadlineExceeded
			}
			return err
		}
		switch {
		case errors.Is(err, wire.ErrPacketTooLarge):
			_ = l.WriteErr(PacketTooLarge())
			return fmt.Errorf("%s: %w", PacketTooLargeAdvice(l.Conn.MaxPacket), err)
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

// InterruptIdle makes the reads of socket fail at once by setting its read
// deadline to now: a wait for the next command, or a read that is part of
// a command (a STREAM's), fails with os.ErrDeadlineExceeded and the
// connection ends. Wait.Interrupt uses it for a loop that is waiting.
func InterruptIdle(socket net.Conn) { _ = socket.SetReadDeadline(time.Now()) }
