package config

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/router"
)

const good = `
users:
  - {name: app, password: app}
clusters:
  - name: main
    listen: 127.0.0.1:6033
    servers:
      - {name: n1, address: 127.0.0.1:3306, role: primary}
      - {name: n2, address: 127.0.0.1:3307, role: replica}
`

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Clusters[0]
	if cl.Type != "replication" || cl.Monitor.Interval.Duration != 500*time.Millisecond || cl.Monitor.FailAfter != 2 ||
		cl.Monitor.RecoverAfter != 5 || cl.Failover.DetectAfter.Duration != 2*time.Second || cl.Failover.MinInterval.Duration != time.Hour ||
		cl.Pool.MaxOpen != 100 || cl.Servers[1].Weight != 1 || c.Users[0].ReadYourWrites != router.RYWGTID || cl.AuthPlugin != "mysql_native_password" {
		t.Fatalf("defaults: %+v", cl)
	}
	if !cl.Failover.AutoRejoinOn() {
		t.Error("failover.auto_rejoin is off by default, want on")
	}
	off, err := Parse([]byte(strings.Replace(good, "name: main", "name: main\n    failover: {auto_rejoin: false}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if off.Clusters[0].Failover.AutoRejoinOn() {
		t.Error("failover.auto_rejoin: false did not turn it off")
	}
	// Round trip.
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(out); err != nil {
		t.Fatalf("marshalled config does not parse: %v\n%s", err, out)
	}
}

// The lease rides over etcd's leader elections: by default it is as
// long as that needs, and a shorter election timeout allows a shorter one.
func TestThreads(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want int
	}{{"", 0}, {"threads: auto\n", 0}, {"threads: 3\n", 3}, {"threads: '8'\n", 8}} {
		cfg, err := Parse([]byte(good + c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		n, err := cfg.ThreadCount()
		if err != nil || n != c.want {
			t.Errorf("%q: ThreadCount() = %d, %v; want %d", c.yaml, n, err, c.want)
		}
		out, err := cfg.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("%q: marshalled config does not parse: %v", c.yaml, err)
		}
		if n2, _ := again.ThreadCount(); n2 != c.want {
			t.Errorf("%q: after a round trip ThreadCount() = %d, want %d", c.yaml, n2, c.want)
		}
	}
}

func TestCoordinationLeaseDefaults(t *testing.T) {
	for _, c := range []struct {
		yaml     string
		ttl, ack time.Duration
	}{
		{"coordination: {etcd: {endpoints: ['127.0.0.1:2379']}}\n", 4 * time.Second, 9 * time.Second},
		{"coordination: {etcd: {endpoints: ['127.0.0.1:2379'], election_timeout: 500ms}}\n", 2 * time.Second, 5 * time.Second},
		{"coordination: {lease_ttl: 2s, etcd: {endpoints: ['127.0.0.1:2379'], election_timeout: 500ms}}\n", 2 * time.Second, 5 * time.Second},
	} {
		cfg, err := Parse([]byte(good + c.yaml))
		if err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		if co := cfg.Coordination; co.LeaseTTL.Duration != c.ttl || co.AckTimeout.Duration != c.ack {
			t.Errorf("%s: lease_ttl %s, ack_timeout %s", c.yaml, co.LeaseTTL.Duration, co.AckTimeout.Duration)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown key", good + "    bogus: 1\n", `unknown key "bogus" in a cluster`},
		{"bad duration", strings.Replace(good, "listen: 127.0.0.1:6033", "listen: 127.0.0.1:6033\n    connect_timeout: soon", 1), `"soon" is not a duration`},
		{"bad listen", strings.Replace(good, "127.0.0.1:6033", "nowhere", 1), "clusters[0].listen"},
		{"two primaries", strings.Replace(good, "role: replica", "role: primary", 1), "clusters[0].servers: 2 servers have role primary"},
		{"duplicate server", strings.Replace(good, "name: n2", "name: n1", 1), `server "n1" is listed twice`},
		{"bad type", strings.Replace(good, "name: main", "name: main\n    type: sharded", 1), "clusters[0].type"},
		{"no users", strings.Replace(good, "  - {name: app, password: app}\n", "", 1), "users: at least one user"},
		{"bad ryw", strings.Replace(good, "password: app}", "password: app, read_your_writes: maybe}", 1), `read_your_writes must be none, session, gtid or global, not "maybe"`},
		{"hash without backend password", strings.Replace(good, "password: app}", "password: '*0123456789012345678901234567890123456789'}", 1), "users[0].backend_password"},
		{"unknown candidate", strings.Replace(good, "name: main", "name: main\n    failover: {candidates: [n9]}", 1), `names server "n9"`},
		{"bad plugin", strings.Replace(good, "name: main", "name: main\n    auth_plugin: ed25519", 1), "clusters[0].auth_plugin"},
		{"auto_rejoin on galera", strings.Replace(good, "name: main", "name: main\n    type: galera\n    failover: {auto_rejoin: true}", 1), "clusters[0].failover.auto_rejoin: applies to replication clusters only"},
		{"auto_rejoin not a bool", strings.Replace(good, "name: main", "name: main\n    failover: {auto_rejoin: sometimes}", 1), "cannot unmarshal !!str `sometimes` into bool"},
		{"negative detect_after", strings.Replace(good, "name: main", "name: main\n    failover: {detect_after: -5s}", 1), "clusters[0].failover.detect_after: must not be negative"},
		{"candidate never promoted", strings.Replace(good, "name: main", "name: main\n    failover: {candidates: [n2], never_promote: [n2]}", 1), `"n2" is also in never_promote`},
		{"bad semi_sync", strings.Replace(good, "name: main", "name: main\n    failover: {semi_sync: {manage: sometimes}}", 1), `semi_sync.manage must be auto, on or off, not "sometimes"`},
		{"admin auth none off loopback", good + "admin: {listen: '0.0.0.0:6080', auth: none}\n", "admin.auth: none is allowed only when admin.listen is a loopback address"},
		{"admin auth none with a token", good + "admin: {auth: none, token: x}\n", "admin.auth: none, but a token or user is set"},
		{"admin auth bad", good + "admin: {auth: maybe}\n", "admin.auth: must be token or none"},
		{"standby primary", strings.Replace(good, "role: primary}", "role: primary, standby: true}", 1), "servers[0].standby: the configured primary cannot be a standby"},
		{"negative security", good + "security: {max_unauthenticated_connections: -1}\n", "security.max_unauthenticated_connections: must not be negative"},
		{"max_delay below delay", good + "security: {failed_logins: {delay: 5s, max_delay: 1s}}\n", "security.failed_logins.max_delay"},
		{"tiny statement memory", good + "security: {statement_memory: 64KiB}\n", "security.statement_memory: 65536 bytes is less than 1MiB"},
		{"lease too short for an etcd election", good + "coordination: {lease_ttl: 2s, etcd: {endpoints: ['127.0.0.1:2379']}}\n",
			"coordination.lease_ttl: 2s is too short to ride over an etcd leader election: with election_timeout 1s"},
		{"lease too short for a given election timeout", good + "coordination: {lease_ttl: 4s, etcd: {endpoints: ['127.0.0.1:2379'], election_timeout: 2s}}\n",
			"use lease_ttl 7s or more"},
		{"threads not a number", good + "threads: many\n", `threads: must be auto or a number of threads from 1 to 1024, not "many"`},
		{"threads zero", good + "threads: 0\n", `threads: must be auto or a number of threads from 1 to 1024, not "0"`},
		{"bad election timeout", good + "coordination: {etcd: {endpoints: ['127.0.0.1:2379'], election_timeout: -1s}}\n", "coordination.etcd.election_timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	bad := strings.Replace(strings.Replace(good, "127.0.0.1:6033", "x", 1), "role: replica", "role: boss", 1)
	_, err := Parse([]byte(bad))
	ps, ok := err.(Problems)
	if !ok || len(ps) != 2 {
		t.Fatalf("want 2 problems, got %v", err)
	}
}
