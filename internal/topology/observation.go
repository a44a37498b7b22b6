package topology

import (
	"strconv"
	"strings"
	"time"
)

// Flavor is the server family; it decides the SQL a check uses.
type Flavor uint8

const (
	FlavorUnknown Flavor = iota
	FlavorMariaDB
	FlavorMySQL
)

func (f Flavor) String() string {
	switch f {
	case FlavorMariaDB:
		return "MariaDB"
	case FlavorMySQL:
		return "MySQL"
	}
	return "unknown"
}

// FlavorOf tells the family from the version string of the handshake or
// @@version ("5.5.5-10.11.6-MariaDB-0+deb12u1", "8.0.36").
func FlavorOf(version string) Flavor {
	switch {
	case strings.Contains(strings.ToLower(version), "mariadb"):
		return FlavorMariaDB
	case version != "":
		return FlavorMySQL
	}
	return FlavorUnknown
}

// VersionAtLeast reports whether a version string (as FlavorOf takes it) is
// at least major.minor.patch. MariaDB's "5.5.5-" prefix is skipped.
func VersionAtLeast(version string, major, minor, patch int) bool {
	version = strings.TrimPrefix(version, "5.5.5-")
	var v [3]int
	for i, part := range strings.SplitN(version, ".", 3) {
		end := 0
		for end < len(part) && part[end] >= '0' && part[end] <= '9' {
			end++
		}
		v[i], _ = strconv.Atoi(part[:end])
	}
	want := [3]int{major, minor, patch}
	for i := range v {
		if v[i] != want[i] {
			return v[i] > want[i]
		}
	}
	return true
}

// Observation is what one check of one server saw. It is a value: once
// made it is never changed, so it may be shared.
type Observation struct {
	Server string
	// Seq numbers the checks of one server from 1.
	Seq uint64
	// Time is when the check started; Took how long it ran.
	Time time.Time
	Took time.Duration

	// OK: the server answered the check's queries on the monitor
	// connection. The fields below OverloadReason are meaningful only then.
	OK bool
	// Err describes the failure when !OK (or a failed connectability test).
	Err string
	// ErrCode is the server's error code of the failure, 0 for network
	// errors and timeouts.
	ErrCode uint16
	// Refused: the failure was "connection refused" — nothing listens on
	// the port, the server is down rather than slow.
	Refused bool
	// TimedOut: the failure was the check's deadline (no answer in time),
	// not a refusal, a reset or a server error.
	TimedOut bool
	// ClientReplies is passive evidence: how many client statements this
	// server completed on the proxy's own pooled connections (the whole
	// reply read) between the start and the end of the check. A check that
	// timed out while the server answered clients shows a slow server, not
	// a dead one. 0 when none completed or the proxy reports no traffic.
	ClientReplies uint64
	// ClientWaiting is how many client statements were waiting for this
	// server's reply when the check started. A check that timed out while
	// they waited and none of them (nor any other) completed shows a server
	// that completes nothing: stopped or cut off, not merely slow.
	ClientWaiting int64

	// Overloaded: the server is alive but refuses new connections (errors
	// 1040, 1203, 1226, or its connections are at max_connections) or
	// refuses the monitor's login (1045). See OverloadCode.
	Overloaded     bool
	OverloadCode   uint16
	OverloadReason string

	Flavor  Flavor
	Version string
	// ServerID is @@server_id.
	ServerID uint32
	// ReadOnly is @@read_only; SuperReadOnly is MySQL's @@super_read_only.
	ReadOnly      bool
	SuperReadOnly bool
	// MaxPacket is the size of the smallest command packet (payload
	// bytes) a new connection to the server refuses with error 1153 and
	// a close: max(@@max_allowed_packet, @@net_buffer_length), since the
	// server checks max_allowed_packet only when a packet outgrows its
	// net_buffer_length buffer. 0 when unknown.
	MaxPacket int

	GTID GTIDState
	// Replica is the replication status, nil when the server does not
	// replicate (SHOW SLAVE STATUS returned no row).
	Replica *ReplicaStatus
	// ReplicaErr is why the replica status could not be read, if it could
	// not (missing privilege, say).
	ReplicaErr  string
	SemiSync    SemiSyncStatus
	Connections ConnectionStatus
	// Wsrep is the Galera status, nil when not checked.
	Wsrep *WsrepStatus
	// HeartbeatLag is the age of the newest heartbeat row in seconds, -1
	// when there is no heartbeat table or it could not be read.
	HeartbeatLag float64
	// HeartbeatTS is the newest heartbeat row's timestamp (UTC), zero when
	// none. Comparing it with the writer's says how far behind a replica's
	// data is, even while the writer is down.
	HeartbeatTS time.Time
	// Uptime is the server's Uptime status in seconds, -1 when unknown: a
	// smaller value than the previous check's means it restarted.
	Uptime int64
	// Binlog is how the server logs, for the failover engine's choice of
	// a candidate; read with the check where the flavour allows it.
	Binlog BinlogSettings
}

