package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/topology"
)

// fakeShared stands for etcd: it records what the executor publishes,
// journals and waits for.
type fakeShared struct {
	mu      sync.Mutex
	acting  bool
	rec     coord.Record
	have    bool
	records []coord.Record
	waits   []uint64
	op      *coord.Op
	saves   []int
	loseAt  int   // SaveOp of this step count or more: the election is lost (0: never)
	loseErr error // what that SaveOp returns (nil: coord.ErrNotActing)
	hist    []failover.Record
	log     []string // order of publishes, waits and SQL seen by the world
}

func (f *fakeShared) Acting() bool     { f.mu.Lock(); defer f.mu.Unlock(); return f.acting }
func (f *fakeShared) Instance() string { return "me" }
func (f *fakeShared) Leader() string   { return "me" }
func (f *fakeShared) Record() (coord.Record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rec, f.have
}
func (f *fakeShared) Publish(_ context.Context, r coord.Record) (coord.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Seq = f.rec.Seq + 1
	r.By = "me"
	f.rec, f.have = r, true
	f.records = append(f.records, r)
	f.log = append(f.log, "publish "+r.Phase)
	return r, nil
}
func (f *fakeShared) WaitAcks(_ context.Context, seq uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, seq)
	f.log = append(f.log, "wait-acks")
	return nil
}
func (f *fakeShared) BeginOp(_ context.Context, op coord.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.op = &op
	return nil
}
func (f *fakeShared) SaveOp(_ context.Context, op coord.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loseAt > 0 && op.Done >= f.loseAt {
		f.acting = false
		return cmp.Or(f.loseErr, coord.ErrNotActing)
	}
	f.op = &op
	f.saves = append(f.saves, op.Done)
	return nil
}
func (f *fakeShared) PendingOp(context.Context) (*coord.Op, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.op, nil
}
func (f *fakeShared) EndOp(_ context.Context, h []failover.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.op, f.hist = nil, h
	return nil
}
func (f *fakeShared) SaveHistory(_ context.Context, h []failover.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hist = h
	return nil
}
func (f *fakeShared) History(context.Context) ([]failover.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hist, nil
}
func (f *fakeShared) Forward(context.Context, coord.Forwarded) (json.RawMessage, error) {
	return nil, nil
}

func sharedScenario(t *testing.T) (*scenario, *fakeShared) {
	sc := &scenario{t: t, dir: t.TempDir(), ctx: context.Background()}
	t.Cleanup(sc.close)
	if err := sc.cluster(map[string]string{"flavor": "mariadb", "semisync": "on", "detect_after": "2s"},
		[]string{"node1 primary gtid=100", "node2 replica gtid=100", "node3 replica gtid=98"}); err != nil {
		t.Fatal(err)
	}
	f := &fakeShared{acting: true, have: true, rec: coord.Record{Term: 1, Writer: "node1", Phase: coord.PhaseServing, Seq: 1}}
	sc.e.SetShared(f)
	return sc, f
}

// A failover with coordination publishes the new term with the old
// primary fenced and no writer, waits for every instance before anything
// is promoted, names the new writer under the same term, and journals
// every step and the result.
func TestSharedFailoverPublishesFenceFirst(t *testing.T) {
	sc, f := sharedScenario(t)
	sc.killNode1()
	d := failover.Decide(sc.e.input(nil))
	if d.Plan == nil || d.Plan.Kind != failover.KindFailover {
		t.Fatalf("no failover: %s", d)
	}
	res := sc.e.execute(sc.ctx, d)
	if !res.OK {
		t.Fatalf("failover: %s\n%s", res.Message, strings.Join(res.Steps, "\n"))
	}
	if len(f.records) != 2 {
		t.Fatalf("records %+v", f.records)
	}
	fence, serve := f.records[0], f.records[1]
	if fence.Term != 2 || fence.Writer != "" || fence.Phase != coord.PhaseFencing || !fence.IsFenced("node1") || fence.From != "node1" {
		t.Fatalf("fencing record %+v", fence)
	}
	if serve.Term != 2 || serve.Writer != res.Decision.Plan.NewPrimary || serve.Phase != coord.PhaseServing || !serve.IsFenced("node1") {
		t.Fatalf("serving record %+v", serve)
	}
	if len(f.waits) == 0 || f.waits[0] != fence.Seq || f.log[1] != "wait-acks" {
		t.Fatalf("did not wait for the fencing record first: %v %v", f.waits, f.log)
	}
	// Nothing was made writable before the wait: the fence step comes
	// first and waits inside.
	if res.Decision.Plan.Steps[0].Kind != failover.FenceRouter {
		t.Fatalf("first step %s", res.Decision.Plan.Steps[0].Kind)
	}
	if f.op != nil || len(f.saves) == 0 || f.saves[len(f.saves)-1] != len(res.Decision.Plan.Steps)-1 {
		t.Fatalf("journal: op %+v saves %v for %d steps", f.op, f.saves, len(res.Decision.Plan.Steps))
	}
	if len(f.hist) != 1 || !f.hist[0].OK || f.hist[0].Kind != failover.RecordFailover {
		t.Fatalf("shared history %+v", f.hist)
	}
}

