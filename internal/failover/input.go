package failover

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Defaults for the zero values of Options.
const (
	DefaultDetectAfter        = 2 * time.Second
	DefaultDetectAfterRefused = 100 * time.Millisecond
	DefaultDetectAfterSilent  = time.Second
	DefaultMinInterval        = time.Hour
	DefaultApplyTimeout       = 30 * time.Second
	DefaultHoldTimeout        = 10 * time.Second
	DefaultDrainTimeout       = 5 * time.Second
	DefaultMaxLagSeconds      = 10
	DefaultMaxRunningSeconds  = 60
)

// Options configure the engine for one cluster. Every zero value means the
// default; MinInterval < 0 turns the anti-flapping interval off,
// DetectAfterRefused < 0 the refused-and-confirmed bound,
// DetectAfterSilent < 0 the silent-and-confirmed bound.
type Options struct {
	// Auto allows automatic failover; manual failover and switchover work
	// either way.
	Auto bool
	// DetectAfter is how long checks of the primary must fail (connection
	// refused or timed out) before it may be declared dead.
	DetectAfter time.Duration
	// DetectAfterRefused is the shorter bound for certain evidence of a
	// dead process: the primary's latest check was refused (nothing
	// listens on a host that answers) and every replica of it, checked
	// since its failures began and all reachable, has an IO thread that
	// lost it (not Yes). A paused or cut-off primary never refuses, and a
	// replica still connected to it sends the decision back to
	// DetectAfter. Negative: off (a primary restarted by its service
	// manager is then given DetectAfter to come back).
	DetectAfterRefused time.Duration
	// DetectAfterSilent is the shorter bound for a primary that answers
	// nothing (its checks time out: paused, hung or cut off) while every
	// replica of it, checked since its failures began and all reachable,
	// has received nothing from it either — no event, no heartbeat — for
	// this long and for more than two of its heartbeat periods, or lost
	// it (IO thread not Yes). The replicas' silence is what tells a
	// primary that went quiet for everyone from one only Vigil cannot
	// reach. It needs a heartbeat period of at most half of it
	// (MASTER_HEARTBEAT_PERIOD, which Vigil sets to 0.25 s when it points
	// a replica); otherwise DetectAfter applies. Negative: off.
	DetectAfterSilent time.Duration
	// MinInterval: no automatic failover this soon after the previous one
	// unless it was acknowledged.
	MinInterval time.Duration
	// ApplyTimeout bounds the wait for a candidate to apply its relay log
	// (failover) or reach the old primary's last transaction (switchover).
	ApplyTimeout time.Duration
	// HoldTimeout bounds how long a switchover holds new statements at the
	// router.
	HoldTimeout time.Duration
	// DrainTimeout bounds the wait for open transactions on the old
	// primary in a switchover; the rest are killed.
	DrainTimeout time.Duration
	// MaxLagSeconds: a switchover candidate lagging more is refused.
	MaxLagSeconds float64
	// MaxRunningSeconds: a switchover candidate running a query longer than
	// this is refused (switchover.max_running_seconds).
	MaxRunningSeconds float64
	// Candidates are preferred, in this order, among equally advanced
	// replicas.
	Candidates []string
	// NeverPromote servers are never chosen.
	NeverPromote []string
	// FenceCommand is run after fencing the old primary; a non-zero exit
	// aborts the failover. Empty: none.
	FenceCommand string
	// SemiSync is the semi-synchronous replication policy the plans apply
	// to the servers whose role they change.
	SemiSync SemiSyncPolicy
	// AutoRejoin: a returned old primary whose GTID history is compatible
	// is rejoined as a replica without an operator (the AutoRejoin
	// situation); a diverged one stays fenced either way.
	AutoRejoin bool
}

// WithDefaults returns o with every zero value replaced by its default.
func (o Options) WithDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.DetectAfter, DefaultDetectAfter)
	def(&o.DetectAfterRefused, DefaultDetectAfterRefused)
	def(&o.DetectAfterSilent, DefaultDetectAfterSilent)
	def(&o.MinInterval, DefaultMinInterval)
	def(&o.ApplyTimeout, DefaultApplyTimeout)
	def(&o.HoldTimeout, DefaultHoldTimeout)
	def(&o.DrainTimeout, DefaultDrainTimeout)
	if o.MaxLagSeconds == 0 {
		o.MaxLagSeconds = DefaultMaxLagSeconds
	}
	if o.MaxRunningSeconds == 0 {
		o.MaxRunningSeconds = DefaultMaxRunningSeconds
	}
	return o
}

