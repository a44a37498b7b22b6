package monitor

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// This file is the pure core of the monitor: observations in, a new State,
// a snapshot and events out. No I/O, no goroutines, no clock — time comes
// in as an argument — so every rule has a table test.

// State is the evaluator's memory of one cluster between observations.
// Evaluate returns a new State and never changes the one it is given.
type State struct {
	Servers []ServerState
	// Designated is the writer the cluster has: for replication the
	// primary, kept while it is down and changed only by SetWriter or
	// Fence; for Galera and read-only clusters the chosen node. -1: none.
	Designated int
	// Writer is the routed writer (Designated when it can take writes
	// now), -1 for none.
	Writer int
	// Term grows by one every time Writer changes, unless TermShared.
	Term uint64
	// TermShared: the term is the coordination writer record's (several
	// Vigil instances): it changes only through SetTerm, so every
	// instance shows the one term of the cluster.
	TermShared bool
	// WriterReason says why Writer is what it is.
	WriterReason string
	// Discovered: a replication cluster's writer was found once. From then
	// on only SetWriter names a writer; a server reporting read_only=OFF
	// never becomes the writer by itself.
	Discovered bool
	// WriterNote is the reason SetWriter gave, kept while that writer is
	// designated.
	WriterNote string
}

// ServerState is the evaluator's memory of one server.
type ServerState struct {
	Name string
	// Computed is the state the checks give: Online, Shunned (failing or
	// lagging) or OfflineHard (down: connections refused). Admin overrides
	// and fencing are applied on top (see Published).
	Computed topology.State
	// Reason explains Computed.
	Reason string
	// Judged: at least one check was judged good or bad. The first good
	// check of a server that was never judged brings it Online at once.
	Judged bool
	// Seq is the last observation applied.
	Seq uint64
	// Good and Bad count consecutive good and bad checks.
	Good, Bad int
	// Verdict is the verdict of the last good check: what an Online server
	// publishes. Latest is the verdict of the latest judged check.
	Verdict Verdict
	Latest  Verdict
	// Last is the latest observation; LastOK the latest in which the
	// server answered.
	Last, LastOK *topology.Observation
	LastSuccess  time.Time
	LastErr      string
	LastErrCode  uint16

	Overloaded     bool
	OverloadReason string
	Lagging        bool
	// Lag is the lag judged at the latest good-or-bad check that answered,
	// -1 when unknown.
	Lag float64
	// IODownSince is when the replica's I/O thread was first seen not
	// running, zero while it runs.
	IODownSince time.Time
	// FailingSince is the time of the first check of the current streak of
	// checks that did not reach the server, zero while it answers.
	FailingSince time.Time
	// Conflict: read_only=OFF in a replication cluster but not the writer.
	Conflict bool
	// DemotedAt: when another server was named the writer in its place; a
	// check of it that started earlier does not make it a conflict.
	DemotedAt time.Time
	// Promoted: named the writer by the failover executor while not
	// Online (its replication was stopped on purpose): its next good
	// check brings it Online at once.
	Promoted bool

	// AliveAt is the start of the latest check that showed the server
	// alive: it answered (data, a server error, an overload refusal), or
	// it completed client statements while the check ran. Zero before.
	AliveAt time.Time
	// Slow: a check timed out while the server completed client statements
	// on the proxy's connections (passive evidence): slow, not down. Such a
	// check counts as neither good nor bad. Cleared after RecoverAfter
	// consecutive good checks.
	Slow bool
	// TimeoutsOnly: every failed check of the current streak timed out
	// (no refusal, reset, server error or bad answer).
	TimeoutsOnly bool
	// Kept: the routed writer failed FailAfter or more checks by timeouts
	// only, but no other server could take the writes and it showed life
	// within LoneWriterGrace, so it stays routed. KeptReason says so. A
	// good check or leaving routing ends it; slow checks do not.
	Kept       bool
	KeptReason string
	// Checks counts the checks applied, by how they were judged.
	Checks CheckCounts
	// SemiSyncAsync: a writable server with semi-sync enabled whose
	// commits do not wait for a replica (Rpl_semi_sync_master_status
	// OFF): it fell back to asynchronous replication, and a failover now
	// can lose what it acknowledges. AsyncNoTx is its
	// Rpl_semi_sync_master_no_tx when the fallback was first seen.
	SemiSyncAsync bool
	AsyncNoTx     int64
	// asyncSeen is the latest check that saw the fallback: AsyncSeconds
	// grows check by check, so the counter never goes back.
	asyncSeen time.Time

	// Admin is the operator's state: Online (no override), OfflineSoft or
	// OfflineHard.
	Admin       topology.State
	AdminReason string
	// Fenced servers are OfflineHard until unfenced, whatever they report.
	Fenced      bool
	FenceReason string
	// Joining: added to a running cluster; OfflineSoft until it is Online
	// by its checks and caught up (joinCaughtUp), then routed.
	Joining bool
	// JoinTarget is the writer's GTID position when the server joined
	// (replication): a joining replica is caught up once it has applied
	// it and lags at most JoinMaxLag.
	JoinTarget string
	// Removed: the server left the configuration; its slot is a tombstone
	// (OfflineHard, never checked again).
	Removed bool
	// Standby: configured standby and not the designated writer: it is
	// published OfflineSoft, never readable or writable (Snapshot, Health),
	// while its checks go on as for any server.
	Standby bool
}

