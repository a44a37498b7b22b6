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

// run builds a complete measurement at 32 threads.
func run(scenario, target string, rep int, qps, p95 float64, cpu *float64) Measurement {
	r := Measurement{Scenario: scenario, Target: target, Rep: rep, Threads: 32,
		Sysbench: SysbenchResult{Queries: int64(qps * 10), QPS: qps, TPS: qps, Percentile: 95, PercentileMs: p95,
			P50Ms: p95 / 2, P95Ms: p95, P99Ms: p95 * 2, Complete: true},
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
			add(Measurement{Scenario: "oltp_read_only", Target: TargetVigil, Rep: rep, Threads: 32, Error: "sysbench: exit status 1",
				Sysbench: SysbenchResult{Fatal: []string{"mysql_stmt_execute() returned error 2013", "`thread_run' function failed"}}})
		} else {
			add(run("oltp_read_only", TargetVigil, rep, 16000+100*f, 40, ptr(70+f)))
		}
		add(run("oltp_read_only", TargetHAProxy, rep, 15000+100*f, 45, ptr(40+f)))
	}
	return runs
}

var (
	sampleCases   = []string{"oltp_point_select@32", "oltp_read_only@32"}
	sampleTargets = []string{TargetDirect, TargetVigil, TargetHAProxy}
)

