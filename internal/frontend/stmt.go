package frontend

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sqlscan"
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
}

func (s *Session) unknownStmt(id uint32) error {
	return s.sendError(mysqlproto.NewError(mysqlproto.ERUnknownStmtHandler, "HY000",
		"Unknown prepared statement handler (%d) given to mysqld_stmt_execute", id))
}

func (s *Session) stmtTarget(p *Processing, st *clientStmt) (router.Target, string) {
	s.rs.Bound = s.bound()
	return s.routeByRule(p, st.route, router.Route(st.info, &s.rs, timeNow()).Target)
}

func (s *Session) comStmtPrepare(ctx context.Context, pkt []byte) error {
	q := pkt[1:]
	info := sqlscan.Scan(q)
	st := &clientStmt{query: string(q), info: info, digest: info.Digest, orig: []byte(string(q))}
	p := s.srv.proc.Load()
	s.beginStmt()
	res := s.applyRules(p, q, info.Digest)
	if res.Block != nil {
		err := s.blocked(res.Block, res.Rule)
		s.finishStmt(p, &stmtRun{start: time.Now(), digest: info.Digest, query: q, hostgroup: "blocked", rule: res.Rule, log: res.Log})
		return err
	}
	st.route, st.rule, st.log, st.timeout, st.cacheTTL = res.Route, res.Rule, res.Log, res.Timeout, res.CacheTTL
	if res.Query != nil {
		st.query = string(res.Query)
		ri := sqlscan.Scan(res.Query)
		st.info.Class, st.info.Flags = ri.Class, ri.Flags
		pkt = append([]byte{mysqlproto.ComStmtPrepare}, res.Query...)
	}
	target := router.Writer
	if s.bound() {
		target = router.Keep
	} else if st.info.Class == sqlscan.ClassRead {
		target = router.Reader
	}
	target, _ = s.routeByRule(p, st.route, target)
	c, err := s.acquire(ctx, target, -1)
	if err != nil {
		return s.sendError(err)
	}
	s.nextStmt++
	st.id = s.nextStmt
	c.Seq = 0
	if err := c.WritePacket(pkt); err != nil {
		c.Broken = true
		return s.failed(c, errBackend{err}, outcome{})
	}
	if err := c.Flush(); err != nil {
		c.Broken = true
		return s.failed(c, errBackend{err}, outcome{})
	}
	ss, se, err := s.readPrepare(c, true, st.id)
	if err != nil {
		return s.failed(c, err, outcome{sent: true})
	}
	if se == nil {
		st.params, st.columns = ss.Params, ss.Columns
		s.stmts[st.id] = st
		if old := c.Stmt(st.query); old != nil {
			closeServerStmt(c, old.ID)
		}
		if evict := c.AddStmt(st.query, ss); evict != 0 {
			closeServerStmt(c, evict)
		}
	}
	s.release(c)
	return nil
}

// closeServerStmt queues COM_STMT_CLOSE (which has no reply).
func closeServerStmt(c *backend.Conn, id uint32) {
	c.Seq = 0
	var b [5]byte
	b[0] = mysqlproto.ComStmtClose
	binary.LittleEndian.PutUint32(b[1:], id)
	_ = c.WritePacket(b[:])
	_ = c.Flush()
}

// ensurePrepared returns the server statement for st on c, preparing it
// there first if this connection has not seen it.
func (s *Session) ensurePrepared(c *backend.Conn, st *clientStmt) (*backend.ServerStmt, *mysqlproto.SQLError, error) {
	if ss := c.Stmt(st.query); ss != nil {
		return ss, nil, nil
	}
	c.Seq = 0
	buf, start := c.BeginPacket()
	buf = append(buf, mysqlproto.ComStmtPrepare)
	buf = append(buf, st.query...)
	if err := c.FinishPacket(buf, start); err != nil {
		return nil, nil, errBackend{err}
	}
	if err := c.Flush(); err != nil {
		c.Broken = true
		return nil, nil, errBackend{err}
	}
	ss, se, err := s.readPrepare(c, false, 0)
	if err != nil || se != nil {
		return nil, se, err
	}
	if evict := c.AddStmt(st.query, ss); evict != 0 {
		closeServerStmt(c, evict)
	}
	return ss, nil, nil
}

