package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// TestFailoverTiming is a measurement, not a check: `make bench-failover`
// runs it with VIGIL_BENCH_FAILOVER=N and it prints, over N runs each, the
// time from kill -9 of the primary to the first acknowledged write through
// Vigil, and the write pause of a planned switchover; then, interleaved in
// the same runs, the same outage for a SIGSTOPped and for an isolated
// primary (each on a fresh sandbox: a paused primary that resumes may
// hold a last transaction nobody acknowledged, and is not rejoined).
func TestFailoverTiming(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VIGIL_BENCH_FAILOVER"))
	if n <= 0 || testing.Short() {
		t.Skip("set VIGIL_BENCH_FAILOVER=N (make bench-failover)")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, func(c *config.Config) {
		c.Clusters[0].Failover.MinInterval = config.Duration{Duration: time.Second}
		manualRejoin(c) // each round rejoins the old primary with `vigil ctl rejoin`
	})
	dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr)
	ctx := context.Background()
	var failovers, pauses []time.Duration
	outages := map[string][]time.Duration{}
	for i := range n {
		// Failover: kill the primary under a write loop.
		old := env.writer(t)
		w := startWriter(t, dsn)
		time.Sleep(time.Second)
		t0 := time.Now()
		if err := env.sb.Kill(ctx, old); err != nil {
			t.Fatal(err)
		}
		_, took := waitFailover(t, env, w, old, t0)
		w.finish()
		failovers = append(failovers, took)
		t.Logf("run %d: kill -9 %s → first acknowledged write %s", i+1, old, took.Round(time.Millisecond))
		// Bring the old primary back as a replica for the next round.
		if err := env.sb.Start(ctx, old); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if out, err := env.ctl(t, "rejoin", old); err != nil {
			t.Fatalf("rejoin: %v\n%s", err, out)
		}
		if out, err := env.ctl(t, "ack"); err != nil {
			t.Fatalf("ack: %v\n%s", err, out)
		}
		Eventually(t, 20*time.Second, old+" ONLINE", func() error {
			if s := env.server(t, old); s.State != "ONLINE" {
				return fmt.Errorf("%s %s", old, s.State)
			}
			return nil
		})
		// Switchover under the same write loop.
		w = startWriter(t, dsn)
		time.Sleep(time.Second)
		out, err := env.ctl(t, "--json", "switchover")
		w.finish()
		var res admin.OpResult
		if err != nil || json.Unmarshal([]byte(out), &res) != nil || !res.OK {
			t.Fatalf("switchover: %v\n%s", err, out)
		}
		p := time.Duration(res.PauseMs * float64(time.Millisecond))
		pauses = append(pauses, p)
		t.Logf("run %d: switchover %s → %s, writes held %s", i+1, res.Old, res.New, p.Round(time.Millisecond))
		time.Sleep(2 * time.Second)
		for _, fault := range []string{"pause", "isolate"} {
			t.Run(fmt.Sprintf("%s-%d", fault, i+1), func(t *testing.T) {
				took := faultOutage(t, fault)
				outages[fault] = append(outages[fault], took)
				t.Logf("run %d: %s of the primary → first acknowledged write %s", i+1, fault, took.Round(time.Millisecond))
			})
		}
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("failover: median %s, min %s, max %s over %d runs (target ≤ 2.5s)", med(failovers).Round(time.Millisecond),
		slices.Min(failovers).Round(time.Millisecond), slices.Max(failovers).Round(time.Millisecond), n)
	t.Logf("switchover write pause: median %s, min %s, max %s over %d runs (target ≤ 0.5s)", med(pauses).Round(time.Millisecond),
		slices.Min(pauses).Round(time.Millisecond), slices.Max(pauses).Round(time.Millisecond), n)
	for _, fault := range []string{"pause", "isolate"} {
		if d := outages[fault]; len(d) > 0 {
			t.Logf("%s failover: median %s, min %s, max %s over %d runs (target ≤ 8s)", fault, med(d).Round(time.Millisecond),
				slices.Min(d).Round(time.Millisecond), slices.Max(d).Round(time.Millisecond), len(d))
		}
	}
}

// faultOutage pauses or isolates the primary of a fresh semi-sync sandbox
// under a write loop and returns the time to the first acknowledged write
// on the new primary.
func faultOutage(t *testing.T, fault string) time.Duration {
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, nil)
	dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=5s&writeTimeout=5s", env.addr)
	ctx := context.Background()
	old := env.writer(t)
	w := startWriter(t, dsn)
	time.Sleep(time.Second)
	t0 := time.Now()
	fail, heal := env.sb.Pause, env.sb.Resume
	if fault == "isolate" {
		fail, heal = env.sb.Isolate, env.sb.Heal
	}
	if err := fail(ctx, old); err != nil {
		t.Fatal(err)
	}
	_, took := waitFailover(t, env, w, old, t0)
	w.finish()
	if err := heal(ctx, old); err != nil {
		t.Fatal(err)
	}
	return took
}
