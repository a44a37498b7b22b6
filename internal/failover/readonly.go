package failover

import (
	"fmt"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/flavor"
)

// A replication primary that answers checks but is read-only, with no
// server writable, is no healthy cluster: nobody can write. Vigil leaves
// such a primary alone unless a failed operation of its own left it so —
// the operation told the monitor to route writes to the server, then could
// not make it writable (a failover or switchover failing at set-writable,
// a switchover's rollback failing to give the old primary its writes
// back). Then it makes it writable again (a restore-writer plan: only
// set-writable and set-router-writer), provided nothing else may have
// taken writes: no other server answers with read_only=OFF, none holds a
// transaction the primary lacks, and the primary replicates from nobody.
// It tries restoreAttempts times, detect_after apart, and only with
// failover.auto on; an operator's `vigil ctl switchover --to PRIMARY` runs
// the same plan by hand.

// restoreAttempts is how many times in a row Vigil tries by itself to
// make writable a primary that one of its failed operations left
// read-only; `vigil ctl ack` lets it try as many times again.
const restoreAttempts = 3

// readOnlyText describes primary p, which answers but is read-only and
// not routed as the writer.
func (v *view) readOnlyText(p int) string {
	s := v.name(p) + " (the primary) answers checks but is read-only and not routed as the writer"
	switch w := v.writableOthers(p); len(w) {
	case 0:
	case 1:
		return s + "; " + w[0] + " reports read_only=OFF but is not the primary"
	default:
		return s + "; " + strings.Join(w, ", ") + " report read_only=OFF but are not the primary"
	}
	return s + ": no server is writable, clients cannot write"
}

// writableOthers are the servers other than p whose latest check
// answered with read_only=OFF.
func (v *view) writableOthers(p int) []string {
	var out []string
	for i := range v.snap.Servers {
		if i != p && v.ok(i) && !v.obs(i).ReadOnly {
			out = append(out, v.name(i))
		}
	}
	return out
}

// decideReadOnly is the automatic decision for a read-only primary (d
// carries the detection): a restore-writer plan when it is safe, else an
// event saying why not and what to do.
func (v *view) decideReadOnly(d Decision) Decision {
	p := v.primary
	name := v.name(p)
	manual := fmt.Sprintf("check %s, then run `vigil ctl switchover --to %s` (it makes %s writable and routes writes to it)", name, name, name)
	rec, tries, last := v.leftReadOnly(p)
	if rec == nil {
		d.Reason += fmt.Sprintf("; no failed operation of Vigil's left it so, and Vigil does not undo a read_only it did not set: %s, or set read_only=OFF on it yourself", manual)
		return d
	}
	d.Reason += fmt.Sprintf("; the %s started at %s (%s → %s) left it so: %s", rec.Kind, stamp(rec.Started), orNone(rec.OldPrimary), orNone(rec.NewPrimary), rec.Error)
	if why := v.restoreBlockers(p); len(why) > 0 {
		d.Reason += fmt.Sprintf("; Vigil does not make it writable by itself, as %s. Resolve that, then %s", strings.Join(why, "; "), manual)
		return d
	}
	if !v.opts.Auto {
		d.Reason += "; automatic failover is off (failover.auto: false), so Vigil does not make it writable by itself: " + manual
		return d
	}
	if tries >= restoreAttempts {
		d.Reason += fmt.Sprintf("; Vigil tried %d times to make it writable and gave up: %s; `vigil ctl ack` lets Vigil try again", tries, manual)
		return d
	}
	if next := last.Add(v.opts.DetectAfter); tries > 0 && v.in.Now.Before(next) {
		d.RecheckAt = next
		d.Reason += fmt.Sprintf("; attempt %d of %d to make it writable again failed, the next is at %s", tries, restoreAttempts, stamp(next))
		return d
	}
	d.Plan = v.restoreWriterPlan(p, true)
	d.Reason += fmt.Sprintf("; nothing else is writable and no server holds a transaction %s lacks: make it writable again (attempt %d of %d)", name, tries+1, restoreAttempts)
	d.Events = append(d.Events, d.Plan.notes...)
	return d
}

