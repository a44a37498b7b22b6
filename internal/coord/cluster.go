package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigil-db/vigil/internal/failover"
)

// Phases of a writer record.
const (
	// PhaseServing: writes go to Writer.
	PhaseServing = "serving"
	// PhaseFencing: a failover started: From is fenced everywhere, no
	// instance routes writes until the record names the new writer.
	PhaseFencing = "fencing"
	// PhaseHolding: a switchover started: every instance holds new
	// statements and lets its open transactions on From end.
	PhaseHolding = "holding"
)

// Record is a cluster's writer record: who takes writes, under which
// term, and which servers no instance may route to. Only the elected
// instance changes it, and only while it is elected.
type Record struct {
	Term   uint64   `json:"term"`
	Writer string   `json:"writer"`
	Phase  string   `json:"phase"`
	From   string   `json:"from,omitempty"`
	To     string   `json:"to,omitempty"`
	Fenced []string `json:"fenced,omitempty"`
	// Op is the operation that wrote it.
	Op string `json:"op,omitempty"`
	// Proc identifies the process that wrote it (an instance restarted
	// under the same name applies its own earlier records).
	Proc string `json:"proc,omitempty"`
	// Seq grows with every change; instances acknowledge by it.
	Seq uint64    `json:"seq"`
	By  string    `json:"by"`
	At  time.Time `json:"at"`
}

// IsFenced reports whether name is in the record's fenced list.
func (r Record) IsFenced(name string) bool {
	for _, f := range r.Fenced {
		if f == name {
			return true
		}
	}
	return false
}

// Op is an operation in progress, journaled in etcd so that the next
// elected instance finds it if this one dies.
type Op struct {
	ID       string          `json:"id"`
	Instance string          `json:"instance"`
	Record   failover.Record `json:"record"`
	Plan     failover.Plan   `json:"plan"`
	// To is the operator's target (a failover's re-plan honours it).
	To string `json:"to,omitempty"`
	// Done counts the plan's steps completed.
	Done int `json:"done"`
	// Rollback: the plan's rollback had started.
	Rollback bool `json:"rollback,omitempty"`
}

// Forwarded is an operator's request sent by an instance that does not
// act to the one that does.
type Forwarded struct {
	ID      string            `json:"id"`
	From    string            `json:"from"`
	Kind    string            `json:"kind"` // "request", "ack" or "lifecycle"
	Request *failover.Request `json:"request,omitempty"`
	// Lifecycle is a clone, rebuild or replacement request (the admin
	// API's body) for the acting instance.
	Lifecycle json.RawMessage `json:"lifecycle,omitempty"`
}

