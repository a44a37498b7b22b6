package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/sandbox"
	"github.com/vigil-db/vigil/internal/shardmove"
)

// tenantAcks inserts rows with unique keys into one tenant through the
// sharded listener and remembers the keys the listener acknowledged.
// Errors (a killed primary, a killed Vigil) are counted, not fatal: what
// the faults tests assert is that no acknowledged row is lost.
type tenantAcks struct {
	mu     sync.Mutex
	acked  []int
	errs   int
	lastEr string
	stop   func()
}

func startTenantAcks(e *shardEnv, t *testing.T, tenant string) *tenantAcks {
	return startTenantAcksAt(t, e.shards, tenant, 1_000_000)
}

// startTenantAcksAt writes keys from base on through the sharded
// listener at addr.
func startTenantAcksAt(t *testing.T, addr, tenant string, base int) *tenantAcks {
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/%s?timeout=2s&readTimeout=10s&writeTimeout=10s", addr, tenant))
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &tenantAcks{}
	go func() {
		defer close(done)
		for k := base; ctx.Err() == nil; k++ {
			// Not ctx: a statement cancelled by stop may still commit.
			_, err := db.Exec("INSERT INTO acct (k, v) VALUES (?, 'acked')", k)
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, k)
			} else {
				w.errs++
				w.lastEr = err.Error()
			}
			w.mu.Unlock()
			if err != nil {
				time.Sleep(50 * time.Millisecond)
			} else {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	w.stop = func() { cancel(); <-done }
	t.Cleanup(w.stop)
	return w
}

func (w *tenantAcks) errCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs
}

func (w *tenantAcks) lastErr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastEr
}

func (w *tenantAcks) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// awaitMore waits until n more rows were acknowledged.
func (w *tenantAcks) awaitMore(t *testing.T, n int, what string) {
	t.Helper()
	want := w.count() + n
	Eventually(t, 30*time.Second, fmt.Sprintf("%d more acknowledged writes %s", n, what), func() error {
		if c := w.count(); c < want {
			w.mu.Lock()
			defer w.mu.Unlock()
			return fmt.Errorf("%d of %d (errors %d, last %s)", c, want, w.errs, w.lastEr)
		}
		return nil
	})
}

