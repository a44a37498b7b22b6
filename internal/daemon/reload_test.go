package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/monitor"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/topology"
)

// deadAddr is an address where nothing listens: the servers of the test
// clusters refuse connections at once, so their parts build and run
// without a database.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testConfig is a config with cluster main (servers n1, n2 and n3, which
// refuse connections) and the admin API off; more is appended to it.
func testConfig(t *testing.T, stateDir string) string {
	return fmt.Sprintf(`state_dir: %s
admin: {listen: "off"}
users:
  - {name: app, password: app}
clusters:
  - name: main
    listen: 127.0.0.1:0
    servers:
      - {name: n1, address: %s, role: primary}
      - {name: n2, address: %s, role: replica}
      - {name: n3, address: %s, role: replica}
`, stateDir, deadAddr(t), deadAddr(t), deadAddr(t))
}

type testEnv struct {
	d    *daemon
	path string // the config file reload reads
	yaml string // what it holds now
}

// startDaemon runs a daemon on testConfig until the test ends.
func startDaemon(t *testing.T) *testEnv {
	t.Helper()
	dir := t.TempDir()
	e := &testEnv{path: filepath.Join(dir, "vigil.yaml"), yaml: testConfig(t, filepath.Join(dir, "state"))}
	e.write(t, e.yaml)
	cfg, err := config.Load(e.path)
	if err != nil {
		t.Fatal(err)
	}
	e.d = &daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfgPath: e.path}
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.d.start(ctx, cfg); err != nil {
		cancel()
		e.d.stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); e.d.stop() })
	return e
}

