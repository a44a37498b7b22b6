package frontend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/topology"
)

// acquire returns the server connection for a statement: the one the
// session holds, or a pooled one for the target whose session state is
// made to match the session's.
func (s *Session) acquire(ctx context.Context, target router.Target, exclude int) (*backend.Conn, error) {
	if s.conn != nil {
		if target == router.Keep || s.bound() {
			return s.conn, nil
		}
		// Not bound any more (e.g. multiplexing was just turned on again).
		s.release(s.conn)
	}
	if err := s.waitGate(ctx); err != nil {
		return nil, err
	}
	snap := s.srv.topo.Load()
	idx, reason := s.pick(snap, target, exclude)
	var c *backend.Conn
	if idx >= 0 {
		// Fast path: an idle pooled connection whose state already fits,
		// without a deadline context.
		if s.sticky != nil {
			c = s.sticky[idx]
			delete(s.sticky, idx)
		} else {
			c = s.srv.pools[idx].TryGet(s.key)
		}
		if c != nil && c.State.Satisfies(&s.state) {
			s.countRoute(target)
			s.setConn(c)
			return c, nil
		}
	}
	opts := s.opts()
	deadline := time.Now().Add(opts.ConnectTimeout)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	havePick := true
	for ; ; snap = s.srv.topo.Load() {
		if !havePick {
			idx, reason = s.pick(snap, target, exclude)
		}
		havePick = false
		if idx < 0 {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, s.noServerError(snap, target, reason)
			}
			// Wait for the topology to change (failover, recovery).
			select {
			case <-time.After(50 * time.Millisecond):
			case <-cctx.Done():
			}
			continue
		}
		s.countRoute(target)
		if c == nil {
			var err error
			c, err = s.srv.pools[idx].Get(cctx, s.key)
			if err != nil {
				if errors.Is(err, backend.ErrPoolExhausted) {
					return nil, mysqlproto.NewError(mysqlproto.ERVigilPoolExhausted, mysqlproto.SSVigilUnavailable,
						"Vigil: no connection to server %s became free within connect_timeout %s (cluster %s): %v",
						snap.Servers[idx].Name, opts.ConnectTimeout, opts.Cluster, err)
				}
				if target == router.Reader && exclude < 0 {
					// Try another reader before giving up.
					exclude = idx
					continue
				}
				if target != router.Reader && time.Now().Add(100*time.Millisecond).Before(deadline) && ctx.Err() == nil {
					// The writer does not answer: it may be dying and about
					// to be replaced. Wait for the topology rather than fail
					// the statement at once.
					select {
					case <-time.After(50 * time.Millisecond):
					case <-cctx.Done():
					}
					continue
				}
				return nil, mysqlproto.NewError(mysqlproto.ERVigilBackendConnect, mysqlproto.SSVigilUnavailable,
					"Vigil: cannot connect to %s %s of cluster %s: %v", target, snap.Servers[idx].Name, opts.Cluster, err)
			}
		}
		if err := c.Sync(cctx, &s.state); err != nil {
			var se *mysqlproto.SQLError
			if errors.As(err, &se) {
				s.srv.pools[idx].Put(c)
				return nil, se
			}
			s.srv.pools[idx].Discard(c)
			return nil, mysqlproto.NewError(mysqlproto.ERVigilBackendConnect, mysqlproto.SSVigilUnavailable,
				"Vigil: %v", err)
		}
		s.setConn(c)
		return c, nil
	}
}

func (s *Session) pick(snap *topology.Snapshot, target router.Target, exclude int) (int, string) {
	switch target {
	case router.Reader:
		return s.srv.bal.PickReader(snap, s.opts().ReadsOnPrimary, exclude)
	case router.Group:
		return s.srv.bal.PickIn(snap, s.group, exclude)
	default:
		return router.WriterFor(snap)
	}
}

func (s *Session) noServerError(snap *topology.Snapshot, target router.Target, reason string) error {
	cluster := s.opts().Cluster
	if target == router.Reader {
		return mysqlproto.NewError(mysqlproto.ERVigilNoReader, mysqlproto.SSVigilUnavailable,
			"Vigil: no readable server in cluster %s: %s", cluster, reason)
	}
	if target == router.Group {
		return mysqlproto.NewError(mysqlproto.ERVigilNoReader, mysqlproto.SSVigilUnavailable,
			"Vigil: no server of the group a rule routes to is available in cluster %s: %s", cluster, reason)
	}
	return mysqlproto.NewError(mysqlproto.ERVigilNoWriter, mysqlproto.SSVigilUnavailable,
		"Vigil: no writable primary in cluster %s: %s", cluster, reason)
}