// standbyReason is what a standby server shows.
const standbyReason = "standby: replicating and monitored, not routed; promoted only when named (switchover/failover --to)"

// publishedAs is the state, reason and access a server shows the router
// and the engine: Published, with a standby kept out of routing.
func (s *ServerState) publishedAs() (state topology.State, reason string, readable, writable bool) {
	state, reason = s.Published()
	readable, writable = s.access()
	if s.Standby && state != topology.OfflineHard {
		return topology.OfflineSoft, standbyReason + "; checks: " + reason, false, false
	}
	return state, reason, readable, writable
}

// JoinMaxLag is the replication lag under which a joining replica counts
// as caught up and starts taking reads.
const JoinMaxLag = 1.0

// joinCaughtUp: a joining server may be routed — Online by its checks
// and, for a replica, replicating, past the writer's position when it
// joined (Seconds_Behind_Master alone says 0 while the I/O thread is
// still fetching a backlog) and with a known lag of at most JoinMaxLag.
func (s *ServerState) joinCaughtUp() bool {
	if s.Computed != topology.Online {
		return false
	}
	if o := s.LastOK; o != nil && o.Replica != nil {
		return o.Replica.IORunning == topology.IOYes && s.Lag >= 0 && s.Lag <= JoinMaxLag &&
			(s.JoinTarget == "" || topology.Applied(o.GTID.String(), s.JoinTarget))
	}
	return true
}

// CheckCounts count a server's checks by result. Every check is exactly
// one of Good, Failed, Slow and Overloaded; Kept counts the failed checks
// that left a lone writer routed (the lone writer rule).
type CheckCounts struct {
	Good, Failed, Slow, Overloaded uint64
	Kept                           uint64
	// SemiSyncFallbacks counts the times the server was seen falling back
	// from semi-sync to asynchronous replication as a writable server;
	// AsyncSeconds is the time spent so, up to the latest check, AsyncSince
	// the start of the current fallback (zero when none). NoTx is its
	// Rpl_semi_sync_master_no_tx as last seen with semi-sync enabled, -1
	// when unknown.
	SemiSyncFallbacks uint64
	AsyncSeconds      float64
	AsyncSince        time.Time
	NoTx              int64
}

// NewState is the state of a cluster before any check.
func NewState(opts *Options) State {
	st := State{Designated: -1, Writer: -1, WriterReason: "no server checked yet"}
	for _, s := range opts.Servers {
		st.Servers = append(st.Servers, ServerState{Name: s.Name, Computed: topology.Shunned, Reason: "not checked yet", Lag: -1, Checks: CheckCounts{NoTx: -1}})
	}
	return st
}

func (st State) clone() State {
	st.Servers = append([]ServerState(nil), st.Servers...)
	return st
}

// Published is the state a server shows to the router: fencing first,
// then the operator's override, then what the checks say.
func (s *ServerState) Published() (topology.State, string) {
	switch {
	case s.Removed:
		return topology.OfflineHard, "removed from the configuration"
	case s.Fenced:
		return topology.OfflineHard, "fenced: " + s.FenceReason
	case s.Admin == topology.OfflineSoft || s.Admin == topology.OfflineHard:
		// The reason says who: an operator, a clone or rebuild, a removal.
		return s.Admin, cmp.Or(s.AdminReason, "set by an operator")
	case s.Joining:
		target := ""
		if s.JoinTarget != "" {
			target = ", past the writer's " + s.JoinTarget
		}
		return topology.OfflineSoft, fmt.Sprintf("joining: routed once Online and caught up (lag at most %gs%s); now %s: %s", JoinMaxLag, target, s.Computed, s.Reason)
	}
	return s.Computed, s.Reason
}

