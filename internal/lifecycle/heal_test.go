package lifecycle

import (
	"strings"
	"testing"
	"time"
)

func TestDecideHeal(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	agents := all("n1", "n2", "n3", "n4")
	base := func() HealInput {
		return HealInput{Snapshot: snap(0, 0, 0), Now: now, Agents: agents, ReplaceAfter: 5 * time.Minute, Spares: []string{"s1", "s2"}}
	}
	noWriter := snap(0, 0)
	noWriter.Writer = -1
	for _, tc := range []struct {
		name         string
		edit         func(in *HealInput)
		kind, target string
		spare        string
		reason       string
	}{
		{"healthy: nothing", func(in *HealInput) {}, "", "", "", "nothing to heal"},
		{"diverged old primary is rebuilt", func(in *HealInput) { in.Diverged = map[string]string{"n2": "0-1-9"} }, KindRebuild, "n2", "", "holds transactions"},
		{"broken replica is rebuilt", func(in *HealInput) { in.Broken = map[string]string{"n3": "1236"} }, KindRebuild, "n3", "", "cannot resume"},
		{"diverged before broken", func(in *HealInput) {
			in.Broken = map[string]string{"n2": "1236"}
			in.Diverged = map[string]string{"n4": "x"}
		}, KindRebuild, "n4", "", "holds transactions"},
		{"salvage first", func(in *HealInput) {
			in.Diverged = map[string]string{"n2": "x"}
			in.SalvagePending = map[string]string{"n2": "settling"}
		}, "", "", "", "salvage not finished"},
		{"no agent: waits", func(in *HealInput) {
			in.Diverged = map[string]string{"n2": "x"}
			in.Agents = all("n1", "n3")
		}, "", "", "", "no agent"},
		{"backoff after a failure", func(in *HealInput) {
			in.Diverged = map[string]string{"n2": "x"}
			in.Backoff = map[string]time.Time{"n2": now.Add(time.Minute)}
		}, "", "", "", "failed"},
		{"backoff over", func(in *HealInput) {
			in.Diverged = map[string]string{"n2": "x"}
			in.Backoff = map[string]time.Time{"n2": now.Add(-time.Second)}
		}, KindRebuild, "n2", "", ""},
		{"the writer is never rebuilt", func(in *HealInput) { in.Diverged = map[string]string{"n1": "x"} }, "", "", "", "the writer"},
		{"busy: nothing", func(in *HealInput) {
			in.Diverged = map[string]string{"n2": "x"}
			in.Busy = "failover runs"
		}, "", "", "", "failover runs"},
		{"no writer: failover first", func(in *HealInput) {
			in.Snapshot = noWriter
			in.Diverged = map[string]string{"n2": "x"}
		}, "", "", "", "failover comes first"},
		{"down long enough: replaced by the first spare", func(in *HealInput) {
			in.DownSince = map[string]time.Time{"n3": now.Add(-6 * time.Minute)}
		}, KindReplace, "n3", "s1", "left as it is"},
		{"down, not long enough", func(in *HealInput) {
			in.DownSince = map[string]time.Time{"n3": now.Add(-time.Minute)}
		}, "", "", "", "nothing to heal"},
		{"down, no spare", func(in *HealInput) {
			in.DownSince = map[string]time.Time{"n3": now.Add(-time.Hour)}
			in.Spares = nil
		}, "", "", "", "no spare is left"},
		{"replace_after 0: never replaced", func(in *HealInput) {
			in.DownSince = map[string]time.Time{"n3": now.Add(-time.Hour)}
			in.ReplaceAfter = 0
		}, "", "", "", "nothing to heal"},
		{"a dead writer is not replaced", func(in *HealInput) {
			in.DownSince = map[string]time.Time{"n1": now.Add(-time.Hour)}
		}, "", "", "", "nothing to heal"},
		{"rebuild before replace", func(in *HealInput) {
			in.DownSince = map[string]time.Time{"n3": now.Add(-time.Hour)}
			in.Diverged = map[string]string{"n2": "x"}
		}, KindRebuild, "n2", "", ""},
		{"unknown server is skipped", func(in *HealInput) { in.Diverged = map[string]string{"zz": "x"} }, "", "", "", "nothing to heal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.edit(&in)
			a := DecideHeal(in)
			if a.Kind != tc.kind || a.Target != tc.target || a.Spare != tc.spare || !strings.Contains(a.Reason, tc.reason) {
				t.Fatalf("got %+v, want %s %s %s (%q)", a, tc.kind, tc.target, tc.spare, tc.reason)
			}
		})
	}
}
