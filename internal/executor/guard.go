package executor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/topology"
)

// What the executor watches between operations: the position the primary
// is known to have acknowledged (for "never promote over known loss"),
// servers that restart with role settings of their own my.cnf, and fenced
// servers that answer again with Vigil's old connections still open on
// them.

// markState is the acknowledged-position bookkeeping of one cluster.
type markState struct {
	mark *failover.AckedMark
	// prev is the writer's previous answered observation: a position seen
	// one check before a check with semi-sync on and no commit waiting was
	// certainly acknowledged (every commit in it finished waiting).
	prev *topology.Observation
}

// noteAcked moves the acknowledged mark from the writer's latest check.
func (e *Executor) noteAcked() {
	snap := e.mon.Snapshot()
	w := snap.WriterServer()
	if w == nil {
		return
	}
	var o *topology.Observation
	for _, h := range e.mon.Observations() {
		if h.Name == w.Name {
			o = h.Last
		}
	}
	if o == nil || !o.OK || o.Flavor == topology.FlavorMySQL || len(o.GTID.Binlog) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ms := &e.marks
	switch {
	case ms.prev != nil && ms.prev.Server != o.Server:
		ms.prev = nil // a new writer
	case ms.prev != nil && ms.prev.Seq >= o.Seq:
		return // seen already
	case ms.prev != nil && o.Uptime >= 0 && o.Time.Sub(ms.prev.Time) > time.Duration(o.Uptime+1)*time.Second:
		ms.prev = nil // it restarted since: its waiting commits then are not the ones now
	}
	// Counting back needs every transaction of the previous position to
	// have entered its wait (after the binlog write, and with AFTER_COMMIT
	// after the engine commit too): checks asked for early (a client lost
	// its connection) can be 100 ms apart, too close to rely on that.
	tooClose := ms.prev != nil && o.Time.Sub(ms.prev.Time) < minAckedGap
	f := e.facts[w.Name]
	semi := f.SemiSync.Known && f.SemiSync.SourceEnabled || o.SemiSync.SourceOn
	m := failover.AckedMark{Server: w.Name, At: o.Time, SemiSync: semi}
	same := ms.mark != nil && ms.mark.Server == w.Name
	if same {
		// Once some of the position was acknowledged asynchronously, the
		// mark says so, and since when.
		m.Async, m.AsyncSince = ms.mark.Async, ms.mark.AsyncSince
	}
	switch {
	case semi && o.SemiSync.SourceOn:
		if tooClose {
			return // compare the next check with the older one
		}
		if ms.prev == nil || !ms.prev.SemiSync.SourceOn {
			break // what is in the binary log now may still wait
		}
		// Every transaction of the previous check's position has had a
		// whole check interval to enter its wait: it finished waiting
		// (acknowledged) or is one of the commits waiting now, which are
		// the last ones written. A primary whose only replica died keeps
		// its last commit waiting forever (wait_no_slave): the ones before
		// it were acknowledged, perhaps by the replica that died.
		m.Pos, m.At = ackedBefore(ms.prev.GTID, o.SemiSync.WaitSessions), ms.prev.Time
		if same {
			m.Pos = topology.MaxGTIDPos(ms.mark.Pos, m.Pos)
		}
	case semi:
		// Fallen back to asynchronous replication: commits are
		// acknowledged without any replica.
		if m.AsyncSince.IsZero() {
			m.AsyncSince = o.Time
		}
		m.Pos, m.Async = o.GTID.Binlog, true
	default:
		m.Pos = o.GTID.Binlog
	}
	ms.prev = o
	if m.Pos == nil {
		if !same {
			return
		}
		m.Pos, m.At = ms.mark.Pos, ms.mark.At
	}
	ms.mark = &m
}

// minAckedGap is the least time between the two checks the acknowledged
// mark compares.
const minAckedGap = 250 * time.Millisecond