// An instance that is not elected decides nothing and runs nothing.
func TestSharedFollowerDoesNotAct(t *testing.T) {
	sc, f := sharedScenario(t)
	f.acting = false
	sc.killNode1()
	sc.w.ran = nil
	sc.e.decideAuto(sc.ctx)
	if len(sc.w.ran) != 0 || len(f.records) != 0 {
		t.Fatalf("a follower acted: ran %v, published %+v", sc.w.ran, f.records)
	}
}

// A switchover journaled by an instance that died before its point of no
// return is rolled back by the next one; one past it is completed.
func TestSharedResumeSwitchover(t *testing.T) {
	for _, tc := range []struct {
		name string
		done func(pl *failover.Plan) int
		ok   bool
	}{
		{"before point of no return", func(pl *failover.Plan) int { return 2 }, false},
		{"after point of no return", func(pl *failover.Plan) int { return pl.NoReturn + 1 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, f := sharedScenario(t)
			res, err := sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestSwitchover, To: "node2", DryRun: true})
			if err != nil || res.Decision.Plan == nil {
				t.Fatalf("plan: %v", err)
			}
			pl := *res.Decision.Plan
			f.op = &coord.Op{ID: "x", Instance: "dead", Plan: pl, Done: tc.done(&pl),
				Record: failover.Record{Kind: failover.RecordSwitchover, Started: time.Now(), OldPrimary: "node1", NewPrimary: "node2"}}
			f.mu.Lock()
			f.rec.Phase, f.rec.From, f.rec.To = coord.PhaseHolding, "node1", "node2"
			f.mu.Unlock()
			sc.e.decideAuto(sc.ctx) // elected: takes over
			if f.op != nil {
				t.Fatalf("operation left journaled: %+v", f.op)
			}
			if len(f.hist) != 1 || f.hist[0].OK != tc.ok {
				t.Fatalf("history %+v", f.hist)
			}
			last := f.records[len(f.records)-1]
			want := "node1"
			if tc.ok {
				want = "node2"
			}
			if last.Phase != coord.PhaseServing || last.Writer != want {
				t.Fatalf("final record %+v, want %s serving", last, want)
			}
		})
	}
}

// The acting instance publishes the Galera writer its monitor chose when
// the writer node failed; a follower publishes nothing, and neither does
// a replication cluster (its writers change only by operations).
func TestSharedGaleraWriterPublished(t *testing.T) {
	e, mon := markExecutor(t)
	f := &fakeShared{acting: true, have: true, rec: coord.Record{Term: 3, Writer: "node1", Phase: coord.PhaseServing, Seq: 7, Op: "op-1"}}
	e.SetShared(f)
	mon.snap = &topology.Snapshot{Cluster: "c", Type: "replication", Writer: 1,
		Servers: []topology.Server{{Name: "node1"}, {Name: "node2"}}}
	e.followMonitorWriter(context.Background())
	if len(f.records) != 0 {
		t.Fatalf("replication: published %+v", f.records)
	}
	mon.snap.Type = "galera"
	f.acting = false
	e.decideAuto(context.Background())
	if len(f.records) != 0 {
		t.Fatalf("a follower published %+v", f.records)
	}
	f.acting = true
	e.followMonitorWriter(context.Background())
	if len(f.records) != 1 {
		t.Fatalf("records %+v", f.records)
	}
	if r := f.records[0]; r.Term != 4 || r.Writer != "node2" || r.Phase != coord.PhaseServing || r.Op != "" {
		t.Fatalf("published %+v", r)
	}
	e.followMonitorWriter(context.Background())
	if len(f.records) != 1 {
		t.Fatalf("published again for the same writer: %+v", f.records)
	}
}

