// Package failover is the failover decision engine: a pure function from a
// cluster's snapshot, latest observations, facts, history, options and an
// optional operator request to a Decision — a Plan of typed steps to run,
// or a typed Situation saying why nothing runs.
//
// The engine does no I/O, starts no goroutines and reads no clock: time
// arrives in Input.Now. The executor runs a plan step by step, journals
// each step, and reports the outcome back as a History record. The same
// input always gives the same decision; --dry-run is the same call with
// the plan printed instead of run.
package failover

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Cluster types, as in topology.Snapshot.Type.
const (
	TypeReplication = "replication"
	TypeGalera      = "galera"
	TypeReadOnly    = "read-only"
)

// Decision is the engine's answer.
type Decision struct {
	Cluster string
	// Situation is what the engine concluded; Action what to do about it.
	Situation Situation
	Action    Action
	// Detected is what the classifier found before the gates (one
	// operation at a time, automatic failover off, anti-flapping); equal to
	// Situation when nothing blocked.
	Detected Situation
	// Reason says why, in one or two sentences for an operator.
	Reason string
	// Plan is set when Action is ActExecute.
	Plan *Plan
	// Choices says for every server why it was or was not chosen, when a
	// new primary was sought.
	Choices []Choice
	// Events are further facts worth an event (unreachable replicas, a
	// returned old primary, the plan a blocked failover would run...).
	Events []string
	// RecheckAt, when not zero, is when the decision changes without new
	// observations (detect_after, min_interval or a rejoin back-off runs
	// out).
	RecheckAt time.Time
	// FenceNotes: returned old primaries that stay fenced although
	// failover.auto_rejoin is on, with why and what to do; the executor
	// shows each as the server's fence reason.
	FenceNotes map[string]string
	// Request is the operator's request this decision answers, nil for an
	// automatic decision.
	Request *Request
}

// Decide judges the cluster and returns what to do: for an automatic
// decision (in.Request nil) a failover plan, an event or nothing; for an
// operator's request a plan or a refusal. It never changes in.
func Decide(in Input) Decision {
	v, bad := newView(in)
	if bad != "" {
		d := Decision{Situation: BadInput, Detected: BadInput, Reason: bad}
		if in.Request != nil {
			d.Request = new(*in.Request)
		}
		return finish(d, in.Request)
	}
	var d Decision
	switch {
	case in.Request != nil:
		d = v.decideRequest(*in.Request)
		d.Request = new(*in.Request)
	case v.snap.Type == TypeGalera:
		d = v.decideGalera(nil)
	case v.snap.Type == TypeReadOnly:
		d = Decision{Situation: Unmanaged, Detected: Unmanaged, Reason: "read-only clusters have no failover"}
	default:
		d = v.decideReplication()
	}
	if in.Request == nil && in.Running != nil {
		d.Detected = d.Situation
		d.Situation = OperationRunning
		d.Reason = v.runningText() + "; automatic decisions wait for it (found: " + d.Detected.String() + ")"
		d.Plan, d.RecheckAt, d.Choices, d.Events, d.FenceNotes = nil, time.Time{}, nil, nil, nil
	}
	d.Cluster = v.snap.Cluster
	return finish(d, in.Request)
}

// PlanRejoin decides whether node may rejoin the cluster as a replica of
// the current primary: a Rejoin plan when its GTID history is compatible,
// else a refusal that lists the transactions the primary lacks. It is
// Decide with a RequestRejoin.
func PlanRejoin(in Input, node string) Decision {
	in.Request = &Request{Kind: RequestRejoin, To: node}
	return Decide(in)
}

// finish sets the action from the situation table: a request that does not
// execute is refused.
func finish(d Decision, req *Request) Decision {
	if d.Detected == Unknown {
		d.Detected = d.Situation
	}
	d.Action = d.Situation.Action()
	if d.Plan == nil && d.Action == ActExecute {
		d.Action = ActEvent
	}
	if req != nil && d.Action != ActExecute {
		d.Action = ActRefuse
	}
	if d.Action != ActExecute {
		d.Plan = nil
	}
	return d
}

