package bench

import (
	"math"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 10, 1000}, 10},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		for i := range in {
			if in[i] != tt.in[i] {
				t.Errorf("Median reordered its input: %v", tt.in)
			}
		}
	}
	if NewStat(nil) != nil {
		t.Error("NewStat(nil) is not nil")
	}
	s := NewStat([]float64{5, 1, 9, 3})
	if *s != (Stat{Median: 4, Min: 1, Max: 9, N: 4}) {
		t.Errorf("NewStat = %+v", *s)
	}
}

// run builds a complete measurement.
func run(scenario, target string, rep int, qps, p95 float64, cpu *float64) Measurement {
	r := Measurement{Scenario: scenario, Target: target, Rep: rep,
		Sysbench:           SysbenchResult{Queries: int64(qps * 10), QPS: qps, TPS: qps, Percentile: 95, PercentileMs: p95, Complete: true},
		ProxyCPUUsPerQuery: cpu}
	if cpu != nil {
		r.ProxyRSSKiB = ptr(int64(20480))
	}
	return r
}

// sampleRuns are two scenarios, three reps, three targets; in
// oltp_read_only the third vigil rep failed.
func sampleRuns() []Measurement {
	var runs []Measurement
	add := func(r Measurement) {
		r.Seq = len(runs) + 1
		runs = append(runs, r)
	}
	for rep := 1; rep <= 3; rep++ {
		f := float64(rep)
		add(run("oltp_point_select", TargetDirect, rep, 30000+100*f, 2.5, nil))
		add(run("oltp_point_select", TargetVigil, rep, 15000+100*f, 6, ptr(50+f)))
		add(run("oltp_point_select", TargetHAProxy, rep, 12000+100*f, 7, ptr(60+f)))
	}
	for rep := 1; rep <= 3; rep++ {
		f := float64(rep)
		add(run("oltp_read_only", TargetDirect, rep, 20000+100*f, 30, nil))
		if rep == 3 {
			add(Measurement{Scenario: "oltp_read_only", Target: TargetVigil, Rep: rep, Error: "sysbench: exit status 1",
				Sysbench: SysbenchResult{Fatal: []string{"mysql_stmt_execute() returned error 2013", "`thread_run' function failed"}}})
		} else {
			add(run("oltp_read_only", TargetVigil, rep, 16000+100*f, 40, ptr(70+f)))
		}
		add(run("oltp_read_only", TargetHAProxy, rep, 15000+100*f, 45, ptr(40+f)))
	}
	return runs
}

