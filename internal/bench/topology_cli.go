package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

const topologyUsage = `vigil-bench topology — what each durability and HA choice costs

Usage:
  vigil-bench topology [--quick] [--topologies standalone,async,semisync,galera]
              [--workloads oltp_read_write,oltp_insert] [--threads 1,8,32,64]
              [--paths direct,vigil] [--duration 5s] [--warmup 2s]
              [--out DIR] [--keep] [--vigil-binary PATH] [--verbose]
  vigil-bench topology --sandbox DIR [--vary-durability] [...]
  vigil-bench topology --config vigil.yaml [--cluster NAME] [--vigil HOST:PORT]
              [--vary-durability] [...]

Creates, one at a time, a standalone server (durability off,
trx_commit=1, +sync_binlog=1, sync_binlog=1000), a 3-node replication
sandbox (async, then semi-sync AFTER_SYNC) and a 3-node Galera cluster
(wsrep_slave_threads 1,4,16 × gcs.fc_limit 16,512), and runs sysbench on
each, direct and through a Vigil in front. Records tps, qps, p95/p99,
fsyncs per transaction, commits per binlog group, semi-sync fallbacks,
replica lag and Galera flow control, and writes results.json, report.md
and plots into --out. The default takes about 20 minutes on 2 cores,
--quick under 5. With --sandbox or --config it measures those servers as
they are (read-only checks first; only the bench's tables are written)
unless --vary-durability, which sets and afterwards restores the
durability variants. See docs/benchmarks.md, "Choosing a topology".

Flags:
`

// TopologyCommand is `vigil-bench topology ARGS`.
func TopologyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil-bench topology", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "threads 1,32, oltp_insert, runs of 3s, two standalone variants and two Galera ones: under 5 minutes")
	topologies := fs.String("topologies", "standalone,async,semisync,galera", "the topologies to create and measure, comma-separated")
	workloads := fs.String("workloads", "oltp_read_write,oltp_insert", "sysbench workloads, comma-separated")
	threads := fs.String("threads", "1,8,32,64", "sysbench client threads, comma-separated")
	paths := fs.String("paths", "direct,vigil", "how the clients reach the servers: direct, vigil or both")
	duration := fs.Duration("duration", 5*time.Second, "length of one measured run (whole seconds)")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured run before the first thread count of every variant and workload (0 for none)")
	out := fs.String("out", "", "output directory (default bench/out/topology-<timestamp>)")
	keep := fs.Bool("keep", false, "leave the sandboxes the bench created running")
	verbose := fs.Bool("verbose", false, "log the sandboxes' progress")
	sandboxDir := fs.String("sandbox", "", "measure the running sandbox in DIR (its own topology) instead of creating sandboxes")
	cfgPath := fs.String("config", "", "measure the servers of a Vigil config instead of creating sandboxes")
	cluster := fs.String("cluster", "", "with --config: the cluster to measure (default: the only one)")
	vigilAddr := fs.String("vigil", "", "with --config: the HOST:PORT of a Vigil in front of the cluster, for the vigil path")
	vary := fs.Bool("vary-durability", false, "with --sandbox or --config: SET GLOBAL the durability variants (restored at the end)")
	vigilBin := fs.String("vigil-binary", "", "the vigil program the bench starts (default: the vigil beside vigil-bench, else on PATH)")
	tables := fs.Int("tables", 4, "sysbench tables")
	tableSize := fs.Int("table-size", 10000, "rows per sysbench table")
	if code, done := parseCommandFlags(fs, topologyUsage, args, stderr); done {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o, err := topologyOptions(set, *quick, *topologies, *workloads, *threads, *paths)
	if err != nil {
		fmt.Fprintf(stderr, "vigil-bench topology: %v\n", err)
		return 2
	}
	if *quick && !set["duration"] {
		*duration = 3 * time.Second
	}
	if *quick && !set["warmup"] {
		*warmup = time.Second
	}
	if *tables < 1 || *tableSize < 1 {
		fmt.Fprintln(stderr, "vigil-bench topology: --tables and --table-size must be at least 1")
		return 2
	}
	o.Duration, o.Warmup, o.OutDir, o.Keep = *duration, *warmup, *out, *keep
	o.SandboxDir, o.ConfigPath, o.Cluster, o.VigilAddr, o.VaryDurability = *sandboxDir, *cfgPath, *cluster, *vigilAddr, *vary
	o.Tables, o.TableSize = *tables, *tableSize
	if (o.SandboxDir != "" || o.ConfigPath != "") && set["topologies"] {
		fmt.Fprintln(stderr, "vigil-bench topology: --topologies is for the sandboxes the bench creates; --sandbox and --config servers have their own topology")
		return 2
	}
	if o.VigilBin, err = vigilBinary(*vigilBin); err != nil {
		fmt.Fprintf(stderr, "vigil-bench topology: %v\n", err)
		return 1
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "vigil-bench topology: %v\n", err)
		return 2
	}
	o.VigilVersion = vigilVersion(ctx, o.VigilBin)
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	o.Progress = stderr
	t0 := time.Now()
	res, dir, err := RunTopology(ctx, o)
	var plots []string
	switch {
	case res == nil:
		dir = "" // nothing measured: no results to point at
	case dir != "":
		writeTopologySummary(stdout, res)
		plots = res.Plots
	}
	return finishCommand(ctx, "vigil-bench topology", dir, plots, err, t0, stdout, stderr)
}

// topologyOptions parses the list flags; --quick narrows those not given.
func topologyOptions(set map[string]bool, quick bool, topologies, workloads, threads, paths string) (TopologyOptions, error) {
	o := TopologyOptions{Quick: quick}
	if quick && !set["threads"] {
		threads = "1,32"
	}
	if quick && !set["workloads"] {
		workloads = "oltp_insert"
	}
	var err error
	if o.Threads, err = ParseIntList(threads); err != nil {
		return o, fmt.Errorf("--threads: %w", err)
	}
	lists := []struct {
		flag, value string
		dst         *[]string
	}{{"topologies", topologies, &o.Topologies}, {"workloads", workloads, &o.Workloads}, {"paths", paths, &o.Paths}}
	for _, l := range lists {
		for _, v := range strings.Split(l.value, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			if contains(*l.dst, v) {
				return o, fmt.Errorf("--%s: %s given twice", l.flag, v)
			}
			*l.dst = append(*l.dst, v)
		}
		if len(*l.dst) == 0 {
			return o, fmt.Errorf("--%s: empty list", l.flag)
		}
	}
	return o, nil
}

// writeTopologySummary prints the shapes and the failover sentences.
func writeTopologySummary(w io.Writer, res *TopologyResults) {
	fmt.Fprintf(w, "\n%d runs; datadirs: %s\n\nWhat a failover can lose:\n", len(res.Runs), res.Storage)
	for _, l := range res.Losses {
		fmt.Fprintf(w, "  %s: %s\n", l.Name(), l.Sentence)
	}
	fmt.Fprintln(w, "\nKnown shapes:")
	for _, s := range res.Shapes {
		fmt.Fprintf(w, "  %-4s %s: %s\n", strings.ToUpper(s.Verdict("no", "n/a", "yes")), s.Name, s.Evidence)
	}
}