func (s *Session) comStmtExecute(ctx context.Context, pkt []byte) error {
	if len(pkt) < 10 {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_STMT_EXECUTE"))
	}
	id := binary.LittleEndian.Uint32(pkt[1:])
	st := s.stmts[id]
	if st == nil {
		return s.unknownStmt(id)
	}
	s.srv.Stats.Queries.Add(1)
	flags := pkt[5]
	// Parameter block: null bitmap, new-params-bound flag, types, values.
	var typesOff, boundOff int
	if st.params > 0 {
		boundOff = 10 + (int(st.params)+7)/8
		if boundOff >= len(pkt) {
			return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_STMT_EXECUTE parameters"))
		}
		if pkt[boundOff] == 1 {
			typesOff = boundOff + 1
			if typesOff+2*int(st.params) > len(pkt) {
				return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_STMT_EXECUTE parameter types"))
			}
			st.types = append(st.types[:0], pkt[typesOff:typesOff+2*int(st.params)]...)
		}
	}
	p := s.srv.proc.Load()
	s.beginStmt()
	run := stmtRun{start: time.Now(), digest: st.digest, query: st.orig, rule: st.rule, log: st.log}
	s.setCurrent(st.orig, run.start)
	target, hg := s.stmtTarget(p, st)
	run.target, run.hostgroup = target, hg
	s.stmtTimeout, s.timeoutRule = st.timeout, st.rule
	defer func() {
		s.stmtTimeout = 0
		s.capturing = false
		s.finishStmt(p, &run)
	}()
	// The query cache: outside transactions and pins, without a cursor
	// or parameters sent as long data; the key has the statement's text
	// and the parameters' types and values.
	var cacheKey []byte
	if st.cacheTTL > 0 && p.Cache != nil && target != router.Keep && flags == 0 && !st.longData && cacheable(st.info) {
		cacheKey = s.stmtCacheKey(st, pkt, boundOff, typesOff)
		if frames := p.Cache.Get(cacheKey, run.start); frames != nil {
			s.srv.Stats.CacheHits.Add(1)
			run.cached, run.hostgroup = true, "cache"
			if err := s.client.WriteFrame(frames); err != nil {
				return errClient{err}
			}
			return nil
		}
		s.startCapture(p)
	}
	exclude := -1
	for attempt := 0; ; attempt++ {
		c, err := s.acquire(ctx, target, exclude)
		if err != nil {
			return s.sendError(err)
		}
		if target == router.Reader {
			if c, err = s.waitGTID(ctx, c); err != nil {
				return s.sendError(err)
			}
		}
		ss, se, err := s.ensurePrepared(c, st)
		if err != nil {
			return s.failed(c, err, outcome{})
		}
		if se != nil {
			s.release(c)
			return s.sendError(se)
		}
		out := s.rewriteExecute(pkt, ss, st, boundOff, typesOff)
		st.longData = false
		o, err := s.roundTrip(c, out, respExecute)
		s.noteOutcome(c, o)
		if err != nil {
			var eb errBackend
			if asBackend(err, &eb) && !o.sent && target == router.Reader && attempt == 0 && !s.bound() {
				s.srv.Stats.ReadRetries.Add(1)
				s.dropConn(c)
				exclude = c.Index
				continue
			}
			return s.failed(c, err, o)
		}
		st.cursor = o.cursor && flags&mysqlproto.CursorTypeReadOnly != 0
		s.updateStmtPins()
		s.after(c, st.info, o)
		if cacheKey != nil {
			s.storeCapture(p, cacheKey, st.cacheTTL)
		}
		return nil
	}
}

// rewriteExecute builds the execute packet for the server: its statement
// id, and the parameter types if this server statement last saw others.
func (s *Session) rewriteExecute(pkt []byte, ss *backend.ServerStmt, st *clientStmt, boundOff, typesOff int) []byte {
	sendTypes := false
	if st.params > 0 {
		if typesOff > 0 {
			ss.LastTypes = append(ss.LastTypes[:0], st.types...)
		} else if !bytes.Equal(ss.LastTypes, st.types) && len(st.types) > 0 {
			sendTypes = true
			ss.LastTypes = append(ss.LastTypes[:0], st.types...)
		}
	}
	if !sendTypes {
		binary.LittleEndian.PutUint32(pkt[1:], ss.ID)
		return pkt
	}
	out := append(s.scratch[:0], pkt[:boundOff]...)
	out = append(out, 1)
	out = append(out, st.types...)
	out = append(out, pkt[boundOff+1:]...)
	binary.LittleEndian.PutUint32(out[1:], ss.ID)
	s.scratch = out
	return out
}

