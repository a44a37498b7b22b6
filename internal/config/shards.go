package config

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"time"
)

// Shards is the sharded listener: one address in front of several
// clusters, routing each statement to the cluster that holds the schemas
// it names (docs/shards.md).
type Shards struct {
	// Listen is the sharded listener's host:port; empty: no sharded
	// listener.
	Listen string `yaml:"listen"`
	// Clusters are the clusters behind it (default: every cluster).
	Clusters []string `yaml:"clusters"`
	// Map names the cluster that holds each schema. Schemas it does not
	// name are looked up on the clusters' primaries every
	// DiscoverInterval; a schema found on two clusters is refused until
	// the map names one.
	Map map[string]string `yaml:"map"`
	// States sets a schema's shard state: online (the default),
	// read_only or offline.
	States map[string]string `yaml:"states"`
	// DiscoverInterval is how often the clusters' schemas are listed
	// (default 5s).
	DiscoverInterval Duration `yaml:"discover_interval"`
	// MoveUser and MovePassword: the account moves dump, load and
	// replicate with, on every cluster (docs/shards.md lists its
	// privileges); empty: moves are refused.
	MoveUser     string `yaml:"move_user"`
	MovePassword string `yaml:"move_password"`
}

// Enabled reports whether a sharded listener is configured.
func (s *Shards) Enabled() bool { return s.Listen != "" }

// ShardStates are the shard states a schema can be in.
var ShardStates = []string{"online", "read_only", "offline"}

// SystemSchemas exist on every server and belong to no shard.
var SystemSchemas = []string{"information_schema", "mysql", "performance_schema", "sys"}

// ShardClusters is the clusters behind the sharded listener.
func (c *Config) ShardClusters() []string {
	if len(c.Shards.Clusters) > 0 {
		return c.Shards.Clusters
	}
	names := make([]string, 0, len(c.Clusters))
	for _, cl := range c.Clusters {
		names = append(names, cl.Name)
	}
	return names
}

func (c *Config) shardDefaults() {
	if c.Shards.DiscoverInterval.Duration == 0 {
		c.Shards.DiscoverInterval.Duration = 5 * time.Second
	}
}

// validateShards checks the shards: section.
func (c *Config) validateShards(add func(key, format string, args ...any)) {
	sh := &c.Shards
	if !sh.Enabled() {
		if len(sh.Map) > 0 || len(sh.Clusters) > 0 || len(sh.States) > 0 {
			add("shards.listen", "is needed: the shards section has a map, clusters or states but no listen address")
		}
		return
	}
	if _, _, err := net.SplitHostPort(sh.Listen); err != nil {
		add("shards.listen", "%q is not host:port", sh.Listen)
	}
	for i, cl := range c.Clusters {
		if cl.Listen == sh.Listen {
			add("shards.listen", "%s is also clusters[%d].listen (%s): the sharded listener needs its own address", sh.Listen, i, cl.Name)
		}
	}
	known := map[string]bool{}
	for _, cl := range c.Clusters {
		known[cl.Name] = true
	}
	seen := map[string]bool{}
	for i, name := range sh.Clusters {
		switch {
		case !known[name]:
			add(fmt.Sprintf("shards.clusters[%d]", i), "%q is not a cluster of clusters[]", name)
		case seen[name]:
			add(fmt.Sprintf("shards.clusters[%d]", i), "%q is named twice", name)
		}
		seen[name] = true
	}
	behind := c.ShardClusters()
	if len(behind) == 0 {
		add("shards.clusters", "no cluster is behind the sharded listener")
	}
	for _, schema := range sortedKeys(sh.Map) {
		cl := sh.Map[schema]
		key := "shards.map." + schema
		switch {
		case slices.Contains(SystemSchemas, schema):
			add(key, "%s is a system schema: it exists on every server and is not sharded", schema)
		case !slices.Contains(behind, cl):
			add(key, "%q is not a cluster behind the sharded listener (%v)", cl, behind)
		}
		if schema == "" || len(schema) > 64 {
			add(key, "a schema name has 1 to 64 characters")
		}
	}
	for _, schema := range sortedKeys(sh.States) {
		if st := sh.States[schema]; !slices.Contains(ShardStates, st) {
			add("shards.states."+schema, "must be online, read_only or offline, not %q", st)
		}
	}
	if sh.DiscoverInterval.Duration < 100*time.Millisecond {
		add("shards.discover_interval", "must be at least 100ms")
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
