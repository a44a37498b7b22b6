package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

func recordKind(k failover.PlanKind) failover.RecordKind {
	switch k {
	case failover.KindSwitchover:
		return failover.RecordSwitchover
	case failover.KindGaleraWriterMove:
		return failover.RecordGaleraMove
	case failover.KindRejoin:
		return failover.RecordRejoin
	case failover.KindRestoreWriter:
		return failover.RecordRestoreWriter
	}
	return failover.RecordFailover
}

// execute runs a decision's plan: every step journaled with its duration;
// a failed Abort step before the point of no return runs the rollback.
func (e *Executor) execute(ctx context.Context, d failover.Decision) Result {
	return e.runPlan(ctx, d, nil, false)
}

// runPlan runs a plan; resumed: the operation another instance journaled in
// etcd and did not finish (from its first unfinished step, or only its
// rollback when back).
func (e *Executor) runPlan(ctx context.Context, d failover.Decision, resumed *coord.Op, back bool) Result {
	pl := d.Plan
	start := e.now()
	rec := failover.Record{Kind: recordKind(pl.Kind), Auto: pl.Auto, Started: start, OldPrimary: pl.OldPrimary, NewPrimary: pl.NewPrimary, Views: pl.Views}
	if pl.Kind == failover.KindRejoin && d.Request != nil {
		rec.OldPrimary = d.Request.To
	}
	st := &runState{}
	first := 0
	if resumed != nil {
		rec = resumed.Record
		rec.Ended, rec.OK, rec.Error = time.Time{}, false, ""
		st.so = &sharedOp{op: *resumed}
		first = resumed.Done
	} else if e.shared != nil {
		to := ""
		if d.Request != nil {
			to = d.Request.To
		}
		st.so = &sharedOp{op: coord.Op{ID: fmt.Sprintf("%s-%s-%d", e.o().Cluster, rec.Kind, start.UnixNano()), Record: rec, Plan: *pl, To: to}}
		if err := e.shared.BeginOp(ctx, st.so.op); err != nil {
			msg := "not started: " + err.Error()
			e.event(opServer(pl), "operation_not_started", fmt.Sprintf("%s %s → %s was not started: %v", rec.Kind, orNone(pl.OldPrimary), orNone(pl.NewPrimary), err))
			return Result{Decision: d, Message: msg}
		}
	}
	e.mu.Lock()
	e.running = &rec
	e.mu.Unlock()
	_ = e.j.record(rec)
	res := Result{Decision: d}
	// Connections the operation opened (the log's measure of reuse).
	counter, _ := e.client.(interface{ Counts() (int64, int64) })
	var calls0, dials0 int64
	if counter != nil {
		calls0, dials0 = counter.Counts()
	}
	finish := func(ok bool, msg string) Result {
		if counter != nil {
			calls, dials := counter.Counts()
			e.log.Info("admin connections opened during the operation", "operation", rec.Kind.String(), "sql_calls", calls-calls0, "dials", dials-dials0)
		}
		rec.Ended = e.now()
		rec.OK = ok
		if !ok {
			rec.Error = msg
		}
		e.mu.Lock()
		e.running = nil
		e.history.Records = append(e.history.Records, rec)
		hist := append([]failover.Record(nil), e.history.Records...)
		e.mu.Unlock()
		_ = e.j.record(rec)
		if st.so != nil {
			if st.so.rec.Phase == coord.PhaseHolding {
				// Aborted past its point of no return while holding.
				_ = e.sharePublish(ctx, st.so, false, func(r *coord.Record) { r.Phase = coord.PhaseServing })
			}
			if err := e.shared.EndOp(ctx, hist); err != nil {
				e.log.Warn("coordination: could not close the operation in etcd; the next acting instance will find it", "cluster", e.o().Cluster, "err", err)
			}
		}
		res.OK, res.Message, res.Elapsed = ok, msg, e.now().Sub(start)
		kind := rec.Kind.String()
		if ok {
			e.event(pl.NewPrimary, kind+"_done", fmt.Sprintf("%s done in %s: %s", kind, res.Elapsed.Round(time.Millisecond), msg))
		} else {
			e.event(opServer(pl), kind+"_failed", fmt.Sprintf("%s failed after %s: %s", kind, res.Elapsed.Round(time.Millisecond), msg))
		}
		return res
	}
	e.event(opServer(pl), rec.Kind.String()+"_started", fmt.Sprintf("%s started: %s → %s (term %d)", rec.Kind, orNone(pl.OldPrimary), orNone(pl.NewPrimary), pl.Term))
	if pl.Kind == failover.KindFailover && resumed == nil {
		if err := e.hook(ctx, e.o().PreFailover, pl); err != nil {
			return finish(false, "pre_failover hook refused: "+err.Error())
		}
	}
	if back {
		msg := "interrupted before its point of no return: rolled back"
		if rb := e.rollback(ctx, pl, &rec, &res, st); rb != "" {
			msg += "; " + rb
		} else if pl.Kind == failover.KindSwitchover {
			rec.RolledBack = true
		}
		return finish(false, msg)
	}
	skip := map[string]bool{}
	var stuck []string // candidates that did not apply their relay log in time
	saveOp := func(done int) bool {
		if st.so == nil {
			return true
		}
		st.so.op.Done = done
		st.so.op.Plan = *pl
		st.so.op.Record = rec
		if err := e.shared.SaveOp(ctx, st.so.op); errors.Is(err, coord.ErrNotActing) {
			return false
		} else if err != nil {
			e.log.Warn("coordination: could not journal a step in etcd", "cluster", e.o().Cluster, "err", err)
		}
		return true
	}
	lost := func(when string) Result {
		e.handOverHold(st)
		return finish(false, fmt.Sprintf("this instance lost the election %s; the acting instance finishes the operation", when))
	}
	crash := failpointFor(pl.Kind, resumed != nil)
	for i := first; i < len(pl.Steps); i++ {
		crash.after(i)
		if i == pl.CutEnd && pl.CutEnd > 0 && !(resumed != nil && i > first) {
			// The failover's second phase, from positions read after the
			// cut (see failover.PlanAfterCut).
			pl = e.replanAfterCut(ctx, d, pl, &res)
			res.Decision.Plan = pl
			e.mu.Lock()
			rec.NewPrimary = pl.NewPrimary // e.running is &rec
			e.mu.Unlock()
			saveOp(i)
		}
		// Asked again after journaling: the journal write can take long
		// (or this process was paused in it), and a journal write that
		// failed for another reason than a lost election says nothing.
		if !e.acting() || i > first && !saveOp(i) || !e.acting() {
			// Another instance was elected meanwhile: it finds the
			// operation in etcd and finishes it; this one must stop.
			return lost(fmt.Sprintf("before step %d", i+1))
		}
		step := pl.Steps[i]
		if skip[step.Server] && step.Server != "" {
			res.Steps = append(res.Steps, fmt.Sprintf("skip %s %s (quarantined)", step.Kind, step.Server))
			continue
		}
		report := func(i int, step failover.Step, took time.Duration, err error) {
			e.reportStep(&res, rec.Kind, i+1, false, step, took, stepStatus(step, err))
		}
		if j := parallelRun(pl.Steps, i); j > i+1 {
			// Best-effort steps on different servers (the old primary's
			// read_only, its replicas' IO threads): at the same time, so
			// servers that do not answer cost one timeout, not one each.
			lctx, stopLease := e.leaseCtx(ctx)
			errs, took := e.stepsAtOnce(lctx, pl, pl.Steps[i:j], st)
			stopLease()
			for k := i; k < j; k++ {
				report(k, pl.Steps[k], took[k-i], errs[k-i])
			}
			i = j - 1
			continue
		}
		if resumed == nil {
			stepDelay(ctx, e.clock, step.Kind)
		}
		t0 := e.now()
		sctx, stopLease := e.leaseCtx(ctx)
		err := e.step(sctx, pl, step, st)
		stopLease()
		report(i, step, e.now().Sub(t0), err)
		if err == nil {
			continue
		}
		if !e.acting() {
			// The step failed because this instance stopped acting (its
			// lease context ended) or failed while it did: neither it
			// nor its rollback is this instance's to handle any more.
			return lost(fmt.Sprintf("during step %d", i+1))
		}
		switch step.OnFail {
		case failover.Continue:
			continue
		case failover.QuarantineServer:
			skip[step.Server] = true
			e.quarantine(step.Server, fmt.Sprintf("%s failed during %s: %v", step.Kind, rec.Kind, err))
			continue
		}
		if step.Kind == failover.WaitRelayApplied && step.Server == pl.NewPrimary {
			// Nothing changed on the candidate yet: another one that
			// received as much may take its place.
			stuck = append(stuck, step.Server)
			if np := e.replanWithoutStuck(ctx, d, pl, i+1, stuck, &res); np != nil {
				pl = np
				res.Decision.Plan = pl
				e.mu.Lock()
				rec.NewPrimary = pl.NewPrimary
				e.mu.Unlock()
				saveOp(i + 1)
				continue
			}
		}
		// Abort.
		msg := fmt.Sprintf("step %s on %s failed: %v", step.Kind, orNone(step.Server), err)
		if step.Kind == failover.SetWritable {
			// The monitor was told to route writes to it first.
			e.setLeftReadOnly(&rec, step.Server)
		}
		if i < pl.NoReturn || pl.NoReturn == 0 && len(pl.Rollback) > 0 {
			if st.so != nil {
				st.so.op.Rollback = true
				saveOp(i)
			}
			if rb := e.rollback(ctx, pl, &rec, &res, st); rb != "" {
				msg += "; " + rb
			} else if pl.Kind == failover.KindSwitchover && len(pl.Rollback) > 0 {
				rec.RolledBack = true
				msg += "; rolled back: " + pl.OldPrimary + " stays the primary (automatic failover is not blocked)"
			}
		}
		if st.held {
			e.router.Release()
		}
		return finish(false, msg)
	}
	crash.after(len(pl.Steps))
	if st.held {
		e.router.Release()
		st.pause = e.now().Sub(st.holdStart)
	}
	res.Pause = st.pause
	msg := ""
	switch pl.Kind {
	case failover.KindFailover:
		msg = fmt.Sprintf("%s is the new primary (term %d); %s is fenced until `vigil ctl rejoin %s`", pl.NewPrimary, pl.Term, pl.OldPrimary, pl.OldPrimary)
		if e.o().Engine.AutoRejoin {
			msg = fmt.Sprintf("%s is the new primary (term %d); %s is fenced until it is rejoined: automatically when it answers again with a compatible GTID history (failover.auto_rejoin), else by `vigil ctl rejoin %s`", pl.NewPrimary, pl.Term, pl.OldPrimary, pl.OldPrimary)
		}
		_ = e.hook(ctx, e.o().PostFailover, pl)
	case failover.KindSwitchover:
		msg = fmt.Sprintf("%s is the new primary (term %d); writes were held for %s", pl.NewPrimary, pl.Term, st.pause.Round(time.Millisecond))
		_ = e.hook(ctx, e.o().PostSwitchover, pl)
	case failover.KindRejoin:
		msg = fmt.Sprintf("%s replicates from %s again and is routed as a replica", rec.OldPrimary, pl.NewPrimary)
	case failover.KindRestoreWriter:
		// What the operation that left it read-only did not finish
		// (replicas still pointing elsewhere) is the operator's.
		msg = strings.Join(append([]string{pl.NewPrimary + " is writable again and routed as the writer"}, d.Events...), "; ")
	default:
		msg = fmt.Sprintf("%s is the writer", pl.NewPrimary)
	}
	return finish(true, msg)
}