// ackedBefore is the part of st's binary log position certainly
// acknowledged when waiting commits wait: in each domain, the sequence
// number waiting below the last. The transaction there must be known
// (its server id is part of its identity): when another server's last
// transaction in the domain (gtid_binlog_state) is at or after it, the
// domain is left out and the mark keeps its earlier position there.
func ackedBefore(st topology.GTIDState, waiting int64) topology.GTIDPos {
	if waiting <= 0 {
		return st.Binlog
	}
	var out topology.GTIDPos
	for _, g := range st.Binlog {
		if g.Seq <= uint64(waiting) {
			continue
		}
		s := g.Seq - uint64(waiting)
		known := len(st.BinlogState) > 0
		for _, o := range st.BinlogState {
			if o.Domain == g.Domain && o.Server != g.Server && o.Seq >= s {
				known = false
			}
		}
		if known {
			out = append(out, topology.GTID{Domain: g.Domain, Server: g.Server, Seq: s})
		}
	}
	return out
}

// ackedMark is a copy of the mark for the engine's input.
func (e *Executor) ackedMark() *failover.AckedMark {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.marks.mark == nil {
		return nil
	}
	m := *e.marks.mark
	return &m
}

// killPreFence kills, on server, the connections Vigil had open there
// when it was fenced: statements sent before the fence may still be in
// flight (TCP retransmits them when a partition heals) and must not run.
// A server that restarted since has none of them (and may have given
// their ids to other connections): the list is dropped.
func (e *Executor) killPreFence(ctx context.Context, server string) error {
	idx := e.serverIndex(server)
	ids := e.router.PreFenceConns(idx)
	if len(ids) == 0 {
		return nil
	}
	e.mu.Lock()
	fencedAt := e.fencedAt[server]
	e.mu.Unlock()
	if o := e.lastObs(server); o != nil && o.OK && o.Uptime >= 0 && !fencedAt.IsZero() &&
		time.Duration(o.Uptime)*time.Second < e.now().Sub(fencedAt) {
		e.router.ForgetPreFenceConns(idx, ids)
		return nil
	}
	killed := 0
	for _, id := range ids {
		_, err := e.exec(ctx, server, 2*time.Second, "KILL CONNECTION "+strconv.FormatUint(uint64(id), 10))
		var se *mysqlproto.SQLError
		switch {
		case err == nil:
			killed++
		case errors.As(err, &se) && se.Code == 1094:
			// Unknown thread id: it is gone already.
		default:
			return fmt.Errorf("killing connection %d on %s: %w", id, server, err)
		}
	}
	e.router.ForgetPreFenceConns(idx, ids)
	if killed > 0 {
		e.event(server, "fenced_connections_killed", fmt.Sprintf("%s answers again: Vigil killed %d of its own connections opened there before the fence, so nothing still in flight on them runs", server, killed))
	}
	return nil
}

func (e *Executor) lastObs(server string) *topology.Observation {
	for _, h := range e.mon.Observations() {
		if h.Name == server {
			return h.Last
		}
	}
	return nil
}

// freshen replaces, in in.Obs, the observations of servers by the
// monitor's checks of them now, all at once: for decisions that compare
// two servers' positions, which must come from one moment, not from two
// checks seconds apart. A server whose check fails or does not end in
// time keeps its observation.
func (e *Executor) freshen(ctx context.Context, in *failover.Input, servers ...string) {
	obs := make(map[string]*topology.Observation, len(in.Obs))
	for k, v := range in.Obs {
		obs[k] = v
	}
	for name, o := range e.mon.CheckFresh(ctx, servers...) {
		if o != nil && o.OK {
			obs[name] = o
		}
	}
	in.Obs = obs
}

