package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// ackedWriter inserts rows through Vigil one at a time and remembers
// every id the server acknowledged.
type ackedWriter struct {
	// gate is held for each insert; pause holds it.
	gate  sync.Mutex
	mu    sync.Mutex
	acked []int
	errs  int
	stop  chan struct{}
	done  chan struct{}
}

func startAckedWriter(t *testing.T, db *sql.DB, table string) *ackedWriter {
	w := &ackedWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for id := 1; ; id++ {
			select {
			case <-w.stop:
				return
			default:
			}
			w.gate.Lock()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id) VALUES (%d)", table, id))
			cancel()
			w.gate.Unlock()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, id)
			} else {
				w.errs++
			}
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *ackedWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *ackedWriter) ids() (acked []int, errs int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.acked...), w.errs
}

// missingOn counts the acknowledged ids node lacks.
func missingOn(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, node, table string, acked []int) int {
	t.Helper()
	rows, err := sb.SQL(ctx, node, "SELECT id FROM "+table)
	if err != nil {
		t.Fatalf("%s: %v", node, err)
	}
	have := map[string]bool{}
	for _, r := range rows {
		have[r[0]] = true
	}
	n := 0
	for _, id := range acked {
		if !have[fmt.Sprint(id)] {
			n++
		}
	}
	return n
}

