package failover

import (
	"slices"
	"strings"
	"testing"
)

// three is dead with a third replica, node4.
const three = dead + "server node4 role=replica source=node1 gtid=0-1-100 io=lost\n"

// excluded checks that server was not chosen for the given reason.
func excluded(server string, e Exclusion, reason ...string) func(t *testing.T, d Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		for _, c := range d.Choices {
			if c.Server != server {
				continue
			}
			if c.Excluded != e || c.Chosen {
				t.Errorf("%s: excluded %s chosen %v, want excluded %s", server, c.Excluded, c.Chosen, e)
			}
			for _, r := range reason {
				if !strings.Contains(c.Reason, r) {
					t.Errorf("%s: reason %q lacks %q", server, c.Reason, r)
				}
			}
			return
		}
		t.Errorf("no choice for %s", server)
	}
}

func steps(d Decision) []StepKind {
	if d.Plan == nil {
		return nil
	}
	var out []StepKind
	for _, s := range d.Plan.Steps {
		out = append(out, s.Kind)
	}
	return out
}

func all(checks ...func(t *testing.T, d Decision)) func(t *testing.T, d Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		for _, c := range checks {
			c(t, d)
		}
	}
}

var candidateRows = []row{
	{name: "config order breaks the last tie", scen: three, sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: textHas("node3: not chosen — as advanced as node2, which wins the tie (earlier in the configuration)")},
	{name: "lagging replica never beats an up-to-date one", scen: three + "server node2 gtid=0-1-90 lag=100\nserver node4 gtid=0-1-95",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node3", check: textHas("node2: not chosen — behind node3 by 10 transaction(s)")},
	{name: "lower lag breaks a tie", scen: three + "server node2 lag=5\nserver node3 lag=1\nserver node4 lag=3", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: textHas("(lower lag)")},
	{name: "unknown lag loses a tie", scen: three + "server node2 lag=null\nserver node3 lag=9\nserver node4 lag=12", sit: DeadPrimary, act: ActExecute, newPrimary: "node3"},
	{name: "GTID superset wins", scen: three + "server node4 gtid=0-1-100,1-4-5", sit: DeadPrimary, act: ActExecute, newPrimary: "node4"},
	{name: "superset beats candidates preference", scen: three + "server node4 gtid=0-1-101\noptions candidates=node2", sit: DeadPrimary, act: ActExecute, newPrimary: "node4"},
	{name: "candidates preferred on a tie", scen: three + "options candidates=node4", sit: DeadPrimary, act: ActExecute, newPrimary: "node4",
		check: textHas("node2: not chosen — as advanced as node4, which wins the tie (preferred in candidates)", "listed in candidates")},
	{name: "candidates order", scen: three + "options candidates=node4,node3", sit: DeadPrimary, act: ActExecute, newPrimary: "node4"},
	{name: "candidates beat lower lag", scen: three + "server node2 lag=0\nserver node3 lag=9\noptions candidates=node3", sit: DeadPrimary, act: ActExecute, newPrimary: "node3"},
	{name: "received relay log counts for advancement", scen: three + "server node3 gtid=0-1-98 iopos=0-1-102", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: func(t *testing.T, d Decision) {
			k := steps(d)
			w := slices.Index(k, WaitRelayApplied)
			if w < 0 || w > slices.Index(k, StopReplication) || w < slices.Index(k, SetReadOnly) {
				t.Fatalf("want wait-relay-applied after fencing and before stop-replication: %v", k)
			}
			s := d.Plan.Steps[w]
			if s.Server != "node3" || s.Position != "0-1-102" || s.Timeout != DefaultApplyTimeout || s.OnFail != Abort {
				t.Errorf("wait step %+v", s)
			}
		}},
	{name: "unapplied relay log by coordinates", scen: three + "server node2 relay=pending\noptions apply_timeout=7s", sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) {
			if i := slices.Index(steps(d), WaitRelayApplied); i < 0 || d.Plan.Steps[i].Timeout.Seconds() != 7 {
				t.Errorf("want a 7s wait-relay-applied: %v", steps(d))
			}
		}},
	{name: "repointed replica's relay log needs no wait", scen: three + "server node4 gtid=0-1-97 iopos=0-1-99", sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: all(textHas("its unapplied relay log (up to 0-1-99) is discarded: node2 holds all of it"), func(t *testing.T, d Decision) {
			if slices.Contains(steps(d), WaitRelayApplied) {
				t.Errorf("unexpected wait: %v", steps(d))
			}
		})},
	{name: "SQL thread stopped without error is started", scen: three + "server node3 sql=no gtid=0-1-99 iopos=0-1-101", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: func(t *testing.T, d Decision) {
			k := steps(d)
			if !(slices.Index(k, StartSQLThread) >= 0 && slices.Index(k, StartSQLThread) < slices.Index(k, WaitRelayApplied)) {
				t.Errorf("want start-sql-thread then wait-relay-applied: %v", k)
			}
			// MariaDB discards the relay log of a replica whose two
			// threads are stopped: the SQL thread starts before the cut.
			if slices.Index(k, StartSQLThread) > slices.Index(k, StopIOThread) {
				t.Errorf("start-sql-thread after stop-io-thread: %v", k)
			}
		}},
	{name: "a replica with its SQL thread stopped is not cut", scen: three + "server node2 sql=no gtid=0-1-90 iopos=0-1-95\nserver node3 gtid=0-1-101",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: func(t *testing.T, d Decision) {
			for _, s := range d.Plan.Steps {
				if s.Kind == StopIOThread && s.Server == "node2" {
					t.Errorf("node2's IO thread is stopped although its SQL thread is: its relay log would be lost\n%s", d)
				}
			}
		}},
	{name: "delayed excluded", scen: three + "server node2 delay=3600 gtid=0-1-100 iopos=0-1-105", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", Delayed, "SQL_Delay=3600")},
	{name: "never_promote excluded", scen: three + "options never_promote=node2", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", NeverPromote)},
	{name: "differing filters excluded", scen: three + "server node2 filters=Replicate_Do_DB=app", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", FiltersDiffer, "Replicate_Do_DB=app")},
	{name: "shared filters are fine", scen: three + "server node2 filters=Replicate_Ignore_DB=tmp\nserver node3 filters=Replicate_Ignore_DB=tmp\nserver node4 filters=Replicate_Ignore_DB=tmp",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node2"},
	{name: "filters tie: no filters wins", scen: dead + "server node2 filters=Replicate_Do_DB=app", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", FiltersDiffer)},
	{name: "SQL error excluded", scen: three + "server node2 sql=no sqlerr=1062", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", SQLError, "1062")},
	{name: "no binlog excluded", scen: three + "server node2 binlog=no", sit: DeadPrimary, act: ActExecute, newPrimary: "node3", check: excluded("node2", NoBinlog)},
	{name: "no log_slave_updates excluded", scen: three + "server node2 lsu=no", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", NoLogSlaveUpdates)},
	{name: "higher major version excluded", scen: three + "server node2 version=11.4.2-MariaDB gtid=0-1-101", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", NewerVersion, "11.4.2-MariaDB", "10.11.6-MariaDB")},
	{name: "same series, newer patch is fine", scen: three + "server node2 version=10.11.9-MariaDB", sit: DeadPrimary, act: ActExecute, newPrimary: "node2"},
	{name: "no facts excluded", scen: three + "server node2 nofacts", sit: DeadPrimary, act: ActExecute, newPrimary: "node3", check: excluded("node2", NoFacts)},
	{name: "fenced excluded", scen: three + "fenced node2", sit: DeadPrimary, act: ActExecute, newPrimary: "node3", check: excluded("node2", Fenced)},
	{name: "offline excluded", scen: three + "server node2 state=offline_soft", sit: DeadPrimary, act: ActExecute, newPrimary: "node3", check: excluded("node2", Offline)},
	{name: "unreachable excluded", scen: three + "server node2 down=timeout", sit: DeadPrimary, act: ActExecute, newPrimary: "node3", check: excluded("node2", NotReachable)},
	{name: "replica of another source excluded", scen: three + "server node2 source=node4", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", NotReplica, "replicates from node4")},
	{name: "every server gets a choice", scen: three + "server node2 delay=5", sit: DeadPrimary, act: ActExecute,
		check: func(t *testing.T, d Decision) {
			if len(d.Choices) != 4 || d.Choices[0].Excluded != IsPrimary || chosen(d.Choices) != 2 {
				t.Errorf("choices %+v", d.Choices)
			}
		}},
	{name: "ahead replica that may not be promoted is quarantined", scen: three + "server node4 gtid=0-1-103\noptions never_promote=node4",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) {
			q := d.Plan.Quarantine
			if len(q) != 1 || q[0].Server != "node4" || q[0].Extra != "domain 0 sequences 101..103 (last 0-1-103)" {
				t.Fatalf("quarantine %+v", q)
			}
			if !strings.Contains(q[0].Message, "vigil ctl rejoin node4") || slices.Contains(d.Plan.Repoint, "node4") {
				t.Errorf("quarantine message %q, repoint %v", q[0].Message, d.Plan.Repoint)
			}
			k := steps(d)
			if slices.Index(k, Quarantine) > slices.Index(k, SetRouterWriter) {
				t.Errorf("quarantine must come before routing the new primary: %v", k)
			}
		}},
	{name: "diverged replicas: fewest missing wins, the other is quarantined", scen: three + "server node3 gtid=0-1-100,1-3-5\nserver node4 gtid=0-1-100,2-4-9",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node4",
		check: all(textHas("node3: not chosen — diverged from node4: it has domain 1 up to 1-3-5", "diverged from node3"), func(t *testing.T, d Decision) {
			if len(d.Plan.Quarantine) != 1 || d.Plan.Quarantine[0].Server != "node3" {
				t.Errorf("quarantine %+v", d.Plan.Quarantine)
			}
		})},
	{name: "same sequence from another server is divergence", scen: three + "server node4 gtid=0-4-100\noptions never_promote=node4",
		sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) {
			if len(d.Plan.Quarantine) != 1 || !strings.Contains(d.Plan.Quarantine[0].Extra, "0-4-100 (the other has 0-1-100)") {
				t.Errorf("quarantine %+v", d.Plan.Quarantine)
			}
		}},
	{name: "MySQL: retrieved set counts, waits with WAIT_FOR_EXECUTED_GTID_SET", scen: mysqlDead + `
server node3 gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-98 retrieved=3e11fa47-71ca-11e1-9e33-c80aa9429562:90-102`,
		sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: all(textHas("WAIT_FOR_EXECUTED_GTID_SET", "SOURCE_AUTO_POSITION=1", "super_read_only = 1", "STOP REPLICA", "RESET REPLICA ALL"),
			func(t *testing.T, d Decision) {
				i := slices.Index(steps(d), WaitRelayApplied)
				if i < 0 || d.Plan.Steps[i].Position != "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-102" {
					t.Errorf("wait step: %v", d.Plan.Steps)
				}
			})},
	{name: "MySQL: errant set quarantined with its GTIDs", scen: mysqlDead + `
server node3 gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100,aaaaaaaa-71ca-11e1-9e33-c80aa9429562:1-2
options never_promote=node3`,
		sit: DeadPrimary, act: ActExecute, newPrimary: "node2",
		check: func(t *testing.T, d Decision) {
			q := d.Plan.Quarantine
			if len(q) != 1 || q[0].Extra != "aaaaaaaa-71ca-11e1-9e33-c80aa9429562:1-2" || !strings.Contains(q[0].Message, "empty transactions") {
				t.Errorf("quarantine %+v", q)
			}
		}},
	{name: "unreadable GTID set excluded", scen: mysqlDead + "server node2 gtid=garbage", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", BadGTID)},
	{name: "MySQL: newer series excluded", scen: mysqlDead + "server node2 version=8.4.2", sit: DeadPrimary, act: ActExecute, newPrimary: "node3",
		check: excluded("node2", NewerVersion)},
}

const mysqlDead = `
now 100
cluster my term=3
options auto=yes
server node1 role=primary flavor=mysql down=refused since=90
server node2 role=replica flavor=mysql source=node1 io=lost gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100
server node3 role=replica flavor=mysql source=node1 io=lost gtid=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100
`

func TestCandidates(t *testing.T) { runRows(t, candidateRows) }