// An instance elected after the Galera writer node died (with the
// instance that acted, say) finds a record naming that node, which its
// monitor refuses as writer: it takes over anyway and publishes its
// monitor's choice. In a replication cluster the record stays binding.
func TestSharedTakeOverStaleGaleraRecord(t *testing.T) {
	e, mon := markExecutor(t)
	f := &fakeShared{acting: true, have: true, rec: coord.Record{Term: 5, Writer: "node1", Phase: coord.PhaseServing, Seq: 9}}
	e.SetShared(f)
	mon.setWriterErr = errors.New("server node1 cannot take writes now (node1 OFFLINE_HARD)")
	mon.snap = &topology.Snapshot{Cluster: "c", Type: "replication", Writer: 1,
		Servers: []topology.Server{{Name: "node1"}, {Name: "node2"}}}
	if e.takeOver(context.Background()) {
		t.Fatal("replication: took over with a record it cannot apply")
	}
	mon.snap.Type = "galera"
	if !e.takeOver(context.Background()) {
		t.Fatal("galera: did not take over")
	}
	e.followMonitorWriter(context.Background())
	if len(f.records) != 1 || f.records[0].Writer != "node2" || f.records[0].Term != 6 {
		t.Fatalf("published %+v", f.records)
	}
}

// Every instance shows the record's term: one applied from another
// instance, one it published itself, and the first record goes on from
// the term the instance counted alone (never back to 1).
func TestSharedTermIsTheRecords(t *testing.T) {
	e, mon := markExecutor(t)
	f := &fakeShared{acting: true}
	e.SetShared(f)
	mon.snap = &topology.Snapshot{Cluster: "c", Type: "replication", Writer: 0, Term: 4,
		Servers: []topology.Server{{Name: "node1"}, {Name: "node2"}}}
	if !e.takeOver(context.Background()) {
		t.Fatal("did not take over")
	}
	if len(f.records) != 1 || f.records[0].Term != 4 || mon.term != 4 {
		t.Fatalf("first record %+v, monitor term %d", f.records, mon.term)
	}
	if err := e.ApplyShared(context.Background(), coord.Record{Term: 9, Writer: "node1", Phase: coord.PhaseServing, Seq: 3, By: "other"}); err != nil {
		t.Fatal(err)
	}
	if mon.term != 9 {
		t.Fatalf("monitor term %d after applying term 9", mon.term)
	}
	f.rec = coord.Record{Term: 9, Writer: "node1", Phase: coord.PhaseServing, Seq: 3}
	if err := e.sharePublish(context.Background(), nil, false, func(r *coord.Record) { r.Term++ }); err != nil {
		t.Fatal(err)
	}
	if mon.term != 10 {
		t.Fatalf("monitor term %d after publishing term 10", mon.term)
	}
}

