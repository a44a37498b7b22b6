// Package router decides, for one statement, which server of a cluster
// serves it: a pure function of the statement's class, the session's state
// and the topology snapshot. It does no I/O; balancing counters live in a
// Balancer the caller owns.
package router

import (
	"fmt"
	"time"

	"github.com/vigil-db/vigil/internal/sqlscan"
	"github.com/vigil-db/vigil/internal/topology"
)

// Target is where a statement goes.
type Target uint8

const (
	// Keep: stay on the session's current server connection (transaction or pin).
	Keep Target = iota
	// Writer: the cluster's routed writer.
	Writer
	// Reader: a readable server chosen by the balancer.
	Reader
	// Group: a server of the named group a rule chose.
	Group
)

func (t Target) String() string {
	switch t {
	case Keep:
		return "keep"
	case Writer:
		return "writer"
	case Reader:
		return "reader"
	case Group:
		return "group"
	}
	return "?"
}

// RYW is a session's read-your-writes mode.
type RYW uint8

const (
	// RYWGTID: a read after a write waits on the replica for the write's GTID.
	RYWGTID RYW = iota
	// RYWSession: reads go to the writer for a while after a write.
	RYWSession
	// RYWNone: reads go to replicas at once.
	RYWNone
	// RYWGlobal: a read waits on the replica for the newest write any
	// session made through this Vigil (causal reads across sessions).
	RYWGlobal
)

var rywNames = [...]string{RYWGTID: "gtid", RYWSession: "session", RYWNone: "none", RYWGlobal: "global"}

func (r RYW) String() string {
	if int(r) < len(rywNames) {
		return rywNames[r]
	}
	return fmt.Sprintf("RYW(%d)", uint8(r))
}

// MarshalText writes the mode as the configuration names it.
func (r RYW) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a configured mode (users[].read_your_writes): the
// enum is typed when the file is decoded, and an unknown name is an
// error there. Empty is gtid, the default.
func (r *RYW) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*r = RYWGTID
		return nil
	}
	for i, n := range rywNames {
		if string(b) == n {
			*r = RYW(i)
			return nil
		}
	}
	return fmt.Errorf("read_your_writes must be none, session, gtid or global, not %q", b)
}

// Session is what the router needs to know about a session.
type Session struct {
	// Bound: the session holds a server connection it must keep (open
	// transaction, autocommit off, or a pin).
	Bound bool
	// RYW mode and, for RYWSession, when the last write happened.
	RYW           RYW
	LastWrite     time.Time
	SessionWindow time.Duration
	// ForceWriter: a rule or the user says all reads go to the writer.
	ForceWriter bool
}

// Decision is the router's answer.
type Decision struct {
	Target Target
	// Hold: the session must keep the connection after this statement
	// (it opens a transaction, turns autocommit off, or pins).
	Reason string
}

// Route decides where one statement goes.
func Route(info sqlscan.Info, s *Session, now time.Time) Decision {
	if s.Bound {
		return Decision{Target: Keep, Reason: "transaction or pinned session"}
	}
	switch info.Class {
	case sqlscan.ClassBeginReadOnly:
		if s.ForceWriter {
			return Decision{Target: Writer, Reason: "reads forced to writer"}
		}
		return Decision{Target: Reader, Reason: "read-only transaction"}
	case sqlscan.ClassRead:
		const writerFlags = sqlscan.FlagForUpdate | sqlscan.FlagSideEffect | sqlscan.FlagMulti |
			sqlscan.FlagGetLock | sqlscan.FlagCalcFoundRows | sqlscan.FlagFoundRows | sqlscan.FlagUserVar |
			sqlscan.FlagXA | sqlscan.FlagExplainAnalyze | sqlscan.FlagSessionStatus
		if info.Flags&writerFlags != 0 {
			return Decision{Target: Writer, Reason: "read with side effects or locks"}
		}
		if s.ForceWriter {
			return Decision{Target: Writer, Reason: "reads forced to writer"}
		}
		if s.RYW != RYWNone && !s.LastWrite.IsZero() && now.Sub(s.LastWrite) < s.SessionWindow {
			return Decision{Target: Writer, Reason: "read-your-writes window"}
		}
		return Decision{Target: Reader, Reason: "read outside a transaction"}
	}
	return Decision{Target: Writer, Reason: "write or not understood"}
}

// WriterFor returns the writer of a snapshot or a reason there is none.
func WriterFor(snap *topology.Snapshot) (int, string) {
	if snap == nil {
		return -1, "no topology yet"
	}
	w := snap.WriterServer()
	if w == nil {
		if snap.WriterReason != "" {
			return -1, snap.WriterReason
		}
		return -1, "no server is the writer"
	}
	if w.State != topology.Online || !w.Writable {
		return -1, w.Name + " " + w.State.String() + reasonSuffix(w.Reason)
	}
	return snap.Writer, ""
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}
