package shardmove

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/topology"
)

// DB is a session with one server. Query returns the column names as its
// first row, then the rows, NULL as "". Calls are not concurrent.
type DB interface {
	Exec(ctx context.Context, sql string) error
	Query(ctx context.Context, sql string) ([][]string, error)
	Close() error
}

// Dialer opens a DB on a server.
type Dialer func(addr, user, password string) (DB, error)

// Router is the sharded listeners of every Vigil instance.
type Router interface {
	// Hold makes every instance hold (queue, not fail) new statements on
	// the schema and waits until the ones running have finished; release
	// lets them go on (to wherever the map then says).
	Hold(ctx context.Context, schema string) (release func(), err error)
	// Flip routes the schema to cluster `to` on every instance (a new
	// version of the shard map).
	Flip(ctx context.Context, schema, to string) error
}

// Tools copies a schema between servers.
type Tools interface {
	// DumpLoad copies the schema (tables, routines, triggers, events) as
	// one consistent snapshot from `from` into `to`, and returns the
	// snapshot's GTID position as `from` recorded it.
	DumpLoad(ctx context.Context, from, to Server, schema string) (snapshotGTID string, err error)
}

// Deps are what Run reaches the world through.
type Deps struct {
	Dial   Dialer
	Router Router
	Tools  Tools
	// CutoverWait bounds how long the cutover holds writes waiting for
	// the target; 0 means 5s.
	CutoverWait time.Duration
	// VerifyWait bounds how long the verify step holds writes waiting for
	// the target; 0 means 60s.
	VerifyWait time.Duration
	// StartWait bounds how long catch-up waits for a new connection to
	// run; 0 means 10s.
	StartWait time.Duration
	// Now is the clock of the journal's times; nil means time.Now.
	Now func() time.Time
}

