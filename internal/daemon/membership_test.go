package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/topology"
)

func servers(spec ...string) []config.Server {
	var out []config.Server
	for _, s := range spec {
		name, addr, _ := strings.Cut(s, "@")
		out = append(out, config.Server{Name: name, Address: addr})
	}
	return out
}

func TestPlanSlots(t *testing.T) {
	start, added, removed, err := planSlots(nil, servers("a@h:1", "b@h:2", "c@h:3"))
	if err != nil || len(start) != 3 || !reflect.DeepEqual(added, []int{0, 1, 2}) || removed != nil {
		t.Fatalf("start: %v %v %v %v", start, added, removed, err)
	}
	for _, tc := range []struct {
		name           string
		servers        []config.Server
		want           []slot
		added, removed []int
	}{
		{"unchanged, reordered", servers("c@h:3", "a@h:1", "b@h:2"),
			[]slot{{"a", "h:1", false}, {"b", "h:2", false}, {"c", "h:3", false}}, nil, nil},
		{"add", servers("a@h:1", "b@h:2", "c@h:3", "d@h:4"),
			[]slot{{"a", "h:1", false}, {"b", "h:2", false}, {"c", "h:3", false}, {"d", "h:4", false}}, []int{3}, nil},
		{"remove", servers("a@h:1", "c@h:3"),
			[]slot{{"a", "h:1", false}, {"b", "h:2", true}, {"c", "h:3", false}}, nil, []int{1}},
		{"re-address is remove and add", servers("a@h:1", "b@h:9", "c@h:3"),
			[]slot{{"a", "h:1", false}, {"b", "h:2", true}, {"c", "h:3", false}, {"b", "h:9", false}}, []int{3}, []int{1}},
		{"rename is remove and add", servers("a@h:1", "bee@h:2", "c@h:3"),
			[]slot{{"a", "h:1", false}, {"b", "h:2", true}, {"c", "h:3", false}, {"bee", "h:2", false}}, []int{3}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, added, removed, err := planSlots(start, tc.servers)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(added, tc.added) || !reflect.DeepEqual(removed, tc.removed) {
				t.Fatalf("got %v added %v removed %v", got, added, removed)
			}
		})
	}
	// A tombstone keeps its slot: removed, then back, takes a new one.
	gone, _, _, _ := planSlots(start, servers("a@h:1", "c@h:3"))
	back, added, _, err := planSlots(gone, servers("a@h:1", "b@h:2", "c@h:3"))
	if err != nil || len(back) != 4 || !back[1].Removed || back[3] != (slot{"b", "h:2", false}) || !reflect.DeepEqual(added, []int{3}) {
		t.Fatalf("back: %v %v %v", back, added, err)
	}
	// The slot space is bounded.
	full := make([]slot, topology.MaxServers)
	for i := range full {
		full[i] = slot{Name: "x", Removed: true}
	}
	if _, _, _, err := planSlots(full, servers("a@h:1")); err == nil || !strings.Contains(err.Error(), "restart Vigil") {
		t.Fatalf("full: %v", err)
	}
}

func TestOverlay(t *testing.T) {
	dir := t.TempDir()
	base := &config.Config{StateDir: dir, Users: []config.User{{Name: "app", Password: "x"}},
		Clusters: []config.Cluster{{Name: "c", Listen: "127.0.0.1:1", Servers: servers("a@h:1", "b@h:2", "c@h:3")}}}
	ov, err := readOverlay(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := effective(base, ov)
	if err != nil || len(cfg.Clusters[0].Servers) != 3 {
		t.Fatalf("no overlay: %v", err)
	}
	ov = &overlay{Clusters: map[string]*clusterOverlay{"c": {
		Add:     []overlayServer{{Name: "d", Address: "h:4"}, {Name: "a", Address: "elsewhere:1"}},
		Remove:  []string{"b"},
		Weights: map[string]int{"c": 0, "d": 3},
		Standby: map[string]bool{"c": true},
	}}}
	if err := writeOverlay(dir, ov); err != nil {
		t.Fatal(err)
	}
	if ov, err = readOverlay(dir); err != nil {
		t.Fatal(err)
	}
	cfg, err = effective(base, ov)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Clusters[0].Servers
	// b removed; a keeps the file's definition; c gets weight 0 (which
	// the file cannot say: 0 there is the default, 1) and is a standby;
	// d is added with the operator's weight.
	if len(got) != 3 || got[0].Name != "a" || got[0].Address != "h:1" || got[1].Name != "c" || got[1].Weight != 0 || !got[1].Standby ||
		got[2].Name != "d" || got[2].Weight != 3 {
		t.Fatalf("with overlay: %+v", got)
	}
	if len(base.Clusters[0].Servers) != 3 || base.Clusters[0].Servers[2].Standby {
		t.Fatal("effective changed the base config")
	}
	if err := os.WriteFile(filepath.Join(dir, overlayFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readOverlay(dir); err == nil || !strings.Contains(err.Error(), "membership.json") {
		t.Fatalf("malformed overlay: %v", err)
	}
}
