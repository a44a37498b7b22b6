package sandbox

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vigil-db/vigil/internal/config"
)

// spareManifest is a semi-sync replication sandbox of nodes nodes with
// agents and spares spares, as Up lays it out.
func spareManifest(t *testing.T, nodes, spares int) *Manifest {
	t.Helper()
	m := testManifest(t, Replication, nodes, true)
	m.AdminToken = "t"
	addAgents(m, "/usr/bin/vigil")
	if err := addSpares(m, spares, ""); err != nil {
		t.Fatal(err)
	}
	return m
}

// A spare takes its own port block, a server id no node has and the next
// agent port; it is not a member.
func TestNewSpareLayout(t *testing.T) {
	m := spareManifest(t, 2, 2)
	sp := m.spares()
	if len(sp) != 2 || len(m.members()) != 2 || len(m.Agents) != 4 {
		t.Fatalf("spares %d, members %d, agents %d", len(sp), len(m.members()), len(m.Agents))
	}
	s1, s2 := sp[0], sp[1]
	if s1.Name != "spare1" || s1.Port != m.BasePort+80 || s1.ServerID != 1001 || s1.Datadir != "/tmp/sb/spare1/data" || s1.Role != RoleSpare {
		t.Errorf("spare1: %+v", s1)
	}
	if s2.Name != "spare2" || s2.Port != m.BasePort+81 || s2.ServerID != 1002 {
		t.Errorf("spare2: %+v", s2)
	}
	if s1.Cgroup == "" {
		t.Errorf("spare1 has no cgroup though the nodes have one")
	}
	a, ok := m.agentOf("spare2")
	if !ok || a.Name != "agent4" || a.Listen.Port != m.BasePort+53 || a.Binary != "/usr/bin/vigil" || a.Config != "/tmp/sb/agents/agent4.yaml" {
		t.Errorf("agent of spare2: %+v", a)
	}
}

func TestNewSpareRefuses(t *testing.T) {
	m := testManifest(t, Replication, 2, false)
	if _, _, err := newSpare(m, ""); err == nil || !strings.Contains(err.Error(), "--agents") {
		t.Errorf("without agents: %v", err)
	}
	m = spareManifest(t, 2, 0)
	for range MaxAgentNodes - 2 {
		if err := addSpares(m, 1, ""); err != nil && !strings.Contains(err.Error(), "spares") {
			t.Fatal(err)
		}
	}
	if _, _, err := newSpare(m, ""); err == nil {
		t.Errorf("a spare beyond the agent ports or MaxSpares was laid out: %d agents", len(m.Agents))
	}
	g := testManifest(t, Galera, 3, false)
	addAgents(g, "/usr/bin/vigil")
	if _, _, err := newSpare(g, ""); err == nil || !strings.Contains(err.Error(), "galera") {
		t.Errorf("galera: %v", err)
	}
}

// A spare's my.cnf is a replica's: binary log, GTID, semi-sync as the
// nodes have it, read_only=ON, its own server_id; nothing says whom to
// replicate from.
func TestSpareMyCnf(t *testing.T) {
	m := spareManifest(t, 2, 1)
	sp := m.spares()[0]
	c := renderMyCnf(m, sp)
	hasLines(t, c, "server_id = 1001", "read_only = ON", "log_bin = mysql-bin", "gtid_strict_mode = ON",
		"log_slave_updates = ON", "rpl_semi_sync_slave_enabled = ON", "rpl_semi_sync_master_wait_no_slave = OFF",
		"port = 23386", "datadir = /tmp/sb/spare1/data")
	lacksPrefix(t, c, "master", "skip_slave_start")
}

