// Package routing owns one cluster's routing state inside a Vigil
// process: which server is the writer and under which term, which servers
// are fenced and why. Every change goes through an Owner, which applies it
// to the two places that act on it — the data path's router (frontend:
// per-slot fences its pools and sessions read lock-free) and the monitor
// (its evaluator turns a fence into OFFLINE_HARD and a writer into the
// routed writer of the next snapshot) — in one order, under one lock, and
// numbers it with a version callers can wait on. Those two are derived
// copies: nothing else writes them.
//
// The etcd writer record (internal/coord) is not a third copy: it is the
// fencing token between Vigil instances. The instance that acts publishes
// it; every instance applies it through its Owner (executor.ApplyShared).
//
// Servers are keyed by slot: slot i is server i of every snapshot, pool
// and monitor probe for the life of the process (a removed server keeps
// its slot as a tombstone). Slot is the one name→slot lookup of the
// control plane.
package routing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Router is the data path's side (frontend.Server).
type Router interface {
	// Fence cuts server idx and returns how many client statements or
	// transactions it cut; Unfence lets traffic reach it again.
	Fence(idx int, reason string) int
	Unfence(idx int)
}

// Monitor is the monitor's side (monitor.Monitor).
type Monitor interface {
	Snapshot() *topology.Snapshot
	// Changed is closed when the next snapshot is published.
	Changed() <-chan struct{}
	SetWriter(server, reason string) error
	Fence(server, reason string) error
	Unfence(server string) error
	SetTerm(term uint64) error
}

// adminMonitor is the monitor's operator override (monitor.Monitor has
// it; the executor's test monitors do not).
type adminMonitor interface {
	SetAdminState(server string, state topology.State, reason string) error
}

// Server is a slot: its server's name, or a tombstone.
type Server struct {
	Name    string
	Removed bool
}

// State is the routing state as the Owner last changed it.
type State struct {
	// Version grows with every change made through the Owner.
	Version uint64
	// Writer is the server last made the writer ("" before any), Term the
	// writer term last set from the coordination record (0: the monitor
	// counts terms itself, one Vigil alone).
	Writer string
	Term   uint64
	// Fenced: the reason of each server fenced through the Owner, by slot.
	Fenced map[int]string
}

// Owner owns one cluster's routing state. Its methods are safe for
// concurrent use; changes are applied one at a time.
type Owner struct {
	mon    Monitor
	router Router // nil: no data path (tests)

	mu      sync.Mutex
	servers []Server
	st      State
	changed chan struct{}
}

// New makes the owner of a cluster whose slots are servers.
func New(servers []Server, mon Monitor, router Router) *Owner {
	o := &Owner{mon: mon, router: router, changed: make(chan struct{})}
	o.st.Fenced = map[int]string{}
	o.SetServers(servers)
	return o
}

// SetServers replaces the slot list (a reload adds slots, tombstones
// removed ones; slots never move).
func (o *Owner) SetServers(servers []Server) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.servers = append([]Server(nil), servers...)
	for i := range o.st.Fenced {
		if i >= len(o.servers) || o.servers[i].Removed {
			delete(o.st.Fenced, i)
		}
	}
}

// Slot is the slot of the named server, -1 when the cluster has no such
// live server (a removed server's name may come back in a new slot).
func (o *Owner) Slot(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.slotLocked(name)
}

func (o *Owner) slotLocked(name string) int {
	for i, s := range o.servers {
		if s.Name == name && !s.Removed {
			return i
		}
	}
	return -1
}

// Name is the server of slot i ("" for none or a tombstone).
func (o *Owner) Name(i int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i < 0 || i >= len(o.servers) || o.servers[i].Removed {
		return ""
	}
	return o.servers[i].Name
}

// Fence takes server out of routing: the router cuts it at once (cut is
// how many client statements or transactions lost it; routerReason is
// what they are told), then the monitor shows it OFFLINE_HARD with
// reason until Unfence, whatever it reports.
func (o *Owner) Fence(server, routerReason, reason string) (cut int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fenceLocked(server, routerReason, reason)
}

func (o *Owner) fenceLocked(server, routerReason, reason string) (cut int, err error) {
	if i := o.slotLocked(server); i >= 0 {
		if o.router != nil {
			cut = o.router.Fence(i, routerReason)
		}
		o.st.Fenced[i] = reason
		o.bumpLocked()
	}
	return cut, o.mon.Fence(server, reason)
}

// Refence gives a fenced server a new reason (the monitor's; the router
// already refuses it).
func (o *Owner) Refence(server, reason string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i := o.slotLocked(server); i >= 0 {
		o.st.Fenced[i] = reason
		o.bumpLocked()
	}
	return o.mon.Fence(server, reason)
}

// Unfence lets server be routed again: the router takes traffic to it,
// the monitor judges it by its checks again (it does not become the
// writer).
func (o *Owner) Unfence(server string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.unfenceLocked(server)
}

func (o *Owner) unfenceLocked(server string) error {
	o.unfenceRouterLocked(server)
	return o.mon.Unfence(server)
}

