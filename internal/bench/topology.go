package bench

// `vigil-bench topology`: what each durability and HA choice costs. It
// runs sysbench against a standalone server under four durability
// settings, async and semi-sync (AFTER_SYNC) replication and a 3-node
// Galera cluster under several wsrep_slave_threads × gcs.fc_limit, each
// direct and through a Vigil in front, and records next to throughput and
// latency what the servers did (fsyncs, group commits, semi-sync
// fallbacks, replica lag, flow control), so the report can say what a
// failover would lose with each choice. The sandboxes it creates are
// started one at a time; --sandbox and --config measure servers that
// already run, read-only unless --vary-durability.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// The topologies of the matrix, in the order they run.
const (
	TopoStandalone = "standalone"
	TopoAsync      = "async"
	TopoSemiSync   = "semisync"
	TopoGalera     = "galera"
)

// The paths a run takes to the servers.
const (
	PathDirect = "direct"
	PathVigil  = "vigil"
)

// TopologyOptions describe one `vigil-bench topology`.
type TopologyOptions struct {
	// Topologies to measure on sandboxes of its own (default all four).
	Topologies []string
	Workloads  []string
	Threads    []int
	Paths      []string
	// Duration of one measured run and of the warm-up before the first
	// thread count of every variant and workload (whole seconds).
	Duration, Warmup time.Duration
	Quick            bool
	// OutDir is the directory the results go to (default
	// bench/out/topology-<timestamp>).
	OutDir string
	// SandboxDir measures a running sandbox instead of creating them.
	SandboxDir string
	// ConfigPath and Cluster measure the servers of a Vigil config;
	// VigilAddr is a Vigil in front of them for the vigil path.
	ConfigPath, Cluster, VigilAddr string
	// VaryDurability sets the durability variants on servers that are
	// not the bench's own (restored at the end).
	VaryDurability bool
	Keep           bool
	// Tables and TableSize of the sysbench data (default 4 × 10000).
	Tables, TableSize int
	VigilBin          string
	VigilVersion      string
	Progress          io.Writer
	Logger            *slog.Logger
}

// setting is one global variable and the value a variant gives it.
type setting struct{ Name, Value string }

// topoVariant is one configuration of a topology the workloads run on.
type topoVariant struct {
	Topology string
	// Name says the settings in short (trx_commit=1+sync_binlog=1).
	Name string
	// All are set on every node, Primary only on the primary.
	All, Primary []setting
	// SlaveThreads and FCLimit of a Galera variant (0 otherwise).
	SlaveThreads, FCLimit int
	// Current marks the one variant of servers measured as they are.
	Current bool
}

// durabilityVariants are the standalone steps, fastest first.
func durabilityVariants(quick bool) []topoVariant {
	mk := func(name, trx, sync string) topoVariant {
		return topoVariant{Topology: TopoStandalone, Name: name, All: []setting{
			{"innodb_flush_log_at_trx_commit", trx}, {"sync_binlog", sync}}}
	}
	all := []topoVariant{
		mk("off", "0", "0"),
		mk("trx_commit=1", "1", "0"),
		mk("trx_commit=1+sync_binlog=1", "1", "1"),
		mk("sync_binlog=1000", "1", "1000"),
	}
	if quick {
		return []topoVariant{all[0], all[2]}
	}
	return all
}

// durable are the settings of the replicated topologies.
func durable() []setting {
	return []setting{{"innodb_flush_log_at_trx_commit", "1"}, {"sync_binlog", "1"}}
}

// semiSyncTimeoutMs is rpl_semi_sync_master_timeout on the bench's own
// semi-sync primary: MariaDB's default, so the fallback the report
// measures is the one a default installation has.
const semiSyncTimeoutMs = 10000

func asyncVariant() topoVariant {
	return topoVariant{Topology: TopoAsync, Name: "trx_commit=1+sync_binlog=1", All: durable(),
		Primary: []setting{{"rpl_semi_sync_master_enabled", "OFF"}}}
}

func semiSyncVariant() topoVariant {
	return topoVariant{Topology: TopoSemiSync, Name: "AFTER_SYNC, trx_commit=1+sync_binlog=1", All: durable(),
		Primary: []setting{
			{"rpl_semi_sync_master_wait_point", "AFTER_SYNC"},
			{"rpl_semi_sync_master_timeout", fmt.Sprint(semiSyncTimeoutMs)},
			{"rpl_semi_sync_master_enabled", "ON"},
		}}
}