// Options: --spares and --self-healing imply agents; limits are checked.
func TestOptionsSpares(t *testing.T) {
	o := Options{Dir: "/tmp/x", Spares: 1}.withDefaults()
	if !o.Agents {
		t.Errorf("--spares does not imply --agents")
	}
	if o := (Options{Dir: "/tmp/x", SelfHealing: true}).withDefaults(); !o.Agents {
		t.Errorf("--self-healing does not imply --agents")
	}
	for _, bad := range []Options{
		{Dir: "/tmp/x", Spares: MaxSpares + 1},
		{Dir: "/tmp/x", Nodes: 9, Spares: 2},
		{Dir: "/tmp/x", Topology: Galera, Spares: 1},
		{Dir: "/tmp/x", ReplaceAfter: -time.Second},
	} {
		if err := bad.withDefaults().validate(); err == nil {
			t.Errorf("%+v validates", bad)
		}
	}
	if err := (Options{Dir: "/tmp/x", Nodes: 2, Spares: 1, SelfHealing: true}).withDefaults().validate(); err != nil {
		t.Error(err)
	}
}

// vigil.yaml lists the spares under lifecycle.spares (not as servers),
// with self_healing and replace_after as asked, and validates.
func TestVigilConfigSpares(t *testing.T) {
	m := spareManifest(t, 2, 1)
	m.SelfHealing, m.ReplaceAfter = true, 20*time.Second
	m.Accounts = DefaultAccounts()
	data, err := RenderVigilConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	cl := cfg.Clusters[0]
	if len(cl.Servers) != 2 {
		t.Errorf("servers: %+v", cl.Servers)
	}
	lc := cl.Lifecycle
	want := config.Spare{Name: "spare1", Address: "127.0.0.1:23386", Agent: "127.0.0.1:23358"}
	if !lc.SelfHealing || lc.ReplaceAfter.Duration != 20*time.Second || len(lc.Spares) != 1 || lc.Spares[0] != want {
		t.Errorf("lifecycle %+v, want spare %+v:\n%s", lc, want, data)
	}
	// Without the flags, only the spares are written.
	m.SelfHealing, m.ReplaceAfter = false, 0
	data, err = RenderVigilConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "self_healing") || strings.Contains(string(data), "replace_after") {
		t.Errorf("self_healing or replace_after written though not asked:\n%s", data)
	}
}

// The lines add --spare prints are the YAML of the spare's entry.
func TestSpareHowTo(t *testing.T) {
	m := spareManifest(t, 2, 1)
	entry, err := SpareYAML(m, "spare1")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Lifecycle config.Lifecycle `yaml:"lifecycle"`
	}
	if err := yaml.Unmarshal([]byte("lifecycle:\n  spares:\n"+strings.TrimPrefix(strings.ReplaceAll(entry, "\n    ", "\n"), "    ")), &v); err != nil {
		t.Fatalf("%v:\n%s", err, entry)
	}
	if len(v.Lifecycle.Spares) != 1 || v.Lifecycle.Spares[0].Agent != "127.0.0.1:23358" {
		t.Errorf("entry %q parses as %+v", entry, v.Lifecycle)
	}
	how, err := spareHowTo(m, "spare1", "/tmp/sb/vigil.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"spares:", "- name: spare1", "address: 127.0.0.1:23386", "agent: 127.0.0.1:23358", "reload"} {
		if !strings.Contains(how, s) {
			t.Errorf("missing %q in:\n%s", s, how)
		}
	}
}

// The manifest keeps spares across a round trip, after the nodes, and
// Nodes leaves them out.
func TestManifestSpares(t *testing.T) {
	m := spareManifest(t, 3, 1)
	m.ReplaceAfter = time.Minute
	data, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Manifest
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.spares()) != 1 || back.ReplaceAfter != time.Minute || back.Nodes[3].Name != "spare1" {
		t.Fatalf("round trip lost the spare: %+v", back)
	}
	s := &Sandbox{m: back}
	if got := strings.Join(s.NodeNames(), ","); got != "node1,node2,node3" {
		t.Errorf("NodeNames = %s", got)
	}
	if sp := s.Spares(); len(sp) != 1 || sp[0].Name != "spare1" {
		t.Errorf("Spares = %+v", sp)
	}
	if _, err := s.Node("spare1"); err != nil {
		t.Errorf("Node(spare1): %v", err)
	}
	if r := observedRole(RoleSpare, Replication, ptr(false), nil); r != RoleSpare {
		t.Errorf("a spare not replicating is observed as %s", r)
	}
}

func ptr[T any](v T) *T { return &v }
