package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Isolation drops a node's traffic on the loopback interface while its
// process keeps running:
//
//   - INPUT rules drop TCP packets to or from each of the node's ports
//     (MySQL, and for Galera gcomm, IST and SST), so nobody reaches it;
//   - when the node runs in its own cgroup, an OUTPUT rule drops every TCP
//     packet its processes send, which also cuts the connections the node
//     opened itself (a replica's connection to its primary, Galera links
//     it initiated), whose ports are not the node's.
//
// Every rule carries the comment "vigil-sandbox <dir> <name>", so heal and
// down remove exactly the rules of one node (or etcd member or Vigil
// daemon, see members.go) or one sandbox.

const ruleTag = "vigil-sandbox"

func ruleComment(dir, node string) string { return ruleTag + " " + dir + " " + node }

// isolateRules are the iptables rule specifications (chain first) that
// isolate a node.
func isolateRules(dir string, n Node) [][]string {
	c := ruleComment(dir, n.Name)
	var rules [][]string
	for _, p := range n.ports() {
		ps := strconv.Itoa(p)
		for _, dirFlag := range []string{"--dport", "--sport"} {
			rules = append(rules, []string{"INPUT", "-i", "lo", "-p", "tcp", dirFlag, ps,
				"-m", "comment", "--comment", c, "-j", "DROP"})
		}
	}
	if n.Cgroup != "" {
		rules = append(rules, []string{"OUTPUT", "-o", "lo", "-p", "tcp", "-m", "cgroup", "--path", n.Cgroup,
			"-m", "comment", "--comment", c, "-j", "DROP"})
	}
	return rules
}

func iptables(ctx context.Context, args ...string) error {
	bin, err := lookPath("iptables")
	if err != nil {
		return errors.New("iptables not found (isolate needs it): sudo scripts/install-deps.sh (or: apt-get install iptables)")
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Isolate drops the node's network traffic (see above); the process keeps
// running and still answers on its unix socket. Etcd members and Vigil
// daemons are isolated as members.go says.
func (s *Sandbox) Isolate(ctx context.Context, name string) error {
	if auxName(name) {
		return s.isolateAux(ctx, name)
	}
	n, alive, err := s.running(name)
	if err != nil {
		return err
	}
	if !alive {
		return fmt.Errorf("isolate %s: %w", name, ErrNotRunning)
	}
	if err := s.insertRules(ctx, name, isolateRules(s.dir, n), n.Cgroup); err != nil {
		return err
	}
	return s.setIsolated(ctx, name, true)
}

// insertRules replaces the isolation rules of a member by rules. A rule
// of the OUTPUT chain (the member's cgroup) that cannot be added is
// logged and skipped; any other failure removes what was added.
func (s *Sandbox) insertRules(ctx context.Context, name string, rules [][]string, cgroup string) error {
	if err := healRules(ctx, s.dir, name); err != nil {
		return err
	}
	for _, r := range rules {
		if r[0] == "OUTPUT" {
			if _, err := ensureCgroup(cgroup); err != nil {
				s.logger().Warn("cannot drop the node's own outgoing connections", "node", name, "err", err)
				continue
			}
			if err := iptables(ctx, append([]string{"-I"}, r...)...); err != nil {
				s.logger().Warn("cannot drop the node's own outgoing connections (iptables cgroup match)", "node", name, "err", err)
			}
			continue
		}
		if err := iptables(ctx, append([]string{"-I"}, r...)...); err != nil {
			_ = healRules(ctx, s.dir, name)
			return fmt.Errorf("isolate %s: %w", name, err)
		}
	}
	return nil
}

// Heal removes the isolation rules of a node, etcd member or Vigil
// daemon.
func (s *Sandbox) Heal(ctx context.Context, name string) error {
	if auxName(name) {
		return s.healAux(ctx, name)
	}
	if _, _, err := s.running(name); err != nil {
		return err
	}
	if err := healRules(ctx, s.dir, name); err != nil {
		return err
	}
	return s.setIsolated(ctx, name, false)
}

func (s *Sandbox) setIsolated(ctx context.Context, name string, v bool) error {
	return s.update(ctx, func(m *Manifest) error {
		i, err := m.node(name)
		if err != nil {
			return err
		}
		m.Nodes[i].Isolated = v
		return nil
	})
}

// healRules deletes the rules of one node, or of every node of the
// sandbox when node is "".
func healRules(ctx context.Context, dir, node string) error {
	bin, err := lookPath("iptables")
	if err != nil {
		return nil // no iptables: no rules
	}
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(lctx, bin, "-w", "5", "-S").Output()
	if err != nil {
		return fmt.Errorf("iptables -S: %w", err)
	}
	var errs []error
	for _, del := range rulesToDelete(string(out), dir, node) {
		if err := iptables(ctx, del...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rulesToDelete turns the matching "-A ..." lines of `iptables -S` into
// "-D ..." argument lists.
func rulesToDelete(listing, dir, node string) [][]string {
	var out [][]string
	for _, line := range strings.Split(listing, "\n") {
		if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, ruleTag) {
			continue
		}
		args := splitRule(line)
		c := commentOf(args)
		match := c == ruleComment(dir, node)
		if node == "" {
			match = strings.HasPrefix(c, ruleComment(dir, ""))
		}
		if match {
			args[0] = "-D"
			out = append(out, args)
		}
	}
	return out
}

// splitRule splits an `iptables -S` line into arguments; iptables quotes
// arguments with spaces in double quotes and escapes quotes inside.
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && inQuote && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			inQuote = !inQuote
			have = true
		case c == ' ' && !inQuote:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if have {
		args = append(args, cur.String())
	}
	return args
}

func commentOf(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--comment" {
			return args[i+1]
		}
	}
	return ""
}
