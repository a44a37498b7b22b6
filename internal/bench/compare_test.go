package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A results.json of schema 1 (a single thread count in its config)
// still compares: its runs carry their threads.
const schema1 = `{"schema":1,"started":"2026-11-22T21:59:06Z","config":{"threads":32,"quick":true},
"runs":[
 {"scenario":"oltp_point_select","target":"direct","rep":1,"threads":32,"sysbench":{"queries":100,"qps":30000,"tps":30000,"percentile":95,"latency_percentile_ms":2,"complete":true}},
 {"scenario":"oltp_point_select","target":"vigil","rep":1,"threads":32,"sysbench":{"queries":100,"qps":12000,"tps":12000,"percentile":95,"latency_percentile_ms":6,"complete":true},"proxy_cpu_us_per_query":45},
 {"scenario":"oltp_point_select","target":"haproxy","rep":1,"threads":32,"sysbench":{"queries":100,"qps":16000,"tps":16000,"percentile":95,"latency_percentile_ms":4,"complete":true},"proxy_cpu_us_per_query":30}
]}`

func writeResults(t *testing.T, dir, name, body string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "results.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompareWithSchema1(t *testing.T) {
	dir := t.TempDir()
	p := writeResults(t, dir, "20261122-215906", schema1)
	prev, err := LoadResults(p)
	if err != nil {
		t.Fatal(err)
	}
	if !prev.Config.Quick || len(prev.Runs) != 3 {
		t.Fatalf("loaded %+v", prev)
	}
	cur := &Results{}
	cur.Runs = []Measurement{
		run("oltp_point_select", TargetDirect, 1, 30500, 2, nil),
		run("oltp_point_select", TargetVigil, 1, 16000, 5, ptr(40.0)),
		run("oltp_point_select", TargetHAProxy, 1, 16100, 4, ptr(31.0)),
	}
	cur.Summary = Summarize([]string{"oltp_point_select@32"}, sampleTargets, cur.Runs, nil)
	c := Compare(prev, p, cur)
	moved := map[string]Move{}
	for _, m := range c.Moved() {
		moved[m.Target+" "+m.Metric] = m
	}
	if m, ok := moved["vigil qps"]; !ok || m.Worse || m.Prev != 12000 || m.Now != 16000 {
		t.Errorf("vigil qps move %+v (%v)", m, ok)
	}
	if m, ok := moved["vigil proxy_cpu_us_per_query"]; !ok || m.Worse {
		t.Errorf("vigil cpu move %+v", m)
	}
	if _, ok := moved["vigil/haproxy qps ratio"]; !ok {
		t.Errorf("ratio did not move: %+v", c.Moves)
	}
	if _, ok := moved["direct qps"]; ok {
		t.Error("direct moved by 1.7 %")
	}
	if _, ok := moved["haproxy qps"]; ok {
		t.Error("haproxy moved by 0.6 %")
	}
	// Worse: less qps.
	cur.Summary.Scenarios[0].Targets[1].QPS.Median = 9000
	for _, m := range Compare(prev, p, cur).Moved() {
		if m.Target == TargetVigil && m.Metric == "qps" && !m.Worse {
			t.Errorf("a drop is not worse: %+v", m)
		}
	}
}

func TestFindPrevious(t *testing.T) {
	dir := t.TempDir()
	keys := []string{"oltp_point_select@32", "oltp_read_only@32"}
	quick := writeResults(t, dir, "20261120-100000", schema1)
	full := writeResults(t, dir, "20261121-100000", strings.Replace(schema1, `"quick":true`, `"quick":false`, 1))
	// Newer, full, but of other cases only (a --scenarios rules run).
	other := writeResults(t, dir, "20261121-120000", `{"schema":2,"config":{"quick":false},"runs":[{"scenario":"rules_scaling","target":"vigil+0rules","threads":32}]}`)
	writeResults(t, dir, "20261122-100000", "not json")
	cur := filepath.Join(dir, "20261123-100000")
	writeResults(t, dir, "20261123-100000", schema1)
	if got := FindPrevious(dir, cur, true, keys); got != quick {
		t.Errorf("quick: %s", got)
	}
	if got := FindPrevious(dir, cur, false, keys); got != full {
		t.Errorf("full: %s", got)
	}
	if got := FindPrevious(dir, cur, false, []string{"rules_scaling@32"}); got != other {
		t.Errorf("rules: %s", got)
	}
	if got := FindPrevious(filepath.Join(dir, "none"), cur, false, keys); got != "" {
		t.Errorf("no directory: %s", got)
	}
	os.RemoveAll(filepath.Dir(full))
	os.RemoveAll(filepath.Dir(other))
	if got := FindPrevious(dir, cur, false, keys); got != quick {
		t.Errorf("fallback to another mode: %s", got)
	}
}