// access is what an Online server publishes; anything else is not
// readable or writable.
func (s *ServerState) access() (readable, writable bool) {
	if st, _ := s.Published(); st != topology.Online {
		return false, false
	}
	return s.Verdict.Readable, s.Verdict.Writable
}

// Evaluate applies the observations newer than what st has seen
// (latest[i] is server i's latest, nil when none yet), chooses the writer
// and returns the new state and the events between the two.
func Evaluate(prev State, latest []*topology.Observation, opts *Options, now time.Time) (State, []Event) {
	return step(prev, prev.clone(), latest, opts, now)
}

// Command applies an operator or failover command to a copy of prev and
// evaluates the result like Evaluate; on error prev is returned unchanged.
func Command(prev State, cmd func(*State) error, latest []*topology.Observation, opts *Options, now time.Time) (State, []Event, error) {
	next := prev.clone()
	if err := cmd(&next); err != nil {
		return prev, nil, err
	}
	next, evs := step(prev, next, latest, opts, now)
	return next, evs, nil
}

func step(prev, next State, latest []*topology.Observation, opts *Options, now time.Time) (State, []Event) {
	env := judgeEnv{WriterUp: prev.Writer >= 0}
	env.WriterHeartbeat, env.HeartbeatStale = prev.writerHeartbeat(opts)
	lone := prev.loneWriter(opts)
	for i, o := range latest {
		if i < len(next.Servers) && o != nil && o.Seq > next.Servers[i].Seq {
			e := env
			e.Writer, e.Lone = i == prev.Writer, i == lone
			next.Servers[i].apply(o, opts, e)
		}
	}
	for i := range next.Servers {
		next.Servers[i].Standby = i < len(opts.Servers) && opts.Servers[i].Standby && i != next.Designated && !next.Servers[i].Removed
	}
	for i := range next.Servers {
		s := &next.Servers[i]
		if !s.Joining {
			continue
		}
		if d := next.Designated; s.JoinTarget == "" && opts.Type == TypeReplication && d >= 0 && d != i {
			if w := next.Servers[d].LastOK; w != nil {
				s.JoinTarget = w.GTID.String()
			}
		}
		if s.joinCaughtUp() {
			s.Joining = false
		}
	}
	next.chooseWriter(opts)
	if next.Writer != prev.Writer && !next.TermShared {
		next.Term++
	}
	return next, diff(&prev, &next, opts, now)
}

// writerHeartbeat is the newest heartbeat of the replication primary at
// its last good check, zero when there is none; stale when it was older
// than max_replication_lag then (nothing writes heartbeats).
func (st *State) writerHeartbeat(opts *Options) (ts time.Time, stale bool) {
	if opts.Type != TypeReplication || st.Designated < 0 {
		return time.Time{}, false
	}
	o := st.Servers[st.Designated].LastOK
	if o == nil || o.HeartbeatTS.IsZero() || o.HeartbeatLag < 0 {
		return time.Time{}, false
	}
	if limit := opts.MaxReplicationLag; limit > 0 && o.HeartbeatLag > limit.Seconds() {
		return time.Time{}, true
	}
	return o.HeartbeatTS, false
}

