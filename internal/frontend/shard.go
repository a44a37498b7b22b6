package frontend

// The sharded listener: one address in front of several clusters. A
// client's session there is made of parts, one Session per cluster it
// has used, that share the client connection; each statement runs whole
// on the part of the cluster that holds the schemas it names
// (decideShard), and so keeps everything a cluster's listener does
// (read/write split, read-your-writes, holds through a failover,
// multiplexing). docs/shards.md.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// ShardServer serves the sharded listener.
type ShardServer struct {
	clusters atomic.Pointer[map[string]*Server]
	smap     atomic.Pointer[ShardMap]
	// interval: how old a user's list of the clusters' schemas may be.
	interval atomic.Int64
	log      *slog.Logger
	Stats    *ShardStats
	nextID   atomic.Uint32

	mu       sync.Mutex
	sessions map[uint32]*shardSession
	wg       sync.WaitGroup
	retired  sync.Map

	discMu sync.Mutex
	disc   map[string]*discovery // by user

	hold schemaHolds // a move's cutover (shardhold.go)
}

// ShardStats count what the sharded listener did.
type ShardStats struct {
	Connections atomic.Uint64
	Statements  atomic.Uint64
	// Refused by reason: needs two clusters, ambiguous schema, read_only
	// schema, offline schema.
	CrossCluster, Ambiguous, ReadOnly, Offline atomic.Uint64
	// Held: statements that waited at a move's cutover.
	Held atomic.Uint64
	// Discoveries: lists of a cluster's schemas read; DiscoveryErrors:
	// lists that failed (the previous one stays).
	Discoveries, DiscoveryErrors atomic.Uint64

	mu        sync.Mutex
	byCluster map[string]*atomic.Uint64
}

func (st *ShardStats) cluster(name string) *atomic.Uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.byCluster[name]
	if c == nil {
		c = new(atomic.Uint64)
		st.byCluster[name] = c
	}
	return c
}

// ByCluster is the statements run on each cluster.
func (st *ShardStats) ByCluster() map[string]uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string]uint64, len(st.byCluster))
	for k, v := range st.byCluster {
		out[k] = v.Load()
	}
	return out
}

// discovery is what one user sees on the clusters' primaries.
type discovery struct {
	mu   sync.Mutex
	at   time.Time
	seen map[string][]string // schema -> clusters listing it
}

// NewShardServer makes the sharded listener's server; SetClusters and
// SetMap give it what it routes to before it serves.
func NewShardServer(log *slog.Logger) *ShardServer {
	s := &ShardServer{log: log, sessions: map[uint32]*shardSession{}, disc: map[string]*discovery{},
		Stats: &ShardStats{byCluster: map[string]*atomic.Uint64{}}}
	s.clusters.Store(&map[string]*Server{})
	s.smap.Store(&ShardMap{})
	s.interval.Store(int64(5 * time.Second))
	return s
}

// SetClusters gives the clusters' listeners by name (reload).
func (s *ShardServer) SetClusters(m map[string]*Server) { s.clusters.Store(&m) }

// SetMap publishes a shard map. A map older than the one in use (a
// lower version) is ignored: every instance routes by the newest.
func (s *ShardServer) SetMap(m *ShardMap) bool {
	for {
		old := s.smap.Load()
		if old != nil && old.Version > m.Version {
			return false
		}
		if s.smap.CompareAndSwap(old, m) {
			return true
		}
	}
}

// Map is the shard map in use.
func (s *ShardServer) Map() *ShardMap { return s.smap.Load() }

// SetDiscoverInterval sets how old a list of the clusters' schemas may be.
func (s *ShardServer) SetDiscoverInterval(d time.Duration) {
	if d > 0 {
		s.interval.Store(int64(d))
	}
}

// ShardSchema is one schema as the sharded listener places it.
type ShardSchema struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	State   string `json:"state"`
	// Source: map (shards.map or a move) or discovered.
	Source string `json:"source"`
	// Conflict: clusters that all have the schema while the map names
	// none of them (statements on it are refused).
	Conflict []string `json:"conflict,omitempty"`
}

