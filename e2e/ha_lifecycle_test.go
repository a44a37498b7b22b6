package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/lifecycle"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// TestHAActingDiesMidRebuild: two Vigils on etcd, agents on every node.
// The acting instance rebuilds node3 (which holds a marker table of its
// own; asked of the other instance, which forwards the request) and dies:
//   - streaming: killed -9 by the test while the backup streams (rate
//     limited). The other instance resolves the journaled rebuild: node3
//     stays out of routing on both, its datadir intact (the marker is still
//     there), and the event says so.
//   - after-swap: the instance kills itself once the copy is in place
//     (failpoint at the replicating phase). The other instance completes
//     the rebuild: node3 replicates from the writer without the marker and
//     is routed again.
func TestHAActingDiesMidRebuild(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	for _, when := range []string{"streaming", "after-swap"} {
		t.Run(when, func(t *testing.T) { haDiesMidRebuild(t, when) })
	}
}

func haDiesMidRebuild(t *testing.T, when string) {
	if when == "after-swap" {
		t.Setenv("VIGIL_TEST_LIFECYCLE_KILL", lifecycle.PhaseReplicating)
	}
	e := newHAEnvWith(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true, Etcd: 3, Vigils: 2, Agents: true})
	ctx := context.Background()
	acting, err := e.actingName()
	if err != nil {
		t.Fatal(err)
	}
	ai := e.vigil(acting)
	si := 1 - ai
	survivor := e.m.Vigils[si].Name
	e.sql("node1", "CREATE TABLE vigil_test.bulk (id INT PRIMARY KEY, pad VARCHAR(255)) SELECT seq AS id, REPEAT('x', 200) AS pad FROM vigil_test.seq_1_to_20000")
	e.waitRowsOn([]string{"node3"}, "SELECT COUNT(*) FROM vigil_test.bulk", "20000")
	e.sql("node3", "SET SESSION sql_log_bin = 0; CREATE TABLE vigil_test.marker (id INT PRIMARY KEY); INSERT INTO vigil_test.marker VALUES (1)")

	args := []string{"rebuild", "node3"}
	if when == "streaming" {
		args = append(args, "--rate", "1MiB")
	}
	// Asked of the instance that does not act, the rebuild is forwarded
	// to the one that does (streaming); asked of the acting one, it runs
	// there (after-swap).
	via := ai
	if when == "streaming" {
		via = si
	}
	if out, err := e.ctl(via, args...); err != nil {
		t.Fatalf("rebuild through %s: %v\n%s", e.m.Vigils[via].Name, err, out)
	} else {
		t.Logf("vigil ctl %s through %s:\n%s", strings.Join(args, " "), e.m.Vigils[via].Name, out)
	}
	// node3 is fenced in the writer record: no instance routes to it.
	Eventually(t, 20*time.Second, "node3 fenced in the writer record", func() error {
		if r, err := e.record(false); err != nil || !r.IsFenced("node3") {
			return fmt.Errorf("record %+v (%v)", r, err)
		}
		return nil
	})
	tKill := time.Now()
	if when == "streaming" {
		Eventually(t, 30*time.Second, "2 MB streamed", func() error {
			body, err := e.api(ai, "/api/v1/clone")
			if err != nil {
				return err
			}
			var all struct{ Running []lifecycle.Progress }
			if err := json.Unmarshal(body, &all); err != nil || len(all.Running) != 1 || all.Running[0].Bytes < 2<<20 {
				return fmt.Errorf("running: %s", body)
			}
			return nil
		})
		tKill = time.Now()
		haMust(t, "kill "+acting, e.sb.Kill(ctx, acting))
	} else {
		Eventually(t, 60*time.Second, acting+" gone at the failpoint", func() error {
			if _, err := e.api(ai, "/api/v1/coordination"); err == nil {
				return fmt.Errorf("%s still answers", acting)
			}
			return nil
		})
	}
	want := map[string]string{"streaming": "rebuild_interrupted", "after-swap": "rebuild_completed"}[when]
	var got admin.Event
	Eventually(t, 90*time.Second, survivor+" resolves the rebuild ("+want+")", func() error {
		for _, ev := range e.events(si, tKill.Add(-time.Second)) {
			if ev.Kind == want {
				got = ev
				return nil
			}
		}
		return fmt.Errorf("no %s event on %s", want, survivor)
	})
	t.Logf("%s, %s after the kill: %s", want, time.Since(tKill).Round(time.Millisecond), got.Message)
	marker := e.sql("node3", "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'vigil_test' AND TABLE_NAME = 'marker'")
	servers := func() map[string]admin.ServerView {
		body, err := e.api(si, "/api/v1/servers")
		if err != nil {
			t.Fatal(err)
		}
		var list []admin.ServerView
		_ = json.Unmarshal(body, &list)
		m := map[string]admin.ServerView{}
		for _, s := range list {
			m[s.Name] = s
		}
		return m
	}
	if when == "streaming" {
		if !strings.Contains(got.Message, "intact") || !strings.Contains(got.Message, "stays out of routing") {
			t.Errorf("the event does not say the datadir is intact and node3 out of routing: %s", got.Message)
		}
		if marker[0][0] != "1" {
			t.Errorf("node3's datadir was replaced: the marker table is gone")
		}
		if s := servers()["node3"]; s.State != "OFFLINE_HARD" || s.Readable {
			t.Errorf("node3 on %s: %+v", survivor, s)
		}
		if r, _ := e.record(false); !r.IsFenced("node3") {
			t.Errorf("node3 is no longer fenced in the writer record: %+v", r)
		}
		return
	}
	if marker[0][0] != "0" {
		t.Errorf("node3 still has the marker table: not rebuilt")
	}
	e.replicatesFrom("node3", "node1", 30*time.Second)
	Eventually(t, 30*time.Second, "node3 routed again on "+survivor, func() error {
		if s := servers()["node3"]; s.State != "ONLINE" {
			return fmt.Errorf("node3 %s (%s)", s.State, s.Reason)
		}
		var r coord.Record
		if r, _ = e.record(false); r.IsFenced("node3") {
			return fmt.Errorf("still fenced in the record: %+v", r)
		}
		return nil
	})
}
