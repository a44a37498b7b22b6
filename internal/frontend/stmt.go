package frontend

import (
	"bytes"
	"context"
	"errors"
	"time"
	"unsafe"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sqlscan"
	"github.com/vigil-db/vigil/internal/topology"
)

// clientStmt is a prepared statement as the client knows it. Server
// connections each have their own statement id for the same text; the
// statement is prepared again, transparently, on whichever connection
// serves an execute.
type clientStmt struct {
	id      uint32
	query   string
	info    sqlscan.Info
	params  uint16
	columns uint16
	// types are the parameter types of the last execute that sent them.
	types []byte
	// longData: parameters were sent with COM_STMT_SEND_LONG_DATA and wait
	// for the execute on the same connection.
	longData bool
	cursor   bool
	// tooLarge: a COM_STMT_SEND_LONG_DATA packet was over the server's
	// max_allowed_packet and was not sent; the execute answers 1153.
	tooLarge bool

	// What the rules said at prepare time; they apply to every execute.
	digest  uint64
	orig    []byte // the text the client prepared (before any rewrite)
	route   string
	rule    string
	log     int8
	timeout time.Duration
	// cacheTTL: a cache_ttl rule matched; executes are served from and
	// stored in the query cache like text-protocol reads.
	cacheTTL time.Duration

	// prep is the session state (schema and variables) the statement was
	// prepared in: MariaDB binds names at prepare time, so every server
	// connection prepares it in that state (backend.StmtKey).
	prep backend.State
	// lastKey is the server statement the last execute ran (COM_STMT_FETCH
	// and COM_STMT_RESET go to it).
	lastKey backend.StmtKey

	// kill: a prepared KILL of a connection id, which is Vigil's (the
	// client's handshake id), not a server's: Vigil runs it at execute.
	kill      bool
	killID    uint64
	killQuery bool
	// insertUnseen: executing it may set LAST_INSERT_ID() without an OK
	// packet saying so (sqlscan.Info.SetsInsertIDUnseen: CALL, LOAD DATA, …).
	insertUnseen bool
	// isNullRead: a read that tests IS NULL, which with sql_auto_is_null
	// on reads LAST_INSERT_ID() (execInfo).
	isNullRead bool
}

// missingObject reports server errors that a replica gives for an object
// it does not have yet (a table or column created a moment ago through
// another session, or before the replica applied it): the statement is
// tried again on the writer.
func missingObject(code uint16) bool {
	switch code {
	case 1146, // ER_NO_SUCH_TABLE
		1054, // ER_BAD_FIELD_ERROR
		1049, // ER_BAD_DB_ERROR
		1051, // ER_BAD_TABLE_ERROR
		1109, // ER_UNKNOWN_TABLE
		1176, // ER_KEY_DOES_NOT_EXITS
		1305, // ER_SP_DOES_NOT_EXIST
		1356, // ER_VIEW_INVALID
		4091, // ER_UNKNOWN_SEQUENCES
		// A grant made a moment ago on the primary may not have reached
		// the replica yet.
		1044, // ER_DBACCESS_DENIED_ERROR
		1142, // ER_TABLEACCESS_DENIED_ERROR
		1143: // ER_COLUMNACCESS_DENIED_ERROR
		return true
	}
	return false
}

func (s *Session) unknownStmt(id uint32) error {
	return s.sendError(mysqlproto.NewError(mysqlproto.ERUnknownStmtHandler, "HY000",
		"Unknown prepared statement handler (%d) given to mysqld_stmt_execute", id))
}

func (s *Session) stmtTarget(p *Processing, st *clientStmt) (router.Target, string) {
	s.rs.Bound = s.bind.bound()
	return s.routeByRule(p, st.route, router.Route(s.vars.execInfo(st), &s.rs, timeNow()).Target)
}

