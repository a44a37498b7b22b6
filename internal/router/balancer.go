package router

import (
	"strings"
	"sync/atomic"

	"github.com/vigil-db/vigil/internal/topology"
)

// Balancer spreads reads over readable servers by weight and least
// outstanding statements. Safe for concurrent use; allocation-free.
type Balancer struct {
	// outstanding[i] counts statements in flight on server i of the
	// snapshot's server list (the list's order is fixed per cluster).
	outstanding []atomic.Int64
	rr          atomic.Uint64
}

// NewBalancer makes a balancer for n servers.
func NewBalancer(n int) *Balancer { return &Balancer{outstanding: make([]atomic.Int64, n)} }

// Begin counts a statement on server i; call End when it finishes.
func (b *Balancer) Begin(i int) { b.outstanding[i].Add(1) }

// End uncounts a statement on server i.
func (b *Balancer) End(i int) { b.outstanding[i].Add(-1) }

// Outstanding is the number of statements in flight on server i.
func (b *Balancer) Outstanding(i int) int64 { return b.outstanding[i].Load() }

// PickReader returns the index of the readable server with the lowest
// (outstanding+1)/weight, skipping exclude (-1 for none). With
// includeWriter false, the writer serves reads only when no other server
// can. It returns -1 and a reason when no server is readable.
func (b *Balancer) PickReader(snap *topology.Snapshot, includeWriter bool, exclude int) (int, string) {
	if snap == nil {
		return -1, "no topology yet"
	}
	best, bestWriter := -1, -1
	var bestScore float64
	start := int(b.rr.Add(1))
	n := len(snap.Servers)
	for k := 0; k < n; k++ {
		i := (start + k) % n
		s := &snap.Servers[i]
		if i == exclude || s.State != topology.Online || !s.Readable || s.Weight <= 0 {
			continue
		}
		if i == snap.Writer && !includeWriter {
			bestWriter = i
			continue
		}
		if score := b.score(i, s.Weight); best < 0 || score < bestScore {
			best, bestScore = i, score
		}
	}
	if best >= 0 {
		return best, ""
	}
	if bestWriter >= 0 {
		return bestWriter, ""
	}
	return -1, noReaderReason(snap)
}

// PickIn returns the server of members (indices into the snapshot) with
// the lowest (outstanding+1)/weight among those online, skipping exclude.
// Rules use it to route or mirror to a named server group; whether a
// member is readable or writable is the rule author's business (a write
// sent to a read-only server gets the server's own error).
func (b *Balancer) PickIn(snap *topology.Snapshot, members []int, exclude int) (int, string) {
	if snap == nil {
		return -1, "no topology yet"
	}
	best := -1
	var bestScore float64
	start := int(b.rr.Add(1))
	for k := range members {
		i := members[(start+k)%len(members)]
		if i == exclude || i < 0 || i >= len(snap.Servers) {
			continue
		}
		s := &snap.Servers[i]
		if s.State != topology.Online || s.Weight <= 0 {
			continue
		}
		if score := b.score(i, s.Weight); best < 0 || score < bestScore {
			best, bestScore = i, score
		}
	}
	if best >= 0 {
		return best, ""
	}
	if len(members) == 0 {
		return -1, "the server group is empty"
	}
	return -1, "no server of the group is online: " + noReaderReason(snap)
}

// score is (outstanding+1)/weight: lower is better.
func (b *Balancer) score(i, weight int) float64 {
	var out int64
	if i < len(b.outstanding) {
		out = b.outstanding[i].Load()
	}
	return float64(out+1) / float64(weight)
}

func noReaderReason(snap *topology.Snapshot) string {
	var b strings.Builder
	for i := range snap.Servers {
		s := &snap.Servers[i]
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Name)
		b.WriteByte(' ')
		b.WriteString(s.State.String())
		if s.Reason != "" {
			b.WriteString(" (" + s.Reason + ")")
		}
	}
	if b.Len() == 0 {
		return "no servers configured"
	}
	return b.String()
}
