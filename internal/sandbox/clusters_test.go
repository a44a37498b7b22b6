package sandbox

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/vigil-db/vigil/internal/config"
)

// clustersManifest is a manifest of clusters clusters of 3 nodes on base
// port 23306, with vigils Vigil daemons.
func clustersManifest(t *testing.T, clusters, vigils int, semi bool) *Manifest {
	t.Helper()
	o := Options{Topology: Replication, Nodes: 3, Clusters: clusters, SemiSync: semi, VigilBinary: "/usr/local/bin/vigil"}
	if vigils > 0 {
		o.Etcd, o.Vigils = 1, vigils
	}
	o = o.withDefaults()
	o.Dir = "/tmp/sb"
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	plan, err := planPorts(23306, o)
	if err != nil {
		t.Fatal(err)
	}
	return newManifest("/tmp/sb", o, plan, true)
}

func TestClustersValidate(t *testing.T) {
	ok := Options{Dir: "/tmp/sb", Topology: Replication, Nodes: 3, Clusters: 2}
	if err := ok.withDefaults().validate(); err != nil {
		t.Errorf("2 replication clusters: %v", err)
	}
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"too many", Options{Clusters: 5}, "--clusters must be between 1 and 4, not 5"},
		{"negative", Options{Clusters: -1}, "--clusters must be between 1 and 4"},
		{"galera", Options{Topology: Galera, Clusters: 2}, "--clusters needs --topology replication, not galera"},
		{"standalone", Options{Topology: Standalone, Clusters: 2}, "--clusters needs --topology replication, not standalone"},
		{"nodes", Options{Nodes: 20, Clusters: 3}, "is 60 nodes: a sandbox has at most 50"},
		{"spares", Options{Clusters: 2, Spares: 1}, "--spares cannot be combined with --clusters"},
		{"agents", Options{Nodes: 3, Clusters: 4, Agents: true}, "at most 10, not 12"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Dir = "/tmp/sb"
			err := c.o.withDefaults().validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("validate = %v, want %q", err, c.want)
			}
		})
	}
}

