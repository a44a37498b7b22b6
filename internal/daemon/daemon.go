// Package daemon is Vigil's runtime: what `vigil run` starts and owns —
// every cluster's listener, pools, monitor, rules and executor, the query
// log, the admin API and metrics — and the reload that builds a new
// runtime from a config, validates it, and swaps it in whole or not at all
// (docs/design.md, "Runtime lifecycle").
package daemon

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/executor"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/frontend"
	"github.com/vigil-db/vigil/internal/lifecycle"
	"github.com/vigil-db/vigil/internal/monitor"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/qcache"
	"github.com/vigil-db/vigil/internal/topology"
)

// RunOptions are what `vigil run` takes besides the config.
type RunOptions struct {
	ConfigPath string
	Version    string
	// Pprof serves Go profiles on this address when set.
	Pprof string
}

// Run serves cfg until ctx ends: it starts every cluster and the admin
// API, reloads o.ConfigPath on SIGHUP, and stops everything it started
// before it returns the process's exit code.
func Run(ctx context.Context, cfg *config.Config, o RunOptions) int {
	log := newLogger(cfg.Log)
	raiseOpenFiles(log)
	if o.Pprof != "" {
		startPprof(ctx, o.Pprof, log)
	}
	d := &daemon{log: log, cfgPath: o.ConfigPath}
	if err := d.start(ctx, cfg); err != nil {
		log.Error("vigil could not start", "err", err)
		d.stop()
		return 1
	}
	d.startThreads(d.ctx)
	log.Info("vigil running", "version", o.Version, "config", o.ConfigPath)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			d.stop()
			return 0
		case <-hup:
			_ = d.reload(o.ConfigPath)
		}
	}
}

func newLogger(l config.Log) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(l.Level))
	o := &slog.HandlerOptions{Level: lvl}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, o))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, o))
}

// daemon owns everything `vigil run` starts.
type daemon struct {
	log     *slog.Logger
	cfgPath string
	journal journal
	// clones runs clones (clone.go); cloneStats counts them.
	clones     *lifecycle.Manager
	clonesOnce sync.Once
	cloneStats cloneStats
	// healers are the clusters' self-healing states (lifecycle.go).
	healers   map[string]*healer
	healersMu sync.Mutex
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	// clusters is replaced whole (copy on write) when a reload adds or
	// removes a cluster; readers Load it without locks.
	clusters atomic.Pointer[map[string]*clusterRuntime]

	ctx     context.Context // lives as long as the daemon
	running atomic.Pointer[config.Config]
	qlog    atomic.Pointer[queryLog]
	cache   *qcache.Cache
	// rsaKey serves caching_sha2_password over plain TCP; a reload keeps
	// it.
	rsaKey   *rsa.PrivateKey
	reloadMu sync.Mutex // one reload (or membership change) at a time
	// applied counts the configs applied (guarded by reloadMu): a
	// reload that let the lock go while it drained servers checks it to
	// see whether another change went in meanwhile (drainUnlocked).
	applied uint64
	// admin is the admin API server (nil when admin.listen is off).
	admin *admin.Server
	// guard bounds unauthenticated clients and throttles failed logins,
	// for every listener.
	guard *frontend.LoginGuard
	// budget bounds large statements' buffers, for every listener
	// (security.statement_memory, memory.go).
	budget *mysqlproto.Budget
	// base is the config file as last applied, before state_dir's
	// overlay (membership.go); guarded by reloadMu.
	base *config.Config
	// coord: coordination with other Vigil instances (nil: alone).
	coord *coord.Coordinator
	// greet reads a server's greeting (nil: readGreeting); tests fake it.
	greet func(ctx context.Context, addr string) *mysqlproto.Greeting
	// setMonitorOptions gives a cluster's monitor its new options, the
	// one step of a swap that can still fail (nil: rt.mon.SetOptions);
	// tests make it fail.
	setMonitorOptions func(rt *clusterRuntime, o monitor.Options) error
	// shards is the sharded listener (nil: none configured yet).
	shards *shardRuntime
	// moves: the schema move that runs (one at a time) and the last.
	moves moves
}

// clusterMap is the running clusters by name.
func (d *daemon) clusterMap() map[string]*clusterRuntime {
	if m := d.clusters.Load(); m != nil {
		return *m
	}
	return nil
}