// handOverHold: this instance stopped an operation it no longer acts for.
// Statements its own hold step holds stay held only while the writer
// record says so (the next serving record releases them, as on any
// instance); otherwise they go on now, not after hold_timeout.
func (e *Executor) handOverHold(st *runState) {
	if !st.held {
		return
	}
	st.held = false
	if cur, ok := e.sharedRecord(); ok && cur.Phase == coord.PhaseHolding {
		e.mu.Lock()
		e.sharedHeld = true
		e.mu.Unlock()
		return
	}
	e.router.Release()
}

// reportStep adds step n's outcome (ok, FAILED…, skipped…) to the result
// and journals it as a step event; rollback: a step of the plan's
// rollback (rN).
func (e *Executor) reportStep(res *Result, kind failover.RecordKind, n int, rollback bool, step failover.Step, took time.Duration, status string) {
	took = took.Round(time.Millisecond)
	label, prefix := fmt.Sprintf("step %d", n), ""
	if rollback {
		label, prefix = fmt.Sprintf("rollback step r%d", n), "rollback "
	}
	res.Steps = append(res.Steps, fmt.Sprintf("%s%-20s %-8s %6s  %s", prefix, step.Kind, step.Server, took, status))
	what := step.Kind.String()
	if step.Server != "" {
		what += " " + step.Server
	}
	e.event(step.Server, "step", fmt.Sprintf("%s %s %s: %s  %s", kind, label, what, took, status))
}