// Validate returns every problem of o, joined; nil when o is usable.
// servers, when not nil, are the cluster's server names that Candidates
// and NeverPromote must name.
func (o Options) Validate(servers []string) error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"detect_after", o.DetectAfter}, {"apply_timeout", o.ApplyTimeout},
		{"hold_timeout", o.HoldTimeout}, {"drain_timeout", o.DrainTimeout}} {
		if d.v < 0 {
			add("%s: %v is negative", d.name, d.v)
		}
	}
	if o.MaxLagSeconds < 0 {
		add("max_lag: %v is negative", o.MaxLagSeconds)
	}
	if o.MaxRunningSeconds < 0 {
		add("max_running_seconds: %v is negative", o.MaxRunningSeconds)
	}
	switch o.SemiSync.Manage {
	case "", SemiSyncAuto, SemiSyncOn, SemiSyncOff:
	default:
		add("semi_sync.manage: %q is not auto, on or off", o.SemiSync.Manage)
	}
	if o.SemiSync.Timeout < 0 {
		add("semi_sync.timeout: %v is negative", o.SemiSync.Timeout)
	}
	for _, n := range o.Candidates {
		if slices.Contains(o.NeverPromote, n) {
			add("candidates: %q is also in never_promote", n)
		}
	}
	if servers != nil {
		for _, n := range append(slices.Clone(o.Candidates), o.NeverPromote...) {
			if !slices.Contains(servers, n) {
				add("candidates/never_promote: %q is not a server of the cluster", n)
			}
		}
	}
	return errors.Join(errs...)
}

// RecordKind is the kind of a past or running operation.
type RecordKind uint8

const (
	RecordFailover RecordKind = iota
	RecordSwitchover
	RecordGaleraMove
	RecordRejoin
	// RecordRestoreWriter: the designated primary made writable again
	// after a failed operation left it read-only (KindRestoreWriter).
	RecordRestoreWriter
)

func (k RecordKind) String() string {
	switch k {
	case RecordFailover:
		return "failover"
	case RecordSwitchover:
		return "switchover"
	case RecordGaleraMove:
		return "galera-writer-move"
	case RecordRejoin:
		return "rejoin"
	case RecordRestoreWriter:
		return "restore-writer"
	}
	return fmt.Sprintf("RecordKind(%d)", uint8(k))
}

// Record is one operation the executor ran (or runs) on the cluster.
type Record struct {
	Kind RecordKind
	// Auto: started by the engine, not by an operator.
	Auto bool
	// Started and Ended; Ended is zero while it runs (or when the executor
	// died during it: a record that is not Input.Running and has no end
	// counts as failed).
	Started, Ended time.Time
	OK             bool
	// Acked: an operator acknowledged it (`vigil ctl ack`).
	Acked bool
	// OldPrimary and NewPrimary; for a rejoin OldPrimary is the server
	// that rejoined.
	OldPrimary, NewPrimary string
	// Error says why it failed.
	Error string
	// LeftReadOnly names the server a failed operation left as the
	// designated primary without making it writable: its set-writable step
	// (or its rollback's) failed after the monitor was told to route writes
	// to it. Empty otherwise. The engine may make it writable again
	// (PrimaryReadOnly).
	LeftReadOnly string `json:",omitempty"`
	// RolledBack: a switchover that failed before its point of no return
	// and whose rollback ran whole — the old primary is writable and
	// routed again, the cluster as it was. It does not block automatic
	// failover (gate): nothing is left for an operator to check.
	RolledBack bool `json:",omitempty"`
	// Views says what each Vigil instance saw of the old primary when an
	// automatic failover started (coordinated instances only).
	Views string `json:",omitempty"`
}

// at is when the record last changed: its end, else its start.
func (r Record) at() time.Time {
	if !r.Ended.IsZero() {
		return r.Ended
	}
	return r.Started
}

func (r Record) failed() bool { return !r.OK }

// History is the cluster's past operations, oldest first.
type History struct {
	Records []Record
}

// Ack returns a copy of h in which every record is acknowledged: the
// operator has seen the last failovers and failures, and automatic
// failover may run again.
func (h History) Ack() History {
	out := History{Records: slices.Clone(h.Records)}
	for i := range out.Records {
		out.Records[i].Acked = true
	}
	return out
}

// RequestKind is what an operator asks for.
type RequestKind uint8

const (
	// RequestFailover: `failover [--to NODE] [--force]`.
	RequestFailover RequestKind = iota
	// RequestSwitchover: `switchover [--to NODE]`.
	RequestSwitchover
	// RequestRejoin: `rejoin NODE`.
	RequestRejoin
)

