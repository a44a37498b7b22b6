package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const na = "n/a"

func fmtStat(s *Stat, f func(float64) string) string {
	if s == nil {
		return na
	}
	return f(s.Median)
}

func fmtRange(s *Stat, f func(float64) string) string {
	if s == nil {
		return na
	}
	return f(s.Min) + "–" + f(s.Max)
}

func fmtInt(v float64) string { return fmt.Sprintf("%.0f", v) }
func fmt2(v float64) string   { return fmt.Sprintf("%.2f", v) }
func fmt1(v float64) string   { return fmt.Sprintf("%.1f", v) }
func fmtPct(v float64) string { return fmt.Sprintf("%.0f%%", v*100) }

func fmtRatio(v *float64) string {
	if v == nil {
		return na
	}
	return fmt.Sprintf("%.2f", *v)
}

func fmtInts(v []int) string {
	var s []string
	for _, n := range v {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ", ")
}

func passWord(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}

// errCell is the errors of a target, with its failed runs.
func errCell(t TargetSummary) string {
	errs := fmt.Sprintf("%d", t.Errors)
	if t.FailedRuns > 0 {
		errs += fmt.Sprintf(" (%d/%d runs failed)", t.FailedRuns, t.Runs)
	}
	return errs
}

// skippedRow fills a row of n cells for a target that did not run.
func skippedRow(prefix []string, t TargetSummary, n int) []string {
	row := append(prefix, "not run: "+t.Skipped)
	for len(row) < n {
		row = append(row, "")
	}
	return row
}

// matrixRow is one line of the sysbench table, shared by the text and
// Markdown renderings so they cannot disagree.
func matrixRow(ss ScenarioSummary, t TargetSummary) []string {
	return []string{
		ss.Scenario, strconv.Itoa(ss.Threads), t.Target,
		fmtStat(t.QPS, fmtInt), fmtRange(t.QPS, fmtInt),
		fmtStat(t.P50Ms, fmt2), fmtStat(t.P95Ms, fmt2), fmtStat(t.P99Ms, fmt2),
		errCell(t),
		fmtStat(t.ProxyCPUUsPerQuery, fmt1), fmtStat(t.ProxyRSSMiB, fmt1),
		fmtStat(t.ServerCPUUsPerQuery, fmt1), fmtStat(t.ReplicaSelectShare, fmtPct),
		fmtStat(t.ServerStatementsPerQuery, fmt2),
	}
}

func matrixHeader() []string {
	return []string{
		"workload", "threads", "target", "qps", "qps min–max", "p50 ms", "p95 ms", "p99 ms", "errors",
		"proxy CPU µs/query", "proxy RSS MiB", "mariadbd CPU µs/query", "SELECTs on replicas", "server stmts/query",
	}
}

// WriteText prints the summary for a terminal: one line per case and
// target, the ratios, the failover medians, what moved and the checks.
func WriteText(w io.Writer, res *Results) error {
	if len(res.Summary.Scenarios) > 0 {
		if err := writeTextTable(w, res.Summary.Scenarios); err != nil {
			return err
		}
	}
	if f := res.Summary.Failover; f != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "failover kill -9 → first acknowledged write: %s\n", fmtSecondsStat(f.Kill))
		fmt.Fprintf(w, "switchover write pause (writers): %s; Vigil's hold: %s\n", fmtSecondsStat(f.Switchover), fmtSecondsStat(f.VigilHold))
	}
	if c := res.Comparison; c != nil && len(c.Moves) > 0 {
		moved := c.Moved()
		fmt.Fprintf(w, "\nCompared with %s: %d of %d numbers moved by more than %.0f%%\n", c.Previous, len(moved), len(c.Moves), c.Threshold*100)
		for _, m := range moved {
			fmt.Fprintf(w, "  %s%s %s %s: %s → %s (%+.0f%%)\n", worseMark(m), m.Label, m.Target, m.Metric, fmtNum(m.Prev), fmtNum(m.Now), m.Change*100)
		}
	}
	fmt.Fprintln(w)
	for _, c := range res.Summary.Checks {
		fmt.Fprintf(w, "%s  %s (%s)\n", passWord(c.Pass), c.Name, c.Detail)
	}
	return nil
}

