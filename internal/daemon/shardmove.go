package daemon

// Online moves of a schema between the clusters behind the sharded
// listener: the plan is internal/shardmove's (decided, shown by --dry-run,
// run step by step, journaled in state_dir); the daemon gives it the
// clusters as they are now and the router: the sharded listener's hold
// and the shard map's flip. docs/shards.md.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/shardmove"
)

// moves is the one move (or cleanup, or abort) at a time and the last
// one.
type moves struct {
	mu      sync.Mutex
	running *shardmove.Journal
	last    *shardmove.Journal
	lastErr string
	// cutover wakes the running move when it waits for the operator's
	// cutover (ManualCutover) and the operator asked; abort likewise
	// when the operator asked to undo it.
	cutover, abort chan struct{}
}

// moveRecord is a move's file in state_dir: the plan (without
// passwords) and its journal, so that a restarted instance can go on.
type moveRecord struct {
	Plan    shardmove.Plan    `json:"plan"`
	Journal shardmove.Journal `json:"journal"`
}

// moveFollowWait bounds how long a move whose step failed waits for a
// failover of either cluster to finish before it gives up; maxFollows
// bounds how many failovers one move follows.
const (
	moveFollowWait = 90 * time.Second
	maxFollows     = 5
)

// MoveView is GET /api/v1/shards/move.
type MoveView struct {
	Running *shardmove.Journal `json:"running,omitempty"`
	Last    *shardmove.Journal `json:"last,omitempty"`
	Error   string             `json:"error,omitempty"`
	// Owner is the instance that runs the move (coordinated moves).
	Owner string `json:"owner,omitempty"`
}

// Moves is GET /api/v1/shards/move.
func (d *daemon) Moves() any {
	running, last, owner := d.moveState(context.Background())
	d.moves.mu.Lock()
	defer d.moves.mu.Unlock()
	return MoveView{Running: running, Last: last, Error: d.moves.lastErr, Owner: owner}
}

