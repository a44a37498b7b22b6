package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files of the report tests")

func sampleResults() *Results {
	start := time.Date(2026, 11, 22, 19, 30, 0, 0, time.UTC)
	runs := sampleRuns()
	runs = append(runs, churnRuns(1200)...)
	mk := func(target string, conns int64, rss int64) Measurement {
		r := run("many_clients", target, 1, 12000, 2, ptr(45.0))
		r.Idle, r.ServerConnections, r.OpenSeconds, r.Generator = 1000, ptr(conns), ptr(0.6), "go"
		if target == TargetDirect {
			r.ProxyCPUUsPerQuery, r.ProxyRSSKiB = nil, nil
		} else {
			r.ProxyRSSKiB = ptr(rss)
		}
		return r
	}
	runs = append(runs, mk(TargetDirect, 1032, 0), mk(TargetVigil, 101, 46000), mk(TargetHAProxy, 1032, 19000),
		Measurement{Scenario: "many_clients", Target: TargetHAProxy, Threads: 32, Idle: 10000, Rep: 1, Skipped: "the open-file limit 20000 allows maxconn 9900"})
	runs = append(runs, run("rules_scaling", RulesTarget(0), 1, 14000, 5, ptr(50.0)), run("rules_scaling", RulesTarget(100), 1, 13800, 5, ptr(51.0)),
		run("rules_scaling", RulesTarget(1000), 1, 12600, 5, ptr(56.0)))
	for i := range runs {
		runs[i].Seq = i + 1
		runs[i].Start = start.Add(time.Duration(i) * 10 * time.Second)
		if runs[i].Target == TargetVigil && !runs[i].Failed() {
			runs[i].ServerCounters = map[string]map[string]int64{"node1": {"Com_select": 0}, "node2": {"Com_select": 500}, "node3": {"Com_select": 500}}
			runs[i].ReplicaSelectShare = ptr(1.0)
		}
		if runs[i].Skipped == "" {
			runs[i].ServerCPUUsPerQuery = ptr(40.0)
		}
		if !runs[i].Failed() && runs[i].Skipped == "" {
			runs[i].ServerStatementsPerQuery = ptr(1.0)
		}
	}
	var failover []FailoverRun
	for i, secs := range []float64{2.9, 2.75, 3.1} {
		var tl []TimelinePoint
		for ms := -1000; ms < 6000; ms += 100 {
			acks := 20
			if ms >= 0 && float64(ms) < secs*1000 {
				acks = 0
			}
			tl = append(tl, TimelinePoint{Ms: ms, Acks: acks})
		}
		failover = append(failover,
			FailoverRun{Kind: FailoverKill, Run: i + 1, At: start.Add(time.Hour), Old: "node1", New: "node2", Seconds: ptr(secs), Writes: 1500, Errors: 4, Timeline: tl},
			FailoverRun{Kind: FailoverSwitchover, Run: i + 1, At: start.Add(time.Hour), Old: "node2", New: "node3", Seconds: ptr(0.06 + float64(i)/100),
				VigilPauseMs: ptr(50.0 + float64(i)), Writes: 2000, Timeline: tl[:20]})
	}
	scen, _ := ParseScenarios("point_select,read_only,churn,clients,rules,failover")
	cases := append(append([]string{}, sampleCases...), "conn_churn@64", CaseKey("many_clients", 32, 1000), CaseKey("many_clients", 32, 10000), "rules_scaling@32")
	targets := []string{TargetDirect, TargetVigil, TargetHAProxy, RulesTarget(0), RulesTarget(100), RulesTarget(1000)}
	res := &Results{
		Schema:   ResultsSchema,
		Started:  start,
		Finished: start.Add(3*time.Minute + 12*time.Second),
		Machine: Machine{CPUs: 2, CPUModel: "Intel(R) Xeon(R) Processor", Kernel: "6.1.0", LoadStart: "1.00 0.50 0.25",
			LoadEnd: "2.00 1.00 0.50", GoVersion: "go1.26", Mariadbd: "mariadbd Ver 10.11.19-MariaDB", Sysbench: "sysbench 1.0.20",
			HAProxy: "HAProxy version 2.6.12", Vigil: "dev (commit unknown)"},
		Config: Config{Scenarios: scen, Targets: []Target{{Name: TargetDirect}, {Name: TargetVigil}, {Name: TargetHAProxy}},
			Threads: []int{32}, Duration: "8s", Warmup: "2s", Reps: 3, CheckReps: 3, Clients: []int{1000, 10000}, RuleCounts: []int{100, 1000},
			FailoverRuns: 3, Quick: true, Tables: 4, TableSize: 20000, BaselineServerConnections: ptr(int64(10))},
		Runs:     runs,
		Failover: failover,
		Summary:  Summarize(cases, targets, runs, failover),
		Notes:    []string{"an example note"},
		Plots:    []string{"qps-oltp_point_select.png", "failover.png"},
	}
	// The previous bench: point selects through Vigil were 20 % faster.
	prev := &Results{Started: start.Add(-24 * time.Hour), Config: Config{Quick: true}}
	for _, r := range runs {
		if r.Scenario == "oltp_point_select" && r.Target == TargetVigil {
			r.Sysbench.QPS *= 1.25
		}
		prev.Runs = append(prev.Runs, r)
	}
	prev.Failover = failover
	res.Comparison = Compare(prev, "bench/out/20261121-193000/results.json", res)
	return res
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it after a deliberate change); got:\n%s", name, got)
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.txt", b.Bytes())
	for _, want := range []string{"MISS  Vigil CPU per query ≤ HAProxy's on oltp_read_only, 32 threads", "(1/3 runs failed)", "n/a",
		"PASS  Connection churn through Vigil ≥ direct", "failover kill -9 → first acknowledged write: median 2.90 s", "⚠ oltp_point_select, 32 threads vigil qps: 19000 → 15200 (-20%)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.md", b.Bytes())
	out := b.String()
	for _, want := range []string{
		"2 CPUs, Intel(R) Xeon(R) Processor",
		"| oltp_point_select | 32 | vigil | 15200 | 15100–15300 | 3.00 | 6.00 | 12.00 | 0 | 52.0 | 20.0 | 40.0 | 100% | 1.00 |",
		"- **MISS** Vigil CPU per query ≤ HAProxy's on oltp_read_only, 32 threads",
		"- PASS Vigil qps ≥ HAProxy qps on oltp_point_select, 32 threads (15200 vs 12200 qps, vigil/haproxy 1.25)",
		"- PASS Failover: median kill -9 → first acknowledged write ≤ 3s",
		"| 10000 | haproxy | not run: the open-file limit 20000 allows maxconn 9900 |",
		"| 1000 | vigil+1000rules | 12600 | 12600–12600 | 10.00 | 0 | 56.0 | 0.90 | 1.12 |",
		"| oltp_point_select, 32 threads | vigil | qps | 19000 | 15200 | ⚠ -20% |",
		"![failover](failover.png)",
		"FAILED: sysbench: exit status 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	res := sampleResults()
	var b bytes.Buffer
	if err := WriteJSON(&b, res); err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != len(res.Runs) || back.Summary.Checks[0].Name != res.Summary.Checks[0].Name {
		t.Errorf("round trip lost data")
	}
	if !strings.Contains(b.String(), `"proxy_cpu_us_per_query": null`) {
		t.Error("direct's proxy CPU is not null in JSON")
	}
}

