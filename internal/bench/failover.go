package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// Failover timing runs on a semi-synchronous 3-node sandbox of its own,
// as `make bench-failover` does: with asynchronous replication a killed
// primary usually holds transactions no replica received, and Vigil
// rightly refuses to rejoin it, so the next run would have no replica.

// Kinds of failover runs.
const (
	FailoverKill       = "kill"
	FailoverSwitchover = "switchover"
)

// failoverWriters is how many connections write through Vigil during a
// failover run.
const failoverWriters = 4

// TimelinePoint is one 100 ms slice of a failover run: the writes
// acknowledged and failed in it, Ms from the kill or the switchover
// request.
type TimelinePoint struct {
	Ms     int `json:"ms"`
	Acks   int `json:"acks"`
	Errors int `json:"errors"`
}

// FailoverRun is one kill -9 or one switchover.
type FailoverRun struct {
	Kind string    `json:"kind"`
	Run  int       `json:"run"`
	At   time.Time `json:"at"`
	Old  string    `json:"old_primary"`
	New  string    `json:"new_primary,omitempty"`
	// Seconds is, for a kill, the time from the kill to the first write
	// acknowledged after the outage (after the last failed write); for a
	// switchover, the longest gap between acknowledged writes while the
	// request ran, as the writers saw it. Null when it failed.
	Seconds *float64 `json:"seconds"`
	// VigilPauseMs is how long Vigil says it held writes (switchover).
	VigilPauseMs *float64 `json:"vigil_pause_ms,omitempty"`
	// Writes and Errors count the writers' statements in the run.
	Writes   int             `json:"writes"`
	Errors   int             `json:"errors"`
	Error    string          `json:"error,omitempty"`
	Timeline []TimelinePoint `json:"timeline,omitempty"`
}

// FailoverSummary is the medians over the failover runs.
type FailoverSummary struct {
	// Kill is the time to the first acknowledged write, Switchover the
	// writers' pause and VigilHold Vigil's own account of it, in seconds.
	Kill             *Stat `json:"kill_to_first_write_s"`
	Switchover       *Stat `json:"switchover_pause_s"`
	VigilHold        *Stat `json:"switchover_vigil_hold_s"`
	KillRuns         int   `json:"kill_runs"`
	KillFailed       int   `json:"kill_failed"`
	SwitchoverRuns   int   `json:"switchover_runs"`
	SwitchoverFailed int   `json:"switchover_failed"`
}

// SummarizeFailover is nil without runs.
func SummarizeFailover(runs []FailoverRun) *FailoverSummary {
	if len(runs) == 0 {
		return nil
	}
	s := &FailoverSummary{}
	var kill, sw, hold []float64
	for _, r := range runs {
		switch r.Kind {
		case FailoverKill:
			s.KillRuns++
			if r.Seconds == nil || r.Error != "" {
				s.KillFailed++
			} else {
				kill = append(kill, *r.Seconds)
			}
		case FailoverSwitchover:
			s.SwitchoverRuns++
			if r.Seconds == nil || r.Error != "" {
				s.SwitchoverFailed++
			} else {
				sw = append(sw, *r.Seconds)
			}
			if r.VigilPauseMs != nil {
				hold = append(hold, *r.VigilPauseMs/1000)
			}
		}
	}
	s.Kill, s.Switchover, s.VigilHold = NewStat(kill), NewStat(sw), NewStat(hold)
	return s
}

// WriteEvent is one write of the writers: when it returned, and whether
// it was acknowledged.
type WriteEvent struct {
	At time.Time
	OK bool
}

// FirstAckAfterOutage is when writes worked again after the outage that
// followed t0: the first acknowledgement after the last failure (the
// definition of e2e/failover_timing_test.go). False when there is none.
func FirstAckAfterOutage(events []WriteEvent, t0 time.Time) (time.Time, bool) {
	from := t0
	for _, e := range events {
		if !e.OK && e.At.After(from) {
			from = e.At
		}
	}
	var first time.Time
	for _, e := range events {
		if e.OK && e.At.After(from) && (first.IsZero() || e.At.Before(first)) {
			first = e.At
		}
	}
	return first, !first.IsZero()
}