func (e *testEnv) write(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(e.path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runtimeState is what a reload may change, to compare before and after.
type runtimeState struct {
	running  *config.Config
	base     *config.Config
	clusters map[string]*clusterRuntime
	cfgs     map[string]*config.Cluster
	slots    map[string][]slot
	lns      map[string]net.Listener
	rules    map[string]any
}

func (e *testEnv) state() runtimeState {
	d := e.d
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	s := runtimeState{running: d.running.Load(), base: d.base, clusters: d.clusterMap(), cfgs: map[string]*config.Cluster{},
		slots: map[string][]slot{}, lns: map[string]net.Listener{}, rules: map[string]any{}}
	for name, rt := range s.clusters {
		s.cfgs[name] = rt.cfg.Load()
		s.slots[name] = append([]slot(nil), rt.slots...)
		s.lns[name] = rt.ln
		s.rules[name] = rt.fe.ProcessingNow().Rules
	}
	return s
}

// unchanged fails the test if anything a reload changes differs from
// before.
func (s runtimeState) unchanged(t *testing.T, now runtimeState) {
	t.Helper()
	if now.running != s.running || now.base != s.base {
		t.Error("the running config was replaced")
	}
	if len(now.clusters) != len(s.clusters) {
		t.Fatalf("clusters %d, were %d", len(now.clusters), len(s.clusters))
	}
	for name, rt := range s.clusters {
		switch {
		case now.clusters[name] != rt:
			t.Errorf("cluster %s was replaced", name)
		case now.cfgs[name] != s.cfgs[name]:
			t.Errorf("cluster %s: its config was replaced", name)
		case fmt.Sprint(now.slots[name]) != fmt.Sprint(s.slots[name]):
			t.Errorf("cluster %s: slots %v, were %v", name, now.slots[name], s.slots[name])
		case now.lns[name] != s.lns[name]:
			t.Errorf("cluster %s: the listener was replaced", name)
		case now.rules[name] != s.rules[name]:
			t.Errorf("cluster %s: the rules were replaced", name)
		}
	}
}

func (e *testEnv) events(kind string) []string {
	var out []string
	for _, ev := range e.d.journal.list("", "", kind, time.Time{}, 0) {
		out = append(out, ev.Message)
	}
	return out
}

// freePort reports whether addr can be listened on (nothing holds it).
func freePort(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// Every part a reload builds can fail; each failure rejects the whole
// config: nothing of it is applied, what it built is released, and a
// config_rejected event says why.
func TestReloadRejectedChangesNothing(t *testing.T) {
	e := startDaemon(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	newPort := deadAddr(t) // a listen address a rejected config opened and must close again
	dir := filepath.Dir(e.path)
	badRule := "\n    rules:\n      - {name: r1, match: {query: '^SELECT ('}, route: writer}" // not a regexp
	newCluster := func(name, listen string) string {
		return fmt.Sprintf("  - name: %s\n    listen: %s\n    servers:\n      - {name: m1, address: %s, role: primary}\n", name, listen, deadAddr(t))
	}
	for _, tc := range []struct {
		name string
		yaml string // the config file
		want string // in the error
	}{
		{"does not parse", e.yaml + "  - bogus: 1\n", "bogus"},
		{"cluster type", strings.Replace(e.yaml, "listen: 127.0.0.1:0", "type: galera\n    listen: 127.0.0.1:0", 1), "clusters[0].type"},
		{"state_dir", strings.Replace(e.yaml, "state_dir: "+dir+"/state", "state_dir: "+dir+"/elsewhere", 1), "state_dir"},
		{"rule does not compile", strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: 127.0.0.1:0"+badRule, 1), "clusters[0].rules"},
		{"tls files", strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: 127.0.0.1:0\n    tls: {cert: "+dir+"/none.pem, key: "+dir+"/none.key}", 1), "clusters[0]: tls"},
		{"listen address taken", strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: "+taken.Addr().String(), 1), "clusters[0].listen"},
		{"new cluster listen taken", e.yaml + newCluster("extra", taken.Addr().String()), "clusters[1] (new cluster extra)"},
		{"second new cluster fails", e.yaml + newCluster("extra", newPort) + newCluster("other", taken.Addr().String()), "clusters[2] (new cluster other)"},
		{"moved listener, then a new cluster fails", strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: "+newPort, 1) +
			newCluster("other", taken.Addr().String()), "clusters[1] (new cluster other)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml, want := tc.yaml, tc.want
			before := e.state()
			rejected := len(e.events("config_rejected"))
			e.write(t, yaml)
			err := e.d.reload(e.path)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("reload: %v; want an error naming %q", err, want)
			}
			before.unchanged(t, e.state())
			if evs := e.events("config_rejected"); len(evs) != rejected+1 {
				t.Errorf("config_rejected events %v", evs)
			}
			if !freePort(newPort) {
				t.Errorf("a listener the rejected config opened on %s is still open", newPort)
			}
		})
	}
	e.write(t, e.yaml)
	if err := e.d.reload(e.path); err != nil {
		t.Fatalf("the good config after the rejected ones: %v", err)
	}
}

// A malformed state_dir overlay rejects the reload.
func TestReloadRejectsBadOverlay(t *testing.T) {
	e := startDaemon(t)
	before := e.state()
	ov := overlayPath(e.state().running.StateDir)
	if err := os.MkdirAll(filepath.Dir(ov), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ov, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.d.reload(e.path); err == nil || !strings.Contains(err.Error(), "membership.json") {
		t.Fatalf("reload with a malformed overlay: %v", err)
	}
	before.unchanged(t, e.state())
}

// A config that builds is applied whole: rules, users, an added and a
// removed server, a new cluster, a removed cluster.
func TestReloadApplies(t *testing.T) {
	e := startDaemon(t)
	before := e.state()
	main := before.clusters["main"]
	extraListen := deadAddr(t)
	yaml := strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: 127.0.0.1:0\n    rules:\n      - {name: r1, match: {query: '^SELECT 1'}, route: writer}", 1)
	yaml = strings.Replace(yaml, "      - {name: n3,", "      - {name: n4,", 1) // n3 removed, n4 added
	yaml = strings.Replace(yaml, "  - {name: app, password: app}", "  - {name: app, password: app}\n  - {name: rep, password: rep}", 1)
	yaml += fmt.Sprintf("  - name: extra\n    listen: %s\n    servers:\n      - {name: m1, address: %s, role: primary}\n", extraListen, deadAddr(t))
	e.write(t, yaml)
	if err := e.d.reload(e.path); err != nil {
		t.Fatal(err)
	}
	now := e.state()
	if now.running == before.running || len(now.running.Users) != 2 {
		t.Fatal("the new config is not the running one")
	}
	if now.clusters["main"] != main || len(now.rules) != 2 {
		t.Fatalf("clusters %v", now.clusters)
	}
	if specs := main.fe.ProcessingNow().Rules.Specs(); len(specs) != 1 || specs[0].Name != "r1" {
		t.Errorf("rules %v", specs)
	}
	if s := now.slots["main"]; len(s) != 4 || !s[2].Removed || s[3].Name != "n4" || main.pool(3) == nil {
		t.Errorf("slots %v", s)
	}
	if freePort(extraListen) {
		t.Error("the new cluster does not listen")
	}
	if evs := e.events("config_reloaded"); len(evs) != 1 {
		t.Errorf("config_reloaded events %v", evs)
	}
	if evs := e.events("cluster_added"); len(evs) != 1 || !strings.Contains(evs[0], "extra") {
		t.Errorf("cluster_added events %v", evs)
	}

	// The cluster goes again: stopped, its listener closed.
	e.write(t, e.yaml)
	if err := e.d.reload(e.path); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.state().clusters["extra"]; ok || !freePort(extraListen) {
		t.Error("the removed cluster still runs")
	}
	if evs := e.events("cluster_removed"); len(evs) != 1 {
		t.Errorf("cluster_removed events %v", evs)
	}
}

// ValidateConfig (POST /api/v1/config/validate) builds like a reload and
// applies nothing.
func TestValidateConfigChangesNothing(t *testing.T) {
	e := startDaemon(t)
	before := e.state()
	bad := strings.Replace(e.yaml, "listen: 127.0.0.1:0", "type: galera\n    listen: 127.0.0.1:0", 1)
	if err := e.d.ValidateConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("ValidateConfig of a type change: %v", err)
	}
	before.unchanged(t, e.state())
	if evs := e.events("config_rejected"); len(evs) != 0 {
		t.Errorf("validation journaled %v", evs)
	}
}

// The config file the daemon runs validates (as `vigil ctl` / the
// dashboard's validate would be asked to), and a good config with a new
// cluster leaves nothing open behind it.
func TestValidateConfigAcceptsGoodConfig(t *testing.T) {
	e := startDaemon(t)
	before := e.state()
	if err := e.d.ValidateConfig([]byte(e.yaml)); err != nil {
		t.Fatalf("the running config file does not validate: %v", err)
	}
	extraListen := deadAddr(t)
	good := e.yaml + fmt.Sprintf("  - name: extra\n    listen: %s\n    servers:\n      - {name: m1, address: %s, role: primary}\n", extraListen, deadAddr(t))
	if err := e.d.ValidateConfig([]byte(good)); err != nil {
		t.Fatal(err)
	}
	before.unchanged(t, e.state())
	if !freePort(extraListen) {
		t.Error("validation left the new cluster's listener open")
	}
}

// greetRecorder fakes the servers' greetings and records whether any was
// read while reloadMu was held.
type greetRecorder struct {
	d       *daemon
	mu      sync.Mutex
	dials   []string
	underMu []string
	version string
}

func (g *greetRecorder) greet(_ context.Context, addr string) *mysqlproto.Greeting {
	// Greetings run in parallel: the probe is made under g.mu, so that one
	// greeting's probe (its brief TryLock) is never taken by another for
	// the daemon holding the lock.
	g.mu.Lock()
	defer g.mu.Unlock()
	locked := !g.d.reloadMu.TryLock()
	if !locked {
		g.d.reloadMu.Unlock()
	}
	g.dials = append(g.dials, addr)
	if locked {
		g.underMu = append(g.underMu, addr)
	}
	return &mysqlproto.Greeting{ServerVersion: g.version, Collation: 45}
}

func (g *greetRecorder) take() (dials, underMu []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	dials, underMu, g.dials, g.underMu = g.dials, g.underMu, nil, nil
	return dials, underMu
}

// shownVersion is the server version a cluster's listener greets
// clients with.
func shownVersion(t *testing.T, rt *clusterRuntime) string {
	t.Helper()
	g := readGreeting(context.Background(), rt.ln.Addr().String())
	if g == nil {
		t.Fatal("the cluster's listener sent no greeting")
	}
	return g.ServerVersion
}

// A reload, a membership change and a validation read the servers'
// greetings before reloadMu, never under it (nor during the swap), and
// what clients are shown is what the servers said.
func TestReloadDialsOutsideItsLock(t *testing.T) {
	e := startDaemon(t)
	g := &greetRecorder{d: e.d, version: "10.11.42-MariaDB"}
	e.d.greet = g.greet
	main := e.state().clusters["main"]

	if err := e.d.reload(e.path); err != nil {
		t.Fatal(err)
	}
	dials, under := g.take()
	if len(dials) != 3 || len(under) != 0 {
		t.Fatalf("reload greeted %v, %v of them under reloadMu", dials, under)
	}
	if v := shownVersion(t, main); v != "10.11.42-MariaDB-vigil" {
		t.Fatalf("clients are shown %q", v)
	}

	newAddr := deadAddr(t)
	g.version = "11.4.1-MariaDB"
	if err := e.d.AddServer(context.Background(), "main", admin.ServerSpec{Name: "n9", Address: newAddr}); err != nil {
		t.Fatal(err)
	}
	dials, under = g.take()
	if len(dials) != 4 || !slices.Contains(dials, newAddr) || len(under) != 0 {
		t.Fatalf("AddServer greeted %v, %v of them under reloadMu", dials, under)
	}
	if v := shownVersion(t, main); v != "11.4.1-MariaDB-vigil" {
		t.Fatalf("clients are shown %q", v)
	}

	if err := e.d.ValidateConfig([]byte(e.yaml)); err != nil {
		t.Fatal(err)
	}
	if dials, _ = g.take(); len(dials) != 0 {
		t.Fatalf("validation dialled %v", dials)
	}
}

// Servers a reload removes drain before the swap starts, all at once:
// the reload waits for the slowest drain, not for their sum, and no part
// of the new config is in force while they drain.
func TestReloadDrainsBeforeTheSwap(t *testing.T) {
	e := startDaemon(t)
	main := e.state().clusters["main"]
	// Statements in flight on n2 and n3 that never end: each drain
	// lasts its whole drain_timeout.
	main.fe.Balancer().Begin(1)
	main.fe.Balancer().Begin(2)
	defer main.fe.Balancer().End(1)
	defer main.fe.Balancer().End(2)
	const drain = 300 * time.Millisecond
	yaml := strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: 127.0.0.1:0\n    failover: {drain_timeout: 300ms}", 1)
	yaml = strings.Replace(yaml, "      - {name: n2,", "      - {name: n5,", 1)
	yaml = strings.Replace(yaml, "      - {name: n3,", "      - {name: n6,", 1)
	yaml = strings.Replace(yaml, "  - {name: app, password: app}", "  - {name: app, password: app}\n  - {name: rep, password: rep}", 1)
	e.write(t, yaml)
	oldCfg := main.cfg.Load()
	stale := make(chan bool, 1)
	go func() {
		time.Sleep(drain / 2) // in the middle of the drains
		stale <- main.cfg.Load() == oldCfg && len(e.d.running.Load().Users) == 1
	}()
	start := time.Now()
	if err := e.d.reload(e.path); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < drain || took > drain*3/2+time.Second/2 {
		t.Errorf("the reload took %v with two drains of %v each", took, drain)
	}
	if !<-stale {
		t.Error("part of the new config was in force during the drain")
	}
	if s := e.state().slots["main"]; len(s) != 5 || !s[1].Removed || !s[2].Removed {
		t.Fatalf("slots %v", s)
	}
}

// A daemon that stops ends a drain at once.
func TestDrainEndsWhenTheDaemonStops(t *testing.T) {
	e := startDaemon(t)
	main := e.state().clusters["main"]
	main.fe.Balancer().Begin(1)
	defer main.fe.Balancer().End(1)
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{log: e.d.log, ctx: ctx} // the daemon as drain sees it
	done := make(chan struct{})
	go func() {
		d.drain(main, 1, "n2", config.Cluster{}) // drain_timeout unset: 10 s
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the drain went on after the daemon stopped")
	}
}

// The one step of a swap that can still fail after the build (the
// monitor refuses the new servers: a failover made a removed server the
// writer meanwhile) leaves that cluster wholly as it was — servers,
// rules, options, listener, its config — and the running config says so;
// the reload reports it as applied with errors.
func TestReloadSwapFailureKeepsTheClusterWhole(t *testing.T) {
	e := startDaemon(t)
	before := e.state()
	main := before.clusters["main"]
	e.d.setMonitorOptions = func(*clusterRuntime, monitor.Options) error {
		return errors.New("n3 is the writer: switch over to another server before removing it")
	}
	newListen := deadAddr(t)
	yaml := strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: "+newListen+"\n    rules:\n      - {name: r1, match: {query: '^SELECT 1'}, route: writer}", 1)
	yaml = strings.Replace(yaml, "      - {name: n3,", "      - {name: n4,", 1)
	yaml = strings.Replace(yaml, "  - {name: app, password: app}", "  - {name: app, password: app}\n  - {name: rep, password: rep}", 1)
	e.write(t, yaml)
	err := e.d.reload(e.path)
	if err == nil || !strings.Contains(err.Error(), "cluster main: servers: n3 is the writer") {
		t.Fatalf("reload: %v", err)
	}
	now := e.state()
	if now.cfgs["main"] != before.cfgs["main"] || now.rules["main"] != before.rules["main"] || now.lns["main"] != before.lns["main"] ||
		fmt.Sprint(now.slots["main"]) != fmt.Sprint(before.slots["main"]) {
		t.Error("the cluster whose swap failed runs part of the new config")
	}
	if !freePort(newListen) {
		t.Error("the new listen address stayed open")
	}
	if st := main.mon.State(); len(st.Servers) != 3 || st.Servers[2].Name != "n3" {
		t.Errorf("monitor servers %+v", st.Servers)
	}
	run := now.running.Clusters[0]
	if len(run.Servers) != 3 || run.Servers[2].Name != "n3" || len(run.Rules) != 0 || run.Listen != "127.0.0.1:0" {
		t.Errorf("the running config shows cluster main as %+v", run)
	}
	if len(now.running.Users) != 2 {
		t.Error("the users (not the cluster's) were not applied")
	}
	if evs := e.events("config_rejected"); len(evs) != 1 || !strings.HasPrefix(evs[0], "applied except: ") {
		t.Errorf("events %v", evs)
	}
	// The monitor takes it next time: the reload applies.
	e.d.setMonitorOptions = nil
	if err := e.d.reload(e.path); err != nil {
		t.Fatal(err)
	}
	if s := e.state().slots["main"]; len(s) != 4 || !s[2].Removed || s[3].Name != "n4" {
		t.Fatalf("slots %v", s)
	}
}

// adminState is the state the monitor of cluster main shows for server
// name (OfflineSoft while it drains).
func (e *testEnv) adminState(t *testing.T, name string) topology.State {
	t.Helper()
	snap := e.state().clusters["main"].mon.Snapshot()
	i := snap.Index(name)
	if i < 0 {
		t.Fatalf("the monitor has no server %s", name)
	}
	return snap.Servers[i].State
}

// waitDraining waits until server name drains (it leaves routing).
func (e *testEnv) waitDraining(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.adminState(t, name) != topology.OfflineSoft {
		if time.Now().After(deadline) {
			t.Fatalf("the drain of %s never started", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A reload waits for its drains without holding reloadMu: validations,
// membership changes and other reloads are not blocked for up to
// drain_timeout.
func TestReloadDrainsWithoutTheLock(t *testing.T) {
	e := startDaemon(t)
	main := e.state().clusters["main"]
	main.fe.Balancer().Begin(1) // a statement on n2 that never ends
	defer main.fe.Balancer().End(1)
	yaml := strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: 127.0.0.1:0\n    failover: {drain_timeout: 1s}", 1)
	yaml = strings.Replace(yaml, "      - {name: n2,", "      - {name: n5,", 1)
	e.write(t, yaml)
	done := make(chan error, 1)
	go func() { done <- e.d.reload(e.path) }()
	e.waitDraining(t, "n2") // then take the lock
	if !e.d.reloadMu.TryLock() {
		t.Fatal("reloadMu is held while the reload drains")
	}
	e.d.reloadMu.Unlock()
	if err := e.d.ValidateConfig([]byte(yaml)); err != nil {
		t.Fatalf("validation during the drain: %v", err)
	}
	select {
	case <-done:
		t.Fatal("the reload ended before its drain_timeout")
	default:
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := e.state().slots["main"]; !s[1].Removed {
		t.Fatalf("n2 was not removed: %v", s)
	}
}

// A change applied while a reload drains makes that reload fail whole:
// its plan was built against a runtime that is gone. The servers it
// drained serve again, and the other change stays in force.
func TestReloadChangedWhileDraining(t *testing.T) {
	e := startDaemon(t)
	main := e.state().clusters["main"]
	main.fe.Balancer().Begin(1)
	defer main.fe.Balancer().End(1)
	removing := strings.Replace(e.yaml, "listen: 127.0.0.1:0", "listen: 127.0.0.1:0\n    failover: {drain_timeout: 1s}", 1)
	removing = strings.Replace(removing, "      - {name: n2,", "      - {name: n5,", 1)
	e.write(t, removing)
	done := make(chan error, 1)
	go func() { done <- e.d.reload(e.path) }()
	e.waitDraining(t, "n2")
	// Meanwhile: another user, nothing removed.
	other := strings.Replace(e.yaml, "  - {name: app, password: app}", "  - {name: app, password: app}\n  - {name: rep, password: rep}", 1)
	e.write(t, other)
	if err := e.d.reload(e.path); err != nil {
		t.Fatalf("the second reload: %v", err)
	}
	err := <-done
	if !errors.Is(err, errChangedWhileDraining) {
		t.Fatalf("the draining reload returned %v, want errChangedWhileDraining", err)
	}
	if s := e.state().slots["main"]; len(s) != 3 || s[1].Removed {
		t.Fatalf("slots %v: the first reload's removal went in", s)
	}
	if got := e.adminState(t, "n2"); got == topology.OfflineSoft {
		t.Fatalf("n2 is still %v after the failed reload, want its override gone", got)
	}
	if users := e.d.running.Load().Users; len(users) != 2 {
		t.Fatalf("running users %v: the second reload's change is gone", users)
	}
}
