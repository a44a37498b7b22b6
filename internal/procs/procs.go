// Package procs sizes Go's scheduler to Vigil's load: how many threads
// run Go code at once (GOMAXPROCS), the `threads` setting.
//
// Why: Vigil's hot path is system calls and the scheduler's hand-offs
// between them (docs/design.md, "Threads follow the load"). Every
// processor the runtime has but does not need costs CPU: when a session
// goroutine becomes ready, an idle processor's thread is woken to spin
// for work (a futex wake-up), polls the network, finds little and goes
// back to sleep (another futex). A proxy using half a core on a machine
// of many pays this on every query. With `threads: auto` the controller
// keeps as many processors as the measured load needs, with headroom,
// and adds one the moment the load grows into it.
package procs

import (
	"context"
	"log/slog"
	"math"
	"time"
)

// The policy: a sample is the process's CPU use (cores) over Interval.
const (
	// Interval is how often the load is sampled.
	Interval = 100 * time.Millisecond
	// raiseAt: at this use per processor, processors are added at once.
	raiseAt = 0.85
	// target is the use per processor a raise aims at.
	target = 0.6
	// lowerAt: a processor is taken away when the load would fit in one
	// fewer at this use each ...
	lowerAt = 0.6
	// ... for lowerAfter samples in a row (a second).
	lowerAfter = 10
	// LateAfter: a goroutine that waited this long to run, once ready,
	// was late (runtime/metrics /sched/latencies:seconds). CPU use says
	// what Vigil got, not what it needed: on a machine whose CPUs other
	// processes hold, Vigil's threads run less than its goroutines want,
	// and its CPU use looks light while its sessions wait. Late
	// goroutines show that.
	LateAfter = time.Millisecond
	// lateAt: with this share of late goroutines in a sample, a processor
	// is added whatever the CPU use; lowering needs fewer than lateOK.
	lateAt = 0.05
	lateOK = 0.01
	// contendedAt: when Vigil's threads spent this share of the time they
	// were ready to run waiting for a CPU (the kernel's run-queue delay),
	// other processes hold the CPUs. Each thread is then one share of a
	// contended CPU, and one thread fewer is a share fewer: the monitor's
	// timers and the sessions slip behind other processes' work. A
	// processor is added whatever the CPU use, and none is taken away
	// while it lasts. Late goroutines do not show this: a thread the
	// kernel does not run does not make goroutines ready either. Measured
	// on 2 cores under sysbench at a fixed 6,000 qps (its 32 threads and
	// the servers on the same cores): 0.3 with one processor, 0.45-0.5
	// with two; under 40 CPU-bound processes: above 0.9.
	contendedAt = 0.6
	// minDemand: below this many cores of demand (used plus waited) the
	// share of waiting is noise (a few wake-ups).
	minDemand = 0.02
)

// Sample is what the controller reads after every Interval: the process's
// CPU use in cores, the time its threads were ready but waited for a CPU
// (in cores: run-queue delay over the interval), and the share of
// goroutines that became ready in the interval and waited LateAfter or
// more to run.
type Sample struct {
	Used, Waited, Late float64
}

// contended is the share of its demand Vigil spent waiting for a CPU, zero
// when the demand is too small to tell.
func (s Sample) contended() float64 {
	d := s.Used + s.Waited
	if d < minDemand {
		return 0
	}
	return s.Waited / d
}

