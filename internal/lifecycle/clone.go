package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// Agent is what a clone asks of a vigil agent (agent.Client).
type Agent interface {
	Status(ctx context.Context) (agent.Status, error)
	Backup(ctx context.Context, w io.Writer, o agent.BackupOptions) (int64, error)
	Restore(ctx context.Context, r io.Reader, o agent.RestoreOptions) (agent.RestoreResult, error)
	Cleanup(ctx context.Context) (agent.CleanupResult, error)
}

var _ Agent = (*agent.Client)(nil)

// SQL runs statements on a server (by address) with the cluster's admin
// account, in order on one connection, and returns the last one's result.
type SQL interface {
	Run(ctx context.Context, addr string, stmts ...string) (cols []string, rows [][]string, err error)
}

// Routing takes a server out of routing and gives it back (the executor:
// the monitor's override, the router's fence and, with several Vigil
// instances, the shared writer record's fenced list, so that no instance
// routes to a server being overwritten).
type Routing interface {
	Exclude(ctx context.Context, server, reason string) error
	Include(ctx context.Context, server, reason string) error
}

// Writer is the cluster's primary when the target is pointed at it: read
// at that moment, so a failover during the stream is followed (a
// replication cluster's designated primary, even while shunned).
type Writer struct {
	Name, Addr string
	Flavor     flavor.Flavor
}

// Plan is one clone, decided.
type Plan struct {
	Cluster            string
	Target, TargetAddr string
	Donor, DonorReason string
	// DonorAgent is the donor's agent address (one clone per donor agent).
	DonorAgent string
	// ReplUser and ReplPass are the cluster's replication account.
	ReplUser, ReplPass string
	// Rate limits the stream (bytes/s, 0: the agent's own limit).
	Rate int64
	// Named: the operator named the donor; it is never replaced.
	Named bool
	// Kind is clone (the default), rebuild (an existing member, maybe a
	// fenced old primary) or replace (a spare taking a lost member's
	// place); it names the events.
	Kind string
	// Replaces is the lost member a replacement takes the place of.
	Replaces string
}

// Kinds of lifecycle operation.
const (
	KindClone   = "clone"
	KindRebuild = "rebuild"
	KindReplace = "replace"
)

func (p Plan) kind() string {
	if p.Kind == "" {
		return KindClone
	}
	return p.Kind
}

// Donor is a donor Deps.NextDonor found.
type Donor struct {
	Name, Reason, AgentAddr string
	Agent                   Agent
}

// maxDonorRestarts bounds how often a clone restarts from another donor.
const maxDonorRestarts = 2

// Deps are a clone's I/O.
type Deps struct {
	Donor, Target Agent
	SQL           SQL
	Routing       Routing
	// Writer reads the current writer; an error fails the clone.
	Writer func() (Writer, error)
	// Event journals a clone event (kind clone_started, clone_finished,
	// clone_failed) about the target.
	Event func(kind, msg string)
	Log   *slog.Logger
	// OnBytes counts streamed bytes (the metric).
	OnBytes func(n int64)
	Now     func() time.Time
	// ReplicaTimeout bounds the wait for replication to run (default
	// 2m); Poll is its interval (default 500ms).
	ReplicaTimeout, Poll time.Duration
	// NextDonor chooses another donor, leaving out those that failed,
	// when the stream from a donor Vigil chose fails before the swap
	// (nil: no restart).
	NextDonor func(ctx context.Context, failed map[string]bool) (Donor, error)
	// PrepareTarget runs once the target is out of routing and before its
	// agent is asked anything: a rebuild makes the target read-only and
	// salvages what it holds that the primary lacks, and returns a
	// sentence for the events (the salvage file). An error fails the
	// operation with the target out of routing and nothing overwritten.
	PrepareTarget func(ctx context.Context) (string, error)
	// Journal records the operation's progress where the next acting
	// Vigil finds it (etcd, or the state dir alone): at every phase, with
	// the backup's GTID and the kept datadir once the swap is done.
	Journal func(j Journal)
	// switchDonor tells the manager the clone moved to another donor.
	switchDonor func(name, agentAddr string)
}