// TestSelfHealingRebuildsDivergedPrimary: a 3-node semi-sync sandbox with
// agents, lifecycle.self_healing on, a write load through Vigil. node1
// commits a transaction no replica receives (semi-sync off on it, the
// replicas' IO threads stopped) and is killed -9: failover. It comes back
// holding that transaction: its rejoin is refused as diverged, the salvage
// writes the transaction to a file, and self-healing rebuilds node1 from a
// caught-up member with no operator step. At the end three members
// replicate, no acknowledged write is lost, and the errant row is only in
// the salvage file.
func TestSelfHealingRebuildsDivergedPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, Agents: true, SemiSync: true, VigilBinary: BuildVigil(t)},
		func(c *config.Config) { c.Clusters[0].Lifecycle.SelfHealing = true })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg, err := config.Load(filepath.Join(env.sb.Dir(), "vigil-e2e.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr))
	mustExec(t, db, "CREATE TABLE vigil_test.heal_t (id INT PRIMARY KEY, note VARCHAR(64))")
	w := startAckedWriter(t, db, "vigil_test.heal_t")
	Eventually(t, 20*time.Second, "writes acknowledged", func() error {
		if a, _ := w.ids(); len(a) < 20 {
			return fmt.Errorf("%d acknowledged", len(a))
		}
		return nil
	})

	// node1 commits what no replica receives, then dies. The load pauses
	// meanwhile: with semi-sync off on node1, what it acknowledged then
	// would be lost with it by design.
	w.gate.Lock()
	for _, r := range []string{"node2", "node3"} {
		if err := env.sb.Exec(ctx, r, "STOP SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.sb.Exec(ctx, "node1", "SET GLOBAL rpl_semi_sync_master_enabled = OFF",
		"INSERT INTO vigil_test.heal_t VALUES (-1, 'errant')"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := env.sb.Kill(ctx, "node1"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"node2", "node3"} {
		if err := env.sb.Exec(ctx, r, "START SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	w.gate.Unlock()
	var np string
	Eventually(t, 30*time.Second, "failover away from node1", func() error {
		if np = env.writer(t); np == "" || np == "node1" {
			return fmt.Errorf("writer %q", np)
		}
		return nil
	})
	t.Logf("kill -9 node1: %s is the writer after %s", np, time.Since(t0).Round(time.Millisecond))
	if err := env.sb.Start(ctx, "node1"); err != nil {
		t.Fatal(err)
	}

	// No operator step from here: salvage, then the rebuild.
	Eventually(t, 150*time.Second, "node1 rebuilt by self-healing", func() error {
		ev := env.events(t)
		if strings.Contains(ev, "rebuild_failed") {
			t.Fatalf("the rebuild failed:\n%s", ev)
		}
		if !strings.Contains(ev, "rebuild_finished") {
			return fmt.Errorf("no rebuild_finished yet")
		}
		return nil
	})
	heal := time.Since(t0)
	Eventually(t, 30*time.Second, "node1 ONLINE as a replica", func() error {
		if s := env.server(t, "node1"); s.State != "ONLINE" || s.Writer {
			return fmt.Errorf("node1 %s (%s)", s.State, s.Reason)
		}
		return nil
	})
	w.halt()
	acked, errs := w.ids()
	t.Logf("kill -9 → node1 rebuilt and routed: %s; %d writes acknowledged, %d failed", heal.Round(time.Millisecond), len(acked), errs)

	// Three replicating members, nothing acknowledged lost.
	for _, n := range []string{"node1", "node2", "node3"} {
		if n == np {
			continue
		}
		rows, err := env.sb.SQL(ctx, n, "SHOW SLAVE STATUS")
		if err != nil || len(rows) != 1 || !strings.Contains(strings.Join(rows[0], " "), " Yes Yes ") {
			t.Errorf("%s does not replicate: %v %v", n, rows, err)
		}
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		Eventually(t, 30*time.Second, n+" has every acknowledged write", func() error {
			if m := missingOn(ctx, t, env.sb, n, "vigil_test.heal_t", acked); m > 0 {
				return fmt.Errorf("%d acknowledged writes missing", m)
			}
			return nil
		})
		if rows, err := env.sb.SQL(ctx, n, "SELECT COUNT(*) FROM vigil_test.heal_t WHERE id = -1"); err != nil || rows[0][0] != "0" {
			t.Errorf("the errant row is on %s: %v %v", n, rows, err)
		}
	}
	// The errant transaction is in a salvage file.
	files, _ := filepath.Glob(filepath.Join(cfg.StateDir, "salvage", "*node1.sql"))
	found := false
	for _, f := range files {
		data, _ := os.ReadFile(f)
		found = found || strings.Contains(string(data), "errant")
	}
	if !found {
		t.Errorf("no salvage file of node1 holds the errant row (files %v)", files)
	}
	ev := env.events(t)
	for _, want := range []string{"self_healing", "rebuild_started", "rebuild_finished"} {
		if !strings.Contains(ev, want) {
			t.Errorf("no %s event", want)
		}
	}
}

// TestRebuildByHand: `vigil ctl rebuild` with self-healing off. node3
// gets an errant transaction (written on it directly); the dry run shows
// the salvage step; a rebuild of the writer is refused, and a second
// rebuild while one runs; the rebuild writes the errant transaction to a
// salvage file, and node3 replicates again without it.
func TestRebuildByHand(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newCloneEnv(t)
	env, ctx := e.clusterEnv, e.ctx
	e.insert(0, 5000)
	e.waitCount("node3", 5000)
	if err := env.sb.Exec(ctx, "node3", "INSERT INTO vigil_test.clone_t VALUES (-1, 'errant')"); err != nil {
		t.Fatal(err)
	}
	if out, err := env.ctl(t, "rebuild", "node1"); err == nil || !strings.Contains(out, "node1 is the writer") || !strings.Contains(out, "HTTP 409") {
		t.Fatalf("rebuild of the writer: %v\n%s", err, out)
	}
	out, err := env.ctl(t, "rebuild", "node3", "--dry-run")
	if err != nil || !strings.Contains(out, "would rebuild node3") || !strings.Contains(out, "salvage: make node3 read-only") || !strings.Contains(out, "nothing was started") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	done := make(chan cloneResult, 1)
	go func() {
		out, err := env.ctl(t, "rebuild", "node3", "--wait")
		done <- cloneResult{out, err}
	}()
	Eventually(t, 20*time.Second, "the rebuild runs", func() error {
		if running, _ := e.clones(); len(running) != 1 || running[0].Kind != "rebuild" {
			return fmt.Errorf("running: %+v", running)
		}
		return nil
	})
	if out, err := env.ctl(t, "rebuild", "node2"); err == nil || !strings.Contains(out, "already runs a rebuild") || !strings.Contains(out, "HTTP 409") {
		t.Fatalf("second rebuild: %v\n%s", err, out)
	}
	var res cloneResult
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the rebuild did not end")
	}
	if res.err != nil {
		t.Fatalf("vigil ctl rebuild --wait: %v\n%s\nevents:\n%s", res.err, res.out, env.events(t))
	}
	t.Logf("vigil ctl rebuild --wait:\n%s", res.out)
	e.insert(5000, 5500)
	e.waitCount("node3", 5500)
	if rows, err := env.sb.SQL(ctx, "node3", "SELECT COUNT(*) FROM vigil_test.clone_t WHERE id = -1"); err != nil || rows[0][0] != "0" {
		t.Errorf("the errant row survived the rebuild: %v %v", rows, err)
	}
	_, fin := e.clones()
	if len(fin) != 1 || fin[0].Kind != "rebuild" || !strings.Contains(fin[0].Salvage, "salvage") {
		t.Fatalf("finished: %+v", fin)
	}
	path := fin[0].Salvage[strings.Index(fin[0].Salvage, "/"):]
	path = strings.TrimRight(path, ")")
	if data, err := os.ReadFile(path); err != nil || !strings.Contains(string(data), "errant") {
		t.Errorf("salvage file %s: %v %q", path, err, data)
	}
	Eventually(t, 30*time.Second, "node3 ONLINE", func() error {
		if s := env.server(t, "node3"); s.State != "ONLINE" {
			return fmt.Errorf("node3 is %s (%s)", s.State, s.Reason)
		}
		return nil
	})
}

// TestSelfHealingReplacesLostMember: a 4-node sandbox with agents whose
// node4 is not a member but a spare (its replication reset: a standalone,
// read-only server with an agent). node3's host is destroyed (killed -9,
// its datadir deleted); after replace_after the spare is cloned in, routed,
// and node3 leaves the cluster, with no operator step.
func TestSelfHealingReplacesLostMember(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	var spare config.Server
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 4, Agents: true, VigilBinary: BuildVigil(t)},
		func(c *config.Config) {
			cl := &c.Clusters[0]
			spare = cl.Servers[3]
			cl.Servers = cl.Servers[:3]
			cl.Lifecycle.SelfHealing = true
			cl.Lifecycle.ReplaceAfter = config.Duration{Duration: 3 * time.Second}
			cl.Lifecycle.Spares = []config.Spare{{Name: spare.Name, Address: spare.Address, Agent: spare.Agent}}
		})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := env.sb.Exec(ctx, "node4", "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = ON"); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr))
	mustExec(t, db, "CREATE TABLE vigil_test.heal_t (id INT PRIMARY KEY, note VARCHAR(64))")
	w := startAckedWriter(t, db, "vigil_test.heal_t")
	Eventually(t, 20*time.Second, "writes acknowledged", func() error {
		if a, _ := w.ids(); len(a) < 20 {
			return fmt.Errorf("%d acknowledged", len(a))
		}
		return nil
	})

	// node3's host is lost.
	var datadir string
	for _, n := range env.sb.Manifest().Nodes {
		if n.Name == "node3" {
			datadir = n.Datadir
		}
	}
	t0 := time.Now()
	if err := env.sb.Kill(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(datadir); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 150*time.Second, "node4 replaces node3", func() error {
		ev := env.events(t)
		if strings.Contains(ev, "self_healing_failed") || strings.Contains(ev, "replace_failed") {
			t.Fatalf("the replacement failed:\n%s", ev)
		}
		if !strings.Contains(ev, "server_replaced") {
			return fmt.Errorf("no server_replaced event yet")
		}
		return nil
	})
	took := time.Since(t0)
	Eventually(t, 30*time.Second, "node4 ONLINE, node3 gone", func() error {
		names := map[string]string{}
		for _, s := range env.servers(t) {
			names[s.Name] = s.State
		}
		if names["node4"] != "ONLINE" {
			return fmt.Errorf("servers: %v", names)
		}
		if _, ok := names["node3"]; ok {
			return fmt.Errorf("node3 is still a member: %v", names)
		}
		return nil
	})
	w.halt()
	acked, errs := w.ids()
	t.Logf("node3 destroyed → node4 cloned in and routed: %s; %d writes acknowledged, %d failed", took.Round(time.Millisecond), len(acked), errs)
	rows, err := env.sb.SQL(ctx, "node4", "SHOW SLAVE STATUS")
	if err != nil || len(rows) != 1 || !strings.Contains(strings.Join(rows[0], " "), " Yes Yes ") {
		t.Errorf("node4 does not replicate: %v %v", rows, err)
	}
	for _, n := range []string{"node2", "node4"} {
		Eventually(t, 30*time.Second, n+" has every acknowledged write", func() error {
			if m := missingOn(ctx, t, env.sb, n, "vigil_test.heal_t", acked); m > 0 {
				return fmt.Errorf("%d acknowledged writes missing", m)
			}
			return nil
		})
	}
	ev := env.events(t)
	for _, want := range []string{"replace_started", "replace_finished", "node4 replaced node3"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events lack %q", want)
		}
	}
}
