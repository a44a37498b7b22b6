package frontend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/qlog"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/rules"
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

	vars sessionVars // the session's variables and schema, and the client's tracking of them (vars.go)

	// bind is the server connection the session holds and why (binding.go).
	bind binding

	stmts stmtRegistry // the client's prepared statements (stmt.go)

	ryw rywState // where the session's last write is, for read-your-writes (ryw.go)

	// prev is the previous statement's connection and outcome (prev.go).
	prev prevState

	// cur is the statement in flight, for listings, KILL and the client
	// watcher (inflight.go).
	cur       inflight
	cursorReq bool // the COM_STMT_EXECUTE in flight asked for a cursor

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
		return s.checkLogin(ctx, h.DB, h.Password)
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

// serve reads and dispatches the client's commands until it quits or
// its connection ends.
func (s *Session) serve(ctx context.Context) {
	for {
		s.client.Seq = 0
		// Waiting for the next command the client holds no buffers
		// (10,000 idle clients would otherwise pin 320 MiB of them).
		pkt, err := s.client.ReadCommand()
		if errors.Is(err, mysqlproto.ErrStatementMemory) {
			// Its bytes were read and dropped: the session goes on.
			s.refuseForMemory()
			if s.client.Flush() != nil {
				return
			}
			continue
		}
		if err != nil {
			if errors.Is(err, mysqlproto.ErrPacketTooLarge) {
				s.refuseUnread()
			} else if errors.Is(err, mysqlproto.ErrMalformed) {
				s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed communication packet: %v", err))
			}
			_ = s.client.Flush()
			return
		}
		if len(pkt) == 0 {
			s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed communication packet: empty command"))
			_ = s.client.Flush()
			return
		}
		err = s.dispatch(ctx, pkt)
		s.dropLarge()
		if err != nil {
			var ec errClient
			if !errors.As(err, &ec) && !errors.Is(err, errQuit) {
				s.srv.log.Debug("session ended", "session", s.id, "err", err)
			}
			return
		}
		if err := s.client.Flush(); err != nil {
			return
		}
	}
}

var errQuit = errors.New("client quit")

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

// dispatch handles one command. A returned error ends the session.
func (s *Session) dispatch(ctx context.Context, pkt []byte) error {
	cmd, _ := mysqlproto.Header(pkt) // serve sends no empty command here
	switch cmd {
	case mysqlproto.ComQuery, mysqlproto.ComStmtExecute, mysqlproto.ComInitDB, mysqlproto.ComFieldList,
		mysqlproto.ComStatistics, mysqlproto.ComResetConnection, mysqlproto.ComChangeUser,
		mysqlproto.ComStmtReset, mysqlproto.ComStmtFetch, mysqlproto.ComProcessKill:
		// A statement: the previous one's connection comes back for it to
		// use or give back (prev.go).
		s.takePrev()
		defer s.dropPrevHeld()
		s.prev.noteStmt = cmd == mysqlproto.ComQuery || cmd == mysqlproto.ComStmtExecute || cmd == mysqlproto.ComInitDB
		s.prev.pureDiag, s.prev.clearDiag, s.prev.ranOnPrev = false, false, false
		s.prev.stmtText = nil
		s.prev.execUnseen = false
	}
	switch cmd {
	case mysqlproto.ComQuery:
		return s.comQuery(ctx, pkt)
	case mysqlproto.ComQuit:
		return errQuit
	case mysqlproto.ComPing:
		return s.writeOK(0, 0)
	case mysqlproto.ComInitDB:
		return s.comInitDB(ctx, pkt)
	case mysqlproto.ComStmtPrepare:
		return s.comStmtPrepare(ctx, pkt)
	case mysqlproto.ComStmtExecute:
		return s.comStmtExecute(ctx, pkt)
	case mysqlproto.ComStmtSendLongData:
		return s.comStmtSendLongData(ctx, pkt)
	case mysqlproto.ComStmtClose:
		return s.comStmtClose(ctx, pkt)
	case mysqlproto.ComStmtReset:
		return s.comStmtReset(ctx, pkt)
	case mysqlproto.ComStmtFetch:
		return s.comStmtFetch(ctx, pkt)
	case mysqlproto.ComFieldList:
		return s.simpleCommand(ctx, pkt, router.Reader, respFieldList)
	case mysqlproto.ComStatistics:
		return s.simpleCommand(ctx, pkt, router.Writer, respStatistics)
	case mysqlproto.ComSetOption:
		return s.comSetOption(pkt)
	case mysqlproto.ComResetConnection:
		return s.comResetConnection(ctx)
	case mysqlproto.ComChangeUser:
		return s.comChangeUser(ctx, pkt)
	case mysqlproto.ComProcessKill:
		k, bad := mysqlproto.ParseProcessKill(pkt)
		if bad != nil {
			return s.sendError(bad)
		}
		return s.kill(ctx, uint64(k.ConnectionID), false)
	case mysqlproto.ComBinlogDump, mysqlproto.ComBinlogDumpGTID, mysqlproto.ComRegisterSlave:
		return s.sendError(mysqlproto.NewError(mysqlproto.ERVigilUnsupported, mysqlproto.SSVigilUnsupported,
			"Vigil: replication commands are not proxied; connect replicas to the servers directly"))
	default:
		return s.sendError(mysqlproto.NewError(mysqlproto.ERUnknownComError, "08S01",
			"Vigil: command 0x%02x is not supported through the proxy", cmd))
	}
}

