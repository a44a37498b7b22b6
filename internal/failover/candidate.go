package failover

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vigil-db/vigil/internal/topology"
)

// Exclusion says why a server may not become the primary.
type Exclusion uint8

const (
	// Eligible: it may be promoted.
	Eligible Exclusion = iota
	// IsPrimary: it is the primary being replaced.
	IsPrimary
	NotReachable
	NotReplica
	NoFacts
	Fenced
	Offline
	NeverPromote
	Delayed
	SQLError
	NoBinlog
	NoLogSlaveUpdates
	FiltersDiffer
	NewerVersion
	BadGTID
	// Switchover only.
	NotReplicating
	Lagging
	LongQuery
	Errant
	// Galera only.
	NotSynced
	// Standby: promoted only when named.
	Standby
	// ApplyStuck: the running failover's candidate that did not apply its
	// relay log within apply_timeout (Input.Stuck).
	ApplyStuck

	numExclusions
)

var exclusions = [numExclusions]struct{ name, desc string }{
	Eligible:          {"eligible", "may be promoted"},
	IsPrimary:         {"primary", "the current primary"},
	NotReachable:      {"not-reachable", "Vigil cannot check it"},
	NotReplica:        {"not-replica", "it does not replicate from the primary"},
	NoFacts:           {"no-facts", "the executor reported no facts for it (log_bin, log_slave_updates, filters)"},
	Fenced:            {"fenced", "fenced or quarantined by an earlier operation; rejoin it first"},
	Offline:           {"offline", "set offline by an operator"},
	NeverPromote:      {"never-promote", "listed in never_promote"},
	Delayed:           {"delayed", "a delayed replica (SQL_Delay > 0)"},
	SQLError:          {"sql-error", "its SQL thread stopped with an error"},
	NoBinlog:          {"no-binlog", "log_bin is off: replicas could not replicate from it"},
	NoLogSlaveUpdates: {"no-log-slave-updates", "log_slave_updates is off: its binary log lacks the replicated transactions"},
	FiltersDiffer:     {"filters-differ", "its replication filters differ from the other replicas'"},
	NewerVersion:      {"newer-version", "its major version is higher than that of a server that would replicate from it"},
	BadGTID:           {"bad-gtid", "its GTID position cannot be read"},
	NotReplicating:    {"not-replicating", "its replication threads are not both running"},
	Lagging:           {"lagging", "it lags more than the switchover allows"},
	LongQuery:         {"long-query", "it runs a query longer than max_running_seconds"},
	Errant:            {"errant", "it holds transactions the primary lacks"},
	NotSynced:         {"not-synced", "not Synced in the Primary component, or rejecting queries"},
	Standby:           {"standby", "a standby: promoted only when named with --to"},
	ApplyStuck:        {"apply-stuck", "the failover's candidate until it did not apply its relay log within apply_timeout"},
}

func (e Exclusion) String() string {
	if e < numExclusions {
		return exclusions[e].name
	}
	return fmt.Sprintf("Exclusion(%d)", uint8(e))
}

// Description says what the exclusion means.
func (e Exclusion) Description() string {
	if e < numExclusions {
		return exclusions[e].desc
	}
	return ""
}

// Choice records for one server why it was or was not chosen as the new
// primary.
type Choice struct {
	Server   string
	Excluded Exclusion
	Chosen   bool
	// Position is its GTID position (received, relay log included), "" when
	// not known.
	Position string
	// Lag in seconds, -1 when unknown.
	Lag float64
	// Reason is the full sentence for --dry-run output.
	Reason string
}

type mode uint8

const (
	modeFailover mode = iota
	modeSwitchover
)

// choose judges every server as a candidate to replace the primary
// (index old, -1 for none) and marks the best. Exclusions are checked in
// a fixed order and the first that applies is the reason.
func (v *view) choose(m mode, old int) []Choice {
	refFilters := v.referenceFilters(old)
	choices := make([]Choice, len(v.snap.Servers))
	for i := range v.snap.Servers {
		c := Choice{Server: v.name(i), Lag: -1}
		if o := v.obs(i); o != nil && o.OK {
			c.Position = receivedPos(o).String()
			c.Lag = o.Lag()
		}
		c.Excluded, c.Reason = v.exclude(m, i, old, refFilters)
		choices[i] = c
	}
	order := v.rank(choices)
	if len(order) > 0 {
		markChosen(choices, order[0], v, false)
	}
	return choices
}

