package monitor

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Passive evidence through the probe, against fake servers at the wire.
// No timing assertions: waits are generous, the order of events is what
// is checked.

// fakeTraffic stands for the frontend's reply counters: one per server,
// and a goroutine per server that completes a "client statement" every few
// milliseconds while switched on.
type fakeTraffic struct {
	replies []atomic.Uint64
	waiting []atomic.Int64
	on      []atomic.Bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newFakeTraffic(t *testing.T, n int) *fakeTraffic {
	f := &fakeTraffic{replies: make([]atomic.Uint64, n), waiting: make([]atomic.Int64, n), on: make([]atomic.Bool, n), stop: make(chan struct{})}
	f.wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C:
				for i := range f.on {
					if f.on[i].Load() {
						f.replies[i].Add(1)
					}
				}
			}
		}
	})
	t.Cleanup(func() {
		close(f.stop)
		f.wg.Wait()
	})
	return f
}

func (f *fakeTraffic) activity(i int) (uint64, int64) {
	return f.replies[i].Load(), f.waiting[i].Load()
}

func TestCheckRecordsTimeoutAndClientReplies(t *testing.T) {
	f := newFakeServer(t)
	var replies atomic.Uint64
	opts := fakeOptions(f.addr())
	opts.Timeout = 150 * time.Millisecond
	opts.Activity = func(int) (uint64, int64) { return replies.Load(), 5 }
	f.set(func(f *fakeServer) {
		f.answer = func(q string) reply {
			if strings.HasPrefix(q, "SHOW GLOBAL STATUS") {
				replies.Add(3) // clients completed three statements meanwhile
			}
			return f.primary(q)
		}
	})
	m := newTestMonitor(t, opts)
	o := checkOnce(t, m)
	if !o.OK || o.TimedOut || o.ClientReplies != 3 || o.ClientWaiting != 5 {
		t.Fatalf("%+v", o)
	}
	// A hung server: the check times out, nothing completes.
	f.setHang(true)
	o = checkOnce(t, m)
	if o.OK || !o.TimedOut || o.Refused || o.ClientReplies != 0 || o.Slow() || !o.Stuck() {
		t.Fatalf("%+v", o)
	}
	// The reconnect times out too (the greeting never comes); clients
	// completed statements meanwhile: slow.
	go func() {
		time.Sleep(20 * time.Millisecond)
		replies.Add(1)
	}()
	o = checkOnce(t, m)
	f.setHang(false)
	if o.OK || !o.TimedOut || !strings.Contains(o.Err, "connecting") || o.ClientReplies != 1 || !o.Slow() {
		t.Fatalf("%+v", o)
	}
	// Refused is not a timeout.
	f.close()
	if o = checkOnce(t, m); o.TimedOut || !o.Refused || o.Slow() {
		t.Fatalf("%+v", o)
	}
}

