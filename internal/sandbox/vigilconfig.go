package sandbox

import (
	"fmt"
	"path/filepath"

	"github.com/vigil-db/vigil/internal/config"
)

// ClusterName is the name of the one cluster in a sandbox's vigil.yaml.
const ClusterName = "sandbox"

// VigilConfig is a Vigil configuration that serves the sandbox: one
// cluster named "sandbox" listening on the proxy address, every node as a
// server, the app user for clients, the monitor and repl accounts for
// watching and failing over, automatic failover on.
//
// Cluster types: replication → replication; galera → galera; standalone
// with one node → replication with that node as primary; standalone with
// several independent nodes → read-only (no failover: there is nothing to
// promote).
func VigilConfig(m *Manifest) *config.Config {
	cl := config.Cluster{
		Name:   ClusterName,
		Type:   "replication",
		Listen: m.Proxy.Addr(),
		Monitor: config.Monitor{
			User:     m.Accounts.Monitor.User,
			Password: m.Accounts.Monitor.Password,
		},
		Failover: config.Failover{
			Auto:         true,
			ReplUser:     m.Accounts.Repl.User,
			ReplPassword: m.Accounts.Repl.Password,
		},
	}
	switch {
	case m.Topology == Galera:
		cl.Type = "galera"
	case m.Topology == Standalone && len(m.Nodes) > 1:
		cl.Type = "read-only"
		cl.Failover.Auto = false
	}
	for i, n := range m.Nodes {
		srv := config.Server{Name: n.Name, Address: n.Addr(), Datadir: n.Datadir}
		if cl.Type == "replication" {
			srv.Role = RoleReplica
			if n.Role == RolePrimary || (m.Topology == Standalone && i == 0) {
				srv.Role = RolePrimary
			}
		}
		cl.Servers = append(cl.Servers, srv)
	}
	return &config.Config{
		StateDir: filepath.Join(m.Dir, stateDir),
		Log:      config.Log{Level: "info", Format: "text"},
		Admin:    config.Admin{Listen: m.Admin.Addr(), Token: m.AdminToken},
		Users: []config.User{{
			Name:     m.Accounts.App.User,
			Password: m.Accounts.App.Password,
		}},
		Clusters: []config.Cluster{cl},
	}
}

// RenderVigilConfig is vigil.yaml for a sandbox: VigilConfig written by
// config.Minimal (only what differs from the defaults, each key explained
// once) and checked with config.Parse.
func RenderVigilConfig(m *Manifest) ([]byte, error) {
	data, err := config.Minimal(VigilConfig(m))
	if err != nil {
		return nil, fmt.Errorf("vigil.yaml: %w", err)
	}
	if _, err := config.Parse(data); err != nil {
		return nil, fmt.Errorf("vigil.yaml does not validate: %w", err)
	}
	header := fmt.Sprintf("# Vigil configuration for the %s sandbox in %s, written by vigil sandbox up.\n# Run: vigil run --config %s\n",
		m.Topology, m.Dir, filepath.Join(m.Dir, ConfigFile))
	return append([]byte(header), data...), nil
}
