package monitor

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

func TestHysteresis(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, nil)
	h.round(writableObs(), replicaObs(0))
	h.expect("node2", topology.Online, true, false)

	// One failure is not enough (fail_after 2).
	h.see("node2", failedObs("i/o timeout"))
	h.expect("node2", topology.Online, true, false)
	h.see("node2", replicaObs(0))
	h.see("node2", failedObs("i/o timeout"))
	h.expect("node2", topology.Online, true, false)
	// Two in a row are.
	evs := h.see("node2", failedObs("i/o timeout"))
	h.expect("node2", topology.Shunned, false, false)
	if len(evs) != 1 || evs[0].Kind != EventStateChange || evs[0].From != "ONLINE" || evs[0].To != "SHUNNED" {
		t.Fatalf("events %+v", evs)
	}
	if !strings.Contains(evs[0].Reason, "2 consecutive failed checks (check failed: i/o timeout); it returns after 5 good checks") {
		t.Fatalf("reason %q", evs[0].Reason)
	}
	// Four good checks are not enough (recover_after 5); the fifth is.
	h.seeN("node2", 4, replicaObs(0))
	h.expect("node2", topology.Shunned, false, false)
	h.see("node2", replicaObs(0))
	h.expect("node2", topology.Online, true, false)
	// A failure in the middle of recovery starts the count again.
	h.seeN("node2", 2, failedObs("x"))
	h.seeN("node2", 4, replicaObs(0))
	h.see("node2", failedObs("x"))
	h.seeN("node2", 4, replicaObs(0))
	h.expect("node2", topology.Shunned, false, false)
	h.see("node2", replicaObs(0))
	h.expect("node2", topology.Online, true, false)
	if n := h.countEvents(EventStateChange, "node2"); n != 5 { // startup, down, up, down, up
		t.Fatalf("%d state changes", n)
	}
}

// TestNoFlappingOnLossyLink: a link that loses every other check neither
// takes an Online server out nor lets a Shunned one back.
func TestNoFlappingOnLossyLink(t *testing.T) {
	h := newHarness(t, TypeReplication, 3, nil)
	h.round(writableObs(), replicaObs(0), replicaObs(0))
	before := h.countEvents(EventStateChange, "")
	for range 50 {
		h.see("node2", failedObs("timeout"))
		h.see("node2", replicaObs(0))
		h.see("node1", failedObs("timeout"))
		h.see("node1", writableObs())
	}
	h.expect("node2", topology.Online, true, false)
	h.expect("node1", topology.Online, true, true)
	h.expectWriter("node1")
	if n := h.countEvents(EventStateChange, ""); n != before {
		t.Fatalf("%d state changes on a lossy link", n-before)
	}

	// node3 is Shunned, then its link loses every other check: it stays out.
	h.seeN("node3", 2, failedObs("timeout"))
	h.expect("node3", topology.Shunned, false, false)
	before = h.countEvents(EventStateChange, "node3")
	for range 50 {
		h.see("node3", replicaObs(0))
		h.see("node3", failedObs("timeout"))
	}
	h.expect("node3", topology.Shunned, false, false)
	if n := h.countEvents(EventStateChange, "node3"); n != before {
		t.Fatalf("node3 flapped %d times", n-before)
	}
}

func TestHysteresisCustomThresholds(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, func(o *Options) { o.FailAfter, o.RecoverAfter = 3, 1 })
	h.round(writableObs(), replicaObs(0))
	h.seeN("node2", 2, failedObs("x"))
	h.expect("node2", topology.Online, true, false)
	h.see("node2", failedObs("x"))
	h.expect("node2", topology.Shunned, false, false)
	h.see("node2", replicaObs(0))
	h.expect("node2", topology.Online, true, false)
}

