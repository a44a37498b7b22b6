package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Etcd members (etcdK) and Vigil daemons (vigilK) are driven through the
// same Go API as nodes: Start, Stop, Kill, Pause, Resume, Isolate, Heal,
// IsRunning and PID take any member name of the sandbox and hand etcd and
// vigil names to the functions of this file. What each does to them:
//
//   - Kill: SIGKILL, and wait until the process is gone.
//   - Stop: SIGTERM (after SIGCONT), SIGKILL after 20 s.
//   - Pause, Resume: SIGSTOP, SIGCONT.
//   - Start: an etcd member runs again with the same flags but
//     --initial-cluster-state existing (its data kept) and Start waits
//     until it answers GET /health (healthy, when a quorum runs); a Vigil
//     daemon runs again with its config and Start waits until its admin
//     port answers HTTP and its proxy port accepts connections.
//   - Isolate: an etcd member's TCP traffic to and from its client and
//     peer ports is dropped on lo, and, where it runs in its own cgroup,
//     every TCP packet it sends (its own links to its peers). A Vigil
//     daemon is cut off from etcd only: the packets between its source
//     address and the etcd client ports are dropped; its clients and its
//     MariaDB connections keep working. Heal removes the rules.

// auxName reports whether name is an etcd member's or a Vigil daemon's
// (etcdK, vigilK) rather than a node's (nodeK).
func auxName(name string) bool {
	return strings.HasPrefix(name, "etcd") || strings.HasPrefix(name, "vigil")
}

// auxRef points at an etcd member or a Vigil daemon of a manifest; one of
// etcd and vigil is set.
type auxRef struct {
	etcd  *EtcdMember
	vigil *VigilInstance
}

// aux finds the named etcd member or Vigil daemon of m.
func (m *Manifest) aux(name string) (auxRef, error) {
	if strings.HasPrefix(name, "etcd") {
		i, err := m.etcd(name)
		if err != nil {
			return auxRef{}, err
		}
		return auxRef{etcd: &m.Etcd[i]}, nil
	}
	i, err := m.vigil(name)
	if err != nil {
		return auxRef{}, err
	}
	return auxRef{vigil: &m.Vigils[i]}, nil
}

func (a auxRef) name() string {
	if a.etcd != nil {
		return a.etcd.Name
	}
	return a.vigil.Name
}

func (a auxRef) pid() int {
	if a.etcd != nil {
		return a.etcd.PID
	}
	return a.vigil.PID
}

func (a auxRef) proc() procID {
	if a.etcd != nil {
		return a.etcd.proc()
	}
	return a.vigil.proc()
}

func (a auxRef) setPaused(v bool) {
	if a.etcd != nil {
		a.etcd.Paused = v
	} else {
		a.vigil.Paused = v
	}
}

func (a auxRef) setIsolated(v bool) {
	if a.etcd != nil {
		a.etcd.Isolated = v
	} else {
		a.vigil.Isolated = v
	}
}

// pids are the recorded pid and any other live process of the member.
func (a auxRef) pids() []int { return append([]int{a.pid()}, procPIDs(a.proc())...) }

// auxRunning re-reads the manifest and returns the named member (pointing
// into a copy) and whether its process is alive.
func (s *Sandbox) auxRunning(name string) (auxRef, bool, error) {
	if err := s.refresh(); err != nil {
		return auxRef{}, false, err
	}
	m := s.Manifest()
	a, err := m.aux(name)
	if err != nil {
		return auxRef{}, false, err
	}
	return a, procAlive(a.pid(), a.proc()), nil
}

// updateAux applies fn to the named member in the manifest on disk.
func (s *Sandbox) updateAux(ctx context.Context, name string, fn func(a auxRef)) error {
	return s.update(ctx, func(m *Manifest) error {
		a, err := m.aux(name)
		if err != nil {
			return err
		}
		fn(a)
		return nil
	})
}

func (s *Sandbox) killAux(ctx context.Context, name string) error {
	a, _, err := s.auxRunning(name)
	if err != nil {
		return err
	}
	for _, pid := range a.pids() {
		if err := killProc(ctx, pid, a.proc()); err != nil {
			return fmt.Errorf("kill %s: %w", name, err)
		}
	}
	return s.updateAux(ctx, name, func(a auxRef) { a.setPaused(false) })
}

func (s *Sandbox) stopAux(ctx context.Context, name string) error {
	a, _, err := s.auxRunning(name)
	if err != nil {
		return err
	}
	for _, pid := range a.pids() {
		if err := stopProc(ctx, pid, a.proc(), stopGrace); err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
	}
	return s.updateAux(ctx, name, func(a auxRef) { a.setPaused(false) })
}

