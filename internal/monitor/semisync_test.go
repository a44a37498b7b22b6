package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// semiObs is a writable primary with semi-sync enabled: on waits for
// replicas, off has fallen back to asynchronous replication.
func semiObs(on bool, clients int, noTx int64) topology.Observation {
	o := writableObs()
	o.SemiSync = topology.SemiSyncStatus{Known: true, SourceEnabled: true, SourceOn: on, Clients: clients, NoTx: noTx}
	return o
}

// A semi-sync fallback of the writer is an event with what a failover
// could lose, its end another with how long it lasted and how many
// commits no replica acknowledged; the counters follow both.
func TestSemiSyncFallbackEvents(t *testing.T) {
	h := newHarness(t, TypeReplication, 2, nil)
	h.see("node1", semiObs(true, 1, 0))
	h.see("node2", replicaObs(0))
	if n := h.countEvents(EventSemiSyncFallback, ""); n != 0 {
		t.Fatalf("%d fallback events while semi-sync waits", n)
	}
	start := h.now
	evs := h.see("node1", semiObs(false, 0, 3))
	if len(evs) != 1 || evs[0].Kind != EventSemiSyncFallback || evs[0].Server != "node1" ||
		!strings.Contains(evs[0].Reason, "failover now could lose") || evs[0].level().String() != "WARN" {
		t.Fatalf("fallback events %+v", evs)
	}
	c := h.st.Servers[0].Checks
	if c.SemiSyncFallbacks != 1 || !c.AsyncSince.Equal(start.Add(100*time.Millisecond)) || c.NoTx != 3 {
		t.Fatalf("counters during the fallback %+v", c)
	}
	h.seeN("node1", 9, semiObs(false, 0, 40)) // one more event? no: it is the same fallback
	evs = h.see("node1", semiObs(true, 1, 57))
	if len(evs) != 1 || evs[0].Kind != EventSemiSyncRestored ||
		!strings.Contains(evs[0].Reason, "after 1s of asynchronous replication; 57 commits were acknowledged without a replica") {
		t.Fatalf("restore events %+v", evs)
	}
	c = h.st.Servers[0].Checks
	if c.SemiSyncFallbacks != 1 || !c.AsyncSince.IsZero() || c.AsyncSeconds < 0.99 || c.AsyncSeconds > 1.01 {
		t.Fatalf("counters after the fallback %+v", c)
	}

	// A replica with semi-sync master enabled and no replicas of its own
	// is not acknowledging client commits: no fallback.
	r := replicaObs(0)
	r.SemiSync = topology.SemiSyncStatus{Known: true, SourceEnabled: true}
	h.seeN("node2", 3, r)
	// Disabled on the primary: not a fallback either, and ending one by
	// disabling semi-sync says so.
	h.see("node1", semiObs(false, 0, 57))
	off := semiObs(false, 0, 57)
	off.SemiSync.SourceEnabled = false
	evs = h.see("node1", off)
	if len(evs) != 1 || evs[0].Kind != EventSemiSyncRestored || !strings.Contains(evs[0].Reason, "semi-sync was disabled") {
		t.Fatalf("disabled: %+v", evs)
	}
	h.seeN("node1", 3, off)
	if n := h.countEvents(EventSemiSyncFallback, ""); n != 2 {
		t.Fatalf("%d fallback events, want 2 (node1 twice, never the replica)", n)
	}
	if c := h.st.Servers[0].Checks; c.NoTx != -1 {
		t.Fatalf("no_tx shown with semi-sync disabled: %+v", c)
	}
}

// Galera nodes are all writable; a my.cnf with the semi-sync master side
// enabled there means nothing: no fallback is reported.
func TestSemiSyncFallbackNotForGalera(t *testing.T) {
	h := newHarness(t, TypeGalera, 1, nil)
	o := semiObs(false, 0, 5)
	o.Wsrep = &topology.WsrepStatus{LocalState: 4, ClusterStatus: "Primary", Ready: true, Connected: true, ClusterSize: 1}
	h.seeN("node1", 3, o)
	if n := h.countEvents(EventSemiSyncFallback, ""); n != 0 || h.st.Servers[0].Checks.SemiSyncFallbacks != 0 {
		t.Fatalf("%d fallback events on a Galera node", n)
	}
}

// The check reads @@rpl_semi_sync_master_enabled only where it exists
// without a plugin (MariaDB 10.3.3+): elsewhere the variables query would
// fail every check.
func TestSemiSyncVariableByVersion(t *testing.T) {
	for _, c := range []struct {
		version string
		want    bool
	}{
		{"5.5.5-10.11.19-MariaDB-0+deb12u1-log", true},
		{"11.4.2-MariaDB", true},
		{"10.3.3-MariaDB", true},
		{"5.5.5-10.2.44-MariaDB", false},
		{"8.0.36", false},
	} {
		q, _ := variablesSQL(flavor.Of(c.version), false, hasSemiSyncVar(c.version))
		if got := strings.Contains(q, "rpl_semi_sync_master_enabled"); got != c.want {
			t.Errorf("%s: reads the variable %v, want %v (%s)", c.version, got, c.want, q)
		}
	}
}
