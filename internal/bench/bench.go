// Package bench owns `vigil bench`: it measures Vigil against the primary
// alone and against HAProxy in TCP mode, on a replication sandbox of real
// mariadbd processes, with sysbench as the client.
//
// The machines it runs on are shared and noisy (timings move up to 2× with
// neighbouring load), so the method is built for comparison rather than
// absolute numbers: every target runs the same scenario in turn (direct,
// vigil, haproxy, then again), unpinned, for several repetitions, and the
// report quotes medians and ratios of medians. Next to throughput it
// measures what a proxy costs: CPU time per query from /proc/PID/stat and
// resident memory.
//
// The pure parts (sysbench output, /proc parsing, summary, checks,
// rendering) are separate from the orchestration in this file, which
// starts and always stops the sandbox, Vigil and HAProxy.
package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// Options describe one bench. The zero value of every field but VigilBin
// has a useful default (see setDefaults).
type Options struct {
	// Scenarios default to DefaultScenarios.
	Scenarios []Scenario
	// Threads of every scenario that does not set its own; default 32.
	Threads int
	// Duration of one measured run; whole seconds, default 20s.
	Duration time.Duration
	// Warmup is an unmeasured run per scenario and target before the
	// first rep; 0 means the default of 2s, negative none.
	Warmup time.Duration
	// Reps is how many times every target runs every scenario; default 3.
	Reps int
	// Quick is recorded in the results (the caller sets the shorter
	// durations).
	Quick bool
	// OutDir receives a timestamped directory per bench; default
	// bench/out.
	OutDir string
	// SandboxDir reuses a running replication sandbox instead of creating
	// one in a temporary directory; it is left running.
	SandboxDir string
	// Keep leaves a sandbox this bench created running (with its
	// directory) instead of deleting it.
	Keep bool
	// SkipPrepare uses the sbtest tables already in SandboxDir.
	SkipPrepare bool
	// Tables and TableSize of the sysbench data; default 4 × 20000.
	Tables, TableSize int
	// Processing adds the vigil+rules target (digests, 100 rules, a file
	// query log) and turns digests off in the plain vigil target, so the
	// two measure the cost of query processing.
	Processing bool
	// VigilBin is the vigil binary started as `vigil run`.
	VigilBin     string
	VigilVersion string
	// Progress receives one line per step and per run; nil discards.
	Progress io.Writer
	// Logger receives the sandbox's progress; nil discards it.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if len(o.Scenarios) == 0 {
		o.Scenarios = DefaultScenarios()
	}
	if o.Threads <= 0 {
		o.Threads = 32
	}
	if o.Duration == 0 {
		o.Duration = 20 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = 2 * time.Second
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	if o.Reps <= 0 {
		o.Reps = 3
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join("bench", "out")
	}
	if o.Tables <= 0 {
		o.Tables = 4
	}
	if o.TableSize <= 0 {
		o.TableSize = 20000
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

func (o *Options) validate() error {
	if o.VigilBin == "" {
		return errors.New("no vigil binary to start")
	}
	if o.Duration < time.Second || o.Duration%time.Second != 0 {
		return fmt.Errorf("duration %s: sysbench takes whole seconds, at least 1s", o.Duration)
	}
	if o.Warmup%time.Second != 0 {
		return fmt.Errorf("warmup %s: sysbench takes whole seconds", o.Warmup)
	}
	if o.SkipPrepare && o.SandboxDir == "" {
		return errors.New("skipping the prepare step needs --sandbox DIR with the tables in it")
	}
	return nil
}

// env is everything a bench started, so that one function can stop it.
type env struct {
	o       Options
	work    string // temporary directory: sandbox, logs, haproxy.cfg
	out     string // the timestamped output directory
	sb      *sandbox.Sandbox
	ownSB   bool
	primary string
	nodes   []string
	// replicas are the nodes that replicate from the primary.
	replicas []string
	rootDBs  map[string]*sql.DB
	vigil    *child
	haproxy  *child
	// vigilRules is the second Vigil, with query processing on.
	vigilRules *child
	targets    []Target
	notes      []string
	started    time.Time
	// keepWork keeps the temporary directory for a post-mortem.
	keepWork bool
}

func (e *env) sb0Dir() string { return filepath.Join(e.work, "sandbox") }

func (e *env) progress(format string, args ...any) {
	fmt.Fprintf(e.o.Progress, "[%6s] %s\n", time.Since(e.started).Round(time.Second), fmt.Sprintf(format, args...))
}

func (e *env) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.notes = append(e.notes, msg)
	e.progress("note: %s", msg)
}

// Run performs a whole bench and writes results.json and report.md (and
// qps.png) into a new timestamped directory under o.OutDir, whose path it
// returns. It stops everything it started on every path out, including
// cancellation of ctx; after an interruption it still writes the runs it
// has, and returns them with the error.
func Run(ctx context.Context, o Options) (*Results, string, error) {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, "", err
	}
	e := &env{o: o, started: time.Now(), rootDBs: map[string]*sql.DB{}}
	for _, prog := range []string{"sysbench", "haproxy"} {
		if _, err := lookProgram(prog); err != nil {
			return nil, "", fmt.Errorf("%s is not installed (scripts/install-deps.sh installs it)", prog)
		}
	}
	if o.SandboxDir == "" && os.Geteuid() != 0 {
		return nil, "", errors.New("a sandbox needs root (its servers run as user mysql): run as root, or pass --sandbox DIR of a running sandbox")
	}
	if limit, err := raiseOpenFileLimit(); err != nil {
		e.note("could not raise the open-file limit to %d: %v", limit, err)
	} else if limit < 2*HAProxyMaxConn+100 {
		e.note("the open-file limit is %d; HAProxy with maxconn %d may refuse to start", limit, HAProxyMaxConn)
	}

	res := &Results{Schema: ResultsSchema, Started: e.started}
	res.Machine = DescribeMachine(ctx, o.VigilVersion)
	e.out = filepath.Join(o.OutDir, e.started.Format("20060102-150405"))
	if err := os.MkdirAll(filepath.Join(e.out, "runs"), 0o755); err != nil {
		return nil, "", err
	}

	runErr := e.run(ctx, res)
	if err := e.teardown(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	res.Finished = time.Now()
	res.Machine.LoadEnd = loadAvg()
	res.Notes = e.notes
	res.Config = Config{
		Scenarios: o.Scenarios, Targets: e.targets, Threads: o.Threads,
		Duration: o.Duration.String(), Warmup: o.Warmup.String(), Reps: o.Reps,
		Quick: o.Quick, Tables: o.Tables, TableSize: o.TableSize,
	}
	if e.sb != nil {
		res.Config.Sandbox = e.sb.Dir()
	}
	if len(res.Runs) == 0 {
		_ = os.RemoveAll(e.out)
		return res, "", runErr
	}
	var names, targets []string
	for _, s := range o.Scenarios {
		names = append(names, s.Name)
	}
	for _, t := range e.targets {
		targets = append(targets, t.Name)
	}
	res.Summary = Summarize(names, targets, res.Runs)
	if err := e.writeOutputs(res); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return res, e.out, runErr
}

// run brings everything up and measures; teardown undoes it.
func (e *env) run(ctx context.Context, res *Results) error {
	if err := e.setUp(ctx); err != nil {
		return err
	}
	total := len(e.o.Scenarios) * e.o.Reps * len(e.targets)
	seq := 0
	for _, sc := range e.o.Scenarios {
		threads := sc.Threads
		if threads <= 0 {
			threads = e.o.Threads
		}
		if e.o.Warmup > 0 {
			for _, t := range e.targets {
				e.progress("%s: warm-up %s on %s", sc.Name, e.o.Warmup, t.Name)
				r := e.measure(ctx, sc, t, threads, e.o.Warmup, "")
				if err := ctx.Err(); err != nil {
					return err
				}
				if r.Failed() {
					e.note("%s warm-up on %s failed: %s", sc.Name, t.Name, failure(r))
				}
			}
		}
		for rep := 1; rep <= e.o.Reps; rep++ {
			for _, t := range e.targets {
				seq++
				logName := fmt.Sprintf("%03d-%s-%s-rep%d.txt", seq, sc.Name, t.Name, rep)
				r := e.measure(ctx, sc, t, threads, e.o.Duration, filepath.Join(e.out, "runs", logName))
				if err := ctx.Err(); err != nil {
					return err // an interrupted run is not a measurement
				}
				r.Seq, r.Rep = seq, rep
				res.Runs = append(res.Runs, r)
				e.progress("[%d/%d] %s rep %d/%d %-8s %s", seq, total, sc.Name, rep, e.o.Reps, t.Name, runLine(r))
			}
		}
	}
	return nil
}

// runLine is one run for the progress output.
func runLine(r Measurement) string {
	if r.Failed() {
		return "FAILED: " + failure(r)
	}
	s := fmt.Sprintf("%7.0f qps  p95 %6.2f ms  %d errors", r.Sysbench.QPS, r.Sysbench.PercentileMs, r.Sysbench.Errors())
	if r.ProxyCPUUsPerQuery != nil {
		s += fmt.Sprintf("  proxy %.1f µs/query", *r.ProxyCPUUsPerQuery)
	}
	if r.ReplicaSelectShare != nil {
		s += fmt.Sprintf("  %s of SELECTs on replicas", fmtPct(*r.ReplicaSelectShare))
	}
	return s
}

func failure(r Measurement) string {
	if r.Error != "" {
		return r.Error
	}
	if len(r.Sysbench.Fatal) > 0 {
		return r.Sysbench.Fatal[0]
	}
	return "no statistics in sysbench's output"
}

// setUp creates or loads the sandbox, prepares the tables and starts the
// proxies.
func (e *env) setUp(ctx context.Context) error {
	work, err := os.MkdirTemp("/tmp", "vigil-bench-") // short: unix socket paths
	if err != nil {
		return err
	}
	e.work = work
	// The servers run as user mysql and must reach their datadirs.
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	if e.o.SandboxDir != "" {
		e.sb, err = sandbox.Load(e.o.SandboxDir)
		if err != nil {
			return err
		}
		e.sb.SetLogger(e.o.Logger)
		e.progress("using the sandbox in %s", e.sb.Dir())
	} else {
		t0 := time.Now()
		e.progress("starting a 3-node replication sandbox in %s/sandbox", work)
		e.ownSB = true
		e.sb, err = sandbox.Up(ctx, sandbox.Options{
			Dir: e.sb0Dir(), Topology: sandbox.Replication, Nodes: 3, Logger: e.o.Logger,
		})
		if err != nil {
			e.keepWork = true // the servers' error logs
			return fmt.Errorf("sandbox (its files are kept in %s): %w", e.sb0Dir(), err)
		}
		e.progress("sandbox up in %s", time.Since(t0).Round(100*time.Millisecond))
	}
	if err := e.findRoles(ctx); err != nil {
		return err
	}
	for _, n := range e.nodes {
		db, err := e.sb.RootDB(n)
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		e.rootDBs[n] = db
	}
	if !e.o.SkipPrepare {
		if err := e.prepare(ctx); err != nil {
			return err
		}
	}
	if err := e.waitReplicas(ctx); err != nil {
		return err
	}
	plain, withRules, err := e.writeVigilConfigs()
	if err != nil {
		return err
	}
	if err := e.startVigil(ctx, plain); err != nil {
		return err
	}
	if withRules != "" {
		if err := e.startVigilRules(ctx, withRules); err != nil {
			return err
		}
	}
	return e.startHAProxy(ctx)
}

// findRoles asks the nodes which is the primary now: a reused sandbox may
// have failed over.
func (e *env) findRoles(ctx context.Context) error {
	if e.sb.Topology() != sandbox.Replication {
		return fmt.Errorf("the sandbox in %s is %s; vigil bench needs replication", e.sb.Dir(), e.sb.Topology())
	}
	st, err := e.sb.Status(ctx)
	if err != nil {
		return err
	}
	for _, n := range st.Nodes {
		if !n.Running || !n.Reachable {
			return fmt.Errorf("node %s of the sandbox is not running or does not answer", n.Name)
		}
		e.nodes = append(e.nodes, n.Name)
		switch n.Role {
		case sandbox.RolePrimary:
			if e.primary != "" {
				return fmt.Errorf("two primaries in the sandbox: %s and %s", e.primary, n.Name)
			}
			e.primary = n.Name
		case sandbox.RoleReplica:
			e.replicas = append(e.replicas, n.Name)
		}
	}
	if e.primary == "" {
		return errors.New("no primary in the sandbox")
	}
	if len(e.replicas) == 0 {
		e.note("the sandbox has no replica: Vigil has nowhere to send reads")
	}
	return nil
}

// conn is how sysbench reaches addr.
func (e *env) conn(addr string) (SysbenchConn, error) {
	host, port, ok := strings.Cut(addr, ":")
	p, err := strconv.Atoi(port)
	if !ok || err != nil {
		return SysbenchConn{}, fmt.Errorf("bad address %q", addr)
	}
	app := e.sb.Accounts().App
	return SysbenchConn{Host: host, Port: p, User: app.User, Password: app.Password, DB: "sbtest",
		Tables: e.o.Tables, TableSize: e.o.TableSize}, nil
}

// prepare (re)creates the sysbench tables on the primary directly.
func (e *env) prepare(ctx context.Context) error {
	c, err := e.conn(e.sb.Addr(e.primary))
	if err != nil {
		return err
	}
	t0 := time.Now()
	e.progress("preparing %d sysbench tables of %d rows on %s", e.o.Tables, e.o.TableSize, e.primary)
	threads := strconv.Itoa(min(e.o.Tables, 4))
	for _, step := range []string{"cleanup", "prepare"} {
		args := append([]string{"oltp_read_write"}, c.Args()...)
		args = append(args, "--threads="+threads, step)
		out, err := runCommand(ctx, 10*time.Minute, "sysbench", args...)
		if err != nil {
			return fmt.Errorf("sysbench %s: %w\n%s", step, err, lastLines(out, 10))
		}
	}
	e.progress("tables ready in %s", time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// waitReplicas waits until every replica has applied what the primary has
// written, so all targets read the same data.
func (e *env) waitReplicas(ctx context.Context) error {
	var pos string
	if err := e.rootDBs[e.primary].QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return fmt.Errorf("%s: gtid_binlog_pos: %w", e.primary, err)
	}
	t0 := time.Now()
	for _, r := range e.replicas {
		var got sql.NullInt64
		err := e.rootDBs[r].QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 300)", pos).Scan(&got)
		if err != nil {
			return fmt.Errorf("%s: waiting for GTID %s: %w", r, pos, err)
		}
		if !got.Valid || got.Int64 != 0 {
			return fmt.Errorf("%s did not reach the primary's GTID position %s within 300s", r, pos)
		}
	}
	e.progress("replicas at the primary's GTID position %s (waited %s)", pos, time.Since(t0).Round(10*time.Millisecond))
	return nil
}

// startVigil runs `vigil run` with the sandbox's vigil.yaml.
func (e *env) startVigil(ctx context.Context, cfgPath string) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	if len(cfg.Clusters) == 0 {
		return fmt.Errorf("%s has no cluster", e.sb.ConfigPath())
	}
	addr := cfg.Clusters[0].Listen
	if listening(addr) {
		return fmt.Errorf("something already listens on Vigil's address %s (a vigil run of this sandbox?): stop it first", addr)
	}
	e.vigil, err = startChild("vigil", filepath.Join(e.work, "vigil.log"), e.o.VigilBin, "run", "--config", cfgPath)
	if err != nil {
		return err
	}
	if err := e.vigil.waitListening(ctx, addr, 30*time.Second); err != nil {
		return err
	}
	if err := e.waitSQL(ctx, "vigil", addr); err != nil {
		return err
	}
	e.targets = append(e.targets,
		Target{Name: TargetDirect, Addr: e.sb.Addr(e.primary), Description: "the primary (" + e.primary + ") without a proxy"})
	e.targets = append(e.targets,
		Target{Name: TargetVigil, Addr: addr, PID: e.vigil.PID(), Description: "Vigil: reads outside transactions to the replicas, the rest to the primary"})
	e.progress("vigil (pid %d) serves %s", e.vigil.PID(), addr)
	return nil
}

