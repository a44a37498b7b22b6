package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The plots are PNGs drawn with gonum/plot from the summary: one per
// sysbench workload for qps and for latency against threads, CPU per
// query of the proxies, connection churn, many clients, rules scaling and
// the failover timelines. Colours stay with a target in every plot.

var (
	colorDirect  = color.RGBA{R: 0x88, G: 0x88, B: 0x88, A: 0xff}
	colorVigil   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorHAProxy = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colorOthers  = []color.Color{
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
		color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	}
)

// palette gives every target its colour, the same in every plot.
type palette map[string]color.Color

func newPalette(targets []string) palette {
	p := palette{TargetDirect: colorDirect, TargetVigil: colorVigil, TargetHAProxy: colorHAProxy}
	i := 0
	for _, t := range targets {
		if _, ok := p[t]; !ok {
			p[t] = colorOthers[i%len(colorOthers)]
			i++
		}
	}
	return p
}

// WritePlots writes every plot the results allow into dir and returns
// their file names; a plot that fails is reported in the error and the
// others are still written.
func WritePlots(dir string, res *Results) ([]string, error) {
	sum := res.Summary
	var targets []string
	seen := map[string]bool{}
	for _, ss := range sum.Scenarios {
		for _, t := range ss.Targets {
			if !seen[t.Target] {
				seen[t.Target] = true
				targets = append(targets, t.Target)
			}
		}
	}
	pal := newPalette(targets)
	var files []string
	var errs []error
	save := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		files = append(files, name)
	}
	for _, w := range sysbenchWorkloads(sum) {
		name := "qps-" + w + ".png"
		save(name, plotThreads(filepath.Join(dir, name), sum, w, pal, false))
		name = "latency-" + w + ".png"
		save(name, plotThreads(filepath.Join(dir, name), sum, w, pal, true))
	}
	if hasCPU(sum) {
		save("cpu.png", plotCPU(filepath.Join(dir, "cpu.png"), sum, pal))
	}
	for _, ss := range sum.Scenarios {
		if ss.Kind == KindChurn {
			save("churn.png", plotSingleCase(filepath.Join(dir, "churn.png"), ss, pal, "connections/s"))
			break
		}
	}
	if many := casesOfKind(sum, KindManyClients); len(many) > 0 {
		save("many-clients.png", plotManyClients(filepath.Join(dir, "many-clients.png"), many, pal))
	}
	for _, ss := range sum.Scenarios {
		if ss.Kind == KindRules {
			save("rules.png", plotRules(filepath.Join(dir, "rules.png"), ss))
			break
		}
	}
	for _, kind := range []string{FailoverKill, FailoverSwitchover} {
		var runs []FailoverRun
		for _, r := range res.Failover {
			if r.Kind == kind && len(r.Timeline) > 0 {
				runs = append(runs, r)
			}
		}
		if len(runs) > 0 {
			name := "failover.png"
			if kind == FailoverSwitchover {
				name = "switchover.png"
			}
			save(name, plotTimeline(filepath.Join(dir, name), runs, kind))
		}
	}
	return files, errors.Join(errs...)
}

// sysbenchWorkloads are the sysbench scenarios of the summary, in order.
func sysbenchWorkloads(sum Summary) []string {
	var out []string
	seen := map[string]bool{}
	for _, ss := range sum.Scenarios {
		if ss.Kind == KindSysbench && !seen[ss.Scenario] {
			seen[ss.Scenario] = true
			out = append(out, ss.Scenario)
		}
	}
	return out
}

func casesOfKind(sum Summary, k Kind) []ScenarioSummary {
	var out []ScenarioSummary
	for _, ss := range sum.Scenarios {
		if ss.Kind == k {
			out = append(out, ss)
		}
	}
	return out
}

// hasCPU reports a proxy CPU to draw in cpu.png (rules scaling has its
// own plot).
func hasCPU(sum Summary) bool {
	for _, ss := range sum.Scenarios {
		if ss.Kind == KindRules {
			continue
		}
		for _, t := range ss.Targets {
			if t.ProxyCPUUsPerQuery != nil {
				return true
			}
		}
	}
	return false
}

