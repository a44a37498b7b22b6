package shardmove

import (
	"context"
	"fmt"

	"github.com/vigil-db/vigil/internal/topology"
)

// A failover in either cluster while a move catches up (after the copy,
// before the cutover) moves one end of the move connection. The daemon
// calls these when its failover of the source or target cluster has
// finished, then updates the plan's Source or Target primary and resumes.

// FollowSource points the move connection on the target at the source
// cluster's new primary. MASTER_USE_GTID=slave_pos makes it go on from
// the target's own gtid_slave_pos: GTIDs are the same on every server of
// the source cluster (one domain, log_slave_updates), so the new primary
// serves the position the old one was serving.
func FollowSource(ctx context.Context, dial Dialer, j Journal, target, newSource Server, repl Account, sourceDomain uint32) error {
	if j.Flipped || !j.Active() || j.SnapshotGTID == "" {
		return fmt.Errorf("move of %s is %s (flipped %v): no move connection to repoint", j.Schema, j.State, j.Flipped)
	}
	return repoint(ctx, dial, target, MoveConnection(j.Schema), newSource, repl, sourceDomain)
}

// RecreateOnTarget creates the move connection on the target cluster's
// new primary. The connection of the old primary is gone with it, and
// the new primary's gtid_slave_pos for the source's domain does not say
// what the old one applied; its binary log does: the old primary applied
// the move connection's transactions with log_slave_updates, so they
// reached the new primary with the source's domain and GTIDs (checked in
// TestRealMoveFailovers). So the connection starts at the new primary's
// @@gtid_binlog_pos (or gtid_slave_pos, whichever is further) in the
// source's domain, and at the snapshot if neither has the domain yet —
// exactly what startPos gives. Transactions the source's filter skipped
// are not in any binary log, so the new primary asks for them again and
// skips them again: nothing is applied twice, nothing is missed.
func RecreateOnTarget(ctx context.Context, dial Dialer, j Journal, newTarget, source Server, repl Account, sourceDomain uint32) (topology.GTIDPos, error) {
	if j.Flipped || !j.Active() || j.SnapshotGTID == "" {
		return nil, fmt.Errorf("move of %s is %s (flipped %v): no move connection to recreate", j.Schema, j.State, j.Flipped)
	}
	at, err := topology.ParseGTIDPos(j.SnapshotGTID)
	if err != nil {
		return nil, err
	}
	return recreate(ctx, dial, newTarget, MoveConnection(j.Schema), source, repl, sourceDomain, at, j.Schema)
}

// The reverse connection (a move made with Request.Reverse, after its
// cutover) lives on the source cluster's primary and replicates from the
// target's. A failover of either cluster moves one of its ends, as for
// the move connection before the cutover.

// FollowTargetBack points the reverse connection on the source's primary
// at the target cluster's new primary (by GTID, as FollowSource).
func FollowTargetBack(ctx context.Context, dial Dialer, j Journal, source, newTarget Server, repl Account, targetDomain uint32) error {
	if err := reverseLive(j); err != nil {
		return err
	}
	return repoint(ctx, dial, source, BackConnection(j.Schema), newTarget, repl, targetDomain)
}

// RecreateBack creates the reverse connection on the source cluster's
// new primary: from the target's position at the cutover, raised to what
// the new primary's binary log already has of the target's domain (the
// old primary applied it with log_slave_updates), as RecreateOnTarget.
func RecreateBack(ctx context.Context, dial Dialer, j Journal, newSource, target Server, repl Account, targetDomain uint32) (topology.GTIDPos, error) {
	if err := reverseLive(j); err != nil {
		return nil, err
	}
	cut, err := topology.ParseGTIDPos(j.CutoverGTID)
	if err != nil {
		return nil, err
	}
	at := onlyDomain(cut, targetDomain)
	if len(at) == 0 {
		return nil, fmt.Errorf("the target's position at the cutover %q has no GTID of its domain %d", j.CutoverGTID, targetDomain)
	}
	return recreate(ctx, dial, newSource, BackConnection(j.Schema), target, repl, targetDomain, at, j.Schema)
}

func reverseLive(j Journal) error {
	if !j.Reverse || !j.Flipped || j.State != StateDone {
		return fmt.Errorf("move of %s is %s (reverse %v): no reverse connection", j.Schema, j.State, j.Reverse)
	}
	return nil
}

// repoint points connection conn on server `on` at master, by GTID.
func repoint(ctx context.Context, dial Dialer, on Server, conn string, master Server, repl Account, domain uint32) error {
	db, err := dial(on.Addr(), on.User, on.Password)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := stopIfExists(ctx, db, conn); err != nil {
		return err
	}
	if err := db.Exec(ctx, sqlChangeMaster(conn, master, repl, domain)); err != nil {
		return fmt.Errorf("CHANGE MASTER '%s' to %s: %w", conn, master.Addr(), err)
	}
	if err := db.Exec(ctx, sqlStartSlave(conn)); err != nil {
		return fmt.Errorf("START SLAVE '%s': %w", conn, err)
	}
	return waitRunning(ctx, db, conn, defaultStartWait)
}

// recreate creates connection conn on server `on` from master, filtered
// to schema, starting at `at` in master's domain (startConnection).
func recreate(ctx context.Context, dial Dialer, on Server, conn string, master Server, repl Account, domain uint32, at topology.GTIDPos, schema string) (topology.GTIDPos, error) {
	mdb, err := dial(master.Addr(), master.User, master.Password)
	if err != nil {
		return nil, err
	}
	defer mdb.Close()
	mpos, err := binlogPos(ctx, mdb, master.Addr())
	if err != nil {
		return nil, err
	}
	db, err := dial(on.Addr(), on.User, on.Password)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	pos, err := startConnection(ctx, db, conn, master, repl, domain, at, schema, mpos)
	if err != nil {
		return nil, err
	}
	return pos, waitRunning(ctx, db, conn, defaultStartWait)
}
