package failover

import (
	"slices"
	"testing"
)

// roPrimary is base with node1, the designated primary, read-only and no
// writer routed.
const roPrimary = base + `
cluster main term=7 writer=none
server node1 ro=yes
`

// rolledBack: a switchover's rollback could not make node1 writable again.
const rolledBack = roPrimary + `history switchover started=90 ended=91 ok=no old=node1 new=node2 left_ro=node1 error="step wait-gtid on node2 failed: timeout; the rollback failed: r1 set-writable on node1: ERROR 1290"
`

// abortedFailover: a failover from node1 (dead, fenced) to node2 failed at
// node2's set-writable, after the monitor was told node2 is the writer.
const abortedFailover = `
now 100
cluster main term=8 writer=none
options auto=yes
server node1 role=replica down=refused since=80
server node2 role=primary gtid=0-1-100 ro=yes
server node3 role=replica source=node1 gtid=0-1-100 io=no
fenced node1
history failover started=90 ended=90 ok=no auto=yes old=node1 new=node2 left_ro=node2 error="step set-writable on node2 failed: i/o timeout"
`

func restores(server string) func(t *testing.T, d Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		p := d.Plan
		if p == nil || p.Kind != KindRestoreWriter || p.NewPrimary != server || !slices.Equal(steps(d), []StepKind{SetWritable, SetRouterWriter}) {
			t.Fatalf("want a restore-writer plan of %s, only set-writable and set-router-writer", server)
		}
		if p.Steps[0].Server != server || p.Steps[1].Server != server || p.Term != 8 && p.Term != 9 {
			t.Errorf("plan %+v", p)
		}
	}
}