// release gives the held connection back unless the session must keep it.
func (s *Session) release(c *backend.Conn) {
	if c == nil {
		return
	}
	if c.Broken {
		s.dropConn(c)
		return
	}
	if s.bound() {
		s.setConn(c)
		return
	}
	s.setConn(nil)
	if s.user != nil && !s.user.Multiplexing {
		if s.sticky == nil {
			s.sticky = map[int]*backend.Conn{}
		}
		if old := s.sticky[c.Index]; old != nil && old != c {
			s.srv.pools[old.Index].Put(old)
		}
		s.sticky[c.Index] = c
		return
	}
	s.srv.pools[c.Index].Put(c)
}

// dropConn closes a server connection that cannot be reused.
func (s *Session) dropConn(c *backend.Conn) {
	if s.conn == c {
		s.setConn(nil)
	}
	if s.sticky != nil && s.sticky[c.Index] == c {
		delete(s.sticky, c.Index)
	}
	s.srv.pools[c.Index].Discard(c)
}

// releaseAll ends the session's hold on server connections. A connection
// with a transaction or pins is closed: its state belongs to this client.
func (s *Session) releaseAll() {
	if s.conn != nil {
		if s.bound() {
			s.dropConn(s.conn)
		} else {
			s.srv.pools[s.conn.Index].Put(s.conn)
		}
		s.setConn(nil)
	}
	for _, c := range s.sticky {
		if s.bound() {
			s.srv.pools[c.Index].Discard(c)
		} else {
			s.srv.pools[c.Index].Put(c)
		}
	}
	s.sticky = nil
}

// resetTxn forgets transaction state and pins after the server connection
// that held them was lost.
func (s *Session) resetTxn() {
	s.inTrx = false
	s.autocommitOff = false
	s.pins = [numPins]int{}
	s.tempTables = 0
	if v, ok := s.state.Get("autocommit"); ok && v == "OFF" {
		s.state.Set("autocommit", "ON")
	}
}

// waitGTID makes a read on a replica see the session's last write: it
// waits (bounded) until the replica has applied the write's GTID, or
// moves the read to the writer.
// gtidWaitSQL is the statement that waits on a replica until it has
// applied gtid, at most timeout; it returns 0 when it has. MariaDB GTIDs
// are domain-server-seq (MASTER_GTID_WAIT), MySQL's uuid:n
// (WAIT_FOR_EXECUTED_GTID_SET).
func gtidWaitSQL(gtid string, timeout time.Duration) string {
	secs := strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64)
	if strings.Contains(gtid, ":") {
		return "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + gtid + "', " + secs + ")"
	}
	return "SELECT MASTER_GTID_WAIT('" + gtid + "', " + secs + ")"
}

func (s *Session) waitGTID(ctx context.Context, c *backend.Conn) (*backend.Conn, error) {
	if s.user.RYW != router.RYWGTID || s.lastGTID == "" || s.gtidSeen&(1<<uint(c.Index)) != 0 {
		return c, nil
	}
	snap := s.srv.topo.Load()
	if snap != nil && snap.Writer == c.Index {
		return c, nil
	}
	if snap != nil && c.Index < len(snap.Servers) && topology.Applied(snap.Servers[c.Index].GTID, s.lastGTID) {
		// The monitor already saw the replica past the write.
		s.srv.Stats.GTIDKnown.Add(1)
		s.gtidSeen |= 1 << uint(c.Index)
		return c, nil
	}
	s.srv.Stats.GTIDWaits.Add(1)
	to := s.opts().GTIDWaitTimeout
	wctx, cancel := context.WithTimeout(ctx, to+2*time.Second)
	res, err := c.Exec(wctx, gtidWaitSQL(s.lastGTID, to))
	cancel()
	if err == nil && len(res.Rows) == 1 && len(res.Rows[0]) == 1 && res.Rows[0][0] == "0" {
		s.gtidSeen |= 1 << uint(c.Index)
		return c, nil
	}
	// Timed out or failed: read from the writer instead.
	s.srv.Stats.GTIDFallback.Add(1)
	if err != nil && c.Broken {
		s.dropConn(c)
	} else {
		s.release(c)
	}
	return s.acquire(ctx, router.Writer, -1)
}

// killRunning kills the query a server connection is running, when the
// client that asked for it is gone.
func (s *Session) killRunning(c *backend.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.srv.pools[c.Index].Kill(ctx, s.key.User, c.ID, true); err != nil {
		s.srv.log.Warn("could not kill the query of a vanished client", "session", s.id, "server", c.Server, "err", err)
	}
}

