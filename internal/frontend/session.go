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
	"strings"
	"sync"
	"sync/atomic"
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

	user         *User
	caps         uint32
	key          backend.Key
	sessionTrack bool
	multiStmts   bool
	// track is what the client asked session tracking to tell it (its
	// own session_track_* settings; the server's defaults until it sets
	// them): the server connections track more (prev.go, forward.go).
	track        mysqlproto.TrackFilter
	trackTouched bool              // the statement changed the client's tracking (restore the server connection's)
	trackRaw     map[string]string // the client's session_track_* values (shared with the defaults until changed)

	state backend.State

	// conn is the server connection the session holds between statements
	// (transaction, pin), or nil.
	conn *backend.Conn
	// sticky holds one connection per server when multiplexing is off.
	sticky map[int]*backend.Conn

	inTrx         bool
	autocommitOff bool
	pins          [numPins]int
	tempTables    int

	stmts    map[uint32]*clientStmt
	nextStmt uint32

	lastWrite time.Time
	lastGTID  string
	// lastGTIDFresh: the statement that just ran reported a new last_gtid.
	lastGTIDFresh bool
	gtidSeen      uint64 // bit i: server i is known to have applied lastGTID

	heldIdx  atomic.Int32
	heldConn atomic.Pointer[backend.Conn]

	// The previous statement's connection and outcome (prev.go). prev is
	// guarded by prevMu (its idle timer may give it back); prevAt shows
	// it to Fence; prevHeld is prev during a command (session goroutine).
	prevMu      sync.Mutex
	prev        *backend.Conn
	prevAt      atomic.Pointer[backend.Conn]
	prevTimer   *time.Timer
	prevHeld    *backend.Conn
	lastConn    *backend.Conn // the last connection given back (may be another session's by now)
	lastPuts    uint64        // lastConn's put count when given back (backend.Pool.Reclaim)
	insertConn  *backend.Conn // the connection of the session's last insert id
	insertToken uint64        // its InsertToken then (backend.Pool.ReclaimInsert)
	// insertTrusted: insertConn's LAST_INSERT_ID() was no other session's
	// before this session's insert, so the server's answer there is this
	// session's.
	insertTrusted bool
	// prevValuesFetched: Vigil ran a statement of its own on the previous
	// statement's connection (fetchInsertID), so the server's ROW_COUNT()
	// and FOUND_ROWS() there are no longer the session's: Vigil's record
	// answers them.
	prevValuesFetched bool
	// insertPending: a statement on the session's own connection may have
	// set LAST_INSERT_ID() unseen; Vigil asks before the next read of it
	// or when the connection goes back (fetchInsertID).
	insertPending bool
	// execUnseen: the statement being executed (COM_STMT_EXECUTE) may set
	// LAST_INSERT_ID() unseen (clientStmt.insertUnseen).
	execUnseen bool
	noteStmt   bool // the command is a statement: its outcome is the session's previous statement
	pureDiag   bool // the statement only reads the diagnostics area
	clearDiag  bool // run the statement on an empty diagnostics area
	ranOnPrev  bool // the statement ran on the previous statement's connection
	stmtText   []byte
	lastDiag   bool // the previous statement left warnings or an error
	rowCount   int64
	foundRows  int64
	insertID   uint64
	sessionBuf []byte
	// setBuf holds a SET statement with its @@ targets qualified
	// (sqlscan.Info.QualifySessionSets).
	setBuf []byte

	// running is the server connection of the statement in flight, for KILL.
	running atomic.Pointer[backend.Conn]
	started time.Time

	// The statement in flight and the user, for listings and for other
	// sessions' KILL (guarded by curMu).
	curMu    sync.Mutex
	curUser  string
	curText  []byte
	curStart time.Time

	watch     *time.Timer
	watchDone chan struct{}
	watchOn   atomic.Bool
	noWatch   bool // LOAD DATA LOCAL reads the client itself
	cursorReq bool // the COM_STMT_EXECUTE in flight asked for a cursor

	scratch    []byte
	panicked   bool // a recovered panic: server connections are closed, never reused
	rs         router.Session
	nextTrxSet bool

	// Query processing, per statement.
	clientIP     netip.Addr
	clientIPDone bool
	group        []int // servers of the rule-chosen group (target Group)
	stmtErr      uint16
	stmtErrMsg   string
	stmtServer   string
	stmtIdx      int
	stmtRows     int64
	stmtTimeout  time.Duration
	timeoutRule  string
	timedOut     atomic.Bool
	rewriteBuf   []byte
	cacheKeyBuf  []byte
	capture      []byte
	capturing    bool
	captureMax   int
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
	s := &Session{srv: srv, id: id, client: c, remote: nc.RemoteAddr().String(), stmts: map[uint32]*clientStmt{}, rowCount: -1}
	s.heldIdx.Store(-1)
	return s
}

