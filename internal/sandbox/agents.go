package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vigil-db/vigil/internal/agent"
)

// Agents (up --agents): agentK is `VIGIL agent run --config
// DIR/agents/agentK.yaml`, the datadir agent of nodeK, listening on
// 127.0.0.1:P+50+K-1 with mutual TLS (certificates from `vigil agent
// init` in DIR/agents/certs), stopping and starting its node the way the
// sandbox does (`vigil sandbox stop|start nodeK --dir DIR`). Its stdout
// and stderr (the audit lines too) go to DIR/agents/agentK.log, the audit
// alone to DIR/agents/agentK-audit.log. Spares get the agents after the
// nodes' (agentN+1.. on the next ports; spares.go).

// agentOffset is the first agent port relative to the base port;
// MaxAgentNodes (nodes and spares together) keeps the agent ports below
// the etcd ports.
const (
	agentOffset   = 50
	MaxAgentNodes = 10
	agentsDir     = "agents"
	agentTimeout  = 30 * time.Second
)

// AgentInstance is the agent of one node as recorded in the manifest.
type AgentInstance struct {
	Name     string   `json:"name"`
	Node     string   `json:"node"`
	Binary   string   `json:"binary"`
	Listen   Endpoint `json:"listen"`
	Config   string   `json:"config"`
	Log      string   `json:"log"`
	AuditLog string   `json:"audit_log"`
	PID      int      `json:"pid"`
}

// proc identifies the agent's process by its --config.
func (a AgentInstance) proc() procID { return procID{flag: "--config", value: a.Config} }

// AgentStatus is what Status observed of one agent.
type AgentStatus struct {
	Name   string `json:"name"`
	Node   string `json:"node"`
	Listen string `json:"listen"`
	PID    int    `json:"pid"`
	// State is running or stopped.
	State   string `json:"state"`
	Running bool   `json:"running"`
	// Answering: a status call with the sandbox's client certificate
	// succeeded just now.
	Answering bool   `json:"answering"`
	Error     string `json:"error,omitempty"`
}

// AgentCertsDir is where the sandbox's agent certificates are.
func AgentCertsDir(dir string) string { return filepath.Join(dir, agentsDir, "certs") }

// agentClientConfig is how to reach an agent with the sandbox's client
// certificate.
func agentClientConfig(dir string, a AgentInstance) agent.ClientConfig {
	certs := AgentCertsDir(dir)
	return agent.ClientConfig{Addr: a.Listen.Addr(), CA: filepath.Join(certs, agent.CAFile),
		Cert: filepath.Join(certs, agent.ClientCertFile), Key: filepath.Join(certs, agent.ClientKeyFile)}
}

// AgentClient is a client of the named node's agent (nodeK or agentK).
func (s *Sandbox) AgentClient(name string) (*agent.Client, error) {
	if err := s.refresh(); err != nil {
		return nil, err
	}
	m := s.Manifest()
	for _, a := range m.Agents {
		if a.Name == name || a.Node == name {
			return agent.NewClient(agentClientConfig(s.dir, a))
		}
	}
	return nil, fmt.Errorf("no agent for %q: start the sandbox with --agents", name)
}

// addAgents records one agent per node in m.
func addAgents(m *Manifest, bin string) {
	d := filepath.Join(m.Dir, agentsDir)
	for i, n := range m.Nodes {
		name := "agent" + strconv.Itoa(i+1)
		m.Agents = append(m.Agents, AgentInstance{
			Name: name, Node: n.Name, Binary: bin,
			Listen:   Endpoint{Host: Host, Port: m.BasePort + agentOffset + i},
			Config:   filepath.Join(d, name+".yaml"),
			Log:      filepath.Join(d, name+".log"),
			AuditLog: filepath.Join(d, name+"-audit.log"),
		})
	}
}

// renderAgentConfig is agentK.yaml.
func renderAgentConfig(m *Manifest, a AgentInstance, n Node) ([]byte, error) {
	certs := AgentCertsDir(m.Dir)
	cfg := agent.Config{
		Listen: a.Listen.Addr(),
		TLS: agent.TLS{CA: filepath.Join(certs, agent.CAFile), Cert: filepath.Join(certs, agent.AgentCertFile),
			Key: filepath.Join(certs, agent.AgentKeyFile)},
		AuditLog: a.AuditLog,
		Datadir:  n.Datadir,
		PIDFile:  n.PIDFile,
		Server:   agent.ServerLogin{Socket: n.Socket, User: "root"},
		Commands: agent.Commands{
			Start:   []string{a.Binary, "sandbox", "start", n.Name, "--dir", m.Dir},
			Stop:    []string{a.Binary, "sandbox", "stop", n.Name, "--dir", m.Dir},
			Timeout: 2 * time.Minute,
		},
		TmpDir: n.tmpdir(),
	}
	data, err := yaml.Marshal(&cfg)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# The agent of %s, written by vigil sandbox up --agents.\n# Run as: %s agent run --config %s\n", n.Name, a.Binary, a.Config)
	return append([]byte(head), data...), nil
}