// Schemas lists the mapped schemas and those the sessions' discoveries
// found.
func (s *ShardServer) Schemas() []ShardSchema {
	m := s.Map()
	seen := map[string][]string{}
	s.discMu.Lock()
	for _, d := range s.disc {
		d.mu.Lock()
		for name, on := range d.seen {
			for _, c := range on {
				if !slices.Contains(seen[name], c) {
					seen[name] = append(seen[name], c)
				}
			}
		}
		d.mu.Unlock()
	}
	s.discMu.Unlock()
	var out []ShardSchema
	for name, c := range m.Schemas {
		out = append(out, ShardSchema{Name: name, Cluster: c, State: m.state(name).String(), Source: "map"})
	}
	for name, on := range seen {
		if _, mapped := m.Schemas[name]; mapped || systemSchema(name) {
			continue
		}
		sort.Strings(on)
		e := ShardSchema{Name: name, State: m.state(name).String(), Source: "discovered"}
		if len(on) == 1 {
			e.Cluster = firstOf(on)
		} else {
			e.Conflict = on
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Serve accepts clients on ln until ctx ends, then closes every session
// and waits for them.
func (s *ShardServer) Serve(ctx context.Context, ln net.Listener) error {
	return acceptLoop(ctx, ln, s.log, &s.retired, func(nc net.Conn) {
		id := s.nextID.Add(1)
		sh := newShardSession(s, id, nc)
		s.mu.Lock()
		s.sessions[id] = sh
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sh.run(ctx)
			s.mu.Lock()
			delete(s.sessions, id)
			s.mu.Unlock()
		}()
	}, func() {
		s.mu.Lock()
		for _, sh := range s.sessions {
			sh.client.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// RetireListener stops accepting on ln without ending its sessions (a
// reload moved the listen address).
func (s *ShardServer) RetireListener(ln net.Listener) {
	s.retired.Store(ln, struct{}{})
	ln.Close()
}

// SessionCount is the number of connected clients.
func (s *ShardServer) SessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// ShardSessionInfo is a sharded listener's session as listings show it.
type ShardSessionInfo struct {
	SessionInfo
	// Cluster is the cluster of its current (or last) statement.
	Cluster string `json:"cluster,omitempty"`
}

// Sessions lists the sharded listener's sessions.
func (s *ShardServer) Sessions() []ShardSessionInfo {
	s.mu.Lock()
	list := make([]*shardSession, 0, len(s.sessions))
	for _, sh := range s.sessions {
		list = append(list, sh)
	}
	s.mu.Unlock()
	out := make([]ShardSessionInfo, 0, len(list))
	for _, sh := range list {
		p := sh.running.Load()
		if p == nil {
			continue // logging in
		}
		out = append(out, ShardSessionInfo{SessionInfo: p.Info(), Cluster: p.opts().Cluster})
	}
	return out
}

// part is the part of session id that runs a statement now, or the one
// that ran the last: what KILL id acts on.
func (s *ShardServer) part(id uint32) *Session {
	s.mu.Lock()
	sh := s.sessions[id]
	s.mu.Unlock()
	if sh == nil {
		return nil
	}
	return sh.running.Load()
}

// userDiscovery is user's discovery record.
func (s *ShardServer) userDiscovery(user string) *discovery {
	s.discMu.Lock()
	defer s.discMu.Unlock()
	d := s.disc[user]
	if d == nil {
		if len(s.disc) >= 10000 {
			clear(s.disc) // bounded: start over
		}
		d = &discovery{}
		s.disc[user] = d
	}
	return d
}

// shardSession is one client of the sharded listener.
type shardSession struct {
	srv    *ShardServer
	id     uint32
	client *mysqlproto.Conn
	remote string

	parts map[string]*Session // by cluster
	home  *Session            // the part that logged the client in
	// running is the part running a statement now, or the last one.
	running atomic.Pointer[Session]
	last    string // the cluster of the previous statement

	// schema is the session's default schema; vars its variables, which
	// every part replays (varsGen counts their changes).
	schema  string
	vars    backend.State
	varsGen uint64
	gens    map[*Session]uint64
	// Prepared statements: ids are the session's, unique over its parts.
	stmtPrepared map[uint32]shardPrepared
	lastStmt     uint32
	// sqlStmts: where each PREPAREd statement (by lower-case name) was
	// prepared: EXECUTE and DEALLOCATE run there.
	sqlStmts map[string]shardPrepared
	// pendingBegin: a BEGIN the client had its OK for, waiting for the
	// statement that names the transaction's cluster (deferredBegin).
	pendingBegin []byte
	// trxSchemas: the schemas the open transaction used (counted in the
	// server's hold, which waits for such transactions to end).
	trxSchemas []string
	// loc is the look at the map and the clusters the statement being
	// run was decided by (sync reuses it; zero: look again).
	loc schemaLocator
	// prescan: the COM_QUERY being routed, classified (Digest 0: none);
	// its part uses it instead of scanning the text again.
	prescan sqlscan.Info
	// loginDB is the schema the last login (or COM_CHANGE_USER) asked
	// for, once checked.
	loginDB string
}

func newShardSession(srv *ShardServer, id uint32, nc net.Conn) *shardSession {
	c := mysqlproto.NewConn(nc)
	c.MaxPacket = mysqlproto.MaxHandshakePacket
	return &shardSession{srv: srv, id: id, client: c, remote: nc.RemoteAddr().String(),
		parts: map[string]*Session{}, gens: map[*Session]uint64{}, stmtPrepared: map[uint32]shardPrepared{}, sqlStmts: map[string]shardPrepared{}}
}

func (sh *shardSession) run(ctx context.Context) {
	defer func() {
		sh.client.Close()
		sh.client.Release()
	}()
	defer sh.closeParts(nil)
	defer sh.recoverPanic()
	m := sh.srv.Map()
	if len(m.Clusters) == 0 {
		sh.refuseLogin("Vigil: no cluster is behind the sharded listener")
		return
	}
	home := sh.part(m.first())
	if home == nil {
		sh.refuseLogin(fmt.Sprintf("Vigil: cluster %s behind the sharded listener is not running", m.first()))
		return
	}
	sh.home = home
	sh.running.Store(home)
	sh.srv.Stats.Connections.Add(1)
	if !home.login(ctx) {
		return
	}
	sh.schema = sh.loginDB
	sh.vars = home.vars.state.Clone()
	sh.varsGen = 1
	sh.serve(ctx)
}

// refuseLogin answers a client the listener cannot serve at all.
func (sh *shardSession) refuseLogin(msg string) {
	sh.client.Seq = 0
	_ = sh.client.WriteErr(mysqlproto.NewError(mysqlproto.ERVigilNoWriter, mysqlproto.SSVigilUnavailable, "%s", msg))
	_ = sh.client.Flush()
}

// recoverPanic keeps a bug in one session from taking the daemon down
// (as Session.recoverPanic does for a cluster listener's session).
func (sh *shardSession) recoverPanic() {
	r := recover()
	if r == nil {
		return
	}
	for _, p := range sh.parts {
		p.panicked = true
		p.srv.Stats.Panics.Add(1)
	}
	sh.srv.log.Error("a sharded listener's session ended on an internal error (a bug in Vigil); other sessions are not affected; please report this with the stack",
		"session", sh.id, "client", sh.remote, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	func() {
		defer func() { _ = recover() }()
		sh.client.Seq = 1
		_ = sh.client.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(mysqlproto.ERVigilInternal, mysqlproto.SSVigilLost,
			"Vigil: internal error; this session was closed (see Vigil's log, session %d)", sh.id)))
		_ = sh.client.Flush()
	}()
}

// part is the session's part on cluster, made on first use from the
// login's (nil when the cluster is not running).
func (sh *shardSession) part(cluster string) *Session {
	if p := sh.parts[cluster]; p != nil {
		return p
	}
	srv := (*sh.srv.clusters.Load())[cluster]
	if srv == nil {
		return nil
	}
	p := &Session{srv: srv, id: sh.id, client: sh.client, remote: sh.remote, shard: sh}
	p.prev.forget()
	p.bind.heldIdx.Store(-1)
	if h := sh.home; h != nil {
		p.setUser(h.user)
		p.caps, p.key, p.multiStmts = h.caps, h.key, h.multiStmts
		p.rs = router.Session{RYW: h.rs.RYW, SessionWindow: h.rs.SessionWindow}
		p.vars.sessionTrack, p.vars.track, p.vars.trackRaw = h.vars.sessionTrack, h.vars.track, h.vars.trackRaw
		p.vars.state = h.vars.state.Clone()
		p.vars.state.SetSchema("")
		sh.gens[p] = 0
	}
	sh.parts[cluster] = p
	return p
}

// closeParts ends the parts (all but keep) as their sessions end: their
// connections go back to the pools, or are closed when they hold state.
func (sh *shardSession) closeParts(keep *Session) {
	for name, p := range sh.parts {
		if p == keep {
			continue
		}
		if p.cur.watch != nil {
			p.cur.watch.Stop()
		}
		p.resetPrev()
		p.releaseAll()
		delete(sh.parts, name)
		delete(sh.gens, p)
	}
	for id, ps := range sh.stmtPrepared {
		if keep == nil || ps.cluster != keep.opts().Cluster {
			delete(sh.stmtPrepared, id)
		}
	}
	if keep == nil {
		sh.endTrx()
	}
}

// serve reads and runs the client's commands (Session.serve's loop, with
// each command run by the part of its cluster).
func (sh *shardSession) serve(ctx context.Context) {
	h := sh.home
	for {
		sh.client.Seq = 0
		pkt, err := sh.client.ReadCommand()
		if errors.Is(err, mysqlproto.ErrStatementMemory) {
			h.refuseForMemory()
			if sh.client.Flush() != nil {
				return
			}
			continue
		}
		if err != nil {
			if errors.Is(err, mysqlproto.ErrPacketTooLarge) {
				h.refuseUnread()
			} else if errors.Is(err, mysqlproto.ErrMalformed) {
				h.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed communication packet: %v", err))
			}
			_ = sh.client.Flush()
			return
		}
		if len(pkt) == 0 {
			h.sendError(mysqlproto.NewError(mysqlproto.ERMalformedPacket, "HY000", "Malformed communication packet: empty command"))
			_ = sh.client.Flush()
			return
		}
		err = sh.dispatch(ctx, pkt)
		if err != nil {
			var ec errClient
			if !errors.As(err, &ec) && !errors.Is(err, errQuit) {
				sh.srv.log.Debug("session ended", "session", sh.id, "err", err)
			}
			return
		}
		if err := sh.client.Flush(); err != nil {
			return
		}
	}
}

// dispatch runs one command on the part of its cluster.
func (sh *shardSession) dispatch(ctx context.Context, pkt []byte) error {
	cmd, _ := mysqlproto.Header(pkt) // serve sends no empty command here
	switch cmd {
	case mysqlproto.ComQuery:
		cq, _ := mysqlproto.ParseQuery(pkt)
		info, st := scanShard(cq.Text)
		if showDatabases(info, cq.Text) {
			return sh.showDatabases(ctx, cq.Text)
		}
		if info.First == sqlscan.KwPrepare || info.First == sqlscan.KwExecute || info.First == sqlscan.KwDeallocate {
			return sh.sqlPrepared(ctx, pkt, cq.Text, info, st)
		}
		if done, err := sh.deferredBegin(info, st, pkt); done {
			return err
		}
		sh.prescan = info
		err := sh.route(ctx, pkt, st)
		sh.prescan = sqlscan.Info{}
		return err
	case mysqlproto.ComStmtPrepare:
		sp, bad := mysqlproto.ParseStmtPrepare(pkt)
		if bad != nil {
			return sh.home.sendError(bad)
		}
		_, st := scanShard(sp.Query)
		return sh.route(ctx, pkt, st)
	case mysqlproto.ComInitDB:
		idb, bad := mysqlproto.ParseInitDB(pkt)
		if bad != nil {
			return sh.home.sendError(bad)
		}
		return sh.route(ctx, pkt, shardStmt{class: sqlscan.ClassUse, use: string(idb.Schema)})
	case mysqlproto.ComStmtExecute, mysqlproto.ComStmtFetch, mysqlproto.ComStmtReset, mysqlproto.ComStmtClose, mysqlproto.ComStmtSendLongData:
		return sh.stmtCommand(ctx, pkt)
	case mysqlproto.ComChangeUser, mysqlproto.ComResetConnection:
		// The session starts over: its other parts end (their prepared
		// statements and state with them) and the login's part answers.
		sh.closeParts(sh.home)
		clear(sh.sqlStmts)
		sh.pendingBegin = nil
		sh.home.result.err = 0
		prev := sh.schema
		err := sh.runOn(ctx, sh.home, pkt, nil)
		if cmd == mysqlproto.ComChangeUser {
			sh.schema = sh.loginDB
			if sh.home.result.err != 0 {
				sh.schema = prev // refused: the previous user and schema stay
			}
		}
		sh.vars = sh.home.vars.state.Clone()
		sh.varsGen++
		sh.gens[sh.home] = sh.varsGen
		return err
	case mysqlproto.ComQuit:
		return errQuit
	}
	// Commands that name no schema: where the session is.
	p := sh.running.Load()
	if p == nil {
		p = sh.home
	}
	return sh.runOn(ctx, p, pkt, nil)
}

// sqlPrepared runs PREPARE name FROM '...' on the cluster of the schemas
// its text names, and EXECUTE name and DEALLOCATE PREPARE name where the
// statement was prepared.
func (sh *shardSession) sqlPrepared(ctx context.Context, pkt, q []byte, info sqlscan.Info, st shardStmt) error {
	name, text, ok := preparedName(q, info.First)
	if !ok {
		return sh.route(ctx, pkt, st)
	}
	if info.First != sqlscan.KwPrepare {
		ps, known := sh.sqlStmts[name]
		if !known {
			return sh.route(ctx, pkt, st) // the server answers "unknown prepared statement"
		}
		if info.First == sqlscan.KwDeallocate {
			delete(sh.sqlStmts, name)
			return sh.pass(ctx, pkt, func() shardDecision { return shardDecision{cluster: ps.cluster} })
		}
		return sh.pass(ctx, pkt, func() shardDecision {
			d, _ := sh.preparedDecision(ctx, ps, "prepared statement "+name)
			return d
		})
	}
	if text != nil {
		_, inner := scanShard(text)
		st.refs, st.overflow = inner.refs, inner.overflow
		st.class = inner.class
	}
	var d shardDecision
	err := sh.pass(ctx, pkt, func() shardDecision {
		d = sh.decide(ctx, st)
		return d
	})
	if p := sh.running.Load(); p != nil && p.result.err == 0 && d.err == nil {
		sh.sqlStmts[name] = shardPrepared{cluster: d.cluster, schemas: d.schemas}
	}
	return err
}

// shardPrepared is where a prepared statement was prepared and the
// schemas it concerns.
type shardPrepared struct {
	cluster string
	schemas []string
}

// preparedDecision runs a prepared statement where it was prepared: in
// the open transaction's cluster only, and only while the map still
// places its schemas there. After a move, moved names the cluster the
// map places them on now: a binary-protocol statement moves there
// (adoptStmt); one prepared with PREPARE … FROM, whose server state
// cannot move, is refused with 1615 (prepare it again), as a server asks
// after a table changed.
func (sh *shardSession) preparedDecision(ctx context.Context, ps shardPrepared, what string) (d shardDecision, moved string) {
	l := sh.locator(ctx, false)
	sh.loc = l
	for _, s := range ps.schemas {
		if p := l.locate(s); p.found() && p.cluster != ps.cluster {
			return shardDecision{err: mysqlproto.NewError(mysqlproto.ERNeedReprepare, "HY000",
				"Prepared statement needs to be re-prepared: schema %s moved from cluster %s to %s", quoteName(s), ps.cluster, p.cluster)}, p.cluster
		}
	}
	if trx := sh.trxCluster(); trx != "" && trx != ps.cluster {
		return shardDecision{err: mysqlproto.NewError(mysqlproto.ERVigilShardCrossCluster, mysqlproto.SSVigilUnsupported,
			"Vigil: this transaction runs on cluster %s; %s was prepared on cluster %s: a transaction runs on one cluster (commit or roll back first)",
			trx, what, ps.cluster)}, ""
	}
	if err := stateError(l.m, shardStmt{class: sqlscan.ClassWrite}, nil, ps.cluster); err != nil {
		return shardDecision{err: err}, ""
	}
	return shardDecision{cluster: ps.cluster, schemas: ps.schemas}, ""
}

// adoptStmt moves prepared statement id to the part of cluster to: it
// keeps its id, text and prepare-time state, and that part prepares it
// on its servers at the next execute (as after a failover). A statement
// with a cursor open or long data sent stays (false).
func (sh *shardSession) adoptStmt(id uint32, to string) bool {
	ps := sh.stmtPrepared[id]
	from, dst := sh.parts[ps.cluster], sh.part(to)
	if from == nil || dst == nil {
		return false
	}
	st := from.stmts.get(id)
	if st == nil || st.cursor || st.longData {
		return false
	}
	from.stmts.close(id)
	st.lastKey = backend.StmtKey{}
	dst.stmts.adopt(st)
	ps.cluster = to
	sh.stmtPrepared[id] = ps
	return true
}

// preparedName is the statement name of PREPARE name FROM ..., EXECUTE
// name ... or DEALLOCATE|DROP PREPARE name (lower-cased: names are not
// case-sensitive), and for PREPARE the text when it is a literal.
func preparedName(q []byte, first sqlscan.Keyword) (name string, text []byte, ok bool) {
	lx := sqlscan.NewLexer(q)
	lx.Next()
	t := lx.Next()
	if first == sqlscan.KwDeallocate {
		t = lx.Next() // PREPARE
	}
	if !isIdent(t) {
		return "", nil, false
	}
	name = strings.ToLower(identName(q, t))
	if first == sqlscan.KwPrepare {
		if lx.Next().Kind == sqlscan.TokWord {
			if lit := lx.Next(); lit.Kind == sqlscan.TokString {
				text = sqlscan.StringValue(lit.Text(q))
			}
		}
	}
	return name, text, true
}

// stmtCommand runs a command on a prepared statement where it was
// prepared.
func (sh *shardSession) stmtCommand(ctx context.Context, pkt []byte) error {
	cmd, _ := mysqlproto.Header(pkt)
	id, ok := mysqlproto.StmtIDOf(pkt)
	ps, known := sh.stmtPrepared[id]
	if !ok || !known {
		return sh.runOn(ctx, sh.home, pkt, nil) // the server answers "unknown prepared statement"
	}
	switch cmd {
	case mysqlproto.ComStmtClose:
		delete(sh.stmtPrepared, id)
		return sh.runOn(ctx, sh.parts[ps.cluster], pkt, nil)
	case mysqlproto.ComStmtExecute:
		return sh.pass(ctx, pkt, func() shardDecision {
			d, moved := sh.preparedDecision(ctx, sh.stmtPrepared[id], "the prepared statement")
			if moved != "" && sh.adoptStmt(id, moved) {
				d, _ = sh.preparedDecision(ctx, sh.stmtPrepared[id], "the prepared statement")
			}
			return d
		})
	}
	return sh.pass(ctx, pkt, func() shardDecision { return shardDecision{cluster: ps.cluster, schemas: ps.schemas} })
}

// route decides a statement's cluster and runs it there, or refuses it.
func (sh *shardSession) route(ctx context.Context, pkt []byte, st shardStmt) error {
	return sh.pass(ctx, pkt, func() shardDecision { return sh.decide(ctx, st) })
}

// decide is decideShard for the session now, looking at the clusters
// again when a schema it names was not found.
func (sh *shardSession) decide(ctx context.Context, st shardStmt) shardDecision {
	view := shardView{schema: sh.schema, trx: sh.trxCluster(), last: sh.last}
	sh.loc = sh.locator(ctx, false)
	d := decideShard(sh.loc, st, view)
	if d.unknown != "" || d.err != nil && d.err.Code == mysqlproto.ERVigilShardAmbiguous {
		// A schema named for sure is not where the last look saw it: a
		// fresh look (it may have just been created or dropped).
		sh.loc = sh.locator(ctx, true)
		d = decideShard(sh.loc, st, view)
	}
	return d
}

// pass runs pkt on the cluster decide chooses, or refuses it. A statement
// that concerns a held schema (a move's cutover) waits until the hold
// ends and is decided again: the map may place the schema elsewhere
// then. A transaction that already used the schema goes on: the hold
// waits for it to end.
func (sh *shardSession) pass(ctx context.Context, pkt []byte, decide func() shardDecision) error {
	sh.srv.Stats.Statements.Add(1)
	for {
		d := decide()
		if d.err != nil {
			sh.countRefusal(d.err.Code)
			p := sh.running.Load()
			if p == nil {
				p = sh.home
			}
			return p.sendError(d.err)
		}
		p := sh.part(d.cluster)
		if p == nil {
			return sh.home.sendError(mysqlproto.NewError(mysqlproto.ERVigilNoWriter, mysqlproto.SSVigilUnavailable,
				"Vigil: cluster %s behind the sharded listener is not running", d.cluster))
		}
		g := sh.srv.hold.enter()
		if h := sh.srv.hold.current(); h != nil && h.concerns(d.schemas) && !sh.trxUsed(d.schemas) {
			sh.srv.hold.exit(g)
			sh.srv.Stats.Held.Add(1)
			if err := h.wait(ctx); err != nil {
				return p.sendError(err)
			}
			continue
		}
		if sh.pendingBegin != nil && len(d.schemas) > 0 {
			if done, err := sh.beginOn(ctx, p, d.cluster); done {
				sh.srv.hold.exit(g)
				return err
			}
		}
		err := sh.runOn(ctx, p, pkt, d.schemas)
		sh.noteTrx(d.schemas)
		sh.srv.hold.exit(g)
		return err
	}
}

func (sh *shardSession) countRefusal(code uint16) {
	st := sh.srv.Stats
	switch code {
	case mysqlproto.ERVigilShardCrossCluster:
		st.CrossCluster.Add(1)
	case mysqlproto.ERVigilShardAmbiguous:
		st.Ambiguous.Add(1)
	case mysqlproto.ERVigilShardReadOnly:
		st.ReadOnly.Add(1)
	case mysqlproto.ERVigilShardOffline:
		st.Offline.Add(1)
	}
}

// deferredBegin handles BEGIN / START TRANSACTION with no default schema
// and no open transaction: the cluster is not known until a statement
// names a schema, so the BEGIN waits (the client gets its OK, in a
// transaction) and runs, right before that statement, on its cluster
// (beginOn). COMMIT or ROLLBACK of a transaction that never named a
// schema ends it here. done: pkt was answered.
func (sh *shardSession) deferredBegin(info sqlscan.Info, st shardStmt, pkt []byte) (done bool, _ error) {
	begin := (st.class == sqlscan.ClassBegin || st.class == sqlscan.ClassBeginReadOnly) && info.Flags&sqlscan.FlagXA == 0 && len(st.refs) == 0
	switch {
	case begin && sh.trxCluster() == "" && (sh.schema == "" || systemSchema(sh.schema)):
		// A BEGIN while one waits commits nothing: there is nothing.
		sh.pendingBegin = append(sh.pendingBegin[:0], pkt...)
		status := sh.home.bind.status() | mysqlproto.ServerStatusInTrans
		if st.class == sqlscan.ClassBeginReadOnly {
			status |= mysqlproto.ServerStatusInTransReadonly
		}
		return true, sh.writeOK(status)
	case sh.pendingBegin != nil && (st.class == sqlscan.ClassCommit || st.class == sqlscan.ClassRollback) && len(st.refs) == 0 && info.Flags&sqlscan.FlagRelease == 0:
		status := sh.home.bind.status()
		if info.Flags&sqlscan.FlagChain != 0 {
			status |= mysqlproto.ServerStatusInTrans // AND CHAIN: the next one waits too
		} else {
			sh.pendingBegin = nil
		}
		return true, sh.writeOK(status)
	}
	return false, nil
}

// writeOK answers the client's command with OK and status.
func (sh *shardSession) writeOK(status uint16) error {
	sh.client.Seq = 1
	if err := sh.client.WritePacket(mysqlproto.AppendOK(nil, 0, 0, status, 0)); err != nil {
		return errClient{err}
	}
	return nil
}

// beginOn runs the waiting BEGIN on part p, before the statement that
// named the transaction's first schema; its answer is dropped (the client
// had its OK). done: the BEGIN failed and the statement was answered
// with an error instead of running outside the transaction.
func (sh *shardSession) beginOn(ctx context.Context, p *Session, cluster string) (done bool, _ error) {
	pkt := sh.pendingBegin
	sh.pendingBegin = nil
	if err := sh.client.Flush(); err != nil {
		return true, errClient{err}
	}
	err := sh.runOn(ctx, p, pkt, nil)
	sh.client.Discard()
	if err != nil {
		return true, err
	}
	if !p.bind.inTrx {
		return true, p.sendError(mysqlproto.NewError(mysqlproto.ERVigilShardCrossCluster, mysqlproto.SSVigilUnsupported,
			"Vigil: the transaction's BEGIN could not start on cluster %s; the statement did not run (roll back and retry)", cluster))
	}
	return false, nil
}

// trxCluster is the cluster of the session's open transaction, "" for
// none.
func (sh *shardSession) trxCluster() string {
	for name, p := range sh.parts {
		if p.bind.inTrx {
			return name
		}
	}
	return ""
}

// runOn runs one command on part p, with the session's variables and the
// default schema as p's cluster has it.
func (sh *shardSession) runOn(ctx context.Context, p *Session, pkt []byte, schemas []string) error {
	cluster := p.opts().Cluster
	sh.sync(ctx, p, cluster)
	sh.running.Store(p)
	sh.srv.Stats.cluster(cluster).Add(1)
	before, beforeSchema := p.vars.state.Hash(), p.vars.state.Schema
	p.stmts.last = max(p.stmts.last, sh.lastStmt)
	if sh.prescan.Digest != 0 {
		if cmd, _ := mysqlproto.Header(pkt); cmd == mysqlproto.ComQuery {
			p.prescan = &sh.prescan
		}
	}
	err := p.dispatch(ctx, pkt)
	p.prescan = nil
	p.dropLarge()
	for id := sh.lastStmt + 1; id <= p.stmts.last && id != 0; id++ {
		if p.stmts.get(id) != nil {
			sh.stmtPrepared[id] = shardPrepared{cluster: cluster, schemas: schemas}
		}
	}
	sh.lastStmt = max(sh.lastStmt, p.stmts.last)
	sh.last = cluster
	if s := p.vars.state.Schema; s != beforeSchema {
		sh.schema = s // USE, COM_INIT_DB, COM_CHANGE_USER
	}
	if p.vars.state.Hash() != before {
		sh.vars = p.vars.state.Clone()
		sh.varsGen++
		sh.gens[p] = sh.varsGen
	}
	return err
}

// sync gives part p the session's variables and the default schema as
// its cluster has it: the schema when the cluster holds it (or it is a
// system schema), none otherwise (MariaDB cannot USE a schema a server
// does not have; the statement names its schemas instead).
func (sh *shardSession) sync(ctx context.Context, p *Session, cluster string) {
	defer func() { sh.loc = schemaLocator{} }() // one statement's look only
	want := ""
	if sh.schema != "" {
		l := sh.loc // the statement's decision looked already
		if l.m == nil {
			l = sh.locator(ctx, false)
		}
		if systemSchema(sh.schema) || l.locate(sh.schema).cluster == cluster {
			want = sh.schema
		}
	}
	if sh.gens[p] != sh.varsGen {
		p.vars.state = sh.vars.Clone()
		sh.gens[p] = sh.varsGen
		p.vars.state.SetSchema(want)
		return
	}
	if p.vars.state.Schema != want {
		p.vars.state.SetSchema(want)
	}
}

// locator places schemas by the map and by what this user's last look
// at the clusters found; fresh: look again now (at most every 100ms),
// else only when that look is older than the discover interval.
func (sh *shardSession) locator(ctx context.Context, fresh bool) schemaLocator {
	m := sh.srv.Map()
	d := sh.srv.userDiscovery(sh.home.key.User)
	d.mu.Lock()
	defer d.mu.Unlock()
	age := time.Since(d.at)
	if d.seen == nil || age > time.Duration(sh.srv.interval.Load()) || fresh && age > 100*time.Millisecond {
		d.seen = sh.discover(ctx, m, d.seen)
		d.at = time.Now()
	}
	return schemaLocator{m: m, seen: d.seen}
}

// discover lists the schemas of every cluster's primary (a replica's
// when the cluster has no writer), as the session's user sees them. A
// cluster that does not answer keeps what the last look saw on it.
func (sh *shardSession) discover(ctx context.Context, m *ShardMap, old map[string][]string) map[string][]string {
	seen := map[string][]string{}
	for _, cl := range m.Clusters {
		p := sh.part(cl)
		var names []string
		err := errors.New("not running")
		if p != nil {
			names, err = p.listSchemas(ctx)
		}
		if err != nil {
			sh.srv.Stats.DiscoveryErrors.Add(1)
			sh.srv.log.Warn("sharded listener: could not list a cluster's schemas; using the last list", "cluster", cl, "user", sh.home.key.User, "err", err)
			for name, on := range old {
				if slices.Contains(on, cl) {
					seen[name] = append(seen[name], cl)
				}
			}
			continue
		}
		sh.srv.Stats.Discoveries.Add(1)
		for _, name := range names {
			seen[name] = append(seen[name], cl)
		}
	}
	return seen
}

// listSchemas is SHOW DATABASES on the cluster's writer (a reader when
// there is none), on a pooled connection of the session's user.
func (s *Session) listSchemas(ctx context.Context) ([]string, error) {
	snap := s.srv.topo.Load()
	idx := snap.Writer
	if idx < 0 {
		idx, _ = s.pickExcept(snap, router.Reader, -1)
	}
	pool := s.srv.pool(idx)
	if idx < 0 || pool == nil {
		return nil, errors.New("no server to ask")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pool.Get(ctx, s.key, &backend.State{})
	if err != nil {
		return nil, err
	}
	_, rows, err := c.ExecColumns(ctx, "SHOW DATABASES")
	if c.Broken {
		pool.Discard(c)
	} else {
		pool.Put(c)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		names = append(names, firstOf(r))
	}
	return names, nil
}

// showDatabases reports whether a statement is SHOW DATABASES (or
// SCHEMAS), alone or with LIKE: the sharded listener answers it with the
// schemas of every cluster.
func showDatabases(info sqlscan.Info, q []byte) bool {
	if info.First != sqlscan.KwShow || info.Flags&sqlscan.FlagMulti != 0 {
		return false
	}
	lx := sqlscan.NewLexer(q)
	lx.Next()
	t := lx.Next()
	w := strings.ToUpper(string(t.Text(q)))
	if t.Kind != sqlscan.TokWord || w != "DATABASES" && w != "SCHEMAS" {
		return false
	}
	switch t = lx.Next(); {
	case t.Kind == sqlscan.TokEOF || t.Kind == sqlscan.TokSemicolon:
		return true
	case t.Kind == sqlscan.TokWord && strings.EqualFold(string(t.Text(q)), "LIKE"):
		return true
	}
	return false
}

// showDatabases answers SHOW DATABASES [LIKE 'pattern'] with the union of
// the clusters' schemas, as the session's user sees them.
func (sh *shardSession) showDatabases(ctx context.Context, q []byte) error {
	sh.srv.Stats.Statements.Add(1)
	p := sh.running.Load()
	if p == nil {
		p = sh.home
	}
	col := "Database"
	var like []byte
	lx := sqlscan.NewLexer(q)
	lx.Next()
	lx.Next()
	if t := lx.Next(); t.Kind == sqlscan.TokWord {
		pat := lx.Next()
		if pat.Kind != sqlscan.TokString {
			return p.sendError(mysqlproto.NewError(mysqlproto.ERParseError, mysqlproto.SSSyntax, "You have an error in your SQL syntax: SHOW DATABASES LIKE needs a string"))
		}
		like = sqlscan.StringValue(pat.Text(q))
		col = "Database (" + string(like) + ")"
	}
	l := sh.locator(ctx, true)
	names := make([]string, 0, len(l.seen))
	for name := range l.seen {
		if like == nil || sqlscan.Like([]byte(name), like) {
			names = append(names, name)
		}
	}
	for name := range l.m.Schemas {
		if _, ok := l.seen[name]; !ok && (like == nil || sqlscan.Like([]byte(name), like)) {
			// Mapped, not seen (no privilege, or a cluster did not answer).
			continue
		}
	}
	sort.Strings(names)
	rows := make([][]string, len(names))
	for i, n := range names {
		rows[i] = []string{n}
	}
	sh.client.Seq = 1
	_, ext := mysqlproto.SplitFlavour(p.key.Flavour)
	if err := mysqlproto.WriteTextResultFor(sh.client, []string{col}, rows, p.bind.status(),
		p.caps&mysqlproto.CapabilityClientDeprecateEOF != 0, ext&mysqlproto.MariaDBClientExtendedMetadata != 0); err != nil {
		return errClient{err}
	}
	return nil
}

// checkLogin checks a login with the cluster that holds its schema: the
// login's part p asks the servers for the account, and the schema's
// cluster for the schema.
func (sh *shardSession) checkLogin(ctx context.Context, p *Session, db string, usedPassword bool) error {
	if sh.home == nil {
		sh.home = p
	}
	if db == "" || systemSchema(db) {
		err := p.checkLogin(ctx, db, usedPassword)
		if err == nil {
			sh.loginDB = db
		}
		return err
	}
	// Discovery runs without a default schema: p's is the login's, which
	// p's cluster may not have.
	p.vars.state.SetSchema("")
	d := decideShard(sh.locator(ctx, true), shardStmt{class: sqlscan.ClassUse, use: db}, shardView{})
	p.vars.state.SetSchema(db)
	if d.err != nil {
		return d.err
	}
	q := sh.part(d.cluster)
	if q == nil || d.unknown != "" {
		q = p // found nowhere: the login's cluster answers "unknown database"
	}
	q.vars.state.SetSchema(db)
	err := q.checkLogin(ctx, db, usedPassword)
	if q != p {
		p.vars.state.SetSchema("")
	}
	if err == nil {
		sh.loginDB = db
	}
	return err
}
