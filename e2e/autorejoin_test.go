package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
)

// TestAutoRejoin (issue 24, item 8): with failover.auto_rejoin on (the
// default), a primary killed with kill -9 and restarted after the failover
// becomes a replica of the new primary without an operator — it
// replicates what is written through Vigil afterwards and is routed for
// reads again. Then a primary that holds a transaction no replica received
// (written on it directly while its replicas' IO threads were stopped) is
// killed and restarted: it stays fenced, its fence reason says why
// automatic rejoin did not run and what to do, and one event says so.
func TestAutoRejoin(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	lab := newFaultLab(t, func(c *config.Config) {
		on := true
		c.Clusters[0].Failover.AutoRejoin = &on
	})
	ctx := context.Background()
	db := openDB(t, lab.dsn)
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS vigil_test.autorejoin (n INT PRIMARY KEY)")
	mustExec(t, db, "INSERT INTO vigil_test.autorejoin VALUES (1)")

	// 1. Compatible return: the kill happens while nothing is written, so
	// the old primary holds nothing the new one lacks.
	old := lab.env.writer(t)
	if old == "" {
		t.Fatal("no writer")
	}
	t0 := time.Now()
	if err := lab.sb.Kill(ctx, old); err != nil {
		t.Fatal(err)
	}
	np := lab.awaitNewWriter(old, 30*time.Second)
	if np == "" {
		t.Fatalf("no failover away from %s; events:\n%s", old, lab.eventsSince(t0, nil))
	}
	t.Logf("kill -9 %s: %s is the writer after %s", old, np, time.Since(t0).Round(time.Millisecond))
	mustExec(t, db, "INSERT INTO vigil_test.autorejoin VALUES (2)")
	t1 := time.Now()
	if err := lab.sb.Start(ctx, old); err != nil {
		t.Fatal(err)
	}
	done, ok := lab.awaitEvent(t1, 30*time.Second, func(e admin.Event) bool {
		return (e.Kind == "rejoin_done" && strings.Contains(e.Message, old+" replicates from")) || (e.Kind == "rejoin_failed" && e.Server == old)
	})
	if !ok || done.Kind != "rejoin_done" {
		t.Fatalf("%s was not rejoined automatically within 30 s of its restart (%s: %s); events:\n%s", old, done.Kind, done.Message, lab.eventsSince(t1, nil))
	}
	t.Logf("%s rejoined automatically %s after its restart", old, done.Time.Sub(t1).Round(time.Millisecond))
	if _, ok := lab.awaitEvent(t1, 0, func(e admin.Event) bool { return e.Kind == "auto_rejoin" && e.Server == old }); !ok {
		t.Errorf("no auto_rejoin event for %s; events:\n%s", old, lab.eventsSince(t1, nil))
	}
	if _, ok := lab.awaitEvent(t1, 0, func(e admin.Event) bool { return e.Kind == "rejoin_started" && e.Server == old }); !ok {
		t.Errorf("no rejoin_started event for %s; events:\n%s", old, lab.eventsSince(t1, nil))
	}
	// It replicates from the new primary, both threads running...
	Eventually(t, 20*time.Second, old+" replicating from "+np, func() error {
		ns, err := lab.replicaState(old)
		if err != nil {
			return err
		}
		if !ns.Replicating || ns.Source != np || ns.IOState != "Yes" || ns.SQLState != "Yes" {
			return fmt.Errorf("%s: %s", old, describeReplica(ns))
		}
		return nil
	})
	// ...what is written through Vigil now reaches it...
	mustExec(t, db, "INSERT INTO vigil_test.autorejoin VALUES (3)")
	Eventually(t, 20*time.Second, "row 3 on "+old, func() error {
		rows, err := lab.sb.SQL(ctx, old, "SELECT COUNT(*) FROM vigil_test.autorejoin")
		if err != nil || len(rows) != 1 || rows[0][0] != "3" {
			return fmt.Errorf("%s has %v rows (%v)", old, rows, err)
		}
		return nil
	})
	// ...and it is routed for reads again, read-only.
	Eventually(t, 20*time.Second, old+" routed as a replica", func() error {
		s := lab.serverMap()[old]
		if s.State != "ONLINE" || !s.Readable || s.Writable || s.Writer {
			return fmt.Errorf("%s: %+v", old, s)
		}
		return nil
	})
	if rows, err := lab.sb.SQL(ctx, old, "SELECT @@read_only"); err != nil || len(rows) != 1 || rows[0][0] != "1" {
		t.Errorf("%s read_only %v (%v), want 1", old, rows, err)
	}

	// 2. Diverged return: np commits a transaction no replica receives,
	// then dies.
	replicas := []string{}
	for _, n := range lab.nodes {
		if n != np {
			replicas = append(replicas, n)
		}
	}
	for _, r := range replicas {
		if err := lab.sb.Exec(ctx, r, "STOP SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	// Semi-sync would wait for an acknowledgement nobody sends.
	if err := lab.sb.Exec(ctx, np, "SET GLOBAL rpl_semi_sync_master_enabled = OFF",
		"INSERT INTO vigil_test.autorejoin VALUES (100)"); err != nil {
		t.Fatal(err)
	}
	extra, err := lab.sb.SQL(ctx, np, "SELECT @@gtid_binlog_pos")
	if err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	if err := lab.sb.Kill(ctx, np); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		if err := lab.sb.Exec(ctx, r, "START SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	np2 := lab.awaitNewWriter(np, 30*time.Second)
	if np2 == "" {
		t.Fatalf("no failover away from %s; events:\n%s", np, lab.eventsSince(t2, nil))
	}
	t.Logf("%s (holding %v, which no replica received) killed: %s is the writer", np, extra, np2)
	t3 := time.Now()
	if err := lab.sb.Start(ctx, np); err != nil {
		t.Fatal(err)
	}
	skipped, ok := lab.awaitEvent(t3, 30*time.Second, func(e admin.Event) bool { return e.Kind == "auto_rejoin_skipped" && e.Server == np })
	if !ok {
		t.Fatalf("no auto_rejoin_skipped event for %s within 30 s of its restart; events:\n%s", np, lab.eventsSince(t3, nil))
	}
	t.Logf("event: %s", skipped.Message)
	for _, want := range []string{"automatic rejoin (failover.auto_rejoin) did not run", "holds transactions the primary " + np2 + " lacks", "Salvage them first"} {
		if !strings.Contains(skipped.Message, want) {
			t.Errorf("the auto_rejoin_skipped event lacks %q: %s", want, skipped.Message)
		}
	}
	// Several decisions later: still fenced, with the reason, one event,
	// no rejoin run.
	time.Sleep(5 * time.Second)
	s := lab.serverMap()[np]
	if s.State != "OFFLINE_HARD" || s.Readable || s.Writable || s.Writer {
		t.Errorf("%s, diverged, is routed: %+v", np, s)
	}
	if !strings.Contains(s.Reason, "automatic rejoin (failover.auto_rejoin) did not run") || !strings.Contains(s.Reason, "Salvage them first") {
		t.Errorf("%s's reason does not say why it was not rejoined: %q", np, s.Reason)
	}
	n := 0
	for _, e := range lab.eventList() {
		if e.Time.Before(t3) || e.Server != np {
			continue
		}
		switch e.Kind {
		case "auto_rejoin_skipped":
			n++
		case "auto_rejoin", "rejoin_started", "rejoin_done", "rejoin_failed":
			t.Errorf("a rejoin of the diverged %s ran: %s %s", np, e.Kind, e.Message)
		}
	}
	if n != 1 {
		t.Errorf("%d auto_rejoin_skipped events for %s, want 1; events:\n%s", n, np, lab.eventsSince(t3, nil))
	}
	if ns, err := lab.replicaState(np); err == nil && ns.Replicating {
		t.Errorf("the diverged %s replicates: %s", np, describeReplica(ns))
	}
}
