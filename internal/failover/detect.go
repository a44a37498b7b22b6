package failover

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Server error codes that say a server is alive but refuses new
// connections (ER_CON_COUNT_ERROR 1040, ER_TOO_MANY_USER_CONNECTIONS 1203,
// ER_USER_LIMIT_REACHED 1226) or the monitor's login
// (ER_ACCESS_DENIED_ERROR 1045). They never count as a dead server.
var overloadCodes = []uint16{1040, 1203, 1226, 1045}

// Error codes that do mean the server is going away: ER_SERVER_SHUTDOWN,
// ER_NORMAL_SHUTDOWN, ER_SHUTDOWN_COMPLETE, ER_CONNECTION_KILLED and the
// client's CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR,
// CR_SERVER_LOST. Any other server error is an answer: the server lives.
var downCodes = []uint16{1053, 1077, 1079, 1927, 2002, 2003, 2006, 2013}

// overloaded reports whether a failed check shows a live server that
// refuses connections.
func overloaded(o *topology.Observation) bool {
	return o.Overloaded || slices.Contains(overloadCodes, o.ErrCode) || slices.Contains(overloadCodes, o.OverloadCode)
}

// unreachable reports whether a failed check counts towards "dead":
// refused, timed out or a network error, never a server's answer.
func unreachable(o *topology.Observation) bool {
	if o.OK || overloaded(o) {
		return false
	}
	return o.Refused || o.ErrCode == 0 || slices.Contains(downCodes, o.ErrCode)
}

func failureText(o *topology.Observation) string {
	switch {
	case o.Refused:
		return "connection refused"
	case o.Err != "":
		return o.Err
	case o.ErrCode != 0:
		return fmt.Sprintf("error %d", o.ErrCode)
	}
	return "check failed"
}

// detection is what the classifier found about a replication primary.
type detection struct {
	sit     Situation
	reason  string
	recheck time.Time
	events  []string
}