// Info summarises the session (any goroutine).
func (s *Session) Info() SessionInfo {
	in := SessionInfo{ID: s.id, Client: s.remote}
	if c := s.running.Load(); c != nil {
		in.Server = c.Server
	}
	s.curMu.Lock()
	in.User = s.curUser
	if len(s.curText) > 0 {
		in.Command = string(sqlscan.Mask(nil, s.curText, false))
		in.Seconds = time.Since(s.curStart).Seconds()
	}
	s.curMu.Unlock()
	return in
}

// setUser changes the session's user (session goroutine only).
func (s *Session) setUser(u *User) {
	s.user = u
	s.userStats = nil
	s.curMu.Lock()
	s.curUser = ""
	if u != nil {
		s.curUser = u.Name
	}
	s.curMu.Unlock()
}

// userName is the session's user, for other goroutines ("" before login).
func (s *Session) userName() string {
	s.curMu.Lock()
	defer s.curMu.Unlock()
	return s.curUser
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
		if s.watch != nil {
			s.watch.Stop()
		}
	}()
	defer s.releaseAll()
	defer s.resetPrev()
	defer s.recoverPanic()
	s.srv.Stats.Connections.Add(1)
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
			return
		}
		ticket, release, timeout = tk, tk.release, g.o().HandshakeTimeout
	}
	defer release()
	hctx, cancel := context.WithTimeout(ctx, timeout)
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
		return
	}
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
	s.sessionTrack = s.caps&mysqlproto.CapabilityClientSessionTrack != 0
	s.resetTrack()
	s.multiStmts = s.caps&mysqlproto.CapabilityClientMultiStatements != 0
	s.key = backend.Key{User: hello.User, Flavour: hello.Flavour(), Collation: hello.Collation}
	s.state.SetSchema(hello.DB)
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
		s.noteStmt = cmd == mysqlproto.ComQuery || cmd == mysqlproto.ComStmtExecute || cmd == mysqlproto.ComInitDB
		s.pureDiag, s.clearDiag, s.ranOnPrev = false, false, false
		s.stmtText = nil
		s.execUnseen = false
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

// autoIsNull reports whether the session has sql_auto_is_null on and the
// statement tests something for IS NULL.
func (s *Session) autoIsNull(info sqlscan.Info) bool {
	return info.Facts&sqlscan.FactIsNull != 0 && s.autoIsNullOn()
}

// autoIsNullOn reports whether the session has sql_auto_is_null on.
func (s *Session) autoIsNullOn() bool {
	for _, v := range s.state.Vars() {
		if v.Name == "sql_auto_is_null" {
			return v.Value == "1" || strings.EqualFold(v.Value, "ON")
		}
	}
	return false
}

