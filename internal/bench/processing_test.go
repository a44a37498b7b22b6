package bench

import "testing"

// DropKeys drops a key with the block it opens, and nothing around it.
func TestDropKeysDropsBlocks(t *testing.T) {
	in := "clusters:\n  - name: a\n    agent: x:1\n    lifecycle:\n      self_healing: false\n      spares:\n        - name: s\n    weight: 1\nagents:\n  ca: c\n  cert: d\nshards:\n  listen: \"\"\n  clusters: []\nadmin:\n  listen: y\n"
	want := "clusters:\n  - name: a\n    weight: 1\nadmin:\n  listen: y\n"
	if got := string(DropKeys([]byte(in), "agent,lifecycle,agents,shards")); got != want {
		t.Fatalf("DropKeys:\n%s\nwant:\n%s", got, want)
	}
}