func (k RequestKind) String() string {
	switch k {
	case RequestFailover:
		return "failover"
	case RequestSwitchover:
		return "switchover"
	case RequestRejoin:
		return "rejoin"
	}
	return fmt.Sprintf("RequestKind(%d)", uint8(k))
}

// Request is an operator's command.
type Request struct {
	Kind RequestKind
	// To is the wanted new primary (failover, switchover; empty: the engine
	// chooses) or the server to rejoin.
	To string
	// Force lets a failover run while the primary still answers checks.
	Force bool
	// DryRun: the decision is shown, not executed. It changes nothing in
	// the decision but its rendering.
	DryRun bool
	// AcceptLoss lets a failover promote a server that lacks transactions
	// the old primary is known to have acknowledged (Input.Acked).
	AcceptLoss bool
}

// ServerFacts are what the engine needs of a server beyond its
// observation. The executor fills them (see docs/failover.md for the SQL).
// A server without an entry in Input.Facts is never promoted.
type ServerFacts struct {
	// FailingSince is the time of the first failed check of the current
	// streak of checks that could not reach the server (connection refused,
	// timed out, network error); zero while it answers. Overloaded or
	// erroring checks do not start a streak.
	FailingSince time.Time
	// LogBin and LogSlaveUpdates are @@log_bin and @@log_slave_updates
	// (@@log_replica_updates on MySQL 8).
	LogBin, LogSlaveUpdates bool
	// Filters is the server's replication filter configuration in a
	// normal form (the Replicate_* columns of SHOW SLAVE STATUS, sorted and
	// joined); empty for none. Only equality matters.
	Filters string
	// LongestQuerySeconds is the age of the longest running statement of a
	// client (not replication or system threads), 0 for none.
	LongestQuerySeconds float64
	// SecondsSinceSourceEvent is how long ago the replica received
	// anything (an event or a heartbeat) from its source; negative when
	// unknown. Used only when HeartbeatPeriod > 0.
	SecondsSinceSourceEvent float64
	// HeartbeatPeriod is the replica's MASTER_HEARTBEAT_PERIOD in seconds,
	// 0 when unknown.
	HeartbeatPeriod float64
	// Source names the cluster server this one replicates from, resolved
	// by the executor; empty: the engine matches Source_Host:Source_Port
	// with the servers' addresses.
	Source string
	// SemiSync are the server's semi-sync variables.
	SemiSync SemiSyncSettings
}

// Input is everything one decision rests on. Decide never changes it.
type Input struct {
	// Now is the time of the decision; the engine reads no clock.
	Now time.Time
	// Snapshot is the cluster as the monitor last published it.
	Snapshot *topology.Snapshot
	// Obs is each server's latest observation, by name.
	Obs map[string]*topology.Observation
	// Facts are each server's further facts, by name.
	Facts   map[string]ServerFacts
	History History
	Options Options
	// Request is an operator's command, nil for an automatic decision.
	Request *Request
	// Running is the operation in progress on the cluster, nil for none.
	Running *Record
	// Fenced are the servers the executor keeps fenced at the router (old
	// primaries, quarantined replicas) until an operator rejoins them.
	Fenced []string
	// Acked is what the primary is known to have acknowledged to clients,
	// as the executor watched it; nil when unknown.
	Acked *AckedMark
	// Cut are the servers whose IO thread the running failover stopped
	// (its first phase): their replication is stopped on purpose.
	Cut []string
	// Stuck are the running failover's candidates that did not apply
	// their relay log within apply_timeout (a local lock, a long
	// transaction): the rest of the failover promotes another replica,
	// one that received everything they did.
	Stuck []string
	// Views are the other Vigil instances' views of the servers (peers.go);
	// nil without coordination, or when they were not read: no instance
	// but this one is asked.
	Views *Views
}

// AckedMark is the highest GTID position a primary is known to have
// acknowledged to its clients, from the monitor's checks of it: a
// position seen while semi-sync was on and no commit waited for an
// acknowledgement (every transaction in it reached a replica), or while
// the primary had fallen back to asynchronous replication (commits were
// acknowledged without any replica).
type AckedMark struct {
	// Server is the primary the mark is of.
	Server string
	// Pos is the position (MariaDB gtid_binlog_pos).
	Pos topology.GTIDPos
	// At is when it was seen.
	At time.Time
	// Async: some of it was acknowledged while semi-sync had fallen back
	// to asynchronous replication (Rpl_semi_sync_master_status OFF).
	Async bool
	// AsyncSince is when the primary was first seen acknowledging
	// asynchronously in its current streak, zero when it was not.
	AsyncSince time.Time
	// SemiSync: the primary ran semi-sync (enabled) when the mark was taken.
	SemiSync bool
}
