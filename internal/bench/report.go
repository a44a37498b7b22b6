package bench

import (
	"encoding/json"
	"fmt"
	"io"
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

func passWord(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}

// resultRow is one line of the results table, shared by the text and
// Markdown renderings so they cannot disagree.
func resultRow(scenario string, t TargetSummary) []string {
	errs := fmt.Sprintf("%d", t.Errors)
	if t.FailedRuns > 0 {
		errs += fmt.Sprintf(" (%d/%d runs failed)", t.FailedRuns, t.Runs)
	}
	return []string{
		scenario,
		t.Target,
		fmtStat(t.QPS, fmtInt),
		fmtRange(t.QPS, fmtInt),
		fmtStat(t.P95Ms, fmt2),
		errs,
		fmtStat(t.ProxyCPUUsPerQuery, fmt1),
		fmtStat(t.ProxyRSSMiB, fmt1),
		fmtStat(t.ServerCPUUsPerQuery, fmt1),
		fmtStat(t.ReplicaSelectShare, fmtPct),
		fmtStat(t.ServerStatementsPerQuery, fmt2),
	}
}

func resultHeader() []string {
	return []string{
		"scenario", "target", "qps (median)", "qps min–max", "p95 ms", "errors",
		"proxy CPU µs/query", "proxy RSS MiB", "mariadbd CPU µs/query", "SELECTs on replicas", "server stmts/query",
	}
}

// WriteText prints the summary for a terminal.
func WriteText(w io.Writer, res *Results) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(resultHeader(), "\t"))
	for _, ss := range res.Summary.Scenarios {
		name := ss.Scenario
		for _, t := range ss.Targets {
			fmt.Fprintln(tw, strings.Join(resultRow(name, t), "\t"))
			name = ""
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, ss := range res.Summary.Scenarios {
		var parts []string
		for _, r := range ss.Ratios {
			parts = append(parts, r.Name()+" "+fmtRatio(r.Value))
		}
		fmt.Fprintf(w, "%s: %s\n", ss.Scenario, strings.Join(parts, "  "))
	}
	fmt.Fprintln(w)
	for _, c := range res.Summary.Checks {
		fmt.Fprintf(w, "%s  %s (%s)\n", passWord(c.Pass), c.Name, c.Detail)
	}
	return nil
}

func mdRow(w io.Writer, cells []string) {
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

// WriteMarkdown renders report.md.
func WriteMarkdown(w io.Writer, res *Results) error {
	m, c := res.Machine, res.Config
	fmt.Fprintf(w, "# Vigil benchmark, %s\n\n", res.Started.UTC().Format("2006-01-02 15:04 UTC"))
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
	fmt.Fprintf(w, "- Run: %s; %d threads; %d reps × %s per target, targets interleaved %s in every rep, %s warm-up per scenario and target (not counted); %d tables × %d rows; sysbench --db-ps-mode=auto (server-side prepared statements)\n",
		strings.Join(names, ", "), c.Threads, c.Reps, c.Duration, strings.Join(targets, " → "), c.Warmup, c.Tables, c.TableSize)
	fmt.Fprintf(w, "- Duration: %s (%s to %s)\n\n",
		res.Finished.Sub(res.Started).Round(time.Second), res.Started.Format("15:04:05"), res.Finished.Format("15:04:05"))

	fmt.Fprintf(w, "## Results\n\nMedians over the reps; qps min–max shows the spread. CPU is user+system time of the proxy process (or of all three mariadbd) divided by the queries of the run. SELECTs on replicas is the share of Com_select on the replicas; server stmts/query is Questions on all nodes over the client's queries (1 means the proxy added no statements).\n\n")
	mdHeader(w, resultHeader())
	for _, ss := range res.Summary.Scenarios {
		for _, t := range ss.Targets {
			mdRow(w, resultRow(ss.Scenario, t))
		}
	}

	fmt.Fprintf(w, "\n## Ratios\n\nMedian over median; qps above 1 means the first is faster, CPU below 1 means the first is cheaper.\n\n")
	var cols []string
	if len(res.Summary.Scenarios) > 0 {
		for _, r := range res.Summary.Scenarios[0].Ratios {
			cols = append(cols, r.Name())
		}
	}
	mdHeader(w, append([]string{"scenario"}, cols...))
	for _, ss := range res.Summary.Scenarios {
		row := []string{ss.Scenario}
		for _, col := range cols {
			v := na
			for _, r := range ss.Ratios {
				if r.Name() == col {
					v = fmtRatio(r.Value)
				}
			}
			row = append(row, v)
		}
		mdRow(w, row)
	}

	fmt.Fprintf(w, "\n## Checks\n\n")
	for _, ch := range res.Summary.Checks {
		mark := "PASS"
		if !ch.Pass {
			mark = "**MISS**"
		}
		fmt.Fprintf(w, "- %s %s (%s)\n", mark, ch.Name, ch.Detail)
	}

	if len(res.Notes) > 0 {
		fmt.Fprintf(w, "\n## Notes\n\n")
		for _, n := range res.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}

	fmt.Fprintf(w, "\n## All runs\n\nIn the order they ran.\n\n")
	mdHeader(w, []string{"#", "scenario", "rep", "target", "qps", "p95 ms", "errors", "proxy CPU µs/query", "proxy RSS MiB", "mariadbd CPU µs/query", "sysbench CPU µs/query", "SELECTs on replicas", "server stmts/query"})
	for _, r := range res.Runs {
		errs := fmt.Sprintf("%d", r.Sysbench.Errors())
		if r.Failed() {
			errs += " FAILED"
			if r.Error != "" {
				errs += ": " + strings.ReplaceAll(r.Error, "|", "/")
			}
		}
		p95 := na
		if r.Sysbench.Complete {
			p95 = fmt2(r.Sysbench.PercentileMs)
		}
		mdRow(w, []string{
			fmt.Sprint(r.Seq), r.Scenario, fmt.Sprint(r.Rep), r.Target,
			fmtInt(r.Sysbench.QPS), p95, errs,
			fmtOpt(r.ProxyCPUUsPerQuery, fmt1), fmtOptKiB(r.ProxyRSSKiB),
			fmtOpt(r.ServerCPUUsPerQuery, fmt1), fmtOpt(r.ClientCPUUsPerQuery, fmt1),
			fmtOpt(r.ReplicaSelectShare, fmtPct), fmtOpt(r.ServerStatementsPerQuery, fmt2),
		})
	}
	return nil
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
