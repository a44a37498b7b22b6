package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestFailoverTimingHA is TestFailoverTiming with two Vigil instances
// coordinated through a 3-member etcd: a measurement, run by `make
// bench-failover` (VIGIL_BENCH_FAILOVER=N) and skipped otherwise. Each
// run faults the primary of a fresh semi-sync sandbox (kill -9, SIGSTOP,
// isolation) under a write loop through each instance and reports, per
// instance, the time from the fault to its first write acknowledged on
// another server: the acting instance decides, fences through etcd and
// promotes; the other follows the writer record.
func TestFailoverTimingHA(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	n, _ := strconv.Atoi(os.Getenv("VIGIL_BENCH_FAILOVER"))
	if n <= 0 {
		t.Skip("a measurement: make bench-failover (VIGIL_BENCH_FAILOVER=N)")
	}
	faults := []string{"kill", "pause", "isolate"}
	// outages[fault][i]: the slower of the two instances in run i.
	outages := map[string][]time.Duration{}
	for i := range n {
		for _, fault := range faults {
			t.Run(fmt.Sprintf("%s-%d", fault, i+1), func(t *testing.T) {
				took, line := haFaultOutage(t, fault)
				outages[fault] = append(outages[fault], took)
				t.Logf("run %d: %s of the primary, two instances → %s", i+1, fault, line)
			})
		}
	}
	for _, fault := range faults {
		if d := outages[fault]; len(d) > 0 {
			t.Logf("two instances, %s failover: %s (writes again through both instances)", fault, spread(d))
		}
	}
}

// haFaultOutage faults the primary of a fresh two-instance sandbox under
// a write loop through each instance and returns the time until both
// have a write acknowledged by another server, with a line per instance.
func haFaultOutage(t *testing.T, fault string) (time.Duration, string) {
	e := newHAEnv(t)
	ctx := context.Background()
	rec := e.mustRecord()
	old := rec.Writer
	oldSID := e.sids[old]
	ws := []*haWriter{e.startWriter(0, 20*time.Millisecond), e.startWriter(1, 20*time.Millisecond)}
	defer func() {
		for _, w := range ws {
			w.halt()
		}
	}()
	Eventually(t, 10*time.Second, "writes through both instances", func() error {
		for _, w := range ws {
			if len(w.acked()) == 0 {
				return fmt.Errorf("none through %s yet: %s", w.via, w.summary())
			}
		}
		return nil
	})
	pid, err := e.sb.PID(old)
	if err != nil || pid <= 0 {
		t.Fatalf("pid of %s: %d, %v", old, pid, err)
	}
	var t0 time.Time
	switch fault {
	case "kill", "pause":
		sig := syscall.SIGKILL
		if fault == "pause" {
			sig = syscall.SIGSTOP
			t.Cleanup(func() { _ = e.sb.Resume(context.Background(), old) })
		}
		t0 = time.Now()
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatalf("%s %s: %v", sig, old, err)
		}
	case "isolate":
		t.Cleanup(func() { _ = e.sb.Heal(context.Background(), old) })
		t0 = time.Now() // before the rules go in: iptables counts too
		haMust(t, "isolate "+old, e.sb.Isolate(ctx, old))
	}
	var took [2]time.Duration
	Eventually(t, 30*time.Second, "a write acknowledged on the new primary through both instances", func() error {
		for i, w := range ws {
			if took[i] > 0 {
				continue
			}
			for _, x := range w.all() {
				if x.err == nil && x.end.After(t0) && x.sid != oldSID {
					took[i] = x.end.Sub(t0)
					break
				}
			}
			if took[i] == 0 {
				return fmt.Errorf("none through %s yet: %s", w.via, w.summary())
			}
		}
		return nil
	})
	acting, _ := e.actingName()
	line := fmt.Sprintf("%s %s, %s %s (acting now: %s; record %s)", ws[0].via, took[0].Round(time.Millisecond),
		ws[1].via, took[1].Round(time.Millisecond), acting, haRec(e.mustRecord()))
	return max(took[0], took[1]), line
}
