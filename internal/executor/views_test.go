package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
)

// viewingShared is fakeShared with the other instances' views (coord's
// optional Viewer).
type viewingShared struct {
	*fakeShared
	views func() *failover.Views
	reads int
}

func (v *viewingShared) Views(context.Context) *failover.Views {
	v.reads++
	return v.views()
}

// With coordination, an automatic failover is decided again with the
// other instances' views: one that reached node1 after this instance
// lost it holds the failover (an event names it); one that lost node1
// too lets it run, and the history record says what each saw.
func TestSharedFailoverAsksOtherViews(t *testing.T) {
	sc, f := sharedScenario(t)
	var peer failover.ServerView
	vs := &viewingShared{fakeShared: f, views: func() *failover.Views {
		now := sc.w.clock.Now()
		return &failover.Views{Self: "me", Peers: []failover.PeerView{{Instance: "vigil2", At: now, Servers: map[string]failover.ServerView{"node1": peer}}}}
	}}
	sc.e.SetShared(vs)
	sc.e.actingSeen = true
	if sc.e.decideAuto(sc.ctx); vs.reads != 0 {
		t.Fatalf("views read %d times while the primary is healthy", vs.reads)
	}
	sc.killNode1()
	peer = failover.ServerView{OK: true, Checked: sc.w.clock.Now().Add(-100 * time.Millisecond)}
	sc.w.takeTrace()
	sc.e.decideAuto(sc.ctx)
	trace := strings.Join(sc.w.takeTrace(), "\n")
	if len(f.records) != 0 || vs.reads != 1 {
		t.Fatalf("failed over a primary vigil2 reaches (records %+v, %d reads):\n%s", f.records, vs.reads, trace)
	}
	if !strings.Contains(trace, "event failover_PeerSeesPrimary: ") || !strings.Contains(trace, "instance vigil2 reached node1 100ms ago") {
		t.Errorf("no event naming vigil2's view:\n%s", trace)
	}

	peer = failover.ServerView{Checked: sc.w.clock.Now(), FailingSince: sc.w.clock.Now().Add(-3 * time.Second), Failure: "refused"}
	sc.e.decideAuto(sc.ctx)
	if len(f.hist) != 1 || !f.hist[0].OK {
		t.Fatalf("no failover once vigil2 lost node1 too: history %+v\n%s", f.hist, strings.Join(sc.w.takeTrace(), "\n"))
	}
	if v := f.hist[0].Views; !strings.Contains(v, "me: node1 ") || !strings.Contains(v, "vigil2: node1 refused since 3s") {
		t.Errorf("the record's views: %q", v)
	}
}