// plotThreads draws qps (or the p95 and p99 latencies) of one workload
// against the thread count, one line per target.
func plotThreads(path string, sum Summary, workload string, pal palette, latency bool) error {
	var cases []ScenarioSummary
	for _, ss := range sum.Scenarios {
		if ss.Scenario == workload && ss.Kind == KindSysbench {
			cases = append(cases, ss)
		}
	}
	if len(cases) == 0 {
		return errors.New("no case")
	}
	if len(cases) == 1 {
		return barsOneCase(path, cases[0], pal, latency)
	}
	p := plot.New()
	var labels []string
	for _, c := range cases {
		labels = append(labels, strconv.Itoa(c.Threads))
	}
	p.X.Label.Text = "client threads"
	p.Y.Min = 0
	p.Y.Tick.Marker = readableTicks{}
	if latency {
		p.Title.Text = workload + ": latency per event, p99 (solid) and p95 (dashed)"
		p.Y.Label.Text = "ms"
		if lo, hi := latencyRange(cases); lo > 0 && hi/lo > 20 {
			// Latencies span decades from 8 to 128 threads.
			p.Y.Label.Text = "ms (log scale)"
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = readableTicks{log: true}
			p.Y.Min = lo / 1.5
		}
	} else {
		p.Title.Text = workload + ": queries per second (median over reps)"
		p.Y.Label.Text = "qps"
		p.Y.Min = 0
	}
	var targets []string
	seen := map[string]bool{}
	for _, c := range cases {
		for _, t := range c.Targets {
			if !seen[t.Target] {
				seen[t.Target] = true
				targets = append(targets, t.Target)
			}
		}
	}
	drew := false
	for _, tg := range targets {
		series := []struct {
			pick   func(TargetSummary) *Stat
			dashed bool
			name   string
		}{{func(t TargetSummary) *Stat { return t.QPS }, false, tg}}
		if latency {
			series = series[:0]
			series = append(series,
				struct {
					pick   func(TargetSummary) *Stat
					dashed bool
					name   string
				}{func(t TargetSummary) *Stat { return t.P99Ms }, false, tg + " p99"},
				struct {
					pick   func(TargetSummary) *Stat
					dashed bool
					name   string
				}{func(t TargetSummary) *Stat { return t.P95Ms }, true, ""})
		}
		for _, s := range series {
			var xys plotter.XYs
			for i, c := range cases {
				t, ok := c.Target(tg)
				if !ok {
					continue
				}
				st := s.pick(t)
				if st == nil {
					continue
				}
				xys = append(xys, plotter.XY{X: float64(i), Y: st.Median})
			}
			if len(xys) == 0 {
				continue
			}
			l, sc, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			l.Color, sc.Color = pal[tg], pal[tg]
			l.Width = vg.Points(1.5)
			if s.dashed {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				sc.GlyphStyle.Shape = draw.TriangleGlyph{}
			}
			p.Add(l, sc)
			if s.name != "" {
				p.Legend.Add(s.name, l, sc)
			}
			drew = true
		}
	}
	if !drew {
		return errors.New("nothing to draw")
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.3, float64(len(labels)-1)+0.3
	p.Legend.Top, p.Legend.Left = true, true
	if _, log := p.Y.Scale.(plot.LogScale); log {
		p.Y.Max *= 4 // room for the legend
	} else {
		p.Y.Max *= 1.3
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

// latencyRange is the smallest and largest p95/p99 of the cases.
func latencyRange(cases []ScenarioSummary) (lo, hi float64) {
	for _, c := range cases {
		for _, t := range c.Targets {
			for _, st := range []*Stat{t.P95Ms, t.P99Ms} {
				if st == nil || st.Median <= 0 {
					continue
				}
				if lo == 0 || st.Median < lo {
					lo = st.Median
				}
				hi = math.Max(hi, st.Median)
			}
		}
	}
	return lo, hi
}

// readableTicks are gonum's ticks labelled like the tables ("25000",
// "0.5"), on a log scale at 1, 2 and 5 of every decade.
type readableTicks struct{ log bool }

func (r readableTicks) Ticks(lo, hi float64) []plot.Tick {
	if !r.log {
		ticks := plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = fmtTick(ticks[i].Value)
			}
		}
		return ticks
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v, Label: fmtTick(v)})
			}
		}
	}
	return ticks
}