// enforceRoles gives a server that restarted the settings of its role in
// the cluster: its own my.cnf may be that of another role (a former
// primary with semi-sync master on and read_only=OFF). Replicas get
// read_only and the replica side of semi-sync; the writer its primary
// semi-sync settings. Servers are only touched after a restart, which
// the monitor sees as a smaller Uptime than the previous check's.
func (e *Executor) enforceRoles(ctx context.Context) {
	snap := e.mon.Snapshot()
	if snap == nil || snap.Type != "replication" {
		return
	}
	var restarted []*topology.Observation
	e.mu.Lock()
	for _, h := range e.mon.Observations() {
		o := h.Last
		if o == nil || !o.OK || o.Uptime < 0 {
			continue
		}
		// When the server started, by this check: a later start than the
		// previous check's (beyond Uptime's one-second granularity) is a
		// restart, even one too quick for a check to fail in between.
		started := o.Time.Add(-time.Duration(o.Uptime) * time.Second)
		prev, seen := e.started[h.Name]
		e.started[h.Name] = started
		i := snap.Index(h.Name)
		// A replica of the writer that reports read_only=OFF takes writes
		// from anyone connected to it directly, and Vigil reports it as a
		// conflict: it gets its role's settings too.
		writableReplica := i >= 0 && i != snap.Writer && snap.Writer >= 0 && !o.ReadOnly && o.Replica != nil &&
			snap.Servers[i].Role == topology.RoleReplica && !snap.Servers[i].Fenced
		// A replica whose own commits wait for semi-sync acknowledgements
		// (master side on with wait_no_slave: a former primary made a
		// replica by hand) applies nothing for rpl_semi_sync_master_timeout
		// per transaction: it gets its role's settings too.
		stalled := i >= 0 && i != snap.Writer && snap.Writer >= 0 && o.Replica != nil &&
			snap.Servers[i].Role == topology.RoleReplica && !snap.Servers[i].Fenced &&
			o.Binlog.SemiSync != nil && parseSemiSyncSettings(o.Binlog.SemiSync).CommitsWait()
		// (Not again for a check that predates Vigil's last correction.)
		writableReplica = writableReplica && o.Time.After(e.roSetAt[h.Name])
		// (Nor again, each check, for one only reported: tellStall.)
		stalled = stalled && o.Time.After(e.roSetAt[h.Name]) && !e.stallTold[h.Name]
		if seen && started.Sub(prev) > 1500*time.Millisecond || writableReplica || stalled {
			restarted = append(restarted, o)
		}
		if o.Binlog.SemiSync == nil || !parseSemiSyncSettings(o.Binlog.SemiSync).CommitsWait() {
			delete(e.stallTold, h.Name)
		}
	}
	e.mu.Unlock()
	for _, o := range restarted {
		e.refreshFactsOf(ctx, o.Server)
		in := e.input(nil)
		var ss []failover.Setting
		if i := in.Snapshot.Index(o.Server); i >= 0 && in.Snapshot.Servers[i].Role == topology.RolePrimary {
			var held string
			ss, held = failover.PrimaryRoleSettings(in, o.Server, o)
			if held != "" {
				e.event(o.Server, "role_settings_held", held)
			}
		} else {
			ss, _ = failover.ReplicaRoleSettings(in, o.Server, o)
		}
		if len(ss) == 0 {
			if o.Binlog.SemiSync != nil && parseSemiSyncSettings(o.Binlog.SemiSync).CommitsWait() {
				e.tellStall(o.Server)
			}
			continue
		}
		q := make([]string, 0, len(ss)+2)
		restartIO := false
		for _, s := range ss {
			q = append(q, s.SQL())
			restartIO = restartIO || strings.HasSuffix(s.Name, "slave_enabled") || strings.HasSuffix(s.Name, "replica_enabled")
		}
		if restartIO && o.Replica != nil && o.Replica.IORunning == topology.IOYes {
			fl := flavor.OfObservation(o)
			q = append(q, fl.StopIOThread(), fl.StartIOThread())
		}
		if _, err := e.exec(ctx, o.Server, 3*time.Second, q...); err != nil {
			e.event(o.Server, "role_settings_failed", fmt.Sprintf("%s restarted and Vigil could not give it its role's settings (%v): check its my.cnf", o.Server, err))
			continue
		}
		e.mu.Lock()
		e.roSetAt[o.Server] = e.now()
		e.mu.Unlock()
		var parts []string
		for _, s := range ss {
			parts = append(parts, s.Name+"="+s.Value)
		}
		e.event(o.Server, "role_settings", fmt.Sprintf("%s restarted, or reports settings of another role (a my.cnf that does not match its role); Vigil set %s (make its my.cnf agree to avoid this)", o.Server, strings.Join(parts, ", ")))
	}
}

