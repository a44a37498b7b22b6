package monitor

import (
	"strings"
	"testing"

	"github.com/vigil-db/vigil/internal/topology"
)

func TestGaleraWriterSelection(t *testing.T) {
	// Highest weight first, then lowest wsrep_local_index.
	h := newHarness(t, TypeGalera, 3, nil)
	h.round(galeraObs(2, nil), galeraObs(0, nil), galeraObs(1, nil))
	h.expectWriter("node2")
	for _, s := range h.snap().Servers {
		if s.Role != topology.RoleGalera || !s.Readable || !s.Writable {
			t.Fatalf("%+v", s)
		}
	}
	h = newHarness(t, TypeGalera, 3, func(o *Options) { o.Servers[2].Weight = 5 })
	h.round(galeraObs(2, nil), galeraObs(0, nil), galeraObs(1, nil))
	h.expectWriter("node3")
}

func TestGaleraWriterStickyAndDesync(t *testing.T) {
	h := newHarness(t, TypeGalera, 3, nil)
	h.round(galeraObs(0, nil), galeraObs(1, nil), galeraObs(2, nil))
	h.expectWriter("node1")
	term := h.st.Term
	desync := galeraObs(0, func(w *topology.WsrepStatus) {
		w.Desync, w.LocalState, w.LocalStateComment = true, topology.WsrepDonor, "Donor/Desynced"
	})
	h.see("node1", desync)
	h.expectWriter("node1") // one check: hysteresis
	h.see("node1", desync)
	h.expect("node1", topology.Shunned, false, false)
	h.expectWriter("node2")
	if h.st.Term != term+1 {
		t.Fatal("term")
	}
	// node1 re-syncs: readable again, the writer stays on node2.
	h.seeN("node1", 5, galeraObs(0, nil))
	h.expect("node1", topology.Online, true, true)
	h.expectWriter("node2")
	h.seeN("node1", 20, galeraObs(0, nil))
	h.expectWriter("node2")
	if h.st.Term != term+1 {
		t.Fatal("term moved without a writer change")
	}
	// node2 leaves: the best remaining node, node1 (index 0), takes over.
	h.seeN("node2", 2, failedObs("refused"))
	h.expectWriter("node1")
}

func TestGaleraDeterminism(t *testing.T) {
	// Two Vigils that hear from the nodes in different orders choose the
	// same writer.
	obs := []topology.Observation{galeraObs(1, nil), galeraObs(0, nil), galeraObs(2, nil)}
	orders := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}}
	for _, order := range orders {
		h := newHarness(t, TypeGalera, 3, nil)
		for _, i := range order {
			h.see(h.opts.Servers[i].Name, obs[i])
		}
		h.expectWriter("node2")
	}
}

func TestGaleraMultiWriterAndNoCandidates(t *testing.T) {
	h := newHarness(t, TypeGalera, 2, func(o *Options) { o.GaleraMultiWriter = true })
	h.round(galeraObs(0, nil), galeraObs(1, nil))
	if s := h.snap(); !s.MultiWriter || !s.Servers[0].Writable || !s.Servers[1].Writable {
		t.Fatalf("%+v", s)
	}
	nonPrimary := galeraObs(0, func(w *topology.WsrepStatus) { w.ClusterStatus = "non-Primary" })
	h.seeN("node1", 2, nonPrimary)
	h.seeN("node2", 2, nonPrimary)
	h.expectWriter("")
	if !strings.Contains(h.snap().WriterReason, "no Galera node") {
		t.Fatal(h.snap().WriterReason)
	}
}

func TestGaleraSetWriter(t *testing.T) {
	h := newHarness(t, TypeGalera, 3, nil)
	h.round(galeraObs(0, nil), galeraObs(1, nil), galeraObs(2, nil))
	if err := h.cmd(setWriter(2, &h.opts, "operator")); err != nil {
		t.Fatal(err)
	}
	h.expectWriter("node3")
	h.seeN("node2", 2, failedObs("x"))
	if err := h.cmd(setWriter(1, &h.opts, "operator")); err == nil {
		t.Fatal("a Shunned Galera node cannot be the writer")
	}
	h.expectWriter("node3")
}

func TestReadOnlyClusterWriter(t *testing.T) {
	h := newHarness(t, TypeReadOnly, 3, func(o *Options) { o.Servers[1].Role = "primary" })
	h.round(writableObs(), writableObs(), replicaObs(0))
	// The configured primary is preferred among writable servers, and
	// there is no conflict rule in read-only clusters.
	h.expectWriter("node2")
	if h.server("node1").Conflict {
		t.Fatal("conflict in a read-only cluster")
	}
	// The operator flips read_only: the writer follows.
	h.see("node2", replicaObs(0))
	h.expectWriter("node1")
	h.see("node2", writableObs())
	h.expectWriter("node1") // sticky
}

// TestTermOnlyGrows feeds random observations and commands; the harness
// checks the term after each.

// With several Vigil instances the term is the writer record's: once set,
// the monitor's own writer changes do not move it (a writer that fails
// and comes back would otherwise count two terms on one instance and none
// on another), and its events carry the record's term.
func TestSharedTermFollowsRecord(t *testing.T) {
	h := newHarness(t, TypeGalera, 3, nil)
	h.round(galeraObs(0, nil), galeraObs(1, nil), galeraObs(2, nil))
	h.expectWriter("node1")
	next, _, err := Command(h.st, setTerm(7), h.latest, &h.opts, h.now)
	if err != nil {
		t.Fatal(err)
	}
	h.st = next
	if h.st.Term != 7 || h.st.Snapshot(&h.opts).Term != 7 {
		t.Fatalf("term %d after setTerm(7)", h.st.Term)
	}
	h.events = nil
	h.seeN("node1", 2, failedObs("refused"))
	h.expectWriter("node2")
	if h.st.Term != 7 {
		t.Fatalf("term moved to %d on the monitor's own writer change", h.st.Term)
	}
	for _, e := range h.events {
		if e.Kind == EventWriterChange && e.Term != 7 {
			t.Fatalf("event %s carries term %d", e, e.Term)
		}
	}
	h.seeN("node1", 5, galeraObs(0, nil))
	if next, _, err = Command(h.st, setTerm(8), h.latest, &h.opts, h.now); err != nil || next.Term != 8 {
		t.Fatalf("setTerm(8): %d %v", next.Term, err)
	}
}
