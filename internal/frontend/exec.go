package frontend

// Running one statement on a server connection: acquire, send, forward
// the reply, and update the session from its outcome (after) or from a
// failure.

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

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
		s.result.note(c.Server, c.Index, out)
		if err != nil {
			var eb errBackend
			// Only a command the server never had whole goes to another
			// server: one it read may have run, or made it close the
			// connection (a packet over max_allowed_packet).
			if errors.As(err, &eb) && !out.reached && !out.sent && target == router.Reader && attempt == 0 && !s.bind.bound() {
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
	s.cur.running.Store(c)
	defer s.cur.running.Store(nil)
	epoch := s.srv.replyEpoch(c.Index)
	c.Seq = 0
	if err := c.WritePacket(pkt); err != nil {
		return s.sendFailed(c, pkt, err)
	}
	s.srv.bal.Begin(c.Index)
	s.armWatch()
	var timer *time.Timer
	var killed chan struct{}
	if s.timeout.limit > 0 {
		killed = make(chan struct{})
		timer = time.AfterFunc(s.timeout.limit, func() {
			defer close(killed)
			s.timeout.fired.Store(true)
			s.srv.Stats.Timeouts.Add(1)
			s.killRunning(c)
		})
	}
	out, err := s.exchange(c, pkt, kind, epoch)
	if timer != nil && !timer.Stop() {
		// The kill may land after the statement ended: never reuse the
		// connection it may hit.
		<-killed
		s.timeout.fired.Store(false)
		if !s.bind.bound() {
			c.Broken = true
		}
	}
	s.disarmWatch()
	s.srv.bal.End(c.Index)
	return out, err
}

// exchange sends the command queued on c and passes its answer on. The
// command goes out and the answer is awaited in one poller wait
// (mysqlproto.Conn.FlushAwait): no read is tried before the server can
// have answered. What the client has waits no longer than that answer.
func (s *Session) exchange(c *backend.Conn, pkt []byte, kind respKind, epoch uint64) (outcome, error) {
	if s.client.Pending() > 0 {
		if err := s.client.Flush(); err != nil {
			c.Broken = true // the command is queued but never sent
			return outcome{}, errClient{err}
		}
	}
	awaited, err := c.FlushAwait()
	if err != nil {
		return s.sendFailed(c, pkt, err)
	}
	if !awaited {
		// The reply cannot be there yet: let other sessions run first,
		// so the read below usually finds it.
		runtime.Gosched()
	}
	out, err := s.forward(c, kind)
	// The server had the command whole. If it dropped the connection
	// before any byte reached the client, a read may still go to another
	// server (the caller decides) when its size cannot be the reason (a
	// replica killed or restarted mid-read, as ProxySQL's and MaxScale's
	// read retries allow); one over (or of unknown relation to) the
	// server's max_allowed_packet is never resent.
	out.reached = err == nil || !s.underMaxPacket(c.Index, len(pkt))
	if err == nil {
		s.srv.noteReply(c.Index, epoch) // passive evidence for the monitor (activity.go)
	}
	return out, err
}

// failed handles an I/O failure during a statement.
func (s *Session) failed(c *backend.Conn, err error, out outcome) error {
	var eb errBackend
	if errors.As(err, &eb) {
		s.srv.serverLost(c.Index)
		wasBound := s.bind.bound()
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
	s.killRunning(c)
	s.dropConn(c)
	return err
}

// after updates the session from a finished statement and gives the
// server connection back unless the session must keep it.
func (s *Session) after(c *backend.Conn, info sqlscan.Info, out outcome) {
	if out.status != 0 || out.err == nil {
		s.bind.noteStatus(out.status)
	}
	if out.err == nil {
		s.countPins(s.bind.notePins(info, s.nextTrxSet))
		if (info.Class == sqlscan.ClassWrite || info.Class == sqlscan.ClassCommit) && !s.bind.inTrx {
			// With GTID read-your-writes the new last_gtid says where reads
			// must wait; without one (binary log off), fall back to the
			// session window.
			if s.user.RYW == router.RYWSession || ((s.user.RYW == router.RYWGTID || s.user.RYW == router.RYWGlobal) && !s.ryw.fresh) {
				s.ryw.lastWrite = time.Now()
			}
		}
	}
	s.ryw.fresh = false
	if info.Flags&sqlscan.FlagCalcFoundRows == 0 {
		s.bind.unpin(PinFoundRows)
	}
	s.rs.LastWrite = s.ryw.lastWrite
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
		if !s.bind.bound() {
			c.Broken = true // this one too, once the session is done with it
		}
	}
	if (s.vars.trackTouched || (info.Flags&sqlscan.FlagSessionTrack != 0 && info.Class == sqlscan.ClassSet)) && !c.Broken {
		s.restoreTracking(c, s.prev.stmtText)
	}
	if info.Flags&sqlscan.FlagGlobalSet != 0 && out.err == nil && info.Facts&sqlscan.FactTrackName != 0 {
		s.refreshTrackDefaults(c)
	}
	if s.notePrev(c, info, out) {
		return // kept for the next statement (prev.go)
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
