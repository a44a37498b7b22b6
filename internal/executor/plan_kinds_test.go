package executor

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
)

// Every plan kind — failover, switchover, Galera writer move, rejoin,
// restore-writer — in every flavour, run against the simulated cluster:
// the statements that ran on each server are, in order, exactly the
// statements of the displayed plan's steps that succeeded, and the
// displayed text shows each of them (the replication account masked).
// Every statement sent, reads included, is its flavour's
// (checkFlavorSQL): nothing says SLAVE or MASTER to MySQL 8.4.
func TestEveryPlanKindRunsWhatItShows(t *testing.T) {
	for _, flavor := range simFlavors {
		for _, kind := range []failover.PlanKind{failover.KindFailover, failover.KindSwitchover, failover.KindGaleraWriterMove, failover.KindRejoin, failover.KindRestoreWriter} {
			t.Run(flavor+"/"+kind.String(), func(t *testing.T) {
				sc := &scenario{t: t, dir: t.TempDir(), ctx: context.Background()}
				defer sc.close()
				servers := []string{"node1 primary gtid=100", "node2 replica gtid=100", "node3 replica gtid=98"}
				if kind == failover.KindGaleraWriterMove {
					servers = []string{"g1 galera wsrep=nonprimary", "g2 galera", "g3 galera weight=2"}
				}
				if err := sc.cluster(map[string]string{"flavor": flavor, "semisync": "on", "detect_after": "2s"}, servers); err != nil {
					t.Fatal(err)
				}
				var shown string
				var res Result
				switch kind {
				case failover.KindFailover, failover.KindGaleraWriterMove:
					if kind == failover.KindFailover {
						sc.killNode1()
					}
					d := failover.Decide(sc.e.input(nil))
					if d.Plan == nil || d.Plan.Kind != kind {
						t.Fatalf("no %s plan:\n%s", kind, d)
					}
					shown = d.String()
					sc.w.ran = nil
					res = sc.e.execute(sc.ctx, d)
				case failover.KindSwitchover:
					sc.w.ran = nil
					res, _ = sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestSwitchover, To: "node2"})
					shown = res.Text
				case failover.KindRejoin:
					// node1 was replaced by a failover and returns.
					sc.killNode1()
					if res := sc.e.execute(sc.ctx, failover.Decide(sc.e.input(nil))); !res.OK {
						t.Fatalf("failover: %s", res.Message)
					}
					sc.w.servers[0].down = ""
					sc.pass(time.Second)
					sc.w.ran = nil
					res, _ = sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestRejoin, To: "node1"})
					shown = res.Text
				case failover.KindRestoreWriter:
					// A failover fails at node2's set-writable, once: a
					// switchover --to node2 makes it writable.
					setWritable := failover.StepSQL(sc.w.flavor, failover.Step{Kind: failover.SetWritable})
					if err := sc.fail([]string{"node2", setWritable[0], "once"}); err != nil {
						t.Fatal(err)
					}
					sc.killNode1()
					if res := sc.e.execute(sc.ctx, failover.Decide(sc.e.input(nil))); res.OK {
						t.Fatal("the failover did not fail at set-writable")
					}
					sc.pass(time.Second)
					sc.w.ran = nil
					res, _ = sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestSwitchover, To: "node2"})
					shown = res.Text
				}
				if !res.OK || res.Decision.Plan == nil || res.Decision.Plan.Kind != kind {
					t.Fatalf("%s did not succeed: %s\n%s\n%s", kind, res.Message, strings.Join(res.Steps, "\n"), shown)
				}
				// A failover's second phase is planned after the cut.
				shown += "\n" + res.Decision.String()
				sc.checkRanWhatShown(res, shown)
				sc.w.mu.Lock()
				sent := len(sc.w.sent)
				sc.w.mu.Unlock()
				// A Galera writer move only routes, and on MariaDB the facts
				// come from the monitor's checks: it may send nothing.
				if kind != failover.KindGaleraWriterMove || sent > 0 {
					sc.checkFlavorSQL()
				}
			})
		}
	}
}

// killNode1 kills node1 and lets detect_after (2s) pass: the engine
// decides a failover.
func (sc *scenario) killNode1() {
	sc.w.servers[0].down = "dead"
	sc.pass(time.Second)
	sc.pass(3 * time.Second)
}