func (s *Session) comStmtPrepare(ctx context.Context, pkt []byte) error {
	prep, _ := mysqlproto.ParseStmtPrepare(pkt) // dispatch checked the command
	q := prep.Query
	info := sqlscan.Scan(q)
	// One copy of the text for the statement's life, shared by query and
	// orig (both read-only; a rewrite gives query its own): a 64 MiB
	// prepared statement is held once, not twice.
	orig := bytes.Clone(q)
	st := &clientStmt{query: unsafe.String(unsafe.SliceData(orig), len(orig)), info: info, digest: info.Digest, orig: orig,
		insertUnseen: info.SetsInsertIDUnseen(), isNullRead: info.Class == sqlscan.ClassRead && info.Facts&sqlscan.FactIsNull != 0}
	p := s.srv.proc.Load()
	s.result.begin()
	run := stmtRun{start: time.Now(), digest: info.Digest, query: q}
	res, blocked, err := s.checkRules(p, q, &run)
	if blocked {
		return err
	}
	// A prepare that fails, whoever refused it, gets its query-log record
	// here; one that succeeds gets one at each execute.
	prepared := false
	defer func() {
		if !prepared {
			if s.result.err == 0 {
				s.result.err, s.result.errMsg = mysqlproto.ERVigilBackendLost, "Vigil: lost connection to the server during the prepare"
			}
			s.logStmt(p, &run, time.Now())
		}
	}()
	st.route, st.rule, st.log, st.timeout, st.cacheTTL = res.Route, res.Rule, res.Log, res.Timeout, res.CacheTTL
	if st.info.Flags&sqlscan.FlagKill != 0 {
		if id, query, ok := st.info.KillTarget(); ok {
			// KILL takes Vigil's ids, prepared or not: never a server
			// thread that happens to have that number.
			prepared = true
			return s.prepareKill(st, id, query)
		}
		if bytes.Contains(pkt, []byte("?")) {
			return s.sendError(mysqlproto.NewError(mysqlproto.ERVigilUnsupported, mysqlproto.SSVigilUnsupported,
				"Vigil: KILL with a parameter cannot be prepared through Vigil; send KILL <id> as a statement"))
		}
	}
	pkt = st.rewriteText(res.Query, orig, pkt)
	if s.prepareDiagnostics(st) {
		defer s.dropPrevHeld()
	}
	ok, err := s.prepareOn(ctx, p, st, pkt)
	prepared = ok
	return err
}

// rewriteText gives st the text the server prepares: a rule's rewrite
// (query, nil for none) of orig, and SETs qualified; it returns the
// COM_STMT_PREPARE to send (pkt when unchanged).
func (st *clientStmt) rewriteText(query, orig, pkt []byte) []byte {
	text := orig // what st.info was scanned from
	if query != nil {
		st.query = string(query)
		ri := sqlscan.Scan(query)
		ri.Digest = st.info.Digest
		st.info, text = ri, query
		pkt = mysqlproto.AppendStmtPrepare(nil, mysqlproto.StmtPrepare{Query: query})
	}
	if st.info.Class == sqlscan.ClassSet {
		// As for text SETs (comQuery): the tracker reports only the
		// qualified form.
		if out, ok := st.info.QualifySessionSets(nil, text); ok {
			st.query = string(out)
			pkt = mysqlproto.AppendStmtPrepare(nil, mysqlproto.StmtPrepare{Query: out})
		}
	}
	return pkt
}

// prepareDiagnostics makes the prepare the session's previous statement
// for the diagnostics area, and reports whether it took the previous
// statement's connection for it (the caller gives it back if unused:
// dropPrevHeld).
//
// A prepare is a statement for the diagnostics area: MariaDB clears it
// (unless the statement prepared only reads it) and puts the prepare's
// own warnings and errors there (prev.go).
func (s *Session) prepareDiagnostics(st *clientStmt) bool {
	s.prev.stmtText = nil
	if pureDiagnostics(st.info) {
		return false
	}
	s.takePrev()
	s.prev.ranOnPrev = false
	s.prev.stmtText = []byte(st.query)
	if s.prev.held == nil && !s.bind.bound() {
		// A prepare does not change what FOUND_ROWS() or ROW_COUNT()
		// answer: on the previous statement's connection (when it is on
		// the server the prepare goes to) it keeps that connection the
		// one to reclaim for them.
		s.prev.held = s.reclaimLast()
	}
	return true
}