// Next is the number of processors after sample s taken with cur
// processors (of at most top); low counts the samples in a row before this
// one in which the load fitted in fewer. It returns the new count and the
// new low. Pure: the controller's decision, tested by table.
//
// Raising is immediate and may jump (a load that grows fast gets what it
// needs in one sample); late goroutines, or threads that wait for a CPU
// other processes hold, add one processor. Lowering
// waits a second of light load with goroutines on time and goes one
// processor at a time, so a load on the edge does not flap.
func Next(cur, top int, s Sample, low int) (int, int) {
	if top <= 1 {
		return 1, 0
	}
	cur = max(1, min(top, cur))
	// What Vigil needed: the CPU it got and the CPU its threads waited
	// for.
	demand := s.Used + s.Waited
	if demand >= raiseAt*float64(cur) {
		want := int(math.Ceil(demand / target))
		return min(top, max(cur+1, want)), 0
	}
	if s.Late >= lateAt || s.contended() >= contendedAt {
		return min(top, cur+1), 0
	}
	if cur > 1 && demand <= lowerAt*float64(cur-1) && s.Late < lateOK && s.contended() < contendedAt {
		if low+1 >= lowerAfter {
			return cur - 1, 0
		}
		return cur, low + 1
	}
	return cur, 0
}

// Mode is what the running configuration asks for: Auto, or Fixed
// processors (Fixed > 0).
type Mode struct {
	Auto  bool
	Fixed int
}

// Controller applies the running Mode: a fixed count once, or, in auto
// mode, Next after every sample. Its parts are injected so tests run it
// on fakes.
type Controller struct {
	// Max is the most processors auto mode uses: the runtime's own
	// default at start (the CPUs Vigil may use, cgroup limits included).
	Max int
	// Mode reads the running configuration's setting (it changes with a
	// reload).
	Mode func() Mode
	// CPU is the process's CPU time so far (user and system).
	CPU func() time.Duration
	// Wait is the time the process's threads so far were ready to run
	// but waited for a CPU (run-queue delay); nil or zero where the
	// kernel does not tell.
	Wait func() time.Duration
	// Sched is how many goroutines so far became ready and ran, and how
	// many of them were late (waited LateAfter or more).
	Sched func() (late, all uint64)
	// Set makes n processors run Go code (runtime.GOMAXPROCS).
	Set func(n int)
	// Tick delivers a sample time every Interval until Stop.
	Tick <-chan time.Time
	Log  *slog.Logger
	// Changed, when set, is told every change (the metric).
	Changed func(n int)
}

// Run applies the mode until ctx ends. It starts from Max processors.
func (c *Controller) Run(ctx context.Context) {
	cur := c.Max
	low := 0
	var lastCPU, lastWait time.Duration
	var lastLate, lastAll uint64
	var lastAt time.Time
	set := func(n int, why string, s Sample) {
		if n == cur {
			return
		}
		c.Set(n)
		if c.Log != nil {
			c.Log.Debug("scheduler threads changed", "from", cur, "to", n, "why", why,
				"cores_used", math.Round(s.Used*100)/100, "cores_waited", math.Round(s.Waited*100)/100, "late_goroutines", math.Round(s.Late*1000)/1000)
		}
		cur = n
		if c.Changed != nil {
			c.Changed(n)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-c.Tick:
			m := c.Mode()
			cpu := c.CPU()
			var wait time.Duration
			if c.Wait != nil {
				wait = c.Wait()
			}
			late, all := c.Sched()
			if !m.Auto {
				lastAt = time.Time{}
				n := m.Fixed
				if n <= 0 {
					n = c.Max
				}
				set(n, "threads setting", Sample{})
				continue
			}
			if lastAt.IsZero() || !now.After(lastAt) {
				lastCPU, lastWait, lastLate, lastAll, lastAt = cpu, wait, late, all, now
				continue
			}
			span := float64(now.Sub(lastAt))
			s := Sample{Used: float64(cpu-lastCPU) / span}
			// A thread that ended took its wait with it: the sum can go
			// down.
			if wait > lastWait {
				s.Waited = float64(wait-lastWait) / span
			}
			if all > lastAll {
				s.Late = float64(late-lastLate) / float64(all-lastAll)
			}
			lastCPU, lastWait, lastLate, lastAll, lastAt = cpu, wait, late, all, now
			var n int
			n, low = Next(cur, c.Max, s, low)
			set(n, "threads: auto", s)
		}
	}
}
