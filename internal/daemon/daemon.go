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
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/executor"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/frontend"
	"github.com/vigil-db/vigil/internal/monitor"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/qcache"
	"github.com/vigil-db/vigil/internal/qstats"
	"github.com/vigil-db/vigil/internal/router"
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
	log      *slog.Logger
	cfgPath  string
	journal  journal
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	clusters map[string]*clusterRuntime

	ctx     context.Context // lives as long as the daemon
	running atomic.Pointer[config.Config]
	qlog    atomic.Pointer[queryLog]
	cache   *qcache.Cache
	// rsaKey serves caching_sha2_password over plain TCP; a reload keeps
	// it.
	rsaKey   *rsa.PrivateKey
	reloadMu sync.Mutex // one reload at a time
}

type clusterRuntime struct {
	cfg   config.Cluster
	topo  *topology.Holder
	pools []*backend.Pool
	fe    *frontend.Server
	ln    net.Listener
	mon   *monitor.Monitor
	exec  *executor.Executor

	digests *qstats.Store
}

// activity is the frontend's passive evidence for the monitor: client
// statements server i completed, and those waiting for it. The monitor is
// built before the frontend but runs only after it exists.
func (rt *clusterRuntime) activity(i int) (uint64, int64) { return rt.fe.Activity(i) }

