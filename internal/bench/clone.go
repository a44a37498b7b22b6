package bench

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/lifecycle"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// `vigil-bench clone` (make bench-clone): the replica lifecycle of issue
// 27 measured on a 3-node replication sandbox with an agent per node and
// the real daemon. node1 is the primary, node2 the donor, node3 the
// target of every clone.

const (
	cloneDonor  = "node2"
	cloneTarget = "node3"
	cloneSchema = "bench_clone"
)

// CloneOptions configure `vigil-bench clone`.
type CloneOptions struct {
	// SizeMB is the table's size on disk (default 1024).
	SizeMB int
	// Reps repeats every measurement (default 3).
	Reps int
	// Rate is the throttled clone's --rate in bytes/s (default 20 MB/s).
	Rate int64
	// LoadThreads read the donor during the load measurement (default 4);
	// Baseline is the load's measured window without a clone (default 10s).
	LoadThreads int
	Baseline    time.Duration
	// SelfHealing adds the kill -9 → full redundancy measurement
	// (HealRuns times, each bounded by HealTimeout).
	SelfHealing bool
	// HealNoKey runs the same kills without the key: the baseline (a new
	// writer, but nobody rebuilds the old primary), and a check of the
	// measurement itself before the key exists.
	HealNoKey   bool
	HealRuns    int
	HealTimeout time.Duration
	// OutDir receives OUT/clone-<timestamp>/{results.json,report.txt,logs}.
	OutDir string
	// Keep leaves the sandbox and the work directory.
	Keep         bool
	VigilBin     string
	VigilVersion string
	Progress     io.Writer
	Logger       *slog.Logger
}

func (o *CloneOptions) defaults() {
	if o.SizeMB <= 0 {
		o.SizeMB = 1024
	}
	if o.Reps <= 0 {
		o.Reps = 3
	}
	if o.Rate <= 0 {
		o.Rate = 20 << 20
	}
	if o.LoadThreads <= 0 {
		o.LoadThreads = 4
	}
	if o.Baseline <= 0 {
		o.Baseline = 10 * time.Second
	}
	if o.HealRuns <= 0 {
		o.HealRuns = 1
	}
	if o.HealTimeout <= 0 {
		o.HealTimeout = 15 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// cloneEnv is one run's sandbox, daemon and results.
type cloneEnv struct {
	o       CloneOptions
	started time.Time
	work    string // /tmp/vigil-bench-clone-*: the sandbox and scratch dirs
	out     string // OUT/clone-<timestamp>: results and logs
	sb      *sandbox.Sandbox
	cfg     *config.Config
	vigil   *child
	api     adminAPI
	res     *CloneResults
	lastID  int64 // the newest clone id seen
}

func (e *cloneEnv) progress(format string, args ...any) {
	progressf(e.o.Progress, e.started, format, args...)
}

func (e *cloneEnv) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.res.Notes = append(e.res.Notes, msg)
	e.progress("note: %s", msg)
}

// RunClone performs the clone bench and writes its results; it tears
// everything down on the way out, failed or not. dir is where the
// results are (empty when none were written).
func RunClone(ctx context.Context, o CloneOptions) (res *CloneResults, dir string, err error) {
	o.defaults()
	e := &cloneEnv{o: o, started: time.Now()}
	e.res = &CloneResults{Started: e.started, SizeMB: o.SizeMB, Reps: o.Reps, RateLimit: o.Rate, LoadThreads: o.LoadThreads,
		Machine: DescribeMachine(ctx, o.VigilVersion)}
	e.out = filepath.Join(o.OutDir, "clone-"+e.started.UTC().Format("20060102-150405"))
	if err := os.MkdirAll(e.out, 0o755); err != nil {
		return e.res, "", err
	}
	err = e.run(ctx)
	e.res.Machine.LoadEnd = loadAvg()
	e.res.Summary = SummarizeClone(e.res)
	if werr := e.write(); werr != nil {
		return e.res, "", errors.Join(err, werr)
	}
	return e.res, e.out, err
}

func (e *cloneEnv) write() error {
	data, err := json.MarshalIndent(e.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(e.out, "results.json"), data, 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := WriteCloneText(&b, e.res); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.out, "report.txt"), b.Bytes(), 0o644)
}

