package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/daemon"
)

func TestCoordinationTargetName(t *testing.T) {
	if TargetVigilEtcd != "vigil+etcd" || isBaseTarget(TargetVigilEtcd) {
		t.Errorf("target %q", TargetVigilEtcd)
	}
	if got := logName(TargetVigilEtcd); got != "vigil-etcd.log" {
		t.Errorf("log %q", got)
	}
	if _, ok := RuleCountOf(TargetVigilEtcd); ok {
		t.Error("vigil+etcd taken for a rules target")
	}
	// Measured in every sysbench case, not in the Go load generator's.
	e := &env{targets: []Target{{Name: TargetDirect}, {Name: TargetVigil}, {Name: TargetHAProxy}, {Name: TargetVigilEtcd}}}
	var names []string
	for _, tg := range e.caseTargets(Case{Scenario: mustScenario(t, "point_select")}) {
		names = append(names, tg.Name)
	}
	if !slices.Equal(names, []string{TargetDirect, TargetVigil, TargetHAProxy, TargetVigilEtcd}) {
		t.Errorf("sysbench targets %v", names)
	}
	if got := e.caseTargets(Case{Scenario: mustScenario(t, "churn")}); len(got) != 3 {
		t.Errorf("churn targets %v", got)
	}
}

func mustScenario(t *testing.T, name string) Scenario {
	t.Helper()
	sc, err := ParseScenarios(name)
	if err != nil || len(sc) != 1 {
		t.Fatalf("scenario %s: %v", name, err)
	}
	return sc[0]
}

const plainVigil = `
users:
  - {name: app, password: app}
admin: {listen: 127.0.0.1:16080, token: secret-token}
state_dir: /tmp/plain-state
digests: {enabled: false}
clusters:
  - name: main
    listen: 127.0.0.1:16033
    servers:
      - {name: n1, address: 127.0.0.1:13306, role: primary}
      - {name: n2, address: 127.0.0.1:13307, role: replica}
`

func TestCoordinationConfig(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "vigil.yaml")
	if err := os.WriteFile(plain, []byte(plainVigil), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{work: dir, vigilCfg: plain}
	path, err := e.derivedVigilConfig("etcd", func(cfg *config.Config) {
		cfg.Coordination = benchCoordination("127.0.0.1:23790")
	})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "vigil-etcd.yaml" {
		t.Errorf("path %s", path)
	}
	got, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	co := got.Coordination
	if !co.Enabled() || co.Instance != "bench" || co.LeaseTTL.Duration != 4*time.Second ||
		!slices.Equal(co.Etcd.Endpoints, []string{"127.0.0.1:23790"}) || co.Etcd.Prefix != "/vigil-bench/" {
		t.Errorf("coordination %+v", co)
	}
	if got.Admin.Token != "secret-token" {
		t.Errorf("admin token %q: the bench polls the admin API with the plain Vigil's token", got.Admin.Token)
	}
	if got.Clusters[0].Listen == "127.0.0.1:16033" || got.Admin.Listen == "127.0.0.1:16080" || got.StateDir != filepath.Join(dir, "state-etcd") {
		t.Errorf("ports or state shared with the plain Vigil: %s %s %s", got.Clusters[0].Listen, got.Admin.Listen, got.StateDir)
	}
	// Everything else is the plain Vigil's.
	want, err := config.Load(plain)
	if err != nil {
		t.Fatal(err)
	}
	got.Coordination = want.Coordination
	got.Clusters[0].Listen, got.Admin.Listen, got.StateDir = want.Clusters[0].Listen, want.Admin.Listen, want.StateDir
	a, _ := want.Marshal()
	b, _ := got.Marshal()
	if !bytes.Equal(a, b) {
		t.Errorf("vigil+etcd differs from vigil beyond coordination, ports and state:\n%s\nvs\n%s", a, b)
	}
}

func TestEtcdArgs(t *testing.T) {
	args := strings.Join(etcdArgs("/tmp/w/etcd", "127.0.0.1:2001", "127.0.0.1:2002"), " ")
	for _, want := range []string{
		"--name bench", "--data-dir /tmp/w/etcd",
		"--listen-client-urls http://127.0.0.1:2001", "--advertise-client-urls http://127.0.0.1:2001",
		"--listen-peer-urls http://127.0.0.1:2002", "--initial-advertise-peer-urls http://127.0.0.1:2002",
		"--initial-cluster bench=http://127.0.0.1:2002", "--logger zap",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("etcd args %q lack %q", args, want)
		}
	}
	env := etcdEnv([]string{"PATH=/bin", "ETCD_DATA_DIR=/var/lib/etcd", "ETCDCTL_API=3", "HOME=/root"})
	if !slices.Equal(env, []string{"PATH=/bin", "HOME=/root"}) {
		t.Errorf("env %v", env)
	}
}

