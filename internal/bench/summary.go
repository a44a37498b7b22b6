package bench

import (
	"fmt"
	"sort"
	"strings"
)

// Stat is the median, minimum and maximum of a measurement over the
// repetitions that have it.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// NewStat summarizes values; nil when there are none.
func NewStat(values []float64) *Stat {
	if len(values) == 0 {
		return nil
	}
	return &Stat{Median: Median(values), Min: minOf(values), Max: maxOf(values), N: len(values)}
}

// Median of values (the mean of the two middle ones for an even count); 0
// for none.
func Median(values []float64) float64 {
	n := len(values)
	if n == 0 {
		return 0
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = max(m, x)
	}
	return m
}

// TargetSummary is one target in one case over all repetitions.
type TargetSummary struct {
	Target     string `json:"target"`
	Runs       int    `json:"runs"`
	FailedRuns int    `json:"failed_runs"`
	// Skipped says why the target did not run in this case (HAProxy
	// cannot hold 10,000 connections under the open-file limit, say).
	Skipped string `json:"skipped,omitempty"`
	// QPS counts a failed run as 0 queries per second, so a target that
	// fails looks as bad as it is; the latencies come from complete runs.
	QPS   *Stat `json:"qps"`
	TPS   *Stat `json:"tps"`
	P50Ms *Stat `json:"p50_ms"`
	P95Ms *Stat `json:"p95_ms"`
	P99Ms *Stat `json:"p99_ms"`
	// Errors are all errors; HardErrors leave out what sysbench ignored
	// and retried (its --mysql-ignore-errors: deadlocks and lock wait
	// timeouts, which the workload causes whatever the target).
	Errors              int64 `json:"errors"`
	HardErrors          int64 `json:"hard_errors"`
	ProxyCPUUsPerQuery  *Stat `json:"proxy_cpu_us_per_query"`
	ProxyRSSMiB         *Stat `json:"proxy_rss_mib"`
	ServerCPUUsPerQuery *Stat `json:"server_cpu_us_per_query"`
	ClientCPUUsPerQuery *Stat `json:"client_cpu_us_per_query"`
	ReplicaSelectShare  *Stat `json:"replica_select_share"`
	// ServerStatementsPerQuery: see Measurement.
	ServerStatementsPerQuery *Stat `json:"server_statements_per_query"`
	// ServerConnections and OpenSeconds: many_clients only.
	ServerConnections *Stat `json:"server_connections,omitempty"`
	OpenSeconds       *Stat `json:"open_seconds,omitempty"`
}

// Ratio compares one metric of two targets, medians over medians.
type Ratio struct {
	Metric string `json:"metric"` // qps or proxy_cpu_us_per_query
	Num    string `json:"num"`
	Den    string `json:"den"`
	// Value is null when either side is missing or the denominator is 0.
	Value *float64 `json:"value"`
}

// Name is "vigil/haproxy" (qps) or "cpu vigil/haproxy".
func (r Ratio) Name() string {
	if r.Metric == "qps" {
		return r.Num + "/" + r.Den
	}
	return "cpu " + r.Num + "/" + r.Den
}

// ScenarioSummary is every target of one case (a scenario at one thread
// count).
type ScenarioSummary struct {
	// Case is the key (CaseKey); Scenario, Threads and Idle its parts.
	Case     string          `json:"case"`
	Scenario string          `json:"scenario"`
	Kind     Kind            `json:"kind"`
	Threads  int             `json:"threads"`
	Idle     int             `json:"idle,omitempty"`
	Targets  []TargetSummary `json:"targets"`
	Ratios   []Ratio         `json:"ratios"`
}

// Label is the case for people.
func (s ScenarioSummary) Label() string { return CaseLabel(s.Scenario, s.Threads, s.Idle) }

// Target returns the summary of the named target.
func (s ScenarioSummary) Target(name string) (TargetSummary, bool) {
	for _, t := range s.Targets {
		if t.Target == name {
			return t, true
		}
	}
	return TargetSummary{}, false
}

// Ratio returns the value of a ratio, if it could be computed.
func (s ScenarioSummary) Ratio(metric, num, den string) (float64, bool) {
	for _, r := range s.Ratios {
		if r.Metric == metric && r.Num == num && r.Den == den && r.Value != nil {
			return *r.Value, true
		}
	}
	return 0, false
}

// Check is one acceptance target stated as pass or miss.
type Check struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Value is the number the check looked at, null when it could not be
	// measured (which is a miss).
	Value  *float64 `json:"value"`
	Detail string   `json:"detail"`
}

