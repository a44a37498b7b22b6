package monitor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Passive evidence and the lone writer rule (docs/monitoring.md, "Slow is
// not down"). Checks are fed on the probe's schedule: a check that ends
// within the interval is followed one interval after its start, one that
// overran (a timeout) at once.

const (
	simInterval = 500 * time.Millisecond
	simTimeout  = 500 * time.Millisecond
)

// timedOut is a check that hit its deadline while the server completed
// replies client statements.
func timedOut(replies uint64) topology.Observation {
	return topology.Observation{Err: "reading variables: read tcp 127.0.0.1:40552->127.0.0.1:3301: i/o timeout",
		TimedOut: true, ClientReplies: replies, Took: simTimeout, HeartbeatLag: -1}
}

// stuck is a check that hit its deadline while waiting client statements
// waited on the server and nothing completed.
func stuck(waiting int64) topology.Observation {
	o := timedOut(0)
	o.ClientWaiting = waiting
	return o
}

func resetObs(replies uint64) topology.Observation {
	return topology.Observation{Err: "reading variables: read tcp 127.0.0.1:40552->127.0.0.1:3301: read: connection reset by peer",
		ClientReplies: replies, Took: time.Millisecond, HeartbeatLag: -1}
}

func refusedWith(replies uint64) topology.Observation {
	o := refusedObs()
	o.ClientReplies = replies
	return o
}

func serverErrObs(code uint16) topology.Observation {
	return topology.Observation{Err: fmt.Sprintf("reading status: ERROR %d", code), ErrCode: code, Took: time.Millisecond, HeartbeatLag: -1}
}

func took(o topology.Observation, d time.Duration) topology.Observation {
	o.Took = d
	return o
}

// sched feeds checks to a harness on the probe's schedule, per server.
type sched struct {
	h    *harness
	next map[string]time.Time
}

func newSched(h *harness) *sched { return &sched{h: h, next: map[string]time.Time{}} }

func (s *sched) check(name string, o topology.Observation) []Event {
	s.h.t.Helper()
	start, ok := s.next[name]
	if !ok {
		start = s.h.now
	}
	if o.Took == 0 {
		o.Took = 2 * time.Millisecond
	}
	evs := s.h.seeAt(name, start, o)
	s.next[name] = start.Add(max(s.h.opts.Interval, o.Took))
	return evs
}

func (s *sched) checkN(name string, n int, o topology.Observation) []Event {
	s.h.t.Helper()
	var evs []Event
	for range n {
		evs = append(evs, s.check(name, o)...)
	}
	return evs
}

type pstep struct {
	server string
	n      int
	obs    topology.Observation
}

func TestPassiveEvidenceAndLoneWriter(t *testing.T) {
	offline := func(index int) topology.Observation {
		return galeraObs(index, func(w *topology.WsrepStatus) { w.ClusterStatus = "non-Primary" })
	}
	for _, tc := range []struct {
		name  string
		typ   string
		n     int
		mod   func(*Options)
		first []topology.Observation // one check per server, in order
		steps []pstep
		// want: node1's state, the routed writer, events during the steps
		// that must and must not appear, a substring of node1's reason.
		state      topology.State
		writer     string
		events     []EventKind
		noEvents   []EventKind
		once       []EventKind // exactly one such event
		reason     string
		failing    string // "yes"/"no": node1 has FailingSince (the failover engine sees failures)
		otherState map[string]topology.State
	}{{
		name: "slow primary with replicas stays the writer", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node1", 8, timedOut(12)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventSlow},
		noEvents: []EventKind{EventStateChange, EventWriterChange, EventWriterKept}, reason: "slow: checks time out while it completes client statements",
		failing: "no",
	}, {
		name: "silent timeouts take a primary with replicas out", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node1", 2, timedOut(0)}},
		state: topology.Shunned, writer: "", events: []EventKind{EventStateChange, EventWriterChange},
		noEvents: []EventKind{EventSlow, EventWriterKept}, failing: "yes", reason: "2 consecutive failed checks",
	}, {
		name: "a slow check ends a streak of failed checks", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node1", 1, timedOut(0)}, {"node1", 1, timedOut(1)}, {"node1", 1, timedOut(0)}, {"node1", 1, timedOut(3)}, {"node1", 1, timedOut(0)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventSlow}, noEvents: []EventKind{EventStateChange}, failing: "yes",
	}, {
		name: "slow clears after recover_after good checks", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node1", 1, timedOut(5)}, {"node1", 5, writableObs()}},
		state: topology.Online, writer: "node1", events: []EventKind{EventSlow, EventSlowCleared}, reason: "read_only=OFF",
	}, {
		name: "slow replica stays readable", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node2", 8, timedOut(4)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventSlow}, noEvents: []EventKind{EventStateChange},
		otherState: map[string]topology.State{"node2": topology.Online},
	}, {
		name: "silent replica leaves", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node2", 2, timedOut(0)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventStateChange},
		otherState: map[string]topology.State{"node2": topology.Shunned},
	}, {
		name: "a replica that completes nothing while clients wait leaves after one check", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node2", 1, stuck(3)}},
		state: topology.Online, writer: "node1", once: []EventKind{EventStateChange},
		otherState: map[string]topology.State{"node2": topology.Shunned},
	}, {
		name: "clients waiting while others complete: slow, not stuck", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node2", 4, func() topology.Observation { o := stuck(3); o.ClientReplies = 1; return o }()}},
		state: topology.Online, writer: "node1", events: []EventKind{EventSlow}, noEvents: []EventKind{EventStateChange},
		otherState: map[string]topology.State{"node2": topology.Online},
	}, {
		name: "the writer keeps fail_after when clients wait on it", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node1", 1, stuck(4)}},
		state: topology.Online, writer: "node1", noEvents: []EventKind{EventStateChange, EventWriterChange},
	}, {
		name: "the writer with replicas leaves after fail_after stuck checks", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node1", 2, stuck(4)}},
		state: topology.Shunned, writer: "", reason: "2 consecutive failed checks",
	}, {
		name: "a lone writer clients wait on is kept too", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 4, stuck(4)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventWriterKept},
	}, {
		name: "refused is down whatever clients completed", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node2", 2, refusedWith(9)}},
		state: topology.Online, writer: "node1", noEvents: []EventKind{EventSlow},
		otherState: map[string]topology.State{"node2": topology.OfflineHard},
	}, {
		name: "only timeouts are excused, not resets", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node2", 2, resetObs(9)}},
		state: topology.Online, writer: "node1", noEvents: []EventKind{EventSlow},
		otherState: map[string]topology.State{"node2": topology.Shunned},
	}, {
		name: "lone writer kept on silent timeouts", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 8, timedOut(0)}}, // 4 s without a sign of life
		state: topology.Online, writer: "node1", events: []EventKind{EventWriterKept},
		noEvents: []EventKind{EventStateChange, EventWriterChange}, reason: "kept as the writer: 8 consecutive checks timed out", failing: "yes",
	}, {
		name: "lone writer leaves after lone_writer_grace without a sign of life", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 10, timedOut(0)}}, // the 10th ends 5.5 s after the last good check started
		state: topology.Shunned, writer: "", events: []EventKind{EventWriterKept, EventWriterKeptCleared, EventStateChange, EventWriterChange},
		reason: "no sign of life for 5.5s (no other server could take the writes: kept up to 5s)", failing: "yes",
	}, {
		name: "lone writer: client statements renew the grace", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 9, timedOut(0)}, {"node1", 1, timedOut(2)}, {"node1", 9, timedOut(0)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventWriterKept, EventSlow}, noEvents: []EventKind{EventStateChange},
	}, {
		name: "lone writer: slow checks between timeouts do not flap its events", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 3, timedOut(0)}, {"node1", 1, timedOut(2)}, {"node1", 3, timedOut(0)}, {"node1", 1, timedOut(1)}, {"node1", 3, timedOut(0)}},
		state: topology.Online, writer: "node1", once: []EventKind{EventWriterKept, EventSlow},
		noEvents: []EventKind{EventWriterKeptCleared, EventSlowCleared, EventStateChange}, reason: "kept as the writer",
	}, {
		name: "lone writer kept, then answers", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 3, timedOut(0)}, {"node1", 1, writableObs()}},
		state: topology.Online, writer: "node1", events: []EventKind{EventWriterKept, EventWriterKeptCleared},
		noEvents: []EventKind{EventStateChange, EventSlow}, reason: "read_only=OFF",
	}, {
		name: "lone writer: a reset ends the grace", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 1, timedOut(0)}, {"node1", 1, resetObs(0)}},
		state: topology.Shunned, writer: "", noEvents: []EventKind{EventWriterKept}, failing: "yes",
	}, {
		name: "lone writer: a server error ends the grace", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 3, timedOut(0)}, {"node1", 1, serverErrObs(1227)}},
		state: topology.Shunned, writer: "", events: []EventKind{EventWriterKept, EventWriterKeptCleared},
	}, {
		name: "lone writer: refused is down at once", typ: TypeReplication, n: 1,
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 2, refusedObs()}},
		state: topology.OfflineHard, writer: "", noEvents: []EventKind{EventWriterKept}, failing: "yes",
	}, {
		name: "primary whose replicas are all out is lone", typ: TypeReplication, n: 3,
		first: []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)},
		steps: []pstep{{"node2", 2, timedOut(0)}, {"node3", 2, refusedObs()}, {"node1", 6, timedOut(0)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventWriterKept},
	}, {
		name: "a replica that returns ends the grace", typ: TypeReplication, n: 2,
		first: []topology.Observation{writableObs(), replicaObs(0)},
		steps: []pstep{{"node2", 2, timedOut(0)}, {"node1", 3, timedOut(0)}, {"node2", 5, replicaObs(0)}, {"node1", 1, timedOut(0)}},
		state: topology.Shunned, writer: "", events: []EventKind{EventWriterKept, EventWriterKeptCleared},
		otherState: map[string]topology.State{"node2": topology.Online},
	}, {
		name: "negative lone_writer_grace: no lone writer rule", typ: TypeReplication, n: 1,
		mod:   func(o *Options) { o.LoneWriterGrace = -1 },
		first: []topology.Observation{writableObs()},
		steps: []pstep{{"node1", 2, timedOut(0)}},
		state: topology.Shunned, writer: "", noEvents: []EventKind{EventWriterKept},
	}, {
		name: "lone Galera writer kept", typ: TypeGalera, n: 3,
		first: []topology.Observation{galeraObs(0, nil), offline(1), offline(2)},
		steps: []pstep{{"node1", 6, timedOut(0)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventWriterKept},
	}, {
		name: "Galera writer with a Synced peer moves", typ: TypeGalera, n: 3,
		first: []topology.Observation{galeraObs(0, nil), galeraObs(1, nil), offline(2)},
		steps: []pstep{{"node1", 2, timedOut(0)}},
		state: topology.Shunned, writer: "node2", noEvents: []EventKind{EventWriterKept},
	}, {
		name: "slow Galera writer stays", typ: TypeGalera, n: 3,
		first: []topology.Observation{galeraObs(0, nil), galeraObs(1, nil), galeraObs(2, nil)},
		steps: []pstep{{"node1", 6, timedOut(1)}},
		state: topology.Online, writer: "node1", events: []EventKind{EventSlow}, noEvents: []EventKind{EventWriterChange},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.typ, tc.n, tc.mod)
			s := newSched(h)
			for i, o := range tc.first {
				s.check(h.opts.Servers[i].Name, o)
			}
			if w := h.writer(); w != "node1" {
				t.Fatalf("writer %q before the steps", w)
			}
			var evs []Event
			for _, st := range tc.steps {
				evs = append(evs, s.checkN(st.server, st.n, st.obs)...)
			}
			srv := h.server("node1")
			if srv.State != tc.state {
				t.Errorf("node1 %s (%s), want %s", srv.State, srv.Reason, tc.state)
			}
			if w := h.writer(); w != tc.writer {
				t.Errorf("writer %q, want %q (%s)", w, tc.writer, h.snap().WriterReason)
			}
			for name, want := range tc.otherState {
				if got := h.server(name); got.State != want {
					t.Errorf("%s %s (%s), want %s", name, got.State, got.Reason, want)
				}
			}
			for _, k := range tc.events {
				if !hasEventKind(evs, k) {
					t.Errorf("no %s event in %v", k, evs)
				}
			}
			for _, k := range tc.once {
				n := 0
				for _, e := range evs {
					if e.Kind == k {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%d %s events, want 1: %v", n, k, evs)
				}
			}
			for _, k := range tc.noEvents {
				if hasEventKind(evs, k) {
					t.Errorf("unexpected %s event in %v", k, evs)
				}
			}
			if tc.reason != "" && !strings.Contains(srv.Reason, tc.reason) {
				t.Errorf("node1 reason %q lacks %q", srv.Reason, tc.reason)
			}
			if got := !h.st.Health(0).FailingSince.IsZero(); tc.failing != "" && got != (tc.failing == "yes") {
				t.Errorf("node1 FailingSince set: %v, want %s", got, tc.failing)
			}
		})
	}
}

