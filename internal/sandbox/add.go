package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// AddNode creates one more node, starts it and, in a replication sandbox,
// makes it a replica of the current primary (the running node with
// read_only=OFF) that replicates from the start of the primary's binary
// log; it returns once the node replicates. The node takes the next name
// (node4 after node3) and the port of the sandbox's scheme (base port +
// K - 1). It is not added to vigil.yaml: adding it to a running Vigil is
// the point of `vigil ctl server add` or a reload. Galera sandboxes are
// not supported: a joiner would need the others' configs rewritten.
func (s *Sandbox) AddNode(ctx context.Context) (Node, error) {
	if err := s.refresh(); err != nil {
		return Node{}, err
	}
	m := s.Manifest()
	if m.Topology != Replication && m.Topology != Standalone {
		return Node{}, fmt.Errorf("sandbox add supports replication and standalone sandboxes, not %s", m.Topology)
	}
	if len(m.Clusters) > 1 {
		return Node{}, errors.New("sandbox add does not support a sandbox of several clusters (up --clusters) yet: it could not tell which cluster the node joins")
	}
	k := len(m.members()) + 1
	if k > MaxNodes {
		return Node{}, fmt.Errorf("a sandbox has at most %d nodes", MaxNodes)
	}
	bins, err := findBinaries(m.Topology)
	if err != nil {
		return Node{}, err
	}
	var primary *Node
	if m.Topology == Replication {
		for i := range m.Nodes {
			n := m.Nodes[i]
			if n.isSpare() || !processAlive(n.PID, n.Config) || n.Paused {
				continue
			}
			res, err := query(ctx, n.Socket, "SELECT @@read_only", 5*time.Second)
			if err == nil && len(res.rows) == 1 && res.rows[0][0] != nil && *res.rows[0][0] == "0" {
				primary = &n
				break
			}
		}
		if primary == nil {
			return Node{}, errors.New("no running node has read_only=OFF: the new replica needs a primary")
		}
	}
	name := "node" + strconv.Itoa(k)
	nd := filepath.Join(m.Dir, name)
	n := Node{
		Name: name, Host: Host, Port: m.BasePort + k - 1, Socket: filepath.Join(nd, "mysqld.sock"),
		Datadir: filepath.Join(nd, "data"), ServerID: k, Config: filepath.Join(nd, "my.cnf"),
		ErrorLog: filepath.Join(nd, "error.log"), PIDFile: filepath.Join(nd, "mysqld.pid"), Role: RoleStandalone,
	}
	if m.Topology == Replication {
		n.Role = RoleReplica
	}
	// (The plan's proxy and admin ports are 0: any free port.)
	if err := checkFree(ctx, PortPlan{Nodes: []NodePorts{{MySQL: n.Port}}}); err != nil {
		return Node{}, err
	}
	if err := makeNodeDirs(&m, n); err != nil {
		return Node{}, err
	}
	one := m
	one.Nodes = []Node{n}
	if err := installAll(ctx, bins, &one); err != nil {
		return Node{}, err
	}
	pid, err := spawn(bins.mariadbd, n)
	if err != nil {
		return Node{}, err
	}
	n.PID = pid
	if err := s.update(ctx, func(m *Manifest) error {
		if _, err := m.node(name); err == nil {
			return fmt.Errorf("%s was added by someone else meanwhile", name)
		}
		m.Nodes = append(m.Nodes, n)
		return nil
	}); err != nil {
		return Node{}, err
	}
	if err := waitAnswer(ctx, n, answerTimeout); err != nil {
		return n, err
	}
	if primary == nil {
		return n, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := query(cctx, n.Socket, changeMasterSQL(*primary, m.Accounts.Repl)+"; START SLAVE", 10*time.Second); err != nil {
		return n, fmt.Errorf("set up replication on %s: %w", name, err)
	}
	return n, waitReplicating(ctx, n, replicatingTimeout)
}
