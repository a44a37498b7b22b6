package failover

import (
	"fmt"
	"strings"

	"github.com/vigil-db/vigil/internal/topology"
)

// Never promote over known loss. The executor keeps, per cluster, the
// highest position the primary is known to have acknowledged
// (Input.Acked). A candidate that lacks part of it would lose writes that
// clients were told had committed: an automatic failover refuses it and
// waits for the old primary or an operator; a manual failover needs
// --accept-loss and states the loss in its dry run.

// knownLoss describes what promoting server c would lose of what the
// replaced primary is known to have acknowledged: the number of
// transactions and a sentence; 0 and "" when nothing is known lost.
func (v *view) knownLoss(c int) (uint64, string) {
	m := v.in.Acked
	if m == nil || v.primary < 0 || m.Server != v.name(v.primary) || len(m.Pos) == 0 {
		return 0, ""
	}
	co := v.obs(c)
	if co == nil || co.Flavor == topology.FlavorMySQL {
		return 0, ""
	}
	pc := v.received(c)
	mark := mariaPos(m.Pos)
	if pc.contains(mark) {
		return 0, ""
	}
	n := pc.missing(mark)
	if n == 0 {
		n = 1 // a divergence at the same sequence number
	}
	var ranges []string
	for _, g := range m.Pos {
		have, _ := pc.maria.Seq(g.Domain)
		if g.Seq > have {
			ranges = append(ranges, fmt.Sprintf("%d-%d-%d..%d", g.Domain, g.Server, have+1, g.Seq))
		}
	}
	how := "under semi-sync (a replica acknowledged each one: one that is not a candidate now, or this one before a restart discarded its relay log)"
	if m.Async {
		how = fmt.Sprintf("after semi-sync fell back to asynchronous replication (from %s)", stamp(m.AsyncSince))
	}
	return n, fmt.Sprintf("%s would lose ≥ %d transactions acknowledged by %s (%s, last seen at %s) %s",
		v.name(c), n, m.Server, strings.Join(ranges, ", "), stamp(m.At), how)
}

// PlanAfterCut is a failover's second phase. The old primary is fenced
// and its replicas' IO threads are stopped (in.Cut): nothing more reaches
// them, so their positions, read again after the cut, are final. The
// candidate is chosen again from those positions and the rest of the plan
// built; its steps start after the cut. old names the primary being
// replaced (the snapshot no longer routes it); to, when set, is the
// operator's --to.
func PlanAfterCut(in Input, old, to string, auto bool) Decision {
	v, bad := newView(in)
	if bad != "" {
		return finish(Decision{Situation: BadInput, Detected: BadInput, Reason: bad}, nil)
	}
	v.primary = v.snap.Index(old)
	d := Decision{Cluster: v.snap.Cluster, Situation: DeadPrimary, Detected: DeadPrimary}
	if v.primary < 0 {
		d.Situation, d.Reason = BadInput, "no server "+old
		return finish(d, nil)
	}
	d.Choices = v.choose(modeFailover, v.primary)
	target := chosen(d.Choices)
	if to != "" {
		if t := v.snap.Index(to); t >= 0 && v.choiceOf(d.Choices, t).Excluded == Eligible {
			target = t
			markChosen(d.Choices, t, v, true)
		}
	}
	if target < 0 {
		d.Situation, d.Reason = NoCandidate, "after the cut no replica may be promoted (see the candidates)"
		return finish(d, nil)
	}
	for _, s := range v.in.Stuck {
		// A stuck candidate was chosen for what it received: another
		// replica may replace it only if it received all of that too.
		if i := v.snap.Index(s); i >= 0 {
			if x := v.received(i).extra(v.received(target)); x != "" {
				d.Situation = NoCandidate
				d.Reason = fmt.Sprintf("%s did not apply its relay log in time, and %s, the next candidate, lacks what %s received (%s): promoting it would lose those transactions", s, v.name(target), s, x)
				return finish(d, nil)
			}
		}
	}
	pl := v.failoverPlan(target, auto)
	pl.Steps = pl.Steps[pl.CutEnd:]
	pl.CutEnd = 0
	d.Plan = pl
	d.Reason = fmt.Sprintf("after the cut: promote %s (%s)", v.name(target), v.choiceOf(d.Choices, target).Reason)
	return finish(d, nil)
}