// writeAgentFiles creates the certificates and every agent's config.
func writeAgentFiles(m *Manifest) error {
	if err := os.MkdirAll(filepath.Join(m.Dir, agentsDir), 0o700); err != nil {
		return fmt.Errorf("agents dir: %w", err)
	}
	if _, err := agent.Init(agent.InitOptions{Dir: AgentCertsDir(m.Dir)}); err != nil {
		return err
	}
	for _, a := range m.Agents {
		if err := writeAgentConfig(m, a); err != nil {
			return err
		}
	}
	return nil
}

// writeAgentConfig writes one agent's config.
func writeAgentConfig(m *Manifest, a AgentInstance) error {
	i, err := m.node(a.Node)
	if err != nil {
		return err
	}
	data, err := renderAgentConfig(m, a, m.Nodes[i])
	if err != nil {
		return err
	}
	return writeFileAtomic(a.Config, data, 0o600)
}

func spawnAgent(m *Manifest, a AgentInstance) (int, error) {
	return spawnProc(procSpec{
		name: a.Name,
		bin:  a.Binary,
		args: []string{"agent", "run", "--config", a.Config},
		dir:  filepath.Join(m.Dir, agentsDir),
		env:  os.Environ(),
		out:  a.Log,
	})
}

// agentAnswers calls the agent's status with the sandbox's client
// certificate.
func agentAnswers(ctx context.Context, dir string, a AgentInstance, timeout time.Duration) error {
	c, err := agent.NewClient(agentClientConfig(dir, a))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = c.Status(ctx)
	return err
}

// startAgentsAll starts the agent of every node (spares' agents start
// with their spares, in startSpare) and waits until each answers.
func (s *Sandbox) startAgentsAll(ctx context.Context, m *Manifest) error {
	var idx []int
	for i, a := range m.Agents {
		if j, err := m.node(a.Node); err == nil && !m.Nodes[j].isSpare() {
			idx = append(idx, i)
		}
	}
	for _, i := range idx {
		pid, err := spawnAgent(m, m.Agents[i])
		if err != nil {
			return err
		}
		m.Agents[i].PID = pid
	}
	if err := writeManifest(m.Dir, m); err != nil {
		return err
	}
	return parallel(len(idx), func(k int) error { return waitAgent(ctx, m.Dir, m.Agents[idx[k]]) })
}

// startAgent starts m.Agents[i], records its pid in m and waits until it
// answers.
func (s *Sandbox) startAgent(ctx context.Context, m *Manifest, i int) error {
	pid, err := spawnAgent(m, m.Agents[i])
	if err != nil {
		return err
	}
	m.Agents[i].PID = pid
	return waitAgent(ctx, m.Dir, m.Agents[i])
}

// waitAgent waits until a just started agent answers a status call.
func waitAgent(ctx context.Context, dir string, a AgentInstance) error {
	return poll(ctx, agentTimeout, func() (bool, error) {
		if !procAlive(a.PID, a.proc()) {
			return true, fmt.Errorf("%s exited while starting: %s", a.Name, logTail(a.Log, 5))
		}
		if err := agentAnswers(ctx, dir, a, time.Second); err != nil {
			return false, fmt.Errorf("%s does not answer within %s (%v): %s", a.Name, agentTimeout, err, logTail(a.Log, 5))
		}
		return true, nil
	})
}

// stopAgents stops every agent (SIGTERM, SIGKILL after the grace).
func stopAgents(ctx context.Context, m *Manifest, grace time.Duration) error {
	return parallel(len(m.Agents), func(i int) error {
		a := m.Agents[i]
		for _, pid := range append([]int{a.PID}, procPIDs(a.proc())...) {
			if err := stopProc(ctx, pid, a.proc(), grace); err != nil {
				return fmt.Errorf("stop %s: %w", a.Name, err)
			}
		}
		return nil
	})
}

func agentStatus(ctx context.Context, dir string, a AgentInstance) AgentStatus {
	st := AgentStatus{Name: a.Name, Node: a.Node, Listen: a.Listen.Addr(), PID: a.PID, State: procState(a.PID, a.proc())}
	st.Running = st.State != StateStopped
	if st.State == StateRunning {
		if err := agentAnswers(ctx, dir, a, statusTimeout); err != nil {
			st.Error = err.Error()
		} else {
			st.Answering = true
		}
	}
	return st
}