func (e *cloneEnv) run(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("the clone bench needs root (the sandbox's servers and agents, mariadb-backup)")
	}
	work, err := os.MkdirTemp("/tmp", "vigil-bench-clone-") // short: unix socket paths
	if err != nil {
		return err
	}
	e.work = work
	defer e.tearDown()
	// The servers run as user mysql and must reach their datadirs.
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	if err := e.setUp(ctx); err != nil {
		return err
	}
	if err := e.fill(ctx); err != nil {
		return fmt.Errorf("filling the dataset: %w", err)
	}
	if err := e.throughput(ctx); err != nil {
		return err
	}
	if err := e.donorLoad(ctx); err != nil {
		return err
	}
	if e.o.SelfHealing {
		return e.heal(ctx)
	}
	e.res.HealSkipped = "not asked for (--self-healing)"
	return nil
}

func (e *cloneEnv) setUp(ctx context.Context) error {
	dir := filepath.Join(e.work, "sandbox")
	e.progress("starting a 3-node replication sandbox with agents in %s", dir)
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: dir, Topology: sandbox.Replication, Nodes: 3, Agents: true,
		VigilBinary: e.o.VigilBin, Logger: e.o.Logger})
	e.sb = sb
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if e.cfg, err = config.Load(sb.ConfigPath()); err != nil {
		return err
	}
	if e.cfg.Agents.Cert == "" {
		return fmt.Errorf("%s names no agents: the sandbox was not started with agents", sb.ConfigPath())
	}
	// The heal measurement fails over more than once.
	e.cfg.Clusters[0].Failover.MinInterval = config.Duration{Duration: time.Second}
	path := filepath.Join(e.work, "vigil-clone.yaml")
	if err := writeConfig(e.cfg, path); err != nil {
		return err
	}
	return e.startVigil(ctx, path)
}

// startVigil runs the daemon with the config at path and waits for a
// routed writer.
func (e *cloneEnv) startVigil(ctx context.Context, path string) error {
	var err error
	e.vigil, err = startChild("vigil", filepath.Join(e.out, "vigil.log"), e.o.VigilBin, "run", "--config", path)
	if err != nil {
		return err
	}
	if err := e.vigil.waitListening(ctx, e.cfg.Admin.Listen, 30*time.Second); err != nil {
		return err
	}
	e.api = adminAPI{addr: e.cfg.Admin.Listen, token: e.cfg.Admin.Token}
	return waitFor(ctx, 30*time.Second, "a routed writer", func() error {
		_, err := e.api.writer(ctx)
		return err
	})
}

func (e *cloneEnv) tearDown() {
	if e.vigil != nil {
		if err := e.vigil.stop(15 * time.Second); err != nil {
			e.note("vigil: %v", err)
		}
	}
	if e.sb != nil && !e.o.Keep {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := e.sb.Down(ctx, true); err != nil {
			e.note("sandbox down: %v (work directory %s kept)", err, e.work)
			return
		}
	}
	if e.o.Keep {
		e.note("kept the sandbox and the work directory %s (vigil sandbox down --dir %s/sandbox --purge)", e.work, e.work)
		return
	}
	if err := os.RemoveAll(e.work); err != nil {
		e.note("remove %s: %v", e.work, err)
	}
}

