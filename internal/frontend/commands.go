package frontend

import (
	"context"
	"errors"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// countPins counts the sessions that took a new pin reason.
func (s *Session) countPins(added pinSet) {
	for reason := range numPins {
		if added&(1<<reason) != 0 {
			s.srv.Stats.Pins[reason].Add(1)
		}
	}
}

func (s *Session) comInitDB(ctx context.Context, pkt []byte) error {
	idb, _ := mysqlproto.ParseInitDB(pkt) // dispatch checked the command
	db := string(idb.Schema)
	target := router.Writer
	if s.bind.bound() {
		target = router.Keep
	}
	c, err := s.acquire(ctx, target, -1)
	if err != nil {
		return s.sendError(err)
	}
	out, err := s.roundTrip(c, pkt, respSimple)
	if err != nil {
		return s.failed(c, err, out)
	}
	if out.err == nil {
		cs := c.ClientCharset() // COM_INIT_DB's name is in the client's character set
		s.vars.state.SetSchemaIn(db, cs)
		c.State.SetSchemaIn(db, cs)
	}
	s.after(c, sqlscan.Info{Class: sqlscan.ClassUse}, out)
	return nil
}

// simpleCommand forwards a command whose reply has a fixed shape.
func (s *Session) simpleCommand(ctx context.Context, pkt []byte, target router.Target, kind respKind) error {
	if s.bind.bound() {
		target = router.Keep
	}
	c, err := s.acquire(ctx, target, -1)
	if err != nil {
		return s.sendError(err)
	}
	out, err := s.roundTrip(c, pkt, kind)
	if err != nil {
		return s.failed(c, err, out)
	}
	if kind == respStatistics {
		out.status = s.bind.status()
	}
	s.after(c, sqlscan.Info{Class: sqlscan.ClassRead}, out)
	return nil
}

// comSetOption turns multi-statements on or off for this client; server
// connections always allow them, so Vigil enforces the client's choice.
func (s *Session) comSetOption(pkt []byte) error {
	o, bad := mysqlproto.ParseSetOption(pkt)
	if bad != nil {
		return s.sendError(bad)
	}
	switch o.Option {
	case mysqlproto.SetOptionMultiStatementsOn:
		s.multiStmts = true
	case mysqlproto.SetOptionMultiStatementsOff:
		s.multiStmts = false
	default:
		return s.sendError(mysqlproto.NewError(mysqlproto.ERUnknownComError, "08S01", "Unknown COM_SET_OPTION value"))
	}
	s.client.Seq = 1
	var p []byte
	if s.caps&mysqlproto.CapabilityClientDeprecateEOF != 0 {
		p = mysqlproto.AppendEOFOK(s.scratch[:0], s.bind.status(), 0)
	} else {
		p = mysqlproto.AppendEOF(s.scratch[:0], s.bind.status(), 0)
	}
	if err := s.client.WritePacket(p); err != nil {
		return errClient{err}
	}
	return nil
}

// comResetConnection resets the session as a server would: transaction
// rolled back, variables, temporary tables, locks and prepared statements
// gone; the schema is kept.
func (s *Session) comResetConnection(ctx context.Context) error {
	if c := s.bind.conn; c != nil && s.bind.bound() {
		// The held connection has state only this session knows: reset it
		// on the server too (without forwarding the server's OK: Vigil
		// answers the client itself below).
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.ResetConnection(rctx)
		cancel()
		if err != nil {
			s.dropConn(c)
		} else {
			s.bind.set(nil)
			s.srv.pool(c.Index).Put(c)
		}
	}
	s.resetSession()
	return s.writeOK(0, 0)
}

func (s *Session) resetSession() {
	schema := s.vars.state.Schema
	s.vars.state.Reset(schema)
	s.bind.clear()
	s.stmts.clear()
	s.vars.resetTrack(s.srv.trackDefault.Load())
	s.ryw.forget()
	s.resetPrev()
}

// kill handles KILL [QUERY] <id> where id is a Vigil session id.
// findSession is the session with id on this session's listener: for
// the sharded listener, the part of that session that runs a statement
// now (or its first part).
func (s *Session) findSession(id uint32) *Session {
	if s.shard != nil {
		return s.shard.srv.part(id)
	}
	return s.srv.Session(id)
}

func (s *Session) kill(ctx context.Context, id uint64, query bool) error {
	if id > 0xffffffff {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERNoSuchThread, "HY000", "Unknown thread id: %d", id))
	}
	target := s.findSession(uint32(id))
	if target == nil {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERNoSuchThread, "HY000", "Unknown thread id: %d", id))
	}
	if target.cur.userName() != s.user.Name {
		// Another account's session: as on the server, only with
		// CONNECTION ADMIN or SUPER, which the servers know.
		ok, err := s.mayKillOthers(ctx)
		if err != nil {
			return s.sendError(err)
		}
		if !ok {
			return s.sendError(mysqlproto.NewError(mysqlproto.ERKillDenied, "HY000", "You are not owner of thread %d", id))
		}
	}
	if target == s || (s.shard != nil && target.shard == s.shard) {
		if query {
			return s.writeOK(0, 0)
		}
		// KILL of one's own connection: the server answers with an error
		// and closes.
		_ = s.sendError(mysqlproto.NewError(1927, "70100", "Connection was killed"))
		_ = s.client.Flush()
		return errQuit
	}
	if c := target.cur.running.Load(); c != nil {
		kctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := target.srv.pool(c.Index).Kill(kctx, s.key.User, c.ID, true)
		cancel()
		if err != nil {
			return s.sendError(mysqlproto.NewError(mysqlproto.ERUnknownError, "HY000", "Vigil: kill on server %s failed: %v", c.Server, err))
		}
	}
	if !query {
		target.client.Close()
	}
	return s.writeOK(0, 0)
}

