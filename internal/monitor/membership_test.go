package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// feed gives the monitor one observation of slot i, as a probe would.
func feed(m *Monitor, i int, o topology.Observation) {
	m.mu.Lock()
	if prev := m.latest[i]; prev != nil {
		o.Seq = prev.Seq + 1
	} else {
		o.Seq = 1
	}
	m.mu.Unlock()
	o.Server = m.opts.Servers[i].Name
	o.Time = time.Now()
	m.observe(i, &o)
}

func gtidObs(o topology.Observation, pos string) topology.Observation {
	o.GTID.Current = topology.MustParseGTIDPos(pos)
	return o
}

func membershipMonitor(t *testing.T) (*Monitor, *topology.Holder, Options) {
	t.Helper()
	opts := Options{Cluster: "c1", Type: TypeReplication}
	for i, n := range []string{"node1", "node2", "node3"} {
		role := "replica"
		if i == 0 {
			role = "primary"
		}
		opts.Servers = append(opts.Servers, Server{Name: n, Addr: "127.0.0.1:1", Role: role, Weight: 1})
	}
	h := &topology.Holder{}
	m, err := New(opts, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	feed(m, 0, gtidObs(writableObs(), "0-1-100"))
	feed(m, 1, gtidObs(replicaObs(0), "0-1-100"))
	feed(m, 2, gtidObs(replicaObs(0), "0-1-100"))
	if w := h.Load().WriterServer(); w == nil || w.Name != "node1" {
		t.Fatalf("writer %+v", w)
	}
	return m, h, opts
}

// TestServerJoinsWhenCaughtUp: a server added to a running monitor takes
// the next slot and stays OFFLINE_SOFT until it is Online, lags at most
// JoinMaxLag and has applied the writer's position as of its joining.
func TestServerJoinsWhenCaughtUp(t *testing.T) {
	m, h, opts := membershipMonitor(t)
	opts.Servers = append(opts.Servers, Server{Name: "node4", Addr: "127.0.0.1:4", Weight: 1})
	if err := m.SetOptions(opts); err != nil {
		t.Fatal(err)
	}
	s := h.Load().Servers[3]
	if s.Name != "node4" || s.State != topology.OfflineSoft || !strings.HasPrefix(s.Reason, "joining") {
		t.Fatalf("new server %+v", s)
	}
	// A backlog: Seconds_Behind_Master 0 (the SQL thread applied what
	// the I/O thread fetched so far) but far behind the writer.
	feed(m, 3, gtidObs(replicaObs(0), "0-1-20"))
	if s := h.Load().Servers[3]; s.State != topology.OfflineSoft || !strings.Contains(s.Reason, "past the writer's 0-1-100") {
		t.Fatalf("behind the writer: %+v", s)
	}
	// Past the target but lagging.
	feed(m, 3, gtidObs(replicaObs(5), "0-1-100"))
	if s := h.Load().Servers[3]; s.State != topology.OfflineSoft {
		t.Fatalf("lagging: %+v", s)
	}
	feed(m, 3, gtidObs(replicaObs(0), "0-1-101"))
	if s := h.Load().Servers[3]; s.State != topology.Online || !s.Readable {
		t.Fatalf("caught up: %+v", s)
	}
	var kinds []string
	for _, e := range m.Events() {
		if e.Server == "node4" {
			kinds = append(kinds, string(e.Kind))
		}
	}
	if got := strings.Join(kinds, ","); !strings.HasPrefix(got, "server_added") || !strings.Contains(got, "server_joined") {
		t.Fatalf("events %s", got)
	}
}

// TestServerRemoved: a removed server's slot stays a tombstone (every
// other index unchanged), it is never routed, the engine's observations
// leave it out, its name may come back in a new slot, and the writer
// cannot be removed.
func TestServerRemoved(t *testing.T) {
	m, h, opts := membershipMonitor(t)
	bad := opts
	bad.Servers = append([]Server(nil), opts.Servers...)
	bad.Servers[0].Removed = true
	if err := m.SetOptions(bad); err == nil || !strings.Contains(err.Error(), "node1 is the writer") {
		t.Fatalf("removing the writer: %v", err)
	}
	opts.Servers[2].Removed = true
	if err := m.SetOptions(opts); err != nil {
		t.Fatal(err)
	}
	snap := h.Load()
	if len(snap.Servers) != 3 || !snap.Servers[2].Removed || snap.Servers[2].State != topology.OfflineHard || snap.Index("node3") != -1 {
		t.Fatalf("snapshot %+v", snap.Servers)
	}
	if live := snap.Live(); len(live.Servers) != 2 || live.WriterServer().Name != "node1" {
		t.Fatalf("live %+v", live)
	}
	for _, o := range m.Observations() {
		if o.Name == "node3" {
			t.Fatal("removed server in the observations")
		}
	}
	// A late check of the removed server changes nothing.
	feed(m, 2, gtidObs(writableObs(), "0-1-100"))
	if s := h.Load().Servers[2]; !s.Removed || s.Conflict {
		t.Fatalf("after a late check: %+v", s)
	}
	// A slot never comes back; the name may, in a new slot.
	back := opts
	back.Servers = append([]Server(nil), opts.Servers...)
	back.Servers[2].Removed = false
	if err := m.SetOptions(back); err == nil {
		t.Fatal("a removed slot came back")
	}
	opts.Servers = append(opts.Servers, Server{Name: "node3", Addr: "127.0.0.1:3", Weight: 1})
	if err := m.SetOptions(opts); err != nil {
		t.Fatal(err)
	}
	if i := h.Load().Index("node3"); i != 3 {
		t.Fatalf("node3 is back in slot %d", i)
	}
	// Slots are never dropped.
	opts.Servers = opts.Servers[:2]
	if err := m.SetOptions(opts); err == nil {
		t.Fatal("slots dropped")
	}
}

// TestStandby: a standby is checked but never routed nor chosen as a
// Galera writer; a standby named the writer (promoted by --to) is routed,
// and standby again once it is a replica.
func TestStandby(t *testing.T) {
	m, h, opts := membershipMonitor(t)
	opts.Servers[2].Standby = true
	opts.Servers[1].Weight = 5
	if err := m.SetOptions(opts); err != nil {
		t.Fatal(err)
	}
	snap := h.Load()
	if s := snap.Servers[2]; s.State != topology.OfflineSoft || s.Readable || !s.Standby || !strings.HasPrefix(s.Reason, "standby") {
		t.Fatalf("standby %+v", s)
	}
	if snap.Servers[1].Weight != 5 {
		t.Fatalf("weight %d", snap.Servers[1].Weight)
	}
	feed(m, 2, gtidObs(replicaObs(0), "0-1-100"))
	if s := h.Load().Servers[2]; s.State != topology.OfflineSoft || s.Readable {
		t.Fatalf("standby after a check %+v", s)
	}
	// Named the writer: routed as the writer, not a standby while it is.
	if err := m.SetWriter("node3", "switchover --to node3"); err != nil {
		t.Fatal(err)
	}
	feed(m, 2, gtidObs(writableObs(), "0-1-100"))
	if w := h.Load().WriterServer(); w == nil || w.Name != "node3" || w.Standby {
		t.Fatalf("writer %+v", w)
	}
	// Back to a replica (node1 the writer again): a standby again.
	if err := m.SetWriter("node1", "switchover --to node1"); err != nil {
		t.Fatal(err)
	}
	feed(m, 2, gtidObs(replicaObs(0), "0-1-100"))
	feed(m, 0, gtidObs(writableObs(), "0-1-100"))
	if s := h.Load().Servers[2]; !s.Standby || s.State != topology.OfflineSoft {
		t.Fatalf("standby again %+v", s)
	}
	var kinds []string
	for _, e := range m.Events() {
		if e.Server == "node3" && strings.HasPrefix(string(e.Kind), "standby") {
			kinds = append(kinds, string(e.Kind))
		}
	}
	if got := strings.Join(kinds, ","); got != "standby,standby_cleared,standby" {
		t.Fatalf("events %s", got)
	}
}

// TestChangedClosesOnPublish: Changed is closed by the next published
// snapshot, and only by one that differs (a waiter wakes for news only).
func TestChangedClosesOnPublish(t *testing.T) {
	m, _, _ := membershipMonitor(t)
	ch := m.Changed()
	feed(m, 1, gtidObs(replicaObs(0), "0-1-100")) // the same: no snapshot
	select {
	case <-ch:
		t.Fatal("closed without a new snapshot")
	default:
	}
	v := m.Snapshot().Version
	if err := m.Fence("node3", "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("not closed by a new snapshot")
	}
	if m.Snapshot().Version <= v {
		t.Fatal("no newer snapshot")
	}
	if next := m.Changed(); next == ch {
		t.Fatal("the closed channel is handed out again")
	}
}
