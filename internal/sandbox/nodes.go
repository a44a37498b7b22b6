package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// ErrNotRunning is returned by Pause, Resume and Isolate for a node that
// is not running.
var ErrNotRunning = errors.New("not running")

// running returns the node after re-reading the manifest, and whether its
// server is alive.
func (s *Sandbox) running(name string) (Node, bool, error) {
	if err := s.refresh(); err != nil {
		return Node{}, false, err
	}
	n, err := s.Node(name)
	if err != nil {
		return Node{}, false, err
	}
	return n, processAlive(n.PID, n.Config), nil
}

// IsRunning reports whether the process of a node (or etcd member or
// Vigil daemon) is alive.
func (s *Sandbox) IsRunning(name string) (bool, error) {
	if auxName(name) {
		_, alive, err := s.auxRunning(name)
		return alive, err
	}
	_, alive, err := s.running(name)
	return alive, err
}

// PID is the recorded pid of a node, etcd member or Vigil daemon.
func (s *Sandbox) PID(name string) (int, error) {
	m := s.Manifest()
	if auxName(name) {
		a, err := m.aux(name)
		if err != nil {
			return 0, err
		}
		return a.pid(), nil
	}
	i, err := m.node(name)
	if err != nil {
		return 0, err
	}
	return m.Nodes[i].PID, nil
}

// CheckName returns an error listing the valid names unless name is a
// node, etcd member or Vigil daemon of the sandbox.
func (s *Sandbox) CheckName(name string) error {
	m := s.Manifest()
	if auxName(name) {
		_, err := m.aux(name)
		return err
	}
	_, err := m.node(name)
	return err
}

// Start starts a stopped node with its my.cnf and waits until it answers
// (and, for Galera, until it is Synced). A replica replicates again on its
// own: its replication settings persist. A Galera node rejoins the cluster;
// when no other node runs it bootstraps a new cluster, and logs so at Warn.
// Starting a running node does nothing. Etcd members and Vigil daemons
// start as members.go says.
func (s *Sandbox) Start(ctx context.Context, name string) error {
	if auxName(name) {
		return s.startAux(ctx, name)
	}
	n, alive, err := s.running(name)
	if err != nil {
		return err
	}
	if alive {
		s.logger().Info("already running", "node", name, "pid", n.PID)
		return nil
	}
	if pids := serverPIDs(n.Config); len(pids) > 0 {
		return fmt.Errorf("%s already runs as pid %d, which sandbox.json does not record: run `vigil sandbox down` first", name, pids[0])
	}
	m := s.Manifest()
	bins, err := findBinaries(m.Topology)
	if err != nil {
		return err
	}
	var extra []string
	if m.Topology == Galera {
		others := 0
		for _, o := range m.Nodes {
			if o.Name != name && processAlive(o.PID, o.Config) {
				others++
			}
		}
		if others == 0 {
			s.logger().Warn(fmt.Sprintf("%s is the only node of the Galera cluster left: bootstrapping a new cluster from it (--wsrep-new-cluster)", name))
			if err := markSafeToBootstrap(n.Datadir); err != nil {
				return err
			}
			extra = []string{"--wsrep-new-cluster"}
		}
	}
	pid, err := spawn(bins.mariadbd, n, extra...)
	if err != nil {
		return err
	}
	n.PID = pid
	if err := s.update(ctx, func(m *Manifest) error {
		i, err := m.node(name)
		if err != nil {
			return err
		}
		m.Nodes[i].PID = pid
		m.Nodes[i].Paused = false
		return nil
	}); err != nil {
		return err
	}
	timeout := answerTimeout
	if m.Topology == Galera {
		timeout = galeraJoinTimeout
	}
	if err := waitAnswer(ctx, n, timeout); err != nil {
		return err
	}
	if m.Topology == Galera {
		return waitSynced(ctx, n, 1, timeout)
	}
	return nil
}

var safeToBootstrap = regexp.MustCompile(`(?m)^safe_to_bootstrap:[ \t]*0[ \t]*$`)