// Journal is a lifecycle operation as journaled: enough for another
// Vigil to finish it (the swap is done and the GTID known) or to say
// what state it left the target in.
type Journal struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	Cluster    string    `json:"cluster"`
	Target     string    `json:"target"`
	TargetAddr string    `json:"target_addr"`
	Donor      string    `json:"donor"`
	Replaces   string    `json:"replaces,omitempty"`
	Phase      string    `json:"phase"`
	GTID       string    `json:"gtid,omitempty"`
	OldDatadir string    `json:"old_datadir,omitempty"`
	Started    time.Time `json:"started"`
	Instance   string    `json:"instance,omitempty"`
	// OutOfRouting: the target left routing for this operation (so a
	// failure keeps it out).
	OutOfRouting bool `json:"out_of_routing,omitempty"`
}

func (d *Deps) defaults() {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.ReplicaTimeout <= 0 {
		d.ReplicaTimeout = 2 * time.Minute
	}
	if d.Poll <= 0 {
		d.Poll = 500 * time.Millisecond
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Event == nil {
		d.Event = func(string, string) {}
	}
	if d.Journal == nil {
		d.Journal = func(Journal) {}
	}
}

// countWriter counts what goes through to the restore.
type countWriter struct {
	w io.Writer
	t *tracker
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.t.add(n)
	return n, err
}

// run executes one clone: fence the target, stream donor → target, point
// the target at the writer from the backup's GTID, wait for replication,
// hand the target back to routing. A failure leaves the target out of
// routing; the donor is only read.
func run(ctx context.Context, t *tracker, p Plan, d Deps) error {
	d.defaults()
	kind := p.kind()
	log := d.Log.With("cluster", p.Cluster, "target", p.Target, "donor", p.Donor, "kind", kind)
	swapped, fenced := "", false
	jr := Journal{ID: fmt.Sprintf("%s-%d", p.Target, t.view().Started.UnixNano()), Kind: kind, Cluster: p.Cluster, Target: p.Target,
		TargetAddr: p.TargetAddr, Donor: p.Donor, Replaces: p.Replaces, Started: t.view().Started}
	journal := func(phase string) {
		jr.Phase, jr.Donor = phase, p.Donor
		d.Journal(jr)
	}
	fail := func(err error) error {
		ph := t.view().Phase
		now := d.Now()
		t.set(func(pr *Progress) {
			pr.Phase, pr.Error, pr.Finished, pr.Running = PhaseFailed, err.Error(), &now, false
		})
		kept := p.Target + "'s datadir is unchanged (the agent swaps only after a successful prepare)"
		if swapped != "" {
			kept = p.Target + " runs the cloned datadir; its previous one is kept at " + swapped
		}
		again := fmt.Sprintf("vigil ctl %s %s", kind, p.Target)
		if kind == KindReplace {
			again = fmt.Sprintf("vigil ctl clone %s", p.Target)
		}
		if !fenced {
			d.Event(kind+"_failed", fmt.Sprintf("%s of %s from %s failed before it started: %v. Nothing was changed: %s is still routed as before. Fix the cause and run %s again.",
				kind, p.Target, p.Donor, err, p.Target, again))
			log.Warn(kind+" failed before it started", "err", err)
			journal(PhaseFailed)
			return err
		}
		d.Event(kind+"_failed", fmt.Sprintf("%s of %s from %s failed while %s: %v. %s stays out of routing (OFFLINE_HARD); %s. Fix the cause and run %s again, or set it ONLINE (vigil ctl set-state) to route it as it is.",
			kind, p.Target, p.Donor, ph, err, p.Target, kept, again))
		log.Warn(kind+" failed", "phase", ph, "err", err)
		journal(PhaseFailed)
		return err
	}
	fence := func() error {
		t.phase(PhaseFencing)
		journal(PhaseFencing)
		if err := d.Routing.Exclude(ctx, p.Target, fmt.Sprintf("being %s from %s", pastTense(kind), p.Donor)); err != nil {
			return fmt.Errorf("taking %s out of routing: %w", p.Target, err)
		}
		fenced, jr.OutOfRouting = true, true
		return nil
	}

	// Preflight, before the target leaves routing: both agents answer,
	// the donor's server runs, the target is not writable. A rebuild
	// fences first: its target may be a fenced old primary that answers
	// as writable until PrepareTarget makes it read-only.
	st, err := d.Donor.Status(ctx)
	if err != nil {
		return fail(fmt.Errorf("donor %s's agent: %w", p.Donor, err))
	}
	if !st.Answering {
		return fail(fmt.Errorf("donor %s's server does not answer its agent (%s)", p.Donor, st.Error))
	}
	salvaged := ""
	if d.PrepareTarget != nil {
		if err := fence(); err != nil {
			return fail(err)
		}
		if salvaged, err = d.PrepareTarget(ctx); err != nil {
			return fail(fmt.Errorf("preparing %s: %w", p.Target, err))
		}
		t.set(func(pr *Progress) { pr.Salvage = salvaged })
	}
	tst, err := d.Target.Status(ctx)
	if err != nil {
		return fail(fmt.Errorf("target %s's agent: %w", p.Target, err))
	}
	switch {
	case tst.Answering && !tst.ReadOnly:
		return fail(fmt.Errorf("target %s answers with read_only=OFF: a writable server is never overwritten", p.Target))
	case tst.SalvageHold:
		return fail(fmt.Errorf("target %s is under a salvage hold (its transactions are not salvaged yet)", p.Target))
	case tst.Busy != "":
		return fail(fmt.Errorf("target %s's agent is busy (%s)", p.Target, tst.Busy))
	case tst.FreeBytes > 0 && copyBytes(st) > tst.FreeBytes:
		return fail(fmt.Errorf("target %s has too little disk space: %s free beside its datadir, a copy of the donor's datadir needs %s (%d > %d bytes: its datadir without binary and relay logs; the old datadir is kept until the clone replicates, so the copy needs room beside it): free space on %s's file system first",
			p.Target, mib(tst.FreeBytes), mib(copyBytes(st)), copyBytes(st), tst.FreeBytes, p.Target))
	}
	t.set(func(pr *Progress) { pr.TotalBytes = streamBytes(st) })

	if !fenced {
		if err := fence(); err != nil {
			return fail(err)
		}
	}
	direct := peerPull(d, p, st, tst)
	d.Event(kind+"_started", fmt.Sprintf("%s %s from %s (%s)%s, the stream %s; %s is out of routing (OFFLINE_HARD) until it replicates%s",
		gerund(kind), p.Target, p.Donor, p.DonorReason, replacing(p), pathOf(direct), p.Target, salvaged))
	log.Info(kind+" started", "reason", p.DonorReason, "rate_limit", p.Rate)

	total, failed := streamBytes(st), map[string]bool{}
	var res agent.RestoreResult
	for restarts := 0; ; restarts++ {
		t.phase(PhaseStreaming)
		t.set(func(pr *Progress) { pr.Path = pathOf(direct) })
		journal(PhaseStreaming)
		res, err = stream(ctx, t, d, p, total, direct)
		if err == nil {
			break
		}
		if p.Named || d.NextDonor == nil || restarts >= maxDonorRestarts || res.OldDatadir != "" || ctx.Err() != nil || targetRefused(err) {
			return fail(err)
		}
		failed[p.Donor] = true
		nd, nerr := d.NextDonor(ctx, failed)
		if nerr != nil {
			return fail(fmt.Errorf("%w; no other donor: %v", err, nerr))
		}
		// The target's agent may still be throwing the partial copy away.
		if werr := waitIdle(ctx, d.Target, d.Poll, time.Minute); werr != nil {
			return fail(fmt.Errorf("%w; target %s's agent: %v", err, p.Target, werr))
		}
		nst, nerr := nd.Agent.Status(ctx)
		if nerr != nil || !nst.Answering {
			return fail(fmt.Errorf("%w; the next donor %s does not answer (%v %s)", err, nd.Name, nerr, nst.Error))
		}
		d.Event(kind+"_donor_changed", fmt.Sprintf("the stream from %s failed (%v); the %s of %s restarts from %s (%s); %s stays out of routing",
			p.Donor, err, kind, p.Target, nd.Name, nd.Reason, p.Target))
		log.Warn(kind+" restarts from another donor", "failed", p.Donor, "next", nd.Name, "err", err)
		p.Donor, p.DonorReason, p.DonorAgent, d.Donor, total = nd.Name, nd.Reason, nd.AgentAddr, nd.Agent, streamBytes(nst)
		direct = peerPull(d, p, nst, tst)
		if d.switchDonor != nil {
			d.switchDonor(nd.Name, nd.AgentAddr)
		}
		_ = d.Routing.Exclude(ctx, p.Target, fmt.Sprintf("being %s from %s", pastTense(kind), p.Donor))
		t.set(func(pr *Progress) {
			pr.Donor, pr.DonorReason, pr.Bytes, pr.TotalBytes = nd.Name, nd.Reason, 0, total
			pr.DonorRestarts++
		})
	}
	swapped = res.OldDatadir
	t.set(func(pr *Progress) { pr.GTID, pr.OldDatadir = res.GTID, res.OldDatadir })
	if res.GTID == "" {
		return fail(errors.New("the backup carries no GTID position (mariadb_backup_binlog_info): cannot start replication from it"))
	}
	jr.GTID, jr.OldDatadir = res.GTID, res.OldDatadir
	w, err := Finish(ctx, t, p, d, jr)
	if err != nil {
		return fail(err)
	}
	cleaned := ""
	if cr, err := d.Target.Cleanup(ctx); err != nil {
		cleaned = fmt.Sprintf("; the previous datadir %s could not be deleted (%v): delete it by hand", res.OldDatadir, err)
	} else if len(cr.Removed) > 0 {
		cleaned = "; previous datadir deleted"
	}
	now := d.Now()
	t.phase(PhaseDone)
	t.set(func(pr *Progress) { pr.Finished, pr.Running = &now, false })
	journal(PhaseDone)
	v := t.view()
	took := now.Sub(v.Started).Round(time.Millisecond)
	d.Event(kind+"_finished", fmt.Sprintf("%s %s from %s%s: %d bytes streamed at %.1f MB/s, %s in all; replicating from %s from GTID %s; back in routing once its checks pass%s",
		p.Target, pastTense(kind), p.Donor, replacing(p), v.Bytes, v.RateBytes/1e6, took, w.Name, res.GTID, cleaned))
	log.Info(kind+" finished", "bytes", v.Bytes, "took", took, "writer", w.Name, "gtid", res.GTID)
	return nil
}

// Finish points a restored target at the writer from gtid, waits until it
// replicates and gives it back to routing: the end of a clone, and what
// another Vigil runs to complete one whose acting instance died after the
// swap (jr is its journal; jr.GTID where replication starts). t may be
// nil.
func Finish(ctx context.Context, t *tracker, p Plan, d Deps, jr Journal) (Writer, error) {
	d.defaults()
	gtid := jr.GTID
	phase := func(ph string) {
		if t != nil {
			t.phase(ph)
		}
		jr.Phase = ph
		d.Journal(jr)
	}
	phase(PhaseReplicating)
	var w Writer
	if err := retry(ctx, 30, time.Second, func() (err error) { w, err = d.Writer(); return err }); err != nil {
		return w, err
	}
	f := w.Flavor
	stmts := append([]string{}, f.ReadOnly(true)...)
	stmts = append(stmts, f.StopReplica(), f.ResetReplicaAll(), f.SetReplicaStartPos(gtid))
	stmts = append(stmts, failover.RepointSQL(f, w.Addr, p.ReplUser, p.ReplPass, failover.ModeSlavePos)...)
	if err := retry(ctx, 5, time.Second, func() error {
		_, _, err := d.SQL.Run(ctx, p.TargetAddr, stmts...)
		return err
	}); err != nil {
		return w, fmt.Errorf("pointing %s at the writer %s: %w", p.Target, w.Name, err)
	}
	phase(PhaseVerifying)
	if err := waitReplicating(ctx, d, p.TargetAddr, f); err != nil {
		return w, fmt.Errorf("%s does not replicate from %s: %w", p.Target, w.Name, err)
	}
	phase(PhaseRouting)
	if err := d.Routing.Include(ctx, p.Target, fmt.Sprintf("%s from %s", pastTense(p.kind()), p.Donor)); err != nil {
		return w, fmt.Errorf("giving %s back to routing: %w", p.Target, err)
	}
	return w, nil
}

func gerund(kind string) string {
	if kind == KindRebuild {
		return "rebuilding"
	}
	return "cloning"
}

func replacing(p Plan) string {
	if p.Replaces == "" {
		return ""
	}
	return " to replace " + p.Replaces
}

func pastTense(kind string) string {
	switch kind {
	case KindRebuild:
		return "rebuilt"
	}
	return "cloned"
}

// mib shows a size in MiB for an operator.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// targetRefused: the target's agent refused or ran out of space on its
// own (no space, writable, salvage hold…); another donor would meet the
// same refusal, so the clone fails instead of restarting.
func targetRefused(err error) bool {
	var ae *agent.Error
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Code {
	case agent.CodeNoSpace, agent.CodeWritable, agent.CodeSalvageHold, agent.CodeUnknownState, agent.CodeBusy, agent.CodeUnauthorized:
		return true
	}
	return false
}

// watchedDonor counts the donor's stream and moves the phase to
// preparing once it is complete.
type watchedDonor struct {
	Agent
	t *tracker
}

func (w watchedDonor) Backup(ctx context.Context, out io.Writer, o agent.BackupOptions) (int64, error) {
	n, err := w.Agent.Backup(ctx, countWriter{out, w.t}, o)
	if err == nil {
		w.t.phase(PhasePreparing)
	}
	return n, err
}

// stream moves the donor's backup into the target's restore: pulled by
// the target's agent from the donor's when both can (direct), otherwise
// relayed by Vigil (agent.Clone), counting the bytes.
func stream(ctx context.Context, t *tracker, d Deps, p Plan, expected int64, direct bool) (agent.RestoreResult, error) {
	if direct {
		res, err := pullStream(ctx, t, d, p, expected)
		var ae *agent.Error
		if !errors.As(err, &ae) || ae.Code != agent.CodeNoPeer || ctx.Err() != nil {
			return res, err
		}
		// The target's agent could not open the donor's stream (another
		// CA, a firewall between the hosts): nothing was streamed, so
		// Vigil relays it instead.
		d.Log.Warn("the target's agent cannot pull from the donor's; Vigil relays the stream", "err", err)
		t.set(func(pr *Progress) { pr.Path = PathRelayed + " (agent to agent failed: " + ae.Message + ")" })
		if werr := waitIdle(ctx, d.Target, d.Poll, time.Minute); werr != nil {
			return res, fmt.Errorf("%w; target's agent: %v", err, werr)
		}
	}
	res, _, err := agent.Clone(ctx, watchedDonor{d.Donor, t}, d.Target, agent.BackupOptions{Rate: p.Rate}, agent.RestoreOptions{ExpectedSize: expected})
	return res, err
}

// PeerAgent is what an agent client does for an agent-to-agent stream
// (*agent.Client does it; see internal/agent/peer.go).
type PeerAgent interface {
	Ticket(ctx context.Context, rate int64) (agent.TicketResult, error)
	RestoreFrom(ctx context.Context, from, ticket string, o agent.RestoreOptions) (agent.RestoreResult, error)
	Progress(ctx context.Context) (*agent.RestoreProgress, error)
}

var _ PeerAgent = (*agent.Client)(nil)

// Stream paths (Progress.Path).
const (
	PathDirect  = "agent to agent"
	PathRelayed = "relayed by Vigil"
)

func pathOf(direct bool) string {
	if direct {
		return PathDirect
	}
	return PathRelayed
}

// peerPull reports whether the target's agent can pull the stream from
// the donor's itself: both agents say they can (a certificate for both
// usages), and the donor's agent address is known.
func peerPull(d Deps, p Plan, donor, target agent.Status) bool {
	_, dp := d.Donor.(PeerAgent)
	_, tp := d.Target.(PeerAgent)
	return dp && tp && p.DonorAgent != "" && donor.PeerPull && target.PeerPull
}

// pullStream has the target's agent pull the backup from the donor's
// agent with a ticket the donor's agent issued for it, and follows the
// progress on the target's status meanwhile.
func pullStream(ctx context.Context, t *tracker, d Deps, p Plan, expected int64) (agent.RestoreResult, error) {
	tk, err := d.Donor.(PeerAgent).Ticket(ctx, p.Rate)
	if err != nil {
		return agent.RestoreResult{}, fmt.Errorf("donor %s's agent: ticket: %w", p.Donor, err)
	}
	wctx, stop := context.WithCancel(ctx)
	var counted int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The progress read is cheap on the agent (no datadir walk, no
		// login, no audit line): every Poll.
		tick := time.NewTicker(d.Poll)
		defer tick.Stop()
		target := d.Target.(PeerAgent)
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			pr, err := target.Progress(wctx)
			if err != nil || pr == nil {
				continue
			}
			if n := pr.Bytes - counted; n > 0 {
				t.add(int(n))
				counted += n
			}
			if pr.Phase != agent.RestoreReceiving {
				t.phase(PhasePreparing)
			}
		}
	}()
	res, err := d.Target.(PeerAgent).RestoreFrom(ctx, p.DonorAgent, tk.Ticket, agent.RestoreOptions{ExpectedSize: expected})
	stop()
	<-done
	if err != nil {
		return res, err
	}
	if n := res.BytesReceived - counted; n > 0 {
		t.add(int(n))
	}
	t.phase(PhasePreparing)
	t.set(func(pr *Progress) {
		// The target's agent timed the stream itself; polling its status
		// sees the end of it late.
		if sec := cmp.Or(res.StreamSeconds, res.ExtractSeconds); sec > 0 {
			pr.RateBytes = float64(res.BytesReceived) / sec
		}
	})
	return res, nil
}

