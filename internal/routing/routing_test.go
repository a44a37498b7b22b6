package routing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// trace records what the owner applied to the router and the monitor.
type trace struct {
	mu  sync.Mutex
	log []string
}

func (t *trace) add(format string, a ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = append(t.log, fmt.Sprintf(format, a...))
}

func (t *trace) take() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(t.log, "\n")
	t.log = nil
	return s
}

type fakeRouter struct {
	t      *trace
	fenced map[int]bool
}

func (r *fakeRouter) Fence(idx int, reason string) int {
	r.t.add("router fence %d (%s)", idx, reason)
	r.fenced[idx] = true
	return 2
}

func (r *fakeRouter) Unfence(idx int) {
	r.t.add("router unfence %d", idx)
	r.fenced[idx] = false
}

func (r *fakeRouter) Fenced(idx int) bool { return r.fenced[idx] }

type fakeMonitor struct {
	t       *trace
	mu      sync.Mutex
	snap    *topology.Snapshot
	changed chan struct{}
	refuse  error
}

func (m *fakeMonitor) Snapshot() *topology.Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snap
}

func (m *fakeMonitor) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
	return m.changed
}

// publish makes name the routed writer, writable or not.
func (m *fakeMonitor) publish(name string, writable bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	snap := &topology.Snapshot{Writer: 0, Servers: []topology.Server{{Name: name, State: topology.Online, Writable: writable}}}
	m.snap = snap
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
}

func (m *fakeMonitor) SetWriter(server, reason string) error {
	m.t.add("monitor set writer %s (%s)", server, reason)
	return m.refuse
}

func (m *fakeMonitor) Fence(server, reason string) error {
	m.t.add("monitor fence %s (%s)", server, reason)
	return nil
}

func (m *fakeMonitor) Unfence(server string) error {
	m.t.add("monitor unfence %s", server)
	return nil
}

func (m *fakeMonitor) SetTerm(term uint64) error {
	m.t.add("monitor term %d", term)
	return nil
}

func (m *fakeMonitor) SetAdminState(server string, state topology.State, reason string) error {
	m.t.add("monitor admin %s %s (%s)", server, state, reason)
	return nil
}

func newOwner() (*Owner, *fakeMonitor, *fakeRouter, *trace) {
	t := &trace{}
	mon := &fakeMonitor{t: t}
	r := &fakeRouter{t: t, fenced: map[int]bool{}}
	servers := []Server{{Name: "a"}, {Name: "b", Removed: true}, {Name: "c"}, {Name: "b"}}
	return New(servers, mon, r), mon, r, t
}

func TestSlotSkipsTombstones(t *testing.T) {
	o, _, _, _ := newOwner()
	for name, want := range map[string]int{"a": 0, "b": 3, "c": 2, "d": -1} {
		if got := o.Slot(name); got != want {
			t.Errorf("Slot(%s) = %d, want %d", name, got, want)
		}
	}
	if o.Name(1) != "" || o.Name(3) != "b" || o.Name(9) != "" {
		t.Fatal("Name")
	}
}

// TestFenceAppliesRouterThenMonitor: one call fences both, the router
// first (no statement reaches the server once the monitor shows it
// fenced), and the owner's version moves.
func TestFenceAppliesRouterThenMonitor(t *testing.T) {
	o, _, _, tr := newOwner()
	ch := o.Changed()
	v := o.State().Version
	cut, err := o.Fence("c", "failover in progress", "fenced by failover (term 3)")
	if err != nil || cut != 2 {
		t.Fatal(cut, err)
	}
	if got, want := tr.take(), "router fence 2 (failover in progress)\nmonitor fence c (fenced by failover (term 3))"; got != want {
		t.Fatalf("applied:\n%s\nwant:\n%s", got, want)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed")
	}
	st := o.State()
	if st.Version <= v || st.Fenced[2] != "fenced by failover (term 3)" {
		t.Fatalf("%+v", st)
	}
	// An unknown server: the monitor's error, nothing at the router.
	if _, err := o.Fence("zz", "x", "y"); err != nil {
		t.Fatal("the fake monitor accepts anything")
	}
	if got := tr.take(); got != "monitor fence zz (y)" {
		t.Fatal(got)
	}
	if err := o.Unfence("c"); err != nil {
		t.Fatal(err)
	}
	if got := tr.take(); got != "router unfence 2\nmonitor unfence c" {
		t.Fatal(got)
	}
	if len(o.State().Fenced) != 0 {
		t.Fatal("still fenced")
	}
}

