package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/topology"
)

// Shared is the coordination of one cluster among several Vigil instances
// (coord.Cluster). Without it (nil) this executor acts alone.
type Shared interface {
	Acting() bool
	Instance() string
	Leader() string
	Record() (coord.Record, bool)
	Publish(ctx context.Context, rec coord.Record) (coord.Record, error)
	WaitAcks(ctx context.Context, seq uint64) error
	BeginOp(ctx context.Context, op coord.Op) error
	SaveOp(ctx context.Context, op coord.Op) error
	PendingOp(ctx context.Context) (*coord.Op, error)
	EndOp(ctx context.Context, hist []failover.Record) error
	SaveHistory(ctx context.Context, hist []failover.Record) error
	History(ctx context.Context) ([]failover.Record, error)
	Forward(ctx context.Context, f coord.Forwarded) (json.RawMessage, error)
}

// SetShared connects the executor to the other Vigil instances; call it
// before Run.
func (e *Executor) SetShared(s Shared) { e.shared = s }

// acting reports whether this executor may act: alone, or elected.
func (e *Executor) acting() bool { return e.shared == nil || e.shared.Acting() }

// sharedOp is the journal in etcd of the operation that runs.
type sharedOp struct {
	op    coord.Op
	rec   coord.Record // the newest record this operation published
	wrote bool
}

// takeOver runs when this instance is elected: it routes by the record
// (as every instance does), adopts the shared history, finishes or rolls
// back an operation the previous acting instance left, and writes the
// first record when there is none. false: not ready (retried).
func (e *Executor) takeOver(ctx context.Context) bool {
	sh := e.shared
	rec, have := sh.Record()
	if have {
		if err := e.ApplyShared(ctx, rec); err != nil {
			e.log.Warn("coordination: elected, but the writer record cannot be applied yet", "cluster", e.o().Cluster, "err", err)
			return false
		}
	}
	hist, err := sh.History(ctx)
	if err != nil {
		e.log.Warn("coordination: elected, but the shared history cannot be read", "cluster", e.o().Cluster, "err", err)
		return false
	}
	e.mu.Lock()
	merged := mergeHistory(hist, e.history.Records)
	e.history.Records = merged
	e.mu.Unlock()
	if len(merged) != len(hist) {
		_ = sh.SaveHistory(ctx, merged)
	}
	op, err := sh.PendingOp(ctx)
	if err != nil {
		e.log.Warn("coordination: elected, but the operation journal cannot be read", "cluster", e.o().Cluster, "err", err)
		return false
	}
	if !have {
		snap := e.mon.Snapshot()
		w := snap.WriterServer()
		if w == nil {
			return false // publish once a writer is known
		}
		var fenced []string
		for _, s := range snap.Servers {
			if s.Fenced {
				fenced = append(fenced, s.Name)
			}
		}
		// The first record goes on from the term this instance counted
		// alone, so the term never goes back.
		rec, err := sh.Publish(ctx, coord.Record{Term: max(1, snap.Term), Writer: w.Name, Phase: coord.PhaseServing, Fenced: fenced})
		if err != nil {
			e.log.Warn("coordination: could not write the first writer record", "cluster", e.o().Cluster, "err", err)
			return false
		}
		e.followTerm(rec)
		e.event(w.Name, "coordination_record", fmt.Sprintf("first writer record: %s is the writer (term %d)", w.Name, rec.Term))
	}
	e.event("", "coordination_elected", fmt.Sprintf("instance %s acts for cluster %s", sh.Instance(), e.o().Cluster))
	if op != nil {
		e.resume(ctx, op)
	}
	return true
}

// monitorPicksWriter: in Galera and read-only clusters the monitor
// chooses the writer by itself when the current one cannot take writes;
// in replication clusters only operations change it.
func monitorPicksWriter(snap *topology.Snapshot) bool {
	return snap.Type == "galera" || snap.Type == "read-only"
}

// followMonitorWriter publishes a writer that the acting instance's
// monitor chose by itself (Galera and read-only clusters, when the writer
// node fails), so that every instance routes writes to that node: the
// record, not each instance's monitor, names the writer. Replication
// clusters change writers only through operations, which publish their
// own records. It runs between operations (opMu held).
func (e *Executor) followMonitorWriter(ctx context.Context) {
	if e.shared == nil {
		return
	}
	snap := e.mon.Snapshot()
	w := snap.WriterServer()
	rec, have := e.shared.Record()
	if !monitorPicksWriter(snap) || w == nil || !have || rec.Writer == w.Name || rec.Phase != coord.PhaseServing {
		return
	}
	from := rec.Writer
	err := e.sharePublish(ctx, nil, false, func(r *coord.Record) {
		r.Term++
		r.Writer, r.Phase, r.From, r.To, r.Op = w.Name, coord.PhaseServing, "", "", ""
	})
	if err != nil {
		// Retried on the next decision; logged once per writer.
		e.mu.Lock()
		again := e.pubFailed == w.Name
		e.pubFailed = w.Name
		e.mu.Unlock()
		if !again {
			e.log.Warn("coordination: could not publish the writer the monitor chose; the other instances keep their own choice until it is (retried)", "cluster", e.o().Cluster, "writer", w.Name, "err", err)
		}
		return
	}
	e.mu.Lock()
	e.pubFailed = ""
	e.mu.Unlock()
	e.event(w.Name, "coordination_record", fmt.Sprintf("%s writer %s → %s (the monitor's choice) published for every instance (term %d)", snap.Type, orNone(from), w.Name, rec.Term+1))
}

