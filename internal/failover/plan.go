package failover

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// PlanKind is what a plan does.
type PlanKind uint8

const (
	KindFailover PlanKind = iota
	KindSwitchover
	KindGaleraWriterMove
	KindRejoin
	// KindRestoreWriter makes the designated primary, which a failed
	// operation left read-only, writable and routes writes to it.
	KindRestoreWriter
)

func (k PlanKind) String() string {
	switch k {
	case KindFailover:
		return "failover"
	case KindSwitchover:
		return "switchover"
	case KindGaleraWriterMove:
		return "galera-writer-move"
	case KindRejoin:
		return "rejoin"
	case KindRestoreWriter:
		return "restore-writer"
	}
	return fmt.Sprintf("PlanKind(%d)", uint8(k))
}

// Plan is an ordered list of steps for the executor, with what they
// change.
type Plan struct {
	Kind    PlanKind
	Cluster string
	// Flavor decides the SQL the executor uses.
	Flavor flavor.Flavor
	// Auto: the engine started it, not an operator.
	Auto       bool
	OldPrimary string
	NewPrimary string
	// Views says what each Vigil instance saw of the old primary when an
	// automatic failover was decided (coordinated instances only).
	Views string `json:",omitempty"`
	// Term is the writer term the new primary is routed under: the
	// snapshot's term + 1 when the writer changes, else the same.
	Term uint64
	// Repoint are the servers made replicas of NewPrimary.
	Repoint []string
	// Quarantine are the servers kept out of routing because they hold
	// transactions the new primary lacks.
	Quarantine []Quarantined
	// Unreachable are replicas that could not be checked: they still
	// point at the old primary; rejoin them when they return.
	Unreachable []string
	Steps       []Step
	// Rollback is run, in order, when a step before NoReturn fails
	// (switchover: give the old primary its writes back, release held
	// statements). A failure at or after NoReturn only stops the plan.
	Rollback []Step
	NoReturn int
	// CutEnd: the steps before it fence the old primary and cut its
	// replicas' IO threads (a failover's first phase); after them the
	// executor reads the cut replicas again and asks PlanAfterCut for the
	// rest. 0 in other plans.
	CutEnd int

	notes []string
}

// Quarantined is a server kept out of routing, with what it holds that
// the new primary lacks and how to repair it.
type Quarantined struct {
	Server  string
	Extra   string
	Message string
}

// StepKind is one kind of executor action.
type StepKind uint8

const (
	// FenceRouter: stop routing to the server and close its sessions; it
	// stays fenced until an operator rejoins it.
	FenceRouter StepKind = iota
	// SetReadOnly: SET GLOBAL read_only=1 (and super_read_only=1 on MySQL).
	SetReadOnly
	// FenceHook: run fence_command; a non-zero exit fails the step.
	FenceHook
	// Quarantine: keep the server out of routing; Detail says why and how
	// to repair it.
	Quarantine
	// StartSQLThread: START SLAVE SQL_THREAD, so the relay log is applied.
	StartSQLThread
	// WaitRelayApplied: wait until the server applied its relay log up to
	// Position (MASTER_GTID_WAIT / WAIT_FOR_EXECUTED_GTID_SET), at most
	// Timeout.
	WaitRelayApplied
	// StopReplication: STOP SLAVE / STOP REPLICA.
	StopReplication
	// ResetReplica: RESET SLAVE ALL / RESET REPLICA ALL.
	ResetReplica
	// SetWritable: SET GLOBAL read_only=0 (super_read_only=0).
	SetWritable
	// SetRouterWriter: route writes to the server under Plan.Term.
	SetRouterWriter
	// Repoint: make the server a replica of Source with GTID auto
	// positioning and start it.
	Repoint
	// VerifyReplicating: both replication threads run without error, at
	// most Timeout after the repoint.
	VerifyReplicating
	// Hold: hold new statements at the router, at most Timeout.
	Hold
	// DrainTransactions: wait for open transactions on the server to end,
	// at most Timeout.
	DrainTransactions
	// KillTransactions: kill client connections still in a transaction.
	KillTransactions
	// WaitGTID: read Source's final GTID position and wait until the
	// server applied it, at most Timeout.
	WaitGTID
	// VerifyNoErrant: the server holds no transaction Source lacks.
	VerifyNoErrant
	// Release: release the held statements to the current writer.
	Release
	// Unfence: let the monitor route the server again.
	Unfence
	// StartReplication: START SLAVE / START REPLICA (rollback).
	StartReplication
	// SetSemiSync: SET GLOBAL each of Settings (the semi-sync role
	// settings).
	SetSemiSync
	// StopIOThread: STOP SLAVE IO_THREAD / STOP REPLICA IO_THREAD, so
	// nothing the old primary does after the decision reaches the server.
	StopIOThread
	// KillPreFence: kill the connections Vigil had open on the server when
	// it was fenced (statements still in flight on them must not run).
	KillPreFence

	numStepKinds
)