// tellStall says once (until it ends) that a replica's own commits wait
// for semi-sync acknowledgements while Vigil does not manage semi-sync
// (failover.semi_sync.manage: off), so the operator must fix it.
func (e *Executor) tellStall(server string) {
	e.mu.Lock()
	told := e.stallTold[server]
	e.stallTold[server] = true
	e.mu.Unlock()
	if !told {
		e.event(server, "semi_sync_replica_stall", fmt.Sprintf("%s is a replica with rpl_semi_sync_master_enabled=ON and rpl_semi_sync_master_wait_no_slave=ON: every transaction its applier commits waits for an acknowledgement no replica sends (up to rpl_semi_sync_master_timeout), so it falls behind. Vigil does not manage semi-sync here (failover.semi_sync.manage: off): run SET GLOBAL rpl_semi_sync_master_enabled = OFF on %s", server, server))
	}
}

// replanAfterCut runs when a failover's first phase (fence, cut the old
// primary's replicas) is done: it reads the cut replicas' positions again
// and asks the engine for the rest of the plan from them. What arrived
// between the decision and the cut (a primary that resumed, say) then
// decides the candidate, instead of costing a replica later. The new
// steps replace the old ones after the cut; a change of candidate is an
// event with the new plan.
func (e *Executor) replanAfterCut(ctx context.Context, d failover.Decision, pl *failover.Plan, res *Result) *failover.Plan {
	np, nd := e.replan(ctx, d, pl, pl.CutEnd, nil)
	if np == nil {
		e.event(pl.OldPrimary, "failover_replan_failed", "after the cut the engine found no plan ("+nd.Reason+"); the failover goes on with the plan it started with")
		return pl
	}
	if np.NewPrimary != pl.NewPrimary || len(np.Quarantine) != len(pl.Quarantine) {
		res.Steps = append(res.Steps, "re-planned after the cut: "+nd.Reason)
		e.event(np.NewPrimary, "failover_replanned", fmt.Sprintf("positions changed between the decision and the cut: %s instead of %s\n%s", nd.Reason, pl.NewPrimary, nd.String()))
	}
	return np
}

// replanWithoutStuck runs when the failover's candidate did not apply its
// relay log within apply_timeout (wait-relay-applied, step done): the
// engine plans the rest again without the candidates stuck so far, from
// positions read now, keeping the steps before done. nil when it may not
// (the operator named the candidate) or finds no plan that loses
// nothing; the failover then fails as it did.
func (e *Executor) replanWithoutStuck(ctx context.Context, d failover.Decision, pl *failover.Plan, done int, stuck []string, res *Result) *failover.Plan {
	if pl.Kind != failover.KindFailover || d.Request != nil && d.Request.To != "" {
		return nil
	}
	np, nd := e.replan(ctx, d, pl, done, stuck)
	if np == nil {
		e.event(pl.OldPrimary, "failover_replan_failed", fmt.Sprintf("%s did not apply its relay log within apply_timeout, and the engine found no other candidate (%s)", pl.NewPrimary, nd.Reason))
		return nil
	}
	res.Steps = append(res.Steps, "re-planned without "+strings.Join(stuck, ", ")+": "+nd.Reason)
	e.event(np.NewPrimary, "failover_replanned", fmt.Sprintf("%s did not apply its relay log within apply_timeout (a local lock or a long transaction holds its applier): %s instead\n%s", pl.NewPrimary, nd.Reason, nd.String()))
	return np
}