// MaxAckGap is the longest time between two consecutive acknowledged
// writes (of any writer) where the gap overlaps [from, to]: the pause the
// writers saw while an operation ran. False when no ack came after to.
func MaxAckGap(events []WriteEvent, from, to time.Time) (time.Duration, bool) {
	var acks []time.Time
	for _, e := range events {
		if e.OK {
			acks = append(acks, e.At)
		}
	}
	slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	found := false
	for i := 1; i < len(acks); i++ {
		a, b := acks[i-1], acks[i]
		if b.Before(from) || a.After(to) {
			continue
		}
		found = found || !b.Before(to)
		gap = max(gap, b.Sub(a))
	}
	return gap, found
}

// Timeline buckets the events into 100 ms slices from t0+from to t0+to.
func Timeline(events []WriteEvent, t0 time.Time, from, to time.Duration) []TimelinePoint {
	const step = 100 * time.Millisecond
	n := int((to - from) / step)
	if n <= 0 {
		return nil
	}
	out := make([]TimelinePoint, n)
	for i := range out {
		out[i].Ms = int((from + time.Duration(i)*step) / time.Millisecond)
	}
	for _, e := range events {
		d := e.At.Sub(t0) - from
		if d < 0 {
			continue
		}
		i := int(d / step)
		if i >= n {
			continue
		}
		if e.OK {
			out[i].Acks++
		} else {
			out[i].Errors++
		}
	}
	return out
}