// start builds and runs every cluster of cfg and the admin API.
func (d *daemon) start(parent context.Context, cfg *config.Config) error {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	d.rsaKey = rsaKey
	ctx, cancel := context.WithCancel(parent)
	d.cancel = cancel
	d.ctx = ctx
	d.clusters.Store(&map[string]*clusterRuntime{})
	d.base = cfg
	ov, err := readOverlay(cfg.StateDir)
	if err != nil {
		return err
	}
	if cfg, err = effective(cfg, ov); err != nil {
		return fmt.Errorf("%s: %w", overlayPath(d.base.StateDir), err)
	}
	d.running.Store(cfg)
	d.guard = frontend.NewGuard(guardOptions(cfg.Security), func(kind, host, user, msg string) {
		who := "address " + host
		if user != "" {
			who = fmt.Sprintf("user %q from %s", user, host)
		}
		d.journal.add(admin.Event{Kind: kind, Message: who + ": " + msg})
	})
	d.startMemory(ctx, cfg.Security)
	d.cache = newCache(cfg)
	ql, err := d.startQueryLog(ctx, cfg.Log)
	if err != nil {
		return err
	}
	d.qlog.Store(ql)
	if err := d.startCoordination(ctx, cfg); err != nil {
		return err
	}
	gs := d.readGreetings(ctx, serverAddrs(cfg))
	clusters := map[string]*clusterRuntime{}
	for i, cc := range cfg.Clusters {
		rt, err := d.newCluster(ctx, cfg, cc, gs)
		if err != nil {
			for _, rt := range clusters {
				rt.stop()
			}
			return fmt.Errorf("clusters[%d] (%s): %w", i, cc.Name, err)
		}
		clusters[cc.Name] = rt
	}
	for _, rt := range clusters {
		d.runCluster(rt)
	}
	d.clusters.Store(&clusters)
	if err := d.startShards(ctx, cfg); err != nil {
		return err
	}
	d.wg.Go(func() { d.healLoop(ctx) })
	if cfg.Admin.AdminEnabled() {
		aopts, generated, err := adminOptions(cfg)
		if err != nil {
			return err
		}
		if generated != "" {
			d.log.Info("admin API token generated: send it as Authorization: Bearer <token>; vigil ctl --token-file reads it", "file", generated)
		}
		if aopts.NoAuth {
			d.log.Warn("the admin API runs WITHOUT authentication (admin.auth: none): anyone who can reach "+cfg.Admin.Listen+" can fail over and reconfigure Vigil; set admin.auth: token", "listen", cfg.Admin.Listen)
		}
		srv := admin.New(aopts, d, newRegistry(d), d.log)
		d.admin = srv
		ln, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin: listen on %s: %w", cfg.Admin.Listen, err)
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := srv.ServeListener(ctx, ln); err != nil {
				d.log.Error("admin server stopped", "err", err)
			}
		}()
		d.log.Info("admin API listening", "listen", ln.Addr().String())
	}
	return nil
}

func (d *daemon) stop() {
	if d.cancel != nil {
		d.cancel()
	}
	if d.budget != nil {
		d.budget.Close() // a session waiting for statement memory ends now
	}
	for _, rt := range d.clusterMap() {
		rt.stop()
	}
	d.wg.Wait()
	d.cloneManager().Wait() // clones run under d.ctx, cancelled above
	if d.coord != nil {
		_ = d.coord.Close()
	}
	d.qlog.Load().stop()
}

// reload applies the config file at path: everything is built and
// validated first (build), then swapped in; a config that does not build
// changes nothing.
func (d *daemon) reload(path string) error {
	base, err := config.Load(path)
	if err != nil {
		return d.rejectReload(err)
	}
	// The servers' greetings are read before the lock is taken: a reload
	// dials nothing while it holds it (greetings).
	addrs := serverAddrs(base)
	if cfg, err := d.withOverlay(base); err == nil {
		addrs = append(addrs, serverAddrs(cfg)...)
	}
	gs := d.readGreetings(d.ctx, addrs)
	// One at a time: SIGHUP, the API and membership changes may ask
	// together.
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cfg, err := d.withOverlay(base)
	if err != nil {
		return d.rejectReload(fmt.Errorf("config %s: %w", path, err))
	}
	return d.applyLocked(base, cfg, "configuration reloaded from "+path, gs)
}

