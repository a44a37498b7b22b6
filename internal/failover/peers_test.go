package failover

import (
	"strings"
	"testing"
)

// viewRows: before an automatic failover the acting instance asks the
// other instances' views; a fresh view whose latest check of the primary
// succeeded after this instance's first failure holds the failover.
// dead: node1 refuses since t=95, now=100, detect_after 2s.
var viewRows = []row{
	{name: "no views (single instance): fail over", scen: dead, sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) {
			if d.Plan.Views != "" || strings.Contains(d.Reason, "instance") {
				t.Errorf("views in a decision without coordination: %q / %q", d.Plan.Views, d.Reason)
			}
		}},
	{name: "no other instance: fail over, naming this one's view", scen: dead + "views self=vigil1\n", sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) {
			wantIn(t, d.Plan.Views, "vigil1: node1 refused since 5s")
			wantIn(t, d.Reason, "no other Vigil instance reaches it (vigil1: node1 refused since 5s)")
		}},
	{name: "another instance reached the primary 200ms ago: hold", scen: dead + "views self=vigil1\nview vigil2 at=99.8 node1 ok\n",
		sit: PeerSeesPrimary, act: ActEvent, detected: DeadPrimary, newPrimary: "-",
		check: func(t *testing.T, d Decision) {
			wantIn(t, d.Reason, "instance vigil2 reached node1 200ms ago; not failing over (vigil1: node1 refused since 5s; vigil2: node1 answered 200ms ago)")
			if !d.RecheckAt.Equal(at(101.8)) {
				t.Errorf("recheck at %s, want t0+101.8s (the view gets older than detect_after)", d.RecheckAt)
			}
		}},
	{name: "a stale view (taken 3s ago) does not hold", scen: dead + "views self=vigil1\nview vigil2 at=97 node1 ok\n",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) { wantIn(t, d.Plan.Views, "vigil2: node1 answered 3s ago") }},
	{name: "views may be as old as the publisher's max age when longer than detect_after",
		scen: dead + "views self=vigil1 max_age=3s\nview vigil2 at=97.5 node1 ok\n", sit: PeerSeesPrimary, act: ActEvent, newPrimary: "-",
		check: func(t *testing.T, d Decision) {
			if !d.RecheckAt.Equal(at(100.5)) {
				t.Errorf("recheck at %s, want t0+100.5s", d.RecheckAt)
			}
		}},
	{name: "a fresh view whose check predates the first failure does not hold (stuck monitor)",
		scen: dead + "views self=vigil1\nview vigil2 at=99.9 node1 ok checked=94\n", sit: DeadPrimary, act: ActExecute, newPrimary: "node2"},
	{name: "a refreshed view whose latest success is older than detect_after does not hold",
		scen: "now 110\n" + dead + "views self=vigil1\nview vigil2 at=109.9 node1 ok checked=96\n", sit: DeadPrimary, act: ActExecute, newPrimary: "node2"},
	{name: "the other instance lost the primary too: fail over, naming both views",
		scen: dead + "views self=vigil1\nview vigil2 at=99.9 node1 timeout since=96\n", sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) {
			wantIn(t, d.Plan.Views, "vigil1: node1 refused since 5s; vigil2: node1 timeout since 4s")
			wantIn(t, d.Reason, "vigil2: node1 timeout since 4s")
		}},
	{name: "one of two instances reaches it: hold, naming it",
		scen: dead + "views self=vigil1\nview vigil2 at=99.9 node1 timeout since=96\nview vigil3 at=99.5 node1 ok\n",
		sit:  PeerSeesPrimary, act: ActEvent, newPrimary: "-",
		check: func(t *testing.T, d Decision) {
			wantIn(t, d.Reason, "instance vigil3 reached node1 500ms ago")
			if strings.Contains(d.Reason, "instance vigil2 reached") {
				t.Error("vigil2 does not reach node1")
			}
		}},
	{name: "views unreadable: wait until the first failure + 2 × detect_after",
		scen: dead + "now 98\nviews self=vigil1 err=\"context deadline exceeded\"\n", sit: PeerSeesPrimary, act: ActEvent, newPrimary: "-",
		check: func(t *testing.T, d Decision) {
			wantIn(t, d.Reason, "views cannot be read (context deadline exceeded)")
			if !d.RecheckAt.Equal(at(99)) {
				t.Errorf("recheck at %s, want t0+99s", d.RecheckAt)
			}
		}},
	{name: "views unreadable for longer: fail over, saying so",
		scen: dead + "views self=vigil1 err=\"context deadline exceeded\"\n", sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) {
			wantIn(t, d.Plan.Views, "could not be read (context deadline exceeded)")
		}},
	{name: "an operator's failover is not held by views",
		scen: dead + "views self=vigil1\nview vigil2 at=99.8 node1 ok\nrequest failover\n", sit: ManualFailover, act: ActExecute, newPrimary: "node2"},
	{name: "a healthy primary: views are not consulted",
		scen: base + "views self=vigil1\nview vigil2 at=99.8 node1 ok\n", sit: Healthy, act: ActNone, newPrimary: "-"},
}

func TestViews(t *testing.T) { runRows(t, viewRows) }

func wantIn(t *testing.T, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%q does not contain %q", s, sub)
	}
}
