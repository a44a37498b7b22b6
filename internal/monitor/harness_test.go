package monitor

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// harness drives the pure evaluator the way the monitor does: one
// observation at a time, time passed in.
type harness struct {
	t      *testing.T
	opts   Options
	st     State
	latest []*topology.Observation
	now    time.Time
	events []Event
}

func newHarness(t *testing.T, typ string, n int, mod func(*Options)) *harness {
	t.Helper()
	o := Options{Cluster: "c1", Type: typ}
	for i := 1; i <= n; i++ {
		s := Server{Name: fmt.Sprintf("node%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 3300+i), Weight: 1}
		if typ == TypeReplication {
			s.Role = "replica"
			if i == 1 {
				s.Role = "primary"
			}
		}
		o.Servers = append(o.Servers, s)
	}
	if mod != nil {
		mod(&o)
	}
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, opts: o, st: NewState(&o), latest: make([]*topology.Observation, n),
		now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
}

func (h *harness) idx(name string) int {
	for i, s := range h.opts.Servers {
		if s.Name == name {
			return i
		}
	}
	h.t.Fatalf("no server %s", name)
	return -1
}

// see feeds one observation of server name and returns the events.
func (h *harness) see(name string, o topology.Observation) []Event {
	h.t.Helper()
	h.now = h.now.Add(100 * time.Millisecond)
	return h.observe(name, h.now, o)
}

// seeAt feeds an observation of a check that started at start and took
// o.Took; the evaluation happens when it ends, as in the monitor.
func (h *harness) seeAt(name string, start time.Time, o topology.Observation) []Event {
	h.t.Helper()
	h.now = start.Add(o.Took)
	return h.observe(name, start, o)
}

func (h *harness) observe(name string, start time.Time, o topology.Observation) []Event {
	h.t.Helper()
	i := h.idx(name)
	o.Server = name
	o.Time = start
	if prev := h.latest[i]; prev != nil {
		o.Seq = prev.Seq + 1
	} else {
		o.Seq = 1
	}
	h.latest[i] = &o
	prevTerm, prevWriter := h.st.Term, h.st.Writer
	var evs []Event
	h.st, evs = Evaluate(h.st, h.latest, &h.opts, h.now)
	if h.st.Term < prevTerm || (h.st.Writer != prevWriter && !h.st.TermShared && h.st.Term != prevTerm+1) {
		h.t.Fatalf("term %d → %d with writer %d → %d", prevTerm, h.st.Term, prevWriter, h.st.Writer)
	}
	h.events = append(h.events, evs...)
	return evs
}

// seeN feeds the same observation n times.
func (h *harness) seeN(name string, n int, o topology.Observation) {
	h.t.Helper()
	for range n {
		h.see(name, o)
	}
}

// round feeds one observation per server, in order.
func (h *harness) round(obs ...topology.Observation) {
	h.t.Helper()
	for i, o := range obs {
		h.see(h.opts.Servers[i].Name, o)
	}
}

func (h *harness) cmd(f func(*State) error) error {
	h.t.Helper()
	next, evs, err := Command(h.st, f, h.latest, &h.opts, h.now)
	h.st = next
	h.events = append(h.events, evs...)
	return err
}

func (h *harness) snap() *topology.Snapshot { return h.st.Snapshot(&h.opts) }

func (h *harness) server(name string) topology.Server {
	return h.snap().Servers[h.idx(name)]
}

// expect checks a server's published state and access.
func (h *harness) expect(name string, state topology.State, r, w bool) {
	h.t.Helper()
	s := h.server(name)
	if s.State != state || s.Readable != r || s.Writable != w {
		h.t.Fatalf("%s: %s r=%v w=%v (%s), want %s r=%v w=%v", name, s.State, s.Readable, s.Writable, s.Reason, state, r, w)
	}
}

func (h *harness) writer() string {
	s := h.snap()
	if w := s.WriterServer(); w != nil {
		return w.Name
	}
	return ""
}

func (h *harness) expectWriter(name string) {
	h.t.Helper()
	if got := h.writer(); got != name {
		h.t.Fatalf("writer %q, want %q (%s)", got, name, h.snap().WriterReason)
	}
}

func (h *harness) countEvents(kind EventKind, server string) int {
	n := 0
	for _, e := range h.events {
		if e.Kind == kind && (server == "" || e.Server == server) {
			n++
		}
	}
	return n
}

// Observations.

func writableObs() topology.Observation {
	return topology.Observation{OK: true, ReadOnly: false, HeartbeatLag: -1, Flavor: topology.FlavorMariaDB}
}

func replicaObs(lag int64) topology.Observation {
	return topology.Observation{OK: true, ReadOnly: true, HeartbeatLag: -1, Flavor: topology.FlavorMariaDB,
		Replica: &topology.ReplicaStatus{IORunning: topology.IOYes, SQLRunning: true, SecondsBehind: lag, SQLRemainingDelay: -1}}
}

func withReplica(o topology.Observation, f func(*topology.ReplicaStatus)) topology.Observation {
	rs := *o.Replica
	f(&rs)
	o.Replica = &rs
	return o
}

func failedObs(err string) topology.Observation {
	return topology.Observation{Err: err, HeartbeatLag: -1}
}

func refusedObs() topology.Observation {
	return topology.Observation{Err: "dial tcp 127.0.0.1:3301: connect: connection refused", Refused: true, HeartbeatLag: -1}
}

func overloadedObs(code uint16) topology.Observation {
	return topology.Observation{Err: fmt.Sprintf("ERROR %d", code), ErrCode: code, Overloaded: true, OverloadCode: code,
		OverloadReason: fmt.Sprintf("new connections refused with error %d", code), HeartbeatLag: -1}
}

func galeraObs(index int, f func(*topology.WsrepStatus)) topology.Observation {
	w := &topology.WsrepStatus{On: true, LocalState: topology.WsrepSynced, LocalStateComment: "Synced",
		ClusterStatus: "Primary", ClusterSize: 3, Ready: true, Connected: true, RejectQueries: "NONE", LocalIndex: index}
	if f != nil {
		f(w)
	}
	return topology.Observation{OK: true, HeartbeatLag: -1, Wsrep: w, Flavor: topology.FlavorMariaDB}
}

func hasEvent(evs []Event, kind EventKind, server string) bool {
	for _, e := range evs {
		if e.Kind == kind && e.Server == server {
			return true
		}
	}
	return false
}

func hasEventKind(evs []Event, kind EventKind) bool {
	for _, e := range evs {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

// TestPrimaryCrashKeepsReplicasReadable: when the primary dies, the