// moveState is the running move and the last one: this instance's, or,
// with coordination, the journal in etcd (whoever owns it).
func (d *daemon) moveState(ctx context.Context) (running, last *shardmove.Journal, owner string) {
	d.moves.mu.Lock()
	running, last = d.moves.running, d.moves.last
	d.moves.mu.Unlock()
	if d.coord == nil || running != nil {
		if running != nil && d.coord != nil {
			owner = d.coord.Instance()
		}
		return running, last, owner
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	mk, err := d.coord.ReadMove(ctx)
	if err != nil || mk.Journal == nil {
		return nil, last, ""
	}
	var rec moveRecord
	if json.Unmarshal(mk.Journal, &rec) != nil {
		return nil, last, ""
	}
	j := rec.Journal
	if j.State == shardmove.StateRunning || j.State == shardmove.StateWaiting {
		return &j, last, mk.Owner
	}
	// Finished, or failed (aborted from any instance).
	return nil, &j, mk.Owner
}

// MoveShard is POST /api/v1/shards/move: a move; with Kind cleanup the
// drop of a moved schema's source copy; with Kind cutover the go-ahead
// of a move that waits for it; with Kind abort the undo of a move that
// has not cut over (waiting or failed).
func (d *daemon) MoveShard(ctx context.Context, r admin.ShardMoveRequest) (any, error) {
	sr := d.shards
	if sr == nil {
		return nil, &admin.Error{Status: http.StatusNotFound, Message: "no sharded listener is configured (shards.listen)"}
	}
	if d.running.Load().Shards.MoveUser == "" {
		return nil, &admin.Error{Status: http.StatusConflict, Message: "moves need an account on every cluster: set shards.move_user and shards.move_password (docs/shards.md lists its privileges)"}
	}
	switch r.Kind {
	case "", "move", "cleanup", "rollback":
	case "cutover", "abort":
		return d.signalMove(r)
	default:
		return nil, &admin.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("kind %q: want move, cleanup, rollback, cutover or abort", r.Kind)}
	}
	running, last, owner := d.moveState(ctx)
	if running != nil {
		by := ""
		if owner != "" {
			by = " on instance " + owner
		}
		return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("a %s of schema %s is %s%s (step %d of %d): one move at a time", running.Kind, running.Schema, running.State, by, running.Step+1, len(running.Steps))}
	}
	var from, to string
	if r.Kind == "cleanup" || r.Kind == "rollback" {
		if last == nil || last.Schema != r.Schema {
			return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("no finished move of schema %s to %s", r.Schema, map[string]string{"cleanup": "clean up", "rollback": "roll back"}[r.Kind])}
		}
		from, to = last.From, last.To
	} else {
		if last != nil && last.Schema == r.Schema && last.State == shardmove.StateFailed && !last.Flipped {
			return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("the last move of %s to %s failed (%s): its copy and connection may exist on %s; undo it first (vigil ctl shard abort %s)", r.Schema, last.To, last.Error, last.To, r.Schema)}
		}
		from, to = d.shardPlace(r.Schema), r.To
		if from == "" {
			return nil, &admin.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("schema %s is on no cluster behind the sharded listener (or on two: name it in shards.map)", r.Schema)}
		}
	}
	src, err := d.moveCluster(ctx, from, r.Schema)
	if err != nil {
		return nil, err
	}
	dst, err := d.moveCluster(ctx, to, r.Schema)
	if err != nil {
		return nil, err
	}
	var plan shardmove.Plan
	switch r.Kind {
	case "cleanup":
		plan, err = shardmove.DecideCleanup(*last, src, dst)
	case "rollback":
		plan, err = shardmove.DecideRollback(*last, src, dst)
	default:
		plan, err = shardmove.Decide(shardmove.Request{Schema: r.Schema, From: from, To: to, DryRun: r.DryRun, Reverse: r.Reverse, ManualCutover: r.ManualCutover}, src, dst, nil)
	}
	if err != nil {
		return nil, &admin.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	if r.DryRun {
		return plan, nil
	}
	if (r.Kind == "" || r.Kind == "move") && sr.srv.Map().Schemas[r.Schema] != from {
		// From the copy on, the schema is on both clusters: discovery
		// alone would find it twice and refuse it (7017). The map names
		// the source until the cutover flips it.
		if err := (moveRouter{d}).Flip(ctx, r.Schema, from); err != nil {
			return nil, &admin.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("pin %s to %s in the shard map before the copy: %v", r.Schema, from, err)}
		}
	}
	if err := d.startMove(plan, shardmove.NewJournal(plan)); err != nil {
		return nil, err
	}
	return plan, nil
}

// signalMove is the operator's cutover or abort of the running move (a
// waiting one), or the abort of the last one when it failed before the
// cutover.
func (d *daemon) signalMove(r admin.ShardMoveRequest) (any, error) {
	d.moves.mu.Lock()
	local := d.moves.running
	d.moves.mu.Unlock()
	running, last, owner := d.moveState(context.Background())
	if running != nil && running.Schema == r.Schema {
		if running.State != shardmove.StateWaiting {
			return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("the %s of %s is %s at step %d (%s), not waiting for the operator", running.Kind, r.Schema, running.State, running.Step+1, running.Steps[min(running.Step, len(running.Steps)-1)])}
		}
		if local == nil {
			// Another instance owns it: the word waits in etcd for it.
			if err := d.coord.SignalMove(context.Background(), r.Kind+" "+r.Schema); err != nil {
				return nil, &admin.Error{Status: http.StatusServiceUnavailable, Message: err.Error()}
			}
			return running, nil
		}
		ch := d.moves.cutover
		if r.Kind == "abort" {
			ch = d.moves.abort
		}
		select {
		case ch <- struct{}{}:
		default:
		}
		return running, nil
	}
	if r.Kind == "cutover" {
		return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("no move of %s waits for its cutover (vigil ctl shard move %s --to CLUSTER --manual-cutover starts one)", r.Schema, r.Schema)}
	}
	if running != nil {
		return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("a %s of schema %s is running (instance %s): one move at a time", running.Kind, running.Schema, owner)}
	}
	if last == nil || last.Schema != r.Schema || last.Kind != shardmove.KindMove || last.Flipped || last.State != shardmove.StateFailed {
		return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("no move of %s to undo: only a move that waits for its cutover or failed before it can be aborted (after the cutover, move it back)", r.Schema)}
	}
	plan, err := d.abortPlan(context.Background(), *last)
	if err != nil {
		return nil, err
	}
	if err := d.startMove(plan, shardmove.NewJournal(plan)); err != nil {
		return nil, err
	}
	return plan, nil
}

