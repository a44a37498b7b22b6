package sandbox

import (
	"strings"
	"testing"
)

func TestCutRules(t *testing.T) {
	rules := cutRules("/tmp/sb", "vigil1", "vigil-sandbox/abc/vigil1", "node1", []int{4001})
	var got []string
	for _, r := range rules {
		got = append(got, strings.Join(r, " "))
	}
	mark := cutMark("/tmp/sb", "vigil1", "node1")
	want := []string{
		"OUTPUT -o lo -p tcp -m connmark --mark " + mark + " -m comment --comment vigil-sandbox /tmp/sb vigil1 -j DROP",
		"INPUT -i lo -p tcp -m connmark --mark " + mark + " -m comment --comment vigil-sandbox /tmp/sb vigil1 -j DROP",
		"OUTPUT -o lo -p tcp --dport 4001 -m cgroup --path vigil-sandbox/abc/vigil1 -m comment --comment vigil-sandbox /tmp/sb vigil1 -j CONNMARK --set-mark " + mark,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if cutMark("/tmp/sb", "vigil1", "node2") == mark || cutMark("/tmp/other", "vigil1", "node1") == mark {
		t.Error("every cut needs its own mark")
	}
	// heal vigil1 finds them by their comment.
	listing := "-A INPUT -i lo -p tcp -m connmark --mark " + mark + ` -m comment --comment "vigil-sandbox /tmp/sb vigil1" -j DROP` + "\n"
	if d := rulesToDelete(listing, "/tmp/sb", "vigil1"); len(d) != 1 {
		t.Errorf("heal finds %d rules, want 1", len(d))
	}
}