// withOverlay is base with state_dir's overlay applied.
func (d *daemon) withOverlay(base *config.Config) (*config.Config, error) {
	ov, err := readOverlay(base.StateDir)
	if err != nil {
		return nil, err
	}
	return effective(base, ov)
}

func (d *daemon) rejectReload(err error) error {
	d.log.Error("config reload rejected; the running config stays", "err", err)
	d.journal.add(admin.Event{Kind: "config_rejected", Message: err.Error()})
	return err
}

// applyLocked makes cfg (base with the overlay) the running config:
// provision (build every part, new listeners and pools included,
// validated by their owners), then swap, then clean up what the old
// runtime held. Anything that fails before the swap changes nothing. The
// caller holds reloadMu and has read the servers' greetings (gs) before
// it took it.
func (d *daemon) applyLocked(base, cfg *config.Config, what string, gs greetings) error {
	if err := d.reloadable(cfg); err != nil {
		return d.rejectReload(err)
	}
	plan, err := d.build(cfg, gs)
	if err != nil {
		return d.rejectReload(err)
	}
	var aopts admin.Options
	if d.admin != nil {
		var generated string
		if aopts, generated, err = adminOptions(cfg); err != nil {
			plan.discard()
			return d.rejectReload(err)
		}
		if generated != "" {
			d.log.Info("admin API token generated: the previous one no longer works", "file", generated)
		}
	}
	shardLn, err := d.prepareShards(cfg)
	if err != nil {
		plan.discard()
		return d.rejectReload(err)
	}
	// Removed servers drain before the swap, not in the middle of it: the
	// swap then sets values one after another with no wait between them.
	// The drain waits with reloadMu released.
	if err := d.drainUnlocked(plan); err != nil {
		plan.undrain()
		plan.discard()
		closeListener(shardLn)
		return d.rejectReload(err)
	}
	oldLog, err := d.applyQueryLog(d.ctx, cfg.Log)
	if err != nil {
		plan.undrain()
		plan.discard()
		closeListener(shardLn)
		return d.rejectReload(fmt.Errorf("log: %w", err))
	}
	defer oldLog.stop()
	d.applied++
	// Swap.
	users := buildUsers(cfg)
	creds := credentialsFunc(cfg)
	d.cache.SetLimits(int64(cfg.QueryCache.MaxSize), int64(cfg.QueryCache.MaxEntrySize))
	d.guard.SetOptions(guardOptions(cfg.Security))
	d.applyMemory(cfg.Security)
	if d.admin != nil {
		d.admin.SetOptions(aopts)
	}
	var errs []error
	for _, n := range plan.parts {
		if err := d.swapCluster(n, cfg, users, creds); err != nil {
			errs = append(errs, err)
			// The cluster runs its old config: the running config says so.
			i := slices.IndexFunc(cfg.Clusters, func(c config.Cluster) bool { return c.Name == n.cc.Name })
			cfg.Clusters[i] = *n.rt.cfg.Load()
		}
	}
	clusters := map[string]*clusterRuntime{}
	for _, n := range plan.parts {
		clusters[n.cc.Name] = n.rt
	}
	for _, rt := range plan.added {
		d.runCluster(rt)
		clusters[rt.name] = rt
		d.journal.add(admin.Event{Cluster: rt.name, Kind: "cluster_added", Message: fmt.Sprintf("cluster %s added: listening on %s", rt.name, rt.ln.Addr())})
	}
	d.clusters.Store(&clusters)
	d.applyShards(cfg, shardLn)
	for _, rt := range plan.gone {
		// Its sessions end: the cluster is gone from the configuration.
		rt.stop()
		d.journal.add(admin.Event{Cluster: rt.name, Kind: "cluster_removed", Message: "cluster " + rt.name + " removed: its listener and sessions are closed"})
	}
	d.running.Store(cfg)
	d.base = base
	if err := errors.Join(errs...); err != nil {
		d.log.Error("config applied with errors", "err", err)
		d.journal.add(admin.Event{Kind: "config_rejected", Message: "applied except: " + err.Error()})
		return err
	}
	d.log.Info("config applied", "what", what)
	d.journal.add(admin.Event{Kind: "config_reloaded", Message: what})
	return nil
}