// writeTextTable is one line per case and target, then the ratios.
func writeTextTable(w io.Writer, cases []ScenarioSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join([]string{"case", "target", "qps", "qps min–max", "p99 ms", "errors", "proxy CPU µs/q", "proxy RSS MiB", ""}, "\t"))
	for _, ss := range cases {
		name := ss.Label()
		for _, t := range ss.Targets {
			if t.Skipped != "" && t.Runs == 0 {
				fmt.Fprintln(tw, strings.Join([]string{name, t.Target, "not run", "", "", "", "", "", t.Skipped}, "\t"))
				name = ""
				continue
			}
			extra := ""
			if t.ServerConnections != nil {
				extra = fmt.Sprintf("%.0f server connections", t.ServerConnections.Median)
			}
			fmt.Fprintln(tw, strings.Join([]string{name, t.Target, fmtStat(t.QPS, fmtInt), fmtRange(t.QPS, fmtInt),
				fmtStat(t.P99Ms, fmt2), errCell(t), fmtStat(t.ProxyCPUUsPerQuery, fmt1), fmtStat(t.ProxyRSSMiB, fmt1), extra}, "\t"))
			name = ""
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, ss := range cases {
		var parts []string
		for _, r := range ss.Ratios {
			parts = append(parts, r.Name()+" "+fmtRatio(r.Value))
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "%s: %s\n", ss.Label(), strings.Join(parts, "  "))
		}
	}
	return nil
}

func worseMark(m Move) string {
	if m.Worse {
		return "⚠ "
	}
	return ""
}

