package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigil-db/vigil/internal/failover"
)

// Views: every instance publishes what its own monitor sees of each
// server of a cluster (clusters/<c>/views/<instance>), held by its lease
// so that a dead or cut-off instance's view disappears with it. Before an
// automatic failover the acting instance reads the others' views
// (failover.Views): one that still reaches the primary holds the
// failover, because then the acting instance is the one cut off.
//
// Write rate: a view is written when what it says changes (a server
// starts or stops answering, the kind of failure changes), at most every
// viewMinGap, and refreshed every viewRefresh so that readers can tell a
// live view from a stale one. With the defaults that is one small put per
// second per cluster and instance, a few more while servers flap.

const (
	viewPoll    = 100 * time.Millisecond
	viewMinGap  = 250 * time.Millisecond
	viewRefresh = time.Second
	// viewReadTimeout bounds the read before a failover: a slow etcd
	// delays the failover (failover.Views.Err), it does not block it.
	viewReadTimeout = time.Second
)

// viewDoc is a published view.
type viewDoc struct {
	Instance string                         `json:"instance"`
	At       time.Time                      `json:"at"`
	Servers  map[string]failover.ServerView `json:"servers"`
}

// PublishViews keeps this instance's view of the cluster's servers in
// etcd until ctx ends; source returns it (by server name) and is called
// every 100 ms.
func (cl *Cluster) PublishViews(ctx context.Context, source func() map[string]failover.ServerView) {
	t := time.NewTicker(viewPoll)
	defer t.Stop()
	var last map[string]failover.ServerView
	var wrote, read time.Time
	var lease clientv3.LeaseID
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		id := cl.co.leaseID()
		if id == 0 {
			continue
		}
		cur := source()
		if time.Since(read) >= viewRefresh {
			cl.keepViews(ctx, cur)
			read = time.Now()
		}
		since := time.Since(wrote)
		due := id != lease || since >= viewRefresh || (since >= viewMinGap && viewChanged(last, cur))
		if !due {
			continue
		}
		if err := cl.putView(ctx, id, cur); err != nil {
			if ctx.Err() == nil {
				cl.co.log.Debug("coordination: cannot publish this instance's view of the servers", "cluster", cl.name, "err", err)
			}
			continue
		}
		last, wrote, lease = cur, time.Now(), id
	}
}

// keepViews keeps, for the API, this instance's view and the others' as
// read now (one read per viewRefresh; the ones kept before when the read
// fails).
func (cl *Cluster) keepViews(ctx context.Context, own map[string]failover.ServerView) {
	all := []InstanceView{{Instance: cl.Instance(), At: time.Now(), Servers: own}}
	vs := cl.Views(ctx)
	if vs.Err != "" && len(vs.Peers) == 0 {
		if old := cl.views.Load(); old != nil && len(*old) > 0 {
			all = append(all, (*old)[1:]...)
		}
	}
	for _, p := range vs.Peers {
		all = append(all, InstanceView{Instance: p.Instance, At: p.At, Servers: p.Servers})
	}
	cl.views.Store(&all)
}

func (cl *Cluster) putView(ctx context.Context, id clientv3.LeaseID, servers map[string]failover.ServerView) error {
	b, err := json.Marshal(viewDoc{Instance: cl.Instance(), At: time.Now().UTC(), Servers: servers})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, viewReadTimeout)
	defer cancel()
	_, err = cl.co.cli.Put(pctx, cl.key("views", cl.Instance()), string(b), clientv3.WithLease(id))
	return err
}

// viewChanged reports whether a view says something new: a server
// appeared or went, started or stopped answering, or failed differently.
// A newer check with the same outcome is not a change (the refresh
// carries it).
func viewChanged(a, b map[string]failover.ServerView) bool {
	return !maps.EqualFunc(a, b, func(x, y failover.ServerView) bool {
		return x.OK == y.OK && x.Failure == y.Failure && x.FailingSince.Equal(y.FailingSince)
	})
}

// Views reads the other live instances' views of the cluster (never nil;
// Err says why they could not be read).
func (cl *Cluster) Views(ctx context.Context) *failover.Views {
	// A view is refreshed every viewRefresh and says when the check it
	// carries started: it is at most about two refreshes old when read.
	out := &failover.Views{Self: cl.Instance(), MaxAge: 3 * viewRefresh}
	gctx, cancel := context.WithTimeout(ctx, viewReadTimeout)
	defer cancel()
	prefix := cl.key("views") + "/"
	r, err := cl.co.cli.Get(gctx, prefix, clientv3.WithPrefix())
	if err != nil {
		out.Err = err.Error()
		return out
	}
	for _, kv := range r.Kvs {
		name := strings.TrimPrefix(string(kv.Key), prefix)
		if name == cl.Instance() {
			continue
		}
		var d viewDoc
		if err := json.Unmarshal(kv.Value, &d); err != nil {
			out.Err = fmt.Sprintf("view of %s: %v", name, err)
			continue
		}
		out.Peers = append(out.Peers, failover.PeerView{Instance: name, At: d.At, Servers: d.Servers})
	}
	return out
}
