package frontend

import (
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// A command over a server's max_allowed_packet (issue 25): the server
// answers 1153 and closes the connection, and a command that made a
// server close its connection is never sent to another one. Vigil knows
// every server's bound from its checks (topology.Server.MaxPacket) and
// answers such a command itself, without sending it; when the server
// still refuses one (its value changed since the last check), its own
// error is the client's answer.

// errPacketTooLarge is a server's answer to a packet over its
// max_allowed_packet, word for word.
func errPacketTooLarge() *mysqlproto.SQLError {
	return mysqlproto.NewError(mysqlproto.ERNetPacketTooLarge, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes")
}

// tooLarge reports whether server idx refuses a command packet of n
// payload bytes (the command byte included), as far as its last good
// check tells.
func (s *Session) tooLarge(idx, n int) bool {
	m := s.maxPacket(idx)
	return m > 0 && n >= m
}

// maxPacket is server idx's topology.Server.MaxPacket (0: unknown).
func (s *Session) maxPacket(idx int) int {
	snap := s.srv.topo.Load()
	if snap == nil || idx < 0 || idx >= len(snap.Servers) {
		return 0
	}
	return snap.Servers[idx].MaxPacket
}

// underMaxPacket reports whether a command packet of n payload bytes is
// provably under server idx's max_allowed_packet: when the server drops
// the connection over such a command, its size is not why.
func (s *Session) underMaxPacket(idx, n int) bool {
	m := s.maxPacket(idx)
	return m > 0 && n < m
}

// refuseTooLarge answers a command that c's server would refuse, without
// sending it, and gives c back untouched.
func (s *Session) refuseTooLarge(c *backend.Conn) error {
	s.release(c)
	return s.refuse(errPacketTooLarge())
}

// refuseUnread answers a command over Vigil's own packet limit
// (Options.MaxPacket), refused from its header before its text was read,
// and gives it its query-log record (with no statement text).
func (s *Session) refuseUnread() {
	s.beginStmt()
	run := stmtRun{start: time.Now()}
	_ = s.sendError(errPacketTooLarge())
	s.logStmt(s.srv.proc.Load(), &run, time.Now())
}

// refuse answers the command being served with se. Unlike sendError it
// continues the client's sequence (a command of several frames is
// answered after its last one).
func (s *Session) refuse(se *mysqlproto.SQLError) error {
	s.stmtErr, s.stmtErrMsg = se.Code, se.Message
	s.srv.Stats.Errors.Add(1)
	if err := s.client.WritePacket(mysqlproto.AppendErr(s.scratch[:0], se)); err != nil {
		return errClient{err}
	}
	return nil
}

// lastWordsWait bounds the look for a server's error after a failed
// write: a server that closed the connection sent it before.
const lastWordsWait = 200 * time.Millisecond

// send writes a client's command (pkt, from its command byte) to c. On
// success the outcome is reached: the server may run it, so it is never
// sent to another server. A failed write may be the server refusing the
// command and closing the connection while it was still being written
// (MariaDB sends 1153 for a packet over max_allowed_packet, then closes;
// the error stays readable after the reset): the server's error, when it
// can still be read, is the client's answer (outcome.err, sent).
// Otherwise the error is errBackend, and the outcome is reached unless
// the command is provably below the server's bound: a smaller command
// cannot have made the server close, so the connection was dead before
// it and another server may have it.
func (s *Session) send(c *backend.Conn, pkt []byte) (outcome, error) {
	c.Seq = 0
	err := c.WritePacket(pkt)
	if err == nil {
		err = c.Flush()
	}
	if err == nil {
		return outcome{reached: true}, nil
	}
	return s.sendFailed(c, pkt, err)
}

// sendFailed is send's answer to a failed write of pkt to c.
func (s *Session) sendFailed(c *backend.Conn, pkt []byte, err error) (outcome, error) {
	c.Broken = true
	_ = c.SetDeadline(time.Now().Add(lastWordsWait))
	f, rerr := c.ReadFrame()
	if rerr != nil || !mysqlproto.IsErrPacket(mysqlproto.FramePayload(f)) {
		return outcome{reached: !s.underMaxPacket(c.Index, len(pkt))}, errBackend{err}
	}
	o := outcome{err: c.NoteErr(mysqlproto.FramePayload(f)), reached: true, sent: true}
	if err := s.client.WritePacket(mysqlproto.AppendErr(s.scratch[:0], o.err)); err != nil {
		return o, errClient{err}
	}
	return o, nil
}
