package bench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// sample is what is read around a run: CPU of the proxy and of the
// servers, and the statement counters of every node.
type sample struct {
	proxy     ProcCPU
	proxyOK   bool
	servers   ProcCPU
	serversOK bool
	status    map[string]map[string]int64
	statusErr error
}

// ServerCounters are the global status counters read on every node around
// each run: they show where a proxy sent the statements and how many
// statements the servers ran per client query (a proxy that prepares or
// resets more than the client asked for shows here).
func ServerCounters() []string {
	return []string{"Questions", "Com_select", "Com_stmt_prepare", "Com_stmt_execute", "Com_stmt_close", "Com_stmt_reset", "Com_set_option"}
}

func (e *env) serverPIDs() []int {
	var pids []int
	for _, n := range e.sb.Nodes() {
		pids = append(pids, n.PID)
	}
	return pids
}

func (e *env) takeSample(ctx context.Context, t Target) sample {
	var s sample
	if t.PID != 0 {
		c, err := ReadProcCPU(t.PID)
		s.proxy, s.proxyOK = c, err == nil
	}
	s.servers, s.serversOK = cpuOf(e.serverPIDs())
	s.status = map[string]map[string]int64{}
	q := "SHOW GLOBAL STATUS WHERE Variable_name IN ('" + strings.Join(ServerCounters(), "','") + "')"
	for _, n := range e.nodes {
		m, err := queryCounters(ctx, e.rootDBs[n], q)
		if err != nil {
			s.statusErr = fmt.Errorf("%s: %w", n, err)
			break
		}
		s.status[n] = m
	}
	return s
}

func queryCounters(ctx context.Context, db *sql.DB, q string) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		m[name] = v
	}
	return m, rows.Err()
}

// measure runs one sysbench case against one target and reads the costs
// around it. logPath, when set, keeps sysbench's output.
func (e *env) measure(ctx context.Context, sc Scenario, t Target, threads int, d time.Duration, logPath string) Measurement {
	r := Measurement{Scenario: sc.Name, Target: t.Name, Threads: threads, Start: time.Now(), Generator: "sysbench"}
	c, err := e.conn(t.Addr)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	args := RunArgs(sc, c, threads, int(d/time.Second))
	before := e.takeSample(ctx, t)
	t0 := time.Now()
	bin, cargs := e.clientCommand(args...)
	cmd, out, err := runSysbench(ctx, d+90*time.Second, bin, cargs)
	r.WallSeconds = time.Since(t0).Seconds()
	after := e.takeSample(ctx, t)
	if logPath != "" {
		header := "$ " + bin + " " + strings.Join(cargs, " ") + "\n"
		_ = os.WriteFile(logPath, append([]byte(header), out...), 0o644)
	}
	r.Sysbench = ParseSysbench(string(out))
	if cmd.ProcessState != nil {
		r.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		r.Error = fmt.Sprintf("sysbench: %v", err)
		if len(r.Sysbench.Fatal) > 0 {
			r.Error += ": " + r.Sysbench.Fatal[0]
		}
	}
	var client *float64
	if ps := cmd.ProcessState; ps != nil {
		client = ptr((ps.UserTime() + ps.SystemTime()).Seconds())
	}
	e.derive(&r, t, before, after, client)
	return r
}

// measureGo runs the Go load generator (load) against one target, pinned
// to the client CPUs if asked, and reads the costs around it. logPath,
// when set, keeps a summary of the run.
func (e *env) measureGo(ctx context.Context, c Case, t Target, logPath string, load func(context.Context) LoadResult) Measurement {
	r := Measurement{Scenario: c.Scenario.Name, Target: t.Name, Threads: c.Threads, Idle: c.Idle, Start: time.Now(), Generator: "go"}
	unpin := e.pinSelf(ctx)
	before := e.takeSample(ctx, t)
	self0, selfErr := ReadProcCPU(os.Getpid())
	t0 := time.Now()
	lr := load(ctx)
	r.WallSeconds = time.Since(t0).Seconds()
	self1, selfErr1 := ReadProcCPU(os.Getpid())
	after := e.takeSample(ctx, t)
	unpin()
	r.Sysbench = lr.Sysbench()
	if ctx.Err() != nil {
		r.Error = ctx.Err().Error()
	}
	if logPath != "" {
		_ = os.WriteFile(logPath, []byte(goRunLog(c, t, lr, r.Sysbench)), 0o644)
	}
	var client *float64
	if selfErr == nil && selfErr1 == nil {
		client = ptr(float64(self1.Ticks()-self0.Ticks()) / ClockTicks)
	}
	e.derive(&r, t, before, after, client)
	return r
}

