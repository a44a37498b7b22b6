package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// `vigil-bench shards` (make bench-shards): the sharded listener of issue
// 28 against one cluster's own listener, on the same tenant, interleaved.

const shardsTenant = "bench_tenant"

// ShardsOptions configure `vigil-bench shards`.
type ShardsOptions struct {
	Workloads []string // sysbench workloads (default oltp_point_select, oltp_read_only)
	Threads   int
	Seconds   int
	Reps      int
	TableSize int
	// MoveMB is the size of the tenant moved under load (0: no move
	// half); Moves how many times a small tenant moves for the holds.
	MoveMB   int
	Moves    int
	OutDir   string
	Keep     bool
	VigilBin string
	Progress io.Writer
	Logger   *slog.Logger
	Version  string
}

// ShardsRun is one measured sysbench run.
type ShardsRun struct {
	Workload string  `json:"workload"`
	Target   string  `json:"target"` // cluster or shards
	Rep      int     `json:"rep"`
	QPS      float64 `json:"qps"`
	P95Ms    float64 `json:"p95_ms"`
	Errors   int64   `json:"errors"`
}

// ShardsResults are the runs and, per workload, the ratio of the sharded
// listener's qps to the cluster listener's in the same rep.
type ShardsResults struct {
	Started time.Time        `json:"started"`
	Machine Machine          `json:"machine"`
	Threads int              `json:"threads"`
	Seconds int              `json:"seconds"`
	Runs    []ShardsRun      `json:"runs"`
	Ratio   map[string]*Stat `json:"qps_ratio"`
	// Moves is the move half (absent with --move-mb 0).
	Moves *ShardMoveResults `json:"moves,omitempty"`
	Notes []string          `json:"notes,omitempty"`
}

type shardsEnv struct {
	o       ShardsOptions
	started time.Time
	work    string
	out     string
	sb      *sandbox.Sandbox
	cfg     *config.Config
	vigil   *child
	res     *ShardsResults
}

func (e *shardsEnv) progress(format string, args ...any) {
	progressf(e.o.Progress, e.started, format, args...)
}

// RunShards brings up two replication clusters behind one daemon with a
// sharded listener, puts the sysbench tables in a tenant schema on the
// second cluster (the listener's non-default one) and runs each workload
// Reps times through the second cluster's own listener and through the
// sharded listener, alternating which goes first.
func RunShards(ctx context.Context, o ShardsOptions) (*ShardsResults, string, error) {
	e := &shardsEnv{o: o, started: time.Now()}
	e.res = &ShardsResults{Started: e.started, Machine: DescribeMachine(ctx, o.Version), Threads: o.Threads, Seconds: o.Seconds,
		Ratio: map[string]*Stat{}}
	e.out = filepath.Join(o.OutDir, "shards-"+e.started.UTC().Format("20060102-150405"))
	if err := os.MkdirAll(e.out, 0o755); err != nil {
		return e.res, "", err
	}
	err := e.run(ctx)
	e.res.Machine.LoadEnd = loadAvg()
	for _, w := range o.Workloads {
		var ratios []float64
		for rep := 1; rep <= o.Reps; rep++ {
			c, s := e.qps(w, "cluster", rep), e.qps(w, "shards", rep)
			if c > 0 && s > 0 {
				ratios = append(ratios, s/c)
			}
		}
		e.res.Ratio[w] = NewStat(ratios)
	}
	data, _ := json.MarshalIndent(e.res, "", "  ")
	if werr := os.WriteFile(filepath.Join(e.out, "results.json"), data, 0o644); werr != nil {
		err = errors.Join(err, werr)
	}
	return e.res, e.out, err
}

func (e *shardsEnv) qps(w, target string, rep int) float64 {
	for _, r := range e.res.Runs {
		if r.Workload == w && r.Target == target && r.Rep == rep {
			return r.QPS
		}
	}
	return 0
}