// apply judges one new observation and moves the hysteresis counters.
func (s *ServerState) apply(o *topology.Observation, opts *Options, env judgeEnv) {
	s.Seq = o.Seq
	s.Last = o
	if !o.OK {
		s.LastErr, s.LastErrCode = o.Err, o.ErrCode
	}
	slow := o.Slow()
	switch {
	case o.OK || o.Overloaded || o.ErrCode != 0 || slow:
		s.FailingSince = time.Time{} // it answered (the monitor or clients)
		s.AliveAt = o.Time
	case s.FailingSince.IsZero():
		s.FailingSince = o.Time
	}
	if !o.OK && o.Overloaded {
		// Alive but refusing new connections or the monitor's login: not a
		// failed check and not a good one. The server keeps its state.
		s.Overloaded, s.OverloadReason = true, o.OverloadReason
		s.Checks.Overloaded++
		return
	}
	if slow {
		// The check timed out while the server completed client statements:
		// slow (short of CPU, say), not down. Neither good nor bad, it ends
		// both streaks; the server keeps its state and its last verdict. A
		// kept lone writer stays kept (its checks still time out): only an
		// answer or leaving routing ends that, so the events do not flap.
		s.Checks.Slow++
		s.Slow = true
		s.Good, s.Bad = 0, 0
		return
	}
	if o.OK {
		s.LastOK = o
		s.LastSuccess = o.Time
	}
	s.Overloaded, s.OverloadReason = o.Overloaded, o.OverloadReason
	if o.OK {
		if opts.Type == TypeReplication {
			s.noteSemiSync(o)
		}
		switch {
		case o.Replica == nil || o.Replica.IORunning == topology.IOYes:
			s.IODownSince = time.Time{}
		case s.IODownSince.IsZero():
			s.IODownSince = o.Time
		default:
			env.IODownFor = o.Time.Sub(s.IODownSince)
		}
	}
	v := judge(opts.Type, o, opts, env)
	s.Latest = v
	if o.OK {
		// A failed check says nothing about lag.
		s.Lagging = v.Lagging
		s.Lag = lagOf(o, env)
	}
	first := !s.Judged
	s.Judged = true
	if v.Good() {
		s.Checks.Good++
		s.Good++
		s.Bad = 0
		s.Kept, s.KeptReason = false, ""
		if s.Slow && s.Good >= opts.RecoverAfter {
			s.Slow = false
		}
		s.Verdict = v
		switch {
		case first || s.Promoted:
			s.Computed, s.Reason = topology.Online, v.Reason
			s.Promoted = false
		case s.Computed == topology.Online:
			s.Reason = v.Reason
		case s.Good >= opts.RecoverAfter:
			s.Computed = topology.Online
			s.Reason = fmt.Sprintf("%d consecutive good checks (%s)", s.Good, v.Reason)
		default:
			s.Reason = fmt.Sprintf("%d of %d good checks to return (%s)", s.Good, opts.RecoverAfter, v.Reason)
		}
		return
	}
	s.Checks.Failed++
	s.Bad++
	s.Good = 0
	timedOut := !o.OK && o.TimedOut
	s.TimeoutsOnly = timedOut && (s.Bad == 1 || s.TimeoutsOnly)
	failed := topology.Shunned
	if !o.OK && o.Refused {
		failed = topology.OfflineHard // nothing listens: down, not slow
	}
	failAfter := opts.FailAfter
	confirmed := o.Stuck() && !env.Writer
	if confirmed {
		// Clients waited on it through the whole check and nothing
		// completed: the second witness a second check would be. What a
		// server other than the writer serves (reads) goes elsewhere at no
		// cost; the writer keeps fail_after.
		failAfter = 1
	}
	switch {
	case s.Computed == topology.Online && s.Bad >= failAfter:
		if why, keep := s.keepLoneWriter(o, opts, env); keep {
			s.Kept, s.KeptReason = true, why
			s.Checks.Kept++
			return
		}
		s.Kept, s.KeptReason = false, ""
		s.Computed = failed
		what := fmt.Sprintf("%d consecutive failed checks", s.Bad)
		if confirmed && s.Bad < opts.FailAfter {
			what = fmt.Sprintf("a failed check while %d client statements waited on it and none completed", o.ClientWaiting)
		}
		s.Reason = fmt.Sprintf("%s (%s)%s; it returns after %d good checks",
			what, v.Reason, s.loneNote(o, opts, env), opts.RecoverAfter)
	case s.Computed != topology.Online:
		s.Computed = failed
		s.Reason = fmt.Sprintf("%s; it returns after %d good checks", v.Reason, opts.RecoverAfter)
	}
}

// The lone writer rule. Taking the only server that could take the writes
// out of routing makes no write succeed: it only turns writes that wait
// for a slow server into writes that wait for a writer and fail. So when
// the routed writer fails its checks by timeouts alone and no other
// server could replace it, it stays routed as long as it showed life (an
// answered check, a completed client statement) within LoneWriterGrace.
// A refusal, a reset, a server error or a bad answer ends the grace at
// once, as does a replacement that comes up (the next failed check takes
// the writer out). Failover does not depend on it: the failover engine
// reads the observations and FailingSince, which a kept writer's failed
// checks still advance.

// loneWriter is the routed writer when no other server could take its
// place: no other server is ONLINE and readable (replication: a replica
// the failover manager could promote) or writable (Galera, read-only
// clusters). -1 otherwise. The monitor does not know failover.candidates
// or never_promote: any such server counts as a replacement.
func (st *State) loneWriter(opts *Options) int {
	w := st.Writer
	if w < 0 || opts.LoneWriterGrace < 0 {
		return -1
	}
	for i := range st.Servers {
		if i == w {
			continue
		}
		r, wr := st.Servers[i].access()
		if wr || (r && opts.Type == TypeReplication) {
			return -1
		}
	}
	return w
}

