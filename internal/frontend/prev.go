package frontend

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// What a session's previous statement left on its server connection.
//
// MariaDB answers some questions about a session's previous statement
// from the server connection that ran it: the diagnostics area (SHOW
// WARNINGS, SHOW ERRORS, SHOW COUNT(*) WARNINGS, @@warning_count,
// @@error_count, GET DIAGNOSTICS), ROW_COUNT(), FOUND_ROWS() and
// LAST_INSERT_ID(). With multiplexing the next statement may run on
// another connection, whose answers belong to whichever client used it
// last. So:
//
//   - When the previous statement left something only its connection knows
//     (warnings, an error, an insert id, a LAST_INSERT_ID(expr) result),
//     the session keeps that connection until its next statement (a "soft
//     hold": not a pin, it ends with the next statement). A statement that
//     reads that state runs there; any other statement may reuse the
//     connection if it goes to the same server, or gives it back.
//   - Otherwise Vigil knows the answers from the replies it forwarded: the
//     diagnostics area is empty (the statement runs on a connection whose
//     diagnostics area Vigil cleared first when another statement left
//     something there), ROW_COUNT() is the OK packet's affected rows or -1
//     after a result set or an error, FOUND_ROWS() the rows of the last
//     result set, LAST_INSERT_ID() the last insert id a server reported;
//     the statement is sent with those values in place of the calls
//     (sqlscan.RewriteSessionFuncs), same column names and types.
//   - A hold kept only for an insert id ends when the client stays idle
//     for softHoldIdle: the connection goes back to the pool and
//     LAST_INSERT_ID() is answered from the value Vigil recorded. A hold
//     for diagnostics lasts until the next statement (warnings cannot be
//     recreated on another connection).

// softHoldIdle is how long an idle session keeps the connection of its
// previous statement for LAST_INSERT_ID() alone.
const softHoldIdle = time.Second

// sessionScoped are the flags of statements that read what the previous
// statement left on its server connection.
const sessionScoped = sqlscan.FlagDiagnostics | sqlscan.FlagLastInsertID | sqlscan.FlagRowCount | sqlscan.FlagFoundRows

// prevValues are the functions Vigil can answer for the previous statement.
const prevValues = sqlscan.FlagLastInsertID | sqlscan.FlagRowCount | sqlscan.FlagFoundRows

// clearDiagnosticsSQL empties a connection's diagnostics area: MariaDB
// clears it at the start of a statement that uses a table, and a derived
// table counts; the statement changes nothing else a client can see.
const clearDiagnosticsSQL = "SELECT 1 FROM (SELECT 1) AS vigil_clear LIMIT 0"

// prevState is what the session knows of its previous statement: the
// connection it holds for it (soft hold) and the outcome Vigil recorded.
// The rules that need only this record are its methods; those that move
// connections stay on Session.
type prevState struct {
	// conn is the held connection between commands, guarded by mu (its
	// idle timer may give it back); at shows it to Fence; held is conn
	// during a command (session goroutine).
	mu       sync.Mutex
	conn     *backend.Conn
	at       atomic.Pointer[backend.Conn]
	timer    *time.Timer
	held     *backend.Conn
	lastConn *backend.Conn // the last connection given back (may be another session's by now)
	lastPuts uint64        // lastConn's put count when given back (backend.Pool.Reclaim)

	insertConn  *backend.Conn // the connection of the session's last insert id
	insertToken uint64        // its InsertToken then (backend.Pool.ReclaimInsert)
	// insertTrusted: insertConn's LAST_INSERT_ID() was no other session's
	// before this session's insert, so the server's answer there is this
	// session's.
	insertTrusted bool
	// valuesFetched: Vigil ran a statement of its own on the previous
	// statement's connection (fetchInsertID), so the server's ROW_COUNT()
	// and FOUND_ROWS() there are no longer the session's: Vigil's record
	// answers them.
	valuesFetched bool
	// insertPending: a statement on the session's own connection may have
	// set LAST_INSERT_ID() unseen; Vigil asks before the next read of it
	// or when the connection goes back (fetchInsertID).
	insertPending bool
	// execUnseen: the statement being executed (COM_STMT_EXECUTE) may set
	// LAST_INSERT_ID() unseen (clientStmt.insertUnseen).
	execUnseen bool

	noteStmt  bool // the command is a statement: its outcome is the session's previous statement
	pureDiag  bool // the statement only reads the diagnostics area
	clearDiag bool // run the statement on an empty diagnostics area
	ranOnPrev bool // the statement ran on the previous statement's connection
	stmtText  []byte

	lastDiag   bool // the previous statement left warnings or an error
	rowCount   int64
	foundRows  int64
	insertID   uint64
	sessionBuf []byte // the statement with Vigil's values in place of the calls
}