// writers insert rows through Vigil on several connections and record
// every outcome.
type writers struct {
	mu     sync.Mutex
	events []WriteEvent
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startWriters(ctx context.Context, db *sql.DB, n int) *writers {
	ctx, cancel := context.WithCancel(ctx)
	w := &writers{cancel: cancel}
	for i := range n {
		w.wg.Go(func() {
			for ctx.Err() == nil {
				qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := db.ExecContext(qctx, "INSERT INTO vigil_test.bench_writes (writer) VALUES (?)", i)
				qcancel()
				if ctx.Err() != nil {
					return // stopped: the last statement is not an outcome
				}
				w.mu.Lock()
				w.events = append(w.events, WriteEvent{At: time.Now(), OK: err == nil})
				w.mu.Unlock()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	return w
}

func (w *writers) snapshot() []WriteEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

func (w *writers) stop() []WriteEvent {
	w.cancel()
	w.wg.Wait()
	return w.snapshot()
}

func countEvents(events []WriteEvent, from time.Time) (writes, errs int) {
	for _, e := range events {
		if e.At.Before(from) {
			continue
		}
		writes++
		if !e.OK {
			errs++
		}
	}
	return writes, errs
}

// failoverEnv is the failover scenario's sandbox and Vigil.
type failoverEnv struct {
	sb    *sandbox.Sandbox
	vigil *child
	api   adminAPI
	db    *sql.DB
}

// runFailover measures c.Reps kill -9 failovers and as many switchovers,
// alternating, on a sandbox of its own that it tears down at the end.
func (e *env) runFailover(ctx context.Context, c Case, res *Results) error {
	if os.Geteuid() != 0 {
		e.note("failover timing skipped: its sandbox needs root")
		return nil
	}
	fe, err := e.setUpFailover(ctx)
	if fe != nil {
		defer e.tearDownFailover(fe)
	}
	if err != nil {
		return fmt.Errorf("failover scenario: %w", err)
	}
	for i := 1; i <= c.Reps; i++ {
		r := e.killRun(ctx, fe, i)
		res.Failover = append(res.Failover, r)
		e.progress("[failover %d/%d] %s", i, c.Reps, failoverLine(r))
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.Error != "" && r.New == "" {
			e.note("failover run %d failed (%s): no further failover runs", i, r.Error)
			return nil
		}
		if err := e.rejoin(ctx, fe, r.Old); err != nil {
			e.note("failover run %d: the old primary %s could not rejoin (%v): no further failover runs", i, r.Old, err)
			return nil
		}
		s := e.switchoverRun(ctx, fe, i)
		res.Failover = append(res.Failover, s)
		e.progress("[switchover %d/%d] %s", i, c.Reps, failoverLine(s))
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.Error != "" {
			e.note("switchover run %d failed (%s): no further failover runs", i, s.Error)
			return nil
		}
		if err := e.settle(ctx, fe); err != nil {
			e.note("after switchover run %d: %v: no further failover runs", i, err)
			return nil
		}
	}
	return nil
}

func failoverLine(r FailoverRun) string {
	if r.Error != "" {
		return fmt.Sprintf("%s of %s FAILED: %s", r.Kind, r.Old, r.Error)
	}
	s := fmt.Sprintf("%s %s → %s: %s", r.Kind, r.Old, r.New, fmtSeconds(*r.Seconds))
	if r.Kind == FailoverKill {
		s += " to the first acknowledged write"
	} else {
		s += " longest write pause"
		if r.VigilPauseMs != nil {
			s += fmt.Sprintf(" (Vigil held writes %.0f ms)", *r.VigilPauseMs)
		}
	}
	return s + fmt.Sprintf(", %d writes, %d failed", r.Writes, r.Errors)
}

func (e *env) setUpFailover(ctx context.Context) (*failoverEnv, error) {
	t0 := time.Now()
	dir := filepath.Join(e.work, "failover")
	e.progress("failover: starting a 3-node semi-sync replication sandbox in %s", dir)
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: dir, Topology: sandbox.Replication, Nodes: 3, SemiSync: true, Logger: e.o.Logger})
	if err != nil {
		e.keepWork = true
		return nil, fmt.Errorf("sandbox (kept in %s): %w", dir, err)
	}
	fe := &failoverEnv{sb: sb}
	e.pinServers(ctx, sb)
	cfg, err := config.Load(sb.ConfigPath())
	if err != nil {
		return fe, err
	}
	// One failover per run: the default minimum interval (an hour)
	// would hold the second; ack after each run clears it too.
	cfg.Clusters[0].Failover.MinInterval = config.Duration{Duration: time.Second}
	path := filepath.Join(e.work, "vigil-failover.yaml")
	if err := writeConfig(cfg, path); err != nil {
		return fe, err
	}
	addr := cfg.Clusters[0].Listen
	bin, args := e.proxyCommand(e.o.VigilBin, "run", "--config", path)
	fe.vigil, err = startChild("vigil-failover", filepath.Join(e.work, "vigil-failover.log"), bin, args...)
	if err != nil {
		return fe, err
	}
	if err := fe.vigil.waitListening(ctx, addr, 30*time.Second); err != nil {
		return fe, err
	}
	fe.api = adminAPI{addr: cfg.Admin.Listen, token: cfg.Admin.Token}
	if err := waitFor(ctx, 20*time.Second, "a routed writer", func() error {
		_, err := fe.api.writer(ctx)
		return err
	}); err != nil {
		return fe, err
	}
	app := sb.Accounts().App
	mc := mysql.NewConfig()
	mc.User, mc.Passwd, mc.Net, mc.Addr, mc.DBName = app.User, app.Password, "tcp", addr, "vigil_test"
	mc.Timeout, mc.ReadTimeout, mc.WriteTimeout = 2*time.Second, 5*time.Second, 5*time.Second
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return fe, err
	}
	db.SetMaxOpenConns(failoverWriters)
	db.SetMaxIdleConns(failoverWriters)
	fe.db = db
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS vigil_test.bench_writes (id BIGINT AUTO_INCREMENT PRIMARY KEY, writer INT, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))"); err != nil {
		return fe, fmt.Errorf("create the writers' table through Vigil: %w", err)
	}
	e.progress("failover: sandbox and vigil (pid %d) ready in %s", fe.vigil.PID(), time.Since(t0).Round(100*time.Millisecond))
	return fe, nil
}

