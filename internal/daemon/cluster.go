package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/executor"
	"github.com/vigil-db/vigil/internal/frontend"
	"github.com/vigil-db/vigil/internal/monitor"
	"github.com/vigil-db/vigil/internal/qstats"
	"github.com/vigil-db/vigil/internal/topology"
)

// clusterRuntime is one cluster's running parts. Its servers live in
// slots (topology.MaxServers): slot i is server i of every snapshot, pool,
// balancer counter, monitor probe and executor option, for the life of
// the process; a removed server's slot stays a tombstone, an added one
// takes the next.
type clusterRuntime struct {
	name string
	log  *slog.Logger
	cfg  atomic.Pointer[config.Cluster]
	topo *topology.Holder
	// pools by slot, replaced whole when a slot is added.
	pools atomic.Pointer[[]*backend.Pool]
	fe    *frontend.Server
	mon   *monitor.Monitor
	exec  *executor.Executor
	// shared: the cluster's coordination with other Vigil instances.
	shared *coord.Cluster

	digests *qstats.Store

	// Changed only under the daemon's reloadMu:
	slots     []slot
	ln        net.Listener
	poolStops map[int]context.CancelFunc

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// slot is the server a slot holds.
type slot struct {
	Name, Addr string
	Removed    bool
}

// activity is the frontend's passive evidence for the monitor: client
// statements server i completed, and those waiting for it. The monitor is
// built before the frontend but runs only after it exists.
func (rt *clusterRuntime) activity(i int) (uint64, int64) { return rt.fe.Activity(i) }

// poolList is every slot's pool, by slot (removed ones closed).
func (rt *clusterRuntime) poolList() []*backend.Pool {
	if p := rt.pools.Load(); p != nil {
		return *p
	}
	return nil
}

// pool is slot i's pool, nil when none.
func (rt *clusterRuntime) pool(i int) *backend.Pool {
	if l := rt.poolList(); i >= 0 && i < len(l) {
		return l[i]
	}
	return nil
}

func (rt *clusterRuntime) addPool(i int, p *backend.Pool) {
	l := append([]*backend.Pool(nil), rt.poolList()...)
	for len(l) <= i {
		l = append(l, nil)
	}
	l[i] = p
	rt.pools.Store(&l)
}

// isPrimary: slot i is the replication primary the monitor designates,
// routed or not (a primary that is down is still the one to fail over).
func (rt *clusterRuntime) isPrimary(i int) bool {
	st := rt.mon.State()
	return st.Designated == i
}

// newCluster builds a cluster's runtime from cc — pools, monitor,
// frontend with its rules, executor, and its listener — without running
// anything: runCluster starts it, stop releases it.
// What clients are shown of the servers comes from gs.
func (d *daemon) newCluster(parent context.Context, cfg *config.Config, cc config.Cluster, gs greetings) (*clusterRuntime, error) {
	log := d.log.With("cluster", cc.Name)
	rt := &clusterRuntime{name: cc.Name, log: log, topo: &topology.Holder{}, poolStops: map[int]context.CancelFunc{}}
	rt.ctx, rt.cancel = context.WithCancel(parent)
	rt.cfg.Store(&cc)
	slots, _, _, err := planSlots(nil, cc.Servers)
	if err != nil {
		return nil, err
	}
	rt.slots = slots
	creds := credentialsFunc(cfg)
	var pools []*backend.Pool
	for i, s := range slots {
		pools = append(pools, backend.NewPool(s.Name, s.Addr, i, poolOptions(cc, creds), log))
	}
	rt.pools.Store(&pools)
	fail := func(err error) (*clusterRuntime, error) {
		rt.stop()
		return nil, err
	}
	mon, err := monitor.New(monitorOptions(cc, slots, rt.activity), rt.topo, log)
	if err != nil {
		return fail(fmt.Errorf("monitor: %w", err))
	}
	rt.mon = mon
	opts, err := frontendOptions(cc, d.rsaKey)
	if err != nil {
		return fail(err)
	}
	gs.show(cc, &opts)
	rt.fe = frontend.New(opts, buildUsers(cfg), rt.topo, pools, log)
	rt.fe.OnServerLost(mon.CheckNow)
	rt.fe.SetGuard(d.guard)
	rt.fe.SetBudget(d.budget)
	rt.digests = qstats.New(cfg.Digests.MaxEntries)
	proc, err := d.processing(cfg, cc, slots, rt.digests, nil)
	if err != nil {
		return fail(fmt.Errorf("rules: %w", err))
	}
	rt.fe.SetProcessing(proc)
	exOpts := executorOptions(cfg, cc, slots)
	if err := exOpts.Engine.Validate(liveNames(slots)); err != nil {
		return fail(fmt.Errorf("failover: %w", err))
	}
	ex, err := executor.New(exOpts, mon, rt.fe, log, func(ev executor.Event) {
		d.journal.add(admin.Event{Time: ev.Time, Cluster: ev.Cluster, Server: ev.Server, Kind: ev.Kind, Message: ev.Message})
	})
	if err != nil {
		return fail(err)
	}
	rt.exec = ex
	mon.OnEvidence(ex.Kick)
	d.coordinate(rt, cfg)
	ln, err := net.Listen("tcp", cc.Listen)
	if err != nil {
		return fail(fmt.Errorf("listen on %s: %w (is another Vigil or server using the port?)", cc.Listen, err))
	}
	rt.ln = ln
	log.Info("cluster built", "listen", ln.Addr().String(), "servers", len(cc.Servers), "server_version", opts.ServerVersion,
		"mariadb_extended_capabilities", fmt.Sprintf("%#x", opts.MariaDBCaps))
	return rt, nil
}

// runCluster starts a built cluster: monitor, executor, the event pump
// into the journal, pool maintenance and the listener.
func (d *daemon) runCluster(rt *clusterRuntime) {
	ctx := rt.ctx
	evs, unsub := rt.mon.Subscribe(256)
	d.restoreKeptOut(rt)
	rt.wg.Go(func() { _ = rt.mon.Run(ctx) })
	rt.wg.Go(func() { _ = rt.exec.Run(ctx) })
	rt.runCoordination()
	rt.wg.Go(func() {
		defer unsub()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-evs:
				if !ok {
					return
				}
				d.journal.add(admin.Event{Time: ev.Time, Cluster: ev.Cluster, Server: ev.Server, Kind: string(ev.Kind),
					From: ev.From, To: ev.To, Message: ev.String()})
				rt.exec.Kick()
			}
		}
	})
	for i, p := range rt.poolList() {
		d.startPool(rt, i, p)
	}
	rt.serve(rt.ln)
	rt.log.Info("cluster listening", "listen", rt.ln.Addr().String())
}

