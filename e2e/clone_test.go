package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/lifecycle"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// cloneEnv is a 3-node sandbox with agents, Vigil in front, and a table
// written through Vigil.
type cloneEnv struct {
	*clusterEnv
	t       *testing.T
	ctx     context.Context
	cfg     *config.Config
	cfgPath string
	db      *sql.DB
}

func newCloneEnv(t *testing.T) *cloneEnv { return newCloneEnvSpares(t, 0) }

// newCloneEnvSpares is newCloneEnv with spares (vigil sandbox up --spares).
func newCloneEnvSpares(t *testing.T, spares int) *cloneEnv {
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, Agents: true, Spares: spares, VigilBinary: BuildVigil(t)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	cfgPath := filepath.Join(env.sb.Dir(), "vigil-e2e.yaml")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clusters[0].Servers[2].Agent == "" || cfg.Agents.Cert == "" {
		t.Fatalf("vigil sandbox up --agents wrote no agent keys: %+v %+v", cfg.Agents, cfg.Clusters[0].Servers)
	}
	if w := env.writer(t); w != "node1" {
		t.Fatalf("writer %q, want node1", w)
	}
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr))
	mustExec(t, db, "CREATE TABLE vigil_test.clone_t (id INT PRIMARY KEY, pad VARCHAR(255))")
	return &cloneEnv{clusterEnv: env, t: t, ctx: ctx, cfg: cfg, cfgPath: cfgPath, db: db}
}

// insert writes rows [from, to) through Vigil, 200 bytes each.
func (e *cloneEnv) insert(from, to int) {
	e.t.Helper()
	for i := from; i < to; i += 500 {
		var b strings.Builder
		b.WriteString("INSERT INTO vigil_test.clone_t VALUES ")
		for j := i; j < min(i+500, to); j++ {
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(%d, REPEAT('x', 200))", j)
		}
		mustExec(e.t, e.db, b.String())
	}
}

func (e *cloneEnv) count(node string) (int, error) {
	rows, err := e.sb.SQL(e.ctx, node, "SELECT COUNT(*) FROM vigil_test.clone_t")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(rows[0][0])
}

func (e *cloneEnv) waitCount(node string, want int) {
	e.t.Helper()
	Eventually(e.t, 60*time.Second, fmt.Sprintf("%s has %d rows", node, want), func() error {
		n, err := e.count(node)
		if err != nil || n != want {
			return fmt.Errorf("%d rows (%v)", n, err)
		}
		return nil
	})
}

// clones is GET /api/v1/clone.
func (e *cloneEnv) clones() (running, finished []lifecycle.Progress) {
	e.t.Helper()
	out, err := e.ctl(e.t, "--json", "clones")
	if err != nil {
		e.t.Fatalf("clones: %v\n%s", err, out)
	}
	var all struct{ Running, Finished []lifecycle.Progress }
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		e.t.Fatalf("clones: %v\n%s", err, out)
	}
	return all.Running, all.Finished
}

// cloneRun is a `vigil ctl clone … --wait` running in the background.
type cloneRun struct {
	e    *cloneEnv
	done chan cloneResult
}

type cloneResult struct {
	out string
	err error
}

// startClone runs `vigil ctl clone ARGS --wait` in the background and
// waits until its stream has moved at least 1 MB.
func (e *cloneEnv) startClone(args ...string) *cloneRun {
	e.t.Helper()
	r := &cloneRun{e: e, done: make(chan cloneResult, 1)}
	go func() {
		out, err := e.ctl(e.t, append(append([]string{"clone"}, args...), "--wait")...)
		r.done <- cloneResult{out, err}
	}()
	Eventually(e.t, 30*time.Second, "the stream under way", func() error {
		running, _ := e.clones()
		if len(running) != 1 || running[0].Phase != lifecycle.PhaseStreaming || running[0].Bytes < 1<<20 {
			return fmt.Errorf("running: %+v", running)
		}
		return nil
	})
	return r
}

// wait returns the command's output once it ended.
func (r *cloneRun) wait() cloneResult {
	r.e.t.Helper()
	select {
	case res := <-r.done:
		r.e.t.Logf("vigil ctl clone --wait:\n%s", res.out)
		return res
	case <-r.e.ctx.Done():
		r.e.t.Fatal("the clone did not end")
	}
	return cloneResult{}
}

