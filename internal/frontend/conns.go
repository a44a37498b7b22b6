package frontend

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/topology"
)

// acquire returns the server connection for a statement: the one the
// session holds, or a pooled one for the target whose session state is
// made to match the session's.
func (s *Session) acquire(ctx context.Context, target router.Target, exclude int) (*backend.Conn, error) {
	held := -1
	if s.bind.conn != nil {
		held = s.bind.conn.Index
	}
	if err := s.checkWriteGate(target, held); err != nil {
		return nil, err
	}
	if s.bind.conn != nil {
		if target == router.Keep || s.bind.bound() {
			return s.bind.conn, nil
		}
		// Not bound any more (e.g. multiplexing was just turned on again).
		s.release(s.bind.conn)
	}
	if err := s.waitGate(ctx); err != nil {
		return nil, err
	}
	// Again after a hold: a statement held through a switchover may have
	// waited past this instance's lease (the process stopped, etcd out of
	// reach); routed now to the writer it last knew, it could write to an
	// old primary another instance has demoted.
	if err := s.checkWriteGate(target, -1); err != nil {
		return nil, err
	}
	snap := s.srv.topo.Load()
	idx, reason := s.pickExcept(snap, target, exclude)
	if idx >= 0 && idx == snap.Writer && target != router.Writer && s.srv.WritesFenced() {
		// Self-fenced: reads go on from the replicas; the writer this
		// instance last knew may no longer be the cluster's.
		alt, _ := s.pickExcept(snap, target, idx)
		if alt < 0 || alt == snap.Writer {
			return nil, s.selfFencedError("reads that only the writer can serve")
		}
		idx = alt
	}
	c := s.idleFor(idx)
	if idx >= 0 && c != nil && c.State.Satisfies(&s.vars.state) {
		s.countRoute(target)
		s.bind.set(c)
		if target == router.Reader {
			return s.waitGTID(ctx, c)
		}
		return c, nil
	}
	return s.acquireWait(ctx, target, exclude, snap, idx, reason, c)
}

// idleFor returns a connection to server idx (-1: none chosen) that the
// session can take without waiting, or nil: the previous statement's
// connection when it is on idx (otherwise it goes back now), the
// session's sticky one, or an idle pooled one whose state already fits
// (the fast path, without a deadline context).
func (s *Session) idleFor(idx int) *backend.Conn {
	var c *backend.Conn
	if ph := s.prev.held; ph != nil {
		s.prev.held = nil
		if ph.Index == idx && !ph.ClosedWhileIdle(time.Now()) {
			c = ph
			s.prev.ranOnPrev = true
		} else {
			s.returnPrev(ph) // closed if the server closed it meanwhile
		}
	}
	if idx < 0 || c != nil {
		return c
	}
	if s.bind.sticky == nil {
		return s.srv.pool(idx).TryGet(s.key, &s.vars.state)
	}
	c = s.bind.sticky[idx]
	delete(s.bind.sticky, idx)
	if c != nil && c.ClosedWhileIdle(time.Now()) {
		// Killed, or timed out, while the session was idle: it held
		// nothing the session needs (not bound), take another.
		s.srv.pool(idx).Discard(c)
		c = nil
	}
	return c
}

// acquireWait is acquire's slow path: it waits, within connect_timeout,
// for a server to pick and a connection to it, and makes the
// connection's session state the session's. idx, reason: the first pick;
// c: a connection to idx to make fit, or nil.
func (s *Session) acquireWait(ctx context.Context, target router.Target, exclude int, snap *topology.Snapshot, idx int, reason string, c *backend.Conn) (*backend.Conn, error) {
	opts := s.opts()
	deadline := time.Now().Add(opts.ConnectTimeout)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	havePick := true
	var dialErr error // a reader that could not be reached
	for ; ; snap = s.srv.topo.Load() {
		if !havePick {
			idx, reason = s.pickExcept(snap, target, exclude)
		}
		havePick = false
		if idx < 0 {
			if dialErr != nil {
				// The reader that was tried could not be reached and no
				// other is readable: say why, rather than "no readable
				// server" with that server shown ONLINE.
				return nil, s.connectError(target, snap.Servers[exclude].Name, dialErr)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, s.noServerError(snap, target, reason)
			}
			// Wait for the topology to change (failover, recovery).
			waitTopology(cctx)
			continue
		}
		s.countRoute(target)
		if c == nil {
			var err error
			c, err = s.srv.pool(idx).Get(cctx, s.key, &s.vars.state)
			if err != nil {
				if w, final, ferr := s.getFailed(ctx, opts, target, snap.Servers[idx].Name, err); final {
					return w, ferr
				}
				if target == router.Reader && exclude < 0 {
					// Try another reader before giving up.
					exclude = idx
					dialErr = err
					continue
				}
				if target != router.Reader && time.Now().Add(100*time.Millisecond).Before(deadline) && ctx.Err() == nil {
					// The writer does not answer: it may be dying and about
					// to be replaced. Wait for the topology rather than fail
					// the statement at once.
					waitTopology(cctx)
					continue
				}
				return nil, s.connectError(target, snap.Servers[idx].Name, err)
			}
		}
		if target == router.Reader {
			// Read-your-writes first: the session's last write may have
			// created the schema (or the tables) the replay below needs.
			w, err := s.waitGTID(ctx, c)
			if err != nil {
				return nil, err
			}
			if w != c {
				return w, nil // the writer, already in the session's state
			}
		}
		if err := c.Sync(cctx, &s.vars.state); err != nil {
			retry, w, err := s.syncFailed(ctx, target, idx, c, err)
			if retry {
				c = nil
				havePick = true
				continue
			}
			return w, err
		}
		s.bind.set(c)
		return c, nil
	}
}