// take ends the hold: it returns the held connection, or nil (session
// goroutine or the idle timer).
func (p *prevState) take() *backend.Conn {
	p.mu.Lock()
	c := p.conn
	p.conn = nil
	p.at.Store(nil)
	p.mu.Unlock()
	return c
}

// hold makes c the held connection and returns the one held before.
func (p *prevState) hold(c *backend.Conn) (old *backend.Conn) {
	p.mu.Lock()
	old = p.conn
	p.conn = c
	p.at.Store(c)
	p.mu.Unlock()
	return old
}

// gaveBack remembers c, given back to its pool, as the connection that
// knows the previous statement's outcome if nobody uses it meanwhile.
func (p *prevState) gaveBack(c *backend.Conn) {
	p.lastConn, p.lastPuts = c, c.NextPut()
}

// beginCommand starts a command that is a statement; noteStmt: its
// outcome becomes the session's previous statement.
func (p *prevState) beginCommand(noteStmt bool) {
	p.noteStmt = noteStmt
	p.pureDiag, p.clearDiag, p.ranOnPrev = false, false, false
	p.stmtText = nil
	p.execUnseen = false
}

// noteDiag records whether the diagnostics area holds something after a
// statement that left warnings (or an error) or not, and that opened a
// table or not (info).
func (p *prevState) noteDiag(warned bool, info sqlscan.Info) {
	switch {
	case warned:
		p.lastDiag = true
	case p.lastDiag && p.ranOnPrev && !info.OpensTable():
		// It ran where the warnings are and did not clear them.
	default:
		p.lastDiag = false
	}
}

// noteLast records what a finished statement tells about the session's
// previous statement and reports whether its connection must be kept
// until the next statement, and whether that hold may end when the client
// stays idle.
func (p *prevState) noteLast(info sqlscan.Info, out outcome) (hold, expire bool) {
	if p.pureDiag && out.err == nil {
		// The diagnostics area is as it was: keep holding it if it was
		// held for it.
		p.rowCount = -1
		return p.lastDiag, false
	}
	p.noteDiag(out.warnings > 0 || out.err != nil, info)
	switch {
	case out.err != nil:
		p.rowCount = -1
	case out.resultSet:
		p.rowCount = -1
		p.foundRows = out.setRows
	default:
		p.rowCount = int64(out.affected)
	}
	if out.insertID != 0 {
		p.insertID = out.insertID
	}
	id := out.insertID != 0 || info.Flags&sqlscan.FlagLastInsertID != 0
	return p.lastDiag || id, !p.lastDiag
}

// insertAnswerOn reports whether LAST_INSERT_ID() on c is the session's:
// c is the connection of the session's last insert id and had no other
// session's before it, or c never had one and neither did the session.
func (p *prevState) insertAnswerOn(c *backend.Conn) bool {
	if c.InsertToken == 0 {
		return p.insertID == 0
	}
	return c == p.insertConn && c.InsertToken == p.insertToken && p.insertTrusted
}

// forget drops the recorded outcome (new or reset session); the held
// connection is the caller's to give back first.
func (p *prevState) forget() {
	p.lastConn = nil
	p.lastDiag = false
	p.rowCount, p.foundRows, p.insertID = -1, 0, 0
	p.insertPending, p.valuesFetched = false, false
}

// keepPrev holds c, the connection of the statement that just ended,
// until the next statement. expire: give it back when the client stays
// idle for softHoldIdle.
func (s *Session) keepPrev(c *backend.Conn, expire bool) {
	s.bind.set(nil)
	// If the hold ends unused (idle timer, another command), the
	// connection can still be reclaimed from the pool as the last one.
	s.prev.gaveBack(c)
	c.Park()
	old := s.prev.hold(c)
	if old != nil && old != c {
		// A command that does not take the previous connection (a
		// prepare) left a new outcome: the older one is gone.
		s.putBack(old)
	}
	s.srv.Stats.SoftHolds.Add(1)
	if !expire || s.bind.sticky != nil || (s.user != nil && !s.user.Multiplexing) {
		return
	}
	if s.prev.timer == nil {
		s.prev.timer = time.AfterFunc(softHoldIdle, s.expirePrev)
		return
	}
	s.prev.timer.Reset(softHoldIdle)
}