// galeraVariants are wsrep_slave_threads × gcs.fc_limit.
func galeraVariants(quick bool) []topoVariant {
	threads, limits := []int{1, 4, 16}, []int{16, 512}
	if quick {
		threads = []int{1}
	}
	var out []topoVariant
	for _, t := range threads {
		for _, l := range limits {
			out = append(out, galeraVariant(t, l))
		}
	}
	return out
}

func galeraVariant(slaveThreads, fcLimit int) topoVariant {
	return topoVariant{Topology: TopoGalera, Name: fmt.Sprintf("slave_threads=%d,fc_limit=%d", slaveThreads, fcLimit),
		All: []setting{
			{"innodb_flush_log_at_trx_commit", "1"},
			{"wsrep_slave_threads", fmt.Sprint(slaveThreads)},
			{"wsrep_provider_options", fmt.Sprintf("gcs.fc_limit=%d", fcLimit)},
		},
		SlaveThreads: slaveThreads, FCLimit: fcLimit}
}

// topoSandbox is one sandbox of the matrix and the variants run on it.
type topoSandbox struct {
	Topology sandbox.Topology
	Nodes    int
	Variants []topoVariant
}

// topologyPlan is the sandboxes to create for the asked topologies:
// async and semi-sync share one replication sandbox (semi-sync is
// switched on by SET GLOBAL after the async runs).
func topologyPlan(topologies []string, quick bool) []topoSandbox {
	want := map[string]bool{}
	for _, t := range topologies {
		want[t] = true
	}
	var out []topoSandbox
	if want[TopoStandalone] {
		out = append(out, topoSandbox{Topology: sandbox.Standalone, Nodes: 1, Variants: durabilityVariants(quick)})
	}
	var repl []topoVariant
	if want[TopoAsync] {
		repl = append(repl, asyncVariant())
	}
	if want[TopoSemiSync] {
		repl = append(repl, semiSyncVariant())
	}
	if len(repl) > 0 {
		out = append(out, topoSandbox{Topology: sandbox.Replication, Nodes: 3, Variants: repl})
	}
	if want[TopoGalera] {
		out = append(out, topoSandbox{Topology: sandbox.Galera, Nodes: 3, Variants: galeraVariants(quick)})
	}
	return out
}

// Seconds a sandbox takes to come up with its tables, and the overhead of
// one run (status, lag, catch-up), measured on the 2-core machine.
var sandboxSetup = map[sandbox.Topology]time.Duration{
	sandbox.Standalone:  15 * time.Second,
	sandbox.Replication: 25 * time.Second,
	sandbox.Galera:      45 * time.Second,
}

const runOverhead = 1500 * time.Millisecond

// topologyEstimate is how long the plan takes on an idle machine.
func topologyEstimate(plan []topoSandbox, o TopologyOptions) time.Duration {
	var d time.Duration
	for _, sb := range plan {
		d += sandboxSetup[sb.Topology]
		per := len(sb.Variants) * len(o.Workloads)
		d += time.Duration(per) * (o.Warmup + time.Second)
		d += time.Duration(per*len(o.Threads)*len(o.Paths)) * (o.Duration + runOverhead)
	}
	return d
}

// topoEnv is one measured set of servers: the bench env that owns the
// connections, the Vigil and (for sandboxes) the sandbox, and what the
// runs need besides.
type topoEnv struct {
	*env
	kind string // standalone, replication or galera
	// own: the bench created the servers and may set anything.
	own bool
	// mayVary: the variants may SET GLOBAL (own, or --vary-durability).
	mayVary bool
	direct  SysbenchConn
	vigil   *SysbenchConn
	// flushStatus: FLUSH STATUS on Galera nodes before a run is allowed.
	flushStatus bool
	// saved are the original globals of servers not the bench's own, per
	// node, and savedOrder the order they were changed in.
	saved      map[string]map[string]string
	savedOrder [][2]string
	// durability is innodb_flush_log_at_trx_commit and sync_binlog on
	// the primary under the current variant.
	trxCommit, syncBinlog string
	// setDBs, when set, are the handles SET GLOBAL goes through (the
	// app account of --config servers; rootDBs are the monitor's).
	setDBs map[string]*sql.DB
	// semiTimeoutMs is rpl_semi_sync_master_timeout on the primary.
	semiTimeoutMs int
}