func (d Deps) withDefaults() Deps {
	if d.CutoverWait == 0 {
		d.CutoverWait = 5 * time.Second
	}
	if d.VerifyWait == 0 {
		d.VerifyWait = 60 * time.Second
	}
	if d.StartWait == 0 {
		d.StartWait = defaultStartWait
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return d
}

const defaultStartWait = 10 * time.Second

// ErrChecksum is a verify step that found the copies different.
var ErrChecksum = errors.New("copies differ")

// ErrCutoverTimeout is a cutover that gave up waiting for the target.
var ErrCutoverTimeout = errors.New("target did not catch up in time")

// Run runs the plan from the journal's step on, saving the journal
// before and after every step (a save error stops the run: a move nobody
// can resume must not go on). j of a plan that has not started is
// NewJournal(plan) or the zero Journal. Running a failed journal again
// retries its failed step; a finished one does nothing.
func Run(ctx context.Context, plan Plan, deps Deps, j *Journal, save func(Journal) error) error {
	deps = deps.withDefaults()
	if len(j.Steps) == 0 {
		*j = NewJournal(plan)
	}
	switch j.State {
	case StateDone, StateCleaned, StateAborted:
		return nil
	case StateWaiting:
		if !j.CutoverAsked {
			return nil
		}
	}
	if !slices.Equal(j.Steps, NewJournal(plan).Steps) || j.Schema != plan.Request.Schema {
		return fmt.Errorf("the journal (%s of %s: %v) does not belong to the plan (%s of %s)", j.Kind, j.Schema, j.Steps, plan.Kind, plan.Request.Schema)
	}
	j.State, j.Error = StateRunning, ""
	x := &executor{plan: plan, deps: deps, j: j}
	defer x.close()
	for j.Step < len(plan.Steps) {
		if j.waits(plan, j.Step) {
			j.State = StateWaiting
			return save(*j)
		}
		st := plan.Steps[j.Step]
		j.Results = append(j.Results, StepResult{Name: st.Name, Started: deps.Now()})
		if err := save(*j); err != nil {
			return fmt.Errorf("save journal: %w", err)
		}
		detail, err := x.step(ctx, st.Name)
		r := &j.Results[len(j.Results)-1]
		r.Finished, r.Detail = deps.Now(), detail
		if err != nil {
			err = fmt.Errorf("%s: %w", st.Name, err)
			r.Error = err.Error()
			j.State, j.Error = StateFailed, err.Error()
			if serr := save(*j); serr != nil {
				return errors.Join(err, fmt.Errorf("save journal: %w", serr))
			}
			return err
		}
		j.Step++
		if err := save(*j); err != nil {
			return fmt.Errorf("save journal: %w", err)
		}
	}
	switch plan.Kind {
	case KindCleanup:
		j.State = StateCleaned
	case KindAbort:
		j.State = StateAborted
	case KindRollback:
		j.State = StateRolledBack
	default:
		j.State = StateDone
	}
	return save(*j)
}

// executor runs the steps of one plan; it dials each primary once.
type executor struct {
	plan     Plan
	deps     Deps
	j        *Journal
	src, dst DB
}

func (x *executor) close() {
	for _, db := range []DB{x.src, x.dst} {
		if db != nil {
			_ = db.Close()
		}
	}
}

func (x *executor) source() (DB, error) { return x.primary(x.plan.Source, &x.src) }
func (x *executor) target() (DB, error) { return x.primary(x.plan.Target, &x.dst) }

// primary is the session with c's primary, dialed the first time.
func (x *executor) primary(c Cluster, db *DB) (DB, error) {
	if *db == nil {
		s := c.Primary
		d, err := x.deps.Dial(s.Addr(), s.User, s.Password)
		if err != nil {
			return nil, fmt.Errorf("connect to %s's primary %s: %w", c.Name, s.Addr(), err)
		}
		*db = d
	}
	return *db, nil
}

func (x *executor) both() (src, dst DB, err error) {
	if src, err = x.source(); err != nil {
		return nil, nil, err
	}
	if dst, err = x.target(); err != nil {
		return nil, nil, err
	}
	return src, dst, nil
}

func (x *executor) step(ctx context.Context, k StepKind) (string, error) {
	switch k {
	case StepCheck:
		return x.check(ctx)
	case StepCopy:
		return x.copy(ctx)
	case StepCatchUp:
		return x.catchUp(ctx)
	case StepVerify:
		return x.verify(ctx)
	case StepCutover:
		return x.cutover(ctx)
	case StepReverse:
		return x.reverse(ctx)
	case StepResetConnections:
		return x.resetConnections(ctx)
	case StepDropSource:
		return x.dropSource(ctx)
	case StepDropTarget:
		return x.dropTarget(ctx)
	case StepRollback:
		return x.rollback(ctx)
	}
	return "", fmt.Errorf("unknown step %q", k)
}

// check reads on the servers what Decide was told.
func (x *executor) check(ctx context.Context) (string, error) {
	src, dst, err := x.both()
	if err != nil {
		return "", err
	}
	p, schema := x.plan, x.plan.Request.Schema
	sd, err := serverFacts(ctx, src)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.Source.Name, err)
	}
	td, err := serverFacts(ctx, dst)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.Target.Name, err)
	}
	s, t := p.Source, p.Target
	s.DomainID, t.DomainID = sd.domain, td.domain
	if s.HasSchema, err = schemaExists(ctx, src, schema); err != nil {
		return "", err
	}
	if t.HasSchema, err = schemaExists(ctx, dst, schema); err != nil {
		return "", err
	}
	if _, err := Decide(Request{Schema: schema, From: s.Name, To: t.Name}, s, t, nil); err != nil {
		return "", err
	}
	if !sd.logBin || !td.logBin || !td.logSlaveUpdates {
		return "", fmt.Errorf("binary logs: %s log_bin=%v, %s log_bin=%v log_slave_updates=%v; the move needs all three on (the target's replicas and a target failover depend on the applied transactions being in its binary log)",
			s.Name, sd.logBin, t.Name, td.logBin, td.logSlaveUpdates)
	}
	rows, err := dst.Query(ctx, sqlAllSlaves)
	if err != nil {
		return "", fmt.Errorf("%s: %w", sqlAllSlaves, err)
	}
	conns := byName(rows)
	conn := MoveConnection(schema)
	for _, c := range conns {
		name := c["Connection_name"]
		if strings.EqualFold(name, conn) {
			return "", fmt.Errorf("%s already has a replication connection '%s' (a move that was not cleaned up?)", t.Name, conn)
		}
		if c["Master_Host"] != "" && net.JoinHostPort(c["Master_Host"], c["Master_Port"]) == s.Primary.Addr() {
			return "", fmt.Errorf("%s's primary already replicates from %s's primary %s in connection '%s', and MariaDB allows one connection per source server (error 1934): "+
				"let the move that owns it finish (or abort it), or remove the connection (STOP SLAVE '%s'; RESET SLAVE '%s' ALL)", t.Name, s.Name, s.Primary.Addr(), name, name, name)
		}
	}
	return fmt.Sprintf("domains %d and %d; %d other connection(s) on %s", sd.domain, td.domain, len(conns), t.Name), nil
}

