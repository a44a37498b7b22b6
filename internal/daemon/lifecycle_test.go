package daemon

import (
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/lifecycle"
	"github.com/vigil-db/vigil/internal/topology"
)

// A cleanly replicating replica counts as errant only when its latest
// check, comparable with the writer's, found transactions the writer
// lacks and so did the comparable check before it. A check already
// counted or not comparable decides nothing (a stale finding must never
// start a rebuild: it once started one every 4 s); a comparable clean
// check, or a rebuild of the replica, starts the count again.
func TestConfirmErrant(t *testing.T) {
	h := &healer{errant: map[string]errantSeen{}}
	t0 := time.Unix(1000, 0)
	check := func(pos string, at time.Duration) *topology.Observation {
		return &topology.Observation{OK: true, Time: t0.Add(at), Took: time.Millisecond,
			GTID: topology.GTIDState{Current: topology.MustParseGTIDPos(pos)}}
	}
	writer := func(at time.Duration) *topology.Observation { return check("0-1-100", at) }
	steps := []struct {
		replica *topology.Observation
		writer  *topology.Observation
		want    string
	}{
		{check("0-2-101", 0), writer(time.Second), ""},                        // first errant check
		{check("0-2-101", 0), writer(2 * time.Second), ""},                    // the same check again
		{check("0-2-101", 3*time.Second), writer(2 * time.Second), ""},        // not comparable
		{check("0-2-101", 4*time.Second), writer(5 * time.Second), "0-2-101"}, // second errant check
		{check("0-2-101", 4*time.Second), writer(6 * time.Second), ""},        // counted already
		{check("0-2-101", 7*time.Second), writer(6 * time.Second), ""},        // not comparable
		{check("0-2-101", 8*time.Second), writer(9 * time.Second), "0-2-101"}, // third
		{check("0-1-100", 10*time.Second), writer(11 * time.Second), ""},      // clean: count restarts
		{check("0-2-101", 12*time.Second), writer(13 * time.Second), ""},
		{check("0-2-101", 14*time.Second), writer(15 * time.Second), "0-2-101"},
	}
	for i, s := range steps {
		if got := h.confirmErrant("n2", s.replica, s.writer); got != s.want {
			t.Fatalf("step %d: confirmErrant = %q, want %q", i, got, s.want)
		}
	}
	h.forgetErrant("n2") // rebuilt
	if got := h.confirmErrant("n2", check("0-2-101", 16*time.Second), writer(17*time.Second)); got != "" {
		t.Fatalf("after a rebuild one errant check decided: %q", got)
	}
}

// A member a failed operation left out of routing stays in the state
// dir's list until a later operation on it succeeds, an operator sets its
// state, or it leaves the cluster; a failure before it left routing adds
// nothing.
func TestKeptOutSurvivesInStateDir(t *testing.T) {
	d := &daemon{base: &config.Config{StateDir: t.TempDir()}}
	rt := &clusterRuntime{name: "main/a", log: slog.New(slog.DiscardHandler)}
	rt.saveJournal(d, lifecycle.Journal{Kind: "rebuild", Target: "n3", Phase: lifecycle.PhaseFailed})
	if got := d.keptOut("main/a"); len(got) != 0 {
		t.Fatalf("a failure before the target left routing kept it out: %v", got)
	}
	rt.saveJournal(d, lifecycle.Journal{Kind: "rebuild", Target: "n3", Phase: lifecycle.PhaseFailed, OutOfRouting: true})
	rt.saveJournal(d, lifecycle.Journal{Kind: "clone", Target: "n4", Phase: lifecycle.PhaseFailed, OutOfRouting: true})
	got := d.keptOut("main/a")
	if len(got) != 2 || !strings.Contains(got["n3"], "its rebuild failed") || !strings.Contains(got["n4"], "its clone failed") {
		t.Fatalf("kept out: %v", got)
	}
	if other := d.keptOut("other"); len(other) != 0 {
		t.Fatalf("another cluster's list: %v", other)
	}
	rt.saveJournal(d, lifecycle.Journal{Kind: "rebuild", Target: "n3", Phase: lifecycle.PhaseDone})
	d.setKeptOut(rt, "n4", "")
	if got := d.keptOut("main/a"); len(got) != 0 {
		t.Fatalf("after a successful rebuild and an operator's state: %v", got)
	}
	if _, err := os.Stat(d.lifecycleFile("main/a", "-out.json")); !os.IsNotExist(err) {
		t.Fatalf("the empty list's file is left: %v", err)
	}
}
