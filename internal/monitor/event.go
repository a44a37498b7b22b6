package monitor

import (
	"fmt"
	"log/slog"
	"time"
)

// EventKind names what happened.
type EventKind string

const (
	// EventStateChange: a server's routing state changed (From/To are
	// ONLINE, SHUNNED, OFFLINE_SOFT, OFFLINE_HARD).
	EventStateChange EventKind = "state_change"
	// EventServerAdded: a reload or an operator added a server; it joins
	// OFFLINE_SOFT. EventServerJoined: it is Online and caught up and
	// takes traffic. EventServerRemoved: it left the configuration.
	EventServerAdded   EventKind = "server_added"
	EventServerJoined  EventKind = "server_joined"
	EventServerRemoved EventKind = "server_removed"
	// EventStandby: the server became a standby (monitored, not routed);
	// EventStandbyCleared: it is no longer one.
	EventStandby        EventKind = "standby"
	EventStandbyCleared EventKind = "standby_cleared"
	// EventAccessChange: an Online server's readable/writable flags changed
	// (From/To like "r=1 w=0").
	EventAccessChange EventKind = "access_change"
	// EventWriterChange: the routed writer changed (From/To are server
	// names, "" for none); Term is the new term.
	EventWriterChange EventKind = "writer_change"
	// EventConflict: a server reports read_only=OFF in a replication
	// cluster and is not the writer. EventConflictCleared ends it.
	EventConflict        EventKind = "conflict"
	EventConflictCleared EventKind = "conflict_cleared"
	// EventOverloaded: the server refuses new connections or the monitor's
	// login, but is not down. EventOverloadCleared ends it.
	EventOverloaded      EventKind = "overloaded"
	EventOverloadCleared EventKind = "overload_cleared"
	// EventLag: a replica's lag passed max_replication_lag. EventLagCleared
	// ends it.
	EventLag        EventKind = "lag"
	EventLagCleared EventKind = "lag_cleared"
	// EventSlow: a check timed out while the server completed client
	// statements on the proxy's connections (passive evidence): the check
	// is not counted as failed. EventSlowCleared follows recover_after
	// good checks.
	EventSlow        EventKind = "slow"
	EventSlowCleared EventKind = "slow_cleared"
	// EventWriterKept: the routed writer failed fail_after checks by
	// timeouts, but no other server could take the writes and it showed
	// life within lone_writer_grace: it stays routed (the lone writer
	// rule). EventWriterKeptCleared ends it: the writer shows life again or
	// leaves routing after all.
	EventWriterKept        EventKind = "writer_kept"
	EventWriterKeptCleared EventKind = "writer_kept_cleared"
	// EventSemiSyncFallback: a writable server with semi-sync enabled
	// acknowledges commits without waiting for a replica (fell back to
	// asynchronous replication). EventSemiSyncRestored ends it.
	EventSemiSyncFallback EventKind = "semi_sync_fallback"
	EventSemiSyncRestored EventKind = "semi_sync_restored"
)

// Event is one thing the monitor noticed or was told.
type Event struct {
	Time    time.Time
	Cluster string
	// Server is empty for cluster-wide events.
	Server string
	Kind   EventKind
	From   string
	To     string
	Reason string
	// Term is the writer term after the event.
	Term uint64
}

// String is the event as one log line.
func (e Event) String() string {
	switch e.Kind {
	case EventStateChange:
		return fmt.Sprintf("server %s %s: %s", e.Server, e.To, e.Reason)
	case EventAccessChange:
		return fmt.Sprintf("server %s %s (was %s): %s", e.Server, e.To, e.From, e.Reason)
	case EventWriterChange:
		from, to := orNone(e.From), orNone(e.To)
		return fmt.Sprintf("cluster %s writer %s → %s (term %d): %s", e.Cluster, from, to, e.Term, e.Reason)
	}
	return fmt.Sprintf("server %s %s: %s", e.Server, e.Kind, e.Reason)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// level is the log level of an event: losing something is a warning.
func (e Event) level() slog.Level {
	switch e.Kind {
	case EventConflict, EventOverloaded, EventLag, EventSlow, EventWriterKept, EventSemiSyncFallback:
		return slog.LevelWarn
	case EventStateChange:
		if e.To != "ONLINE" {
			return slog.LevelWarn
		}
	case EventWriterChange:
		if e.To == "" {
			return slog.LevelWarn
		}
	}
	return slog.LevelInfo
}

// ring keeps the newest events, oldest first.
type ring struct {
	buf   []Event
	start int
	n     int
}

func (r *ring) resize(capacity int) {
	old := r.all()
	if len(old) > capacity {
		old = old[len(old)-capacity:]
	}
	r.buf = make([]Event, capacity)
	copy(r.buf, old)
	r.start, r.n = 0, len(old)
}

func (r *ring) add(e Event) {
	if len(r.buf) == 0 {
		return
	}
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = e
		r.n++
		return
	}
	r.buf[r.start] = e
	r.start = (r.start + 1) % len(r.buf)
}

func (r *ring) all() []Event {
	out := make([]Event, 0, r.n)
	for i := range r.n {
		out = append(out, r.buf[(r.start+i)%len(r.buf)])
	}
	return out
}