// waitReplicating polls the target's replica status until both threads
// run without an error, or fails on a replication error or the timeout.
func waitReplicating(ctx context.Context, d Deps, addr string, f flavor.Flavor) error {
	ctx, cancel := context.WithTimeout(ctx, d.ReplicaTimeout)
	defer cancel()
	last := "no replica status yet"
	for {
		cols, rows, err := d.SQL.Run(ctx, addr, f.ReplicaStatus())
		switch {
		case err != nil:
			last = err.Error()
		case len(rows) == 0:
			last = "no replication configured"
		default:
			rs := topology.ParseReplicaStatus(cols, rows[0])
			if rs.LastSQLErrno != 0 {
				return fmt.Errorf("SQL thread error %d: %s", rs.LastSQLErrno, rs.LastSQLError)
			}
			if rs.IORunning == topology.IOYes && rs.SQLRunning && rs.LastIOErrno == 0 {
				return nil
			}
			last = fmt.Sprintf("IO thread %s, SQL thread running %t", rs.IORunning, rs.SQLRunning)
			if rs.LastIOErrno != 0 {
				last += fmt.Sprintf(", IO error %d: %s", rs.LastIOErrno, rs.LastIOError)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not replicating after %s (%s)", d.ReplicaTimeout, strings.TrimSpace(last))
		case <-time.After(d.Poll):
		}
	}
}

// waitIdle waits until a's agent runs no operation.
func waitIdle(ctx context.Context, a Agent, poll, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		st, err := a.Status(ctx)
		if err == nil && st.Busy == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return err
			}
			return fmt.Errorf("still busy (%s) after %s", st.Busy, timeout)
		case <-time.After(poll):
		}
	}
}

