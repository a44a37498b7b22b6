package config

import (
	"strings"
	"testing"
	"time"
)

func TestAgents(t *testing.T) {
	withAgent := strings.Replace(good, "role: replica}", "role: replica, agent: '127.0.0.1:7002'}", 1)
	files := "agents: {ca: ca.pem, cert: vigil.pem, key: vigil-key.pem, token_file: token}\n"
	c, err := Parse([]byte(withAgent + files))
	if err != nil {
		t.Fatal(err)
	}
	if c.Clusters[0].Servers[1].Agent != "127.0.0.1:7002" || c.Agents.Cert != "vigil.pem" || c.Agents.TokenFile != "token" {
		t.Fatalf("agents: %+v, server: %+v", c.Agents, c.Clusters[0].Servers[1])
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"agent without TLS files", withAgent, "agents.ca: is needed: clusters[0].servers[1].agent names an agent"},
		{"agent without a key", withAgent + "agents: {ca: ca.pem, cert: vigil.pem}\n", "agents.key: is needed"},
		{"bad agent address", strings.Replace(withAgent, "127.0.0.1:7002", "nowhere", 1) + files, `clusters[0].servers[1].agent: "nowhere" is not host:port`},
		{"files without each other", good + "agents: {cert: vigil.pem}\n", "agents.ca: is needed with the other agents keys"},
		{"unknown key", withAgent + "agents: {ca: a, cert: b, key: c, password: x}\n", `unknown key "password"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	files := "agents: {ca: ca.pem, cert: vigil.pem, key: vigil-key.pem}\n"
	with := func(lc string) string {
		return strings.Replace(good, "name: main", "name: main\n    lifecycle: "+lc, 1) + files
	}
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if lc := c.Clusters[0].Lifecycle; lc.SelfHealing || lc.ReplaceAfter.Duration != 5*time.Minute || lc.Rate != 0 {
		t.Fatalf("defaults: %+v", lc)
	}
	c, err = Parse([]byte(with("{self_healing: true, replace_after: 90s, rate: 50MiB, spares: [{name: s1, address: '127.0.0.1:3310', agent: '127.0.0.1:7010'}]}")))
	if err != nil {
		t.Fatal(err)
	}
	if lc := c.Clusters[0].Lifecycle; !lc.SelfHealing || lc.ReplaceAfter.Duration != 90*time.Second || lc.Rate != 50<<20 || len(lc.Spares) != 1 || lc.Spares[0].Agent != "127.0.0.1:7010" {
		t.Fatalf("lifecycle: %+v", lc)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"spare named like a member", with("{spares: [{name: n2, address: '127.0.0.1:3310', agent: '127.0.0.1:7010'}]}"), "n2 is already a server of cluster main"},
		{"spare without an agent", with("{spares: [{name: s1, address: '127.0.0.1:3310'}]}"), "spares[0].agent: \"\" is not host:port"},
		{"spare without an address", with("{spares: [{name: s1, agent: '127.0.0.1:7010'}]}"), "spares[0].address"},
		{"two spares, one agent", with("{spares: [{name: s1, address: '127.0.0.1:3310', agent: '127.0.0.1:7010'}, {name: s2, address: '127.0.0.1:3311', agent: '127.0.0.1:7010'}]}"), "is also s1's agent"},
		{"spares without agents keys", strings.Replace(with("{spares: [{name: s1, address: '127.0.0.1:3310', agent: '127.0.0.1:7010'}]}"), files, "", 1), "agents: is needed"},
		{"negative replace_after", with("{replace_after: -1s}"), "replace_after: must not be negative"},
		{"galera", strings.Replace(with("{self_healing: true}"), "name: main", "name: main\n    type: galera", 1), "replication clusters only"},
		{"unknown key", with("{self_heal: true}"), `unknown key "self_heal"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}