func TestStartup(t *testing.T) {
	h := newHarness(t, TypeReplication, 3, nil)
	snap := h.snap()
	if snap.Writer != -1 || snap.WriterReason == "" || snap.Term != 0 {
		t.Fatalf("%+v", snap)
	}
	for _, s := range snap.Servers {
		if s.State != topology.Shunned || s.Readable || s.Writable || s.Reason != "not checked yet" {
			t.Fatalf("%+v", s)
		}
	}
	// The first good check brings a server Online at once, but the writer
	// is chosen only when every server has been seen.
	h.see("node1", writableObs())
	h.expect("node1", topology.Online, true, true)
	h.expectWriter("")
	h.see("node2", replicaObs(0))
	h.expectWriter("")
	// A server that fails its first checks is not Online.
	h.see("node3", failedObs("connection refused"))
	h.expect("node3", topology.Shunned, false, false)
	h.expectWriter("node1")
	if h.st.Term != 1 {
		t.Fatalf("term %d", h.st.Term)
	}
	if got := h.server("node1").Role; got != topology.RolePrimary {
		t.Fatalf("role %v", got)
	}
	if got := h.server("node2").Role; got != topology.RoleReplica {
		t.Fatalf("role %v", got)
	}
	// node3 needs recover_after good checks: it has failed.
	h.seeN("node3", 4, replicaObs(0))
	h.expect("node3", topology.Shunned, false, false)
	h.see("node3", replicaObs(0))
	h.expect("node3", topology.Online, true, false)
}

func TestDiscoveryIgnoresConfiguredRoleWhenServersDisagree(t *testing.T) {
	// The configured primary was demoted while Vigil was down: the only
	// server with read_only=OFF is the writer.
	h := newHarness(t, TypeReplication, 3, nil)
	h.round(replicaObs(0), writableObs(), replicaObs(0))
	h.expectWriter("node2")
	if h.server("node1").Role != topology.RoleReplica || h.server("node2").Role != topology.RolePrimary {
		t.Fatal("roles")
	}
}

func TestConflict(t *testing.T) {
	h := newHarness(t, TypeReplication, 3, nil)
	h.round(writableObs(), replicaObs(0), replicaObs(0))
	h.expectWriter("node1")
	term := h.st.Term

	// node2 reports read_only=OFF: it gets no writes, an event says so.
	evs := h.see("node2", writableObs())
	h.expectWriter("node1")
	if h.st.Term != term {
		t.Fatal("term moved")
	}
	s := h.server("node2")
	if !s.Conflict || s.Role != topology.RoleReplica || !strings.Contains(s.Reason, "conflict") {
		t.Fatalf("%+v", s)
	}
	if !hasEvent(evs, EventConflict, "node2") {
		t.Fatalf("events %+v", evs)
	}
	// It stays that way, with one event.
	h.seeN("node2", 10, writableObs())
	if h.countEvents(EventConflict, "node2") != 1 {
		t.Fatal("conflict event repeated")
	}
	// The writer fails: still no promotion of node2.
	h.seeN("node1", 2, failedObs("timeout"))
	h.expectWriter("")
	if !strings.Contains(h.snap().WriterReason, "node1 SHUNNED") {
		t.Fatalf("writer reason %q", h.snap().WriterReason)
	}
	h.seeN("node2", 10, writableObs())
	h.expectWriter("")
	// The writer returns and is the writer again.
	h.seeN("node1", 5, writableObs())
	h.expectWriter("node1")
	// node2 goes back to read_only=ON.
	evs = h.see("node2", replicaObs(0))
	if !hasEvent(evs, EventConflictCleared, "node2") || h.server("node2").Conflict {
		t.Fatalf("events %+v", evs)
	}
}