// Summary is the digest of all runs: what the report prints.
type Summary struct {
	Scenarios []ScenarioSummary `json:"scenarios"`
	Failover  *FailoverSummary  `json:"failover,omitempty"`
	Checks    []Check           `json:"checks"`
}

// Case returns the summary of a case by key.
func (s Summary) Case(key string) (ScenarioSummary, bool) {
	for _, ss := range s.Scenarios {
		if ss.Case == key {
			return ss, true
		}
	}
	return ScenarioSummary{}, false
}

// baseTargets are the three targets every comparison is about.
func isBaseTarget(name string) bool {
	return name == TargetDirect || name == TargetVigil || name == TargetHAProxy
}

// ratioPairs are the comparisons a case reports, when both sides ran:
// the three base targets against each other, and every other Vigil
// against the plain one (query processing, coordination) or the one
// without rules (rules scaling).
func ratioPairs(targets []TargetSummary) []Ratio {
	out := []Ratio{
		{Metric: "qps", Num: TargetVigil, Den: TargetDirect},
		{Metric: "qps", Num: TargetVigil, Den: TargetHAProxy},
		{Metric: "qps", Num: TargetHAProxy, Den: TargetDirect},
		{Metric: "proxy_cpu_us_per_query", Num: TargetVigil, Den: TargetHAProxy},
	}
	base := TargetVigil
	for _, t := range targets {
		if t.Target == RulesTarget(0) {
			base = t.Target
		}
	}
	for _, t := range targets {
		if !isBaseTarget(t.Target) && t.Target != base {
			out = append(out,
				Ratio{Metric: "qps", Num: t.Target, Den: base},
				Ratio{Metric: "proxy_cpu_us_per_query", Num: t.Target, Den: base})
		}
	}
	return out
}

// kindOf is the kind of a known scenario; sysbench for others.
func kindOf(scenario string) Kind {
	for _, s := range Scenarios() {
		if s.Name == scenario {
			return s.kind()
		}
	}
	return KindSysbench
}

// RunKey is the case of a run.
func (r Measurement) Key() string { return CaseKey(r.Scenario, r.Threads, r.Idle) }

// Summarize digests runs: cases (CaseKey) and targets in the order given;
// a case without runs is left out. failover are the failover runs, if
// any. The checks are computed last, from the whole summary.
func Summarize(cases, targets []string, runs []Measurement, failover []FailoverRun) Summary {
	var sum Summary
	for _, key := range cases {
		var ss ScenarioSummary
		for _, tg := range targets {
			var mine []Measurement
			for _, r := range runs {
				if r.Key() == key && r.Target == tg {
					mine = append(mine, r)
				}
			}
			if len(mine) == 0 {
				continue
			}
			if ss.Case == "" {
				r := mine[0]
				ss = ScenarioSummary{Case: key, Scenario: r.Scenario, Kind: kindOf(r.Scenario), Threads: r.Threads, Idle: r.Idle}
			}
			ss.Targets = append(ss.Targets, summarizeTarget(tg, mine))
		}
		if len(ss.Targets) == 0 {
			continue // not reached (an interrupted bench)
		}
		for _, p := range ratioPairs(ss.Targets) {
			r := p
			// A target that did not run (skipped) has no ratios.
			if t, ok := ss.Target(p.Num); !ok || t.Runs == 0 {
				continue
			}
			if t, ok := ss.Target(p.Den); !ok || t.Runs == 0 {
				continue
			}
			r.Value = ratioOf(ss, p.Metric, p.Num, p.Den)
			ss.Ratios = append(ss.Ratios, r)
		}
		sum.Scenarios = append(sum.Scenarios, ss)
	}
	sum.Failover = SummarizeFailover(failover)
	sum.Checks = checks(sum)
	return sum
}

