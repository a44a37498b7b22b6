package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vigil-db/vigil/internal/config"
)

// Spares (up --spares N, add --spare): spareK is a mariadbd with a fresh
// datadir from mariadb-install-db and the my.cnf of a replica (binary log,
// GTID, semi-sync settings as the nodes have them, read_only=ON, server_id
// 1000+K) that replicates from nobody, and an agent beside it, the next
// agentJ on the next agent port. It is what clusters[].lifecycle.spares
// names: a host Vigil may clone a member onto. read_only=ON because an
// agent refuses to restore over a writable server.
//
// Spares are recorded among the manifest's nodes with role spare, so
// start, stop, kill, pause, isolate, sql, status and down treat them as
// they treat nodes; Nodes and NodeNames leave them out, Spares lists
// them, and vigil.yaml names them under lifecycle.spares, not servers.

// spareOffset is the MySQL port of spare1 relative to the base port
// (between the Vigil daemons' ports and the proxy port); spare server ids
// start after spareServerIDBase, far above any node's.
const (
	spareOffset       = 80
	MaxSpares         = 8
	spareServerIDBase = 1000
)

// RoleSpare is the recorded role of a spare.
const RoleSpare = "spare"

// isSpare reports whether n is a spare rather than a member.
func (n Node) isSpare() bool { return n.Role == RoleSpare }

// members are the nodes that are not spares.
func (m *Manifest) members() []Node {
	var out []Node
	for _, n := range m.Nodes {
		if !n.isSpare() {
			out = append(out, n)
		}
	}
	return out
}

// spares are the spare nodes, in order.
func (m *Manifest) spares() []Node {
	var out []Node
	for _, n := range m.Nodes {
		if n.isSpare() {
			out = append(out, n)
		}
	}
	return out
}

// Spares is a snapshot of the spares (empty without any).
func (s *Sandbox) Spares() []Node {
	m := s.Manifest()
	return m.spares()
}

// agentOf is the agent of the named node or spare, if it has one.
func (m *Manifest) agentOf(name string) (AgentInstance, bool) {
	for _, a := range m.Agents {
		if a.Node == name {
			return a, true
		}
	}
	return AgentInstance{}, false
}

// newSpare lays out the next spare of m and its agent (not recorded in
// m). A sandbox has at most MaxSpares spares, and its agents (one per node
// and spare) take the agent ports base+50.. up to MaxAgentNodes.
func newSpare(m *Manifest, bin string) (Node, AgentInstance, error) {
	if m.Topology != Replication && m.Topology != Standalone {
		return Node{}, AgentInstance{}, fmt.Errorf("spares are for replication and standalone sandboxes, not %s", m.Topology)
	}
	if len(m.Clusters) > 1 {
		return Node{}, AgentInstance{}, errors.New("spares are not supported in a sandbox of several clusters (up --clusters) yet: a spare would not know which cluster and GTID domain it joins")
	}
	if len(m.Agents) == 0 {
		return Node{}, AgentInstance{}, fmt.Errorf("a spare is cloned through its agent, and this sandbox runs none: make it with vigil sandbox up --agents (or --spares N)")
	}
	k := len(m.spares()) + 1
	if k > MaxSpares {
		return Node{}, AgentInstance{}, fmt.Errorf("a sandbox has at most %d spares", MaxSpares)
	}
	if len(m.Agents) >= MaxAgentNodes {
		return Node{}, AgentInstance{}, fmt.Errorf("a sandbox runs at most %d agents (one per node and spare, ports base+%d..), and this one runs %d", MaxAgentNodes, agentOffset, len(m.Agents))
	}
	name := "spare" + strconv.Itoa(k)
	if _, err := m.node(name); err == nil {
		return Node{}, AgentInstance{}, fmt.Errorf("%s already exists", name)
	}
	d := filepath.Join(m.Dir, name)
	n := Node{
		Name: name, Host: Host, Port: m.BasePort + spareOffset + k - 1, Socket: filepath.Join(d, "mysqld.sock"),
		Datadir: filepath.Join(d, "data"), ServerID: spareServerIDBase + k, Config: filepath.Join(d, "my.cnf"),
		ErrorLog: filepath.Join(d, "error.log"), PIDFile: filepath.Join(d, "mysqld.pid"), Role: RoleSpare,
	}
	if len(m.Nodes) > 0 && m.Nodes[0].Cgroup != "" {
		n.Cgroup = sandboxCgroup(m.Dir) + "/" + name
	}
	if bin == "" {
		bin = m.Agents[0].Binary
	}
	j := len(m.Agents) + 1
	an := "agent" + strconv.Itoa(j)
	ad := filepath.Join(m.Dir, agentsDir)
	a := AgentInstance{
		Name: an, Node: name, Binary: bin,
		Listen:   Endpoint{Host: Host, Port: m.BasePort + agentOffset + j - 1},
		Config:   filepath.Join(ad, an+".yaml"),
		Log:      filepath.Join(ad, an+".log"),
		AuditLog: filepath.Join(ad, an+"-audit.log"),
	}
	return n, a, nil
}