func TestSetWriterUnfencesDesignateDoesNot(t *testing.T) {
	o, mon, _, tr := newOwner()
	if err := o.Designate("a", "switchover (term 2)"); err != nil {
		t.Fatal(err)
	}
	if got := tr.take(); got != "monitor set writer a (switchover (term 2))" {
		t.Fatal(got)
	}
	if err := o.SetWriter("a", "switchover (term 2)"); err != nil {
		t.Fatal(err)
	}
	if got := tr.take(); got != "router unfence 0\nmonitor set writer a (switchover (term 2))" {
		t.Fatal(got)
	}
	if o.State().Writer != "a" {
		t.Fatal("writer")
	}
	mon.refuse = errors.New("server c is fenced")
	if err := o.Designate("c", "x"); err == nil || o.State().Writer != "a" {
		t.Fatal("a refused writer was taken")
	}
}

func TestSetTermOnceAVersion(t *testing.T) {
	o, _, _, tr := newOwner()
	_ = o.SetTerm(4)
	v := o.State().Version
	_ = o.SetTerm(4)
	if o.State().Version != v || o.State().Term != 4 {
		t.Fatal("the same term moved the version")
	}
	if got := tr.take(); got != "monitor term 4\nmonitor term 4" {
		t.Fatal(got)
	}
}

func TestSetAdminState(t *testing.T) {
	o, _, r, tr := newOwner()
	if err := o.SetAdminState("a", topology.OfflineHard, "set by an operator"); err != nil {
		t.Fatal(err)
	}
	if got := tr.take(); got != "monitor admin a OFFLINE_HARD (set by an operator)\nrouter fence 0 (set OFFLINE_HARD by an operator)" {
		t.Fatal(got)
	}
	if !r.fenced[0] {
		t.Fatal("not fenced")
	}
	_ = o.SetAdminState("a", topology.Online, "set by an operator")
	if got := tr.take(); got != "monitor admin a ONLINE (set by an operator)\nrouter unfence 0" {
		t.Fatal(got)
	}
	// Not fenced at the router: nothing to lift there.
	_ = o.SetAdminState("c", topology.OfflineSoft, "set by an operator")
	if got := tr.take(); got != "monitor admin c OFFLINE_SOFT (set by an operator)" {
		t.Fatal(got)
	}
	if r.fenced[2] {
		t.Fatal("c fenced")
	}
}

// TestWaitWriterWakesOnSnapshot: the wait ends with the snapshot that
// routes the writer, not on a timer.
func TestWaitWriterWakesOnSnapshot(t *testing.T) {
	o, mon, _, _ := newOwner()
	mon.publish("a", false)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- o.WaitWriter(context.Background(), "a", 10*time.Second) }()
	time.Sleep(20 * time.Millisecond)
	mon.publish("a", true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitWriter did not wake on the snapshot")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("slow")
	}
	err := o.WaitWriter(context.Background(), "c", 30*time.Millisecond)
	if err == nil || err.Error() != "the monitor did not route c as the writer within 30ms" {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.WaitWriter(ctx, "c", time.Second); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func TestWaitVersion(t *testing.T) {
	o, _, _, _ := newOwner()
	v := o.State().Version
	done := make(chan error, 1)
	go func() { done <- o.Wait(context.Background(), v) }()
	_, _ = o.Fence("a", "x", "y")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := o.Wait(ctx, o.State().Version); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

func TestSetServersDropsRemovedFences(t *testing.T) {
	o, _, _, _ := newOwner()
	_, _ = o.Fence("c", "x", "y")
	o.SetServers([]Server{{Name: "a"}, {Name: "b", Removed: true}, {Name: "c", Removed: true}, {Name: "b"}, {Name: "c"}})
	if len(o.State().Fenced) != 0 || o.Slot("c") != 4 {
		t.Fatalf("%+v", o.State())
	}
}

// TestApplyFenced: a writer record's fences are applied once (a server
// fenced at both the router and the monitor is left alone), and a fence
// the record dropped is lifted.
func TestApplyFenced(t *testing.T) {
	o, mon, r, tr := newOwner()
	mon.snap = &topology.Snapshot{Writer: -1, Servers: []topology.Server{
		{Name: "a", Fenced: true}, {Name: "b", Removed: true, Fenced: true}, {Name: "c", Fenced: true}, {Name: "b"}}}
	r.fenced[2] = true
	var told []string
	err := o.ApplyFenced([]string{"c", "zz", "b"}, "fenced by another Vigil instance: x", "x", func(n string) { told = append(told, n) })
	if err != nil {
		t.Fatal(err)
	}
	want := "router fence 3 (fenced by another Vigil instance: x)\nmonitor fence b (x)\nrouter unfence 0\nmonitor unfence a"
	if got := tr.take(); got != want {
		t.Fatalf("applied:\n%s\nwant:\n%s", got, want)
	}
	if strings.Join(told, ",") != "b" {
		t.Fatal(told)
	}
}