// copy dumps and loads. A failed copy drops what it loaded: the target's
// schema did not exist before (check) and never served.
func (x *executor) copy(ctx context.Context) (string, error) {
	dst, err := x.target()
	if err != nil {
		return "", err
	}
	p, schema := x.plan, x.plan.Request.Schema
	// The check step found no schema on the target; one there now is an
	// earlier attempt's partial copy whose cleanup failed (the target's
	// primary died during the load and a replica that had part of it
	// took over): it never served.
	if err := x.dropTargetCopy(ctx, dst); err != nil {
		return "", err
	}
	start := time.Now()
	raw, err := x.deps.Tools.DumpLoad(ctx, p.Source.snapshotServer(), p.Target.Primary, schema)
	if err == nil {
		err = x.recordSnapshot(raw)
	}
	if err != nil {
		if derr := x.dropTargetCopy(ctx, dst); derr != nil {
			return "", errors.Join(err, derr)
		}
		return "", fmt.Errorf("%w (the partial copy on %s was dropped; routing is untouched)", err, p.Target.Name)
	}
	return fmt.Sprintf("snapshot at %s, copied in %s", x.j.SnapshotGTID, time.Since(start).Round(time.Millisecond)), nil
}

func (x *executor) recordSnapshot(raw string) error {
	pos, err := topology.ParseGTIDPos(raw)
	if err != nil {
		return fmt.Errorf("snapshot GTID: %w", err)
	}
	d := x.plan.Source.DomainID
	g, ok := gtidOf(pos, d)
	if !ok {
		return fmt.Errorf("the snapshot's position %q has no GTID of %s's domain %d", raw, x.plan.Source.Name, d)
	}
	x.j.SnapshotGTID = g.String()
	return nil
}

// dropTargetCopy drops the target's copy even when ctx is cancelled: it
// is the cleanup of a failure, possibly of the cancellation itself.
func (x *executor) dropTargetCopy(ctx context.Context, dst DB) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := dst.Exec(ctx, sqlDropDatabase(x.plan.Request.Schema)); err != nil {
		return fmt.Errorf("drop the partial copy on %s: %w", x.plan.Target.Name, err)
	}
	return nil
}

// catchUp creates the move connection and starts it at the snapshot. Run
// again (resume), it recreates the connection without moving its domain's
// position backwards (startPos).
func (x *executor) catchUp(ctx context.Context) (string, error) {
	dst, err := x.target()
	if err != nil {
		return "", err
	}
	at, err := topology.ParseGTIDPos(x.j.SnapshotGTID)
	if err != nil || len(at) == 0 {
		return "", fmt.Errorf("no snapshot GTID in the journal (%q): the copy did not finish", x.j.SnapshotGTID)
	}
	p := x.plan
	src, err := x.source()
	if err != nil {
		return "", err
	}
	master, err := binlogPos(ctx, src, p.Source.Name)
	if err != nil {
		return "", err
	}
	pos, err := startConnection(ctx, dst, MoveConnection(p.Request.Schema), p.Source.Primary, p.Source.Repl, p.Source.DomainID, at, p.Request.Schema, master)
	if err != nil {
		return "", err
	}
	if err := waitRunning(ctx, dst, MoveConnection(p.Request.Schema), x.deps.StartWait); err != nil {
		return "", err
	}
	return fmt.Sprintf("'%s' runs from %s (gtid_slave_pos %s)", MoveConnection(p.Request.Schema), p.Source.Primary.Addr(), pos), nil
}

