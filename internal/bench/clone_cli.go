package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
)

const cloneUsage = `vigil-bench clone — the replica lifecycle (issue 27) measured

Usage:
  vigil-bench clone [--size-mb 1024] [--reps 3] [--rate 20MiB] [--load-threads 4]
                    [--baseline 10s] [--self-healing [--heal-runs 1] [--heal-timeout 15m] [--heal-key=false]]
                    [--out bench/out] [--keep] [--vigil-binary PATH] [--verbose]

Brings up a 3-node replication sandbox with an agent per node (vigil
sandbox up --agents) in /tmp, runs the vigil daemon on it, fills a table
of random (incompressible) rows to --size-mb on disk on the primary and
waits until both replicas have it. Then, --reps times each:

 1. a raw mariadb-backup --backup --stream=xbstream | mbstream -x -C DIR
    of the donor (node2), then vigil ctl clone node3 --from node2 --wait:
    the streaming phase's bytes/s against the raw pipe's, and the whole
    clone with its phases (GET /api/v1/clone polled every 100 ms);
 2. point selects on the donor (--load-threads connections, direct): qps
    alone for --baseline, during an unlimited clone and during a clone at
    --rate, and the ratios;
 3. with --self-healing: lifecycle: {self_healing: true} in the cluster,
    kill -9 of the primary → a new writer → the old primary started again
    (a host back after a crash) → three replicating members again: it is
    rejoined, or rebuilt when it diverged (skipped with a message when
    the daemon rejects the key).

Prints medians and min–max with the machine and its load, writes
OUT/clone-<timestamp>/results.json, report.txt and the logs, and tears
the sandbox and its directory down at the end, failed or not. Needs root,
mariadbd, mariadb-backup and mbstream; disk for about 4x --size-mb
(three nodes and the clone's copy beside the target). See
docs/benchmarks.md.

Flags:
`

// CloneCommand is `vigil-bench clone ARGS`.
func CloneCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil-bench clone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.Int("size-mb", 1024, "the table's size on disk, MB (10^6 bytes)")
	reps := fs.Int("reps", 3, "repetitions of every measurement")
	rate := fs.String("rate", "20MiB", "the throttled clone's --rate, bytes/s (20MiB, 20000000)")
	threads := fs.Int("load-threads", 4, "connections reading the donor during the load measurement")
	baseline := fs.Duration("baseline", 10*time.Second, "the load's measured window without a clone")
	heal := fs.Bool("self-healing", false, "also measure kill -9 of the primary → full redundancy with lifecycle.self_healing")
	healKey := fs.Bool("heal-key", true, "with --self-healing: set lifecycle.self_healing (false: the same kills without it, the baseline)")
	healRuns := fs.Int("heal-runs", 1, "kills of the primary with --self-healing")
	healTimeout := fs.Duration("heal-timeout", 15*time.Minute, "how long one kill may take to full redundancy")
	out := fs.String("out", "bench/out", "directory for the timestamped results")
	keep := fs.Bool("keep", false, "leave the sandbox and its work directory running")
	verbose := fs.Bool("verbose", false, "log the sandbox's progress")
	vigilBin := fs.String("vigil-binary", "", "the vigil program (default: the vigil beside vigil-bench, else on PATH)")
	if code, done := parseCommandFlags(fs, cloneUsage, args, stderr); done {
		return code
	}
	limit, err := config.ParseSize(*rate)
	if err != nil || limit <= 0 {
		fmt.Fprintf(stderr, "vigil-bench clone: --rate %q: a positive size is needed (%v)\n", *rate, err)
		return 2
	}
	if *size < 1 || *reps < 1 || *threads < 1 || *healRuns < 1 {
		fmt.Fprintln(stderr, "vigil-bench clone: --size-mb, --reps, --load-threads and --heal-runs must be at least 1")
		return 2
	}
	exe, err := vigilBinary(*vigilBin)
	if err != nil {
		fmt.Fprintf(stderr, "vigil-bench clone: %v\n", err)
		return 1
	}
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	t0 := time.Now()
	res, dir, err := RunClone(ctx, CloneOptions{
		SizeMB: *size, Reps: *reps, Rate: limit, LoadThreads: *threads, Baseline: *baseline,
		SelfHealing: *heal, HealNoKey: !*healKey, HealRuns: *healRuns, HealTimeout: *healTimeout,
		OutDir: *out, Keep: *keep, VigilBin: exe, VigilVersion: vigilVersion(ctx, exe),
		Progress: stderr, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	})
	if res != nil {
		fmt.Fprintln(stdout)
		if werr := WriteCloneText(stdout, res); werr != nil {
			fmt.Fprintf(stderr, "vigil-bench clone: %v\n", werr)
		}
	}
	if dir != "" {
		fmt.Fprintf(stdout, "\nResults: %s/results.json, %s/report.txt\n", dir, dir)
	}
	return finishCommand(ctx, "vigil-bench clone", "", nil, err, t0, stdout, stderr)
}