// mergeHistory is the shared history plus local records it lacks (a
// cluster that ran alone before), by start time.
func mergeHistory(shared, local []failover.Record) []failover.Record {
	out := append([]failover.Record(nil), shared...)
	have := map[string]bool{}
	for _, r := range shared {
		have[r.Kind.String()+r.Started.UTC().String()] = true
	}
	for _, r := range local {
		if !have[r.Kind.String()+r.Started.UTC().String()] {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b failover.Record) int { return a.Started.Compare(b.Started) })
	return out
}

// resume finishes the operation a previous acting instance journaled: a
// switchover before its point of no return is rolled back, anything else
// runs on from its first unfinished step (steps are safe to run again).
func (e *Executor) resume(ctx context.Context, op *coord.Op) {
	pl := op.Plan
	d := failover.Decision{Action: failover.ActExecute, Plan: &pl,
		Reason: fmt.Sprintf("resumed: instance %s stopped during it", op.Instance)}
	if op.To != "" {
		d.Request = &failover.Request{To: op.To}
	}
	back := len(pl.Rollback) > 0 && (op.Rollback || op.Done < pl.NoReturn)
	what := "completes it from step " + fmt.Sprint(op.Done+1)
	if back {
		what = "rolls it back (it had not reached its point of no return)"
	}
	e.event(opServer(&pl), "operation_resumed", fmt.Sprintf("%s %s → %s started %s by instance %s did not finish; instance %s %s",
		op.Record.Kind, orNone(pl.OldPrimary), orNone(pl.NewPrimary), op.Record.Started.Format(time.RFC3339), op.Instance, e.shared.Instance(), what))
	e.runPlan(ctx, d, op, back)
}

// sharePublish changes the writer record (this instance acts) and, when
// wait, waits until every live instance applied it.
func (e *Executor) sharePublish(ctx context.Context, so *sharedOp, wait bool, change func(r *coord.Record)) error {
	if e.shared == nil {
		return nil
	}
	cur, _ := e.shared.Record()
	next := cur
	next.Fenced = append([]string(nil), cur.Fenced...)
	change(&next)
	if so != nil {
		next.Op = so.op.ID
	}
	rec, err := e.shared.Publish(ctx, next)
	if err != nil {
		return err
	}
	e.followTerm(rec)
	if so != nil {
		so.rec, so.wrote = rec, true
	}
	if wait {
		return e.shared.WaitAcks(ctx, rec.Seq)
	}
	return nil
}

func addName(l []string, n string) []string {
	if slices.Contains(l, n) {
		return l
	}
	return append(l, n)
}

func dropName(l []string, n string) []string {
	return slices.DeleteFunc(l, func(s string) bool { return s == n })
}

// ApplyShared makes this instance route by a writer record another
// instance wrote: fence what it fences (router and monitor), hold new
// statements while a switchover drains, route writes to its writer.
func (e *Executor) ApplyShared(ctx context.Context, rec coord.Record) error {
	e.followTerm(rec)
	snap := e.mon.Snapshot()
	reason := fmt.Sprintf("%s by instance %s (term %d)", fencePrefix, rec.By, rec.Term)
	// fencedAt is noted after ApplyFenced returns: the owner's lock is
	// never held while e.mu is taken.
	var fenced []string
	err := e.routes.ApplyFenced(rec.Fenced, "fenced by another Vigil instance: "+reason, reason, func(name string) { fenced = append(fenced, name) })
	e.mu.Lock()
	for _, name := range fenced {
		e.fencedAt[name] = e.now()
	}
	e.mu.Unlock()
	if err != nil {
		return err
	}
	switch rec.Phase {
	case coord.PhaseHolding:
		hold := e.o().Engine.HoldTimeout
		e.router.Hold(fmt.Sprintf("switchover in progress (%s → %s, by instance %s)", rec.From, rec.To, rec.By), hold)
		e.mu.Lock()
		e.sharedHeld = true
		e.mu.Unlock()
		idx := e.serverIndex(rec.From)
		deadline := time.Now().Add(e.o().Engine.DrainTimeout)
		for idx >= 0 && e.router.BoundSessions(idx) > 0 && time.Now().Before(deadline) {
			if err := sleep(ctx, 10*time.Millisecond); err != nil {
				return err
			}
		}
		if n := e.router.KillBound(idx); n > 0 {
			e.event(rec.From, "transactions_killed", fmt.Sprintf("%d open transactions on %s did not finish in time for the switchover by instance %s and were cut", n, rec.From, rec.By))
		}
	case coord.PhaseServing:
		if rec.Writer != "" {
			if w := snap.WriterServer(); w == nil || w.Name != rec.Writer {
				err := e.routes.Designate(rec.Writer, fmt.Sprintf("writer record term %d by instance %s", rec.Term, rec.By))
				switch {
				case err != nil && monitorPicksWriter(snap):
					// Galera certifies a write on any synced node: this
					// instance keeps its own monitor's choice rather than
					// refusing writes, and the acting instance publishes
					// the node its monitor picks.
					e.log.Warn("coordination: the writer record names a node this instance cannot use now; it keeps its own choice", "cluster", e.o().Cluster, "record_writer", rec.Writer, "err", err)
				case err != nil:
					return err
				}
			}
		}
		e.mu.Lock()
		held := e.sharedHeld
		e.sharedHeld = false
		e.mu.Unlock()
		if held {
			e.router.Release()
		}
	}
	e.event(rec.Writer, "coordination_applied", fmt.Sprintf("writer record %d applied: term %d, writer %s, %s, fenced [%s] (by instance %s)",
		rec.Seq, rec.Term, orNone(rec.Writer), rec.Phase, joinNames(rec.Fenced), rec.By))
	return nil
}