// brokenReplica fills the table, then stops node3's replication and
// writes 1000 rows more that it lacks.
func (e *cloneEnv) brokenReplica() {
	e.t.Helper()
	e.insert(0, 20000)
	e.waitCount("node3", 20000)
	if err := e.sb.Exec(e.ctx, "node3", "STOP SLAVE"); err != nil {
		e.t.Fatal(err)
	}
	e.insert(20000, 21000)
}

// TestCloneRepairsReplica: a 3-node sandbox with an agent per node and
// Vigil running. node3 stops replicating and loses a table; `vigil ctl
// clone node3 --from node2 --wait` streams node2's backup onto it through
// the agents, points it at the writer from the backup's GTID and routes it
// again: it has every row written through Vigil, replicates what follows
// and is ONLINE. Then node2 is cloned with the donor left to Vigil (node3,
// the only caught-up replica left). Refused on the way: a clone of the writer, a second clone
// while one runs, and (after a reload drops node3's agent) a clone to a
// server without an agent.
func TestCloneRepairsReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	t0 := time.Now()
	e := newCloneEnv(t)
	env, ctx, cfg, cfgPath := e.clusterEnv, e.ctx, e.cfg, e.cfgPath
	insert, count, waitCount := e.insert, e.count, e.waitCount
	insert(0, 30000)
	waitCount("node3", 30000)

	// node3 breaks: replication stopped, the table gone; rows go on.
	if err := env.sb.Exec(ctx, "node3", "STOP SLAVE", "SET SESSION sql_log_bin = 0; DROP TABLE vigil_test.clone_t"); err != nil {
		t.Fatal(err)
	}
	insert(30000, 31000)
	if _, err := count("node3"); err == nil {
		t.Fatal("node3 still has the table")
	}

	// Refused: the writer.
	if out, err := env.ctl(t, "clone", "node1", "--from", "node2"); err == nil || !strings.Contains(out, "node1 is the writer; switch over first") || !strings.Contains(out, "HTTP 409") {
		t.Fatalf("clone of the writer: %v\n%s", err, out)
	}

	// The dry run names the donor and the writer and starts nothing.
	if out, err := env.ctl(t, "clone", "node3", "--dry-run"); err != nil ||
		!strings.Contains(out, "would clone node3 in cluster") || !strings.Contains(out, "replicate from node1") || !strings.Contains(out, "nothing was started") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if out, err := env.ctl(t, "--json", "clones"); err != nil || strings.Contains(out, `"target": "node3"`) {
		t.Fatalf("the dry run started a clone: %v\n%s", err, out)
	}

	// The clone, followed with --wait; a second clone while it runs is
	// refused.
	type result struct {
		out  string
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		out, err := env.ctl(t, "clone", "node3", "--from", "node2", "--rate", "500MiB", "--wait")
		done <- result{out, err, time.Since(start)}
	}()
	Eventually(t, 20*time.Second, "the clone runs", func() error {
		out, err := env.ctl(t, "--json", "clones")
		if err != nil {
			return err
		}
		var all struct{ Running []lifecycle.Progress }
		if err := json.Unmarshal([]byte(out), &all); err != nil {
			return err
		}
		if len(all.Running) != 1 {
			return fmt.Errorf("running: %s", out)
		}
		return nil
	})
	if out, err := env.ctl(t, "clone", "node2", "--from", "node1"); err == nil || !strings.Contains(out, "already runs a clone") || !strings.Contains(out, "HTTP 409") {
		t.Fatalf("second clone: %v\n%s", err, out)
	}
	if s := env.server(t, "node3"); s.State != "OFFLINE_HARD" {
		t.Errorf("node3 is %s during the clone, want OFFLINE_HARD", s.State)
	}
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the clone did not end")
	}
	if res.err != nil {
		t.Fatalf("vigil ctl clone --wait: %v\n%s\nevents:\n%s", res.err, res.out, env.events(t))
	}
	t.Logf("vigil ctl clone --wait (%s):\n%s", res.took.Round(time.Millisecond), res.out)

	// node3 has every row, replicates from the writer and is routed.
	waitCount("node3", 31000)
	rows, err := env.sb.SQL(ctx, "node3", "SHOW SLAVE STATUS")
	if err != nil || len(rows) != 1 {
		t.Fatalf("node3's replica status: %v %v", rows, err)
	}
	st := strings.Join(rows[0], " ")
	if n1 := env.sb.Addr("node1"); !strings.Contains(st, " Yes Yes ") || !strings.Contains(st, n1[strings.LastIndex(n1, ":")+1:]) {
		t.Errorf("node3 does not replicate from node1: %s", st)
	}
	insert(31000, 32000)
	waitCount("node3", 32000)
	Eventually(t, 30*time.Second, "node3 ONLINE", func() error {
		if s := env.server(t, "node3"); s.State != "ONLINE" {
			return fmt.Errorf("node3 is %s (%s)", s.State, s.Reason)
		}
		return nil
	})
	out, err := env.ctl(t, "--json", "clones")
	if err != nil {
		t.Fatal(err)
	}
	var all struct{ Finished []lifecycle.Progress }
	if err := json.Unmarshal([]byte(out), &all); err != nil || len(all.Finished) != 1 || all.Finished[0].Phase != lifecycle.PhaseDone {
		t.Fatalf("clones: %v\n%s", err, out)
	}
	p := all.Finished[0]
	if p.Limit != 500<<20 || p.GTID == "" || p.Bytes <= 0 {
		t.Errorf("finished clone: %+v", p)
	}
	t.Logf("clone: %d bytes (donor datadir %d) streamed at %.1f MB/s, %s from request to routed-back", p.Bytes, p.TotalBytes, p.RateBytes/1e6,
		p.Finished.Sub(p.Started).Round(time.Millisecond))
	ev := env.events(t)
	for _, k := range []string{"clone_started", "clone_finished"} {
		if !strings.Contains(ev, k) {
			t.Errorf("no %s event:\n%s", k, ev)
		}
	}
	if m := metric(t, env, `vigil_clone_bytes_total{cluster="sandbox"}`); m <= 0 {
		t.Errorf("vigil_clone_bytes_total = %v", m)
	}

	// Vigil chooses the donor: for node2, the only caught-up replica left
	// is node3, itself just cloned.
	Eventually(t, 30*time.Second, "node3 caught up", func() error {
		if s := env.server(t, "node3"); s.LagSeconds == nil || *s.LagSeconds > 1 {
			return fmt.Errorf("node3 lag %v", s.LagSeconds)
		}
		return nil
	})
	out, err = env.ctl(t, "clone", "node2", "--wait")
	if err != nil || !strings.Contains(out, "cloning node2 from node3 (caught-up replica") {
		t.Fatalf("clone of node2 with the donor chosen: %v\n%s", err, out)
	}
	insert(32000, 32500)
	waitCount("node2", 32500)

	// Refused after a reload that drops node3's agent: no agent.
	cfg.Clusters[0].Servers[2].Agent = ""
	data, _ := cfg.Marshal()
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := env.ctl(t, "reload"); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if out, err := env.ctl(t, "clone", "node3"); err == nil || !strings.Contains(out, "node3 has no agent") {
		t.Fatalf("clone to a server without an agent: %v\n%s", err, out)
	}
	t.Logf("TestCloneRepairsReplica took %s", time.Since(t0).Round(time.Millisecond))
}

