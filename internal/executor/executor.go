// Package executor turns the failover engine's decisions into actions: it
// gathers the facts the engine needs, asks it what to do (on every monitor
// change, and for operators' requests), runs plans step by step — SQL on
// the servers, fencing and holding at the router, writer changes in the
// monitor — and journals every decision and step under state_dir so that a
// restarted Vigil knows what happened.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/routing"
	"github.com/vigil-db/vigil/internal/topology"
)

// Router is the data path's side of an operation (frontend.Server).
type Router interface {
	Fence(idx int, reason string) int
	Unfence(idx int)
	Hold(reason string, max time.Duration)
	Release()
	BoundSessions(idx int) int
	KillBound(idx int) int
	// PreFenceConns and ForgetPreFenceConns: the server connection ids
	// Vigil had open on a server when it was fenced.
	PreFenceConns(idx int) []uint32
	ForgetPreFenceConns(idx int, ids []uint32)
}

// Monitor is the monitor's side (monitor.Monitor).
type Monitor interface {
	Snapshot() *topology.Snapshot
	Observations() []topology.Health
	SetWriter(server, reason string) error
	Fence(server, reason string) error
	Unfence(server string) error
	// SetTerm makes term the cluster's writer term (the coordination
	// record's, with several Vigil instances).
	SetTerm(term uint64) error
	// Changed is closed when the next snapshot is published.
	Changed() <-chan struct{}
	// CheckFresh checks servers now, together, and returns their
	// observations (those it got in time).
	CheckFresh(ctx context.Context, servers ...string) map[string]*topology.Observation
}

// Server is how to reach one server. Options.Servers lists the cluster's
// server slots in the router's order (topology.MaxServers); a Removed
// slot is a tombstone.
type Server struct {
	Name, Addr string
	Removed    bool
}

// liveMonitor shows the executor and the engine the cluster without its
// removed servers: they work by name, and a name may come back in a new
// slot.
type liveMonitor struct{ Monitor }

func (m liveMonitor) Snapshot() *topology.Snapshot { return m.Monitor.Snapshot().Live() }

// Options configure one cluster's executor.
type Options struct {
	Cluster  string
	Servers  []Server
	Engine   failover.Options
	User     string // monitor account: runs the failover SQL
	Password string
	ReplUser string // replication account for CHANGE MASTER
	ReplPass string
	StateDir string
	// Hooks: commands run with VIGIL_CLUSTER, VIGIL_OLD_PRIMARY,
	// VIGIL_NEW_PRIMARY in the environment. A non-zero exit of
	// PreFailover aborts the failover.
	PreFailover, PostFailover, PostSwitchover string
	// Interval is how often the executor re-decides without news.
	Interval time.Duration
	// AppAccounts are the server accounts client sessions use: Vigil
	// warns at start about those that read_only does not stop.
	AppAccounts []Account
	// Client runs the executor's SQL; nil: connections with User and
	// Password (tests give a fake).
	Client Client
}

// Account is a server login.
type Account struct{ User, Password string }

