package config

import (
	"fmt"
	"net"
	"slices"
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

// Lifecycle is a cluster's self-healing policy. Off by default: with
// SelfHealing off Vigil rebuilds and clones only when an operator asks.
type Lifecycle struct {
	// SelfHealing lets the acting Vigil rebuild a returned old primary
	// that cannot rejoin (once its transactions are salvaged), rebuild a
	// replica whose replication broke beyond repair, and replace a member
	// down longer than ReplaceAfter with a spare.
	SelfHealing bool `yaml:"self_healing"`
	// ReplaceAfter is how long a member may be down before a spare
	// replaces it (default 5m).
	ReplaceAfter Duration `yaml:"replace_after"`
	// Rate limits automatic clones' streams (bytes/s; 0: the agents'
	// own limits).
	Rate Size `yaml:"rate"`
	// Spares are hosts with an agent and an empty (or disposable) server,
	// not members: a replacement clones one and adds it.
	Spares []Spare `yaml:"spares"`
}

// Spare is one spare host.
type Spare struct {
	Name    string `yaml:"name"`
	Address string `yaml:"address"`
	Agent   string `yaml:"agent"`
}

// validateLifecycle checks every cluster's lifecycle: section.
func (c *Config) validateLifecycle(add func(key, format string, args ...any)) {
	spareAt := map[string]string{}
	for i, cl := range c.Clusters {
		lc := cl.Lifecycle
		key := fmt.Sprintf("clusters[%d].lifecycle", i)
		if lc.Rate < 0 {
			add(key+".rate", "must not be negative")
		}
		if lc.ReplaceAfter.Duration < 0 {
			add(key+".replace_after", "must not be negative")
		}
		if lc.SelfHealing && cl.Type != "" && cl.Type != "replication" {
			add(key+".self_healing", "applies to replication clusters only (%s nodes rejoin by themselves)", cl.Type)
		}
		for j, sp := range lc.Spares {
			sk := fmt.Sprintf("%s.spares[%d]", key, j)
			switch {
			case sp.Name == "":
				add(sk+".name", "is needed")
			case slices.ContainsFunc(cl.Servers, func(s Server) bool { return s.Name == sp.Name }):
				add(sk+".name", "%s is already a server of cluster %s: a spare is not a member until it replaces one", sp.Name, cl.Name)
			}
			if _, _, err := net.SplitHostPort(sp.Address); err != nil {
				add(sk+".address", "%q is not host:port", sp.Address)
			}
			if _, _, err := net.SplitHostPort(sp.Agent); err != nil {
				add(sk+".agent", "%q is not host:port: a spare is cloned through its agent", sp.Agent)
			}
			if prev, ok := spareAt[sp.Agent]; ok && sp.Agent != "" {
				add(sk+".agent", "%s is also %s's agent: a spare belongs to one cluster", sp.Agent, prev)
			}
			spareAt[sp.Agent] = sp.Name
		}
		if len(lc.Spares) > 0 && !c.Agents.Configured() {
			add("agents", "is needed: %s.spares are reached through their agents", key)
		}
	}
}
