package sandbox

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/config"
)

// ClusterName is the name of the (first) cluster in a sandbox's
// vigil.yaml; cluster K of a sandbox of several is ClusterName followed by
// K (sandbox2).
const ClusterName = "sandbox"

// VigilConfig is a Vigil configuration that serves the sandbox: one
// cluster named "sandbox" listening on the proxy address, every node as a
// server, the app user for clients, the monitor and repl accounts for
// watching and failing over, automatic failover on. A sandbox of several
// clusters (up --clusters) has one such cluster per sandbox cluster, each
// with its own listener and servers, and a shards section whose sharded
// listener is in front of all of them (the schema map is left empty:
// Vigil discovers the schemas).
//
// Cluster types: replication → replication; galera → galera; standalone
// with one node → replication with that node as primary; standalone with
// several independent nodes → read-only (no failover: there is nothing to
// promote).
func VigilConfig(m *Manifest) *config.Config {
	l := vigilListeners{shards: m.Shards, admin: m.Admin, stateDir: filepath.Join(m.Dir, stateDir)}
	for _, c := range m.clusters() {
		l.proxies = append(l.proxies, c.Proxy)
	}
	return vigilConfig(m, l)
}

// vigilListeners are the listeners and state directory of one Vigil
// configuration of the sandbox.
type vigilListeners struct {
	// proxies has one listener per cluster, in the order of
	// Manifest.clusters.
	proxies  []Endpoint
	shards   *Endpoint
	admin    Endpoint
	stateDir string
}

// instanceListeners are the listeners of Vigil daemon v.
func instanceListeners(m *Manifest, v VigilInstance) vigilListeners {
	l := vigilListeners{shards: v.Shards, admin: v.Admin, stateDir: v.StateDir}
	for _, c := range m.clusters() {
		l.proxies = append(l.proxies, v.proxyOf(c.Name))
	}
	return l
}

// vigilConfig is VigilConfig with the given listeners and state
// directory.
func vigilConfig(m *Manifest, l vigilListeners) *config.Config {
	var agents config.Agents
	if len(m.Agents) > 0 {
		certs := AgentCertsDir(m.Dir)
		agents = config.Agents{CA: filepath.Join(certs, agent.CAFile), Cert: filepath.Join(certs, agent.ClientCertFile),
			Key: filepath.Join(certs, agent.ClientKeyFile)}
	}
	cfg := &config.Config{
		Agents:   agents,
		StateDir: l.stateDir,
		Log:      config.Log{Level: "info", Format: "text"},
		Admin:    config.Admin{Listen: l.admin.Addr(), Token: m.AdminToken},
		Users: []config.User{{
			Name:     m.Accounts.App.User,
			Password: m.Accounts.App.Password,
		}},
	}
	for i, c := range m.clusters() {
		cfg.Clusters = append(cfg.Clusters, clusterConfig(m, c, l.proxies[i], i == 0))
	}
	if l.shards != nil {
		// Moves copy and replicate schemas: the sandbox's app account
		// has every privilege (docs/shards.md lists what a move needs).
		cfg.Shards = config.Shards{Listen: l.shards.Addr(), MoveUser: m.Accounts.App.User, MovePassword: m.Accounts.App.Password}
	}
	return cfg
}

