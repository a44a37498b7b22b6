// Package bench owns `vigil-bench`: it measures Vigil against the primary
// alone and against HAProxy in TCP mode, on a replication sandbox of real
// mariadbd processes: sysbench OLTP workloads at several thread counts,
// connection churn and many idle clients (a Go load generator, for what
// sysbench 1.0 cannot do), Vigil with more query rules, and failover and
// switchover timing on a semi-sync sandbox of its own.
//
// The machines it runs on are shared and noisy (timings move up to 2× with
// neighbouring load), so the method is built for comparison rather than
// absolute numbers: every target runs the same case in turn (direct,
// vigil, haproxy, then again), for several repetitions, and the report
// quotes medians and ratios of medians, and what moved since the previous
// bench. Next to throughput and latency it measures what a proxy costs:
// CPU time per query from /proc/PID/stat and resident memory.
//
// The pure parts (sysbench output, /proc parsing, the plan, summaries,
// checks, comparisons, rendering, plots) are separate from the
// orchestration (bench.go, setup.go, the scenario runners), which starts
// and always stops the sandboxes, Vigils and HAProxy.
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
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/sandbox"
)

// Options describe one bench. The zero value of every field but VigilBin
// has a useful default (see setDefaults).
type Options struct {
	// Scenarios default to DefaultScenarios.
	Scenarios []Scenario
	// Threads are the client thread counts of the sysbench matrix;
	// default 8, 32 and 128. Scenarios with their own count (churn, many
	// clients, rules) keep it.
	Threads []int
	// Duration of one measured run; whole seconds, default 8s.
	Duration time.Duration
	// Warmup is an unmeasured run per case and target before the first
	// rep; 0 means the default of 2s, negative none.
	Warmup time.Duration
	// Reps is how many times every target runs every case; default 2.
	Reps int
	// CheckReps is the repetitions of the cases the checks read (point
	// selects and read-only at 32 threads, connection churn); default 5,
	// never fewer than Reps.
	CheckReps int
	// Clients are the idle connections of the many_clients cases;
	// default 1,000 and 10,000.
	Clients []int
	// RuleCounts are the Vigils of the rules_scaling case besides the
	// plain one (0 rules); default 100 and 1,000.
	RuleCounts []int
	// FailoverRuns is the number of kill -9 runs and of switchover runs;
	// default 5.
	FailoverRuns int
	// Pin binds the client, the proxies and the servers to CPUs.
	Pin Pinning
	// Compare is the results.json to compare with: "" for the latest
	// under OutDir (of the same mode, quick or not, if there is one),
	// "none" for no comparison.
	Compare string
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
	// Coordination adds the vigil+etcd target: a Vigil like the plain
	// one plus coordination through a single-member etcd the bench runs,
	// to measure what coordination costs the statement hot path.
	Coordination bool
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
	if len(o.Threads) == 0 {
		o.Threads = []int{8, 32, 128}
	}
	if o.Duration == 0 {
		o.Duration = 8 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = 2 * time.Second
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	if o.Reps <= 0 {
		o.Reps = 2
	}
	if o.CheckReps <= 0 {
		o.CheckReps = 5
	}
	o.CheckReps = max(o.CheckReps, o.Reps)
	if len(o.Clients) == 0 {
		o.Clients = []int{1000, 10000}
	}
	if o.RuleCounts == nil {
		o.RuleCounts = []int{100, 1000}
	}
	if o.FailoverRuns <= 0 {
		o.FailoverRuns = 5
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
	for _, t := range o.Threads {
		if t < 1 {
			return fmt.Errorf("threads %d: at least 1", t)
		}
	}
	for _, n := range o.Clients {
		if n < 1 {
			return fmt.Errorf("idle clients %d: at least 1", n)
		}
	}
	return o.Pin.validate()
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
	// extra are the Vigils started besides the plain one (processing,
	// coordination, rules scaling), stopped at the end if still running.
	extra []*child
	// etcd is the bench's etcd (--coordination), stopped after the
	// Vigils; coordCluster the cluster whose writes vigil+etcd routes,
	// coordLease the etcd lease it held when the runs began.
	etcd                     *child
	coordCluster, coordLease string
	// vigilCfg is the plain Vigil's configuration file.
	vigilCfg string
	targets  []Target
	notes    []string
	started  time.Time
	// fileLimit is the open-file limit the children inherit;
	// haproxyMaxConn the maxconn it allows.
	fileLimit      uint64
	haproxyMaxConn int
	// baselineConns is Threads_connected over the nodes before any run.
	baselineConns *int64
	// wrote is set once a case wrote: the next reading case waits for
	// the replicas first.
	wrote bool
	// seq numbers the measured runs; total is how many there will be.
	seq, total int
	// keepWork keeps the temporary directory for a post-mortem.
	keepWork bool
}

func (e *env) sb0Dir() string { return filepath.Join(e.work, "sandbox") }

func (e *env) progress(format string, args ...any) {
	progressf(e.o.Progress, e.started, format, args...)
}

// progressf writes one progress line, stamped with the time since
// started.
func progressf(w io.Writer, started time.Time, format string, args ...any) {
	fmt.Fprintf(w, "[%6s] %s\n", time.Since(started).Round(time.Second), fmt.Sprintf(format, args...))
}

func (e *env) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.notes = append(e.notes, msg)
	e.progress("note: %s", msg)
}

// Run performs a whole bench and writes results.json, report.md and the
// plots into a new timestamped directory under o.OutDir, whose path it
// returns. It stops everything it started on every path out, including
// cancellation of ctx; after an interruption it still writes the runs it
// has, and returns them with the error.
func Run(ctx context.Context, o Options) (*Results, string, error) {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, "", err
	}
	e := &env{o: o, started: time.Now(), rootDBs: map[string]*sql.DB{}}
	progs := []string{"sysbench", "haproxy"}
	if o.Coordination {
		progs = append(progs, "etcd")
	}
	if o.Pin.Any() {
		progs = append(progs, "taskset")
	}
	for _, prog := range progs {
		if _, err := lookProgram(prog); err != nil {
			return nil, "", fmt.Errorf("%s is not installed (scripts/install-deps.sh installs it)", prog)
		}
	}
	if o.SandboxDir == "" && os.Geteuid() != 0 {
		return nil, "", errors.New("a sandbox needs root (its servers run as user mysql): run as root, or pass --sandbox DIR of a running sandbox")
	}
	plan := BuildPlan(o)
	maxIdle := 0
	for _, c := range plan {
		maxIdle = max(maxIdle, c.Idle+c.Threads)
	}
	limit, err := raiseOpenFileLimit()
	if err != nil {
		e.note("could not raise the open-file limit to %d: %v", limit, err)
	}
	e.fileLimit = limit
	e.haproxyMaxConn = HAProxyMaxConnFor(limit, maxIdle+64)
	if e.haproxyMaxConn < maxIdle {
		e.note("the open-file limit is %d: HAProxy gets maxconn %d and cannot take the largest many_clients case (%d connections)", limit, e.haproxyMaxConn, maxIdle)
	}

	res := &Results{Schema: ResultsSchema, Started: e.started}
	res.Machine = DescribeMachine(ctx, o.VigilVersion)
	e.out = filepath.Join(o.OutDir, e.started.Format("20060102-150405"))
	if err := os.MkdirAll(filepath.Join(e.out, "runs"), 0o755); err != nil {
		return nil, "", err
	}

	runErr := e.run(ctx, res, plan)
	if err := e.teardown(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	res.Finished = time.Now()
	res.Machine.LoadEnd = loadAvg()
	res.Notes = e.notes
	res.Config = Config{
		Scenarios: o.Scenarios, Targets: e.targets, Threads: o.Threads,
		Duration: o.Duration.String(), Warmup: o.Warmup.String(), Reps: o.Reps, CheckReps: o.CheckReps,
		Clients: o.Clients, RuleCounts: o.RuleCounts, FailoverRuns: o.FailoverRuns, Pin: o.Pin,
		Quick: o.Quick, Tables: o.Tables, TableSize: o.TableSize, BaselineServerConnections: e.baselineConns,
	}
	for _, c := range plan {
		ci := CaseInfo{Key: c.Key(), Scenario: c.Scenario.Name, Threads: c.Threads, Idle: c.Idle, Reps: c.Reps, Check: c.Check}
		if c.Duration > 0 {
			ci.Duration = c.Duration.String()
		}
		if c.Warmup > 0 {
			ci.Warmup = c.Warmup.String()
		}
		res.Config.Cases = append(res.Config.Cases, ci)
	}
	if e.sb != nil {
		res.Config.Sandbox = e.sb.Dir()
	}
	if len(res.Runs) == 0 && len(res.Failover) == 0 {
		_ = os.RemoveAll(e.out)
		return res, "", runErr
	}
	var keys []string
	for _, c := range plan {
		keys = append(keys, c.Key())
	}
	res.Summary = Summarize(keys, targetNames(e.targets, res.Runs), res.Runs, res.Failover)
	if o.Compare != "none" {
		prevPath := o.Compare
		if prevPath == "" {
			prevPath = FindPrevious(o.OutDir, e.out, o.Quick, keys)
		}
		if prevPath != "" {
			prev, err := LoadResults(prevPath)
			if err != nil {
				e.note("no comparison with %s: %v", prevPath, err)
				res.Notes = e.notes
			} else {
				res.Comparison = Compare(prev, prevPath, res)
			}
		}
	}
	if err := e.writeOutputs(res); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return res, e.out, runErr
}

// targetNames are the targets in the order of the rounds, then any other
// target a run names (the rules Vigils) in the order they first ran.
func targetNames(targets []Target, runs []Measurement) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range targets {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t.Name)
		}
	}
	for _, r := range runs {
		if !seen[r.Target] {
			seen[r.Target] = true
			out = append(out, r.Target)
		}
	}
	return out
}

