// Package lifecycle owns the operations that give a cluster a server
// back: clone (stream a donor's backup onto a target through the vigil
// agents, point it at the writer, give it back to routing). The choice of
// the donor is pure (ChooseDonor, like failover.Decide); the run (Clone)
// does its I/O through small interfaces so tests can fake the agents and
// the servers.
package lifecycle

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/vigil-db/vigil/internal/topology"
)

// DonorInput is what the donor choice looks at.
type DonorInput struct {
	// Snapshot is the cluster as the monitor sees it now.
	Snapshot *topology.Snapshot
	// Target is the server to overwrite; From the donor an operator
	// named ("" to let Vigil choose).
	Target, From string
	// Agents says which servers have an agent configured.
	Agents map[string]bool
	// Load is each server's client statements in flight (missing: 0);
	// the least loaded of equally caught-up replicas serves.
	Load map[string]int64
	// MaxLag is how far behind (seconds) a replica may be to serve; 0
	// means 10s.
	MaxLag float64
	// Busy names servers that already serve as a donor or are a target.
	Busy map[string]bool
	// Errant names replicas whose latest check held transactions the
	// writer lacks (name → which): they never serve, since the copy
	// would carry those transactions to the target.
	Errant map[string]string
	// Rebuild: the target is a member to overwrite in place, which may be
	// a fenced old primary (its role still shows primary); only the
	// writer itself is refused.
	Rebuild bool
}

// DonorChoice is the donor and why.
type DonorChoice struct {
	Donor  string
	Reason string
}

// Refusal is a clone that must not run, with the reason an operator reads.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return "refused: " + r.Reason }

func refuse(format string, args ...any) (DonorChoice, error) {
	return DonorChoice{}, &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// ChooseDonor picks the donor of a clone onto in.Target, or refuses. The
// target must be a server of the cluster with an agent that is not the
// writer. A named donor is used when it can serve; otherwise a healthy,
// caught-up replica (or standby) with the least lag, then the least load,
// serves; the writer only when nothing else can (the last member standing).
func ChooseDonor(in DonorInput) (DonorChoice, error) {
	snap := in.Snapshot.Live()
	if snap == nil {
		return refuse("the cluster has not been checked yet; try again in a moment")
	}
	maxLag := in.MaxLag
	if maxLag <= 0 {
		maxLag = 10
	}
	ti := snap.Index(in.Target)
	switch {
	case in.Target == "":
		return refuse("name the server to clone onto")
	case ti < 0:
		return refuse("%s is not a server of cluster %s (add it to the configuration first)", in.Target, snap.Cluster)
	case snap.Writer == ti:
		return refuse("%s is the writer; switch over first (a writer is never overwritten)", in.Target)
	case snap.Servers[ti].Role == topology.RolePrimary && snap.Type == "replication" && !(in.Rebuild && snap.Servers[ti].Fenced):
		return refuse("%s is a primary; switch over first (a fenced old primary is rebuilt with vigil ctl rebuild)", in.Target)
	case !in.Agents[in.Target]:
		return refuse("%s has no agent: set clusters[].servers[].agent for it (docs/lifecycle.md)", in.Target)
	case in.Busy[in.Target]:
		return refuse("%s is already part of a clone; wait for it to finish (vigil ctl clones)", in.Target)
	}
	if in.From != "" {
		di := snap.Index(in.From)
		switch {
		case in.From == in.Target:
			return refuse("%s cannot be its own donor", in.From)
		case di < 0:
			return refuse("donor %s is not a server of cluster %s", in.From, snap.Cluster)
		case !in.Agents[in.From]:
			return refuse("donor %s has no agent: set clusters[].servers[].agent for it", in.From)
		case in.Busy[in.From]:
			return refuse("donor %s already serves a clone; wait for it to finish (vigil ctl clones)", in.From)
		case in.Errant[in.From] != "":
			return refuse("donor %s holds transactions the writer lacks (%s): its copy would carry them to %s; name another donor, or rebuild %s first", in.From, in.Errant[in.From], in.Target, in.From)
		}
		s := snap.Servers[di]
		if s.State == topology.OfflineHard && !s.Readable && !s.Writable {
			return refuse("donor %s is OFFLINE_HARD (%s); name another donor", in.From, orNone(s.Reason))
		}
		why := "named by the operator"
		if di == snap.Writer {
			why = "the writer, named by the operator"
		}
		return DonorChoice{Donor: in.From, Reason: why}, nil
	}
	type cand struct {
		name string
		lag  float64
		load int64
	}
	var cands []cand
	var skipped []string
	for i, s := range snap.Servers {
		if i == ti || i == snap.Writer {
			continue
		}
		why := ""
		switch {
		case !in.Agents[s.Name]:
			why = "no agent"
		case in.Busy[s.Name]:
			why = "serves another clone"
		case s.Fenced:
			why = "fenced"
		case in.Errant[s.Name] != "":
			why = "holds transactions the writer lacks (" + in.Errant[s.Name] + ")"
		case s.Role == topology.RolePrimary:
			why = "a primary"
		case s.State != topology.Online && !(s.Standby && s.State == topology.OfflineSoft):
			why = s.State.String()
		case s.LagSeconds < 0:
			why = "lag unknown (not replicating?)"
		case s.LagSeconds > maxLag:
			why = fmt.Sprintf("%.0fs behind", s.LagSeconds)
		}
		if why != "" {
			skipped = append(skipped, s.Name+": "+why)
			continue
		}
		cands = append(cands, cand{s.Name, s.LagSeconds, in.Load[s.Name]})
	}
	if len(cands) > 0 {
		slices.SortFunc(cands, func(a, b cand) int {
			return cmp.Or(cmp.Compare(a.lag, b.lag), cmp.Compare(a.load, b.load), cmp.Compare(a.name, b.name))
		})
		c := cands[0]
		return DonorChoice{Donor: c.name, Reason: fmt.Sprintf("caught-up replica with the least lag and load (%.0fs behind, %d statements in flight)", c.lag, c.load)}, nil
	}
	if w := snap.WriterServer(); w != nil {
		switch {
		case !in.Agents[w.Name]:
			skipped = append(skipped, w.Name+" (the writer): no agent")
		case in.Busy[w.Name]:
			skipped = append(skipped, w.Name+" (the writer): serves another clone")
		default:
			return DonorChoice{Donor: w.Name, Reason: "the writer: no other member can serve (" + orNone(strings.Join(skipped, "; ")) + ")"}, nil
		}
	}
	return refuse("no server can serve as donor for %s (%s)", in.Target, orNone(strings.Join(skipped, "; ")))
}

func orNone(s string) string {
	if s == "" {
		return "no other server"
	}
	return s
}