// prepareOn prepares st on a server, forwards the reply with the client's
// statement id, and registers st; prepared: it succeeded.
func (s *Session) prepareOn(ctx context.Context, p *Processing, st *clientStmt, pkt []byte) (prepared bool, _ error) {
	target := router.Writer
	if s.bind.bound() {
		target = router.Keep
	} else if st.info.Class == sqlscan.ClassRead && st.info.Flags&readOnWriter == 0 {
		target = router.Reader
	}
	target, _ = s.routeByRule(p, st.route, target)
	for attempt := 0; ; attempt++ {
		c, err := s.acquire(ctx, target, -1)
		if err != nil {
			return false, s.sendError(err)
		}
		if s.tooLarge(c.Index, len(pkt)) {
			return false, s.refuseTooLarge(c)
		}
		if o, err := s.send(c, pkt); err != nil {
			return false, s.failed(c, err, o)
		} else if o.sent {
			s.result.note(c.Server, c.Index, o)
			s.failedOn(c) // the server refused it (and closed the connection)
			return false, nil
		}
		// On a replica, an error for a missing object is not forwarded:
		// the replica may not have the object yet, the writer decides.
		onReplica := c.Index != writerIndex(s.srv.topo.Load()) && !s.bind.bound() && attempt == 0
		ss, se, err := s.readPrepare(c, true, s.stmts.nextID(), onReplica)
		s.result.note(c.Server, c.Index, outcome{err: se})
		if err != nil {
			return false, s.failed(c, err, outcome{sent: true})
		}
		if se != nil && onReplica && missingObject(se.Code) {
			s.srv.Stats.PrepareRetries.Add(1)
			s.release(c)
			target = router.Writer
			continue
		}
		if se == nil {
			s.registerPrepared(c, st, ss)
			return true, nil
		}
		s.failedOn(c) // the client got the server's error: SHOW WARNINGS shows it
		return false, nil
	}
}

// registerPrepared registers st, just prepared on c as ss, and gives c
// back or keeps it for the prepare's warnings.
func (s *Session) registerPrepared(c *backend.Conn, st *clientStmt, ss *backend.ServerStmt) {
	st.params, st.columns = ss.Params, ss.Columns
	st.prep = c.State.Clone()
	key := backend.KeyFor(&st.prep, st.query)
	st.lastKey = key
	s.stmts.add(st)
	if old := c.Stmt(key); old != nil {
		closeServerStmt(c, old.ID)
	}
	if evict := c.AddStmt(key, ss); evict != 0 {
		closeServerStmt(c, evict)
	}
	if s.prev.stmtText != nil && s.notePrepared(c, st.info, ss.Warnings) {
		return
	}
	if s.prev.ranOnPrev && !s.bind.bound() {
		s.prev.gaveBack(c)
	}
	s.release(c)
}

// prepareKill answers the prepare of KILL <id> itself (no parameters, no
// columns); the execute runs Vigil's KILL.
func (s *Session) prepareKill(st *clientStmt, id uint64, query bool) error {
	st.kill, st.killID, st.killQuery = true, id, query
	s.stmts.add(st)
	p := mysqlproto.AppendStmtPrepareOK(s.scratch[:0], mysqlproto.StmtPrepareOK{StmtID: st.id})
	s.client.Seq = 1
	if err := s.client.WritePacket(p); err != nil {
		return errClient{err}
	}
	return nil
}

// readOnWriter are the flags that send a read to the writer (router.Route).
const readOnWriter = sqlscan.FlagForUpdate | sqlscan.FlagSideEffect | sqlscan.FlagMulti | sqlscan.FlagGetLock |
	sqlscan.FlagCalcFoundRows | sqlscan.FlagFoundRows | sqlscan.FlagUserVar | sqlscan.FlagXA |
	sqlscan.FlagExplainAnalyze | sqlscan.FlagSessionStatus