// BinlogSettings are a server's binary log settings and its replicas'
// heartbeat period, as a check read them.
type BinlogSettings struct {
	// Read: the check read them (MariaDB); otherwise the executor reads
	// them itself.
	Read bool
	// LogBin is @@log_bin; LogReplicaUpdates @@log_slave_updates.
	LogBin, LogReplicaUpdates bool
	// HeartbeatPeriod is Slave_heartbeat_period in seconds, 0 unknown.
	HeartbeatPeriod float64
	// SemiSync are the semi-sync settings' variables (name, value) as
	// SHOW GLOBAL VARIABLES lists them, nil when the check did not read
	// them (semi-sync as a plugin: the executor reads them).
	SemiSync [][]string
}

// Slow reports whether the check timed out while the server completed
// client statements (ClientReplies): the server is slow, not down.
func (o *Observation) Slow() bool {
	return !o.OK && o.TimedOut && !o.Overloaded && o.ClientReplies > 0
}

// Stuck reports whether the check timed out while clients waited on the
// server and nothing completed (ClientWaiting, ClientReplies): passive
// evidence that agrees with the check.
func (o *Observation) Stuck() bool {
	return !o.OK && o.TimedOut && !o.Overloaded && o.ClientReplies == 0 && o.ClientWaiting > 0
}

// Lag is the replication lag in seconds as this observation alone shows
// it: the heartbeat age when there is a heartbeat table, else
// Seconds_Behind_Master; -1 when unknown. The monitor's judgement
// (Health.LagSeconds) compares heartbeats with the writer's instead, which
// stays right while the writer is down.
func (o *Observation) Lag() float64 {
	if o.HeartbeatLag >= 0 {
		return o.HeartbeatLag
	}
	if o.Replica != nil && o.Replica.SecondsBehind >= 0 {
		return float64(o.Replica.SecondsBehind)
	}
	return -1
}

// Health is the monitor's judgement of one server with the observation it
// rests on, for the failover engine.
type Health struct {
	Name string
	// Last is the latest observation, nil before the first check ended.
	Last *Observation
	// LastOK is the latest observation in which the server answered (OK).
	LastOK   *Observation
	State    State
	Readable bool
	Writable bool
	// Reason explains State.
	Reason string
	// ConsecutiveFailures and ConsecutiveSuccesses count checks judged
	// bad or good in a row (an overloaded check without data counts as
	// neither).
	ConsecutiveFailures  int
	ConsecutiveSuccesses int
	LastSuccess          time.Time
	// LagSeconds is the lag the monitor judged by, -1 when unknown.
	LagSeconds float64
	// FailingSince is the time of the first check of the current streak
	// of checks that did not reach the server (refused, timed out, network
	// error), zero while it answers. Any answer — data, a server error, an
	// overload refusal — ends the streak.
	FailingSince time.Time
	// LastErrCode and LastErr are from the latest failed check.
	LastErrCode uint16
	LastErr     string
	Overloaded  bool
	Lagging     bool
	Fenced      bool
	// Admin is the operator's override: Online for none, else OfflineSoft
	// or OfflineHard.
	Admin State
}