// startConnection (re)creates connection conn on db from primary `from`
// with the schema filter, sets gtid_slave_pos so that domain `domain`
// starts at `at`, and starts it.
func startConnection(ctx context.Context, db DB, conn string, from Server, repl Account, domain uint32, at topology.GTIDPos, schema string, masterBinlog topology.GTIDPos) (topology.GTIDPos, error) {
	if err := stopIfExists(ctx, db, conn); err != nil {
		return nil, err
	}
	if err := db.Exec(ctx, sqlChangeMaster(conn, from, repl, domain)); err != nil {
		return nil, fmt.Errorf("CHANGE MASTER '%s': %w", conn, err)
	}
	if err := db.Exec(ctx, sqlFilter(conn, schema)); err != nil {
		return nil, fmt.Errorf("filter '%s': %w", conn, err)
	}
	slave, binlog, err := positions(ctx, db)
	if err != nil {
		return nil, err
	}
	pos, err := startPos(slave, binlog, domain, at)
	if err != nil {
		return nil, err
	}
	pos, lowered := meetMaster(pos, masterBinlog, domain)
	// gtid_slave_pos is global: every connection of the server must be
	// stopped to set it (error 1198 names the running one).
	if err := setSlavePos(ctx, db, pos, lowered); err != nil {
		return nil, fmt.Errorf("set gtid_slave_pos %s: %w", pos, err)
	}
	if err := db.Exec(ctx, sqlStartSlave(conn)); err != nil {
		return nil, fmt.Errorf("START SLAVE '%s': %w", conn, err)
	}
	return pos, nil
}

// setSlavePos sets gtid_slave_pos; relax: an entry is below the server's
// binary log (meetMaster), so gtid_strict_mode, if on, is turned off for
// the SET alone and on again (it is global only).
func setSlavePos(ctx context.Context, db DB, pos topology.GTIDPos, relax bool) error {
	if !relax {
		err := db.Exec(ctx, sqlSetSlavePos(pos))
		if !isGTIDConflict(err) {
			return err
		}
		// The server committed a transaction of its own domain between
		// the read of its binary log position and the SET (a primary
		// under write load): its own domain's entry is now below its
		// binary log, which is harmless (the binary log wins for its
		// own domain) but refused by gtid_strict_mode.
	}
	rows, err := db.Query(ctx, sqlStrictMode)
	if err != nil {
		return fmt.Errorf("read gtid_strict_mode: %w", err)
	}
	strict, err := cell(rows, 0)
	if err != nil {
		return err
	}
	if strict != "1" {
		return db.Exec(ctx, sqlSetSlavePos(pos))
	}
	if err := db.Exec(ctx, "SET GLOBAL gtid_strict_mode = 0"); err != nil {
		return fmt.Errorf("turn gtid_strict_mode off for the SET: %w", err)
	}
	err = db.Exec(ctx, sqlSetSlavePos(pos))
	if rerr := db.Exec(context.WithoutCancel(ctx), "SET GLOBAL gtid_strict_mode = 1"); rerr != nil {
		err = errors.Join(err, fmt.Errorf("gtid_strict_mode could not be turned on again (SET GLOBAL gtid_strict_mode = 1 by hand): %w", rerr))
	}
	return err
}

// isGTIDConflict: MariaDB refused a gtid_slave_pos older than the binary
// log (1947) or without a domain it holds (1948) under gtid_strict_mode.
func isGTIDConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1947 || me.Number == 1948)
}

// binlogPos is a server's @@gtid_binlog_pos.
func binlogPos(ctx context.Context, db DB, name string) (topology.GTIDPos, error) {
	rows, err := db.Query(ctx, sqlBinlogPos)
	if err != nil {
		return nil, fmt.Errorf("read %s's gtid_binlog_pos: %w", name, err)
	}
	raw, err := cell(rows, 0)
	if err != nil {
		return nil, err
	}
	return topology.ParseGTIDPos(raw)
}