// followTerm makes the record's term the one this instance shows and
// plans from: the record is the cluster's fencing token, and its term is
// the same on every instance (a restarted instance too).
func (e *Executor) followTerm(rec coord.Record) {
	if err := e.routes.SetTerm(rec.Term); err != nil {
		e.log.Warn("coordination: could not take the writer record's term", "cluster", e.o().Cluster, "term", rec.Term, "err", err)
	}
}

func joinNames(l []string) string {
	s := ""
	for i, n := range l {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// forward sends an operator's request to the acting instance.
func (e *Executor) forward(ctx context.Context, req failover.Request) (Result, error) {
	out, err := e.shared.Forward(ctx, coord.Forwarded{Kind: "request", Request: &req})
	var res Result
	if len(out) > 0 {
		_ = json.Unmarshal(out, &res)
	}
	if err != nil {
		var re *coord.RemoteError
		if errors.As(err, &re) {
			if res.Message == "" {
				res.Message = re.Msg
			}
			if re.Refused {
				return res, &RefusedError{Reason: re.Msg}
			}
			if re.Msg == ErrBusy.Error() {
				return res, ErrBusy
			}
		}
		if res.Message == "" {
			res.Message = err.Error()
		}
		return res, err
	}
	return res, nil
}

// Serve runs a request another instance forwarded (this one acts).
func (e *Executor) Serve(ctx context.Context, f coord.Forwarded) (json.RawMessage, bool, error) {
	switch f.Kind {
	case "ack":
		e.Ack()
		return nil, false, nil
	case "request":
		if f.Request == nil {
			return nil, false, errors.New("forwarded request without a request")
		}
		res, err := e.Request(ctx, *f.Request)
		b, _ := json.Marshal(res)
		var re *RefusedError
		return b, errors.As(err, &re), err
	}
	return nil, false, fmt.Errorf("unknown forwarded request kind %q", f.Kind)
}

// sharedRecord is the newest writer record (none without coordination).
func (e *Executor) sharedRecord() (coord.Record, bool) {
	if e.shared == nil {
		return coord.Record{}, false
	}
	return e.shared.Record()
}

// shareFence publishes that server is fenced and waits until every live
// instance fenced it too: for a failover this starts the new term (no
// instance routes writes until the record names the new writer).
func (e *Executor) shareFence(ctx context.Context, pl *failover.Plan, server string, st *runState) error {
	if e.shared == nil || st.rollback {
		return nil
	}
	return e.sharePublish(ctx, st.so, true, func(r *coord.Record) {
		r.Fenced = addName(r.Fenced, server)
		if pl.Kind == failover.KindFailover && server == r.Writer {
			r.Term++
			r.Writer, r.Phase, r.From, r.To = "", coord.PhaseFencing, pl.OldPrimary, pl.NewPrimary
		}
	})
}

// leaseCtx is ctx, cancelled as soon as this instance stops acting (its
// lease is no longer sure to hold): a step must not go on once another
// instance may have been elected and resumed the operation.
func (e *Executor) leaseCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.shared == nil {
		return ctx, func() {}
	}
	sctx, cancel := context.WithCancel(ctx)
	if !e.shared.Acting() {
		// Not even at the start (a pause since the last question).
		cancel()
		return sctx, cancel
	}
	go func() {
		for {
			select {
			case <-sctx.Done():
				return
			case <-e.clock.After(25 * time.Millisecond):
				if !e.shared.Acting() {
					e.log.Error("coordination: this instance stopped acting during a step; the step is abandoned and the next acting instance resumes the operation", "cluster", e.o().Cluster)
					cancel()
					return
				}
			}
		}
	}()
	return sctx, cancel
}