// swapCluster swaps a running cluster's new parts in: added servers get
// their pools before the monitor publishes them (they join OFFLINE_SOFT),
// removed ones (drained already: drainRemoved) leave, a new listen
// address starts accepting before the old one stops. The monitor's new
// options go first, the one step that can still fail after the build (a
// failover may have made a removed server the writer since): when it
// does, the cluster keeps everything of its old config but the users,
// which are not the cluster's.
func (d *daemon) swapCluster(n reloadPart, cfg *config.Config, users []frontend.User, creds func(string) (string, string, bool)) error {
	rt := n.rt
	rt.digests.SetMaxEntries(cfg.Digests.MaxEntries)
	rt.fe.SetUsers(users)
	for _, i := range n.added {
		p := backend.NewPool(n.slots[i].Name, n.slots[i].Addr, i, poolOptions(n.cc, creds), rt.log)
		rt.addPool(i, p)
		rt.fe.SetPool(i, p)
		d.startPool(rt, i, p)
	}
	setMon := d.setMonitorOptions
	if setMon == nil {
		setMon = func(rt *clusterRuntime, o monitor.Options) error { return rt.mon.SetOptions(o) }
	}
	if err := setMon(rt, n.mon); err != nil {
		// Nothing of the cluster's new config goes in: the servers it
		// would remove serve again, those it would add are closed (no
		// snapshot has them), and so is a new listener.
		for _, i := range n.removed {
			_ = rt.mon.SetAdminState(n.slots[i].Name, topology.Online, "")
		}
		for _, i := range n.added {
			rt.stopPool(i)
		}
		if n.ln != nil {
			n.ln.Close()
		}
		return fmt.Errorf("cluster %s: servers: %w", n.cc.Name, err)
	}
	for _, i := range n.removed {
		rt.stopPool(i)
	}
	rt.slots = n.slots
	rt.fe.SetProcessing(n.proc)
	rt.fe.SetOptions(n.fe)
	for _, p := range rt.poolList() {
		p.SetOptions(poolOptions(n.cc, creds))
	}
	rt.exec.SetOptions(n.ex)
	if n.ln != nil {
		old := rt.ln
		rt.ln = n.ln
		rt.serve(n.ln)
		rt.fe.RetireListener(old)
		d.journal.add(admin.Event{Cluster: rt.name, Kind: "listen_changed", Message: fmt.Sprintf("cluster %s listens on %s (was %s); open sessions go on", rt.name, n.ln.Addr(), old.Addr())})
	}
	cc := n.cc
	rt.cfg.Store(&cc)
	return nil
}

// errChangedWhileDraining: another change was applied while a reload
// waited for the servers it removes.
var errChangedWhileDraining = errors.New("another configuration change was applied while this one drained the servers it removes: nothing of this one was applied (the servers it would remove serve again); apply it again")

// drainUnlocked drains every server plan removes, in every cluster at
// once (the reload waits for the slowest, not for their sum), with
// reloadMu released: the caller holds it, and holds it again on return.
// Other reloads, membership changes and validations go on meanwhile; when
// one of them applied a config, plan was built against a runtime that is
// no longer there and drainUnlocked fails (the caller undrains and
// discards it). A config that removes nothing keeps the lock throughout.
func (d *daemon) drainUnlocked(plan *reloadPlan) error {
	type job struct {
		rt   *clusterRuntime
		i    int
		name string
		cc   config.Cluster
	}
	var jobs []job
	for _, n := range plan.parts {
		for _, i := range n.removed {
			// Names are read under the lock: a concurrent swap replaces
			// rt.slots.
			jobs = append(jobs, job{n.rt, i, n.rt.slots[i].Name, n.cc})
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	gen := d.applied
	d.reloadMu.Unlock()
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() { d.drain(j.rt, j.i, j.name, j.cc) })
	}
	wg.Wait()
	d.reloadMu.Lock()
	if d.applied != gen {
		return errChangedWhileDraining
	}
	return nil
}

// undrain puts the servers plan would have removed back in service, for a
// reload that stops after its drains.
func (p *reloadPlan) undrain() {
	for _, n := range p.parts {
		for _, i := range n.removed {
			_ = n.rt.mon.SetAdminState(n.slots[i].Name, topology.Online, "")
		}
	}
}

