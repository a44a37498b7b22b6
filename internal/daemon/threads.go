package daemon

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"syscall"
	"time"

	"github.com/vigil-db/vigil/internal/procs"
)

// startThreads runs the `threads` setting's controller until ctx ends:
// with auto, the threads running Go code follow the load between one and
// the runtime's default (the CPUs Vigil may use); with a number, that
// number. A reload changes the setting: the controller reads the running
// config at every sample. GOMAXPROCS in the environment wins, as
// GOMEMLIMIT does over statement_memory. Only `vigil run` starts it: the
// daemon's unit tests keep their process's scheduler as it is.
func (d *daemon) startThreads(ctx context.Context) {
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		d.log.Info("GOMAXPROCS is set in the environment: the threads setting is not applied", "GOMAXPROCS", v)
		return
	}
	t := time.NewTicker(procs.Interval)
	c := &procs.Controller{
		Max: runtime.GOMAXPROCS(0),
		Mode: func() procs.Mode {
			n, _ := d.running.Load().ThreadCount()
			return procs.Mode{Auto: n == 0, Fixed: n}
		},
		CPU:   processCPU,
		Wait:  (&runDelay{}).read,
		Sched: newSchedReader().read,
		Set:   func(n int) { runtime.GOMAXPROCS(n) },
		Tick:  t.C,
		Log:   d.log,
	}
	d.wg.Go(func() {
		defer t.Stop()
		c.Run(ctx)
	})
}

// schedReader reads the runtime's histogram of how long ready goroutines
// waited to run.
type schedReader struct{ s []metrics.Sample }

func newSchedReader() *schedReader {
	return &schedReader{s: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
}

// read returns how many goroutines so far waited procs.LateAfter or more
// to run (counted by whole buckets at or above it), and how many ran.
func (r *schedReader) read() (late, all uint64) {
	metrics.Read(r.s)
	if r.s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0
	}
	h := r.s[0].Value.Float64Histogram()
	lateAfter := procs.LateAfter.Seconds()
	for i, n := range h.Counts {
		all += n
		if h.Buckets[i] >= lateAfter {
			late += n
		}
	}
	return late, all
}

// runDelay reads how long the process's threads have waited on the
// kernel's run queue: the second field of /proc/self/task/TID/schedstat,
// in nanoseconds. It is zero where the kernel does not keep it (no /proc,
// no schedstat).
type runDelay struct{ buf []byte }

func (r *runDelay) read() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	if r.buf == nil {
		r.buf = make([]byte, 128)
	}
	var total time.Duration
	for _, t := range tasks {
		f, err := os.Open("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		n, _ := f.Read(r.buf)
		f.Close()
		total += time.Duration(parseRunDelay(r.buf[:n]))
	}
	return total
}

// parseRunDelay returns the second of schedstat's space-separated numbers
// ("on-CPU ns, run-queue ns, timeslices"), 0 if it has none.
func parseRunDelay(b []byte) int64 {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	v, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
