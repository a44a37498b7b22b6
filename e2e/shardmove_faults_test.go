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

	t.Run("acting Vigil killed", func(t *testing.T) {
		w := startTenantAcks(e, t, "tenant4")
		e.manualMove(t, "tenant4", c2)
		w.awaitMore(t, 20, "while the move follows")
		pid := e.v.pid()
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-e.v.exited
		e.v = startVigil(t, filepath.Join(e.sb.Dir(), "vigil-e2e.yaml"), e.addr)
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