// keepLoneWriter decides whether a lone writer that reached FailAfter
// failed checks stays routed, and says why.
func (s *ServerState) keepLoneWriter(o *topology.Observation, opts *Options, env judgeEnv) (string, bool) {
	if !env.Lone || !s.TimeoutsOnly || s.AliveAt.IsZero() {
		return "", false
	}
	quiet := o.Time.Add(o.Took).Sub(s.AliveAt)
	if quiet > opts.LoneWriterGrace {
		return "", false
	}
	return fmt.Sprintf("%d consecutive checks timed out (%s), but no other server could take the writes and it showed life %s ago: it stays the writer, and leaves routing after %s without a sign of life; check the server (stalled, short of CPU, or cut off)",
		s.Bad, s.LastErr, quiet.Round(10*time.Millisecond), opts.LoneWriterGrace), true
}

// loneNote explains why a lone writer leaves routing after all, "" for
// any other server.
func (s *ServerState) loneNote(o *topology.Observation, opts *Options, env judgeEnv) string {
	if !env.Lone || !s.TimeoutsOnly || s.AliveAt.IsZero() {
		return ""
	}
	quiet := o.Time.Add(o.Took).Sub(s.AliveAt)
	return fmt.Sprintf(", no sign of life for %s (no other server could take the writes: kept up to %s)",
		quiet.Round(10*time.Millisecond), opts.LoneWriterGrace)
}

// chooseWriter sets Designated, Writer, WriterReason and the conflict
// flags from the servers' states.
func (st *State) chooseWriter(opts *Options) {
	writable := func(i int) bool {
		_, w := st.Servers[i].access()
		return w
	}
	var cands []int
	for i := range st.Servers {
		if writable(i) {
			cands = append(cands, i)
		}
	}
	for i := range st.Servers {
		st.Servers[i].Conflict = false
	}
	switch opts.Type {
	case TypeGalera, TypeReadOnly:
		st.chooseSticky(opts, cands, writable)
		return
	}

	if st.Designated < 0 && !st.Discovered && st.allObserved() {
		st.discover(opts, cands)
	}
	st.Writer = -1
	if d := st.Designated; d >= 0 {
		if writable(d) {
			st.Writer = d
			st.WriterReason = st.Servers[d].Name + " is the primary: Online and read_only=OFF" + st.WriterNote
		} else {
			st.WriterReason = "primary " + st.whyNot(d)
		}
		for _, i := range cands {
			// The latest answered check decides, not the verdict of the
			// latest good one (a demoted primary's checks are bad until it
			// replicates, so its verdict stays the writable one), and only
			// a check that started after the demotion: a failed check says
			// nothing about read_only.
			if s := &st.Servers[i]; i != d && (s.LastOK == nil || !s.LastOK.ReadOnly && s.LastOK.Time.After(s.DemotedAt)) {
				s.Conflict = true
			}
		}
		return
	}
	if len(cands) >= 2 {
		for _, i := range cands {
			st.Servers[i].Conflict = true
		}
		st.WriterReason = fmt.Sprintf("conflict: %s report read_only=OFF; no writer until one is named", st.names(cands))
		return
	}
	switch {
	case st.Discovered:
		st.WriterReason = "no primary: waiting for the failover manager or an operator to name one"
	case !st.allObserved():
		st.WriterReason = "not every server checked yet"
	default:
		st.WriterReason = "no server reports read_only=OFF"
	}
}

// discover finds a replication cluster's writer the first time: the only
// server with read_only=OFF, or the configured primary among several (a
// conflict, reported as such).
func (st *State) discover(opts *Options, cands []int) {
	switch len(cands) {
	case 0:
		return
	case 1:
		st.Designated, st.Discovered = cands[0], true
		st.WriterNote = " (found: the only server with read_only=OFF)"
		return
	}
	for _, i := range cands {
		if opts.Servers[i].Role == "primary" {
			st.Designated, st.Discovered = i, true
			st.WriterNote = " (found: the configured primary; other servers also report read_only=OFF)"
			return
		}
	}
}

func (st *State) allObserved() bool {
	for i := range st.Servers {
		if st.Servers[i].Seq == 0 && !st.Servers[i].Removed {
			return false
		}
	}
	return true
}

