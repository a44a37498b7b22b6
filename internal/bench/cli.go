package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

const benchUsage = `vigil-bench — Vigil next to the primary alone and HAProxy, interleaved

Usage:
  vigil-bench [--quick] [--scenarios point_select,read_only,...] [--threads 8,32,128]
              [--duration 8s] [--reps 2] [--check-reps 5] [--warmup 2s]
              [--clients 1000,10000] [--rules 100,1000] [--failover-runs 5]
              [--pin-client CPUS] [--pin-proxy CPUS] [--pin-servers CPUS]
              [--out bench/out] [--compare FILE|none]
              [--sandbox DIR [--skip-prepare]] [--keep] [--processing] [--coordination]
              [--vigil-binary PATH] [--verbose]
  vigil-bench --render DIR [--compare FILE|none]
  vigil-bench topology [--quick] [...]   durability and HA choices compared (vigil-bench topology -h)
  vigil-bench clone [--size-mb N] [...]  clone throughput, donor load, self-healing (vigil-bench clone -h)
  vigil-bench shards [...]               the sharded listener against a cluster's listener (vigil-bench shards -h)
  vigil-bench version

Brings up a 3-node replication sandbox (or uses --sandbox DIR), prepares
sysbench tables on the primary, starts Vigil and HAProxy (mode tcp, to the
primary) and runs every case against direct, vigil and haproxy in turn
(A B C A B C), --reps times: the sysbench workloads at every --threads,
connection churn and many idle clients (Go load generator), Vigil with
more query rules, and last failover and switchover timing on a semi-sync
sandbox of its own. Prints medians, ratios, what moved since the previous
bench and the checks (PASS/MISS), and writes OUT/<timestamp>/results.json,
report.md and PNG plots. The Vigil measured is --vigil-binary, by default
the vigil beside vigil-bench (make build writes both into bin/) or else
on PATH. Needs root, sysbench, haproxy and mariadbd. The default takes
20 to 25 minutes on 2 cores, --quick under 5. See docs/benchmarks.md.

Flags:
`

