package bench

import (
	"errors"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WriteChart draws the median qps of every target in every scenario as a
// grouped bar chart (PNG).
func WriteChart(path string, sum Summary) error {
	if len(sum.Scenarios) == 0 {
		return errors.New("no scenario")
	}
	var targets []string
	seen := map[string]bool{}
	var names []string
	for _, ss := range sum.Scenarios {
		names = append(names, ss.Scenario)
		for _, t := range ss.Targets {
			if !seen[t.Target] {
				seen[t.Target] = true
				targets = append(targets, t.Target)
			}
		}
	}
	colors := []color.Color{
		color.RGBA{R: 0x88, G: 0x88, B: 0x88, A: 0xff}, // direct: grey
		color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // vigil: blue
		color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // haproxy: orange
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	}
	p := plot.New()
	p.Title.Text = "sysbench queries per second (median over reps)"
	p.Y.Label.Text = "qps"
	p.Y.Min = 0
	width := vg.Points(28)
	top := 0.0
	for i, tg := range targets {
		vals := make(plotter.Values, len(sum.Scenarios))
		for j, ss := range sum.Scenarios {
			if t, ok := ss.Target(tg); ok && t.QPS != nil {
				vals[j] = t.QPS.Median
				top = max(top, t.QPS.Median)
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = colors[i%len(colors)]
		bars.Offset = vg.Length(float64(i)-float64(len(targets)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(tg, bars)
	}
	p.Legend.Top = true
	p.NominalX(names...)
	// Room for the outer bars and, above the highest bar, the legend.
	p.X.Min, p.X.Max = -0.55, float64(len(names)-1)+0.55
	p.Y.Max = top * 1.25
	w := vg.Length(2+1.6*float64(len(names))) * vg.Inch
	return p.Save(w, 4*vg.Inch, path)
}