// writerIndex is the writer of a snapshot, -1 if none.
func writerIndex(snap *topology.Snapshot) int {
	if snap == nil {
		return -1
	}
	return snap.Writer
}

// closeServerStmt queues COM_STMT_CLOSE (which has no reply).
func closeServerStmt(c *backend.Conn, id uint32) {
	c.Seq = 0
	var b [5]byte
	if c.WritePacket(mysqlproto.AppendStmtClose(b[:0], mysqlproto.StmtClose{StmtID: id})) != nil || c.Flush() != nil {
		c.Broken = true // a failed write: never pooled again
	}
}

// ensurePrepared returns the server statement for text (st's text, or a
// variant of it) on c, preparing it there first, in the state st was
// prepared in, if this connection has not seen it.
func (s *Session) ensurePrepared(ctx context.Context, c *backend.Conn, st *clientStmt, text string) (*backend.ServerStmt, *mysqlproto.SQLError, error) {
	key := backend.KeyFor(&st.prep, text)
	if ss := c.Stmt(key); ss != nil {
		st.lastKey = key
		return ss, nil, nil
	}
	// Prepare in the state the client prepared in, then come back to the
	// session's state for the execute.
	want := &st.prep
	if want.Schema == "" && c.State.Schema != "" {
		// Prepared without a default schema (so every name in it is
		// qualified); a connection cannot drop its schema: keep it.
		w := st.prep.Clone()
		w.Schema = c.State.Schema
		want = &w
	}
	switched := !c.State.Equal(want)
	if switched {
		if err := s.syncConn(ctx, c, want); err != nil {
			return nil, nil, err
		}
	}
	c.Seq = 0
	buf, start := c.BeginPacket()
	buf = append(buf, mysqlproto.ComStmtPrepare)
	buf = append(buf, text...)
	if err := c.FinishPacket(buf, start); err != nil {
		c.Broken = true
		return nil, nil, errBackend{err}
	}
	if err := c.Flush(); err != nil {
		c.Broken = true
		return nil, nil, errBackend{err}
	}
	ss, se, err := s.readPrepare(c, false, 0, false)
	if err == nil && switched {
		if serr := s.syncConn(ctx, c, &s.vars.state); serr != nil {
			return nil, nil, serr
		}
	}
	if err != nil || se != nil {
		return nil, se, err
	}
	if evict := c.AddStmt(key, ss); evict != 0 {
		closeServerStmt(c, evict)
	}
	st.lastKey = key
	return ss, nil, nil
}

// syncConn makes c's state want, for a statement Vigil runs on the
// session's behalf: a server error comes back as *SQLError, anything else
// loses the connection.
func (s *Session) syncConn(ctx context.Context, c *backend.Conn, want *backend.State) error {
	cctx, cancel := context.WithTimeout(ctx, s.opts().ConnectTimeout)
	defer cancel()
	if err := c.Sync(cctx, want); err != nil {
		var se *mysqlproto.SQLError
		if errors.As(err, &se) {
			return se
		}
		c.Broken = true
		return errBackend{err}
	}
	return nil
}