// abortPlan is the plan that undoes j's move, against the clusters now.
func (d *daemon) abortPlan(ctx context.Context, j shardmove.Journal) (shardmove.Plan, error) {
	src, err := d.moveCluster(ctx, j.From, j.Schema)
	if err != nil {
		return shardmove.Plan{}, err
	}
	dst, err := d.moveCluster(ctx, j.To, j.Schema)
	if err != nil {
		return shardmove.Plan{}, err
	}
	plan, err := shardmove.DecideAbort(j, src, dst)
	if err != nil {
		return plan, &admin.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	return plan, nil
}

// startMove makes j the running move and runs it in the background.
// With coordination this instance claims the move in etcd first (claimed:
// it already did, taking over a move whose owner is gone).
func (d *daemon) startMove(plan shardmove.Plan, j shardmove.Journal, claimed ...bool) error {
	d.moves.mu.Lock()
	if d.moves.running != nil {
		d.moves.mu.Unlock()
		return &admin.Error{Status: http.StatusConflict, Message: "another move started meanwhile"}
	}
	if d.coord != nil && len(claimed) == 0 {
		rec, _ := json.Marshal(moveRecord{Plan: plan, Journal: j})
		ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
		err := d.coord.ClaimMove(ctx, rec)
		cancel()
		if err != nil {
			d.moves.mu.Unlock()
			return &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("claiming the move in etcd: %v", err)}
		}
	}
	d.moves.running = &j
	d.moves.cutover, d.moves.abort = make(chan struct{}, 1), make(chan struct{}, 1)
	cut, abort := d.moves.cutover, d.moves.abort
	d.moves.mu.Unlock()
	r := plan.Request
	d.journal.add(admin.Event{Kind: "shard_move_started", Message: fmt.Sprintf("%s of schema %s from cluster %s to cluster %s started", plan.Kind, r.Schema, r.From, r.To)})
	d.wg.Go(func() { d.runMove(plan, &j, cut, abort) })
	return nil
}

// runMove owns a move until it ends: it runs the plan, follows a
// failover of either cluster that made a step fail (the move's primaries
// and its connection move with it, then the step runs again), and while
// a manual cutover waits it follows failovers until the operator's word.
// On shutdown the journal stays "running" in state_dir: the next start
// goes on (resumeMoves).
func (d *daemon) runMove(plan shardmove.Plan, j *shardmove.Journal, cut, abort <-chan struct{}) {
	path := movePath(d.running.Load().StateDir, plan.Request.Schema)
	save := func(cur shardmove.Journal) error {
		d.moves.mu.Lock()
		c := cur
		d.moves.running = &c
		d.moves.mu.Unlock()
		if d.coord != nil {
			data, _ := json.Marshal(moveRecord{Plan: plan, Journal: cur})
			ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
			defer cancel()
			return d.coord.SaveMove(ctx, data)
		}
		return writeJSONFile(path, moveRecord{Plan: plan, Journal: cur})
	}
	var router shardmove.Router = moveRouter{d}
	if d.coord != nil {
		router = &coordMoveRouter{d: d}
	}
	deps := shardmove.Deps{Dial: shardmove.Dial, Router: router, Tools: shardmove.Client{TempDir: d.running.Load().StateDir}}
	var err error
	for {
		err = shardmove.Run(d.ctx, plan, deps, j, save)
		if errors.Is(err, coord.ErrMoveOwned) {
			// This instance lost its lease: another one takes the move
			// over from the journal in etcd.
			d.moves.mu.Lock()
			d.moves.running = nil
			d.moves.mu.Unlock()
			d.log.Warn("this instance no longer owns the shard move (its etcd lease ended); another instance goes on from the journal", "schema", plan.Request.Schema)
			return
		}
		if d.ctx.Err() != nil {
			// Stopping: the journal says where the move was; the next
			// start resumes it.
			if j.State == shardmove.StateFailed {
				j.State, j.Error = shardmove.StateRunning, ""
				_ = save(*j)
			}
			d.log.Info("vigil stops during a shard move; the next start goes on from its journal", "schema", plan.Request.Schema, "step", j.Step, "journal", path)
			return
		}
		if err == nil && j.State == shardmove.StateWaiting {
			var aborted bool
			if plan, aborted = d.awaitCutover(plan, j, save, cut, abort); d.ctx.Err() != nil {
				return
			}
			if aborted {
				ap, aerr := d.abortPlan(d.ctx, *j)
				if aerr != nil {
					d.journal.add(admin.Event{Kind: "shard_move_failed", Message: fmt.Sprintf("abort of the move of %s: %v; it keeps waiting", plan.Request.Schema, aerr)})
					continue
				}
				// The abort's journal replaces the move's (same file): the
				// move never happened.
				plan, *j = ap, shardmove.NewJournal(ap)
				d.journal.add(admin.Event{Kind: "shard_move_started", Message: fmt.Sprintf("abort of the move of schema %s to %s started", ap.Request.Schema, ap.Request.To)})
			} else {
				j.CutoverAsked = true
			}
			continue
		}
		if err == nil || j.State != shardmove.StateFailed || j.Flipped || errors.Is(err, shardmove.ErrChecksum) || len(j.Follows) >= maxFollows {
			break
		}
		np, moved := d.awaitFailover(plan, j, save)
		if !moved {
			break
		}
		plan = np
	}
	d.finishMove(plan, j, err)
}