// stepStatus is a step's outcome as reportStep shows it.
func stepStatus(step failover.Step, err error) string {
	if err != nil {
		return fmt.Sprintf("FAILED (%s): %v", step.OnFail, err)
	}
	return "ok"
}

// rollback runs a plan's rollback after an Abort step failed before its
// point of no return; every step is journaled like the plan's. A step on
// a server whose earlier rollback step failed is skipped (routing writes
// to a server that could not be made writable). When a step fails it
// returns what failed for the record's error, notes on rec the server
// left read-only, and tells operators what to do (rollback_failed).
func (e *Executor) rollback(ctx context.Context, pl *failover.Plan, rec *failover.Record, res *Result, st *runState) string {
	st.rollback = true
	defer func() { st.rollback = false }()
	failedOn := map[string]bool{}
	var failed []string
	for i, rb := range pl.Rollback {
		if !e.acting() {
			failed = append(failed, fmt.Sprintf("r%d and later not run: this instance lost the election; the acting instance rolls the operation back", i+1))
			break
		}
		if rb.Server != "" && failedOn[rb.Server] {
			e.reportStep(res, rec.Kind, i+1, true, rb, 0, "skipped: an earlier rollback step on "+rb.Server+" failed")
			continue
		}
		t0 := e.now()
		err := e.step(ctx, pl, rb, st)
		e.reportStep(res, rec.Kind, i+1, true, rb, e.now().Sub(t0), stepStatus(rb, err))
		if err == nil {
			if rb.Kind == failover.SetWritable {
				e.setLeftReadOnly(rec, "") // the writer it designated is writable
			}
			continue
		}
		failedOn[rb.Server] = true
		failed = append(failed, fmt.Sprintf("r%d %s on %s: %v", i+1, rb.Kind, orNone(rb.Server), err))
		what := fmt.Sprintf("the rollback of the %s (%s → %s) failed at step r%d %s on %s: %v", rec.Kind, orNone(pl.OldPrimary), orNone(pl.NewPrimary), i+1, rb.Kind, orNone(rb.Server), err)
		switch rb.Kind {
		case failover.SetWritable:
			e.setLeftReadOnly(rec, rb.Server)
			e.event(rb.Server, "rollback_failed", fmt.Sprintf("%s is left read-only with no writer: %s. Clients cannot write. Vigil makes %s writable again by itself when that is safe and failover.auto is on (the PrimaryReadOnly decision says whether it will); otherwise check %s (why does %s fail there?), then run `vigil ctl switchover --to %s`: it makes %s writable and routes writes to it",
				rb.Server, what, rb.Server, rb.Server, strings.Join(failover.StepSQL(pl.Flavor, rb), "; "), rb.Server, rb.Server))
		default:
			e.event(rb.Server, "rollback_failed", fmt.Sprintf("%s. Check %s; the journal lists every rollback step (`vigil ctl rejoin NODE` makes a server that no longer replicates a replica of the primary again)", what, orNone(rb.Server)))
		}
	}
	if len(failed) == 0 {
		return ""
	}
	return "the rollback failed: " + strings.Join(failed, "; ")
}