func (e *env) tearDownFailover(fe *failoverEnv) {
	if fe.db != nil {
		fe.db.Close()
	}
	if fe.vigil != nil {
		if err := fe.vigil.stop(15 * time.Second); err != nil {
			e.note("failover vigil: %v", err)
		}
	}
	if e.out != "" {
		if err := copyLog(filepath.Join(e.work, "vigil-failover.log"), filepath.Join(e.out, "vigil-failover.log")); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.note("could not keep vigil-failover.log: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fe.sb.Down(ctx, true); err != nil {
		e.note("failover sandbox down: %v", err)
		e.keepWork = true
	}
}

// startRun records the current writer, starts the writers and lets them
// run for a second; r.At is the moment the measured action starts.
func (e *env) startRun(ctx context.Context, fe *failoverEnv, r *FailoverRun) (old string, w *writers, ok bool) {
	old, err := fe.api.writer(ctx)
	if err != nil {
		r.Error = err.Error()
		return "", nil, false
	}
	r.Old = old
	w = startWriters(ctx, fe.db, failoverWriters)
	sleepCtx(ctx, time.Second)
	r.At = time.Now()
	return old, w, true
}

// killRun kills the primary under the writers and waits for the first
// acknowledged write on the new one.
func (e *env) killRun(ctx context.Context, fe *failoverEnv, i int) FailoverRun {
	r := FailoverRun{Kind: FailoverKill, Run: i}
	old, w, ok := e.startRun(ctx, fe, &r)
	if !ok {
		return r
	}
	t0 := r.At
	if err := fe.sb.Kill(ctx, old); err != nil {
		w.stop()
		r.Error = fmt.Sprintf("kill %s: %v", old, err)
		return r
	}
	nw, err := fe.api.waitNewWriter(ctx, old, 30*time.Second)
	r.New = nw
	if err == nil {
		err = waitFor(ctx, 15*time.Second, "an acknowledged write on the new primary", func() error {
			if _, ok := FirstAckAfterOutage(w.snapshot(), t0); !ok {
				return errors.New("no write acknowledged yet")
			}
			return nil
		})
	}
	if err == nil {
		sleepCtx(ctx, time.Second) // the timeline's tail
	}
	events := w.stop()
	r.Writes, r.Errors = countEvents(events, t0)
	r.Timeline = Timeline(events, t0, -time.Second, 6*time.Second)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	first, _ := FirstAckAfterOutage(events, t0)
	r.Seconds = ptr(first.Sub(t0).Seconds())
	return r
}

// rejoin restarts the killed primary and makes it a replica of the new
// one, then acknowledges the failover so the next one may run.
func (e *env) rejoin(ctx context.Context, fe *failoverEnv, old string) error {
	if err := fe.sb.Start(ctx, old); err != nil {
		return fmt.Errorf("start %s: %w", old, err)
	}
	e.pinServers(ctx, fe.sb)
	if err := waitFor(ctx, 30*time.Second, "rejoin "+old, func() error {
		return fe.api.post(ctx, "/api/v1/rejoin/"+old, nil)
	}); err != nil {
		return err
	}
	if err := fe.api.post(ctx, "/api/v1/ack", nil); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return e.settle(ctx, fe)
}

// settle waits until every server is ONLINE with a writer, so the next
// run starts from a healthy cluster.
func (e *env) settle(ctx context.Context, fe *failoverEnv) error {
	return waitFor(ctx, 30*time.Second, "every server ONLINE", func() error {
		servers, err := fe.api.servers(ctx)
		if err != nil {
			return err
		}
		writer := false
		for _, s := range servers {
			if s.State != "ONLINE" {
				return fmt.Errorf("%s is %s", s.Name, s.State)
			}
			writer = writer || (s.Writer && s.Writable)
		}
		if !writer {
			return errors.New("no writer")
		}
		return nil
	})
}

// switchoverRun asks Vigil for a switchover under the writers.
func (e *env) switchoverRun(ctx context.Context, fe *failoverEnv, i int) FailoverRun {
	r := FailoverRun{Kind: FailoverSwitchover, Run: i}
	_, w, ok := e.startRun(ctx, fe, &r)
	if !ok {
		return r
	}
	t0 := r.At
	op, err := fe.api.switchover(ctx)
	t1 := time.Now()
	sleepCtx(ctx, time.Second)
	events := w.stop()
	r.Writes, r.Errors = countEvents(events, t0)
	r.Timeline = Timeline(events, t0, -time.Second, t1.Sub(t0)+time.Second)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.New = op.New
	if op.PauseMs > 0 {
		r.VigilPauseMs = ptr(op.PauseMs)
	}
	gap, ok := MaxAckGap(events, t0, t1)
	if !ok {
		r.Error = "no write acknowledged after the switchover"
		return r
	}
	r.Seconds = ptr(gap.Seconds())
	return r
}

// waitFor retries fn until it succeeds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s: %w", what, timeout, err)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
