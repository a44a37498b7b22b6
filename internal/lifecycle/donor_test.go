package lifecycle

import (
	"errors"
	"strings"
	"testing"

	"github.com/vigil-db/vigil/internal/topology"
)

// snap builds a replication cluster: n1 the writer, the rest replicas
// with the given lags (-1: not replicating).
func snap(lags ...float64) *topology.Snapshot {
	s := &topology.Snapshot{Cluster: "c", Type: "replication", Writer: 0,
		Servers: []topology.Server{{Name: "n1", Role: topology.RolePrimary, State: topology.Online, Readable: true, Writable: true, LagSeconds: 0}}}
	for i, l := range lags {
		s.Servers = append(s.Servers, topology.Server{Name: "n" + string(rune('2'+i)), Role: topology.RoleReplica,
			State: topology.Online, Readable: true, LagSeconds: l})
	}
	return s
}

func all(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestChooseDonor(t *testing.T) {
	agents := all("n1", "n2", "n3", "n4")
	shunned := snap(0, 0, 0)
	shunned.Servers[1].State = topology.Shunned
	fenced := snap(0, 0, 0)
	fenced.Servers[1].Fenced = true
	standby := snap(-1, 0, 0)
	standby.Servers[1].Standby, standby.Servers[1].State, standby.Servers[1].LagSeconds = true, topology.OfflineSoft, 0
	downDonor := snap(0, 0)
	downDonor.Servers[1].State, downDonor.Servers[1].Readable = topology.OfflineHard, false
	noWriter := snap(0, 0)
	noWriter.Writer = -1
	oldPrimary := snap(0, 0)
	oldPrimary.Servers[2].Role, oldPrimary.Servers[2].Fenced, oldPrimary.Servers[2].Writable = topology.RolePrimary, true, true
	for _, tc := range []struct {
		name   string
		in     DonorInput
		donor  string
		refuse string
	}{
		{"least lag wins", DonorInput{Snapshot: snap(3, 0, 1), Target: "n4", Agents: agents}, "n3", ""},
		{"equal lag: least load", DonorInput{Snapshot: snap(0, 0, 0), Target: "n4", Agents: agents, Load: map[string]int64{"n2": 9, "n3": 1}}, "n3", ""},
		{"equal lag and load: by name", DonorInput{Snapshot: snap(0, 0, 0), Target: "n4", Agents: agents}, "n2", ""},
		{"lagging replica does not serve", DonorInput{Snapshot: snap(60, 0, 0), Target: "n3", Agents: agents}, "n4", ""},
		{"shunned replica does not serve", DonorInput{Snapshot: shunned, Target: "n3", Agents: agents}, "n4", ""},
		{"fenced replica does not serve", DonorInput{Snapshot: fenced, Target: "n3", Agents: agents}, "n4", ""},
		{"standby serves", DonorInput{Snapshot: standby, Target: "n4", Agents: agents, Load: map[string]int64{"n3": 5}}, "n2", ""},
		{"replica without agent does not serve", DonorInput{Snapshot: snap(0, 0, 0), Target: "n4", Agents: all("n1", "n3", "n4")}, "n3", ""},
		{"errant replica does not serve", DonorInput{Snapshot: snap(0, 0, 0), Target: "n4", Agents: agents, Errant: map[string]string{"n2": "0-2-9"}}, "n3", ""},
		{"named errant donor", DonorInput{Snapshot: snap(0, 0, 0), Target: "n4", From: "n2", Agents: agents, Errant: map[string]string{"n2": "0-2-9"}}, "", "donor n2 holds transactions the writer lacks (0-2-9)"},
		{"busy donor does not serve", DonorInput{Snapshot: snap(0, 0, 0), Target: "n4", Agents: agents, Busy: all("n2")}, "n3", ""},
		{"writer only when nothing else can", DonorInput{Snapshot: snap(0, -1), Target: "n2", Agents: agents}, "n1", ""},
		{"named donor", DonorInput{Snapshot: snap(0, 0, 5), Target: "n2", From: "n4", Agents: agents}, "n4", ""},
		{"named writer", DonorInput{Snapshot: snap(0, 0), Target: "n2", From: "n1", Agents: agents}, "n1", ""},
		{"target is the writer", DonorInput{Snapshot: snap(0, 0), Target: "n1", Agents: agents}, "", "n1 is the writer; switch over first"},
		{"target is the designated primary without a writer", DonorInput{Snapshot: noWriter, Target: "n1", Agents: agents}, "", "n1 is a primary; switch over first"},
		{"rebuild of a fenced old primary", DonorInput{Snapshot: oldPrimary, Target: "n3", Agents: agents, Rebuild: true}, "n2", ""},
		{"clone of a fenced old primary", DonorInput{Snapshot: oldPrimary, Target: "n3", Agents: agents}, "", "n3 is a primary"},
		{"rebuild of the writer", DonorInput{Snapshot: snap(0, 0), Target: "n1", Agents: agents, Rebuild: true}, "", "n1 is the writer; switch over first"},
		{"target without agent", DonorInput{Snapshot: snap(0, 0), Target: "n3", Agents: all("n1", "n2")}, "", "n3 has no agent"},
		{"unknown target", DonorInput{Snapshot: snap(0), Target: "n9", Agents: agents}, "", "n9 is not a server of cluster c"},
		{"target busy", DonorInput{Snapshot: snap(0, 0), Target: "n3", Agents: agents, Busy: all("n3")}, "", "n3 is already part of a clone"},
		{"donor is target", DonorInput{Snapshot: snap(0, 0), Target: "n3", From: "n3", Agents: agents}, "", "cannot be its own donor"},
		{"named donor without agent", DonorInput{Snapshot: snap(0, 0), Target: "n3", From: "n2", Agents: all("n3")}, "", "donor n2 has no agent"},
		{"named donor busy", DonorInput{Snapshot: snap(0, 0, 0), Target: "n3", From: "n2", Agents: agents, Busy: all("n2")}, "", "donor n2 already serves a clone"},
		{"named donor down", DonorInput{Snapshot: downDonor, Target: "n3", From: "n2", Agents: agents}, "", "donor n2 is OFFLINE_HARD"},
		{"nobody can serve", DonorInput{Snapshot: snap(0, -1), Target: "n2", Agents: all("n2", "n3")}, "", "no server can serve as donor for n2 (n3: lag unknown (not replicating?); n1 (the writer): no agent)"},
		{"not checked yet", DonorInput{Target: "n2", Agents: agents}, "", "not been checked yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseDonor(tc.in)
			if tc.refuse != "" {
				var r *Refusal
				if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.refuse) {
					t.Fatalf("got %+v, %v; want a refusal containing %q", got, err, tc.refuse)
				}
				return
			}
			if err != nil || got.Donor != tc.donor || got.Reason == "" {
				t.Fatalf("got %+v, %v; want donor %s", got, err, tc.donor)
			}
		})
	}
}

