package frontend

import (
	"context"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/qcache"
	"github.com/vigil-db/vigil/internal/qlog"
	"github.com/vigil-db/vigil/internal/qstats"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/rules"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// Processing is a listener's query processing: rules, the server groups
// they name, digest statistics, the result cache and the query log. It is
// swapped as a whole on reload; any part may be nil (off).
type Processing struct {
	Rules   *rules.Set
	Groups  map[string][]int // server group -> server indices
	Digests *qstats.Store
	Cache   *qcache.Cache
	Log     QueryLog
	// LogQueries logs every statement unless a rule says otherwise.
	LogQueries bool
	// LogAuth logs every login attempt.
	LogAuth bool
}

// QueryLog takes query log entries without blocking (qlog.Logger).
type QueryLog interface {
	Log(e *qlog.Entry) bool
}

// SetProcessing swaps the query processing (hot reload).
func (s *Server) SetProcessing(p Processing) { s.proc.Store(&p) }

// ProcessingNow returns the processing in force.
func (s *Server) ProcessingNow() *Processing { return s.proc.Load() }

// stmtResult is how the statement in flight ended, for statistics and
// the query log.
type stmtResult struct {
	err    uint16 // the error code the client got (0: none)
	errMsg string
	server string // where it ran ("" for nowhere)
	idx    int    // that server's index, -1 for none
	rows   int64  // rows sent, or affected
}

// begin resets the outcome for a new statement.
func (r *stmtResult) begin() { *r = stmtResult{idx: -1} }

// note records where a statement ran and how it ended.
func (r *stmtResult) note(server string, idx int, out outcome) {
	r.server, r.idx = server, idx
	r.err, r.errMsg = 0, "" // (an earlier attempt's error is not the outcome)
	if out.err != nil {
		r.err, r.errMsg = out.err.Code, out.err.Message
	}
	if out.rows > 0 {
		r.rows = out.rows
	} else {
		r.rows = int64(out.affected)
	}
}

// stmtTimeout is a rule's timeout for the statement in flight.
type stmtTimeout struct {
	limit time.Duration // 0: none
	rule  string        // the rule that set it
	fired atomic.Bool   // the timer killed the statement (its timer goroutine)
}

// replyCapture collects a reply as the client gets it, for the query
// cache; it gives up past max bytes.
type replyCapture struct {
	buf []byte
	on  bool
	max int
}

// start begins capturing a reply of at most max bytes.
func (c *replyCapture) start(max int) {
	c.buf = c.buf[:0]
	c.on = true
	c.max = max
}

// frame appends one frame to the reply; past max the capture is
// abandoned.
func (c *replyCapture) frame(f []byte) {
	c.buf = append(c.buf, f...)
	if len(c.buf) > c.max {
		c.on = false
		c.buf = c.buf[:0]
	}
}

// stripped records a frame Vigil rewrote (session state removed).
func (c *replyCapture) stripped(seq byte, payload []byte) {
	n := len(payload)
	c.buf = append(c.buf, byte(n), byte(n>>8), byte(n>>16), seq)
	c.frame(payload)
}

// end stops the capture and returns the whole reply when keep and there
// is one (valid until the next start).
func (c *replyCapture) end(keep bool) []byte {
	var reply []byte
	if c.on && keep && len(c.buf) > 0 {
		reply = c.buf
	}
	c.on = false
	if cap(c.buf) > 256<<10 {
		c.buf = nil // do not keep a big buffer per idle session
	}
	return reply
}

// stmtRun is what the session remembers about the statement in flight, for
// statistics and the log.
type stmtRun struct {
	start     time.Time
	digest    uint64
	query     []byte // as the client sent it
	hostgroup string
	rule      string
	log       int8
	cached    bool
	mirror    string
	target    router.Target
}

// setCurrent records the statement in flight for session listings.
func (s *Session) setCurrent(q []byte, start time.Time) {
	s.cur.begin(q, start)
}

// finishStmt records a finished statement in the digest statistics and
// the query log, and mirrors it when a rule asked for that.
func (s *Session) finishStmt(p *Processing, r *stmtRun) {
	s.cur.end()
	now := time.Now()
	d := now.Sub(r.start)
	hg := r.hostgroup
	if r.target == router.Keep && s.result.idx >= 0 {
		hg = "reader"
		if snap := s.srv.topo.Load(); snap != nil && snap.Writer == s.result.idx {
			hg = "writer"
		}
	}
	st := s.srv.Stats
	ri := routeIndex(hg)
	st.Latency[ri].Observe(d)
	if s.result.err != 0 {
		st.RouteErrors[ri].Add(1)
	}
	if s.userStats == nil {
		s.userStats = st.User(s.user.Name)
	}
	s.userStats.Queries.Add(1)
	if s.result.err != 0 {
		s.userStats.Errors.Add(1)
	}
	if s.result.idx >= 0 && s.result.idx < len(st.ServerQueries) {
		st.ServerQueries[s.result.idx].Add(1)
		if s.result.err != 0 {
			st.ServerErrors[s.result.idx].Add(1)
		}
	}
	if p.Digests != nil {
		p.Digests.Record(qstats.Key{Digest: r.digest, User: s.user.Name, Schema: s.vars.state.Schema, Hostgroup: hg},
			r.query, d, s.result.rows, s.result.err, now)
	}
	s.logStmt(p, r, now)
	if r.mirror != "" && s.result.err == 0 {
		s.srv.mirror.enqueue(s, p.Groups[r.mirror], r.query)
	}
}

// logStmt writes the query-log record of a finished statement (when the
// log and the rules want one): every statement a client sent gets one,
// with its outcome, whether a server answered it or Vigil refused it
// (Entry.Refused: an error and no server had it).
func (s *Session) logStmt(p *Processing, r *stmtRun, now time.Time) {
	if p.Log == nil || !(r.log > 0 || (r.log == 0 && p.LogQueries)) {
		return
	}
	e := &s.logEntry
	*e = qlog.Entry{Time: now, Kind: qlog.KindQuery, Session: s.id, Cluster: s.opts().Cluster, User: s.user.Name,
		Client: s.remote, Schema: s.vars.state.Schema, Digest: r.digest, Statement: r.query, Server: s.result.server,
		Duration: now.Sub(r.start), Rows: s.result.rows, ErrCode: s.result.err, Message: s.result.errMsg, Rule: r.rule, Cached: r.cached,
		Refused: s.result.err != 0 && s.result.server == ""}
	if !p.Log.Log(e) {
		s.srv.Stats.LogDrops.Add(1)
	}
}

// logAuth records a login attempt.
func (s *Session) logAuth(user string, err error) {
	p := s.srv.proc.Load()
	if p == nil || p.Log == nil || !p.LogAuth {
		return
	}
	e := qlog.Entry{Time: time.Now(), Kind: qlog.KindAuth, Session: s.id, Cluster: s.opts().Cluster, User: user,
		Client: s.remote, Success: err == nil}
	if err != nil {
		e.ErrCode = mysqlproto.ERAccessDeniedError
		e.Message = err.Error()
		if se, ok := err.(*mysqlproto.SQLError); ok {
			e.ErrCode, e.Message = se.Code, se.Message
		}
	}
	if !p.Log.Log(&e) {
		s.srv.Stats.LogDrops.Add(1)
	}
}

// clientAddr parses the client's address once, for rules.
func (s *Session) clientAddr() netip.Addr {
	if !s.clientIPDone {
		s.clientIPDone = true
		if ap, err := netip.ParseAddrPort(s.remote); err == nil {
			s.clientIP = ap.Addr().Unmap()
		}
	}
	return s.clientIP
}

// applyRules runs the rules over a statement. It returns the rules'
// result; rewritten statements come back in res.Query.
func (s *Session) applyRules(p *Processing, q []byte, digest uint64) rules.Result {
	if p.Rules.Len() == 0 {
		return rules.Result{}
	}
	in := rules.Input{User: s.user.Name, Schema: s.vars.state.Schema, Client: s.clientAddr(), Digest: digest, Query: q}
	res := p.Rules.Apply(&in)
	if res.Query != nil {
		s.srv.Stats.Rewrites.Add(1)
	}
	return res
}

// checkRules applies the rules to q, a statement whose run is starting,
// and answers it when one blocks it (blocked: the client's answer was
// sent, err is the session's).
func (s *Session) checkRules(p *Processing, q []byte, run *stmtRun) (res rules.Result, blocked bool, err error) {
	res = s.applyRules(p, q, run.digest)
	run.rule, run.log = res.Rule, res.Log
	if res.Block == nil {
		return res, false, nil
	}
	run.hostgroup = "blocked"
	err = s.blocked(res.Block, res.Rule)
	s.finishStmt(p, run)
	return res, true, err
}

// blocked answers a statement a rule refuses; no server sees it.
func (s *Session) blocked(b *rules.Block, rule string) error {
	s.srv.Stats.Blocked.Add(1)
	s.result.err, s.result.errMsg = b.Code, b.Message
	s.srv.log.Debug("statement blocked by a rule", "session", s.id, "rule", rule)
	return s.sendError(mysqlproto.NewError(b.Code, b.SQLState, "%s", b.Message))
}

// routeByRule turns a rule's route into a target; transactions and pins
// keep their server whatever the rules say.
func (s *Session) routeByRule(p *Processing, route string, target router.Target) (router.Target, string) {
	if route == "" || target == router.Keep {
		return target, target.String()
	}
	switch route {
	case "writer":
		return router.Writer, route
	case "reader":
		return router.Reader, route
	}
	s.group = p.Groups[route]
	return router.Group, route
}

// cacheable: only plain reads may be cached (no locks, side effects,
// user variables or several statements).
func cacheable(info sqlscan.Info) bool {
	const unsafe = sqlscan.FlagForUpdate | sqlscan.FlagSideEffect | sqlscan.FlagMulti | sqlscan.FlagGetLock |
		sqlscan.FlagCalcFoundRows | sqlscan.FlagFoundRows | sqlscan.FlagUserVar | sqlscan.FlagXA | sqlscan.FlagExplainAnalyze |
		sqlscan.FlagDiagnostics | sqlscan.FlagSessionStatus | sqlscan.FlagLastInsertID | sqlscan.FlagRowCount |
		sqlscan.FlagConnectionID
	return info.Class == sqlscan.ClassRead && info.Flags&unsafe == 0
}

// Protocols of a cached reply: text (COM_QUERY) or binary rows
// (COM_STMT_EXECUTE) never share an entry.
const (
	protoText   = 0
	protoBinary = 2
)

// cacheKey is everything that changes a read's result: cluster, user,
// schema, every session variable (by hash), the protocol flavour the
// reply is encoded for, and the statement.
func (s *Session) cacheKey(q []byte) []byte {
	k := s.cacheKeyFor(protoText, "")
	k = append(k, q...)
	s.cacheKeyBuf = k
	return k
}

// cacheKeyFor starts a key in cacheKeyBuf: the session's part, the
// protocol, and text.
func (s *Session) cacheKeyFor(proto byte, text string) []byte {
	k := s.cacheKeyBuf[:0]
	k = append(k, s.opts().Cluster...)
	k = append(k, 0)
	k = append(k, s.user.Name...)
	k = append(k, 0)
	k = append(k, s.vars.state.Schema...)
	k = append(k, 0)
	h := s.vars.state.Hash()
	f := s.key.Flavour
	for i := range 8 {
		k = append(k, byte(h>>(8*i)))
	}
	for i := range 8 {
		k = append(k, byte(f>>(8*i)))
	}
	k = append(k, s.key.Collation)
	if s.vars.sessionTrack {
		proto |= 1
	}
	k = append(k, proto)
	k = append(k, text...)
	s.cacheKeyBuf = k
	return k
}

// startCapture begins capturing the reply about to be forwarded.
func (s *Session) startCapture(p *Processing) { s.capture.start(int(p.Cache.MaxEntry())) }

// storeCapture ends a capture and stores the reply under key when the
// statement succeeded and the whole reply was captured.
func (s *Session) storeCapture(p *Processing, key []byte, ttl time.Duration) {
	if reply := s.capture.end(s.result.err == 0); reply != nil {
		p.Cache.Put(key, reply, ttl, time.Now())
	}
}

// timeoutError is what a client gets when a rule's timeout killed its
// statement.
func (s *Session) timeoutError(c *backend.Conn) *mysqlproto.SQLError {
	return mysqlproto.NewError(mysqlproto.ERVigilStatementTimeout, mysqlproto.SSVigilTimeout,
		"Vigil: statement ran longer than %s (timeout of rule %s) and was killed on server %s",
		s.timeout.limit, s.timeout.rule, c.Server)
}

// mirrorer runs mirrored statements on a few workers, fire and forget: a
// full queue drops the statement (counted), never the client's time.
type mirrorer struct {
	srv     *Server
	jobs    chan mirrorJob
	started atomic.Bool
	// queued: bytes of statement text waiting in jobs (at most
	// mirrorMaxBytes: 1024 queued copies of 64 MiB statements would be
	// 64 GiB).
	queued atomic.Int64
}

// mirrorMaxBytes bounds the statement text queued for mirrors.
const mirrorMaxBytes = 64 << 20

type mirrorJob struct {
	members []int
	key     backend.Key
	schema  string
	query   string
}

const mirrorWorkers = 4

func (m *mirrorer) enqueue(s *Session, members []int, q []byte) {
	if len(members) == 0 || !m.started.Load() {
		return
	}
	n := int64(len(q))
	if m.queued.Add(n) > mirrorMaxBytes {
		m.queued.Add(-n)
		m.srv.Stats.MirrorDrops.Add(1)
		return
	}
	select {
	case m.jobs <- mirrorJob{members: members, key: s.key, schema: s.vars.state.Schema, query: string(q)}:
	default:
		m.queued.Add(-n)
		m.srv.Stats.MirrorDrops.Add(1)
	}
}

// run starts the workers; they stop with ctx.
func (m *mirrorer) run(ctx context.Context) {
	if m.started.Swap(true) {
		return // a second Serve (a new listen address) shares the workers
	}
	for range mirrorWorkers {
		m.srv.wg.Add(1)
		go func() {
			defer m.srv.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-m.jobs:
					m.queued.Add(-int64(len(j.query)))
					m.do(ctx, j)
				}
			}
		}()
	}
}

func (m *mirrorer) do(ctx context.Context, j mirrorJob) {
	snap := m.srv.topo.Load()
	idx, _ := m.srv.bal.PickIn(snap, j.members, -1)
	if idx < 0 {
		m.srv.Stats.MirrorErrors.Add(1)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pool := m.srv.pool(idx)
	var st backend.State
	st.SetSchema(j.schema)
	c, err := pool.Get(cctx, j.key, &st)
	if err != nil {
		m.srv.Stats.MirrorErrors.Add(1)
		return
	}
	if err := c.Sync(cctx, &st); err == nil {
		_, err = c.Exec(cctx, j.query)
	}
	if err != nil {
		m.srv.Stats.MirrorErrors.Add(1)
	} else {
		m.srv.Stats.Mirrored.Add(1)
	}
	if c.Broken {
		pool.Discard(c)
		return
	}
	pool.Put(c)
}
