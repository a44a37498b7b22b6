package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vigil-db/vigil/internal/lifecycle"
)

func TestPhaseDurations(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	seen := map[string]time.Time{
		lifecycle.PhaseChecking:    at(0),
		lifecycle.PhaseStreaming:   at(100), // fencing too short to be seen
		lifecycle.PhasePreparing:   at(2100),
		lifecycle.PhaseReplicating: at(3100),
		lifecycle.PhaseRouting:     at(3600),
	}
	got := PhaseDurations(seen, at(3800))
	want := map[string]float64{lifecycle.PhaseChecking: 0.1, lifecycle.PhaseStreaming: 2, lifecycle.PhasePreparing: 1,
		lifecycle.PhaseReplicating: 0.5, lifecycle.PhaseRouting: 0.2}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for ph, w := range want {
		if math.Abs(got[ph]-w) > 1e-9 {
			t.Errorf("%s: %v, want %v", ph, got[ph], w)
		}
	}
	from, to := streamWindow(seen)
	if !from.Equal(at(100)) || !to.Equal(at(2100)) {
		t.Errorf("stream window %v–%v", from, to)
	}
	if len(PhaseDurations(nil, at(1))) != 0 {
		t.Error("durations without phases")
	}
}

func TestQPSBetween(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	var s []QPSSample
	for i := 0; i <= 10; i++ { // 1000 queries per second, sampled every 100 ms
		s = append(s, QPSSample{At: t0.Add(time.Duration(i) * 100 * time.Millisecond), Count: int64(i * 100)})
	}
	for _, c := range []struct {
		from, to time.Duration
		want     float64
		ok       bool
	}{
		{0, time.Second, 1000, true},
		{150 * time.Millisecond, 650 * time.Millisecond, 1000, true}, // interpolated
		{0, 2 * time.Second, 0, false},                               // beyond the samples
		{500 * time.Millisecond, 500 * time.Millisecond, 0, false},   // empty window
	} {
		got, ok := QPSBetween(s, t0.Add(c.from), t0.Add(c.to))
		if ok != c.ok || math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%v–%v: %v %v, want %v %v", c.from, c.to, got, ok, c.want, c.ok)
		}
	}
}

