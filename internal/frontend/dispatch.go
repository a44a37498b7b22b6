package frontend

// The command loop and dispatch: one client command at a time, each to
// its handler (COM_QUERY here, prepared statements in stmt.go, the
// others in commands.go).

import (
	"context"
	"errors"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/rules"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

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

// dispatch runs one client command through the dispatch table. A
// returned error ends the session.
func (s *Session) dispatch(ctx context.Context, pkt []byte) error {
	cmd, _ := mysqlproto.Header(pkt) // serve sends no empty command here
	c := &commands[cmd]
	if c.run == nil {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERUnknownComError, "08S01",
			"Vigil: command 0x%02x is not supported through the proxy", cmd))
	}
	if c.statement {
		// A statement: the previous one's connection comes back for it to
		// use or give back (prev.go).
		s.takePrev()
		defer s.dropPrevHeld()
		s.prev.beginCommand(c.outcome)
	}
	return c.run(s, ctx, pkt)
}

// commandSpec is how the session treats one client command.
type commandSpec struct {
	run func(s *Session, ctx context.Context, pkt []byte) error
	// statement: the command runs a statement on a server connection:
	// the previous statement's connection comes back for it (prev.go).
	statement bool
	// outcome: its outcome becomes the session's previous statement
	// (what ROW_COUNT(), FOUND_ROWS() and the diagnostics area describe).
	outcome bool
}

// commands is the dispatch table, by command byte; a command without an
// entry is refused (ER_UNKNOWN_COM_ERROR).
var commands = [256]commandSpec{
	mysqlproto.ComQuery:            {run: (*Session).comQuery, statement: true, outcome: true},
	mysqlproto.ComQuit:             {run: func(*Session, context.Context, []byte) error { return errQuit }},
	mysqlproto.ComPing:             {run: func(s *Session, _ context.Context, _ []byte) error { return s.writeOK(0, 0) }},
	mysqlproto.ComInitDB:           {run: (*Session).comInitDB, statement: true, outcome: true},
	mysqlproto.ComStmtPrepare:      {run: (*Session).comStmtPrepare},
	mysqlproto.ComStmtExecute:      {run: (*Session).comStmtExecute, statement: true, outcome: true},
	mysqlproto.ComStmtSendLongData: {run: (*Session).comStmtSendLongData},
	mysqlproto.ComStmtClose:        {run: (*Session).comStmtClose},
	mysqlproto.ComStmtReset:        {run: (*Session).comStmtReset, statement: true},
	mysqlproto.ComStmtFetch:        {run: (*Session).comStmtFetch, statement: true},
	mysqlproto.ComFieldList: {run: func(s *Session, ctx context.Context, pkt []byte) error {
		return s.simpleCommand(ctx, pkt, router.Reader, respFieldList)
	}, statement: true},
	mysqlproto.ComStatistics: {run: func(s *Session, ctx context.Context, pkt []byte) error {
		return s.simpleCommand(ctx, pkt, router.Writer, respStatistics)
	}, statement: true},
	mysqlproto.ComSetOption:       {run: func(s *Session, _ context.Context, pkt []byte) error { return s.comSetOption(pkt) }},
	mysqlproto.ComResetConnection: {run: func(s *Session, ctx context.Context, _ []byte) error { return s.comResetConnection(ctx) }, statement: true},
	mysqlproto.ComChangeUser:      {run: (*Session).comChangeUser, statement: true},
	mysqlproto.ComProcessKill:     {run: (*Session).comProcessKill, statement: true},
	mysqlproto.ComBinlogDump:      {run: (*Session).refuseReplication},
	mysqlproto.ComBinlogDumpGTID:  {run: (*Session).refuseReplication},
	mysqlproto.ComRegisterSlave:   {run: (*Session).refuseReplication},
}

// comProcessKill is KILL <id> as a command (Vigil's session ids).
func (s *Session) comProcessKill(ctx context.Context, pkt []byte) error {
	k, bad := mysqlproto.ParseProcessKill(pkt)
	if bad != nil {
		return s.sendError(bad)
	}
	return s.kill(ctx, uint64(k.ConnectionID), false)
}

// refuseReplication answers the replication protocol's commands.
func (s *Session) refuseReplication(context.Context, []byte) error {
	return s.sendError(mysqlproto.NewError(mysqlproto.ERVigilUnsupported, mysqlproto.SSVigilUnsupported,
		"Vigil: replication commands are not proxied; connect replicas to the servers directly"))
}

func (s *Session) comQuery(ctx context.Context, pkt []byte) error {
	cq, _ := mysqlproto.ParseQuery(pkt) // dispatch checked the command
	q := cq.Text
	if s.srv.testHook != nil {
		s.srv.testHook(q)
	}
	info := s.scan(q)
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
	res, blocked, err := s.checkRules(p, q, &run)
	if blocked {
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

// scan classifies the statement's text, once: the sharded listener has
// scanned it already to route it (prescan).
func (s *Session) scan(q []byte) sqlscan.Info {
	if p := s.prescan; p != nil {
		s.prescan = nil
		return *p
	}
	return sqlscan.Scan(q)
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
