package executor

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/topology"
)

// fakeMonitor serves a fixed snapshot and observations.
type fakeMonitor struct {
	snap *topology.Snapshot
	obs  map[string]*topology.Observation
	// setWriterErr is what SetWriter returns.
	setWriterErr error
	// term is the last SetTerm.
	term uint64
}

func (m *fakeMonitor) Snapshot() *topology.Snapshot { return m.snap }
func (m *fakeMonitor) Observations() []topology.Health {
	var out []topology.Health
	for _, s := range m.snap.Servers {
		out = append(out, topology.Health{Name: s.Name, Last: m.obs[s.Name]})
	}
	return out
}
func (m *fakeMonitor) SetWriter(string, string) error { return m.setWriterErr }
func (m *fakeMonitor) Fence(string, string) error     { return nil }
func (m *fakeMonitor) Unfence(string) error           { return nil }
func (m *fakeMonitor) SetTerm(t uint64) error         { m.term = t; return nil }
func (m *fakeMonitor) Changed() <-chan struct{}       { return nil } // the snapshot is fixed
func (m *fakeMonitor) CheckFresh(context.Context, ...string) map[string]*topology.Observation {
	return nil
}

func markExecutor(t *testing.T) (*Executor, *fakeMonitor) {
	t.Helper()
	mon := &fakeMonitor{
		snap: &topology.Snapshot{Cluster: "c", Type: "replication", Writer: 0,
			Servers: []topology.Server{{Name: "node1", Role: topology.RolePrimary}, {Name: "node2", Role: topology.RoleReplica}}},
		obs: map[string]*topology.Observation{},
	}
	e, err := New(Options{Cluster: "c", StateDir: t.TempDir()}, mon, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.facts["node1"] = failover.ServerFacts{SemiSync: failover.SemiSyncSettings{Known: true, SourceEnabled: true}}
	return e, mon
}

var seq uint64

func primaryObs(pos string, on bool, waiting int64) *topology.Observation {
	seq++
	return &topology.Observation{Server: "node1", Seq: seq, Time: time.Unix(int64(seq), 0), OK: true, Uptime: 100000,
		GTID:     topology.GTIDState{Binlog: topology.MustParseGTIDPos(pos)},
		SemiSync: topology.SemiSyncStatus{Known: true, SourceOn: on, WaitSessions: waiting}}
}

// The acknowledged mark: under semi-sync only a position seen one check
// before a check with no commit waiting; after a fallback to asynchronous
// replication, everything seen.
func TestAckedMark(t *testing.T) {
	e, mon := markExecutor(t)
	step := func(o *topology.Observation) string {
		mon.obs["node1"] = o
		e.noteAcked()
		m := e.ackedMark()
		if m == nil {
			return "-"
		}
		s := m.Pos.String()
		if m.Async {
			s += " async"
		}
		return s
	}
	for i, c := range []struct {
		o    *topology.Observation
		want string
	}{
		{primaryObs("0-1-10", true, 0), "-"},             // nothing seen before
		{primaryObs("0-1-20", true, 0), "0-1-10"},        // the previous check's position
		{primaryObs("0-1-30", true, 2), "0-1-10"},        // commits wait: keep the mark
		{primaryObs("0-1-40", true, 0), "0-1-30"},        // they finished waiting
		{primaryObs("0-1-50", false, 0), "0-1-50 async"}, // fell back: acknowledged without a replica
		{primaryObs("0-1-60", true, 0), "0-1-50 async"},  // back on: the async part stays known
		{primaryObs("0-1-70", true, 0), "0-1-60 async"},
	} {
		if got := step(c.o); got != c.want {
			t.Fatalf("step %d: mark %s, want %s", i, got, c.want)
		}
	}
	// The primary's only replica dies after acknowledging 0-1-72; the
	// next commit (0-1-73) waits forever (wait_no_slave): everything
	// before the waiting commits was acknowledged.
	state := func(o *topology.Observation, st string) *topology.Observation {
		o.GTID.BinlogState = topology.MustParseGTIDPos(st)
		return o
	}
	for i, c := range []struct {
		o    *topology.Observation
		want string
	}{
		{state(primaryObs("0-1-73", true, 1), "0-2-5,0-1-73"), "0-1-60 async"}, // no binlog state seen before
		{state(primaryObs("0-1-73", true, 1), "0-2-5,0-1-73"), "0-1-72 async"},
		{state(primaryObs("0-1-73", true, 1), "0-2-5,0-1-73"), "0-1-72 async"},
		// Another server's transaction in the domain at or after the
		// sequence number: its identity is unknown, the mark stays.
		{state(primaryObs("0-1-80", true, 0), "0-2-79,0-1-80"), "0-1-73 async"},
		{state(primaryObs("0-1-80", true, 0), "0-2-79,0-1-80"), "0-1-80 async"},
		{state(primaryObs("0-1-81", true, 2), "0-2-79,0-1-81"), "0-1-80 async"},
		{state(primaryObs("0-1-81", true, 2), "0-2-79,0-1-81"), "0-1-80 async"},
	} {
		if got := step(c.o); got != c.want {
			t.Fatalf("waiting step %d: mark %s, want %s", i, got, c.want)
		}
	}
	// A check asked for early, 100 ms after the previous one, is not
	// compared with it; the next regular one is (with the older one).
	early := state(primaryObs("0-1-90", true, 0), "0-2-79,0-1-90")
	early.Time = mon.obs["node1"].Time.Add(100 * time.Millisecond)
	if got := step(early); got != "0-1-80 async" {
		t.Fatalf("early check: mark %s", got)
	}
	if got := step(state(primaryObs("0-1-91", true, 0), "0-2-79,0-1-91")); got != "0-1-81 async" {
		t.Fatalf("after an early check: mark %s, want the position of the check before it", got)
	}
	// A restart between two checks: the earlier position is not compared
	// with the restarted server's waiting commits.
	restarted := state(primaryObs("0-1-95", true, 0), "0-2-79,0-1-95")
	restarted.Uptime, restarted.Time = 0, restarted.Time.Add(2*time.Second)
	if got := step(restarted); got != "0-1-81 async" {
		t.Fatalf("restart: mark %s", got)
	}
	// A failed check changes nothing: the mark stays for the decision.
	mon.obs["node1"] = &topology.Observation{Server: "node1", Seq: 1000, OK: false}
	e.noteAcked()
	if m := e.ackedMark(); m == nil || m.Server != "node1" || m.Pos.String() != "0-1-81" || !m.SemiSync {
		t.Fatalf("mark after a failed check: %+v", m)
	}
}

func TestParseSemiSyncSettings(t *testing.T) {
	ss := parseSemiSyncSettings([][]string{
		{"rpl_semi_sync_master_enabled", "ON"}, {"rpl_semi_sync_master_timeout", "10000"},
		{"rpl_semi_sync_master_wait_no_slave", "OFF"}, {"rpl_semi_sync_slave_enabled", "ON"},
	})
	if !ss.Known || !ss.SourceEnabled || !ss.ReplicaEnabled || ss.WaitNoReplica || ss.Timeout != 10*time.Second || ss.SourceName != "" {
		t.Fatalf("%+v", ss)
	}
	ss = parseSemiSyncSettings([][]string{{"rpl_semi_sync_source_enabled", "OFF"}, {"rpl_semi_sync_source_wait_no_replica", "ON"}})
	if !ss.Known || ss.SourceEnabled || !ss.WaitNoReplica || ss.SourceName != "rpl_semi_sync_source" || ss.ReplicaName != "rpl_semi_sync_replica" {
		t.Fatalf("%+v", ss)
	}
	if ss := parseSemiSyncSettings(nil); ss.Known {
		t.Fatal("no variables: unknown")
	}
}

func TestBypassesReadOnly(t *testing.T) {
	for _, c := range []struct {
		grants []string
		want   string
	}{
		{[]string{"GRANT ALL PRIVILEGES ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*X'"}, "ALL PRIVILEGES ON *.*"},
		{[]string{"GRANT USAGE ON *.* TO `app`@`%`", "GRANT ALL PRIVILEGES ON `shop`.* TO `app`@`%`"}, ""},
		{[]string{"GRANT SELECT, INSERT, READ_ONLY ADMIN ON *.* TO `app`@`%`"}, "READ_ONLY ADMIN ON *.*"},
		{[]string{"GRANT SELECT, SUPER ON *.* TO `app`@`localhost`"}, "SUPER ON *.*"},
		{[]string{"GRANT SELECT, INSERT, UPDATE, DELETE ON *.* TO `app`@`%`"}, ""},
	} {
		rows := make([][]string, len(c.grants))
		for i, g := range c.grants {
			rows[i] = []string{g}
		}
		if got := bypassesReadOnly(rows); got != c.want {
			t.Errorf("%q: %q, want %q", c.grants, got, c.want)
		}
	}
}

func TestParallelRun(t *testing.T) {
	steps := []failover.Step{
		{Kind: failover.FenceRouter, Server: "node1"},
		{Kind: failover.SetReadOnly, Server: "node1", OnFail: failover.Continue},
		{Kind: failover.StopIOThread, Server: "node2", OnFail: failover.Continue},
		{Kind: failover.StopIOThread, Server: "node3", OnFail: failover.Continue},
		{Kind: failover.FenceHook, Server: "node1"},
	}
	if j := parallelRun(steps, 1); j != 4 {
		t.Fatalf("run from 1 ends at %d, want 4", j)
	}
	if j := parallelRun(steps, 0); j != 0 {
		t.Fatalf("fence-router runs alone: %d", j)
	}
	steps[3].Server = "node2"
	if j := parallelRun(steps, 1); j != 3 {
		t.Fatalf("two steps on one server do not run at once: %d", j)
	}
}

func TestRedact(t *testing.T) {
	for _, q := range []string{
		"CHANGE MASTER TO MASTER_HOST='h', MASTER_USER='r', MASTER_PASSWORD='secret', MASTER_USE_GTID=slave_pos",
		"CHANGE REPLICATION SOURCE TO SOURCE_HOST='h', SOURCE_USER='r', SOURCE_PASSWORD='secret', SOURCE_AUTO_POSITION=1",
	} {
		if got := Redact(q); strings.Contains(got, "secret") {
			t.Errorf("redact left the password: %s", got)
		}
	}
}
