package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// keepFinished is how many finished clones List keeps.
const keepFinished = 20

// Manager runs clones: at most one per cluster and one per donor agent at
// a time. It owns their goroutines; Wait returns when they have ended
// (their context is the daemon's).
type Manager struct {
	mu       sync.Mutex
	nextID   int64
	running  map[int64]*op
	finished []*op
	wg       sync.WaitGroup
}

type op struct {
	t    *tracker
	plan Plan
}

// NewManager returns an idle manager.
func NewManager() *Manager { return &Manager{running: map[int64]*op{}} }

// Busy reports what runs now: the clusters with a clone, and per cluster
// the servers taking part (donor or target).
func (m *Manager) Busy(cluster string) (running bool, servers map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	servers = map[string]bool{}
	for _, o := range m.running {
		if o.plan.Cluster == cluster {
			running = true
			servers[o.plan.Donor], servers[o.plan.Target] = true, true
		}
	}
	return running, servers
}

// Start runs p in the background under ctx, or refuses (a *Refusal) when
// the cluster or the donor's agent already has a clone running.
func (m *Manager) Start(ctx context.Context, p Plan, d Deps) (Progress, error) {
	d.defaults()
	m.mu.Lock()
	if err := m.checkLocked(p.Cluster, p.DonorAgent); err != nil {
		m.mu.Unlock()
		return Progress{}, err
	}
	m.nextID++
	t := &tracker{now: d.Now, onBytes: d.OnBytes}
	t.p = Progress{ID: m.nextID, Kind: p.kind(), Replaces: p.Replaces, Cluster: p.Cluster, Target: p.Target, Donor: p.Donor, DonorReason: p.DonorReason,
		Phase: PhaseChecking, Limit: p.Rate, Started: d.Now(), Running: true, ETASeconds: -1}
	o := &op{t: t, plan: p}
	d.switchDonor = func(name, agentAddr string) {
		m.mu.Lock()
		o.plan.Donor, o.plan.DonorAgent = name, agentAddr
		m.mu.Unlock()
	}
	m.running[t.p.ID] = o
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		_ = run(ctx, t, p, d)
		m.mu.Lock()
		delete(m.running, o.t.p.ID)
		m.finished = append(m.finished, o)
		if len(m.finished) > keepFinished {
			m.finished = m.finished[len(m.finished)-keepFinished:]
		}
		m.mu.Unlock()
	}()
	return t.view(), nil
}

// Check refuses (a *Refusal) when cluster, or the donor's agent when
// donorAgent is set, already has a clone running.
func (m *Manager) Check(cluster, donorAgent string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkLocked(cluster, donorAgent)
}

func (m *Manager) checkLocked(cluster, donorAgent string) error {
	for _, o := range m.running {
		switch {
		case o.plan.Cluster == cluster:
			return &Refusal{Reason: fmt.Sprintf("cluster %s already runs a %s (%s from %s, %s); one at a time: wait for it (vigil ctl clones)",
				cluster, o.plan.kind(), o.plan.Target, o.plan.Donor, o.t.view().Phase)}
		case donorAgent != "" && o.plan.DonorAgent == donorAgent:
			return &Refusal{Reason: fmt.Sprintf("the donor's agent %s already serves a %s (%s of cluster %s); wait for it", donorAgent, o.plan.kind(), o.plan.Target, o.plan.Cluster)}
		}
	}
	return nil
}

// List is the running clones and the last finished ones (newest last).
func (m *Manager) List() (running, finished []Progress) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.running {
		running = append(running, o.t.view())
	}
	for _, o := range m.finished {
		finished = append(finished, o.t.view())
	}
	slices.SortFunc(running, func(a, b Progress) int { return cmp.Compare(a.ID, b.ID) })
	return running, finished
}

// Get is one clone by id.
func (m *Manager) Get(id int64) (Progress, bool) {
	r, f := m.List()
	for _, p := range append(r, f...) {
		if p.ID == id {
			return p, true
		}
	}
	return Progress{}, false
}

// Wait waits for every clone's goroutine (after their context ended).
func (m *Manager) Wait() { m.wg.Wait() }

// Running counts the clones running now (the metric).
func (m *Manager) Running(cluster string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.running {
		if o.plan.Cluster == cluster {
			n++
		}
	}
	return n
}