func TestClustersLayout(t *testing.T) {
	m := clustersManifest(t, 2, 0, false)
	var names, roles, clusters []string
	ids := map[int]bool{}
	for _, n := range m.Nodes {
		names = append(names, n.Name)
		roles = append(roles, n.Role)
		clusters = append(clusters, n.Cluster)
		ids[n.ServerID] = true
	}
	if want := []string{"node1", "node2", "node3", "node4", "node5", "node6"}; !reflect.DeepEqual(names, want) {
		t.Errorf("nodes %v, want %v", names, want)
	}
	if want := []string{"primary", "replica", "replica", "primary", "replica", "replica"}; !reflect.DeepEqual(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
	if want := []string{"sandbox", "sandbox", "sandbox", "sandbox2", "sandbox2", "sandbox2"}; !reflect.DeepEqual(clusters, want) {
		t.Errorf("clusters %v, want %v", clusters, want)
	}
	if len(ids) != 6 {
		t.Errorf("server ids are not unique: %v", ids)
	}
	want := []Cluster{
		{Name: "sandbox", Proxy: Endpoint{Host, 23396}, Nodes: []string{"node1", "node2", "node3"}, GTIDDomain: 0},
		{Name: "sandbox2", Proxy: Endpoint{Host, 23398}, Nodes: []string{"node4", "node5", "node6"}, GTIDDomain: 1},
	}
	if !reflect.DeepEqual(m.Clusters, want) {
		t.Errorf("clusters %+v\nwant %+v", m.Clusters, want)
	}
	if m.Proxy != m.Clusters[0].Proxy {
		t.Errorf("proxy %v is not cluster 1's %v", m.Proxy, m.Clusters[0].Proxy)
	}
	if m.Shards == nil || *m.Shards != (Endpoint{Host, 23401}) {
		t.Errorf("shards %v, want 127.0.0.1:23401", m.Shards)
	}
	if p := m.primaryOf(m.Nodes[4]); p.Name != "node4" {
		t.Errorf("node5 replicates from %s, want node4", p.Name)
	}
	if p := m.primaryOf(m.Nodes[1]); p.Name != "node1" {
		t.Errorf("node2 replicates from %s, want node1", p.Name)
	}
}

// One cluster records nothing new: sandbox.json is what it was.
func TestClustersSingleUnchanged(t *testing.T) {
	m := clustersManifest(t, 1, 2, false)
	data, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"clusters"`, `"shards"`, `"cluster"`, `"cluster_proxies"`, "gtid_domain_id"} {
		if strings.Contains(string(data), key) {
			t.Errorf("single-cluster sandbox.json holds %s:\n%s", key, data)
		}
	}
	if cnf := renderMyCnf(m, m.Nodes[0]); strings.Contains(cnf, "gtid_domain_id") {
		t.Errorf("single-cluster my.cnf sets gtid_domain_id:\n%s", cnf)
	}
	cl := m.clusters()
	if len(cl) != 1 || cl[0].Name != ClusterName || cl[0].Proxy != m.Proxy || len(cl[0].Nodes) != 3 {
		t.Errorf("clusters() = %+v", cl)
	}
}

func TestClustersMyCnfDomains(t *testing.T) {
	m := clustersManifest(t, 3, 0, true)
	for i, n := range m.Nodes {
		cnf := renderMyCnf(m, n)
		hasLines(t, cnf, "gtid_domain_id = "+[]string{"0", "1", "2"}[i/3], "gtid_strict_mode = ON",
			"rpl_semi_sync_master_enabled = ON")
		ro := strings.Contains(cnf, "read_only = ON")
		if ro != (i%3 != 0) {
			t.Errorf("%s read_only=%v", n.Name, ro)
		}
	}
}

func TestClustersManifestJSON(t *testing.T) {
	m := clustersManifest(t, 2, 2, false)
	data, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Proxy    Endpoint `json:"proxy"`
		Shards   Endpoint `json:"shards"`
		Clusters []struct {
			Name   string   `json:"name"`
			Proxy  Endpoint `json:"proxy"`
			Nodes  []string `json:"nodes"`
			Domain int      `json:"gtid_domain_id"`
		} `json:"clusters"`
		Nodes []struct {
			Name    string `json:"name"`
			Cluster string `json:"cluster"`
		} `json:"nodes"`
		Vigils []struct {
			Proxy          Endpoint            `json:"proxy"`
			ClusterProxies map[string]Endpoint `json:"cluster_proxies"`
			Shards         Endpoint            `json:"shards"`
		} `json:"vigils"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Shards.Port != 23401 || len(doc.Clusters) != 2 || doc.Clusters[1].Name != "sandbox2" ||
		doc.Clusters[1].Domain != 1 || doc.Clusters[1].Nodes[0] != "node4" || doc.Nodes[3].Cluster != "sandbox2" {
		t.Errorf("sandbox.json:\n%s", data)
	}
	v1, v2 := doc.Vigils[0], doc.Vigils[1]
	if v1.ClusterProxies["sandbox"] != v1.Proxy || v1.ClusterProxies["sandbox2"].Port != 23402 || v1.Shards.Port != 23405 ||
		v2.ClusterProxies["sandbox2"].Port != 23406 || v2.Shards.Port != 23409 {
		t.Errorf("vigils: %+v", doc.Vigils)
	}
	back, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var m2 Manifest
	if err := json.Unmarshal(back, &m2); err != nil || !reflect.DeepEqual(m2.Clusters, m.Clusters) || !reflect.DeepEqual(m2.Vigils, m.Vigils) {
		t.Errorf("manifest does not round-trip (%v)", err)
	}
}

func TestClustersPortsDistinct(t *testing.T) {
	o := Options{Topology: Replication, Nodes: 10, Clusters: 4, Etcd: 3, Vigils: 3}
	p, err := planPorts(23306, o)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]string{}
	for _, u := range p.All() {
		if other, dup := seen[u.Port]; dup {
			t.Errorf("port %d used for %s and %s", u.Port, other, u.What)
		}
		if u.Port < p.Base || u.Port >= p.Base+optionsSpan(o) {
			t.Errorf("port %d (%s) outside the plan's span", u.Port, u.What)
		}
		// Agents (base+50..59) and spares (base+80..87) are laid out
		// later; the cluster ports must stay clear of them.
		if off := u.Port - p.Base; (off >= agentOffset && off < agentOffset+MaxAgentNodes) || (off >= spareOffset && off < spareOffset+MaxSpares) {
			t.Errorf("port %d (%s) is an agent or spare port", u.Port, u.What)
		}
		seen[u.Port] = u.What
	}
	if want := 40 + 6 + 3*(2+3+1) + 2 + 3 + 1; len(seen) != want {
		t.Errorf("plan has %d ports, want %d", len(seen), want)
	}
	if _, err := planPorts(65535-100, o); err == nil || !strings.Contains(err.Error(), "too high") {
		t.Errorf("base near 65535: %v", err)
	}
}

