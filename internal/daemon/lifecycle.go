package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/executor"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/lifecycle"
	"github.com/vigil-db/vigil/internal/topology"
)

// Self-healing and the lifecycle journal (docs/lifecycle.md). One
// goroutine of the daemon (healLoop) looks at every cluster each
// healTick: where this instance acts, it first resolves a lifecycle
// operation an earlier acting instance journaled and did not finish,
// then, with lifecycle.self_healing on, asks lifecycle.DecideHeal what
// to do and starts it. It is the daemon's, not a cluster's: a replacement
// changes the membership, which takes the reload lock a cluster's stop
// is waited for under.

const (
	healTick = 2 * time.Second
	// healBackoff is how long a target whose automatic operation failed
	// is left alone.
	healBackoff = 5 * time.Minute
)

// healer is one cluster's self-healing state.
type healer struct {
	mu        sync.Mutex
	downSince map[string]time.Time
	backoff   map[string]time.Time
	// errant counts, per replica, the checks in a row that found
	// transactions the writer lacks (confirmErrant).
	errant map[string]errantSeen
	// resolved: this instance resolved the journal since it last began
	// to act.
	resolved bool
	// resolving is the journaled operation being resolved now.
	resolving *lifecycle.Journal
	// said is the last decision reported, so a waiting one is logged once.
	said string
}

func (d *daemon) healerOf(cluster string) *healer {
	d.healersMu.Lock()
	defer d.healersMu.Unlock()
	if d.healers == nil {
		d.healers = map[string]*healer{}
	}
	h := d.healers[cluster]
	if h == nil {
		h = &healer{downSince: map[string]time.Time{}, backoff: map[string]time.Time{}, errant: map[string]errantSeen{}}
		d.healers[cluster] = h
	}
	return h
}

// failed keeps automatic operations off target for healBackoff.
func (h *healer) failed(target string, now time.Time) {
	h.mu.Lock()
	h.backoff[target] = now.Add(healBackoff)
	h.mu.Unlock()
}

func (h *healer) resolvingNow() *lifecycle.Journal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resolving
}

// healLoop runs until the daemon stops.
func (d *daemon) healLoop(ctx context.Context) {
	t := time.NewTicker(healTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, rt := range d.clusterMap() {
			if ctx.Err() != nil {
				return
			}
			d.heal(ctx, rt)
		}
	}
}