func (e *shardsEnv) run(ctx context.Context) error {
	work, err := os.MkdirTemp("/tmp", "vigil-bench-shards-")
	if err != nil {
		return err
	}
	e.work = work
	defer e.tearDown()
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	e.progress("starting two 2-node replication clusters in %s", work)
	e.sb, err = sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(work, "sandbox"), Topology: sandbox.Replication, Nodes: 2, Clusters: 2,
		VigilBinary: e.o.VigilBin, Logger: e.o.Logger})
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if e.cfg, err = config.Load(e.sb.ConfigPath()); err != nil {
		return err
	}
	if len(e.cfg.Clusters) < 2 || !e.cfg.Shards.Enabled() {
		return fmt.Errorf("%s has no second cluster or no sharded listener", e.sb.ConfigPath())
	}
	clusters := e.sb.Clusters()
	primary := clusters[1].Nodes[0]
	if err := e.sb.Exec(ctx, primary, "CREATE DATABASE "+shardsTenant); err != nil {
		return err
	}
	app := e.sb.Accounts().App
	pn, err := e.sb.Node(primary)
	if err != nil {
		return err
	}
	direct := SysbenchConn{Host: sandbox.Host, Port: pn.Port, User: app.User, Password: app.Password, DB: shardsTenant, Tables: 4, TableSize: e.o.TableSize}
	e.progress("preparing 4 sysbench tables of %d rows in %s on %s", e.o.TableSize, shardsTenant, primary)
	args := append([]string{"oltp_read_write"}, direct.Args()...)
	if out, err := runCommand(ctx, 10*time.Minute, "sysbench", append(args, "--threads=4", "prepare")...); err != nil {
		return fmt.Errorf("sysbench prepare: %w\n%s", err, lastLines(out, 10))
	}
	var pos string
	rows, err := e.sb.SQL(ctx, primary, "SELECT @@gtid_binlog_pos")
	if err != nil {
		return err
	}
	pos = rows[0][0]
	for _, n := range clusters[1].Nodes[1:] {
		if _, err := e.sb.SQL(ctx, n, "SELECT MASTER_GTID_WAIT('"+pos+"', 300)"); err != nil {
			return err
		}
	}
	if e.vigil, err = startChild("vigil", filepath.Join(e.out, "vigil.log"), e.o.VigilBin, "run", "--config", e.sb.ConfigPath()); err != nil {
		return err
	}
	if err := e.vigil.waitListening(ctx, e.cfg.Shards.Listen, 30*time.Second); err != nil {
		return err
	}
	targets := map[string]string{"cluster": e.cfg.Clusters[1].Listen, "shards": e.cfg.Shards.Listen}
	for _, addr := range targets {
		if err := waitFor(ctx, 30*time.Second, "the tenant readable through "+addr, func() error {
			return pingTenant(ctx, addr, app.User, app.Password)
		}); err != nil {
			return err
		}
	}
	order := []string{"cluster", "shards"}
	for rep := 1; rep <= e.o.Reps; rep++ {
		for _, w := range e.o.Workloads {
			for _, target := range order {
				if err := e.measure(ctx, w, target, targets[target], rep, direct); err != nil {
					return err
				}
			}
			order[0], order[1] = order[1], order[0]
		}
	}
	if e.o.MoveMB > 0 {
		return e.runMoves(ctx)
	}
	return nil
}

func (e *shardsEnv) measure(ctx context.Context, w, target, addr string, rep int, conn SysbenchConn) error {
	host, port, _ := net.SplitHostPort(addr)
	conn.Host = host
	conn.Port, _ = strconv.Atoi(port)
	args := RunArgs(Scenario{Name: w, Workload: w}, conn, e.o.Threads, e.o.Seconds)
	out, err := runCommand(ctx, time.Duration(e.o.Seconds)*time.Second+2*time.Minute, "sysbench", args...)
	r := ParseSysbench(string(out))
	if err != nil || r.Failed() {
		return fmt.Errorf("sysbench %s through %s: %v %v\n%s", w, target, err, r.Fatal, lastLines(out, 10))
	}
	run := ShardsRun{Workload: w, Target: target, Rep: rep, QPS: r.QPS, P95Ms: r.P95(), Errors: r.Errors()}
	e.res.Runs = append(e.res.Runs, run)
	e.progress("[rep %d] %-18s %-7s %8.0f qps  p95 %.2f ms  %d errors", rep, w, target, run.QPS, run.P95Ms, run.Errors)
	return nil
}

func pingTenant(ctx context.Context, addr, user, password string) error {
	db, err := sql.Open("mysql", sandbox.TCPDSN(addr, user, password, shardsTenant))
	if err != nil {
		return err
	}
	defer db.Close()
	var n int
	return db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sbtest1").Scan(&n)
}

func (e *shardsEnv) tearDown() {
	if e.vigil != nil {
		_ = e.vigil.stop(15 * time.Second)
	}
	if e.sb != nil && !e.o.Keep {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := e.sb.Down(ctx, true); err != nil {
			e.res.Notes = append(e.res.Notes, fmt.Sprintf("sandbox down: %v", err))
			return
		}
		_ = os.RemoveAll(e.work)
	}
}