func TestCheckCounts(t *testing.T) {
	h := newHarness(t, TypeReplication, 1, nil)
	s := newSched(h)
	s.checkN("node1", 3, writableObs())
	s.checkN("node1", 2, timedOut(4))
	s.checkN("node1", 3, timedOut(0)) // kept: lone writer
	s.check("node1", overloadedObs(1040))
	s.check("node1", writableObs())
	want := CheckCounts{Good: 4, Failed: 3, Slow: 2, Overloaded: 1, Kept: 2, NoTx: -1}
	if got := h.st.Servers[0].Checks; got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// TestStopLeavesRoutingWithinBound replays a SIGSTOP at every offset of a
// check interval, with quick and with slow (loaded) checks and continuous
// client traffic until the stop: a replica, and a primary that has a
// replica, leave routing within 2 × timeout + interval (1.5 s) of the stop
// on the checks' own clock. A check that was running when the server
// stopped may count as slow (clients completed statements before the
// stop), but the checks after the stop see nothing complete. A replica
// that clients wait on leaves after the first check that started after
// the stop: within timeout + interval. A lone writer leaves within
// lone_writer_grace + timeout.
func TestStopLeavesRoutingWithinBound(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		server  string
		waiting int64 // client statements stuck on it after the stop
		bound   time.Duration
	}{
		{"replica", 3, "node2", 0, 2*simTimeout + simInterval},
		{"replica clients wait on", 3, "node2", 2, simTimeout + simInterval},
		{"primary with replicas", 3, "node1", 0, 2*simTimeout + simInterval},
		{"primary with replicas clients wait on", 3, "node1", 2, 2*simTimeout + simInterval},
		{"lone writer", 1, "node1", 2, DefaultLoneWriterGrace + simTimeout},
	} {
		for _, checkTook := range []time.Duration{2 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond} {
			worst := time.Duration(0)
			for offset := time.Duration(0); offset < simInterval; offset += 10 * time.Millisecond {
				h := newHarness(t, TypeReplication, tc.n, func(o *Options) { o.Interval, o.Timeout = simInterval, simTimeout })
				s := newSched(h)
				first := []topology.Observation{writableObs(), replicaObs(0), replicaObs(0)}
				for i := range tc.n {
					s.check(h.opts.Servers[i].Name, first[i])
				}
				good := first[h.idx(tc.server)]
				good.ClientReplies = 10
				// Ten healthy checks, then the stop at offset into the
				// interval of the eleventh.
				for range 10 {
					s.check(tc.server, took(good, checkTook))
				}
				stop := s.next[tc.server].Add(offset)
				var out time.Time
				for k := 0; k < 40 && out.IsZero(); k++ {
					start := s.next[tc.server]
					var o topology.Observation
					switch {
					case start.Add(checkTook).Before(stop):
						o = took(good, checkTook) // answered before the stop
					case start.Before(stop):
						o = timedOut(3) // clients completed statements until the stop
					default:
						o = stuck(tc.waiting)
					}
					for _, e := range s.check(tc.server, o) {
						if e.Kind == EventStateChange && e.Server == tc.server && e.To != "ONLINE" {
							out = e.Time
						}
					}
				}
				if out.IsZero() {
					t.Fatalf("%s, checks of %s, stop %s into the interval: never left routing", tc.name, checkTook, offset)
				}
				worst = max(worst, out.Sub(stop))
			}
			t.Logf("%s, checks of %s: out of routing at most %s after the stop", tc.name, checkTook, worst)
			if worst > tc.bound {
				t.Errorf("%s, checks of %s: out of routing %s after the stop, want ≤ %s", tc.name, checkTook, worst, tc.bound)
			}
		}
	}
}
