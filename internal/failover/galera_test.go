package failover

import (
	"slices"
	"testing"
)

// galera is a three-node Galera cluster writing on g1.
const galera = `
now 100
cluster gal type=galera term=4 writer=g1
options auto=yes
server g1 role=galera weight=1 index=0
server g2 role=galera weight=1 index=2
server g3 role=galera weight=1 index=1
`

var galeraRows = []row{
	{name: "galera healthy", scen: galera, sit: Healthy, act: ActNone},
	{name: "galera writer down", scen: galera + "server g1 down=refused since=95", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g3",
		check: func(t *testing.T, d Decision) {
			p := d.Plan
			if p.Kind != KindGaleraWriterMove || p.Term != 5 || !slices.Equal(steps(d), []StepKind{SetRouterWriter}) {
				t.Errorf("plan %+v", p)
			}
			textHas("g2: not chosen — Synced, weight 1, wsrep_local_index 2; g3 ranks first")(t, d)
		}},
	{name: "galera highest weight wins", scen: galera + "server g1 down=refused\nserver g2 weight=5", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g2"},
	{name: "galera unknown index ranks last", scen: galera + "server g1 down=refused\nserver g3 index=-1", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g2"},
	{name: "galera writer left the Primary component", scen: galera + "server g1 wsrep=nonprimary", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g3",
		check: reasonHas("left the Primary component")},
	{name: "galera writer became a donor", scen: galera + "server g1 wsrep=donor", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g3"},
	{name: "galera writer rejects queries", scen: galera + "server g1 reject=ALL", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g3"},
	{name: "galera writer not ready", scen: galera + "server g1 ready=no", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g3",
		check: reasonHas("wsrep_ready=OFF")},
	{name: "galera writer failing briefly", scen: galera + "server g1 down=timeout since=99", sit: PrimaryFailing, act: ActWait},
	{name: "galera writer overloaded", scen: galera + "server g1 down=overload:1040", sit: OverloadedPrimary, act: ActEvent},
	{name: "galera writer answers with an error", scen: galera + "server g1 down=error:1047", sit: PrimaryCheckError, act: ActEvent},
	{name: "galera writer unchecked", scen: galera + "server g1 unchecked", sit: Unobserved, act: ActWait},
	{name: "galera: only Synced nodes", scen: galera + "server g1 down=refused\nserver g2 wsrep=joined\nserver g3 wsrep=nonprimary", sit: GaleraNoSyncedNode, act: ActEvent,
		check: all(excluded("g2", NotSynced, "wsrep_local_state=3"), excluded("g3", NotSynced, "Primary component"))},
	{name: "galera never_promote", scen: galera + "server g1 down=refused\noptions never_promote=g3", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g2"},
	{name: "galera without a writer", scen: galera + "cluster gal type=galera term=4 writer=none", sit: GaleraWriterLost, act: ActExecute, newPrimary: "g1"},
	{name: "galera moves ignore auto and min_interval", scen: galera + "server g1 down=refused\noptions auto=no\nhistory failover started=90 ended=95 ok=no old=g0 new=g1",
		sit: GaleraWriterLost, act: ActExecute},
	{name: "galera waits for a running operation", scen: galera + "server g1 down=refused\nrunning galera started=99 old=g0 new=g1", sit: OperationRunning, act: ActWait},
	{name: "galera switchover --to", scen: galera + "request switchover to=g2", sit: Switchover, act: ActExecute, newPrimary: "g2",
		check: textHas("g2: CHOSEN — asked for with --to")},
	{name: "galera switchover to a donor", scen: galera + "server g2 wsrep=donor\nrequest switchover to=g2", sit: InvalidTarget, act: ActRefuse,
		check: reasonHas("not Synced")},
	{name: "galera switchover to the writer", scen: galera + "request switchover to=g1", sit: InvalidTarget, act: ActRefuse},
	{name: "galera failover of a healthy writer", scen: galera + "request failover", sit: PrimaryHealthy, act: ActRefuse},
	{name: "galera failover of a lost writer", scen: galera + "server g1 wsrep=nonprimary\nrequest failover", sit: ManualFailover, act: ActExecute, newPrimary: "g3",
		detected: GaleraWriterLost},
}

func TestGalera(t *testing.T) { runRows(t, galeraRows) }
