// Package monitor owns the health checks of one cluster: a probe goroutine
// per server with a persistent monitor connection, the pure evaluator that
// turns observations into routing states (the readable/writable table,
// hysteresis, the conflict rule, Galera writer selection, overload), and
// the publication of immutable topology snapshots that the router reads
// lock-free. It also keeps the event log and takes the commands of
// operators (drain, offline) and of the failover executor (set writer,
// fence). See docs/monitoring.md.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Monitor watches one cluster. Its methods are safe for concurrent use.
type Monitor struct {
	holder *topology.Holder
	log    *slog.Logger

	mu sync.Mutex
	// probes[i] checks server i; nil for a removed server. Guarded by mu:
	// SetOptions adds and removes servers while the monitor runs.
	probes []*probe
	// runCtx is Run's context while it runs; probes started after Run
	// (servers added) run under it, counted by probeWG.
	runCtx  context.Context
	probeWG sync.WaitGroup
	opts    Options
	st      State
	latest  []*topology.Observation
	last    *topology.Snapshot // last published
	events  ring
	subs    map[*subscriber]struct{}
	running bool
	now     func() time.Time
	// onEvidence is told of every observation taken while the designated
	// writer's latest check failed (OnEvidence).
	onEvidence func()
	// changed is closed when the next snapshot is published (Changed).
	changed chan struct{}
	// fresh: per server index, what CheckFresh waits on (every
	// observation of the server is offered).
	fresh map[int][]chan *topology.Observation
}

type subscriber struct {
	ch      chan Event
	dropped int
}

// New makes a monitor for the cluster opts describes; Run starts it. The
// holder receives every snapshot; New publishes the first one (every server
// SHUNNED, "not checked yet", no writer) so readers never see nil.
func New(opts Options, holder *topology.Holder, log *slog.Logger) (*Monitor, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("monitor of cluster %q: %w", opts.Cluster, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts = opts.WithDefaults()
	m := &Monitor{
		holder: holder,
		log:    log.With("cluster", opts.Cluster),
		opts:   opts,
		st:     NewState(&opts),
		latest: make([]*topology.Observation, len(opts.Servers)),
		subs:   map[*subscriber]struct{}{},
		now:    time.Now,
	}
	m.events.resize(opts.EventBuffer)
	for i, s := range opts.Servers {
		var p *probe
		if !s.Removed {
			p = newProbe(m, i, s.Name)
		}
		m.probes = append(m.probes, p)
		m.st.Servers[i].Removed = s.Removed
	}
	m.publishLocked()
	return m, nil
}

// Run checks every server until ctx ends, then closes the monitor
// connections and returns once every probe goroutine has stopped. A
// Monitor runs once at a time.
func (m *Monitor) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return errors.New("monitor is already running")
	}
	m.running = true
	m.runCtx = ctx
	for _, p := range m.probes {
		m.startProbeLocked(p)
	}
	n := len(m.probes)
	m.mu.Unlock()
	m.log.Info("monitor starting", "servers", n, "interval", m.options().Interval)
	<-ctx.Done()
	m.mu.Lock()
	m.runCtx = nil
	m.mu.Unlock()
	m.probeWG.Wait()
	m.mu.Lock()
	m.running = false
	m.mu.Unlock()
	m.log.Info("monitor stopped")
	return nil
}

// startProbeLocked runs p under Run's context, until that ends or the
// server is removed (p.stop).
func (m *Monitor) startProbeLocked(p *probe) {
	if p == nil || m.runCtx == nil || m.runCtx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.runCtx)
	p.stop = cancel
	m.probeWG.Go(func() {
		defer cancel()
		p.run(ctx)
	})
}

func (m *Monitor) options() Options {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opts
}

