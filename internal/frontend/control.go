package frontend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
)

// The control plane's levers on the data path: hold new statements during
// a switchover, fence a server during a failover, and see who still has a
// transaction where.

// gate holds new statements until it is opened.
type gate struct {
	open   chan struct{}
	reason string
	until  time.Time
}

// Hold makes new statements (those of sessions that hold no server
// connection) wait until Release, at most max; statements of sessions
// inside a transaction continue so it can finish.
func (s *Server) Hold(reason string, max time.Duration) {
	g := &gate{open: make(chan struct{}), reason: reason, until: time.Now().Add(max)}
	if old := s.gate.Swap(g); old != nil {
		close(old.open)
	}
}

// Release lets held statements go (to the writer of the then current
// snapshot).
func (s *Server) Release() {
	if g := s.gate.Swap(nil); g != nil {
		close(g.open)
	}
}

// noWriteDeadline: writes are not gated (no coordination).
const noWriteDeadline = math.MaxInt64

// SetWriteDeadline gates writes by coordination among Vigil instances:
// writes are routed until `until` (monotonic), refused with 7015 after it
// and at once when it is zero; the sessions holding a connection to the
// writer then lose it (their transaction cannot commit through this
// instance). reads: refuse reads too while writes are refused. why says
// what to do, in the error.
func (s *Server) SetWriteDeadline(until time.Time, refuseReads bool, why string) {
	s.refuseReadsFenced.Store(refuseReads)
	s.selfFenceWhy.Store(&why)
	if until.IsZero() {
		if s.writeUntil.Swap(-1) != -1 {
			s.cutWriterSessions()
		}
		return
	}
	s.writeUntil.Store(int64(until.Sub(s.base)))
}

// ClearWriteDeadline turns the write gate off (coordination disabled).
func (s *Server) ClearWriteDeadline() { s.writeUntil.Store(noWriteDeadline) }

// WritesFenced reports whether the write gate refuses writes now.
func (s *Server) WritesFenced() bool {
	u := s.writeUntil.Load()
	return u != noWriteDeadline && int64(time.Since(s.base)) >= u
}

// cutWriterSessions closes the writer connections sessions hold.
func (s *Server) cutWriterSessions() {
	w := s.topo.Load().Writer
	if w < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		if c := sess.bind.heldConn.Load(); c != nil && c.Index == w {
			c.NetConn().Close()
		}
	}
}

// checkWriteGate refuses a statement for target when this instance may
// not route writes (its coordination lease is not sure to hold). held is
// the index of the connection the session holds (-1 none).
func (s *Session) checkWriteGate(target router.Target, held int) error {
	u := s.srv.writeUntil.Load()
	if u == noWriteDeadline || int64(time.Since(s.srv.base)) < u {
		return nil
	}
	if target == router.Reader && !s.srv.refuseReadsFenced.Load() {
		return nil
	}
	if target == router.Keep && held >= 0 && held != s.srv.topo.Load().Writer && !s.srv.refuseReadsFenced.Load() {
		return nil // a transaction on a replica
	}
	what := "writes"
	if target == router.Reader {
		what = "reads"
	}
	return s.selfFencedError(what)
}

// selfFencedError is 7015 for what this instance refuses while it may
// not route writes.
func (s *Session) selfFencedError(what string) error {
	why := ""
	if p := s.srv.selfFenceWhy.Load(); p != nil {
		why = *p
	}
	return mysqlproto.NewError(mysqlproto.ERVigilSelfFenced, mysqlproto.SSVigilSelfFenced,
		"Vigil: this instance refuses %s in cluster %s: %s; retry through another Vigil instance", what, s.opts().Cluster, why)
}

// waitGate blocks a new statement while a hold is on.
func (s *Session) waitGate(ctx context.Context) error {
	g := s.srv.gate.Load()
	if g == nil {
		return nil
	}
	s.srv.Stats.Held.Add(1)
	t := time.NewTimer(time.Until(g.until))
	defer t.Stop()
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return mysqlproto.NewError(mysqlproto.ERVigilFailoverHeld, mysqlproto.SSVigilUnavailable,
			"Vigil: statement held too long in cluster %s: %s", s.opts().Cluster, g.reason)
	}
}

