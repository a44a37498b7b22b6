package executor

import (
	"context"

	"github.com/vigil-db/vigil/internal/failover"
)

// Viewer is the optional part of Shared that reads the other Vigil
// instances' views of the servers (coord.Cluster.Views). With it, an
// automatic failover decided from this instance's monitor runs only when
// no other live instance still reaches the primary.
type Viewer interface {
	Views(ctx context.Context) *failover.Views
}

// ServerViews is this instance's view of the cluster's servers, as it
// publishes it for the other instances (coord.Cluster.PublishViews).
func (e *Executor) ServerViews() map[string]failover.ServerView {
	hs := e.mon.Observations()
	out := make(map[string]failover.ServerView, len(hs))
	for _, h := range hs {
		out[h.Name] = failover.ServerViewOf(h)
	}
	return out
}

// withViews decides again, with the other instances' views, when an
// automatic decision would start a failover: the views are read only
// then (one etcd read per decision while a failover is due).
func (e *Executor) withViews(ctx context.Context, d failover.Decision) failover.Decision {
	if d.Action != failover.ActExecute || d.Request != nil || d.Plan == nil || d.Plan.Kind != failover.KindFailover || e.shared == nil {
		return d
	}
	vw, ok := e.shared.(Viewer)
	if !ok {
		return d
	}
	views := vw.Views(ctx)
	in := e.input(nil)
	in.Views = views
	return failover.Decide(in)
}