func (s *Session) comStmtExecute(ctx context.Context, pkt []byte) error {
	ex, bad := mysqlproto.ParseStmtExecute(pkt)
	if bad != nil {
		return s.sendError(bad)
	}
	st := s.stmts.get(ex.StmtID)
	if st == nil {
		return s.unknownStmt(ex.StmtID)
	}
	s.srv.Stats.Queries.Add(1)
	if st.kill {
		return s.kill(ctx, st.killID, st.killQuery)
	}
	x := execCall{st: st, ex: ex, pkt: pkt}
	// Parameter block: null bitmap, new-params-bound flag, types, values.
	if st.params > 0 {
		if bad := x.params.Parse(ex.Params, st.params); bad != nil {
			return s.sendError(bad)
		}
		if x.params.NewParamsBound() {
			st.types = append(st.types[:0], x.params.Types...)
		}
	}
	p := s.srv.proc.Load()
	s.result.begin()
	run := stmtRun{start: time.Now(), digest: st.digest, query: st.orig, rule: st.rule, log: st.log}
	s.setCurrent(st.orig, run.start)
	x.info = s.vars.execInfo(st)
	target, hg := s.stmtTarget(p, st)
	run.target, run.hostgroup = target, hg
	s.timeout.limit, s.timeout.rule = st.timeout, st.rule
	defer func() {
		s.timeout.limit = 0
		s.capture.on = false
		s.finishStmt(p, &run)
	}()
	if served, err := s.execCached(p, &x, target, &run); served {
		return err
	}
	x.text = st.query
	if x.info.Flags&(sessionScoped|sqlscan.FlagConnectionID|sqlscan.FlagSessionTrack|sqlscan.FlagGlobalSet) != 0 || s.prev.lastDiag {
		q := []byte(st.query)
		s.prev.stmtText = q
		s.prev.pureDiag = pureDiagnostics(x.info)
		onPrev, rw := s.routePrev(ctx, x.info, q)
		if onPrev {
			target, run.target = router.Keep, router.Keep
		}
		if rw != nil {
			x.text = string(rw)
		}
	}
	s.cur.noWatch = x.info.Flags&sqlscan.FlagLoadLocal != 0
	s.prev.execUnseen = st.insertUnseen
	s.cursorReq = ex.Flags&mysqlproto.CursorTypeReadOnly != 0
	defer func() { s.cursorReq = false }()
	return s.executeOn(ctx, p, &x, target)
}

// execCall is one COM_STMT_EXECUTE on its way to a server.
type execCall struct {
	st       *clientStmt
	ex       mysqlproto.StmtExecute
	params   mysqlproto.ExecuteParams
	pkt      []byte       // the command as the client sent it
	text     string       // the text to prepare (st.query, or with Vigil's values in it)
	info     sqlscan.Info // execInfo
	cacheKey []byte       // the query-cache key the reply is stored under, or nil
}

// execCached serves an execute from the query cache (served), or starts
// capturing its reply for it (x.cacheKey): outside transactions and
// pins, without a cursor or parameters sent as long data; the key has
// the statement's text and the parameters' types and values.
func (s *Session) execCached(p *Processing, x *execCall, target router.Target, run *stmtRun) (served bool, _ error) {
	st := x.st
	if st.cacheTTL <= 0 || p.Cache == nil || target == router.Keep || x.ex.Flags != 0 || st.longData || !cacheable(x.info) {
		return false, nil
	}
	x.cacheKey = s.stmtCacheKey(st, &x.params)
	if frames := p.Cache.Get(x.cacheKey, run.start); frames != nil {
		s.srv.Stats.CacheHits.Add(1)
		run.cached, run.hostgroup = true, "cache"
		if err := s.client.WriteFrame(frames); err != nil {
			return true, errClient{err}
		}
		return true, nil
	}
	s.startCapture(p)
	return false, nil
}