// observe takes one probe's observation: evaluate, publish, record events.
func (m *Monitor) observe(i int, o *topology.Observation) {
	m.mu.Lock()
	if m.st.Servers[i].Removed {
		m.mu.Unlock()
		return // a check that ended after the server was removed
	}
	prev := m.latest[i]
	m.latest[i] = o
	for _, ch := range m.fresh[i] {
		select {
		case ch <- o:
		default:
		}
	}
	var evs []Event
	m.st, evs = Evaluate(m.st, m.latest, &m.opts, m.now())
	m.publishLocked()
	m.recordLocked(evs)
	// While the writer fails, every check is evidence for the failover
	// decision: the writer's failure asks for a check of every other
	// server (a replica's IO thread confirms or denies it), and each
	// check is handed on at once rather than at the next decision tick.
	// An overloaded writer (1040, 1045...) is alive: no evidence to seek.
	d := m.st.Designated
	writerFailing := d >= 0 && m.latest[d] != nil && !m.latest[d].OK && !m.latest[d].Overloaded
	var kick []*probe
	if writerFailing && i == d && (prev == nil || prev.OK || o.Refused != prev.Refused) {
		for j, p := range m.probes {
			if j != d && p != nil {
				kick = append(kick, p)
			}
		}
	}
	notify := m.onEvidence
	m.mu.Unlock()
	m.logEvents(evs)
	for _, p := range kick {
		p.kickNow()
	}
	if writerFailing && notify != nil {
		notify()
	}
}

// OnEvidence sets f to be called after every observation taken while the
// designated writer's latest check failed (not overloaded): the failover executor decides
// again on each piece of evidence (a refused check, a replica that lost
// its source) instead of at its next tick. f must not block.
func (m *Monitor) OnEvidence(f func()) {
	m.mu.Lock()
	m.onEvidence = f
	m.mu.Unlock()
}

// command runs cmd through the evaluator and publishes the result.
func (m *Monitor) command(cmd func(*State) error) error {
	m.mu.Lock()
	next, evs, err := Command(m.st, cmd, m.latest, &m.opts, m.now())
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.st = next
	m.publishLocked()
	m.recordLocked(evs)
	m.mu.Unlock()
	m.logEvents(evs)
	return nil
}

// publishLocked publishes a snapshot when it differs from the last one.
func (m *Monitor) publishLocked() {
	snap := m.st.Snapshot(&m.opts)
	if m.last != nil && sameSnapshot(m.last, snap) {
		return
	}
	m.holder.Publish(snap)
	m.last = snap
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
}

// Changed returns a channel closed when the next snapshot is published:
// take it before reading Snapshot, then wait on it for a newer one (the
// executor waits so for a writer to be routed, instead of polling).
func (m *Monitor) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
	return m.changed
}

func sameSnapshot(a, b *topology.Snapshot) bool {
	av, bv := *a, *b
	av.Version, bv.Version = 0, 0
	return reflect.DeepEqual(av, bv)
}

func (m *Monitor) recordLocked(evs []Event) {
	for _, e := range evs {
		m.events.add(e)
		for s := range m.subs {
			select {
			case s.ch <- e:
			default:
				s.dropped++
			}
		}
	}
}

func (m *Monitor) logEvents(evs []Event) {
	for _, e := range evs {
		m.log.Log(context.Background(), e.level(), e.String(), "event", string(e.Kind), "server", e.Server, "term", e.Term)
	}
}

// Snapshot returns the current snapshot (the one last published).
func (m *Monitor) Snapshot() *topology.Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Events returns the kept events, oldest first, newest last.
func (m *Monitor) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events.all()
}

// Subscribe returns a channel that receives every event from now on, and a
// function that ends the subscription and closes the channel. A subscriber
// that does not keep up loses events (they stay in Events) rather than
// slowing the monitor down.
func (m *Monitor) Subscribe(buffer int) (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, max(buffer, 1))}
	m.mu.Lock()
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.subs, s)
			m.mu.Unlock()
			close(s.ch)
		})
	}
}