func TestConflictAtStartup(t *testing.T) {
	// Two servers with read_only=OFF, one of them the configured primary:
	// it is kept, the other is a conflict.
	h := newHarness(t, TypeReplication, 3, nil)
	h.round(writableObs(), writableObs(), replicaObs(0))
	h.expectWriter("node1")
	if !h.server("node2").Conflict || h.server("node1").Conflict {
		t.Fatal("conflict flags")
	}

	// Neither is the configured primary: no writer at all.
	h = newHarness(t, TypeReplication, 3, nil)
	h.round(replicaObs(0), writableObs(), writableObs())
	h.expectWriter("")
	if !strings.Contains(h.snap().WriterReason, "conflict: node2, node3") {
		t.Fatalf("%q", h.snap().WriterReason)
	}
	if h.countEvents(EventConflict, "") != 2 {
		t.Fatal("conflict events")
	}
	// One of them goes read_only=ON: the other is found as the writer.
	h.see("node3", replicaObs(0))
	h.expectWriter("node2")
}

func TestFailedPrimaryIsNotReplacedByItself(t *testing.T) {
	// Once found, a replication writer changes only by SetWriter: after
	// the primary is fenced, a server with read_only=OFF is not adopted.
	h := newHarness(t, TypeReplication, 3, nil)
	h.round(writableObs(), replicaObs(0), replicaObs(0))
	term := h.st.Term
	if err := h.cmd(fence(0, "failover")); err != nil {
		t.Fatal(err)
	}
	h.expectWriter("")
	h.expect("node1", topology.OfflineHard, false, false)
	if h.st.Term != term+1 {
		t.Fatal("fencing the writer must bump the term")
	}
	h.see("node2", writableObs())
	h.expectWriter("")
	// The failover executor names node2.
	if err := h.cmd(setWriter(1, &h.opts, "failover from node1")); err != nil {
		t.Fatal(err)
	}
	h.expectWriter("node2")
	if h.st.Term != term+2 {
		t.Fatalf("term %d", h.st.Term)
	}
	if !strings.Contains(h.snap().Servers[1].Reason, "read_only=OFF") || !hasEventKind(h.events, EventWriterChange) {
		t.Fatal("writer change")
	}
	// node1 is unfenced and still read_only=OFF: a conflict, not a writer.
	if err := h.cmd(unfence(0)); err != nil {
		t.Fatal(err)
	}
	h.see("node1", writableObs())
	h.expectWriter("node2")
	if !h.server("node1").Conflict {
		t.Fatal("node1 should be a conflict")
	}
}

func TestSetWriterBeforePromotion(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, nil)
	h.round(writableObs(), replicaObs(0))
	_ = h.cmd(fence(0, "dead"))
	if err := h.cmd(setWriter(1, &h.opts, "switchover")); err != nil {
		t.Fatal(err)
	}
	// node2 still reports read_only=ON: named but not routed yet.
	h.expectWriter("")
	if !strings.Contains(h.snap().WriterReason, "node2 is not writable") {
		t.Fatalf("%q", h.snap().WriterReason)
	}
	h.see("node2", writableObs())
	h.expectWriter("node2")
	if err := h.cmd(setWriter(0, &h.opts, "x")); err == nil {
		t.Fatal("a fenced server cannot be the writer")
	}
}

func TestAdminStates(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, nil)
	h.round(writableObs(), replicaObs(0))
	if err := h.cmd(setAdmin(1, topology.OfflineSoft, "maintenance")); err != nil {
		t.Fatal(err)
	}
	h.expect("node2", topology.OfflineSoft, false, false)
	// Checks go on underneath; the override wins.
	h.seeN("node2", 3, replicaObs(0))
	h.expect("node2", topology.OfflineSoft, false, false)
	if err := h.cmd(setAdmin(1, topology.Online, "")); err != nil {
		t.Fatal(err)
	}
	h.expect("node2", topology.Online, true, false)

	// OFFLINE_HARD on the writer takes writes away.
	_ = h.cmd(setAdmin(0, topology.OfflineHard, "disk replacement"))
	h.expect("node1", topology.OfflineHard, false, false)
	h.expectWriter("")
	_ = h.cmd(setAdmin(0, topology.Online, ""))
	h.expectWriter("node1")

	if err := h.cmd(setAdmin(0, topology.Shunned, "")); err == nil {
		t.Fatal("SHUNNED is not an operator state")
	}
	_ = h.cmd(fence(1, "split brain"))
	if err := h.cmd(setAdmin(1, topology.Online, "")); err == nil {
		t.Fatal("ONLINE on a fenced server must fail")
	}
	h.seeN("node2", 10, replicaObs(0))
	h.expect("node2", topology.OfflineHard, false, false)
	_ = h.cmd(unfence(1))
	h.expect("node2", topology.Online, true, false)
	changes := 0
	for _, e := range h.events {
		if e.Kind == EventStateChange && e.Server == "node2" {
			changes++
		}
	}
	if changes != 5 { // startup, soft, online, hard (fence), online
		t.Fatalf("%d node2 state changes", changes)
	}
}