// WriteShardsText is the report.
func WriteShardsText(w io.Writer, r *ShardsResults) {
	m := r.Machine
	fmt.Fprintf(w, "vigil-bench shards: %d CPUs (%s), load %s → %s, vigil %s\n", m.CPUs, m.CPUModel, m.LoadStart, m.LoadEnd, m.Vigil)
	fmt.Fprintf(w, "sharded listener vs the tenant's cluster listener, %d threads, %ds runs, interleaved\n", r.Threads, r.Seconds)
	for w2, s := range r.Ratio {
		if s == nil {
			continue
		}
		var c, sh []float64
		for _, run := range r.Runs {
			if run.Workload != w2 {
				continue
			}
			if run.Target == "cluster" {
				c = append(c, run.QPS)
			} else {
				sh = append(sh, run.QPS)
			}
		}
		fmt.Fprintf(w, "  %-18s cluster %s qps, shards %s qps, ratio %.3f (%.3f–%.3f, %d reps)\n", w2,
			statText(NewStat(c)), statText(NewStat(sh)), s.Median, s.Min, s.Max, s.N)
	}
	if m := r.Moves; m != nil && m.MoveSeconds > 0 {
		fmt.Fprintf(w, "online move of a %.0f MB tenant under load (a writer on it, point selects on another tenant):\n", m.SizeMB)
		fmt.Fprintf(w, "  dump+load alone %.1f s (%.1f MB/s); the move %.1f s (copy %.1f s): %.1f MB/s = %.2f of the dump+load\n",
			m.DumpLoadSeconds, m.DumpLoadMBps, m.MoveSeconds, m.CopySeconds, m.MoveMBps, m.Ratio)
		fmt.Fprintf(w, "  writes held %.0f ms at the verify, %.0f ms at the cutover; the writer: %d acknowledged, %d errors, %d missing on the target\n",
			m.VerifyHeldMs, m.CutoverHeldMs, m.WriterAcked, m.WriterErrors, m.WriterMissing)
		fmt.Fprintf(w, "  the other tenant's qps: %s before, %s during the move (per second, median (min–max))\n", statText(m.OtherQPSBefore), statText(m.OtherQPSDuring))
		if m.HoldStat != nil {
			fmt.Fprintf(w, "  cutover hold over %d moves of a small tenant written without pause: median %.0f ms, max %.0f ms; its writer %d errors, %d missing\n",
				m.HoldStat.N, m.HoldStat.Median, m.HoldStat.Max, m.SmallErrors, m.SmallMissing)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func statText(s *Stat) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f (%.0f–%.0f)", s.Median, s.Min, s.Max)
}

const shardsUsage = `vigil-bench shards — the sharded listener (issue 28) measured

Usage:
  vigil-bench shards [--threads 32] [--seconds 20] [--reps 3]
                     [--workloads oltp_point_select,oltp_read_only]
                     [--table-size 10000] [--move-mb 1024] [--moves 5]
                     [--out bench/out] [--keep]

Brings up two 2-node replication clusters behind one Vigil with a
sharded listener (vigil sandbox up --clusters 2), puts sysbench's tables
in a tenant schema on the second cluster, and runs each workload --reps
times through that cluster's own listener and through the sharded
listener, alternating which goes first. Prints the qps of each and the
ratio (sharded / cluster) as median and min–max. Then (unless --move-mb
0) it moves a tenant of --move-mb MB from the first cluster to the
second while a writer writes it and 4 threads read the other tenant, all
through the sharded listener: the move's MB/s against mariadb-dump |
mariadb alone, its holds, the other tenant's qps before and during the
move, and every acknowledged write checked on the target; and it moves a
small tenant, written without pause, --moves times for the cutover
holds. Writes OUT/shards-<timestamp>/results.json. Needs root, sysbench and mariadbd.
See docs/benchmarks.md.

Flags:
`

// ShardsCommand is `vigil-bench shards ARGS`.
func ShardsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil-bench shards", flag.ContinueOnError)
	fs.SetOutput(stderr)
	threads := fs.Int("threads", 32, "sysbench threads")
	seconds := fs.Int("seconds", 20, "seconds per run")
	reps := fs.Int("reps", 3, "runs per workload and target")
	workloads := fs.String("workloads", "oltp_point_select,oltp_read_only", "comma-separated sysbench workloads")
	tableSize := fs.Int("table-size", 10000, "rows per sysbench table (4 tables)")
	moveMB := fs.Int("move-mb", 1024, "size of the tenant moved under load, MB (0: no moves)")
	moves := fs.Int("moves", 5, "moves of a small tenant for the cutover holds")
	out := fs.String("out", "bench/out", "directory for the timestamped results")
	keep := fs.Bool("keep", false, "leave the sandbox running")
	vigilBin := fs.String("vigil-binary", "", "the vigil program (default: the vigil beside vigil-bench, else on PATH)")
	if code, done := parseCommandFlags(fs, shardsUsage, args, stderr); done {
		return code
	}
	if *threads < 1 || *seconds < 1 || *reps < 1 || *tableSize < 1 || *moveMB < 0 || *moves < 1 {
		fmt.Fprintln(stderr, "vigil-bench shards: --threads, --seconds, --reps, --table-size and --moves must be at least 1, --move-mb at least 0")
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "vigil-bench shards: needs root (the sandbox's servers)")
		return 1
	}
	exe, err := vigilBinary(*vigilBin)
	if err != nil {
		fmt.Fprintf(stderr, "vigil-bench shards: %v\n", err)
		return 1
	}
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	t0 := time.Now()
	res, dir, err := RunShards(ctx, ShardsOptions{Workloads: strings.Split(*workloads, ","), Threads: *threads, Seconds: *seconds,
		Reps: *reps, TableSize: *tableSize, MoveMB: *moveMB, Moves: *moves, OutDir: *out, Keep: *keep, VigilBin: exe, Version: vigilVersion(ctx, exe),
		Progress: stderr, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if res != nil {
		fmt.Fprintln(stdout)
		WriteShardsText(stdout, res)
	}
	if dir != "" {
		fmt.Fprintf(stdout, "\nResults: %s/results.json\n", dir)
	}
	return finishCommand(ctx, "vigil-bench shards", "", nil, err, t0, stdout, stderr)
}