// finishMove records the end of a move (err nil: it did what it
// should).
func (d *daemon) finishMove(plan shardmove.Plan, j *shardmove.Journal, err error) {
	d.moves.mu.Lock()
	done := *j
	d.moves.running, d.moves.last, d.moves.lastErr = nil, &done, ""
	if err != nil {
		d.moves.lastErr = err.Error()
	}
	d.moves.mu.Unlock()
	if d.coord != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
		if rerr := d.coord.ReleaseMove(ctx); rerr != nil {
			d.log.Warn("could not end this instance's ownership of the finished move in etcd; it ends with the lease", "err", rerr)
		}
		cancel()
	}
	r := plan.Request
	kind, msg := "shard_move_done", fmt.Sprintf("%s of schema %s from %s to %s: %s", plan.Kind, r.Schema, plan.Source.Name, plan.Target.Name, j.State)
	if err != nil {
		kind, msg = "shard_move_failed", fmt.Sprintf("%s of schema %s from %s to %s stopped: %v (routing: %s)", plan.Kind, r.Schema, plan.Source.Name, plan.Target.Name, err, d.shardPlace(r.Schema))
	}
	d.journal.add(admin.Event{Kind: kind, Message: msg})
	if err == nil && plan.Kind == shardmove.KindMove && j.State == shardmove.StateDone && j.Reverse {
		d.wg.Go(func() { d.watchReverse(plan, done) })
	}
}

