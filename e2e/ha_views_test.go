package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/sandbox"
)

// TestHAActingVigilCutFromPrimary: the acting Vigil alone loses its path
// to the primary (vigil sandbox isolate VIGIL --from node1); the other
// instance still reaches it and its clients keep writing there. First
// the replicas still replicate (the acting instance already concludes
// UnreachablePrimary from them); then the replicas lose node1 too, so the
// acting instance's own evidence says DeadPrimary, and only the other
// instance's view, read from etcd, says node1 lives. For 3 × detect_after
// nothing fails over: no history record, the record keeps its term and
// writer, writes through the other instance are acknowledged on node1,
// and the acting instance's event names the other instance's view.
// (Issue 24 item 5: without the views the acting instance failed node1
// over.)
func TestHAActingVigilCutFromPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newHAEnvWith(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, Etcd: 1, Vigils: 2})
	ctx := context.Background()
	rec0 := e.mustRecord()
	acting, err := e.actingName()
	haMust(t, "acting instance", err)
	ai := e.vigil(acting)
	oi := 1 - ai
	other := e.m.Vigils[oi].Name
	t.Logf("before: %s; %s acts, %s does not", haRec(rec0), acting, other)
	w := e.startWriter(oi, 20*time.Millisecond)
	Eventually(t, 10*time.Second, "a write through "+other, func() error {
		if len(w.acked()) == 0 {
			return fmt.Errorf("none yet: %s", w.summary())
		}
		return nil
	})
	healAll := func() {
		for _, n := range []string{acting, "node2", "node3"} {
			_ = e.sb.Heal(context.Background(), n)
		}
	}
	t.Cleanup(healAll)

	// 1. Only the acting instance's path to node1.
	start := time.Now()
	haMust(t, "cut "+acting+" from node1", e.sb.Cut(ctx, acting, "node1"))
	Eventually(t, 10*time.Second, acting+" noticing that it cannot reach node1", func() error {
		for _, ev := range e.events(ai, start.Add(-time.Second)) {
			if ev.Kind == "failover_UnreachablePrimary" && ev.Time.After(start) {
				return nil
			}
		}
		return fmt.Errorf("events of %s:\n%s", acting, e.eventsText(ai, start))
	})

	// 2. The replicas lose node1 too: the acting instance's own evidence
	// now says the primary is dead.
	cut := time.Now()
	haMust(t, "cut node2 from node1", e.sb.Cut(ctx, "node2", "node1"))
	haMust(t, "cut node3 from node1", e.sb.Cut(ctx, "node3", "node1"))
	var held string
	Eventually(t, 15*time.Second, acting+" holding the failover because "+other+" reaches node1", func() error {
		for _, ev := range e.events(ai, cut.Add(-time.Second)) {
			if ev.Kind == "failover_PeerSeesPrimary" && ev.Time.After(cut) {
				held = ev.Message
				return nil
			}
		}
		if h := e.historySince(start); len(h) > 0 {
			t.Fatalf("failed over a primary %s reaches: %s\nevents of %s:\n%s", other, haDescribeHistory(h), acting, e.eventsText(ai, start))
		}
		return fmt.Errorf("events of %s:\n%s", acting, e.eventsText(ai, start))
	})
	t.Logf("%s: %s", acting, held)
	// Operators see the same: `vigil ctl instances` on either instance
	// shows the acting one failing node1 and the other reaching it.
	for i := range e.m.Vigils {
		Eventually(t, 5*time.Second, "vigil ctl instances on "+e.m.Vigils[i].Name+" showing both views of node1", func() error {
			out, err := e.ctl(i, "instances")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			var fails, answers bool
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) >= 3 && f[1] == "node1" {
					fails = fails || f[0] == acting && f[2] == "fails:"
					answers = answers || f[0] == other && f[2] == "answers"
				}
			}
			if !fails || !answers {
				return fmt.Errorf("want %s failing node1 and %s reaching it:\n%s", acting, other, out)
			}
			return nil
		})
	}
	if want := "instance " + other + " reached node1"; !strings.Contains(held, want) {
		t.Errorf("the hold's reason does not name %s's view (%q): %s", other, want, held)
	}
	if !strings.Contains(held, acting+": node1 ") {
		t.Errorf("the hold's reason does not say what %s sees itself: %s", acting, held)
	}

	// Several times detect_after (2 s) with the fault in place.
	hold := 6 * time.Second
	time.Sleep(time.Until(cut.Add(hold)))
	lastWindow := time.Now().Add(-2 * time.Second)
	if h := e.historySince(start); len(h) > 0 {
		t.Errorf("history since the cut: %s, want nothing\nevents of %s:\n%s", haDescribeHistory(h), acting, e.eventsText(ai, start))
	}
	if rec := e.mustRecord(); rec.Term != rec0.Term || rec.Writer != "node1" {
		t.Errorf("record %s after the cut, want term %d and writer node1", haRec(rec), rec0.Term)
	}
	sid := e.sids["node1"]
	late := 0
	for _, a := range w.acked() {
		if a.start.After(start) && a.sid != sid {
			t.Errorf("write %d through %s ran on server_id %d, not node1's %d", a.id, other, a.sid, sid)
		}
		if a.start.After(lastWindow) {
			late++
		}
	}
	if late == 0 {
		t.Errorf("no write through %s acknowledged in the last 2 s of the cut: %s", other, w.summary())
	}
	w.halt()
	t.Log(w.summary())

	// Heal: the replicas replicate from node1 again, nothing failed over.
	healAll()
	e.replicatesFrom("node2", "node1", 20*time.Second)
	e.replicatesFrom("node3", "node1", 20*time.Second)
	if h := e.historySince(start); len(h) > 0 {
		t.Errorf("history after healing: %s", haDescribeHistory(h))
	}
	e.requireAgreement(e.mustRecord(), 10*time.Second)
}
