package failover

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// row is one table test: a scenario and what Decide must conclude.
type row struct {
	name string
	scen string
	sit  Situation
	act  Action
	// detected, when set, is the expected Decision.Detected.
	detected Situation
	// newPrimary, when set, is the plan's new primary ("-": no plan).
	newPrimary string
	check      func(t *testing.T, d Decision)
}

func runRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			d := decide(t, r.scen)
			defer func() {
				if t.Failed() {
					t.Logf("decision:\n%s", d)
				}
			}()
			if d.Situation != r.sit || d.Action != r.act {
				t.Errorf("got %s → %s, want %s → %s", d.Situation, d.Action, r.sit, r.act)
			}
			if r.detected != Unknown && d.Detected != r.detected {
				t.Errorf("detected %s, want %s", d.Detected, r.detected)
			}
			switch {
			case r.newPrimary == "-" && d.Plan != nil:
				t.Errorf("unexpected plan to %s", d.Plan.NewPrimary)
			case r.newPrimary != "" && r.newPrimary != "-" && (d.Plan == nil || d.Plan.NewPrimary != r.newPrimary):
				t.Errorf("want a plan promoting %s", r.newPrimary)
			}
			if (d.Action == ActExecute) != (d.Plan != nil) {
				t.Errorf("action %s with plan %v", d.Action, d.Plan != nil)
			}
			if d.Reason == "" {
				t.Error("no reason")
			}
			if r.check != nil {
				r.check(t, d)
			}
		})
	}
}

// base is a healthy MariaDB cluster: node1 primary, node2 and node3
// replicas, all at 0-1-100.
const base = `
now 100
cluster main term=7
options auto=yes
server node1 role=primary gtid=0-1-100
server node2 role=replica source=node1 gtid=0-1-100
server node3 role=replica source=node1 gtid=0-1-100
`

// dead is base with node1 refusing connections since t=95 and both
// replicas' IO threads failing to reconnect.
const dead = base + `
server node1 down=refused since=95
server node2 io=lost
server node3 io=lost
`

// recheckAt checks the decision's RecheckAt (seconds after t0).
func recheckAt(sec float64) func(t *testing.T, d Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if !d.RecheckAt.Equal(at(sec)) {
			t.Errorf("recheck at %s, want t0+%gs", d.RecheckAt, sec)
		}
	}
}

func reasonHas(parts ...string) func(t *testing.T, d Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(d.Reason, p) {
				t.Errorf("reason %q lacks %q", d.Reason, p)
			}
		}
	}
}

func textHas(parts ...string) func(t *testing.T, d Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		s := d.String()
		for _, p := range parts {
			if !strings.Contains(s, p) {
				t.Errorf("decision lacks %q", p)
			}
		}
	}
}