// goRunLog is the record of a Go load run kept next to sysbench's logs.
func goRunLog(c Case, t Target, lr LoadResult, s SysbenchResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Go load generator: %s against %s (%s)\n", CaseLabel(c.Scenario.Name, c.Threads, c.Idle), t.Name, t.Addr)
	fmt.Fprintf(&b, "events: %d (%.2f per sec.)\nqueries: %d (%.2f per sec.)\nerrors: %d\n", lr.Events, s.TPS, lr.Queries, s.QPS, lr.Errors)
	if lr.FirstError != "" {
		fmt.Fprintf(&b, "first error: %s\n", lr.FirstError)
	}
	fmt.Fprintf(&b, "elapsed: %.3fs\nlatency ms: avg %.3f p50 %.3f p95 %.3f p99 %.3f max %.3f\n", lr.Elapsed.Seconds(), s.AvgMs, s.P50Ms, s.P95Ms, s.P99Ms, s.MaxMs)
	return b.String()
}

// derive fills the per-query costs of a run from the samples around it;
// clientCPU is the client's CPU seconds, if known.
func (e *env) derive(r *Measurement, t Target, before, after sample, clientCPU *float64) {
	q := float64(r.Sysbench.Queries)
	if q == 0 {
		return
	}
	perQuery := func(seconds float64) *float64 { return ptr(seconds * 1e6 / q) }
	if t.PID != 0 && before.proxyOK && after.proxyOK {
		cpu := float64(after.proxy.Ticks()-before.proxy.Ticks()) / ClockTicks
		r.ProxyCPUSeconds = ptr(cpu)
		r.ProxyCPUUsPerQuery = perQuery(cpu)
		if rss, err := ReadVmRSS(t.PID); err == nil {
			r.ProxyRSSKiB = ptr(rss)
		}
	}
	if before.serversOK && after.serversOK {
		r.ServerCPUUsPerQuery = perQuery(float64(after.servers.Ticks()-before.servers.Ticks()) / ClockTicks)
	}
	if clientCPU != nil {
		r.ClientCPUUsPerQuery = perQuery(*clientCPU)
	}
	if before.statusErr == nil && after.statusErr == nil {
		r.ServerCounters = map[string]map[string]int64{}
		var selects, onReplicas, questions int64
		for _, n := range e.nodes {
			d := map[string]int64{}
			for k, v := range after.status[n] {
				d[k] = v - before.status[n][k]
			}
			r.ServerCounters[n] = d
			selects += d["Com_select"]
			questions += d["Questions"]
			if n != e.primary {
				onReplicas += d["Com_select"]
			}
		}
		if selects > 0 && selectShareMeaningful(r.ServerCounters, r.Sysbench.Queries) {
			r.ReplicaSelectShare = ptr(float64(onReplicas) / float64(selects))
		}
		r.ServerStatementsPerQuery = ptr(float64(questions) / q)
	}
}

// threadsConnected is Threads_connected summed over the nodes.
func (e *env) threadsConnected(ctx context.Context) (int64, error) {
	var sum int64
	for _, n := range e.nodes {
		m, err := queryCounters(ctx, e.rootDBs[n], "SHOW GLOBAL STATUS WHERE Variable_name = 'Threads_connected'")
		if err != nil {
			return 0, fmt.Errorf("%s: %w", n, err)
		}
		sum += m["Threads_connected"]
	}
	return sum, nil
}

// runSysbench runs sysbench in its own session (see ownSession), so a
// Ctrl-C reaches it only through ctx, and returns its combined output.
func runSysbench(ctx context.Context, timeout time.Duration, bin string, args []string) (*exec.Cmd, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.SysProcAttr = ownSession()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("no result within %s: killed", timeout)
	}
	return cmd, buf.Bytes(), err
}

// runCommand runs a short helper command and returns its combined output.
func runCommand(ctx context.Context, timeout time.Duration, prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// lastLines is the last n lines of out.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