func (v *view) decideRequest(req Request) Decision {
	if v.in.Running != nil {
		return Decision{Situation: OperationRunning, Reason: v.runningText() + ": one operation at a time; wait until it ends"}
	}
	if req.Kind == RequestRejoin {
		return v.rejoin(req.To)
	}
	switch v.snap.Type {
	case TypeGalera:
		return v.decideGalera(&req)
	case TypeReadOnly:
		return Decision{Situation: Unmanaged, Reason: "read-only clusters have no failover or switchover"}
	}
	if req.Kind == RequestSwitchover {
		return v.switchover(req)
	}
	return v.manualFailover(req)
}

// decideReplication is the automatic decision for a replication cluster.
func (v *view) decideReplication() Decision {
	det := v.detect()
	d := Decision{Situation: det.sit, Detected: det.sit, Reason: det.reason, RecheckAt: det.recheck, Events: det.events}
	back := v.returnedOldPrimaries()
	returned := texts(back)
	switch det.sit {
	case Healthy:
		if len(back) > 0 {
			return v.decideReturned(d, back)
		}
		return d
	case PrimaryReadOnly:
		d = v.decideReadOnly(d)
		d.Events = append(d.Events, returned...)
		return d
	case DeadPrimary:
	default:
		d.Events = append(d.Events, returned...)
		return d
	}
	d.Events = append(d.Events, returned...)
	held, why, at, views := v.peersGate(v.primary)
	if held {
		d.Situation, d.RecheckAt = PeerSeesPrimary, at
		d.Reason = det.reason + "; but " + why
		return d
	}
	d.Choices = v.choose(modeFailover, v.primary)
	best := chosen(d.Choices)
	if best < 0 {
		d.Situation = NoCandidate
		d.Reason = det.reason + "; but no replica may be promoted (see the candidates)"
		return d
	}
	if n, why := v.knownLoss(best); n > 0 {
		if v.in.Acked.SemiSync {
			d.Situation = WouldLoseData
			d.Reason = fmt.Sprintf("%s; but %s. Vigil does not promote over known loss: it waits for %s to answer again (it keeps them), or an operator runs `vigil ctl failover --accept-loss`",
				det.reason, why, v.name(v.primary))
			return d
		}
		d.Events = append(d.Events, "asynchronous replication: "+why)
	}
	plan := v.failoverPlan(best, true)
	if sit, why, at := v.gate(); sit != Unknown {
		d.Situation, d.RecheckAt = sit, at
		d.Reason = det.reason + "; " + why
		d.Events = append(d.Events, fmt.Sprintf("a failover now would promote %s (%s)", v.name(best), v.choiceOf(d.Choices, best).Reason))
		return d
	}
	// The plan's notes name the unreachable replicas with what to do.
	if views != "" {
		plan.Views = views
		d.Reason += "; no other Vigil instance reaches it (" + views + ")"
	}
	d.Plan = plan
	d.Events = append(d.Events, plan.notes...)
	return d
}

// manualFailover answers `failover [--to NODE] [--force]`.
func (v *view) manualFailover(req Request) Decision {
	det := v.detect()
	d := Decision{Detected: det.sit, Reason: det.reason, Events: det.events}
	switch det.sit {
	case NoPrimary, Unobserved:
		d.Situation = det.sit
		d.Reason = det.reason + ": a failover needs a known primary to replace"
		return d
	case Healthy, OverloadedPrimary, PrimaryCheckError, PrimaryReadOnly:
		if !req.Force {
			d.Situation = PrimaryHealthy
			d.Reason = det.reason + ": it is alive; use switchover (it waits for the candidate to catch up), or failover --force"
			if det.sit == PrimaryReadOnly {
				d.Reason += fmt.Sprintf("; `switchover --to %s` makes it writable", v.name(v.primary))
			}
			return d
		}
	}
	d.Choices = v.choose(modeFailover, v.primary)
	target, sit, why := v.pickTarget(d.Choices, req, modeFailover)
	if target < 0 {
		d.Situation, d.Reason = sit, why
		return d
	}
	markChosen(d.Choices, target, v, req.To != "")
	loss := ""
	if n, why := v.knownLoss(target); n > 0 {
		if v.in.Acked.SemiSync && !req.AcceptLoss {
			d.Situation = WouldLoseData
			d.Reason = fmt.Sprintf("failover refused: %s; wait for %s to answer again, or add --accept-loss to promote anyway", why, v.name(v.primary))
			return d
		}
		loss = "; known loss: " + why
	}
	d.Plan = v.failoverPlan(target, false)
	d.Situation = ManualFailover
	d.Reason = fmt.Sprintf("failover requested (primary: %s); promote %s%s", det.reason, v.name(target), loss)
	d.Events = d.Plan.notes
	return d
}