// takePrev ends the soft hold at the start of a command: the connection
// comes back for the command to use or give back (prevHeld).
func (s *Session) takePrev() {
	if s.prev.timer != nil {
		s.prev.timer.Stop()
	}
	c := s.prev.take()
	if c != nil && s.srv.Fenced(c.Index) {
		s.putBack(c)
		c = nil
	}
	s.prev.held = c
}

// expirePrev gives the held connection back when the client stayed idle
// (timer goroutine). The session goroutine takes prev under prevMu too.
func (s *Session) expirePrev() {
	c := s.prev.take()
	if c == nil {
		return
	}
	s.srv.Stats.SoftHoldExpired.Add(1)
	if c.Broken {
		s.srv.pool(c.Index).Discard(c)
		return
	}
	s.srv.pool(c.Index).Put(c)
}

// dropPrevHeld gives back the previous statement's connection when the
// command did not use it.
func (s *Session) dropPrevHeld() {
	if c := s.prev.held; c != nil {
		s.prev.held = nil
		s.returnPrev(c)
	}
}

// returnPrev gives back the previous statement's connection unused: it
// stays the one to reclaim (its session state and outcome are the
// session's previous statement's).
func (s *Session) returnPrev(c *backend.Conn) {
	s.prev.gaveBack(c)
	s.putBack(c)
}

// putBack returns a connection the session does not hold as its own: to
// the session's sticky set when multiplexing is off, else to the pool.
func (s *Session) putBack(c *backend.Conn) {
	if c.Broken {
		s.srv.pool(c.Index).Discard(c)
		return
	}
	if s.user != nil && !s.user.Multiplexing {
		if s.bind.sticky == nil {
			s.bind.sticky = map[int]*backend.Conn{}
		}
		if old := s.bind.sticky[c.Index]; old != nil && old != c {
			s.srv.pool(old.Index).Put(old)
		}
		c.Park()
		s.bind.sticky[c.Index] = c
		return
	}
	s.srv.pool(c.Index).Put(c)
}

// pureDiagnostics: the statement only reads the diagnostics area (SHOW
// WARNINGS, SHOW ERRORS, SHOW COUNT(*) ..., GET DIAGNOSTICS) and leaves it
// as it was, as MariaDB does for these statements.
func pureDiagnostics(info sqlscan.Info) bool {
	if info.Flags&sqlscan.FlagDiagnostics == 0 || info.Flags&sqlscan.FlagMulti != 0 {
		return false
	}
	return info.First == sqlscan.KwShow || info.First == sqlscan.KwGet
}

// routePrev decides, before a statement is routed, what the statement
// needs of the previous one. It returns true when the statement must run
// on the previous statement's connection, which is then the session's
// connection. Otherwise, for a statement that reads the previous one's
// outcome, it sets s.prev.clearDiag (run on a connection with an empty
// diagnostics area) or returns a rewritten text in rewrite (the values
// Vigil knows in place of the calls). CONNECTION_ID() is always answered
// with the id Vigil gave the client.
func (s *Session) routePrev(ctx context.Context, info sqlscan.Info, q []byte) (onPrev bool, rewrite []byte) {
	s.prev.clearDiag = false
	rw := ownValues(info)
	scoped := info.Flags & sessionScoped
	s.reclaimForPrev(ctx, scoped)
	if scoped == sqlscan.FlagLastInsertID && s.prev.held != nil && !s.prev.insertAnswerOn(s.prev.held) {
		// Held for another reason (warnings): its LAST_INSERT_ID() is not
		// known to be the session's.
		s.returnPrev(s.prev.held)
		s.prev.held = nil
	}
	if scoped != 0 && !s.bind.bound() {
		// While the previous statement's warnings are kept, reads run on
		// their connection too: MariaDB keeps the diagnostics area across
		// statements that use no table (SELECT 1, SELECT @@warning_count),
		// and only that connection knows whether this one does.
		if s.prev.held != nil {
			onPrev = true
		} else {
			// The previous statement left no warnings or errors (it would
			// be held otherwise): the answer is an empty diagnostics area,
			// and Vigil knows ROW_COUNT() and the like.
			s.prev.clearDiag = scoped&sqlscan.FlagDiagnostics != 0
			rw |= scoped & prevValues
		}
	} else if s.prev.lastDiag && s.prev.held != nil && !s.bind.bound() &&
		info.Class == sqlscan.ClassRead && info.Flags&readOnWriter == 0 {
		onPrev = true
	}
	if s.prev.valuesFetched {
		// Vigil's own query ran on the previous statement's connection
		// after it (fetchInsertID): ROW_COUNT() and FOUND_ROWS() there
		// describe that query.
		rw |= scoped & (sqlscan.FlagRowCount | sqlscan.FlagFoundRows)
	}
	if scoped&sqlscan.FlagLastInsertID != 0 {
		// Where the statement runs anyway (the session's own connection,
		// or the previous statement's), LAST_INSERT_ID() there may be
		// another client's: then Vigil's record answers.
		if c := s.bind.conn; s.bind.bound() && c != nil && !s.prev.insertAnswerOn(c) {
			rw |= sqlscan.FlagLastInsertID
		}
		if onPrev && !s.prev.insertAnswerOn(s.prev.held) {
			rw |= sqlscan.FlagLastInsertID
		}
	}
	if onPrev {
		s.bind.set(s.prev.held)
		s.prev.held = nil
		s.prev.ranOnPrev = true
		s.srv.Stats.PrevReads.Add(1)
	}
	return onPrev, s.rewriteSessionFuncs(q, rw)
}