// verify compares every table while the schema's writes are held and the
// target has applied everything the source wrote.
func (x *executor) verify(ctx context.Context) (detail string, err error) {
	src, dst, err := x.both()
	if err != nil {
		return "", err
	}
	p, schema, conn := x.plan, x.plan.Request.Schema, MoveConnection(x.plan.Request.Schema)
	// Writes are held only until both sides are at the same point: the
	// target caught up and its connection stopped (it is frozen for the
	// schema), the source in a consistent snapshot (CHECKSUM TABLE reads
	// InnoDB rows in the transaction's read view). The compare, which
	// takes as long as reading the schema, runs after the release.
	x.catchUpFirst(ctx, src, p.Source, dst, p.Target.Name)
	held := time.Now()
	hold, err := x.deps.Router.Hold(ctx, schema)
	if err != nil {
		return "", fmt.Errorf("hold %s: %w", schema, err)
	}
	release := sync.OnceFunc(hold)
	defer release()
	if err := x.waitApplied(ctx, src, dst, x.deps.VerifyWait); err != nil {
		return "", err
	}
	if err := dst.Exec(ctx, sqlStopSlave(conn)); err != nil {
		return "", fmt.Errorf("STOP SLAVE '%s' for the compare: %w", conn, err)
	}
	defer func() {
		// The target follows the source again, whatever the compare found.
		if serr := dst.Exec(context.WithoutCancel(ctx), sqlStartSlave(conn)); serr != nil && err == nil {
			err = fmt.Errorf("START SLAVE '%s' after the compare: %w", conn, serr)
		}
	}()
	if err := src.Exec(ctx, sqlSnapshot); err != nil {
		return "", fmt.Errorf("%s: %s: %w", p.Source.Name, sqlSnapshot, err)
	}
	defer func() { _ = src.Exec(context.WithoutCancel(ctx), "COMMIT") }()
	release()
	heldFor := time.Since(held).Round(time.Millisecond)
	t0 := time.Now()
	st, err := tableSums(ctx, src, schema)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.Source.Name, err)
	}
	tt, err := tableSums(ctx, dst, schema)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.Target.Name, err)
	}
	if diff := diffSums(st, tt); diff != "" {
		return "", fmt.Errorf("%w: %s (the move stops before the cutover; routing is untouched, the connection keeps running for inspection)", ErrChecksum, diff)
	}
	var rows int64
	for _, s := range st {
		rows += s.count
	}
	return fmt.Sprintf("%d tables, %d rows, checksums equal (compared in %s); writes held %s to line the copies up",
		len(st), rows, time.Since(t0).Round(time.Millisecond), heldFor), nil
}

// catchUpFirst waits, without holding anything, until the follower has
// applied what the leader wrote so far (at most VerifyWait): what a hold
// then waits for is only what was written meanwhile, not a copy's worth of
// catch-up (or a connection's reconnect after the compare). Best effort:
// the wait under the hold is the one that counts.
func (x *executor) catchUpFirst(ctx context.Context, leader DB, from Cluster, follower DB, to string) {
	_ = waitApplied(ctx, leader, from, follower, to, x.deps.VerifyWait)
}

// waitApplied waits until the target has applied the source primary's
// binary log in the source's domain.
func (x *executor) waitApplied(ctx context.Context, src, dst DB, timeout time.Duration) error {
	return waitApplied(ctx, src, x.plan.Source, dst, x.plan.Target.Name, timeout)
}

// waitApplied waits until `to` has applied what `from`'s primary wrote
// in from's domain.
func waitApplied(ctx context.Context, src DB, from Cluster, dst DB, to string, timeout time.Duration) error {
	bp, err := binlogPos(ctx, src, from.Name)
	if err != nil {
		return err
	}
	want := onlyDomain(bp, from.DomainID)
	if len(want) == 0 {
		return nil
	}
	rows, err := dst.Query(ctx, sqlWait(want, timeout))
	if err != nil {
		return fmt.Errorf("MASTER_GTID_WAIT on %s: %w", to, err)
	}
	v, err := cell(rows, 0)
	if err != nil {
		return err
	}
	if v != "0" {
		return fmt.Errorf("%w: %s did not apply %s within %s", ErrCutoverTimeout, to, want, timeout)
	}
	return nil
}

// switchover is a cutover in either direction: the connection conn on
// follower copies leader's writes to the schema; route the schema from
// leader's cluster to follower's.
type switchover struct {
	conn             string
	leader, follower DB
	from             Cluster // the leader's cluster (its domain is waited on)
	to               string  // the follower's cluster
	// beforeFlip runs once the connection stopped (the cutover records
	// the target's position there).
	beforeFlip func() error
}

