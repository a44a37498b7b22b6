package frontend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime/debug"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/qlog"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// Session is one client connection. Its methods run on the session's own
// goroutine, except Info and kill, which other goroutines may call.
type Session struct {
	srv    *Server
	id     uint32
	client *mysqlproto.Conn
	remote string

	user       *User
	caps       uint32
	key        backend.Key
	multiStmts bool

	// The parts, each with its own type and tests.
	vars  sessionVars  // variables, schema and the client's tracking of them (vars.go)
	bind  binding      // the server connection the session holds, and why (binding.go, conns.go)
	stmts stmtRegistry // the client's prepared statements (stmtregistry.go, stmt.go)
	ryw   rywState     // where the session's last write is, for read-your-writes (ryw.go)
	prev  prevState    // the previous statement's connection and outcome (prev.go)
	cur   inflight     // the statement in flight, for listings, KILL and the client watcher (inflight.go)

	cursorReq  bool // the COM_STMT_EXECUTE in flight asked for a cursor
	scratch    []byte
	panicked   bool // a recovered panic: server connections are closed, never reused
	rs         router.Session
	nextTrxSet bool

	// Query processing, per statement.
	clientIP     netip.Addr
	clientIPDone bool
	group        []int       // servers of the rule-chosen group (target Group)
	result       stmtResult  // how the statement ended, for statistics and the log
	timeout      stmtTimeout // a rule's timeout for the statement
	rewriteBuf   []byte
	cacheKeyBuf  []byte
	capture      replyCapture // the reply being captured for the query cache
	logEntry     qlog.Entry
	userStats    *UserStats

	// shard: the sharded listener's session this one serves one
	// cluster of (nil: a cluster listener's session).
	shard *shardSession
	// prescan is the sharded listener's classification of the COM_QUERY
	// it hands this session (nil: scan the text).
	prescan *sqlscan.Info
}