// detect classifies the replication primary: rule 2 of the failover
// design. The primary is dead only when Vigil's checks could not reach it
// for detect_after AND every reachable replica lost it too.
func (v *view) detect() detection {
	p := v.primary
	if p < 0 {
		why := v.snap.WriterReason
		if why == "" {
			why = "no server has the primary role"
		}
		return detection{sit: NoPrimary, reason: "no primary known: " + why}
	}
	name := v.name(p)
	o := v.obs(p)
	switch {
	case o == nil:
		return detection{sit: Unobserved, reason: name + " (the primary) has not been checked yet"}
	case o.OK && o.ReadOnly && v.snap.Writer < 0:
		return detection{sit: PrimaryReadOnly, reason: v.readOnlyText(p)}
	case o.OK:
		return detection{sit: Healthy, reason: name + " (the primary) answers checks"}
	case overloaded(o):
		code := o.OverloadCode
		if code == 0 {
			code = o.ErrCode
		}
		why := o.OverloadReason
		if why == "" {
			why = failureText(o)
		}
		return detection{sit: OverloadedPrimary, reason: fmt.Sprintf("%s (the primary) is alive but overloaded (error %d: %s): no failover for that", name, code, why)}
	case !unreachable(o):
		return detection{sit: PrimaryCheckError, reason: fmt.Sprintf("%s (the primary) answers checks with error %d (%s): it is alive, no failover for that", name, o.ErrCode, failureText(o))}
	}

	since, failing, wait := v.streak(p, o, "primary")
	// early: the primary has failed for less than detect_after but for
	// one of the shorter bounds (refused: a dead process; silent: a
	// primary quiet for everyone); only the replicas' unanimous
	// confirmation can end the wait before detect_after.
	early := noEarly
	if wait != nil {
		var short *detection
		if early, short = v.earlyBound(o, since, failing, wait); early == noEarly {
			if short != nil {
				return *short
			}
			return *wait
		}
	}
	// need: in the silent bound, how long each replica must have received
	// nothing; soonest: when the first replica still short of it gets
	// there (the decision's recheck).
	need := v.opts.DetectAfterSilent
	var soonest time.Time
	var sees, lost []verdict
	var stale, unreached []string
	for i := range v.snap.Servers {
		if i == p {
			continue
		}
		ri := v.obs(i)
		if ri == nil || !ri.OK {
			unreached = append(unreached, v.name(i))
			continue
		}
		if !v.replicatesFrom(i, p) {
			continue
		}
		if ri.Time.Before(since) {
			// Checked before the primary started failing: its IO thread
			// may not have noticed yet; wait for a fresh check.
			stale = append(stale, v.name(i))
			continue
		}
		f, _ := v.facts(i)
		isLost, why := replicaLost(ri.Replica, f)
		switch {
		case early == earlyRefused && isLost && ri.Replica.IORunning == topology.IOYes:
			// Silence or an IO error while the thread still runs is
			// evidence for detect_after, not the instant loss a dead
			// process causes.
			sees = append(sees, verdict{v.name(i), why + ", IO thread still running"})
		case early == earlySilent && ri.Replica.IORunning == topology.IOYes:
			// The thread still runs: only its measured silence confirms.
			quiet, swhy, wait := silentFor(f, need)
			if quiet {
				lost = append(lost, verdict{v.name(i), swhy})
				continue
			}
			sees = append(sees, verdict{v.name(i), swhy})
			if wait > 0 {
				if at := v.in.Now.Add(wait); soonest.IsZero() || at.Before(soonest) {
					soonest = at
				}
			}
		case isLost:
			lost = append(lost, verdict{v.name(i), why})
		default:
			sees = append(sees, verdict{v.name(i), why})
		}
	}
	var events []string
	if len(unreached) > 0 {
		events = append(events, fmt.Sprintf("Vigil cannot reach %s either", strings.Join(unreached, ", ")))
	}
	if early != noEarly {
		if len(sees) == 0 && len(stale) == 0 && len(unreached) == 0 && len(lost) > 0 {
			if early == earlySilent {
				return detection{sit: DeadPrimary,
					reason: fmt.Sprintf("%s and every replica has received nothing from it or lost it: %s: silent and confirmed (detect_after_silent %s)",
						failing, grouped(lost), v.opts.DetectAfterSilent)}
			}
			return detection{sit: DeadPrimary,
				reason: fmt.Sprintf("%s and every replica's IO thread lost it: %s: refused and confirmed (detect_after_refused %s)",
					failing, grouped(lost), v.opts.DetectAfterRefused)}
		}
		var why string
		switch {
		case len(sees) > 0:
			why = grouped(sees) + " still replicates from it"
		case len(stale) > 0:
			why = "waiting for a check of " + strings.Join(stale, ", ") + " newer than the first failure"
		case len(unreached) > 0:
			why = "Vigil cannot check " + strings.Join(unreached, ", ")
		default:
			why = "no server replicates from it"
		}
		w := *wait
		what := "the refusal"
		if early == earlySilent {
			what = "the silence"
			if !soonest.IsZero() && soonest.Before(w.recheck) {
				w.recheck = soonest
			}
		}
		w.reason = fmt.Sprintf("%s; %s is not confirmed (%s): detect_after is %s", failing, what, why, v.opts.DetectAfter)
		w.events = events
		return w
	}
	switch {
	case len(sees) > 0:
		r := fmt.Sprintf("%s, but replicas still replicate from it: %s", failing, grouped(sees))
		if len(lost) > 0 {
			r += fmt.Sprintf("; while %s lost it", grouped(lost))
		}
		return detection{sit: UnreachablePrimary, events: events,
			reason: r + ": a partition between Vigil and the primary, no automatic failover"}
	case len(stale) > 0:
		return detection{sit: PrimaryFailing, events: events,
			reason: fmt.Sprintf("%s; waiting for a check of %s newer than the first failure", failing, strings.Join(stale, ", "))}
	case len(lost) > 0:
		return detection{sit: DeadPrimary, events: events,
			reason: fmt.Sprintf("%s and every reachable replica lost it: %s", failing, grouped(lost))}
	case len(unreached) > 0:
		return detection{sit: PrimaryAndReplicasUnreachable, events: events,
			reason: fmt.Sprintf("%s and no replica can be checked (%s): Vigil is probably cut off, no automatic failover", failing, strings.Join(unreached, ", "))}
	}
	return detection{sit: DeadPrimaryAndNoReplicas, reason: failing + " and no server replicates from it: nothing to promote"}
}

// streak measures how long server i (the primary or Galera writer) has
// been unreachable. It returns a PrimaryFailing detection while that is
// less than detect_after — or unknown: without FailingSince the engine
// never declares a server dead.
func (v *view) streak(i int, o *topology.Observation, role string) (time.Time, string, *detection) {
	name := v.name(i)
	f, ok := v.facts(i)
	if !ok || f.FailingSince.IsZero() {
		return time.Time{}, "", &detection{sit: PrimaryFailing,
			reason: fmt.Sprintf("%s (the %s) cannot be reached (%s) but when its failures began is unknown (no FailingSince): waiting", name, role, failureText(o))}
	}
	down := v.in.Now.Sub(f.FailingSince)
	failing := fmt.Sprintf("%s (the %s) unreachable for %s (%s)", name, role, down.Round(time.Millisecond), failureText(o))
	if down < v.opts.DetectAfter {
		return f.FailingSince, failing, &detection{sit: PrimaryFailing, recheck: f.FailingSince.Add(v.opts.DetectAfter),
			reason: fmt.Sprintf("%s; detect_after is %s", failing, v.opts.DetectAfter)}
	}
	return f.FailingSince, failing, nil
}

