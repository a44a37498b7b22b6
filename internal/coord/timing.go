package coord

import (
	"fmt"
	"time"
)

// DefaultElectionTimeout is etcd's own default --election-timeout.
const DefaultElectionTimeout = time.Second

// Timing is how an instance keeps its lease, derived from the lease TTL
// and etcd's election timeout.
//
// While etcd elects a new leader (its leader died or was cut off) no
// renewal is answered: a member without a leader holds it until it knows
// the new one. The instance keeps routing writes on the last renewal
// answered before, so it rides over the election when
//
//	RenewEvery + election + Settle < TTL − Margin
//
// (the last answered renewal was sent at most RenewEvery before the
// leader died). etcd's new leader extends every lease on promotion and
// never shortens one, so the local deadline (send time of the last
// answered renewal + TTL − Margin) stays on the safe side of etcd's.
type Timing struct {
	// TTL is the lease's TTL (whole seconds, as etcd counts).
	TTL time.Duration
	// Margin: the local deadline is this much before etcd's (clock rate
	// differences, scheduling delays, statements in flight).
	Margin time.Duration
	// RenewEvery: a renewal starts this often, whether or not the one
	// before was answered.
	RenewEvery time.Duration
	// Attempt bounds one renewal; MaxInFlight bounds those unanswered
	// at once (one stuck on a dead or leaderless member does not delay
	// the next, which the client sends to another endpoint).
	Attempt     time.Duration
	MaxInFlight int
	// Settle: from the new etcd leader's election to a renewal answered
	// by it (its first heartbeats, the member forwarding the renewal).
	Settle time.Duration
	// RideOver: an etcd leader election shorter than this does not fence
	// the instance.
	RideOver time.Duration
	// Election is etcd's election timeout.
	Election time.Duration
}

// LeaseTiming derives the lease's timing from its TTL (rounded up to
// whole seconds, at least 2 s) and etcd's election timeout (0: etcd's
// default).
func LeaseTiming(ttl, election time.Duration) Timing {
	if election <= 0 {
		election = DefaultElectionTimeout
	}
	ttl = (ttl + time.Second - 1).Truncate(time.Second)
	if ttl < 2*time.Second {
		ttl = 2 * time.Second
	}
	t := Timing{TTL: ttl, Election: election}
	t.Margin = max(ttl/5, 300*time.Millisecond)
	// Four renewals per election timeout (and per quarter TTL at most):
	// the last one answered before a leader dies is recent.
	t.RenewEvery = max(min(ttl/4, election/4), 20*time.Millisecond)
	// An attempt unanswered after an election timeout met a dead member
	// or an election: the ones started since go elsewhere or wait too.
	t.Attempt = election
	t.MaxInFlight = int(t.Attempt/t.RenewEvery) + 2
	// etcd's heartbeat is a tenth of the election timeout by convention:
	// two of them.
	t.Settle = election / 5
	t.RideOver = ttl - t.Margin - t.RenewEvery - t.Settle
	return t
}

// LongestElection is how long an etcd leader election can take without a
// split vote: each member waits a random time between one and two
// election timeouts without hearing from the leader before it campaigns.
func LongestElection(election time.Duration) time.Duration { return 2 * election }

// MinLeaseTTL is the shortest lease TTL (whole seconds) that rides over
// an etcd leader election of LongestElection(election).
func MinLeaseTTL(election time.Duration) time.Duration {
	for ttl := 2 * time.Second; ; ttl += time.Second {
		if LeaseTiming(ttl, election).RideOver >= LongestElection(election) {
			return ttl
		}
	}
}

// CheckTiming explains why a lease TTL cannot ride over etcd's leader
// elections (nil: it can).
func CheckTiming(ttl, election time.Duration) error {
	t := LeaseTiming(ttl, election)
	if t.RideOver >= LongestElection(t.Election) {
		return nil
	}
	return fmt.Errorf("%s is too short to ride over an etcd leader election: with election_timeout %s an election can take %s (each etcd member waits 1–2 election timeouts before it campaigns), and this lease keeps writes going only through an election shorter than %s, so losing one etcd member would make this instance refuse writes; use lease_ttl %s or more, or a shorter etcd --election-timeout (and coordination.etcd.election_timeout)",
		ttl, t.Election, LongestElection(t.Election), t.RideOver.Round(time.Millisecond), MinLeaseTTL(t.Election))
}