func TestWritesAllowed(t *testing.T) {
	mk := func(st daemon.CoordinationState) coordinationView {
		data, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var v coordinationView
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name string
		st   daemon.CoordinationState
		ok   bool
		why  string
	}{
		{"off", daemon.CoordinationState{}, false, "not enabled"},
		{"connecting", daemon.CoordinationState{Enabled: true, Lease: &coord.State{Lease: "connecting"}}, false, "not coordinated yet (lease connecting)"},
		{"not applied", daemon.CoordinationState{Enabled: true, Lease: &coord.State{Lease: "held"},
			Clusters: map[string]coord.ClusterState{"main": {Writes: "refused: this instance has not applied the newest writer record yet"}}}, false, "has not applied"},
		{"allowed", daemon.CoordinationState{Enabled: true, Lease: &coord.State{Lease: "held", LeaseID: "309fa20ef62ebf06"},
			Clusters: map[string]coord.ClusterState{"main": {Writes: "allowed", CaughtUp: true}}}, true, ""},
	}
	for _, tt := range tests {
		ok, why := mk(tt.st).writesAllowed("main")
		if ok != tt.ok || !strings.Contains(why, tt.why) {
			t.Errorf("%s: %v %q", tt.name, ok, why)
		}
	}
	if id := mk(tests[3].st).leaseID(); id != "309fa20ef62ebf06" {
		t.Errorf("lease id %q", id)
	}
	if id := mk(tests[0].st).leaseID(); id != "" {
		t.Errorf("lease id without coordination %q", id)
	}
	log := `time=2026-11-24T19:09:05.445Z level=INFO msg="coordination: lease taken" instance=bench
time=2026-11-24T19:12:23.213Z level=ERROR msg="coordination: etcd lease lost: this instance refuses writes until it holds a new lease" instance=bench
time=2026-11-24T19:12:23.238Z level=INFO msg="coordination: lease taken" instance=bench
level=ERROR msg="coordination: etcd lease lost: x"
`
	if got := strings.Join(leaseLosses(log), ", "); got != "2026-11-24T19:12:23.213Z, ?" {
		t.Errorf("lease losses %q", got)
	}
	// The admin API answers without coordination too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := waitWritesAllowed(ctx, adminAPI{addr: "127.0.0.1:1"}, "main", time.Second); err == nil {
		t.Error("a cancelled wait succeeded")
	}
}

// coordinationRuns are vigil and vigil+etcd at point_select@32, three
// reps each, with the given qps and CPU of vigil+etcd per rep.
func coordinationRuns(qps, cpu [3]float64) []Measurement {
	var runs []Measurement
	for rep := 1; rep <= 3; rep++ {
		runs = append(runs,
			run("oltp_point_select", TargetDirect, rep, 20000, 1, nil),
			run("oltp_point_select", TargetVigil, rep, []float64{15000, 15300, 14900}[rep-1], 2, ptr([]float64{40, 41, 40.5}[rep-1])),
			run("oltp_point_select", TargetHAProxy, rep, 14000, 2, ptr(45.0)),
			run("oltp_point_select", TargetVigilEtcd, rep, qps[rep-1], 2, ptr(cpu[rep-1])))
	}
	return runs
}

var coordinationTargets = []string{TargetDirect, TargetVigil, TargetHAProxy, TargetVigilEtcd}

