package failover

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// decideGalera is rule 9: when the Galera writer fails or leaves the
// Primary component, route writes to a Synced node — highest weight, then
// lowest wsrep_local_index, then configuration order (the monitor's own
// rule, so both agree). No SQL runs: every Synced node holds the same
// data. A writer move is not a failover: neither failover.auto nor
// min_interval applies to it.
func (v *view) decideGalera(req *Request) Decision {
	w := v.primary
	det, lost := v.galeraWriter()
	d := Decision{Situation: det.sit, Detected: det.sit, Reason: det.reason, RecheckAt: det.recheck}
	if req == nil && !lost {
		return d
	}
	if req != nil {
		d.Detected = det.sit
		if lost {
			d.Detected = GaleraWriterLost
		}
		if req.Kind == RequestFailover && !req.Force && (det.sit == Healthy || det.sit == OverloadedPrimary || det.sit == PrimaryCheckError) {
			d.Situation = PrimaryHealthy
			d.Reason = det.reason + ": it is alive; use switchover --to NODE to move the writer, or failover --force"
			return d
		}
	}
	d.RecheckAt = time.Time{}
	d.Choices = v.galeraChoices(w)
	target := chosen(d.Choices)
	if req != nil {
		t, sit, why := v.pickTarget(d.Choices, *req, modeSwitchover)
		if t < 0 {
			d.Situation, d.Reason = sit, why
			return d
		}
		target = t
		for i := range d.Choices {
			d.Choices[i].Chosen = i == t
		}
		if req.To != "" {
			d.Choices[t].Reason = "asked for with --to; " + d.Choices[t].Reason
		}
	}
	if target < 0 {
		d.Situation = GaleraNoSyncedNode
		d.Reason = det.reason + "; no other node is Synced in the Primary component and accepting queries"
		return d
	}
	d.Plan = v.galeraPlan(target, req == nil)
	switch {
	case req == nil:
		d.Situation = GaleraWriterLost
		d.Reason = det.reason + "; " + v.name(target) + " takes over"
	case req.Kind == RequestSwitchover:
		d.Situation = Switchover
		d.Reason = fmt.Sprintf("switchover requested: writes move from %s to %s", orNone(v.nameOr(w)), v.name(target))
	default:
		d.Situation = ManualFailover
		d.Reason = fmt.Sprintf("failover requested (%s): writes move to %s", det.reason, v.name(target))
	}
	return d
}

func (v *view) nameOr(i int) string {
	if i < 0 {
		return ""
	}
	return v.name(i)
}

// galeraWriter judges the routed Galera writer; lost when it must be
// replaced.
func (v *view) galeraWriter() (detection, bool) {
	w := v.primary
	if w < 0 {
		why := v.snap.WriterReason
		if why == "" {
			why = "none chosen"
		}
		return detection{sit: GaleraWriterLost, reason: "no Galera writer is routed (" + why + ")"}, true
	}
	name := v.name(w)
	o := v.obs(w)
	switch {
	case o == nil:
		return detection{sit: Unobserved, reason: name + " (the writer) has not been checked yet"}, false
	case !o.OK && overloaded(o):
		return detection{sit: OverloadedPrimary, reason: fmt.Sprintf("%s (the writer) is alive but overloaded (%s): no writer move for that", name, failureText(o))}, false
	case !o.OK && !unreachable(o):
		return detection{sit: PrimaryCheckError, reason: fmt.Sprintf("%s (the writer) answers checks with error %d (%s)", name, o.ErrCode, failureText(o))}, false
	case !o.OK:
		_, failing, wait := v.streak(w, o, "writer")
		if wait != nil {
			return *wait, false
		}
		return detection{sit: GaleraWriterLost, reason: failing}, true
	}
	if why := notSynced(o.Wsrep); why != "" && o.Wsrep != nil {
		return detection{sit: GaleraWriterLost, reason: name + " (the writer) " + why}, true
	}
	return detection{sit: Healthy, reason: name + " (the writer) answers checks and is Synced"}, false
}