func (s *Session) comQuery(ctx context.Context, pkt []byte) error {
	cq, _ := mysqlproto.ParseQuery(pkt) // dispatch checked the command
	q := cq.Text
	if s.srv.testHook != nil {
		s.srv.testHook(q)
	}
	info := sqlscan.Scan(q)
	if info.Flags&sqlscan.FlagLoadLocal != 0 {
		// The file's packets arrive in the read buffer that holds the
		// statement: keep a copy for the log and the digest.
		q = append([]byte(nil), q...)
	}
	s.srv.Stats.Queries.Add(1)
	p := s.srv.proc.Load()
	s.result.begin()
	run := stmtRun{start: time.Now(), digest: info.Digest, query: q}
	if info.Flags&sqlscan.FlagKill != 0 {
		if id, query, ok := info.KillTarget(); ok {
			// Vigil's own statement (its ids are the clients'): logged,
			// not counted as a routed statement.
			err := s.kill(ctx, id, query)
			s.logStmt(p, &run, time.Now())
			return err
		}
	}
	s.setCurrent(q, run.start)
	res := s.applyRules(p, q, info.Digest)
	run.rule, run.log = res.Rule, res.Log
	if res.Block != nil {
		run.hostgroup = "blocked"
		err := s.blocked(res.Block, res.Rule)
		s.finishStmt(p, &run)
		return err
	}
	if res.Query != nil {
		// Route and pin by what will run; count and log what was sent.
		pkt, cq, info = s.rewriteQuery(res.Query, info)
	}
	if info.Flags&sqlscan.FlagMulti != 0 && !s.multiStmts {
		run.hostgroup = "refused"
		err := s.sendError(mysqlproto.NewError(mysqlproto.ERParseError, mysqlproto.SSSyntax,
			"You have an error in your SQL syntax: multi-statements are off for this connection (CLIENT_MULTI_STATEMENTS)"))
		s.finishStmt(p, &run)
		return err
	}
	pkt, cq, info = s.prepareQuery(pkt, cq, info)
	s.nextTrxSet = info.Class == sqlscan.ClassSet && info.Facts&sqlscan.FactNextTrx != 0
	s.cur.noWatch = info.Flags&sqlscan.FlagLoadLocal != 0
	s.prev.pureDiag = pureDiagnostics(info)
	s.prev.stmtText = cq.Text
	onPrev, rw := s.routePrev(ctx, info, cq.Text)
	if rw != nil {
		pkt, cq = s.queryPacket(rw)
	}
	s.rs.Bound = s.bind.bound() || onPrev
	dec := router.Route(info, &s.rs, run.start)
	run.target, run.hostgroup = s.routeByRule(p, res.Route, dec.Target)
	cacheKey, served, err := s.queryCached(p, &res, info, cq.Text, &run)
	if served {
		return err
	}
	s.timeout.limit, s.timeout.rule = res.Timeout, res.Rule
	run.mirror = res.Mirror
	err = s.execute(ctx, pkt, info, run.target, respQuery)
	s.timeout.limit = 0
	if s.capture.on {
		if err != nil {
			s.capture.on = false
		}
		s.storeCapture(p, cacheKey, res.CacheTTL)
	}
	s.finishStmt(p, &run)
	if err != nil {
		return err
	}
	return s.endIfReleased(info)
}