// fill writes the dataset on the primary: a table of 1000-byte random
// rows (incompressible), grown by INSERT … SELECT in 16 MB transactions
// until its file reaches SizeMB, plus a 10,000-row table for the read
// load; waits until both replicas have it and purges the binary logs so
// the disk holds the data only once per node.
func (e *cloneEnv) fill(ctx context.Context) error {
	t0 := time.Now()
	db, err := e.sb.RootDB("node1")
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, st := range []string{
		"CREATE DATABASE IF NOT EXISTS " + cloneSchema,
		"CREATE TABLE " + cloneSchema + ".fill (id BIGINT AUTO_INCREMENT PRIMARY KEY, pad VARBINARY(1000) NOT NULL) ENGINE=InnoDB",
		"INSERT INTO " + cloneSchema + ".fill (pad) VALUES (RANDOM_BYTES(1000))",
		"SET SESSION max_recursive_iterations = 1000000",
		"CREATE TABLE " + cloneSchema + ".point (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL) ENGINE=InnoDB",
		"INSERT INTO " + cloneSchema + ".point WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 10000) SELECT n, n * 7 % 10000, LEFT(REPEAT(SHA2(n, 256), 2), 120) FROM s",
	} {
		if _, err := conn.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
	}
	target := int64(e.o.SizeMB) * 1_000_000
	const chunk = 16384
	rows, nextReport := int64(1), int64(100_000_000)
	e.progress("filling %s.fill on node1 to %d MB on disk", cloneSchema, e.o.SizeMB)
	for {
		size, err := tableFileSize(ctx, conn, cloneSchema+"/fill")
		if err != nil {
			return err
		}
		if size >= target {
			e.res.TableBytes = size
			break
		}
		if size >= nextReport {
			e.progress("  %d MB, %d rows", size/1_000_000, rows)
			nextReport += 100_000_000
		}
		n := min(rows, chunk)
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+cloneSchema+".fill (pad) SELECT RANDOM_BYTES(1000) FROM "+cloneSchema+".fill LIMIT "+strconv.FormatInt(n, 10)); err != nil {
			return err
		}
		rows += n
	}
	var pos string
	if err := conn.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return err
	}
	e.progress("filled: %d MB on disk, %d rows in %s; waiting for the replicas (GTID %s)", e.res.TableBytes/1_000_000, rows, time.Since(t0).Round(time.Second), pos)
	for _, n := range []string{"node2", "node3"} {
		rows, err := e.sb.SQL(ctx, n, "SELECT MASTER_GTID_WAIT('"+pos+"', 1800)")
		if err != nil {
			return err
		}
		if len(rows) == 0 || len(rows[0]) == 0 || rows[0][0] != "0" {
			return fmt.Errorf("%s did not reach GTID %s within 30 minutes", n, pos)
		}
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		if err := e.sb.Exec(ctx, n, "FLUSH BINARY LOGS", "PURGE BINARY LOGS BEFORE NOW()"); err != nil {
			return err
		}
	}
	e.res.FillSeconds = time.Since(t0).Seconds()
	a, err := e.sb.AgentClient(cloneDonor)
	if err != nil {
		return err
	}
	defer a.Close()
	st, err := a.Status(ctx)
	if err != nil {
		return fmt.Errorf("%s's agent: %w", cloneDonor, err)
	}
	e.res.DonorDatadirBytes = st.DatadirBytes
	e.progress("replicas caught up, binary logs purged; %s's datadir is %d MB (%s in all)", cloneDonor, st.DatadirBytes/1_000_000, time.Since(t0).Round(time.Second))
	return nil
}

// tableFileSize is the size of an InnoDB tablespace's file.
func tableFileSize(ctx context.Context, conn *sql.Conn, name string) (int64, error) {
	var n int64
	err := conn.QueryRowContext(ctx, "SELECT FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = ?", name).Scan(&n)
	return n, err
}

// throughput alternates a raw pipe run and a clone, Reps times.
func (e *cloneEnv) throughput(ctx context.Context) error {
	for i := 1; i <= e.o.Reps; i++ {
		raw := e.rawRun(ctx, i)
		e.res.Raw = append(e.res.Raw, raw)
		if raw.Error != "" {
			e.progress("[raw %d/%d] FAILED: %s", i, e.o.Reps, raw.Error)
		} else {
			e.progress("[raw %d/%d] %d MB in %.2f s: %.1f MB/s", i, e.o.Reps, raw.Bytes/1_000_000, raw.Seconds, float64(raw.Bytes)/raw.Seconds/1e6)
		}
		c := e.cloneRun(ctx, CloneKindPlain, i, 0)
		e.res.Clones = append(e.res.Clones, c)
		e.progress("[clone %d/%d] %s", i, e.o.Reps, cloneLine(c))
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.Error != "" {
			return fmt.Errorf("clone run %d failed: %s", i, c.Error)
		}
	}
	return nil
}

func cloneLine(c CloneRun) string {
	if c.Error != "" {
		return "FAILED: " + c.Error
	}
	return fmt.Sprintf("%d MB streamed %s in %.2f s (%.1f MB/s), whole clone %.1f s", c.Bytes/1_000_000, cmp.Or(c.Path, "relayed by Vigil"), c.StreamSeconds, c.StreamBytesPerSecond()/1e6, c.TotalSeconds)
}