// bound reports whether the session must keep its server connection.
func (s *Session) bound() bool {
	if s.inTrx || s.autocommitOff || s.tempTables > 0 {
		return true
	}
	for _, n := range s.pins {
		if n > 0 {
			return true
		}
	}
	return false
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
	s.beginStmt()
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
		s.rewriteBuf = mysqlproto.AppendQuery(s.rewriteBuf[:0], mysqlproto.Query{Text: res.Query})
		pkt = s.rewriteBuf
		cq, _ = mysqlproto.ParseQuery(pkt)
		ri := sqlscan.Scan(res.Query)
		ri.Digest = info.Digest
		info = ri
	}
	if info.Flags&sqlscan.FlagMulti != 0 && !s.multiStmts {
		run.hostgroup = "refused"
		err := s.sendError(mysqlproto.NewError(mysqlproto.ERParseError, mysqlproto.SSSyntax,
			"You have an error in your SQL syntax: multi-statements are off for this connection (CLIENT_MULTI_STATEMENTS)"))
		s.finishStmt(p, &run)
		return err
	}
	if info.Class == sqlscan.ClassSet {
		// SET @@x = v: sent as SET @@SESSION.x = v, which the server's
		// session tracker reports (the unqualified form it does not, and
		// the value would stay on the pooled connection unseen).
		if out, ok := info.QualifySessionSets(mysqlproto.AppendQuery(s.setBuf[:0], mysqlproto.Query{}), cq.Text); ok {
			s.setBuf = out
			pkt = out
			cq, _ = mysqlproto.ParseQuery(pkt)
		}
	}
	if info.Class == sqlscan.ClassRead && s.autoIsNull(info) {
		// sql_auto_is_null=1: WHERE auto_increment_col IS NULL finds the
		// row of the connection's LAST_INSERT_ID(): read where that is.
		info.Flags |= sqlscan.FlagLastInsertID | sqlscan.FlagSideEffect
	}
	s.nextTrxSet = info.Class == sqlscan.ClassSet && info.Facts&sqlscan.FactNextTrx != 0
	s.noWatch = info.Flags&sqlscan.FlagLoadLocal != 0
	s.pureDiag = pureDiagnostics(info)
	s.stmtText = cq.Text
	onPrev, rw := s.routePrev(ctx, info, cq.Text)
	if rw != nil {
		s.rewriteBuf = mysqlproto.AppendQuery(s.rewriteBuf[:0], mysqlproto.Query{Text: rw})
		pkt = s.rewriteBuf
		cq, _ = mysqlproto.ParseQuery(pkt)
	}
	s.rs.Bound = s.bound() || onPrev
	dec := router.Route(info, &s.rs, run.start)
	run.target, run.hostgroup = s.routeByRule(p, res.Route, dec.Target)
	var cacheKey []byte
	if res.CacheTTL > 0 && p.Cache != nil && run.target != router.Keep && cacheable(info) {
		cacheKey = s.cacheKey(cq.Text)
		if frames := p.Cache.Get(cacheKey, run.start); frames != nil {
			s.srv.Stats.CacheHits.Add(1)
			run.cached, run.hostgroup = true, "cache"
			if err := s.client.WriteFrame(frames); err != nil {
				return errClient{err}
			}
			s.finishStmt(p, &run)
			return nil
		}
		s.startCapture(p)
	}
	s.stmtTimeout, s.timeoutRule = res.Timeout, res.Rule
	run.mirror = res.Mirror
	err := s.execute(ctx, pkt, info, run.target, respQuery)
	s.stmtTimeout = 0
	if s.capturing {
		if err != nil {
			s.capturing = false
		}
		s.storeCapture(p, cacheKey, res.CacheTTL)
	}
	s.finishStmt(p, &run)
	if err != nil {
		return err
	}
	if info.Flags&sqlscan.FlagRelease != 0 && (info.Class == sqlscan.ClassCommit || info.Class == sqlscan.ClassRollback) {
		// COMMIT RELEASE: the server closed the connection, and so does
		// the client session.
		if s.conn != nil {
			s.dropConn(s.conn)
		}
		_ = s.client.Flush()
		return errQuit
	}
	return nil
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
		s.noteOutcome(c, out)
		if err != nil {
			var eb errBackend
			// Only a command the server never had whole goes to another
			// server: one it read may have run, or made it close the
			// connection (a packet over max_allowed_packet).
			if errors.As(err, &eb) && !out.reached && !out.sent && target == router.Reader && attempt == 0 && !s.bound() {
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
	s.running.Store(c)
	defer s.running.Store(nil)
	epoch := s.srv.replyEpoch(c.Index)
	c.Seq = 0
	if err := c.WritePacket(pkt); err != nil {
		return s.sendFailed(c, pkt, err)
	}
	s.srv.bal.Begin(c.Index)
	s.armWatch()
	var timer *time.Timer
	var killed chan struct{}
	if s.stmtTimeout > 0 {
		killed = make(chan struct{})
		timer = time.AfterFunc(s.stmtTimeout, func() {
			defer close(killed)
			s.timedOut.Store(true)
			s.srv.Stats.Timeouts.Add(1)
			s.killRunning(c)
		})
	}
	// The command goes out and the reply is awaited in one poller wait
	// (mysqlproto.Conn.FlushAwait): no read is tried before the server
	// can have answered.
	var out outcome
	if s.client.Pending() > 0 {
		// What the client has waits no longer than the server's answer.
		if err := s.client.Flush(); err != nil {
			c.Broken = true // the command is queued but never sent
			s.disarmWatch()
			s.srv.bal.End(c.Index)
			if timer != nil && !timer.Stop() {
				<-killed
				s.timedOut.Store(false)
			}
			return outcome{}, errClient{err}
		}
	}
	awaited, err := c.FlushAwait()
	if err != nil {
		out, err = s.sendFailed(c, pkt, err)
	} else {
		if !awaited {
			// The reply cannot be there yet: let other sessions run
			// first, so the read below usually finds it.
			runtime.Gosched()
		}
		out, err = s.forward(c, kind)
		// The server had the command whole. If it dropped the connection
		// before any byte reached the client, a read may still go to
		// another server (the caller decides) when its size cannot be the
		// reason (a replica killed or restarted mid-read, as ProxySQL's
		// and MaxScale's read retries allow); one over (or of unknown
		// relation to) the server's max_allowed_packet is never resent.
		out.reached = err == nil || !s.underMaxPacket(c.Index, len(pkt))
		if err == nil {
			s.srv.noteReply(c.Index, epoch) // passive evidence for the monitor (activity.go)
		}
	}
	if timer != nil && !timer.Stop() {
		// The kill may land after the statement ended: never reuse the
		// connection it may hit.
		<-killed
		s.timedOut.Store(false)
		if !s.bound() {
			c.Broken = true
		}
	}
	s.disarmWatch()
	s.srv.bal.End(c.Index)
	return out, err
}

// watchAfter is how long a statement runs before Vigil starts watching its
// client for a disconnect.
const watchAfter = time.Second

// armWatch starts a timer; if the statement is still running when it
// fires, a goroutine watches the client socket and kills the server-side
// query when the client goes away (a client that vanishes mid-query must
// not leave work running on the server).
func (s *Session) armWatch() {
	if s.watch == nil {
		s.watchDone = make(chan struct{}, 1)
		s.watch = time.AfterFunc(time.Hour, s.watchClient)
	}
	s.watchOn.Store(true)
	s.watch.Reset(watchAfter)
}

func (s *Session) disarmWatch() {
	s.watchOn.Store(false)
	if s.watch.Stop() {
		return // never fired
	}
	// The watcher may be blocked reading the client: unblock and wait.
	_ = s.client.NetConn().SetReadDeadline(time.Unix(1, 0))
	<-s.watchDone
	_ = s.client.NetConn().SetReadDeadline(time.Time{})
}

func (s *Session) watchClient() {
	defer func() { s.watchDone <- struct{}{} }()
	if !s.watchOn.Load() || s.noWatch {
		return
	}
	err := s.client.ReadAhead()
	if err == nil || !s.watchOn.Load() {
		return // data (a pipelined command) or we were stopped
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return
	}
	if c := s.running.Load(); c != nil {
		s.srv.log.Info("client went away during a statement; killing it on the server", "session", s.id, "server", c.Server)
		s.killRunning(c)
	}
}

// failed handles an I/O failure during a statement.
func (s *Session) failed(c *backend.Conn, err error, out outcome) error {
	var eb errBackend
	if errors.As(err, &eb) {
		s.srv.serverLost(c.Index)
		wasBound := s.bound()
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
		s.inTrx = out.status&mysqlproto.ServerStatusInTrans != 0
		s.autocommitOff = out.status&mysqlproto.ServerStatusAutocommit == 0
	}
	if out.err == nil {
		s.updatePins(info, out)
		if (info.Class == sqlscan.ClassWrite || info.Class == sqlscan.ClassCommit) && !s.inTrx {
			// With GTID read-your-writes the new last_gtid says where reads
			// must wait; without one (binary log off), fall back to the
			// session window.
			if s.user.RYW == router.RYWSession || ((s.user.RYW == router.RYWGTID || s.user.RYW == router.RYWGlobal) && !s.lastGTIDFresh) {
				s.lastWrite = time.Now()
			}
		}
	}
	s.lastGTIDFresh = false
	if s.pins[PinFoundRows] > 0 && info.Flags&sqlscan.FlagCalcFoundRows == 0 {
		s.pins[PinFoundRows] = 0
	}
	s.rs.LastWrite = s.lastWrite
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
		if !s.bound() {
			c.Broken = true // this one too, once the session is done with it
		}
	}
	if (s.trackTouched || (info.Flags&sqlscan.FlagSessionTrack != 0 && info.Class == sqlscan.ClassSet)) && !c.Broken {
		s.restoreTracking(c, s.stmtText)
	}
	if info.Flags&sqlscan.FlagGlobalSet != 0 && out.err == nil && info.Facts&sqlscan.FactTrackName != 0 {
		s.refreshTrackDefaults(c)
	}
	if out.insertID != 0 {
		// The connection's LAST_INSERT_ID() is the session's now, unless
		// the id was an explicit value (not generated: the server keeps
		// the previous one) and another session set that one: then only
		// Vigil's own record may answer (no other client's id).
		s.insertTrusted = c.InsertToken == 0 || c.InsertSession == s.id
		s.noteInsert(c, out.insertID)
	}
	s.prevValuesFetched = false
	// The statement's Info decides, except for an execute whose text the
	// session did not keep: that was judged at its prepare (execUnseen),
	// and only a multi-statement counts again, as before.
	unseen := s.execUnseen || info.Flags&sqlscan.FlagMulti != 0 || s.stmtText != nil && info.SetsInsertIDUnseen()
	s.execUnseen = false
	if !c.Broken && (s.insertPending || unseen) {
		// The statement may have set LAST_INSERT_ID() unseen. While the
		// session keeps c, its reads of it run there (asked only when one
		// comes, prev.go): Vigil's own query would count in the session's
		// status counters. Once c may go to others, ask now.
		s.insertPending = s.bound()
		if !s.insertPending {
			s.fetchInsertID(c)
		}
	}
	if s.noteStmt {
		s.noteStmt = false
		if hold, expire := s.noteLast(info, out); hold && !s.bound() && !c.Broken {
			s.keepPrev(c, expire)
			return
		}
		// Remembered so that a statement reading what this one left
		// (FOUND_ROWS(), ROW_COUNT(), the diagnostics area) can take the
		// connection back if nobody used it since (prev.go).
		s.lastConn, s.lastPuts = c, c.NextPut()
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