// endIfReleased ends the session after COMMIT RELEASE or ROLLBACK
// RELEASE: the server closed the connection, and so does the client
// session (errQuit).
func (s *Session) endIfReleased(info sqlscan.Info) error {
	if info.Flags&sqlscan.FlagRelease == 0 || (info.Class != sqlscan.ClassCommit && info.Class != sqlscan.ClassRollback) {
		return nil
	}
	if s.bind.conn != nil {
		s.dropConn(s.bind.conn)
	}
	_ = s.client.Flush()
	return errQuit
}

// queryPacket is the COM_QUERY for text, in the session's rewrite buffer.
func (s *Session) queryPacket(text []byte) ([]byte, mysqlproto.Query) {
	s.rewriteBuf = mysqlproto.AppendQuery(s.rewriteBuf[:0], mysqlproto.Query{Text: text})
	cq, _ := mysqlproto.ParseQuery(s.rewriteBuf)
	return s.rewriteBuf, cq
}

// rewriteQuery is the COM_QUERY for a rule's rewrite q of a statement
// (info: the original's, whose digest stays).
func (s *Session) rewriteQuery(q []byte, info sqlscan.Info) ([]byte, mysqlproto.Query, sqlscan.Info) {
	pkt, cq := s.queryPacket(q)
	ri := sqlscan.Scan(q)
	ri.Digest = info.Digest
	return pkt, cq, ri
}

// prepareQuery adjusts a statement for what Vigil needs of the server:
// SETs qualified so that the tracker reports them, and reads that see
// LAST_INSERT_ID() through sql_auto_is_null sent where that is.
func (s *Session) prepareQuery(pkt []byte, cq mysqlproto.Query, info sqlscan.Info) ([]byte, mysqlproto.Query, sqlscan.Info) {
	if info.Class == sqlscan.ClassSet {
		// SET @@x = v: sent as SET @@SESSION.x = v, which the server's
		// session tracker reports (the unqualified form it does not, and
		// the value would stay on the pooled connection unseen).
		if out, ok := info.QualifySessionSets(mysqlproto.AppendQuery(s.vars.setBuf[:0], mysqlproto.Query{}), cq.Text); ok {
			s.vars.setBuf = out
			pkt = out
			cq, _ = mysqlproto.ParseQuery(pkt)
		}
	}
	if info.Class == sqlscan.ClassRead && s.vars.autoIsNull(info) {
		// sql_auto_is_null=1: WHERE auto_increment_col IS NULL finds the
		// row of the connection's LAST_INSERT_ID(): read where that is.
		info.Flags |= sqlscan.FlagLastInsertID | sqlscan.FlagSideEffect
	}
	return pkt, cq, info
}

// queryCached serves a read from the query cache when a rule asked for
// it (served), or starts capturing its reply under the returned key.
func (s *Session) queryCached(p *Processing, res *rules.Result, info sqlscan.Info, text []byte, run *stmtRun) (key []byte, served bool, _ error) {
	if res.CacheTTL <= 0 || p.Cache == nil || run.target == router.Keep || !cacheable(info) {
		return nil, false, nil
	}
	key = s.cacheKey(text)
	if frames := p.Cache.Get(key, run.start); frames != nil {
		s.srv.Stats.CacheHits.Add(1)
		run.cached, run.hostgroup = true, "cache"
		if err := s.client.WriteFrame(frames); err != nil {
			return key, true, errClient{err}
		}
		s.finishStmt(p, run)
		return key, true, nil
	}
	s.startCapture(p)
	return key, false, nil
}