// topologyRunner holds the results of the whole command.
type topologyRunner struct {
	o       TopologyOptions
	res     *TopologyResults
	started time.Time
	out     string
	seq     int
	total   int
}

func (r *topologyRunner) progress(format string, args ...any) {
	progressf(r.o.Progress, r.started, format, args...)
}

func (r *topologyRunner) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.res.Notes = append(r.res.Notes, msg)
	r.progress("note: %s", msg)
}

func (o *TopologyOptions) setDefaults() {
	if len(o.Topologies) == 0 {
		o.Topologies = []string{TopoStandalone, TopoAsync, TopoSemiSync, TopoGalera}
	}
	if len(o.Workloads) == 0 {
		o.Workloads = []string{"oltp_read_write", "oltp_insert"}
	}
	if len(o.Threads) == 0 {
		o.Threads = []int{1, 8, 32, 64}
	}
	if len(o.Paths) == 0 {
		o.Paths = []string{PathDirect, PathVigil}
	}
	o.Duration = cmp.Or(o.Duration, 5*time.Second)
	o.Tables = cmp.Or(max(o.Tables, 0), 4)
	o.TableSize = cmp.Or(max(o.TableSize, 0), 10000)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// validate checks the options that flags alone do not.
func (o *TopologyOptions) validate() error {
	known := map[string]bool{TopoStandalone: true, TopoAsync: true, TopoSemiSync: true, TopoGalera: true}
	for _, t := range o.Topologies {
		if !known[t] {
			return fmt.Errorf("unknown topology %q: use standalone, async, semisync or galera", t)
		}
	}
	for _, w := range o.Workloads {
		if w == "" || strings.ContainsAny(w, " \t") {
			return fmt.Errorf("bad workload %q", w)
		}
	}
	for _, p := range o.Paths {
		if p != PathDirect && p != PathVigil {
			return fmt.Errorf("unknown path %q: use direct or vigil", p)
		}
	}
	for _, t := range o.Threads {
		if t < 1 {
			return fmt.Errorf("threads %d: at least 1", t)
		}
	}
	if o.Duration < time.Second || o.Duration%time.Second != 0 {
		return fmt.Errorf("duration %s: sysbench takes whole seconds, at least 1s", o.Duration)
	}
	if o.Warmup < 0 || o.Warmup%time.Second != 0 {
		return fmt.Errorf("warmup %s: sysbench takes whole seconds", o.Warmup)
	}
	if o.SandboxDir != "" && o.ConfigPath != "" {
		return errors.New("--sandbox and --config exclude each other: measure one set of servers")
	}
	existing := o.SandboxDir != "" || o.ConfigPath != ""
	if o.VaryDurability && !existing {
		return errors.New("--vary-durability is for --sandbox or --config servers; the bench's own sandboxes always run every variant")
	}
	if o.Keep && existing {
		return errors.New("--keep is for the sandboxes the bench creates; --sandbox and --config servers are left running anyway")
	}
	if o.VigilAddr != "" && o.ConfigPath == "" {
		return errors.New("--vigil is for --config servers; with sandboxes the bench starts its own Vigil")
	}
	if o.Cluster != "" && o.ConfigPath == "" {
		return errors.New("--cluster needs --config")
	}
	if o.VigilBin == "" {
		return errors.New("no vigil binary to start")
	}
	return nil
}

// RunTopology performs the whole bench and writes results.json, report.md
// and the plots into the output directory, which it returns. Everything
// it started is stopped, and every global it changed on servers not its
// own restored, on every way out; after an interruption the runs measured
// so far are still written.
func RunTopology(ctx context.Context, o TopologyOptions) (*TopologyResults, string, error) {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, "", err
	}
	if _, err := lookProgram("sysbench"); err != nil {
		return nil, "", errors.New("sysbench is not installed (scripts/install-deps.sh installs it)")
	}
	if o.SandboxDir == "" && o.ConfigPath == "" && os.Geteuid() != 0 {
		return nil, "", errors.New("the sandboxes need root (their servers run as user mysql): run as root, or pass --sandbox DIR of a running sandbox or --config vigil.yaml")
	}
	r := &topologyRunner{o: o, started: time.Now()}
	r.res = &TopologyResults{Schema: TopologyResultsSchema, Kind: "topology", Started: r.started}
	r.res.Machine = DescribeMachine(ctx, o.VigilVersion)
	r.out = o.OutDir
	if r.out == "" {
		r.out = filepath.Join("bench", "out", "topology-"+r.started.Format("20060102-150405"))
	}
	if err := os.MkdirAll(filepath.Join(r.out, "runs"), 0o755); err != nil {
		return nil, "", err
	}
	var runErr error
	switch {
	case o.SandboxDir != "":
		runErr = r.runExistingSandbox(ctx)
	case o.ConfigPath != "":
		runErr = r.runConfigServers(ctx)
	default:
		runErr = r.runOwnSandboxes(ctx)
	}
	r.res.Finished = time.Now()
	r.res.Machine.LoadEnd = loadAvg()
	r.res.Config = TopologyConfig{
		Topologies: o.Topologies, Workloads: o.Workloads, Threads: o.Threads, Paths: o.Paths,
		Duration: o.Duration.String(), Warmup: o.Warmup.String(), Quick: o.Quick,
		Tables: o.Tables, TableSize: o.TableSize, Sandbox: o.SandboxDir, VigilConfig: o.ConfigPath,
		Cluster: o.Cluster, VaryDurability: o.VaryDurability, SemiSyncTimeoutMs: semiSyncTimeoutMs,
	}
	if len(r.res.Runs) == 0 {
		return r.res, "", runErr
	}
	r.res.Shapes = Shapes(r.res.Runs)
	r.res.Losses = FailoverLosses(r.res.Runs)
	if err := writeTopologyOutputs(r.out, r.res); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return r.res, r.out, runErr
}