// run brings everything up and measures; teardown undoes it.
func (e *env) run(ctx context.Context, res *Results, plan []Case) error {
	if err := e.makeWork(); err != nil {
		return err
	}
	main := false
	for _, c := range plan {
		main = main || c.Scenario.kind() != KindFailover
	}
	if main {
		if err := e.setUp(ctx); err != nil {
			return err
		}
	}
	e.total = 0
	for _, c := range plan {
		switch c.Scenario.kind() {
		case KindFailover:
		case KindRules:
			e.total += c.Reps * len(ruleCounts(e.o.RuleCounts))
		default:
			e.total += c.Reps * len(e.caseTargets(c))
		}
	}
	e.progress("plan: %d cases, %d measured runs, about %s on an idle machine", len(plan), e.total,
		PlanEstimate(plan, len(e.targets)).Round(time.Minute))
	for _, c := range plan {
		var err error
		switch c.Scenario.kind() {
		case KindFailover:
			err = e.runFailover(ctx, c, res)
		case KindRules:
			err = e.runRules(ctx, c, res)
		default:
			err = e.runCase(ctx, c, e.caseTargets(c), res)
		}
		if err != nil {
			return err
		}
	}
	e.checkCoordinationEnd(ctx)
	return nil
}

// caseTargets are the targets of a case: every one for sysbench, the
// three base targets for the Go load generator's cases.
func (e *env) caseTargets(c Case) []Target {
	if c.Scenario.kind() == KindSysbench {
		return e.targets
	}
	var out []Target
	for _, t := range e.targets {
		if isBaseTarget(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// writes reports a case that writes: the replicas lag after it.
func writes(c Case) bool {
	if c.Scenario.kind() != KindSysbench {
		return false
	}
	switch c.Scenario.Workload {
	case "oltp_point_select", "oltp_read_only", "select_random_points", "select_random_ranges":
		return false
	}
	return true
}

// runCase runs one case: a warm-up per target, then the reps, the
// targets interleaved in every rep.
func (e *env) runCase(ctx context.Context, c Case, targets []Target, res *Results) error {
	label := CaseLabel(c.Scenario.Name, c.Threads, c.Idle)
	if e.wrote && !writes(c) {
		if err := e.waitReplicas(ctx); err != nil {
			e.note("%s: %v", label, err)
		}
		e.wrote = false
	}
	if c.Scenario.kind() == KindManyClients {
		restore := e.raiseMaxConnections(ctx, c.Idle+c.Threads)
		defer restore()
	}
	if c.Warmup > 0 {
		for _, t := range targets {
			e.progress("%s: warm-up %s on %s", label, c.Warmup, t.Name)
			r := e.measureCase(ctx, c, t, c.Warmup, "")
			if err := ctx.Err(); err != nil {
				return err
			}
			if r.Failed() {
				e.note("%s warm-up on %s failed: %s", label, t.Name, failure(r))
			}
		}
	}
	for rep := 1; rep <= c.Reps; rep++ {
		for _, t := range targets {
			e.seq++
			logName := fmt.Sprintf("%03d-%s-%s-rep%d.txt", e.seq, strings.NewReplacer("@", "-t", "+", "-").Replace(c.Key()), t.Name, rep)
			r := e.measureCase(ctx, c, t, c.Duration, filepath.Join(e.out, "runs", logName))
			if err := ctx.Err(); err != nil {
				return err // an interrupted run is not a measurement
			}
			r.Seq, r.Rep = e.seq, rep
			res.Runs = append(res.Runs, r)
			e.progress("[%d/%d] %s rep %d/%d %-8s %s", e.seq, e.total, label, rep, c.Reps, t.Name, runLine(r))
		}
	}
	if writes(c) {
		e.wrote = true
	}
	return nil
}

// measureCase runs one case against one target with its client.
func (e *env) measureCase(ctx context.Context, c Case, t Target, d time.Duration, logPath string) Measurement {
	switch c.Scenario.kind() {
	case KindChurn:
		return e.measureChurn(ctx, c, t, d, logPath)
	case KindManyClients:
		return e.measureMany(ctx, c, t, d, logPath)
	}
	return e.measure(ctx, c.Scenario, t, c.Threads, d, logPath)
}

// runLine is one run for the progress output.
func runLine(r Measurement) string {
	if r.Skipped != "" {
		return "not run: " + r.Skipped
	}
	if r.Failed() {
		return "FAILED: " + failure(r)
	}
	s := fmt.Sprintf("%7.0f qps  p95 %6.2f ms  p99 %6.2f ms  %d errors", r.Sysbench.QPS, r.Sysbench.P95(), r.Sysbench.P99Ms, r.Sysbench.Errors())
	if r.ProxyCPUUsPerQuery != nil {
		s += fmt.Sprintf("  proxy %.1f µs/query", *r.ProxyCPUUsPerQuery)
	}
	if r.ReplicaSelectShare != nil {
		s += fmt.Sprintf("  %s of SELECTs on replicas", fmtPct(*r.ReplicaSelectShare))
	}
	if r.ServerConnections != nil {
		s += fmt.Sprintf("  %d server connections", *r.ServerConnections)
	}
	if r.ProxyRSSKiB != nil && r.Idle > 0 {
		s += fmt.Sprintf("  RSS %.0f MiB", float64(*r.ProxyRSSKiB)/1024)
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

// findRoles asks the nodes which is the primary now: a reused sandbox may
// startHAProxy runs HAProxy in the foreground (-db) as a TCP pass-through
// teardown stops the proxies, then the sandbox unless it is kept or was
// copyLog copies a log into the output directory; a huge one only by its
// writeOutputs writes results.json, report.md and the plots.
func (e *env) writeOutputs(res *Results) error {
	plots, perr := WritePlots(e.out, res)
	if perr != nil {
		e.note("plots: %v", perr)
		res.Notes = e.notes
	}
	res.Plots = plots
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
	return errors.Join(errs...)
}