// The dry run's steps name the servers, follow Run's phases in order,
// and say what a named donor changes.
func TestPlanSteps(t *testing.T) {
	p := Plan{Cluster: "main", Target: "node3", Donor: "node2", Rate: 1 << 20}
	steps := PlanSteps(p, "node1")
	phases := []string{PhaseChecking, PhaseFencing, PhaseStreaming, PhasePreparing, PhaseReplicating, PhaseVerifying, PhaseRouting}
	if len(steps) != len(phases) {
		t.Fatalf("%d steps, want %d", len(steps), len(phases))
	}
	for i, ph := range phases {
		if !strings.HasPrefix(steps[i], ph+": ") {
			t.Errorf("step %d = %q, want phase %s", i, steps[i], ph)
		}
	}
	all := strings.Join(steps, "\n")
	for _, want := range []string{"node3 out of routing", "node2's mariadb-backup", "limited to 1048576 bytes/s", "now node1", "restarts from another"} {
		if !strings.Contains(all, want) {
			t.Errorf("the steps do not say %q:\n%s", want, all)
		}
	}
	p.Named = true
	if all := strings.Join(PlanSteps(p, "node1"), "\n"); !strings.Contains(all, "never replaced") {
		t.Errorf("a named donor's steps do not say it is never replaced:\n%s", all)
	}
}