// sendError sends err to the client as an ERR packet.
func (s *Session) sendError(err error) error {
	var se *mysqlproto.SQLError
	if !errors.As(err, &se) {
		se = mysqlproto.NewError(mysqlproto.ERUnknownError, mysqlproto.SSUnknown, "Vigil: %v", err)
	}
	s.stmtErr, s.stmtErrMsg = se.Code, se.Message
	s.srv.Stats.Errors.Add(1)
	s.client.Seq = 1
	if err := s.client.WritePacket(mysqlproto.AppendErr(s.scratch[:0], se)); err != nil {
		return errClient{err}
	}
	return nil
}

// writeOK answers a command with OK and the session's status.
func (s *Session) writeOK(affected, lastID uint64) error {
	s.client.Seq = 1
	if err := s.client.WritePacket(mysqlproto.AppendOK(s.scratch[:0], affected, lastID, s.status(), 0)); err != nil {
		return errClient{err}
	}
	return nil
}

func (s *Session) status() uint16 {
	var st uint16
	if !s.autocommitOff {
		st |= mysqlproto.ServerStatusAutocommit
	}
	if s.inTrx {
		st |= mysqlproto.ServerStatusInTrans
	}
	return st
}

// applySessionState records the changes an OK packet reports on both the
// server connection and the session.
func (s *Session) applySessionState(c *backend.Conn, ok *mysqlproto.OK) {
	_ = mysqlproto.EachSessionChange(ok.SessionState, func(ch mysqlproto.SessionChange) {
		switch ch.Type {
		case mysqlproto.SessionTrackSystemVariables:
			name := lowerASCII(ch.Name)
			if name == "last_gtid" {
				if len(ch.Value) > 0 {
					s.lastGTID = string(ch.Value)
					s.lastGTIDFresh = true
					s.gtidSeen = 1 << uint(c.Index)
				}
				return
			}
			if backendUntracked(name) {
				return
			}
			v := string(ch.Value)
			c.State.Set(name, v)
			s.state.Set(name, v)
		case mysqlproto.SessionTrackGTIDs:
			// MySQL with session_track_gtids=OWN_GTID: the GTID(s) of the
			// transaction this session just committed.
			if len(ch.Name) > 0 {
				s.lastGTID = string(ch.Name)
				s.lastGTIDFresh = true
				s.gtidSeen = 1 << uint(c.Index)
			}
		case mysqlproto.SessionTrackSchema:
			db := string(ch.Name)
			c.State.SetSchema(db)
			s.state.SetSchema(db)
		}
	})
}

func backendUntracked(name string) bool { return backend.Untracked(name) }

func lowerASCII(b []byte) string {
	for _, c := range b {
		if c >= 'A' && c <= 'Z' {
			out := make([]byte, len(b))
			for i, c := range b {
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				out[i] = c
			}
			return string(out)
		}
	}
	return string(b)
}

// schemaCheckTTL is how long a default schema that a login checked is
// trusted for later logins of the same user without asking a server
// again (connection churn would otherwise pay a server round trip per
// login). A schema dropped meanwhile is reported by the first statement.
const schemaCheckTTL = 10 * time.Second

func (s *Session) checkSchema(ctx context.Context, db string) error {
	key := s.key.User + "\x00" + db
	now := time.Now()
	if exp, ok := s.srv.schemas.Load(key); ok && now.UnixNano() < exp.(int64) {
		return nil
	}
	if err := s.checkSchemaOnServer(ctx, db); err != nil {
		return err
	}
	if s.srv.schemaCount.Add(1) > 10000 {
		// Bound the cache: start over rather than grow without limit.
		s.srv.schemas.Clear()
		s.srv.schemaCount.Store(0)
	}
	s.srv.schemas.Store(key, now.Add(schemaCheckTTL).UnixNano())
	return nil
}

func (s *Session) checkSchemaOnServer(ctx context.Context, db string) error {
	c, err := s.acquire(ctx, router.Writer, -1)
	if err != nil {
		// Unknown writer state: accept; the first statement will tell.
		var se *mysqlproto.SQLError
		if errors.As(err, &se) && (se.Code == mysqlproto.ERVigilNoWriter || se.Code == mysqlproto.ERVigilBackendConnect) {
			return nil
		}
		return err
	}
	defer s.release(c)
	if err := c.InitDB(ctx, db); err != nil {
		var se *mysqlproto.SQLError
		if errors.As(err, &se) {
			return se
		}
		s.dropConn(c)
		return fmt.Errorf("checking schema %s: %w", db, err)
	}
	return nil
}

func (s *Session) countRoute(target router.Target) {
	if target == router.Reader {
		s.srv.Stats.ToReader.Add(1)
	} else {
		s.srv.Stats.ToWriter.Add(1)
	}
}
