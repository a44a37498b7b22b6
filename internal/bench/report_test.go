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
	for i := range runs {
		runs[i].Start = start.Add(time.Duration(i) * 10 * time.Second)
		if runs[i].Target == TargetVigil && !runs[i].Failed() {
			runs[i].ServerCounters = map[string]map[string]int64{"node1": {"Com_select": 0}, "node2": {"Com_select": 500}, "node3": {"Com_select": 500}}
			runs[i].ReplicaSelectShare = ptr(1.0)
		}
		runs[i].ServerCPUUsPerQuery = ptr(40.0)
		if !runs[i].Failed() {
			runs[i].ServerStatementsPerQuery = ptr(1.0)
		}
	}
	scen, _ := ParseScenarios("")
	return &Results{
		Schema:   ResultsSchema,
		Started:  start,
		Finished: start.Add(3*time.Minute + 12*time.Second),
		Machine: Machine{CPUs: 2, CPUModel: "Intel(R) Xeon(R) Processor", Kernel: "6.1.0", LoadStart: "1.00 0.50 0.25",
			LoadEnd: "2.00 1.00 0.50", GoVersion: "go1.26", Mariadbd: "mariadbd Ver 10.11.19-MariaDB", Sysbench: "sysbench 1.0.20",
			HAProxy: "HAProxy version 2.6.12", Vigil: "dev (commit unknown)"},
		Config: Config{Scenarios: scen, Targets: []Target{{Name: TargetDirect}, {Name: TargetVigil}, {Name: TargetHAProxy}},
			Threads: 32, Duration: "8s", Warmup: "2s", Reps: 3, Quick: true, Tables: 4, TableSize: 20000},
		Runs:    runs,
		Summary: Summarize([]string{"oltp_point_select", "oltp_read_only"}, []string{TargetDirect, TargetVigil, TargetHAProxy}, runs),
		Notes:   []string{"an example note"},
	}
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
	for _, want := range []string{"MISS  Vigil CPU per query ≤ HAProxy's on oltp_read_only", "(1/3 runs failed)", "n/a"} {
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
		"| oltp_point_select | vigil | 15200 | 15100–15300 | 6.00 | 0 | 52.0 | 20.0 | 40.0 | 100% | 1.00 |",
		"- **MISS** Vigil CPU per query ≤ HAProxy's on oltp_read_only",
		"- PASS Vigil qps ≥ HAProxy qps on oltp_point_select (vigil/haproxy 1.25)",
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

func TestWriteChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qps.png")
	if err := WriteChart(path, sampleResults().Summary); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if err := WriteChart(path, Summary{}); err == nil {
		t.Error("a chart of nothing")
	}
}