// replan asks the engine for the failover's second phase from positions
// read now (failover.PlanAfterCut), with the candidates in stuck
// excluded, and returns pl's first keep steps followed by it.
func (e *Executor) replan(ctx context.Context, d failover.Decision, pl *failover.Plan, keep int, stuck []string) (*failover.Plan, failover.Decision) {
	var cut []string
	for _, s := range pl.Steps[:pl.CutEnd] {
		if s.Kind == failover.StopIOThread {
			cut = append(cut, s.Server)
		}
	}
	in := e.input(nil)
	in.Cut, in.Stuck = cut, stuck
	e.freshen(ctx, &in, cut...)
	to := ""
	if d.Request != nil {
		to = d.Request.To
	}
	nd := failover.PlanAfterCut(in, pl.OldPrimary, to, pl.Auto)
	if nd.Plan == nil {
		return nil, nd
	}
	np := *nd.Plan
	np.Steps = append(append([]failover.Step(nil), pl.Steps[:keep]...), nd.Plan.Steps...)
	np.CutEnd = pl.CutEnd
	return &np, nd
}

// checkAppAccounts warns about application accounts that read_only does
// not stop (SUPER, READ_ONLY ADMIN or ALL PRIVILEGES on *.*): a fenced
// old primary set read-only still takes their writes, so fencing relies on
// the router and on killing Vigil's connections alone. Each account reads
// its own grants (SHOW GRANTS needs no privilege) on the first server
// that answers.
func (e *Executor) checkAppAccounts(ctx context.Context) {
	for _, a := range e.o().AppAccounts {
		for _, s := range e.o().Servers {
			if s.Removed {
				continue
			}
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			mc, _, err := mysqlproto.Dial(dctx, &mysqlproto.DialConfig{Addr: s.Addr, User: a.User, Password: a.Password})
			if err != nil {
				cancel()
				continue
			}
			c := &backend.Conn{Conn: mc, Server: s.Name}
			res, err := c.Exec(dctx, "SHOW GRANTS")
			c.Close()
			cancel()
			if err != nil {
				break
			}
			if why := bypassesReadOnly(res.Rows); why != "" {
				e.event(s.Name, "app_account_bypasses_read_only", fmt.Sprintf("the application account %s has %s: read_only does not stop its writes, so a fenced old primary that returns could still take them from a client connected directly. Grant it only what it needs (not SUPER, READ_ONLY ADMIN or ALL PRIVILEGES ON *.*)", a.User, why))
			}
			break
		}
	}
}

// bypassesReadOnly names the global privilege in SHOW GRANTS rows that
// lets an account write despite read_only, "" for none.
func bypassesReadOnly(rows [][]string) string {
	for _, r := range rows {
		if len(r) == 0 {
			continue
		}
		g := strings.ToUpper(r[0])
		on := strings.Index(g, " ON ")
		if on < 0 || !strings.HasPrefix(strings.TrimSpace(g[on+4:]), "*.*") {
			continue
		}
		privs := g[:on]
		for _, p := range []string{"ALL PRIVILEGES", "READ_ONLY ADMIN", "SUPER"} {
			if strings.Contains(privs, p) {
				return p + " ON *.*"
			}
		}
	}
	return ""
}

// hbSample is what a replica received from its source, as last sampled.
type hbSample struct {
	count   int64     // Slave_received_heartbeats
	pos     string    // Read_Master_Log_Pos and Gtid_IO_Pos of the monitor's check
	movedAt time.Time // when either was first seen changed (or sampling began)
	// fromChecks: taken from the monitor's checks (which read the
	// counter), kept while the primary is healthy; otherwise sampled by
	// the executor while the primary's checks fail.
	fromChecks bool
}