func summarizeTarget(name string, runs []Measurement) TargetSummary {
	t := TargetSummary{Target: name}
	var qps, tps, p50, p95, p99, cpu, rss, server, client, share, stmts, conns, open []float64
	for _, r := range runs {
		if r.Skipped != "" {
			t.Skipped = r.Skipped
			continue
		}
		t.Runs++
		t.Errors += r.Sysbench.Errors()
		if r.Generator == "go" {
			t.HardErrors += r.Sysbench.Errors()
		} else {
			t.HardErrors += int64(len(r.Sysbench.Fatal))
		}
		if r.Failed() {
			t.FailedRuns++
			if r.Error != "" && len(r.Sysbench.Fatal) == 0 {
				t.Errors++ // sysbench could not run or exited non-zero
				t.HardErrors++
			}
		}
		qps = append(qps, r.Sysbench.QPS)
		tps = append(tps, r.Sysbench.TPS)
		if r.Sysbench.Complete {
			if r.Sysbench.P50Ms > 0 {
				p50 = append(p50, r.Sysbench.P50Ms)
			}
			p95 = append(p95, r.Sysbench.P95())
			if r.Sysbench.P99Ms > 0 {
				p99 = append(p99, r.Sysbench.P99Ms)
			}
		}
		add := func(dst *[]float64, v *float64) {
			if v != nil {
				*dst = append(*dst, *v)
			}
		}
		add(&cpu, r.ProxyCPUUsPerQuery)
		if r.ProxyRSSKiB != nil {
			rss = append(rss, float64(*r.ProxyRSSKiB)/1024)
		}
		add(&server, r.ServerCPUUsPerQuery)
		add(&client, r.ClientCPUUsPerQuery)
		add(&share, r.ReplicaSelectShare)
		add(&stmts, r.ServerStatementsPerQuery)
		if r.ServerConnections != nil {
			conns = append(conns, float64(*r.ServerConnections))
		}
		add(&open, r.OpenSeconds)
	}
	if t.Runs > 0 {
		t.Skipped = ""
	}
	t.QPS, t.TPS = NewStat(qps), NewStat(tps)
	t.P50Ms, t.P95Ms, t.P99Ms = NewStat(p50), NewStat(p95), NewStat(p99)
	t.ProxyCPUUsPerQuery, t.ProxyRSSMiB = NewStat(cpu), NewStat(rss)
	t.ServerCPUUsPerQuery, t.ClientCPUUsPerQuery = NewStat(server), NewStat(client)
	t.ReplicaSelectShare, t.ServerStatementsPerQuery = NewStat(share), NewStat(stmts)
	t.ServerConnections, t.OpenSeconds = NewStat(conns), NewStat(open)
	return t
}

func ratioOf(ss ScenarioSummary, metric, num, den string) *float64 {
	n, ok1 := ss.Target(num)
	d, ok2 := ss.Target(den)
	if !ok1 || !ok2 {
		return nil
	}
	pick := func(t TargetSummary) *Stat {
		if metric == "qps" {
			return t.QPS
		}
		return t.ProxyCPUUsPerQuery
	}
	a, b := pick(n), pick(d)
	if a == nil || b == nil || b.Median == 0 {
		return nil
	}
	return ptr(a.Median / b.Median)
}

// Acceptance targets of the failover checks.
const (
	FailoverTargetSeconds   = 3.0
	SwitchoverTargetSeconds = 0.5
)