// waitTopology pauses a connection wait for the topology to change.
func waitTopology(cctx context.Context) {
	select {
	case <-time.After(50 * time.Millisecond):
	case <-cctx.Done():
	}
}

// getFailed answers a failed connection Get that neither waiting nor
// another server will change (final): the pool stayed exhausted, or the
// server refused the login. Otherwise the server could not be reached.
func (s *Session) getFailed(ctx context.Context, opts *Options, target router.Target, server string, err error) (_ *backend.Conn, final bool, _ error) {
	if errors.Is(err, backend.ErrPoolExhausted) {
		return nil, true, mysqlproto.NewError(mysqlproto.ERVigilPoolExhausted, mysqlproto.SSVigilUnavailable,
			"Vigil: no connection to server %s became free within connect_timeout %s (cluster %s): %v",
			server, opts.ConnectTimeout, opts.Cluster, err)
	}
	se := serverRefused(err)
	if se == nil {
		return nil, false, nil
	}
	if target == router.Reader && (se.Code == 1045 || missingObject(se.Code)) {
		// A replica refuses the account or its schema: it may not have
		// replicated a user or grant created a moment ago. The writer
		// decides.
		s.srv.Stats.PrepareRetries.Add(1)
		c, err := s.acquire(ctx, router.Writer, -1)
		return c, true, err
	}
	// The server answered the login with an error (the account does not
	// exist there, is locked…): waiting or another server will not change
	// that.
	return nil, true, s.connectError(target, server, err)
}

// syncFailed handles a failure to make c, on server idx, match the
// session's state: retry (take another connection), the writer's
// connection for a read, or the error for the client.
func (s *Session) syncFailed(ctx context.Context, target router.Target, idx int, c *backend.Conn, err error) (retry bool, _ *backend.Conn, _ error) {
	var se *mysqlproto.SQLError
	if errors.As(err, &se) {
		s.srv.pool(idx).Put(c)
		if target == router.Reader && missingObject(se.Code) {
			// The replica does not have the session's schema (yet:
			// another session created it a moment ago): the writer
			// decides.
			s.srv.Stats.PrepareRetries.Add(1)
			w, err := s.acquire(ctx, router.Writer, -1)
			return false, w, err
		}
		return false, nil, se
	}
	if errors.Is(err, backend.ErrSchemaSet) {
		// A connection with a default schema for a session without one:
		// take another (the pool hands out only schemaless ones for such
		// sessions).
		s.srv.pool(idx).Put(c)
		return true, nil, nil
	}
	s.srv.pool(idx).Discard(c)
	return false, nil, mysqlproto.NewError(mysqlproto.ERVigilBackendConnect, mysqlproto.SSVigilUnavailable,
		"Vigil: %v", err)
}

// pickExcept picks a server for target other than exclude, the server
// one of whose connections just failed (-1: none). When no other server
// can serve, exclude itself is tried again: the connection may have died
// alone (KILL, wait_timeout), and a new one decides.
func (s *Session) pickExcept(snap *topology.Snapshot, target router.Target, exclude int) (int, string) {
	idx, reason := s.pick(snap, target, exclude)
	if idx < 0 && exclude >= 0 {
		return s.pick(snap, target, -1)
	}
	return idx, reason
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
		if s.bind.conn == c && s.bind.bound() {
			// The transaction and pinned session state went with the
			// connection (the server closed it after an error, or it
			// failed): the session's next statement starts afresh.
			s.resetTxn()
		}
		s.dropConn(c)
		return
	}
	if s.bind.bound() {
		s.bind.set(c)
		return
	}
	s.bind.set(nil)
	s.putBack(c)
}

