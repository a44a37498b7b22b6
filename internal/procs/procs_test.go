package procs

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestNext: the decision by table. Goroutines waiting to run add a
// processor even when the CPU use looks light (other processes hold the
// CPUs), and keep one from being taken away.
func TestNext(t *testing.T) {
	use := func(u float64) Sample { return Sample{Used: u} }
	cases := []struct {
		name           string
		cur, top       int
		s              Sample
		low            int
		wantN, wantLow int
	}{
		{"one CPU: always one", 1, 1, use(0.95), 0, 1, 0},
		{"light load on one", 1, 2, use(0.3), 0, 1, 0},
		{"three quarters of one: stay", 1, 2, use(0.75), 0, 1, 0},
		{"busy on one: add", 1, 2, use(0.85), 0, 2, 0},
		{"saturated one: add", 1, 2, use(1.0), 0, 2, 0},
		{"fast growth jumps", 1, 16, use(3.2), 0, 6, 0},
		{"jump capped at top", 2, 4, use(3.9), 0, 4, 0},
		{"at top stays", 4, 4, use(3.9), 0, 4, 0},
		{"in the band: stay, streak reset", 2, 2, use(0.7), 5, 2, 0},
		{"fits in fewer: count", 2, 2, use(0.6), 0, 2, 1},
		{"fits in fewer a second: lower by one", 4, 8, use(1.7), lowerAfter - 1, 3, 0},
		{"idle many: one step", 8, 8, use(0.0), lowerAfter - 1, 7, 0},
		{"cur above top (fixed before) is clamped", 8, 2, use(0.1), 0, 2, 1},
		{"cur below one is clamped", 0, 2, use(0.1), 0, 1, 0},
		{"late on one: add", 1, 2, Sample{Used: 0.3, Late: 0.2}, 0, 2, 0},
		{"late at top: stay", 2, 2, Sample{Used: 0.3, Late: 0.2}, 4, 2, 0},
		{"a few late: not enough to add", 1, 4, Sample{Used: 0.3, Late: 0.03}, 0, 1, 0},
		{"a few late: not enough to lower either", 2, 2, Sample{Used: 0.2, Late: 0.03}, lowerAfter - 1, 2, 0},
		{"on time and light: lower", 2, 2, Sample{Used: 0.2, Late: 0.001}, lowerAfter - 1, 1, 0},
	}
	for _, c := range cases {
		n, low := Next(c.cur, c.top, c.s, c.low)
		if n != c.wantN || low != c.wantLow {
			t.Errorf("%s: Next(%d, %d, %+v, %d) = %d, %d; want %d, %d", c.name, c.cur, c.top, c.s, c.low, n, low, c.wantN, c.wantLow)
		}
	}
}

// TestNextNoFlap: a steady load never changes the count after it settled.
func TestNextNoFlap(t *testing.T) {
	for _, used := range []float64{0.1, 0.35, 0.6, 0.69, 0.85, 1.2, 1.9, 3.5} {
		cur, low := 2, 0
		for range 100 {
			cur, low = Next(cur, 4, Sample{Used: used}, low)
		}
		settled := cur
		for range 100 {
			cur, low = Next(cur, 4, Sample{Used: used}, low)
			if cur != settled {
				t.Fatalf("load %.2f: settled at %d, then moved to %d", used, settled, cur)
			}
		}
		if used >= raiseAt*float64(settled) && settled < 4 {
			t.Errorf("load %.2f settled at %d processors, busier than %.1f each", used, settled, raiseAt)
		}
	}
}

type fakeRuntime struct {
	mu        sync.Mutex
	cpu       time.Duration
	late, all uint64
	sets      []int
	mode      Mode
}

func (f *fakeRuntime) Sched() (uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.late, f.all
}
func (f *fakeRuntime) schedule(late, all uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.late += late
	f.all += all
}

func (f *fakeRuntime) CPU() time.Duration { f.mu.Lock(); defer f.mu.Unlock(); return f.cpu }
func (f *fakeRuntime) Set(n int)          { f.mu.Lock(); defer f.mu.Unlock(); f.sets = append(f.sets, n) }
func (f *fakeRuntime) Mode() Mode         { f.mu.Lock(); defer f.mu.Unlock(); return f.mode }
func (f *fakeRuntime) burn(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cpu += d
}
func (f *fakeRuntime) setMode(m Mode) { f.mu.Lock(); defer f.mu.Unlock(); f.mode = m }
func (f *fakeRuntime) got() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sets...)
}

// TestControllerFollowsLoad runs the controller on a fake clock and CPU:
// light load takes it down to one processor after a second, a busy
// sample brings the processors back at once, a fixed setting is applied
// as it is, and auto resumes after it.
func TestControllerFollowsLoad(t *testing.T) {
	f := &fakeRuntime{mode: Mode{Auto: true}}
	tick := make(chan time.Time)
	var changed []int
	c := &Controller{Max: 2, Mode: f.Mode, CPU: f.CPU, Sched: f.Sched, Set: f.Set, Tick: tick, Changed: func(n int) { changed = append(changed, n) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	now := time.Unix(1000, 0)
	step := func(used float64) {
		f.burn(time.Duration(used * float64(Interval)))
		f.schedule(0, 1000)
		now = now.Add(Interval)
		tick <- now
	}
	step(0) // the first sample only starts the count
	for range lowerAfter {
		step(0.2)
	}
	step(0.2) // a sync point: the previous sample is handled
	if got := f.got(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after a second at 0.2 cores: sets %v, want [1]", got)
	}
	step(0.95)
	step(0.95)
	if got := f.got(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("after a busy sample: sets %v, want [1 2]", got)
	}
	f.setMode(Mode{Fixed: 1})
	step(0.9)
	f.setMode(Mode{Auto: true})
	step(0.95) // first auto sample after fixed: starts the count, keeps 1
	step(0.95) // busy: back to 2
	step(0.95)
	cancel()
	<-done
	want := []int{1, 2, 1, 2}
	if got := f.got(); !equal(got, want) {
		t.Fatalf("sets %v, want %v", got, want)
	}
	if !equal(changed, want) {
		t.Fatalf("changed %v, want %v", changed, want)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