// SessionInfo is a session as listings show it.
type SessionInfo struct {
	ID     uint32   `json:"id"`
	User   string   `json:"user"`
	Client string   `json:"client"`
	Schema string   `json:"schema"`
	InTrx  bool     `json:"in_transaction"`
	Server string   `json:"server,omitempty"`
	Pins   []string `json:"pins,omitempty"`
	// Command is the statement running now, normalised (literals
	// masked), and Seconds how long it has run.
	Command string  `json:"command,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
}

func newSession(srv *Server, id uint32, nc net.Conn) *Session {
	c := mysqlproto.NewConn(nc)
	// Until the client is authenticated nothing it sends may be larger
	// than a handshake (setup lifts the bound after the login).
	c.MaxPacket = mysqlproto.MaxHandshakePacket
	s := &Session{srv: srv, id: id, client: c, remote: nc.RemoteAddr().String()}
	s.prev.forget() // ROW_COUNT() answers -1 before any statement
	s.bind.heldIdx.Store(-1)
	return s
}

func (s *Session) opts() *Options { return s.srv.opts.Load() }

func (s *Session) run(ctx context.Context) {
	defer func() {
		s.client.Close()
		// Nothing reads or writes the client any more (a watcher only runs
		// during a statement): its buffers can serve the next client.
		s.client.Release()
	}()
	defer func() {
		if s.cur.watch != nil {
			s.cur.watch.Stop()
		}
	}()
	defer s.releaseAll()
	defer s.resetPrev()
	defer s.recoverPanic()
	s.srv.Stats.Connections.Add(1)
	if !s.login(ctx) {
		return
	}
	s.serve(ctx)
}

// login runs the handshake under the login guard's admission and
// reports whether the client is in.
func (s *Session) login(ctx context.Context) bool {
	host := s.clientHost()
	g := s.srv.guard.Load()
	release := func() {}
	timeout := 10 * time.Second
	var ticket *admitTicket
	if g != nil {
		tk, refused := g.admit(s.srv.log, s.remoteIP(), s.client.NetConn())
		if refused != nil {
			// Refused before the greeting, as a server refuses a
			// connection over max_connections.
			s.client.Seq = 0
			_ = s.client.WriteErr(refused)
			g.warn(s.srv.log, "connection refused before login", "client", s.remote, "err", refused.Message)
			return false
		}
		ticket, release, timeout = tk, tk.release, g.o().HandshakeTimeout
	}
	defer release()
	hctx, cancel := context.WithTimeout(ctx, timeout)
	cfg := s.loginConfig(ctx, g, ticket)
	hello, err := s.client.Accept(hctx, cfg, s.id, host)
	cancel()
	release()
	if err == nil {
		s.client.MaxPacket = s.opts().MaxPacket
		if b := s.srv.budget.Load(); b != nil {
			s.client.SetBudget(b)
		}
		if g != nil {
			g.succeeded(hello.User, s.remoteIP())
		}
	}
	if hello != nil && (err == nil || errors.Is(err, mysqlproto.ErrAccessDenied)) {
		s.logAuth(hello.User, err)
	}
	if err != nil {
		s.loginFailed(hello, err)
		return false
	}
	return true
}

// loginConfig is the handshake's configuration: the guard's throttle
// and block (ticket: the admission, nil without a guard), and the check
// of the account and schema with the servers.
func (s *Session) loginConfig(ctx context.Context, g *LoginGuard, ticket *admitTicket) *mysqlproto.ServerConfig {
	cfg := &mysqlproto.ServerConfig{
		ServerVersion: s.opts().ServerVersion, Plugin: s.opts().AuthPlugin, TLS: s.opts().TLS, RSAKey: s.opts().RSAKey,
		ShaCache: &s.srv.sha, Lookup: s.lookupUser, MariaDBCaps: s.opts().MariaDBCaps, Collation: s.opts().Collation,
	}
	s.guardAuth(ctx, cfg)
	if ticket != nil {
		// A throttle wait stays evictable (its address stays charged); a
		// right password checked with the servers is not.
		denied := cfg.Denied
		cfg.Denied = func(ctx context.Context, user string) {
			if ticket.stage(stageWait) {
				denied(ctx, user)
				return
			}
			// Evicted while its password was judged: the failure counts,
			// but nobody is left to make wait (the client sees its
			// connection closed, which says nothing of the password).
			// The evicting login closes the connection just after it
			// chose it: close it here too, before the access-denied
			// answer could be written, or the client would learn at once
			// what a throttled login learns only after the delay.
			_ = s.client.NetConn().Close()
			g.failed(user, s.remoteIP())
		}
	}
	cfg.Check = func(ctx context.Context, h *mysqlproto.Hello) error {
		if ticket != nil && !ticket.stage(stageCheck) {
			_ = s.client.NetConn().Close() // closing (by the evicting login): nothing more is said on it
			return errEvicted              // no need to ask the servers
		}
		s.setup(h)
		// The servers must accept the account, and the schema must exist
		// and be allowed, as a server would check.
		return s.loginCheck(ctx, h.DB, h.Password)
	}
	return cfg
}

// loginFailed counts and logs a failed handshake and tells the client
// what it can still be told.
func (s *Session) loginFailed(hello *mysqlproto.Hello, err error) {
	var se *mysqlproto.SQLError
	if errors.As(err, &se) && refusalCode(se.Code) && hello != nil {
		// A server refused the account (checkLogin).
		s.logAuth(hello.User, err)
		s.srv.Stats.AuthFailures.Add(1)
	}
	if errors.Is(err, mysqlproto.ErrAccessDenied) {
		s.srv.Stats.AuthFailures.Add(1)
		s.srv.log.Warn("client authentication failed", "session", s.id, "client", s.remote, "err", err)
	} else if !errors.Is(err, io.EOF) {
		s.srv.log.Debug("client handshake failed", "session", s.id, "client", s.remote, "err", err)
	}
	if errors.Is(err, mysqlproto.ErrPacketTooLarge) {
		// As a server answers an oversized packet; the frame was
		// refused from its header, nothing of it was read.
		_ = s.client.NetConn().SetWriteDeadline(time.Now().Add(time.Second))
		_ = s.client.WriteErr(mysqlproto.NewError(mysqlproto.ERNetPacketTooLarge, "08S01",
			"Got a packet bigger than %d bytes before login", mysqlproto.MaxHandshakePacket))
	}
}

// errEvicted ends a login whose connection was closed to admit a newer
// one (admission.go).
var errEvicted = errors.New("closed before login to admit a newer connection")

// clientHost is the client's host as a server names it in an access
// denied message: its address, and localhost for a local client (MariaDB
// with name resolution on, its default).
// remoteIP is the client's address without the port: what the login
// guard counts by (127.0.0.1 and 127.0.0.2 are different sources).
func (s *Session) remoteIP() string {
	if host, _, err := net.SplitHostPort(s.remote); err == nil {
		return host
	}
	return s.remote
}

// guardAuth makes the login guard throttle and block the logins cfg
// runs (at connect and by COM_CHANGE_USER).
func (s *Session) guardAuth(ctx context.Context, cfg *mysqlproto.ServerConfig) {
	g := s.srv.guard.Load()
	if g == nil {
		return
	}
	ip := s.remoteIP()
	cfg.Denied = func(_ context.Context, user string) { wait(ctx, g.failed(user, ip)) }
	cfg.Blocked = func(user string) bool { return g.blocked(user, ip) }
}

func (s *Session) clientHost() string {
	host, _, err := net.SplitHostPort(s.remote)
	if err != nil {
		return s.remote
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return "localhost"
	}
	return host
}

// recoverPanic keeps a bug in one session from taking the daemon down: the
// panic is logged with its stack and counted, the client gets 7014 when
// it can still be told, and the session's server connections are closed
// (their state is unknown) as the session ends.
func (s *Session) recoverPanic() {
	r := recover()
	if r == nil {
		return
	}
	s.panicked = true
	s.srv.Stats.Panics.Add(1)
	s.srv.log.Error("a session ended on an internal error (a bug in Vigil); other sessions are not affected; please report this with the stack",
		"session", s.id, "client", s.remote, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	func() {
		defer func() { _ = recover() }() // the client connection may be in any state
		s.client.Seq = 1
		_ = s.client.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(mysqlproto.ERVigilInternal, mysqlproto.SSVigilLost,
			"Vigil: internal error; this session was closed (see Vigil's log, session %d)", s.id)))
		_ = s.client.Flush()
	}()
}

// setup records what the client said in its handshake.
func (s *Session) setup(hello *mysqlproto.Hello) {
	users := *s.srv.users.Load()
	s.setUser(users[hello.User])
	s.caps = hello.Capabilities
	s.vars.sessionTrack = s.caps&mysqlproto.CapabilityClientSessionTrack != 0
	s.vars.resetTrack(s.srv.trackDefault.Load())
	s.multiStmts = s.caps&mysqlproto.CapabilityClientMultiStatements != 0
	s.key = backend.Key{User: hello.User, Flavour: hello.Flavour(), Collation: hello.Collation}
	s.vars.state.SetSchema(hello.DB)
	s.rs = router.Session{RYW: s.user.RYW, SessionWindow: s.user.SessionWindow}
}

func (s *Session) lookupUser(name string) (mysqlproto.Credentials, bool) {
	u, ok := (*s.srv.users.Load())[name]
	if !ok {
		return mysqlproto.Credentials{}, false
	}
	return u.Cred, true
}
