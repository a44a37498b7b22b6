// Package frontend owns client connections: the listener, the handshake
// and one goroutine per client session that reads commands, asks the
// router where each goes, borrows a server connection from the backend
// pools, replays the session's state on it, and streams the reply back.
package frontend

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/topology"
)

// Options configure a cluster's listener. Swapped atomically on reload.
type Options struct {
	Cluster         string
	ServerVersion   string
	AuthPlugin      string
	ConnectTimeout  time.Duration // bound on waiting for a server or a pooled connection
	GTIDWaitTimeout time.Duration
	ReadsOnPrimary  bool
	TLS             *tls.Config
	RSAKey          *rsa.PrivateKey
	MaxPacket       int
}

// User is a client account.
type User struct {
	Name          string
	Cred          mysqlproto.Credentials
	RYW           router.RYW
	SessionWindow time.Duration
	Multiplexing  bool
}

// Server serves one cluster's listen address.
type Server struct {
	opts   atomic.Pointer[Options]
	users  atomic.Pointer[map[string]*User]
	topo   *topology.Holder
	pools  []*backend.Pool
	bal    *router.Balancer
	log    *slog.Logger
	sha    mysqlproto.ShaCache
	Stats  *Stats
	nextID atomic.Uint32

	proc atomic.Pointer[Processing]
	// schemas remembers default schemas logins checked recently
	// (user NUL schema -> expiry in Unix nanoseconds).
	schemas     sync.Map
	schemaCount atomic.Int64
	mirror      *mirrorer

	gate        atomic.Pointer[gate]
	fenced      []atomic.Bool
	fenceReason []atomic.Pointer[string]

	mu       sync.Mutex
	sessions map[uint32]*Session
	wg       sync.WaitGroup
}

// New makes a server. pools are indexed like the snapshot's servers.
func New(opts Options, users []User, topo *topology.Holder, pools []*backend.Pool, log *slog.Logger) *Server {
	s := &Server{topo: topo, pools: pools, bal: router.NewBalancer(len(pools)), log: log,
		sessions: map[uint32]*Session{}, Stats: newStats(len(pools)),
		fenced: make([]atomic.Bool, len(pools)), fenceReason: make([]atomic.Pointer[string], len(pools))}
	s.mirror = &mirrorer{srv: s, jobs: make(chan mirrorJob, 1024)}
	s.SetOptions(opts)
	s.SetUsers(users)
	s.SetProcessing(Processing{})
	return s
}

// SetOptions swaps the options (hot reload).
func (s *Server) SetOptions(o Options) {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.GTIDWaitTimeout <= 0 {
		o.GTIDWaitTimeout = time.Second
	}
	if o.MaxPacket <= 0 {
		o.MaxPacket = mysqlproto.DefaultMaxAllowedBytes
	}
	s.opts.Store(&o)
}

// SetUsers swaps the user list (hot reload); open sessions keep theirs.
func (s *Server) SetUsers(users []User) {
	m := make(map[string]*User, len(users))
	for i := range users {
		u := users[i]
		m[u.Name] = &u
	}
	s.users.Store(&m)
}

// Balancer exposes read balancing counters.
func (s *Server) Balancer() *router.Balancer { return s.bal }

// Pools returns the server pools.
func (s *Server) Pools() []*backend.Pool { return s.pools }

// Serve accepts clients on ln until ctx ends, then closes every session and
// waits for them.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	s.mirror.run(ctx)
	var tempDelay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				s.closeAll()
				s.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "retry_in", tempDelay)
				time.Sleep(tempDelay)
				continue
			}
			s.closeAll()
			s.wg.Wait()
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		tempDelay = 0
		// Go's TCP connections have TCP_NODELAY and keep-alives on
		// already (net.Listen's defaults): no system calls here.
		id := s.nextID.Add(1)
		sess := newSession(s, id, nc)
		s.mu.Lock()
		s.sessions[id] = sess
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sess.run(ctx)
			s.mu.Lock()
			delete(s.sessions, id)
			s.mu.Unlock()
		}()
	}
}

func (s *Server) closeAll() {
	s.mu.Lock()
	for _, sess := range s.sessions {
		sess.client.Close()
	}
	s.mu.Unlock()
}

// Session returns a live session by id.
func (s *Server) Session(id uint32) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// SessionCount is the number of connected clients.
func (s *Server) SessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Sessions returns a summary of every session.
func (s *Server) Sessions() []SessionInfo {
	s.mu.Lock()
	list := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		list = append(list, sess)
	}
	s.mu.Unlock()
	out := make([]SessionInfo, 0, len(list))
	for _, sess := range list {
		out = append(out, sess.Info())
	}
	return out
}