// drainPoll is how often drain looks for the sessions still there.
const drainPoll = 20 * time.Millisecond

// drain takes server slot i out of routing before it is removed: no new
// statements (OFFLINE_SOFT), then up to drain_timeout for the sessions
// that hold a connection there (transactions) to finish; those still
// there after it, or when the daemon stops, lose it.
func (d *daemon) drain(rt *clusterRuntime, i int, name string, cc config.Cluster) {
	_ = rt.mon.SetAdminState(name, topology.OfflineSoft, "being removed from the configuration")
	bound := cc.Failover.DrainTimeout.Duration
	if bound <= 0 {
		bound = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(d.ctx, bound)
	defer cancel()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
drained:
	for rt.fe.BoundSessions(i) > 0 || rt.fe.Balancer().Outstanding(i) > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			break drained
		}
	}
	if n := rt.fe.KillBound(i); n > 0 {
		d.log.Warn("removed server still had sessions after the drain; their connections were closed", "cluster", rt.name, "server", name, "sessions", n, "drain", bound)
	}
}

// reloadPart is one running cluster's runtime as a new config builds it.
type reloadPart struct {
	rt    *clusterRuntime
	cc    config.Cluster
	slots []slot
	// added and removed are server slots the new config adds or removes.
	added, removed []int
	proc           frontend.Processing
	fe             frontend.Options
	mon            monitor.Options
	ex             executor.Options
	ln             net.Listener // a new listen address, nil when unchanged
}

// reloadPlan is everything a new config builds before the swap.
type reloadPlan struct {
	parts []reloadPart
	added []*clusterRuntime // new clusters, built, not running
	gone  []*clusterRuntime // clusters the config no longer has
}

// discard releases what a plan built when it is not swapped in.
func (p *reloadPlan) discard() {
	for _, n := range p.parts {
		if n.ln != nil {
			n.ln.Close()
		}
	}
	for _, rt := range p.added {
		rt.stop()
	}
}

// build makes every cluster's runtime parts from cfg and validates them
// the way the running components would, changing nothing: a reload swaps
// them in, `config validate` (API) stops here. New clusters are built
// whole (their listeners open) but not run. What clients are shown of the
// servers comes from gs: build dials nothing.
func (d *daemon) build(cfg *config.Config, gs greetings) (*reloadPlan, error) {
	plan := &reloadPlan{}
	fail := func(err error) (*reloadPlan, error) {
		plan.discard()
		return nil, err
	}
	running := d.clusterMap()
	for i, cc := range cfg.Clusters {
		key := fmt.Sprintf("clusters[%d]", i)
		rt := running[cc.Name]
		if rt == nil {
			nrt, err := d.newCluster(d.ctx, cfg, cc, gs)
			if err != nil {
				return fail(fmt.Errorf("%s (new cluster %s): %w", key, cc.Name, err))
			}
			plan.added = append(plan.added, nrt)
			continue
		}
		slots, added, removed, err := planSlots(rt.slots, cc.Servers)
		if err != nil {
			return fail(fmt.Errorf("%s.servers: %w", key, err))
		}
		for _, j := range removed {
			if w := rt.topo.Load().WriterServer(); w != nil && w.Name == rt.slots[j].Name || rt.isPrimary(j) {
				return fail(fmt.Errorf("%s.servers: %s is the writer: switch over to another server before removing, renaming or moving it", key, rt.slots[j].Name))
			}
		}
		proc, err := d.processing(cfg, cc, slots, rt.digests, rt.fe.ProcessingNow().Rules)
		if err != nil {
			return fail(fmt.Errorf("%s.rules: %w", key, err))
		}
		feOpts, err := frontendOptions(cc, d.rsaKey)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", key, err))
		}
		gs.show(cc, &feOpts)
		monOpts := monitorOptions(cc, slots, rt.activity)
		if err := monOpts.Validate(); err != nil {
			return fail(fmt.Errorf("%s.monitor: %w", key, err))
		}
		exOpts := executorOptions(cfg, cc, slots)
		if err := exOpts.Engine.Validate(liveNames(slots)); err != nil {
			return fail(fmt.Errorf("%s.failover: %w", key, err))
		}
		part := reloadPart{rt: rt, cc: cc, slots: slots, added: added, removed: removed, proc: proc, fe: feOpts, mon: monOpts, ex: exOpts}
		if cur := rt.cfg.Load(); cc.Listen != cur.Listen {
			ln, err := net.Listen("tcp", cc.Listen)
			if err != nil {
				return fail(fmt.Errorf("%s.listen: %w (is another Vigil or server using the port?)", key, err))
			}
			part.ln = ln
		}
		plan.parts = append(plan.parts, part)
	}
	for name, rt := range running {
		if !slices.ContainsFunc(cfg.Clusters, func(c config.Cluster) bool { return c.Name == name }) {
			plan.gone = append(plan.gone, rt)
		}
	}
	return plan, nil
}

