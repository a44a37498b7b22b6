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

// TargetSummary is one target in one scenario over all repetitions.
type TargetSummary struct {
	Target     string `json:"target"`
	Runs       int    `json:"runs"`
	FailedRuns int    `json:"failed_runs"`
	// QPS counts a failed run as 0 queries per second, so a target that
	// fails looks as bad as it is; the latencies come from complete runs.
	QPS                 *Stat `json:"qps"`
	TPS                 *Stat `json:"tps"`
	P95Ms               *Stat `json:"p95_ms"`
	Errors              int64 `json:"errors"`
	ProxyCPUUsPerQuery  *Stat `json:"proxy_cpu_us_per_query"`
	ProxyRSSMiB         *Stat `json:"proxy_rss_mib"`
	ServerCPUUsPerQuery *Stat `json:"server_cpu_us_per_query"`
	ClientCPUUsPerQuery *Stat `json:"client_cpu_us_per_query"`
	ReplicaSelectShare  *Stat `json:"replica_select_share"`
	// ServerStatementsPerQuery: see Measurement.
	ServerStatementsPerQuery *Stat `json:"server_statements_per_query"`
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

// ScenarioSummary is every target of one scenario.
type ScenarioSummary struct {
	Scenario string          `json:"scenario"`
	Targets  []TargetSummary `json:"targets"`
	Ratios   []Ratio         `json:"ratios"`
}

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

// Check is one target of the data path stated as pass or miss.
type Check struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Value is the ratio the check looked at, null when it could not be
	// measured (which is a miss).
	Value  *float64 `json:"value"`
	Detail string   `json:"detail"`
}

// Summary is the digest of all runs: what the report prints.
type Summary struct {
	Scenarios []ScenarioSummary `json:"scenarios"`
	Checks    []Check           `json:"checks"`
}

// ratioPairs are the comparisons every scenario reports, when both sides
// ran.
func ratioPairs() []Ratio {
	return []Ratio{
		{Metric: "qps", Num: TargetVigil, Den: TargetDirect},
		{Metric: "qps", Num: TargetVigil, Den: TargetHAProxy},
		{Metric: "qps", Num: TargetHAProxy, Den: TargetDirect},
		{Metric: "proxy_cpu_us_per_query", Num: TargetVigil, Den: TargetHAProxy},
		{Metric: "qps", Num: TargetVigilRules, Den: TargetVigil},
		{Metric: "proxy_cpu_us_per_query", Num: TargetVigilRules, Den: TargetVigil},
	}
}

// Summarize digests runs, scenarios and targets in the order given; a
// scenario without runs is left out.
func Summarize(scenarios, targets []string, runs []Measurement) Summary {
	var sum Summary
	for _, sc := range scenarios {
		ss := ScenarioSummary{Scenario: sc}
		for _, tg := range targets {
			var mine []Measurement
			for _, r := range runs {
				if r.Scenario == sc && r.Target == tg {
					mine = append(mine, r)
				}
			}
			if len(mine) > 0 {
				ss.Targets = append(ss.Targets, summarizeTarget(tg, mine))
			}
		}
		if len(ss.Targets) == 0 {
			continue // not reached (an interrupted bench)
		}
		for _, p := range ratioPairs() {
			r := p
			r.Value = ratioOf(ss, p.Metric, p.Num, p.Den)
			if _, ok := ss.Target(p.Num); !ok {
				continue
			}
			if _, ok := ss.Target(p.Den); !ok {
				continue
			}
			ss.Ratios = append(ss.Ratios, r)
		}
		sum.Scenarios = append(sum.Scenarios, ss)
	}
	sum.Checks = checks(sum)
	return sum
}

