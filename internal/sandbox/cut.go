package sandbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
)

// Cut (`vigil sandbox isolate NAME --from PEER`) cuts one path only: the
// TCP connections between NAME's processes (a node or a Vigil daemon, in
// its own cgroup) and PEER's ports (a node's, or an etcd member's client
// and peer ports). Everything else keeps working: PEER still serves
// everybody else, NAME still reaches everybody else. It is how a test
// cuts the acting Vigil off from the primary while the other Vigil and
// the replicas still reach it, or a replica off from its primary.
//
// The rules mark the connection (conntrack) on the first packet NAME
// sends to one of PEER's ports, then drop every packet of a marked
// connection both ways: established connections stall (as when a cable
// is pulled) and new ones time out. Each pair has its own mark. The rules
// carry NAME's comment, so `heal NAME` removes them with NAME's other
// rules.

// cutMark is the connection mark of the cut between name and peer.
func cutMark(dir, name, peer string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(dir + "\x00" + name + "\x00" + peer))
	return fmt.Sprintf("0x%x", 0x56000000|(h.Sum32()&0x00ffffff))
}

// cutRules are the iptables rules (chain first) of a cut, in the order
// they are inserted (-I: the last ends up first).
func cutRules(dir, name, cgroup, peer string, ports []int) [][]string {
	c := ruleComment(dir, name)
	mark := cutMark(dir, name, peer)
	rules := [][]string{
		{"OUTPUT", "-o", "lo", "-p", "tcp", "-m", "connmark", "--mark", mark, "-m", "comment", "--comment", c, "-j", "DROP"},
		{"INPUT", "-i", "lo", "-p", "tcp", "-m", "connmark", "--mark", mark, "-m", "comment", "--comment", c, "-j", "DROP"},
	}
	for _, p := range ports {
		rules = append(rules, []string{"OUTPUT", "-o", "lo", "-p", "tcp", "--dport", strconv.Itoa(p), "-m", "cgroup", "--path", cgroup,
			"-m", "comment", "--comment", c, "-j", "CONNMARK", "--set-mark", mark})
	}
	return rules
}

// Cut drops the traffic between name (a node or a Vigil daemon) and peer
// (a node or an etcd member) only; Heal(name) restores it.
func (s *Sandbox) Cut(ctx context.Context, name, peer string) error {
	if err := s.refresh(); err != nil {
		return err
	}
	m := s.Manifest()
	cgroup := ""
	if i, err := m.vigil(name); err == nil {
		cgroup = m.Vigils[i].Cgroup
	} else if i, err := m.node(name); err == nil {
		cgroup = m.Nodes[i].Cgroup
	} else {
		return fmt.Errorf("isolate %s --from %s: %s is neither a node nor a Vigil daemon of the sandbox", name, peer, name)
	}
	if cgroup == "" {
		return fmt.Errorf("isolate %s --from %s: %s does not run in its own cgroup (cgroup v2 needed)", name, peer, name)
	}
	var ports []int
	if i, err := m.node(peer); err == nil {
		ports = m.Nodes[i].ports()
	} else if i, err := m.etcd(peer); err == nil {
		ports = []int{m.Etcd[i].ClientPort, m.Etcd[i].PeerPort}
	} else {
		return fmt.Errorf("isolate %s --from %s: %s is neither a node nor an etcd member of the sandbox", name, peer, peer)
	}
	if _, err := ensureCgroup(cgroup); err != nil {
		return err
	}
	for _, r := range cutRules(s.dir, name, cgroup, peer, ports) {
		if err := iptables(ctx, append([]string{"-I"}, r...)...); err != nil {
			return errors.Join(fmt.Errorf("isolate %s --from %s: %w", name, peer, err), healRules(ctx, s.dir, name))
		}
	}
	return nil
}

// removeVigilCgroups removes the cgroups of Vigil daemons (before
// removeCgroups removes the sandbox's); one with processes stays.
func removeVigilCgroups(vigils []VigilInstance) {
	root := cgroup2Root()
	if root == "" {
		return
	}
	for _, v := range vigils {
		if v.Cgroup != "" {
			_ = os.Remove(filepath.Join(root, v.Cgroup))
		}
	}
}