// ApplyFenced makes the fenced servers those of a writer record another
// instance published: each of names not yet fenced at both the router
// and the monitor is fenced (onFence is told), then each server the
// monitor shows fenced that names leaves out is unfenced. A name this
// cluster does not have is skipped. onFence runs under the owner's lock:
// it must not call the owner or block.
func (o *Owner) ApplyFenced(names []string, routerReason, reason string, onFence func(server string)) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	snap := o.mon.Snapshot()
	if snap == nil {
		snap = &topology.Snapshot{}
	}
	for _, name := range names {
		idx := o.slotLocked(name)
		if idx < 0 {
			continue
		}
		if i := snap.Index(name); i >= 0 && snap.Servers[i].Fenced && o.routerFencedLocked(idx) {
			continue
		}
		_, err := o.fenceLocked(name, routerReason, reason)
		onFence(name)
		if err != nil {
			return err
		}
	}
	for _, s := range snap.Servers {
		if !s.Removed && s.Fenced && !slices.Contains(names, s.Name) {
			if err := o.unfenceLocked(s.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *Owner) unfenceRouterLocked(server string) {
	if i := o.slotLocked(server); i >= 0 {
		if o.router != nil {
			o.router.Unfence(i)
		}
		delete(o.st.Fenced, i)
		o.bumpLocked()
	}
}

// SetWriter routes writes to server: the router takes traffic to it again
// and the monitor makes it the writer (routed once a check sees it
// writable: WaitWriter).
func (o *Owner) SetWriter(server, reason string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unfenceRouterLocked(server)
	return o.designateLocked(server, reason)
}

// Designate tells the monitor that server is to be the writer, without
// unfencing it at the router: a plan does so before it makes the server
// writable, and an instance that applies a writer record does so for the
// record's writer.
func (o *Owner) Designate(server, reason string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.designateLocked(server, reason)
}

func (o *Owner) designateLocked(server, reason string) error {
	if err := o.mon.SetWriter(server, reason); err != nil {
		return err
	}
	o.st.Writer = server
	o.bumpLocked()
	return nil
}

// SetTerm makes term the cluster's writer term: the coordination
// record's, the same on every instance.
func (o *Owner) SetTerm(term uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.mon.SetTerm(term); err != nil {
		return err
	}
	if o.st.Term != term {
		o.st.Term = term
		o.bumpLocked()
	}
	return nil
}

// SetAdminState applies an operator's state: the monitor's override, and
// for OFFLINE_HARD a router fence at once (lifted by any other state).
func (o *Owner) SetAdminState(server string, state topology.State, reason string) error {
	am, ok := o.mon.(adminMonitor)
	if !ok {
		return errors.New("the monitor takes no operator states")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := am.SetAdminState(server, state, reason); err != nil {
		return err
	}
	i := o.slotLocked(server)
	if i < 0 || o.router == nil {
		return nil
	}
	if state == topology.OfflineHard {
		const why = "set OFFLINE_HARD by an operator"
		o.router.Fence(i, why)
		o.st.Fenced[i] = why
		o.bumpLocked()
	} else if o.routerFencedLocked(i) {
		o.router.Unfence(i)
		delete(o.st.Fenced, i)
		o.bumpLocked()
	}
	return nil
}

// routerFencedLocked: the router refuses slot i (false when it cannot
// tell).
func (o *Owner) routerFencedLocked(i int) bool {
	f, ok := o.router.(interface{ Fenced(int) bool })
	return ok && f.Fenced(i)
}

func (o *Owner) bumpLocked() {
	o.st.Version++
	close(o.changed)
	o.changed = make(chan struct{})
}

// State returns a copy of the routing state.
func (o *Owner) State() State {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.st
	st.Fenced = make(map[int]string, len(o.st.Fenced))
	for i, r := range o.st.Fenced {
		st.Fenced[i] = r
	}
	return st
}

// Changed returns a channel closed by the next change made through the
// Owner.
func (o *Owner) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// Wait returns once the state's version is past v, or ctx ends.
func (o *Owner) Wait(ctx context.Context, v uint64) error {
	for {
		o.mu.Lock()
		cur, ch := o.st.Version, o.changed
		o.mu.Unlock()
		if cur > v {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// WaitWriter returns once the monitor's snapshot routes writes to server
// (it is the writer, Online and writable), or fails after timeout. It
// waits on the monitor's snapshots and the Owner's changes, not a timer.
func (o *Owner) WaitWriter(ctx context.Context, server string, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	expired := false
	for {
		published, changed := o.mon.Changed(), o.Changed()
		if snap := o.mon.Snapshot(); snap != nil {
			if w := snap.WriterServer(); w != nil && w.Name == server && w.State == topology.Online && w.Writable {
				return nil
			}
		}
		if expired {
			return fmt.Errorf("the monitor did not route %s as the writer within %s", server, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-published:
		case <-changed:
		case <-t.C:
			expired = true
		}
	}
}
