package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vigil-db/vigil/internal/config"
)

// fakeVigilEnv makes the test binary act as a Vigil daemon (see
// TestMain): `run --config FILE` listens on FILE's admin and proxy
// addresses until SIGTERM.
const fakeVigilEnv = "VIGIL_SANDBOX_TEST_FAKE_VIGIL"

func TestMain(m *testing.M) {
	if os.Getenv(fakeVigilEnv) == "1" {
		os.Exit(fakeVigil(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeVigil is a stand-in for `vigil run --config FILE`: it reads the
// admin and proxy listen addresses of FILE, answers HTTP on the first and
// accepts connections on the second.
func fakeVigil(args []string) int {
	if len(args) != 3 || args[0] != "run" || args[1] != "--config" {
		fmt.Fprintf(os.Stderr, "fake vigil: want run --config FILE, got %q\n", args)
		return 2
	}
	data, err := os.ReadFile(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake vigil:", err)
		return 1
	}
	var cfg struct {
		Admin struct {
			Listen string `yaml:"listen"`
		} `yaml:"admin"`
		Clusters []struct {
			Listen string `yaml:"listen"`
		} `yaml:"clusters"`
		Coordination struct {
			Instance string `yaml:"instance"`
		} `yaml:"coordination"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil || len(cfg.Clusters) != 1 || cfg.Coordination.Instance == "" {
		fmt.Fprintf(os.Stderr, "fake vigil: bad config (%v): %+v\n", err, cfg)
		return 1
	}
	admin, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake vigil:", err)
		return 1
	}
	proxy, err := net.Listen("tcp", cfg.Clusters[0].Listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake vigil:", err)
		return 1
	}
	go func() {
		_ = http.Serve(admin, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		}))
	}()
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	fmt.Fprintf(os.Stderr, "fake vigil %s: admin %s, proxy %s\n", cfg.Coordination.Instance, cfg.Admin.Listen, cfg.Clusters[0].Listen)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return 0
}

// auxManifest is a manifest with 3 nodes, etcd members and Vigil daemons
// on base port 23306.
func auxManifest(t *testing.T, etcd, vigils int) *Manifest {
	t.Helper()
	o := Options{Topology: Replication, Nodes: 3, Etcd: etcd, Vigils: vigils, VigilBinary: "/usr/local/bin/vigil"}
	plan, err := planPorts(23306, o)
	if err != nil {
		t.Fatal(err)
	}
	return newManifest("/tmp/sb", o, plan, true)
}

func TestPlanPortsAux(t *testing.T) {
	p, err := planPorts(23306, Options{Topology: Galera, Nodes: 3, Etcd: 3, Vigils: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantEtcd := []EtcdPorts{{23366, 23367}, {23368, 23369}, {23370, 23371}}
	wantVigils := []VigilPorts{{Proxy: 23376, Admin: 23377}, {Proxy: 23378, Admin: 23379}, {Proxy: 23380, Admin: 23381}}
	if !reflect.DeepEqual(p.Etcd, wantEtcd) || !reflect.DeepEqual(p.Vigils, wantVigils) {
		t.Errorf("etcd %+v vigils %+v; want %+v %+v", p.Etcd, p.Vigils, wantEtcd, wantVigils)
	}
	seen := map[int]string{}
	for _, u := range p.All() {
		if other, dup := seen[u.Port]; dup {
			t.Errorf("port %d used for %s and %s", u.Port, other, u.What)
		}
		if u.Port < p.Base || u.Port >= p.Base+planSpan(3, true) {
			t.Errorf("port %d (%s) outside the plan's span", u.Port, u.What)
		}
		seen[u.Port] = u.What
	}
	if len(seen) != 3*4+2+6+6 {
		t.Errorf("plan has %d ports, want 26", len(seen))
	}
	// With the most nodes, the node ports stay below the etcd ports.
	big, err := planPorts(23306, Options{Topology: Replication, Nodes: MaxNodes, Etcd: 3, Vigils: 3})
	if err != nil {
		t.Fatal(err)
	}
	if last := big.Nodes[MaxNodes-1].MySQL; last >= big.Etcd[0].Client {
		t.Errorf("node%d port %d overlaps the etcd ports from %d", MaxNodes, last, big.Etcd[0].Client)
	}
	// Without etcd and vigils the plan is what it always was.
	plain, _ := planPorts(23306, Options{Topology: Replication, Nodes: 3})
	old, _ := PlanPorts(23306, 3, false)
	if !reflect.DeepEqual(plain, old) {
		t.Errorf("plan without aux = %+v, want %+v", plain, old)
	}
}

func TestOptionsValidateAux(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Dir: "/x", Etcd: 2}, "--etcd must be 0, 1 or 3"},
		{Options{Dir: "/x", Etcd: 5}, "--etcd must be 0, 1 or 3"},
		{Options{Dir: "/x", Etcd: -1}, "--etcd must be 0, 1 or 3"},
		{Options{Dir: "/x", Etcd: 3, Vigils: 4}, "--vigils must be between 0 and 3"},
		{Options{Dir: "/x", Etcd: 3, Vigils: -1}, "--vigils must be between 0 and 3"},
		{Options{Dir: "/x", Vigils: 2}, "--vigils needs --etcd"},
	} {
		err := c.o.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validate(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
	for _, o := range []Options{{Dir: "/x", Etcd: 1}, {Dir: "/x", Etcd: 3, Vigils: 2}, {Dir: "/x", Etcd: 1, Vigils: 3}} {
		if err := o.withDefaults().validate(); err != nil {
			t.Errorf("validate(%+v) = %v", o, err)
		}
	}
}

func TestManifestAux(t *testing.T) {
	m := auxManifest(t, 3, 2)
	if len(m.Etcd) != 3 || len(m.Vigils) != 2 {
		t.Fatalf("etcd %+v vigils %+v", m.Etcd, m.Vigils)
	}
	e := m.Etcd[1]
	if e.Name != "etcd2" || e.ClientPort != 23368 || e.PeerPort != 23369 || e.DataDir != "/tmp/sb/etcd2" ||
		e.Log != "/tmp/sb/etcd2/etcd.log" || e.Host != "127.0.0.1" || e.Cgroup != sandboxCgroup("/tmp/sb")+"/etcd2" {
		t.Errorf("etcd2 = %+v", e)
	}
	if got := m.EtcdEndpoints(); !reflect.DeepEqual(got, []string{"127.0.0.1:23366", "127.0.0.1:23368", "127.0.0.1:23370"}) {
		t.Errorf("EtcdEndpoints = %q", got)
	}
	if !strings.HasPrefix(m.EtcdClusterToken, "vigil-sandbox-") || len(m.EtcdClusterToken) < 20 {
		t.Errorf("cluster token %q", m.EtcdClusterToken)
	}
	if other := auxManifest(t, 3, 0); other.EtcdClusterToken == m.EtcdClusterToken {
		t.Error("two sandboxes share an etcd cluster token")
	}
	v := m.Vigils[1]
	want := VigilInstance{
		Name: "vigil2", Binary: "/usr/local/bin/vigil", Config: "/tmp/sb/vigil2/vigil.yaml",
		Proxy: Endpoint{"127.0.0.1", 23378}, Admin: Endpoint{"127.0.0.1", 23379},
		StateDir: "/tmp/sb/vigil2/state", SourceAddress: "127.0.0.12", Log: "/tmp/sb/vigil2/vigil.log",
		Cgroup: sandboxCgroup("/tmp/sb") + "/vigil2",
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("vigil2 = %+v\nwant %+v", v, want)
	}
	if m.Vigils[0].SourceAddress != "127.0.0.11" {
		t.Errorf("vigil1 source address %q", m.Vigils[0].SourceAddress)
	}

	// Without etcd and vigils, sandbox.json has neither key.
	plain := testManifest(t, Replication, 3, false)
	data, _ := MarshalManifest(plain)
	for _, k := range []string{`"etcd`, `"vigils"`} {
		if strings.Contains(string(data), k) {
			t.Errorf("sandbox.json without aux holds %s:\n%s", k, data)
		}
	}

	// The JSON shape, and a round trip through sandbox.json.
	m.Etcd[0].PID, m.Etcd[2].Paused, m.Vigils[0].Isolated = 4242, true, true
	data, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Etcd   []map[string]any `json:"etcd"`
		Vigils []map[string]any `json:"vigils"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "host", "client_port", "peer_port", "data_dir", "log", "pid", "cgroup"} {
		if _, ok := raw.Etcd[0][k]; !ok {
			t.Errorf("etcd member lacks %q: %v", k, raw.Etcd[0])
		}
	}
	if raw.Etcd[2]["paused"] != true {
		t.Errorf("etcd3 paused not recorded: %v", raw.Etcd[2])
	}
	for _, k := range []string{"name", "binary", "config", "proxy", "admin", "state_dir", "source_address", "log", "pid", "isolated"} {
		if _, ok := raw.Vigils[0][k]; !ok {
			t.Errorf("vigil lacks %q: %v", k, raw.Vigils[0])
		}
	}
	dir := t.TempDir()
	m.Dir = dir
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Manifest()
	if !reflect.DeepEqual(&got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
	}
	// Names: every kind is known; unknown ones list them all.
	for _, n := range []string{"node1", "etcd3", "vigil2"} {
		if err := s.CheckName(n); err != nil {
			t.Errorf("CheckName(%s) = %v", n, err)
		}
	}
	for _, n := range []string{"etcd4", "vigil3", "node9", "bogus"} {
		err := s.CheckName(n)
		if err == nil || !strings.Contains(err.Error(), "node1, node2, node3, etcd1, etcd2, etcd3, vigil1, vigil2") {
			t.Errorf("CheckName(%s) = %v", n, err)
		}
	}
	if pid, err := s.PID("etcd1"); err != nil || pid != 4242 {
		t.Errorf("PID(etcd1) = %d, %v", pid, err)
	}
	// A clone does not share the slices.
	c := s.Manifest()
	c.Etcd[0].PID, c.Vigils[0].PID = 1, 1
	if again := s.Manifest(); again.Etcd[0].PID != 4242 || again.Vigils[0].PID != 0 {
		t.Error("Manifest() shares the etcd or vigils slice")
	}
}

func TestEtcdArgs(t *testing.T) {
	m := auxManifest(t, 3, 0)
	m.EtcdClusterToken = "vigil-sandbox-tok"
	got := strings.Join(etcdArgs(m, m.Etcd[1], "existing"), " ")
	want := "--name etcd2 --data-dir /tmp/sb/etcd2" +
		" --listen-client-urls http://127.0.0.1:23368 --advertise-client-urls http://127.0.0.1:23368" +
		" --listen-peer-urls http://127.0.0.1:23369 --initial-advertise-peer-urls http://127.0.0.1:23369" +
		" --initial-cluster etcd1=http://127.0.0.1:23367,etcd2=http://127.0.0.1:23369,etcd3=http://127.0.0.1:23371" +
		" --initial-cluster-state existing --initial-cluster-token vigil-sandbox-tok" +
		" --heartbeat-interval 50 --election-timeout 500 --pre-vote --quota-backend-bytes 268435456" +
		" --logger zap --log-outputs stderr"
	if got != want {
		t.Errorf("etcd args\n got %s\nwant %s", got, want)
	}
	// The process is recognised by its data directory.
	cmdline := []byte("/usr/bin/etcd\x00" + strings.Join(etcdArgs(m, m.Etcd[1], "new"), "\x00") + "\x00")
	if !m.Etcd[1].proc().match(cmdline) || m.Etcd[0].proc().match(cmdline) {
		t.Error("etcd2's command line is not told apart by its data dir")
	}
}

func TestProcIDMatch(t *testing.T) {
	id := procID{flag: "--config", value: "/d/vigil1/vigil.yaml"}
	for cmdline, want := range map[string]bool{
		"vigil\x00run\x00--config\x00/d/vigil1/vigil.yaml\x00": true,
		"vigil\x00run\x00--config=/d/vigil1/vigil.yaml\x00":    true,
		"vigil\x00run\x00--config\x00/d/vigil2/vigil.yaml\x00": false,
		"vigil\x00run\x00/d/vigil1/vigil.yaml\x00--config\x00": false,
		"": false,
	} {
		if got := id.match([]byte(cmdline)); got != want {
			t.Errorf("match(%q) = %v", cmdline, got)
		}
	}
	if !nodeProc("/d/node1/my.cnf").match([]byte("mariadbd\x00--defaults-file=/d/node1/my.cnf\x00--user=mysql\x00")) {
		t.Error("node's --defaults-file not matched")
	}
}

func TestRenderInstanceConfig(t *testing.T) {
	m := auxManifest(t, 3, 2)
	v := m.Vigils[1]
	data, err := RenderInstanceConfig(m, v)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.HasPrefix(text, "# Vigil configuration of vigil2") || !strings.Contains(text, "# Run: vigil run --config /tmp/sb/vigil2/vigil.yaml\n") {
		t.Errorf("header:\n%s", text)
	}
	// Every key has a comment line above it where it first appears (or
	// above its dash), like config.Minimal writes.
	lines := strings.Split(text, "\n")
	explained := map[string]bool{}
	for i, l := range lines {
		key, _, ok := strings.Cut(strings.TrimLeft(strings.TrimSpace(l), "- "), ":")
		if !ok || strings.HasPrefix(strings.TrimSpace(l), "#") || explained[key] {
			continue
		}
		explained[key] = true
		if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
			t.Errorf("key %q (line %d) has no comment:\n%s", key, i+1, text)
		}
	}
	// The coordination block, exactly.
	var doc struct {
		Coordination struct {
			Instance string `yaml:"instance"`
			LeaseTTL string `yaml:"lease_ttl"`
			Etcd     struct {
				Endpoints       []string `yaml:"endpoints"`
				Prefix          string   `yaml:"prefix"`
				SourceAddress   string   `yaml:"source_address"`
				ElectionTimeout string   `yaml:"election_timeout"`
			} `yaml:"etcd"`
		} `yaml:"coordination"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Coordination
	if c.Instance != "vigil2" || c.LeaseTTL != "2s" || c.Etcd.Prefix != "/vigil-sandbox/" || c.Etcd.SourceAddress != "127.0.0.12" || c.Etcd.ElectionTimeout != "500ms" ||
		!reflect.DeepEqual(c.Etcd.Endpoints, []string{"127.0.0.1:23366", "127.0.0.1:23368", "127.0.0.1:23370"}) {
		t.Errorf("coordination = %+v", c)
	}
	// The rest is the sandbox's vigil.yaml with this daemon's listeners
	// and state dir, and the same admin token.
	before, _, ok := strings.Cut(text, "\n# Several Vigil instances")
	if !ok {
		t.Fatalf("no coordination comment:\n%s", text)
	}
	cfg, err := config.Parse([]byte(before))
	if err != nil {
		t.Fatalf("config.Parse rejects the part before coordination: %v\n%s", err, before)
	}
	if cfg.Admin.Listen != "127.0.0.1:23379" || cfg.Admin.Token != m.AdminToken || cfg.StateDir != "/tmp/sb/vigil2/state" ||
		len(cfg.Clusters) != 1 || cfg.Clusters[0].Listen != "127.0.0.1:23378" || len(cfg.Clusters[0].Servers) != 3 {
		t.Errorf("vigil2 config: admin %+v state_dir %q clusters %+v", cfg.Admin, cfg.StateDir, cfg.Clusters)
	}
	// DIR/vigil.yaml stays what it was: no coordination, the sandbox's
	// own listeners.
	main, err := RenderVigilConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(main), "coordination") {
		t.Errorf("vigil.yaml has a coordination block:\n%s", main)
	}
	mcfg, err := config.Parse(main)
	if err != nil {
		t.Fatal(err)
	}
	if mcfg.Admin.Listen != m.Admin.Addr() || mcfg.Clusters[0].Listen != m.Proxy.Addr() || mcfg.StateDir != "/tmp/sb/state" {
		t.Errorf("vigil.yaml: admin %q proxy %q state_dir %q", mcfg.Admin.Listen, mcfg.Clusters[0].Listen, mcfg.StateDir)
	}
}

func TestAuxIsolateRules(t *testing.T) {
	m := auxManifest(t, 3, 2)
	rules := etcdIsolateRules(m.Dir, m.Etcd[0])
	// client and peer × (dport, sport) + the cgroup rule.
	if len(rules) != 5 {
		t.Fatalf("%d rules: %q", len(rules), rules)
	}
	ports := map[string]bool{}
	for _, r := range rules[:4] {
		if r[0] != "INPUT" || r[2] != "lo" || commentOf(r) != "vigil-sandbox /tmp/sb etcd1" || r[len(r)-1] != "DROP" {
			t.Errorf("rule %q", r)
		}
		ports[r[6]] = true
	}
	if !ports["23366"] || !ports["23367"] || len(ports) != 2 {
		t.Errorf("ports %v", ports)
	}
	if last := rules[4]; last[0] != "OUTPUT" || last[8] != m.Etcd[0].Cgroup {
		t.Errorf("cgroup rule %q", last)
	}

	vr := vigilIsolateRules(m.Dir, m.Vigils[0], m.Etcd)
	if len(vr) != 6 {
		t.Fatalf("%d vigil rules: %q", len(vr), vr)
	}
	want0 := []string{"INPUT", "-i", "lo", "-s", "127.0.0.11", "-p", "tcp", "--dport", "23366", "-m", "comment", "--comment", "vigil-sandbox /tmp/sb vigil1", "-j", "DROP"}
	want1 := []string{"INPUT", "-i", "lo", "-d", "127.0.0.11", "-p", "tcp", "--sport", "23366", "-m", "comment", "--comment", "vigil-sandbox /tmp/sb vigil1", "-j", "DROP"}
	if !reflect.DeepEqual(vr[0], want0) || !reflect.DeepEqual(vr[1], want1) {
		t.Errorf("vigil rules\n%q\n%q", vr[0], vr[1])
	}
	if vr[5][8] != "23370" {
		t.Errorf("last vigil rule %q", vr[5])
	}

	// heal vigil1 finds its rules as iptables -S lists them, and only its.
	listing := `-P INPUT ACCEPT
-A INPUT -s 127.0.0.11/32 -i lo -p tcp -m tcp --dport 23366 -m comment --comment "vigil-sandbox /tmp/sb vigil1" -j DROP
-A INPUT -d 127.0.0.11/32 -i lo -p tcp -m tcp --sport 23366 -m comment --comment "vigil-sandbox /tmp/sb vigil1" -j DROP
-A INPUT -i lo -p tcp -m tcp --dport 23366 -m comment --comment "vigil-sandbox /tmp/sb etcd1" -j DROP
-A INPUT -i lo -p tcp -m tcp --dport 23306 -m comment --comment "vigil-sandbox /tmp/sb node1" -j DROP
`
	if del := rulesToDelete(listing, "/tmp/sb", "vigil1"); len(del) != 2 || del[0][0] != "-D" || del[0][2] != "-s" {
		t.Errorf("heal vigil1 deletes %q", del)
	}
	if del := rulesToDelete(listing, "/tmp/sb", "etcd1"); len(del) != 1 {
		t.Errorf("heal etcd1 deletes %q", del)
	}
	if del := rulesToDelete(listing, "/tmp/sb", ""); len(del) != 4 {
		t.Errorf("down deletes %d rules, want 4: %q", len(del), del)
	}
}

// canIsolate says why isolate cannot be tried here, or "".
func canIsolate() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	if _, err := lookPath("iptables"); err != nil {
		return "no iptables"
	}
	if err := iptables(context.Background(), "-S", "INPUT"); err != nil {
		return err.Error()
	}
	return ""
}

// testAuxSandbox writes a sandbox whose nodes never run (the tests here
// start only etcd members or Vigil daemons) and returns its handle.
func testAuxSandbox(t *testing.T, o Options) (*Sandbox, *Manifest) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbaux")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	o.Dir, o.Topology, o.Nodes = dir, Replication, 1
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	plan, err := planFor(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	m := newManifest(dir, o, plan, canUseCgroups(dir))
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	s := &Sandbox{dir: dir, log: discardLogger(), m: *m}
	return s, m
}

// leftovers are the live processes whose command line mentions dir.
func leftovers(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir+"/") {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && statState(stat) == 'Z' {
			continue
		}
		out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

func TestVigilDaemonsWithFakeBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeVigilEnv, "1")
	s, m := testAuxSandbox(t, Options{Etcd: 3, Vigils: 2, VigilBinary: exe})
	ctx := context.Background()
	defer func() {
		if err := s.Down(ctx, true); err != nil {
			t.Errorf("down: %v", err)
		}
		if left := leftovers(m.Dir); len(left) > 0 {
			t.Errorf("processes left after down: %q", left)
		}
		checkNoRules(t, m.Dir)
	}()
	if err := writeVigilFiles(m); err != nil {
		t.Fatal(err)
	}
	if err := s.startVigilsAll(ctx, m); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.m = *m
	s.mu.Unlock()
	for _, v := range m.Vigils {
		if err := vigilAnswers(ctx, v, statusTimeout); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
		if st, err := os.Stat(v.StateDir); err != nil || !st.IsDir() {
			t.Errorf("%s state dir: %v", v.Name, err)
		}
		if log, _ := os.ReadFile(v.Log); !strings.Contains(string(log), "fake vigil "+v.Name) {
			t.Errorf("%s log: %q", v.Name, log)
		}
	}
	r, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Vigils) != 2 || !r.Vigils[0].Answering || r.Vigils[0].State != StateRunning || len(r.Etcd) != 3 || r.Etcd[0].State != StateStopped {
		t.Errorf("status: vigils %+v etcd %+v", r.Vigils, r.Etcd)
	}

	// pause / resume
	if err := s.Pause(ctx, "vigil1"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Status(ctx); r.Vigils[0].State != StatePaused || !s.Manifest().Vigils[0].Paused {
		t.Errorf("after pause: %+v", r.Vigils[0])
	}
	if err := s.Resume(ctx, "vigil1"); err != nil {
		t.Fatal(err)
	}
	if err := waitVigil(ctx, s.Manifest().Vigils[0], 5*time.Second); err != nil {
		t.Errorf("after resume: %v", err)
	}
	// kill / start
	old := s.Manifest().Vigils[0].PID
	if err := s.Kill(ctx, "vigil1"); err != nil {
		t.Fatal(err)
	}
	if running, _ := s.IsRunning("vigil1"); running {
		t.Error("vigil1 runs after kill")
	}
	if err := s.Start(ctx, "vigil1"); err != nil {
		t.Fatal(err)
	}
	if pid, _ := s.PID("vigil1"); pid == old || pid == 0 {
		t.Errorf("vigil1 pid after start %d (was %d)", pid, old)
	}
	// stop
	if err := s.Stop(ctx, "vigil2"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Status(ctx); r.Vigils[1].State != StateStopped || r.Vigils[1].Running {
		t.Errorf("after stop: %+v", r.Vigils[1])
	}
	if err := s.Pause(ctx, "vigil2"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("pause of a stopped vigil = %v", err)
	}

	// isolate: vigil1's source address no longer reaches an etcd client
	// port (a stand-in listener here); other addresses still do.
	if why := canIsolate(); why != "" {
		t.Logf("isolate not tried: %s", why)
		return
	}
	l, err := net.Listen("tcp", m.Etcd[0].ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	dialFrom := func(src string) error {
		d := net.Dialer{Timeout: 500 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", m.Etcd[0].ClientAddr())
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	if err := dialFrom("127.0.0.11"); err != nil {
		t.Fatalf("before isolate: %v", err)
	}
	if err := s.Isolate(ctx, "vigil1"); err != nil {
		t.Fatal(err)
	}
	if !s.Manifest().Vigils[0].Isolated {
		t.Error("isolated not recorded")
	}
	if err := dialFrom("127.0.0.11"); err == nil {
		t.Error("vigil1's source address reaches etcd while isolated")
	}
	if err := dialFrom("127.0.0.12"); err != nil {
		t.Errorf("vigil2's source address is cut off too: %v", err)
	}
	if err := vigilAnswers(ctx, s.Manifest().Vigils[0], statusTimeout); err != nil {
		t.Errorf("isolated vigil1 no longer answers its clients: %v", err)
	}
	if err := s.Heal(ctx, "vigil1"); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom("127.0.0.11"); err != nil {
		t.Errorf("after heal: %v", err)
	}
	// Leave one isolated: down removes its rules.
	if err := s.Isolate(ctx, "vigil1"); err != nil {
		t.Fatal(err)
	}
}

// checkNoRules fails the test if iptables still has a rule of dir.
func checkNoRules(t *testing.T, dir string) {
	t.Helper()
	if canIsolate() != "" {
		return
	}
	bin, _ := lookPath("iptables")
	out, err := exec.Command(bin, "-w", "5", "-S").Output()
	if err != nil {
		t.Errorf("iptables -S: %v", err)
		return
	}
	if strings.Contains(string(out), ruleComment(dir, "")) {
		t.Errorf("iptables rules of %s left:\n%s", dir, out)
	}
}