// dropConn closes a server connection that cannot be reused.
func (s *Session) dropConn(c *backend.Conn) {
	if s.bind.conn == c {
		s.bind.set(nil)
	}
	if s.bind.sticky != nil && s.bind.sticky[c.Index] == c {
		delete(s.bind.sticky, c.Index)
	}
	s.srv.pool(c.Index).Discard(c)
}

// releaseAll ends the session's hold on server connections. A connection
// with a transaction or pins is closed: its state belongs to this client.
func (s *Session) releaseAll() {
	if s.bind.conn != nil {
		if s.bind.bound() || s.panicked {
			s.dropConn(s.bind.conn)
		} else {
			s.srv.pool(s.bind.conn.Index).Put(s.bind.conn)
		}
		s.bind.set(nil)
	}
	for _, c := range s.bind.sticky {
		if s.bind.bound() || s.panicked {
			s.srv.pool(c.Index).Discard(c)
		} else {
			s.srv.pool(c.Index).Put(c)
		}
	}
	s.bind.sticky = nil
}

// resetTxn forgets transaction state and pins after the server connection
// that held them was lost.
func (s *Session) resetTxn() {
	s.bind.clear()
	if v, ok := s.vars.state.Get("autocommit"); ok && v == "OFF" {
		s.vars.state.Set("autocommit", "ON")
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
	f := flavor.MariaDB
	if strings.Contains(gtid, ":") {
		f = flavor.MySQL80
	}
	return f.WaitGTID(gtid, timeout)
}

func (s *Session) waitGTID(ctx context.Context, c *backend.Conn) (*backend.Conn, error) {
	gtid := s.ryw.gtid
	switch s.user.RYW {
	case router.RYWGTID:
		if gtid == "" || s.ryw.seenOn(c.Index) {
			return c, nil
		}
	case router.RYWGlobal:
		// The newest write of any session; the per-session cache of
		// replicas known to have it does not apply.
		if p := s.srv.latestGTID.Load(); p != nil {
			gtid = *p
		}
		if gtid == "" {
			return c, nil
		}
		if !s.ryw.follow(gtid) && s.ryw.seenOn(c.Index) {
			return c, nil
		}
	default:
		return c, nil
	}
	snap := s.srv.topo.Load()
	if snap != nil && snap.Writer == c.Index {
		return c, nil
	}
	if snap != nil && c.Index < len(snap.Servers) && topology.Applied(snap.Servers[c.Index].GTID, gtid) {
		// The monitor already saw the replica past the write.
		s.srv.Stats.GTIDKnown.Add(1)
		s.ryw.markSeen(c.Index)
		return c, nil
	}
	s.srv.Stats.GTIDWaits.Add(1)
	to := s.opts().GTIDWaitTimeout
	wctx, cancel := context.WithTimeout(ctx, to+2*time.Second)
	res, err := c.Exec(wctx, gtidWaitSQL(gtid, to))
	cancel()
	if err == nil && len(res.Rows) == 1 && len(res.Rows[0]) == 1 && res.Rows[0][0] == "0" {
		s.ryw.markSeen(c.Index)
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
	if err := s.srv.pool(c.Index).Kill(ctx, s.key.User, c.ID, true); err != nil {
		s.srv.log.Warn("could not kill the query of a vanished client", "session", s.id, "server", c.Server, "err", err)
	}
}

// sendError sends err to the client as an ERR packet.
func (s *Session) sendError(err error) error {
	var se *mysqlproto.SQLError
	if !errors.As(err, &se) {
		se = mysqlproto.NewError(mysqlproto.ERUnknownError, mysqlproto.SSUnknown, "Vigil: %v", err)
	}
	s.result.err, s.result.errMsg = se.Code, se.Message
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
	if err := s.client.WritePacket(mysqlproto.AppendOK(s.scratch[:0], affected, lastID, s.bind.status(), 0)); err != nil {
		return errClient{err}
	}
	return nil
}

// connectError is 7005 (cannot connect to a server), with the failure
// behind it kept for errors.As.
type connectError struct {
	*mysqlproto.SQLError
	cause error
}

func (e *connectError) Unwrap() []error { return []error{e.SQLError, e.cause} }

func (s *Session) connectError(target router.Target, server string, cause error) error {
	return &connectError{
		SQLError: mysqlproto.NewError(mysqlproto.ERVigilBackendConnect, mysqlproto.SSVigilUnavailable,
			"Vigil: cannot connect to %s %s of cluster %s: %v", target, server, s.opts().Cluster, cause),
		cause: cause,
	}
}

// serverRefused returns the error a server answered a login with, or nil
// for any other failure (refused, unreachable, timed out).
func serverRefused(err error) *mysqlproto.SQLError {
	var se *mysqlproto.SQLError
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// loginCheckTTL is how long a login a server accepted (the client's user,
// with its default schema if any) is trusted for later logins of the same
// user without asking a server again (connection churn would otherwise pay
// a server round trip per login). A schema dropped meanwhile is reported by
// the first statement.
const loginCheckTTL = 10 * time.Second

// checkLogin makes a login (or COM_CHANGE_USER) fail as it would on the
// servers: when the writer refuses the user's account (it does not exist
// there, is locked) the client gets that refusal, and when the default
// schema does not exist or is not allowed, the server's error. When the
// writer cannot be reached, the login is accepted and the first statement
// tells.
// loginCheck checks a login's account and schema with the servers: the
// schema's cluster's through the sharded listener (shard.go).
func (s *Session) loginCheck(ctx context.Context, db string, usedPassword bool) error {
	if s.shard != nil {
		return s.shard.checkLogin(ctx, s, db, usedPassword)
	}
	return s.checkLogin(ctx, db, usedPassword)
}

func (s *Session) checkLogin(ctx context.Context, db string, usedPassword bool) error {
	key := s.key.User + "\x00" + db
	now := time.Now()
	if exp, ok := s.srv.schemas.Load(key); ok && now.UnixNano() < exp.(int64) {
		return nil
	}
	if err := s.checkLoginOnServer(ctx, db, usedPassword); err != nil {
		return err
	}
	if s.srv.schemaCount.Add(1) > 10000 {
		// Bound the cache: start over rather than grow without limit.
		s.srv.schemas.Clear()
		s.srv.schemaCount.Store(0)
	}
	s.srv.schemas.Store(key, now.Add(loginCheckTTL).UnixNano())
	return nil
}

// deniedHost is the host part of a server's "Access denied for user
// 'u'@'host'" message.
func deniedHost(msg string) (string, bool) {
	i := strings.Index(msg, "'@'")
	if i < 0 {
		return "", false
	}
	rest := msg[i+3:]
	j := strings.IndexByte(rest, '\'')
	if j < 0 {
		return "", false
	}
	return rest[:j], true
}

// refusalCodes are the server errors to a login that are the client's
// answer too: no such account or wrong password, account locked, password
// expired.
func refusalCode(code uint16) bool {
	switch code {
	case mysqlproto.ERAccessDeniedError, 1698, 4151, 1820, 1862:
		return true
	}
	return false
}

func (s *Session) checkLoginOnServer(ctx context.Context, db string, usedPassword bool) error {
	target := router.Writer
	if s.srv.WritesFenced() && !s.srv.refuseReadsFenced.Load() {
		// This instance refuses writes (self-fenced) but serves reads:
		// a replica checks the login, and the session reads as
		// documented instead of failing at login.
		target = router.Reader
	}
	c, err := s.acquire(ctx, target, -1)
	if err != nil {
		var ce *connectError
		if errors.As(err, &ce) {
			if se := serverRefused(ce.cause); se != nil && refusalCode(se.Code) {
				s.srv.log.Warn("a server refused the login of a user Vigil accepted; the client gets the refusal (check that the account exists on the servers, or users[].backend_user/backend_password)",
					"session", s.id, "user", s.key.User, "code", se.Code)
				if se.Code != mysqlproto.ERAccessDeniedError {
					return mysqlproto.NewError(se.Code, se.State, "%s", se.Message)
				}
				host := s.clientHost()
				if host == "localhost" {
					// A local client: name it as the server names its
					// local clients.
					if h, ok := deniedHost(se.Message); ok {
						host = h
					}
				}
				yes := "NO"
				if usedPassword {
					yes = "YES"
				}
				return mysqlproto.NewError(mysqlproto.ERAccessDeniedError, mysqlproto.SSAccessDenied,
					"Access denied for user '%s'@'%s' (using password: %s)", s.key.User, host, yes)
			}
		}
		// Unknown writer state: accept; the first statement will tell.
		var se *mysqlproto.SQLError
		if errors.As(err, &se) && (se.Code == mysqlproto.ERVigilNoWriter || se.Code == mysqlproto.ERVigilBackendConnect ||
			se.Code == mysqlproto.ERVigilPoolExhausted || target == router.Reader && (se.Code == mysqlproto.ERVigilNoReader || se.Code == mysqlproto.ERVigilSelfFenced)) {
			return nil
		}
		return err
	}
	// acquire made the connection's schema the session's (COM_INIT_DB):
	// an unknown or forbidden schema came back as the server's error.
	s.release(c)
	return nil
}

func (s *Session) countRoute(target router.Target) {
	if target == router.Reader {
		s.srv.Stats.ToReader.Add(1)
	} else {
		s.srv.Stats.ToWriter.Add(1)
	}
}