// reloadable checks that a new config changes only what a running daemon
// can change: a cluster's type and the state directory need a restart.
func (d *daemon) reloadable(cfg *config.Config) error {
	running := d.clusterMap()
	for i, cc := range cfg.Clusters {
		rt := running[cc.Name]
		if rt == nil {
			continue
		}
		if cur := rt.cfg.Load(); cc.Type != cur.Type {
			return fmt.Errorf("clusters[%d].type: changing the cluster type needs a restart (or remove the cluster and add it under another name)", i)
		}
	}
	if cur := d.running.Load(); cur != nil {
		switch {
		case cfg.StateDir != cur.StateDir:
			return errors.New("state_dir: changing the state directory needs a restart")
		case cfg.Admin.Listen != cur.Admin.Listen:
			return errors.New("admin.listen: changing the admin address needs a restart")
		case (cfg.Admin.TLS == nil) != (cur.Admin.TLS == nil):
			return errors.New("admin.tls: turning HTTPS on or off needs a restart (a new certificate does not)")
		}
		if err := coordinationReloadable(cur.Coordination, cfg.Coordination); err != nil {
			return err
		}
	}
	return nil
}

func guardOptions(s config.Security) frontend.GuardOptions {
	f := s.FailedLogins
	return frontend.GuardOptions{
		HandshakeTimeout: s.HandshakeTimeout.Duration, MaxUnauthenticated: s.MaxUnauthenticated, MaxPerHost: s.MaxUnauthenticatedPerHost,
		Free: f.Free, FreePerHost: f.FreePerHost, Delay: f.Delay.Duration, MaxDelay: f.MaxDelay.Duration, Window: f.Window.Duration,
		BlockAfter: f.BlockAfter, BlockFor: f.BlockFor.Duration,
	}
}

func buildUsers(cfg *config.Config) []frontend.User {
	var out []frontend.User
	for _, u := range cfg.Users {
		fu := frontend.User{Name: u.Name, SessionWindow: u.SessionWindow.Duration, Multiplexing: u.Multiplexing == nil || *u.Multiplexing}
		if len(u.Password) == 41 && u.Password[0] == '*' {
			h, _ := mysql.DecodePasswordHex(u.Password)
			fu.Cred.NativeHash = h
		} else {
			fu.Cred.Plain = u.Password
		}
		fu.Cred.RequireTLS = u.RequireTLS
		fu.RYW = u.ReadYourWrites
		out = append(out, fu)
	}
	return out
}

func credentialsFunc(cfg *config.Config) func(string) (string, string, bool) {
	m := map[string][2]string{}
	for _, u := range cfg.Users {
		bu, bp := u.BackendUser, u.BackendPassword
		if bu == "" {
			bu = u.Name
		}
		if bp == "" {
			bp = u.Password
		}
		m[u.Name] = [2]string{bu, bp}
	}
	return func(user string) (string, string, bool) {
		c, ok := m[user]
		return c[0], c[1], ok
	}
}

func poolOptions(cc config.Cluster, creds func(string) (string, string, bool)) backend.Options {
	return backend.Options{
		MinIdle: cc.Pool.MinIdle, MaxOpen: cc.Pool.MaxOpen, IdleTimeout: cc.Pool.IdleTimeout.Duration,
		MaxLifetime: cc.Pool.MaxLifetime.Duration, ValidateIdle: cc.Pool.ValidateIdle.Duration, Credentials: creds,
	}
}

