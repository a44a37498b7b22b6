package frontend

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// updatePins records what a successful statement did to the session's
// ability to move between server connections.
func (s *Session) updatePins(info sqlscan.Info, out outcome) {
	f := info.Flags
	pin := func(reason int) {
		if s.pins[reason] == 0 {
			s.srv.Stats.Pins[reason].Add(1)
		}
		s.pins[reason]++
	}
	if f&sqlscan.FlagTempTable != 0 {
		if s.tempTables == 0 {
			s.srv.Stats.Pins[PinTempTable].Add(1)
		}
		s.tempTables++
	}
	if f&sqlscan.FlagDropTemp != 0 && s.tempTables > 0 {
		s.tempTables--
	}
	if f&sqlscan.FlagGetLock != 0 {
		pin(PinGetLock)
	}
	if f&sqlscan.FlagLockTables != 0 {
		pin(PinLockTables)
	}
	if f&sqlscan.FlagUnlockTables != 0 {
		s.pins[PinLockTables] = 0
	}
	if f&sqlscan.FlagCalcFoundRows != 0 {
		pin(PinFoundRows)
	}
	if f&sqlscan.FlagPrepare != 0 {
		pin(PinPrepare)
	}
	if f&sqlscan.FlagUserVar != 0 {
		pin(PinUserVar)
	}
	if f&sqlscan.FlagSqlLogBinOff != 0 {
		pin(PinSqlLogBin)
	}
	if f&sqlscan.FlagXA != 0 {
		switch info.Class {
		case sqlscan.ClassBegin:
			pin(PinXA)
		case sqlscan.ClassCommit, sqlscan.ClassRollback:
			s.pins[PinXA] = 0
		}
	}
	// SET TRANSACTION (without SESSION) applies to the next transaction
	// only: keep the connection until a statement ends outside one.
	if s.nextTrxSet && s.pins[PinTrxCharacteristics] == 0 {
		pin(PinTrxCharacteristics)
	} else if s.pins[PinTrxCharacteristics] > 0 && info.Class != sqlscan.ClassSet && !s.inTrx {
		s.pins[PinTrxCharacteristics] = 0
	}
}

// isNextTrxSet reports SET TRANSACTION ... (not SET SESSION TRANSACTION),
// which applies to the next transaction only. SET statements are rare, so
// normalising here costs nothing on the hot path.
func isNextTrxSet(q []byte) bool {
	var buf [64]byte
	n := sqlscan.Normalize(buf[:0], q)
	return bytes.HasPrefix(n, []byte("SET TRANSACTION "))
}

func (s *Session) comInitDB(ctx context.Context, pkt []byte) error {
	db := string(pkt[1:])
	target := router.Writer
	if s.bound() {
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
		s.state.SetSchema(db)
		c.State.SetSchema(db)
	}
	s.after(c, sqlscan.Info{Class: sqlscan.ClassUse}, out)
	return nil
}

// simpleCommand forwards a command whose reply has a fixed shape.
func (s *Session) simpleCommand(ctx context.Context, pkt []byte, target router.Target, kind respKind) error {
	if s.bound() {
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
		out.status = s.status()
	}
	s.after(c, sqlscan.Info{Class: sqlscan.ClassRead}, out)
	return nil
}