// runOwnSandboxes creates the sandboxes one at a time and measures them.
func (r *topologyRunner) runOwnSandboxes(ctx context.Context) error {
	plan := topologyPlan(r.o.Topologies, r.o.Quick)
	for _, sb := range plan {
		r.total += len(sb.Variants) * len(r.o.Workloads) * len(r.o.Threads) * len(r.o.Paths)
	}
	r.progress("plan: %d sandboxes, %d measured runs of %s; ETA about %s (finishing around %s)",
		len(plan), r.total, r.o.Duration, topologyEstimate(plan, r.o).Round(time.Minute),
		time.Now().Add(topologyEstimate(plan, r.o)).Format("15:04"))
	for _, sb := range plan {
		if err := r.ownSandbox(ctx, sb); err != nil {
			return err
		}
	}
	return nil
}

// newEnv is a bench env for the topology runs: the connections, the Vigil
// and the teardown of the existing bench.
func (r *topologyRunner) newEnv(logs string, sandboxDir string) *env {
	return &env{
		o: Options{
			VigilBin: r.o.VigilBin, VigilVersion: r.o.VigilVersion, Progress: r.o.Progress,
			Logger: r.o.Logger, Tables: r.o.Tables, TableSize: r.o.TableSize, Keep: r.o.Keep,
			SandboxDir: sandboxDir,
		},
		started: r.started,
		rootDBs: map[string]*sql.DB{},
		out:     logs,
	}
}

// ownSandbox brings one sandbox up, measures its variants and takes it
// down (unless --keep).
func (r *topologyRunner) ownSandbox(ctx context.Context, plan topoSandbox) (err error) {
	e := r.newEnv(filepath.Join(r.out, "logs-"+string(plan.Topology)), "")
	if err := os.MkdirAll(e.out, 0o755); err != nil {
		return err
	}
	if err := e.makeWork(); err != nil {
		return err
	}
	defer func() {
		if terr := e.teardown(); terr != nil {
			err = errors.Join(err, terr)
		}
	}()
	t0 := time.Now()
	r.progress("starting a %d-node %s sandbox in %s", plan.Nodes, plan.Topology, e.sb0Dir())
	e.ownSB = true
	e.sb, err = sandbox.Up(ctx, sandbox.Options{
		Dir: e.sb0Dir(), Topology: plan.Topology, Nodes: plan.Nodes, Logger: r.o.Logger,
		SemiSync: plan.Topology == sandbox.Replication,
	})
	if err != nil {
		e.keepWork = true
		return fmt.Errorf("%s sandbox (its files are kept in %s): %w", plan.Topology, e.sb0Dir(), err)
	}
	r.progress("%s sandbox up in %s", plan.Topology, time.Since(t0).Round(100*time.Millisecond))
	r.recordStorage(e.sb0Dir())
	te := &topoEnv{env: e, own: true, mayVary: true, flushStatus: true, semiTimeoutMs: semiSyncTimeoutMs}
	if err := r.setUpSandbox(ctx, te); err != nil {
		return err
	}
	if err := r.checkBinlog(ctx, te); err != nil {
		return err
	}
	return r.runVariants(ctx, te, plan.Variants)
}