func TestSummarize(t *testing.T) {
	sum := Summarize(sampleCases, sampleTargets, sampleRuns(), nil)
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
	if v.P50Ms.Median != 3 || v.P95Ms.Median != 6 || v.P99Ms.Median != 12 {
		t.Errorf("vigil latencies %+v %+v %+v", v.P50Ms, v.P95Ms, v.P99Ms)
	}
	if ps.Case != "oltp_point_select@32" || ps.Threads != 32 || ps.Kind != KindSysbench || ps.Label() != "oltp_point_select, 32 threads" {
		t.Errorf("case %q threads %d kind %q label %q", ps.Case, ps.Threads, ps.Kind, ps.Label())
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
		{"Vigil qps ≥ HAProxy qps on oltp_point_select, 32 threads", true},
		{"Vigil qps ≥ HAProxy qps on oltp_read_only, 32 threads", true},
		{"Vigil CPU per query ≤ HAProxy's on oltp_point_select, 32 threads", true},
		{"Vigil CPU per query ≤ HAProxy's on oltp_read_only, 32 threads", false},
		{"No errors on any target (deadlocks sysbench retried aside)", false},
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
	if !strings.Contains(sum.Checks[4].Detail, "oltp_read_only, 32 threads vigil: 2 errors, 1 failed runs") {
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
	sum := Summarize([]string{"s@32", "other@32"}, sampleTargets, runs, nil)
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
	runs := []Measurement{run("oltp_point_select", TargetVigil, 1, 100, 1, ptr(10.0)), run("oltp_point_select", TargetHAProxy, 1, 100, 1, nil)}
	sum := Summarize([]string{"oltp_point_select@32"}, []string{TargetVigil, TargetHAProxy}, runs, nil)
	c := sum.Checks[1]
	if c.Pass || c.Value != nil || c.Detail != "not measured" {
		t.Errorf("check %+v", c)
	}
	if !sum.Checks[0].Pass {
		t.Errorf("equal qps is a pass: %+v", sum.Checks[0])
	}
}

func TestChecksOnlyReadTheCheckCells(t *testing.T) {
	// At 8 threads Vigil is slower than HAProxy: informational, no check.
	runs := []Measurement{run("oltp_point_select", TargetVigil, 1, 50, 1, ptr(10.0)), run("oltp_point_select", TargetHAProxy, 1, 100, 1, ptr(5.0))}
	for i := range runs {
		runs[i].Threads = 8
	}
	sum := Summarize([]string{"oltp_point_select@8"}, sampleTargets, runs, nil)
	if len(sum.Checks) != 1 || sum.Checks[0].Name != "No errors on any target (deadlocks sysbench retried aside)" {
		t.Errorf("checks %+v", sum.Checks)
	}
	if v, ok := sum.Scenarios[0].Ratio("qps", TargetVigil, TargetHAProxy); !ok || v != 0.5 {
		t.Errorf("ratio %v %v", v, ok)
	}
}

// churnRuns are connection churn runs: direct at 1000 connections/s,
// vigil at the given rate.
func churnRuns(vigil float64) []Measurement {
	var runs []Measurement
	for rep := 1; rep <= 3; rep++ {
		for _, tr := range []struct {
			target string
			rate   float64
		}{{TargetDirect, 1000}, {TargetVigil, vigil}, {TargetHAProxy, 900}} {
			r := run("conn_churn", tr.target, rep, tr.rate+float64(rep), 5, nil)
			r.Threads, r.Generator = 64, "go"
			runs = append(runs, r)
		}
	}
	return runs
}

func TestChurnCheck(t *testing.T) {
	for _, tt := range []struct {
		vigil float64
		pass  bool
	}{{1500, true}, {999, false}} {
		sum := Summarize([]string{"conn_churn@64"}, sampleTargets, churnRuns(tt.vigil), nil)
		if sum.Scenarios[0].Kind != KindChurn {
			t.Fatalf("kind %q", sum.Scenarios[0].Kind)
		}
		c := sum.Checks[0]
		if c.Name != "Connection churn through Vigil ≥ direct (conn_churn, 64 threads)" || c.Pass != tt.pass {
			t.Errorf("vigil %v: %+v", tt.vigil, c)
		}
	}
}

func TestManyClientsSkipped(t *testing.T) {
	// HAProxy could not hold 10,000 connections: it is not run, which is
	// neither a failure nor an error, and it has no ratios.
	mk := func(target string, conns int64) Measurement {
		r := run("many_clients", target, 1, 10000, 2, ptr(40.0))
		r.Idle, r.ServerConnections, r.OpenSeconds = 10000, ptr(conns), ptr(3.5)
		return r
	}
	runs := []Measurement{mk(TargetDirect, 10032), mk(TargetVigil, 90),
		{Scenario: "many_clients", Target: TargetHAProxy, Threads: 32, Idle: 10000, Rep: 1, Skipped: "open-file limit"}}
	sum := Summarize([]string{CaseKey("many_clients", 32, 10000)}, sampleTargets, runs, nil)
	ss := sum.Scenarios[0]
	if ss.Idle != 10000 || ss.Label() != "many_clients, 10000 idle + 32 active" {
		t.Errorf("case %+v", ss)
	}
	h, _ := ss.Target(TargetHAProxy)
	if h.Skipped != "open-file limit" || h.Runs != 0 || h.FailedRuns != 0 || h.QPS != nil {
		t.Errorf("haproxy %+v", h)
	}
	v, _ := ss.Target(TargetVigil)
	if v.ServerConnections.Median != 90 || v.OpenSeconds.Median != 3.5 {
		t.Errorf("vigil %+v", v)
	}
	for _, r := range ss.Ratios {
		if r.Num == TargetHAProxy || r.Den == TargetHAProxy {
			t.Errorf("ratio with a skipped target: %+v", r)
		}
	}
	if !sum.AllPass() {
		t.Errorf("a skipped target fails the checks: %+v", sum.Checks)
	}
}

func TestRulesRatios(t *testing.T) {
	runs := []Measurement{
		run("rules_scaling", RulesTarget(0), 1, 1000, 1, ptr(50.0)),
		run("rules_scaling", RulesTarget(100), 1, 950, 1, ptr(55.0)),
		run("rules_scaling", RulesTarget(1000), 1, 800, 1, ptr(60.0)),
	}
	sum := Summarize([]string{"rules_scaling@32"}, []string{RulesTarget(0), "vigil+100rules", "vigil+1000rules"}, runs, nil)
	ss := sum.Scenarios[0]
	if v, ok := ss.Ratio("qps", "vigil+1000rules", RulesTarget(0)); !ok || v != 0.8 {
		t.Errorf("qps ratio %v %v", v, ok)
	}
	if v, ok := ss.Ratio("proxy_cpu_us_per_query", "vigil+100rules", RulesTarget(0)); !ok || v != 1.1 {
		t.Errorf("cpu ratio %v %v", v, ok)
	}
	for _, tt := range []struct {
		name string
		n    int
		ok   bool
	}{{"vigil", 0, false}, {"vigil+0rules", 0, true}, {"vigil+100rules", 100, true}, {"vigil+rules", 0, false}, {"haproxy", 0, false}, {"vigil+01rules", 0, false}} {
		if n, ok := RuleCountOf(tt.name); n != tt.n || ok != tt.ok {
			t.Errorf("RuleCountOf(%q) = %d %v", tt.name, n, ok)
		}
	}
}

func TestFailoverChecks(t *testing.T) {
	var runs []FailoverRun
	for i, s := range []float64{2.9, 2.7, 3.4, 2.8, 2.95} {
		runs = append(runs, FailoverRun{Kind: FailoverKill, Run: i + 1, Seconds: ptr(s)},
			FailoverRun{Kind: FailoverSwitchover, Run: i + 1, Seconds: ptr(s / 20), VigilPauseMs: ptr(s * 10)})
	}
	sum := Summarize(nil, nil, nil, runs)
	f := sum.Failover
	if f.KillRuns != 5 || f.Kill.Median != 2.9 || f.Switchover.Median != 2.9/20 || f.VigilHold.N != 5 {
		t.Errorf("failover summary %+v", f)
	}
	if len(sum.Checks) != 3 || !sum.Checks[0].Pass || !sum.Checks[1].Pass {
		t.Fatalf("checks %+v", sum.Checks)
	}
	if !strings.Contains(sum.Checks[0].Detail, "median 2.90 s, min 2.70 s, max 3.40 s over 5 runs") {
		t.Errorf("detail %q", sum.Checks[0].Detail)
	}
	// A failed run is a miss even with a good median.
	runs = append(runs, FailoverRun{Kind: FailoverKill, Run: 6, Error: "no new writer"})
	sum = Summarize(nil, nil, nil, runs)
	if sum.Checks[0].Pass || !strings.Contains(sum.Checks[0].Detail, "1 of 6 runs failed") {
		t.Errorf("check with a failed run %+v", sum.Checks[0])
	}
	if SummarizeFailover(nil) != nil {
		t.Error("summary of no runs")
	}
}

func TestRetriedDeadlocksAreNotErrors(t *testing.T) {
	// sysbench retried 40 deadlocks on read_write: counted, not a miss;
	// the Go load generator's errors are real.
	rw := run("oltp_read_write", TargetVigil, 1, 1000, 50, ptr(50.0))
	rw.Sysbench.IgnoredErrors = 40
	churn := run("conn_churn", TargetVigil, 1, 1000, 5, ptr(50.0))
	churn.Threads, churn.Generator, churn.Sysbench.IgnoredErrors = 64, "go", 3
	sum := Summarize([]string{"oltp_read_write@32"}, sampleTargets, []Measurement{rw}, nil)
	if v, _ := sum.Scenarios[0].Target(TargetVigil); v.Errors != 40 || v.HardErrors != 0 || !sum.AllPass() {
		t.Errorf("errors %d hard %d checks %+v", v.Errors, v.HardErrors, sum.Checks)
	}
	sum = Summarize([]string{"conn_churn@64"}, sampleTargets, []Measurement{churn}, nil)
	if last := sum.Checks[len(sum.Checks)-1]; last.Pass || !strings.Contains(last.Detail, "3 errors") {
		t.Errorf("go errors pass: %+v", last)
	}
}