// startHAProxy runs HAProxy in the foreground (-db) as a TCP pass-through
// to the primary.
func (e *env) startHAProxy(ctx context.Context) error {
	bin, err := lookProgram("haproxy")
	if err != nil {
		return err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(e.work, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(HAProxyConfig(addr, e.sb.Addr(e.primary))), 0o644); err != nil {
		return err
	}
	e.haproxy, err = startChild("haproxy", filepath.Join(e.work, "haproxy.log"), bin, "-f", cfgPath, "-db")
	if err != nil {
		return err
	}
	if err := e.haproxy.waitListening(ctx, addr, 15*time.Second); err != nil {
		return err
	}
	if err := e.waitSQL(ctx, "haproxy", addr); err != nil {
		return err
	}
	e.targets = append(e.targets,
		Target{Name: TargetHAProxy, Addr: addr, PID: e.haproxy.PID(), Description: "HAProxy 'mode tcp' to the primary"})
	e.progress("haproxy (pid %d) serves %s", e.haproxy.PID(), addr)
	return nil
}

// waitSQL waits until a query through addr works.
func (e *env) waitSQL(ctx context.Context, name, addr string) error {
	app := e.sb.Accounts().App
	db, err := sql.Open("mysql", sandbox.TCPDSN(addr, app.User, app.Password, "sbtest"))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		var one int
		err := db.QueryRowContext(qctx, "SELECT 1").Scan(&one)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s on %s does not answer queries: %w", name, addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// teardown stops the proxies, then the sandbox unless it is kept or was
// not ours, and removes the temporary directory unless something in it is
// kept. It uses its own deadline: ctx may be cancelled already.
func (e *env) teardown() error {
	var errs []error
	if e.vigil != nil || e.haproxy != nil || (e.ownSB && !e.o.Keep) {
		e.progress("stopping the proxies and the sandbox")
	}
	for _, c := range []*child{e.haproxy, e.vigil, e.vigilRules} {
		if c == nil {
			continue
		}
		if err := c.stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for _, db := range e.rootDBs {
		db.Close()
	}
	if e.out != "" {
		for _, name := range []string{"vigil.log", "vigil-rules.log", "haproxy.log", "haproxy.cfg"} {
			if err := copyLog(filepath.Join(e.work, name), filepath.Join(e.out, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				e.note("could not keep %s: %v", name, err)
			}
		}
	}
	keepWork := e.keepWork
	if e.sb != nil && e.ownSB {
		if e.o.Keep {
			keepWork = true
			e.progress("sandbox kept running in %s; tear it down with: vigil sandbox down --dir %s --purge", e.sb.Dir(), e.sb.Dir())
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := e.sb.Down(ctx, true)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("sandbox down: %w", err))
				keepWork = true
			} else {
				e.progress("sandbox stopped and deleted")
			}
		}
	}
	if e.work != "" && !keepWork {
		if err := os.RemoveAll(e.work); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// copyLog copies a log into the output directory; a huge one only by its
// last 4 MiB.
func copyLog(src, dst string) error {
	const limit = 4 << 20
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > limit {
		if _, err := f.Seek(-limit, io.SeekEnd); err != nil {
			return err
		}
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, f); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeOutputs writes results.json, report.md and the chart.
func (e *env) writeOutputs(res *Results) error {
	var errs []error
	write := func(name string, fn func(io.Writer) error) {
		f, err := os.Create(filepath.Join(e.out, name))
		if err != nil {
			errs = append(errs, err)
			return
		}
		if err := fn(f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	write("results.json", func(w io.Writer) error { return WriteJSON(w, res) })
	write("report.md", func(w io.Writer) error { return WriteMarkdown(w, res) })
	if err := WriteChart(filepath.Join(e.out, "qps.png"), res.Summary); err != nil {
		e.progress("note: no chart: %v", err)
	}
	return errors.Join(errs...)
}