// Observations returns every server's health with its latest observation,
// in server order, for the failover engine; removed servers are left out.
func (m *Monitor) Observations() []topology.Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]topology.Health, 0, len(m.st.Servers))
	for i := range m.st.Servers {
		if !m.st.Servers[i].Removed {
			out = append(out, m.st.Health(i))
		}
	}
	return out
}

// Checks returns every server's check counts, in server order (metrics).
func (m *Monitor) Checks() []CheckCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]CheckCounts, len(m.st.Servers))
	for i := range m.st.Servers {
		out[i] = m.st.Servers[i].Checks
	}
	return out
}

// State returns a copy of the evaluator's state (for diagnostics).
func (m *Monitor) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.clone()
}

func (m *Monitor) index(name string) (int, error) {
	for i, s := range m.opts.Servers {
		if s.Name == name && !s.Removed {
			return i, nil
		}
	}
	return -1, fmt.Errorf("cluster %s has no server %q", m.opts.Cluster, name)
}

// SetAdminState sets an operator's state: OfflineSoft drains a server,
// OfflineHard takes it out at once, Online removes the override (the
// server then shows what its checks say).
func (m *Monitor) SetAdminState(server string, state topology.State, reason string) error {
	m.mu.Lock()
	i, err := m.index(server)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "no reason given"
	}
	return m.command(setAdmin(i, state, reason))
}

// SetWriter makes server the writer (the failover executor calls it after
// promoting). In a replication cluster the server is routed as soon as it
// is Online and reports read_only=OFF; the monitor checks it at once. The
// term grows when the routed writer changes.
func (m *Monitor) SetWriter(server, reason string) error {
	m.mu.Lock()
	i, err := m.index(server)
	opts := m.opts
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if err := m.command(setWriterAt(i, &opts, reason, m.now())); err != nil {
		return err
	}
	// Not spaced like CheckNow: a plan calls SetWriter before it makes
	// the server writable and again to route writes to it, and waits for
	// a check that sees it writable; a check started just before
	// read_only=OFF must not delay the next by minCheckSpacing.
	m.mu.Lock()
	p := m.probes[i]
	m.mu.Unlock()
	if p != nil {
		p.checkUrgent()
	}
	return nil
}

// CheckNow asks for a check of server i (its index) at once, for
// passive evidence that it failed (the data path lost a connection to
// it). It never blocks; the probe spaces such checks (minCheckSpacing).
func (m *Monitor) CheckNow(i int) {
	m.mu.Lock()
	var p *probe
	if i >= 0 && i < len(m.probes) {
		p = m.probes[i]
	}
	m.mu.Unlock()
	if p != nil {
		p.kickNow()
	}
}

// CheckFresh checks the named servers at once, all together, and returns
// the observations of checks that started after the call: for decisions
// that compare servers' positions, which must come from one moment, not
// from checks seconds apart. A server whose check does not end before
// ctx does (or twice the check timeout), or that is not monitored, is
// left out; so is nothing else: a failed check is returned too.
func (m *Monitor) CheckFresh(ctx context.Context, servers ...string) map[string]*topology.Observation {
	start := time.Now() // the probes' clock: a check's Time is its start
	type wait struct {
		name string
		i    int
		ch   chan *topology.Observation
	}
	var waits []wait
	var kick []*probe
	m.mu.Lock()
	if m.fresh == nil {
		m.fresh = map[int][]chan *topology.Observation{}
	}
	for _, name := range servers {
		i, err := m.index(name)
		if err != nil || !m.running || m.probes[i] == nil {
			continue
		}
		ch := make(chan *topology.Observation, 1)
		m.fresh[i] = append(m.fresh[i], ch)
		waits = append(waits, wait{name, i, ch})
		kick = append(kick, m.probes[i])
	}
	bound := 2*m.opts.Timeout + time.Second
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		for _, w := range waits {
			m.fresh[w.i] = slices.DeleteFunc(m.fresh[w.i], func(c chan *topology.Observation) bool { return c == w.ch })
		}
		m.mu.Unlock()
	}()
	for _, p := range kick {
		p.checkUrgent()
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	out := make(map[string]*topology.Observation, len(waits))
	for _, w := range waits {
		for out[w.name] == nil {
			select {
			case <-ctx.Done():
				return out
			case o := <-w.ch:
				if !o.Time.Before(start) {
					out[w.name] = o
				}
			}
		}
	}
	return out
}