// ownValues are the calls in a statement Vigil always answers itself.
func ownValues(info sqlscan.Info) sqlscan.Flags {
	// CONNECTION_ID() is always Vigil's id, as in the handshake and KILL,
	// except next to the processlist, where it finds the statement's own
	// server connection (information_schema.PROCESSLIST WHERE ID =
	// CONNECTION_ID()).
	rw := info.Flags & sqlscan.FlagConnectionID
	if rw != 0 && info.Facts&sqlscan.FactProcesslist != 0 {
		rw = 0
	}
	if info.Class != sqlscan.ClassSet {
		// Reads of the client's own session_track_* values (the server
		// connection's are Vigil's).
		rw |= info.Flags & sqlscan.FlagSessionTrack
	}
	return rw
}

// reclaimForPrev takes back, before a statement that reads what the
// previous one left (scoped), the connection that still knows it: the
// session's own for a pending LAST_INSERT_ID(), else the previous
// statement's (if nobody used it since) or the last insert's.
func (s *Session) reclaimForPrev(ctx context.Context, scoped sqlscan.Flags) {
	if s.prev.insertPending && scoped&sqlscan.FlagLastInsertID != 0 {
		if c := s.bind.conn; c != nil && s.bind.bound() && !c.Broken {
			s.prev.insertPending = false
			s.fetchInsertID(c)
		}
	}
	if scoped != 0 && s.prev.held == nil && !s.bind.bound() {
		if scoped&(sqlscan.FlagLastInsertID|sqlscan.FlagDiagnostics) == 0 && !s.prev.valuesFetched {
			// The previous statement's connection went back to the
			// pool; if nobody used it since, it still knows ROW_COUNT()
			// and FOUND_ROWS() exactly. (Not the diagnostics area: a
			// statement that used no table left the one before it, maybe
			// another client's, in place.)
			s.prev.held = s.reclaimLast()
		} else if scoped == sqlscan.FlagLastInsertID && s.prev.insertTrusted {
			// LAST_INSERT_ID() is the connection of the last insert, if
			// no one set another there since.
			s.prev.held = s.reclaimInsert(ctx)
		}
	}
}

// rewriteSessionFuncs returns q with the values Vigil knows in place of
// the calls rw names, or nil when there is nothing to replace.
func (s *Session) rewriteSessionFuncs(q []byte, rw sqlscan.Flags) []byte {
	out := s.prev.rewrite(q, rw, s.id, s.vars.trackRaw)
	if out != nil && rw&prevValues != 0 {
		s.srv.Stats.SessionRewrites.Add(1)
	}
	return out
}

// rewrite returns q with Vigil's record in place of the calls rw names
// (ROW_COUNT(), FOUND_ROWS(), LAST_INSERT_ID(); CONNECTION_ID() is id,
// the session_track_* values those in track), or nil when there is
// nothing to replace. The result is in p.sessionBuf.
func (p *prevState) rewrite(q []byte, rw sqlscan.Flags, id uint32, track map[string]string) []byte {
	if rw == 0 {
		return nil
	}
	v := sqlscan.SessionValues{RowCount: p.rowCount, FoundRows: p.foundRows, LastInsertID: p.insertID, ConnectionID: id, Track: track}
	out, ok := sqlscan.RewriteSessionFuncs(p.sessionBuf[:0], q, v, rw)
	if !ok {
		return nil
	}
	p.sessionBuf = out
	return out
}

// reclaimLast takes back the connection the session last gave back, if
// nobody used it since.
func (s *Session) reclaimLast() *backend.Conn {
	c := s.prev.lastConn
	s.prev.lastConn = nil
	if c == nil {
		return nil
	}
	if s.bind.sticky != nil {
		if s.bind.sticky[c.Index] == c {
			delete(s.bind.sticky, c.Index)
			return c
		}
		return nil
	}
	if s.srv.pool(c.Index).Reclaim(c, s.prev.lastPuts) {
		return c
	}
	return nil
}

