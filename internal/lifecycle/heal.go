package lifecycle

import (
	"fmt"
	"slices"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// HealInput is what the self-healing decision looks at: the cluster as
// the monitor sees it, and what the daemon found out about its members.
type HealInput struct {
	Snapshot *topology.Snapshot
	Now      time.Time
	// Diverged are answering members a rejoin refuses because they hold
	// transactions the primary lacks (name → the refusal).
	Diverged map[string]string
	// Broken are answering replicas whose replication cannot resume
	// (name → why: the source purged the binary log it needs, 1236).
	Broken map[string]string
	// DownSince is when each member that does not answer was first seen
	// down.
	DownSince map[string]time.Time
	// ReplaceAfter is how long a member may be down before a spare
	// replaces it (0: never).
	ReplaceAfter time.Duration
	// Spares are the configured spares that are not members, in the
	// configured order.
	Spares []string
	// Agents says which members have an agent.
	Agents map[string]bool
	// SalvagePending names members whose transactions are not salvaged
	// yet (name → why).
	SalvagePending map[string]string
	// Busy says why nothing may start now ("" when something may): a
	// failover or a lifecycle operation runs.
	Busy string
	// Backoff names targets whose last automatic operation failed
	// recently (name → until when nothing is tried on them again).
	Backoff map[string]time.Time
}

// HealAction is what self-healing does next: nothing, a rebuild of
// Target, or a replacement of Target by the spare Spare.
type HealAction struct {
	Kind   string // "", KindRebuild or KindReplace
	Target string
	Spare  string
	Reason string
}

// DecideHeal is the self-healing decision, pure like failover.Decide:
// at most one operation, the most urgent first. A diverged old primary
// or a broken replica is rebuilt in place (its salvage finished first);
// a member down longer than ReplaceAfter is replaced by the first spare.
// The writer is never a target: a dead writer is failover's.
func DecideHeal(in HealInput) HealAction {
	snap := in.Snapshot.Live()
	switch {
	case snap == nil:
		return HealAction{Reason: "the cluster has not been checked yet"}
	case in.Busy != "":
		return HealAction{Reason: "waiting: " + in.Busy}
	case snap.Writer < 0:
		return HealAction{Reason: "no writer now: failover comes first"}
	}
	writer := snap.Servers[snap.Writer].Name
	held := func(name string) string {
		switch {
		case name == writer:
			return "the writer"
		case !in.Agents[name]:
			return "no agent"
		case in.SalvagePending[name] != "":
			return "salvage not finished (" + in.SalvagePending[name] + ")"
		case in.Now.Before(in.Backoff[name]):
			return fmt.Sprintf("its last automatic operation failed; next try after %s", in.Backoff[name].Format(time.RFC3339))
		}
		return ""
	}
	var waiting []string
	for _, group := range []struct {
		m    map[string]string
		what string
	}{{in.Diverged, "holds transactions the primary lacks"}, {in.Broken, "its replication cannot resume"}} {
		for _, name := range sortedKeys(group.m) {
			if snap.Index(name) < 0 {
				continue
			}
			if why := held(name); why != "" {
				waiting = append(waiting, name+": "+why)
				continue
			}
			return HealAction{Kind: KindRebuild, Target: name,
				Reason: fmt.Sprintf("%s %s (%s): it is rebuilt from a caught-up member", name, group.what, group.m[name])}
		}
	}
	if in.ReplaceAfter > 0 {
		for _, name := range sortedKeys(in.DownSince) {
			since := in.DownSince[name]
			if snap.Index(name) < 0 || name == writer || in.Now.Sub(since) < in.ReplaceAfter {
				continue
			}
			if len(in.Spares) == 0 {
				waiting = append(waiting, name+": down since "+since.Format(time.RFC3339)+", but no spare is left")
				continue
			}
			if in.Now.Before(in.Backoff[in.Spares[0]]) {
				waiting = append(waiting, name+": the spare "+in.Spares[0]+" failed recently")
				continue
			}
			return HealAction{Kind: KindReplace, Target: name, Spare: in.Spares[0],
				Reason: fmt.Sprintf("%s has been down since %s (more than replace_after %s): the spare %s is cloned in and takes its place; %s itself is left as it is",
					name, since.Format(time.RFC3339), in.ReplaceAfter, in.Spares[0], name)}
		}
	}
	if len(waiting) > 0 {
		return HealAction{Reason: "waiting: " + fmt.Sprint(waiting)}
	}
	return HealAction{Reason: "nothing to heal"}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