// metric reads one series of Vigil's /metrics.
func metric(t *testing.T, env *clusterEnv, series string) float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+env.admin+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken(env.admin))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// At a line's start: "# HELP name ..." names the series too.
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics", series)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s in /metrics: %v", series, err)
	}
	return v
}

// TestCloneDonorKilled: the donor's server is killed while its backup
// streams (throttled to make room for it). The clone fails with an event
// that says what to do; the target stays OFFLINE_HARD with its own data
// and server untouched, also across a restart of Vigil, and another
// clone is accepted afterwards.
func TestCloneDonorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newCloneEnv(t)
	e.brokenReplica()
	run := e.startClone("node3", "--from", "node2", "--rate", "4MiB")
	if err := e.sb.Kill(e.ctx, "node2"); err != nil {
		t.Fatal(err)
	}
	res := run.wait()
	if res.err == nil || !strings.Contains(res.out, "clone failed") {
		t.Fatalf("clone with its donor killed: %v\n%s", res.err, res.out)
	}
	_, finished := e.clones()
	if len(finished) != 1 || finished[0].Phase != lifecycle.PhaseFailed || finished[0].Error == "" {
		t.Fatalf("finished: %+v", finished)
	}
	if s := e.server(t, "node3"); s.State != "OFFLINE_HARD" {
		t.Errorf("node3 is %s after the failed clone, want OFFLINE_HARD", s.State)
	}
	// node3 still runs on its own datadir: the rows it had, not more.
	if n, err := e.count("node3"); err != nil || n != 20000 {
		t.Errorf("node3 has %d rows (%v), want its own 20000", n, err)
	}
	ev, _ := e.ctl(t, "events", "--kind", "clone_failed")
	if !strings.Contains(ev, "node3 stays out of routing (OFFLINE_HARD)") || !strings.Contains(ev, "datadir is unchanged") {
		t.Errorf("clone_failed event:\n%s", ev)
	}
	if m := metric(t, e.clusterEnv, `vigil_clone_failures_total{cluster="sandbox"}`); m != 1 {
		t.Errorf("vigil_clone_failures_total = %v", m)
	}
	// A restarted Vigil keeps node3 out of routing (the state dir's
	// lifecycle-<cluster>-out.json) and says why.
	e.v.stop()
	e.v = startVigil(t, e.cfgPath, e.addr)
	Eventually(t, 15*time.Second, "node3 OFFLINE_HARD after a restart", func() error {
		if s := e.server(t, "node3"); s.State != "OFFLINE_HARD" || !strings.Contains(s.Reason, "its clone failed") {
			return fmt.Errorf("node3 is %s (%s)", s.State, s.Reason)
		}
		return nil
	})
	// The clone slot is free again: with node2 down, node1 (the writer)
	// is the only donor left, used only when named.
	out, err := e.ctl(t, "clone", "node3", "--from", "node1", "--wait")
	if err != nil {
		t.Fatalf("clone from the writer after the failure: %v\n%s", err, out)
	}
	e.insert(21000, 21500)
	e.waitCount("node3", 21500)
}