// pickTarget returns the server to promote for a request: --to when it is
// eligible (and, for a failover, not behind another replica unless
// --force), else the engine's choice.
func (v *view) pickTarget(choices []Choice, req Request, mode mode) (int, Situation, string) {
	best := chosen(choices)
	if req.To == "" {
		if best < 0 {
			return -1, NoCandidate, "no server may be promoted (see the candidates)"
		}
		return best, Unknown, ""
	}
	t := v.snap.Index(req.To)
	switch {
	case t < 0:
		return -1, InvalidTarget, fmt.Sprintf("--to %s: no such server in cluster %s (servers: %s)", req.To, v.snap.Cluster, strings.Join(v.names(), ", "))
	case t == v.primary:
		return -1, InvalidTarget, fmt.Sprintf("--to %s: it is the primary already", req.To)
	}
	c := v.choiceOf(choices, t)
	if c.Excluded != Eligible {
		return -1, InvalidTarget, fmt.Sprintf("--to %s: it cannot be promoted: %s", req.To, c.Reason)
	}
	if mode == modeFailover && !req.Force {
		if lack := v.lacks(t, choices); lack != "" {
			return -1, InvalidTarget, fmt.Sprintf("--to %s: %s; promoting it would lose them (choose %s, or add --force: servers holding them are quarantined)",
				req.To, lack, v.name(max(best, 0)))
		}
	}
	return t, Unknown, ""
}