// fmtNum prints a number with sensible precision.
func fmtNum(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func fmtSecondsStat(s *Stat) string {
	if s == nil {
		return na
	}
	return fmt.Sprintf("median %s (min %s, max %s, %d runs)", fmtSeconds(s.Median), fmtSeconds(s.Min), fmtSeconds(s.Max), s.N)
}

func mdRow(w io.Writer, cells []string) {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "|", "/")
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

func mdHeader(w io.Writer, cells []string) {
	mdRow(w, cells)
	seps := make([]string, len(cells))
	for i := range seps {
		seps[i] = "---"
	}
	mdRow(w, seps)
}

// WriteMarkdown renders report.md: the checks and what moved first, then
// a section per kind of scenario, the plots and every run.
func WriteMarkdown(w io.Writer, res *Results) error {
	m, c := res.Machine, res.Config
	mode := "full"
	if c.Quick {
		mode = "quick"
	}
	fmt.Fprintf(w, "# Vigil benchmark, %s (%s)\n\n", res.Started.UTC().Format("2006-01-02 15:04 UTC"), mode)
	fmt.Fprintf(w, "- Machine: %d CPUs, %s, Linux %s, load average (1/5/15 min) %s at start, %s at end\n",
		m.CPUs, m.CPUModel, m.Kernel, m.LoadStart, m.LoadEnd)
	fmt.Fprintf(w, "- Versions: %s; %s; %s; vigil %s (%s)\n", m.Mariadbd, m.Sysbench, m.HAProxy, m.Vigil, m.GoVersion)
	var names []string
	for _, s := range c.Scenarios {
		names = append(names, s.Name+strings.Join(append([]string{""}, s.Args...), " "))
	}
	var targets []string
	for _, t := range c.Targets {
		targets = append(targets, t.Name)
	}
	fmt.Fprintf(w, "- Scenarios: %s\n", strings.Join(names, ", "))
	kinds := map[Kind]bool{}
	for _, s := range c.Scenarios {
		kinds[s.kind()] = true
	}
	settings := []string{
		fmt.Sprintf("%d reps × %s per case and target (%d reps for the cases the checks read), targets interleaved %s in every rep; %s warm-up per case and target (not counted)",
			c.Reps, c.Duration, c.CheckReps, strings.Join(targets, " → "), c.Warmup),
	}
	if kinds[KindSysbench] {
		settings = append(settings, fmt.Sprintf("sysbench threads %s, %d tables × %d rows, --db-ps-mode=auto (server-side prepared statements)", fmtInts(c.Threads), c.Tables, c.TableSize))
	}
	if kinds[KindManyClients] {
		settings = append(settings, "idle clients "+fmtInts(c.Clients))
	}
	if kinds[KindRules] {
		settings = append(settings, "rules "+fmtInts(append([]int{0}, c.RuleCounts...)))
	}
	if kinds[KindFailover] {
		settings = append(settings, fmt.Sprintf("%d failover and %d switchover runs", c.FailoverRuns, c.FailoverRuns))
	}
	settings = append(settings, "CPU pinning: "+c.Pin.String())
	fmt.Fprintf(w, "- Settings: %s\n", strings.Join(settings, "; "))
	fmt.Fprintf(w, "- Duration: %s (%s to %s)\n\n",
		res.Finished.Sub(res.Started).Round(time.Second), res.Started.Format("15:04:05"), res.Finished.Format("15:04:05"))

	sum := res.Summary
	fmt.Fprintf(w, "## Checks\n\n")
	for _, ch := range sum.Checks {
		mark := "PASS"
		if !ch.Pass {
			mark = "**MISS**"
		}
		fmt.Fprintf(w, "- %s %s (%s)\n", mark, ch.Name, ch.Detail)
	}

	writeMoved(w, res.Comparison)

	var matrix, churn, many, rules []ScenarioSummary
	for _, ss := range sum.Scenarios {
		switch ss.Kind {
		case KindChurn:
			churn = append(churn, ss)
		case KindManyClients:
			many = append(many, ss)
		case KindRules:
			rules = append(rules, ss)
		default:
			matrix = append(matrix, ss)
		}
	}
	if len(matrix) > 0 {
		fmt.Fprintf(w, "\n## sysbench\n\nMedians over the reps; qps min–max shows the spread. Latencies are per sysbench event (one transaction: 1 query for point selects and inserts, 14 for read-only, 18 for read-write), from its histogram. CPU is user+system time of the proxy process (or of all three mariadbd) divided by the queries of the run. SELECTs on replicas is the share of Com_select on the replicas; server stmts/query is Questions on all nodes over the client's queries (1 means the proxy added no statements).\n\n")
		mdHeader(w, matrixHeader())
		for _, ss := range matrix {
			for _, t := range ss.Targets {
				mdRow(w, matrixRow(ss, t))
			}
		}
	}
	writeRatios(w, sum.Scenarios)
	writeCoordination(w, sum.Scenarios, res.Runs)
	if len(churn) > 0 {
		fmt.Fprintf(w, "\n## Connection churn\n\nEvery event opens a connection, runs SELECT 1, reads the row and disconnects (Go client, go-sql-driver/mysql, %d threads). Through Vigil the client's login is answered by Vigil and SELECT 1 runs on a pooled server connection; direct and through HAProxy every event is a new mariadbd connection.\n\n", churn[0].Threads)
		mdHeader(w, []string{"target", "connections/s", "min–max", "p50 ms", "p99 ms", "errors", "proxy CPU µs/connection", "proxy RSS MiB", "mariadbd CPU µs/connection", "client CPU µs/connection", "server commands/connection"})
		for _, ss := range churn {
			for _, t := range ss.Targets {
				mdRow(w, []string{t.Target, fmtStat(t.QPS, fmtInt), fmtRange(t.QPS, fmtInt), fmtStat(t.P50Ms, fmt2), fmtStat(t.P99Ms, fmt2),
					errCell(t), fmtStat(t.ProxyCPUUsPerQuery, fmt1), fmtStat(t.ProxyRSSMiB, fmt1), fmtStat(t.ServerCPUUsPerQuery, fmt1),
					fmtStat(t.ClientCPUUsPerQuery, fmt1), fmtStat(t.ServerStatementsPerQuery, fmt2)})
			}
		}
	}
	if len(many) > 0 {
		base := ""
		if c.BaselineServerConnections != nil {
			base = fmt.Sprintf(" Before any run the nodes had %d connections together (replication, Vigil's monitor and pools, the bench's own).", *c.BaselineServerConnections)
		}
		fmt.Fprintf(w, "\n## Many clients\n\nIdle connections are opened first (not timed), then %d workers run point selects (SELECT c FROM sbtestN WHERE id=?, text protocol) next to them. Server connections, halfway through the run, are what Vigil's pools hold (admin API) and, direct and through HAProxy, the growth of Threads_connected summed over the three nodes since before the idle clients connected.%s\n\n", many[0].Threads, base)
		mdHeader(w, []string{"idle clients", "target", "qps", "p50 ms", "p99 ms", "errors", "open s", "proxy RSS MiB", "server connections", "proxy CPU µs/query"})
		for _, ss := range many {
			for _, t := range ss.Targets {
				prefix := []string{strconv.Itoa(ss.Idle), t.Target}
				if t.Skipped != "" && t.Runs == 0 {
					mdRow(w, skippedRow(prefix, t, 10))
					continue
				}
				mdRow(w, append(prefix, fmtStat(t.QPS, fmtInt), fmtStat(t.P50Ms, fmt2), fmtStat(t.P99Ms, fmt2), errCell(t),
					fmtStat(t.OpenSeconds, fmt1), fmtStat(t.ProxyRSSMiB, fmt1), fmtStat(t.ServerConnections, fmtInt), fmtStat(t.ProxyCPUUsPerQuery, fmt1)))
			}
		}
	}
	if len(rules) > 0 {
		fmt.Fprintf(w, "\n## Rules scaling\n\noltp_point_select, %d threads, through Vigils that differ only in their query rules (none of which matches a sysbench statement, so each is evaluated for every statement).\n\n", rules[0].Threads)
		mdHeader(w, []string{"rules", "target", "qps", "qps min–max", "p99 ms", "errors", "proxy CPU µs/query", "qps vs 0 rules", "CPU vs 0 rules"})
		for _, ss := range rules {
			for _, t := range ss.Targets {
				n, _ := RuleCountOf(t.Target)
				q, cpu := "1.00", "1.00"
				if n != 0 {
					q, cpu = na, na
					if v, ok := ss.Ratio("qps", t.Target, RulesTarget(0)); ok {
						q = fmt2(v)
					}
					if v, ok := ss.Ratio("proxy_cpu_us_per_query", t.Target, RulesTarget(0)); ok {
						cpu = fmt2(v)
					}
				}
				mdRow(w, []string{strconv.Itoa(n), t.Target, fmtStat(t.QPS, fmtInt), fmtRange(t.QPS, fmtInt), fmtStat(t.P99Ms, fmt2), errCell(t),
					fmtStat(t.ProxyCPUUsPerQuery, fmt1), q, cpu})
			}
		}
	}
	writeFailover(w, sum.Failover, res.Failover)
	if len(res.Plots) > 0 {
		fmt.Fprintf(w, "\n## Plots\n\n")
		for _, p := range res.Plots {
			fmt.Fprintf(w, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
		}
	}
	if len(res.Notes) > 0 {
		fmt.Fprintf(w, "\n## Notes\n\n")
		for _, n := range res.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	writeRuns(w, res.Runs)
	return nil
}

// writeRatios is the table of ratios, one column per ratio that occurs.
func writeRatios(w io.Writer, cases []ScenarioSummary) {
	var cols []string
	seen := map[string]bool{}
	for _, ss := range cases {
		if ss.Kind == KindRules {
			continue
		}
		for _, r := range ss.Ratios {
			if !seen[r.Name()] {
				seen[r.Name()] = true
				cols = append(cols, r.Name())
			}
		}
	}
	if len(cols) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Ratios\n\nMedian over median; qps above 1 means the first is faster, CPU below 1 means the first is cheaper.\n\n")
	mdHeader(w, append([]string{"case"}, cols...))
	for _, ss := range cases {
		if ss.Kind == KindRules || len(ss.Ratios) == 0 {
			continue
		}
		row := []string{ss.Label()}
		for _, col := range cols {
			v := ""
			for _, r := range ss.Ratios {
				if r.Name() == col {
					v = fmtRatio(r.Value)
				}
			}
			row = append(row, v)
		}
		mdRow(w, row)
	}
}

// writeMoved is the comparison with the previous bench: every number
// that moved by more than the threshold.
func writeMoved(w io.Writer, c *Comparison) {
	fmt.Fprintf(w, "\n## What moved\n\n")
	if c == nil {
		fmt.Fprintf(w, "No previous results.json to compare with.\n")
		return
	}
	mode := "full"
	if c.PreviousQuick {
		mode = "quick"
	}
	moved := c.Moved()
	fmt.Fprintf(w, "Against `%s` (%s, %s): %d of %d medians moved by more than %.0f%%; ⚠ marks a move for the worse. Timings on a shared machine move with its load: a ratio (vigil/haproxy) that moved says more than a qps that moved.\n\n",
		c.Previous, mode, c.PreviousStarted.UTC().Format("2006-01-02 15:04 UTC"), len(moved), len(c.Moves), c.Threshold*100)
	if len(moved) == 0 {
		return
	}
	mdHeader(w, []string{"case", "target", "metric", "previous", "now", "change"})
	for _, m := range moved {
		mdRow(w, []string{m.Label, m.Target, m.Metric, fmtNum(m.Prev), fmtNum(m.Now), fmt.Sprintf("%s%+.0f%%", worseMark(m), m.Change*100)})
	}
}

func writeFailover(w io.Writer, f *FailoverSummary, runs []FailoverRun) {
	if f == nil {
		return
	}
	fmt.Fprintf(w, "\n## Failover timing\n\nA semi-synchronous 3-node sandbox of its own with its own Vigil (failover.min_interval 1s), %d writers inserting through Vigil without pause. Kill: `kill -9` of the primary, then the time to the first write acknowledged after the last failed one. Switchover: `POST /api/v1/switchover` under the same writers; the pause is the longest gap between acknowledged writes while the request ran, next to the time Vigil says it held writes. After each kill the old primary is restarted, rejoined (`POST /api/v1/rejoin/NODE`) and the failover acknowledged.\n\n", failoverWriters)
	mdHeader(w, []string{"measure", "median", "min", "max", "runs", "target"})
	row := func(name string, s *Stat, runs, failed int, target string) {
		if s == nil {
			mdRow(w, []string{name, na, na, na, fmt.Sprintf("%d (%d failed)", runs, failed), target})
			return
		}
		r := strconv.Itoa(s.N)
		if failed > 0 {
			r += fmt.Sprintf(" (+%d failed)", failed)
		}
		mdRow(w, []string{name, fmtSeconds(s.Median), fmtSeconds(s.Min), fmtSeconds(s.Max), r, target})
	}
	row("kill -9 → first acknowledged write", f.Kill, f.KillRuns, f.KillFailed, fmt.Sprintf("≤ %g s", FailoverTargetSeconds))
	row("switchover write pause (writers)", f.Switchover, f.SwitchoverRuns, f.SwitchoverFailed, fmt.Sprintf("≤ %g s", SwitchoverTargetSeconds))
	row("switchover hold (Vigil's account)", f.VigilHold, f.SwitchoverRuns, 0, "")
	fmt.Fprintln(w)
	mdHeader(w, []string{"run", "kind", "primary", "time", "writes", "failed writes", "Vigil's hold", "error"})
	for _, r := range runs {
		t := na
		if r.Seconds != nil {
			t = fmtSeconds(*r.Seconds)
		}
		hold := ""
		if r.VigilPauseMs != nil {
			hold = fmt.Sprintf("%.0f ms", *r.VigilPauseMs)
		}
		mdRow(w, []string{strconv.Itoa(r.Run), r.Kind, r.Old + " → " + r.New, t, strconv.Itoa(r.Writes), strconv.Itoa(r.Errors), hold, r.Error})
	}
}

func writeRuns(w io.Writer, runs []Measurement) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## All runs\n\nIn the order they ran.\n\n")
	mdHeader(w, []string{"#", "case", "rep", "target", "qps", "p50 ms", "p95 ms", "p99 ms", "errors", "proxy CPU µs/query", "proxy RSS MiB", "mariadbd CPU µs/query", "client CPU µs/query", "SELECTs on replicas", "server stmts/query"})
	for _, r := range runs {
		label := CaseLabel(r.Scenario, r.Threads, r.Idle)
		if r.Skipped != "" {
			mdRow(w, []string{fmt.Sprint(r.Seq), label, fmt.Sprint(r.Rep), r.Target, "not run: " + r.Skipped, "", "", "", "", "", "", "", "", "", ""})
			continue
		}
		errs := fmt.Sprintf("%d", r.Sysbench.Errors())
		if r.Failed() {
			errs += " FAILED"
			if r.Error != "" {
				errs += ": " + r.Error
			}
		}
		p50, p95, p99 := na, na, na
		if r.Sysbench.Complete {
			p95 = fmt2(r.Sysbench.P95())
			if r.Sysbench.P50Ms > 0 {
				p50 = fmt2(r.Sysbench.P50Ms)
			}
			if r.Sysbench.P99Ms > 0 {
				p99 = fmt2(r.Sysbench.P99Ms)
			}
		}
		mdRow(w, []string{
			fmt.Sprint(r.Seq), label, fmt.Sprint(r.Rep), r.Target,
			fmtInt(r.Sysbench.QPS), p50, p95, p99, errs,
			fmtOpt(r.ProxyCPUUsPerQuery, fmt1), fmtOptKiB(r.ProxyRSSKiB),
			fmtOpt(r.ServerCPUUsPerQuery, fmt1), fmtOpt(r.ClientCPUUsPerQuery, fmt1),
			fmtOpt(r.ReplicaSelectShare, fmtPct), fmtOpt(r.ServerStatementsPerQuery, fmt2),
		})
	}
}

func fmtOpt(v *float64, f func(float64) string) string {
	if v == nil {
		return na
	}
	return f(*v)
}

func fmtOptKiB(v *int64) string {
	if v == nil {
		return na
	}
	return fmt1(float64(*v) / 1024)
}

// WriteJSON writes results.json.
func WriteJSON(w io.Writer, res *Results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