// opServer is the server an operation's events name: its old primary,
// else (restore-writer) the server it acts on.
func opServer(pl *failover.Plan) string { return cmp.Or(pl.OldPrimary, pl.NewPrimary) }

// setLeftReadOnly notes on the running operation's record the server it
// designated as the writer but could not make writable ("" for none).
func (e *Executor) setLeftReadOnly(rec *failover.Record, server string) {
	e.mu.Lock()
	rec.LeftReadOnly = server // e.running is rec
	e.mu.Unlock()
}

// parallelRun returns the end of the run of steps from i that may run at
// once: best-effort (OnFail Continue) set-read-only and stop-io-thread
// steps, each on another server, before the plan's cut ends.
func parallelRun(steps []failover.Step, i int) int {
	seen := map[string]bool{}
	j := i
	for ; j < len(steps); j++ {
		s := steps[j]
		if s.OnFail != failover.Continue || s.Kind != failover.SetReadOnly && s.Kind != failover.StopIOThread || seen[s.Server] {
			break
		}
		seen[s.Server] = true
	}
	return j
}

// stepsAtOnce runs steps concurrently and returns each one's error and
// duration.
func (e *Executor) stepsAtOnce(ctx context.Context, pl *failover.Plan, steps []failover.Step, st *runState) ([]error, []time.Duration) {
	errs := make([]error, len(steps))
	took := make([]time.Duration, len(steps))
	var wg sync.WaitGroup
	for k, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := e.now()
			errs[k] = e.step(ctx, pl, s, st)
			took[k] = e.now().Sub(t0)
		}()
	}
	wg.Wait()
	return errs, took
}