// exclude returns why server i may not replace old, with the reason text.
func (v *view) exclude(m mode, i, old int, refFilters string) (Exclusion, string) {
	name := v.name(i)
	if i == old {
		if m == modeSwitchover {
			return IsPrimary, "the primary handing over"
		}
		return IsPrimary, "the primary being replaced"
	}
	o := v.obs(i)
	if o == nil {
		return NotReachable, "not checked yet"
	}
	if !o.OK {
		return NotReachable, "Vigil cannot check it: " + failureText(o)
	}
	if v.fenced(i) {
		return Fenced, Fenced.Description()
	}
	if slices.Contains(v.in.Stuck, name) {
		return ApplyStuck, ApplyStuck.Description()
	}
	if srv := &v.snap.Servers[i]; srv.Standby && srv.State != topology.OfflineHard {
		if !v.named(name) {
			return Standby, Standby.Description()
		}
	} else if st := srv.State; st == topology.OfflineSoft || st == topology.OfflineHard {
		return Offline, fmt.Sprintf("%s: %s", st, srv.Reason)
	}
	if !v.replicatesFrom(i, old) {
		if src := v.sourceName(i); src != "" {
			return NotReplica, fmt.Sprintf("it replicates from %s, not from the primary %s", src, v.name(old))
		}
		return NotReplica, "it does not replicate"
	}
	if slices.Contains(v.opts.NeverPromote, name) {
		return NeverPromote, NeverPromote.Description()
	}
	f, ok := v.facts(i)
	if !ok {
		return NoFacts, NoFacts.Description()
	}
	r := o.Replica
	if r.SQLDelay > 0 {
		return Delayed, fmt.Sprintf("a delayed replica (SQL_Delay=%d)", r.SQLDelay)
	}
	if !r.SQLRunning && (r.LastSQLErrno != 0 || r.LastSQLError != "") {
		return SQLError, fmt.Sprintf("its SQL thread stopped with error %d: %s", r.LastSQLErrno, r.LastSQLError)
	}
	if !f.LogBin {
		return NoBinlog, NoBinlog.Description()
	}
	if !f.LogSlaveUpdates {
		return NoLogSlaveUpdates, NoLogSlaveUpdates.Description()
	}
	if f.Filters != refFilters {
		return FiltersDiffer, fmt.Sprintf("its replication filters (%s) differ from the other replicas' (%s)", orNone(f.Filters), orNone(refFilters))
	}
	if other, ok := v.olderPeer(m, i, old); ok {
		return NewerVersion, fmt.Sprintf("its version %s is a higher major version than %s's %s, which would replicate from it",
			o.Version, v.name(other), v.obs(other).Version)
	}
	if p := receivedPos(o); p.bad != "" {
		return BadGTID, "its GTID position cannot be read: " + p.bad
	}
	if m == modeSwitchover {
		return v.excludeSwitchover(i, old, f)
	}
	return Eligible, ""
}

// referenceFilters is the replication filter configuration most replicas
// of old share; on a tie "no filters" wins, then the smallest text.
func (v *view) referenceFilters(old int) string {
	count := map[string]int{}
	for i := range v.snap.Servers {
		if i == old || !v.replicatesFrom(i, old) {
			continue
		}
		if f, ok := v.facts(i); ok {
			count[f.Filters]++
		}
	}
	best, n := "", -1
	for _, k := range slices.Sorted(maps.Keys(count)) {
		if count[k] > n {
			best, n = k, count[k]
		}
	}
	if count[""] == n {
		best = ""
	}
	return best
}

// olderPeer finds a server that would replicate from i and runs an older
// major version (series major.minor): the reachable replicas of old and,
// in a switchover, old itself.
func (v *view) olderPeer(m mode, i, old int) (int, bool) {
	mine, ok := series(v.obs(i).Version)
	if !ok {
		return 0, false
	}
	for j := range v.snap.Servers {
		if j == i || (j == old && m != modeSwitchover) || (j != old && !v.replicatesFrom(j, old)) {
			continue
		}
		if o := v.obs(j); o != nil && o.OK {
			if theirs, ok := series(o.Version); ok && cmpSeries(mine, theirs) > 0 {
				return j, true
			}
		}
	}
	return 0, false
}

// series is a version's major.minor ("10.11.6-MariaDB" → 10, 11).
func series(version string) ([2]int, bool) {
	version = strings.TrimPrefix(version, "5.5.5-")
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	var out [2]int
	for k := range 2 {
		end := 0
		for end < len(parts[k]) && parts[k][end] >= '0' && parts[k][end] <= '9' {
			end++
		}
		n, err := strconv.Atoi(parts[k][:end])
		if err != nil {
			return [2]int{}, false
		}
		out[k] = n
	}
	return out, true
}