var detectRows = []row{
	{name: "healthy", scen: base, sit: Healthy, act: ActNone, newPrimary: "-"},
	{name: "primary not checked yet", scen: base + "server node1 unchecked", sit: Unobserved, act: ActWait},
	{name: "no primary known", scen: base + "server node1 role=replica ro=yes", sit: NoPrimary, act: ActEvent},
	{name: "refused, replicas confirm", scen: dead, sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: reasonHas("connection refused", "node2, node3 (IO thread Connecting, IO error 2003")},
	{name: "timeout, replicas confirm", scen: dead + "server node1 down=timeout", sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: reasonHas("i/o timeout")},
	{name: "error 1053 shutdown counts", scen: dead + "server node1 down=error:1053", sit: DeadPrimary, act: ActExecute},
	{name: "client error 2013 counts", scen: dead + "server node1 down=error:2013", sit: DeadPrimary, act: ActExecute},
	{name: "failing less than detect_after", scen: dead + "server node1 down=timeout since=99\noptions detect_after_silent=-1s", sit: PrimaryFailing, act: ActWait,
		check: recheckAt(101)},
	{name: "detect_after from options", scen: dead + "server node1 down=timeout\noptions detect_after=10s detect_after_silent=-1s", sit: PrimaryFailing, act: ActWait, check: reasonHas("detect_after is 10s")},
	// A refused check confirmed by every replica's IO thread: the short
	// bound (detect_after_refused) instead of detect_after.
	{name: "refused and confirmed after the short bound", scen: dead + "server node1 since=99.7", sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: reasonHas("unreachable for 300ms (connection refused)", "refused and confirmed (detect_after_refused 100ms)")},
	{name: "refused, before the short bound", scen: dead + "server node1 since=99.95", sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(100.05), reasonHas("detect_after_refused is 100ms"))},
	{name: "refused, short bound from options", scen: dead + "server node1 since=99.5\noptions detect_after_refused=1s", sit: PrimaryFailing, act: ActWait,
		check: recheckAt(100.5)},
	{name: "refused, a replica still connected: detect_after", scen: dead + "server node1 since=99\nserver node3 io=yes", sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(101), reasonHas("not confirmed (node3 (IO thread Yes) still replicates from it): detect_after is 2s"))},
	{name: "refused, replica silent but its IO thread runs: detect_after", scen: dead + "server node1 since=99\nserver node3 io=yes since_event=5 hb=1",
		sit: PrimaryFailing, act: ActWait, check: all(recheckAt(101), reasonHas("IO thread still running"))},
	{name: "refused, IO error while the IO thread runs: detect_after", scen: dead + "server node1 since=99\nserver node2 io=yes ioerr=2013",
		sit: PrimaryFailing, act: ActWait, check: recheckAt(101)},
	{name: "refused, a replica unreachable: detect_after", scen: dead + "server node1 since=99\nserver node3 down=timeout", sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(101), reasonHas("Vigil cannot check node3"))},
	{name: "refused, a replica checked before the failure: wait", scen: dead + "server node1 since=99\nserver node2 seen=98.9", sit: PrimaryFailing, act: ActWait,
		check: reasonHas("waiting for a check of node2")},
	{name: "refused, no replica: detect_after", scen: "now 100\ncluster main\noptions auto=yes\nserver node1 role=primary down=refused since=99",
		sit: PrimaryFailing, act: ActWait, check: recheckAt(101)},
	{name: "timeout, before the silent bound", scen: dead + "server node1 down=timeout since=99.5", sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(100.5), reasonHas("detect_after_silent is 1s"))},
	// A primary whose checks time out (paused, hung, cut off) while every
	// replica received nothing from it for detect_after_silent and more
	// than two heartbeat periods: silent and confirmed.
	{name: "timeout, replicas lost it: silent and confirmed", scen: dead + "server node1 down=timeout since=99", sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: reasonHas("silent and confirmed (detect_after_silent 1s)")},
	{name: "timeout, replicas silent: silent and confirmed", scen: dead + "server node1 down=timeout since=98.9\nserver node2 io=yes hb=0.25 since_event=1.2\nserver node3 io=yes hb=0.25 since_event=1.05",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: reasonHas("node2 (nothing received for 1.2s, heartbeat period 0.25s)", "silent and confirmed")},
	{name: "timeout, one replica heard it recently: wait for its silence", scen: dead + "server node1 down=timeout since=98.9\nserver node2 io=yes hb=0.25 since_event=1.2\nserver node3 io=yes hb=0.25 since_event=0.7",
		sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(100.3), reasonHas("the silence is not confirmed", "node3 (received from it 0.7s ago"))},
	{name: "timeout, heartbeat too long for the silent bound", scen: dead + "server node1 down=timeout since=98.9\nserver node2 io=yes hb=1 since_event=1.5\nserver node3 io=yes hb=1 since_event=1.5",
		sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(100.501), reasonHas("the silence is not confirmed"))},
	{name: "timeout, silence not measured (MySQL): detect_after", scen: dead + "server node1 down=timeout since=98.9\nserver node2 io=yes\nserver node3 io=yes",
		sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(100.9), reasonHas("its silence not measured"))},
	{name: "timeout, silent bound off", scen: dead + "server node1 down=timeout since=99\noptions detect_after_silent=-1s", sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(101), reasonHas("detect_after is 2s"))},
	{name: "timeout confirmed after detect_after", scen: dead + "server node1 down=timeout since=97.5\nserver node2 io=yes hb=1 since_event=2.5\nserver node3 io=yes hb=1 since_event=2.5", sit: DeadPrimary, act: ActExecute},
	{name: "other network error: detect_after", scen: dead + "server node1 down=error:2013 since=99.5", sit: PrimaryFailing, act: ActWait},
	{name: "short bound off", scen: dead + "server node1 since=99\noptions detect_after_refused=-1s", sit: PrimaryFailing, act: ActWait,
		check: all(recheckAt(101), reasonHas("detect_after is 2s"))},
	{name: "short bound not below detect_after", scen: dead + "server node1 since=98.5\noptions detect_after=1s detect_after_refused=3s", sit: DeadPrimary, act: ActExecute,
		check: func(t *testing.T, d Decision) {
			if strings.Contains(d.Reason, "refused and confirmed") {
				t.Errorf("reason %q: decided by the short bound", d.Reason)
			}
		}},
	{name: "refused after detect_after: the usual rule", scen: dead + "server node1 since=97\nserver node3 io=yes", sit: UnreachablePrimary, act: ActEvent},
	{name: "exactly detect_after", scen: dead + "server node1 since=98", sit: DeadPrimary, act: ActExecute},
	{name: "no failing-since fact: waits", scen: dead + "server node1 nofacts", sit: PrimaryFailing, act: ActWait, check: reasonHas("no FailingSince")},
	{name: "overload 1040", scen: dead + "server node1 down=overload:1040", sit: OverloadedPrimary, act: ActEvent, newPrimary: "-"},
	{name: "overload 1203", scen: dead + "server node1 down=overload:1203", sit: OverloadedPrimary, act: ActEvent},
	{name: "overload 1226", scen: dead + "server node1 down=overload:1226", sit: OverloadedPrimary, act: ActEvent},
	{name: "access denied 1045", scen: dead + "server node1 down=overload:1045", sit: OverloadedPrimary, act: ActEvent},
	{name: "1040 as plain error code", scen: dead + "server node1 down=error:1040", sit: OverloadedPrimary, act: ActEvent},
	{name: "1045 as plain error code", scen: dead + "server node1 down=error:1045", sit: OverloadedPrimary, act: ActEvent},
	{name: "other server error: alive", scen: dead + "server node1 down=error:1146", sit: PrimaryCheckError, act: ActEvent},
	{name: "replicas still connected", scen: dead + "server node2 io=yes\nserver node3 io=yes", sit: UnreachablePrimary, act: ActEvent,
		newPrimary: "-", check: reasonHas("partition", "node2, node3 (IO thread Yes)")},
	{name: "one replica still connected", scen: dead + "server node3 io=yes", sit: UnreachablePrimary, act: ActEvent,
		check: reasonHas("node3 (IO thread Yes)", "while node2")},
	{name: "IO error while Yes counts as lost", scen: dead + "server node2 io=yes ioerr=2013\nserver node3 io=yes ioerr=2013", sit: DeadPrimary, act: ActExecute},
	{name: "IO thread stopped counts as lost", scen: dead + "server node2 io=no\nserver node3 io=no", sit: DeadPrimary, act: ActExecute},
	{name: "nothing received for two heartbeat periods", scen: dead + "server node2 io=yes since_event=5 hb=1\nserver node3 io=yes since_event=4.5 hb=2",
		sit: DeadPrimary, act: ActExecute, check: reasonHas("nothing received for 5.0s, heartbeat period 1.0s")},
	{name: "one missed heartbeat is not a loss", scen: dead + "server node2 io=yes since_event=5 hb=1\nserver node3 io=yes since_event=1.5 hb=1",
		sit: UnreachablePrimary, act: ActEvent, check: reasonHas("received from it 1.5s ago")},
	{name: "recent event beats a stale IO error", scen: dead + "server node2 io=yes ioerr=2013 since_event=0.5 hb=1", sit: UnreachablePrimary, act: ActEvent,
		check: reasonHas("received from it 0.5s ago")},
	{name: "replica checked before the failure: wait", scen: dead + "server node2 seen=94", sit: PrimaryFailing, act: ActWait,
		check: reasonHas("waiting for a check of node2")},
	{name: "replicas unreachable too", scen: dead + "server node2 down=timeout\nserver node3 down=refused", sit: PrimaryAndReplicasUnreachable, act: ActEvent},
	{name: "no replicas at all", scen: "now 100\ncluster main\noptions auto=yes\nserver node1 role=primary down=refused since=90",
		sit: DeadPrimaryAndNoReplicas, act: ActEvent},
	{name: "servers replicate from elsewhere", scen: dead + "server x addr=10.9.9.9:3306\nserver node2 source=x\nserver node3 source=x",
		sit: DeadPrimaryAndNoReplicas, act: ActEvent},
	{name: "source matched by resolved name", scen: dead + "server node1 addr=10.0.0.1:3306\nserver node2 addr=10.0.0.2:3306 srcname=node1\nserver node3 srcname=node1",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node2"},
	{name: "one replica unreachable, the other confirms", scen: dead + "server node2 down=timeout", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: textHas("node2 could not be checked: it still points at node1", "unreachable, left alone: node2")},
	{name: "dead but no candidate", scen: dead + "options never_promote=node2,node3", sit: NoCandidate, act: ActEvent, detected: DeadPrimary,
		check: textHas("node2: excluded (never-promote)", "node3: excluded (never-promote)")},
	{name: "read-only cluster", scen: "now 100\ncluster ro type=read-only\nserver a role=primary", sit: Unmanaged, act: ActNone},
}

