package mockprovider

import (
	"fmt"
	"image/color"
	"maps"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// chartBucket is the width of one step of the chart.
const chartBucket = 100 * time.Millisecond

// Chart draws the arrivals as requests per 100 ms over the seconds since the
// first arrival: one step line per lane, one for the total, and the cap
// (capRate/10 per 100 ms) as a dashed horizontal line when capRate > 0.
//
// It uses gonum.org/v1/plot, the maintained Go plotting library: pure Go
// (no cgo, no gnuplot or browser to install), one plot value rendered to
// SVG, PNG or PDF alike, and already a dependency of the module.
func Chart(arrivals []Arrival, capRate float64) (*plot.Plot, error) {
	if len(arrivals) == 0 {
		return nil, fmt.Errorf("mockprovider: chart: %w", ErrNoArrivals)
	}
	total, perLane := buckets(arrivals)
	p := plot.New()
	p.Title.Text = "requests per 100 ms"
	p.X.Label.Text = "seconds since the first arrival"
	p.Y.Label.Text = "requests / 100 ms"
	p.Y.Min = 0
	p.Legend.Top = true
	for i, name := range slices.Sorted(maps.Keys(perLane)) {
		label := name
		if label == "" {
			label = "(no lane)"
		}
		if err := addStep(p, label, perLane[name], plotutil.Color(i), 1); err != nil {
			return nil, err
		}
	}
	if err := addStep(p, "total", total, color.Black, 1.5); err != nil {
		return nil, err
	}
	// Headroom above the highest step or the cap, for the legend.
	p.Y.Max = 1.2 * max(slices.Max(total), capRate/10)
	if capRate > 0 {
		end := float64(len(total)) * chartBucket.Seconds()
		line, err := plotter.NewLine(plotter.XYs{{X: 0, Y: capRate / 10}, {X: end, Y: capRate / 10}})
		if err != nil {
			return nil, fmt.Errorf("mockprovider: chart: %w", err)
		}
		line.Color = color.RGBA{R: 220, A: 255}
		line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("cap %g/s", capRate), line)
	}
	return p, nil
}

// WriteChart draws the arrivals kept (see Chart) into path, in the format
// its extension names: ".svg" or ".png" (".pdf" works too).
func (p *Provider) WriteChart(path string) error {
	return WriteChart(path, p.Arrivals(), p.cfg.Cap)
}

// WriteChart draws arrivals (see Chart) into path, in the format its
// extension names: ".svg" or ".png" (".pdf" works too).
func WriteChart(path string, arrivals []Arrival, capRate float64) error {
	pl, err := Chart(arrivals, capRate)
	if err != nil {
		return err
	}
	if err := pl.Save(12*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("mockprovider: write chart: %w", err)
	}
	return nil
}

// buckets counts arrivals per 100 ms from the first one, in total and per
// lane; every slice has the same length.
func buckets(arrivals []Arrival) (total []float64, perLane map[string][]float64) {
	first, last := arrivals[0].At, arrivals[0].At
	for _, a := range arrivals {
		if a.At.Before(first) {
			first = a.At
		}
		if a.At.After(last) {
			last = a.At
		}
	}
	n := int(last.Sub(first)/chartBucket) + 1
	total, perLane = make([]float64, n), map[string][]float64{}
	for _, a := range arrivals {
		i := int(a.At.Sub(first) / chartBucket)
		if perLane[a.Lane] == nil {
			perLane[a.Lane] = make([]float64, n)
		}
		total[i]++
		perLane[a.Lane][i]++
	}
	return total, perLane
}

// addStep adds counts as a step line: bucket i is flat from i*100ms to
// (i+1)*100ms.
func addStep(p *plot.Plot, label string, counts []float64, c color.Color, width float64) error {
	xys := make(plotter.XYs, len(counts)+1)
	for i, v := range counts {
		xys[i] = plotter.XY{X: float64(i) * chartBucket.Seconds(), Y: v}
	}
	xys[len(counts)] = plotter.XY{X: float64(len(counts)) * chartBucket.Seconds(), Y: counts[len(counts)-1]}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("mockprovider: chart: %w", err)
	}
	line.StepStyle = plotter.PostStep
	line.Color = c
	line.Width = vg.Points(width)
	p.Add(line)
	p.Legend.Add(label, line)
	return nil
}
