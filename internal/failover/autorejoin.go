package failover

import (
	"fmt"
	"slices"
	"time"
)

// Automatic rejoin (failover.auto_rejoin): a returned old primary whose
// GTID history is compatible becomes a replica of the primary without an
// operator, by exactly the plan `rejoin NODE` would run. Left fenced, it
// is one more server a second failure cannot fall back on: a semi-sync
// primary with no replica stops taking writes.

// Back-off between automatic rejoins of one server that failed: the first
// retry after AutoRejoinBackoff, each next one twice as late, at most
// AutoRejoinMaxBackoff. A rejoin that fails keeps failing for a reason an
// operator must see (the events say it); retrying it at every decision
// would only repeat the same statements on the servers.
const (
	AutoRejoinBackoff    = 30 * time.Second
	AutoRejoinMaxBackoff = 10 * time.Minute
)

// returnedPrimary is a server a failover replaced that answers checks
// again and has not been rejoined since.
type returnedPrimary struct {
	name string
	// replaced is when the failover that replaced it started.
	replaced time.Time
	// text describes it for an event.
	text string
	// rejoin is what `rejoin NAME` decides now.
	rejoin Decision
	// failures counts the rejoins of it that failed since the failover;
	// last is the latest of them.
	failures int
	last     Record
}

// retryAt is when an automatic rejoin may run again after failures (zero:
// now).
func (r returnedPrimary) retryAt() time.Time {
	if r.failures == 0 {
		return time.Time{}
	}
	wait := AutoRejoinBackoff
	for i := 1; i < r.failures && wait < AutoRejoinMaxBackoff; i++ {
		wait *= 2
	}
	return r.last.at().Add(min(wait, AutoRejoinMaxBackoff))
}

// returnedOldPrimaries lists every server a failover replaced that answers
// checks again and has not been rejoined since.
func (v *view) returnedOldPrimaries() []returnedPrimary {
	var out []returnedPrimary
	recs := v.in.History.Records
	seen := map[string]bool{}
	for i, r := range recs {
		if r.Kind != RecordFailover || r.OldPrimary == "" || seen[r.OldPrimary] {
			continue
		}
		rejoined := slices.ContainsFunc(recs[i+1:], func(x Record) bool { return x.Kind == RecordRejoin && x.OK && x.OldPrimary == r.OldPrimary })
		idx := v.snap.Index(r.OldPrimary)
		if rejoined || idx < 0 || idx == v.primary || !v.ok(idx) {
			continue
		}
		seen[r.OldPrimary] = true
		rp := returnedPrimary{name: r.OldPrimary, replaced: r.Started, rejoin: v.rejoin(r.OldPrimary)}
		for _, x := range recs[i+1:] {
			if x.Kind == RecordRejoin && x.OldPrimary == r.OldPrimary && x.failed() && (v.in.Running == nil || x.Started != v.in.Running.Started) {
				rp.failures++
				rp.last = x
			}
		}
		s := fmt.Sprintf("%s, replaced by the failover at %s, answers checks again; it stays fenced (not routed) and is never made writable automatically",
			r.OldPrimary, stamp(r.Started))
		if o := v.obs(idx); !o.ReadOnly {
			s += "; it reports read_only=OFF: writes sent to it directly are not replicated"
		}
		switch {
		case rp.rejoin.Situation == Rejoin:
			s += fmt.Sprintf("; its GTID history is compatible: `vigil ctl rejoin %s` makes it a replica of the primary", r.OldPrimary)
			if note := v.autoRejoinNote(rp); note != "" {
				s += "; " + note
			}
		case v.opts.AutoRejoin:
			s += "; " + v.autoRejoinNote(rp)
		default:
			s += "; rejoin is not possible yet: " + rp.rejoin.Reason
		}
		rp.text = s
		out = append(out, rp)
	}
	return out
}

// autoRejoinNote says why failover.auto_rejoin does not rejoin r now and
// what to do ("" when it would, or when auto_rejoin is off).
func (v *view) autoRejoinNote(r returnedPrimary) string {
	if !v.opts.AutoRejoin {
		return ""
	}
	if r.rejoin.Situation != Rejoin {
		return fmt.Sprintf("automatic rejoin (failover.auto_rejoin) did not run, and a rejoin by hand would be refused too: %s", r.rejoin.Reason)
	}
	if at := r.retryAt(); v.in.Now.Before(at) {
		why := r.last.Error
		if why == "" {
			why = "it did not finish"
		}
		return fmt.Sprintf("automatic rejoin failed %d time(s), the last at %s: %s; the next attempt is at %s (back-off), or run `vigil ctl rejoin %s` after fixing the cause",
			r.failures, stamp(r.last.at()), why, stamp(at), r.name)
	}
	return ""
}

func texts(rs []returnedPrimary) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.text
	}
	return out
}

// decideReturned decides for a healthy cluster with returned old
// primaries: with failover.auto_rejoin the first whose history is
// compatible, and not backing off from a failed attempt, is rejoined by
// the plan `rejoin NODE` would run; the others stay fenced and are
// described.
func (v *view) decideReturned(d Decision, back []returnedPrimary) Decision {
	if v.opts.AutoRejoin {
		for _, r := range back {
			if r.rejoin.Situation != Rejoin || v.in.Now.Before(r.retryAt()) {
				continue
			}
			pl := *r.rejoin.Plan
			pl.Auto = true
			d.Situation, d.Plan = AutoRejoin, &pl
			d.Reason = fmt.Sprintf("%s, replaced by the failover at %s, answers checks again and failover.auto_rejoin is on: %s",
				r.name, stamp(r.replaced), r.rejoin.Reason)
			if r.failures > 0 {
				d.Reason += fmt.Sprintf(" (attempt %d; the last failed: %s)", r.failures+1, orNone(r.last.Error))
			}
			for _, o := range back {
				if o.name != r.name {
					d.Events = append(d.Events, o.text)
				}
			}
			v.fenceNotes(&d, back, r.name)
			return d
		}
	}
	d.Situation = OldPrimaryReturned
	d.Reason = back[0].text
	for _, r := range back[1:] {
		d.Events = append(d.Events, r.text)
	}
	v.fenceNotes(&d, back, "")
	return d
}

// fenceNotes sets d.FenceNotes for the returned old primaries automatic
// rejoin leaves fenced (all but rejoining), and d.RecheckAt to the end of
// the earliest back-off.
func (v *view) fenceNotes(d *Decision, back []returnedPrimary, rejoining string) {
	for _, r := range back {
		note := v.autoRejoinNote(r)
		if note == "" || r.name == rejoining {
			continue
		}
		if d.FenceNotes == nil {
			d.FenceNotes = map[string]string{}
		}
		d.FenceNotes[r.name] = fmt.Sprintf("as the old primary the failover at %s replaced; %s", stamp(r.replaced), note)
		if at := r.retryAt(); v.in.Now.Before(at) && (d.RecheckAt.IsZero() || at.Before(d.RecheckAt)) {
			d.RecheckAt = at
		}
	}
}
