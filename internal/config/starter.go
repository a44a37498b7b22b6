package config

import (
	"cmp"
	"fmt"
	"net"
	"strings"
)

// StarterOptions shape the file `vigil config init` writes.
type StarterOptions struct {
	// Type is the cluster type: replication (default) or galera.
	Type string
	// Listen is where applications connect (default 127.0.0.1:6033).
	Listen string
	// Admin is the admin API address (default 127.0.0.1:6080).
	Admin string
	// Servers is "name=host:port,..." (default three servers on
	// 127.0.0.1:3307-3309).
	Servers string
}

// DefaultStarterServers are the placeholder servers of a starter file.
const DefaultStarterServers = "node1=127.0.0.1:3307,node2=127.0.0.1:3308,node3=127.0.0.1:3309"

// starterPassword marks every password a starter file leaves to the user.
const starterPassword = "change-me"

// starterKeep are the keys a starter file shows even at their defaults:
// the ones a first reader should see and probably change.
var starterKeep = map[string]bool{
	"state_dir": true, "admin.listen": true,
	"users[].read_your_writes": true,
	"clusters[].type":          true,
	"clusters[].failover.auto": true,
}

// Starter is a first config for someone who has never seen Vigil: one
// cluster of placeholder servers, one application user, the monitor (and,
// for replication, the replication) account, the admin API. It validates.
func Starter(o StarterOptions) (*Config, error) {
	o.Type = cmp.Or(o.Type, "replication")
	o.Listen = cmp.Or(o.Listen, "127.0.0.1:6033")
	o.Admin = cmp.Or(o.Admin, "127.0.0.1:6080")
	o.Servers = cmp.Or(o.Servers, DefaultStarterServers)
	if o.Type != "replication" && o.Type != "galera" {
		return nil, fmt.Errorf("--type must be replication or galera, not %q", o.Type)
	}
	cl := Cluster{
		Name: "main", Type: o.Type, Listen: o.Listen,
		Monitor: Monitor{User: "vigil_monitor", Password: starterPassword},
	}
	if o.Type == "replication" {
		cl.Failover.ReplUser, cl.Failover.ReplPassword = "repl", starterPassword
	}
	for i, item := range strings.Split(o.Servers, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--servers: %q is not name=host:port", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--servers: %q: %q is not host:port", name, addr)
		}
		s := Server{Name: name, Address: addr}
		if o.Type == "replication" {
			s.Role = "replica"
			if i == 0 {
				s.Role = "primary"
			}
		}
		cl.Servers = append(cl.Servers, s)
	}
	c := &Config{
		Admin:    Admin{Listen: o.Admin},
		Users:    []User{{Name: "app", Password: starterPassword}},
		Clusters: []Cluster{cl},
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// starterHeader opens a starter file.
const starterHeader = `# Vigil configuration, written by vigil config init.
# Replace the placeholder servers and every "change-me" password, create
# the accounts on the servers (the monitor's grants: docs/monitoring.md;
# the sandbox's, which also cover failover: docs/sandbox.md), then:
#   vigil config validate FILE && vigil run --config FILE
# Keys not listed take their defaults: vigil config show --effective FILE
# prints them all; docs/ explains each.

`

// RenderStarter writes a starter config with every key explained.
func RenderStarter(c *Config) ([]byte, error) {
	body, err := render(c, renderOptions{comments: true, keep: starterKeep})
	if err != nil {
		return nil, err
	}
	return append([]byte(starterHeader), body...), nil
}