// pass is time passing without a decision: replication and a check.
func (sc *scenario) pass(d time.Duration) {
	sc.w.clock.Advance(d)
	sc.w.replicate()
	sc.w.check()
	sc.e.refreshFacts(sc.ctx)
}

// checkRanWhatShown compares what ran on each server with the statements
// of the plan's steps that succeeded (res.Steps reports each step in
// order).
func (sc *scenario) checkRanWhatShown(res Result, shown string) {
	t := sc.t
	t.Helper()
	pl := res.Decision.Plan
	want := map[string][]string{}
	var reports []string
	for _, s := range res.Steps {
		if !strings.HasPrefix(s, "re-planned") {
			reports = append(reports, s)
		}
	}
	if len(reports) != len(pl.Steps) {
		t.Fatalf("%d step reports for %d steps:\n%s", len(reports), len(pl.Steps), strings.Join(res.Steps, "\n"))
	}
	for i, st := range pl.Steps {
		if strings.Contains(reports[i], "FAILED") {
			continue
		}
		q := failover.StepSQL(pl.Flavor, st)
		if st.Kind == failover.Repoint {
			q = failover.RepointSQL(pl.Flavor, sc.e.addr(st.Source), "", "", st.Mode)
		}
		for _, s := range q {
			if !strings.Contains(shown, s) {
				t.Errorf("step %d (%s %s) runs %q, which the plan does not show", i+1, st.Kind, st.Server, s)
			}
		}
		want[st.Server] = append(want[st.Server], q...)
	}
	got := map[string][]string{}
	n := 0
	for _, r := range sc.w.ran {
		if strings.HasPrefix(r[1], "KILL") {
			continue
		}
		n++
		q := strings.ReplaceAll(strings.ReplaceAll(r[1], "'repl'", "'…'"), "'replpass'", "'…'")
		got[r[0]] = append(got[r[0]], q)
	}
	for _, s := range sc.w.servers {
		if !slices.Equal(got[s.name], want[s.name]) {
			t.Errorf("%s ran:\n  %s\nthe plan shows:\n  %s", s.name, strings.Join(got[s.name], "\n  "), strings.Join(want[s.name], "\n  "))
		}
	}
	t.Logf("%d statements ran as shown", n)
	if pl.Kind == failover.KindGaleraWriterMove {
		if n != 0 {
			t.Errorf("a Galera writer move ran %d statements", n)
		}
		if w := sc.w.Snapshot().WriterServer(); w == nil || w.Name != pl.NewPrimary {
			t.Errorf("the writer is %v, not %s", w, pl.NewPrimary)
		}
	} else if n == 0 {
		t.Error("no statement ran")
	}
	if pl.Flavor != sc.w.flavor {
		t.Errorf("plan flavour %s on a %s cluster", pl.Flavor, sc.w.flavor)
	}
}

// A switchover is planned from what the servers report at the request,
// not from the monitor's last check: a check from before an operation
// that just repointed a replica would leave it on the old primary
// (TestHAActingDiesAtEveryStep found it: node3 had been repointed to
// node1 230 ms earlier, the check said node2, and the switchover to node2
// did not repoint it).
func TestSwitchoverPlansFromFreshSources(t *testing.T) {
	sc := &scenario{t: t, dir: t.TempDir(), ctx: context.Background()}
	t.Cleanup(sc.close)
	if err := sc.cluster(map[string]string{"flavor": "mariadb"},
		[]string{"node1 primary gtid=100", "node2 replica gtid=100", "node3 replica gtid=100"}); err != nil {
		t.Fatal(err)
	}
	// The monitor's last check of node3 still shows its source before
	// the repoint: node2.
	stale := *sc.w.server("node3").obs
	rs := *stale.Replica
	rs.SourceHost, rs.SourcePort = "10.0.0.2", 3306
	stale.Replica = &rs
	sc.w.server("node3").obs = &stale
	res, err := sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestSwitchover, To: "node2", DryRun: true})
	if err != nil || res.Decision.Plan == nil {
		t.Fatalf("switchover: %v %s", err, res.Message)
	}
	if !slices.Contains(res.Decision.Plan.Repoint, "node3") {
		t.Fatalf("node3 replicates from node1 but is not repointed: repoint %v\n%s", res.Decision.Plan.Repoint, res.Text)
	}
}