// With coordination, an automatic rejoin runs on the acting instance only
// and goes through the operation journal in etcd like a requested one;
// a follower never starts it.
func TestSharedAutoRejoinJournaled(t *testing.T) {
	sc, f := sharedScenario(t)
	o := *sc.e.o()
	o.Engine.AutoRejoin = true
	sc.e.SetOptions(o)
	sc.killNode1()
	sc.e.decideAuto(sc.ctx)
	if h := sc.e.History().Records; len(h) != 1 || h[0].Kind != failover.RecordFailover || !h[0].OK {
		t.Fatalf("no failover: %+v", sc.e.History().Records)
	}
	if err := sc.change("start", "node1", nil); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.acting = false
	f.mu.Unlock()
	sc.pass(time.Second)
	sc.e.decideAuto(sc.ctx)
	if n := len(sc.e.History().Records); n != 1 {
		t.Fatalf("a follower ran an operation: %+v", sc.e.History().Records)
	}
	f.mu.Lock()
	f.acting = true
	saves := len(f.saves)
	f.mu.Unlock()
	sc.pass(time.Second)
	sc.e.decideAuto(sc.ctx)
	hist := sc.e.History().Records
	last := hist[len(hist)-1]
	if last.Kind != failover.RecordRejoin || !last.OK || !last.Auto || last.OldPrimary != "node1" {
		t.Fatalf("no automatic rejoin of node1: %+v", hist)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.saves) <= saves {
		t.Fatalf("the rejoin's steps were not journaled in etcd (saves %v)", f.saves)
	}
	if f.op != nil || len(f.hist) != len(hist) || f.hist[len(f.hist)-1].Kind != failover.RecordRejoin || !f.hist[len(f.hist)-1].Auto {
		t.Fatalf("the rejoin is not in the shared journal: op %+v history %+v", f.op, f.hist)
	}
}

// An instance that loses the election in the middle of a switchover
// (paused past its lease, say) stops there and lets go of the statements
// its router holds: they go on to the write gate at once instead of
// waiting out hold_timeout for a release that would never come.
func TestSharedLostElectionReleasesHold(t *testing.T) {
	sc, f := sharedScenario(t)
	res, err := sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestSwitchover, To: "node2", DryRun: true})
	if err != nil || res.Decision.Plan == nil {
		t.Fatalf("plan: %v", err)
	}
	f.loseAt = 3 // after the hold (step 1) and before the point of no return
	sc.w.takeTrace()
	res, err = sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestSwitchover, To: "node2"})
	if err == nil || res.OK || !strings.Contains(res.Message, "lost the election") {
		t.Fatalf("want a run stopped by the lost election: %v %s", err, res.Message)
	}
	// Its own record still says holding: the statements stay held until
	// the acting instance's next record says serving, as on every other
	// instance.
	trace := strings.Join(sc.w.takeTrace(), "\n")
	if !strings.Contains(trace, "router: hold new statements") || strings.Contains(trace, "router: release held statements") {
		t.Fatalf("want the statements held while the record says holding:\n%s", trace)
	}
	rec, _ := f.Record()
	rec.Seq, rec.Term, rec.Phase, rec.From, rec.To, rec.By = rec.Seq+1, rec.Term+1, coord.PhaseServing, "", "", "other"
	if err := sc.e.ApplyShared(sc.ctx, rec); err != nil {
		t.Fatal(err)
	}
	if trace := strings.Join(sc.w.takeTrace(), "\n"); !strings.Contains(trace, "router: release held statements") {
		t.Fatalf("the held statements were not released by the serving record:\n%s", trace)
	}
}

// The process pauses while it journals the next step (SIGSTOP, a frozen
// VM) and wakes after its lease ran out: the journal write fails with a
// timeout, not with "not acting". The step must not run: another
// instance may already have rolled the operation back (found by
// TestHAActingDiesAtEveryStep: a resumed instance stopped replication on
// a replica after the new acting instance had rolled the switchover
// back).
func TestSharedPausedInJournalRunsNoMoreSteps(t *testing.T) {
	sc, f := sharedScenario(t)
	f.loseAt, f.loseErr = 3, context.DeadlineExceeded
	sc.w.takeTrace()
	res, err := sc.e.Request(sc.ctx, failover.Request{Kind: failover.RequestSwitchover, To: "node2"})
	if err == nil || res.OK || !strings.Contains(res.Message, "lost the election before step 4") {
		t.Fatalf("want a run stopped before step 4: %v %s", err, res.Message)
	}
	for _, line := range sc.w.takeTrace() {
		if strings.Contains(line, "read_only") || strings.Contains(line, "STOP SLAVE") || strings.Contains(line, "rollback") {
			t.Errorf("ran after the lease was lost: %s", line)
		}
	}
}
