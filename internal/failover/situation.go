package failover

import "fmt"

// Situation names what the engine concluded about a cluster. Every value
// has a name, a description for operators, an entry in the
// situation→action table below and rows in the tests.
type Situation uint8

const (
	// Unknown is the zero value: no decision was made.
	Unknown Situation = iota
	// BadInput: the input cannot be judged (no snapshot, say).
	BadInput
	// Unmanaged: the cluster type has no failover (read-only clusters).
	Unmanaged

	// Healthy: the primary (or Galera writer) answers checks.
	Healthy
	// PrimaryReadOnly: the replication primary answers checks but is
	// read-only and not routed as the writer: nobody can write.
	PrimaryReadOnly
	// Unobserved: the primary has not been checked yet.
	Unobserved
	// NoPrimary: no server is known as the primary of a replication
	// cluster.
	NoPrimary
	// PrimaryFailing: checks of the primary fail, for less than
	// detect_after so far, or the replicas have not been checked since.
	PrimaryFailing
	// OverloadedPrimary: the primary refuses connections with 1040, 1203,
	// 1226 or the monitor's login with 1045; it is alive.
	OverloadedPrimary
	// PrimaryCheckError: the primary answers checks with a server error.
	PrimaryCheckError
	// UnreachablePrimary: Vigil cannot reach the primary but at least one
	// replica still replicates from it.
	UnreachablePrimary
	// PrimaryAndReplicasUnreachable: Vigil reaches neither the primary nor
	// any replica.
	PrimaryAndReplicasUnreachable
	// DeadPrimaryAndNoReplicas: the primary is down and has no replicas.
	DeadPrimaryAndNoReplicas
	// DeadPrimary: the primary is down and every reachable replica
	// confirms it.
	DeadPrimary
	// NoCandidate: a new primary is needed but no server may be promoted.
	NoCandidate
	// OldPrimaryReturned: a primary replaced by a failover answers again.
	OldPrimaryReturned
	// WouldLoseData: a failover is needed but every candidate lacks
	// transactions the old primary is known to have acknowledged.
	WouldLoseData

	// AutoFailoverOff: a failover is needed but failover.auto is off.
	AutoFailoverOff
	// RecentFailover: a failover is needed but the previous one was less
	// than min_interval ago and is not acknowledged.
	RecentFailover
	// UnackedFailure: a failover is needed but an earlier failover or
	// switchover failed and nobody acknowledged it.
	UnackedFailure
	// OperationRunning: another operation runs on the cluster.
	OperationRunning
	// PeerSeesPrimary: this instance found the primary dead but another
	// Vigil instance still reaches it (or the other instances' views
	// cannot be read yet).
	PeerSeesPrimary

	// GaleraWriterLost: the Galera writer failed or left the Primary
	// component.
	GaleraWriterLost
	// GaleraNoSyncedNode: the Galera writer is lost and no other node can
	// take over.
	GaleraNoSyncedNode

	// ManualFailover: an operator asked for a failover and it can run.
	ManualFailover
	// Switchover: an operator asked for a planned switchover and it can
	// run.
	Switchover
	// Rejoin: an operator asked to rejoin a server and its history is
	// compatible with the primary's.
	Rejoin

	// PrimaryHealthy: a failover was asked but the primary is alive.
	PrimaryHealthy
	// PrimaryDown: a switchover was asked but the primary does not answer.
	PrimaryDown
	// InvalidTarget: the server named by the request cannot be used.
	InvalidTarget
	// RejoinDiverged: the server to rejoin holds transactions the primary
	// lacks.
	RejoinDiverged

	// AutoRejoin: a returned old primary's GTID history is compatible and
	// failover.auto_rejoin is on: it becomes a replica of the primary.
	AutoRejoin

	numSituations
)

// Action is what the caller of Decide does with a decision.
type Action uint8

const (
	// ActNone: nothing to do or say.
	ActNone Action = iota
	// ActWait: nothing yet; decide again at RecheckAt or on the next
	// observation.
	ActWait
	// ActEvent: record and show the decision's reason and events; change
	// nothing.
	ActEvent
	// ActExecute: run the decision's plan.
	ActExecute
	// ActRefuse: an operator's request is refused; tell them why.
	ActRefuse
)

