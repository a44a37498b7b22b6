package sandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/config"
)

func TestVigilConfigRoundTrip(t *testing.T) {
	for _, c := range []struct {
		topo     Topology
		nodes    int
		wantType string
		roles    []string
		auto     bool
	}{
		{Replication, 3, "replication", []string{"primary", "replica", "replica"}, true},
		{Galera, 3, "galera", []string{"", "", ""}, true},
		{Standalone, 1, "replication", []string{"primary"}, true},
		{Standalone, 2, "read-only", []string{"", ""}, false},
	} {
		t.Run(string(c.topo), func(t *testing.T) {
			m := testManifest(t, c.topo, c.nodes, false)
			data, err := RenderVigilConfig(m)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse(data)
			if err != nil {
				t.Fatalf("config.Parse rejects vigil.yaml: %v\n%s", err, data)
			}
			// Minimal and readable: no null, no empty value, no default
			// spelled out, comments.
			for _, bad := range []string{"null", `""`, "''", "[]", "max_open", "interval:", "log:", "query_cache"} {
				if strings.Contains(string(data), bad) {
					t.Errorf("vigil.yaml holds %q:\n%s", bad, data)
				}
			}
			if !strings.HasPrefix(string(data), "# Vigil configuration for the") || strings.Count(string(data), "# ") < 10 {
				t.Errorf("vigil.yaml lacks its header or comments:\n%s", data)
			}
			if cfg.StateDir != "/tmp/sb/state" || cfg.Admin.Listen != m.Admin.Addr() {
				t.Errorf("state_dir %q admin.listen %q", cfg.StateDir, cfg.Admin.Listen)
			}
			if len(cfg.Users) != 1 || cfg.Users[0].Name != "app" || cfg.Users[0].Password != "app" {
				t.Errorf("users = %+v", cfg.Users)
			}
			if len(cfg.Clusters) != 1 {
				t.Fatalf("clusters = %+v", cfg.Clusters)
			}
			cl := cfg.Clusters[0]
			if cl.Name != "sandbox" || cl.Type != c.wantType || cl.Listen != m.Proxy.Addr() {
				t.Errorf("cluster name %q type %q listen %q", cl.Name, cl.Type, cl.Listen)
			}
			if cl.Monitor.User != "monitor" || cl.Monitor.Password != "monitor" {
				t.Errorf("monitor = %+v", cl.Monitor)
			}
			if cl.Failover.Auto != c.auto || cl.Failover.ReplUser != "repl" || cl.Failover.ReplPassword != "repl" {
				t.Errorf("failover = %+v", cl.Failover)
			}
			if len(cl.Servers) != c.nodes {
				t.Fatalf("servers = %+v", cl.Servers)
			}
			for i, s := range cl.Servers {
				n := m.Nodes[i]
				if s.Name != n.Name || s.Address != n.Addr() || s.Datadir != n.Datadir || s.Role != c.roles[i] {
					t.Errorf("server %d = %+v, want %s %s role %q", i, s, n.Name, n.Addr(), c.roles[i])
				}
			}
			// What we write is what a second round trip gives.
			again, err := cfg.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := config.Parse(again); err != nil {
				t.Fatalf("second round trip: %v", err)
			}
		})
	}
}

// The agent config the sandbox writes is one the agent accepts.
func TestRenderAgentConfig(t *testing.T) {
	m := &Manifest{Dir: "/tmp/sb", BasePort: 20000, Nodes: []Node{{Name: "node1", Datadir: "/tmp/sb/node1/data",
		Socket: "/tmp/sb/node1/mysqld.sock", PIDFile: "/tmp/sb/node1/mysqld.pid", Config: "/tmp/sb/node1/my.cnf"}}}
	addAgents(m, "/usr/bin/vigil")
	data, err := renderAgentConfig(m, m.Agents[0], m.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := agent.ParseConfig(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if cfg.Listen != "127.0.0.1:20050" || cfg.Datadir != "/tmp/sb/node1/data" || cfg.Commands.Timeout != 2*time.Minute ||
		strings.Join(cfg.Commands.Stop, " ") != "/usr/bin/vigil sandbox stop node1 --dir /tmp/sb" || cfg.Server.User != "root" {
		t.Errorf("config: %+v\n%s", cfg, data)
	}
}

// With agents, vigil.yaml names each server's agent and the client
// certificate, and parses.
func TestVigilConfigAgents(t *testing.T) {
	m := &Manifest{Dir: "/tmp/sb", BasePort: 20000, Topology: Replication, Proxy: Endpoint{Host: Host, Port: 20010},
		Admin: Endpoint{Host: Host, Port: 20011}, AdminToken: "t",
		Nodes: []Node{{Name: "node1", Host: Host, Port: 20001, Role: RolePrimary}, {Name: "node2", Host: Host, Port: 20002, Role: RoleReplica}}}
	m.Accounts.App.User, m.Accounts.App.Password = "app", "app"
	addAgents(m, "/usr/bin/vigil")
	data, cfg := renderParsed(t, m)
	if cfg.Clusters[0].Servers[1].Agent != "127.0.0.1:20051" || !strings.HasSuffix(cfg.Agents.Cert, agent.ClientCertFile) {
		t.Fatalf("agents not written:\n%s", data)
	}
}

// renderParsed is RenderVigilConfig of m and what config.Parse makes of
// it; either failing fails the test.
func renderParsed(t *testing.T, m *Manifest) ([]byte, *config.Config) {
	t.Helper()
	data, err := RenderVigilConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("config.Parse rejects vigil.yaml: %v\n%s", err, data)
	}
	return data, cfg
}
