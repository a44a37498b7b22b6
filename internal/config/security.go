package config

import (
	"fmt"
	"time"
)

// Security bounds what clients that have not logged in can cost, and
// slows password guessing (docs/security.md).
type Security struct {
	// HandshakeTimeout bounds a client's whole login (default 10s).
	HandshakeTimeout Duration `yaml:"handshake_timeout"`
	// MaxUnauthenticated bounds the connections that have not logged in
	// yet, over every listener (default 1000); MaxUnauthenticatedPerHost
	// those from one address (default 100). At a bound, the oldest
	// connection still in its handshake of the address holding the most
	// (at the per-address bound: of that address) is closed to admit the
	// new one; error 1040 only when none can be (docs/security.md,
	// "Admission before login").
	MaxUnauthenticated        int `yaml:"max_unauthenticated_connections"`
	MaxUnauthenticatedPerHost int `yaml:"max_unauthenticated_per_host"`
	// FailedLogins slows (and optionally blocks) repeated failed logins.
	FailedLogins FailedLogins `yaml:"failed_logins"`
	// StatementMemory bounds the buffers of logged-in clients' large
	// statements (those over 16 KiB), all clients together (default
	// 256MiB); a statement that cannot get its share within 10s gets
	// error 1041. Vigil's Go memory limit follows it.
	StatementMemory Size `yaml:"statement_memory"`
}

// DefaultStatementMemory is security.statement_memory's default.
const DefaultStatementMemory = 256 << 20

// FailedLogins: after Free failures of one user from one address (or
// FreePerHost failures of any users from one address) within Window,
// every further failed attempt waits Delay before its error, doubling up
// to MaxDelay, as MySQL's connection_control does; with BlockAfter > 0, a
// user and address with that many failures is refused (after the delay,
// with the same access-denied error) for BlockFor. A successful login
// clears its user and address.
type FailedLogins struct {
	Free        int      `yaml:"free"`
	FreePerHost int      `yaml:"free_per_host"`
	Delay       Duration `yaml:"delay"`
	MaxDelay    Duration `yaml:"max_delay"`
	Window      Duration `yaml:"window"`
	BlockAfter  int      `yaml:"block_after"`
	BlockFor    Duration `yaml:"block_for"`
}

func (s *Security) applyDefaults() {
	setDur(&s.HandshakeTimeout, 10*time.Second)
	if s.StatementMemory == 0 {
		s.StatementMemory = DefaultStatementMemory
	}
	if s.MaxUnauthenticated == 0 {
		s.MaxUnauthenticated = 1000
	}
	if s.MaxUnauthenticatedPerHost == 0 {
		s.MaxUnauthenticatedPerHost = 100
	}
	f := &s.FailedLogins
	if f.Free == 0 {
		f.Free = 5
	}
	if f.FreePerHost == 0 {
		f.FreePerHost = 50
	}
	setDur(&f.Delay, time.Second)
	setDur(&f.MaxDelay, 30*time.Second)
	setDur(&f.Window, 15*time.Minute)
	setDur(&f.BlockFor, 5*time.Minute)
}

func (s *Security) validate(add func(key, format string, args ...any)) {
	if s.HandshakeTimeout.Duration < 0 {
		add("security.handshake_timeout", "must not be negative")
	}
	for k, v := range map[string]int{"max_unauthenticated_connections": s.MaxUnauthenticated,
		"max_unauthenticated_per_host": s.MaxUnauthenticatedPerHost, "failed_logins.free": s.FailedLogins.Free,
		"failed_logins.free_per_host": s.FailedLogins.FreePerHost, "failed_logins.block_after": s.FailedLogins.BlockAfter} {
		if v < 0 {
			add("security."+k, "must not be negative")
		}
	}
	if s.StatementMemory < 1<<20 {
		add("security.statement_memory", "%d bytes is less than 1MiB: every statement over 16 KiB would wait for the others", int64(s.StatementMemory))
	}
	f := s.FailedLogins
	if f.Delay.Duration < 0 || f.MaxDelay.Duration < 0 || f.Window.Duration < 0 || f.BlockFor.Duration < 0 {
		add("security.failed_logins", "durations must not be negative")
	}
	if f.MaxDelay.Duration < f.Delay.Duration {
		add("security.failed_logins.max_delay", "%s is less than delay %s", f.MaxDelay.Duration, f.Delay.Duration)
	}
	if s.MaxUnauthenticatedPerHost > s.MaxUnauthenticated {
		add("security.max_unauthenticated_per_host", "%s", fmt.Sprintf("%d is more than max_unauthenticated_connections %d", s.MaxUnauthenticatedPerHost, s.MaxUnauthenticated))
	}
}