func TestSummarize(t *testing.T) {
	sum := Summarize([]string{"oltp_point_select", "oltp_read_only"}, []string{TargetDirect, TargetVigil, TargetHAProxy}, sampleRuns())
	if len(sum.Scenarios) != 2 {
		t.Fatalf("%d scenarios", len(sum.Scenarios))
	}
	ps := sum.Scenarios[0]
	v, _ := ps.Target(TargetVigil)
	if v.QPS.Median != 15200 || v.QPS.Min != 15100 || v.QPS.Max != 15300 || v.Runs != 3 {
		t.Errorf("vigil qps %+v runs %d", *v.QPS, v.Runs)
	}
	if v.ProxyCPUUsPerQuery.Median != 52 || v.ProxyRSSMiB.Median != 20 {
		t.Errorf("vigil cpu %+v rss %+v", v.ProxyCPUUsPerQuery, v.ProxyRSSMiB)
	}
	d, _ := ps.Target(TargetDirect)
	if d.ProxyCPUUsPerQuery != nil || d.ProxyRSSMiB != nil {
		t.Error("direct has proxy measurements")
	}
	near := func(name string, got float64, ok bool, want float64) {
		t.Helper()
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", name, got, ok, want)
		}
	}
	got, ok := ps.Ratio("qps", TargetVigil, TargetHAProxy)
	near("vigil/haproxy", got, ok, 15200.0/12200)
	got, ok = ps.Ratio("qps", TargetVigil, TargetDirect)
	near("vigil/direct", got, ok, 15200.0/30200)
	got, ok = ps.Ratio("qps", TargetHAProxy, TargetDirect)
	near("haproxy/direct", got, ok, 12200.0/30200)
	got, ok = ps.Ratio("proxy_cpu_us_per_query", TargetVigil, TargetHAProxy)
	near("cpu vigil/haproxy", got, ok, 52.0/62)

	// The failed rep counts as 0 qps; latencies and CPU come from the
	// two complete ones; the FATAL lines are errors.
	ro := sum.Scenarios[1]
	v, _ = ro.Target(TargetVigil)
	if v.FailedRuns != 1 || v.Errors != 2 {
		t.Errorf("failed runs %d errors %d, want 1 and 2", v.FailedRuns, v.Errors)
	}
	if v.QPS.Median != 16100 || v.QPS.Min != 0 || v.P95Ms.N != 2 || v.ProxyCPUUsPerQuery.N != 2 {
		t.Errorf("qps %+v p95 %+v cpu %+v", *v.QPS, *v.P95Ms, *v.ProxyCPUUsPerQuery)
	}

	wantChecks := []struct {
		prefix string
		pass   bool
	}{
		{"Vigil qps ≥ HAProxy qps on oltp_point_select", true},
		{"Vigil CPU per query ≤ HAProxy's on oltp_point_select", true},
		{"Vigil qps ≥ HAProxy qps on oltp_read_only", true},
		{"Vigil CPU per query ≤ HAProxy's on oltp_read_only", false},
		{"No errors on any target", false},
	}
	if len(sum.Checks) != len(wantChecks) {
		t.Fatalf("%d checks: %+v", len(sum.Checks), sum.Checks)
	}
	for i, w := range wantChecks {
		c := sum.Checks[i]
		if c.Name != w.prefix || c.Pass != w.pass {
			t.Errorf("check %d: %q pass %v, want %q pass %v (%s)", i, c.Name, c.Pass, w.prefix, w.pass, c.Detail)
		}
	}
	if !strings.Contains(sum.Checks[4].Detail, "oltp_read_only vigil: 2 errors, 1 failed runs") {
		t.Errorf("errors check detail %q", sum.Checks[4].Detail)
	}
	if sum.AllPass() {
		t.Error("AllPass with misses")
	}
}

func TestSummarizeMissingTarget(t *testing.T) {
	// Only direct and vigil ran: no HAProxy ratios, no HAProxy checks,
	// and a scenario without runs is left out.
	runs := []Measurement{run("s", TargetDirect, 1, 100, 1, nil), run("s", TargetVigil, 1, 50, 2, ptr(10.0))}
	sum := Summarize([]string{"s", "other"}, []string{TargetDirect, TargetVigil, TargetHAProxy}, runs)
	if len(sum.Scenarios[0].Ratios) != 1 || sum.Scenarios[0].Ratios[0].Name() != "vigil/direct" {
		t.Errorf("ratios %+v", sum.Scenarios[0].Ratios)
	}
	if len(sum.Scenarios) != 1 {
		t.Errorf("a scenario without runs is summarized: %+v", sum.Scenarios)
	}
	if len(sum.Checks) != 1 || !sum.Checks[0].Pass || !sum.AllPass() {
		t.Errorf("checks %+v", sum.Checks)
	}
}

func TestCheckUnmeasuredIsMiss(t *testing.T) {
	// HAProxy ran but its CPU could not be read: the CPU check misses.
	runs := []Measurement{run("s", TargetVigil, 1, 100, 1, ptr(10.0)), run("s", TargetHAProxy, 1, 100, 1, nil)}
	sum := Summarize([]string{"s"}, []string{TargetVigil, TargetHAProxy}, runs)
	c := sum.Checks[1]
	if c.Pass || c.Value != nil || c.Detail != "not measured" {
		t.Errorf("check %+v", c)
	}
	if !sum.Checks[0].Pass {
		t.Errorf("equal qps is a pass: %+v", sum.Checks[0])
	}
}