// markSafeToBootstrap lets a Galera node that was not the last to leave
// bootstrap a cluster: in a sandbox, losing the other nodes' last writes is
// accepted.
func markSafeToBootstrap(datadir string) error {
	p := filepath.Join(datadir, "grastate.dat")
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if !safeToBootstrap.Match(data) {
		return nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p, safeToBootstrap.ReplaceAll(data, []byte("safe_to_bootstrap: 1")), st.Mode().Perm()); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// Stop shuts a node down cleanly (SIGTERM; SIGKILL after 20 s). A paused
// node is resumed first so it can shut down. The same goes for etcd
// members and Vigil daemons.
func (s *Sandbox) Stop(ctx context.Context, name string) error {
	if auxName(name) {
		return s.stopAux(ctx, name)
	}
	n, _, err := s.running(name)
	if err != nil {
		return err
	}
	for _, pid := range append([]int{n.PID}, serverPIDs(n.Config)...) {
		if err := stopPID(ctx, pid, n.Config, stopGrace); err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
	}
	return s.setPaused(ctx, name, false)
}

// Kill crashes a node (or etcd member or Vigil daemon) with SIGKILL and
// waits until its process is gone.
func (s *Sandbox) Kill(ctx context.Context, name string) error {
	if auxName(name) {
		return s.killAux(ctx, name)
	}
	n, _, err := s.running(name)
	if err != nil {
		return err
	}
	for _, pid := range append([]int{n.PID}, serverPIDs(n.Config)...) {
		if err := killPID(ctx, pid, n.Config); err != nil {
			return fmt.Errorf("kill %s: %w", name, err)
		}
	}
	return s.setPaused(ctx, name, false)
}

// Pause freezes a node with SIGSTOP: it keeps its connections but answers
// nothing. Etcd members and Vigil daemons too.
func (s *Sandbox) Pause(ctx context.Context, name string) error {
	if auxName(name) {
		return s.pauseAux(ctx, name)
	}
	n, alive, err := s.running(name)
	if err != nil {
		return err
	}
	if !alive {
		return fmt.Errorf("pause %s: %w", name, ErrNotRunning)
	}
	if err := syscall.Kill(n.PID, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", name, err)
	}
	// SIGSTOP is asynchronous: wait until the kernel shows it stopped.
	_ = poll(ctx, 2*time.Second, func() (bool, error) { return processState(n.PID) == "T", nil })
	return s.setPaused(ctx, name, true)
}

// Resume continues a paused node, etcd member or Vigil daemon (SIGCONT).
func (s *Sandbox) Resume(ctx context.Context, name string) error {
	if auxName(name) {
		return s.resumeAux(ctx, name)
	}
	n, alive, err := s.running(name)
	if err != nil {
		return err
	}
	if !alive {
		return fmt.Errorf("resume %s: %w", name, ErrNotRunning)
	}
	if err := syscall.Kill(n.PID, syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s: %w", name, err)
	}
	return s.setPaused(ctx, name, false)
}

func (s *Sandbox) setPaused(ctx context.Context, name string, paused bool) error {
	return s.update(ctx, func(m *Manifest) error {
		i, err := m.node(name)
		if err != nil {
			return err
		}
		m.Nodes[i].Paused = paused
		return nil
	})
}

// Down stops everything the sandbox runs: it resumes paused processes and
// removes the sandbox's iptables rules first so nothing hangs, then stops
// the Vigil daemons, then the nodes, then the etcd members, removes the
// cgroups, and with purge deletes the directory. Afterwards no process of
// the sandbox runs, or Down says which one is left.
func (s *Sandbox) Down(ctx context.Context, purge bool) error {
	if err := s.refresh(); err != nil {
		return err
	}
	m := s.Manifest()
	for _, n := range m.Nodes {
		if processAlive(n.PID, n.Config) {
			_ = syscall.Kill(n.PID, syscall.SIGCONT)
		}
	}
	for _, a := range auxRefs(&m) {
		if procAlive(a.pid(), a.proc()) {
			_ = syscall.Kill(a.pid(), syscall.SIGCONT)
		}
	}
	var errs []error
	if err := healRules(ctx, s.dir, ""); err != nil {
		errs = append(errs, err)
	}
	stopAll := func(refs []auxRef) error {
		return parallel(len(refs), func(i int) error {
			a := refs[i]
			for _, pid := range a.pids() {
				if err := stopProc(ctx, pid, a.proc(), stopGrace); err != nil {
					return fmt.Errorf("stop %s: %w", a.name(), err)
				}
			}
			return nil
		})
	}
	errs = append(errs, stopAll(vigilRefs(&m)))
	// Agents before their nodes: none may start a node being stopped.
	errs = append(errs, stopAgents(ctx, &m, stopGrace))
	errs = append(errs, parallel(len(m.Nodes), func(i int) error {
		n := m.Nodes[i]
		for _, pid := range append([]int{n.PID}, serverPIDs(n.Config)...) {
			if err := stopPID(ctx, pid, n.Config, stopGrace); err != nil {
				return fmt.Errorf("stop %s: %w", n.Name, err)
			}
		}
		// Helpers a server left behind (an rsync of an interrupted SST).
		for _, pid := range cgroupPIDs(n.Cgroup) {
			_ = killPID(ctx, pid, "")
		}
		return nil
	}))
	// etcd members one at a time: a leader stopped together with its
	// followers waits out its leadership transfer (7 s), one stopped while
	// its followers run hands over at once, and the last has nobody to
	// hand over to.
	for _, a := range etcdRefs(&m) {
		errs = append(errs, stopAll([]auxRef{a}))
	}
	for _, e := range m.Etcd {
		for _, pid := range cgroupPIDs(e.Cgroup) {
			_ = killPID(ctx, pid, "")
		}
	}
	removeEtcdCgroups(m.Etcd)
	removeVigilCgroups(m.Vigils)
	removeCgroups(s.dir, m.Nodes)
	for _, n := range m.Nodes {
		if pids := serverPIDs(n.Config); len(pids) > 0 {
			errs = append(errs, fmt.Errorf("%s is still running as pid %d", n.Name, pids[0]))
		}
	}
	for _, a := range auxRefs(&m) {
		if pids := procPIDs(a.proc()); len(pids) > 0 {
			errs = append(errs, fmt.Errorf("%s is still running as pid %d", a.name(), pids[0]))
		}
	}
	for _, a := range m.Agents {
		if pids := procPIDs(a.proc()); len(pids) > 0 {
			errs = append(errs, fmt.Errorf("%s is still running as pid %d", a.Name, pids[0]))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if purge {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("purge %s: %w", s.dir, err)
		}
		return nil
	}
	return s.update(ctx, func(m *Manifest) error {
		for i := range m.Nodes {
			m.Nodes[i].Paused = false
			m.Nodes[i].Isolated = false
		}
		for _, a := range auxRefs(m) {
			a.setPaused(false)
			a.setIsolated(false)
		}
		return nil
	})
}
