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
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Monitor watches one cluster. Its methods are safe for concurrent use.
type Monitor struct {
	holder *topology.Holder
	log    *slog.Logger
	probes []*probe

	mu      sync.Mutex
	opts    Options
	st      State
	latest  []*topology.Observation
	last    *topology.Snapshot // last published
	events  ring
	subs    map[*subscriber]struct{}
	running bool
	now     func() time.Time
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
		m.probes = append(m.probes, newProbe(m, i, s.Name))
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
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
	}()

	m.log.Info("monitor starting", "servers", len(m.probes), "interval", m.options().Interval)
	var wg sync.WaitGroup
	for _, p := range m.probes {
		wg.Go(func() { p.run(ctx) })
	}
	wg.Wait()
	m.log.Info("monitor stopped")
	return nil
}

func (m *Monitor) options() Options {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opts
}

// observe takes one probe's observation: evaluate, publish, record events.
func (m *Monitor) observe(i int, o *topology.Observation) {
	m.mu.Lock()
	m.latest[i] = o
	var evs []Event
	m.st, evs = Evaluate(m.st, m.latest, &m.opts, m.now())
	m.publishLocked()
	m.recordLocked(evs)
	m.mu.Unlock()
	m.logEvents(evs)
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
// in server order, for the failover engine.
func (m *Monitor) Observations() []topology.Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]topology.Health, len(m.st.Servers))
	for i := range m.st.Servers {
		out[i] = m.st.Health(i)
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
		if s.Name == name {
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
	select {
	case m.probes[i].kick <- struct{}{}:
	default:
	}
	return nil
}

// CheckNow asks for a check of server i (its index) at once, for
// passive evidence that it failed (the data path lost a connection to
// it). It never blocks; the probe spaces such checks (minCheckSpacing).
func (m *Monitor) CheckNow(i int) {
	if i < 0 || i >= len(m.probes) {
		return
	}
	select {
	case m.probes[i].kick <- struct{}{}:
	default:
	}
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

// SetOptions swaps the options of a running monitor (config reload). The
// server list must name the same servers in the same order: the snapshot
// order is fixed. New thresholds apply from the next observation, a new
// address or new credentials from the next connection.
func (m *Monitor) SetOptions(opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts = opts.WithDefaults()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !sameServers(m.opts.Servers, opts.Servers) {
		return errors.New("the server list changed: a restart is needed (snapshots keep their server order)")
	}
	if opts.Type != m.opts.Type {
		return fmt.Errorf("the cluster type changed from %s to %s: a restart is needed", m.opts.Type, opts.Type)
	}
	credentials := opts.User != m.opts.User || opts.Password != m.opts.Password
	m.opts = opts
	if len(m.events.buf) != opts.EventBuffer {
		m.events.resize(opts.EventBuffer)
	}
	if credentials {
		for _, p := range m.probes {
			p.reconnect.Store(true)
		}
	}
	m.publishLocked()
	return nil
}