var readOnlyRows = []row{
	{name: "read-only primary, not ours: event only", scen: roPrimary, sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: reasonHas("node1 (the primary) answers checks but is read-only", "no server is writable", "does not undo a read_only it did not set", "vigil ctl switchover --to node1")},
	{name: "read-only primary with two other servers writable", scen: roPrimary + "server node2 ro=no\nserver node3 ro=no", sit: PrimaryReadOnly, act: ActEvent,
		newPrimary: "-", check: reasonHas("node2, node3 report read_only=OFF but are not the primary")},
	{name: "writable primary is healthy", scen: base + "cluster main term=7 writer=none", sit: Healthy, act: ActNone},
	{name: "read-only primary with another server writable", scen: roPrimary + "server node3 ro=no", sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: reasonHas("node3 reports read_only=OFF but is not the primary")},
	{name: "rollback left it read-only: restore", scen: rolledBack, sit: PrimaryReadOnly, act: ActExecute, newPrimary: "node1",
		check: all(restores("node1"), reasonHas("the switchover started at", "left it so", "attempt 1 of 3"),
			textHas("plan: automatic restore-writer: make the primary node1 writable"))},
	{name: "failover aborted at set-writable: restore the new primary", scen: abortedFailover, sit: PrimaryReadOnly, act: ActExecute, newPrimary: "node2",
		check: all(restores("node2"), textHas("node3 does not replicate from node2 (source: node1): `vigil ctl rejoin node3`"))},
	{name: "a rejoin since does not matter", scen: abortedFailover + "history rejoin started=95 ended=96 ok=yes old=node3", sit: PrimaryReadOnly, act: ActExecute},
	{name: "an operation left another server read-only", scen: roPrimary + "history switchover started=90 ended=91 ok=no old=node1 new=node2 left_ro=node2",
		sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-", check: reasonHas("no failed operation of Vigil's left it so")},
	{name: "a later operation succeeded", scen: rolledBack + "history switchover started=92 ended=93 ok=yes old=node2 new=node1",
		sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-"},
	{name: "restore: another server writable", scen: rolledBack + "server node3 ro=no", sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: reasonHas("node3 reports read_only=OFF: it may have taken writes", "Vigil does not make it writable by itself")},
	{name: "restore: a replica is ahead", scen: rolledBack + "server node3 gtid=0-1-101", sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: reasonHas("node3 holds transactions node1 lacks: 0-1-101")},
	{name: "restore: the returned old primary is ahead", scen: abortedFailover + "server node1 down= gtid=0-1-103 ro=yes", sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: reasonHas("node1 holds transactions node2 lacks: domain 0 sequences 101..103")},
	{name: "restore: the primary replicates", scen: rolledBack + "server node1 source=node2", sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: reasonHas("node1 still has a replication source (node2)")},
	{name: "restore: the primary is fenced", scen: rolledBack + "fenced node1", sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: reasonHas("node1 is fenced")},
	{name: "restore: auto off", scen: rolledBack + "options auto=no", sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: reasonHas("failover.auto: false", "vigil ctl switchover --to node1")},
	{name: "restore: the next attempt waits detect_after", scen: rolledBack + "history restore started=98 ended=99 ok=no auto=yes new=node1 left_ro=node1",
		sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-",
		check: func(t *testing.T, d Decision) {
			if !d.RecheckAt.Equal(at(101)) {
				t.Errorf("recheck at %s, want t0+101s", d.RecheckAt)
			}
			reasonHas("attempt 1 of 3 to make it writable again failed")(t, d)
		}},
	{name: "restore: second attempt", scen: rolledBack + "history restore started=97 ended=98 ok=no auto=yes new=node1 left_ro=node1",
		sit: PrimaryReadOnly, act: ActExecute, newPrimary: "node1", check: reasonHas("attempt 2 of 3")},
	{name: "restore: gives up after three attempts", scen: rolledBack + `history restore started=92 ended=92 ok=no new=node1 left_ro=node1
history restore started=94 ended=94 ok=no new=node1 left_ro=node1
history restore started=96 ended=96 ok=no new=node1 left_ro=node1`,
		sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-", check: reasonHas("tried 3 times", "gave up", "vigil ctl ack")},
	{name: "restore: an ack lets it try again", scen: rolledBack + `history restore started=92 ended=92 ok=no new=node1 left_ro=node1
history restore started=94 ended=94 ok=no new=node1 left_ro=node1
history restore started=96 ended=96 ok=no new=node1 left_ro=node1
ack`,
		sit: PrimaryReadOnly, act: ActExecute, newPrimary: "node1", check: reasonHas("attempt 1 of 3")},
	{name: "restore: a restored writer is not restored again", scen: rolledBack + "history restore started=92 ended=92 ok=yes new=node1",
		sit: PrimaryReadOnly, act: ActEvent, newPrimary: "-"},
	{name: "restore: waits for a running operation", scen: rolledBack + "running rejoin started=99 old=node3", sit: OperationRunning, act: ActWait, detected: PrimaryReadOnly},
	{name: "restore: failover still waits for an ack", scen: abortedFailover + "server node2 down=refused since=95\nserver node3 io=lost source=node2",
		sit: UnackedFailure, act: ActEvent, detected: DeadPrimary},
	{name: "MySQL: restore", scen: `
now 100
cluster my term=3 writer=none
options auto=yes
server node1 role=primary flavor=mysql ro=yes gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100
server node2 role=replica flavor=mysql source=node1 gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100
history switchover started=90 ended=91 ok=no old=node1 new=node2 left_ro=node1`, sit: PrimaryReadOnly, act: ActExecute, newPrimary: "node1",
		check: textHas("SET GLOBAL super_read_only = 0; SET GLOBAL read_only = 0")},

	// Requests.
	{name: "switchover --to the read-only primary", scen: roPrimary + "options auto=no\nrequest switchover to=node1", sit: PrimaryReadOnly, act: ActExecute,
		newPrimary: "node1", check: all(restores("node1"), reasonHas("switchover --to node1", "make it writable"), textHas("plan: requested restore-writer"))},
	{name: "switchover --to the read-only primary, a replica ahead", scen: roPrimary + "server node2 gtid=0-1-102\nrequest switchover to=node1",
		sit: InvalidTarget, act: ActRefuse, check: reasonHas("node2 holds transactions node1 lacks")},
	{name: "switchover --to the read-only primary, another writable", scen: roPrimary + "server node2 ro=no\nrequest switchover to=node1",
		sit: InvalidTarget, act: ActRefuse, check: reasonHas("node2 reports read_only=OFF")},
	{name: "switchover away from a read-only primary", scen: roPrimary + "request switchover to=node2", sit: Switchover, act: ActExecute, newPrimary: "node2",
		detected: PrimaryReadOnly},
	{name: "failover of a read-only primary", scen: roPrimary + "request failover", sit: PrimaryHealthy, act: ActRefuse,
		check: reasonHas("it is alive", "`switchover --to node1` makes it writable")},
}

func TestReadOnlyPrimary(t *testing.T) { runRows(t, readOnlyRows) }
