package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestStatusDeltas(t *testing.T) {
	before := map[string]string{"Innodb_data_fsyncs": "100", "Binlog_commits": "10", "Binlog_group_commits": "5", "wsrep_flow_control_paused_ns": "7"}
	after := map[string]string{"Innodb_data_fsyncs": "160", "Binlog_commits": "50", "Binlog_group_commits": "3", "wsrep_flow_control_paused_ns": "x"}
	d := StatusDeltas(before, after, []string{"Innodb_data_fsyncs", "Binlog_commits", "Binlog_group_commits", "wsrep_flow_control_paused_ns", "Missing"})
	if d["Innodb_data_fsyncs"] != 60 || d["Binlog_commits"] != 40 {
		t.Fatalf("deltas %v", d)
	}
	for _, gone := range []string{"Binlog_group_commits", "wsrep_flow_control_paused_ns", "Missing"} {
		if _, ok := d[gone]; ok {
			t.Errorf("%s: a counter that went backwards, is not a number or is missing has no delta: %v", gone, d)
		}
	}
	if perUnit(5, 0) != nil || *perUnit(6, 3) != 2 {
		t.Error("perUnit")
	}
}

func TestOffSeconds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name    string
		samples []OnOffSample
		want    float64
	}{
		{"none", nil, 0},
		{"always on", []OnOffSample{{at(100), true}, {at(1000), true}}, 0},
		{"off from the start", []OnOffSample{{at(150), false}, {at(2000), true}}, 2},
		{"off in the middle", []OnOffSample{{at(0), true}, {at(1000), false}, {at(2500), true}}, 1.5},
		{"off at the end", []OnOffSample{{at(0), true}, {at(3000), false}}, 1},
	}
	for _, c := range cases {
		if got := OffSeconds(t0, at(4000), c.samples); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestGTIDBehind(t *testing.T) {
	if got := GTIDBehind("0-1-100,1-2-50", "0-1-90,1-2-50"); got != 10 {
		t.Errorf("got %d", got)
	}
	if got := GTIDBehind("0-1-100", ""); got != 100 {
		t.Errorf("empty replica: %d", got)
	}
	if got := GTIDBehind("0-1-100", "0-1-120"); got != 0 {
		t.Errorf("ahead: %d", got)
	}
}

func TestParseProviderOption(t *testing.T) {
	opts := "base_dir = /var/lib/mysql/; gcs.fc_factor = 1.0; gcs.fc_limit = 16; gcs.fc_master_slave = no"
	if v, ok := ParseProviderOption(opts, "gcs.fc_limit"); !ok || v != "16" {
		t.Errorf("got %q %v", v, ok)
	}
	if _, ok := ParseProviderOption(opts, "gcs.nope"); ok {
		t.Error("found a missing option")
	}
}

func TestIsSQLWord(t *testing.T) {
	for _, ok := range []string{"1", "1000", "ON", "AFTER_SYNC"} {
		if !isSQLWord(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "1; DROP", "'x'", "a b"} {
		if isSQLWord(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestGrantsAllowCreate(t *testing.T) {
	cases := []struct {
		grants []string
		want   bool
	}{
		{[]string{"GRANT ALL PRIVILEGES ON *.* TO `app`@`%`"}, true},
		{[]string{"GRANT USAGE ON *.* TO `app`@`%`", "GRANT SELECT, CREATE, INSERT ON `vigil_bench_topology`.* TO `app`@`%`"}, true},
		{[]string{"GRANT USAGE ON *.* TO `app`@`%`", "GRANT ALL PRIVILEGES ON `sbtest`.* TO `app`@`%`"}, false},
		{[]string{"GRANT SELECT, CREATE VIEW ON *.* TO `app`@`%`"}, false},
	}
	for i, c := range cases {
		if got := GrantsAllowCreate(c.grants, benchSchema); got != c.want {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}

func TestFSTypeName(t *testing.T) {
	if FSTypeName(0x01021994) != "tmpfs" || FSTypeName(0xEF53) != "ext4" || FSTypeName(0x1234) != "0x1234" {
		t.Error("fs names")
	}
	if s := (Storage{FSType: "tmpfs", Tmpfs: true}).Medium(); !strings.HasPrefix(s, "tmpfs") {
		t.Error(s)
	}
}

func TestTopologyPlan(t *testing.T) {
	full := topologyPlan([]string{TopoStandalone, TopoAsync, TopoSemiSync, TopoGalera}, false)
	if len(full) != 3 || len(full[0].Variants) != 4 || len(full[1].Variants) != 2 || len(full[2].Variants) != 6 {
		t.Fatalf("full plan %+v", full)
	}
	quick := topologyPlan([]string{TopoStandalone, TopoGalera}, true)
	if len(quick) != 2 || len(quick[0].Variants) != 2 || len(quick[1].Variants) != 2 {
		t.Fatalf("quick plan %+v", quick)
	}
	if only := topologyPlan([]string{TopoSemiSync}, false); len(only) != 1 || only[0].Variants[0].Topology != TopoSemiSync {
		t.Fatalf("semisync only %+v", only)
	}
	o := TopologyOptions{Workloads: []string{"a", "b"}, Threads: []int{1, 8, 32, 64}, Paths: []string{"direct", "vigil"}, Duration: 5 * time.Second, Warmup: 2 * time.Second}
	if d := topologyEstimate(full, o); d < 15*time.Minute || d > 30*time.Minute {
		t.Errorf("the default plan is estimated at %s, outside 15–30 minutes", d)
	}
}

func TestTopologyOptionsValidation(t *testing.T) {
	if _, err := topologyOptions(map[string]bool{}, false, "standalone", "oltp_insert", "1,x", "direct"); err == nil {
		t.Error("bad threads accepted")
	}
	if _, err := topologyOptions(map[string]bool{}, false, "standalone,standalone", "oltp_insert", "1", "direct"); err == nil {
		t.Error("duplicate accepted")
	}
	o, err := topologyOptions(map[string]bool{}, true, "standalone", "oltp_read_write", "1,8", "direct")
	if err != nil || len(o.Threads) != 2 || o.Threads[1] != 32 || o.Workloads[0] != "oltp_insert" {
		t.Errorf("quick defaults: %+v %v", o, err)
	}
	base := func() TopologyOptions {
		o := TopologyOptions{VigilBin: "/bin/true"}
		o.setDefaults()
		return o
	}
	bad := map[string]func(*TopologyOptions){
		"topology":       func(o *TopologyOptions) { o.Topologies = []string{"mesh"} },
		"path":           func(o *TopologyOptions) { o.Paths = []string{"haproxy"} },
		"duration":       func(o *TopologyOptions) { o.Duration = 1500 * time.Millisecond },
		"warmup":         func(o *TopologyOptions) { o.Warmup = 1500 * time.Millisecond },
		"warmup < 0":     func(o *TopologyOptions) { o.Warmup = -time.Second },
		"both":           func(o *TopologyOptions) { o.SandboxDir, o.ConfigPath = "x", "y" },
		"vary alone":     func(o *TopologyOptions) { o.VaryDurability = true },
		"keep existing":  func(o *TopologyOptions) { o.SandboxDir, o.Keep = "x", true },
		"vigil no cfg":   func(o *TopologyOptions) { o.VigilAddr = "127.0.0.1:1" },
		"cluster no cfg": func(o *TopologyOptions) { o.Cluster = "c" },
	}
	for name, mutate := range bad {
		o := base()
		mutate(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o = base()
	if err := o.validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	o.Warmup = 0 // --warmup 0s: no warm-up run
	if err := o.validate(); err != nil {
		t.Errorf("no warm-up: %v", err)
	}
}

// synthetic runs with the known shapes in them.
func shapeRuns() []TopoRun {
	sa := func(v, trx, sync string, threads int, tps, cpg float64) TopoRun {
		return TopoRun{Topology: TopoStandalone, Variant: v, TrxCommit: trx, SyncBinlog: sync, Workload: "oltp_insert", Threads: threads, Path: PathDirect,
			TPS: tps, AvgMs: 1000 / tps * float64(threads), Seconds: 5, CommitsPerGroup: ptr(cpg), StatusDelta: map[string]int64{"Binlog_group_commits": int64(tps * 5 / cpg)}}
	}
	runs := []TopoRun{
		sa(variantOff, "0", "0", 1, 9000, 1), sa(variantOff, "0", "0", 32, 10000, 2),
		sa(variantSync1, "1", "1", 1, 1500, 1), sa(variantSync1, "1", "1", 32, 7500, 8),
		sa(variantSync1000, "1", "1000", 32, 9000, 4),
		{Topology: TopoAsync, Variant: asyncVariant().Name, Workload: "oltp_insert", Threads: 1, Path: PathDirect, TPS: 1000, AvgMs: 1.0,
			Replicas: []ReplicaLag{{Node: "node2", TrxBehind: 1200, SecondsBehind: ptr(int64(2))}}, CatchUpSeconds: ptr(3.5)},
		{Topology: TopoSemiSync, Variant: semiSyncVariant().Name, Workload: "oltp_insert", Threads: 1, Path: PathDirect, TPS: 800, AvgMs: 1.25,
			SemiSync: &SemiSyncStats{NoTxDelta: 0, YesTxDelta: 4000, RunSeconds: 5, TimeoutMs: 10000}},
	}
	for _, g := range []struct {
		fc     int
		paused float64
	}{{16, 0.4}, {512, 0.1}} {
		runs = append(runs, TopoRun{Topology: TopoGalera, Variant: galeraVariant(1, g.fc).Name, SlaveThreads: 1, FCLimit: g.fc, Workload: "oltp_insert", Threads: 32, Path: PathDirect,
			TPS: 2000, Galera: &GaleraStats{PausedFraction: g.paused, Nodes: []GaleraNode{{Node: "node2", RecvQueueEnd: 7}}}})
	}
	return runs
}

func TestShapesReproduced(t *testing.T) {
	for _, s := range Shapes(shapeRuns()) {
		if !s.Measured || !s.Reproduced {
			t.Errorf("%s: measured %v reproduced %v: %s", s.Name, s.Measured, s.Reproduced, s.Evidence)
		}
	}
	// Flat numbers: measured, not reproduced, and the reason given.
	runs := shapeRuns()
	for i := range runs {
		runs[i].TPS, runs[i].AvgMs = 1000, 1
		if runs[i].Galera != nil {
			runs[i].Galera.PausedFraction = 0
		}
	}
	for _, s := range Shapes(runs) {
		if !s.Measured || s.Reproduced || !strings.Contains(s.Evidence, "not reproduced here") {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
	for _, s := range Shapes(nil) {
		if s.Measured || !strings.HasPrefix(s.Evidence, "not measured") {
			t.Errorf("no runs: %+v", s)
		}
	}
}

func TestFailoverLosses(t *testing.T) {
	got := map[string]string{}
	for _, l := range FailoverLosses(shapeRuns()) {
		got[l.Topology+" "+l.Variant] = l.Sentence
	}
	want := map[string]string{
		"standalone off":                        "loses up to about a second",
		"standalone trx_commit=1+sync_binlog=1": "nothing acknowledged is lost",
		"standalone sync_binlog=1000":           "up to 1000 binlog group commits",
		"async ":                                "1200 transactions behind (Seconds_Behind_Master 2) and took 3.5 s to catch up",
		"semisync ":                             "never fell back",
		"galera ":                               "a committed write is on every node",
	}
	for k, w := range want {
		if !strings.Contains(got[k], w) {
			t.Errorf("%s: %q lacks %q", k, got[k], w)
		}
	}
}

func TestSemiSyncLossFallback(t *testing.T) {
	s := SemiSyncLoss([]TopoRun{
		{SemiSync: &SemiSyncStats{NoTxDelta: 120, YesTxDelta: 30, AsyncSeconds: 4.1, RunSeconds: 30}},
		{SemiSync: &SemiSyncStats{RunSeconds: 30}},
	})
	if !strings.HasPrefix(s, "Semi-sync fell back to async for 4.1 s of 60 s (120 commits without") || !strings.Contains(s, "could be lost") {
		t.Error(s)
	}
}

func TestWriteTopologyMarkdown(t *testing.T) {
	runs := shapeRuns()
	runs = append(runs, TopoRun{Topology: TopoAsync, Variant: asyncVariant().Name, Workload: "oltp_insert", Threads: 1, Path: PathVigil, Failed: "boom"})
	res := &TopologyResults{Runs: runs, Shapes: Shapes(runs), Losses: FailoverLosses(runs), Storage: Storage{FSType: "ext4"}, Checks: []string{"node1: reachable"}}
	var b bytes.Buffer
	if err := WriteTopologyMarkdown(&b, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## What a failover can lose", "## Known shapes", "### oltp_insert", "## Cost of each durability", "## Group commit efficiency",
		"## Semi-sync vs async", "## Galera flow control", "node1: reachable", "| boom |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestExistingVariants(t *testing.T) {
	if v := existingVariants(TopoSemiSync, false, false); len(v) != 1 || !v[0].Current || v[0].Topology != TopoSemiSync {
		t.Errorf("%+v", v)
	}
	v := existingVariants(TopoAsync, true, false)
	if len(v) != 4 || v[0].Topology != TopoAsync {
		t.Errorf("%+v", v)
	}
}