// watchReverse keeps the reverse connection of the last move (made with
// --reverse) following failovers of either cluster until the move is
// rolled back or cleaned up (or another move ends): the rollback window
// survives a failover. Recreated on the source's new primary, or pointed
// at the target's new primary.
func (d *daemon) watchReverse(plan shardmove.Plan, j shardmove.Journal) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-tick.C:
		}
		d.moves.mu.Lock()
		last, running := d.moves.last, d.moves.running
		d.moves.mu.Unlock()
		if running != nil || last == nil || last.Schema != j.Schema || last.Kind != shardmove.KindMove || last.State != shardmove.StateDone {
			return
		}
		sw, tw := d.writerAddr(plan.Source.Name), d.writerAddr(plan.Target.Name)
		if sw == "" || tw == "" || (sw == plan.Source.Primary.Addr() && tw == plan.Target.Primary.Addr()) {
			continue
		}
		ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
		np, err := d.refreshPlan(ctx, plan)
		what := ""
		if err == nil {
			if np.Source.Primary.Addr() != plan.Source.Primary.Addr() {
				var pos any
				pos, err = shardmove.RecreateBack(ctx, shardmove.Dial, j, np.Source.Primary, np.Target.Primary, np.Target.Repl, np.Target.DomainID)
				what = fmt.Sprintf("'%s' recreated on %s from %s (gtid_slave_pos %v)", shardmove.BackConnection(j.Schema), np.Source.Primary.Addr(), np.Target.Primary.Addr(), pos)
			} else {
				err = shardmove.FollowTargetBack(ctx, shardmove.Dial, j, np.Source.Primary, np.Target.Primary, np.Target.Repl, np.Target.DomainID)
				what = fmt.Sprintf("'%s' on %s repointed at %s by GTID", shardmove.BackConnection(j.Schema), np.Source.Primary.Addr(), np.Target.Primary.Addr())
			}
		}
		cancel()
		if err != nil {
			d.log.Warn("the reverse connection of a moved schema could not follow a failover yet; it tries again", "schema", j.Schema, "err", err)
			continue
		}
		note := fmt.Sprintf("after the cutover, %s primary %s -> %s, %s primary %s -> %s: %s", plan.Source.Name, plan.Source.Primary.Addr(), np.Source.Primary.Addr(),
			plan.Target.Name, plan.Target.Primary.Addr(), np.Target.Primary.Addr(), what)
		plan = np
		j.Follows = append(j.Follows, note)
		d.moves.mu.Lock()
		if d.moves.last != nil && d.moves.last.Schema == j.Schema && d.moves.last.State == shardmove.StateDone {
			c := j
			d.moves.last = &c
		}
		d.moves.mu.Unlock()
		if d.coord == nil {
			if err := writeJSONFile(movePath(d.running.Load().StateDir, j.Schema), moveRecord{Plan: plan, Journal: j}); err != nil {
				d.log.Warn("could not save the moved schema's journal", "schema", j.Schema, "err", err)
			}
		}
		d.journal.add(admin.Event{Kind: "shard_move_follow", Message: fmt.Sprintf("the reverse connection of %s follows a failover: %s", j.Schema, note)})
	}
}

// awaitCutover waits for the operator's cutover or abort of a waiting
// move, following failovers of either cluster meanwhile (so that the
// target keeps following the source). It returns the plan as it is then.
func (d *daemon) awaitCutover(plan shardmove.Plan, j *shardmove.Journal, save func(shardmove.Journal) error, cut, abort <-chan struct{}) (shardmove.Plan, bool) {
	d.journal.add(admin.Event{Kind: "shard_move_waiting", Message: fmt.Sprintf("schema %s is copied to %s and follows %s; it waits for the cutover (vigil ctl shard cutover %s) or an abort (vigil ctl shard abort %s)",
		plan.Request.Schema, plan.Target.Name, plan.Source.Name, plan.Request.Schema, plan.Request.Schema)})
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return plan, false
		case <-cut:
			return plan, false
		case <-abort:
			return plan, true
		case <-tick.C:
			if d.coord != nil {
				ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
				word, err := d.coord.TakeSignal(ctx)
				cancel()
				switch {
				case err != nil:
				case word == "cutover "+plan.Request.Schema:
					return plan, false
				case word == "abort "+plan.Request.Schema:
					return plan, true
				}
			}
			if np, moved, err := d.followMove(plan, j, save); err != nil {
				d.log.Warn("a waiting shard move could not follow a failover yet; it tries again", "schema", plan.Request.Schema, "err", err)
			} else if moved {
				plan = np
			}
		}
	}
}