// chooseSticky keeps the Galera or read-only writer while it can take
// writes and otherwise picks the best candidate: for Galera the highest
// weight, then the lowest wsrep_local_index (the same on every node, so
// every Vigil that sees the cluster picks the same node); for read-only
// clusters the configured primary, then the highest weight. Config order
// breaks the last ties.
func (st *State) chooseSticky(opts *Options, cands []int, writable func(int) bool) {
	if d := st.Designated; d >= 0 && writable(d) {
		st.Writer = d
		return
	}
	if st.Designated < 0 && !st.allObserved() {
		// Choose only from a full view, or two Vigils that heard from the
		// nodes in a different order would keep different writers.
		st.Writer = -1
		st.WriterReason = "not every server checked yet"
		return
	}
	best := -1
	for _, i := range cands {
		if st.Servers[i].Standby {
			continue // named writer only (SetWriter)
		}
		if best < 0 || st.better(opts, i, best) {
			best = i
		}
	}
	old := st.Designated
	st.Designated, st.Writer = best, best
	switch {
	case best < 0 && opts.Type == TypeGalera:
		st.WriterReason = "no Galera node is Synced, Primary, ready and accepting queries"
	case best < 0:
		st.WriterReason = "no server reports read_only=OFF"
	case old >= 0:
		st.WriterReason = fmt.Sprintf("%s replaces %s (%s)", st.Servers[best].Name, st.Servers[old].Name, st.whyNot(old))
	case opts.Type == TypeGalera:
		st.WriterReason = st.Servers[best].Name + " chosen: highest weight, then lowest wsrep_local_index"
	default:
		st.WriterReason = st.Servers[best].Name + " chosen: read_only=OFF"
	}
}

func (st *State) better(opts *Options, a, b int) bool {
	if opts.Type == TypeReadOnly {
		pa, pb := opts.Servers[a].Role == "primary", opts.Servers[b].Role == "primary"
		if pa != pb {
			return pa
		}
	}
	if wa, wb := opts.Servers[a].Weight, opts.Servers[b].Weight; wa != wb {
		return wa > wb
	}
	if opts.Type == TypeGalera {
		ia, ib := st.Servers[a].localIndex(), st.Servers[b].localIndex()
		if ia != ib {
			return ia < ib
		}
	}
	return a < b
}

func (s *ServerState) localIndex() int {
	if s.LastOK != nil && s.LastOK.Wsrep != nil && s.LastOK.Wsrep.LocalIndex >= 0 {
		return s.LastOK.Wsrep.LocalIndex
	}
	return 1 << 30
}

// whyNot says why server i cannot take writes now.
func (st *State) whyNot(i int) string {
	s := &st.Servers[i]
	state, reason := s.Published()
	if state != topology.Online {
		return fmt.Sprintf("%s %s: %s", s.Name, state, reason)
	}
	return fmt.Sprintf("%s is not writable: %s", s.Name, s.Verdict.Reason)
}

func (st *State) names(idx []int) string {
	var b strings.Builder
	for k, i := range idx {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(st.Servers[i].Name)
	}
	return b.String()
}

func (st *State) writerName() string {
	if st.Writer < 0 {
		return ""
	}
	return st.Servers[st.Writer].Name
}

// noteSemiSync follows the semi-sync fallback of a writable server from
// an answered check. A read-only server (a replica, a fenced or demoted
// primary) is not acknowledging client commits, whatever its counters.
func (s *ServerState) noteSemiSync(o *topology.Observation) {
	ss := o.SemiSync
	// The count while semi-sync still waited is the baseline: the commit
	// that timed out and those of the first interval count too.
	base := s.Checks.NoTx
	if base < 0 || base > ss.NoTx {
		base = ss.NoTx
	}
	s.Checks.NoTx = -1
	if ss.Known && ss.SourceEnabled {
		s.Checks.NoTx = ss.NoTx
	}
	async := ss.Known && ss.SourceEnabled && !ss.SourceOn && !o.ReadOnly
	if s.SemiSyncAsync && o.Time.After(s.asyncSeen) {
		s.Checks.AsyncSeconds += o.Time.Sub(s.asyncSeen).Seconds()
		s.asyncSeen = o.Time
	}
	switch {
	case async && !s.SemiSyncAsync:
		s.SemiSyncAsync, s.AsyncNoTx, s.asyncSeen = true, base, o.Time
		s.Checks.SemiSyncFallbacks++
		s.Checks.AsyncSince = o.Time
	case !async && s.SemiSyncAsync:
		s.SemiSyncAsync = false
		s.Checks.AsyncSince = time.Time{}
	}
}

