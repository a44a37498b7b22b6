package sandbox

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitRule(t *testing.T) {
	got := splitRule(`-A INPUT -i lo -p tcp -m tcp --dport 23307 -m comment --comment "vigil-sandbox /tmp/my sb node2" -j DROP`)
	want := []string{"-A", "INPUT", "-i", "lo", "-p", "tcp", "-m", "tcp", "--dport", "23307",
		"-m", "comment", "--comment", "vigil-sandbox /tmp/my sb node2", "-j", "DROP"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := splitRule(`-A X --comment "a \"q\" b"`); got[3] != `a "q" b` {
		t.Errorf("escaped quotes: %q", got)
	}
}

const listing = `-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-A INPUT -i lo -p tcp -m tcp --sport 23307 -m comment --comment "vigil-sandbox /tmp/sb node2" -j DROP
-A INPUT -i lo -p tcp -m tcp --dport 23307 -m comment --comment "vigil-sandbox /tmp/sb node2" -j DROP
-A INPUT -i lo -p tcp -m tcp --dport 23316 -m comment --comment "vigil-sandbox /tmp/sb node12" -j DROP
-A INPUT -i lo -p tcp -m tcp --dport 24306 -m comment --comment "vigil-sandbox /tmp/sb2 node1" -j DROP
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A OUTPUT -o lo -p tcp -m cgroup --path "vigil-sandbox/6dc84475af54/node2" -m comment --comment "vigil-sandbox /tmp/sb node2" -j DROP
`

func TestRulesToDeleteOneNode(t *testing.T) {
	del := rulesToDelete(listing, "/tmp/sb", "node2")
	if len(del) != 3 {
		t.Fatalf("got %d rules, want 3: %q", len(del), del)
	}
	for _, d := range del {
		if d[0] != "-D" || commentOf(d) != "vigil-sandbox /tmp/sb node2" {
			t.Errorf("rule %q", d)
		}
	}
	if del[2][1] != "OUTPUT" || !reflect.DeepEqual(del[2][7:10], []string{"cgroup", "--path", "vigil-sandbox/6dc84475af54/node2"}) {
		t.Errorf("cgroup rule = %q", del[2])
	}
}

func TestRulesToDeleteWholeSandbox(t *testing.T) {
	del := rulesToDelete(listing, "/tmp/sb", "")
	if len(del) != 4 {
		t.Fatalf("got %d rules, want 4 (not /tmp/sb2's, not the ACCEPT): %q", len(del), del)
	}
	for _, d := range del {
		if !strings.HasPrefix(commentOf(d), "vigil-sandbox /tmp/sb node") {
			t.Errorf("rule %q", d)
		}
	}
}

func TestIsolateRules(t *testing.T) {
	m := testManifest(t, Galera, 3, false)
	rules := isolateRules(m.Dir, m.Nodes[0])
	// 4 ports × (dport, sport) + the cgroup rule.
	if len(rules) != 9 {
		t.Fatalf("%d rules: %q", len(rules), rules)
	}
	ports := map[string]bool{}
	for _, r := range rules[:8] {
		if r[0] != "INPUT" || r[2] != "lo" || commentOf(r) != "vigil-sandbox /tmp/sb node1" || r[len(r)-1] != "DROP" {
			t.Errorf("rule %q", r)
		}
		ports[r[6]] = true
	}
	for _, p := range []string{"23306", "23406", "23407", "23408"} {
		if !ports[p] {
			t.Errorf("no rule for port %s", p)
		}
	}
	if last := rules[8]; last[0] != "OUTPUT" || last[8] != m.Nodes[0].Cgroup {
		t.Errorf("cgroup rule %q", last)
	}
}
