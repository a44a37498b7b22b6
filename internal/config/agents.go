package config

import (
	"fmt"
	"net"
)

// Agents is Vigil's identity towards the vigil agents: one client
// certificate for every cluster, because the certificate names this Vigil
// (the operator's CA signs it once), not a cluster. Servers opt in with
// clusters[].servers[].agent.
type Agents struct {
	// CA verifies the agents' certificates; Cert and Key are Vigil's
	// client certificate (PEM files, e.g. from vigil agent init).
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// TokenFile holds the bearer token the agents require, when they do.
	TokenFile string `yaml:"token_file"`
}

// Configured reports whether the client TLS files are set.
func (a Agents) Configured() bool { return a.CA != "" || a.Cert != "" || a.Key != "" }

// validateAgents checks agents: and the servers' agent addresses: a server
// with an agent needs the client TLS files, and they go together.
func (c *Config) validateAgents(add func(key, format string, args ...any)) {
	var first string
	for i, cl := range c.Clusters {
		for j, s := range cl.Servers {
			if s.Agent == "" {
				continue
			}
			key := fmt.Sprintf("clusters[%d].servers[%d].agent", i, j)
			if first == "" {
				first = key
			}
			if _, _, err := net.SplitHostPort(s.Agent); err != nil {
				add(key, "%q is not host:port", s.Agent)
			}
		}
	}
	a := c.Agents
	if first == "" && !a.Configured() && a.TokenFile == "" {
		return
	}
	for _, f := range []struct{ key, v string }{{"agents.ca", a.CA}, {"agents.cert", a.Cert}, {"agents.key", a.Key}} {
		if f.v != "" {
			continue
		}
		if first != "" {
			add(f.key, "is needed: %s names an agent, and Vigil reaches agents only with mutual TLS", first)
		} else {
			add(f.key, "is needed with the other agents keys (ca, cert and key go together)")
		}
	}
}
