package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// readLoad runs point reads through Vigil from several clients and counts
// errors until stopped.
func readLoad(t *testing.T, dsn string, clients int) (stop func() (ok, errs int64)) {
	db := openDB(t, dsn)
	db.SetMaxOpenConns(clients)
	var okN, errN atomic.Int64
	var wg sync.WaitGroup
	quit := make(chan struct{})
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-quit:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var n int
				err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM vigil_test.mon").Scan(&n)
				cancel()
				if err != nil {
					errN.Add(1)
					t.Logf("read error: %v", err)
				} else {
					okN.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	return func() (int64, int64) {
		close(quit)
		wg.Wait()
		return okN.Load(), errN.Load()
	}
}

func TestMonitorReplication(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, func(c *config.Config) {
		c.Clusters[0].Monitor.MaxReplicationLag = config.Duration{Duration: 2 * time.Second}
	})
	nodes := []string{"node1", "node2", "node3"}
	enableUserStats(t, env.sb, nodes)
	dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr)
	mustExec(t, openDB(t, dsn), "CREATE TABLE IF NOT EXISTS mon (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
	ctx := context.Background()

	t.Run("PausedReplica", func(t *testing.T) {
		stop := readLoad(t, dsn, 8)
		time.Sleep(time.Second)
		if err := env.sb.Pause(ctx, "node2"); err != nil {
			t.Fatal(err)
		}
		paused := time.Now()
		Eventually(t, 10*time.Second, "node2 out of routing", func() error {
			if s := env.server(t, "node2"); s.State == "ONLINE" {
				return fmt.Errorf("node2 %s", s.State)
			}
			return nil
		})
		out := time.Since(paused)
		t.Logf("paused node2 left routing after %s", out.Round(time.Millisecond))
		if out > 2*time.Second {
			t.Errorf("node2 left routing after %s, want within 2s", out)
		}
		// While paused, reads keep working on node3 (node2 cannot count).
		before := readCounters(t, env.sb, []string{"node3"})
		time.Sleep(2 * time.Second)
		after := readCounters(t, env.sb, []string{"node3"})
		if d := after.delta(before, "node3", "select"); d < 50 {
			t.Errorf("node3 served only %d reads while node2 was paused", d)
		}
		if err := env.sb.Resume(ctx, "node2"); err != nil {
			t.Fatal(err)
		}
		// Statements that reached node2 just before the pause were held
		// by the frozen process; from now on count what it gets.
		Eventually(t, 15*time.Second, "node2 back ONLINE", func() error {
			if s := env.server(t, "node2"); s.State != "ONLINE" {
				return fmt.Errorf("node2 %s", s.State)
			}
			return nil
		})
		b2 := readCounters(t, env.sb, []string{"node2"})
		time.Sleep(2 * time.Second)
		a2 := readCounters(t, env.sb, []string{"node2"})
		if d := a2.delta(b2, "node2", "select"); d < 20 {
			t.Errorf("node2 got only %d reads after it recovered", d)
		}
		ok, errs := stop()
		t.Logf("%d reads, %d errors", ok, errs)
		if errs > 0 {
			t.Errorf("clients saw %d errors while a replica was paused", errs)
		}
	})

	t.Run("LaggingReplica", func(t *testing.T) {
		if _, err := env.sb.SQL(ctx, "node3", "STOP SLAVE SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		w := openDB(t, dsn)
		stopW := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopW:
					return
				default:
				}
				_, _ = w.Exec("INSERT INTO mon (v) VALUES (1)")
				time.Sleep(50 * time.Millisecond)
			}
		}()
		Eventually(t, 20*time.Second, "node3 SHUNNED for lag", func() error {
			if s := env.server(t, "node3"); s.State != "SHUNNED" || s.Readable {
				return fmt.Errorf("node3 %s readable=%v lag=%v", s.State, s.Readable, s.LagSeconds)
			}
			return nil
		})
		close(stopW)
		wg.Wait()
		if _, err := env.sb.SQL(ctx, "node3", "START SLAVE SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 20*time.Second, "node3 back ONLINE after catching up", func() error {
			if s := env.server(t, "node3"); s.State != "ONLINE" || !s.Readable {
				return fmt.Errorf("node3 %s", s.State)
			}
			return nil
		})
		if ev := env.events(t); !strings.Contains(ev, "lag") {
			t.Errorf("no lag event:\n%s", ev)
		}
	})
}

func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Galera, Nodes: 3}, nil)
	ctx := context.Background()
	dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr)
	mustExec(t, openDB(t, dsn), "CREATE TABLE IF NOT EXISTS vigil_test.acked (n INT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))")

	t.Run("DesyncMovesWriter", func(t *testing.T) {
		first := env.writer(t)
		if _, err := env.sb.SQL(ctx, first, "SET GLOBAL wsrep_desync = ON"); err != nil {
			t.Fatal(err)
		}
		var moved string
		Eventually(t, 15*time.Second, "the writer moves off the desynced node", func() error {
			if w := env.writer(t); w == "" || w == first {
				return fmt.Errorf("writer %q", w)
			}
			moved = env.writer(t)
			return nil
		})
		if s := env.server(t, first); s.Readable || s.Writable {
			t.Errorf("desynced node still routed: %+v", s)
		}
		db := openDB(t, dsn)
		mustExec(t, db, "INSERT INTO acked (n) VALUES (1000000)")
		if _, err := env.sb.SQL(ctx, first, "SET GLOBAL wsrep_desync = OFF"); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 20*time.Second, first+" readable again", func() error {
			if s := env.server(t, first); !s.Readable {
				return fmt.Errorf("%s %s", first, s.State)
			}
			return nil
		})
		if w := env.writer(t); w != moved {
			t.Errorf("writer went back to %s after re-sync; want it to stay on %s", w, moved)
		}
	})

	t.Run("KillWriterUnderLoad", func(t *testing.T) {
		w := startWriter(t, dsn)
		time.Sleep(time.Second)
		old := env.writer(t)
		t0 := time.Now()
		if err := env.sb.Kill(ctx, old); err != nil {
			t.Fatal(err)
		}
		newWriter, took := waitFailover(t, env, w, old, t0)
		time.Sleep(time.Second)
		acked, errs := w.finish()
		t.Logf("killed Galera writer %s: writes continue on %s after %s (%d acknowledged, %d failed)", old, newWriter, took.Round(time.Millisecond), len(acked), errs)
		checkAcked(t, env.sb, newWriter, acked)
	})
}
