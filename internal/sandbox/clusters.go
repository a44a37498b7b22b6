package sandbox

import (
	"errors"
	"fmt"
	"strconv"
)

// Several clusters (up --clusters N, replication only) put N replication
// clusters of --nodes nodes each side by side, for Vigil's sharded
// listener (docs/shards.md). Node names stay global: cluster 1 is
// node1..nodeK, cluster 2 node(K+1)..node(2K) and so on, so every command
// that takes a node name works unchanged. Cluster k writes GTIDs in
// domain k-1, so a transaction's GTID says which cluster it came from.
//
// A single-cluster sandbox records no clusters: its manifest, my.cnf
// files and vigil.yaml are what they were before clusters existed.

// MaxClusters is the most clusters a sandbox runs (--clusters).
const MaxClusters = 4

// The ports of several clusters, relative to the base port P, above the
// admin port (P + 91) so the rest of the scheme does not move:
//
//	cluster k proxy (vigil run)   P + 92 + (k-2)            (k = 2..4)
//	shards (vigil run)            P + 95
//	vigilK cluster k proxy        P + 96 + 4*(K-1) + (k-2)  (k = 2..4)
//	vigilK shards                 P + 99 + 4*(K-1)
//
// Cluster 1's proxy is the sandbox's proxy (P + 90) and each daemon's own
// proxy port.
const (
	clusterProxyOffset = 92
	shardsOffset       = 95
	vigilShardsOffset  = 96
	vigilShardsStride  = 4
)

// Cluster is one replication cluster of a sandbox with several, as
// recorded in the manifest.
type Cluster struct {
	// Name is the cluster's name in vigil.yaml: sandbox (ClusterName) for
	// the first, sandboxK for cluster K.
	Name string `json:"name"`
	// Proxy is the cluster's own listener of `vigil run --config
	// DIR/vigil.yaml`.
	Proxy Endpoint `json:"proxy"`
	// Nodes are the cluster's nodes; the first is its primary.
	Nodes []string `json:"nodes"`
	// GTIDDomain is the nodes' gtid_domain_id: the cluster's number
	// minus one.
	GTIDDomain int `json:"gtid_domain_id"`
}

// clusterName is the name of cluster k (1-based) in vigil.yaml.
func clusterName(k int) string {
	if k == 1 {
		return ClusterName
	}
	return ClusterName + strconv.Itoa(k)
}

// validateClusters checks --clusters against the other options.
func (o Options) validateClusters() error {
	if o.Clusters < 0 || o.Clusters > MaxClusters {
		return fmt.Errorf("--clusters must be between 1 and %d, not %d", MaxClusters, o.Clusters)
	}
	if o.Clusters <= 1 {
		return nil
	}
	if o.Topology != Replication {
		return fmt.Errorf("--clusters needs --topology replication, not %s: only replication clusters have their own GTID domain and primary", o.Topology)
	}
	if o.Nodes*o.Clusters > MaxNodes {
		return fmt.Errorf("--clusters %d × --nodes %d is %d nodes: a sandbox has at most %d", o.Clusters, o.Nodes, o.Nodes*o.Clusters, MaxNodes)
	}
	if o.Spares > 0 {
		return errors.New("--spares cannot be combined with --clusters yet: a spare would not know which cluster (and GTID domain) it joins")
	}
	return nil
}

// clusters are the sandbox's clusters: the recorded ones or, in a
// single-cluster sandbox, one named ClusterName with every node but the
// spares.
func (m *Manifest) clusters() []Cluster {
	if len(m.Clusters) > 0 {
		return m.Clusters
	}
	c := Cluster{Name: ClusterName, Proxy: m.Proxy}
	for _, n := range m.members() {
		c.Nodes = append(c.Nodes, n.Name)
	}
	return []Cluster{c}
}

// inCluster reports whether node n belongs to cluster c.
func (m *Manifest) inCluster(n Node, c Cluster) bool {
	if len(m.Clusters) == 0 {
		return !n.isSpare()
	}
	return n.Cluster == c.Name
}

// gtidDomain is the gtid_domain_id of node n, and whether my.cnf should
// say it (only in a sandbox of several clusters).
func (m *Manifest) gtidDomain(n Node) (int, bool) {
	for _, c := range m.Clusters {
		if c.Name == n.Cluster {
			return c.GTIDDomain, true
		}
	}
	return 0, false
}