func (d *daemon) start(parent context.Context, cfg *config.Config) error {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	d.rsaKey = rsaKey
	ctx, cancel := context.WithCancel(parent)
	d.cancel = cancel
	d.ctx = ctx
	d.running.Store(cfg)
	d.clusters = map[string]*clusterRuntime{}
	d.cache = newCache(cfg)
	ql, err := d.startQueryLog(ctx, cfg.Log)
	if err != nil {
		return err
	}
	d.qlog.Store(ql)
	users := buildUsers(cfg)
	for _, cc := range cfg.Clusters {
		rt := &clusterRuntime{cfg: cc, topo: &topology.Holder{}}
		creds := credentialsFunc(cfg)
		for i, s := range cc.Servers {
			rt.pools = append(rt.pools, backend.NewPool(s.Name, s.Address, i, poolOptions(cc, creds), d.log.With("cluster", cc.Name)))
		}
		mon, err := monitor.New(monitorOptions(cc, rt.activity), rt.topo, d.log.With("cluster", cc.Name))
		if err != nil {
			return fmt.Errorf("cluster %s: monitor: %w", cc.Name, err)
		}
		rt.mon = mon
		opts, err := frontendOptions(cc, rsaKey)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cc.Name, err)
		}
		version, mariadbCaps, collation := discoverServers(ctx, cc)
		if opts.ServerVersion == "" {
			opts.ServerVersion = version
		}
		opts.MariaDBCaps, opts.Collation = mariadbCaps, collation
		rt.fe = frontend.New(opts, users, rt.topo, rt.pools, d.log.With("cluster", cc.Name))
		rt.fe.OnServerLost(mon.CheckNow)
		rt.digests = qstats.New(cfg.Digests.MaxEntries)
		proc, err := d.processing(cfg, cc, rt.digests, nil)
		if err != nil {
			return fmt.Errorf("cluster %s: rules: %w", cc.Name, err)
		}
		rt.fe.SetProcessing(proc)
		ln, err := net.Listen("tcp", cc.Listen)
		if err != nil {
			return fmt.Errorf("cluster %s: listen on %s: %w (is another Vigil or server using the port?)", cc.Name, cc.Listen, err)
		}
		rt.ln = ln
		d.clusters[cc.Name] = rt
		ex, err := executor.New(executorOptions(cfg, cc), mon, rt.fe, d.log.With("cluster", cc.Name), func(ev executor.Event) {
			d.journal.add(admin.Event{Time: ev.Time, Cluster: ev.Cluster, Server: ev.Server, Kind: ev.Kind, Message: ev.Message})
		})
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cc.Name, err)
		}
		rt.exec = ex
		evs, unsub := mon.Subscribe(256)
		d.wg.Add(3)
		go func() { defer d.wg.Done(); _ = mon.Run(ctx) }()
		go func() { defer d.wg.Done(); _ = ex.Run(ctx) }()
		go func() {
			defer d.wg.Done()
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
					ex.Kick()
				}
			}
		}()
		for _, p := range rt.pools {
			d.wg.Add(1)
			go func() { defer d.wg.Done(); p.Maintain(ctx) }()
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := rt.fe.Serve(ctx, ln); err != nil {
				d.log.Error("listener stopped", "cluster", cc.Name, "err", err)
			}
		}()
		d.log.Info("cluster listening", "cluster", cc.Name, "listen", ln.Addr().String(), "servers", len(cc.Servers), "server_version", opts.ServerVersion,
			"mariadb_extended_capabilities", fmt.Sprintf("%#x", opts.MariaDBCaps))
	}
	if cfg.Admin.AdminEnabled() {
		aopts := admin.Options{Listen: cfg.Admin.Listen, Token: cfg.Admin.Token, User: cfg.Admin.User, Password: cfg.Admin.Password}
		if t := cfg.Admin.TLS; t != nil {
			cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
			if err != nil {
				return fmt.Errorf("admin: tls: %w", err)
			}
			aopts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		srv := admin.New(aopts, d, newRegistry(d), d.log)
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
	d.wg.Wait()
	for _, rt := range d.clusters {
		for _, p := range rt.pools {
			p.Close()
		}
	}
	d.qlog.Load().stop()
}

// reload applies a new config: users and timeouts change at once; a
// config that does not validate is rejected and the running one stays.
func (d *daemon) reload(path string) error {
	// One reload at a time: SIGHUP and the API may ask together.
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	reject := func(err error) error {
		d.log.Error("config reload rejected; the running config stays", "err", err)
		d.journal.add(admin.Event{Kind: "config_rejected", Message: err.Error()})
		return err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return reject(err)
	}
	if err := d.reloadable(cfg); err != nil {
		return reject(fmt.Errorf("config %s: %w", path, err))
	}
	// Build everything first: a part that cannot be built (rules that do
	// not compile, TLS files that do not load, options a component
	// rejects) rejects the whole reload, and nothing has changed yet.
	plan, err := d.build(cfg)
	if err != nil {
		return reject(fmt.Errorf("config %s: %w", path, err))
	}
	oldLog, err := d.applyQueryLog(d.ctx, cfg.Log)
	if err != nil {
		return reject(fmt.Errorf("config %s: log: %w", path, err))
	}
	defer oldLog.stop()
	// Swap.
	users := buildUsers(cfg)
	creds := credentialsFunc(cfg)
	d.cache.SetLimits(int64(cfg.QueryCache.MaxSize), int64(cfg.QueryCache.MaxEntrySize))
	for _, n := range plan {
		rt := n.rt
		rt.digests.SetMaxEntries(cfg.Digests.MaxEntries)
		rt.fe.SetProcessing(n.proc)
		rt.fe.SetUsers(users)
		version, mariadbCaps, collation := discoverServers(context.Background(), n.cc)
		n.fe.ServerVersion = n.cc.ServerVersion
		if n.fe.ServerVersion == "" {
			n.fe.ServerVersion = version
		}
		n.fe.MariaDBCaps, n.fe.Collation = mariadbCaps, collation
		rt.fe.SetOptions(n.fe)
		for _, p := range rt.pools {
			p.SetOptions(poolOptions(n.cc, creds))
		}
		if err := rt.mon.SetOptions(n.mon); err != nil {
			// Validated above: only a server list change fails here, and
			// reloadable refused that.
			d.log.Error("config reload: monitor options not applied", "cluster", n.cc.Name, "err", err)
		}
		rt.exec.SetOptions(n.ex)
	}
	d.running.Store(cfg)
	d.log.Info("config reloaded", "config", path)
	d.journal.add(admin.Event{Kind: "config_reloaded", Message: "configuration reloaded from " + path})
	return nil
}

// reloadPart is one cluster's runtime as a new config builds it.
type reloadPart struct {
	rt   *clusterRuntime
	cc   config.Cluster
	proc frontend.Processing
	fe   frontend.Options
	mon  monitor.Options
	ex   executor.Options
}

// build makes every cluster's runtime parts from cfg and validates them
// the way the running components would, changing nothing: a reload swaps
// them in, `config validate` (API) stops here.
func (d *daemon) build(cfg *config.Config) ([]reloadPart, error) {
	var plan []reloadPart
	for i, cc := range cfg.Clusters {
		rt := d.clusters[cc.Name]
		key := fmt.Sprintf("clusters[%d]", i)
		proc, err := d.processing(cfg, cc, rt.digests, rt.fe.ProcessingNow().Rules)
		if err != nil {
			return nil, fmt.Errorf("%s.rules: %w", key, err)
		}
		feOpts, err := frontendOptions(cc, d.rsaKey)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		monOpts := monitorOptions(cc, rt.activity)
		if err := monOpts.Validate(); err != nil {
			return nil, fmt.Errorf("%s.monitor: %w", key, err)
		}
		exOpts := executorOptions(cfg, cc)
		var names []string
		for _, s := range cc.Servers {
			names = append(names, s.Name)
		}
		if err := exOpts.Engine.Validate(names); err != nil {
			return nil, fmt.Errorf("%s.failover: %w", key, err)
		}
		plan = append(plan, reloadPart{rt: rt, cc: cc, proc: proc, fe: feOpts, mon: monOpts, ex: exOpts})
	}
	return plan, nil
}

// reloadable checks that a new config changes only what a running daemon
// can change: clusters, their listen addresses and their server lists
// (names and addresses, in order) need a restart.
func (d *daemon) reloadable(cfg *config.Config) error {
	seen := map[string]bool{}
	for i, cc := range cfg.Clusters {
		seen[cc.Name] = true
		rt := d.clusters[cc.Name]
		if rt == nil {
			return fmt.Errorf("clusters[%d]: cluster %q is new: adding a cluster needs a restart", i, cc.Name)
		}
		if cc.Listen != rt.cfg.Listen {
			return fmt.Errorf("clusters[%d].listen: changing the listen address needs a restart", i)
		}
		if cc.Type != rt.cfg.Type {
			return fmt.Errorf("clusters[%d].type: changing the cluster type needs a restart", i)
		}
		if len(cc.Servers) != len(rt.cfg.Servers) {
			return fmt.Errorf("clusters[%d].servers: adding or removing servers needs a restart (weights and roles may change)", i)
		}
		for j, s := range cc.Servers {
			old := rt.cfg.Servers[j]
			if s.Name != old.Name || s.Address != old.Address {
				return fmt.Errorf("clusters[%d].servers[%d]: renaming, moving or reordering servers needs a restart (weights and roles may change)", i, j)
			}
		}
	}
	for name := range d.clusters {
		if !seen[name] {
			return fmt.Errorf("clusters: cluster %q is gone: removing a cluster needs a restart", name)
		}
	}
	return nil
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
		switch u.ReadYourWrites {
		case "none":
			fu.RYW = router.RYWNone
		case "session":
			fu.RYW = router.RYWSession
		case "global":
			fu.RYW = router.RYWGlobal
		default:
			fu.RYW = router.RYWGTID
		}
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

// monitorOptions are a cluster's monitor options; activity is the
// frontend's passive evidence (monitor.Options.Activity).
func monitorOptions(cc config.Cluster, activity func(int) (uint64, int64)) monitor.Options {
	o := monitor.Options{
		Cluster: cc.Name, Type: cc.Type, User: cc.Monitor.User, Password: cc.Monitor.Password,
		Interval: cc.Monitor.Interval.Duration, Timeout: cc.Monitor.Timeout.Duration,
		FailAfter: cc.Monitor.FailAfter, RecoverAfter: cc.Monitor.RecoverAfter,
		MaxReplicationLag: cc.Monitor.MaxReplicationLag.Duration, Activity: activity,
		LoneWriterGrace: cc.Monitor.LoneWriterGrace.Duration,
	}
	for _, s := range cc.Servers {
		o.Servers = append(o.Servers, monitor.Server{Name: s.Name, Addr: s.Address, Role: s.Role, Weight: s.Weight})
	}
	return o
}

func executorOptions(cfg *config.Config, cc config.Cluster) executor.Options {
	o := executor.Options{
		Cluster: cc.Name, User: cc.Monitor.User, Password: cc.Monitor.Password,
		ReplUser: cc.Failover.ReplUser, ReplPass: cc.Failover.ReplPassword, StateDir: cfg.StateDir,
		Interval:    cc.Monitor.Interval.Duration,
		PreFailover: cc.Failover.PreFailover, PostFailover: cc.Failover.PostFailover, PostSwitchover: cc.Failover.PostSwitchover,
		Engine: failover.Options{
			Auto: cc.Failover.Auto, DetectAfter: cc.Failover.DetectAfter.Duration, MinInterval: cc.Failover.MinInterval.Duration,
			ApplyTimeout: cc.Failover.ApplyTimeout.Duration, Candidates: cc.Failover.Candidates, NeverPromote: cc.Failover.NeverPromote,
			HoldTimeout: cc.Failover.HoldTimeout.Duration, DrainTimeout: cc.Failover.DrainTimeout.Duration,
			MaxRunningSeconds: cc.Failover.MaxRunningSeconds, FenceCommand: cc.Failover.FenceCommand,
			SemiSync: failover.SemiSyncPolicy{Manage: cc.Failover.SemiSync.Manage,
				AsyncWithoutReplica: cc.Failover.SemiSync.AsyncWithoutReplica, Timeout: cc.Failover.SemiSync.Timeout.Duration},
		},
	}
	for _, s := range cc.Servers {
		o.Servers = append(o.Servers, executor.Server{Name: s.Name, Addr: s.Address})
	}
	creds := credentialsFunc(cfg)
	for _, u := range cfg.Users {
		if bu, bp, ok := creds(u.Name); ok && !strings.HasPrefix(bp, "*") {
			o.AppAccounts = append(o.AppAccounts, executor.Account{User: bu, Password: bp})
		}
	}
	return o
}

// discoverServers reads every server's greeting (it needs no login), in
// parallel: the version clients are shown is the first answering server's
// (in configuration order), and the MariaDB extended capabilities Vigil
// offers clients are those that every answering server offers, within
// what Vigil supports (mysqlproto.MariaDBCapabilities); none when a server
// is MySQL (CLIENT_MYSQL set) or no server answers. A server that is down
// now cannot veto: if it later comes back without them, connections to it
// for clients that negotiated them are refused with an error that says so
// (mysqlproto.Dial), never opened in another shape.
func discoverServers(ctx context.Context, cc config.Cluster) (version string, mariadbCaps uint32, collation byte) {
	greetings := make([]*mysqlproto.Greeting, len(cc.Servers))
	var wg sync.WaitGroup
	for i, s := range cc.Servers {
		wg.Go(func() { greetings[i] = readGreeting(ctx, s.Address) })
	}
	wg.Wait()
	mariadbCaps = mysqlproto.MariaDBCapabilities
	answered := false
	for _, g := range greetings {
		if g == nil {
			continue
		}
		if !answered {
			version = g.ServerVersion + "-vigil"
			collation = g.Collation
		}
		answered = true
		if g.Capabilities&mysqlproto.CapabilityClientLongPassword != 0 {
			mariadbCaps = 0 // MySQL, or a MariaDB older than 10.2
		}
		mariadbCaps &= g.MariaDBCaps
	}
	if !answered {
		return "5.5.5-10.11.0-MariaDB-vigil", 0, 0
	}
	return version, mariadbCaps, collation
}

// readGreeting returns a server's greeting, or nil.
func readGreeting(ctx context.Context, addr string) *mysqlproto.Greeting {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var dl net.Dialer
	nc, err := dl.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
	p, err := mysqlproto.NewConn(nc).ReadPacket()
	if err != nil {
		return nil
	}
	g, err := mysqlproto.ParseGreeting(p)
	if err != nil {
		return nil
	}
	return g
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