// checks are the acceptance targets: Vigil at least as fast as HAProxy
// and at most as much CPU per query on point selects and read-only at 32
// threads, connection churn through Vigil at least as fast as direct,
// failover and switchover within their times, no errors anywhere. A check
// whose case did not run is left out; one whose numbers are missing is a
// miss.
func checks(sum Summary) []Check {
	var out []Check
	var cells []ScenarioSummary
	for _, ss := range sum.Scenarios {
		if isCheckCell(ss.Scenario, ss.Threads) && ss.Idle == 0 {
			if _, ok := ss.Target(TargetVigil); !ok {
				continue
			}
			if _, ok := ss.Target(TargetHAProxy); !ok {
				continue
			}
			cells = append(cells, ss)
		}
	}
	for _, ss := range cells {
		c := Check{Name: fmt.Sprintf("Vigil qps ≥ HAProxy qps on %s", ss.Label())}
		if v, ok := ss.Ratio("qps", TargetVigil, TargetHAProxy); ok {
			vt, _ := ss.Target(TargetVigil)
			ht, _ := ss.Target(TargetHAProxy)
			c.Value, c.Pass = ptr(v), v >= 1
			c.Detail = fmt.Sprintf("%.0f vs %.0f qps, vigil/haproxy %.2f", vt.QPS.Median, ht.QPS.Median, v)
		} else {
			c.Detail = "not measured"
		}
		out = append(out, c)
	}
	for _, ss := range cells {
		c := Check{Name: fmt.Sprintf("Vigil CPU per query ≤ HAProxy's on %s", ss.Label())}
		if v, ok := ss.Ratio("proxy_cpu_us_per_query", TargetVigil, TargetHAProxy); ok {
			vt, _ := ss.Target(TargetVigil)
			ht, _ := ss.Target(TargetHAProxy)
			c.Value, c.Pass = ptr(v), v <= 1
			c.Detail = fmt.Sprintf("%.1f vs %.1f µs/query, ratio %.2f", vt.ProxyCPUUsPerQuery.Median, ht.ProxyCPUUsPerQuery.Median, v)
		} else {
			c.Detail = "not measured"
		}
		out = append(out, c)
	}
	for _, ss := range sum.Scenarios {
		if ss.Kind != KindChurn {
			continue
		}
		_, hasV := ss.Target(TargetVigil)
		_, hasD := ss.Target(TargetDirect)
		if !hasV || !hasD {
			continue
		}
		c := Check{Name: fmt.Sprintf("Connection churn through Vigil ≥ direct (%s)", ss.Label())}
		if v, ok := ss.Ratio("qps", TargetVigil, TargetDirect); ok {
			vt, _ := ss.Target(TargetVigil)
			dt, _ := ss.Target(TargetDirect)
			c.Value, c.Pass = ptr(v), v >= 1
			c.Detail = fmt.Sprintf("%.0f vs %.0f connections/s, vigil/direct %.2f", vt.QPS.Median, dt.QPS.Median, v)
		} else {
			c.Detail = "not measured"
		}
		out = append(out, c)
	}
	if f := sum.Failover; f != nil {
		if f.KillRuns > 0 {
			out = append(out, secondsCheck(fmt.Sprintf("Failover: median kill -9 → first acknowledged write ≤ %gs", FailoverTargetSeconds),
				f.Kill, FailoverTargetSeconds, f.KillRuns, f.KillFailed))
		}
		if f.SwitchoverRuns > 0 {
			out = append(out, secondsCheck(fmt.Sprintf("Switchover: median write pause ≤ %gs", SwitchoverTargetSeconds),
				f.Switchover, SwitchoverTargetSeconds, f.SwitchoverRuns, f.SwitchoverFailed))
		}
	}
	for _, ss := range sum.Scenarios {
		_, hasV := ss.Target(TargetVigil)
		_, hasR := ss.Target(TargetVigilRules)
		if !hasV || !hasR {
			continue
		}
		c := Check{Name: fmt.Sprintf("Query processing (digests, %d rules, query log) costs ≤ 10%% qps on %s", ProcessingRules, ss.Label())}
		if v, ok := ss.Ratio("qps", TargetVigilRules, TargetVigil); ok {
			c.Value, c.Pass = ptr(v), v >= 0.90
			c.Detail = fmt.Sprintf("vigil+rules/vigil %.2f (overhead %.1f%%)", v, 100*(1-v))
		} else {
			c.Detail = "not measured"
		}
		out = append(out, c)
	}
	for _, ss := range sum.Scenarios {
		if c, ok := coordinationCheck(ss); ok {
			out = append(out, c)
		}
	}
	var bad []string
	for _, ss := range sum.Scenarios {
		for _, t := range ss.Targets {
			if t.HardErrors > 0 || t.FailedRuns > 0 {
				bad = append(bad, fmt.Sprintf("%s %s: %d errors, %d failed runs", ss.Label(), t.Target, t.HardErrors, t.FailedRuns))
			}
		}
	}
	c := Check{Name: "No errors on any target (deadlocks sysbench retried aside)", Pass: len(bad) == 0, Detail: "none"}
	if len(bad) > 0 {
		c.Detail = strings.Join(bad, "; ")
	}
	return append(out, c)
}

// secondsCheck passes when the median of st is at most limit seconds and
// every run measured something.
func secondsCheck(name string, st *Stat, limit float64, runs, failed int) Check {
	c := Check{Name: name}
	if st == nil {
		c.Detail = fmt.Sprintf("not measured (%d of %d runs failed)", failed, runs)
		return c
	}
	c.Value, c.Pass = ptr(st.Median), st.Median <= limit
	c.Detail = fmt.Sprintf("median %s, min %s, max %s over %d runs", fmtSeconds(st.Median), fmtSeconds(st.Min), fmtSeconds(st.Max), st.N)
	if failed > 0 {
		c.Pass = false
		c.Detail += fmt.Sprintf("; %d of %d runs failed", failed, runs)
	}
	return c
}

// fmtSeconds prints seconds as "2.93 s" or, under one, "54 ms".
func fmtSeconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0f ms", s*1000)
	}
	return fmt.Sprintf("%.2f s", s)
}

// AllPass reports whether every check passed.
func (s Summary) AllPass() bool {
	for _, c := range s.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}