// restoreRequest answers `switchover --to P` where P is the primary,
// read-only with no writer: the restore-writer plan, unless something
// else may have taken writes.
func (v *view) restoreRequest(d Decision) Decision {
	p := v.primary
	name := v.name(p)
	if why := v.restoreBlockers(p); len(why) > 0 {
		d.Situation = InvalidTarget
		d.Reason = fmt.Sprintf("--to %s: it is the primary but read-only, and Vigil does not make it writable as %s", name, strings.Join(why, "; "))
		return d
	}
	d.Situation = PrimaryReadOnly
	d.Plan = v.restoreWriterPlan(p, false)
	d.Reason = fmt.Sprintf("%s; switchover --to %s: nothing else is writable and no server holds a transaction %s lacks: make it writable and route writes to it",
		v.readOnlyText(p), name, name)
	d.Events = append(d.Events, d.Plan.notes...)
	return d
}

// leftReadOnly returns the failed operation that left server p the
// designated primary without making it writable — the latest operation
// that changes the writer, rejoins and failed restore attempts aside —
// with the failed restore attempts for p since then that no operator
// acknowledged, and when the latest of them ended. nil when the latest
// such operation is another.
func (v *view) leftReadOnly(p int) (*Record, int, time.Time) {
	name := v.name(p)
	recs := v.in.History.Records
	tries := 0
	var last time.Time
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		switch {
		case r.Kind == RecordRejoin:
			continue
		case r.Kind == RecordRestoreWriter && r.failed() && r.NewPrimary == name:
			if r.Acked {
				continue
			}
			if tries == 0 {
				last = r.at()
			}
			tries++
			continue
		case r.failed() && r.LeftReadOnly == name:
			return &r, tries, last
		}
		return nil, 0, time.Time{}
	}
	return nil, 0, time.Time{}
}

// restoreBlockers says why making primary p writable could fork or lose
// data: it is fenced or replicates from a source, another server answers
// with read_only=OFF (it may have taken writes), or another server that
// answers holds transactions p lacks. Servers that do not answer cannot
// be asked; the operation that designated p accepted them.
func (v *view) restoreBlockers(p int) []string {
	name := v.name(p)
	var why []string
	if v.fenced(p) {
		why = append(why, name+" is fenced")
	}
	if v.obs(p).Replica != nil {
		why = append(why, fmt.Sprintf("%s still has a replication source (%s): writes on it would fork the history", name, orNone(v.sourceName(p))))
	}
	pp := v.received(p)
	for i := range v.snap.Servers {
		if i == p || !v.ok(i) {
			continue
		}
		pi := v.received(i)
		switch {
		case !v.obs(i).ReadOnly:
			why = append(why, v.name(i)+" reports read_only=OFF: it may have taken writes")
		case pi.bad != "" || pp.bad != "" || pi.flavor != pp.flavor:
			why = append(why, fmt.Sprintf("the GTID positions of %s and %s cannot be compared", v.name(i), name))
		default:
			if x := pi.extra(pp); x != "" {
				why = append(why, fmt.Sprintf("%s holds transactions %s lacks: %s", v.name(i), name, x))
			}
		}
	}
	return why
}

// restoreWriterPlan makes primary p writable and routes writes to it;
// its notes name the servers that answer but do not replicate from it.
func (v *view) restoreWriterPlan(p int, auto bool) *Plan {
	name, o := v.name(p), v.obs(p)
	pl := &Plan{Kind: KindRestoreWriter, Cluster: v.snap.Cluster, Flavor: flavor.OfObservation(o), Auto: auto, NewPrimary: name, Term: v.snap.Term + 1}
	pl.Steps = []Step{
		{Kind: SetWritable, Server: name, Detail: sqlText(ReadOnlySQL(flavor.OfObservation(o), false)) + ": " + name + " stays the primary and takes writes again"},
		{Kind: SetRouterWriter, Server: name, Detail: fmt.Sprintf("route writes to %s under term %d", name, pl.Term)},
	}
	for i := range v.snap.Servers {
		if i == p || !v.ok(i) || v.fenced(i) || v.replicatesFrom(i, p) {
			continue
		}
		pl.notes = append(pl.notes, fmt.Sprintf("%s does not replicate from %s (source: %s): `vigil ctl rejoin %s` makes it a replica of %s",
			v.name(i), name, orNone(v.sourceName(i)), v.name(i), name))
	}
	return pl
}
