package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/executor"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/topology"
)

// journal is the daemon's bounded in-memory event list (the persistent
// journal under state_dir is the failover executor's).
type journal struct {
	mu     sync.Mutex
	events []admin.Event
}

const maxEvents = 2000

func (j *journal) add(e admin.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	j.mu.Lock()
	j.events = append(j.events, e)
	if len(j.events) > maxEvents {
		j.events = slices.Delete(j.events, 0, len(j.events)-maxEvents)
	}
	j.mu.Unlock()
}

func (j *journal) list(cluster, server, kind string, since time.Time, limit int) []admin.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []admin.Event
	for _, e := range j.events {
		if (cluster == "" || e.Cluster == cluster) && (server == "" || e.Server == server) &&
			(kind == "" || e.Kind == kind) && !e.Time.Before(since) {
			out = append(out, e)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// The daemon is the admin API's Controller.
var _ admin.Controller = (*daemon)(nil)

func (d *daemon) Servers() []admin.ServerView {
	var out []admin.ServerView
	for _, name := range d.clusterNames() {
		rt := d.clusterMap()[name]
		snap := rt.topo.Load()
		if snap == nil {
			continue
		}
		checks := rt.mon.Checks()
		for i, s := range snap.Servers {
			if s.Removed {
				continue
			}
			v := admin.ServerView{
				Name: s.Name, Address: s.Addr, Cluster: name, Role: s.Role.String(), State: s.State.String(),
				Readable: s.Readable, Writable: s.Writable, Writer: i == snap.Writer, GTID: s.GTID, Reason: s.Reason,
				Weight: s.Weight, Standby: s.Standby,
			}
			if s.LagSeconds >= 0 {
				lag := s.LagSeconds
				v.LagSeconds = &lag
			}
			if p := rt.pool(i); p != nil {
				st := p.Stats()
				v.Pool = admin.PoolView{Open: st.Open, Idle: st.Idle, InUse: st.InUse, Waits: st.Waits}
			}
			if i < len(rt.fe.Stats.ServerQueries) {
				v.Queries = rt.fe.Stats.ServerQueries[i].Load()
			}
			if i < len(checks) && !checks[i].AsyncSince.IsZero() {
				since := checks[i].AsyncSince.UTC()
				v.SemiSyncAsyncSince = &since
			}
			out = append(out, v)
		}
	}
	return out
}

func (d *daemon) clusterNames() []string {
	var names []string
	for n := range d.clusterMap() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (d *daemon) Events(cluster, server, kind string, since time.Time, limit int) []admin.Event {
	return d.journal.list(cluster, server, kind, since, limit)
}

func (d *daemon) Sessions() any {
	var out []any
	for _, name := range d.clusterNames() {
		for _, s := range d.clusterMap()[name].fe.Sessions() {
			out = append(out, struct {
				Cluster string  `json:"cluster"`
				ID      uint32  `json:"id"`
				User    string  `json:"user"`
				Client  string  `json:"client"`
				Server  string  `json:"server,omitempty"`
				Command string  `json:"command,omitempty"`
				Seconds float64 `json:"seconds,omitempty"`
			}{name, s.ID, s.User, s.Client, s.Server, s.Command, s.Seconds})
		}
	}
	if out == nil {
		out = []any{}
	}
	return out
}

func (d *daemon) cluster(name string) (*clusterRuntime, error) {
	clusters := d.clusterMap()
	if name == "" {
		if len(clusters) == 1 {
			for _, rt := range clusters {
				return rt, nil
			}
		}
		return nil, &admin.Error{Status: http.StatusBadRequest, Message: "several clusters: name one with \"cluster\""}
	}
	rt := clusters[name]
	if rt == nil {
		return nil, &admin.Error{Status: http.StatusNotFound, Message: "no cluster named " + name}
	}
	return rt, nil
}

func (d *daemon) Ready() (bool, string) {
	for _, name := range d.clusterNames() {
		snap := d.clusterMap()[name].topo.Load()
		if snap == nil || snap.Writer < 0 {
			return false, "cluster " + name + " has no writer"
		}
	}
	return true, ""
}

func (d *daemon) Reload(ctx context.Context) error { return d.reload(d.cfgPath) }

// SetServerState implements admin.Controller: ONLINE, OFFLINE_SOFT and
// OFFLINE_HARD are the operator's override (ONLINE also ends a standby);
// STANDBY makes the server a standby, kept across restarts.
func (d *daemon) SetServerState(ctx context.Context, cluster, server, state string) error {
	rt, err := d.cluster(cluster)
	if err != nil {
		return err
	}
	if state == "STANDBY" {
		return d.setStandby(cluster, server, true)
	}
	if err := rt.setServerState(server, state); err != nil {
		return err
	}
	d.setKeptOut(rt, server, "") // the operator decided
	if snap := rt.topo.Load(); state == "ONLINE" && snap != nil {
		if i := snap.Index(server); i >= 0 && snap.Servers[i].Standby {
			return d.setStandby(cluster, server, false)
		}
	}
	return nil
}

func (d *daemon) operation(ctx context.Context, cluster string, req failover.Request) (admin.OpResult, error) {
	rt, err := d.cluster(cluster)
	if err != nil {
		return admin.OpResult{}, err
	}
	res, err := rt.exec.Request(ctx, req)
	out := admin.OpResult{OK: err == nil && res.OK, DryRun: req.DryRun, Cluster: rt.name, Message: res.Message,
		Plan: res.Text, Steps: res.Steps, ElapsedMs: float64(res.Elapsed.Microseconds()) / 1000, PauseMs: float64(res.Pause.Microseconds()) / 1000}
	if p := res.Decision.Plan; p != nil {
		out.Old, out.New = p.OldPrimary, p.NewPrimary
	}
	var refused *executor.RefusedError
	switch {
	case errors.Is(err, executor.ErrBusy):
		return out, &admin.Error{Status: http.StatusConflict, Message: "refused: " + err.Error() + "; wait for it to finish (vigil ctl events)"}
	case errors.As(err, &refused):
		return out, &admin.Error{Status: http.StatusConflict, Message: "refused: " + refused.Reason}
	case err != nil:
		out.OK = false
		out.Message = err.Error()
		return out, nil
	}
	return out, nil
}

func (d *daemon) Switchover(ctx context.Context, r admin.OpRequest) (admin.OpResult, error) {
	return d.operation(ctx, r.Cluster, failover.Request{Kind: failover.RequestSwitchover, To: r.To, DryRun: r.DryRun})
}

func (d *daemon) Failover(ctx context.Context, r admin.OpRequest) (admin.OpResult, error) {
	return d.operation(ctx, r.Cluster, failover.Request{Kind: failover.RequestFailover, To: r.To, DryRun: r.DryRun, Force: r.Force, AcceptLoss: r.AcceptLoss})
}

func (d *daemon) Rejoin(ctx context.Context, cluster, node string) (admin.OpResult, error) {
	return d.operation(ctx, cluster, failover.Request{Kind: failover.RequestRejoin, To: node})
}

func (d *daemon) Ack(ctx context.Context, cluster string) (admin.OpResult, error) {
	rt, err := d.cluster(cluster)
	if err != nil {
		return admin.OpResult{}, err
	}
	rt.exec.Ack()
	return admin.OpResult{OK: true, Cluster: rt.name, Message: "acknowledged: automatic failover is armed again"}, nil
}

// setServerState applies an operator's state through the owner of the
// cluster's routing state (the monitor's override, the router's fence).
func (rt *clusterRuntime) setServerState(server, state string) error {
	var st topology.State
	switch state {
	case "ONLINE":
		st = topology.Online
	case "OFFLINE_SOFT":
		st = topology.OfflineSoft
	case "OFFLINE_HARD":
		st = topology.OfflineHard
	default:
		return &admin.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("state must be ONLINE, OFFLINE_SOFT, OFFLINE_HARD or STANDBY, not %q", state)}
	}
	if err := rt.exec.Routing().SetAdminState(server, st, "set by an operator"); err != nil {
		return &admin.Error{Status: http.StatusBadRequest, Message: err.Error()}
	}
	return nil
}