// primaryOf is the node the replicas of n's cluster replicate from when
// the sandbox starts: the cluster's first node.
func (m *Manifest) primaryOf(n Node) Node {
	for _, x := range m.members() {
		if x.Cluster == n.Cluster {
			return x
		}
	}
	return n
}

// layoutClusters records the clusters of a sandbox of several: nodes
// are dealt to clusters in blocks of perCluster, in order.
func layoutClusters(m *Manifest, plan PortPlan, perCluster int) {
	if len(plan.ClusterProxies) == 0 {
		return
	}
	m.Shards = &Endpoint{Host: Host, Port: plan.Shards}
	for i := range m.Nodes {
		k := i/perCluster + 1
		if len(m.Clusters) < k {
			proxy := m.Proxy
			if k > 1 {
				proxy = Endpoint{Host: Host, Port: plan.ClusterProxies[k-2]}
			}
			m.Clusters = append(m.Clusters, Cluster{Name: clusterName(k), Proxy: proxy, GTIDDomain: k - 1})
		}
		m.Nodes[i].Cluster = clusterName(k)
		m.Clusters[k-1].Nodes = append(m.Clusters[k-1].Nodes, m.Nodes[i].Name)
	}
	for i := range m.Vigils {
		v := &m.Vigils[i]
		p := plan.Vigils[i]
		v.Shards = &Endpoint{Host: Host, Port: p.Shards}
		v.ClusterProxies = map[string]Endpoint{ClusterName: v.Proxy}
		for j, port := range p.ClusterProxies {
			v.ClusterProxies[clusterName(j+2)] = Endpoint{Host: Host, Port: port}
		}
	}
}

// withClusters adds the ports of clusters 2..n and of the sharded
// listener, for the sandbox and for each of its Vigil daemons (call after
// withAux). One cluster adds nothing.
func (p PortPlan) withClusters(n int) PortPlan {
	p.ClusterProxies, p.Shards = nil, 0
	for i := range p.Vigils {
		p.Vigils[i].ClusterProxies, p.Vigils[i].Shards = nil, 0
	}
	if n < 2 {
		return p
	}
	for k := 2; k <= n; k++ {
		p.ClusterProxies = append(p.ClusterProxies, p.Base+clusterProxyOffset+k-2)
	}
	p.Shards = p.Base + shardsOffset
	for i := range p.Vigils {
		x := p.Base + vigilShardsOffset + vigilShardsStride*i
		for k := 2; k <= n; k++ {
			p.Vigils[i].ClusterProxies = append(p.Vigils[i].ClusterProxies, x+k-2)
		}
		p.Vigils[i].Shards = x + vigilShardsStride - 1
	}
	return p
}

// optionsSpan is how many consecutive ports from the base the sandbox of
// o touches.
func optionsSpan(o Options) int {
	if o.Clusters < 2 {
		return planSpan(o.Nodes, o.Topology == Galera)
	}
	return vigilShardsOffset + vigilShardsStride*MaxVigils
}

// Clusters are the sandbox's clusters (one, named ClusterName, unless
// it was made with --clusters).
func (s *Sandbox) Clusters() []Cluster {
	m := s.Manifest()
	return m.clusters()
}

// ShardsAddr is the address reserved for Vigil's sharded listener, or ""
// in a single-cluster sandbox.
func (s *Sandbox) ShardsAddr() string {
	if sh := s.Manifest().Shards; sh != nil {
		return sh.Addr()
	}
	return ""
}

// ClusterProxyAddr is the address reserved for the named cluster's
// listener, or "" for an unknown cluster.
func (s *Sandbox) ClusterProxyAddr(name string) string {
	for _, c := range s.Clusters() {
		if c.Name == name {
			return c.Proxy.Addr()
		}
	}
	return ""
}

// proxyOf is the daemon's listener for the named cluster: its Proxy for
// the first, ClusterProxies for the others.
func (v VigilInstance) proxyOf(name string) Endpoint {
	if p, ok := v.ClusterProxies[name]; ok {
		return p
	}
	return v.Proxy
}