// lacks says which transactions of the other eligible candidates server
// t lacks, "" when it has them all.
func (v *view) lacks(t int, choices []Choice) string {
	pt := v.received(t)
	var parts []string
	for _, c := range choices {
		i := v.snap.Index(c.Server)
		if i == t || c.Excluded != Eligible {
			continue
		}
		if x := v.received(i).extra(pt); x != "" {
			parts = append(parts, fmt.Sprintf("%s has %s", c.Server, x))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "it lacks transactions others have: " + strings.Join(parts, "; ")
}

// gate says why an automatic failover may not run now: automatic failover
// off, an unacknowledged failure, or a failover less than min_interval ago.
func (v *view) gate() (Situation, string, time.Time) {
	if !v.opts.Auto {
		return AutoFailoverOff, "automatic failover is off (failover.auto: false): run `vigil ctl failover` to fail over by hand", time.Time{}
	}
	recs := v.in.History.Records
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if (r.Kind == RecordFailover || r.Kind == RecordSwitchover) && r.failed() && !r.Acked && !r.RolledBack {
			why := r.Error
			if why == "" {
				why = "it did not finish"
			}
			return UnackedFailure, fmt.Sprintf("the %s started at %s (%s → %s) failed: %s; automatic failover waits until an operator checks the cluster and runs `vigil ctl ack` (a manual failover works now)",
				r.Kind, stamp(r.Started), r.OldPrimary, orNone(r.NewPrimary), why), time.Time{}
		}
	}
	if v.opts.MinInterval <= 0 {
		return Unknown, "", time.Time{}
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Kind != RecordFailover {
			continue
		}
		if r.Acked {
			break
		}
		if ago := v.in.Now.Sub(r.at()); ago < v.opts.MinInterval {
			next := r.at().Add(v.opts.MinInterval)
			return RecentFailover, fmt.Sprintf("the previous failover (%s → %s) was at %s, %s ago, and min_interval is %s: automatic failover is blocked until %s or until an operator runs `vigil ctl ack` (a manual failover works now)",
				r.OldPrimary, orNone(r.NewPrimary), stamp(r.at()), ago, v.opts.MinInterval, stamp(next)), next
		}
		break
	}
	return Unknown, "", time.Time{}
}

func (v *view) runningText() string {
	r := v.in.Running
	s := fmt.Sprintf("a %s started at %s is running", r.Kind, stamp(r.Started))
	if r.OldPrimary != "" || r.NewPrimary != "" {
		s = fmt.Sprintf("a %s (%s → %s) started at %s is running", r.Kind, orNone(r.OldPrimary), orNone(r.NewPrimary), stamp(r.Started))
	}
	return s
}

// view is one Decide call's read-only access to its input.
type view struct {
	in      Input
	opts    Options
	snap    *topology.Snapshot
	primary int
}

func newView(in Input) (*view, string) {
	if in.Snapshot == nil {
		return nil, "no snapshot"
	}
	if len(in.Snapshot.Servers) == 0 {
		return nil, "the snapshot has no servers"
	}
	v := &view{in: in, opts: in.Options.WithDefaults(), snap: in.Snapshot, primary: -1}
	if w := in.Snapshot.Writer; w >= 0 && w < len(in.Snapshot.Servers) {
		v.primary = w
	} else if in.Snapshot.Type != TypeGalera {
		v.primary = slices.IndexFunc(in.Snapshot.Servers, func(s topology.Server) bool { return s.Role == topology.RolePrimary })
	}
	return v, ""
}

func (v *view) name(i int) string { return v.snap.Servers[i].Name }

// named: an operator's request names server as its target (--to).
func (v *view) named(server string) bool { return v.in.Request != nil && v.in.Request.To == server }

func (v *view) names() []string {
	out := make([]string, len(v.snap.Servers))
	for i := range v.snap.Servers {
		out[i] = v.name(i)
	}
	return out
}

// obs is server i's latest observation, nil when none.
func (v *view) obs(i int) *topology.Observation { return v.in.Obs[v.name(i)] }

// ok: server i answered its latest check.
func (v *view) ok(i int) bool {
	o := v.obs(i)
	return o != nil && o.OK
}

func (v *view) facts(i int) (ServerFacts, bool) {
	f, ok := v.in.Facts[v.name(i)]
	return f, ok
}

func (v *view) fenced(i int) bool { return slices.Contains(v.in.Fenced, v.name(i)) }

// cut: the running failover stopped server i's IO thread.
func (v *view) cut(i int) bool { return slices.Contains(v.in.Cut, v.name(i)) }

func (v *view) received(i int) position { return receivedPos(v.obs(i)) }

// replicatesFrom reports whether server i (which answers) has a
// replication source that is server src: by the executor's resolved
// Source name, else by address.
func (v *view) replicatesFrom(i, src int) bool {
	o := v.obs(i)
	if o == nil || !o.OK || o.Replica == nil || src < 0 {
		return false
	}
	if f, ok := v.facts(i); ok && f.Source != "" {
		return f.Source == v.name(src)
	}
	return sameAddr(o.Replica.SourceHost, o.Replica.SourcePort, v.snap.Servers[src].Addr)
}

// sourceName names server i's replication source: a cluster server, else
// its address.
func (v *view) sourceName(i int) string {
	for j := range v.snap.Servers {
		if j != i && v.replicatesFrom(i, j) {
			return v.name(j)
		}
	}
	if o := v.obs(i); o != nil && o.Replica != nil {
		return o.Replica.Source()
	}
	return ""
}

func sameAddr(host string, port int, addr string) bool {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		h, p = addr, "3306"
	}
	return strings.EqualFold(h, host) && p == strconv.Itoa(port)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "(unknown time)"
	}
	return t.UTC().Format("2006-01-02T15:04:05.999Z07:00")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