// rawRun is `mariadb-backup --backup --stream=xbstream | mbstream -x` of
// the donor, with the agent's arguments (--slave-info on a replica), the
// bytes counted by one 256 KiB copy in between (the agent copies too);
// both directories are removed afterwards.
func (e *cloneEnv) rawRun(ctx context.Context, i int) RawPipeRun {
	r := RawPipeRun{Run: i}
	n, err := e.sb.Node(cloneDonor)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	dir := filepath.Join(e.work, fmt.Sprintf("raw-%d", i))
	defer os.RemoveAll(dir)
	extract := filepath.Join(dir, "extract")
	if err := os.MkdirAll(extract, 0o755); err != nil {
		r.Error = err.Error()
		return r
	}
	backupBin, err1 := lookProgram("mariadb-backup")
	mbstreamBin, err2 := lookProgram("mbstream")
	if err := errors.Join(err1, err2); err != nil {
		r.Error = err.Error()
		return r
	}
	var bkErr, mbErr bytes.Buffer
	bk := exec.CommandContext(ctx, backupBin, "--no-defaults", "--backup", "--stream=xbstream", "--slave-info",
		"--user=root", "--socket="+n.Socket, "--target-dir="+filepath.Join(dir, "target"))
	bk.Stderr = &bkErr
	mb := exec.CommandContext(ctx, mbstreamBin, "-x", "-C", extract)
	mb.Stderr = &mbErr
	out, err := bk.StdoutPipe()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	in, err := mb.StdinPipe()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	t0 := time.Now()
	if err := mb.Start(); err != nil {
		r.Error = err.Error()
		return r
	}
	if err := bk.Start(); err != nil {
		in.Close()
		_ = mb.Wait()
		r.Error = err.Error()
		return r
	}
	r.Bytes, err = io.CopyBuffer(in, out, make([]byte, 256<<10))
	in.Close()
	bkWait, mbWait := bk.Wait(), mb.Wait()
	r.Seconds = time.Since(t0).Seconds()
	r.CPUSeconds = map[string]float64{}
	for name, c := range map[string]*exec.Cmd{"mariadb-backup": bk, "mbstream": mb} {
		if ps := c.ProcessState; ps != nil {
			r.CPUSeconds[name] = (ps.UserTime() + ps.SystemTime()).Seconds()
		}
	}
	switch {
	case err != nil:
		r.Error = "copy: " + err.Error()
	case bkWait != nil:
		r.Error = fmt.Sprintf("mariadb-backup: %v: %s", bkWait, lastLines(bkErr.Bytes(), 3))
	case mbWait != nil:
		r.Error = fmt.Sprintf("mbstream: %v: %s", mbWait, lastLines(mbErr.Bytes(), 3))
	}
	return r
}

