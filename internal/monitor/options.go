package monitor

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Cluster types, as in the configuration.
const (
	TypeReplication = "replication"
	TypeGalera      = "galera"
	TypeReadOnly    = "read-only"
)

// Defaults for the zero values of Options.
const (
	DefaultInterval          = 500 * time.Millisecond
	DefaultTimeout           = time.Second
	DefaultFailAfter         = 2
	DefaultRecoverAfter      = 5
	DefaultMaxReplicationLag = 30 * time.Second
	DefaultConnectCheckEvery = 4
	DefaultEventBuffer       = 1000
	DefaultLoneWriterGrace   = 5 * time.Second
)

// Options configure the monitor of one cluster. The zero value of every
// field but Servers has a useful default (see WithDefaults).
type Options struct {
	// Cluster names the cluster in events and snapshots.
	Cluster string
	// Type is replication (default), galera or read-only.
	Type string
	// Servers in configuration order; the order is the index of every
	// server in the snapshots and never changes.
	Servers []Server

	// User and Password log the monitor in.
	User     string
	Password string

	// Interval between the starts of two checks of one server.
	Interval time.Duration
	// Timeout bounds one whole check: connecting when needed, every query.
	Timeout time.Duration
	// FailAfter consecutive failed checks take an Online server out of
	// routing.
	FailAfter int
	// RecoverAfter consecutive good checks bring it back.
	RecoverAfter int
	// MaxReplicationLag: a replica lagging more is not readable. Negative
	// turns the limit off.
	MaxReplicationLag time.Duration

	// ConnectCheckEvery: every Nth check also opens (and closes) a fresh
	// connection, to see that the server still accepts new ones; the
	// persistent monitor connection alone would not notice a full
	// max_connections or a listener that stopped accepting. Negative turns
	// the test off; reconnecting after a failure is always a fresh
	// connection.
	ConnectCheckEvery int

	// Heartbeat is an optional pt-heartbeat style table for sub-second lag.
	Heartbeat Heartbeat

	// GaleraMultiWriter marks every healthy Galera node writable in the
	// snapshot (Snapshot.MultiWriter); Writer is still one preferred node.
	GaleraMultiWriter bool
	// DesyncedReadable keeps a Galera node that is Donor/Desynced readable
	// (never writable) unless wsrep_sst_donor_rejects_queries is on.
	DesyncedReadable bool

	// EventBuffer bounds the events kept for Events.
	EventBuffer int

	// Activity is passive evidence from the data path about server i (its
	// index in Servers): completed counts the client statements it
	// completed on the proxy's own pooled connections (the whole reply
	// read), inFlight those waiting for its reply now. The probe reads it
	// when a check starts and when it ends: a check that timed out while
	// completed moved was slow, not a sign of a dead server; one that timed
	// out while clients waited and nothing completed is confirmed. nil: no
	// passive evidence.
	Activity func(server int) (completed uint64, inFlight int64)
	// LoneWriterGrace bounds how long the routed writer stays routed while
	// its checks time out, when no other server could take the writes (no
	// failover candidate) — measured from its last sign of life: a check it
	// answered or a client statement it completed. Negative: no such
	// grace, the writer leaves routing like any server.
	LoneWriterGrace time.Duration
}

// Server is one server of the cluster.
type Server struct {
	Name string
	// Addr is host:port.
	Addr string
	// Role is the configured role of a replication cluster: primary,
	// replica or empty. It only breaks ties when the monitor first finds
	// the writer; what the servers report decides.
	Role string
	// Weight orders Galera writer candidates (highest first) and is copied
	// into snapshots for the read balancer (0: no reads).
	Weight int
	// Removed: the server left the configuration; its slot stays so that
	// the indices of the others never move (topology.MaxServers).
	Removed bool
	// Standby: checked like any server but never routed (OFFLINE_SOFT in
	// snapshots) and never chosen as a Galera writer; ignored while the
	// server is the writer.
	Standby bool
}

// Heartbeat configures the heartbeat table: columns ts (varchar(26),
// "YYYY-MM-DDTHH:MM:SS.ffffff" in UTC, as `pt-heartbeat --utc` writes it)
// and server_id (int unsigned, primary key).
type Heartbeat struct {
	// Table is schema.table; empty turns heartbeats off.
	Table string
	// Write: the monitor updates the writer's row every check, so no
	// pt-heartbeat process is needed. The monitor user needs INSERT and
	// UPDATE on the table.
	Write bool
}

var tableName = regexp.MustCompile(`^[A-Za-z0-9_$]+(\.[A-Za-z0-9_$]+)?$`)

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.Type == "" {
		o.Type = TypeReplication
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.FailAfter <= 0 {
		o.FailAfter = DefaultFailAfter
	}
	if o.RecoverAfter <= 0 {
		o.RecoverAfter = DefaultRecoverAfter
	}
	if o.MaxReplicationLag == 0 {
		o.MaxReplicationLag = DefaultMaxReplicationLag
	}
	if o.ConnectCheckEvery == 0 {
		o.ConnectCheckEvery = DefaultConnectCheckEvery
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = DefaultEventBuffer
	}
	if o.LoneWriterGrace == 0 {
		o.LoneWriterGrace = DefaultLoneWriterGrace
	}
	o.Servers = append([]Server(nil), o.Servers...)
	return o
}

// Validate returns every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	switch o.Type {
	case "", TypeReplication, TypeGalera, TypeReadOnly:
	default:
		errs = append(errs, fmt.Errorf("type must be replication, galera or read-only, not %q", o.Type))
	}
	if len(o.Servers) > topology.MaxServers {
		errs = append(errs, fmt.Errorf("%d server slots: at most %d per cluster for the life of a Vigil process (removed servers keep theirs until a restart)", len(o.Servers), topology.MaxServers))
	}
	seen := map[string]bool{}
	live := 0
	for i, s := range o.Servers {
		if s.Removed {
			continue
		}
		live++
		if s.Name == "" {
			errs = append(errs, fmt.Errorf("servers[%d]: empty name", i))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("servers[%d]: %q is listed twice", i, s.Name))
		}
		seen[s.Name] = true
		if s.Addr == "" {
			errs = append(errs, fmt.Errorf("servers[%d]: empty address", i))
		}
	}
	if live == 0 {
		errs = append(errs, errors.New("no servers"))
	}
	if o.Heartbeat.Table != "" && !tableName.MatchString(o.Heartbeat.Table) {
		errs = append(errs, fmt.Errorf("heartbeat table %q is not schema.table", o.Heartbeat.Table))
	}
	return errors.Join(errs...)
}

// membership compares the server slots of a running monitor (old) with
// new ones: new keeps every slot of old in place, with the same name (a
// slot never comes back once removed), and may remove some and append
// others. It returns the slots new removes and the slots it adds.
func membership(old, new []Server) (removed, added []int, err error) {
	if len(new) < len(old) {
		return nil, nil, fmt.Errorf("%d server slots where the running monitor has %d: slots are never dropped", len(new), len(old))
	}
	for i := range old {
		switch {
		case new[i].Name != old[i].Name:
			return nil, nil, fmt.Errorf("server slot %d is %s, not %s: slots keep their server", i, new[i].Name, old[i].Name)
		case old[i].Removed && !new[i].Removed:
			return nil, nil, fmt.Errorf("server slot %d (%s) was removed: a server that comes back takes a new slot", i, old[i].Name)
		case new[i].Removed && !old[i].Removed:
			removed = append(removed, i)
		}
	}
	for i := len(old); i < len(new); i++ {
		if !new[i].Removed {
			added = append(added, i)
		}
	}
	return removed, added, nil
}
