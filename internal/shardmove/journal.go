package shardmove

import (
	"fmt"
	"slices"
	"time"
)

// State is where a move stands.
type State string

const (
	// StateRunning: a step is running or the next one is due.
	StateRunning State = "running"
	// StateWaiting: a move with ManualCutover has caught up and waits for
	// the operator's cutover; its connection keeps the target following
	// the source.
	StateWaiting State = "waiting"
	// StateFailed: a step failed before the cutover (or the cutover gave
	// up); routing is untouched. Run again retries the failed step;
	// DecideAbort undoes the copy.
	StateFailed State = "failed"
	// StateDone: the map routes the schema to the target (with the
	// reverse connection, if asked). The source's copy stays until
	// cleanup.
	StateDone State = "done"
	// StateCleaned: cleanup dropped the source's copy.
	StateCleaned State = "cleaned"
	// StateAborted: the target's copy is dropped; the move never
	// happened.
	StateAborted State = "aborted"
	// StateRolledBack: the map routes the schema back to its old cluster
	// (over the reverse connection); the new cluster's copy stays until
	// cleanup.
	StateRolledBack State = "rolled_back"
)

// StepResult is what one run of a step did. A result with a zero Finished
// is a step that was running when the journal was last saved.
type StepResult struct {
	Name     StepKind  `json:"name"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	Detail   string    `json:"detail,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// Journal is a move's durable record: the daemon stores it (etcd or
// state_dir) after every change, so a restarted instance can resume it
// (Resume) or roll it back (DecideAbort). It is JSON and holds no
// passwords.
type Journal struct {
	Kind    PlanKind   `json:"kind"`
	Schema  string     `json:"schema"`
	From    string     `json:"from"`
	To      string     `json:"to"`
	Reverse bool       `json:"reverse,omitempty"`
	Steps   []StepKind `json:"steps"`
	// Step is the index of the next step to run (or of the running or
	// failed one).
	Step int `json:"step"`
	// SnapshotGTID is the copy's position in the source's domain
	// (domain-server-seq), recorded by the copy.
	SnapshotGTID string `json:"snapshot_gtid,omitempty"`
	// CutoverGTID is the target primary's @@gtid_binlog_pos while the
	// cutover held the writes: where the reverse connection starts.
	CutoverGTID string `json:"cutover_gtid,omitempty"`
	// Flipped: the map routes the schema to the target.
	Flipped bool `json:"flipped,omitempty"`
	// CutoverAsked: the operator asked for the cutover of a move with
	// ManualCutover.
	CutoverAsked bool `json:"cutover_asked,omitempty"`
	// Follows are the failovers of either cluster the move followed
	// (its plan's primaries changed and its connection with them).
	Follows []string     `json:"follows,omitempty"`
	Results []StepResult `json:"results,omitempty"`
	State   State        `json:"state"`
	Error   string       `json:"error,omitempty"`
}

// NewJournal is the journal of a plan that has not started.
func NewJournal(p Plan) Journal {
	j := Journal{Kind: p.Kind, Schema: p.Request.Schema, From: p.Source.Name, To: p.Target.Name,
		Reverse: p.Request.Reverse, State: StateRunning}
	for _, s := range p.Steps {
		j.Steps = append(j.Steps, s.Name)
	}
	return j
}

// Active reports whether the move holds its schema: running, or failed
// before the cutover and not aborted (its copy and connection exist).
func (j Journal) Active() bool {
	return j.State == StateRunning || j.State == StateFailed || j.State == StateWaiting
}

// Waits reports whether Run stops before step i: a manual cutover's
// verify, until the operator asks.
func (j Journal) waits(p Plan, i int) bool {
	return p.Request.ManualCutover && !j.CutoverAsked && i < len(p.Steps) && p.Steps[i].Name == StepVerify
}

// Connected reports whether the move connection exists on the target's
// primary: catch-up finished and the cutover has not removed the need.
func (j Journal) Connected() bool {
	if j.Flipped || !j.Active() {
		return false
	}
	i := slices.Index(j.Steps, StepCatchUp)
	return i >= 0 && j.Step > i
}

// CutOver reports whether the map routes the schema to the target.
func (j Journal) CutOver() bool { return j.Flipped }

// inProgress reports whether step i was running when the journal was
// saved (started, not finished).
func (j Journal) inProgress(i int) bool {
	if i >= len(j.Steps) {
		return false
	}
	for k := len(j.Results) - 1; k >= 0; k-- {
		r := j.Results[k]
		if r.Name == j.Steps[i] {
			return r.Finished.IsZero()
		}
	}
	return false
}

// ResumeAction is what a restarted instance does with a journal.
type ResumeAction string

const (
	// ResumeNothing: the move is finished, failed or aborted; nothing
	// runs by itself.
	ResumeNothing ResumeAction = "nothing"
	// ResumeContinue: run the plan again from Resumption.Step (every
	// step can be run again: see each step in exec.go).
	ResumeContinue ResumeAction = "continue"
	// ResumeUndoCopy: the copy was interrupted; drop the target's partial
	// schema (it never served), then continue from the copy.
	ResumeUndoCopy ResumeAction = "undo_copy"
	// ResumeCheckMap: the cutover was interrupted; read the shard map:
	// if it routes the schema to the target, the flip happened (set
	// Flipped, continue after the cutover), else continue with the
	// cutover. The holds of the dead instance ended with it.
	ResumeCheckMap ResumeAction = "check_map"
	// ResumeWait: a manual cutover waits for the operator; the restarted
	// instance owns it again (follows failovers, takes the cutover).
	ResumeWait ResumeAction = "wait"
)

// Resumption is Resume's answer.
type Resumption struct {
	Action ResumeAction
	// Step is the index of the step to continue from.
	Step int
	// CanAbort: the move has not cut over, so DecideAbort may undo it
	// instead.
	CanAbort bool
	Reason   string
}

// Resume decides what a restarted instance does with a move's journal. It
// does no I/O.
func Resume(j Journal) Resumption {
	canAbort := j.Kind == KindMove && !j.Flipped
	if j.State == StateWaiting {
		return Resumption{Action: ResumeWait, Step: j.Step, CanAbort: canAbort,
			Reason: "the move follows the source and waits for the operator's cutover"}
	}
	if j.State != StateRunning {
		return Resumption{Action: ResumeNothing, Step: j.Step, CanAbort: canAbort && j.State == StateFailed,
			Reason: fmt.Sprintf("the %s is %s", j.Kind, j.State)}
	}
	if j.Step >= len(j.Steps) {
		return Resumption{Action: ResumeContinue, Step: j.Step, CanAbort: canAbort, Reason: "every step ran; only the final state is left to record"}
	}
	kind := j.Steps[j.Step]
	if !j.inProgress(j.Step) {
		return Resumption{Action: ResumeContinue, Step: j.Step, CanAbort: canAbort, Reason: fmt.Sprintf("%s is next and had not started", kind)}
	}
	switch kind {
	case StepCopy:
		return Resumption{Action: ResumeUndoCopy, Step: j.Step, CanAbort: canAbort,
			Reason: "the copy was interrupted: the target's schema is partial and never served"}
	case StepCutover:
		if j.Flipped {
			return Resumption{Action: ResumeContinue, Step: j.Step + 1, CanAbort: false, Reason: "the cutover flipped the map before the interruption"}
		}
		return Resumption{Action: ResumeCheckMap, Step: j.Step, CanAbort: canAbort,
			Reason: "the cutover was interrupted: the map may or may not have been flipped"}
	}
	return Resumption{Action: ResumeContinue, Step: j.Step, CanAbort: canAbort, Reason: fmt.Sprintf("%s was interrupted and can run again", kind)}
}