// requireAllOn stops the writer and checks every acknowledged key is in
// tenant's acct on node.
func (w *tenantAcks) requireAllOn(t *testing.T, sb *sandbox.Sandbox, node, tenant string) {
	t.Helper()
	w.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := sb.SQL(ctx, node, "SELECT k FROM "+tenant+".acct WHERE k >= 1000000")
	if err != nil {
		t.Fatalf("%s on %s: %v", tenant, node, err)
	}
	have := map[int]bool{}
	for _, r := range rows {
		k, _ := strconv.Atoi(r[0])
		have[k] = true
	}
	var lost []int
	for _, k := range w.acked {
		if !have[k] {
			lost = append(lost, k)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes to %s are not on %s: %v", len(lost), len(w.acked), tenant, node, lost[:min(len(lost), 10)])
	}
	t.Logf("%s: %d acknowledged writes all on %s (%d rows there; %d client errors during the faults)", tenant, len(w.acked), node, len(rows), w.errs)
}

// clusterWriter is the writer of a cluster behind the sharded listener.
func (e *shardEnv) clusterWriter(t testing.TB, cluster string) string {
	for _, c := range e.shardsView(t).Clusters {
		if c.Name == cluster {
			return c.Writer
		}
	}
	return ""
}

// awaitNewWriter waits until cluster's writer is neither old nor none.
func (e *shardEnv) awaitNewWriter(t *testing.T, cluster, old string) string {
	t.Helper()
	var w string
	Eventually(t, 45*time.Second, "a failover of cluster "+cluster, func() error {
		if w = e.clusterWriter(t, cluster); w == "" || w == old {
			return fmt.Errorf("writer %q", w)
		}
		return nil
	})
	return w
}

// runningMove is the move GET /api/v1/shards/move shows running.
func (e *shardEnv) runningMove(t testing.TB) *shardmove.Journal {
	out, err := e.ctl(t, "--json", "shard", "moves")
	if err != nil {
		t.Fatalf("vigil ctl shard moves: %v: %s", err, out)
	}
	var v struct {
		Running *shardmove.Journal `json:"running"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("vigil ctl shard moves: %v: %s", err, out)
	}
	return v.Running
}

// awaitFollow waits until the running move followed n failovers.
func (e *shardEnv) awaitFollow(t *testing.T, n int) string {
	t.Helper()
	var note string
	Eventually(t, 30*time.Second, "the move follows the failover", func() error {
		j := e.runningMove(t)
		if j == nil || len(j.Follows) < n {
			return fmt.Errorf("running %+v", j)
		}
		note = j.Follows[n-1]
		return nil
	})
	return note
}

// manualMove starts a move that waits for its cutover and waits for it to
// wait.
func (e *shardEnv) manualMove(t *testing.T, tenant, to string) {
	t.Helper()
	out, err := e.ctl(t, "shard", "move", tenant, "--to", to, "--manual-cutover", "--wait")
	if err != nil || !strings.Contains(out, "waiting for the cutover") {
		t.Fatalf("shard move %s --manual-cutover: %v\n%s", tenant, err, out)
	}
}

// abortMove undoes tenant's move to cluster `to` and checks the target
// has no copy left.
func (e *shardEnv) abortMove(t *testing.T, tenant, to string) {
	t.Helper()
	out, err := e.ctl(t, "shard", "abort", tenant, "--wait")
	if err != nil || !strings.Contains(out, "aborted") {
		t.Fatalf("shard abort %s: %v\n%s", tenant, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := e.sb.SQL(ctx, e.clusterWriter(t, to), "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = '"+tenant+"'"); err != nil || r[0][0] != "0" {
		t.Errorf("%s still on %s after the abort: %v %v", tenant, to, r, err)
	}
}

// cutover gives the go-ahead and checks the move's verify and hold.
func (e *shardEnv) cutover(t *testing.T, tenant string) {
	t.Helper()
	out, err := e.ctl(t, "shard", "cutover", tenant, "--wait")
	if err != nil {
		t.Fatalf("shard cutover %s: %v\n%s", tenant, err, out)
	}
	t.Logf("vigil ctl shard cutover %s --wait:\n%s", tenant, out)
	if !strings.Contains(out, "checksums equal") {
		t.Errorf("the verify step did not find equal checksums: %s", out)
	}
	requireHeldAtMost(t, out, time.Second)
}

// TestShardMoveFaults: the faults of a move that has caught up and waits
// for its cutover, each while a tenant is written through the sharded
// listener: a failover of the source cluster (the move connection follows
// the new source primary by GTID), a failover of the target cluster (the
// connection is recreated on the new target primary), and the Vigil
// running the move killed (the restarted one goes on from its journal).
// Each ends with the cutover: checksums equal, every acknowledged write on
// the target.
func TestShardMoveFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	RequireMariaDB(t)
	e := newShardEnv(t)
	c1, c2 := e.clusters[0], e.clusters[1]
	ctx := context.Background()

	// killVigil kills Vigil with kill -9 (its children with it) and starts
	// it again, owned by the whole test (a subtest's cleanup would stop
	// it when the subtest ends).
	whole := t
	killVigil := func(t *testing.T) {
		if err := syscall.Kill(-e.v.pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-e.v.exited
		e.v = startVigil(whole, filepath.Join(e.sb.Dir(), "vigil-e2e.yaml"), e.addr)
	}

	// A failover of cluster `of` while tenant's move to c2 waits for its
	// cutover; the move's note of the follow says want.
	failoverDuringMove := func(t *testing.T, tenant, of, want string) {
		w := startTenantAcks(e, t, tenant)
		e.manualMove(t, tenant, c2)
		w.awaitMore(t, 20, "while the move follows")
		old := e.clusterWriter(t, of)
		mustRun(t, "kill "+old, e.sb.Kill(ctx, old))
		nw := e.awaitNewWriter(t, of, old)
		note := e.awaitFollow(t, 1)
		t.Logf("%s failed over %s -> %s; %s", of, old, nw, note)
		if !strings.Contains(note, want) {
			t.Errorf("the move's follow does not say %q: %s", want, note)
		}
		w.awaitMore(t, 50, "after the failover, replicated to the target")
		e.cutover(t, tenant)
		w.awaitMore(t, 20, "on the target after the cutover")
		w.requireAllOn(t, e.sb, e.clusterWriter(t, c2), tenant)
	}
	t.Run("source failover", func(t *testing.T) { failoverDuringMove(t, "tenant2", c1, "repointed at") })
	t.Run("target failover", func(t *testing.T) { failoverDuringMove(t, "tenant3", c2, "recreated on") })

	// The copies differ at the verify: the move stops before its
	// cutover, routing untouched, and abort drops the target's copy.
	t.Run("checksum differs", func(t *testing.T) {
		w := startTenantAcks(e, t, "tenant1")
		e.manualMove(t, "tenant1", c2)
		if _, err := e.sb.SQL(ctx, e.clusterWriter(t, c2), "UPDATE tenant1.acct SET v = 'changed on the target' WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		out, err := e.ctl(t, "shard", "cutover", "tenant1", "--wait")
		if err == nil || !strings.Contains(out, "copies differ") {
			t.Fatalf("cutover of copies that differ: %v\n%s", err, out)
		}
		errs := w.errCount()
		w.awaitMore(t, 20, "after the failed verify, still on the source")
		if d := w.errCount() - errs; d != 0 {
			t.Errorf("%d client errors after the failed verify: %s", d, w.lastErr())
		}
		e.abortMove(t, "tenant1", c2)
		w.requireAllOn(t, e.sb, e.clusterWriter(t, c1), "tenant1")
	})

	// mariadb-dump fails (a view over a dropped table): the partial copy
	// is dropped, routing untouched; abort clears the failed move.
	t.Run("dump fails", func(t *testing.T) {
		if err := e.sb.Exec(ctx, e.clusterWriter(t, c1), "CREATE DATABASE broken", "CREATE TABLE broken.t (a INT)", "INSERT INTO broken.t VALUES (1)",
			"CREATE TABLE broken.gone (a INT)", "CREATE VIEW broken.v AS SELECT a FROM broken.gone", "DROP TABLE broken.gone"); err != nil {
			t.Fatal(err)
		}
		db := e.db(t, "")
		Eventually(t, 15*time.Second, "schema broken found by the sharded listener", func() error {
			_, err := db.Exec("SELECT a FROM broken.t")
			return err
		})
		out, err := e.ctl(t, "shard", "move", "broken", "--to", c2, "--wait")
		if err == nil || !strings.Contains(out, "partial copy on "+c2+" was dropped") {
			t.Fatalf("a move whose dump fails: %v\n%s", err, out)
		}
		t.Logf("the failed move:\n%s", out)
		if _, err := db.Exec("INSERT INTO broken.t VALUES (2)"); err != nil {
			t.Errorf("a write after the failed move: %v", err)
		}
		if out, err := e.ctl(t, "shard", "move", "broken", "--to", c2); err == nil || !strings.Contains(out, "abort") {
			t.Errorf("a second move of a schema whose move failed: %v\n%s", err, out)
		}
		e.abortMove(t, "broken", c2)
	})

	// A move with --reverse, a failover of the old cluster (its reverse
	// connection is recreated on the new primary), then the rollback: the
	// old copy kept every write made after the cutover and serves again;
	// cleanup drops the new cluster's copy.
	t.Run("rollback", func(t *testing.T) {
		w := startTenantAcks(e, t, "tenant5")
		w.awaitMore(t, 20, "before the move")
		errs := w.errCount()
		if out, err := e.ctl(t, "shard", "move", "tenant5", "--to", c1, "--reverse", "--wait"); err != nil || !strings.Contains(out, "vigil_back_tenant5") {
			t.Fatalf("shard move tenant5 --reverse: %v\n%s", err, out)
		}
		w.awaitMore(t, 50, "on the new cluster, coming back over the reverse connection")
		// The old cluster, which holds the reverse connection, fails over:
		// the connection is recreated on its new primary.
		// c2 failed over minutes ago (target failover): anti-flapping
		// blocks an automatic one, so the operator fails it over.
		old := e.clusterWriter(t, c2)
		mustRun(t, "kill "+old, e.sb.Kill(ctx, old))
		Eventually(t, 30*time.Second, "a manual failover of "+c2, func() error {
			out, err := e.ctl(t, "--cluster", c2, "failover")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
		nw := e.awaitNewWriter(t, c2, old)
		Eventually(t, 30*time.Second, "the reverse connection following the failover", func() error {
			out, err := e.ctl(t, "--json", "shard", "moves")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			var v struct{ Last *shardmove.Journal }
			if err := json.Unmarshal([]byte(out), &v); err != nil || v.Last == nil || len(v.Last.Follows) == 0 {
				return fmt.Errorf("last %+v (%v)", v.Last, err)
			}
			t.Logf("%s failed over %s -> %s; %s", c2, old, nw, v.Last.Follows[0])
			return nil
		})
		w.awaitMore(t, 50, "on the new cluster after the old one failed over")
		out, err := e.ctl(t, "shard", "move", "tenant5", "--rollback", "--wait")
		if err != nil || !strings.Contains(out, "rolled_back") {
			t.Fatalf("shard move tenant5 --rollback: %v\n%s", err, out)
		}
		t.Logf("vigil ctl shard move tenant5 --rollback --wait:\n%s", out)
		requireHeldAtMost(t, strings.ReplaceAll(out, "rollback   ", "cutover    "), time.Second)
		w.awaitMore(t, 20, "on the old cluster again")
		if d := w.errCount() - errs; d != 0 {
			t.Errorf("%d client errors through the move and its rollback: %s", d, w.lastErr())
		}
		if out, err := e.ctl(t, "shard", "cleanup", "tenant5", "--wait"); err != nil {
			t.Fatalf("cleanup after the rollback: %v\n%s", err, out)
		}
		w.requireAllOn(t, e.sb, e.clusterWriter(t, c2), "tenant5")
		bg, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if r, err := e.sb.SQL(bg, e.clusterWriter(t, c1), "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'tenant5'"); err != nil || r[0][0] != "0" {
			t.Errorf("tenant5 still on %s after the cleanup of the rollback: %v %v", c1, r, err)
		}
	})

	// Vigil killed with kill -9 (its mariadb-dump and mariadb with it)
	// while the copy streams: the restarted Vigil finds the copy in
	// progress in its journal, drops the partial copy and copies again,
	// then finishes the move.
	t.Run("Vigil killed mid-copy", func(t *testing.T) {
		src := e.clusterWriter(t, c2)
		if err := e.sb.Exec(ctx, src, "CREATE TABLE tenant8.bulk (id INT PRIMARY KEY, pad VARCHAR(200) NOT NULL)",
			"INSERT INTO tenant8.bulk SELECT seq, REPEAT('p', 200) FROM tenant8.seq_1_to_200000"); err != nil {
			t.Fatal(err)
		}
		w := startTenantAcks(e, t, "tenant8")
		w.awaitMore(t, 20, "before the move")
		if out, err := e.ctl(t, "shard", "move", "tenant8", "--to", c1); err != nil {
			t.Fatalf("shard move tenant8: %v\n%s", err, out)
		}
		Eventually(t, 30*time.Second, "the copy streaming", func() error {
			j := e.runningMove(t)
			if j == nil || j.Step != 1 || len(j.Results) < 2 || !j.Results[1].Finished.IsZero() {
				return fmt.Errorf("running %+v", j)
			}
			return nil
		})
		killVigil(t)
		var last *shardmove.Journal
		Eventually(t, 90*time.Second, "the restarted Vigil finishes the move", func() error {
			out, err := e.ctl(t, "--json", "shard", "moves")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			var v struct {
				Running *shardmove.Journal `json:"running"`
				Last    *shardmove.Journal `json:"last"`
			}
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				return err
			}
			if v.Running != nil || v.Last == nil || v.Last.Schema != "tenant8" {
				return fmt.Errorf("running %+v", v.Running)
			}
			last = v.Last
			return nil
		})
		if last.State != shardmove.StateDone {
			t.Fatalf("the resumed move ended %s: %s", last.State, last.Error)
		}
		copies := 0
		for _, r := range last.Results {
			if r.Name == shardmove.StepCopy {
				copies++
			}
			t.Logf("  %-10s %s %s", r.Name, r.Detail, r.Error)
		}
		if copies != 2 {
			t.Errorf("the journal shows %d copies, want the interrupted one and the one after the restart", copies)
		}
		w.awaitMore(t, 20, "on the target after the move")
		dst := e.clusterWriter(t, c1)
		w.requireAllOn(t, e.sb, dst, "tenant8")
		bg, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		a, err1 := e.sb.SQL(bg, src, "CHECKSUM TABLE tenant8.bulk")
		b, err2 := e.sb.SQL(bg, dst, "CHECKSUM TABLE tenant8.bulk")
		if err1 != nil || err2 != nil || a[0][1] != b[0][1] {
			t.Errorf("tenant8.bulk checksums: source %v %v, target %v %v", a, err1, b, err2)
		}
	})

	t.Run("acting Vigil killed", func(t *testing.T) {
		w := startTenantAcks(e, t, "tenant4")
		e.manualMove(t, "tenant4", c2)
		w.awaitMore(t, 20, "while the move follows")
		killVigil(t)
		Eventually(t, 30*time.Second, "the restarted Vigil resumes the waiting move", func() error {
			if j := e.runningMove(t); j == nil || j.Schema != "tenant4" || j.State != shardmove.StateWaiting {
				return fmt.Errorf("running %+v", j)
			}
			return nil
		})
		w.awaitMore(t, 50, "through the restarted Vigil")
		e.cutover(t, "tenant4")
		w.awaitMore(t, 20, "on the target after the cutover")
		w.requireAllOn(t, e.sb, e.clusterWriter(t, c2), "tenant4")
		if ev := e.events(t); !strings.Contains(ev, "shard_move_resumed") {
			t.Errorf("no shard_move_resumed event:\n%s", ev)
		}
	})
}
