package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/internal/safego"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
)

// Server accepts MySQL client connections and serves them through the
// clusters' pools. Build it with New, run Serve, stop it with Shutdown.
type Server struct {
	cfg        *config.Config
	log        hclog.Logger
	classifier *querypath.Classifier
	users      map[string]config.User
	clusters   map[string]*cluster

	ln      net.Listener
	group   *safego.Group
	connIDs atomic.Uint32
	// stateIDs numbers session states so a backend connection knows
	// cheaply whether it already carries a session's state.
	stateIDs atomic.Uint64
	closing  atomic.Bool
	pinStats pinStats

	mu       sync.Mutex
	sessions map[uint32]*Session
	done     chan struct{}
}

// New builds a server for cfg. It opens no sockets; pools start warming up.
func New(cfg *config.Config, log hclog.Logger) (*Server, error) {
	cl, err := querypath.New()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:        cfg,
		log:        log,
		classifier: cl,
		users:      map[string]config.User{},
		clusters:   map[string]*cluster{},
		sessions:   map[uint32]*Session{},
		group:      safego.New(log),
		done:       make(chan struct{}),
	}
	for _, u := range cfg.Users {
		s.users[u.User] = u
	}
	for _, c := range cfg.Clusters {
		cl := newCluster(c, log.Named("cluster").With("cluster", c.Name))
		if _, err := cl.pool(poolKey{addr: cl.primaryAddr()}); err != nil {
			s.closeClusters()
			return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		s.clusters[c.Name] = cl
	}
	return s, nil
}

// Listen opens the client listener on cfg.Listen. It is separate from
// Serve so callers learn the address (port 0 in tests) before serving.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	return nil
}

// Addr is the listener's address, once Listen has returned.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts clients until Shutdown. It returns nil after a shutdown.
func (s *Server) Serve() error {
	if s.ln == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	s.learnGreeting()
	s.log.Info("accepting MySQL clients", "addr", s.ln.Addr().String(), "server_version", s.serverVersion())
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed, retrying", "error", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		id := s.nextConnID()
		s.group.Go("session", func() { s.serveConn(nc, id) })
	}
}

// nextConnID returns a connection id unique among this gateway's live
// sessions (ids wrap after 2^32 and skip 0 and ids in use).
func (s *Server) nextConnID() uint32 {
	for {
		id := s.connIDs.Add(1)
		if id == 0 {
			continue
		}
		s.mu.Lock()
		_, used := s.sessions[id]
		s.mu.Unlock()
		if !used {
			return id
		}
	}
}

// learnGreeting waits briefly for the first backend connection so the
// handshake can announce the backend's version and collation.
func (s *Server) learnGreeting() {
	for _, c := range s.clusters {
		p, err := c.pool(poolKey{addr: c.primaryAddr()})
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), greetingWait)
		l, err := p.Acquire(ctx)
		cancel()
		if err != nil {
			s.log.Warn("backend not reachable at start; serving anyway", "cluster", c.cfg.Name, "error", err)
			continue
		}
		l.Release()
	}
}

// serverVersion is the version string announced in the handshake.
func (s *Server) serverVersion() string {
	if s.cfg.ServerVersion != "" {
		return s.cfg.ServerVersion
	}
	for _, c := range s.cfg.Clusters {
		if g := s.clusters[c.Name].greeting.Load(); g != nil {
			return g.ServerVersion
		}
	}
	return "5.5.5-10.11.0-MariaDB-directgate"
}

// serverCollation is the collation announced in the handshake: the
// backend's own, so clients never pick one the backend lacks.
func (s *Server) serverCollation() byte {
	for _, c := range s.cfg.Clusters {
		if g := s.clusters[c.Name].greeting.Load(); g != nil && g.Collation != 0 {
			return g.Collation
		}
	}
	return wire.DefaultCollation
}

// Shutdown stops accepting, closes idle sessions at once, lets sessions
// with a statement in flight finish it, and after ctx ends closes the rest.
// Pools are closed last. It returns an error when sessions had to be cut.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.closing.CompareAndSwap(false, true) {
		<-s.done
		return nil
	}
	defer close(s.done)
	var errs []error
	if s.ln != nil {
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.forEachSession(func(ss *Session) { ss.interruptIfIdle() })
	waited := make(chan struct{})
	go func() { s.group.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		n := 0
		s.forEachSession(func(ss *Session) { n++; ss.forceClose() })
		errs = append(errs, fmt.Errorf("shutdown: %d sessions still busy after the drain timeout were closed", n))
		<-waited
	}
	s.closeClusters()
	return errors.Join(errs...)
}

func (s *Server) closeClusters() {
	for _, c := range s.clusters {
		c.close()
	}
}

func (s *Server) forEachSession(fn func(*Session)) {
	s.mu.Lock()
	list := make([]*Session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		list = append(list, ss)
	}
	s.mu.Unlock()
	for _, ss := range list {
		fn(ss)
	}
}

func (s *Server) register(ss *Session) {
	s.mu.Lock()
	s.sessions[ss.id] = ss
	s.mu.Unlock()
}

func (s *Server) unregister(ss *Session) {
	s.mu.Lock()
	delete(s.sessions, ss.id)
	s.mu.Unlock()
}