// reclaimInsert takes back, made to the session's state, the connection
// of the session's last insert id, if nobody set another there since.
func (s *Session) reclaimInsert(ctx context.Context) *backend.Conn {
	c := s.prev.insertConn
	if c == nil || s.bind.sticky != nil {
		return nil
	}
	if !s.srv.pool(c.Index).ReclaimInsert(c, s.prev.insertToken) {
		return nil
	}
	if err := s.syncConn(ctx, c, &s.vars.state); err != nil {
		s.putBack(c)
		return nil
	}
	return c
}

// clearDiagnostics empties the diagnostics area of c when a statement
// left something there, before a statement that reads it runs on c.
func (s *Session) clearDiagnostics(ctx context.Context, c *backend.Conn) error {
	if !s.prev.clearDiag || !c.DiagDirty {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts().ConnectTimeout)
	defer cancel()
	if _, err := c.Exec(cctx, clearDiagnosticsSQL); err != nil {
		if _, ok := err.(*mysqlproto.SQLError); ok {
			return err
		}
		return errBackend{err}
	}
	c.DiagDirty = false
	s.srv.Stats.DiagClears.Add(1)
	return nil
}

// notePrepared records a successful prepare as the session's previous
// statement for the diagnostics area: its warnings (a deprecated syntax)
// are what SHOW WARNINGS shows next. It reports whether it kept c.
func (s *Session) notePrepared(c *backend.Conn, info sqlscan.Info, warnings uint16) bool {
	if warnings > 0 {
		c.DiagDirty = true
	}
	s.prev.noteDiag(warnings > 0, info)
	if !s.prev.lastDiag || s.bind.bound() || c.Broken {
		return false
	}
	s.keepPrev(c, false)
	return true
}

// failedOn keeps c after a server error Vigil passed on itself (a
// prepare or a re-prepare failed): SHOW WARNINGS must show that error.
func (s *Session) failedOn(c *backend.Conn) {
	c.DiagDirty = true
	if s.bind.bound() || c.Broken {
		s.release(c)
		return
	}
	s.prev.lastDiag = true
	s.prev.rowCount = -1
	s.keepPrev(c, false)
}

// resetPrev forgets the previous statement (new or reset session).
func (s *Session) resetPrev() {
	s.takePrev()
	s.dropPrevHeld()
	s.prev.forget()
}

// noteInsert records that c's LAST_INSERT_ID() is the session's id now.
func (s *Session) noteInsert(c *backend.Conn, id uint64) {
	tok := s.srv.insertTokens.Add(1)
	c.InsertToken, c.InsertSession, c.InsertValue = tok, s.id, id
	s.prev.insertConn, s.prev.insertToken = c, tok
}

// fetchInsertID asks c for its LAST_INSERT_ID() after a statement that may
// have set it without an OK packet saying so (a procedure's insert, LOAD
// DATA, LAST_INSERT_ID(expr): sqlscan.Info.SetsInsertIDUnseen). When it
// changed, it is the session's (and c's no longer another session's).
// The query (backend.Conn.LastInsertID, a SET) leaves the diagnostics area
// alone but not ROW_COUNT(): Vigil answers that and FOUND_ROWS() from then
// on.
func (s *Session) fetchInsertID(c *backend.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts().ConnectTimeout)
	defer cancel()
	v, err := c.LastInsertID(ctx)
	s.srv.Stats.InsertIDFetches.Add(1)
	s.prev.valuesFetched = true
	if err != nil {
		if _, ok := err.(*mysqlproto.SQLError); !ok {
			// An I/O error, or a server without session tracking: the
			// connection's LAST_INSERT_ID() is unknown, it is not reused.
			c.Broken = true
		}
		return
	}
	if v == c.InsertValue {
		return // unchanged: whoever it was before, it still is
	}
	s.prev.insertID = v
	s.prev.insertTrusted = true
	s.noteInsert(c, v)
}

// notePrev records a finished statement as the session's previous one:
// its insert id, whether it may have set LAST_INSERT_ID() unseen, and its
// outcome; it reports whether it kept c for the next statement.
func (s *Session) notePrev(c *backend.Conn, info sqlscan.Info, out outcome) (kept bool) {
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
			return true
		}
		// Remembered so that a statement reading what this one left
		// (FOUND_ROWS(), ROW_COUNT(), the diagnostics area) can take the
		// connection back if nobody used it since (prev.go).
		s.prev.gaveBack(c)
	}
	return false
}