func TestSummarizeClone(t *testing.T) {
	r := &CloneResults{
		Raw: []RawPipeRun{{Run: 1, Bytes: 100e6, Seconds: 1}, {Run: 2, Bytes: 100e6, Seconds: 2}, {Run: 3, Error: "mbstream: exit 1"}},
		Clones: []CloneRun{
			{Kind: CloneKindPlain, Run: 1, Bytes: 90e6, StreamSeconds: 1, TotalSeconds: 4, Phases: map[string]float64{"streaming": 1},
				CPUSeconds: map[string]float64{"vigil": 2.5}},
			{Kind: CloneKindPlain, Run: 2, Bytes: 90e6, StreamSeconds: 1.5, TotalSeconds: 5, Phases: map[string]float64{"streaming": 1.5}},
			{Kind: CloneKindPlain, Run: 3, Bytes: 90e6, StreamSeconds: 1, TotalSeconds: 4}, // no raw run to pair with
			{Kind: CloneKindThrottled, Run: 1, Bytes: 20e6, StreamSeconds: 1, CPUSeconds: map[string]float64{"donor agent": 30}},
			{Kind: CloneKindLoaded, Run: 1, Error: "failed"},
		},
		QPS: []QPSRun{{Run: 1, Baseline: 1000, Unthrottled: 500, BaselineThrottled: 1000, Throttled: 900}, {Run: 2, Error: "x", Baseline: 1}},
	}
	s := SummarizeClone(r)
	if s.RawMBps.N != 2 || s.RawMBps.Min != 50 || s.RawMBps.Max != 100 {
		t.Errorf("raw %+v", s.RawMBps)
	}
	if s.StreamMBps.N != 3 || s.StreamMBps.Median != 90 {
		t.Errorf("stream %+v", s.StreamMBps)
	}
	// Run 1: 90/100, run 2: 60/50; run 3 has no raw partner.
	if s.StreamVsRaw.N != 2 || math.Abs(s.StreamVsRaw.Min-0.9) > 1e-9 || math.Abs(s.StreamVsRaw.Max-1.2) > 1e-9 {
		t.Errorf("stream vs raw %+v", s.StreamVsRaw)
	}
	if s.ThrottledCPU["donor agent"].Median != 30 || s.CloneCPU["vigil"].Median != 2.5 || s.LoadedCPU != nil {
		t.Errorf("cpu %+v %+v %+v", s.ThrottledCPU, s.CloneCPU, s.LoadedCPU)
	}
	if s.ThrottledMBps.Median != 20 || s.LoadedMBps != nil {
		t.Errorf("throttled %+v loaded %+v", s.ThrottledMBps, s.LoadedMBps)
	}
	if s.UnthrottledRatio.N != 1 || s.UnthrottledRatio.Median != 0.5 || s.ThrottledRatio.Median != 0.9 {
		t.Errorf("ratios %+v %+v", s.UnthrottledRatio, s.ThrottledRatio)
	}
	if s.Phases["streaming"].Median != 1.25 || s.HealWriter != nil {
		t.Errorf("phases %+v heal %+v", s.Phases, s.HealWriter)
	}

	r.Summary, r.HealSkipped, r.RateLimit = s, "not asked for", 20<<20
	var b bytes.Buffer
	if err := WriteCloneText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"raw mariadb-backup --stream | mbstream -x, MB/s : 75.0 (50.0–100.0, 2 runs)",
		"clone / raw pipe (paired runs)                  : 1.05 (0.90–1.20, 2 runs)",
		"baseline, qps: 1000 (1000–1000, 2 runs)",
		"CPU-seconds of a clone:\n     vigil                                    2.5 (1 run)", "--rate 21.0 MB/s", "skipped: not asked for", "raw run 3: mbstream: exit 1", "clone+load run 1: failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestWithSelfHealing(t *testing.T) {
	in := "admin:\n  listen: 127.0.0.1:1\nclusters:\n  - name: main\n    servers: []\n  - name: other\n    lifecycle:\n      keep: 1\n"
	out, err := WithSelfHealing([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Admin    map[string]any `yaml:"admin"`
		Clusters []struct {
			Name      string         `yaml:"name"`
			Lifecycle map[string]any `yaml:"lifecycle"`
		} `yaml:"clusters"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Admin["listen"] != "127.0.0.1:1" || len(doc.Clusters) != 2 {
		t.Fatalf("%s", out)
	}
	for _, c := range doc.Clusters {
		if c.Lifecycle["self_healing"] != true {
			t.Errorf("%s: %v", c.Name, c.Lifecycle)
		}
	}
	if doc.Clusters[1].Lifecycle["keep"] != 1 {
		t.Errorf("other keys of lifecycle lost: %v", doc.Clusters[1].Lifecycle)
	}
	if _, err := WithSelfHealing([]byte("admin: {}\n")); err == nil {
		t.Error("no clusters: no error")
	}
}

func TestParseProcStatChildren(t *testing.T) {
	line := "4242 (vigil agent) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 890 12 20 0 4 0 100 1000 10"
	own, err := ParseProcStat(line)
	if err != nil || own != (ProcCPU{UTime: 1234, STime: 567}) {
		t.Errorf("own %+v %v", own, err)
	}
	ch, err := ParseProcStatChildren(line)
	if err != nil || ch != (ProcCPU{UTime: 890, STime: 12}) {
		t.Errorf("children %+v %v", ch, err)
	}
	if _, err := ParseProcStatChildren("4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567"); err == nil {
		t.Error("truncated: no error")
	}
}