func TestClustersVigilConfig(t *testing.T) {
	m := clustersManifest(t, 2, 0, false)
	m.SelfHealing = true
	addAgents(m, "/usr/local/bin/vigil")
	data, cfg := renderParsed(t, m)
	if len(cfg.Clusters) != 2 {
		t.Fatalf("%d clusters in:\n%s", len(cfg.Clusters), data)
	}
	for i, c := range cfg.Clusters {
		want := m.Clusters[i]
		if c.Name != want.Name || c.Listen != want.Proxy.Addr() || !c.Failover.Auto || !c.Lifecycle.SelfHealing {
			t.Errorf("cluster %d: %s listen %s auto %v self_healing %v", i, c.Name, c.Listen, c.Failover.Auto, c.Lifecycle.SelfHealing)
		}
		var servers []string
		for j, s := range c.Servers {
			servers = append(servers, s.Name)
			role := RoleReplica
			if j == 0 {
				role = RolePrimary
			}
			if s.Role != role || s.Agent == "" {
				t.Errorf("%s: role %q agent %q", s.Name, s.Role, s.Agent)
			}
		}
		if !reflect.DeepEqual(servers, want.Nodes) {
			t.Errorf("cluster %s servers %v, want %v", c.Name, servers, want.Nodes)
		}
	}
	if cfg.Shards.Listen != m.Shards.Addr() || len(cfg.Shards.Map) != 0 || len(cfg.Shards.Clusters) != 0 {
		t.Errorf("shards %+v, want listen %s and nothing else", cfg.Shards, m.Shards.Addr())
	}
	if !strings.Contains(string(data), "shards:") {
		t.Errorf("no shards section:\n%s", data)
	}
}

func TestClustersInstanceConfig(t *testing.T) {
	m := clustersManifest(t, 3, 2, false)
	for _, v := range m.Vigils {
		data, err := RenderInstanceConfig(m, v)
		if err != nil {
			t.Fatal(err)
		}
		base, _, _ := strings.Cut(string(data), "\n# Several Vigil instances")
		cfg, err := config.Parse([]byte(base))
		if err != nil {
			t.Fatalf("%s: %v\n%s", v.Name, err, data)
		}
		if len(cfg.Clusters) != 3 || cfg.Shards.Listen != v.Shards.Addr() {
			t.Fatalf("%s:\n%s", v.Name, data)
		}
		for _, c := range cfg.Clusters {
			if c.Listen != v.ClusterProxies[c.Name].Addr() {
				t.Errorf("%s %s listens on %s, want %s", v.Name, c.Name, c.Listen, v.ClusterProxies[c.Name].Addr())
			}
		}
		if cfg.Clusters[0].Listen != v.Proxy.Addr() {
			t.Errorf("%s: cluster 1 listens on %s, not the daemon's proxy %s", v.Name, cfg.Clusters[0].Listen, v.Proxy.Addr())
		}
	}
}

func TestClustersRefuseAdd(t *testing.T) {
	m := clustersManifest(t, 2, 0, false)
	m.Agents = []AgentInstance{{Name: "agent1"}}
	if _, _, err := newSpare(m, ""); err == nil || !strings.Contains(err.Error(), "several clusters") {
		t.Errorf("newSpare = %v", err)
	}
}