// execute sends one command to the server the router chose and streams
// the reply. A read outside a transaction whose write to a server failed
// is retried once on another reader (the server never had it whole).
func (s *Session) execute(ctx context.Context, pkt []byte, info sqlscan.Info, target router.Target, kind respKind) error {
	exclude := -1
	for attempt := 0; ; attempt++ {
		c, err := s.acquire(ctx, target, exclude)
		if err != nil {
			return s.sendError(err)
		}
		if s.tooLarge(c.Index, len(pkt)) {
			return s.refuseTooLarge(c)
		}
		if err := s.clearDiagnostics(ctx, c); err != nil {
			return s.prepFailed(c, err)
		}
		out, err := s.roundTrip(c, pkt, kind)
		s.result.note(c.Server, c.Index, out)
		if err != nil {
			var eb errBackend
			// Only a command the server never had whole goes to another
			// server: one it read may have run, or made it close the
			// connection (a packet over max_allowed_packet).
			if errors.As(err, &eb) && !out.reached && !out.sent && target == router.Reader && attempt == 0 && !s.bind.bound() {
				s.srv.serverLost(c.Index)
				s.srv.Stats.ReadRetries.Add(1)
				s.srv.log.Warn("read failed on a server; retrying on another", "session", s.id, "server", c.Server, "err", eb.err)
				s.dropConn(c)
				// Its idle siblings may be dead too (the server restarted,
				// KILL CONNECTION USER): the retry gets a new connection
				// if it lands on the same server.
				s.srv.pool(c.Index).CloseIdle()
				exclude = c.Index
				continue
			}
			return s.failed(c, err, out)
		}
		s.after(c, info, out)
		return nil
	}
}

// roundTrip writes pkt to c and forwards the reply.
func (s *Session) roundTrip(c *backend.Conn, pkt []byte, kind respKind) (outcome, error) {
	s.cur.running.Store(c)
	defer s.cur.running.Store(nil)
	epoch := s.srv.replyEpoch(c.Index)
	if o, err := s.send(c, pkt); err != nil || o.sent {
		return o, err
	}
	// The reply cannot be there yet: let other sessions run first, so the
	// read below usually finds it instead of failing with EAGAIN and
	// parking on the poller (two system calls and a wake-up saved).
	runtime.Gosched()
	s.srv.bal.Begin(c.Index)
	s.armWatch()
	var timer *time.Timer
	var killed chan struct{}
	if s.timeout.limit > 0 {
		killed = make(chan struct{})
		timer = time.AfterFunc(s.timeout.limit, func() {
			defer close(killed)
			s.timeout.fired.Store(true)
			s.srv.Stats.Timeouts.Add(1)
			s.killRunning(c)
		})
	}
	out, err := s.forward(c, kind)
	// The server had the command whole. If it dropped the connection
	// before any byte reached the client, a read may still go to another
	// server (the caller decides) when its size cannot be the reason (a
	// replica killed or restarted mid-read, as ProxySQL's and MaxScale's
	// read retries allow); one over (or of unknown relation to) the
	// server's max_allowed_packet is never resent.
	out.reached = err == nil || !s.underMaxPacket(c.Index, len(pkt))
	if err == nil {
		s.srv.noteReply(c.Index, epoch) // passive evidence for the monitor (activity.go)
	}
	if timer != nil && !timer.Stop() {
		// The kill may land after the statement ended: never reuse the
		// connection it may hit.
		<-killed
		s.timeout.fired.Store(false)
		if !s.bind.bound() {
			c.Broken = true
		}
	}
	s.disarmWatch()
	s.srv.bal.End(c.Index)
	return out, err
}

// failed handles an I/O failure during a statement.
func (s *Session) failed(c *backend.Conn, err error, out outcome) error {
	var eb errBackend
	if errors.As(err, &eb) {
		s.srv.serverLost(c.Index)
		wasBound := s.bind.bound()
		s.dropConn(c)
		s.resetTxn()
		s.srv.Stats.Errors.Add(1)
		if out.sent {
			// Part of a reply went out: the client cannot be told cleanly.
			return err
		}
		if s.srv.Fenced(c.Index) && wasBound {
			return s.sendError(s.fencedError(c))
		}
		what := "the statement"
		if wasBound {
			what = "the open transaction (or pinned session state) was lost; it did not commit"
		}
		return s.sendError(mysqlproto.NewError(mysqlproto.ERVigilBackendLost, mysqlproto.SSVigilLost,
			"Vigil: lost connection to server %s during %s: %v", c.Server, what, eb.err))
	}
	// Client side failure: the server may still be working for nobody.
	if s.client.Pending() == 0 || true {
		s.killRunning(c)
	}
	s.dropConn(c)
	return err
}