type runState struct {
	held      bool
	holdStart time.Time
	pause     time.Duration
	// rollback: the plan's rollback runs (the old primary stays).
	rollback bool
	// so: the operation's journal in etcd (with coordination).
	so *sharedOp
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func (e *Executor) quarantine(server, why string) {
	if e.shared != nil && e.shared.Acting() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := e.sharePublish(ctx, nil, false, func(r *coord.Record) { r.Fenced = addName(r.Fenced, server) }); err != nil {
			e.log.Warn("coordination: could not publish a quarantine", "cluster", e.o().Cluster, "server", server, "err", err)
		}
		cancel()
	}
	if e.serverIndex(server) >= 0 {
		e.mu.Lock()
		e.fencedAt[server] = e.now()
		e.mu.Unlock()
	}
	_, _ = e.routes.Fence(server, "quarantined: "+why, fencePrefix+" (quarantined): "+why)
	e.event(server, "quarantined", server+" is quarantined and not routed: "+why)
}

func timeoutOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// step runs one plan step.
func (e *Executor) step(ctx context.Context, pl *failover.Plan, s failover.Step, st *runState) error {
	switch s.Kind {
	case failover.FenceRouter:
		n, err := e.routes.Fence(s.Server, fmt.Sprintf("%s in progress", recordKind(pl.Kind)),
			fmt.Sprintf("%s by %s (term %d)", fencePrefix, recordKind(pl.Kind), pl.Term))
		e.mu.Lock()
		e.fencedAt[s.Server] = e.now()
		e.mu.Unlock()
		if err != nil {
			return err
		}
		if err := e.shareFence(ctx, pl, s.Server, st); err != nil {
			return err
		}
		if n > 0 {
			e.event(s.Server, "fenced", fmt.Sprintf("%d client statements or transactions on %s were cut: their clients got an error and none was acknowledged. If %s is only cut off, what was already sent may still run when it returns: Vigil then kills these connections first, and the salvage check reports anything that committed", n, s.Server, s.Server))
		}
		return nil
	case failover.SetReadOnly:
		// The old primary of a failover is presumed dead: do not wait long.
		return e.runSQL(ctx, pl, s, timeoutOr(s.Timeout, time.Second))
	case failover.FenceHook:
		return e.hook(ctx, e.o().Engine.FenceCommand, pl)
	case failover.Quarantine:
		e.quarantine(s.Server, s.Detail)
		return nil
	case failover.StartSQLThread:
		return e.runSQL(ctx, pl, s, 5*time.Second)
	case failover.WaitRelayApplied:
		return e.waitGTID(ctx, s.Server, s.Position, timeoutOr(s.Timeout, 30*time.Second), pl.Flavor)
	case failover.StopReplication, failover.ResetReplica:
		return e.runSQL(ctx, pl, s, 10*time.Second)
	case failover.SetWritable:
		// The monitor learns first that this server is to be the writer:
		// turning writable beside the old writer is then no "conflict".
		_ = e.routes.Designate(s.Server, writerReason(pl, st))
		return e.runSQL(ctx, pl, s, 5*time.Second)
	case failover.SetSemiSync:
		return e.runSQL(ctx, pl, s, 5*time.Second)
	case failover.StopIOThread:
		// A semi-sync replica's IO thread stops only after it tried to
		// connect to its source to end the dump thread there: up to 2 s
		// when the source is paused or cut off (refused: at once).
		return e.runSQL(ctx, pl, s, 3*time.Second)
	case failover.KillPreFence:
		return e.killPreFence(ctx, s.Server)
	case failover.SetRouterWriter:
		if err := e.routes.SetWriter(s.Server, writerReason(pl, st)); err != nil {
			return err
		}
		if err := e.sharePublish(ctx, st.so, false, func(r *coord.Record) {
			if r.Phase != coord.PhaseFencing && r.Writer != s.Server {
				r.Term++
			}
			r.Writer, r.Phase, r.From, r.To = s.Server, coord.PhaseServing, "", ""
			r.Fenced = dropName(r.Fenced, s.Server)
		}); err != nil {
			return err
		}
		return e.routes.WaitWriter(ctx, s.Server, timeoutOr(s.Timeout, 5*time.Second))
	case failover.Repoint:
		return e.repoint(ctx, s, pl.Flavor)
	case failover.VerifyReplicating:
		return e.verifyReplicating(ctx, s.Server, timeoutOr(s.Timeout, 30*time.Second), pl.Flavor)
	case failover.Hold:
		e.router.Hold(fmt.Sprintf("%s in progress (%s → %s)", recordKind(pl.Kind), pl.OldPrimary, pl.NewPrimary), timeoutOr(s.Timeout, 10*time.Second))
		st.held, st.holdStart = true, e.now()
		// The other instances hold too and drain their transactions on
		// the old primary; KillTransactions waits for them.
		return e.sharePublish(ctx, st.so, false, func(r *coord.Record) {
			r.Phase, r.From, r.To = coord.PhaseHolding, pl.OldPrimary, pl.NewPrimary
		})
	case failover.DrainTransactions:
		idx := e.serverIndex(s.Server)
		deadline := e.now().Add(timeoutOr(s.Timeout, 5*time.Second))
		for e.router.BoundSessions(idx) > 0 {
			if e.now().After(deadline) {
				return fmt.Errorf("%d sessions still hold a transaction on %s", e.router.BoundSessions(idx), s.Server)
			}
			if err := wait(ctx, e.clock, 10*time.Millisecond); err != nil {
				return err
			}
		}
		return nil
	case failover.KillTransactions:
		if n := e.router.KillBound(e.serverIndex(s.Server)); n > 0 {
			e.event(s.Server, "transactions_killed", fmt.Sprintf("%d open transactions on %s did not finish in time and were cut", n, s.Server))
		}
		if so := st.so; so != nil && so.wrote && so.rec.Phase == coord.PhaseHolding {
			// Every instance holds and has no transaction left there.
			return e.shared.WaitAcks(ctx, so.rec.Seq)
		}
		return nil
	case failover.WaitGTID:
		pos := s.Position
		if pos == "" {
			rows, err := e.exec(ctx, s.Source, 3*time.Second, pl.Flavor.ReadBinlogPos())
			if err != nil {
				return err
			}
			if len(rows) == 1 {
				pos = rows[0][0]
			}
		}
		return e.waitGTID(ctx, s.Server, pos, timeoutOr(s.Timeout, 30*time.Second), pl.Flavor)
	case failover.VerifyNoErrant:
		return e.verifyNoErrant(ctx, s.Server, s.Source, pl.Flavor)
	case failover.Release:
		if st.held {
			e.router.Release()
			st.held = false
			st.pause = e.now().Sub(st.holdStart)
		}
		if cur, _ := e.sharedRecord(); cur.Phase == coord.PhaseHolding {
			return e.sharePublish(ctx, st.so, false, func(r *coord.Record) { r.Phase, r.From, r.To = coord.PhaseServing, "", "" })
		}
		return nil
	case failover.Unfence:
		if err := e.routes.Unfence(s.Server); err != nil {
			return err
		}
		return e.sharePublish(ctx, st.so, false, func(r *coord.Record) { r.Fenced = dropName(r.Fenced, s.Server) })
	case failover.StartReplication:
		return e.runSQL(ctx, pl, s, 5*time.Second)
	}
	return fmt.Errorf("step %s is not implemented", s.Kind)
}

