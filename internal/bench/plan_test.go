package bench

import (
	"strings"
	"testing"
	"time"
)

func TestBuildPlan(t *testing.T) {
	o := Options{VigilBin: "v"}
	sc, _ := ParseScenarios("failover,point_select,read_write,churn,clients,rules")
	o.Scenarios = sc
	o.setDefaults()
	plan := BuildPlan(o)
	var got []string
	for _, c := range plan {
		got = append(got, c.Key()+"×"+itoa(c.Reps))
	}
	want := "oltp_point_select@8×2 oltp_point_select@32×5 oltp_point_select@128×2 " +
		"oltp_read_write@8×2 oltp_read_write@32×2 oltp_read_write@128×2 conn_churn@64×5 " +
		"many_clients@32+1000idle×2 many_clients@32+10000idle×2 rules_scaling@32×2 failover×5"
	if strings.Join(got, " ") != want {
		t.Errorf("plan\n got  %s\n want %s", strings.Join(got, " "), want)
	}
	for _, c := range plan {
		check := c.Key() == "oltp_point_select@32" || c.Key() == "conn_churn@64" || c.Key() == "failover"
		if c.Check != check {
			t.Errorf("%s: check %v", c.Key(), c.Check)
		}
		if c.Scenario.Kind == KindManyClients && c.Warmup != 0 {
			t.Errorf("%s has a warm-up", c.Key())
		}
	}
	if d := PlanEstimate(plan, 3); d < 10*time.Minute || d > 30*time.Minute {
		t.Errorf("estimate %s", d)
	}
}

// The default full plan fits the 30 minutes of the acceptance with room
// for setup and a busy machine; the quick one fits 5.
func TestPlanEstimateDefaults(t *testing.T) {
	o := Options{VigilBin: "v"}
	o.setDefaults()
	if d := PlanEstimate(BuildPlan(o), 3); d > 25*time.Minute {
		t.Errorf("default plan %s", d)
	}
	q := Options{VigilBin: "v", Scenarios: QuickScenarios(), Threads: []int{32}, Reps: 2, CheckReps: 2,
		Duration: 6 * time.Second, Clients: []int{1000}, FailoverRuns: 1}
	q.setDefaults()
	if d := PlanEstimate(BuildPlan(q), 3); d > 4*time.Minute {
		t.Errorf("quick plan %s", d)
	}
}

func itoa(n int) string { return fmtInts([]int{n}) }

func TestCaseKeyAndLabel(t *testing.T) {
	tests := []struct {
		scenario      string
		threads, idle int
		key, label    string
	}{
		{"oltp_point_select", 32, 0, "oltp_point_select@32", "oltp_point_select, 32 threads"},
		{"many_clients", 32, 10000, "many_clients@32+10000idle", "many_clients, 10000 idle + 32 active"},
		{"oltp_point_select", 0, 0, "oltp_point_select", "oltp_point_select"},
	}
	for _, tt := range tests {
		if k := CaseKey(tt.scenario, tt.threads, tt.idle); k != tt.key {
			t.Errorf("key %q, want %q", k, tt.key)
		}
		if l := CaseLabel(tt.scenario, tt.threads, tt.idle); l != tt.label {
			t.Errorf("label %q, want %q", l, tt.label)
		}
	}
}

func TestParseIntList(t *testing.T) {
	got, err := ParseIntList(" 8, 32,128 ")
	if err != nil || fmtInts(got) != "8, 32, 128" {
		t.Errorf("got %v %v", got, err)
	}
	for _, bad := range []string{"", ",", "8,x", "1.5", "-3", "08x"} {
		if _, err := ParseIntList(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