func retry(ctx context.Context, n int, wait time.Duration, f func() error) error {
	var err error
	for i := 0; i < n; i++ {
		if err = f(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
	return err
}

// DryRun is what a clone would do, without doing it (`vigil ctl clone
// --dry-run`): the donor Vigil chose and why, the writer the target would
// replicate from, and the steps in order.
type DryRun struct {
	DryRun      bool     `json:"dry_run"`
	Kind        string   `json:"kind"`
	Cluster     string   `json:"cluster"`
	Target      string   `json:"target"`
	Donor       string   `json:"donor"`
	DonorReason string   `json:"donor_reason"`
	Writer      string   `json:"writer"`
	Steps       []string `json:"steps"`
}

// PlanSteps are the steps Run takes for p, in order, as an operator reads
// them; writer is the primary the target would replicate from now.
func PlanSteps(p Plan, writer string) []string {
	rate := "at the agent's own limit"
	if p.Rate > 0 {
		rate = fmt.Sprintf("limited to %d bytes/s", p.Rate)
	}
	restart := "a failed stream restarts from another caught-up donor (at most twice)"
	if p.Named {
		restart = "a failed stream ends the clone (the donor was named: it is never replaced)"
	}
	fence := fmt.Sprintf("%s: take %s out of routing on every Vigil instance (OFFLINE_HARD \"being %s from %s\")", PhaseFencing, p.Target, pastTense(p.kind()), p.Donor)
	check := fmt.Sprintf("%s: check both agents: %s answers and runs; %s is not writable, not under a salvage hold, not busy, and has room for %s's datadir", PhaseChecking, p.Donor, p.Target, p.Donor)
	first := []string{check + " (a failure here changes nothing)", fence}
	if p.kind() == KindRebuild {
		first = []string{fence,
			fmt.Sprintf("salvage: make %s read-only (semi-sync source off first) and write every transaction it holds that the primary (now %s) lacks to a salvage file; if %s does not answer or the file cannot be written, stop here: nothing is overwritten", p.Target, writer, p.Target),
			check}
	}
	return append(first,
		fmt.Sprintf("%s: stream %s's mariadb-backup into %s's agent, %s; %s", PhaseStreaming, p.Donor, p.Target, rate, restart),
		fmt.Sprintf("%s: %s's agent prepares the copy beside the datadir, stops the server, swaps the datadirs (the old one kept aside) and starts it", PhasePreparing, p.Target),
		fmt.Sprintf("%s: on %s: read_only=ON, reset replication, gtid_slave_pos from the backup, replicate from the primary (now %s) with GTID", PhaseReplicating, p.Target, writer),
		fmt.Sprintf("%s: wait until both replication threads of %s run without error", PhaseVerifying, p.Target),
		fmt.Sprintf("%s: give %s back to routing on every instance (routed once its checks pass); delete the old datadir", PhaseRouting, p.Target),
	)
}

// copyBytes is the room a copy of the donor's datadir needs on the
// target; an agent that does not say gives its whole datadir.
func copyBytes(st agent.Status) int64 {
	if st.CopyBytes > 0 {
		return st.CopyBytes
	}
	return st.DatadirBytes
}

// streamBytes is about what the donor's backup streams (the progress's
// total and ETA).
func streamBytes(st agent.Status) int64 {
	if st.StreamBytes > 0 {
		return st.StreamBytes
	}
	return st.DatadirBytes
}