// awaitFailover is called when a step failed: if either cluster's
// primary is unreachable or has changed, it waits (at most
// moveFollowWait) for the cluster to have a new writer and follows it.
// moved false: the failure was not a failover (or none came).
func (d *daemon) awaitFailover(plan shardmove.Plan, j *shardmove.Journal, save func(shardmove.Journal) error) (shardmove.Plan, bool) {
	deadline := time.Now().Add(moveFollowWait)
	for time.Now().Before(deadline) && d.ctx.Err() == nil {
		np, moved, err := d.followMove(plan, j, save)
		if err == nil && moved {
			return np, true
		}
		if err == nil && d.primariesAnswer(plan) {
			return plan, false
		}
		select {
		case <-d.ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	d.journal.add(admin.Event{Kind: "shard_move_failed", Message: fmt.Sprintf("the move of %s lost a primary (%s or %s) and no failover gave its cluster a new one within %s", plan.Request.Schema, plan.Source.Primary.Addr(), plan.Target.Primary.Addr(), moveFollowWait)})
	return plan, false
}

// primariesAnswer reports whether both of the plan's primaries answer
// now (so a failed step was not a lost primary).
func (d *daemon) primariesAnswer(plan shardmove.Plan) bool {
	for _, s := range []shardmove.Server{plan.Source.Primary, plan.Target.Primary} {
		db, err := shardmove.Dial(s.Addr(), s.User, s.Password)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(d.ctx, 2*time.Second)
		_, err = db.Query(ctx, "SELECT 1")
		cancel()
		db.Close()
		if err != nil {
			return false
		}
	}
	return true
}

// followMove compares the plan's primaries with the clusters' writers
// now; when one changed (and both clusters have a writer) it points the
// plan at them and, if the move connection exists, moves it: recreated
// on the target's new primary, or repointed at the source's.
func (d *daemon) followMove(plan shardmove.Plan, j *shardmove.Journal, save func(shardmove.Journal) error) (shardmove.Plan, bool, error) {
	sw, tw := d.writerAddr(plan.Source.Name), d.writerAddr(plan.Target.Name)
	if sw == "" || tw == "" || (sw == plan.Source.Primary.Addr() && tw == plan.Target.Primary.Addr()) {
		return plan, false, nil
	}
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	np, err := d.refreshPlan(ctx, plan)
	if err != nil {
		return plan, false, err
	}
	var what string
	switch {
	case !j.Connected():
		what = "the move connection does not exist yet"
	case np.Target.Primary.Addr() != plan.Target.Primary.Addr():
		pos, err := shardmove.RecreateOnTarget(ctx, shardmove.Dial, *j, np.Target.Primary, np.Source.Primary, np.Source.Repl, np.Source.DomainID)
		if err != nil {
			return plan, false, fmt.Errorf("recreate '%s' on %s: %w", shardmove.MoveConnection(j.Schema), np.Target.Primary.Addr(), err)
		}
		what = fmt.Sprintf("'%s' recreated on %s from %s (gtid_slave_pos %s)", shardmove.MoveConnection(j.Schema), np.Target.Primary.Addr(), np.Source.Primary.Addr(), pos)
	default:
		if err := shardmove.FollowSource(ctx, shardmove.Dial, *j, np.Target.Primary, np.Source.Primary, np.Source.Repl, np.Source.DomainID); err != nil {
			return plan, false, fmt.Errorf("repoint '%s' at %s: %w", shardmove.MoveConnection(j.Schema), np.Source.Primary.Addr(), err)
		}
		what = fmt.Sprintf("'%s' on %s repointed at %s by GTID", shardmove.MoveConnection(j.Schema), np.Target.Primary.Addr(), np.Source.Primary.Addr())
	}
	note := fmt.Sprintf("%s primary %s -> %s, %s primary %s -> %s: %s", plan.Source.Name, plan.Source.Primary.Addr(), np.Source.Primary.Addr(),
		plan.Target.Name, plan.Target.Primary.Addr(), np.Target.Primary.Addr(), what)
	j.Follows = append(j.Follows, note)
	plan = np
	if err := save(*j); err != nil {
		return plan, true, err
	}
	d.journal.add(admin.Event{Kind: "shard_move_follow", Message: fmt.Sprintf("the move of %s follows a failover: %s", j.Schema, note)})
	return plan, true, nil
}

// writerAddr is the address of cluster name's routed writer, "" when it
// has none.
func (d *daemon) writerAddr(name string) string {
	rt := d.clusterMap()[name]
	if rt == nil {
		return ""
	}
	w := rt.topo.Load().WriterServer()
	if w == nil {
		return ""
	}
	s, err := moveServer(w.Addr, "", "")
	if err != nil {
		return ""
	}
	return s.Addr()
}

// refreshPlan is plan with the servers (and accounts) of both clusters as
// they are now: what a failover changed, or what a restart did not keep
// (passwords are never stored).
func (d *daemon) refreshPlan(ctx context.Context, plan shardmove.Plan) (shardmove.Plan, error) {
	src, err := d.moveCluster(ctx, plan.Source.Name, plan.Request.Schema)
	if err != nil {
		return plan, err
	}
	dst, err := d.moveCluster(ctx, plan.Target.Name, plan.Request.Schema)
	if err != nil {
		return plan, err
	}
	np := plan
	np.Source.Primary, np.Source.Replica, np.Source.Repl = src.Primary, src.Replica, src.Repl
	np.Target.Primary, np.Target.Replica, np.Target.Repl = dst.Primary, dst.Replica, dst.Repl
	return np, nil
}

// resumeMoves goes on with the move a previous run of this instance left
// in state_dir (killed or stopped mid-move), once both clusters have a
// writer; and remembers the last finished one (for cleanup and abort).
func (d *daemon) resumeMoves(ctx context.Context) {
	dir := d.running.Load().StateDir
	paths, _ := filepath.Glob(filepath.Join(dir, "shardmove-*.json"))
	var last *moveRecord
	var lastAt time.Time
	for _, p := range paths {
		var rec moveRecord
		if err := readJSONFile(p, &rec); err != nil || rec.Journal.Schema == "" || rec.Plan.Request.Schema != rec.Journal.Schema {
			d.log.Warn("a shard move file in state_dir is not a move record; ignored", "file", p, "err", err)
			continue
		}
		res := shardmove.Resume(rec.Journal)
		if res.Action == shardmove.ResumeNothing {
			at := lastFinished(rec.Journal)
			if last == nil || at.After(lastAt) {
				r := rec
				last, lastAt = &r, at
			}
			continue
		}
		d.resumeMove(ctx, rec, res)
	}
	if last != nil {
		d.moves.mu.Lock()
		if d.moves.last == nil {
			j := last.Journal
			d.moves.last, d.moves.lastErr = &j, j.Error
		}
		d.moves.mu.Unlock()
		if j := last.Journal; j.Kind == shardmove.KindMove && j.State == shardmove.StateDone && j.Reverse {
			d.wg.Go(func() { d.watchReverse(last.Plan, j) })
		}
	}
}

// resumeMove waits for both clusters' writers and goes on with rec as
// res says.
func (d *daemon) resumeMove(ctx context.Context, rec moveRecord, res shardmove.Resumption) {
	plan, j := rec.Plan, rec.Journal
	d.log.Info("resuming a shard move from its journal", "schema", j.Schema, "from", j.From, "to", j.To, "step", j.Step, "action", res.Action, "reason", res.Reason)
	var err error
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if d.writerAddr(plan.Source.Name) != "" && d.writerAddr(plan.Target.Name) != "" {
			plan, err = d.refreshPlan(wctx, rec.Plan)
		} else {
			err = fmt.Errorf("cluster %s or %s has no writer yet", plan.Source.Name, plan.Target.Name)
		}
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	if res.Action == shardmove.ResumeCheckMap && d.shardPlace(j.Schema) == j.To {
		j.Flipped, j.Step = true, res.Step+1
	}
	if err := d.startMove(plan, j, d.coord != nil); err != nil {
		d.log.Error("could not resume the shard move", "schema", j.Schema, "err", err)
		return
	}
	d.journal.add(admin.Event{Kind: "shard_move_resumed", Message: fmt.Sprintf("the %s of schema %s from %s to %s goes on from its journal at step %d (%s): %s", j.Kind, j.Schema, j.From, j.To, j.Step+1, res.Action, res.Reason)})
}

// watchMoves (coordinated) takes over a move whose owner is gone: an
// active journal in etcd without an owner key (the owner's lease ended).
func (d *daemon) watchMoves(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		d.moves.mu.Lock()
		busy := d.moves.running != nil
		d.moves.mu.Unlock()
		if busy {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		mk, err := d.coord.ReadMove(rctx)
		cancel()
		if err != nil || mk.Owner != "" || mk.Journal == nil {
			continue
		}
		var rec moveRecord
		if json.Unmarshal(mk.Journal, &rec) != nil || rec.Journal.Schema == "" {
			continue
		}
		res := shardmove.Resume(rec.Journal)
		if res.Action == shardmove.ResumeNothing {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = d.coord.ClaimMove(cctx, nil)
		cancel()
		if err != nil {
			continue
		}
		d.log.Info("taking over a shard move whose owner is gone", "schema", rec.Journal.Schema, "step", rec.Journal.Step)
		d.resumeMove(ctx, rec, res)
	}
}

// lastFinished is when j's last step finished (or started).
func lastFinished(j shardmove.Journal) time.Time {
	var t time.Time
	for _, r := range j.Results {
		for _, x := range []time.Time{r.Started, r.Finished} {
			if x.After(t) {
				t = x
			}
		}
	}
	return t
}

func movePath(stateDir, schema string) string {
	return filepath.Join(stateDir, "shardmove-"+schema+".json")
}

// moveRouter is the sharded listener as a move's router (this instance).
type moveRouter struct{ d *daemon }

func (m moveRouter) Hold(ctx context.Context, schema string) (func(), error) {
	return m.d.shards.srv.Hold(ctx, []string{schema}, 5*time.Second)
}

func (m moveRouter) Flip(ctx context.Context, schema, to string) error {
	return m.d.changeShards(ctx, func(ov *shardOverlay) {
		if ov.Schemas == nil {
			ov.Schemas = map[string]string{}
		}
		ov.Schemas[schema] = to
	})
}

// shardPlace is the cluster the sharded listener routes schema to now
// ("" when none or ambiguous).
func (d *daemon) shardPlace(schema string) string {
	if d.shards == nil {
		return ""
	}
	if c, ok := d.shards.srv.Map().Schemas[schema]; ok {
		return c
	}
	for _, s := range d.shards.srv.Schemas() {
		if s.Name == schema {
			return s.Cluster
		}
	}
	return ""
}

// moveCluster is what a move needs of a cluster now: its writer, a
// readable replica, the accounts (shards.move_user runs the move; the
// replication account is the one the cluster's replicas use), its gtid_domain_id and
// whether it has the schema.
func (d *daemon) moveCluster(ctx context.Context, name, schema string) (shardmove.Cluster, error) {
	rt := d.clusterMap()[name]
	if rt == nil {
		return shardmove.Cluster{}, &admin.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no cluster %s", name)}
	}
	cc := rt.cfg.Load()
	snap := rt.topo.Load()
	if snap == nil || snap.Writer < 0 {
		return shardmove.Cluster{}, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("cluster %s has no writer now", name)}
	}
	sh := d.running.Load().Shards
	server := func(addr string) (shardmove.Server, error) { return moveServer(addr, sh.MoveUser, sh.MovePassword) }
	c := shardmove.Cluster{Name: name, Repl: shardmove.Account{User: cc.Failover.ReplUser, Password: cc.Failover.ReplPassword}}
	var err error
	if c.Primary, err = server(snap.Servers[snap.Writer].Addr); err != nil {
		return c, err
	}
	for i, s := range snap.Servers {
		if i != snap.Writer && s.Readable {
			r, err := server(s.Addr)
			if err == nil {
				c.Replica = &r
				break
			}
		}
	}
	db, err := shardmove.Dial(c.Primary.Addr(), c.Primary.User, c.Primary.Password)
	if err != nil {
		return c, &admin.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("cluster %s: %v", name, err)}
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := db.Query(qctx, "SELECT @@gtid_domain_id, (SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = "+sqlString(schema)+")")
	if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
		return c, &admin.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("cluster %s: reading gtid_domain_id: %v", name, err)}
	}
	dom, _ := strconv.ParseUint(rows[1][0], 10, 32)
	c.DomainID = uint32(dom)
	c.HasSchema = rows[1][1] != "0"
	return c, nil
}

// moveServer is the server at addr with the move's account.
func moveServer(addr, user, password string) (shardmove.Server, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return shardmove.Server{}, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return shardmove.Server{}, fmt.Errorf("address %s: %w", addr, err)
	}
	return shardmove.Server{Host: host, Port: p, User: user, Password: password}, nil
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}
