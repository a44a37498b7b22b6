// Package topology holds the value types every plane shares: a server's
// observed state and the immutable, versioned Snapshot of a cluster that
// the monitor publishes, the router reads lock-free and the failover engine
// consumes. Nothing here does I/O.
package topology

import (
	"fmt"
	"sync/atomic"
)

// State is a server's routing state as users see it.
type State uint8

const (
	// Online servers take traffic.
	Online State = iota
	// Shunned servers fail checks or lag; they come back by themselves.
	Shunned
	// OfflineSoft servers drain: no new sessions or statements, open
	// transactions finish.
	OfflineSoft
	// OfflineHard servers are down or fenced: connections are closed.
	OfflineHard
)

func (s State) String() string {
	switch s {
	case Online:
		return "ONLINE"
	case Shunned:
		return "SHUNNED"
	case OfflineSoft:
		return "OFFLINE_SOFT"
	case OfflineHard:
		return "OFFLINE_HARD"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Role is a server's place in its cluster.
type Role uint8

const (
	RoleUnknown Role = iota
	RolePrimary
	RoleReplica
	RoleGalera
)

func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleReplica:
		return "replica"
	case RoleGalera:
		return "galera"
	}
	return "unknown"
}

// Server is one server as last observed.
type Server struct {
	Name     string
	Addr     string
	Weight   int
	Role     Role
	State    State
	Readable bool
	Writable bool
	// LagSeconds is the replication lag, -1 when unknown.
	LagSeconds float64
	// GTID is the server's current GTID position as text.
	GTID string
	// MaxPacket is Observation.MaxPacket of the last good check: a
	// command packet this large or larger is refused by the server (1153),
	// so Vigil answers it without sending it. 0 when unknown.
	MaxPacket int
	// Reason says why the server is in its state, for messages.
	Reason string
	// Overloaded: the server is alive but refuses new connections (or the
	// monitor's login); it keeps its state and role.
	Overloaded bool
	// Conflict: the server reports read_only=OFF in a replication cluster
	// but is not the writer; it never gets writes for that.
	Conflict bool
	// Fenced: the failover executor took it out of routing (an old
	// primary, a quarantined replica) until an operator rejoins it.
	Fenced bool
	// Removed: the server left the configuration. Its slot stays (State
	// OfflineHard) so that every other server keeps its index; nothing
	// routes to it, and Live, the API and metrics leave it out.
	Removed bool
	// Standby: replicating and monitored but never routed (State is
	// OfflineSoft); promoted only when an operator names it.
	Standby bool
}

// MaxServers bounds the server slots of one cluster for the life of a
// Vigil process: a server added by a reload takes the next slot, a
// removed one keeps its slot (a tombstone) so that the indices every
// plane shares never move. A restart starts from the configured list.
const MaxServers = 256

// Snapshot is one immutable view of a cluster. Never modify a published
// snapshot: build a new one and Publish it.
type Snapshot struct {
	Version uint64
	Cluster string
	Type    string
	// Writer is the index in Servers of the routed writer, -1 for none.
	Writer int
	// Term grows every time the writer changes; writes are never sent under
	// an old term.
	Term uint64
	// WriterReason explains why there is no writer, when Writer is -1.
	WriterReason string
	Servers      []Server
	// MultiWriter: every Online and Writable server may take writes (Galera
	// with multi-writer on); Writer is still the preferred one.
	MultiWriter bool
}

// WriterServer returns the writer, or nil.
func (s *Snapshot) WriterServer() *Server {
	if s == nil || s.Writer < 0 || s.Writer >= len(s.Servers) {
		return nil
	}
	return &s.Servers[s.Writer]
}

// Index returns the index of the named server, or -1. A removed server
// is never found (its name may belong to a server added since).
func (s *Snapshot) Index(name string) int {
	for i := range s.Servers {
		if s.Servers[i].Name == name && !s.Servers[i].Removed {
			return i
		}
	}
	return -1
}

// Live is the snapshot without its removed servers (s itself when it has
// none), Writer renumbered: the view of the failover engine and the API,
// which name servers and never index the data path's slots.
func (s *Snapshot) Live() *Snapshot {
	if s == nil {
		return nil
	}
	removed := 0
	for i := range s.Servers {
		if s.Servers[i].Removed {
			removed++
		}
	}
	if removed == 0 {
		return s
	}
	c := *s
	c.Servers = make([]Server, 0, len(s.Servers)-removed)
	c.Writer = -1
	for i := range s.Servers {
		if s.Servers[i].Removed {
			continue
		}
		if i == s.Writer {
			c.Writer = len(c.Servers)
		}
		c.Servers = append(c.Servers, s.Servers[i])
	}
	return &c
}

// Holder publishes snapshots; readers Load without locks.
type Holder struct{ p atomic.Pointer[Snapshot] }

// Load returns the current snapshot (nil before the first Publish).
func (h *Holder) Load() *Snapshot { return h.p.Load() }

// Publish makes s current, numbering it after the previous one.
func (h *Holder) Publish(s *Snapshot) {
	for {
		old := h.p.Load()
		if old != nil {
			s.Version = old.Version + 1
		} else if s.Version == 0 {
			s.Version = 1
		}
		if h.p.CompareAndSwap(old, s) {
			return
		}
	}
}