// semiSyncEvents are the fallback events of one server between two
// states: the start says what a failover can lose now, the end how long
// it lasted and how many commits no replica acknowledged.
func semiSyncEvents(p, n *ServerState, ev func(server string, kind EventKind, from, to, reason string)) {
	switch {
	case !p.SemiSyncAsync && n.SemiSyncAsync:
		o := n.LastOK
		ev(n.Name, EventSemiSyncFallback, "", "", fmt.Sprintf("semi-sync fell back to asynchronous replication: rpl_semi_sync_master_enabled=ON but Rpl_semi_sync_master_status=OFF (%d semi-sync replicas connected, Rpl_semi_sync_master_no_tx %d): commits are acknowledged without any replica, and a failover now could lose them; check the replicas' IO threads and rpl_semi_sync_master_timeout",
			o.SemiSync.Clients, o.SemiSync.NoTx))
	case p.SemiSyncAsync && !n.SemiSyncAsync:
		o := n.Last
		lasted := o.Time.Sub(p.Checks.AsyncSince).Round(100 * time.Millisecond)
		unacked := o.SemiSync.NoTx - p.AsyncNoTx
		why := "commits wait for a replica's acknowledgement again"
		switch {
		case !o.SemiSync.SourceEnabled:
			why = "semi-sync was disabled (rpl_semi_sync_master_enabled=OFF)"
		case o.ReadOnly:
			why = "it is read-only now and acknowledges no commit"
		}
		if unacked < 0 {
			unacked = 0 // the counter was reset (FLUSH STATUS or a restart)
		}
		ev(n.Name, EventSemiSyncRestored, "", "", fmt.Sprintf("%s after %s of asynchronous replication; %d commits were acknowledged without a replica in that time (Rpl_semi_sync_master_no_tx)", why, lasted, unacked))
	}
}

// diff lists the events between two states.
func diff(prev, next *State, opts *Options, now time.Time) []Event {
	var evs []Event
	ev := func(server string, kind EventKind, from, to, reason string) {
		evs = append(evs, Event{Time: now, Cluster: opts.Cluster, Server: server, Kind: kind,
			From: from, To: to, Reason: reason, Term: next.Term})
	}
	for i := range next.Servers {
		n := &next.Servers[i]
		if i >= len(prev.Servers) {
			ns, nreason := n.Published()
			ev(n.Name, EventServerAdded, "", ns.String(), nreason)
			continue
		}
		p := &prev.Servers[i]
		if n.Removed {
			if !p.Removed {
				ev(n.Name, EventServerRemoved, "", "", "removed from the configuration; its connections were drained")
			}
			continue
		}
		if p.Joining && !n.Joining {
			ev(n.Name, EventServerJoined, "", "", "Online and caught up: "+n.Reason)
		}
		if !p.Standby && n.Standby {
			ev(n.Name, EventStandby, "", "", standbyReason)
		} else if p.Standby && !n.Standby {
			why := "no longer a standby: routed by its checks"
			if i == next.Designated {
				why = "the writer now: its standby setting applies again when it is a replica"
			}
			ev(n.Name, EventStandbyCleared, "", "", why)
		}
		ps, _ := p.Published()
		ns, nreason := n.Published()
		if ps != ns {
			ev(n.Name, EventStateChange, ps.String(), ns.String(), nreason)
		} else if ns == topology.Online {
			pr, pw := p.access()
			nr, nw := n.access()
			if pr != nr || pw != nw {
				ev(n.Name, EventAccessChange, accessString(pr, pw), accessString(nr, nw), n.Verdict.Reason)
			}
		}
		if !p.Overloaded && n.Overloaded {
			ev(n.Name, EventOverloaded, "", "", n.OverloadReason+"; the server stays in routing")
		} else if p.Overloaded && !n.Overloaded {
			ev(n.Name, EventOverloadCleared, "", "", "accepts connections again")
		}
		semiSyncEvents(p, n, ev)
		if !p.Lagging && n.Lagging {
			ev(n.Name, EventLag, "", "", n.Latest.Reason)
		} else if p.Lagging && !n.Lagging {
			ev(n.Name, EventLagCleared, "", "", "caught up: "+n.Latest.Reason)
		}
		if !p.Slow && n.Slow {
			ev(n.Name, EventSlow, "", "", fmt.Sprintf("a check timed out (%s) while the server completed %d client statements on Vigil's connections: slow, not down, so the check does not count as failed; if this repeats, the server or Vigil is short of CPU (or raise monitor.timeout)",
				n.LastErr, n.Last.ClientReplies))
		} else if p.Slow && !n.Slow {
			ev(n.Name, EventSlowCleared, "", "", fmt.Sprintf("%d consecutive good checks", n.Good))
		}
		if !p.Kept && n.Kept {
			ev(n.Name, EventWriterKept, "", "", n.KeptReason)
		} else if p.Kept && !n.Kept {
			why := "it shows life again"
			if st, reason := n.Published(); st != topology.Online {
				why = "out of routing after all: " + reason
			}
			ev(n.Name, EventWriterKeptCleared, "", "", why)
		}
		if !p.Conflict && n.Conflict {
			reason := "reports read_only=OFF but is not the writer; it gets no writes"
			if w := next.writerName(); w != "" {
				reason += ", writes stay on " + w
			} else if next.Designated >= 0 {
				reason += ", the primary is " + next.Servers[next.Designated].Name
			}
			ev(n.Name, EventConflict, "", "", reason)
		} else if p.Conflict && !n.Conflict {
			ev(n.Name, EventConflictCleared, "", "", "no longer an Online server with read_only=OFF beside the writer")
		}
	}
	if prev.Writer != next.Writer {
		ev("", EventWriterChange, prev.writerName(), next.writerName(), next.WriterReason)
	}
	return evs
}