// startPool runs slot i's pool maintenance until the cluster stops or
// the server is removed.
func (d *daemon) startPool(rt *clusterRuntime, i int, p *backend.Pool) {
	ctx, cancel := context.WithCancel(rt.ctx)
	rt.poolStops[i] = cancel
	rt.wg.Go(func() {
		defer cancel()
		p.Maintain(ctx)
	})
}

// stopPool closes a removed server's pool.
func (rt *clusterRuntime) stopPool(i int) {
	if stop := rt.poolStops[i]; stop != nil {
		stop()
		delete(rt.poolStops, i)
	}
	if p := rt.pool(i); p != nil {
		p.Close()
	}
}

// serve accepts clients on ln until the cluster stops (or RetireListener).
func (rt *clusterRuntime) serve(ln net.Listener) {
	rt.wg.Go(func() {
		if err := rt.fe.Serve(rt.ctx, ln); err != nil {
			rt.log.Error("listener stopped", "err", err)
		}
	})
}

// stop ends everything the cluster runs, waits for it, and closes its
// listener and pools (also for a cluster that was built and never run).
func (rt *clusterRuntime) stop() {
	rt.cancel()
	if rt.ln != nil {
		rt.ln.Close()
	}
	rt.wg.Wait()
	for _, p := range rt.poolList() {
		if p != nil {
			p.Close()
		}
	}
}

// planSlots maps a cluster's configured servers onto the running slots
// (old; nil for a new cluster). A server with the same name and address
// keeps its slot; a server no longer configured, renamed or moved to
// another address leaves its slot (removed) and, when configured under
// its new name or address, takes a new one at the end (it joins like any
// new server). It returns the new slots and the slots added and removed.
func planSlots(old []slot, servers []config.Server) (next []slot, added, removed []int, err error) {
	next = append([]slot(nil), old...)
	want := map[string]string{}
	for _, s := range servers {
		want[s.Name] = s.Address
	}
	kept := map[string]bool{}
	for i, s := range old {
		if s.Removed {
			continue
		}
		if addr, ok := want[s.Name]; ok && addr == s.Addr {
			kept[s.Name] = true
			continue
		}
		next[i].Removed = true
		removed = append(removed, i)
	}
	for _, s := range servers {
		if kept[s.Name] {
			continue
		}
		next = append(next, slot{Name: s.Name, Addr: s.Address})
		added = append(added, len(next)-1)
	}
	if len(next) > topology.MaxServers {
		return nil, nil, nil, fmt.Errorf("the cluster would use %d server slots; a Vigil process has %d per cluster (removed servers keep theirs): restart Vigil to start from the configured servers", len(next), topology.MaxServers)
	}
	return next, added, removed, nil
}

// liveNames are the names of the slots in use.
func liveNames(slots []slot) []string {
	var names []string
	for _, s := range slots {
		if !s.Removed {
			names = append(names, s.Name)
		}
	}
	return names
}

// serverConfig is the configured server slot s holds (a removed slot has
// none).
func serverConfig(cc config.Cluster, s slot) (config.Server, bool) {
	for _, cs := range cc.Servers {
		if cs.Name == s.Name && !s.Removed {
			return cs, true
		}
	}
	return config.Server{}, false
}