func TestDownIsOfflineHard(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, nil)
	h.round(writableObs(), replicaObs(0))
	h.see("node2", refusedObs())
	h.expect("node2", topology.Online, true, false)
	h.see("node2", refusedObs())
	h.expect("node2", topology.OfflineHard, false, false)
	// Paused instead of dead: Shunned.
	h.see("node2", failedObs("i/o timeout"))
	h.expect("node2", topology.Shunned, false, false)
	h.seeN("node2", 5, replicaObs(0))
	h.expect("node2", topology.Online, true, false)
}

func TestLag(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, func(o *Options) { o.MaxReplicationLag = 2 * time.Second })
	h.round(writableObs(), replicaObs(0))
	evs := h.see("node2", replicaObs(3))
	if !hasEvent(evs, EventLag, "node2") {
		t.Fatalf("%+v", evs)
	}
	h.expect("node2", topology.Online, true, false) // one check: hysteresis
	h.see("node2", replicaObs(4))
	h.expect("node2", topology.Shunned, false, false)
	if r := h.server("node2").Reason; !strings.Contains(r, "lag 4.0s > max_replication_lag 2s") {
		t.Fatalf("reason %q", r)
	}
	if got := h.server("node2").LagSeconds; got != 4 {
		t.Fatalf("lag %v", got)
	}
	// SQL thread restarted, catching up.
	h.seeN("node2", 4, replicaObs(1))
	h.expect("node2", topology.Shunned, false, false)
	h.see("node2", replicaObs(0))
	h.expect("node2", topology.Online, true, false)
	if h.countEvents(EventLag, "node2") != 1 || h.countEvents(EventLagCleared, "node2") != 1 {
		t.Fatal("lag events")
	}
}

func TestOverloadIsNotDeath(t *testing.T) {
	for _, code := range []uint16{1040, 1203, 1226, 1045} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			h := newHarness(t, TypeReplication, 2, nil)
			h.round(writableObs(), replicaObs(0))
			term := h.st.Term
			evs := h.see("node1", overloadedObs(code))
			if !hasEvent(evs, EventOverloaded, "node1") {
				t.Fatalf("%+v", evs)
			}
			h.seeN("node1", 20, overloadedObs(code))
			h.expect("node1", topology.Online, true, true)
			h.expectWriter("node1")
			if h.st.Term != term || h.countEvents(EventOverloaded, "node1") != 1 || !h.server("node1").Overloaded {
				t.Fatal("overload changed the writer or repeated its event")
			}
			hl := h.st.Health(0)
			if !hl.Overloaded || hl.LastErrCode != code || hl.ConsecutiveFailures != 0 {
				t.Fatalf("%+v", hl)
			}
			// Overloaded while the monitor connection still answers.
			o := writableObs()
			o.Overloaded, o.OverloadReason = true, "Threads_connected 6 ≥ max_connections 5"
			h.seeN("node1", 3, o)
			h.expect("node1", topology.Online, true, true)
			if h.countEvents(EventOverloaded, "node1") != 1 {
				t.Fatal("event repeated")
			}
			evs = h.see("node1", writableObs())
			if !hasEvent(evs, EventOverloadCleared, "node1") || h.server("node1").Overloaded {
				t.Fatalf("%+v", evs)
			}
		})
	}
	// A real failure still counts.
	h := newHarness(t, TypeReplication, 2, nil)
	h.round(writableObs(), replicaObs(0))
	h.see("node1", overloadedObs(1040))
	h.seeN("node1", 2, failedObs("timeout"))
	h.expect("node1", topology.Shunned, false, false)
	if h.server("node1").Overloaded {
		t.Fatal("a timeout clears the overload flag")
	}
}