func frontendOptions(cc config.Cluster, rsaKey *rsa.PrivateKey) (frontend.Options, error) {
	o := frontend.Options{
		Cluster: cc.Name, ServerVersion: cc.ServerVersion, AuthPlugin: cc.AuthPlugin, ConnectTimeout: cc.ConnectTimeout.Duration,
		GTIDWaitTimeout: cc.Routing.GTIDWaitTimeout.Duration, ReadsOnPrimary: cc.Routing.ReadsOnPrimary, RSAKey: rsaKey,
	}
	if cc.TLS != nil {
		cert, err := tls.LoadX509KeyPair(cc.TLS.Cert, cc.TLS.Key)
		if err != nil {
			return o, fmt.Errorf("tls: %w", err)
		}
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return o, nil
}

// monitorOptions are a cluster's monitor options, its servers by slot;
// activity is the frontend's passive evidence (monitor.Options.Activity).
func monitorOptions(cc config.Cluster, slots []slot, activity func(int) (uint64, int64)) monitor.Options {
	o := monitor.Options{
		Cluster: cc.Name, Type: cc.Type, User: cc.Monitor.User, Password: cc.Monitor.Password,
		Interval: cc.Monitor.Interval.Duration, Timeout: cc.Monitor.Timeout.Duration,
		FailAfter: cc.Monitor.FailAfter, RecoverAfter: cc.Monitor.RecoverAfter,
		MaxReplicationLag: cc.Monitor.MaxReplicationLag.Duration, Activity: activity,
		LoneWriterGrace: cc.Monitor.LoneWriterGrace.Duration,
	}
	for _, sl := range slots {
		s, _ := serverConfig(cc, sl)
		o.Servers = append(o.Servers, monitor.Server{Name: sl.Name, Addr: sl.Addr, Role: s.Role, Weight: s.Weight, Removed: sl.Removed, Standby: s.Standby})
	}
	return o
}

func executorOptions(cfg *config.Config, cc config.Cluster, slots []slot) executor.Options {
	o := executor.Options{
		Cluster: cc.Name, User: cc.Monitor.User, Password: cc.Monitor.Password,
		ReplUser: cc.Failover.ReplUser, ReplPass: cc.Failover.ReplPassword, StateDir: cfg.StateDir,
		Interval:    cc.Monitor.Interval.Duration,
		PreFailover: cc.Failover.PreFailover, PostFailover: cc.Failover.PostFailover, PostSwitchover: cc.Failover.PostSwitchover,
		Engine: failover.Options{
			Auto: cc.Failover.Auto, AutoRejoin: cc.Type == "replication" && cc.Failover.AutoRejoinOn(), DetectAfter: cc.Failover.DetectAfter.Duration,
			DetectAfterRefused: cc.Failover.DetectAfterRefused.Duration,
			DetectAfterSilent:  cc.Failover.DetectAfterSilent.Duration,
			MinInterval:        cc.Failover.MinInterval.Duration,
			ApplyTimeout:       cc.Failover.ApplyTimeout.Duration, Candidates: cc.Failover.Candidates, NeverPromote: cc.Failover.NeverPromote,
			HoldTimeout: cc.Failover.HoldTimeout.Duration, DrainTimeout: cc.Failover.DrainTimeout.Duration,
			MaxRunningSeconds: cc.Failover.MaxRunningSeconds, FenceCommand: cc.Failover.FenceCommand,
			SemiSync: failover.SemiSyncPolicy{Manage: cc.Failover.SemiSync.Manage,
				AsyncWithoutReplica: cc.Failover.SemiSync.AsyncWithoutReplica, Timeout: cc.Failover.SemiSync.Timeout.Duration},
		},
	}
	for _, s := range slots {
		o.Servers = append(o.Servers, executor.Server{Name: s.Name, Addr: s.Addr, Removed: s.Removed})
	}
	creds := credentialsFunc(cfg)
	for _, u := range cfg.Users {
		if bu, bp, ok := creds(u.Name); ok && !strings.HasPrefix(bp, "*") {
			o.AppAccounts = append(o.AppAccounts, executor.Account{User: bu, Password: bp})
		}
	}
	return o
}

// raiseOpenFiles lifts the soft open-file limit to the hard one: every
// client and server connection is a descriptor.
func raiseOpenFiles(log *slog.Logger) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			log.Warn("could not raise the open-file limit", "err", err)
		}
	}
	if r.Cur < 4096 {
		log.Warn("open-file limit is low; each client and server connection needs one", "limit", r.Cur)
	}
}
