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
	"strconv"
	"strings"
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
	// MariaDBCaps are the MariaDB extended capabilities offered to
	// clients: those every server offers (cmd/vigil learns them from the
	// servers' greetings), 0 when a server is MySQL.
	MariaDBCaps uint32
	// Collation is the servers' default collation, announced in the
	// greeting as a server would (0: utf8mb4_general_ci).
	Collation byte
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
	opts  atomic.Pointer[Options]
	users atomic.Pointer[map[string]*User]
	topo  *topology.Holder
	// pools[i] is server slot i's pool (topology.MaxServers slots; nil
	// until a server takes the slot). Slots never move: a removed
	// server's pool stays, closed.
	pools  []atomic.Pointer[backend.Pool]
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

	gate atomic.Pointer[gate]
	// writeUntil: with coordination, nanoseconds since base until which
	// this instance may route writes (its etcd lease holds and it applied
	// the newest writer record); noWriteDeadline without coordination.
	writeUntil atomic.Int64
	base       time.Time
	// refuseReadsFenced: while writes are refused, reads are too.
	refuseReadsFenced atomic.Bool
	selfFenceWhy      atomic.Pointer[string]
	// trackDefault is the session tracking new sessions have.
	trackDefault atomic.Pointer[trackDefaults]
	// latestGTID is the newest write any session made through this
	// listener (read_your_writes: global).
	latestGTID atomic.Pointer[string]
	// insertTokens names statements that set a connection's
	// LAST_INSERT_ID() (backend.Conn.InsertToken).
	insertTokens atomic.Uint64
	fenced       []atomic.Bool
	fenceReason  []atomic.Pointer[string]
	fenceMu      sync.Mutex
	lostHook     atomic.Pointer[func(idx int)]
	preFence     []map[uint32]struct{} // by server: connection ids open at the fence
	replies      []replyCounter        // activity.go

	// guard bounds unauthenticated clients and throttles failed logins
	// (nil: no limits).
	guard atomic.Pointer[LoginGuard]
	// budget bounds the buffers of logged-in clients' large statements,
	// shared by every listener (nil: unbounded).
	budget atomic.Pointer[mysqlproto.Budget]
	// retired holds listeners RetireListener closed on purpose.
	retired sync.Map

	mu       sync.Mutex
	sessions map[uint32]*Session
	wg       sync.WaitGroup

	// testHook, set only by tests before Serve, sees every COM_QUERY.
	testHook func(q []byte)
}

// New makes a server. pools are indexed like the snapshot's servers;
// SetPool fills further slots.
func New(opts Options, users []User, topo *topology.Holder, pools []*backend.Pool, log *slog.Logger) *Server {
	const n = topology.MaxServers
	s := &Server{topo: topo, pools: make([]atomic.Pointer[backend.Pool], n), bal: router.NewBalancer(n), log: log,
		sessions: map[uint32]*Session{}, Stats: newStats(n),
		fenced: make([]atomic.Bool, n), fenceReason: make([]atomic.Pointer[string], n), preFence: make([]map[uint32]struct{}, n),
		replies: newReplyCounters(n), base: time.Now()}
	s.writeUntil.Store(noWriteDeadline)
	for i, p := range pools {
		s.pools[i].Store(p)
	}
	s.mirror = &mirrorer{srv: s, jobs: make(chan mirrorJob, 1024)}
	s.trackDefault.Store(builtinTrackDefaults())
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

// SetGuard makes g (shared by every listener) guard this one's logins.
func (s *Server) SetGuard(g *LoginGuard) { s.guard.Store(g) }

// SetBudget makes b (shared by every listener) bound the memory of the
// large statements of this listener's clients; sessions that log in
// afterwards use it.
func (s *Server) SetBudget(b *mysqlproto.Budget) { s.budget.Store(b) }

// SetPool gives server slot i its pool: a server added to the running
// cluster. Call it before the monitor publishes a snapshot with the
// server, and never for a slot in use.
func (s *Server) SetPool(i int, p *backend.Pool) { s.pools[i].Store(p) }

// pool is server slot i's pool, nil for a slot no server took.
func (s *Server) pool(i int) *backend.Pool {
	if i < 0 || i >= len(s.pools) {
		return nil
	}
	return s.pools[i].Load()
}

// Serve accepts clients on ln until ctx ends, then closes every session and
// waits for them.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mirror.run(ctx)
	return acceptLoop(ctx, ln, s.log, &s.retired, func(nc net.Conn) {
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
	}, func() {
		s.closeAll()
		s.wg.Wait()
	})
}

// acceptLoop accepts connections on ln and hands each to start until ctx
// ends or ln fails; then it ends the sessions (end) and returns. A
// listener retired on purpose (in retired: a reload moved the address)
// returns without ending them: the new listener's loop does at shutdown.
func acceptLoop(ctx context.Context, ln net.Listener, log *slog.Logger, retired *sync.Map, start func(net.Conn), end func()) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var tempDelay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				end()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				log.Warn("accept failed; retrying", "err", err, "retry_in", tempDelay)
				time.Sleep(tempDelay)
				continue
			}
			if _, ok := retired.Load(ln); ok {
				retired.Delete(ln)
				return nil
			}
			end()
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		tempDelay = 0
		start(nc)
	}
}

// RetireListener stops accepting on ln, a listener Serve runs on, and
// ends that Serve without touching the sessions it accepted (a reload
// moved the listen address: Serve runs on the new listener already).
func (s *Server) RetireListener(ln net.Listener) {
	s.retired.Store(ln, struct{}{})
	ln.Close()
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

// noteGTID records a session's write as the newest one if it is: for
// MariaDB GTIDs (domain-server-seq), a higher sequence number in the same
// domain, or any GTID of another domain (several domains: the latest seen
// stands for all; a wait then covers at least that write); a MySQL GTID
// set replaces the last one.
func (s *Server) noteGTID(gtid string) {
	for {
		old := s.latestGTID.Load()
		if old != nil && !newerGTID(gtid, *old) {
			return
		}
		if s.latestGTID.CompareAndSwap(old, &gtid) {
			return
		}
	}
}

// newerGTID reports whether MariaDB GTID a is after b in the same domain
// (or in another domain); MySQL GTID sets always count as newer.
func newerGTID(a, b string) bool {
	da, sa, okA := gtidDomainSeq(a)
	db, sb, okB := gtidDomainSeq(b)
	if !okA || !okB || da != db {
		return true
	}
	return sa > sb
}

func gtidDomainSeq(g string) (domain string, seq uint64, ok bool) {
	i := strings.IndexByte(g, '-')
	j := strings.LastIndexByte(g, '-')
	if i <= 0 || j <= i || strings.Contains(g, ",") {
		return "", 0, false
	}
	n, err := strconv.ParseUint(g[j+1:], 10, 64)
	return g[:i], n, err == nil
}