// notSynced says why a Galera node cannot take writes, "" when it can.
func notSynced(w *topology.WsrepStatus) string {
	switch {
	case w == nil:
		return "has no Galera status (not checked)"
	case !w.Primary():
		return fmt.Sprintf("left the Primary component (wsrep_cluster_status=%s)", orNone(w.ClusterStatus))
	case !w.Synced():
		return fmt.Sprintf("is not Synced (wsrep_local_state=%d %s)", w.LocalState, w.LocalStateComment)
	case !w.Ready:
		return "is not ready (wsrep_ready=OFF)"
	case w.RejectingQueries():
		return "rejects queries (wsrep_reject_queries=" + w.RejectQueries + ")"
	}
	return ""
}

func (v *view) galeraChoices(w int) []Choice {
	choices := make([]Choice, len(v.snap.Servers))
	var elig []int
	for i := range v.snap.Servers {
		c := Choice{Server: v.name(i), Lag: -1}
		o := v.obs(i)
		switch {
		case i == w:
			c.Excluded, c.Reason = IsPrimary, "the writer being replaced"
		case o == nil:
			c.Excluded, c.Reason = NotReachable, "not checked yet"
		case !o.OK:
			c.Excluded, c.Reason = NotReachable, "Vigil cannot check it: "+failureText(o)
		case v.fenced(i):
			c.Excluded, c.Reason = Fenced, Fenced.Description()
		case v.snap.Servers[i].Standby && v.snap.Servers[i].State != topology.OfflineHard && !v.named(c.Server):
			c.Excluded, c.Reason = Standby, Standby.Description()
		case v.snap.Servers[i].Standby && v.snap.Servers[i].State != topology.OfflineHard:
			elig = append(elig, i) // a standby named with --to
		case v.snap.Servers[i].State == topology.OfflineSoft || v.snap.Servers[i].State == topology.OfflineHard:
			c.Excluded, c.Reason = Offline, fmt.Sprintf("%s: %s", v.snap.Servers[i].State, v.snap.Servers[i].Reason)
		case slices.Contains(v.opts.NeverPromote, c.Server):
			c.Excluded, c.Reason = NeverPromote, NeverPromote.Description()
		case notSynced(o.Wsrep) != "":
			c.Excluded, c.Reason = NotSynced, "it "+notSynced(o.Wsrep)
		default:
			elig = append(elig, i)
		}
		choices[i] = c
	}
	slices.SortStableFunc(elig, func(a, b int) int {
		return cmp.Or(
			-cmp.Compare(v.snap.Servers[a].Weight, v.snap.Servers[b].Weight),
			cmp.Compare(indexKey(v.obs(a).Wsrep.LocalIndex), indexKey(v.obs(b).Wsrep.LocalIndex)),
			cmp.Compare(a, b))
	})
	for rank, i := range elig {
		c := &choices[i]
		c.Reason = fmt.Sprintf("Synced, weight %d, wsrep_local_index %d", v.snap.Servers[i].Weight, v.obs(i).Wsrep.LocalIndex)
		if rank == 0 {
			c.Chosen = true
			c.Reason += ": highest weight, then lowest wsrep_local_index"
		} else {
			c.Reason += "; " + v.name(elig[0]) + " ranks first (highest weight, then lowest wsrep_local_index, then configuration order)"
		}
	}
	return choices
}

func indexKey(i int) int {
	if i < 0 {
		return int(^uint(0) >> 1)
	}
	return i
}

func (v *view) galeraPlan(t int, auto bool) *Plan {
	name := v.name(t)
	pl := &Plan{Kind: KindGaleraWriterMove, Cluster: v.snap.Cluster, Flavor: flavor.OfObservation(v.obs(t)), Auto: auto,
		OldPrimary: v.nameOr(v.primary), NewPrimary: name, Term: v.snap.Term + 1}
	pl.Steps = []Step{{Kind: SetRouterWriter, Server: name,
		Detail: fmt.Sprintf("route writes to %s under term %d; no SQL: every Synced node holds the same data, and the old writer keeps the routing state the monitor gives it", name, pl.Term)}}
	return pl
}