// earlyKind is which shorter bound lets the replicas decide before
// detect_after.
type earlyKind int

const (
	noEarly      earlyKind = iota
	earlyRefused           // detect_after_refused: nothing listens
	earlySilent            // detect_after_silent: nothing answers
)

// earlyBound decides whether a primary that failed for less than
// detect_after may be judged by one of the shorter bounds: refused (its
// latest check was refused: a live host answered that nothing listens,
// the process is gone, not slow) after DetectAfterRefused, or silent (its
// checks time out or fail without an answer) after DetectAfterSilent.
// Before that bound it returns the wait until it.
func (v *view) earlyBound(o *topology.Observation, since time.Time, failing string, wait *detection) (earlyKind, *detection) {
	kind, bound, key := earlyRefused, v.opts.DetectAfterRefused, "detect_after_refused"
	if !o.Refused {
		kind, bound, key = earlySilent, v.opts.DetectAfterSilent, "detect_after_silent"
	}
	if bound <= 0 || bound >= v.opts.DetectAfter || since.IsZero() {
		return noEarly, nil
	}
	if down := v.in.Now.Sub(since); down < bound {
		w := *wait
		w.recheck = since.Add(bound)
		w.reason = fmt.Sprintf("%s; %s is %s (then the replicas decide), detect_after %s",
			failing, key, bound, v.opts.DetectAfter)
		return noEarly, &w
	}
	return kind, nil
}

// silentFor says whether a replica whose IO thread still runs has
// received nothing from its source — no event, no heartbeat — for need
// and for more than two heartbeat periods (one late heartbeat is not a
// loss). When not, wait is how much longer that takes, or 0 when it
// cannot be measured (no heartbeat period, or no measurement).
func silentFor(f ServerFacts, need time.Duration) (quiet bool, why string, wait time.Duration) {
	if f.HeartbeatPeriod <= 0 || f.SecondsSinceSourceEvent < 0 {
		return false, "IO thread Yes, its silence not measured", 0
	}
	need = max(need, time.Duration(2*f.HeartbeatPeriod*float64(time.Second))+time.Millisecond)
	got := time.Duration(f.SecondsSinceSourceEvent * float64(time.Second))
	if got >= need {
		return true, fmt.Sprintf("nothing received for %.1fs, heartbeat period %gs", f.SecondsSinceSourceEvent, f.HeartbeatPeriod), 0
	}
	return false, fmt.Sprintf("received from it %.1fs ago, heartbeat period %gs", f.SecondsSinceSourceEvent, f.HeartbeatPeriod), need - got
}

// verdict is one replica's view of its source.
type verdict struct{ server, why string }

// grouped lists verdicts, naming the servers of the same verdict
// together: "node2, node3 (IO thread Connecting)".
func grouped(vs []verdict) string {
	var whys []string
	by := map[string][]string{}
	for _, v := range vs {
		if by[v.why] == nil {
			whys = append(whys, v.why)
		}
		by[v.why] = append(by[v.why], v.server)
	}
	parts := make([]string, len(whys))
	for i, w := range whys {
		parts[i] = strings.Join(by[w], ", ") + " (" + w + ")"
	}
	return strings.Join(parts, "; ")
}

// replicaLost says whether a replica's receiver has lost its source: the
// IO thread is not running, nothing arrived for longer than two heartbeat
// periods (one late heartbeat is not a loss; the executor samples the
// counter every check interval), or an IO error is set (unless something
// arrived within that time, which is the stronger evidence).
func replicaLost(r *topology.ReplicaStatus, f ServerFacts) (bool, string) {
	ioErr := ""
	if r.LastIOErrno != 0 || r.LastIOError != "" {
		ioErr = fmt.Sprintf("IO error %d: %s", r.LastIOErrno, clip(r.LastIOError, 60))
	}
	if r.IORunning != topology.IOYes {
		why := "IO thread " + r.IORunning.String()
		if ioErr != "" {
			why += ", " + ioErr
		}
		return true, why
	}
	if f.HeartbeatPeriod > 0 && f.SecondsSinceSourceEvent >= 0 {
		if f.SecondsSinceSourceEvent > 2*f.HeartbeatPeriod {
			return true, fmt.Sprintf("nothing received for %.1fs, heartbeat period %.1fs", f.SecondsSinceSourceEvent, f.HeartbeatPeriod)
		}
		return false, fmt.Sprintf("received from it %.1fs ago", f.SecondsSinceSourceEvent)
	}
	if ioErr != "" {
		return true, ioErr
	}
	return false, "IO thread Yes"
}

// clip shortens a server message for a one-line reason.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
