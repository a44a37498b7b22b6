package config

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/coord"
)

// Coordination lets several Vigil instances serve the same clusters
// through etcd (docs/ha.md). Without etcd endpoints it is off: one Vigil
// acts alone.
type Coordination struct {
	// Instance names this Vigil among the others (unique; default: the
	// host name and the admin port).
	Instance string `yaml:"instance"`
	// LeaseTTL is how long the instance keeps its role without reaching
	// etcd (at least 2s: etcd counts whole seconds; default: the shortest
	// that rides over an etcd leader election, 4s with etcd's default
	// election timeout). Writes are refused slightly before it runs out.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// AckTimeout bounds the wait for every live instance to apply a new
	// writer record (default 2 × lease_ttl + 1s).
	AckTimeout Duration `yaml:"ack_timeout"`
	// ReadsWhenFenced: what reads do while this instance refuses writes
	// (lease lost): continue (default) or refuse.
	ReadsWhenFenced string `yaml:"reads_when_fenced"`
	Etcd            Etcd   `yaml:"etcd"`
}

// Etcd is how to reach the etcd cluster.
type Etcd struct {
	Endpoints []string `yaml:"endpoints"`
	// Prefix of every key Vigil writes (default /vigil/).
	Prefix   string `yaml:"prefix"`
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// TLS: CA, client certificate and key files (PEM).
	TLS EtcdTLS `yaml:"tls"`
	// SourceAddress is the local address Vigil connects from.
	SourceAddress string   `yaml:"source_address"`
	DialTimeout   Duration `yaml:"dial_timeout"`
	// ElectionTimeout is the etcd members' --election-timeout (default
	// 1s, etcd's): lease renewals are timed to ride over an etcd leader
	// election, and lease_ttl must be long enough for one.
	ElectionTimeout Duration `yaml:"election_timeout"`
}

// EtcdTLS is TLS to etcd.
type EtcdTLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Enabled reports whether coordination is configured.
func (c *Coordination) Enabled() bool { return len(c.Etcd.Endpoints) > 0 }

func (c *Coordination) applyDefaults() {
	if !c.Enabled() {
		return
	}
	setDur(&c.Etcd.ElectionTimeout, coord.DefaultElectionTimeout)
	setDur(&c.LeaseTTL, coord.MinLeaseTTL(c.Etcd.ElectionTimeout.Duration))
	setDur(&c.AckTimeout, 2*c.LeaseTTL.Duration+time.Second)
	setDur(&c.Etcd.DialTimeout, 2*time.Second)
	if c.Etcd.Prefix == "" {
		c.Etcd.Prefix = "/vigil/"
	}
	if c.ReadsWhenFenced == "" {
		c.ReadsWhenFenced = "continue"
	}
}

var instanceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

func (c *Coordination) validate(add func(key, format string, args ...any)) {
	if !c.Enabled() {
		if c.Instance != "" || c.Etcd.Prefix != "" || c.Etcd.User != "" {
			add("coordination.etcd.endpoints", "coordination is configured without etcd endpoints")
		}
		return
	}
	for i, ep := range c.Etcd.Endpoints {
		hp := strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://")
		if _, _, err := net.SplitHostPort(hp); err != nil {
			add(fmt.Sprintf("coordination.etcd.endpoints[%d]", i), "%q is not host:port: %v", ep, err)
		}
	}
	if c.Instance != "" && !instanceName.MatchString(c.Instance) {
		add("coordination.instance", "%q: use letters, digits, '_', '.', ':' and '-' (at most 64)", c.Instance)
	}
	et := c.Etcd.ElectionTimeout.Duration
	if et <= 0 || et > 50*time.Second {
		add("coordination.etcd.election_timeout", "%s: give the etcd members' --election-timeout, more than 0 and at most 50s (etcd's own limit)", et)
	}
	switch {
	case c.LeaseTTL.Duration < 2*time.Second:
		add("coordination.lease_ttl", "%s is less than 2s (etcd counts leases in whole seconds and needs at least that)", c.LeaseTTL.Duration)
	case et > 0 && et <= 50*time.Second:
		if err := coord.CheckTiming(c.LeaseTTL.Duration, et); err != nil {
			add("coordination.lease_ttl", "%v", err)
		}
	}
	if c.AckTimeout.Duration <= c.LeaseTTL.Duration {
		add("coordination.ack_timeout", "%s must be longer than lease_ttl %s (an instance that does not answer is only known to be fenced once its lease ran out)", c.AckTimeout.Duration, c.LeaseTTL.Duration)
	}
	switch c.ReadsWhenFenced {
	case "continue", "refuse":
	default:
		add("coordination.reads_when_fenced", "%q: use continue or refuse", c.ReadsWhenFenced)
	}
	if !strings.HasPrefix(c.Etcd.Prefix, "/") {
		add("coordination.etcd.prefix", "%q must start with /", c.Etcd.Prefix)
	}
	if a := c.Etcd.SourceAddress; a != "" && net.ParseIP(a) == nil {
		add("coordination.etcd.source_address", "%q is not an IP address", a)
	}
	t := c.Etcd.TLS
	if (t.Cert == "") != (t.Key == "") {
		add("coordination.etcd.tls", "cert and key go together")
	}
	if (c.Etcd.User == "") != (c.Etcd.Password == "") {
		add("coordination.etcd.user", "user and password go together")
	}
}
