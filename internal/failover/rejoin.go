package failover

import (
	"fmt"

	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// rejoin answers `rejoin NODE` (rule 7): NODE — a returned old primary, a
// quarantined or unreachable replica — becomes a replica of the current
// primary if its GTID history is compatible: nothing it holds is missing
// on the primary. Otherwise the refusal lists what the primary lacks.
func (v *view) rejoin(node string) Decision {
	d := Decision{}
	if v.snap.Type != TypeReplication && v.snap.Type != "" {
		d.Situation = InvalidTarget
		d.Reason = fmt.Sprintf("rejoin %s: %s clusters have no rejoin (Galera nodes rejoin by themselves through IST or SST)", node, v.snap.Type)
		return d
	}
	n := v.snap.Index(node)
	p := v.primary
	switch {
	case n < 0:
		d.Situation, d.Reason = InvalidTarget, fmt.Sprintf("rejoin %s: no such server in cluster %s", node, v.snap.Cluster)
		return d
	case p < 0:
		d.Situation, d.Reason = NoPrimary, fmt.Sprintf("rejoin %s: no primary known to replicate from", node)
		return d
	case n == p:
		d.Situation, d.Reason = InvalidTarget, fmt.Sprintf("rejoin %s: it is the primary", node)
		return d
	case !v.ok(p):
		d.Situation, d.Reason = PrimaryDown, fmt.Sprintf("rejoin %s: the primary %s does not answer checks", node, v.name(p))
		return d
	case !v.ok(n):
		why := "not checked yet"
		if o := v.obs(n); o != nil {
			why = failureText(o)
		}
		d.Situation, d.Reason = InvalidTarget, fmt.Sprintf("rejoin %s: Vigil cannot check it (%s); its GTID history must be read first", node, why)
		return d
	}
	no, po := v.obs(n), v.obs(p)
	if no.Flavor != po.Flavor && no.Flavor != 0 && po.Flavor != 0 {
		d.Situation, d.Reason = InvalidTarget, fmt.Sprintf("rejoin %s: it is %s and the primary %s is %s", node, no.Flavor, v.name(p), po.Flavor)
		return d
	}
	pl := &Plan{Kind: KindRejoin, Cluster: v.snap.Cluster, Flavor: flavor.OfObservation(po), OldPrimary: node, NewPrimary: v.name(p), Term: v.snap.Term}
	unfence := Step{Kind: Unfence, Server: node,
		Detail: fmt.Sprintf("let the monitor route %s again as a replica (readable once it has caught up)", node)}
	// A server rebuilt and repointed by hand (or by a script) may already
	// replicate from the primary. In strict GTID mode the primary then
	// accepted its position, so it is compatible; it only needs checking
	// — unless it kept another role's settings (a former primary's
	// read_only=OFF, or semi-sync master with wait_no_slave, which stalls
	// its applier): then it takes the whole way below, which sets them.
	if v.replicatesFrom(n, p) && no.Replica.Running() && no.Replica.LastIOErrno == 0 && no.Replica.LastSQLErrno == 0 &&
		no.ReadOnly && !v.semiSyncRoleDiffers(n) {
		if v.fenced(n) {
			pl.Steps = append(pl.Steps, killPreFenceStep(node))
		}
		pl.Steps = append(pl.Steps,
			Step{Kind: VerifyReplicating, Server: node, Source: v.name(p), Timeout: v.opts.ApplyTimeout,
				Detail: fmt.Sprintf("%s already replicates from %s: check both threads still run without error", node, v.name(p))},
			unfence)
		d.Situation, d.Plan = Rejoin, pl
		d.Reason = fmt.Sprintf("%s already replicates from %s without error; it returns to routing", node, v.name(p))
		return d
	}
	np, pp := receivedPos(no), appliedPos(po)
	if np.bad != "" || pp.bad != "" {
		d.Situation, d.Reason = InvalidTarget, fmt.Sprintf("rejoin %s: GTID positions cannot be read: %s", node, np.bad+pp.bad)
		return d
	}
	// Transactions that carry the primary's own server id are the
	// primary's: it has them even when its sample is older than the
	// node's (a replica under write load is always a little "ahead" of an
	// earlier sample of its primary).
	x := np.withoutOriginAhead(pp, po.ServerID).extra(pp)
	if x == "" && no.Flavor != topology.FlavorMySQL {
		x = binlogStateExtra(exceptServer(no.GTID.BinlogState, po.ServerID), po.GTID.BinlogState)
	}
	if x != "" {
		d.Situation = RejoinDiverged
		d.Reason = fmt.Sprintf("rejoin %s refused: it holds transactions the primary %s lacks: %s. Salvage them first (mysqlbinlog on %s, or flashback), then rebuild %s from a backup of %s (or remove them), and run rejoin again",
			node, v.name(p), x, node, node, v.name(p))
		return d
	}
	// A former primary's own transactions are in gtid_binlog_pos: it must
	// start from gtid_current_pos on MariaDB.
	formerPrimary := no.Replica == nil || !no.ReadOnly
	if v.fenced(n) {
		pl.Steps = append(pl.Steps, killPreFenceStep(node))
	}
	rs := v.repointSteps(n, p, formerPrimary)
	if rs[0].Kind == SetSemiSync {
		// Semi-sync master off before read_only: SET GLOBAL read_only waits
		// for commits in progress, and a former primary's may wait for
		// acknowledgements no replica sends.
		pl.Steps = append(pl.Steps, rs[0])
		rs = rs[1:]
	}
	pl.Steps = append(pl.Steps, Step{Kind: SetReadOnly, Server: node, Detail: sqlText(ReadOnlySQL(flavor.OfObservation(no), true)) + ": a replica takes no direct writes"})
	pl.Steps = append(pl.Steps, rs...)
	for i := range pl.Steps {
		pl.Steps[i].OnFail = Abort
	}
	pl.Steps = append(pl.Steps, unfence)
	pl.Repoint = []string{node}
	d.Situation, d.Plan = Rejoin, pl
	d.Reason = fmt.Sprintf("%s (%s) holds nothing the primary %s (%s) lacks: it becomes a replica of %s",
		node, orNone(np.String()), v.name(p), orNone(pp.String()), v.name(p))
	return d
}

// killPreFenceStep kills the connections Vigil had open on a fenced
// server when it was fenced.
func killPreFenceStep(node string) Step {
	return Step{Kind: KillPreFence, Server: node,
		Detail: fmt.Sprintf("kill the connections Vigil had open on %s when it was fenced (unless it restarted since): nothing still in flight on them may run", node)}
}