func cmpSeries(a, b [2]int) int {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return cmp.Compare(a[1], b[1])
}

// rank orders the eligible servers best first: fewest transactions
// missing from the union of all eligible positions (so a superset always
// wins), then listed in candidates (in list order), then lowest lag, then
// configuration order.
func (v *view) rank(choices []Choice) []int {
	var elig []int
	for i, c := range choices {
		if c.Excluded == Eligible {
			elig = append(elig, i)
		}
	}
	if len(elig) == 0 {
		return nil
	}
	union := v.received(elig[0])
	for _, i := range elig[1:] {
		union = union.union(v.received(i))
	}
	missing := make(map[int]uint64, len(elig))
	for _, i := range elig {
		missing[i] = v.received(i).missing(union)
	}
	slices.SortStableFunc(elig, func(a, b int) int {
		return cmp.Or(
			cmp.Compare(missing[a], missing[b]),
			cmp.Compare(v.pref(a), v.pref(b)),
			cmp.Compare(lagKey(choices[a].Lag), lagKey(choices[b].Lag)),
			cmp.Compare(a, b),
		)
	})
	return elig
}

// pref is a server's place in the candidates list, after every listed
// server when it is not listed.
func (v *view) pref(i int) int {
	if k := slices.Index(v.opts.Candidates, v.name(i)); k >= 0 {
		return k
	}
	return len(v.opts.Candidates)
}

func lagKey(l float64) float64 {
	if l < 0 {
		return math.Inf(1)
	}
	return l
}

// markChosen makes server t the chosen one (by the operator's --to when
// byOperator) and writes every eligible server's reason relative to it.
func markChosen(choices []Choice, t int, v *view, byOperator bool) {
	pt := v.received(t)
	var ties, ahead, diverged []string
	for i := range choices {
		c := &choices[i]
		c.Chosen = i == t
		if c.Excluded != Eligible || i == t {
			continue
		}
		pi := v.received(i)
		switch {
		case pi.equal(pt):
			ties = append(ties, c.Server)
			c.Reason = fmt.Sprintf("as advanced as %s, which wins the tie (%s)", v.name(t), v.tieBreak(t, i))
		case pt.contains(pi):
			c.Reason = fmt.Sprintf("behind %s by %d transaction(s)", v.name(t), pi.missing(pt))
		case pi.contains(pt):
			ahead = append(ahead, c.Server)
			c.Reason = fmt.Sprintf("ahead of %s by %d transaction(s), but %s was asked for", v.name(t), pt.missing(pi), v.name(t))
		default:
			diverged = append(diverged, c.Server)
			c.Reason = fmt.Sprintf("diverged from %s: it has %s, which %s lacks", v.name(t), pi.extra(pt), v.name(t))
		}
	}
	c := &choices[t]
	c.Reason = "most advanced replica (" + orNone(c.Position) + ")"
	if byOperator {
		c.Reason = "asked for with --to (" + orNone(c.Position) + ")"
	}
	if len(ties) > 0 {
		c.Reason += "; as advanced as " + strings.Join(ties, ", ")
	}
	if len(ahead) > 0 {
		c.Reason += "; behind " + strings.Join(ahead, ", ")
	}
	if len(diverged) > 0 {
		c.Reason += "; diverged from " + strings.Join(diverged, ", ") + " (no replica has every transaction)"
	}
	if slices.Contains(v.opts.Candidates, c.Server) {
		c.Reason += "; listed in candidates"
	}
}

// tieBreak says why t beats i when both are equally advanced.
func (v *view) tieBreak(t, i int) string {
	pt, pi := v.pref(t), v.pref(i)
	switch {
	case pt < pi && pt < len(v.opts.Candidates):
		return "preferred in candidates"
	case pt > pi:
		return "chosen by the operator"
	}
	lt, li := lagKey(v.obsLag(t)), lagKey(v.obsLag(i))
	switch {
	case lt < li:
		return "lower lag"
	case lt > li:
		return "chosen by the operator"
	}
	if t < i {
		return "earlier in the configuration"
	}
	return "chosen by the operator"
}

func (v *view) obsLag(i int) float64 {
	if o := v.obs(i); o != nil && o.OK {
		return o.Lag()
	}
	return -1
}

// chosen is the index of the chosen server, -1 for none.
func chosen(choices []Choice) int {
	return slices.IndexFunc(choices, func(c Choice) bool { return c.Chosen })
}

func (v *view) choiceOf(choices []Choice, i int) Choice {
	for _, c := range choices {
		if c.Server == v.name(i) {
			return c
		}
	}
	return Choice{}
}