func TestTermOnlyGrows(t *testing.T) {
	for _, typ := range []string{TypeReplication, TypeGalera, TypeReadOnly} {
		rng := rand.New(rand.NewPCG(1, uint64(len(typ))))
		h := newHarness(t, typ, 4, nil)
		choices := []topology.Observation{writableObs(), replicaObs(0), replicaObs(100), failedObs("x"), refusedObs(),
			overloadedObs(1040), galeraObs(0, nil), galeraObs(1, func(w *topology.WsrepStatus) { w.Ready = false })}
		for range 3000 {
			i := rng.IntN(4)
			switch rng.IntN(20) {
			case 0:
				_ = h.cmd(fence(i, "x"))
			case 1:
				_ = h.cmd(unfence(i))
			case 2:
				_ = h.cmd(setWriter(i, &h.opts, "x"))
			case 3:
				_ = h.cmd(setAdmin(i, topology.State(rng.IntN(4)), "x"))
			default:
				h.see(h.opts.Servers[i].Name, choices[rng.IntN(len(choices))])
			}
			s := h.snap()
			if s.Writer >= 0 {
				w := s.Servers[s.Writer]
				if w.State != topology.Online || !w.Writable {
					t.Fatalf("%s: routed writer %+v", typ, w)
				}
			}
			for _, srv := range s.Servers {
				if srv.State != topology.Online && (srv.Readable || srv.Writable) {
					t.Fatalf("%s: %+v", typ, srv)
				}
			}
		}
	}
}

// replicas' I/O threads start reconnecting before the monitor has taken
// the primary out; they must stay readable throughout.
func TestPrimaryCrashKeepsReplicasReadable(t *testing.T) {
	h := newHarness(t, TypeReplication, 3, nil)
	h.round(writableObs(), replicaObs(0), replicaObs(0))
	connecting := withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) {
		rs.IORunning, rs.LastIOErrno, rs.LastIOError = topology.IOConnecting, 2003, "Can't connect"
	})
	for range 3 {
		h.see("node2", connecting)
		h.see("node3", connecting)
	}
	h.seeN("node1", 2, refusedObs())
	h.expectWriter("")
	for range 20 {
		h.see("node2", connecting)
		h.see("node3", connecting)
	}
	h.expect("node2", topology.Online, true, false)
	h.expect("node3", topology.Online, true, false)
	h.expect("node1", topology.OfflineHard, false, false)
}

// TestReplicaCutOffFromLivePrimary: a replica whose I/O thread cannot reach
// a primary that is up grows stale; after max_replication_lag it is out.
func TestReplicaCutOffFromLivePrimary(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, func(o *Options) { o.MaxReplicationLag = time.Second })
	h.round(writableObs(), replicaObs(0))
	connecting := withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) { rs.IORunning = topology.IOConnecting })
	for range 4 { // 200ms apart: the harness steps 100ms per observation
		h.see("node2", connecting)
		h.see("node1", writableObs())
	}
	h.expect("node2", topology.Online, true, false)
	for range 5 {
		h.see("node2", connecting)
		h.see("node1", writableObs())
	}
	h.expect("node2", topology.Shunned, false, false)
	if r := h.server("node2").Reason; !strings.Contains(r, "I/O thread reconnecting") {
		t.Fatal(r)
	}
	// Reconnected and caught up: back after recover_after checks.
	h.seeN("node2", 5, replicaObs(0))
	h.expect("node2", topology.Online, true, false)
}