// TestSlowServerStaysRouted: a replica whose checks hang while clients
// complete statements on it stays ONLINE; once clients stop completing,
// it leaves routing like any hung server.
func TestSlowServerStaysRouted(t *testing.T) {
	primary, replica := newFakeServer(t), newFakeServer(t)
	replica.set(func(f *fakeServer) { f.answer = replicaScript("Yes", "Yes", "0") })
	traffic := newFakeTraffic(t, 2)
	opts := fakeOptions(primary.addr(), replica.addr())
	opts.Timeout = 100 * time.Millisecond
	opts.Activity = traffic.activity
	r := runFakeMonitor(t, opts)
	waitFor(t, "node2 ONLINE", 5*time.Second, func() bool { return r.server("node2").State == topology.Online })

	traffic.on[1].Store(true)
	replica.setHang(true)
	defer replica.setHang(false)
	r.waitEvent(t, EventSlow, "node2", 10*time.Second)
	waitFor(t, "several slow checks", 10*time.Second, func() bool { return r.m.Checks()[1].Slow >= 5 })
	if s := r.server("node2"); s.State != topology.Online || !s.Readable || !strings.Contains(s.Reason, "slow") {
		t.Fatalf("slow node2: %+v", s)
	}
	if n := r.count(EventStateChange, "node2"); n != 1 { // the first check only
		t.Fatalf("%d state changes of a slow server: %v", n, r.m.Events())
	}

	// Clients stop completing anything (the server is stopped for them
	// too) and wait on it: out of routing, after one check. (Every check
	// after the next slow one starts with clients waiting.)
	traffic.waiting[1].Store(2)
	slow := r.m.Checks()[1].Slow
	waitFor(t, "a slow check with clients waiting", 10*time.Second, func() bool { return r.m.Checks()[1].Slow > slow })
	traffic.on[1].Store(false)
	waitFor(t, "node2 SHUNNED", 10*time.Second, func() bool { return r.server("node2").State == topology.Shunned })
	if s := r.server("node2"); !strings.Contains(s.Reason, "2 client statements waited on it and none completed") {
		t.Errorf("reason %q", s.Reason)
	}
	traffic.waiting[1].Store(0)
	replica.setHang(false)
	waitFor(t, "node2 ONLINE again", 10*time.Second, func() bool { return r.server("node2").State == topology.Online })
}

// TestLoneWriterKeptThenShunned: a standalone primary whose checks hang
// and that completes nothing stays the writer for lone_writer_grace, then
// leaves routing.
func TestLoneWriterKeptThenShunned(t *testing.T) {
	f := newFakeServer(t)
	opts := fakeOptions(f.addr())
	opts.Timeout = 100 * time.Millisecond
	opts.LoneWriterGrace = time.Second
	r := runFakeMonitor(t, opts)
	waitFor(t, "node1 writer", 5*time.Second, func() bool { return r.holder.Load().Writer == 0 })

	f.setHang(true)
	defer f.setHang(false)
	kept := r.waitEvent(t, EventWriterKept, "node1", 10*time.Second)
	if s := r.holder.Load(); s.Writer != 0 || !strings.Contains(s.Servers[0].Reason, "kept as the writer") {
		t.Fatalf("kept writer: %+v", s.Servers[0])
	}
	waitFor(t, "node1 SHUNNED", 10*time.Second, func() bool { return r.server("node1").State == topology.Shunned })
	var out Event
	for _, e := range r.m.Events() {
		if e.Kind == EventStateChange && e.Server == "node1" && e.To == "SHUNNED" {
			out = e
		}
	}
	if out.Time.Before(kept.Time) || !strings.Contains(out.Reason, "no sign of life") {
		t.Fatalf("kept %v, then %v", kept, out)
	}
	if r.holder.Load().Writer != -1 {
		t.Fatal("a shunned writer is still routed")
	}
	f.setHang(false)
	waitFor(t, "node1 writer again", 10*time.Second, func() bool { return r.holder.Load().Writer == 0 })
}

// fakeRun is a running monitor over fake servers.
type fakeRun struct {
	m      *Monitor
	holder *topology.Holder
	evs    <-chan Event
}

func runFakeMonitor(t *testing.T, opts Options) *fakeRun {
	t.Helper()
	r := &fakeRun{holder: &topology.Holder{}}
	m, err := New(opts, r.holder, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	evs, unsubscribe := m.Subscribe(1000)
	r.evs = evs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		unsubscribe()
	})
	return r
}

func (r *fakeRun) server(name string) topology.Server {
	s := r.holder.Load()
	return s.Servers[s.Index(name)]
}

func (r *fakeRun) count(kind EventKind, server string) int {
	n := 0
	for _, e := range r.m.Events() {
		if e.Kind == kind && e.Server == server {
			n++
		}
	}
	return n
}

func (r *fakeRun) waitEvent(t *testing.T, kind EventKind, server string, timeout time.Duration) Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e := <-r.evs:
			if e.Kind == kind && e.Server == server {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event of %s within %v: %v", kind, server, timeout, r.m.Events())
		}
	}
}