var gateRows = []row{
	{name: "never promote over known loss", scen: dead + "server node2 gtid=0-1-90\nserver node3 gtid=0-1-98\nacked node1 gtid=0-1-100 semisync=yes",
		sit: WouldLoseData, act: ActEvent, detected: DeadPrimary, newPrimary: "-",
		check: reasonHas("node3 would lose ≥ 2 transactions", "waits for node1", "failover --accept-loss")},
	{name: "candidate has what was acknowledged", scen: dead + "server node2 gtid=0-1-90\nserver node3 gtid=0-1-100\nacked node1 gtid=0-1-100 semisync=yes",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node3"},
	{name: "asynchronous loss is noted, not refused", scen: dead + "server node2 gtid=0-1-90\nserver node3 gtid=0-1-98\nacked node1 gtid=0-1-100",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node3", check: textHas("asynchronous replication: node3 would lose ≥ 2")},
	{name: "automatic failover off", scen: dead + "options auto=no", sit: AutoFailoverOff, act: ActEvent, detected: DeadPrimary, newPrimary: "-",
		check: textHas("a failover now would promote node2")},
	{name: "recent failover blocks", scen: dead + "history failover started=40 ended=60 ok=yes old=node0 new=node1 auto=yes",
		sit: RecentFailover, act: ActEvent, detected: DeadPrimary, newPrimary: "-",
		check: func(t *testing.T, d Decision) {
			if !d.RecheckAt.Equal(at(3660)) {
				t.Errorf("recheck at %s, want t0+3660s", d.RecheckAt)
			}
			reasonHas("min_interval is 1h0m0s", "vigil ctl ack")(t, d)
		}},
	{name: "recent failover acked", scen: dead + "history failover started=40 ended=60 ok=yes old=node0 new=node1\nack", sit: DeadPrimary, act: ActExecute},
	{name: "failover long ago", scen: dead + "now 7300\nserver node1 since=7290\nhistory failover started=40 ended=60 ok=yes old=node0 new=node1",
		sit: DeadPrimary, act: ActExecute},
	{name: "min_interval off", scen: dead + "options min_interval=-1s\nhistory failover started=40 ended=60 ok=yes old=node0 new=node1",
		sit: DeadPrimary, act: ActExecute},
	{name: "custom min_interval", scen: dead + "options min_interval=30s\nhistory failover started=40 ended=60 ok=yes old=node0 new=node1",
		sit: DeadPrimary, act: ActExecute},
	{name: "recent switchover does not block", scen: dead + "history switchover started=40 ended=60 ok=yes old=node0 new=node1",
		sit: DeadPrimary, act: ActExecute},
	{name: "failed failover unacked", scen: dead + `history failover started=-9000 ended=-8990 ok=no old=node0 new=node1 error="repoint failed"`,
		sit: UnackedFailure, act: ActEvent, detected: DeadPrimary, check: reasonHas("repoint failed", "vigil ctl ack")},
	{name: "failed switchover unacked", scen: dead + "history switchover started=-9000 ended=-8990 ok=no old=node0 new=node1",
		sit: UnackedFailure, act: ActEvent},
	// Rolled back whole: the cluster is as it was, nothing to check.
	{name: "rolled-back switchover does not block", scen: dead + "history switchover started=-9000 ended=-8990 ok=no rolled_back=yes old=node0 new=node1",
		sit: DeadPrimary, act: ActExecute},
	{name: "interrupted failover counts as failed", scen: dead + "history failover started=-9000 ok=no old=node0 new=node1",
		sit: UnackedFailure, act: ActEvent, check: reasonHas("it did not finish")},
	{name: "failed failover acked", scen: dead + "history failover started=-9000 ended=-8990 ok=no old=node0 new=node1 acked=yes",
		sit: DeadPrimary, act: ActExecute},
	{name: "ack clears both", scen: dead + "history failover started=40 ended=60 ok=no old=node0 new=node1\nack", sit: DeadPrimary, act: ActExecute},
	{name: "operation running: automatic waits", scen: dead + "running switchover started=99 old=node1 new=node3",
		sit: OperationRunning, act: ActWait, detected: DeadPrimary, newPrimary: "-", check: reasonHas("switchover (node1 → node3)")},
	{name: "operation running while healthy", scen: base + "running rejoin started=99 old=node0", sit: OperationRunning, act: ActWait, detected: Healthy},
	{name: "old primary returned", scen: base + "server node0 role=replica gtid=0-1-90 ro=no\nhistory failover started=10 ended=20 ok=yes old=node0 new=node1\nfenced node0",
		sit: OldPrimaryReturned, act: ActEvent, newPrimary: "-",
		check: reasonHas("node0, replaced by the failover", "read_only=OFF", "vigil ctl rejoin node0")},
	{name: "old primary returned diverged", scen: base + "server node0 role=replica gtid=0-1-104\nhistory failover started=10 ended=20 ok=yes old=node0 new=node1",
		sit: OldPrimaryReturned, act: ActEvent, check: reasonHas("rejoin is not possible yet", "domain 0 sequences 101..104")},
	{name: "auto rejoin of a compatible old primary", scen: returned + "options auto_rejoin=yes",
		sit: AutoRejoin, act: ActExecute, newPrimary: "node1",
		check: func(t *testing.T, d Decision) {
			t.Helper()
			if d.Plan == nil || d.Plan.Kind != KindRejoin || !d.Plan.Auto || d.Plan.OldPrimary != "node0" {
				t.Fatalf("plan %+v, want an automatic rejoin of node0", d.Plan)
			}
			// Exactly the plan `rejoin node0` runs.
			in, err := parseInput(returned + "options auto_rejoin=yes\nrequest rejoin to=node0")
			if err != nil {
				t.Fatal(err)
			}
			m := Decide(in)
			if len(m.Plan.Steps) != len(d.Plan.Steps) {
				t.Fatalf("auto plan has %d steps, the manual one %d", len(d.Plan.Steps), len(m.Plan.Steps))
			}
			for i := range m.Plan.Steps {
				if !reflect.DeepEqual(m.Plan.Steps[i], d.Plan.Steps[i]) {
					t.Errorf("step %d: auto %+v, manual %+v", i+1, d.Plan.Steps[i], m.Plan.Steps[i])
				}
			}
			reasonHas("failover.auto_rejoin is on", "holds nothing the primary node1")(t, d)
		}},
	{name: "auto rejoin off: the old primary waits", scen: returned + "options auto_rejoin=no",
		sit: OldPrimaryReturned, act: ActEvent, check: func(t *testing.T, d Decision) {
			t.Helper()
			reasonHas("vigil ctl rejoin node0")(t, d)
			if len(d.FenceNotes) != 0 {
				t.Errorf("fence notes %v with auto_rejoin off", d.FenceNotes)
			}
		}},
	{name: "auto rejoin of a diverged old primary: stays fenced, says why", scen: base + "options auto_rejoin=yes\nserver node0 role=replica gtid=0-1-104\nhistory failover started=10 ended=20 ok=yes old=node0 new=node1\nfenced node0",
		sit: OldPrimaryReturned, act: ActEvent, check: func(t *testing.T, d Decision) {
			t.Helper()
			reasonHas("automatic rejoin (failover.auto_rejoin) did not run", "domain 0 sequences 101..104", "Salvage them first")(t, d)
			if n := d.FenceNotes["node0"]; !strings.Contains(n, "automatic rejoin (failover.auto_rejoin) did not run") || !strings.Contains(n, "run rejoin again") {
				t.Errorf("fence note %q", n)
			}
		}},
	{name: "auto rejoin backs off after a failure", scen: returned + "options auto_rejoin=yes\nhistory rejoin started=80 ended=90 ok=no old=node0 error=boom",
		sit: OldPrimaryReturned, act: ActEvent, check: func(t *testing.T, d Decision) {
			t.Helper()
			reasonHas("automatic rejoin failed 1 time(s)", "boom", "back-off")(t, d)
			if !d.RecheckAt.Equal(at(120)) {
				t.Errorf("recheck at %s, want t0+120s (30s after the failure)", d.RecheckAt)
			}
			if d.FenceNotes["node0"] == "" {
				t.Error("no fence note while backing off")
			}
		}},
	{name: "auto rejoin retries after the back-off", scen: returned + "options auto_rejoin=yes\nhistory rejoin started=60 ended=65 ok=no old=node0 error=boom",
		sit: AutoRejoin, act: ActExecute, check: reasonHas("attempt 2", "boom")},
	{name: "auto rejoin back-off doubles", scen: returned + "options auto_rejoin=yes\nhistory rejoin started=30 ended=31 ok=no old=node0 error=a\nhistory rejoin started=60 ended=65 ok=no old=node0 error=b",
		sit: OldPrimaryReturned, act: ActEvent, check: func(t *testing.T, d Decision) {
			t.Helper()
			if !d.RecheckAt.Equal(at(125)) {
				t.Errorf("recheck at %s, want t0+125s (60s after the second failure)", d.RecheckAt)
			}
		}},
	{name: "auto rejoin of one returned old primary, another diverged stays fenced", scen: returned + "options auto_rejoin=yes\nserver node4 role=replica gtid=0-1-104\nhistory failover started=30 ended=31 ok=yes old=node4 new=node1",
		sit: AutoRejoin, act: ActExecute, check: func(t *testing.T, d Decision) {
			t.Helper()
			if d.Plan.OldPrimary != "node0" {
				t.Errorf("rejoins %s, want node0", d.Plan.OldPrimary)
			}
			if _, ok := d.FenceNotes["node0"]; ok || !strings.Contains(d.FenceNotes["node4"], "did not run") {
				t.Errorf("fence notes %v, want one for node4 only", d.FenceNotes)
			}
		}},
	{name: "auto rejoin waits for a running operation", scen: returned + "options auto_rejoin=yes\nrunning switchover started=99 old=node1 new=node2",
		sit: OperationRunning, act: ActWait, detected: AutoRejoin},
	{name: "old primary rejoined", scen: base + "server node0 role=replica source=node1 gtid=0-1-100\nhistory failover started=10 ended=20 ok=yes old=node0 new=node1\nhistory rejoin started=30 ended=31 ok=yes old=node0",
		sit: Healthy, act: ActNone},
	{name: "old primary still down", scen: base + "server node0 role=replica down=refused\nhistory failover started=10 ended=20 ok=yes old=node0 new=node1",
		sit: Healthy, act: ActNone},
	{name: "old primary returned while the primary dies", scen: dead + "server node0 role=replica gtid=0-1-90\nhistory failover started=-9000 ended=-8990 ok=yes old=node0 new=node1",
		sit: DeadPrimary, act: ActExecute, check: textHas("node0, replaced by the failover")},
}

var requestRows = []row{
	{name: "manual failover refused over known loss", scen: dead + "server node2 gtid=0-1-90\nserver node3 gtid=0-1-95\nacked node1 gtid=0-1-100 semisync=yes at=94\nrequest failover",
		sit: WouldLoseData, act: ActRefuse, newPrimary: "-", detected: DeadPrimary,
		check: reasonHas("node3 would lose ≥ 5 transactions acknowledged by node1", "0-1-96..100", "--accept-loss")},
	{name: "manual failover accepting known loss", scen: dead + "server node2 gtid=0-1-90\nserver node3 gtid=0-1-95\nacked node1 gtid=0-1-100 semisync=yes async=yes\nrequest failover accept-loss=yes",
		sit: ManualFailover, act: ActExecute, newPrimary: "node3", detected: DeadPrimary,
		check: reasonHas("known loss: node3 would lose ≥ 5", "fell back to asynchronous")},
	{name: "manual failover with auto off", scen: dead + "options auto=no\nrequest failover", sit: ManualFailover, act: ActExecute, newPrimary: "node2", detected: DeadPrimary},
	{name: "manual failover despite a recent failover", scen: dead + "history failover started=40 ended=60 ok=yes old=node0 new=node1\nrequest failover",
		sit: ManualFailover, act: ActExecute},
	{name: "manual failover despite an unacked failure", scen: dead + "history failover started=40 ended=60 ok=no old=node0 new=node1\nrequest failover",
		sit: ManualFailover, act: ActExecute},
	{name: "manual failover of a healthy primary", scen: base + "request failover", sit: PrimaryHealthy, act: ActRefuse, newPrimary: "-",
		check: reasonHas("use switchover")},
	{name: "manual failover of an overloaded primary", scen: dead + "server node1 down=overload:1040\nrequest failover", sit: PrimaryHealthy, act: ActRefuse},
	{name: "forced failover of a healthy primary", scen: base + "request failover force", sit: ManualFailover, act: ActExecute, newPrimary: "node2",
		check: textHas("SET GLOBAL read_only = 1 (best effort)")},
	{name: "manual failover on a partition", scen: dead + "server node2 io=yes\nserver node3 io=yes\nrequest failover", sit: ManualFailover, act: ActExecute,
		detected: UnreachablePrimary},
	{name: "manual failover while failing", scen: dead + "server node1 since=99.5\nrequest failover", sit: ManualFailover, act: ActExecute},
	{name: "manual failover --to", scen: dead + "request failover to=node3", sit: ManualFailover, act: ActExecute, newPrimary: "node3",
		check: textHas("node3: CHOSEN — asked for with --to")},
	{name: "--to unknown", scen: dead + "request failover to=node9", sit: InvalidTarget, act: ActRefuse, check: reasonHas("no such server", "node1, node2, node3")},
	{name: "--to the primary", scen: dead + "request failover to=node1", sit: InvalidTarget, act: ActRefuse, check: reasonHas("is the primary")},
	{name: "--to a delayed replica", scen: dead + "server node3 delay=600\nrequest failover to=node3", sit: InvalidTarget, act: ActRefuse,
		check: reasonHas("SQL_Delay=600")},
	{name: "--to a replica behind", scen: dead + "server node3 gtid=0-1-97\nrequest failover to=node3", sit: InvalidTarget, act: ActRefuse,
		check: reasonHas("node2 has domain 0 sequences 98..100", "choose node2")},
	{name: "--to a replica behind, forced", scen: dead + "server node3 gtid=0-1-97\nrequest failover to=node3 force", sit: ManualFailover, act: ActExecute,
		newPrimary: "node3", check: func(t *testing.T, d Decision) {
			if len(d.Plan.Quarantine) != 1 || d.Plan.Quarantine[0].Server != "node2" {
				t.Errorf("quarantine %+v, want node2", d.Plan.Quarantine)
			}
		}},
	{name: "manual failover without candidate", scen: dead + "options never_promote=node2,node3\nrequest failover", sit: NoCandidate, act: ActRefuse},
	{name: "manual failover without primary", scen: base + "server node1 role=replica ro=yes\nrequest failover", sit: NoPrimary, act: ActRefuse},
	{name: "request while an operation runs", scen: dead + "running failover started=99 old=node1 new=node2\nrequest failover", sit: OperationRunning, act: ActRefuse,
		check: reasonHas("one operation at a time")},
	{name: "switchover while an operation runs", scen: base + "running failover started=99 old=node1 new=node2\nrequest switchover", sit: OperationRunning, act: ActRefuse},
	{name: "failover on a read-only cluster", scen: "now 100\ncluster ro type=read-only\nserver a role=primary\nrequest failover", sit: Unmanaged, act: ActRefuse},
	{name: "dry run", scen: dead + "request failover dry-run", sit: ManualFailover, act: ActExecute, check: textHas("dry run: the plan is shown, not executed", "request: failover --dry-run")},
}

func TestDetect(t *testing.T)   { runRows(t, detectRows) }
func TestGates(t *testing.T)    { runRows(t, gateRows) }
func TestRequests(t *testing.T) { runRows(t, requestRows) }

func TestBadInput(t *testing.T) {
	for _, in := range []Input{{}, {Snapshot: &topology.Snapshot{Cluster: "x"}}} {
		d := Decide(in)
		if d.Situation != BadInput || d.Action != ActNone {
			t.Errorf("got %s → %s", d.Situation, d.Action)
		}
	}
	d := Decide(Input{Request: &Request{Kind: RequestFailover}})
	if d.Situation != BadInput || d.Action != ActRefuse {
		t.Errorf("request on bad input: got %s → %s", d.Situation, d.Action)
	}
}

// TestFencingComesFirst: whatever the plan, the old primary is fenced at
// the router, made read-only and the fence hook run before any
// promotion step.
func TestFencingComesFirst(t *testing.T) {
	d := decide(t, dead+"options fence_command=/usr/local/bin/stonith")
	if d.Plan == nil {
		t.Fatalf("no plan:\n%s", d)
	}
	want := []StepKind{FenceRouter, SetReadOnly, StopIOThread, FenceHook, StopReplication, ResetReplica, SetWritable, SetRouterWriter}
	var got []StepKind
	for _, s := range d.Plan.Steps {
		if s.Server == "node1" || s.Server == "node2" {
			got = append(got, s.Kind)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	s := d.Plan.Steps
	if s[0].Server != "node1" || s[1].OnFail != Continue || s[4].Kind != FenceHook || s[4].OnFail != Abort || !strings.Contains(s[4].Detail, "stonith") {
		t.Errorf("fence steps: %v", s[:5])
	}
	if d.Plan.Term != 8 {
		t.Errorf("term %d, want snapshot term + 1", d.Plan.Term)
	}
	if !slices.Equal(d.Plan.Repoint, []string{"node3"}) {
		t.Errorf("repoint %v", d.Plan.Repoint)
	}
	if !strings.Contains(d.String(), "MASTER_USE_GTID=slave_pos") {
		t.Errorf("repoint without MASTER_USE_GTID=slave_pos:\n%s", d)
	}
}

// TestDeterministic: the same input gives the same decision, call after
// call, whatever order the maps are built in, and Decide never changes
// its input.
func TestDeterministic(t *testing.T) {
	all := slices.Concat(detectRows, gateRows, requestRows, candidateRows, switchoverRows, galeraRows, rejoinRows, readOnlyRows)
	for _, r := range all {
		in1, err := parseInput(r.scen)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		in2, _ := parseInput(r.scen)
		first := Decide(in1).String()
		if !reflect.DeepEqual(in1, in2) {
			t.Errorf("%s: Decide changed its input", r.name)
		}
		for range 10 {
			in3, _ := parseInput(r.scen)
			// Rebuild the maps so their iteration order differs.
			obs := map[string]*topology.Observation{}
			facts := map[string]ServerFacts{}
			names := slices.Sorted(maps.Keys(in3.Obs))
			slices.Reverse(names)
			for _, n := range names {
				obs[n] = in3.Obs[n]
			}
			for n, f := range in3.Facts {
				facts[n] = f
			}
			in3.Obs, in3.Facts = obs, facts
			if got := Decide(in3).String(); got != first {
				t.Fatalf("%s: decision changed between calls:\n%s\n---\n%s", r.name, first, got)
			}
		}
	}
}

// TestEverySituation: every situation has a name, a description, an
// action, a table row, and a line in docs/failover.md.
func TestEverySituation(t *testing.T) {
	rows := slices.Concat(detectRows, gateRows, requestRows, candidateRows, switchoverRows, galeraRows, rejoinRows, readOnlyRows, viewRows)
	seen := map[Situation]bool{Unknown: true, BadInput: true} // BadInput: TestBadInput
	for _, r := range rows {
		seen[r.sit] = true
		seen[r.detected] = true
	}
	doc, err := os.ReadFile("../../docs/failover.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Situations() {
		if s.String() == "" || strings.HasPrefix(s.String(), "Situation(") || s.Description() == "" {
			t.Errorf("situation %d has no name or description", s)
		}
		if !seen[s] {
			t.Errorf("situation %s has no table row", s)
		}
		if s != Unknown && !strings.Contains(string(doc), "| "+s.String()+" |") {
			t.Errorf("situation %s is not in the table of docs/failover.md", s)
		}
	}
	for e := Eligible; e < numExclusions; e++ {
		if !strings.Contains(string(doc), "`"+e.String()+"`") {
			t.Errorf("exclusion %s is not in docs/failover.md", e)
		}
	}
	for k := FenceRouter; k < numStepKinds; k++ {
		if !strings.Contains(string(doc), "`"+k.String()+"`") {
			t.Errorf("step %s is not in docs/failover.md", k)
		}
	}
}

func TestOptions(t *testing.T) {
	o := Options{}.WithDefaults()
	if o.DetectAfter != 2*time.Second || o.MinInterval != time.Hour || o.ApplyTimeout != 30*time.Second ||
		o.MaxLagSeconds != DefaultMaxLagSeconds || o.MaxRunningSeconds != DefaultMaxRunningSeconds {
		t.Errorf("defaults: %+v", o)
	}
	if err := o.Validate([]string{"a"}); err != nil {
		t.Errorf("valid options: %v", err)
	}
	bad := Options{DetectAfter: -1, Candidates: []string{"a", "z"}, NeverPromote: []string{"a"}, MaxLagSeconds: -1}
	err := bad.Validate([]string{"a", "b"})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"detect_after", `"a" is also in never_promote`, `"z" is not a server`, "max_lag"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	h := History{Records: []Record{{OK: false}}}
	if a := h.Ack(); !a.Records[0].Acked || h.Records[0].Acked {
		t.Error("Ack must acknowledge a copy")
	}
}