// comSetOption turns multi-statements on or off for this client; server
// connections always allow them, so Vigil enforces the client's choice.
func (s *Session) comSetOption(pkt []byte) error {
	if len(pkt) < 3 {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_SET_OPTION"))
	}
	switch uint16(pkt[1]) | uint16(pkt[2])<<8 {
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
		p = mysqlproto.AppendOK(s.scratch[:0], 0, 0, s.status(), 0)
		p[0] = mysqlproto.EOFPacket
	} else {
		p = mysqlproto.AppendEOF(s.scratch[:0], s.status(), 0)
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
	if c := s.conn; c != nil && s.bound() {
		// The held connection has state only this session knows: reset it
		// on the server too (without forwarding the server's OK: Vigil
		// answers the client itself below).
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.ResetConnection(rctx)
		cancel()
		if err != nil {
			s.dropConn(c)
		} else {
			s.setConn(nil)
			s.srv.pools[c.Index].Put(c)
		}
	}
	s.resetSession()
	return s.writeOK(0, 0)
}

func (s *Session) resetSession() {
	schema := s.state.Schema
	s.state.Reset(schema)
	s.inTrx, s.autocommitOff = false, false
	s.pins = [numPins]int{}
	s.tempTables = 0
	clear(s.stmts)
	s.lastGTID, s.gtidSeen = "", 0
	s.lastWrite = time.Time{}
}

// kill handles KILL [QUERY] <id> where id is a Vigil session id.
func (s *Session) kill(ctx context.Context, id uint64, query bool) error {
	if id > 0xffffffff {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERNoSuchThread, "HY000", "Unknown thread id: %d", id))
	}
	target := s.srv.Session(uint32(id))
	if target == nil {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERNoSuchThread, "HY000", "Unknown thread id: %d", id))
	}
	if target.userName() != s.user.Name {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERKillDenied, "HY000", "You are not owner of thread %d", id))
	}
	if target == s {
		if query {
			return s.writeOK(0, 0)
		}
		// KILL of one's own connection: the server answers with an error
		// and closes.
		_ = s.sendError(mysqlproto.NewError(1927, "70100", "Connection was killed"))
		_ = s.client.Flush()
		return errQuit
	}
	if c := target.running.Load(); c != nil {
		kctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := s.srv.pools[c.Index].Kill(kctx, s.key.User, c.ID, true)
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

// comChangeUser re-authenticates as another user and resets the session.
func (s *Session) comChangeUser(ctx context.Context, pkt []byte) error {
	user, pos, ok := mysqlproto.ReadNulString(pkt, 1)
	if !ok {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_CHANGE_USER"))
	}
	// auth response: 1-byte length (CLIENT_SECURE_CONNECTION)
	if pos >= len(pkt) {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_CHANGE_USER"))
	}
	n := int(pkt[pos])
	pos += 1 + n
	if pos > len(pkt) {
		return s.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed COM_CHANGE_USER"))
	}
	db, pos, _ := mysqlproto.ReadNulString(pkt, pos)
	coll := s.key.Collation
	if pos+2 <= len(pkt) {
		coll = pkt[pos]
	}
	name := string(user)
	schema := string(db)
	// Always verify with a fresh nonce through an auth switch: the scramble
	// in the packet was made with the nonce of the first handshake, which
	// Vigil does not keep.
	nonce := mysqlproto.NewNonce()
	sw := append([]byte{mysqlproto.AuthSwitchRequest}, mysqlproto.AuthNativePassword...)
	sw = append(append(append(sw, 0), nonce...), 0)
	s.client.Seq = 1
	if err := s.client.WritePacket(sw); err != nil {
		return errClient{err}
	}
	if err := s.client.Flush(); err != nil {
		return errClient{err}
	}
	reply, err := s.client.ReadPacket()
	if err != nil {
		return errClient{err}
	}
	u, found := (*s.srv.users.Load())[name]
	if !found || !mysqlproto.CheckNative(reply, nonce, u.Cred) {
		s.srv.Stats.AuthFailures.Add(1)
		host := s.remote
		if i := strings.LastIndexByte(host, ':'); i > 0 {
			host = host[:i]
		}
		_ = s.client.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(mysqlproto.ERAccessDeniedError, mysqlproto.SSAccessDenied,
			"Access denied for user '%s'@'%s' (using password: YES)", name, host)))
		_ = s.client.Flush()
		return fmt.Errorf("change user to %q: %w", name, mysqlproto.ErrAccessDenied)
	}
	// Drop everything the old identity held.
	if s.conn != nil {
		s.dropConn(s.conn)
	}
	s.releaseAll()
	s.resetSession()
	s.setUser(u)
	s.key.User = name
	s.key.Collation = coll
	s.rs = router.Session{RYW: u.RYW, SessionWindow: u.SessionWindow}
	s.state.Reset(schema)
	if schema != "" {
		if err := s.checkSchema(ctx, schema); err != nil {
			return s.sendError(err)
		}
	}
	seq := s.client.Seq
	if err := s.client.WritePacket(mysqlproto.AppendOK(s.scratch[:0], 0, 0, s.status(), 0)); err != nil {
		return errClient{err}
	}
	_ = seq
	return nil
}