// writerReason is what the monitor is told when a step names the writer.
func writerReason(pl *failover.Plan, st *runState) string {
	if st.rollback {
		return fmt.Sprintf("%s rolled back: %s stays the primary", recordKind(pl.Kind), pl.OldPrimary)
	}
	return fmt.Sprintf("%s (term %d)", recordKind(pl.Kind), pl.Term)
}

// sleep waits d of real time: ApplyShared's drain (the routing owner's
// work, not yet on the executor's clock).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (e *Executor) waitGTID(ctx context.Context, server, pos string, timeout time.Duration, f flavor.Flavor) error {
	if pos == "" {
		return nil
	}
	rows, err := e.exec(ctx, server, timeout+5*time.Second, f.WaitGTID(pos, timeout))
	if err != nil {
		return err
	}
	if len(rows) != 1 || rows[0][0] != "0" {
		return fmt.Errorf("%s did not reach GTID %s within %s", server, pos, timeout)
	}
	return nil
}

func (e *Executor) repoint(ctx context.Context, s failover.Step, f flavor.Flavor) error {
	addr := e.addr(s.Source)
	if addr == "" {
		return fmt.Errorf("no address for %s", s.Source)
	}
	o := e.o()
	_, err := e.exec(ctx, s.Server, 10*time.Second, failover.RepointSQL(f, addr, o.ReplUser, o.ReplPass, s.Mode)...)
	return err
}