// clusterConfig is the vigil.yaml cluster of sandbox cluster c listening
// on proxy; the spares go to the first cluster only (a sandbox of several
// clusters has none).
func clusterConfig(m *Manifest, c Cluster, proxy Endpoint, first bool) config.Cluster {
	cl := config.Cluster{
		Name:   c.Name,
		Type:   "replication",
		Listen: proxy.Addr(),
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
	case m.Topology == Standalone && len(m.members()) > 1:
		cl.Type = "read-only"
		cl.Failover.Auto = false
	}
	i := 0
	for _, n := range m.members() {
		if !m.inCluster(n, c) {
			continue
		}
		srv := config.Server{Name: n.Name, Address: n.Addr(), Datadir: n.Datadir}
		if cl.Type == "replication" {
			srv.Role = RoleReplica
			if n.Role == RolePrimary || (m.Topology == Standalone && i == 0) {
				srv.Role = RolePrimary
			}
		}
		if a, ok := m.agentOf(n.Name); ok {
			srv.Agent = a.Listen.Addr()
		}
		cl.Servers = append(cl.Servers, srv)
		i++
	}
	cl.Lifecycle = config.Lifecycle{SelfHealing: m.SelfHealing}
	if first {
		cl.Lifecycle.Spares = vigilSpares(m)
	}
	cl.Lifecycle.ReplaceAfter.Duration = m.ReplaceAfter
	return cl
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

// Settings of the coordination block of the Vigil daemons' configs.
const (
	// CoordinationPrefix is where the daemons keep their keys in etcd.
	CoordinationPrefix = "/vigil-sandbox/"
	// CoordinationLeaseTTL is how long a daemon keeps its role without
	// reaching etcd.
	CoordinationLeaseTTL = "2s"
)

// RenderInstanceConfig is DIR/vigilK/vigil.yaml for one Vigil daemon of a
// sandbox: what RenderVigilConfig writes with the daemon's own proxy and
// admin listeners and state directory (the same admin token), followed by
// a coordination block naming the instance, the sandbox's etcd members and
// the daemon's own source address. Every key has a comment above it.
//
// The part before coordination is checked with config.Parse; the whole
// file is too once the config schema knows the coordination key.
func RenderInstanceConfig(m *Manifest, v VigilInstance) ([]byte, error) {
	base, err := config.Minimal(vigilConfig(m, instanceListeners(m, v)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v.Config, err)
	}
	if _, err := config.Parse(base); err != nil {
		return nil, fmt.Errorf("%s does not validate: %w", v.Config, err)
	}
	data := append(base, coordinationYAML(m, v)...)
	if configKnowsCoordination() {
		if _, err := config.Parse(data); err != nil {
			return nil, fmt.Errorf("%s does not validate: %w", v.Config, err)
		}
	}
	header := fmt.Sprintf("# Vigil configuration of %s, one of the Vigil daemons of the %s sandbox in %s, written by vigil sandbox up.\n# Run: vigil run --config %s\n",
		v.Name, m.Topology, m.Dir, v.Config)
	return append([]byte(header), data...), nil
}

// coordinationYAML is the coordination block of a daemon's config.
func coordinationYAML(m *Manifest, v VigilInstance) string {
	var b strings.Builder
	b.WriteString("\n# Several Vigil instances serve the same clusters and agree through etcd on which one acts.\n")
	b.WriteString("coordination:\n")
	b.WriteString("  # This instance's name in etcd.\n")
	fmt.Fprintf(&b, "  instance: %s\n", v.Name)
	b.WriteString("  # How long this instance keeps its role without reaching etcd.\n")
	fmt.Fprintf(&b, "  lease_ttl: %s\n", CoordinationLeaseTTL)
	b.WriteString("  # The etcd cluster of the sandbox.\n")
	b.WriteString("  etcd:\n")
	b.WriteString("    # etcd client addresses.\n")
	fmt.Fprintf(&b, "    endpoints: [%s]\n", strings.Join(m.EtcdEndpoints(), ", "))
	b.WriteString("    # Keys live under this prefix.\n")
	fmt.Fprintf(&b, "    prefix: %s\n", CoordinationPrefix)
	b.WriteString("    # The etcd members' --election-timeout: the lease is renewed so that an etcd leader election does not fence this instance.\n")
	fmt.Fprintf(&b, "    election_timeout: %s\n", EtcdElectionTimeout)
	b.WriteString("    # Connect to etcd from this local address (the sandbox gives each Vigil its own, so it can be cut off from etcd alone).\n")
	fmt.Fprintf(&b, "    source_address: %s\n", v.SourceAddress)
	return b.String()
}

// configKnowsCoordination reports whether config.Config has the
// coordination key, i.e. whether config.Parse accepts a coordination block.
func configKnowsCoordination() bool {
	t := reflect.TypeFor[config.Config]()
	for i := range t.NumField() {
		if key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); key == "coordination" {
			return true
		}
	}
	return false
}