func (s *Session) updateStmtPins() {
	cursor, long := 0, 0
	for _, st := range s.stmts {
		if st.cursor {
			cursor++
		}
		if st.longData {
			long++
		}
	}
	if cursor > 0 && s.pins[PinCursor] == 0 {
		s.srv.Stats.Pins[PinCursor].Add(1)
	}
	if long > 0 && s.pins[PinLongData] == 0 {
		s.srv.Stats.Pins[PinLongData].Add(1)
	}
	s.pins[PinCursor], s.pins[PinLongData] = cursor, long
}

func (s *Session) comStmtSendLongData(ctx context.Context, pkt []byte) error {
	if len(pkt) < 7 {
		return nil // no reply to this command, ever
	}
	st := s.stmts[binary.LittleEndian.Uint32(pkt[1:])]
	if st == nil {
		return nil
	}
	target, _ := s.stmtTarget(s.srv.proc.Load(), st)
	c, err := s.acquire(ctx, target, -1)
	if err != nil {
		return nil
	}
	ss, se, err := s.ensurePrepared(c, st)
	if err != nil || se != nil {
		s.release(c)
		return nil
	}
	binary.LittleEndian.PutUint32(pkt[1:], ss.ID)
	c.Seq = 0
	if err := c.WritePacket(pkt); err == nil {
		_ = c.Flush()
	}
	st.longData = true
	s.updateStmtPins()
	s.setConn(c) // held until the execute
	return nil
}

func (s *Session) comStmtClose(ctx context.Context, pkt []byte) error {
	if len(pkt) < 5 {
		return nil
	}
	delete(s.stmts, binary.LittleEndian.Uint32(pkt[1:]))
	s.updateStmtPins()
	if s.conn != nil && !s.bound() {
		s.release(s.conn)
	}
	return nil // no reply
}

func (s *Session) comStmtReset(ctx context.Context, pkt []byte) error {
	if len(pkt) < 5 {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_STMT_RESET"))
	}
	id := binary.LittleEndian.Uint32(pkt[1:])
	st := s.stmts[id]
	if st == nil {
		return s.unknownStmt(id)
	}
	if (st.longData || st.cursor) && s.conn != nil {
		if ss := s.conn.Stmt(st.query); ss != nil {
			c := s.conn
			binary.LittleEndian.PutUint32(pkt[1:], ss.ID)
			st.longData, st.cursor = false, false
			out, err := s.roundTrip(c, pkt, respSimple)
			if err != nil {
				return s.failed(c, err, out)
			}
			s.updateStmtPins()
			s.after(c, sqlscan.Info{Class: sqlscan.ClassRead}, out)
			return nil
		}
	}
	st.longData, st.cursor = false, false
	s.updateStmtPins()
	return s.writeOK(0, 0)
}

func (s *Session) comStmtFetch(ctx context.Context, pkt []byte) error {
	if len(pkt) < 9 {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_STMT_FETCH"))
	}
	id := binary.LittleEndian.Uint32(pkt[1:])
	st := s.stmts[id]
	if st == nil {
		return s.unknownStmt(id)
	}
	c := s.conn
	if c == nil || !st.cursor {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERUnknownStmtHandler, "HY000",
			"Unknown prepared statement handler (%d) given to mysqld_stmt_fetch: no open cursor", id))
	}
	ss := c.Stmt(st.query)
	if ss == nil {
		return s.unknownStmt(id)
	}
	binary.LittleEndian.PutUint32(pkt[1:], ss.ID)
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
func (s *Session) stmtCacheKey(st *clientStmt, pkt []byte, boundOff, typesOff int) []byte {
	k := s.cacheKeyFor(protoBinary, st.query)
	if st.params == 0 {
		return k
	}
	k = append(k, 0)
	k = append(k, pkt[10:boundOff]...) // null bitmap
	k = append(k, st.types...)
	values := boundOff + 1
	if typesOff > 0 {
		values = typesOff + 2*int(st.params)
	}
	k = append(k, pkt[values:]...)
	s.cacheKeyBuf = k
	return k
}