// Fence takes server out of routing (OFFLINE_HARD) until Unfence, whatever
// it reports. A fenced replication primary stops being the primary.
func (m *Monitor) Fence(server, reason string) error {
	m.mu.Lock()
	i, err := m.index(server)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	return m.command(fence(i, reason))
}

// SetTerm makes term the cluster's writer term: with several Vigil
// instances the term is the etcd writer record's, one for the cluster,
// and from the first call on the monitor no longer counts writer changes
// itself (events and snapshots carry the record's term).
func (m *Monitor) SetTerm(term uint64) error {
	m.mu.Lock()
	same := m.st.TermShared && m.st.Term == term
	m.mu.Unlock()
	if same {
		return nil
	}
	return m.command(setTerm(term))
}

// Unfence lets a fenced server be judged by its checks again. It does not
// make it the writer.
func (m *Monitor) Unfence(server string) error {
	m.mu.Lock()
	i, err := m.index(server)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	return m.command(unfence(i))
}

// SetOptions swaps the options of a running monitor (config reload).
// opts.Servers lists every server slot: those of the running monitor in
// place and with the same names, some perhaps now Removed, then any new
// servers. A new server joins OFFLINE_SOFT and is routed once its checks
// find it Online and caught up; a removed one is never checked again and
// its slot stays a tombstone. The writer (the designated primary) cannot
// be removed. New thresholds apply from the next observation, new
// credentials from the next connection.
func (m *Monitor) SetOptions(opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts = opts.WithDefaults()
	m.mu.Lock()
	defer m.mu.Unlock()
	removed, added, err := membership(m.opts.Servers, opts.Servers)
	if err != nil {
		return err
	}
	if opts.Type != m.opts.Type {
		return fmt.Errorf("the cluster type changed from %s to %s: a restart is needed", m.opts.Type, opts.Type)
	}
	for _, i := range removed {
		if i == m.st.Designated || i == m.st.Writer {
			return fmt.Errorf("%s is the writer: switch over to another server before removing it", m.opts.Servers[i].Name)
		}
	}
	credentials := opts.User != m.opts.User || opts.Password != m.opts.Password
	prev := m.st.clone()
	m.opts = opts
	for _, i := range removed {
		m.st.Servers[i].Removed = true
		m.latest[i] = nil
		if p := m.probes[i]; p != nil {
			if p.stop != nil {
				p.stop()
			}
			m.probes[i] = nil
		}
	}
	for _, i := range added {
		s := opts.Servers[i]
		m.st.Servers = append(m.st.Servers, ServerState{Name: s.Name, Computed: topology.Shunned, Reason: "not checked yet", Lag: -1, Joining: true, Checks: CheckCounts{NoTx: -1}})
		m.latest = append(m.latest, nil)
		p := newProbe(m, i, s.Name)
		m.probes = append(m.probes, p)
		m.startProbeLocked(p)
	}
	if len(m.events.buf) != opts.EventBuffer {
		m.events.resize(opts.EventBuffer)
	}
	if credentials {
		for _, p := range m.probes {
			if p != nil {
				p.reconnect.Store(true)
			}
		}
	}
	// Evaluate at once: membership, standby and weights show now, not at
	// the next check.
	var evs []Event
	m.st, evs = step(prev, m.st.clone(), m.latest, &m.opts, m.now())
	m.recordLocked(evs)
	m.publishLocked()
	m.logEvents(evs)
	return nil
}