// Event is one journal entry shown to operators.
type Event struct {
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster"`
	Server  string    `json:"server,omitempty"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
}

// Result is what an operation did.
type Result struct {
	Decision failover.Decision
	Text     string // the rendered decision / plan
	Steps    []string
	Elapsed  time.Duration
	Pause    time.Duration // how long new statements were held
	OK       bool
	Message  string
}

// ErrBusy is returned when an operation is already running.
var ErrBusy = errors.New("another operation is running on this cluster")

// Executor runs one cluster's operations, one at a time.
type Executor struct {
	// opts are swapped whole by a reload (SetOptions); read them with o().
	opts   atomic.Pointer[Options]
	client Client
	mon    Monitor
	router Router
	// routes owns the cluster's routing state (writer, term, fences): every
	// fence, unfence and writer change goes through it, which applies it
	// to the router and the monitor.
	routes *routing.Owner
	log    *slog.Logger
	onEv   func(Event)
	// clock is the executor's time (clock.go); tests set a fake one.
	clock Clock

	mu      sync.Mutex
	history failover.History
	running *failover.Record
	facts   map[string]failover.ServerFacts
	lastSit string // for event deduplication

	salvaged map[int64]*salvageState // by failover record (its start)
	// noTxBase is, per server, Rpl_semi_sync_master_no_tx as last seen
	// while it replicated: what the counter held before the server's
	// latest time as primary (salvage.go).
	noTxBase map[string]int64
	// roSetAt: when Vigil last set read_only on a fenced server.
	roSetAt map[string]time.Time
	// fencedAt: when Vigil fenced a server (FenceRouter, quarantine).
	fencedAt map[string]time.Time
	// started: each server's start time by its last answered check
	// (check time - Uptime).
	started map[string]time.Time
	// stallTold: replicas whose stalling semi-sync settings were reported
	// (tellStall), until they change.
	stallTold map[string]bool
	// rejoinSalvaged: per server, the binlog position whose salvage file
	// a refused rejoin wrote.
	rejoinSalvaged map[string]string
	marks          markState
	// hb: per replica, heartbeat sampling while the primary fails.
	hb map[string]*hbSample

	// shared: coordination with other Vigil instances (nil: alone);
	// actingSeen: this instance acted at the last decision (takeOver ran).
	shared     Shared
	actingSeen bool
	// sharedHeld: a switchover by another instance holds statements here.
	sharedHeld bool
	// fenceNotes: per returned old primary, the engine's latest note on
	// why automatic rejoin leaves it fenced (noteFenced).
	fenceNotes map[string]string
	// pubFailed is the monitor-chosen writer whose publication last
	// failed ("" after a success): the warning is logged once.
	pubFailed string

	opMu sync.Mutex // held while an operation runs
	kick chan struct{}
	j    *journal
}

// New makes an executor and loads the cluster's journal.
func New(opts Options, mon Monitor, router Router, log *slog.Logger, onEvent func(Event)) (*Executor, error) {
	if opts.Interval <= 0 {
		opts.Interval = 500 * time.Millisecond
	}
	opts.Engine = opts.Engine.WithDefaults()
	j, hist, err := openJournal(opts.StateDir, opts.Cluster)
	if err != nil {
		return nil, err
	}
	if onEvent == nil {
		onEvent = func(Event) {}
	}
	e := &Executor{mon: liveMonitor{mon}, router: router, log: log, onEv: onEvent, clock: realClock{}, history: hist,
		facts: map[string]failover.ServerFacts{}, kick: make(chan struct{}, 1), j: j, salvaged: map[int64]*salvageState{},
		noTxBase: map[string]int64{}, roSetAt: map[string]time.Time{}, fencedAt: map[string]time.Time{}, started: map[string]time.Time{}, stallTold: map[string]bool{}, rejoinSalvaged: map[string]string{}, hb: map[string]*hbSample{}}
	e.opts.Store(&opts)
	e.routes = routing.New(routingServers(opts.Servers), mon, router)
	e.client = opts.Client
	if e.client == nil {
		e.client = newConnClient(func() (string, string) { o := e.o(); return o.User, o.Password })
	}
	// An operation that never ended means Vigil stopped during it: it
	// counts as failed until an operator acknowledges it.
	for i := range e.history.Records {
		r := &e.history.Records[i]
		if r.Ended.IsZero() {
			r.Ended = e.now()
			r.Error = "Vigil stopped during the operation; check the cluster, then `vigil ctl ack`"
			e.event("", "operation_interrupted", fmt.Sprintf("%s started %s did not finish: %s", r.Kind, r.Started.Format(time.RFC3339), r.Error))
			_ = e.j.record(*r)
		}
	}
	return e, nil
}

// o is the executor's options now.
func (e *Executor) o() *Options { return e.opts.Load() }

// SetOptions applies a reloaded configuration: the engine's options
// (failover.auto, detect_after, candidates, semi_sync...), hooks,
// accounts. An operation already running finishes with the options it
// started with where it read them. The cluster, its servers and the
// state directory cannot change (the reload refuses that).
func (e *Executor) SetOptions(opts Options) {
	cur := e.o()
	if opts.Interval <= 0 {
		opts.Interval = cur.Interval
	}
	opts.Engine = opts.Engine.WithDefaults()
	opts.Cluster, opts.StateDir = cur.Cluster, cur.StateDir
	if len(opts.Servers) < len(cur.Servers) {
		opts.Servers = cur.Servers // slots are never dropped
	}
	e.opts.Store(&opts)
	if f, ok := e.client.(interface{ Forget(server string) }); ok {
		for i, s := range cur.Servers {
			if !s.Removed && (i >= len(opts.Servers) || opts.Servers[i].Removed || opts.Servers[i].Name != s.Name) {
				f.Forget(s.Name) // its kept connections
			}
		}
	}
	e.event("", "options_reloaded", fmt.Sprintf("failover options reloaded: auto=%v auto_rejoin=%v detect_after=%s detect_after_refused=%s detect_after_silent=%s min_interval=%s apply_timeout=%s semi_sync=%s",
		opts.Engine.Auto, opts.Engine.AutoRejoin, opts.Engine.DetectAfter, boundOrOff(opts.Engine.DetectAfterRefused), boundOrOff(opts.Engine.DetectAfterSilent), opts.Engine.MinInterval, opts.Engine.ApplyTimeout, orDefault(string(opts.Engine.SemiSync.Manage), string(failover.SemiSyncAuto))))
	e.Kick()
	// After the options: the owner never names a slot e.o() lacks.
	e.routes.SetServers(routingServers(opts.Servers))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// History returns the cluster's operations.
func (e *Executor) History() failover.History {
	e.mu.Lock()
	defer e.mu.Unlock()
	return failover.History{Records: append([]failover.Record(nil), e.history.Records...)}
}

// Kick makes the executor decide again soon (a monitor event arrived).
func (e *Executor) Kick() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Run decides automatically until ctx ends.
func (e *Executor) Run(ctx context.Context) error {
	defer e.j.close()
	if c, ok := e.client.(interface{ Close() }); ok {
		defer c.Close() // the kept admin connections
	}
	// Three wake-ups, all on the executor's clock: the facts (every
	// factsEvery), the decision interval, and recheckAt, when the engine
	// said its decision changes without new observations (detect_after
	// running out), so a failover does not wait for the next tick or check.
	interval := e.o().Interval
	now := e.now()
	factsAt, tickAt := now.Add(factsEvery), now.Add(interval)
	var recheckAt time.Time
	e.refreshFacts(ctx)
	// The grants check dials every account: beside the loop, not before
	// it (a paused server must not delay the first decisions); Run waits
	// for it before returning.
	grants := make(chan struct{})
	go func() {
		defer close(grants)
		e.checkAppAccounts(ctx)
	}()
	defer func() { <-grants }()
	for {
		wake := factsAt
		if tickAt.Before(wake) {
			wake = tickAt
		}
		if !recheckAt.IsZero() && recheckAt.Before(wake) {
			wake = recheckAt
		}
		select {
		case <-ctx.Done():
			return nil
		case <-e.clock.After(wake.Sub(e.now())):
		case <-e.kick:
		}
		now := e.now()
		if !now.Before(factsAt) {
			e.refreshFacts(ctx)
			factsAt = later(factsAt, factsEvery, now)
		}
		if !now.Before(tickAt) {
			tickAt = later(tickAt, interval, now)
		}
		if !recheckAt.IsZero() && !now.Before(recheckAt) {
			recheckAt = time.Time{}
		}
		// Only a future time: one already past is the ticker's (no busy
		// loop on a decision that keeps naming it).
		if at := e.decideAuto(ctx); at.After(e.now()) {
			recheckAt = at.Add(time.Millisecond)
		}
	}
}

// factsEvery is how often Run reads the servers' facts.
const factsEvery = 5 * time.Second

// later is the first of t, t+every, t+2*every... after now: a period's
// next wake-up, the missed ones dropped (as a ticker does).
func later(t time.Time, every time.Duration, now time.Time) time.Time {
	for !t.After(now) {
		t = t.Add(every)
	}
	return t
}

// input builds the engine's input from what is known now.
func (e *Executor) input(req *failover.Request) failover.Input {
	now := e.now()
	snap := e.mon.Snapshot()
	obs := map[string]*topology.Observation{}
	e.mu.Lock()
	facts := make(map[string]failover.ServerFacts, len(e.facts))
	for k, v := range e.facts {
		facts[k] = v
	}
	hist := failover.History{Records: append([]failover.Record(nil), e.history.Records...)}
	running := e.running
	since := map[string]float64{}
	for name := range e.hb {
		since[name] = e.sinceSourceEventLocked(name, now)
	}
	e.mu.Unlock()
	for _, h := range e.mon.Observations() {
		if h.Last != nil {
			obs[h.Name] = h.Last
		}
		// Servers never queried get an entry too (FailingSince is what
		// detection needs); without LogBin they are never promoted.
		f := facts[h.Name]
		f.FailingSince = h.FailingSince
		f.SecondsSinceSourceEvent = -1 // not measured: the IO thread state decides
		if v, ok := since[h.Name]; ok {
			f.SecondsSinceSourceEvent = v
		}
		facts[h.Name] = f
	}
	var fenced []string
	if snap != nil {
		for _, s := range snap.Servers {
			if s.Fenced {
				fenced = append(fenced, s.Name)
			}
		}
	}
	var run *failover.Record
	if running != nil {
		r := *running
		run = &r
	}
	return failover.Input{Now: now, Snapshot: snap, Obs: obs, Facts: facts, History: hist,
		Options: e.o().Engine, Request: req, Running: run, Fenced: fenced, Acked: e.ackedMark()}
}

// decideAuto decides once and acts on the decision; it returns when the
// decision would change without new observations (zero: only with them).
func (e *Executor) decideAuto(ctx context.Context) time.Time {
	if !e.opMu.TryLock() {
		return time.Time{} // an operation runs; it decides for itself
	}
	defer e.opMu.Unlock()
	if e.shared != nil {
		if !e.shared.Acting() {
			e.actingSeen = false
			return time.Time{} // another instance acts; this one follows the record
		}
		if !e.actingSeen {
			if !e.takeOver(ctx) {
				return e.now().Add(200 * time.Millisecond)
			}
			e.actingSeen = true
		}
	}
	e.followMonitorWriter(ctx)
	e.noteAcked()
	e.sampleHeartbeats(ctx)
	e.keepFencedReadOnly(ctx)
	e.enforceRoles(ctx)
	e.noteReplicaNoTx()
	e.checkSalvage(ctx)
	d := e.withViews(ctx, failover.Decide(e.input(nil)))
	if d.Situation == failover.AutoRejoin {
		d = e.confirmAutoRejoin(ctx, d)
	}
	e.noteFenced(d)
	switch d.Action {
	case failover.ActEvent:
		// Reasons carry durations that change on every call: one event per
		// situation and primary is enough.
		key := d.Situation.String() + "|" + d.Detected.String()
		e.mu.Lock()
		fresh := key != e.lastSit
		e.lastSit = key
		e.mu.Unlock()
		if fresh {
			e.event("", "failover_"+d.Situation.String(), d.Reason)
			for _, ev := range d.Events {
				e.event("", "failover_note", ev)
			}
		}
	case failover.ActExecute:
		e.mu.Lock()
		e.lastSit = ""
		e.mu.Unlock()
		kind := "failover_decided"
		if d.Situation == failover.AutoRejoin {
			kind = "auto_rejoin"
		}
		e.event(opServer(d.Plan), kind, d.Reason)
		res := e.execute(ctx, d)
		if !res.OK {
			e.log.Error("automatic operation failed", "cluster", e.o().Cluster, "err", res.Message)
		}
	default:
		e.mu.Lock()
		e.lastSit = ""
		e.mu.Unlock()
	}
	return d.RecheckAt
}

// Request runs an operator's request (failover, switchover, rejoin), or
// returns the plan for a dry run. One operation at a time.
func (e *Executor) Request(ctx context.Context, req failover.Request) (Result, error) {
	if e.shared != nil && !req.DryRun && !e.shared.Acting() {
		return e.forward(ctx, req)
	}
	if !e.opMu.TryLock() {
		return Result{Message: ErrBusy.Error()}, ErrBusy
	}
	defer e.opMu.Unlock()
	if req.Kind != failover.RequestRejoin {
		e.refreshFacts(ctx)
		if req.Kind == failover.RequestSwitchover {
			e.refreshRunning(ctx)
		}
	}
	in := e.input(&req)
	if req.Kind == failover.RequestRejoin {
		// Both positions from one moment: a replica under write load is
		// always "ahead" of an older sample of its primary.
		if w := in.Snapshot.WriterServer(); w != nil {
			e.freshen(ctx, &in, req.To, w.Name)
		}
	} else {
		// Every server as it is now: the monitor's last check may predate
		// an operation that just repointed it, and a plan made from it
		// would leave that replica on the old primary.
		var names []string
		for _, s := range in.Snapshot.Servers {
			names = append(names, s.Name)
		}
		e.freshen(ctx, &in, names...)
	}
	d := failover.Decide(in)
	if d.Situation == failover.RejoinDiverged && !req.DryRun {
		d.Reason += e.salvageAtRejoin(ctx, in, req.To)
	}
	res := Result{Decision: d, Text: d.String()}
	if d.Action != failover.ActExecute || req.DryRun {
		res.OK = d.Action == failover.ActExecute
		res.Message = d.Reason
		if d.Action != failover.ActExecute {
			return res, &RefusedError{Reason: d.Reason}
		}
		return res, nil
	}
	e.event("", "operation_requested", fmt.Sprintf("%s requested by an operator: %s", req.Kind, d.Reason))
	out := e.execute(ctx, d)
	out.Text = res.Text
	if !out.OK {
		return out, errors.New(out.Message)
	}
	return out, nil
}

// RefusedError is a request the engine refused, with its reason.
type RefusedError struct{ Reason string }

func (r *RefusedError) Error() string { return r.Reason }

// Ack acknowledges past operations: automatic failover may run again.
func (e *Executor) Ack() {
	if e.shared != nil && !e.shared.Acting() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := e.shared.Forward(ctx, coord.Forwarded{Kind: "ack"}); err != nil {
			e.log.Warn("coordination: could not forward the acknowledgement to the acting instance", "cluster", e.o().Cluster, "err", err)
		}
		return
	}
	e.mu.Lock()
	e.history = e.history.Ack()
	recs := append([]failover.Record(nil), e.history.Records...)
	e.mu.Unlock()
	if e.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := e.shared.SaveHistory(ctx, recs); err != nil {
			e.log.Warn("coordination: could not store the acknowledgement in etcd", "cluster", e.o().Cluster, "err", err)
		}
		cancel()
	}
	for _, r := range recs {
		_ = e.j.record(r)
	}
	e.event("", "ack", "an operator acknowledged past operations; automatic failover is armed again")
	e.Kick()
}

func (e *Executor) event(server, kind, msg string) {
	ev := Event{Time: e.now(), Cluster: e.o().Cluster, Server: server, Kind: kind, Message: msg}
	e.log.Info(msg, "cluster", e.o().Cluster, "server", server, "event", kind)
	_ = e.j.event(ev)
	e.onEv(ev)
}

// serverIndex is the named server's slot (routing.Owner.Slot), -1 for
// none.
func (e *Executor) serverIndex(name string) int { return e.routes.Slot(name) }

// Routing is the owner of the cluster's routing state: operators' states
// go through it too.
func (e *Executor) Routing() *routing.Owner { return e.routes }

func routingServers(servers []Server) []routing.Server {
	out := make([]routing.Server, len(servers))
	for i, s := range servers {
		out[i] = routing.Server{Name: s.Name, Removed: s.Removed}
	}
	return out
}

func (e *Executor) addr(name string) string {
	if i := e.serverIndex(name); i >= 0 {
		return e.o().Servers[i].Addr
	}
	return ""
}

const fencePrefix = "fenced"

// keepFencedReadOnly sets read_only=1 on a fenced server that answers
// with read_only=OFF: an old primary that restarts with its own config
// must not take writes from anyone, not only not from Vigil.
func (e *Executor) keepFencedReadOnly(ctx context.Context) {
	snap := e.mon.Snapshot()
	if snap == nil || snap.Type != "replication" {
		return
	}
	var in *failover.Input
	for _, h := range e.mon.Observations() {
		if h.Last == nil || !h.Last.OK {
			continue
		}
		if i := snap.Index(h.Name); i < 0 || !snap.Servers[i].Fenced {
			continue
		}
		if in == nil {
			x := e.input(nil)
			in = &x
		}
		// The engine's steps: first the connections Vigil left there, then
		// semi-sync waits and read_only (a statement in flight on them from
		// an account with SUPER or READ_ONLY ADMIN would run despite it).
		e.mu.Lock()
		setAt := e.roSetAt[h.Name]
		e.mu.Unlock()
		pl := &failover.Plan{Kind: failover.KindRejoin, Cluster: e.o().Cluster, Flavor: flavor.OfObservation(h.Last)}
		setRO := false
		for _, st := range failover.GuardFenced(*in, h.Name) {
			if st.Kind != failover.KillPreFence && !h.Last.Time.After(setAt) {
				// Sampled before Vigil set it: not writable again, only not
				// seen since (one SET and one event per time it comes back).
				continue
			}
			if err := e.step(ctx, pl, st, &runState{}); err != nil {
				e.log.Warn("could not guard a fenced server", "server", h.Name, "step", st.Kind.String(), "err", err)
				setRO = false
				break
			}
			setRO = setRO || st.Kind == failover.SetReadOnly
		}
		if !setRO {
			continue
		}
		e.mu.Lock()
		e.roSetAt[h.Name] = e.now()
		e.mu.Unlock()
		e.event(h.Name, "fenced_read_only", h.Name+" is fenced and came back writable: Vigil set read_only=1 on it; `vigil ctl rejoin "+h.Name+"` makes it a replica")
	}
}

// Running describes the operation in progress ("" when none).
func (e *Executor) Running() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running == nil {
		return ""
	}
	r := e.running
	return fmt.Sprintf("%s %s → %s since %s", r.Kind, orNone(r.OldPrimary), orNone(r.NewPrimary), r.Started.Format(time.RFC3339))
}

// confirmAutoRejoin decides an automatic rejoin again on positions read
// from both servers now, as a requested rejoin does: the monitor samples
// them one server at a time. The second decision is the one acted on.
func (e *Executor) confirmAutoRejoin(ctx context.Context, d failover.Decision) failover.Decision {
	in := e.input(nil)
	if w := in.Snapshot.WriterServer(); w != nil && d.Plan != nil {
		e.freshen(ctx, &in, d.Plan.OldPrimary, w.Name)
	}
	return failover.Decide(in)
}

// noteFenced shows why automatic rejoin leaves a returned old primary
// fenced: as its fence reason (the API's and status' reason for its
// state) and in one event per return and per change of reason, not one
// per decision.
func (e *Executor) noteFenced(d failover.Decision) {
	if d.Situation == failover.OperationRunning {
		return
	}
	e.mu.Lock()
	prev := e.fenceNotes
	e.fenceNotes = d.FenceNotes
	e.mu.Unlock()
	for name, note := range d.FenceNotes {
		if prev[name] == note {
			continue
		}
		if err := e.routes.Refence(name, fencePrefix+" "+note); err != nil {
			e.log.Warn("could not update a fence reason", "cluster", e.o().Cluster, "server", name, "err", err)
		}
		e.event(name, "auto_rejoin_skipped", name+" stays fenced "+note)
	}
}

// boundOrOff renders a detection bound, "off" when negative.
func boundOrOff(d time.Duration) string {
	if d < 0 {
		return "off"
	}
	return d.String()
}