func TestFailingSince(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, nil)
	h.round(writableObs(), replicaObs(0))
	if !h.st.Health(0).FailingSince.IsZero() {
		t.Fatal("failing while healthy")
	}
	h.see("node1", refusedObs())
	first := h.now
	h.see("node1", failedObs("timeout"))
	if got := h.st.Health(0).FailingSince; !got.Equal(first) {
		t.Fatalf("FailingSince %v, want %v", got, first)
	}
	h.see("node1", overloadedObs(1040))
	if !h.st.Health(0).FailingSince.IsZero() {
		t.Fatal("an overload refusal is an answer")
	}
	h.see("node1", failedObs("timeout"))
	h.see("node1", writableObs())
	if !h.st.Health(0).FailingSince.IsZero() {
		t.Fatal("an answer ends the streak")
	}
	// A replica that answers but does not replicate is not failing.
	h.see("node2", withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) { rs.SQLRunning = false }))
	if !h.st.Health(1).FailingSince.IsZero() {
		t.Fatal("an answering replica is not failing")
	}
}

func TestLagSurvivesFailedCheck(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, func(o *Options) { o.MaxReplicationLag = 2 * time.Second })
	h.round(writableObs(), replicaObs(0))
	h.see("node2", replicaObs(5))
	h.see("node2", failedObs("timeout"))
	h.see("node2", replicaObs(6))
	if h.countEvents(EventLag, "node2") != 1 || h.countEvents(EventLagCleared, "node2") != 0 {
		t.Fatalf("%v", h.events)
	}
}

func heartbeatObs(o topology.Observation, ts time.Time, age float64) topology.Observation {
	o.HeartbeatTS, o.HeartbeatLag = ts, age
	return o
}

// TestHeartbeatLag: with a heartbeat table, a replica's lag is how much
// older its newest heartbeat is than the primary's, so a dead primary (no
// new heartbeats) does not make caught-up replicas lag.
func TestHeartbeatLag(t *testing.T) {
	h := newHarness(t, TypeReplication, 3, func(o *Options) { o.MaxReplicationLag = 2 * time.Second })
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	h.round(heartbeatObs(writableObs(), t0, 0.1), heartbeatObs(replicaObs(0), t0, 0.2), heartbeatObs(replicaObs(0), t0, 0.2))
	// node3 misses 3s of heartbeats while Seconds_Behind_Master says 0.
	h.see("node1", heartbeatObs(writableObs(), t0.Add(3*time.Second), 0.1))
	h.seeN("node3", 2, heartbeatObs(replicaObs(0), t0, 3.2))
	h.expect("node3", topology.Shunned, false, false)
	if lag := h.server("node3").LagSeconds; lag != 3 {
		t.Fatalf("lag %v", lag)
	}
	h.see("node2", heartbeatObs(replicaObs(0), t0.Add(3*time.Second), 0.3))
	if lag := h.server("node2").LagSeconds; lag != 0 {
		t.Fatalf("lag %v", lag)
	}
	// The primary dies: node2's newest heartbeat ages, but it has all the
	// primary had. It stays readable.
	h.seeN("node1", 2, refusedObs())
	connecting := withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) { rs.IORunning = topology.IOConnecting })
	for age := 1.0; age < 20; age++ {
		h.see("node2", heartbeatObs(connecting, t0.Add(3*time.Second), age))
	}
	h.expect("node2", topology.Online, true, false)
	if hl := h.st.Health(1); hl.LagSeconds != 0 || hl.Last.Lag() < 19 {
		t.Fatalf("%+v", hl)
	}

	// Nothing writes heartbeats (the primary's newest row is old): the
	// heartbeat is ignored and Seconds_Behind_Master decides.
	h = newHarness(t, TypeReplication, 2, func(o *Options) { o.MaxReplicationLag = 2 * time.Second })
	h.round(heartbeatObs(writableObs(), t0, 600), heartbeatObs(replicaObs(0), t0.Add(-time.Minute), 660))
	h.seeN("node2", 6, heartbeatObs(replicaObs(0), t0.Add(-time.Minute), 660))
	h.expect("node2", topology.Online, true, false)
}