// recordStorage notes what the datadirs are on, once.
func (r *topologyRunner) recordStorage(dir string) {
	if r.res.Storage.Dir != "" {
		return
	}
	r.res.Storage = DescribeStorage(dir)
	r.progress("datadirs: %s", r.res.Storage)
}

// setUpSandbox finds the roles of a sandbox's nodes, opens root
// connections, prepares the tables and starts a Vigil in front of it.
func (r *topologyRunner) setUpSandbox(ctx context.Context, te *topoEnv) error {
	e := te.env
	switch e.sb.Topology() {
	case sandbox.Replication:
		te.kind = "replication"
		if err := e.findRoles(ctx); err != nil {
			return err
		}
	default:
		te.kind = string(e.sb.Topology())
		e.nodes = e.sb.NodeNames()
		if len(e.nodes) == 0 {
			return fmt.Errorf("the sandbox in %s has no node", e.sb.Dir())
		}
		e.primary = e.nodes[0]
	}
	for _, n := range e.nodes {
		db, err := e.sb.RootDB(n)
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(2)
		e.rootDBs[n] = db
	}
	if !te.own {
		r.dropStoppedReplicas(ctx, te)
	}
	if err := e.prepare(ctx); err != nil {
		return err
	}
	if len(e.replicas) > 0 {
		if err := e.waitReplicas(ctx); err != nil {
			return err
		}
	}
	var err error
	if te.direct, err = e.conn(e.sb.Addr(e.primary)); err != nil {
		return err
	}
	if !contains(r.o.Paths, PathVigil) {
		return nil
	}
	// A Vigil of the bench's own, on free ports: the sandbox's own
	// vigil.yaml addresses may be taken by a `vigil run` of the user.
	if e.vigilCfg, err = e.writeVigilConfig(); err != nil {
		return err
	}
	cfg, err := e.derivedVigilConfig("topology", func(*config.Config) {})
	if err != nil {
		return err
	}
	if err := e.startVigil(ctx, cfg); err != nil {
		return err
	}
	for _, t := range e.targets {
		if t.Name == TargetVigil {
			c, err := e.conn(t.Addr)
			if err != nil {
				return err
			}
			te.vigil = &c
		}
	}
	return nil
}

// dropStoppedReplicas leaves out of the lag and catch-up measurements
// the replicas of servers not the bench's own that do not replicate now
// (stopped threads): waiting for them would never end.
func (r *topologyRunner) dropStoppedReplicas(ctx context.Context, te *topoEnv) {
	var keep []string
	for _, n := range te.replicas {
		st, err := slaveStatus(ctx, te.rootDBs[n])
		if err == nil && st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes" {
			keep = append(keep, n)
			continue
		}
		r.note("%s does not replicate (IO %s, SQL %s): its lag is not measured", n, st["Slave_IO_Running"], st["Slave_SQL_Running"])
	}
	te.replicas = keep
}

// checkBinlog notes whether binary logging is on where sync_binlog
// matters: without it sync_binlog measures nothing.
func (r *topologyRunner) checkBinlog(ctx context.Context, te *topoEnv) error {
	if te.kind == "galera" {
		return nil
	}
	v, err := readVariables(ctx, te.rootDBs[te.primary], "log_bin")
	if err != nil {
		return fmt.Errorf("%s: %w", te.primary, err)
	}
	if !isOn(v["log_bin"]) {
		r.note("%s has log_bin OFF: sync_binlog changes nothing there and Binlog_commits stay 0 (start mariadbd with log_bin to measure it)", te.primary)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func isOn(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "ON", "1", "YES", "TRUE":
		return true
	}
	return false
}