// AddSpare creates one more spare and its agent, starts both and returns
// once the server answers (read_only=ON, replicating from nobody) and the
// agent answers a status call. The sandbox must run agents (up --agents).
// Neither vigil.yaml nor a running Vigil learns of it: SpareYAML says what
// to add, RenderVigilConfig of the new manifest includes it.
func (s *Sandbox) AddSpare(ctx context.Context) (Node, AgentInstance, error) {
	if err := s.refresh(); err != nil {
		return Node{}, AgentInstance{}, err
	}
	m := s.Manifest()
	n, a, err := newSpare(&m, "")
	if err != nil {
		return Node{}, AgentInstance{}, err
	}
	if err := checkFree(ctx, PortPlan{Nodes: []NodePorts{{MySQL: n.Port}, {MySQL: a.Listen.Port}}}); err != nil {
		return Node{}, AgentInstance{}, err
	}
	bins, err := findBinaries(m.Topology)
	if err != nil {
		return Node{}, AgentInstance{}, err
	}
	if err := s.update(ctx, func(cur *Manifest) error {
		if _, err := cur.node(n.Name); err == nil {
			return fmt.Errorf("%s was added by someone else meanwhile", n.Name)
		}
		if len(cur.Agents) != len(m.Agents) {
			return fmt.Errorf("%s was added by someone else meanwhile", a.Name)
		}
		cur.Nodes = append(cur.Nodes, n)
		cur.Agents = append(cur.Agents, a)
		return nil
	}); err != nil {
		return Node{}, AgentInstance{}, err
	}
	m = s.Manifest()
	if err := s.startSpare(ctx, bins, &m, n.Name); err != nil {
		return n, a, err
	}
	// startSpare recorded the pids in m; keep what others changed.
	i, _ := m.node(n.Name)
	pid, apid := m.Nodes[i].PID, m.Agents[len(m.Agents)-1].PID
	err = s.update(ctx, func(cur *Manifest) error {
		if i, err := cur.node(n.Name); err == nil {
			cur.Nodes[i].PID = pid
		}
		for j := range cur.Agents {
			if cur.Agents[j].Name == a.Name {
				cur.Agents[j].PID = apid
			}
		}
		return nil
	})
	n.PID, a.PID = pid, apid
	return n, a, err
}

// addSpares records n new spares and their agents in m (Up, before
// vigil.yaml is written; the agents' certificates exist by then).
func addSpares(m *Manifest, n int, bin string) error {
	for range n {
		sp, a, err := newSpare(m, bin)
		if err != nil {
			return err
		}
		m.Nodes = append(m.Nodes, sp)
		m.Agents = append(m.Agents, a)
	}
	return nil
}

// startSpare creates the named spare's files and datadir, starts its
// server and its agent and waits for both; the pids go into m.
func (s *Sandbox) startSpare(ctx context.Context, bins binaries, m *Manifest, name string) error {
	i, err := m.node(name)
	if err != nil {
		return err
	}
	n := m.Nodes[i]
	a, ok := m.agentOf(name)
	if !ok {
		return fmt.Errorf("%s has no agent", name)
	}
	if err := makeNodeDirs(m, n); err != nil {
		return err
	}
	one := *m
	one.Nodes = []Node{n}
	if err := installAll(ctx, bins, &one); err != nil {
		return err
	}
	pid, err := spawn(bins.mariadbd, n)
	if err != nil {
		return err
	}
	m.Nodes[i].PID = pid
	if err := waitAnswer(ctx, m.Nodes[i], answerTimeout); err != nil {
		return err
	}
	if err := writeAgentConfig(m, a); err != nil {
		return err
	}
	for j := range m.Agents {
		if m.Agents[j].Name == a.Name {
			if err := s.startAgent(ctx, m, j); err != nil {
				return err
			}
		}
	}
	s.logger().Info("spare up", "spare", name, "address", n.Addr(), "agent", a.Listen.Addr())
	return nil
}

// makeNodeDirs creates a node's directory and tmpdir, owned by mysql, and
// its my.cnf.
func makeNodeDirs(m *Manifest, n Node) error {
	u, err := user.Lookup("mysql")
	if err != nil {
		return fmt.Errorf("user mysql: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range []string{n.dir(), n.tmpdir()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return fmt.Errorf("chown %s: %w", d, err)
		}
	}
	return os.WriteFile(n.Config, []byte(renderMyCnf(m, n)), 0o644)
}

// vigilSpares are the lifecycle.spares entries of vigil.yaml: every spare
// with its agent.
func vigilSpares(m *Manifest) []config.Spare {
	var out []config.Spare
	for _, n := range m.spares() {
		sp := config.Spare{Name: n.Name, Address: n.Addr()}
		if a, ok := m.agentOf(n.Name); ok {
			sp.Agent = a.Listen.Addr()
		}
		out = append(out, sp)
	}
	return out
}

// SpareYAML is the lifecycle.spares entry of one spare, indented to sit
// under clusters[0].lifecycle.spares of vigil.yaml.
func SpareYAML(m *Manifest, name string) (string, error) {
	for _, sp := range vigilSpares(m) {
		if sp.Name == name {
			return fmt.Sprintf("      - name: %s\n        address: %s\n        agent: %s\n", sp.Name, sp.Address, sp.Agent), nil
		}
	}
	return "", fmt.Errorf("unknown spare %q", name)
}

// spareHowTo tells the operator how to make a running Vigil use a spare
// just added.
func spareHowTo(m *Manifest, name, configPath string) (string, error) {
	entry, err := SpareYAML(m, name)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Vigil does not know %s yet. Add it to %s under the cluster %q:\n\n", name, configPath, ClusterName)
	b.WriteString("  clusters:\n    - name: " + ClusterName + "\n      ...\n      lifecycle:\n        spares:\n")
	for _, l := range strings.Split(strings.TrimRight(entry, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	fmt.Fprintf(&b, "\n(keep the spares already listed there), then reload: vigil ctl --sandbox %s reload\n", m.Dir)
	if len(m.Vigils) > 0 {
		b.WriteString("The Vigil daemons of the sandbox each read their own DIR/vigilK/vigil.yaml: add it there too and reload each.\n")
	}
	return b.String(), nil
}