// A candidate shunned because the failover stopped its replication is
// routed at its first good check once named the writer, not after
// recover_after of them; a check that started before it turned writable
// and fails after it was named does not change that.
func TestPromotedCandidateOnlineDespiteALateBadCheck(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, nil)
	h.round(writableObs(), replicaObs(0))
	stopped := replicaObs(0)
	stopped.Replica.IORunning = topology.IONo
	h.seeN("node2", 3, stopped)
	_ = h.cmd(fence(0, "dead"))
	if err := h.cmd(setWriter(1, &h.opts, "failover")); err != nil {
		t.Fatal(err)
	}
	h.see("node2", stopped)
	h.see("node2", writableObs())
	h.expectWriter("node2")
}

// In a switchover the old writer is made read-only, then the new one is
// named: a check of the old one that started before that still shows
// read_only=OFF, and is no conflict; a later one would be.
func TestDemotedWriterNoStaleConflict(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, nil)
	h.round(writableObs(), replicaObs(0))
	started := h.now.Add(50 * time.Millisecond)
	if err := h.cmd(setWriterAt(1, &h.opts, "switchover", h.now.Add(100*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	h.see("node2", writableObs())
	h.expectWriter("node2")
	h.seeAt("node1", started, writableObs())
	if h.server("node1").Conflict || h.countEvents(EventConflict, "node1") != 0 {
		t.Fatal("a check from before the switchover made the old writer a conflict")
	}
	// A later check that shows it read-only but not replicating yet (a
	// bad check: its verdict stays the old, writable one) is no conflict.
	demoted := replicaObs(0)
	demoted.Replica.IORunning = topology.IONo
	h.see("node1", demoted)
	if h.server("node1").Conflict || h.countEvents(EventConflict, "node1") != 0 {
		t.Fatal("the demoted writer's stale verdict made it a conflict")
	}
	// A later check that timed out says nothing about read_only.
	slow := failedObs("i/o timeout")
	slow.TimedOut = true
	h.see("node1", slow)
	if h.server("node1").Conflict || h.countEvents(EventConflict, "node1") != 0 {
		t.Fatal("a failed check after the switchover made the old writer a conflict")
	}
	h.seeN("node1", 6, writableObs()) // back Online after its bad checks
	if !h.server("node1").Conflict {
		t.Fatal("a check after the switchover that shows read_only=OFF is a conflict")
	}
}

// TestMaxPacket: the snapshot carries each server's packet bound from its
// last good check (issue 25: Vigil answers 1153 before sending a command
// the server would refuse), and keeps it through a failed check.
func TestMaxPacket(t *testing.T) {
	for _, c := range []struct {
		maxAllowed, netBuffer string
		want                  int
	}{
		{"16777216", "16384", 16777216},
		{"4096", "16384", 16384}, // the server reads into its net_buffer_length buffer unchecked
		{"", "16384", 0},
		{"x", "", 0},
		{"65536", "", 65536},
	} {
		if got := maxPacket(c.maxAllowed, c.netBuffer); got != c.want {
			t.Errorf("maxPacket(%q, %q) = %d, want %d", c.maxAllowed, c.netBuffer, got, c.want)
		}
	}
	h := newHarness(t, TypeReplication, 2, nil)
	w, r := writableObs(), replicaObs(0)
	w.MaxPacket, r.MaxPacket = 65536, 1<<20
	h.round(w, r)
	if a, b := h.server("node1").MaxPacket, h.server("node2").MaxPacket; a != 65536 || b != 1<<20 {
		t.Fatalf("max packet %d, %d", a, b)
	}
	h.see("node2", failedObs("timeout"))
	if b := h.server("node2").MaxPacket; b != 1<<20 {
		t.Fatalf("after a failed check: %d", b)
	}
}