func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	res := sampleResults()
	// A second thread count draws lines instead of bars.
	for _, r := range sampleRuns() {
		r.Threads = 128
		r.Sysbench.QPS /= 2
		res.Runs = append(res.Runs, r)
	}
	res.Summary = Summarize(append([]string{"oltp_point_select@128"}, sampleCases[0], sampleCases[1], "conn_churn@64",
		CaseKey("many_clients", 32, 1000), CaseKey("many_clients", 32, 10000), "rules_scaling@32"),
		[]string{TargetDirect, TargetVigil, TargetHAProxy, RulesTarget(0), RulesTarget(100), RulesTarget(1000)}, res.Runs, res.Failover)
	files, err := WritePlots(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"qps-oltp_point_select.png", "latency-oltp_point_select.png", "qps-oltp_read_only.png", "latency-oltp_read_only.png",
		"cpu.png", "churn.png", "many-clients.png", "rules.png", "failover.png", "switchover.png"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("plots %q, want %q", files, want)
	}
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s is not a PNG: %v", name, err)
		}
		f.Close()
		if st.Size() > 200<<10 {
			t.Errorf("%s has %d bytes, more than 200 KiB", name, st.Size())
		}
	}
	if files, err := WritePlots(dir, &Results{}); len(files) != 0 || err != nil {
		t.Errorf("plots of nothing: %q %v", files, err)
	}
}

func TestRender(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "20261122-193000")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	res := sampleResults()
	for _, k := range append(append([]string{}, sampleCases...), "conn_churn@64", CaseKey("many_clients", 32, 1000), CaseKey("many_clients", 32, 10000), "rules_scaling@32") {
		res.Config.Cases = append(res.Config.Cases, CaseInfo{Key: k})
	}
	res.Config.Targets = append(res.Config.Targets, Target{Name: RulesTarget(0)}, Target{Name: RulesTarget(100)}, Target{Name: RulesTarget(1000)})
	// An insert run whose only SELECTs were the monitors': no share.
	res.Runs[0].ServerCounters = map[string]map[string]int64{"node1": {"Com_select": 3}}
	res.Runs[0].ReplicaSelectShare = ptr(0.0)
	res.Summary, res.Plots = Summary{}, nil
	var b bytes.Buffer
	if err := WriteJSON(&b, res); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Render(dir, "none")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Summary.Scenarios) != 6 || len(got.Plots) != 10 || got.Runs[0].ReplicaSelectShare != nil {
		t.Errorf("%d cases, plots %q, share %v", len(got.Summary.Scenarios), got.Plots, got.Runs[0].ReplicaSelectShare)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "## Checks") {
		t.Errorf("report.md: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), []byte(schema1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Render(dir, "none"); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("schema 1 renders: %v", err)
	}
}