// TestCloneDonorRestart: the donor Vigil chose (node2, the only replica
// left) is killed mid-stream: the clone restarts from the last member
// standing, the writer, and completes; the target stays out of routing
// until then.
func TestCloneDonorRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newCloneEnv(t)
	e.brokenReplica()
	run := e.startClone("node3", "--rate", "4MiB")
	if running, _ := e.clones(); len(running) != 1 || running[0].Donor != "node2" {
		t.Fatalf("donor chosen: %+v", running)
	}
	if err := e.sb.Kill(e.ctx, "node2"); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "the clone restarted from node1", func() error {
		running, finished := e.clones()
		for _, p := range append(running, finished...) {
			if p.Donor == "node1" && p.DonorRestarts == 1 {
				return nil
			}
		}
		return fmt.Errorf("running %+v, finished %+v", running, finished)
	})
	if s := e.server(t, "node3"); s.State != "OFFLINE_HARD" {
		t.Errorf("node3 is %s while its clone restarts, want OFFLINE_HARD", s.State)
	}
	res := run.wait()
	_, finished := e.clones()
	if len(finished) != 1 || finished[0].Phase != lifecycle.PhaseDone || finished[0].Donor != "node1" || res.err != nil {
		t.Fatalf("finished: %+v (%v)", finished, res.err)
	}
	ev, _ := e.ctl(t, "events", "--kind", "clone_donor_changed")
	if !strings.Contains(ev, "the stream from node2 failed") || !strings.Contains(ev, "restarts from node1") {
		t.Errorf("clone_donor_changed event:\n%s", ev)
	}
	e.insert(21000, 21500)
	e.waitCount("node3", 21500)
	Eventually(t, 30*time.Second, "node3 ONLINE", func() error {
		if s := e.server(t, "node3"); s.State != "ONLINE" {
			return fmt.Errorf("node3 is %s (%s)", s.State, s.Reason)
		}
		return nil
	})
}

// TestCloneFollowsSwitchover: the primary changes (a switchover to the
// donor) while the backup streams; the target is pointed at the primary
// of that moment, so it replicates from the new one.
func TestCloneFollowsSwitchover(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newCloneEnv(t)
	e.insert(0, 20000)
	e.waitCount("node3", 20000)
	run := e.startClone("node3", "--from", "node2", "--rate", "6MiB")
	if out, err := e.ctl(t, "switchover", "--to", "node2"); err != nil {
		t.Fatalf("switchover during the clone: %v\n%s", err, out)
	}
	e.insert(20000, 21000)
	if res := run.wait(); res.err != nil || !strings.Contains(res.out, "done: node3 replicates") {
		t.Fatalf("clone: %v\nevents:\n%s", res.err, e.events(t))
	}
	if ev, _ := e.ctl(t, "events", "--kind", "clone_finished"); !strings.Contains(ev, "replicating from node2") {
		t.Errorf("clone_finished does not name node2:\n%s", ev)
	}
	e.insert(21000, 21500)
	e.waitCount("node3", 21500)
}
