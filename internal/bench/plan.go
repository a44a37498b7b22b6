package bench

import (
	"fmt"
	"strings"
	"time"
)

// CheckThreads is the thread count of the sysbench cells the checks read.
const CheckThreads = 32

// Case is one cell of a bench: a scenario at one thread count (and, for
// many_clients, one number of idle clients), with its repetitions.
type Case struct {
	Scenario Scenario
	Threads  int
	// Idle is the number of idle clients of a many_clients case.
	Idle     int
	Reps     int
	Duration time.Duration
	// Warmup is an unmeasured run per target before the first rep; 0
	// for none.
	Warmup time.Duration
	// Check marks the cells an acceptance check reads; they get
	// Options.CheckReps repetitions.
	Check bool
}

// Key identifies the case in results and comparisons.
func (c Case) Key() string { return CaseKey(c.Scenario.Name, c.Threads, c.Idle) }

// CaseKey is "oltp_point_select@32" or "many_clients@32+1000idle"; a run
// without a thread count (tests, hand-made results) is keyed by its
// scenario alone.
func CaseKey(scenario string, threads, idle int) string {
	k := scenario
	if threads > 0 {
		k += fmt.Sprintf("@%d", threads)
	}
	if idle > 0 {
		k += fmt.Sprintf("+%didle", idle)
	}
	return k
}

// CaseLabel is the key for people: "oltp_point_select, 32 threads",
// "many_clients, 1000 idle + 32 active".
func CaseLabel(scenario string, threads, idle int) string {
	switch {
	case idle > 0:
		return fmt.Sprintf("%s, %d idle + %d active", scenario, idle, threads)
	case threads > 0:
		return fmt.Sprintf("%s, %d threads", scenario, threads)
	}
	return scenario
}

// isCheckCell reports the sysbench cells whose qps and CPU the checks
// compare: point selects and read-only at 32 threads.
func isCheckCell(scenario string, threads int) bool {
	return threads == CheckThreads && (scenario == "oltp_point_select" || scenario == "oltp_read_only")
}

// BuildPlan expands the scenarios into cases, in the order they run:
// the scenarios in the order given, failover last whatever its place, and
// the sysbench matrix by thread count within each scenario.
func BuildPlan(o Options) []Case {
	var plan, last []Case
	for _, s := range o.Scenarios {
		switch s.kind() {
		case KindSysbench:
			threads := o.Threads
			if s.Threads > 0 {
				threads = []int{s.Threads}
			}
			for _, t := range threads {
				c := Case{Scenario: s, Threads: t, Reps: o.Reps, Duration: o.Duration, Warmup: o.Warmup}
				if isCheckCell(s.Name, t) {
					c.Check, c.Reps = true, o.CheckReps
				}
				plan = append(plan, c)
			}
		case KindChurn:
			plan = append(plan, Case{Scenario: s, Threads: s.Threads, Reps: o.CheckReps, Duration: o.Duration, Warmup: o.Warmup, Check: true})
		case KindManyClients:
			// No warm-up: it would open all the idle connections twice.
			for _, n := range o.Clients {
				plan = append(plan, Case{Scenario: s, Threads: s.Threads, Idle: n, Reps: o.Reps, Duration: o.Duration})
			}
		case KindRules:
			plan = append(plan, Case{Scenario: s, Threads: s.Threads, Reps: o.Reps, Duration: o.Duration, Warmup: o.Warmup})
		case KindFailover:
			last = append(last, Case{Scenario: s, Reps: o.FailoverRuns, Check: true})
		}
	}
	return append(plan, last...)
}

// PlanEstimate is a rough length of the plan on an idle machine, for the
// progress line at the start: measured time plus a per-run allowance for
// connecting and sampling.
func PlanEstimate(plan []Case, targets int) time.Duration {
	var d time.Duration
	for _, c := range plan {
		n := targets
		switch c.Scenario.kind() {
		case KindRules:
			n = 3 // none, 100 and 1,000 by default
		case KindFailover:
			d += time.Duration(c.Reps) * 20 * time.Second
			continue
		}
		run := c.Duration + 1500*time.Millisecond
		if c.Idle > 0 {
			run += time.Duration(c.Idle/2000+1) * time.Second
		}
		d += time.Duration(n) * (time.Duration(c.Reps)*run + c.Warmup)
		if c.Warmup > 0 {
			d += time.Duration(n) * 1500 * time.Millisecond
		}
	}
	return d
}

// ParseIntList reads "8,32,128".
func ParseIntList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(f, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != f {
			return nil, fmt.Errorf("%q is not a whole number", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no number in %q", s)
	}
	return out, nil
}