// heal is one cluster's turn.
func (d *daemon) heal(ctx context.Context, rt *clusterRuntime) {
	h := d.healerOf(rt.name)
	now := time.Now()
	h.trackDown(rt, now)
	if !rt.exec.Acting() {
		h.mu.Lock()
		h.resolved = false
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	resolve := !h.resolved
	h.resolved = true
	h.mu.Unlock()
	if resolve {
		d.resolveJournal(ctx, rt, h)
	}
	lc := rt.cfg.Load().Lifecycle
	if !lc.SelfHealing || ctx.Err() != nil {
		return
	}
	a := lifecycle.DecideHeal(d.healInput(ctx, rt, h, now))
	if a.Kind == "" {
		h.mu.Lock()
		fresh := a.Reason != h.said
		h.said = a.Reason
		h.mu.Unlock()
		if fresh && strings.HasPrefix(a.Reason, "waiting") {
			rt.log.Info("self-healing: "+a.Reason, "event", "self_healing")
		}
		return
	}
	h.mu.Lock()
	h.said = ""
	h.mu.Unlock()
	d.journal.add(admin.Event{Cluster: rt.name, Server: a.Target, Kind: "self_healing", Message: "self-healing: " + a.Reason})
	switch a.Kind {
	case lifecycle.KindRebuild:
		h.forgetErrant(a.Target)
		if _, err := d.startLifecycle(ctx, admin.CloneRequest{Cluster: rt.name, Target: a.Target, Kind: lifecycle.KindRebuild, Rate: int64(lc.Rate)}, ""); err != nil {
			h.failed(a.Target, time.Now())
			d.journal.add(admin.Event{Cluster: rt.name, Server: a.Target, Kind: "self_healing_failed",
				Message: fmt.Sprintf("self-healing could not start the rebuild of %s: %v; it tries again after %s", a.Target, err, healBackoff)})
		}
	case lifecycle.KindReplace:
		d.replace(ctx, rt, h, a, lc)
	}
}

// trackDown notes since when each member has not answered.
func (h *healer) trackDown(rt *clusterRuntime, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for _, o := range rt.mon.Observations() {
		seen[o.Name] = true
		if o.Last != nil && !o.Last.OK {
			if _, ok := h.downSince[o.Name]; !ok {
				h.downSince[o.Name] = now
			}
		} else {
			delete(h.downSince, o.Name)
		}
	}
	for n := range h.downSince {
		if !seen[n] {
			delete(h.downSince, n)
		}
	}
}

// healInput gathers what DecideHeal looks at. Whether a member diverged
// is asked of the failover engine (a rejoin's dry run), for the members
// that answer and do not replicate cleanly only.
func (d *daemon) healInput(ctx context.Context, rt *clusterRuntime, h *healer, now time.Time) lifecycle.HealInput {
	cc := rt.cfg.Load()
	snap := rt.topo.Load()
	in := lifecycle.HealInput{Snapshot: snap, Now: now, ReplaceAfter: cc.Lifecycle.ReplaceAfter.Duration,
		Diverged: map[string]string{}, Broken: map[string]string{}, DownSince: map[string]time.Time{},
		Agents: map[string]bool{}, SalvagePending: map[string]string{}, Backoff: map[string]time.Time{}}
	switch {
	case rt.exec.Running() != "":
		in.Busy = rt.exec.Running() + " runs"
	case d.cloneManager().Running(rt.name) > 0:
		in.Busy = "a clone or rebuild runs (vigil ctl clones)"
	case h.resolvingNow() != nil:
		in.Busy = "an interrupted operation is being resolved"
	}
	members := map[string]bool{}
	for _, s := range cc.Servers {
		members[s.Name] = true
		if s.Agent != "" {
			in.Agents[s.Name] = true
		}
		if why := rt.exec.SalvagePending(s.Name); why != "" {
			in.SalvagePending[s.Name] = why
		}
	}
	for _, sp := range cc.Lifecycle.Spares {
		if !members[sp.Name] {
			in.Spares = append(in.Spares, sp.Name)
		}
	}
	h.mu.Lock()
	for k, v := range h.downSince {
		in.DownSince[k] = v
	}
	for k, v := range h.backoff {
		in.Backoff[k] = v
	}
	h.mu.Unlock()
	if in.Busy != "" || snap == nil {
		return in
	}
	writer := ""
	if w := snap.WriterServer(); w != nil {
		writer = w.Name
	}
	fenced := map[string]bool{}
	for _, s := range snap.Live().Servers {
		fenced[s.Name] = s.Fenced || s.Conflict
	}
	obs := rt.mon.Observations()
	var wobs, freshW *topology.Observation
	for _, o := range obs {
		if o.Name == writer {
			wobs = o.Last
		}
	}
	// writerAfter is a check of the writer that began after replica's
	// ended, so that their positions compare (failover.ErrantOf): the
	// monitor's latest when it did, else one fresh check, taken once per
	// turn after every replica check read above had ended. The probes'
	// phases drift slowly, so waiting for the latest checks to fall in
	// order could take minutes.
	writerAfter := func(replica *topology.Observation) *topology.Observation {
		if _, ok := failover.ErrantOf(replica, wobs); ok || writer == "" || !failover.MaybeErrant(replica, wobs) {
			// Comparable already, or nothing a fresh check could find.
			return wobs
		}
		if freshW == nil {
			freshW = rt.mon.CheckFresh(ctx, writer)[writer]
		}
		return freshW
	}
	for _, o := range obs {
		last := o.Last
		if o.Name == writer || !members[o.Name] || last == nil || !last.OK || !in.Agents[o.Name] {
			continue
		}
		rs := last.Replica
		if rs != nil && rs.LastIOErrno == 1236 {
			in.Broken[o.Name] = fmt.Sprintf("IO thread error 1236: %s", rs.LastIOError)
			continue
		}
		if !fenced[o.Name] && rs != nil && rs.Running() && rs.LastIOErrno == 0 && rs.LastSQLErrno == 0 {
			if x := h.confirmErrant(o.Name, last, writerAfter(last)); x != "" {
				in.Diverged[o.Name] = fmt.Sprintf("it replicates, but two checks in a row found transactions %s lacks: %s", writer, x)
			}
			continue
		}
		res, err := rt.exec.Request(ctx, failover.Request{Kind: failover.RequestRejoin, To: o.Name, DryRun: true})
		var refused *executor.RefusedError
		if errors.As(err, &refused) && res.Decision.Situation == failover.RejoinDiverged {
			in.Diverged[o.Name] = refused.Reason
		}
	}
	return in
}

// errantSeen is how many checks of a replica in a row, the latest at
// at, found transactions the writer lacks.
type errantSeen struct {
	n  int
	at time.Time
}

// confirmErrant returns what a cleanly replicating replica holds that the
// writer lacks when its latest check, comparable with the writer's
// (failover.ErrantOf), found it and so did the comparable check before;
// "" otherwise. Nothing is decided on a check already counted or one
// that cannot be compared (the count is kept); a comparable check that
// finds nothing starts it again, and so does a rebuild of the replica
// (forgetErrant).
func (h *healer) confirmErrant(name string, replica, writer *topology.Observation) string {
	x, ok := failover.ErrantOf(replica, writer)
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := h.errant[name]
	switch {
	case !ok || replica.Time.Equal(seen.at):
		return ""
	case x == "":
		delete(h.errant, name)
		return ""
	}
	seen = errantSeen{n: seen.n + 1, at: replica.Time}
	h.errant[name] = seen
	if seen.n < 2 {
		return ""
	}
	return x
}

// forgetErrant starts target's count again: it is about to be
// overwritten.
func (h *healer) forgetErrant(target string) {
	h.mu.Lock()
	delete(h.errant, target)
	h.mu.Unlock()
}

// replace clones the spare a.Spare in as a member and, once it
// replicates, takes the lost member a.Target out of the cluster (never
// touching its host or datadir). It runs to its end: one operation at a
// time.
func (d *daemon) replace(ctx context.Context, rt *clusterRuntime, h *healer, a lifecycle.HealAction, lc config.Lifecycle) {
	var sp config.Spare
	for _, s := range lc.Spares {
		if s.Name == a.Spare {
			sp = s
		}
	}
	fail := func(err error, removeSpare bool) {
		h.failed(a.Spare, time.Now())
		msg := fmt.Sprintf("self-healing could not replace %s with the spare %s: %v", a.Target, a.Spare, err)
		if removeSpare {
			if rerr := d.RemoveServer(ctx, rt.name, a.Spare); rerr != nil {
				msg += fmt.Sprintf("; the spare stays a member out of routing (%v): vigil ctl server remove %s", rerr, a.Spare)
			} else {
				msg += "; the spare left the cluster again"
			}
		}
		d.journal.add(admin.Event{Cluster: rt.name, Server: a.Target, Kind: "self_healing_failed", Message: msg + fmt.Sprintf("; tried again after %s", healBackoff)})
	}
	started, err := d.addAndStart(ctx, rt, sp, admin.CloneRequest{Kind: lifecycle.KindReplace, Rate: int64(lc.Rate)}, a.Target)
	if err != nil {
		fail(err, false)
		return
	}
	p, _ := started.(lifecycle.Progress)
	for {
		if sleepCtx(ctx, time.Second) != nil {
			return
		}
		cur, ok := d.cloneManager().Get(p.ID)
		if !ok || cur.Running {
			continue
		}
		if cur.Phase != lifecycle.PhaseDone {
			fail(errors.New(cur.Error), true)
			return
		}
		break
	}
	d.retire(ctx, rt, a.Target, sp.Name)
}

// retire takes a replaced member out of the cluster once its spare
// replicates; its host and datadir are left as they are.
func (d *daemon) retire(ctx context.Context, rt *clusterRuntime, lost, spare string) {
	addr := ""
	for _, s := range rt.cfg.Load().Servers {
		if s.Name == lost {
			addr = s.Address
		}
	}
	msg := fmt.Sprintf("%s replaced %s: %s left the cluster; its host and datadir are left as they are (vigil ctl server add %s %s brings it back)", spare, lost, lost, lost, addr)
	if err := d.RemoveServer(ctx, rt.name, lost); err != nil {
		msg = fmt.Sprintf("%s replicates in place of %s, but %s could not be taken out of the cluster (%v): vigil ctl server remove %s", spare, lost, lost, err, lost)
	}
	d.journal.add(admin.Event{Cluster: rt.name, Server: lost, Kind: "server_replaced", Message: msg})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// journalPath is the state dir's copy of a cluster's lifecycle journal
// (the only one without coordination).
func (d *daemon) journalPath(cluster string) string {
	return d.lifecycleFile(cluster, ".json")
}

// lifecycleFile is the state dir's file lifecycle-<cluster><suffix>.
func (d *daemon) lifecycleFile(cluster, suffix string) string {
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, cluster)
	return filepath.Join(d.base.StateDir, "lifecycle-"+safe+suffix)
}

// Members a lifecycle operation left out of routing (it failed, or was
// interrupted, after the target left routing) stay out until an operator
// sets their state or a later clone or rebuild of them succeeds. The
// acting instance keeps them in memory (the monitor's OFFLINE_HARD
// override) and, with several instances, in the writer record's fenced
// list; keptOut is their copy in the state dir
// (lifecycle-<cluster>-out.json, name → why), read when the cluster
// starts, so that a restarted single Vigil does not route a half-rebuilt
// member again.
var keptOutMu sync.Mutex

func (d *daemon) keptOut(cluster string) map[string]string {
	out := map[string]string{}
	if d.base.StateDir == "" {
		return out
	}
	raw, err := os.ReadFile(d.lifecycleFile(cluster, "-out.json"))
	if err == nil {
		_ = json.Unmarshal(raw, &out)
	}
	return out
}

// setKeptOut adds (why != "") or removes (why == "") server.
func (d *daemon) setKeptOut(rt *clusterRuntime, server, why string) {
	if d.base.StateDir == "" || server == "" {
		return
	}
	keptOutMu.Lock()
	defer keptOutMu.Unlock()
	m := d.keptOut(rt.name)
	if _, ok := m[server]; !ok && why == "" {
		return
	}
	if why == "" {
		delete(m, server)
	} else {
		m[server] = why
	}
	path := d.lifecycleFile(rt.name, "-out.json")
	var err error
	if len(m) == 0 {
		err = os.Remove(path)
	} else {
		raw, _ := json.Marshal(m)
		err = os.WriteFile(path, raw, 0o640)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		rt.log.Warn("could not keep the members a lifecycle operation left out of routing in the state dir; after a restart they may be routed again: set them OFFLINE_HARD by hand (vigil ctl set-state)", "server", server, "err", err)
	}
}

// restoreKeptOut applies the state dir's kept-out members before the
// cluster's monitor runs its first check.
func (d *daemon) restoreKeptOut(rt *clusterRuntime) {
	for server, why := range d.keptOut(rt.name) {
		if err := rt.exec.Routing().SetAdminState(server, topology.OfflineHard, why); err != nil {
			rt.log.Warn("a member a lifecycle operation left out of routing is no longer in the cluster", "server", server, "err", err)
			continue
		}
		rt.log.Info("kept out of routing after a restart: "+why, "server", server, "event", "lifecycle_kept_out")
	}
}

// saveJournal journals a lifecycle operation's progress: in the state dir
// and, with coordination, in etcd; a finished or failed one is removed.
func (rt *clusterRuntime) saveJournal(d *daemon, j lifecycle.Journal) {
	j.Instance = d.instanceName(rt)
	done := j.Phase == lifecycle.PhaseDone || j.Phase == lifecycle.PhaseFailed
	switch {
	case j.Phase == lifecycle.PhaseFailed && j.OutOfRouting:
		d.setKeptOut(rt, j.Target, fmt.Sprintf("its %s failed at %s (vigil ctl events --kind %s_failed)", j.Kind, time.Now().UTC().Format(time.RFC3339), j.Kind))
	case j.Phase == lifecycle.PhaseDone:
		d.setKeptOut(rt, j.Target, "")
	}
	path := d.journalPath(rt.name)
	raw, _ := json.Marshal(j)
	if done {
		_ = os.Remove(path)
	} else if d.base.StateDir != "" {
		if err := os.WriteFile(path, raw, 0o640); err != nil {
			rt.log.Warn("could not journal the lifecycle operation in the state dir", "err", err)
		}
	}
	if rt.shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
	defer cancel()
	var err error
	if done {
		err = rt.shared.EndLifecycle(ctx)
	} else {
		err = rt.shared.SaveLifecycle(ctx, raw)
	}
	if err != nil {
		rt.log.Warn("coordination: could not journal the lifecycle operation in etcd", "phase", j.Phase, "err", err)
	}
}

// loadJournal is the journaled operation, nil when none.
func (d *daemon) loadJournal(ctx context.Context, rt *clusterRuntime) (*lifecycle.Journal, error) {
	var raw []byte
	var err error
	if rt.shared != nil {
		raw, err = rt.shared.Lifecycle(ctx)
	} else {
		raw, err = os.ReadFile(d.journalPath(rt.name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	if err != nil || len(raw) == 0 {
		return nil, err
	}
	var j lifecycle.Journal
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("unreadable lifecycle journal: %w", err)
	}
	return &j, nil
}

func (d *daemon) endJournal(rt *clusterRuntime) {
	rt.saveJournal(d, lifecycle.Journal{Phase: lifecycle.PhaseDone})
}

func (d *daemon) instanceName(rt *clusterRuntime) string {
	if rt.shared != nil {
		return rt.shared.Instance()
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s (pid %d)", host, os.Getpid())
}

// resolveJournal finishes or reports a lifecycle operation the acting
// instance journaled and did not end (it died, or this process
// restarted): after the swap, with the backup's GTID known, it is
// completed (replication from the writer, back to routing); before, the
// target stays out of routing with its datadir as the agent left it, and
// the event says which.
func (d *daemon) resolveJournal(ctx context.Context, rt *clusterRuntime, h *healer) {
	j, err := d.loadJournal(ctx, rt)
	if err != nil {
		rt.log.Warn("could not read the lifecycle journal; an interrupted clone or rebuild may be left unresolved", "err", err)
		return
	}
	if j == nil || j.Target == "" {
		return
	}
	if running, _ := d.cloneManager().Busy(rt.name); running {
		return // this process runs it
	}
	h.mu.Lock()
	h.resolving = j
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.resolving = nil
		h.mu.Unlock()
	}()
	me := d.instanceName(rt)
	who := j.Instance
	if who == me {
		who = "this instance, before it restarted"
	} else {
		who = "instance " + who
	}
	cc := rt.cfg.Load()
	plan := lifecycle.Plan{Cluster: rt.name, Target: j.Target, TargetAddr: j.TargetAddr, Donor: j.Donor, Kind: j.Kind, Replaces: j.Replaces,
		ReplUser: cc.Failover.ReplUser, ReplPass: cc.Failover.ReplPassword}
	var target lifecycle.Agent
	agentAddr := ""
	for _, s := range cc.Servers {
		if s.Name == j.Target {
			agentAddr = s.Agent
		}
	}
	if agentAddr != "" {
		if c, err := agentClient(d.running.Load().Agents, agentAddr); err == nil {
			defer c.Close()
			target = c
		}
	}
	event := func(kind, msg string) {
		d.journal.add(admin.Event{Cluster: rt.name, Server: j.Target, Kind: kind, Message: msg})
	}
	swapped := j.GTID != "" && slices.Contains([]string{lifecycle.PhaseReplicating, lifecycle.PhaseVerifying, lifecycle.PhaseRouting}, j.Phase)
	if swapped {
		deps := rt.lifecycleDeps(d, nil, target, j.Target)
		w, err := lifecycle.Finish(ctx, nil, plan, deps, *j)
		if err == nil {
			cleaned := ""
			if target != nil {
				if cr, err := target.Cleanup(ctx); err == nil && len(cr.Removed) > 0 {
					cleaned = "; previous datadir deleted"
				}
			}
			event(j.Kind+"_completed", fmt.Sprintf("the %s of %s, interrupted while %s when %s stopped acting, was completed by %s: the copy was already in place; %s replicates from %s from GTID %s and is back in routing%s",
				j.Kind, j.Target, j.Phase, who, me, j.Target, w.Name, j.GTID, cleaned))
			if j.Replaces != "" {
				d.retire(ctx, rt, j.Replaces, j.Target)
			}
			d.setKeptOut(rt, j.Target, "")
			d.endJournal(rt)
			return
		}
		d.keepOut(ctx, rt, j)
		event(j.Kind+"_interrupted", fmt.Sprintf("the %s of %s, interrupted while %s when %s stopped acting, could not be completed by %s: %v. %s runs the copied datadir (its previous one is kept at %s) and stays out of routing (OFFLINE_HARD); run vigil ctl %s %s again",
			j.Kind, j.Target, j.Phase, who, me, err, j.Target, orUnknown(j.OldDatadir), rebuildVerb(j.Kind), j.Target))
		d.endJournal(rt)
		return
	}
	// Before the swap: the agent abandons a restore whose stream ends,
	// and swaps only after a complete, prepared copy.
	d.keepOut(ctx, rt, j)
	state := "its agent could not be asked (no agent client); the agent swaps only after a complete, prepared copy, so its datadir is the one it had"
	if target != nil {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		st, err := waitAgentIdle(wctx, target)
		cancel()
		switch {
		case err != nil:
			state = fmt.Sprintf("its agent does not answer (%v); the agent swaps only after a complete, prepared copy, so its datadir is the one it had unless the swap had begun", err)
		case len(st.OldDatadirs) > 0:
			state = fmt.Sprintf("its agent kept datadirs aside (%s): a copy may have been swapped in just before the stop; check the server before routing it", strings.Join(st.OldDatadirs, ", "))
		default:
			state = fmt.Sprintf("its datadir %s is intact (no copy was swapped in; the partial copy is thrown away), and its server %s", st.Datadir, map[bool]string{true: "answers", false: "does not answer"}[st.Answering])
		}
	}
	next := fmt.Sprintf("run vigil ctl %s %s again", rebuildVerb(j.Kind), j.Target)
	if cc.Lifecycle.SelfHealing {
		next += " (self-healing does it by itself when the server needs it)"
	}
	if j.Kind == lifecycle.KindReplace {
		if err := d.RemoveServer(ctx, rt.name, j.Target); err == nil {
			next = fmt.Sprintf("the spare %s left the cluster again; self-healing tries the replacement of %s again", j.Target, j.Replaces)
		}
	}
	event(j.Kind+"_interrupted", fmt.Sprintf("the %s of %s was interrupted while %s when %s stopped acting; %s; %s stays out of routing (OFFLINE_HARD). Resolved by %s: %s",
		j.Kind, j.Target, j.Phase, who, state, j.Target, me, next))
	d.endJournal(rt)
}

// keepOut takes the target of an interrupted operation out of routing,
// here and in the state dir.
func (d *daemon) keepOut(ctx context.Context, rt *clusterRuntime, j *lifecycle.Journal) {
	_ = rt.exec.Exclude(ctx, j.Target, "interrupted "+j.Kind)
	d.setKeptOut(rt, j.Target, fmt.Sprintf("its %s was interrupted while %s (vigil ctl events --kind %s_interrupted)", j.Kind, j.Phase, j.Kind))
}

func rebuildVerb(kind string) string {
	if kind == lifecycle.KindRebuild {
		return "rebuild"
	}
	return "clone"
}

// waitAgentIdle waits until the agent runs no operation and returns its
// status.
func waitAgentIdle(ctx context.Context, a lifecycle.Agent) (st agent.Status, err error) {
	for {
		st, err = a.Status(ctx)
		if err == nil && st.Busy == "" {
			return st, nil
		}
		if sleepCtx(ctx, time.Second) != nil {
			if err == nil {
				err = fmt.Errorf("still busy (%s)", st.Busy)
			}
			return st, err
		}
	}
}

// leader is the instance acting for the cluster ("" when unknown or
// without coordination).
func (rt *clusterRuntime) leader() string {
	if rt.shared == nil {
		return ""
	}
	return rt.shared.Leader()
}

// lifecycleFailpoint is for fault tests only, never set in production:
// with VIGIL_TEST_LIFECYCLE_KILL=PHASE the instance running a lifecycle
// operation it started sends itself SIGKILL once it journaled PHASE, so
// that the next acting instance must resolve it (an operation being
// resolved never crashes).
func lifecycleFailpoint(phase string) {
	if p := os.Getenv("VIGIL_TEST_LIFECYCLE_KILL"); p != "" && p == phase {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}