// executeOn runs x on a server chosen for target: prepared there first
// if needed, retried on the writer when a replica lacks an object, or on
// another reader when a read's server failed before the reply.
func (s *Session) executeOn(ctx context.Context, p *Processing, x *execCall, target router.Target) error {
	st := x.st
	exclude := -1
	for attempt := 0; ; attempt++ {
		c, err := s.acquire(ctx, target, exclude)
		if err != nil {
			return s.sendError(err)
		}
		grow := 0
		if !x.params.NewParamsBound() {
			grow = 2 * int(st.params) // rewriteExecute may add the types
		}
		if s.tooLarge(c.Index, len(x.pkt)+grow) || s.tooLarge(c.Index, len(x.text)+1) || st.tooLarge {
			return s.refuseExecute(c, st)
		}
		if err := s.clearDiagnostics(ctx, c); err != nil {
			return s.prepFailed(c, err)
		}
		ss, se, err := s.ensurePrepared(ctx, c, st, x.text)
		s.result.note(c.Server, c.Index, outcome{err: se})
		if err != nil {
			return s.failed(c, err, outcome{})
		}
		if se != nil {
			if target == router.Reader && attempt == 0 && missingObject(se.Code) && !s.bind.bound() {
				// The replica lacks an object the statement needs (not
				// replicated yet): the writer decides.
				s.srv.Stats.PrepareRetries.Add(1)
				s.release(c)
				target = router.Writer
				continue
			}
			s.failedOn(c)
			return s.sendError(se)
		}
		out := s.rewriteExecute(x.pkt, x.ex, &x.params, ss, st)
		st.longData = false
		o, err := s.roundTrip(c, out, respExecute)
		s.result.note(c.Server, c.Index, o)
		if err != nil {
			var eb errBackend
			if asBackend(err, &eb) && !o.reached && !o.sent && target == router.Reader && attempt == 0 && !s.bind.bound() {
				s.srv.Stats.ReadRetries.Add(1)
				s.dropConn(c)
				exclude = c.Index
				continue
			}
			return s.failed(c, err, o)
		}
		st.cursor = o.cursor && x.ex.Flags&mysqlproto.CursorTypeReadOnly != 0
		s.stmts.noteHeld(st)
		s.updateStmtPins()
		s.after(c, x.info, o)
		if x.cacheKey != nil {
			s.storeCapture(p, x.cacheKey, st.cacheTTL)
		}
		return nil
	}
}

// refuseExecute answers 1153 for an execute over the server's
// max_allowed_packet (or whose long data was), without sending it.
func (s *Session) refuseExecute(c *backend.Conn, st *clientStmt) error {
	if ss := c.Stmt(st.lastKey); st.tooLarge && ss != nil {
		// The server holds the parameters' other long data: closing its
		// statement drops them (the next execute prepares it again).
		closeServerStmt(c, ss.ID)
		c.DropStmt(st.lastKey)
	}
	st.tooLarge, st.longData = false, false
	s.updateStmtPins()
	return s.refuseTooLarge(c)
}

// rewriteExecute builds the execute packet for the server: its statement
// id, and the parameter types if this server statement last saw others.
func (s *Session) rewriteExecute(pkt []byte, ex mysqlproto.StmtExecute, params *mysqlproto.ExecuteParams, ss *backend.ServerStmt, st *clientStmt) []byte {
	sendTypes := false
	if st.params > 0 {
		if params.NewParamsBound() {
			ss.LastTypes = append(ss.LastTypes[:0], st.types...)
		} else if !bytes.Equal(ss.LastTypes, st.types) && len(st.types) > 0 {
			sendTypes = true
			ss.LastTypes = append(ss.LastTypes[:0], st.types...)
		}
	}
	if !sendTypes {
		mysqlproto.PutStmtID(pkt, ss.ID)
		return pkt
	}
	sent := *params
	sent.Types = st.types
	ex.StmtID, ex.Params = ss.ID, nil
	out := mysqlproto.AppendExecuteParams(mysqlproto.AppendStmtExecute(s.scratch[:0], ex), sent)
	s.scratch = out
	return out
}

func (s *Session) updateStmtPins() {
	s.countPins(s.bind.setStmtPins(s.stmts.held()))
}

