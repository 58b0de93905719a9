package placement

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// SortedCurve is a row's end utilisation per node, hottest first, averaged rank by rank over
// its seeds (rank i is the mean of each seed's i-th hottest node); nodes without data count as 0.
func (row Row) SortedCurve(nodes int) []float64 {
	if len(row.Runs) == 0 || nodes <= 0 {
		return nil
	}
	out := make([]float64, nodes)
	for _, r := range row.Runs {
		u := make([]float64, 0, nodes)
		for _, v := range r.Util {
			u = append(u, v)
		}
		for len(u) < nodes {
			u = append(u, 0)
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(u)))
		for i := range out {
			out[i] += u[i] / float64(len(row.Runs))
		}
	}
	return out
}

// WritePlots writes one PNG per level into dir: each run's nodes sorted by end utilisation (the
// oracles dashed), and the target as a horizontal line. It returns the files written.
func (t *Table) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	byLevel := map[string][]Row{}
	var levels []string
	for _, row := range t.Rows() {
		if _, ok := byLevel[row.Level]; !ok {
			levels = append(levels, row.Level)
		}
		byLevel[row.Level] = append(byLevel[row.Level], row)
	}
	var files []string
	for _, level := range levels {
		file := filepath.Join(dir, "placement-"+fileName(level)+".png")
		if err := t.plotLevel(level, byLevel[level], file); err != nil {
			return files, fmt.Errorf("plot %s: %w", level, err)
		}
		files = append(files, file)
	}
	return files, nil
}

// fileName turns a level ("25 % wl") into a file name part ("25-wl").
func fileName(level string) string {
	f := strings.Fields(strings.ReplaceAll(level, "%", ""))
	return strings.Join(f, "-")
}

func (t *Table) plotLevel(level string, rows []Row, file string) error {
	n := t.Options.Nodes
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Placement, level %s: nodes by end CPU (mean by rank over seeds %v)", level, t.Options.Seeds)
	p.X.Label.Text = "node (hottest first)"
	p.Y.Label.Text = "end CPU utilisation (%)"
	p.Y.Min, p.Y.Max = 0, 100
	p.Legend.Top = true
	for i, row := range rows {
		curve := row.SortedCurve(n)
		xys := make(plotter.XYs, len(curve))
		for j, v := range curve {
			xys[j].X, xys[j].Y = float64(j+1), v
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.LineStyle.Width = vg.Points(1.5)
		l.LineStyle.Color = plotutil.Color(i)
		if strings.HasPrefix(row.Key, "oracle") {
			l.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(row.Name, l)
	}
	target, err := plotter.NewLine(plotter.XYs{{X: 1, Y: t.Options.Target}, {X: float64(max(n, 2)), Y: t.Options.Target}})
	if err != nil {
		return err
	}
	target.LineStyle.Color = plotutil.Color(len(rows) + 1)
	target.LineStyle.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
	p.Add(target)
	p.Legend.Add(fmt.Sprintf("target %.0f %%", t.Options.Target), target)
	return p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}