func accessString(r, w bool) string { return fmt.Sprintf("r=%d w=%d", b2i(r), b2i(w)) }

// Snapshot builds the immutable snapshot of st for the router.
func (st *State) Snapshot(opts *Options) *topology.Snapshot {
	snap := &topology.Snapshot{
		Cluster:      opts.Cluster,
		Type:         opts.Type,
		Writer:       st.Writer,
		Term:         st.Term,
		MultiWriter:  opts.Type == TypeGalera && opts.GaleraMultiWriter,
		Servers:      make([]topology.Server, len(st.Servers)),
		WriterReason: "",
	}
	if st.Writer < 0 {
		snap.WriterReason = st.WriterReason
	}
	for i := range st.Servers {
		s := &st.Servers[i]
		state, reason, r, w := s.publishedAs()
		if s.Conflict {
			reason = "conflict: read_only=OFF but not the writer; " + reason
		}
		if s.Overloaded {
			reason += "; overloaded: " + s.OverloadReason
		}
		if s.Kept && i == st.Writer {
			reason += "; kept as the writer: " + s.KeptReason
		}
		if s.Slow {
			reason += "; slow: checks time out while it completes client statements (not counted as failures)"
		}
		srv := topology.Server{
			Name: s.Name, Addr: opts.Servers[i].Addr, Weight: opts.Servers[i].Weight,
			Role: st.role(opts, i), State: state, Readable: r, Writable: w,
			LagSeconds: -1, Reason: reason, Overloaded: s.Overloaded, Conflict: s.Conflict, Fenced: s.Fenced,
			Removed: s.Removed, Standby: s.Standby,
		}
		if o := s.LastOK; o != nil {
			srv.LagSeconds = s.Lag
			srv.GTID = o.GTID.String()
			srv.MaxPacket = o.MaxPacket
		}
		snap.Servers[i] = srv
	}
	return snap
}

func (st *State) role(opts *Options, i int) topology.Role {
	switch opts.Type {
	case TypeGalera:
		return topology.RoleGalera
	case TypeReadOnly:
		if i == st.Designated {
			return topology.RolePrimary
		}
		return topology.RoleReplica
	}
	switch {
	case st.Designated == i:
		return topology.RolePrimary
	case st.Designated >= 0 || st.Discovered:
		// Once a primary was known, the configured role says nothing.
		return topology.RoleReplica
	case opts.Servers[i].Role == "primary":
		return topology.RolePrimary
	case opts.Servers[i].Role == "replica":
		return topology.RoleReplica
	}
	return topology.RoleUnknown
}

// Health is server i's judgement for the failover engine.
func (st *State) Health(i int) topology.Health {
	s := &st.Servers[i]
	state, reason, r, w := s.publishedAs()
	return topology.Health{
		Name: s.Name, Last: s.Last, LastOK: s.LastOK, State: state, Readable: r, Writable: w, Reason: reason,
		ConsecutiveFailures: s.Bad, ConsecutiveSuccesses: s.Good, LastSuccess: s.LastSuccess,
		LastErrCode: s.LastErrCode, LastErr: s.LastErr, Overloaded: s.Overloaded, Lagging: s.Lagging,
		Fenced: s.Fenced, Admin: s.Admin, FailingSince: s.FailingSince, LagSeconds: s.Lag,
	}
}