// Fence stops all traffic to server idx: its pool refuses connections,
// idle ones are closed, and sessions that hold a connection there (open
// transactions) lose it: their next or current statement fails with
// 7011, since the transaction cannot have committed anywhere else.
func (s *Server) Fence(idx int, reason string) int {
	if s.pool(idx) == nil {
		return 0
	}
	s.fenced[idx].Store(true)
	s.fenceReason[idx].Store(&reason)
	s.pool(idx).SetFenced(true)
	// Closing a connection here does not stop what was already sent on
	// it: a partitioned server receives it (TCP retransmits) once the
	// partition heals. The executor kills these on the server when it
	// answers again (PreFenceConns).
	s.fenceMu.Lock()
	if s.preFence[idx] == nil {
		s.preFence[idx] = map[uint32]struct{}{}
	}
	for _, id := range s.pool(idx).ConnIDs() {
		s.preFence[idx][id] = struct{}{}
	}
	s.fenceMu.Unlock()
	s.pool(idx).CloseIdle()
	n := 0
	s.mu.Lock()
	for _, sess := range s.sessions {
		if c := sess.bind.heldConn.Load(); c != nil && c.Index == idx {
			c.NetConn().Close()
			n++
		} else if c := sess.cur.running.Load(); c != nil && c.Index == idx {
			c.NetConn().Close()
			n++
		}
		if c := sess.prev.at.Load(); c != nil && c.Index == idx {
			// A connection kept for the previous statement's warnings or
			// insert id: no transaction, but no traffic either.
			c.NetConn().Close()
		}
	}
	s.mu.Unlock()
	return n
}

// PreFenceConns are the server connection ids of server idx that Vigil
// had open when it was fenced and that were not killed yet.
func (s *Server) PreFenceConns(idx int) []uint32 {
	if idx < 0 || idx >= len(s.pools) {
		return nil
	}
	s.fenceMu.Lock()
	defer s.fenceMu.Unlock()
	out := make([]uint32, 0, len(s.preFence[idx]))
	for id := range s.preFence[idx] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// ForgetPreFenceConns drops ids from server idx's pre-fence list (they
// were killed, or the server restarted and they are gone).
func (s *Server) ForgetPreFenceConns(idx int, ids []uint32) {
	if idx < 0 || idx >= len(s.pools) {
		return
	}
	s.fenceMu.Lock()
	for _, id := range ids {
		delete(s.preFence[idx], id)
	}
	s.fenceMu.Unlock()
}

// Unfence lets traffic reach server idx again (after rejoin).
func (s *Server) Unfence(idx int) {
	if s.pool(idx) == nil {
		return
	}
	s.fenced[idx].Store(false)
	s.pool(idx).SetFenced(false)
}

// Fenced reports whether server idx is fenced.
func (s *Server) Fenced(idx int) bool { return idx >= 0 && idx < len(s.fenced) && s.fenced[idx].Load() }

// BoundSessions counts sessions holding a server connection to idx (open
// transactions and pins there).
func (s *Server) BoundSessions(idx int) int {
	n := 0
	s.mu.Lock()
	for _, sess := range s.sessions {
		if int(sess.bind.heldIdx.Load()) == idx {
			n++
		}
	}
	s.mu.Unlock()
	return n
}

// KillBound closes the server connections of sessions still holding one
// to idx (their transactions get an error), for a switchover whose
// transactions did not finish in time.
func (s *Server) KillBound(idx int) int {
	n := 0
	s.mu.Lock()
	for _, sess := range s.sessions {
		if c := sess.bind.heldConn.Load(); c != nil && c.Index == idx {
			c.NetConn().Close()
			n++
		}
	}
	s.mu.Unlock()
	return n
}

func (s *Session) fencedError(c *backend.Conn) error {
	reason := "fenced"
	if r := s.srv.fenceReason[c.Index].Load(); r != nil {
		reason = *r
	}
	return mysqlproto.NewError(mysqlproto.ERVigilFenced, mysqlproto.SSVigilLost,
		"Vigil: server %s was fenced (%s); the open transaction did not commit, retry it", c.Server, reason)
}

// ErrNoSession: no session has that id.
var ErrNoSession = errors.New("no such session")

// KillSession ends a client session as an operator asked: the statement
// it runs is killed on its server, and unless queryOnly the client
// connection is closed (the session's transaction, if any, rolls back).
func (s *Server) KillSession(ctx context.Context, id uint32, queryOnly bool) error {
	target := s.Session(id)
	if target == nil {
		return ErrNoSession
	}
	if c := target.cur.running.Load(); c != nil {
		kctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := s.pool(c.Index).Kill(kctx, target.cur.userName(), c.ID, true)
		cancel()
		if err != nil {
			return fmt.Errorf("kill on server %s: %w", c.Server, err)
		}
	}
	if !queryOnly {
		s.log.Info("session killed by an operator", "session", id, "user", target.cur.userName(), "client", target.remote)
		target.client.Close()
	}
	return nil
}
