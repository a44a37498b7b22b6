package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEtcdClusterReal runs a 3-member etcd cluster with the sandbox's
// code and injects failures: kill and start, pause and resume, isolate and
// heal, stop; down leaves no etcd process and no iptables rule.
func TestEtcdClusterReal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real etcd processes")
	}
	bin, err := findEtcd()
	if err != nil {
		t.Skip(err)
	}
	s, m := testAuxSandbox(t, Options{Etcd: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	downDone := false
	defer func() {
		if !downDone {
			_ = s.Down(context.Background(), true)
		}
	}()
	t0 := time.Now()
	if err := s.startEtcdAll(ctx, bin, m); err != nil {
		t.Fatal(err)
	}
	t.Logf("3 members healthy in %s", time.Since(t0).Round(time.Millisecond))
	if err := s.refresh(); err != nil {
		t.Fatal(err)
	}
	member := func(name string) EtcdMember {
		mm := s.Manifest()
		i, err := mm.etcd(name)
		if err != nil {
			t.Fatal(err)
		}
		return mm.Etcd[i]
	}
	// healthy waits until each named member says it is healthy.
	healthy := func(what string, names ...string) {
		t.Helper()
		for _, n := range names {
			e := member(n)
			err := poll(ctx, 15*time.Second, func() (bool, error) {
				_, ok, err := etcdHealth(ctx, e, time.Second)
				return ok, err
			})
			if err != nil {
				t.Fatalf("%s: %s not healthy: %v (%s)", what, n, err, logTail(e.Log, 3))
			}
		}
	}
	healthy("after up", "etcd1", "etcd2", "etcd3")
	r, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Etcd {
		if e.State != StateRunning || !e.Healthy || e.PID == 0 {
			t.Errorf("status %+v", e)
		}
	}

	// kill: the other two stay (or become again) healthy.
	if err := s.Kill(ctx, "etcd2"); err != nil {
		t.Fatal(err)
	}
	if running, _ := s.IsRunning("etcd2"); running {
		t.Fatal("etcd2 runs after kill")
	}
	healthy("after kill etcd2", "etcd1", "etcd3")
	if r, _ := s.Status(ctx); r.Etcd[1].State != StateStopped {
		t.Errorf("etcd2 after kill: %+v", r.Etcd[1])
	}
	// start: it rejoins with its data (--initial-cluster-state existing).
	if err := s.Start(ctx, "etcd2"); err != nil {
		t.Fatal(err)
	}
	healthy("after start etcd2", "etcd1", "etcd2", "etcd3")
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", member("etcd2").PID)); !strings.Contains(string(cmdline), "existing") {
		t.Errorf("restarted etcd2 runs %q", strings.ReplaceAll(string(cmdline), "\x00", " "))
	}

	// pause / resume
	if err := s.Pause(ctx, "etcd1"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Status(ctx); r.Etcd[0].State != StatePaused || !member("etcd1").Paused {
		t.Errorf("etcd1 after pause: %+v", r.Etcd[0])
	}
	healthy("with etcd1 paused", "etcd2", "etcd3")
	if err := s.Resume(ctx, "etcd1"); err != nil {
		t.Fatal(err)
	}
	healthy("after resume etcd1", "etcd1", "etcd2", "etcd3")

	// isolate: nobody reaches etcd3, the other two keep a quorum; heal
	// brings it back.
	if why := canIsolate(); why != "" {
		t.Logf("isolate not tried: %s", why)
	} else {
		if err := s.Isolate(ctx, "etcd3"); err != nil {
			t.Fatal(err)
		}
		if !member("etcd3").Isolated {
			t.Error("isolated not recorded")
		}
		if _, _, err := etcdHealth(ctx, member("etcd3"), 500*time.Millisecond); err == nil {
			t.Error("isolated etcd3 still answers")
		}
		healthy("with etcd3 isolated", "etcd1", "etcd2")
		if err := s.Heal(ctx, "etcd3"); err != nil {
			t.Fatal(err)
		}
		healthy("after heal etcd3", "etcd1", "etcd2", "etcd3")
		// Leave it isolated again: down must remove the rules.
		if err := s.Isolate(ctx, "etcd3"); err != nil {
			t.Fatal(err)
		}
	}

	// stop: SIGTERM, and the process is gone.
	if err := s.Stop(ctx, "etcd1"); err != nil {
		t.Fatal(err)
	}
	if running, _ := s.IsRunning("etcd1"); running {
		t.Error("etcd1 runs after stop")
	}
	if err := s.Pause(ctx, "etcd1"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("pause of a stopped member = %v", err)
	}

	downDone = true
	if err := s.Down(ctx, true); err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Etcd {
		if pids := procPIDs(e.proc()); len(pids) > 0 {
			t.Errorf("%s still runs as %v after down", e.Name, pids)
		}
	}
	if left := leftovers(m.Dir); len(left) > 0 {
		t.Errorf("processes left after down: %q", left)
	}
	checkNoRules(t, m.Dir)
	if _, err := os.Stat(m.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("down --purge left %s: %v", m.Dir, err)
	}
}