// verifyUnreachable: verify-replicating gives up on a server it cannot
// reach for this long, rather than waiting for its whole timeout.
const verifyUnreachable = 2 * time.Second

func (e *Executor) verifyReplicating(ctx context.Context, server string, timeout time.Duration, f flavor.Flavor) error {
	deadline := e.now().Add(timeout)
	var last string
	var unreachableSince time.Time
	for {
		cols, rows, err := e.run(ctx, server, 2*time.Second, f.ReplicaStatus())
		if err == nil {
			unreachableSince = time.Time{}
		}
		switch {
		case err != nil:
			last = err.Error()
			// A replica that died after it was repointed would hold the
			// whole operation (and any decision about the new primary)
			// for the full timeout; it is quarantined either way.
			if unreachableSince.IsZero() {
				unreachableSince = e.now()
			} else if e.now().Sub(unreachableSince) >= verifyUnreachable {
				return fmt.Errorf("%s is unreachable (%s for %s): it is quarantined; rejoin it when it is back", server, last, verifyUnreachable)
			}
		case len(rows) == 1:
			rs := topology.ParseReplicaStatus(cols, rows[0])
			if rs.IORunning == topology.IOYes && rs.SQLRunning {
				return nil
			}
			last = fmt.Sprintf("IO %v SQL %v %s %s", rs.IORunning, rs.SQLRunning, rs.LastIOError, rs.LastSQLError)
		default:
			last = "no replica status"
		}
		if e.now().After(deadline) {
			return fmt.Errorf("%s does not replicate after %s: %s", server, timeout, last)
		}
		if err := wait(ctx, e.clock, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func (e *Executor) verifyNoErrant(ctx context.Context, server, source string, f flavor.Flavor) error {
	q := f.ReadCurrentPos()
	a, err := e.exec(ctx, server, 3*time.Second, q)
	if err != nil {
		return err
	}
	b, err := e.exec(ctx, source, 3*time.Second, q)
	if err != nil {
		return err
	}
	if len(a) != 1 || len(b) != 1 {
		return fmt.Errorf("cannot read the GTID positions of %s and %s", server, source)
	}
	x, err := failover.Extra(f.Family(), strings.ReplaceAll(a[0][0], "\n", ""), strings.ReplaceAll(b[0][0], "\n", ""))
	if err != nil {
		return fmt.Errorf("cannot compare GTID positions %q and %q: %v", a[0][0], b[0][0], err)
	}
	if x != "" {
		return fmt.Errorf("%s holds transactions %s lacks: %s", server, source, x)
	}
	return nil
}

// hook runs an operator command with the operation in its environment.
func (e *Executor) hook(ctx context.Context, command string, pl *failover.Plan) error {
	if command == "" {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(hctx, "/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), "VIGIL_CLUSTER="+e.o().Cluster, "VIGIL_OLD_PRIMARY="+pl.OldPrimary,
		"VIGIL_NEW_PRIMARY="+pl.NewPrimary, "VIGIL_OPERATION="+recordKind(pl.Kind).String(),
		"VIGIL_OLD_PRIMARY_ADDR="+e.addr(pl.OldPrimary), "VIGIL_NEW_PRIMARY_ADDR="+e.addr(pl.NewPrimary))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%q: %v: %s", command, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// runSQL runs the statements of a fixed-SQL step (failover.StepSQL: the
// ones its plan shows) on its server.
func (e *Executor) runSQL(ctx context.Context, pl *failover.Plan, s failover.Step, timeout time.Duration) error {
	_, err := e.exec(ctx, s.Server, timeout, failover.StepSQL(pl.Flavor, s)...)
	return err
}

// stepDelay is a failpoint for fault tests: VIGIL_TEST_STEP_DELAY=
// "set-writable=5s" makes an operation wait that long before its first
// step of that kind, so a test can kill the acting instance at a chosen
// point of a failover. Never set in production.
func stepDelay(ctx context.Context, c Clock, k failover.StepKind) {
	v := os.Getenv("VIGIL_TEST_STEP_DELAY")
	if v == "" {
		return
	}
	for _, item := range strings.Split(v, ",") {
		name, dur, ok := strings.Cut(item, "=")
		if !ok || name != k.String() {
			continue
		}
		if d, err := time.ParseDuration(dur); err == nil {
			_ = wait(ctx, c, d)
		}
	}
}