func (s *Session) comStmtSendLongData(ctx context.Context, pkt []byte) error {
	ld, bad := mysqlproto.ParseStmtSendLongData(pkt)
	if bad != nil {
		return nil // no reply to this command, ever
	}
	st := s.stmts.get(ld.StmtID)
	if st == nil {
		return nil
	}
	target, _ := s.stmtTarget(s.srv.proc.Load(), st)
	c, err := s.acquire(ctx, target, -1)
	if err != nil {
		return nil
	}
	ss, se, err := s.ensurePrepared(ctx, c, st, st.query)
	if err != nil || se != nil {
		s.release(c)
		return nil
	}
	if s.tooLarge(c.Index, len(pkt)) {
		// The server would close the connection over it: the execute
		// answers 1153 instead, without sending it.
		st.tooLarge = true
	} else {
		mysqlproto.PutStmtID(pkt, ss.ID)
		c.Seq = 0
		if err := c.WritePacket(pkt); err != nil || c.Flush() != nil {
			c.Broken = true // never pooled again; the execute reports the loss
		}
	}
	st.longData = true
	s.stmts.noteHeld(st)
	s.updateStmtPins()
	s.bind.set(c) // held until the execute
	return nil
}

func (s *Session) comStmtClose(ctx context.Context, pkt []byte) error {
	cl, bad := mysqlproto.ParseStmtClose(pkt)
	if bad != nil {
		return nil // no reply
	}
	s.stmts.close(cl.StmtID)
	s.updateStmtPins()
	if s.bind.conn != nil && !s.bind.bound() {
		s.release(s.bind.conn)
	}
	return nil // no reply
}

func (s *Session) comStmtReset(ctx context.Context, pkt []byte) error {
	r, bad := mysqlproto.ParseStmtReset(pkt)
	if bad != nil {
		return s.sendError(bad)
	}
	id := r.StmtID
	st := s.stmts.get(id)
	if st == nil {
		return s.unknownStmt(id)
	}
	if (st.longData || st.cursor) && s.bind.conn != nil {
		if ss := s.bind.conn.Stmt(st.lastKey); ss != nil {
			c := s.bind.conn
			mysqlproto.PutStmtID(pkt, ss.ID)
			st.longData, st.cursor, st.tooLarge = false, false, false
			out, err := s.roundTrip(c, pkt, respSimple)
			if err != nil {
				return s.failed(c, err, out)
			}
			s.updateStmtPins()
			s.after(c, sqlscan.Info{Class: sqlscan.ClassRead}, out)
			return nil
		}
	}
	st.longData, st.cursor, st.tooLarge = false, false, false
	s.updateStmtPins()
	return s.writeOK(0, 0)
}

func (s *Session) comStmtFetch(ctx context.Context, pkt []byte) error {
	fetch, bad := mysqlproto.ParseStmtFetch(pkt)
	if bad != nil {
		return s.sendError(bad)
	}
	id := fetch.StmtID
	st := s.stmts.get(id)
	if st == nil {
		return s.unknownStmt(id)
	}
	c := s.bind.conn
	if c == nil || !st.cursor {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERUnknownStmtHandler, "HY000",
			"Unknown prepared statement handler (%d) given to mysqld_stmt_fetch: no open cursor", id))
	}
	ss := c.Stmt(st.lastKey)
	if ss == nil {
		return s.unknownStmt(id)
	}
	mysqlproto.PutStmtID(pkt, ss.ID)
	out, err := s.roundTrip(c, pkt, respFetch)
	if err != nil {
		return s.failed(c, err, out)
	}
	if out.status&mysqlproto.ServerStatusLastRowSent != 0 || out.err != nil {
		st.cursor = false
	}
	s.updateStmtPins()
	s.after(c, sqlscan.Info{Class: sqlscan.ClassRead}, out)
	return nil
}

// stmtCacheKey is the query-cache key of an execute: the session's part
// (cacheKey), then the prepared text, the parameter types and the null
// bitmap and values, without the statement id and the new-params-bound
// flag, which differ between executes of the same thing.
func (s *Session) stmtCacheKey(st *clientStmt, params *mysqlproto.ExecuteParams) []byte {
	k := s.cacheKeyFor(protoBinary, st.query)
	if st.params == 0 {
		return k
	}
	k = append(k, 0)
	k = append(k, params.NullBitmap...)
	k = append(k, st.types...)
	k = append(k, params.Values...)
	s.cacheKeyBuf = k
	return k
}