type forwardResult struct {
	By     string          `json:"by"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Refused: the engine refused (not a failure of the operation).
	Refused bool `json:"refused,omitempty"`
}

// RemoteError is an error returned by the acting instance.
type RemoteError struct {
	By, Msg string
	Refused bool
}

func (e *RemoteError) Error() string { return e.Msg }

// Callbacks connect a cluster's coordination to the instance's data
// path and executor.
type Callbacks struct {
	// Apply makes this instance route by rec: fence what it fences, hold
	// while it holds, route writes to its writer. It is called for every
	// record this instance did not write itself; nil error = applied.
	Apply func(ctx context.Context, rec Record) error
	// Serve runs a forwarded request on the acting instance.
	Serve func(ctx context.Context, f Forwarded) (json.RawMessage, bool, error)
	// WriteDeadline is called whenever the time until which this instance
	// may route writes changes (zero: not now).
	WriteDeadline func(until time.Time)
	// Elected is called when this instance starts or stops acting.
	Elected func(acting bool)
}

// Cluster is one cluster's coordination.
type Cluster struct {
	co   *Coordinator
	name string
	cb   Callbacks

	// electedWith is the lease this instance won the election with (0:
	// not elected). The election lives only as long as that lease: a new
	// lease, even a valid one, does not carry it.
	electedWith atomic.Int64
	leaderRev   atomic.Int64 // create revision of our leader key
	leaderNm    atomic.Pointer[string]
	// reported is what Elected last said; electedMu orders the calls.
	electedMu sync.Mutex
	reported  bool

	mu       sync.Mutex
	rec      Record // newest record seen
	recRev   int64  // its mod revision (0: none yet)
	haveRec  bool
	applied  uint64 // seq applied by this instance
	applyErr string
	raw      []byte // the newest record as read, for a retried apply
	// applying: a record is being applied by an instance that had applied
	// the one before (it counts as caught up meanwhile).
	applying bool
	applyMu  sync.Mutex // one Apply at a time
	reqSeq   atomic.Uint64
	// views: this instance's own view and the others' as last read by
	// PublishViews (for the API; a failover reads them afresh).
	views atomic.Pointer[[]InstanceView]
}

// Cluster returns the coordination of one cluster; Run drives it.
func (c *Coordinator) Cluster(name string, cb Callbacks) *Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := &Cluster{co: c, name: name, cb: cb}
	c.clusters[name] = cl
	return cl
}

func (cl *Cluster) key(parts ...string) string {
	return cl.co.key(append([]string{"clusters", cl.name}, parts...)...)
}

// Acting reports whether this instance runs the cluster's operations now:
// it was elected with the lease it holds, and that lease surely holds.
func (cl *Cluster) Acting() bool {
	return cl.co.holds(clientv3.LeaseID(cl.electedWith.Load()))
}

// Leader is the acting instance's name as last seen ("" unknown).
func (cl *Cluster) Leader() string {
	if p := cl.leaderNm.Load(); p != nil {
		return *p
	}
	return ""
}

// Record is the newest writer record seen and whether one exists.
func (cl *Cluster) Record() (Record, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.rec, cl.haveRec
}

// CaughtUp reports whether this instance applied the newest record.
func (cl *Cluster) CaughtUp() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.haveRec && cl.applyErr == "" && (cl.applied >= cl.rec.Seq || cl.applying)
}

// Instance is this instance's name.
func (cl *Cluster) Instance() string { return cl.co.opts.Instance }

// ClusterState is what the API shows of a cluster's coordination.
type ClusterState struct {
	Leader   string  `json:"leader"`
	Acting   bool    `json:"acting"`
	Record   *Record `json:"record,omitempty"`
	Applied  uint64  `json:"applied_seq"`
	CaughtUp bool    `json:"caught_up"`
	// Writes: allowed, or why not.
	Writes   string `json:"writes"`
	ApplyErr string `json:"apply_error,omitempty"`
	// Views is what each live instance (this one first) last published of
	// the cluster's servers: what an automatic failover asks before it
	// acts (docs/ha.md).
	Views []InstanceView `json:"views,omitempty"`
}

// InstanceView is one instance's published view of the servers.
type InstanceView struct {
	Instance string                         `json:"instance"`
	At       time.Time                      `json:"at"`
	Servers  map[string]failover.ServerView `json:"servers"`
}

// State reports the cluster's coordination.
func (cl *Cluster) State() ClusterState {
	st := ClusterState{Leader: cl.Leader(), Acting: cl.Acting(), CaughtUp: cl.CaughtUp()}
	cl.mu.Lock()
	if cl.haveRec {
		r := cl.rec
		st.Record = &r
	}
	st.Applied, st.ApplyErr = cl.applied, cl.applyErr
	cl.mu.Unlock()
	if v := cl.views.Load(); v != nil {
		st.Views = *v
	}
	switch {
	case !cl.co.Valid():
		st.Writes = "refused: this instance does not hold its etcd lease (self-fenced)"
	case !st.CaughtUp:
		st.Writes = "refused: this instance has not applied the newest writer record yet"
	default:
		st.Writes = "allowed"
	}
	return st
}

// Run drives the cluster's coordination until ctx ends: per lease, it
// follows the writer record, campaigns for the cluster, and while
// elected serves forwarded requests.
func (cl *Cluster) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl.gate(ctx)
	}()
	defer wg.Wait()
	for ctx.Err() == nil {
		changed := cl.co.leaseChanged()
		id := cl.co.leaseID()
		if id == 0 {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		go func() {
			// The session ends with the lease.
			select {
			case <-sctx.Done():
			case <-changed:
				cancel()
			}
		}()
		cl.session(sctx, id)
		cancel()
		cl.setElected(0)
		if sleepCtx(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}

// setElected records the lease this instance was elected with (0: the
// election ended) and reports the change.
func (cl *Cluster) setElected(id clientv3.LeaseID) {
	cl.electedWith.Store(int64(id))
	cl.reportActing()
}

// reportActing calls Elected when Acting changed since it was last
// reported: at an election or its end here, and from the gate when the
// lease stopped surely holding (or held again).
func (cl *Cluster) reportActing() {
	cl.electedMu.Lock()
	defer cl.electedMu.Unlock()
	on := cl.Acting()
	if on == cl.reported {
		return
	}
	cl.reported = on
	if cl.cb.Elected != nil {
		cl.cb.Elected(on)
	}
}

// gate keeps the data path's write deadline: the lease's while this
// instance holds it and has applied the newest record, none otherwise.
func (cl *Cluster) gate(ctx context.Context) {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	var last, retried time.Time
	for {
		cl.mu.Lock()
		failed, raw, rev := cl.applyErr != "" && cl.raw != nil, cl.raw, cl.recRev
		cl.mu.Unlock()
		if failed && time.Since(retried) > time.Second {
			// A record that could not be applied is tried again: this
			// instance refuses writes until it is.
			retried = time.Now()
			if id := cl.co.leaseID(); id != 0 {
				cl.seen(ctx, id, raw, rev)
			}
		}
		until := time.Time{}
		if cl.CaughtUp() && cl.co.Valid() {
			until = cl.co.ValidUntil()
		}
		if !until.Equal(last) && cl.cb.WriteDeadline != nil {
			cl.cb.WriteDeadline(until)
			last = until
		}
		cl.reportActing()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// session runs while one lease holds.
func (cl *Cluster) session(ctx context.Context, id clientv3.LeaseID) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl.follow(ctx, id)
	}()
	cl.campaign(ctx, id)
}

// follow applies every writer record, from the current one on.
func (cl *Cluster) follow(ctx context.Context, id clientv3.LeaseID) {
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
		r, err := cl.co.cli.Get(gctx, cl.key("writer"))
		cancel()
		if err != nil {
			_ = sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		if len(r.Kvs) == 1 {
			cl.seen(ctx, id, r.Kvs[0].Value, r.Kvs[0].ModRevision)
		} else {
			cl.mu.Lock()
			cl.haveRec = false
			cl.mu.Unlock()
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := cl.co.cli.Watch(wctx, cl.key("writer"), clientv3.WithRev(r.Header.Revision+1))
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					cl.seen(ctx, id, ev.Kv.Value, ev.Kv.ModRevision)
				}
			}
		}
		wcancel()
		_ = sleepCtx(ctx, 100*time.Millisecond)
	}
}

// seen takes a record read from etcd: applies it unless this instance
// wrote it, then acknowledges it.
func (cl *Cluster) seen(ctx context.Context, id clientv3.LeaseID, val []byte, rev int64) {
	var rec Record
	if err := json.Unmarshal(val, &rec); err != nil {
		cl.co.log.Error("coordination: unreadable writer record in etcd; writes stay refused: fix or delete the key", "cluster", cl.name, "key", cl.key("writer"), "err", err)
		cl.mu.Lock()
		cl.applyErr = "unreadable writer record: " + err.Error()
		cl.mu.Unlock()
		return
	}
	cl.mu.Lock()
	if rev < cl.recRev {
		cl.mu.Unlock()
		return
	}
	// Caught up on the record before this one: it stays so while this
	// one is applied (a switchover's drain lets transactions on the old
	// writer finish; they must not be cut as if this instance were lost).
	cl.applying = cl.haveRec && cl.applyErr == "" && cl.applied >= cl.rec.Seq
	cl.rec, cl.recRev, cl.haveRec = rec, rev, true
	cl.raw = val
	// Written by this process (not by an earlier run of this instance):
	// already applied.
	mine := rec.Proc == cl.co.proc
	cl.mu.Unlock()
	if !mine && cl.cb.Apply != nil {
		cl.applyMu.Lock()
		err := cl.cb.Apply(ctx, rec)
		cl.applyMu.Unlock()
		if err != nil {
			cl.co.log.Error("coordination: could not apply the writer record; writes stay refused", "cluster", cl.name, "term", rec.Term, "writer", rec.Writer, "err", err)
			cl.mu.Lock()
			cl.applyErr = err.Error()
			cl.applying = false
			cl.mu.Unlock()
			return
		}
	}
	cl.mu.Lock()
	if rec.Seq >= cl.applied {
		cl.applied = rec.Seq
	}
	cl.applyErr = ""
	cl.applying = false
	cl.mu.Unlock()
	cl.ack(ctx, id, rec.Seq)
}

func (cl *Cluster) ack(ctx context.Context, id clientv3.LeaseID, seq uint64) {
	actx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	_, err := cl.co.cli.Put(actx, cl.key("acks", cl.co.opts.Instance), strconv.FormatUint(seq, 10), clientv3.WithLease(id))
	if err != nil && ctx.Err() == nil {
		cl.co.log.Warn("coordination: could not acknowledge the writer record", "cluster", cl.name, "seq", seq, "err", err)
	}
}

// campaign tries to become the cluster's acting instance; once elected it
// serves forwarded requests until the session ends.
func (cl *Cluster) campaign(ctx context.Context, id clientv3.LeaseID) {
	lk := cl.key("leader")
	me := cl.co.opts.Instance
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
		r, err := cl.co.cli.Txn(cctx).
			If(clientv3.Compare(clientv3.CreateRevision(lk), "=", 0)).
			Then(clientv3.OpPut(lk, me, clientv3.WithLease(id))).
			Else(clientv3.OpGet(lk)).Commit()
		cancel()
		if err != nil {
			_ = sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		if r.Succeeded {
			cl.leaderRev.Store(r.Header.Revision)
			cl.leaderNm.Store(&me)
			cl.co.log.Info("coordination: elected to act for the cluster", "cluster", cl.name, "instance", me)
			cl.setElected(id)
			cl.serveRequests(ctx)
			cl.setElected(0)
			return
		}
		kvs := r.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 1 {
			if string(kvs[0].Value) == me && kvs[0].Lease == int64(id) {
				// Ours from before (a retried commit that did succeed).
				cl.leaderRev.Store(kvs[0].CreateRevision)
				cl.leaderNm.Store(&me)
				cl.setElected(id)
				cl.serveRequests(ctx)
				cl.setElected(0)
				return
			}
			name := string(kvs[0].Value)
			cl.leaderNm.Store(&name)
		}
		// Wait for the leader key to go.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := cl.co.cli.Watch(wctx, lk, clientv3.WithRev(r.Header.Revision+1))
	wait:
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					break wait
				}
				name := string(ev.Kv.Value)
				cl.leaderNm.Store(&name)
			}
		}
		wcancel()
	}
}

// leaderCmp is the condition of every change the acting instance makes.
func (cl *Cluster) leaderCmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(cl.key("leader")), "=", cl.leaderRev.Load())
}

// ErrNotActing: this instance is not (or no longer) the acting one.
var ErrNotActing = errors.New("this Vigil instance is not the one elected to act for the cluster")

// Publish writes a new writer record (Seq and By set here), conditioned on
// this instance still being elected and on the record not having changed
// since it was last seen. The instance applies its own records itself.
func (cl *Cluster) Publish(ctx context.Context, rec Record) (Record, error) {
	if !cl.Acting() {
		return rec, ErrNotActing
	}
	cl.mu.Lock()
	cur, rev := cl.rec, cl.recRev
	cl.mu.Unlock()
	rec.Seq = cur.Seq + 1
	rec.By = cl.co.opts.Instance
	rec.Proc = cl.co.proc
	rec.At = time.Now().UTC()
	b, _ := json.Marshal(rec)
	wk := cl.key("writer")
	pctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Txn(pctx).
		If(cl.leaderCmp(), clientv3.Compare(clientv3.ModRevision(wk), "=", rev)).
		Then(clientv3.OpPut(wk, string(b))).Commit()
	if err != nil {
		return rec, fmt.Errorf("writing the writer record to etcd: %w", err)
	}
	if !r.Succeeded {
		return rec, fmt.Errorf("the writer record changed in etcd or this instance lost the election: %w", ErrNotActing)
	}
	cl.mu.Lock()
	if r.Header.Revision > cl.recRev {
		cl.rec, cl.recRev, cl.haveRec = rec, r.Header.Revision, true
		cl.applied = rec.Seq
		cl.applyErr = ""
	}
	cl.mu.Unlock()
	cl.ack(ctx, cl.co.leaseID(), rec.Seq)
	return rec, nil
}

// WaitAcks waits until every other live instance applied record seq: it
// acknowledged it, or its lease ended (it fenced itself before that). An
// instance that does neither within AckTimeout fails the wait.
func (cl *Cluster) WaitAcks(ctx context.Context, seq uint64) error {
	deadline := time.Now().Add(cl.co.opts.AckTimeout)
	me := cl.co.opts.Instance
	for {
		missing, err := cl.unacked(ctx, seq, me)
		if err == nil && len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("could not read acknowledgements from etcd: %w", err)
			}
			return fmt.Errorf("instance(s) %v neither applied writer record %d nor lost their lease within %s: they may still route writes to the old writer", missing, seq, cl.co.opts.AckTimeout)
		}
		if !cl.Acting() {
			return ErrNotActing
		}
		if sleepCtx(ctx, 20*time.Millisecond) != nil {
			return ctx.Err()
		}
	}
}

func (cl *Cluster) unacked(ctx context.Context, seq uint64, me string) ([]string, error) {
	gctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Txn(gctx).Then(
		clientv3.OpGet(cl.co.key("instances")+"/", clientv3.WithPrefix()),
		clientv3.OpGet(cl.key("acks")+"/", clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, err
	}
	acks := map[string]uint64{}
	ip := len(cl.co.key("instances") + "/")
	ap := len(cl.key("acks") + "/")
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		n, _ := strconv.ParseUint(string(kv.Value), 10, 64)
		acks[string(kv.Key[ap:])] = n
	}
	var missing []string
	for _, kv := range r.Responses[0].GetResponseRange().Kvs {
		name := string(kv.Key[ip:])
		if name != me && acks[name] < seq {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// BeginOp journals an operation's start; it fails when another operation
// is journaled or this instance is not elected.
func (cl *Cluster) BeginOp(ctx context.Context, op Op) error {
	op.Instance = cl.co.opts.Instance
	b, _ := json.Marshal(op)
	ok := cl.key("op")
	pctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Txn(pctx).If(cl.leaderCmp(), clientv3.Compare(clientv3.CreateRevision(ok), "=", 0)).
		Then(clientv3.OpPut(ok, string(b))).Commit()
	if err != nil {
		return fmt.Errorf("journaling the operation in etcd: %w", err)
	}
	if !r.Succeeded {
		return fmt.Errorf("another operation is journaled in etcd, or this instance lost the election: %w", ErrNotActing)
	}
	return nil
}

// SaveOp journals an operation's progress.
func (cl *Cluster) SaveOp(ctx context.Context, op Op) error {
	op.Instance = cl.co.opts.Instance
	b, _ := json.Marshal(op)
	pctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Txn(pctx).If(cl.leaderCmp()).Then(clientv3.OpPut(cl.key("op"), string(b))).Commit()
	if err != nil {
		return err
	}
	if !r.Succeeded {
		return ErrNotActing
	}
	return nil
}

// PendingOp is the operation journaled in etcd, nil when none.
func (cl *Cluster) PendingOp(ctx context.Context) (*Op, error) {
	gctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Get(gctx, cl.key("op"))
	if err != nil || len(r.Kvs) == 0 {
		return nil, err
	}
	var op Op
	if err := json.Unmarshal(r.Kvs[0].Value, &op); err != nil {
		return nil, fmt.Errorf("unreadable operation journal %s: %w", cl.key("op"), err)
	}
	return &op, nil
}

// maxHistory bounds the shared history.
const maxHistory = 200

// EndOp removes the journaled operation and stores the history, in one
// transaction.
func (cl *Cluster) EndOp(ctx context.Context, hist []failover.Record) error {
	return cl.saveHistory(ctx, hist, true)
}

// SaveHistory stores the cluster's operation history (anti-flapping,
// acknowledgements) for every instance.
func (cl *Cluster) SaveHistory(ctx context.Context, hist []failover.Record) error {
	return cl.saveHistory(ctx, hist, false)
}

func (cl *Cluster) saveHistory(ctx context.Context, hist []failover.Record, endOp bool) error {
	if len(hist) > maxHistory {
		hist = hist[len(hist)-maxHistory:]
	}
	b, _ := json.Marshal(hist)
	ops := []clientv3.Op{clientv3.OpPut(cl.key("history"), string(b))}
	if endOp {
		ops = append(ops, clientv3.OpDelete(cl.key("op")))
	}
	pctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Txn(pctx).If(cl.leaderCmp()).Then(ops...).Commit()
	if err != nil {
		return err
	}
	if !r.Succeeded {
		return ErrNotActing
	}
	return nil
}

// History is the shared operation history.
func (cl *Cluster) History(ctx context.Context) ([]failover.Record, error) {
	gctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Get(gctx, cl.key("history"))
	if err != nil || len(r.Kvs) == 0 {
		return nil, err
	}
	var h []failover.Record
	if err := json.Unmarshal(r.Kvs[0].Value, &h); err != nil {
		return nil, fmt.Errorf("unreadable history %s: %w", cl.key("history"), err)
	}
	return h, nil
}

// Forward sends a request to the acting instance and waits for its
// answer (bounded by ctx).
func (cl *Cluster) Forward(ctx context.Context, f Forwarded) (json.RawMessage, error) {
	id := cl.co.leaseID()
	if id == 0 || !cl.co.Valid() {
		return nil, errors.New("this Vigil instance has no etcd lease: it cannot reach the acting instance; send the request to another instance")
	}
	f.From = cl.co.opts.Instance
	f.ID = fmt.Sprintf("%s-%d-%d", f.From, time.Now().UnixNano(), cl.reqSeq.Add(1))
	b, _ := json.Marshal(f)
	rk, resk := cl.key("requests", f.ID), cl.key("results", f.ID)
	pr, err := cl.co.cli.Put(ctx, rk, string(b), clientv3.WithLease(id))
	if err != nil {
		return nil, fmt.Errorf("queueing the request in etcd: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = cl.co.cli.Txn(dctx).Then(clientv3.OpDelete(rk), clientv3.OpDelete(resk), clientv3.OpDelete(cl.key("taken", f.ID))).Commit()
	}()
	wch := cl.co.cli.Watch(ctx, resk, clientv3.WithRev(pr.Header.Revision))
	for wr := range wch {
		if wr.Err() != nil {
			return nil, wr.Err()
		}
		for _, ev := range wr.Events {
			if ev.Type != clientv3.EventTypePut {
				continue
			}
			var res forwardResult
			if err := json.Unmarshal(ev.Kv.Value, &res); err != nil {
				return nil, err
			}
			if res.Error != "" {
				return res.Result, &RemoteError{By: res.By, Msg: res.Error, Refused: res.Refused}
			}
			return res.Result, nil
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("no answer from the acting instance %q: %w", cl.Leader(), ctx.Err())
	}
	return nil, errors.New("lost the watch on etcd while waiting for the acting instance")
}

// serveRequests runs forwarded requests while elected. A request is taken
// once (a persistent "taken" key): if this instance dies while serving it,
// the next one does not run it again.
func (cl *Cluster) serveRequests(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	pfx := cl.key("requests") + "/"
	handle := func(val []byte) {
		var f Forwarded
		if json.Unmarshal(val, &f) != nil || f.ID == "" {
			return
		}
		tk := cl.key("taken", f.ID)
		tctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
		r, err := cl.co.cli.Txn(tctx).If(cl.leaderCmp(), clientv3.Compare(clientv3.CreateRevision(tk), "=", 0)).
			Then(clientv3.OpPut(tk, cl.co.opts.Instance)).Commit()
		cancel()
		if err != nil || !r.Succeeded {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := forwardResult{By: cl.co.opts.Instance}
			if cl.cb.Serve == nil {
				res.Error = "this instance cannot serve requests"
			} else {
				out, refused, err := cl.cb.Serve(ctx, f)
				res.Result, res.Refused = out, refused
				if err != nil {
					res.Error = err.Error()
				}
			}
			b, _ := json.Marshal(res)
			pctx, cancel := context.WithTimeout(context.Background(), cl.co.opts.LeaseTTL)
			defer cancel()
			g, err := cl.co.cli.Grant(pctx, 300)
			if err == nil {
				_, err = cl.co.cli.Put(pctx, cl.key("results", f.ID), string(b), clientv3.WithLease(g.ID))
			}
			if err != nil {
				cl.co.log.Warn("coordination: could not return a forwarded request's result", "cluster", cl.name, "from", f.From, "err", err)
			}
		}()
	}
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
		r, err := cl.co.cli.Get(gctx, pfx, clientv3.WithPrefix())
		cancel()
		if err != nil {
			_ = sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		for _, kv := range r.Kvs {
			handle(kv.Value)
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range cl.co.cli.Watch(wctx, pfx, clientv3.WithPrefix(), clientv3.WithRev(r.Header.Revision+1)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut && ev.Kv.CreateRevision == ev.Kv.ModRevision {
					handle(ev.Kv.Value)
				}
			}
		}
		wcancel()
		_ = sleepCtx(ctx, 100*time.Millisecond)
	}
}

// SaveLifecycle journals the cluster's lifecycle operation (a clone,
// rebuild or replacement; opaque JSON here) while this instance acts, so
// that the next elected instance completes it or says what it left.
func (cl *Cluster) SaveLifecycle(ctx context.Context, op []byte) error {
	pctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Txn(pctx).If(cl.leaderCmp()).Then(clientv3.OpPut(cl.key("lifecycle"), string(op))).Commit()
	if err != nil {
		return fmt.Errorf("journaling the lifecycle operation in etcd: %w", err)
	}
	if !r.Succeeded {
		return ErrNotActing
	}
	return nil
}

// Lifecycle is the journaled lifecycle operation, nil when none.
func (cl *Cluster) Lifecycle(ctx context.Context) ([]byte, error) {
	gctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Get(gctx, cl.key("lifecycle"))
	if err != nil || len(r.Kvs) == 0 {
		return nil, err
	}
	return r.Kvs[0].Value, nil
}

// EndLifecycle removes the journaled lifecycle operation (this instance
// acts).
func (cl *Cluster) EndLifecycle(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, cl.co.opts.LeaseTTL)
	defer cancel()
	r, err := cl.co.cli.Txn(pctx).If(cl.leaderCmp()).Then(clientv3.OpDelete(cl.key("lifecycle"))).Commit()
	if err != nil {
		return err
	}
	if !r.Succeeded {
		return ErrNotActing
	}
	return nil
}
