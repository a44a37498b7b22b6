package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// The executor's side of lifecycle operations (clone, rebuild, replace;
// internal/lifecycle runs them): taking a target out of routing on every
// Vigil instance and giving it back, and the salvage handshake a rebuild
// needs before its target may be overwritten.

// Acting reports whether this instance acts for the cluster: alone, or
// elected among several. Only the acting instance runs lifecycle
// operations.
func (e *Executor) Acting() bool { return e.acting() }

// Exclude takes server out of routing for a lifecycle operation: the
// monitor's override OFFLINE_HARD and the router's fence here, and with
// several instances the writer record's fenced list, acknowledged by
// every live instance before the operation overwrites anything.
func (e *Executor) Exclude(ctx context.Context, server, reason string) error {
	if err := e.routes.SetAdminState(server, topology.OfflineHard, reason); err != nil {
		return err
	}
	if e.shared == nil {
		return nil
	}
	if !e.shared.Acting() {
		return fmt.Errorf("this instance no longer acts for cluster %s: %w", e.o().Cluster, coord.ErrNotActing)
	}
	if cur, _ := e.shared.Record(); cur.IsFenced(server) {
		return nil
	}
	return e.sharePublish(ctx, nil, true, func(r *coord.Record) { r.Fenced = addName(r.Fenced, server) })
}

// Include gives server back to routing after a lifecycle operation: out
// of every fence (the router's, the monitor's, the writer record's) and
// back to the monitor's judgement, routed once its checks pass.
func (e *Executor) Include(ctx context.Context, server, reason string) error {
	if e.shared != nil {
		if cur, _ := e.shared.Record(); cur.IsFenced(server) {
			if err := e.sharePublish(ctx, nil, false, func(r *coord.Record) { r.Fenced = dropName(r.Fenced, server) }); err != nil {
				return err
			}
		}
	}
	if err := e.routes.Unfence(server); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.fencedAt, server)
	e.mu.Unlock()
	return e.routes.SetAdminState(server, topology.Online, reason)
}

// SalvagePending says why node's transactions are not salvaged yet ("":
// they are, or it never was a failed-over primary): a rebuild waits for
// it, so that nothing the old primary holds is destroyed unread.
func (e *Executor) SalvagePending(node string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.history.Records) - 1; i >= 0; i-- {
		r := e.history.Records[i]
		if r.Kind != failover.RecordFailover || !r.OK || r.OldPrimary != node {
			continue
		}
		st := e.salvaged[r.Started.UnixNano()]
		switch {
		case st == nil:
			return fmt.Sprintf("the failover of %s at %s is not salvaged yet: %s must answer first", node, r.Started.Format(time.RFC3339), node)
		case !st.settled:
			return fmt.Sprintf("the salvage of %s settles (checked again %s after it first answered)", node, salvageSettle)
		}
		return ""
	}
	return ""
}

// PrepareRebuild is the salvage handshake before a rebuild overwrites
// node: node (out of routing already) is made read-only (semi-sync
// source off first, so that the SET does not wait for an
// acknowledgement no replica sends), then every transaction it holds
// that the writer lacks is written to a salvage file. It fails, and the
// rebuild with it, when node does not answer (what it holds cannot be
// read) or the salvage cannot be written. The sentence it returns names
// the salvage file for the events.
func (e *Executor) PrepareRebuild(ctx context.Context, node string) (string, error) {
	snap := e.mon.Snapshot()
	w := snap.WriterServer()
	if w == nil {
		return "", fmt.Errorf("cluster %s has no writer now: what %s holds cannot be compared with it", e.o().Cluster, node)
	}
	if w.Name == node {
		return "", fmt.Errorf("%s is the writer: it is never overwritten", node)
	}
	no := e.mon.CheckFresh(ctx, node)[node]
	if no == nil || !no.OK {
		why := "not checked"
		if no != nil {
			why = no.Err
		}
		return "", fmt.Errorf("%s does not answer (%s): Vigil cannot read what it holds, so it is not overwritten; start its server and try again", node, why)
	}
	f := flavor.OfObservation(no)
	if !no.ReadOnly {
		src, _ := f.SemiSyncNames()
		if _, err := e.exec(ctx, node, 5*time.Second, "SET GLOBAL "+src+"_enabled = OFF"); err != nil {
			e.log.Info("could not turn semi-sync off before read_only (the plugin may not be loaded)", "cluster", e.o().Cluster, "server", node, "err", err)
		}
		if _, err := e.exec(ctx, node, 30*time.Second, f.ReadOnly(true)...); err != nil {
			return "", fmt.Errorf("making %s read-only: %w", node, err)
		}
	}
	fresh := e.mon.CheckFresh(ctx, node, w.Name)
	no, po := fresh[node], fresh[w.Name]
	if no == nil || !no.OK || po == nil || !po.OK {
		return "", fmt.Errorf("%s and the writer %s must both answer to compare what %s holds", node, w.Name, node)
	}
	if no.Flavor == topology.FlavorMySQL {
		return " (MySQL: its binary logs are not compared; it was read-only before being overwritten)", nil
	}
	extra, start := missing(no.GTID.Binlog, po.GTID.Current)
	if n, st, ok := missingByState(no.GTID.BinlogState, po.GTID.BinlogState); ok && n > extra {
		extra, start = n, st
	}
	if extra == 0 {
		return fmt.Sprintf(" (%s holds nothing %s lacks: nothing to salvage)", node, w.Name), nil
	}
	rec := failover.Record{Kind: failover.RecordRejoin, Started: e.now(), OldPrimary: node, NewPrimary: w.Name}
	path, counted, err := e.writeSalvage(ctx, rec, no, start, po.GTID.BinlogState)
	if counted > 0 && uint64(counted) < extra {
		// The file counted: the sequence gap overcounts (countMissing).
		extra = uint64(counted)
	}
	if err != nil {
		return "", fmt.Errorf("%s holds %d transactions %s lacks and they could not be written to a salvage file (%v): it is not overwritten", node, extra, w.Name, err)
	}
	e.event(node, "salvage", fmt.Sprintf("before its rebuild: the %d transactions %s holds that %s lacks are written to %s", extra, node, w.Name, path))
	return fmt.Sprintf(" (the %d transactions it held that %s lacks are written to %s)", extra, w.Name, path), nil
}
