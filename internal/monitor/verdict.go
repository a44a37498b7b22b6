package monitor

import (
	"fmt"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Verdict is what one check says a server can do right now, before
// hysteresis: the readable/writable table of docs/monitoring.md.
type Verdict struct {
	Readable bool
	Writable bool
	// Lagging: not readable only because of max_replication_lag.
	Lagging bool
	Reason  string
}

// Good reports whether the check counts as passed for hysteresis: every
// row of the table that takes a server out of routing makes it unreadable.
func (v Verdict) Good() bool { return v.Readable }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// judgeEnv is what judging a replica needs beyond its own observation.
type judgeEnv struct {
	// WriterUp: the cluster has a routed writer.
	WriterUp bool
	// IODownFor is how long the replica's I/O thread has not been running
	// (0 when it runs).
	IODownFor time.Duration
	// WriterHeartbeat is the newest heartbeat the writer had at its last
	// good check, zero when unknown or stale.
	WriterHeartbeat time.Time
	// HeartbeatStale: the writer's newest heartbeat was older than
	// max_replication_lag (nothing writes heartbeats): ignore them.
	HeartbeatStale bool
	// Writer: the server judged is the routed writer. Lone: and no other
	// server could take the writes (the lone writer rule).
	Writer, Lone bool
}

// lagOf is a server's replication lag in seconds, -1 when unknown. With a
// heartbeat table and a known writer heartbeat it is how much older the
// server's newest heartbeat is than the writer's: the data it misses. That
// stays right when the writer is down (nothing is missed then), where the
// age of the newest row would grow without the replica falling behind.
// When the writer's own newest heartbeat is stale (nothing writes them),
// Seconds_Behind_Master decides. Otherwise it is the heartbeat age or
// Seconds_Behind_Master (Observation.Lag).
func lagOf(o *topology.Observation, env judgeEnv) float64 {
	switch {
	case env.HeartbeatStale:
		if o.Replica != nil && o.Replica.SecondsBehind >= 0 {
			return float64(o.Replica.SecondsBehind)
		}
		return -1
	case !o.HeartbeatTS.IsZero() && !env.WriterHeartbeat.IsZero():
		return max(env.WriterHeartbeat.Sub(o.HeartbeatTS).Seconds(), 0)
	}
	return o.Lag()
}

// judge applies the table to one observation.
func judge(typ string, o *topology.Observation, opts *Options, env judgeEnv) Verdict {
	if !o.OK {
		return Verdict{Reason: "check failed: " + o.Err}
	}
	if typ == TypeGalera {
		return judgeGalera(o, opts)
	}
	if !o.ReadOnly {
		return Verdict{Readable: true, Writable: true, Reason: "read_only=OFF"}
	}
	lag := lagOf(o, env)
	if typ == TypeReadOnly {
		if o.Replica != nil && tooLate(lag, opts.MaxReplicationLag) {
			return lagging(lag, opts.MaxReplicationLag)
		}
		return Verdict{Readable: true, Reason: "read_only=ON"}
	}
	if why := replicationProblem(o, opts, env); why != "" {
		return Verdict{Reason: "read_only=ON, replication not OK: " + why}
	}
	if tooLate(lag, opts.MaxReplicationLag) {
		return lagging(lag, opts.MaxReplicationLag)
	}
	if lag >= 0 {
		return Verdict{Readable: true, Reason: fmt.Sprintf("read_only=ON, replicating, lag %s", fmtLag(lag))}
	}
	return Verdict{Readable: true, Reason: "read_only=ON, replicating"}
}

func tooLate(lag float64, limit time.Duration) bool {
	return limit > 0 && lag > limit.Seconds()
}

func lagging(lag float64, limit time.Duration) Verdict {
	return Verdict{Lagging: true, Reason: fmt.Sprintf("lag %s > max_replication_lag %s", fmtLag(lag), limit)}
}

func fmtLag(lag float64) string {
	if lag < 10 {
		return fmt.Sprintf("%.1fs", lag)
	}
	return fmt.Sprintf("%.0fs", lag)
}

// replicationProblem says what is wrong with a read-only server's
// replication, or "" when it is fine.
//
// An I/O thread that is reconnecting is not a problem at once: when the
// writer is down the replica holds the newest data there is, and when the
// writer is up the replica is stale by at most the time it has been
// disconnected, which max_replication_lag bounds like any other lag.
func replicationProblem(o *topology.Observation, opts *Options, env judgeEnv) string {
	rs := o.Replica
	if rs == nil {
		if o.ReplicaErr != "" {
			return "replica status unreadable: " + o.ReplicaErr
		}
		return "not a replica (no replica status)"
	}
	if rs.LastSQLErrno != 0 {
		return fmt.Sprintf("SQL thread error %d: %s", rs.LastSQLErrno, short(rs.LastSQLError))
	}
	if !rs.SQLRunning {
		return "SQL thread not running"
	}
	switch rs.IORunning {
	case topology.IOYes:
		return ""
	case topology.IOConnecting:
		limit := opts.MaxReplicationLag
		if !env.WriterUp || limit <= 0 || env.IODownFor <= limit {
			return ""
		}
		what := fmt.Sprintf("I/O thread reconnecting for %s while the writer is up", env.IODownFor.Round(100*time.Millisecond))
		if rs.LastIOErrno != 0 {
			return fmt.Sprintf("%s (error %d: %s)", what, rs.LastIOErrno, short(rs.LastIOError))
		}
		return what
	}
	if rs.LastIOErrno != 0 {
		return fmt.Sprintf("I/O thread stopped (error %d: %s)", rs.LastIOErrno, short(rs.LastIOError))
	}
	return "I/O thread not running"
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:157] + "..."
	}
	return s
}

func judgeGalera(o *topology.Observation, opts *Options) Verdict {
	w := o.Wsrep
	switch {
	case w == nil:
		return Verdict{Reason: "Galera check not OK: no wsrep status"}
	case !w.On:
		return Verdict{Reason: "Galera check not OK: wsrep_on=OFF"}
	case !w.Primary():
		return Verdict{Reason: fmt.Sprintf("Galera check not OK: wsrep_cluster_status=%s", orUnknown(w.ClusterStatus))}
	case !w.Ready:
		return Verdict{Reason: "Galera check not OK: wsrep_ready=OFF"}
	case w.RejectingQueries():
		return Verdict{Reason: "Galera check not OK: wsrep_reject_queries=" + w.RejectQueries}
	case w.Donor() || w.Desync:
		if opts.DesyncedReadable && !w.SSTDonorRejectsQueries {
			return Verdict{Readable: true, Reason: "Galera node " + donorWord(w) + ", readable (desynced_readable)"}
		}
		return Verdict{Reason: "Galera check not OK: " + donorWord(w)}
	case !w.Synced():
		return Verdict{Reason: "Galera check not OK: wsrep_local_state_comment=" + orUnknown(w.LocalStateComment)}
	}
	if o.ReadOnly {
		return Verdict{Readable: true, Reason: "Galera Synced, read_only=ON"}
	}
	return Verdict{Readable: true, Writable: true, Reason: "Galera Synced"}
}

func donorWord(w *topology.WsrepStatus) string {
	if w.LocalStateComment != "" {
		return "wsrep_local_state_comment=" + w.LocalStateComment
	}
	return "wsrep_desync=ON"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
