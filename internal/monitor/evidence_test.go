package monitor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// A writer whose process dies: its monitor connection is closed under it,
// the probe dials again after minCheckSpacing rather than the interval
// (the dial is refused: the evidence the failover engine's short bound
// needs), every other server is checked at once, and each check is
// handed to OnEvidence. The interval is far longer than the waits: only
// these paths can make the checks happen.
func TestWriterFailureGathersEvidence(t *testing.T) {
	primary, replica := newFakeServer(t), newFakeServer(t)
	replica.set(func(f *fakeServer) { f.answer = replicaScript("Yes", "Yes", "0") })
	opts := fakeOptions(primary.addr(), replica.addr())
	opts.Interval = 30 * time.Second
	var holder topology.Holder
	m, err := New(opts, &holder, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var evidence atomic.Int64
	m.OnEvidence(func() { evidence.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(t, "writer node1", 2*time.Second, func() bool { return holder.Load().Writer == 0 })
	seq := func(i int) uint64 { return m.State().Servers[i].Seq }
	replicaBefore := seq(1)
	if evidence.Load() != 0 {
		t.Fatalf("OnEvidence called %d times while the writer was healthy", evidence.Load())
	}

	primary.close()
	m.CheckNow(0) // a client lost its connection to node1
	waitFor(t, "a refused check of node1", 3*time.Second, func() bool {
		l := m.State().Servers[0].Last
		return l != nil && l.Refused
	})
	if l := m.State().Servers[0]; l.Seq < 3 {
		t.Errorf("node1 seq %d: want the lost-connection check, then the refused dial", l.Seq)
	}
	waitFor(t, "a new check of node2", 3*time.Second, func() bool { return seq(1) > replicaBefore })
	waitFor(t, "OnEvidence", 3*time.Second, func() bool { return evidence.Load() > 0 })
}

func TestLostConnection(t *testing.T) {
	for _, c := range []struct {
		o    topology.Observation
		want bool
	}{
		{topology.Observation{Err: "reading variables: EOF"}, true},
		{topology.Observation{OK: true}, false},
		{topology.Observation{Refused: true}, false},
		{topology.Observation{TimedOut: true}, false},
		{topology.Observation{ErrCode: 1146}, false},
		{topology.Observation{Overloaded: true, ErrCode: 1040}, false},
	} {
		if got := lostConnection(&c.o); got != c.want {
			t.Errorf("%+v: %v, want %v", c.o, got, c.want)
		}
	}
}
