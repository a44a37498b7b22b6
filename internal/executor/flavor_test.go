package executor

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
)

// simFlavors are the scenario cluster's flavor= values: MariaDB, MySQL 8.0,
// MySQL 8.4 and MySQL before 8.0.23.
var simFlavors = []string{"mariadb", "mysql", "mysql84", "mysql-legacy"}

// flavorStatements matches every statement the executor may send to a
// server of flavour f: the flavour's own (internal/flavor), the settings
// of its semi-sync and read_only variables, and the few statements that
// are the same in every flavour (KILL CONNECTION, SHOW BINARY LOGS, SHOW
// GRANTS). Anything else is flavour SQL spelled outside the flavour.
func flavorStatements(f flavor.Flavor) func(q string) bool {
	fixed := []string{f.StartReplica(), f.StopReplica(), f.ResetReplicaAll(), f.StartSQLThread(), f.StartIOThread(),
		f.StopIOThread(), f.ReplicaStatus(), f.ReadBinlogPos(), f.ReadCurrentPos(), f.ReadPositions(), f.ReadLogBin(),
		f.ReadHeartbeatPeriod(), f.ReadReceivedHeartbeats(), f.ReadSemiSyncSettings(), f.ReadLongestQuery(),
		"SHOW BINARY LOGS", "SHOW GRANTS"}
	fixed = append(fixed, f.ReadOnly(true)...)
	fixed = append(fixed, f.ReadOnly(false)...)
	// Parameterised: the flavour's text with .* for each parameter.
	const mark = "\x00"
	pattern := func(s string) string {
		return strings.ReplaceAll(regexp.QuoteMeta(s), mark, ".*")
	}
	vars := []string{"read_only", "super_read_only"}
	for _, p := range f.SemiSyncPlugins() {
		vars = append(vars, regexp.QuoteMeta(p[0])+`_\w+`, regexp.QuoteMeta(p[1])+`_\w+`)
	}
	if v := f.KillConnTimeoutVar(); v != "" {
		vars = append(vars, regexp.QuoteMeta(v))
	}
	re := regexp.MustCompile(`^(?:` + strings.Join([]string{
		pattern(f.ChangeSource(mark, mark, mark, mark, mark)),
		pattern(f.WaitGTID(mark, 0))[:len(pattern(f.WaitGTID(mark, 0)))-len(`0\.000\)`)] + `[0-9.]+\)`,
		`SET GLOBAL (?:` + strings.Join(vars, "|") + `) = \w+`,
		`KILL CONNECTION \d+`,
	}, "|") + `)$`)
	return func(q string) bool { return slices.Contains(fixed, q) || re.MatchString(q) }
}

// checkFlavorSQL fails the test for every statement sent to the simulated
// servers that is not its flavour's, or says a word the flavour does not
// speak.
func (sc *scenario) checkFlavorSQL() {
	t := sc.t
	t.Helper()
	f := sc.w.flavor
	ok := flavorStatements(f)
	sc.w.mu.Lock()
	sent := sc.w.sent
	sc.w.mu.Unlock()
	if len(sent) == 0 {
		t.Fatal("nothing was sent")
	}
	for _, r := range sent {
		if bad := f.Foreign(r[1]); bad != nil {
			t.Errorf("%s (%s) was sent %q, which says %v", r[0], f, r[1], bad)
		} else if !ok(r[1]) {
			t.Errorf("%s (%s) was sent %q, which is not a statement of its flavour", r[0], f, r[1])
		}
	}
	t.Logf("%d statements sent, all of %s", len(sent), f)
}

// The executor's statements outside plans, in every flavour: the facts
// and running-query reads of every tick, and the role settings a replica
// gets back after it restarted with another role's my.cnf (semi-sync
// replica side, read_only, its IO thread restarted).
func TestFlavorRoleSettingsAfterRestart(t *testing.T) {
	for _, fl := range simFlavors {
		t.Run(fl, func(t *testing.T) {
			sc := &scenario{t: t, dir: t.TempDir(), ctx: context.Background()}
			defer sc.close()
			if err := sc.cluster(map[string]string{"flavor": fl, "semisync": "on", "detect_after": "2s", "semi_sync": "on"},
				[]string{"node1 primary gtid=100", "node2 replica gtid=100", "node3 replica gtid=100"}); err != nil {
				t.Fatal(err)
			}
			sc.e.refreshRunning(sc.ctx)
			if _, err := sc.tick(nil); err != nil {
				t.Fatal(err)
			}
			n2 := sc.w.servers[1]
			_, rep := sc.w.semiSyncNames()
			n2.down = "dead"
			if _, err := sc.tick(nil); err != nil {
				t.Fatal(err)
			}
			n2.down, n2.started, n2.io, n2.sql = "", sc.w.clock.Now(), true, true
			n2.vars["read_only"], n2.vars[rep+"_enabled"] = "OFF", "OFF"
			out, err := sc.tick(nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sc.tick(nil); err != nil {
				t.Fatal(err)
			}
			f := sc.w.flavor
			var ranIO bool
			for _, r := range sc.w.ran {
				ranIO = ranIO || r[0] == "node2" && r[1] == f.StartIOThread()
			}
			if !ranIO || n2.vars["read_only"] != "ON" || n2.vars[rep+"_enabled"] != "ON" {
				t.Fatalf("node2 did not get its role's settings back:\n%s", strings.Join(out, "\n"))
			}
			if u := sc.w.unknown; len(u) > 0 {
				t.Errorf("statements the simulation does not know: %q", u)
			}
			sc.checkFlavorSQL()
		})
	}
}

// MySQL 8.4: the plans of a failover and of a switchover, as shown and as
// run, say REPLICA and SOURCE only.
func TestMySQL84PlansSayReplicaAndSource(t *testing.T) {
	for _, kind := range []failover.PlanKind{failover.KindFailover, failover.KindSwitchover} {
		t.Run(kind.String(), func(t *testing.T) {
			sc := &scenario{t: t, dir: t.TempDir(), ctx: context.Background()}
			defer sc.close()
			if err := sc.cluster(map[string]string{"flavor": "mysql84", "semisync": "on", "detect_after": "2s"},
				[]string{"node1 primary gtid=100", "node2 replica gtid=100", "node3 replica gtid=98"}); err != nil {
				t.Fatal(err)
			}
			var res Result
			var shown string
			want := []string{"STOP REPLICA", "RESET REPLICA ALL", "CHANGE REPLICATION SOURCE TO SOURCE_HOST=", "SOURCE_AUTO_POSITION=1", "START REPLICA"}
			if kind == failover.KindFailover {
				sc.killNode1()
				d := failover.Decide(sc.e.input(nil))
				shown = d.String()
				res = sc.e.execute(sc.ctx, d)
				want = append(want, "STOP REPLICA IO_THREAD")
			} else {
				res, _ = sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestSwitchover, To: "node2"})
				shown = res.Text
				want = append(want, "WAIT_FOR_EXECUTED_GTID_SET")
			}
			if !res.OK || res.Decision.Plan == nil || res.Decision.Plan.Flavor != flavor.MySQL84 {
				t.Fatalf("%s\n%s\n%s", res.Message, strings.Join(res.Steps, "\n"), shown)
			}
			shown += res.Decision.String()
			for _, w := range want {
				if !strings.Contains(shown, w) {
					t.Errorf("the plan does not show %s:\n%s", w, shown)
				}
			}
			if bad := flavor.MySQL84.Foreign(shown); bad != nil {
				t.Errorf("the plan says %v:\n%s", bad, shown)
			}
			sc.checkFlavorSQL()
		})
	}
}
