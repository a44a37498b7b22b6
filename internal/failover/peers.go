package failover

import (
	"fmt"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Views are the other Vigil instances' views of the cluster's servers,
// read from etcd before an automatic failover (coordinated instances
// only). An instance that is cut off from the primary while another one
// still reaches it must not fail it over: the acting instance fails over
// only when no live instance sees the primary healthy.
type Views struct {
	// Self names this (the deciding) instance.
	Self string
	// Peers are the other live instances' views (instances whose lease
	// expired have none: their views are held by their lease).
	Peers []PeerView
	// Err says why the views could not be read ("" when they were).
	Err string
	// MaxAge is how old a view and its latest success of the primary may
	// be and still count, when longer than detect_after: the publishing
	// side's refresh period plus a check interval (a view is never
	// younger than that).
	MaxAge time.Duration
}

// PeerView is one instance's view of the cluster's servers, as it last
// published it.
type PeerView struct {
	Instance string
	// At is when the instance took the view (its clock: Vigil hosts are
	// assumed synchronised, as by NTP, to well within detect_after).
	At      time.Time
	Servers map[string]ServerView
}

// ServerView is one instance's view of one server.
type ServerView struct {
	// OK: its latest check succeeded.
	OK bool `json:"ok"`
	// Checked is when its latest check started.
	Checked time.Time `json:"checked"`
	// LastOK is when its latest successful check started (zero: none).
	LastOK time.Time `json:"last_ok,omitzero"`
	// FailingSince starts the current streak of checks that did not reach
	// the server (zero while it answers).
	FailingSince time.Time `json:"failing_since,omitzero"`
	// Failure is the kind of the latest failure: "refused", "timeout",
	// "error 2013", "overloaded"... ("" while it answers).
	Failure string `json:"failure,omitempty"`
}

// ServerViewOf turns a monitor's health of a server into what an instance
// publishes of it.
func ServerViewOf(h topology.Health) ServerView {
	var v ServerView
	if h.LastOK != nil {
		v.LastOK = h.LastOK.Time
	}
	o := h.Last
	if o == nil {
		return v
	}
	v.OK, v.Checked, v.FailingSince = o.OK, o.Time, h.FailingSince
	if !o.OK {
		v.Failure = FailureKind(o)
	}
	return v
}

// FailureKind names the kind of a failed check in a few words.
func FailureKind(o *topology.Observation) string {
	switch {
	case o.OK:
		return ""
	case o.Refused:
		return "refused"
	case o.TimedOut:
		return "timeout"
	case overloaded(o):
		return "overloaded"
	case o.ErrCode != 0:
		return fmt.Sprintf("error %d", o.ErrCode)
	case o.Err != "":
		return clip(o.Err, 40)
	}
	return "check failed"
}

// peersGate says why a failover of the primary p, which this instance
// has found dead, must wait for the other instances' views. A view holds
// the failover only while it is evidence that the primary lives now:
//
//   - it is fresh: taken within detect_after (or Views.MaxAge, when
//     longer) of now (a view its instance
//     stopped refreshing does not count; a dead instance's view is gone
//     with its lease);
//   - its latest check of the primary succeeded, and
//   - that check is newer than this instance's first failed check of the
//     primary (so the primary answered after this instance lost it) and
//     as recent as the view must be (a monitor stuck in one check cannot
//     hold a failover forever).
//
// Views that could not be read hold a failover for at most detect_after
// beyond the time it was first due (the primary's first failure +
// 2 × detect_after): a slow etcd delays a failover, it does not forbid it.
// It also returns the summary of every instance's view of the primary,
// for the decision's reason and the failover's record.
func (v *view) peersGate(p int) (blocked bool, why string, recheck time.Time, summary string) {
	vs := v.in.Views
	if vs == nil {
		return false, "", time.Time{}, ""
	}
	name := v.name(p)
	f, _ := v.facts(p)
	since := f.FailingSince
	self := vs.Self
	if self == "" {
		self = "this instance"
	}
	parts := []string{fmt.Sprintf("%s: %s %s since %s", self, name, FailureKind(v.obs(p)), v.ago(since))}
	window := max(v.opts.DetectAfter, vs.MaxAge)
	var sees []string
	var hold time.Time
	for _, pv := range vs.Peers {
		sv, ok := pv.Servers[name]
		switch {
		case !ok || sv.Checked.IsZero():
			parts = append(parts, fmt.Sprintf("%s: %s not checked", pv.Instance, name))
			continue
		case sv.OK:
			parts = append(parts, fmt.Sprintf("%s: %s answered %s ago", pv.Instance, name, v.ago(sv.Checked)))
		case sv.FailingSince.IsZero():
			parts = append(parts, fmt.Sprintf("%s: %s %s", pv.Instance, name, sv.Failure))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s %s since %s", pv.Instance, name, sv.Failure, v.ago(sv.FailingSince)))
		}
		fresh := v.in.Now.Sub(pv.At) <= window
		last := sv.LastOK
		if sv.OK && sv.Checked.After(last) {
			last = sv.Checked
		}
		if fresh && sv.OK && last.After(since) && v.in.Now.Sub(last) <= window {
			sees = append(sees, fmt.Sprintf("instance %s reached %s %s ago", pv.Instance, name, v.ago(last)))
			// The view stops counting when it or its check gets too old.
			until := pv.At
			if last.Before(until) {
				until = last
			}
			if until = until.Add(window); hold.IsZero() || until.Before(hold) {
				hold = until
			}
		}
	}
	summary = strings.Join(parts, "; ")
	if len(sees) > 0 {
		return true, strings.Join(sees, ", ") + "; not failing over (" + summary + ")", hold, summary
	}
	if vs.Err != "" {
		due := since.Add(2 * v.opts.DetectAfter)
		if v.in.Now.Before(due) {
			return true, fmt.Sprintf("the other instances' views cannot be read (%s); waiting for them until %s", vs.Err, stamp(due)), due, summary
		}
		summary += fmt.Sprintf("; the other instances' views could not be read (%s)", vs.Err)
	}
	return false, "", time.Time{}, summary
}

// ago is the time from t to the decision's now, rounded for a reason.
func (v *view) ago(t time.Time) string {
	if t.IsZero() {
		return "(unknown)"
	}
	d := v.in.Now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
