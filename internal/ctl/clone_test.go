package ctl

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/lifecycle"
)

func TestCloneWait(t *testing.T) {
	started := lifecycle.Progress{ID: 4, Cluster: "main", Target: "db3", Donor: "db2", DonorReason: "named by the operator", Phase: "fencing", Running: true, Started: time.Now()}
	streaming := started
	streaming.Phase, streaming.Bytes, streaming.TotalBytes, streaming.RateBytes, streaming.ETASeconds = "streaming", 50e6, 100e6, 25e6, 2
	done := streaming
	fin := time.Now()
	done.Phase, done.Running, done.Finished, done.GTID, done.ETASeconds = "done", false, &fin, "0-1-9", 0
	f, srv := serve(t, map[string]answer{
		"POST /api/v1/clone": {202, jsonOf(t, started)},
		"GET /api/v1/clone":  {200, jsonOf(t, clonesAnswer{Running: []lifecycle.Progress{streaming}, Finished: []lifecycle.Progress{}})},
	})
	go func() {
		time.Sleep(150 * time.Millisecond)
		f.set("GET /api/v1/clone", answer{200, jsonOf(t, clonesAnswer{Running: []lifecycle.Progress{}, Finished: []lifecycle.Progress{done}})})
	}()
	code, out, errs := ctl(t, "--admin", srv.URL, "--cluster", "main", "clone", "db3", "--from", "db2", "--rate", "10MiB", "--wait", "--poll", "50ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	f.mu.Lock()
	post := f.reqs[0]
	f.mu.Unlock()
	if post.Method != "POST" || post.Body != `{"cluster":"main","target":"db3","from":"db2","rate":10485760}` {
		t.Fatalf("request: %+v", post)
	}
	for _, w := range []string{"cloning db3 from db2", "streaming   50.0 MB of ~100.0 MB at 25.0 MB/s, ETA 2s", "done: db3 replicates from GTID 0-1-9"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}

	failed := done
	failed.Phase, failed.Error = "failed", "restore: no_space"
	f.set("GET /api/v1/clone", answer{200, jsonOf(t, clonesAnswer{Finished: []lifecycle.Progress{failed}})})
	code, _, errs = ctl(t, "--admin", srv.URL, "clone", "db3", "--wait", "--poll", "10ms")
	if code != 1 || !strings.Contains(errs, "clone failed: restore: no_space") {
		t.Fatalf("failed clone: exit %d, %s", code, errs)
	}

	f.set("POST /api/v1/clone", answer{409, `{"error":"refused: db1 is the writer; switch over first"}`})
	code, _, errs = ctl(t, "--admin", srv.URL, "clone", "db1")
	if code != 1 || !strings.Contains(errs, "db1 is the writer; switch over first (HTTP 409)") {
		t.Fatalf("refusal: exit %d, %s", code, errs)
	}
	if code, _, _ := ctl(t, "--admin", srv.URL, "clone"); code != 2 {
		t.Fatalf("no target: exit %d", code)
	}

	code, out, _ = ctl(t, "--admin", srv.URL, "clones")
	if code != 0 || !strings.Contains(out, "db3") || !strings.Contains(out, "no_space") {
		t.Fatalf("clones: %d\n%s", code, out)
	}
}

// --dry-run asks for the plan and prints it; nothing is followed.
func TestCloneDryRun(t *testing.T) {
	plan := lifecycle.DryRun{DryRun: true, Cluster: "main", Target: "db3", Donor: "db2", DonorReason: "caught-up replica, least lag", Writer: "db1",
		Steps: lifecycle.PlanSteps(lifecycle.Plan{Target: "db3", Donor: "db2"}, "db1")}
	f, srv := serve(t, map[string]answer{"POST /api/v1/clone": {200, jsonOf(t, plan)}})
	code, out, errs := ctl(t, "--admin", srv.URL, "--cluster", "main", "clone", "db3", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	f.mu.Lock()
	post := f.reqs[0]
	n := len(f.reqs)
	f.mu.Unlock()
	if post.Body != `{"cluster":"main","target":"db3","dry_run":true}` || n != 1 {
		t.Fatalf("requests: %d, first %+v", n, post)
	}
	for _, w := range []string{"would clone db3 in cluster main from db2 (caught-up replica, least lag)", "replicate from db1", "  1. checking:", "  7. routing:", "nothing was started"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// server add --clone adds the server with its agent, retries the clone
// while the monitor has not checked it yet, then starts it; rebuild posts
// to /api/v1/rebuild.
func TestServerAddClone(t *testing.T) {
	started := lifecycle.Progress{ID: 7, Kind: "clone", Cluster: "main", Target: "db4", Donor: "db2", DonorReason: "caught-up replica", Phase: "fencing", Running: true, Started: time.Now()}
	f, srv := serve(t, map[string]answer{
		"POST /api/v1/servers": {200, `{"ok":true}`},
		"POST /api/v1/clone":   {409, `{"error":"refused: the cluster has not been checked yet; try again in a moment"}`},
	})
	go func() {
		time.Sleep(700 * time.Millisecond)
		f.set("POST /api/v1/clone", answer{202, jsonOf(t, started)})
	}()
	code, out, errs := ctl(t, "--admin", srv.URL, "--cluster", "main", "server", "add", "db4", "127.0.0.1:3310", "--agent", "127.0.0.1:7410", "--clone", "--rate", "1MiB")
	if code != 0 || !strings.Contains(out, "clone 7 started: db4 from db2") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	f.mu.Lock()
	add, last := f.reqs[0], f.reqs[len(f.reqs)-1]
	f.mu.Unlock()
	if add.Path != "/api/v1/servers" || !strings.Contains(add.Body, `"agent":"127.0.0.1:7410"`) {
		t.Fatalf("add: %+v", add)
	}
	if last.Path != "/api/v1/clone" || last.Body != `{"cluster":"main","target":"db4","rate":1048576}` {
		t.Fatalf("clone: %+v", last)
	}
	if code, _, errs := ctl(t, "--admin", srv.URL, "server", "add", "db5", "127.0.0.1:3311", "--clone"); code != 2 || !strings.Contains(errs, "needs --agent") {
		t.Fatalf("--clone without --agent: %d %s", code, errs)
	}

	f.set("POST /api/v1/rebuild", answer{409, `{"error":"refused: db1 is the writer; switch over first (a writer is never overwritten)"}`})
	code, _, errs = ctl(t, "--admin", srv.URL, "rebuild", "db1")
	if code == 0 || !strings.Contains(errs, "db1 is the writer") || f.last(t).Path != "/api/v1/rebuild" {
		t.Fatalf("rebuild of the writer: %d %s %+v", code, errs, f.last(t))
	}
}