// Command is `vigil-bench ARGS`.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "topology" {
		return TopologyCommand(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "clone" {
		return CloneCommand(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "shards" {
		return ShardsCommand(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("vigil-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "point_select and read_only at 32 threads, churn, 1,000 idle clients, one failover: 2 reps of 6s, under 5 minutes")
	scenarios := fs.String("scenarios", "", "comma-separated scenarios (default: all but read_only_trx; known: "+knownScenarios()+")")
	threads := fs.String("threads", "8,32,128", "sysbench client threads, a comma-separated matrix")
	duration := fs.Duration("duration", 8*time.Second, "length of one measured run (whole seconds)")
	reps := fs.Int("reps", 2, "repetitions of every case on every target")
	checkReps := fs.Int("check-reps", 5, "repetitions of the cases the checks read (point_select and read_only at 32 threads, churn)")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured run per case and target before the first rep (0 for none)")
	clients := fs.String("clients", "1000,10000", "idle connections of the many_clients cases")
	rules := fs.String("rules", "100,1000", "query rules of the Vigils compared with the plain one (0 rules) in rules_scaling")
	failoverRuns := fs.Int("failover-runs", 5, "kill -9 failovers, and as many switchovers")
	pinClient := fs.String("pin-client", "", "CPU list for sysbench and the Go load generator (taskset -c)")
	pinProxy := fs.String("pin-proxy", "", "CPU list for Vigil and HAProxy")
	pinServers := fs.String("pin-servers", "", "CPU list for the mariadbd processes (taskset -apc)")
	out := fs.String("out", "bench/out", "directory for the timestamped results")
	compare := fs.String("compare", "", "results.json to compare with (default: the latest under --out; none for no comparison)")
	sandboxDir := fs.String("sandbox", "", "use the running replication sandbox in DIR instead of a new one (left running)")
	skipPrepare := fs.Bool("skip-prepare", false, "with --sandbox: use the sbtest tables already there")
	keep := fs.Bool("keep", false, "leave the sandbox this bench created running")
	verbose := fs.Bool("verbose", false, "log the sandbox's progress")
	render := fs.String("render", "", "summarize the runs in DIR/results.json again and rewrite its report and plots (no measurement)")
	processing := fs.Bool("processing", false, "add a Vigil with digests, 100 query rules and a file query log (target vigil+rules) and measure its overhead")
	vigilBin := fs.String("vigil-binary", "", "the vigil program to measure (default: the vigil beside vigil-bench, else on PATH)")
	coordination := fs.Bool("coordination", false, "add a Vigil like the plain one coordinated through a single-member etcd the bench runs (target vigil+etcd) and check that coordination costs the hot path nothing")
	if code, done := parseCommandFlags(fs, benchUsage, args, stderr); done {
		return code
	}
	if *render != "" {
		res, err := Render(*render, *compare)
		if res != nil {
			if werr := WriteText(stdout, res); werr != nil {
				fmt.Fprintf(stderr, "vigil-bench: %v\n", werr)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "vigil-bench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nRewritten: %s/results.json, %s/report.md\n", *render, *render)
		return 0
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		// Explicit flags still win over what --quick implies.
		defaults := map[string]func(){
			"reps":          func() { *reps = 2 },
			"check-reps":    func() { *checkReps = 2 },
			"duration":      func() { *duration = 6 * time.Second },
			"threads":       func() { *threads = "32" },
			"clients":       func() { *clients = "1000" },
			"failover-runs": func() { *failoverRuns = 1 },
		}
		for name, apply := range defaults {
			if !set[name] {
				apply()
			}
		}
	}
	var sc []Scenario
	var err error
	if *quick && !set["scenarios"] {
		sc = QuickScenarios()
	} else if sc, err = ParseScenarios(*scenarios); err != nil {
		fmt.Fprintf(stderr, "vigil-bench: %v\n", err)
		return 2
	}
	var lists [3][]int
	for i, f := range []struct{ name, value string }{{"threads", *threads}, {"clients", *clients}, {"rules", *rules}} {
		if lists[i], err = ParseIntList(f.value); err != nil {
			fmt.Fprintf(stderr, "vigil-bench: --%s: %v\n", f.name, err)
			return 2
		}
	}
	threadList, clientList, ruleList := lists[0], lists[1], lists[2]
	if *warmup == 0 {
		*warmup = -1 // none; 0 in Options means the default
	}
	exe, err := vigilBinary(*vigilBin)
	if err != nil {
		fmt.Fprintf(stderr, "vigil-bench: %v\n", err)
		return 1
	}
	// The driver logs connection failures itself while the bench waits
	// for the proxies; the errors it returns say the same.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	t0 := time.Now()
	res, dir, err := Run(ctx, Options{
		Scenarios:    sc,
		Threads:      threadList,
		Duration:     *duration,
		Warmup:       *warmup,
		Reps:         *reps,
		CheckReps:    *checkReps,
		Clients:      clientList,
		RuleCounts:   ruleList,
		FailoverRuns: *failoverRuns,
		Pin:          Pinning{Client: *pinClient, Proxy: *pinProxy, Servers: *pinServers},
		Compare:      *compare,
		Quick:        *quick,
		OutDir:       *out,
		SandboxDir:   *sandboxDir,
		SkipPrepare:  *skipPrepare,
		Keep:         *keep,
		Processing:   *processing,
		Coordination: *coordination,
		VigilBin:     exe,
		VigilVersion: vigilVersion(ctx, exe),
		Progress:     stderr,
		Logger:       logger,
	})
	if res != nil && (len(res.Runs) > 0 || len(res.Failover) > 0) {
		fmt.Fprintln(stdout)
		if werr := WriteText(stdout, res); werr != nil {
			fmt.Fprintf(stderr, "vigil-bench: %v\n", werr)
		}
	} else {
		dir = "" // nothing measured: no results to point at
	}
	var plots []string
	if res != nil {
		plots = res.Plots
	}
	return finishCommand(ctx, "vigil-bench", dir, plots, err, t0, stdout, stderr)
}

// finishCommand points at the results in dir (when there are), reports
// err (interrupted or not) and the total time, and returns the exit code.
func finishCommand(ctx context.Context, name, dir string, plots []string, err error, t0 time.Time, stdout, stderr io.Writer) int {
	if dir != "" {
		fmt.Fprintf(stdout, "\nResults: %s/results.json, %s/report.md (plots: %s)\n", dir, dir, strings.Join(plots, ", "))
	}
	if err != nil {
		msg := strings.TrimSpace(err.Error())
		if ctx.Err() != nil {
			msg = "interrupted: " + msg
		}
		fmt.Fprintf(stderr, "%s: %s\n", name, msg)
		return 1
	}
	fmt.Fprintf(stdout, "Total time: %s\n", time.Since(t0).Round(time.Second))
	return 0
}

func knownScenarios() string {
	var names []string
	for _, s := range Scenarios() {
		names = append(names, s.Short)
	}
	return strings.Join(names, ", ")
}

// parseCommandFlags parses args into fs, with usage as the help text;
// done says the command must return code now (help asked for, or bad
// flags or arguments, already reported on stderr).
func parseCommandFlags(fs *flag.FlagSet, usage string, args []string, stderr io.Writer) (code int, done bool) {
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return 2, true
	}
	return 0, false
}
