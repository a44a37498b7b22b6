package failover

import (
	"slices"
	"testing"
)

// returned is base after a failover from node0 to node1: node0 is back,
// fenced, at its own last position.
const returned = base + `
history failover started=10 ended=20 ok=yes old=node0 new=node1
fenced node0
server node0 role=replica ro=no gtid=0-1-95
`

var rejoinRows = []row{
	{name: "rejoin compatible", scen: returned + "request rejoin to=node0", sit: Rejoin, act: ActExecute, newPrimary: "node1",
		check: func(t *testing.T, d Decision) {
			if got, want := steps(d), []StepKind{KillPreFence, SetReadOnly, Repoint, VerifyReplicating, Unfence}; !slices.Equal(got, want) {
				t.Errorf("steps %v, want %v", got, want)
			}
			if d.Plan.Kind != KindRejoin || d.Plan.Term != 7 || d.Plan.OldPrimary != "node0" {
				t.Errorf("plan %+v", d.Plan)
			}
			textHas("MASTER_USE_GTID=current_pos", "holds nothing the primary node1")(t, d)
		}},
	{name: "rejoin equal position", scen: returned + "server node0 gtid=0-1-100\nrequest rejoin to=node0", sit: Rejoin, act: ActExecute},
	{name: "rejoin ahead", scen: returned + "server node0 gtid=0-1-104\nrequest rejoin to=node0", sit: RejoinDiverged, act: ActRefuse,
		check: reasonHas("holds transactions the primary node1 lacks: domain 0 sequences 101..104 (last 0-1-104)", "Salvage them first")},
	{name: "rejoin one extra", scen: returned + "server node0 gtid=0-1-101\nrequest rejoin to=node0", sit: RejoinDiverged, act: ActRefuse,
		check: reasonHas("lacks: 0-1-101.")},
	{name: "rejoin same sequence other server", scen: returned + "server node0 gtid=0-0-100\nrequest rejoin to=node0", sit: RejoinDiverged, act: ActRefuse,
		check: reasonHas("0-0-100 (the other has 0-1-100)")},
	{name: "rejoin extra domain", scen: returned + "server node0 gtid=0-1-90,3-0-7\nrequest rejoin to=node0", sit: RejoinDiverged, act: ActRefuse,
		check: reasonHas("domain 3 up to 3-0-7")},
	{name: "rejoin an unreachable replica after a failover", scen: base + "server node4 role=replica source=node0 io=lost gtid=0-1-97 iopos=0-1-99\nrequest rejoin to=node4",
		sit: Rejoin, act: ActExecute, check: textHas("MASTER_USE_GTID=slave_pos", "relay log (up to 0-1-99) is discarded")},
	{name: "rejoin a replica that already replicates", scen: base + "request rejoin to=node3", sit: Rejoin, act: ActExecute,
		check: func(t *testing.T, d Decision) {
			if got := steps(d); !slices.Equal(got, []StepKind{VerifyReplicating, Unfence}) {
				t.Errorf("steps %v", got)
			}
		}},
	// A former primary whose last transaction reached no replica, while the
	// new primary has written further in the same domain: by position it
	// looks behind (0-1-95 < 0-1-100), by binlog state it is not.
	{name: "rejoin diverged by binlog state", scen: returned +
		"server node0 gtid=0-1-95 binlog_state=0-1-95\nserver node1 binlog_state=0-1-94,0-2-100\nrequest rejoin to=node0",
		sit: RejoinDiverged, act: ActRefuse, check: reasonHas("lacks: 0-1-95 (the other's last of server 1 is 0-1-94)")},
	{name: "rejoin compatible by binlog state", scen: returned +
		"server node0 gtid=0-1-95 binlog_state=0-1-95\nserver node1 binlog_state=0-1-95,0-2-100\nrequest rejoin to=node0",
		sit: Rejoin, act: ActExecute},
	// Under write load the replica's sample is newer than its primary's:
	// it holds the primary's own later writes (server id 1 is node1's),
	// which is not divergence (issue 14, case 4).
	{name: "rejoin a replica ahead of an older sample of its primary", scen: base +
		"server node1 server_id=1\nserver node3 io=no gtid=0-1-7105 binlog_state=0-1-7105\nserver node1 binlog_state=0-1-7050\nrequest rejoin to=node3",
		sit: Rejoin, act: ActExecute},
	{name: "rejoin ahead with transactions of another server", scen: returned +
		"server node1 server_id=2 gtid=0-2-100\nserver node0 gtid=0-1-104\nrequest rejoin to=node0", sit: RejoinDiverged, act: ActRefuse,
		check: reasonHas("domain 0 sequences 101..104")},
	{name: "rejoin ahead by binlog state of another server", scen: returned +
		"server node1 server_id=2 gtid=0-2-100 binlog_state=0-1-94,0-2-100\nserver node0 gtid=0-2-100 binlog_state=0-1-95,0-2-100\nrequest rejoin to=node0",
		sit: RejoinDiverged, act: ActRefuse, check: reasonHas("0-1-95")},
	{name: "rejoin unknown", scen: returned + "request rejoin to=nodeZ", sit: InvalidTarget, act: ActRefuse},
	{name: "rejoin the primary", scen: returned + "request rejoin to=node1", sit: InvalidTarget, act: ActRefuse},
	{name: "rejoin an unreachable server", scen: returned + "server node0 down=refused\nrequest rejoin to=node0", sit: InvalidTarget, act: ActRefuse,
		check: reasonHas("cannot check it")},
	{name: "rejoin with the primary down", scen: returned + "server node1 down=refused\nrequest rejoin to=node0", sit: PrimaryDown, act: ActRefuse},
	{name: "rejoin on galera", scen: galera + "request rejoin to=g2", sit: InvalidTarget, act: ActRefuse, check: reasonHas("IST or SST")},
	{name: "rejoin while an operation runs", scen: returned + "running failover started=99 old=node1 new=node2\nrequest rejoin to=node0", sit: OperationRunning, act: ActRefuse},
	{name: "rejoin MySQL diverged", scen: `
now 100
cluster my term=3
server node1 role=primary flavor=mysql gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100
server node0 role=replica flavor=mysql ro=no gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-90,bbbbbbbb-71ca-11e1-9e33-c80aa9429562:1-12
request rejoin to=node0`, sit: RejoinDiverged, act: ActRefuse, check: reasonHas("lacks: bbbbbbbb-71ca-11e1-9e33-c80aa9429562:1-12.")},
}

func TestRejoin(t *testing.T) { runRows(t, rejoinRows) }

func TestPlanRejoinIsDecide(t *testing.T) {
	in, err := parseInput(returned)
	if err != nil {
		t.Fatal(err)
	}
	got := PlanRejoin(in, "node0")
	in.Request = &Request{Kind: RequestRejoin, To: "node0"}
	if want := Decide(in); got.String() != want.String() || got.Situation != Rejoin {
		t.Errorf("PlanRejoin:\n%s\nDecide:\n%s", got, want)
	}
}