func (a Action) String() string {
	switch a {
	case ActNone:
		return "none"
	case ActWait:
		return "wait"
	case ActEvent:
		return "event"
	case ActExecute:
		return "execute"
	case ActRefuse:
		return "refuse"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

type situationInfo struct {
	name   string
	desc   string
	action Action
}

// situations is the situation→action table: what Decide does, for an
// automatic decision, in each situation. For an operator's request every
// outcome that does not execute is a refusal.
var situations = [numSituations]situationInfo{
	Unknown:   {"Unknown", "no decision was made", ActNone},
	BadInput:  {"BadInput", "the input cannot be judged (no snapshot, or a snapshot without servers)", ActNone},
	Unmanaged: {"Unmanaged", "the cluster type has no failover (read-only clusters)", ActNone},

	Healthy: {"Healthy", "the primary (or Galera writer) answers checks", ActNone},
	PrimaryReadOnly: {"PrimaryReadOnly",
		"the primary answers checks but is read-only and no server is writable: clients cannot write. Vigil makes it writable again (restore-writer) only when a failed operation of its own left it so and nothing else may have taken writes; otherwise check it, then run `switchover --to` it", ActExecute},
	Unobserved:         {"Unobserved", "the primary has not been checked yet", ActWait},
	NoPrimary:          {"NoPrimary", "no server is known as the primary; name one with a switchover or fix the servers' read_only", ActEvent},
	PrimaryFailing:     {"PrimaryFailing", "checks of the primary fail, for less than detect_after so far (or the replicas have not been checked since): wait", ActWait},
	OverloadedPrimary:  {"OverloadedPrimary", "the primary is alive but refuses connections (1040, 1203, 1226) or the monitor's login (1045): never a failover", ActEvent},
	PrimaryCheckError:  {"PrimaryCheckError", "the primary answers checks with a server error: it is alive, no failover", ActEvent},
	UnreachablePrimary: {"UnreachablePrimary", "Vigil cannot reach the primary but replicas still replicate from it: a partition between Vigil and the primary, no automatic failover", ActEvent},
	PrimaryAndReplicasUnreachable: {"PrimaryAndReplicasUnreachable",
		"Vigil reaches neither the primary nor any replica: Vigil is probably the one cut off, no automatic failover", ActEvent},
	DeadPrimaryAndNoReplicas: {"DeadPrimaryAndNoReplicas", "the primary is down and has no replicas: nothing to promote", ActEvent},
	DeadPrimary:              {"DeadPrimary", "the primary is down and every reachable replica confirms it: fail over", ActExecute},
	NoCandidate:              {"NoCandidate", "a new primary is needed but no server may be promoted", ActEvent},
	WouldLoseData: {"WouldLoseData",
		"a failover is needed but the best candidate lacks transactions the old primary is known to have acknowledged: wait for the old primary, or an operator runs `failover --accept-loss`", ActEvent},
	OldPrimaryReturned: {"OldPrimaryReturned",
		"a primary replaced by a failover answers again; it stays fenced (never routed, never made writable) until it is rejoined: by an operator's `rejoin`, or automatically (failover.auto_rejoin) when its GTID history is compatible", ActEvent},

	AutoFailoverOff:  {"AutoFailoverOff", "a failover is needed but automatic failover is off (failover.auto)", ActEvent},
	RecentFailover:   {"RecentFailover", "a failover is needed but the previous failover was less than min_interval ago and is not acknowledged", ActEvent},
	UnackedFailure:   {"UnackedFailure", "a failover is needed but an earlier failover or switchover failed and is not acknowledged", ActEvent},
	OperationRunning: {"OperationRunning", "another operation runs on the cluster: one at a time", ActWait},
	PeerSeesPrimary: {"PeerSeesPrimary",
		"this instance cannot reach the primary but another Vigil instance still does (or their views cannot be read yet): this instance is the one cut off, no automatic failover", ActEvent},

	GaleraWriterLost:   {"GaleraWriterLost", "the Galera writer failed or left the Primary component: a Synced node takes over", ActExecute},
	GaleraNoSyncedNode: {"GaleraNoSyncedNode", "the Galera writer is lost and no other node is Synced in the Primary component", ActEvent},

	ManualFailover: {"ManualFailover", "an operator asked for a failover", ActExecute},
	Switchover:     {"Switchover", "an operator asked for a planned switchover", ActExecute},
	Rejoin:         {"Rejoin", "an operator asked to rejoin a server and its GTID history is compatible with the primary's", ActExecute},

	PrimaryHealthy: {"PrimaryHealthy", "a failover was asked but the primary is alive: use switchover, or failover --force", ActRefuse},
	PrimaryDown:    {"PrimaryDown", "a switchover needs a primary that answers: use failover", ActRefuse},
	InvalidTarget:  {"InvalidTarget", "the server named by the request cannot be used for it", ActRefuse},
	RejoinDiverged: {"RejoinDiverged", "the server to rejoin holds transactions the primary lacks: salvage them first", ActRefuse},

	AutoRejoin: {"AutoRejoin", "a primary replaced by a failover answers again, its GTID history is compatible and failover.auto_rejoin is on: it becomes a replica of the primary (the plan `rejoin` runs)", ActExecute},
}

// Situations lists every situation in order, for documentation and tests.
func Situations() []Situation {
	out := make([]Situation, 0, numSituations)
	for s := Unknown; s < numSituations; s++ {
		out = append(out, s)
	}
	return out
}

func (s Situation) String() string {
	if s < numSituations {
		return situations[s].name
	}
	return fmt.Sprintf("Situation(%d)", uint8(s))
}

// Description says what the situation means, for operators.
func (s Situation) Description() string {
	if s < numSituations {
		return situations[s].desc
	}
	return ""
}

// Action is what an automatic decision does in the situation.
func (s Situation) Action() Action {
	if s < numSituations {
		return situations[s].action
	}
	return ActNone
}
