package failover

import (
	"fmt"

	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// switchover answers `switchover [--to NODE]` for a replication cluster:
// rule 8. The primary must answer; the candidate must pass the failover
// rules and the switchover checks (excludeSwitchover).
func (v *view) switchover(req Request) Decision {
	det := v.detect()
	d := Decision{Detected: det.sit, Events: det.events}
	switch det.sit {
	case Healthy:
	case PrimaryReadOnly:
		if req.To == v.name(v.primary) {
			return v.restoreRequest(d)
		}
	case NoPrimary, Unobserved:
		d.Situation, d.Reason = det.sit, det.reason
		return d
	default:
		d.Situation = PrimaryDown
		d.Reason = "a switchover needs a primary that answers: " + det.reason + "; use failover"
		return d
	}
	d.Choices = v.choose(modeSwitchover, v.primary)
	target, sit, why := v.pickTarget(d.Choices, req, modeSwitchover)
	if target < 0 {
		d.Situation, d.Reason = sit, why
		return d
	}
	markChosen(d.Choices, target, v, req.To != "")
	d.Plan = v.switchoverPlan(target)
	d.Situation = Switchover
	d.Reason = fmt.Sprintf("switchover requested: %s hands over to %s", v.name(v.primary), v.name(target))
	d.Events = append(d.Events, d.Plan.notes...)
	return d
}

// excludeSwitchover are the checks a switchover adds: the candidate
// replicates now, lags less than max lag, runs no query longer than
// max_running_seconds and holds no transaction the primary lacks.
func (v *view) excludeSwitchover(i, old int, f ServerFacts) (Exclusion, string) {
	o := v.obs(i)
	r := o.Replica
	if !r.Running() || r.LastIOErrno != 0 {
		why := fmt.Sprintf("its replication threads are not both running (IO %s, SQL %s)", r.IORunning, yesNo(r.SQLRunning))
		if r.LastIOErrno != 0 {
			why += fmt.Sprintf("; IO error %d: %s", r.LastIOErrno, r.LastIOError)
		}
		return NotReplicating, why
	}
	switch lag := o.Lag(); {
	case lag < 0:
		return Lagging, "its lag is unknown"
	case lag > v.opts.MaxLagSeconds:
		return Lagging, fmt.Sprintf("it lags %.1fs, more than the %.1fs a switchover allows", lag, v.opts.MaxLagSeconds)
	}
	if f.LongestQuerySeconds > v.opts.MaxRunningSeconds {
		return LongQuery, fmt.Sprintf("it runs a query for %.0fs, longer than max_running_seconds %.0fs", f.LongestQuerySeconds, v.opts.MaxRunningSeconds)
	}
	if x := v.errant(i, old); x != "" {
		return Errant, fmt.Sprintf("it holds transactions the primary %s lacks: %s", v.name(old), x)
	}
	return Eligible, ""
}

// errant lists the transactions replica i has applied that primary p
// lacks. The comparison is meaningful only when i's check ended before
// p's began: a check reads the position somewhere inside it, so two
// checks that overlap, or whose starts are merely ordered, may have read
// i after p, and under write load p's position is then simply older.
// Otherwise "" and the plan's VerifyNoErrant step checks again once p is
// read-only.
func (v *view) errant(i, p int) string {
	x, _ := ErrantOf(v.obs(i), v.obs(p))
	return x
}

func (v *view) switchoverPlan(c int) *Plan {
	old, newName := v.name(v.primary), v.name(c)
	oo, co := v.obs(v.primary), v.obs(c)
	pl := &Plan{Kind: KindSwitchover, Cluster: v.snap.Cluster, Flavor: flavor.OfObservation(co),
		OldPrimary: old, NewPrimary: newName, Term: v.snap.Term + 1}
	add := func(s Step) { pl.Steps = append(pl.Steps, s) }

	if st, ok := v.unstallStep(c); ok {
		// Before the hold: nothing waits on it yet, and an aborted
		// switchover leaves the replica's own setting anyway.
		add(st)
	}
	add(Step{Kind: Hold, Timeout: v.opts.HoldTimeout,
		Detail: fmt.Sprintf("hold new statements of cluster %s at the router (at most hold_timeout %s; a statement held longer fails with error 7003)", v.snap.Cluster, v.opts.HoldTimeout)})
	add(Step{Kind: DrainTransactions, Server: old, Timeout: v.opts.DrainTimeout, OnFail: Continue,
		Detail: fmt.Sprintf("wait for open transactions on %s to commit or roll back (at most drain_timeout %s)", old, v.opts.DrainTimeout)})
	add(Step{Kind: KillTransactions, Server: old,
		Detail: fmt.Sprintf("kill the client connections of %s still inside a transaction after the drain (they roll back)", old)})
	add(Step{Kind: SetReadOnly, Server: old, Detail: sqlText(ReadOnlySQL(flavor.OfObservation(oo), true)) + ": no more writes on " + old})
	final := flavor.OfObservation(oo).BinlogPosVar()
	add(Step{Kind: WaitGTID, Server: newName, Source: old, Timeout: v.opts.ApplyTimeout,
		Detail: fmt.Sprintf("read %s's final %s and wait until %s has applied it (%s, at most apply_timeout %s)", old, final, newName, waitFunc(flavor.OfObservation(co)), v.opts.ApplyTimeout)})
	add(Step{Kind: VerifyNoErrant, Server: newName, Source: old,
		Detail: fmt.Sprintf("%s holds no transaction %s lacks (now that %s is read-only the positions are final)", newName, old, old)})
	add(Step{Kind: StopReplication, Server: newName, Detail: sqlText(StepSQL(flavor.OfObservation(co), Step{Kind: StopReplication}))})
	pl.NoReturn = len(pl.Steps)
	add(Step{Kind: ResetReplica, Server: newName, Detail: sqlText(StepSQL(flavor.OfObservation(co), Step{Kind: ResetReplica})) + ": forget " + old + " as its source"})
	if st, ok := v.semiSyncPrimaryStep(c); ok {
		add(st)
	}
	add(Step{Kind: SetWritable, Server: newName, Detail: sqlText(ReadOnlySQL(flavor.OfObservation(co), false))})
	add(Step{Kind: SetRouterWriter, Server: newName, Detail: fmt.Sprintf("route writes to %s under term %d", newName, pl.Term)})
	add(Step{Kind: Release, Detail: "release the held statements to " + newName})

	pl.Repoint = append(pl.Repoint, old)
	pl.Steps = append(pl.Steps, v.repointSteps(v.primary, c, true)...)
	for i := range v.snap.Servers {
		if i == c || i == v.primary {
			continue
		}
		switch {
		case !v.ok(i):
			if v.snap.Servers[i].Role == topology.RoleReplica {
				pl.Unreachable = append(pl.Unreachable, v.name(i))
				pl.notes = append(pl.notes, fmt.Sprintf("%s could not be checked: it still points at %s, which keeps replicating to it; repoint it later with `vigil ctl rejoin %s`", v.name(i), old, v.name(i)))
			}
		case v.fenced(i) || !v.replicatesFrom(i, v.primary):
		default:
			pl.Repoint = append(pl.Repoint, v.name(i))
			pl.Steps = append(pl.Steps, v.repointSteps(i, c, false)...)
		}
	}

	pl.Rollback = []Step{
		{Kind: SetWritable, Server: old, OnFail: Continue, Detail: sqlText(ReadOnlySQL(flavor.OfObservation(oo), false)) + ": " + old + " stays the primary"},
		{Kind: SetRouterWriter, Server: old, OnFail: Continue, Detail: "route writes to " + old + " again, before the held statements are released (skipped when it could not be made writable)"},
		{Kind: StartReplication, Server: newName, OnFail: Continue, Detail: sqlText(StepSQL(flavor.OfObservation(co), Step{Kind: StartReplication})) + ": " + newName + " still points at " + old},
		{Kind: Release, OnFail: Continue, Detail: "release the held statements to " + old},
	}
	return pl
}

func yesNo(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}