func fmtTick(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// barsOneCase draws a workload run at a single thread count: qps per
// target, or its p50, p95 and p99.
func barsOneCase(path string, ss ScenarioSummary, pal palette, latency bool) error {
	order := targetOrder([]ScenarioSummary{ss})
	var groups []barGroup
	var title, ylabel string
	if latency {
		title, ylabel = fmt.Sprintf("%s, %d threads: latency per event", ss.Scenario, ss.Threads), "ms"
		for _, q := range []struct {
			name string
			pick func(TargetSummary) *Stat
		}{
			{"p50", func(t TargetSummary) *Stat { return t.P50Ms }},
			{"p95", func(t TargetSummary) *Stat { return t.P95Ms }},
			{"p99", func(t TargetSummary) *Stat { return t.P99Ms }},
		} {
			g := barGroup{label: q.name, values: map[string]float64{}}
			for _, t := range ss.Targets {
				if st := q.pick(t); st != nil {
					g.values[t.Target] = st.Median
				}
			}
			groups = append(groups, g)
		}
	} else {
		title, ylabel = fmt.Sprintf("%s, %d threads: queries per second (median)", ss.Scenario, ss.Threads), "qps"
		g := barGroup{label: fmt.Sprintf("%d threads", ss.Threads), values: map[string]float64{}}
		for _, t := range ss.Targets {
			if t.QPS != nil {
				g.values[t.Target] = t.QPS.Median
			}
		}
		groups = append(groups, g)
	}
	p, err := bars(title, ylabel, groups, seriesOf(groups, order), pal)
	if err != nil {
		return err
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

// barGroup is one group of bars: a label and a value per series.
type barGroup struct {
	label  string
	values map[string]float64
}

// bars draws grouped bars: one group per label, one bar per series.
func bars(title, ylabel string, groups []barGroup, series []string, pal palette) (*plot.Plot, error) {
	if len(groups) == 0 || len(series) == 0 {
		return nil, errors.New("nothing to draw")
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Y.Tick.Marker = readableTicks{}
	width := vg.Points(math.Min(28, 140/float64(len(series))))
	top := 0.0
	var names []string
	for _, g := range groups {
		names = append(names, g.label)
	}
	for i, s := range series {
		vals := make(plotter.Values, len(groups))
		for j, g := range groups {
			vals[j] = g.values[s]
			top = math.Max(top, vals[j])
		}
		b, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Width = 0
		b.Color = pal[s]
		b.Offset = vg.Length(float64(i)-float64(len(series)-1)/2) * width
		p.Add(b)
		p.Legend.Add(s, b)
		// The value above each bar: small bars next to tall ones stay
		// readable.
		var xyl plotter.XYLabels
		for j, g := range groups {
			v, ok := g.values[s]
			if !ok {
				continue
			}
			xyl.XYs = append(xyl.XYs, plotter.XY{X: float64(j), Y: v})
			xyl.Labels = append(xyl.Labels, fmtNum(v))
		}
		if len(xyl.XYs) > 0 {
			l, err := plotter.NewLabels(xyl)
			if err != nil {
				return nil, err
			}
			for k := range l.TextStyle {
				l.TextStyle[k].Font.Size = vg.Points(7)
				l.TextStyle[k].XAlign = draw.XCenter
			}
			l.Offset = vg.Point{X: b.Offset, Y: vg.Points(2)}
			p.Add(l)
		}
	}
	p.Legend.Top = true
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.55, float64(len(names)-1)+0.55
	if top > 0 {
		p.Y.Max = top * 1.35
	}
	return p, nil
}

// seriesOf are the targets that have a value in some group, in palette
// order (direct, vigil, haproxy, then the others as they appear).
func seriesOf(groups []barGroup, order []string) []string {
	var out []string
	for _, s := range order {
		for _, g := range groups {
			if _, ok := g.values[s]; ok {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func targetOrder(cases []ScenarioSummary) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cases {
		for _, t := range c.Targets {
			if !seen[t.Target] {
				seen[t.Target] = true
				out = append(out, t.Target)
			}
		}
	}
	return out
}

// shortLabel is a case in a few characters for an axis: "point_select 32".
func shortLabel(ss ScenarioSummary) string {
	name := ss.Scenario
	for _, pre := range []string{"oltp_"} {
		if len(name) > len(pre) && name[:len(pre)] == pre {
			name = name[len(pre):]
		}
	}
	switch {
	case ss.Idle > 0:
		return fmt.Sprintf("%s %dk", "clients", ss.Idle/1000)
	case ss.Kind == KindChurn:
		return "churn"
	case ss.Kind == KindRules:
		return "rules"
	}
	return fmt.Sprintf("%s %d", name, ss.Threads)
}

// plotCPU draws the proxies' CPU per query in every case where it was
// measured.
func plotCPU(path string, sum Summary, pal palette) error {
	var groups []barGroup
	var cases []ScenarioSummary
	for _, ss := range sum.Scenarios {
		if ss.Kind == KindRules {
			continue // rules.png
		}
		g := barGroup{label: shortLabel(ss), values: map[string]float64{}}
		for _, t := range ss.Targets {
			if t.ProxyCPUUsPerQuery != nil && (isBaseTarget(t.Target) || t.Target == TargetVigilRules || t.Target == TargetVigilEtcd) {
				g.values[t.Target] = t.ProxyCPUUsPerQuery.Median
			}
		}
		if len(g.values) > 0 {
			groups = append(groups, g)
			cases = append(cases, ss)
		}
	}
	p, err := bars("proxy CPU per query (user+system, median)", "µs per query (churn: per connection)", groups, seriesOf(groups, targetOrder(cases)), pal)
	if err != nil {
		return err
	}
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YTop
	w := vg.Length(math.Max(6, 1.5+0.75*float64(len(groups)))) * vg.Inch
	return p.Save(w, 4.5*vg.Inch, path)
}

// plotSingleCase draws qps and p99 of every target of one case.
func plotSingleCase(path string, ss ScenarioSummary, pal palette, ylabel string) error {
	order := targetOrder([]ScenarioSummary{ss})
	q := barGroup{label: ss.Label(), values: map[string]float64{}}
	l := barGroup{label: ss.Label(), values: map[string]float64{}}
	for _, t := range ss.Targets {
		if t.QPS != nil {
			q.values[t.Target] = t.QPS.Median
		}
		if t.P99Ms != nil {
			l.values[t.Target] = t.P99Ms.Median
		}
	}
	p1, err := bars(ss.Scenario+": connect, SELECT 1, disconnect per second (median)", ylabel, []barGroup{q}, seriesOf([]barGroup{q}, order), pal)
	if err != nil {
		return err
	}
	p2, err := bars(ss.Scenario+": p99 latency of an event", "ms", []barGroup{l}, seriesOf([]barGroup{l}, order), pal)
	if err != nil {
		return err
	}
	return saveStack(path, 5*vg.Inch, 6.5*vg.Inch, p1, p2)
}

// plotManyClients draws qps, p99 and server connections per target for
// each number of idle clients.
func plotManyClients(path string, cases []ScenarioSummary, pal palette) error {
	order := targetOrder(cases)
	var q, l, c []barGroup
	for _, ss := range cases {
		label := fmt.Sprintf("%d idle", ss.Idle)
		gq := barGroup{label: label, values: map[string]float64{}}
		gl := barGroup{label: label, values: map[string]float64{}}
		gc := barGroup{label: label, values: map[string]float64{}}
		for _, t := range ss.Targets {
			if t.QPS != nil {
				gq.values[t.Target] = t.QPS.Median
			}
			if t.P99Ms != nil {
				gl.values[t.Target] = t.P99Ms.Median
			}
			if t.ServerConnections != nil {
				gc.values[t.Target] = t.ServerConnections.Median
			}
		}
		q, l, c = append(q, gq), append(l, gl), append(c, gc)
	}
	var plots []*plot.Plot
	for _, x := range []struct {
		title, ylabel string
		g             []barGroup
	}{
		{"many clients: qps of the 32 active workers", "qps", q},
		{"many clients: p99 latency of a point select", "ms", l},
		{"many clients: server connections used (Vigil: its pools)", "connections", c},
	} {
		p, err := bars(x.title, x.ylabel, x.g, seriesOf(x.g, order), pal)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return saveStack(path, 6*vg.Inch, 9*vg.Inch, plots...)
}

// plotRules draws qps and CPU per query against the number of rules.
func plotRules(path string, ss ScenarioSummary) error {
	var q, c []barGroup
	for _, t := range ss.Targets {
		n, ok := RuleCountOf(t.Target)
		if !ok || t.QPS == nil {
			continue
		}
		label := fmt.Sprintf("%d rules", n)
		gq := barGroup{label: label, values: map[string]float64{TargetVigil: t.QPS.Median}}
		gc := barGroup{label: label, values: map[string]float64{}}
		if t.ProxyCPUUsPerQuery != nil {
			gc.values[TargetVigil] = t.ProxyCPUUsPerQuery.Median
		}
		q, c = append(q, gq), append(c, gc)
	}
	pal := newPalette(nil)
	p1, err := bars(fmt.Sprintf("rules scaling: %s qps through Vigil (median)", CaseLabel("oltp_point_select", ss.Threads, 0)), "qps", q, []string{TargetVigil}, pal)
	if err != nil {
		return err
	}
	p2, err := bars("rules scaling: Vigil CPU per query (median)", "µs per query", c, []string{TargetVigil}, pal)
	if err != nil {
		return err
	}
	return saveStack(path, 5*vg.Inch, 6.5*vg.Inch, p1, p2)
}

// plotTimeline draws acknowledged writes per 100 ms around each kill (or
// switchover), one line per run, the event at 0.
func plotTimeline(path string, runs []FailoverRun, kind string) error {
	p := plot.New()
	if kind == FailoverKill {
		p.Title.Text = "failover: acknowledged writes per 100 ms around kill -9 of the primary"
		p.X.Label.Text = "seconds from kill -9"
	} else {
		p.Title.Text = "switchover: acknowledged writes per 100 ms around the request"
		p.X.Label.Text = "seconds from the switchover request"
	}
	p.Y.Label.Text = "writes acknowledged per 100 ms"
	p.Y.Min = 0
	p.Y.Tick.Marker = readableTicks{}
	top := 0.0
	for i, r := range runs {
		var xys plotter.XYs
		for _, pt := range r.Timeline {
			xys = append(xys, plotter.XY{X: float64(pt.Ms) / 1000, Y: float64(pt.Acks)})
			top = math.Max(top, float64(pt.Acks))
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = colorOthers[i%len(colorOthers)]
		if i == 0 {
			l.Color = colorVigil
		}
		l.Width = vg.Points(1.2)
		p.Add(l)
		label := fmt.Sprintf("run %d", r.Run)
		if r.Seconds != nil {
			label += " (" + fmtSeconds(*r.Seconds) + ")"
		}
		p.Legend.Add(label, l)
	}
	mark, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: math.Max(top*1.1, 1)}})
	if err != nil {
		return err
	}
	mark.Color = color.Black
	mark.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(mark)
	if kind == FailoverKill {
		p.Legend.Add("kill -9", mark)
		limit, err := plotter.NewLine(plotter.XYs{{X: FailoverTargetSeconds, Y: 0}, {X: FailoverTargetSeconds, Y: math.Max(top*1.1, 1)}})
		if err != nil {
			return err
		}
		limit.Color = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
		limit.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(limit)
		p.Legend.Add("3 s target", limit)
	} else {
		p.Legend.Add("request", mark)
	}
	p.Legend.Top = true
	p.Y.Max = math.Max(top*1.5, 1)
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}

// saveStack writes plots one above the other into one PNG.
func saveStack(path string, w, h vg.Length, plots ...*plot.Plot) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align(rows, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
