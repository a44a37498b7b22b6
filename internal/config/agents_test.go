package config

import (
	"strings"
	"testing"
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