var stepNames = [numStepKinds]string{
	FenceRouter: "fence-router", SetReadOnly: "set-read-only", FenceHook: "fence-hook", Quarantine: "quarantine",
	StartSQLThread: "start-sql-thread", WaitRelayApplied: "wait-relay-applied", StopReplication: "stop-replication",
	ResetReplica: "reset-replica", SetWritable: "set-writable", SetRouterWriter: "set-router-writer", Repoint: "repoint",
	VerifyReplicating: "verify-replicating", Hold: "hold", DrainTransactions: "drain-transactions",
	KillTransactions: "kill-transactions", WaitGTID: "wait-gtid", VerifyNoErrant: "verify-no-errant",
	Release: "release", Unfence: "unfence", StartReplication: "start-replication", SetSemiSync: "set-semi-sync",
	StopIOThread: "stop-io-thread", KillPreFence: "kill-pre-fence",
}

func (k StepKind) String() string {
	if k < numStepKinds {
		return stepNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", uint8(k))
}

// OnFail is what the executor does when a step fails or times out.
type OnFail uint8

const (
	// Abort stops the plan (after the plan's Rollback, if the step comes
	// before NoReturn) and records the failure; automatic failover then
	// waits for an operator's ack.
	Abort OnFail = iota
	// Continue records the failure and goes on: the step was best effort.
	Continue
	// QuarantineServer keeps the step's server out of routing, records
	// why, skips its remaining steps and goes on.
	QuarantineServer
)

func (f OnFail) String() string {
	switch f {
	case Abort:
		return "abort"
	case Continue:
		return "continue"
	case QuarantineServer:
		return "quarantine"
	}
	return fmt.Sprintf("OnFail(%d)", uint8(f))
}

// Step is one executor action.
type Step struct {
	Kind StepKind
	// Server is the server acted on; empty for router-wide steps (Hold,
	// Release).
	Server string
	// Source is the other server involved: the new source of a Repoint,
	// the server whose position a WaitGTID or VerifyNoErrant compares
	// with.
	Source string
	// Position is the GTID position to wait for, when known in advance.
	Position string
	Timeout  time.Duration
	// Settings are the global variables a SetSemiSync step sets, in order.
	Settings []Setting
	// Mode is a MariaDB repoint's MASTER_USE_GTID (ModeSlavePos,
	// ModeCurrentPos); the statements are RepointSQL's.
	Mode   string
	OnFail OnFail
	// Detail says what the step does and why, with the SQL it stands for.
	Detail string
}

// failoverPlan builds rule 3 (fence first) and rule 5 (promote, repoint,
// quarantine) around the chosen candidate c.
func (v *view) failoverPlan(c int, auto bool) *Plan {
	old, newName := v.name(v.primary), v.name(c)
	co := v.obs(c)
	pl := &Plan{Kind: KindFailover, Cluster: v.snap.Cluster, Flavor: flavor.OfObservation(co), Auto: auto,
		OldPrimary: old, NewPrimary: newName, Term: v.snap.Term + 1}
	add := func(s Step) { pl.Steps = append(pl.Steps, s) }

	add(Step{Kind: FenceRouter, Server: old,
		Detail: fmt.Sprintf("stop routing to %s and close its sessions; writes wait for the new primary (term %d)", old, pl.Term)})
	ro := sqlText(ReadOnlySQL(flavor.OfObservation(co), true))
	if v.ok(v.primary) {
		add(Step{Kind: SetReadOnly, Server: old, OnFail: Continue, Detail: ro + " (best effort)"})
	} else {
		add(Step{Kind: SetReadOnly, Server: old, OnFail: Continue,
			Detail: ro + " if it is reachable (best effort: it was not at the last check)"})
	}

	r := co.Replica
	sqlStopped := r != nil && !r.SQLRunning
	if sqlStopped && len(v.in.Cut) == 0 {
		// Before the cut: in GTID mode MariaDB forgets an unapplied relay
		// log once both threads of a replica are stopped (a later START
		// SLAVE SQL_THREAD finds "all relay log read").
		add(Step{Kind: StartSQLThread, Server: newName, Detail: startSQLDetail(flavor.OfObservation(co)) + "; started before its IO thread is stopped, which would make MariaDB discard the relay log"})
	}
	// Cut replication from the old primary before anything else: a primary
	// that resumes (SIGSTOP, a healed partition) runs what is queued in its
	// sockets, and a replica still connected would receive it and then
	// hold transactions the new primary lacks. The candidate is then
	// chosen again from the positions after the cut (PlanAfterCut).
	for i := range v.snap.Servers {
		if i == v.primary || !v.ok(i) || v.cut(i) || !v.replicatesFrom(i, v.primary) {
			continue
		}
		if r := v.obs(i).Replica; r == nil || r.IORunning == topology.IONo && r.LastIOErrno == 0 {
			continue // stopped already
		} else if !r.SQLRunning && i != c {
			// Stopping its IO thread too would discard its relay log
			// (MariaDB, GTID mode); it is not the candidate, and its
			// repoint discards the relay log anyway.
			continue
		}
		stop := Step{Kind: StopIOThread, Server: v.name(i), OnFail: Continue, Settings: stopIOSettings(flavor.OfObservation(co), v.obs(i))}
		stop.Detail = fmt.Sprintf("%s: nothing %s does from now on reaches %s (at the same time as the step before)", sqlText(StepSQL(flavor.OfObservation(co), stop)), old, v.name(i))
		if len(stop.Settings) > 0 {
			stop.Detail += "; a semi-sync replica's IO thread ends only after it tried to kill its dump thread on the source, which a paused or cut-off source never answers: the wait is bounded to 1 s (the least the server allows)"
		}
		add(stop)
	}
	if v.opts.FenceCommand != "" {
		add(Step{Kind: FenceHook, Server: old,
			Detail: fmt.Sprintf("run fence_command %q; a non-zero exit aborts the failover", v.opts.FenceCommand)})
	}
	pl.CutEnd = len(pl.Steps)
	if sqlStopped && len(v.in.Cut) > 0 {
		// Chosen after the cut: it was not cut (see above).
		add(Step{Kind: StartSQLThread, Server: newName, Detail: startSQLDetail(flavor.OfObservation(co))})
	}

	pc := v.received(c)
	var repoint []int
	for i := range v.snap.Servers {
		if i == c || i == v.primary {
			continue
		}
		o := v.obs(i)
		if o == nil || !o.OK {
			if v.snap.Servers[i].Role == topology.RoleReplica {
				pl.Unreachable = append(pl.Unreachable, v.name(i))
				pl.notes = append(pl.notes, fmt.Sprintf("%s could not be checked: it still points at %s; when it returns run `vigil ctl rejoin %s`", v.name(i), old, v.name(i)))
			}
			continue
		}
		if v.fenced(i) || !v.replicatesFrom(i, v.primary) {
			continue
		}
		if x := v.received(i).extra(pc); x != "" {
			q := Quarantined{Server: v.name(i), Extra: x, Message: quarantineMessage(v.name(i), newName, x, co.Flavor)}
			pl.Quarantine = append(pl.Quarantine, q)
			add(Step{Kind: Quarantine, Server: q.Server, Detail: q.Message})
			continue
		}
		repoint = append(repoint, i)
	}

	if relayPending(co) {
		if st, ok := v.unstallStep(c); ok {
			add(st)
		}
		add(Step{Kind: WaitRelayApplied, Server: newName, Position: pc.String(), Timeout: v.opts.ApplyTimeout,
			Detail: fmt.Sprintf("wait until %s has applied its relay log up to %s (%s, at most apply_timeout %s); on timeout abort: never promote over an unapplied relay log",
				newName, orNone(pc.String()), waitFunc(flavor.OfObservation(co)), v.opts.ApplyTimeout)})
	}
	add(Step{Kind: StopReplication, Server: newName, Detail: sqlText(StepSQL(flavor.OfObservation(co), Step{Kind: StopReplication}))})
	add(Step{Kind: ResetReplica, Server: newName, Detail: sqlText(StepSQL(flavor.OfObservation(co), Step{Kind: ResetReplica})) + ": forget " + old + " as its source"})
	if st, ok := v.semiSyncPrimaryStep(c); ok {
		add(st)
	}
	add(Step{Kind: SetWritable, Server: newName, Detail: sqlText(ReadOnlySQL(flavor.OfObservation(co), false))})
	add(Step{Kind: SetRouterWriter, Server: newName, Detail: fmt.Sprintf("route writes to %s under term %d", newName, pl.Term)})

	for _, i := range repoint {
		pl.Repoint = append(pl.Repoint, v.name(i))
		pl.Steps = append(pl.Steps, v.repointSteps(i, c, false)...)
	}
	pl.notes = append(pl.notes, fmt.Sprintf("%s stays fenced; when it returns, `vigil ctl rejoin %s` checks its GTID history and makes it a replica of %s", old, old, newName))
	return pl
}

// repointSteps make server i a replica of src and check it replicates.
// formerPrimary: i's own transactions are in gtid_binlog_pos, so MariaDB
// must start from gtid_current_pos rather than gtid_slave_pos. The caller
// has checked that src holds every transaction i received, so discarding
// i's unapplied relay log (CHANGE MASTER does) loses nothing: src sends
// those transactions again.
func (v *view) repointSteps(i, src int, formerPrimary bool) []Step {
	name, srcName := v.name(i), v.name(src)
	o := v.obs(i)
	mode := ModeSlavePos
	if formerPrimary {
		mode = ModeCurrentPos
	}
	detail := changeMasterSQL(flavor.OfObservation(o), v.snap.Servers[src].Addr, mode)
	if relayPending(o) {
		detail += fmt.Sprintf("; its unapplied relay log (up to %s) is discarded: %s holds all of it and sends it again", orNone(v.received(i).String()), srcName)
	}
	var steps []Step
	if st, ok := v.semiSyncReplicaStep(i); ok {
		st.OnFail = QuarantineServer
		steps = append(steps, st)
	}
	return append(steps,
		Step{Kind: Repoint, Server: name, Source: srcName, Mode: mode, OnFail: QuarantineServer, Detail: detail},
		Step{Kind: VerifyReplicating, Server: name, Source: srcName, Timeout: v.opts.ApplyTimeout, OnFail: QuarantineServer,
			Detail: fmt.Sprintf("both replication threads of %s run without error (at most %s); otherwise it is quarantined", name, v.opts.ApplyTimeout)})
}

// relayPending reports whether a replica received transactions it has not
// applied yet: by GTID, or by binlog coordinates when the GTIDs cannot tell.
func relayPending(o *topology.Observation) bool {
	r := o.Replica
	if r == nil {
		return false
	}
	if !appliedPos(o).contains(receivedPos(o)) {
		return true
	}
	if r.SourceLogFile != "" && (r.SourceLogFile != r.RelaySourceLogFile || r.ReadSourceLogPos != r.ExecSourceLogPos) {
		return true
	}
	return false
}

func quarantineMessage(server, primary, extra string, f topology.Flavor) string {
	repair := "remove the transactions (flashback, or rebuild it from a backup of " + primary + ")"
	if f == topology.FlavorMySQL {
		repair = "inject empty transactions for them on " + primary + " if they are unwanted, or rebuild " + server + " from a backup of " + primary
	}
	return fmt.Sprintf("%s holds transactions %s lacks: %s. It is not routed. Salvage them if needed (mysqlbinlog on %s), then %s, and run `vigil ctl rejoin %s`",
		server, primary, extra, server, repair, server)
}

func waitFunc(f flavor.Flavor) string { return f.WaitFunc() }

func startSQLDetail(f flavor.Flavor) string {
	return sqlText(StepSQL(f, Step{Kind: StartSQLThread})) + ": its SQL thread is stopped (without an error) and must apply the relay log"
}

// GTID modes of a MariaDB repoint (Step.Mode).
const (
	// ModeSlavePos: start from gtid_slave_pos (a replica).
	ModeSlavePos = "slave_pos"
	// ModeCurrentPos: start from gtid_current_pos (a former primary: its
	// own transactions are in gtid_binlog_pos, not gtid_slave_pos).
	ModeCurrentPos = "current_pos"
)

// maskedPassword is what plans show in place of the replication password.
const maskedPassword = "'…'"

// RepointSQL is the statements that make a server a replica of the
// server at addr, in its flavour: the executor runs them, and plans show
// them with the user and password masked (user and pass empty). mode is
// ModeSlavePos or ModeCurrentPos (MariaDB; MySQL always auto-positions).
func RepointSQL(f flavor.Flavor, addr, user, pass, mode string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "3306"
	}
	quote := func(v string) string {
		if v == "" {
			return maskedPassword
		}
		return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", `\'`) + "'"
	}
	if mode == "" {
		mode = ModeSlavePos
	}
	return []string{f.StopReplica(), f.ChangeSource(host, port, quote(user), quote(pass), mode), f.StartReplica()}
}

func changeMasterSQL(f flavor.Flavor, addr, mode string) string {
	q := strings.Join(RepointSQL(f, addr, "", "", mode), "; ")
	if mode == ModeCurrentPos && !f.MySQL() {
		q += " (current_pos: its own transactions are in gtid_binlog_pos, not gtid_slave_pos)"
	}
	return q
}