// switchTraffic holds the schema, makes sure the connection runs (one
// interrupted after its STOP SLAVE by a dead instance was left stopped; a
// running one only notes 1254), waits (bounded) until the follower applied
// the leader's writes, stops the connection, flips, releases and removes
// the connection. Until the flip, a failure leaves the connection running
// and routing untouched. held counts from the hold's start: with several
// instances statements wait from when each one took its part.
func (x *executor) switchTraffic(ctx context.Context, sw switchover) (held time.Duration, left string, err error) {
	schema := x.plan.Request.Schema
	_ = sw.follower.Exec(ctx, sqlStartSlave(sw.conn)) // checked again under the hold
	x.catchUpFirst(ctx, sw.leader, sw.from, sw.follower, sw.to)
	t0 := time.Now()
	hold, err := x.deps.Router.Hold(ctx, schema)
	if err != nil {
		return 0, "", fmt.Errorf("hold %s: %w", schema, err)
	}
	release := sync.OnceFunc(hold)
	defer release()
	if err := sw.follower.Exec(ctx, sqlStartSlave(sw.conn)); err != nil {
		return 0, "", fmt.Errorf("START SLAVE '%s' on %s: %w; routing untouched", sw.conn, sw.to, err)
	}
	if err := waitApplied(ctx, sw.leader, sw.from, sw.follower, sw.to, x.deps.CutoverWait); err != nil {
		return 0, "", fmt.Errorf("%w; released, routing untouched", err)
	}
	if err := sw.follower.Exec(ctx, sqlStopSlave(sw.conn)); err != nil {
		return 0, "", fmt.Errorf("STOP SLAVE '%s': %w; routing untouched", sw.conn, err)
	}
	if sw.beforeFlip != nil {
		err = sw.beforeFlip()
	}
	if err == nil {
		err = x.deps.Router.Flip(ctx, schema, sw.to)
	}
	if err != nil {
		if serr := sw.follower.Exec(context.WithoutCancel(ctx), sqlStartSlave(sw.conn)); serr != nil {
			err = errors.Join(err, fmt.Errorf("START SLAVE '%s' again: %w", sw.conn, serr))
		}
		return 0, "", fmt.Errorf("flip %s to %s: %w; routing untouched", schema, sw.to, err)
	}
	held = time.Since(t0).Round(time.Millisecond)
	release()
	// The stopped connection has done its work. Removed now, it does not
	// block the next move between the same two primaries: MariaDB allows
	// one connection per source server (error 1934).
	if err := removeConnection(context.WithoutCancel(ctx), sw.follower, sw.conn); err != nil {
		left = fmt.Sprintf("; '%s' stays, stopped (%v): cleanup removes it", sw.conn, err)
	}
	return held, left, nil
}

// rollback routes a moved schema back to its old cluster over the
// reverse connection.
func (x *executor) rollback(ctx context.Context) (string, error) {
	src, dst, err := x.both()
	if err != nil {
		return "", err
	}
	p := x.plan
	held, left, err := x.switchTraffic(ctx, switchover{conn: BackConnection(p.Request.Schema), leader: dst, follower: src, from: p.Target, to: p.Source.Name})
	if err != nil {
		return "", err
	}
	x.j.Flipped = false
	return fmt.Sprintf("%s -> %s; writes held %s; the copy on %s no longer serves%s", p.Request.Schema, p.Source.Name, held, p.Target.Name, left), nil
}

// cutover routes the schema to the target over the move connection; the
// target's position when the connection stopped is where the reverse
// connection starts.
func (x *executor) cutover(ctx context.Context) (string, error) {
	src, dst, err := x.both()
	if err != nil {
		return "", err
	}
	p := x.plan
	record := func() error {
		rows, err := dst.Query(ctx, sqlBinlogPos)
		if err == nil {
			x.j.CutoverGTID, err = cell(rows, 0)
		}
		return err
	}
	held, left, err := x.switchTraffic(ctx, switchover{conn: MoveConnection(p.Request.Schema), leader: src, follower: dst, from: p.Source, to: p.Target.Name, beforeFlip: record})
	if err != nil {
		return "", err
	}
	x.j.Flipped = true
	return fmt.Sprintf("%s -> %s; writes held %s; target at %s%s", p.Request.Schema, p.Target.Name, held, x.j.CutoverGTID, left), nil
}

