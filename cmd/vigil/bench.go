package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/bench"
)

const benchUsage = `vigil bench — Vigil against the primary alone and against HAProxy, interleaved

Usage:
  vigil bench [--quick] [--scenarios point_select,read_only] [--threads 32]
              [--duration 20s] [--reps 3] [--warmup 2s] [--out bench/out]
              [--sandbox DIR [--skip-prepare]] [--keep] [--verbose]

Brings up a 3-node replication sandbox (or uses --sandbox DIR), prepares
sysbench tables on the primary, starts Vigil and HAProxy (mode tcp, to the
primary) and runs every scenario against direct, vigil and haproxy in turn,
--reps times. Prints medians, ratios and the data-path checks, and writes
OUT/<timestamp>/results.json, report.md and qps.png. Needs root, sysbench,
haproxy and mariadbd. See docs/benchmarks.md.

Flags:
`

func cmdBench(ctx context.Context, args []string) int {
	return runBench(ctx, args, os.Stdout, os.Stderr)
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "2 reps of 8s, the default scenarios: a few minutes in all")
	scenarios := fs.String("scenarios", "", "comma-separated scenarios (default point_select,read_only; known: "+knownScenarios()+")")
	threads := fs.Int("threads", 32, "sysbench client threads")
	duration := fs.Duration("duration", 20*time.Second, "length of one measured run (whole seconds)")
	reps := fs.Int("reps", 3, "repetitions of every scenario on every target")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured run per scenario and target before the first rep (0 for none)")
	out := fs.String("out", "bench/out", "directory for the timestamped results")
	sandboxDir := fs.String("sandbox", "", "use the running replication sandbox in DIR instead of a new one (left running)")
	skipPrepare := fs.Bool("skip-prepare", false, "with --sandbox: use the sbtest tables already there")
	keep := fs.Bool("keep", false, "leave the sandbox this bench created running")
	verbose := fs.Bool("verbose", false, "log the sandbox's progress")
	processing := fs.Bool("processing", false, "add a Vigil with digests, 100 query rules and a file query log (target vigil+rules) and measure its overhead")
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vigil bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		// Explicit flags still win over what --quick implies.
		if !set["reps"] {
			*reps = 2
		}
		if !set["duration"] {
			*duration = 8 * time.Second
		}
	}
	sc, err := bench.ParseScenarios(*scenarios)
	if err != nil {
		fmt.Fprintf(stderr, "vigil bench: %v\n", err)
		return 2
	}
	if *warmup == 0 {
		*warmup = -1 // none; 0 in Options means the default
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "vigil bench: cannot find the vigil binary: %v\n", err)
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
	res, dir, err := bench.Run(ctx, bench.Options{
		Scenarios:    sc,
		Threads:      *threads,
		Duration:     *duration,
		Warmup:       *warmup,
		Reps:         *reps,
		Quick:        *quick,
		OutDir:       *out,
		SandboxDir:   *sandboxDir,
		SkipPrepare:  *skipPrepare,
		Keep:         *keep,
		Processing:   *processing,
		VigilBin:     exe,
		VigilVersion: version + " (commit " + commit + ")",
		Progress:     stderr,
		Logger:       logger,
	})
	if res != nil && len(res.Runs) > 0 {
		fmt.Fprintln(stdout)
		if werr := bench.WriteText(stdout, res); werr != nil {
			fmt.Fprintf(stderr, "vigil bench: %v\n", werr)
		}
		if dir != "" {
			fmt.Fprintf(stdout, "\nResults: %s/results.json, %s/report.md\n", dir, dir)
		}
	}
	if err != nil {
		msg := strings.TrimSpace(err.Error())
		if ctx.Err() != nil {
			msg = "interrupted: " + msg
		}
		fmt.Fprintf(stderr, "vigil bench: %s\n", msg)
		return 1
	}
	fmt.Fprintf(stdout, "Total time: %s\n", time.Since(t0).Round(time.Second))
	return 0
}

func knownScenarios() string {
	var names []string
	for _, s := range bench.Scenarios() {
		names = append(names, s.Short)
	}
	return strings.Join(names, ", ")
}