func summarizeTarget(name string, runs []Measurement) TargetSummary {
	t := TargetSummary{Target: name, Runs: len(runs)}
	var qps, tps, p95, cpu, rss, server, client, share, stmts []float64
	for _, r := range runs {
		t.Errors += r.Sysbench.Errors()
		if r.Failed() {
			t.FailedRuns++
			if r.Error != "" && len(r.Sysbench.Fatal) == 0 {
				t.Errors++ // sysbench could not run or exited non-zero
			}
		}
		qps = append(qps, r.Sysbench.QPS)
		tps = append(tps, r.Sysbench.TPS)
		if r.Sysbench.Complete {
			p95 = append(p95, r.Sysbench.PercentileMs)
		}
		if r.ProxyCPUUsPerQuery != nil {
			cpu = append(cpu, *r.ProxyCPUUsPerQuery)
		}
		if r.ProxyRSSKiB != nil {
			rss = append(rss, float64(*r.ProxyRSSKiB)/1024)
		}
		if r.ServerCPUUsPerQuery != nil {
			server = append(server, *r.ServerCPUUsPerQuery)
		}
		if r.ClientCPUUsPerQuery != nil {
			client = append(client, *r.ClientCPUUsPerQuery)
		}
		if r.ReplicaSelectShare != nil {
			share = append(share, *r.ReplicaSelectShare)
		}
		if r.ServerStatementsPerQuery != nil {
			stmts = append(stmts, *r.ServerStatementsPerQuery)
		}
	}
	t.QPS, t.TPS, t.P95Ms = NewStat(qps), NewStat(tps), NewStat(p95)
	t.ProxyCPUUsPerQuery, t.ProxyRSSMiB = NewStat(cpu), NewStat(rss)
	t.ServerCPUUsPerQuery, t.ClientCPUUsPerQuery = NewStat(server), NewStat(client)
	t.ReplicaSelectShare, t.ServerStatementsPerQuery = NewStat(share), NewStat(stmts)
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

// checks are the targets of the data path: Vigil at least as fast as
// HAProxy, at most as much CPU per query, and no errors anywhere.
func checks(sum Summary) []Check {
	var out []Check
	for _, ss := range sum.Scenarios {
		_, hasV := ss.Target(TargetVigil)
		_, hasH := ss.Target(TargetHAProxy)
		if !hasV || !hasH {
			continue
		}
		c := Check{Name: fmt.Sprintf("Vigil qps ≥ HAProxy qps on %s", ss.Scenario)}
		if v, ok := ss.Ratio("qps", TargetVigil, TargetHAProxy); ok {
			c.Value, c.Pass = ptr(v), v >= 1
			c.Detail = fmt.Sprintf("vigil/haproxy %.2f", v)
		} else {
			c.Detail = "not measured"
		}
		out = append(out, c)
		c = Check{Name: fmt.Sprintf("Vigil CPU per query ≤ HAProxy's on %s", ss.Scenario)}
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
		_, hasV := ss.Target(TargetVigil)
		_, hasR := ss.Target(TargetVigilRules)
		if !hasV || !hasR {
			continue
		}
		c := Check{Name: fmt.Sprintf("Query processing (digests, %d rules, query log) costs ≤ 10%% qps on %s", ProcessingRules, ss.Scenario)}
		if v, ok := ss.Ratio("qps", TargetVigilRules, TargetVigil); ok {
			c.Value, c.Pass = ptr(v), v >= 0.90
			c.Detail = fmt.Sprintf("vigil+rules/vigil %.2f (overhead %.1f%%)", v, 100*(1-v))
		} else {
			c.Detail = "not measured"
		}
		out = append(out, c)
	}
	var bad []string
	for _, ss := range sum.Scenarios {
		for _, t := range ss.Targets {
			if t.Errors > 0 || t.FailedRuns > 0 {
				bad = append(bad, fmt.Sprintf("%s %s: %d errors, %d failed runs", ss.Scenario, t.Target, t.Errors, t.FailedRuns))
			}
		}
	}
	c := Check{Name: "No errors on any target", Pass: len(bad) == 0, Detail: "none"}
	if len(bad) > 0 {
		c.Detail = strings.Join(bad, "; ")
	}
	return append(out, c)
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