// reverse starts the connection from the target back to the source at
// the target's position at cutover, in the target's domain.
func (x *executor) reverse(ctx context.Context) (string, error) {
	src, err := x.source()
	if err != nil {
		return "", err
	}
	p := x.plan
	cut, err := topology.ParseGTIDPos(x.j.CutoverGTID)
	if err != nil {
		return "", err
	}
	at := onlyDomain(cut, p.Target.DomainID)
	if len(at) == 0 {
		return "", fmt.Errorf("the target's position at cutover %q has no GTID of its domain %d", x.j.CutoverGTID, p.Target.DomainID)
	}
	conn := BackConnection(p.Request.Schema)
	dst, err := x.target()
	if err != nil {
		return "", err
	}
	master, err := binlogPos(ctx, dst, p.Target.Name)
	if err != nil {
		return "", err
	}
	pos, err := startConnection(ctx, src, conn, p.Target.Primary, p.Target.Repl, p.Target.DomainID, at, p.Request.Schema, master)
	if err != nil {
		return "", err
	}
	if err := waitRunning(ctx, src, conn, x.deps.StartWait); err != nil {
		return "", err
	}
	return fmt.Sprintf("'%s' runs from %s (gtid_slave_pos %s)", conn, p.Target.Primary.Addr(), pos), nil
}

func (x *executor) resetConnections(ctx context.Context) (string, error) {
	dst, err := x.target()
	if err != nil {
		return "", err
	}
	schema := x.plan.Request.Schema
	if err := removeConnection(ctx, dst, MoveConnection(schema)); err != nil {
		return "", err
	}
	if !x.plan.Request.Reverse {
		return "", nil
	}
	src, err := x.source()
	if err != nil {
		return "", err
	}
	return "", removeConnection(ctx, src, BackConnection(schema))
}

func (x *executor) dropSource(ctx context.Context) (string, error) {
	src, err := x.source()
	if err != nil {
		return "", err
	}
	return "", src.Exec(ctx, sqlDropDatabase(x.plan.Request.Schema))
}

func (x *executor) dropTarget(ctx context.Context) (string, error) {
	dst, err := x.target()
	if err != nil {
		return "", err
	}
	if err := removeConnection(ctx, dst, MoveConnection(x.plan.Request.Schema)); err != nil {
		return "", err
	}
	return "", x.dropTargetCopy(ctx, dst)
}

// removeConnection stops and forgets a connection; a missing one is
// already removed.
func removeConnection(ctx context.Context, db DB, conn string) error {
	if err := stopIfExists(ctx, db, conn); err != nil {
		return err
	}
	conns, err := connections(ctx, db)
	if err != nil {
		return err
	}
	for _, c := range conns {
		if strings.EqualFold(c, conn) {
			if err := db.Exec(ctx, sqlResetSlaveAll(conn)); err != nil {
				return fmt.Errorf("RESET SLAVE '%s' ALL: %w", conn, err)
			}
		}
	}
	return nil
}

func stopIfExists(ctx context.Context, db DB, conn string) error {
	conns, err := connections(ctx, db)
	if err != nil {
		return err
	}
	for _, c := range conns {
		if strings.EqualFold(c, conn) {
			if err := db.Exec(ctx, sqlStopSlave(conn)); err != nil {
				return fmt.Errorf("STOP SLAVE '%s': %w", conn, err)
			}
		}
	}
	return nil
}

type facts struct {
	domain                  uint32
	logBin, logSlaveUpdates bool
}

func serverFacts(ctx context.Context, db DB) (facts, error) {
	rows, err := db.Query(ctx, sqlServerFacts)
	if err != nil {
		return facts{}, err
	}
	if len(rows) < 2 || len(rows[1]) < 3 {
		return facts{}, fmt.Errorf("%s: no row", sqlServerFacts)
	}
	d, err := strconv.ParseUint(rows[1][0], 10, 32)
	if err != nil {
		return facts{}, fmt.Errorf("gtid_domain_id %q: %w", rows[1][0], err)
	}
	on := func(s string) bool { return s == "1" || strings.EqualFold(s, "ON") }
	return facts{domain: uint32(d), logBin: on(rows[1][1]), logSlaveUpdates: on(rows[1][2])}, nil
}

func schemaExists(ctx context.Context, db DB, schema string) (bool, error) {
	rows, err := db.Query(ctx, sqlSchemaExists(schema))
	if err != nil {
		return false, err
	}
	v, err := cell(rows, 0)
	return v != "0" && v != "", err
}

// connections are the names of a server's replication connections.
func connections(ctx context.Context, db DB) ([]string, error) {
	rows, err := db.Query(ctx, sqlAllSlaves)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sqlAllSlaves, err)
	}
	var out []string
	for _, r := range byName(rows) {
		out = append(out, r["Connection_name"])
	}
	return out, nil
}