// after updates the session from a finished statement and gives the
// server connection back unless the session must keep it.
func (s *Session) after(c *backend.Conn, info sqlscan.Info, out outcome) {
	if out.status != 0 || out.err == nil {
		s.bind.noteStatus(out.status)
	}
	if out.err == nil {
		s.countPins(s.bind.notePins(info, s.nextTrxSet))
		if (info.Class == sqlscan.ClassWrite || info.Class == sqlscan.ClassCommit) && !s.bind.inTrx {
			// With GTID read-your-writes the new last_gtid says where reads
			// must wait; without one (binary log off), fall back to the
			// session window.
			if s.user.RYW == router.RYWSession || ((s.user.RYW == router.RYWGTID || s.user.RYW == router.RYWGlobal) && !s.ryw.fresh) {
				s.ryw.lastWrite = time.Now()
			}
		}
	}
	s.ryw.fresh = false
	if info.Flags&sqlscan.FlagCalcFoundRows == 0 {
		s.bind.unpin(PinFoundRows)
	}
	s.rs.LastWrite = s.ryw.lastWrite
	if out.warnings > 0 || out.err != nil {
		c.DiagDirty = true
	}
	if info.Flags&sqlscan.FlagGlobalSet != 0 && out.err == nil {
		// A new client of the server gets its session variables from the
		// new global values; idle pooled connections still have the old
		// ones: close them, new sessions get fresh connections.
		for i := range s.srv.pools {
			if p := s.srv.pool(i); p != nil {
				p.CloseIdle()
			}
		}
		if !s.bind.bound() {
			c.Broken = true // this one too, once the session is done with it
		}
	}
	if (s.vars.trackTouched || (info.Flags&sqlscan.FlagSessionTrack != 0 && info.Class == sqlscan.ClassSet)) && !c.Broken {
		s.restoreTracking(c, s.prev.stmtText)
	}
	if info.Flags&sqlscan.FlagGlobalSet != 0 && out.err == nil && info.Facts&sqlscan.FactTrackName != 0 {
		s.refreshTrackDefaults(c)
	}
	if out.insertID != 0 {
		// The connection's LAST_INSERT_ID() is the session's now, unless
		// the id was an explicit value (not generated: the server keeps
		// the previous one) and another session set that one: then only
		// Vigil's own record may answer (no other client's id).
		s.prev.insertTrusted = c.InsertToken == 0 || c.InsertSession == s.id
		s.noteInsert(c, out.insertID)
	}
	s.prev.valuesFetched = false
	// The statement's Info decides, except for an execute whose text the
	// session did not keep: that was judged at its prepare (execUnseen),
	// and only a multi-statement counts again, as before.
	unseen := s.prev.execUnseen || info.Flags&sqlscan.FlagMulti != 0 || s.prev.stmtText != nil && info.SetsInsertIDUnseen()
	s.prev.execUnseen = false
	if !c.Broken && (s.prev.insertPending || unseen) {
		// The statement may have set LAST_INSERT_ID() unseen. While the
		// session keeps c, its reads of it run there (asked only when one
		// comes, prev.go): Vigil's own query would count in the session's
		// status counters. Once c may go to others, ask now.
		s.prev.insertPending = s.bind.bound()
		if !s.prev.insertPending {
			s.fetchInsertID(c)
		}
	}
	if s.prev.noteStmt {
		s.prev.noteStmt = false
		if hold, expire := s.prev.noteLast(info, out); hold && !s.bind.bound() && !c.Broken {
			s.keepPrev(c, expire)
			return
		}
		// Remembered so that a statement reading what this one left
		// (FOUND_ROWS(), ROW_COUNT(), the diagnostics area) can take the
		// connection back if nobody used it since (prev.go).
		s.prev.gaveBack(c)
	}
	s.release(c)
}

// prepFailed handles a failure of what Vigil runs on a connection before
// the client's statement (a server error is the client's answer; an I/O
// error loses the connection).
func (s *Session) prepFailed(c *backend.Conn, err error) error {
	var eb errBackend
	if errors.As(err, &eb) {
		return s.failed(c, err, outcome{})
	}
	s.release(c)
	return s.sendError(err)
}

var timeNow = time.Now

func asBackend(err error, eb *errBackend) bool { return errors.As(err, eb) }