// sampleHeartbeats measures, while the primary's checks fail, how long
// each replica has received nothing from it: neither a heartbeat (the
// Slave_received_heartbeats counter) nor an event (its received
// position). A paused or cut-off primary sends nothing, so its replicas
// confirm the loss after two heartbeat periods instead of waiting for
// slave_net_timeout to end their IO threads. Replicas whose checks carry
// the counter are followed at every check; the others are sampled from
// the first failed check of the primary on. On MySQL nothing is measured.
func (e *Executor) sampleHeartbeats(ctx context.Context) {
	snap := e.mon.Snapshot()
	if snap == nil || snap.Type != "replication" {
		return
	}
	primary := ""
	failing := false
	obs := map[string]*topology.Observation{}
	for _, h := range e.mon.Observations() {
		obs[h.Name] = h.Last
	}
	for _, s := range snap.Servers {
		if s.Role == topology.RolePrimary {
			primary = s.Name
		}
	}
	if o := obs[primary]; primary != "" && o != nil && !o.OK {
		failing = true
	}
	// The monitor reads the counter with every check of a MariaDB
	// replica: from those checks the last movement is known whether or
	// not the primary fails, to within a check interval, so the silence
	// of a source that stopped is measured from when it stopped rather
	// than from its first failed check.
	e.mu.Lock()
	for name, o := range obs {
		if name == primary || o == nil || !o.OK || o.Replica == nil || !o.Replica.HeartbeatsRead {
			continue
		}
		rs := o.Replica
		pos := fmt.Sprintf("%s:%d %s", rs.SourceLogFile, rs.ReadSourceLogPos, rs.GTIDIOPos)
		if s, ok := e.hb[name]; !ok || !s.fromChecks || s.count != rs.ReceivedHeartbeats || s.pos != pos {
			// The check's start: no later than the movement it saw.
			e.hb[name] = &hbSample{count: rs.ReceivedHeartbeats, pos: pos, movedAt: o.Time, fromChecks: true}
		}
	}
	if !failing {
		for name, s := range e.hb {
			if !s.fromChecks {
				delete(e.hb, name)
			}
		}
	}
	e.mu.Unlock()
	if !failing {
		return
	}
	type result struct {
		name  string
		count int64
		pos   string
	}
	var names []string
	for name, o := range obs {
		if name != primary && o != nil && o.OK && o.Replica != nil && !o.Replica.HeartbeatsRead && flavor.OfObservation(o).ReadReceivedHeartbeats() != "" {
			names = append(names, name)
		}
	}
	results := make(chan result, len(names))
	for _, name := range names {
		go func() {
			r := result{name: name, count: -1}
			if rows, err := e.exec(ctx, name, 500*time.Millisecond, flavor.OfObservation(obs[name]).ReadReceivedHeartbeats()); err == nil && len(rows) == 1 && len(rows[0]) == 2 {
				r.count, _ = strconv.ParseInt(rows[0][1], 10, 64)
			}
			rs := obs[name].Replica
			r.pos = fmt.Sprintf("%s:%d %s", rs.SourceLogFile, rs.ReadSourceLogPos, rs.GTIDIOPos)
			results <- r
		}()
	}
	now := e.now()
	for range names {
		r := <-results
		if r.count < 0 {
			continue
		}
		e.mu.Lock()
		s, ok := e.hb[r.name]
		if !ok || s.count != r.count || s.pos != r.pos {
			e.hb[r.name] = &hbSample{count: r.count, pos: r.pos, movedAt: now}
		}
		e.mu.Unlock()
	}
}

// sinceSourceEvent is how long replica name has received nothing, -1
// when not measured.
func (e *Executor) sinceSourceEventLocked(name string, now time.Time) float64 {
	if s, ok := e.hb[name]; ok {
		return now.Sub(s.movedAt).Seconds()
	}
	return -1
}