// killPrivilegeSQL counts the global privileges that let an account kill
// other accounts' connections, granted to the account or to its current
// role.
const killPrivilegeSQL = "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES " +
	"WHERE PRIVILEGE_TYPE IN ('SUPER', 'CONNECTION ADMIN') AND GRANTEE IN (" +
	"CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), ''''), " +
	"CONCAT('''', IFNULL(CURRENT_ROLE(), ''), ''''))"

// mayKillOthers asks the writer, as the session's account, whether it may
// kill other accounts' connections.
func (s *Session) mayKillOthers(ctx context.Context) (bool, error) {
	c, err := s.acquire(ctx, router.Writer, -1)
	if err != nil {
		return false, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.opts().ConnectTimeout)
	res, err := c.Exec(qctx, killPrivilegeSQL)
	cancel()
	if err != nil {
		if _, ok := err.(*mysqlproto.SQLError); !ok {
			c.Broken = true
		}
		s.release(c)
		return false, mysqlproto.NewError(mysqlproto.ERUnknownError, "HY000", "Vigil: cannot check the KILL privilege on server %s: %v", c.Server, err)
	}
	s.release(c)
	return len(res.Rows) == 1 && len(res.Rows[0]) == 1 && res.Rows[0][0] != "0", nil
}

// comChangeUser re-authenticates as another user, as MariaDB does: the
// session is reset first (transaction rolled back, variables, temporary
// tables, locks and prepared statements gone), whatever the outcome; on
// success the user, schema and character set are the packet's, on failure
// the previous ones stay and the client gets the error after a delay (the
// connection stays open; after three failures every further attempt gets
// 1047). Authentication itself is mysqlproto.AuthChangeUser.
func (s *Session) comChangeUser(ctx context.Context, pkt []byte) error {
	cu, err := mysqlproto.ParseChangeUser(pkt, s.caps)
	if err != nil {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_CHANGE_USER"))
	}
	oldUser, oldKey, oldState := s.user, s.key, s.vars.state.Clone()
	if s.bind.conn != nil {
		s.dropConn(s.bind.conn)
	}
	s.releaseAll()
	s.resetSession()
	host := s.clientHost()
	opts := s.opts()
	cfg := &mysqlproto.ServerConfig{RSAKey: opts.RSAKey, ShaCache: &s.srv.sha, Lookup: s.lookupUser}
	s.guardAuth(ctx, cfg)
	s.client.Seq = 1
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	denied, err := s.client.AuthChangeUser(actx, cfg, cu, host)
	cancel()
	if err != nil {
		return errClient{err}
	}
	u := (*s.srv.users.Load())[cu.User]
	if denied == nil && u == nil {
		// Removed by a reload during the exchange.
		denied = mysqlproto.NewError(mysqlproto.ERAccessDeniedError, mysqlproto.SSAccessDenied, "Access denied for user '%s'@'%s' (using password: YES)", cu.User, host)
	}
	if denied == nil {
		s.setUser(u)
		s.key.User = cu.User
		if cu.Collation > 0 && cu.Collation < 256 {
			s.key.Collation = byte(cu.Collation)
		}
		s.rs = router.Session{RYW: u.RYW, SessionWindow: u.SessionWindow}
		s.vars.state.Reset(cu.DB)
		// The servers must accept the account and the schema, as a server
		// would check.
		if err := s.loginCheck(ctx, cu.DB, len(cu.AuthResponse) > 0); err != nil && !errors.As(err, &denied) {
			denied = mysqlproto.NewError(mysqlproto.ERUnknownError, mysqlproto.SSUnknown, "Vigil: %v", err)
		}
	}
	if denied != nil {
		// The previous user, schema and character set stay (the
		// session was reset all the same).
		s.setUser(oldUser)
		s.key = oldKey
		s.rs = router.Session{RYW: oldUser.RYW, SessionWindow: oldUser.SessionWindow}
		s.vars.state.Reset(oldState.Schema)
		for _, v := range []string{"character_set_client", "character_set_connection", "character_set_results", "collation_connection"} {
			if val, ok := oldState.Get(v); ok {
				s.vars.state.Set(v, val)
			}
		}
		if denied.Code == mysqlproto.ERAccessDeniedError {
			if cfg.Denied != nil {
				cfg.Denied(ctx, cu.User)
			}
			s.srv.Stats.AuthFailures.Add(1)
			s.srv.log.Warn("client authentication failed (COM_CHANGE_USER)", "session", s.id, "client", s.remote, "user", cu.User,
				"from_user", oldKey.User)
		}
		s.key.Flavour = mysqlproto.FlavourAfterChangeUser(s.key.Flavour)
		s.logAuth(cu.User, denied)
		s.result.err, s.result.errMsg = denied.Code, denied.Message
		s.srv.Stats.Errors.Add(1)
		if err := s.client.RejectChangeUser(ctx, denied); err != nil {
			return errClient{err}
		}
		return nil
	}
	s.key.Flavour = mysqlproto.FlavourAfterChangeUser(s.key.Flavour)
	if g := s.srv.guard.Load(); g != nil {
		g.succeeded(cu.User, s.remoteIP())
	}
	s.logAuth(cu.User, nil)
	if err := s.client.WritePacket(mysqlproto.AppendOK(s.scratch[:0], 0, 0, s.bind.status(), 0)); err != nil {
		return errClient{err}
	}
	return nil
}