func (s *Sandbox) pauseAux(ctx context.Context, name string) error {
	a, alive, err := s.auxRunning(name)
	if err != nil {
		return err
	}
	if !alive {
		return fmt.Errorf("pause %s: %w", name, ErrNotRunning)
	}
	if err := syscall.Kill(a.pid(), syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", name, err)
	}
	_ = poll(ctx, 2*time.Second, func() (bool, error) { return processState(a.pid()) == "T", nil })
	return s.updateAux(ctx, name, func(a auxRef) { a.setPaused(true) })
}

func (s *Sandbox) resumeAux(ctx context.Context, name string) error {
	a, alive, err := s.auxRunning(name)
	if err != nil {
		return err
	}
	if !alive {
		return fmt.Errorf("resume %s: %w", name, ErrNotRunning)
	}
	if err := syscall.Kill(a.pid(), syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s: %w", name, err)
	}
	return s.updateAux(ctx, name, func(a auxRef) { a.setPaused(false) })
}

func (s *Sandbox) startAux(ctx context.Context, name string) error {
	if strings.HasPrefix(name, "etcd") {
		return s.startEtcd(ctx, name)
	}
	return s.startVigil(ctx, name)
}

func (s *Sandbox) isolateAux(ctx context.Context, name string) error {
	a, alive, err := s.auxRunning(name)
	if err != nil {
		return err
	}
	if !alive {
		return fmt.Errorf("isolate %s: %w", name, ErrNotRunning)
	}
	m := s.Manifest()
	var rules [][]string
	cgroup := ""
	if a.etcd != nil {
		rules, cgroup = etcdIsolateRules(s.dir, *a.etcd), a.etcd.Cgroup
	} else {
		rules = vigilIsolateRules(s.dir, *a.vigil, m.Etcd)
	}
	if err := s.insertRules(ctx, name, rules, cgroup); err != nil {
		return err
	}
	return s.updateAux(ctx, name, func(a auxRef) { a.setIsolated(true) })
}

func (s *Sandbox) healAux(ctx context.Context, name string) error {
	if _, _, err := s.auxRunning(name); err != nil {
		return err
	}
	if err := healRules(ctx, s.dir, name); err != nil {
		return err
	}
	return s.updateAux(ctx, name, func(a auxRef) { a.setIsolated(false) })
}

// etcdIsolateRules are the iptables rules (chain first) that isolate an
// etcd member: its client and peer ports, and its own cgroup's packets.
func etcdIsolateRules(dir string, e EtcdMember) [][]string {
	c := ruleComment(dir, e.Name)
	var rules [][]string
	for _, p := range []int{e.ClientPort, e.PeerPort} {
		for _, dirFlag := range []string{"--dport", "--sport"} {
			rules = append(rules, []string{"INPUT", "-i", "lo", "-p", "tcp", dirFlag, strconv.Itoa(p),
				"-m", "comment", "--comment", c, "-j", "DROP"})
		}
	}
	if e.Cgroup != "" {
		rules = append(rules, []string{"OUTPUT", "-o", "lo", "-p", "tcp", "-m", "cgroup", "--path", e.Cgroup,
			"-m", "comment", "--comment", c, "-j", "DROP"})
	}
	return rules
}

// vigilIsolateRules are the iptables rules that cut a Vigil daemon off
// from etcd: packets from its source address to each etcd client port, and
// back.
func vigilIsolateRules(dir string, v VigilInstance, members []EtcdMember) [][]string {
	c := ruleComment(dir, v.Name)
	var rules [][]string
	for _, e := range members {
		p := strconv.Itoa(e.ClientPort)
		rules = append(rules,
			[]string{"INPUT", "-i", "lo", "-s", v.SourceAddress, "-p", "tcp", "--dport", p,
				"-m", "comment", "--comment", c, "-j", "DROP"},
			[]string{"INPUT", "-i", "lo", "-d", v.SourceAddress, "-p", "tcp", "--sport", p,
				"-m", "comment", "--comment", c, "-j", "DROP"})
	}
	return rules
}

// etcdRefs, vigilRefs and auxRefs point at the etcd members, the Vigil
// daemons, or both, of m.
func etcdRefs(m *Manifest) []auxRef {
	var out []auxRef
	for i := range m.Etcd {
		out = append(out, auxRef{etcd: &m.Etcd[i]})
	}
	return out
}

func vigilRefs(m *Manifest) []auxRef {
	var out []auxRef
	for i := range m.Vigils {
		out = append(out, auxRef{vigil: &m.Vigils[i]})
	}
	return out
}

func auxRefs(m *Manifest) []auxRef { return append(vigilRefs(m), etcdRefs(m)...) }

// removeEtcdCgroups removes the cgroups of etcd members (before
// removeCgroups removes the sandbox's); one with processes stays.
func removeEtcdCgroups(members []EtcdMember) {
	root := cgroup2Root()
	if root == "" {
		return
	}
	for _, e := range members {
		if e.Cgroup != "" {
			_ = os.Remove(filepath.Join(root, e.Cgroup))
		}
	}
}