// cloneRun runs `vigil ctl clone node3 --from node2 --wait [--rate R]`
// and follows it through GET /api/v1/clone every 100 ms for the phases.
func (e *cloneEnv) cloneRun(ctx context.Context, kind string, i int, rate int64) CloneRun {
	r := CloneRun{Kind: kind, Run: i, RateLimit: rate}
	args := []string{"ctl", "--sandbox", e.sb.Dir(), "clone", cloneTarget, "--from", cloneDonor, "--wait", "--poll", "250ms"}
	if rate > 0 {
		args = append(args, "--rate", strconv.FormatInt(rate, 10))
	}
	logPath := filepath.Join(e.out, fmt.Sprintf("ctl-%s-%d.log", kind, i))
	f, err := os.Create(logPath)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, e.o.VigilBin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		r.Error = err.Error()
		return r
	}
	cpu0 := e.cloneCPU()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	seen := map[string]time.Time{}
	var cur lifecycle.Progress
	poll := func() {
		var all struct{ Running, Finished []lifecycle.Progress }
		if err := e.api.do(ctx, http.MethodGet, "/api/v1/clone", nil, &all); err != nil {
			return
		}
		now := time.Now()
		for _, p := range append(all.Running, all.Finished...) {
			if p.ID > e.lastID && p.Target == cloneTarget && p.ID >= cur.ID {
				cur = p
			}
		}
		if cur.ID != 0 {
			if _, ok := seen[cur.Phase]; !ok {
				seen[cur.Phase] = now
			}
		}
	}
	var waitErr error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-tick.C:
			poll()
		}
	}
	poll()
	cpu1 := e.cloneCPU()
	if cur.ID != 0 {
		e.lastID = cur.ID
	}
	if waitErr != nil || cur.Phase != lifecycle.PhaseDone {
		r.Error = fmt.Sprintf("vigil ctl clone: %v, phase %q %s; %s ends with: %s", waitErr, cur.Phase, cur.Error, logPath, tailFile(logPath, 5))
		return r
	}
	r.Bytes, r.Path = cur.Bytes, cur.Path
	r.CPUSeconds = map[string]float64{}
	for k, c1 := range cpu1 {
		if c0, ok := cpu0[k]; ok {
			r.CPUSeconds[k] = c1 - c0
		}
	}
	if cur.RateBytes > 0 {
		r.StreamSeconds = float64(cur.Bytes) / cur.RateBytes
	}
	end := time.Now()
	if cur.Finished != nil {
		end = *cur.Finished
		r.TotalSeconds = cur.Finished.Sub(cur.Started).Seconds()
	}
	r.Phases = PhaseDurations(seen, end)
	r.StreamFrom, r.StreamTo = streamWindow(seen)
	r.Event = e.lastEvent(ctx, "clone_finished")
	if err := e.waitOnline(ctx, cloneTarget, 2*time.Minute); err != nil {
		r.Error = err.Error()
	}
	return r
}

// cloneCPU is the CPU-seconds used so far by the processes of a clone:
// vigil, each agent and apart the children it waited for, the donor's
// server (the target's restarts during the clone: not counted).
func (e *cloneEnv) cloneCPU() map[string]float64 {
	out := map[string]float64{}
	read := func(name string, pid int, children bool) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || pid <= 0 {
			return
		}
		if c, err := ParseProcStat(string(data)); err == nil {
			out[name] = c.Seconds()
		}
		if !children {
			return
		}
		if c, err := ParseProcStatChildren(string(data)); err == nil {
			out[name+"'s children"] = c.Seconds()
		}
	}
	read("vigil", e.vigil.PID(), false)
	for _, a := range e.sb.Manifest().Agents {
		switch a.Node {
		case cloneDonor:
			read("donor agent", a.PID, true)
		case cloneTarget:
			read("target agent", a.PID, true)
		}
	}
	if pid, err := e.sb.PID(cloneDonor); err == nil {
		read("donor mariadbd", pid, false)
	}
	return out
}

// streamWindow is the streaming phase as polled: from its first sight to
// the first sight of a later phase.
func streamWindow(seen map[string]time.Time) (from, to time.Time) {
	from = seen[lifecycle.PhaseStreaming]
	after := false
	for _, ph := range clonePhases {
		if ph == lifecycle.PhaseStreaming {
			after = true
			continue
		}
		if at, ok := seen[ph]; after && ok {
			return from, at
		}
	}
	return from, time.Time{}
}

// lastEvent is the newest event of kind's message.
func (e *cloneEnv) lastEvent(ctx context.Context, kind string) string {
	var ev []admin.Event
	if err := e.api.do(ctx, http.MethodGet, "/api/v1/events?kind="+kind, nil, &ev); err != nil {
		return ""
	}
	var last admin.Event
	for _, x := range ev {
		if x.Time.After(last.Time) || last.Time.IsZero() {
			last = x
		}
	}
	return last.Message
}

// waitOnline waits until Vigil routes name again.
func (e *cloneEnv) waitOnline(ctx context.Context, name string, timeout time.Duration) error {
	return waitFor(ctx, timeout, name+" ONLINE", func() error {
		list, err := e.api.servers(ctx)
		if err != nil {
			return err
		}
		for _, s := range list {
			if s.Name == name {
				if s.State != "ONLINE" {
					return fmt.Errorf("%s is %s (%s)", name, s.State, s.Reason)
				}
				return nil
			}
		}
		return fmt.Errorf("no server %s", name)
	})
}