func positions(ctx context.Context, db DB) (slave, binlog topology.GTIDPos, err error) {
	rows, err := db.Query(ctx, sqlGTIDPositions)
	if err != nil {
		return nil, nil, err
	}
	if len(rows) < 2 || len(rows[1]) < 2 {
		return nil, nil, fmt.Errorf("%s: no row", sqlGTIDPositions)
	}
	if slave, err = topology.ParseGTIDPos(rows[1][0]); err != nil {
		return nil, nil, err
	}
	if binlog, err = topology.ParseGTIDPos(rows[1][1]); err != nil {
		return nil, nil, err
	}
	return slave, binlog, nil
}

// waitRunning waits until both threads of a connection run, and fails at
// once on a replication error.
func waitRunning(ctx context.Context, db DB, conn string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		rows, err := db.Query(ctx, sqlSlaveStatus(conn))
		if err != nil {
			return fmt.Errorf("SHOW SLAVE '%s' STATUS: %w", conn, err)
		}
		st := byName(rows)
		if len(st) == 0 {
			return fmt.Errorf("connection '%s' is gone", conn)
		}
		s := st[0]
		for _, k := range []string{"Last_IO_Error", "Last_SQL_Error"} {
			if s[k] != "" {
				return fmt.Errorf("connection '%s': %s", conn, s[k])
			}
		}
		if s["Slave_IO_Running"] == "Yes" && s["Slave_SQL_Running"] == "Yes" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connection '%s' not running after %s (IO %s, SQL %s)", conn, timeout, s["Slave_IO_Running"], s["Slave_SQL_Running"])
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type tableSum struct {
	table    string
	checksum string
	count    int64
}

func tableSums(ctx context.Context, db DB, schema string) ([]tableSum, error) {
	rows, err := db.Query(ctx, sqlTables(schema))
	if err != nil {
		return nil, err
	}
	var out []tableSum
	for _, r := range rows[min(1, len(rows)):] {
		t := r[0]
		cs, err := db.Query(ctx, sqlChecksum(schema, t))
		if err != nil {
			return nil, fmt.Errorf("CHECKSUM TABLE %s: %w", t, err)
		}
		if len(cs) < 2 || len(cs[1]) < 2 {
			return nil, fmt.Errorf("CHECKSUM TABLE %s: no row", t)
		}
		cnt, err := db.Query(ctx, sqlCount(schema, t))
		if err != nil {
			return nil, fmt.Errorf("COUNT(*) %s: %w", t, err)
		}
		v, err := cell(cnt, 0)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("COUNT(*) %s: %q", t, v)
		}
		out = append(out, tableSum{table: t, checksum: cs[1][1], count: n})
	}
	return out, nil
}

// diffSums says how two schemas' tables differ, "" when they do not.
func diffSums(a, b []tableSum) string {
	var d []string
	m := map[string]tableSum{}
	for _, t := range b {
		m[t.table] = t
	}
	for _, s := range a {
		t, ok := m[s.table]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("table %s missing on the target", s.table))
		case s.count != t.count:
			d = append(d, fmt.Sprintf("table %s: %d rows on the source, %d on the target", s.table, s.count, t.count))
		case s.checksum != t.checksum:
			d = append(d, fmt.Sprintf("table %s: checksum %s on the source, %s on the target", s.table, s.checksum, t.checksum))
		}
		delete(m, s.table)
	}
	for _, t := range slices.Sorted(maps.Keys(m)) {
		d = append(d, fmt.Sprintf("table %s only on the target", t))
	}
	return strings.Join(d, "; ")
}

// cell is column i of the first row after the header.
func cell(rows [][]string, i int) (string, error) {
	if len(rows) < 2 || len(rows[1]) <= i {
		return "", errors.New("no row")
	}
	return rows[1][i], nil
}

// byName turns rows under a header into maps by column name.
func byName(rows [][]string) []map[string]string {
	if len(rows) < 2 {
		return nil
	}
	out := make([]map[string]string, 0, len(rows)-1)
	for _, r := range rows[1:] {
		m := make(map[string]string, len(r))
		for i, v := range r {
			if i < len(rows[0]) {
				m[rows[0][i]] = v
			}
		}
		out = append(out, m)
	}
	return out
}