func TestCoordinationCheck(t *testing.T) {
	tests := []struct {
		name   string
		qps    [3]float64
		cpu    [3]float64
		pass   bool
		detail string
	}{
		{"same", [3]float64{15100, 14950, 15200}, [3]float64{40.5, 40, 41}, true, "vigil+etcd/vigil qps 1.01, CPU/query 1.00; noise ±5% qps, ±5% CPU"},
		{"slower", [3]float64{13500, 13400, 13600}, [3]float64{40.5, 40, 41}, false, "qps 0.90"},
		{"costlier", [3]float64{15100, 14950, 15200}, [3]float64{45, 46, 45.5}, false, "CPU/query 1.12"},
		// Noisy reps widen the tolerance: a 9 % dip within a 20 % spread.
		{"noisy", [3]float64{13700, 12000, 15000}, [3]float64{40.5, 40, 41}, true, "noise ±22% qps"},
	}
	for _, tt := range tests {
		sum := Summarize([]string{"oltp_point_select@32"}, coordinationTargets, coordinationRuns(tt.qps, tt.cpu), nil)
		ss := sum.Scenarios[0]
		if _, ok := ss.Ratio("qps", TargetVigilEtcd, TargetVigil); !ok {
			t.Errorf("%s: no qps ratio vigil+etcd/vigil: %+v", tt.name, ss.Ratios)
		}
		if _, ok := ss.Ratio("proxy_cpu_us_per_query", TargetVigilEtcd, TargetVigil); !ok {
			t.Errorf("%s: no CPU ratio vigil+etcd/vigil", tt.name)
		}
		var found *Check
		for i, c := range sum.Checks {
			if strings.HasPrefix(c.Name, "Coordination ") {
				found = &sum.Checks[i]
			}
		}
		if found == nil {
			t.Fatalf("%s: no coordination check in %+v", tt.name, sum.Checks)
		}
		if found.Pass != tt.pass || !strings.Contains(found.Detail, tt.detail) || !strings.HasSuffix(found.Name, "on oltp_point_select, 32 threads") {
			t.Errorf("%s: %+v", tt.name, *found)
		}
	}
	// Without vigil+etcd there is no such check.
	sum := Summarize([]string{"oltp_point_select@32"}, sampleTargets, sampleRuns(), nil)
	for _, c := range sum.Checks {
		if strings.HasPrefix(c.Name, "Coordination ") {
			t.Errorf("check without vigil+etcd: %+v", c)
		}
	}
	// CPU not measured: a miss that says so.
	runs := coordinationRuns([3]float64{15000, 15000, 15000}, [3]float64{40, 40, 40})
	for i := range runs {
		if runs[i].Target == TargetVigilEtcd {
			runs[i].ProxyCPUUsPerQuery = nil
		}
	}
	sum = Summarize([]string{"oltp_point_select@32"}, coordinationTargets, runs, nil)
	for _, c := range sum.Checks {
		if strings.HasPrefix(c.Name, "Coordination ") && (c.Pass || !strings.Contains(c.Detail, "CPU per query not measured")) {
			t.Errorf("unmeasured CPU: %+v", c)
		}
	}
}

func TestCoordinationReport(t *testing.T) {
	res := &Results{Started: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	res.Runs = coordinationRuns([3]float64{15100, 14950, 15200}, [3]float64{40.5, 40, 41})
	res.Summary = Summarize([]string{"oltp_point_select@32"}, coordinationTargets, res.Runs, nil)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Coordination",
		"| case | vigil qps | vigil+etcd qps | qps ratio | vigil CPU µs/query | vigil+etcd CPU µs/query | CPU ratio | noise qps / CPU |",
		"| oltp_point_select, 32 threads | 15000 (14900–15300) | 15100 (14950–15200) | 1.01 | 40.5 (40.0–41.0) | 40.5 (40.0–41.0) | 1.00 | ±5% / ±5% | 1.01 0.98 1.02 | 1.01 0.98 1.01 |",
		"vigil+etcd/vigil", "cpu vigil+etcd/vigil",
		"PASS Coordination (etcd lease, write gate) costs nothing measurable",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "vigil+etcd/vigil 1.01  cpu vigil+etcd/vigil 1.00") {
		t.Errorf("text lacks the ratios:\n%s", txt.String())
	}
	// Without vigil+etcd, no section.
	md.Reset()
	res.Summary = Summarize([]string{"oltp_point_select@32"}, sampleTargets, sampleRuns(), nil)
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "## Coordination") {
		t.Error("coordination section without vigil+etcd")
	}
}

func TestCoordinationFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Command(context.Background(), []string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help: %d", code)
	}
	if !strings.Contains(errb.String(), "-coordination") || !strings.Contains(errb.String(), "[--coordination]") {
		t.Errorf("usage lacks --coordination:\n%s", errb.String())
	}
}

func TestPairedRatios(t *testing.T) {
	runs := coordinationRuns([3]float64{16500, 15300, 14900}, [3]float64{44, 41, 40.5})
	for i := range runs {
		if runs[i].Target == TargetVigil && runs[i].Rep == 2 {
			runs[i].Error = "sysbench exited 1"
		}
		if runs[i].Target == TargetVigilEtcd && runs[i].Rep == 3 {
			runs[i].ProxyCPUUsPerQuery = nil
		}
	}
	q, c := pairedRatios(runs, "oltp_point_select@32")
	if fmtRatios(q) != "1.10 1.00" || fmtRatios(c) != "1.10" {
		t.Errorf("paired qps %v cpu %v", q, c)
	}
	if q, c := pairedRatios(runs, "oltp_read_write@32"); q != nil || c != nil || fmtRatios(q) != na {
		t.Errorf("other case: %v %v", q, c)
	}
}
