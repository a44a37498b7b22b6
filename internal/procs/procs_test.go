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
		// Other processes hold the CPUs: Vigil's threads wait on the
		// kernel's run queue. What it got looks light; what it needed
		// (got plus waited) is not.
		{"starved busy on one: demand adds", 1, 2, Sample{Used: 0.1, Waited: 0.8}, 0, 2, 0},
		{"starved light on one: contention adds", 1, 4, Sample{Used: 0.05, Waited: 0.2}, 0, 2, 0},
		{"starved at two: not lowered", 2, 2, Sample{Used: 0.05, Waited: 0.2}, lowerAfter - 1, 2, 0},
		{"waits of a busy machine of its own: stay at one", 1, 2, Sample{Used: 0.24, Waited: 0.1}, 0, 1, 0},
		{"waits of a busy machine of its own: lower from two", 2, 2, Sample{Used: 0.24, Waited: 0.2}, lowerAfter - 1, 1, 0},
		{"demand in the band at two: stay", 2, 2, Sample{Used: 0.4, Waited: 0.3}, lowerAfter - 1, 2, 0},
		{"a few wake-ups: too little to tell", 1, 2, Sample{Used: 0.001, Waited: 0.01}, 0, 1, 0},
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
	cpu, wait time.Duration
	late, all uint64
	sets      []int
	mode      Mode
	// read, when set, is told after the controller read a sample (Sched
	// is read last): a test changes the next sample's values only then.
	read chan struct{}
}

func (f *fakeRuntime) Sched() (uint64, uint64) {
	f.mu.Lock()
	late, all := f.late, f.all
	f.mu.Unlock()
	if f.read != nil {
		f.read <- struct{}{}
	}
	return late, all
}
func (f *fakeRuntime) schedule(late, all uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.late += late
	f.all += all
}

func (f *fakeRuntime) CPU() time.Duration  { f.mu.Lock(); defer f.mu.Unlock(); return f.cpu }
func (f *fakeRuntime) Wait() time.Duration { f.mu.Lock(); defer f.mu.Unlock(); return f.wait }
func (f *fakeRuntime) starve(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wait += d
}
func (f *fakeRuntime) Set(n int)  { f.mu.Lock(); defer f.mu.Unlock(); f.sets = append(f.sets, n) }
func (f *fakeRuntime) Mode() Mode { f.mu.Lock(); defer f.mu.Unlock(); return f.mode }
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
	f := &fakeRuntime{mode: Mode{Auto: true}, read: make(chan struct{})}
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
		<-f.read
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

// TestControllerStarved: with one processor, Vigil's threads start to
// wait for CPUs other processes hold (its CPU use stays light): the
// controller adds a processor at the next sample and keeps it while the
// wait lasts, and lowers again a second after it ends. A thread that ended
// takes its wait with it: the sum going down is not a negative wait.
func TestControllerStarved(t *testing.T) {
	f := &fakeRuntime{mode: Mode{Auto: true}, read: make(chan struct{})}
	tick := make(chan time.Time)
	c := &Controller{Max: 2, Mode: f.Mode, CPU: f.CPU, Wait: f.Wait, Sched: f.Sched, Set: f.Set, Tick: tick}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	now := time.Unix(1000, 0)
	step := func(used, waited float64) {
		f.burn(time.Duration(used * float64(Interval)))
		f.starve(time.Duration(waited * float64(Interval)))
		f.schedule(0, 1000)
		now = now.Add(Interval)
		tick <- now
		<-f.read
	}
	step(0, 0)
	for range lowerAfter {
		step(0.2, 0.05)
	}
	step(0.2, 0.05)
	if got := f.got(); !equal(got, []int{1}) {
		t.Fatalf("light and on time: sets %v, want [1]", got)
	}
	step(0.05, 0.3) // starved
	step(0.05, 0.3)
	if got := f.got(); !equal(got, []int{1, 2}) {
		t.Fatalf("starved: sets %v, want [1 2]", got)
	}
	for range 3 * lowerAfter {
		step(0.05, 0.3)
	}
	if got := f.got(); !equal(got, []int{1, 2}) {
		t.Fatalf("still starved: sets %v, want [1 2]", got)
	}
	f.starve(-time.Second) // a thread with a long wait ended
	for range lowerAfter + 1 {
		step(0.2, 0.05)
	}
	step(0.2, 0.05)
	cancel()
	<-done
	if got := f.got(); !equal(got, []int{1, 2, 1}) {
		t.Fatalf("starvation over: sets %v, want [1 2 1]", got)
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
