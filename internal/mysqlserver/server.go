package mysqlserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/internal/ioloop"
	"github.com/directgate/directgate/internal/safego"
)

// Conn is one client connection, made by a Handler for each accepted
// socket.
type Conn interface {
	// Serve runs the connection to its end: the handshake, then commands
	// (see Loop), until the client leaves, the connection fails or the
	// server closes. The Server closes the socket after Serve returns.
	Serve()
	// InterruptIfIdle wakes the connection if it waits for its next
	// command, so it sees that the server is closing. A connection busy
	// with a command sees it when the command ends. It is called from
	// another goroutine.
	InterruptIfIdle()
	// ForceClose cuts the connection and whatever it has in flight. It is
	// called from another goroutine.
	ForceClose()
}

// TaskConn is a Conn that can run on an io_uring loop (see ioloop):
// ServeTask is Serve run as the loop task t, and t makes the reads and
// writes of the connection (and of any other connection the Conn hands
// t). A TaskConn's InterruptIfIdle and ForceClose must reach its task
// through its sockets' deadlines and closes (see wire.Conn.SetTask).
type TaskConn interface {
	Conn
	ServeTask(t *ioloop.Task)
}

// Handler makes the Conn of each accepted socket. NewConn runs on the
// accept loop's goroutine: it must not block or touch the network (Serve
// does that).
type Handler interface {
	NewConn(nc net.Conn, id uint32) Conn
}

// Server accepts MySQL client connections and hands each to its Handler.
// Build it with New; Listen, Serve, and stop it with Shutdown. All methods
// are safe for concurrent use.
type Server struct {
	handler Handler
	log     hclog.Logger
	ln      net.Listener
	group   *safego.Group
	ids     IDs
	closing atomic.Bool
	done    chan struct{}

	mu    sync.Mutex
	conns map[uint32]Conn

	// sweeping is the sweep goroutine (Serve starts it, Shutdown ends
	// it); sweepList is its reused list of connections.
	sweeping  sync.WaitGroup
	sweepList []Conn

	// loops run the TaskConns, taken in turn (next); none: every
	// connection has a goroutine.
	loops []*ioloop.Loop
	next  int
}

// New returns a server that hands its connections to h. It opens nothing.
func New(h Handler, log hclog.Logger) *Server {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Server{handler: h, log: log, group: safego.New(log), done: make(chan struct{}), conns: map[uint32]Conn{}}
}

// RunOnLoops makes the server run its TaskConns as tasks of loops, taken
// in turn, instead of goroutines. Call it before Serve. The caller closes
// the loops after Shutdown.
func (s *Server) RunOnLoops(loops []*ioloop.Loop) { s.loops = loops }

// Listen opens the listener on addr. It is apart from Serve so callers
// learn the address (port 0 in tests) before serving.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	s.ln = ln
	return nil
}

// Addr is the listener's address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve accepts connections until Shutdown, and then returns nil; after
// Shutdown has begun it returns nil at once. Listen must have succeeded.
// Each connection runs Serve on its own goroutine, or, with RunOnLoops, a
// TaskConn runs ServeTask as a task of a loop.
func (s *Server) Serve() error {
	if s.ln == nil {
		return errors.New("mysqlserver: Serve before Listen")
	}
	// Under mu, so a Shutdown that has begun either sees the sweep
	// started (and waits for it) or keeps it from starting.
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return nil
	}
	s.sweeping.Go(s.sweep)
	s.mu.Unlock()
	return acceptLoop(s.ln, s.log, s.closing.Load, s.start)
}

// sweep calls the Sweep of every connection that has one, every
// SweepEvery, until Shutdown has waited for all connections.
func (s *Server) sweep() {
	t := time.NewTicker(SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			s.mu.Lock()
			list := s.sweepList[:0]
			for _, c := range s.conns {
				if _, ok := c.(Sweeper); ok {
					list = append(list, c)
				}
			}
			s.mu.Unlock()
			for _, c := range list {
				c.(Sweeper).Sweep(now)
			}
			clear(list) // keep no ended connection alive
			s.sweepList = list
		}
	}
}

// start registers an accepted socket's connection and runs it. A socket
// accepted while Shutdown begins is closed unserved.
func (s *Server) start(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	id := s.ids.Next(s.inUse)
	c := s.handler.NewConn(nc, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		_ = nc.Close()
		return
	}
	s.conns[id] = c
	end := func() {
		s.mu.Lock()
		delete(s.conns, id)
		s.mu.Unlock()
		_ = nc.Close()
	}
	if tc, ok := c.(TaskConn); ok && len(s.loops) > 0 {
		l := s.loops[s.next%len(s.loops)]
		s.next++
		serve := safego.Wrap(s.group, "connection", func(t *ioloop.Task) {
			defer end()
			tc.ServeTask(t)
		})
		if l.Go(serve) == nil {
			return
		}
		s.group.Done() // the loop is closing: a goroutine serves
	}
	s.group.Go("connection", func() {
		defer end()
		c.Serve()
	})
}

// Add registers c under id as a live connection that its caller serves
// (Lookup, Each, Len and Shutdown see it); remove takes it out again.
func (s *Server) Add(id uint32, c Conn) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[id] = c
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.conns[id] == c {
			delete(s.conns, id)
		}
	}
}

// inUse reports whether a live connection has id.
func (s *Server) inUse(id uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.conns[id]
	return ok
}

// Closing reports whether Shutdown has begun: connections stop taking
// commands once their current one (or transaction) ends.
func (s *Server) Closing() bool { return s.closing.Load() }

// Lookup returns the live connection with id, or nil.
func (s *Server) Lookup(id uint32) Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id]
}

// Len is the number of live connections, the caller's own included.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Each calls fn for every live connection, outside the registry's lock.
func (s *Server) Each(fn func(Conn)) {
	s.mu.Lock()
	list := make([]Conn, 0, len(s.conns))
	for _, c := range s.conns {
		list = append(list, c)
	}
	s.mu.Unlock()
	for _, c := range list {
		fn(c)
	}
}

// Shutdown stops accepting, interrupts idle connections, and waits for
// the others to finish their command (or transaction, as their Serve
// decides) until ctx ends; then it force-closes the rest and waits for
// them to return. cut is how many it had to force-close. Later calls wait
// for the first and return 0 and nil.
func (s *Server) Shutdown(ctx context.Context) (cut int, err error) {
	s.mu.Lock()
	first := s.closing.CompareAndSwap(false, true)
	s.mu.Unlock()
	if !first {
		<-s.done
		return 0, nil
	}
	defer func() {
		close(s.done)
		s.sweeping.Wait()
	}()
	if s.ln != nil {
		if e := s.ln.Close(); e != nil && !errors.Is(e, net.ErrClosed) {
			err = e
		}
	}
	s.Each(func(c Conn) { c.InterruptIfIdle() })
	waited := make(chan struct{})
	go func() { s.group.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		s.Each(func(c Conn) { cut++; c.ForceClose() })
		<-waited
	}
	return cut, err
}
