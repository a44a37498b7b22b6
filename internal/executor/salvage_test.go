package executor

import (
	"context"
	"fmt"
	"testing"

	"github.com/vigil-db/vigil/internal/topology"
)

func TestMissing(t *testing.T) {
	cases := []struct {
		old, cur string
		n        uint64
		start    string
	}{
		{"0-1-100", "0-1-100", 0, ""},
		{"0-1-100", "0-2-120", 0, ""},
		{"0-1-105", "0-1-100", 5, "0-1-100"},
		{"0-1-105,1-1-7", "0-2-103,1-1-7", 2, "0-2-103"},
		{"0-1-5,2-1-3", "0-1-5", 3, ""},
	}
	for _, c := range cases {
		n, start := missing(topology.MustParseGTIDPos(c.old), topology.MustParseGTIDPos(c.cur))
		if n != c.n || start != c.start {
			t.Errorf("missing(%s, %s) = %d %q, want %d %q", c.old, c.cur, n, start, c.n, c.start)
		}
	}
}

func TestMissingByState(t *testing.T) {
	cases := []struct {
		old, cur string
		n        uint64
		start    string
		ok       bool
	}{
		// The kill -9 case: the old primary's last transaction reached no
		// replica, and the new primary wrote further in domain 0.
		{"0-1-19475", "0-1-19474,0-2-21572", 1, "0-1-19474", true},
		{"0-1-100,0-2-50", "0-1-100,0-2-80", 0, "", true},
		{"0-1-105", "0-1-100", 5, "0-1-100", true},
		{"0-3-7", "0-1-100", 1, "", true},
		{"0-1-100", "", 0, "", false},
	}
	for _, c := range cases {
		old, _ := topology.ParseGTIDList(c.old)
		cur, _ := topology.ParseGTIDList(c.cur)
		n, start, ok := missingByState(old, cur)
		if n != c.n || start != c.start || ok != c.ok {
			t.Errorf("missingByState(%s, %s) = %d %q %v, want %d %q %v", c.old, c.cur, n, start, ok, c.n, c.start, c.ok)
		}
	}
}

// obsMonitor is a Monitor that only has observations.
type obsMonitor struct{ obs []topology.Health }

func (m *obsMonitor) Snapshot() *topology.Snapshot          { return nil }
func (m *obsMonitor) Observations() []topology.Health       { return m.obs }
func (m *obsMonitor) SetWriter(server, reason string) error { return nil }
func (m *obsMonitor) Fence(server, reason string) error     { return nil }
func (m *obsMonitor) Unfence(server string) error           { return nil }
func (m *obsMonitor) SetTerm(uint64) error                  { return nil }
func (m *obsMonitor) Changed() <-chan struct{}              { return nil }
func (m *obsMonitor) CheckFresh(context.Context, ...string) map[string]*topology.Observation {
	return nil
}

// What a server's semi-sync counter held while it replicated is not what
// it committed unacknowledged as primary (issue 14, case 5).
func TestUnackedAsPrimary(t *testing.T) {
	replica := &topology.Observation{OK: true, ReadOnly: true, Replica: &topology.ReplicaStatus{}}
	replica.SemiSync.NoTx = 1733
	m := &obsMonitor{obs: []topology.Health{{Name: "node1", Last: replica}}}
	e := &Executor{mon: m, noTxBase: map[string]int64{}}
	e.noteReplicaNoTx()
	for _, c := range []struct {
		server string
		now    int64
		want   int64
	}{
		{"node1", 1733, 0}, // nothing since it replicated
		{"node1", 1740, 7}, // 7 as primary
		{"node1", 5, 5},    // restarted since: the counter starts again
		{"node2", 12, 12},  // never seen replicating: all of it
	} {
		if got := e.unackedAsPrimary(c.server, c.now); got != c.want {
			t.Errorf("unackedAsPrimary(%s, %d) = %d, want %d", c.server, c.now, got, c.want)
		}
	}
	// A primary (not read-only, no replication) does not move its base.
	primary := &topology.Observation{OK: true}
	primary.SemiSync.NoTx = 1800
	m.obs[0].Last = primary
	e.noteReplicaNoTx()
	if got := e.unackedAsPrimary("node1", 1800); got != 67 {
		t.Errorf("after a primary sample: %d, want 67", got)
	}
}

// A stray transaction of one server after many of another's in the same
// domain: the sequence gap says 587, the salvage file holds one.
func TestCountMissing(t *testing.T) {
	var out []byte
	for seq := 23; seq <= 608; seq++ {
		out = fmt.Appendf(out, "#261128 13:44:38 server id 2  end_log_pos 370 CRC32 0xa8fa6b15 \tGTID 0-2-%d trans\n/*!100001 SET @@session.gtid_seq_no=%d*//*!*/;\n", seq, seq)
	}
	out = append(out, "#261128 13:44:39 server id 1  end_log_pos 900 CRC32 0x44ddb310 \tGTID 0-1-609 trans\n#261128 Gtid list [0-1-609]\n"...)
	cur := []topology.GTID{{Domain: 0, Server: 1, Seq: 22}, {Domain: 0, Server: 2, Seq: 608}}
	if n, _, _ := missingByState([]topology.GTID{{Domain: 0, Server: 1, Seq: 609}, {Domain: 0, Server: 2, Seq: 608}}, cur); n != 587 {
		t.Errorf("missingByState = %d (the estimate)", n)
	}
	if n := countMissing(out, cur); n != 1 {
		t.Errorf("countMissing = %d, want 1", n)
	}
	if n := countMissing(out, nil); n != -1 {
		t.Errorf("countMissing without a state = %d, want -1", n)
	}
}
